"""Credible intervals of W: the traced columns (``trace_columns``) and
``BIDResult.w_intervals`` (dask_bid/engine/result.py)."""

import warnings

import numpy as np
import pytest

from dask_bid import ParameterError, bayesian_id, open_result
from dask_bid.interface.cli import main

KW = dict(n_iter=60, burn_in=10, random_state=2, block_size=20, n_threads=1)


def _fit(A, K, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: not what is tested here
        return bayesian_id(A, K, **{**KW, **kw})


@pytest.fixture(scope="module")
def planted():
    """A = [C, C W + noise]: the first two columns are the basis, W known."""
    rng = np.random.default_rng(1)
    C = rng.standard_normal((200, 2))
    W = np.array([[0.6, -0.3, 0.1, 0.99, -0.5, 0.2, 0.8, -0.7],
                  [-0.2, 0.5, -0.6, 0.1, 0.3, -0.9, 0.0, 0.4]])
    return np.c_[C, C @ W + 0.3 * rng.standard_normal((200, W.shape[1]))], W


@pytest.mark.parametrize("where", ["memory", "engine"])
def test_trace_columns_choose_the_traced_columns_and_leave_the_chain_alone(planted, where,
                                                                          tmp_path):
    """The given columns (any order, repeats) are traced instead of the evenly spaced
    ones; the chain is bitwise the same; memory and engine trace the same draws; the
    stored result keeps them."""
    A, _ = planted
    engine = {} if where == "memory" else {"client": "synchronous",
                                           "out": str(tmp_path / "r.zarr")}
    res = _fit(A, 2, trace_columns=[7, 0, 3, 3], **engine)
    np.testing.assert_array_equal(res.draws_w["columns"], [0, 3, 7])
    default = _fit(A, 2)
    np.testing.assert_array_equal(default.draws_w["columns"], np.arange(10))
    for f in res.trace.dtype.names:
        np.testing.assert_array_equal(res.trace[f], default.trace[f])
    np.testing.assert_array_equal(res.draws_columns, default.draws_columns)
    np.testing.assert_array_equal(res.draws_w["values"],
                                  default.draws_w["values"][..., [0, 3, 7]])
    if where == "engine":
        back = open_result(tmp_path / "r.zarr").result_
        np.testing.assert_array_equal(back.draws_w["values"], res.draws_w["values"])
        iv, bv = res.w_intervals(), back.w_intervals()
        np.testing.assert_array_equal(iv.lower, bv.lower)


def test_w_intervals_are_the_quantiles_of_the_draws_with_the_reported_basis():
    """A matrix without structure: the chain visits several bases, and only the draws
    with the reported one count (the others hold no W in that basis)."""
    A = np.random.default_rng(1).standard_normal((30, 8))
    res = _fit(A, 2, trace_columns=[0, 2, 5, 7], n_iter=200, init="random")
    assert 0 < res.n_draws_point < res.draws_sigma2.size
    iv = res.w_intervals(0.8)
    np.testing.assert_array_equal(iv.rows, res.columns)
    outside = [c for c in (0, 2, 5, 7) if c not in res.columns]
    np.testing.assert_array_equal(iv.columns, outside)
    v = res.draws_w["values"]  # chains, draws, K, n_trace
    inside = np.isfinite(v).all(axis=(2, 3))
    pick = [list(res.draws_w["columns"]).index(c) for c in outside]
    d = v[inside][..., pick]
    assert iv.n_draws == len(d) == res.n_draws_point > 0
    np.testing.assert_allclose(iv.lower, np.quantile(d, 0.1, axis=0), rtol=1e-12)
    np.testing.assert_allclose(iv.upper, np.quantile(d, 0.9, axis=0), rtol=1e-12)
    for bad in (0.0, 1.0, 1.5, "0.9"):
        with pytest.raises(ParameterError, match="prob must be a number in"):
            res.w_intervals(bad)


def test_w_intervals_when_every_traced_column_is_in_the_basis():
    """Tracing exactly the reported basis leaves no column outside it: empty intervals
    from the draws with that basis (it raised numpy's reshape error)."""
    A = np.random.default_rng(1).standard_normal((30, 8))
    first = _fit(A, 2, n_iter=200, init="random")
    res = _fit(A, 2, n_iter=200, init="random", trace_columns=list(first.columns))
    np.testing.assert_array_equal(res.columns, first.columns)  # the same chain
    iv = res.w_intervals(0.8)
    assert iv.columns.shape == (0,) and iv.lower.shape == iv.upper.shape == (2, 0)
    # only the draws with the reported basis (the chain visits others)
    assert 0 < iv.n_draws == res.n_draws_point < res.draws_sigma2.size


def test_w_intervals_hold_the_planted_coefficients(planted):
    """With the planted basis and 200 rows, W given the basis is known to about 0.02:
    the 99.9 % intervals hold every planted coefficient (each misses with probability
    1e-3 under a correct posterior), lie within the bounds [-1, 1] (the coefficient
    0.99 sits at the edge), and where the posterior is far from the bounds the 90 %
    interval is the normal one, 2 x 1.645 posterior sd, to 15 % (measured 0.96-1.05 over
    four runs): the quantiles and the
    streamed sd are two views of one posterior."""
    A, W = planted
    res = _fit(A, 2, init=[0, 1], n_iter=700, burn_in=100, trace_columns=range(2, 10),
               refine_sweeps=0, w_estimate="mean", n_chains=2)
    np.testing.assert_array_equal(res.columns, [0, 1])
    wide = res.w_intervals(0.999)
    assert wide.n_draws == 2 * 600
    assert ((wide.lower <= W) & (W <= wide.upper)).all(), (wide.lower, W, wide.upper)
    assert wide.lower.min() >= -1.0 and wide.upper.max() <= 1.0
    iv = res.w_intervals(0.9)
    sd = res.components_sd[:, 2:]
    far = (np.abs(res.components[:, 2:]) + 4 * sd) < 1.0
    ratio = (iv.upper - iv.lower)[far] / (2 * 1.645 * sd[far])
    assert far.sum() >= 12 and ((ratio > 0.85) & (ratio < 1.15)).all(), ratio


def test_the_command_line_traces_the_columns_it_is_given(planted, tmp_path, capsys):
    A, _ = planted
    np.save(tmp_path / "a.npy", A)
    out = tmp_path / "r.zarr"
    base = ["fit", str(tmp_path / "a.npy"), "--k", "2", "--out", str(out), "--n-iter", "30",
            "--burn-in", "5", "--seed", "1"]
    assert main([*base, "--trace-columns", "4,9", "-q"]) == 0
    np.testing.assert_array_equal(open_result(out).result_.draws_w["columns"], [4, 9])
    assert main(["info", str(out)]) == 0
    assert "  traced     [4, 9] (their W draws are kept: " in capsys.readouterr().out
    for value, message in [("4,x", "--trace-columns names columns ('x'), but A's columns "
                                    "have no names"),
                           ("4,10", "--trace-columns must lie in [0, 10), got 10")]:
        capsys.readouterr()
        assert main([*base, "--trace-columns", value, "--overwrite"]) == 2
        assert message in capsys.readouterr().err
    # by name: --column-names' (or a header's)
    names = tmp_path / "names.txt"
    names.write_text("\n".join(f"drug{j}" for j in range(10)) + "\n")
    assert main([*base, "--trace-columns", "drug7,2", "--column-names", str(names),
                 "--overwrite", "-q"]) == 0
    np.testing.assert_array_equal(open_result(out).result_.draws_w["columns"], [2, 7])
    capsys.readouterr()
    assert main([*base, "--trace-columns", "durg7", "--column-names", str(names),
                 "--overwrite"]) == 2
    assert ("--trace-columns: no column is named 'durg7' (did you mean 'drug7'"
            in capsys.readouterr().err)


def test_trace_columns_by_name(planted):
    """Names pick the traced columns where A's columns are named (a DataFrame's,
    feature_names=), mixed with indices; the estimator keeps its parameter as given."""
    import pandas as pd

    from dask_bid import BayesianID

    A, _ = planted
    cols = [f"c{j}" for j in range(A.shape[1])]
    df = pd.DataFrame(A, columns=cols)
    np.testing.assert_array_equal(_fit(df, 2, trace_columns=["c9", 3]).draws_w["columns"],
                                  [3, 9])
    np.testing.assert_array_equal(
        _fit(A, 2, trace_columns=["c4"], feature_names=cols).draws_w["columns"], [4])
    est = BayesianID(2, **KW, trace_columns=["c5"]).fit(df)
    assert est.get_params()["trace_columns"] == ["c5"]
    np.testing.assert_array_equal(est.result_.draws_w["columns"], [5])
    with pytest.raises(ParameterError, match=r"no column is named 'c55' \(did you mean"):
        _fit(df, 2, trace_columns=["c55"])
    with pytest.raises(ParameterError, match="A's columns have no names"):
        _fit(A, 2, trace_columns=["c5"])
    # a name two columns share is refused (it meant the first, without a word)
    twin = df.rename(columns={"c1": "c0"})
    with pytest.raises(ParameterError, match=r"2 columns are named 'c0' \(columns 0, 1\)"):
        _fit(twin, 2, trace_columns=["c0"])
    np.testing.assert_array_equal(_fit(twin, 2, trace_columns=[1]).draws_w["columns"], [1])
    many = df.rename(columns={f"c{j}": "b" for j in range(6)})  # six of them: 5 shown, ...
    with pytest.raises(ParameterError, match=r"6 columns are named 'b' \(columns 0, 1, 2, 3, "
                                             r"4, \.\.\.\)"):
        _fit(many, 2, trace_columns=["b"])


def test_an_interval_of_draws_beyond_float64_is_infinite_not_nan():
    """sigma2 of a matrix near 1e200 is reported as inf (its draws too): its interval
    said "nan to nan", as for a fit without draws."""
    from dask_bid.engine.result import draws_interval

    assert draws_interval(np.full(50, np.inf)) == (np.inf, np.inf)
    assert all(np.isnan(draws_interval(np.array([]))))
    lo, hi = draws_interval(np.r_[np.arange(1.0, 101.0), np.nan])  # NaN left out
    np.testing.assert_allclose((lo, hi), np.quantile(np.arange(1.0, 101.0), [0.05, 0.95]))


def test_sigma2_interval_is_the_posterior_quantiles_and_holds_the_planted_noise(planted,
                                                                              capsys, tmp_path):
    """``sigma2_interval(prob)``: the equal-tailed quantiles of every retained sigma^2
    draw; on the planted model it holds the noise variance the posterior targets (the
    2 x 200 basis entries are fitted exactly and carry no residual: sigma^2 (n - M K) /
    n). The fit's summary shows the 90 % interval for an exact sampler only."""
    from dask_bid.interface.cli._core import fmt_g
    from dask_bid.interface.cli.report import result_lines

    A, _ = planted
    res = _fit(A, 2, n_iter=400, burn_in=100)
    d = res.draws_sigma2.ravel()
    np.testing.assert_array_equal(res.sigma2_interval(0.5), np.quantile(d, [0.25, 0.75]))
    lo, hi = res.sigma2_interval(0.999)
    n = A.size
    target = 0.3**2 * (n - A.shape[0] * 2) / n
    assert lo < target < hi, (lo, target, hi)
    assert hi - lo < 0.3 * target  # about 6.6 posterior sds of sigma^2 sqrt(2 / n) each
    lo9, hi9 = res.sigma2_interval()
    line = next(ln for ln in result_lines(res) if ln.startswith("sigma2 "))
    assert line.endswith(f"(90% credible interval {fmt_g(lo9)} to {fmt_g(hi9)})"), line
    # info reads it from the stored draws (the same chain on the engine: block_size)
    _fit(A, 2, n_iter=400, burn_in=100, client="synchronous", out=str(tmp_path / "r.zarr"))
    assert main(["info", str(tmp_path / "r.zarr")]) == 0
    assert f"(90% credible interval {fmt_g(lo9)} to {fmt_g(hi9)})" in capsys.readouterr().out
    # chains that failed the convergence check: the same quantiles, not called credible
    short = _fit(A, 2)
    assert not short.convergence().converged
    lo5, hi5 = short.sigma2_interval()
    line = next(ln for ln in result_lines(short) if ln.startswith("sigma2 "))
    assert line.endswith(f"(90% of the draws in {fmt_g(lo5)} to {fmt_g(hi5)}: not yet a "
                         "credible interval)"), line
    search = _fit(A, 2, sampler="search")
    line = next(ln for ln in result_lines(search) if ln.startswith("sigma2 "))
    assert "credible" not in line  # a search's draws have no posterior to summarise
    for bad in (0, 1, 1.5, "0.9", True):
        with pytest.raises(ParameterError, match="prob must be a number in \\(0, 1\\)"):
            res.sigma2_interval(bad)
