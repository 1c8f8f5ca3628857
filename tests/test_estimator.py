"""BayesianID / bayesian_id: scikit-learn conventions, fitted attributes, seeds."""

import warnings

import numpy as np
import pytest

from dask_bid import BayesianID, BIDResult, bayesian_id
from dask_bid._errors import NotFittedError, ParameterError

FAST = dict(n_iter=40, burn_in=10, thin=3)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    C = rng.standard_normal((60, 3))
    W = rng.uniform(-1, 1, (3, 25))
    return C @ W + 0.05 * rng.standard_normal((60, 25))


@pytest.fixture(params=[("gbt", "collapsed"), ("gbt", "plain"), ("gbtn", "collapsed"),
                        ("gbtn", "aggressive"), ("gbt", "search")],
                ids=lambda p: f"{p[0]}-{p[1]}")
def fitted(request, data):
    model, sampler = request.param
    est = BayesianID(3, model=model, sampler=sampler, random_state=1, **FAST)
    return est.fit(data)


def assert_same_trace(a, b):
    for f in a.dtype.names:
        np.testing.assert_array_equal(a[f], b[f])


def test_params_stored_verbatim_and_not_validated_in_init():
    est = BayesianID(0, model="nope", bounds="x")  # validated in fit, not here
    assert est.n_components == 0 and est.model == "nope" and est.bounds == "x"
    params = est.get_params()
    assert params["model"] == "nope" and params["n_iter"] == 1000 and params["thin"] == 1
    est.set_params(model="gbtn")
    assert est.model == "gbtn"
    with pytest.raises(ParameterError):
        BayesianID(0).fit(np.ones((5, 4)))


def test_fitted_attributes(fitted, data):
    M, N = data.shape
    est = fitted
    K = 3
    assert est.columns_.shape == (K,) and est.columns_.dtype == np.int64
    assert np.all(np.diff(est.columns_) > 0)
    assert est.components_.shape == (K, N)
    np.testing.assert_array_equal(est.components_[:, est.columns_], np.eye(K))
    assert np.abs(est.components_).max() <= 1.0
    assert est.max_abs_w_ == np.abs(est.components_).max()
    assert est.sigma2_ > 0
    assert est.inclusion_probability_.shape == (N,)
    assert est.inclusion_probability_.sum() == pytest.approx(K)
    assert est.trace_.shape == (1, FAST["n_iter"])
    assert set(est.trace_.dtype.names) >= {"mse", "sigma2", "accepted"}
    assert est.n_features_in_ == N
    direct = np.mean((data - data[:, est.columns_] @ est.components_) ** 2)
    assert est.mse_ == pytest.approx(direct, rel=1e-10)
    n_keep = len(range(FAST["burn_in"], FAST["n_iter"], FAST["thin"]))
    assert est.result_.draws_columns.shape == (1, n_keep, K)
    assert est.result_.draws_sigma2.shape == (1, n_keep)
    assert 1 <= est.result_.n_draws_point <= n_keep
    assert est.components_sd_.shape == (K, N)
    assert np.all(est.components_sd_[:, est.columns_] == 0)


def _documented_attributes(cls):
    doc = cls.__doc__.split("Attributes\n    ----------\n", 1)[1].split("\n\n", 1)[0]
    return {ln.split(" : ")[0].strip() for ln in doc.splitlines()
            if ln.startswith("    ") and not ln.startswith("        ") and " : " in ln}


@pytest.mark.parametrize("missing", ["zero", "mask"])
def test_every_fitted_attribute_is_documented(data, missing):
    """numpydoc's Attributes section lists exactly what fit sets (mse_observed_ and three
    others were set but undocumented); a DataFrame's fit sets feature_names_in_ too."""
    import pandas as pd

    from dask_bid.baselines import RandomizedID

    df = pd.DataFrame(data, columns=[f"c{j}" for j in range(data.shape[1])])
    for cls, kw in ((BayesianID, dict(missing=missing, random_state=1, **FAST)),
                    (RandomizedID, dict(random_state=0))):
        for X in (data, df):
            est = cls(3, **kw).fit(X)
            fitted = {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}
            names = {"feature_names_in_"} if X is df else set()
            assert fitted == _documented_attributes(cls) - {"feature_names_in_"} | names


def test_transform_and_inverse_transform(fitted, data):
    C = fitted.transform(data)
    np.testing.assert_array_equal(C, data[:, fitted.columns_])
    np.testing.assert_allclose(fitted.inverse_transform(C), C @ fitted.components_)
    assert fitted.fit_transform(data).shape == C.shape


def test_not_fitted():
    with pytest.raises(NotFittedError):
        BayesianID(2).transform(np.ones((3, 4)))


def test_same_seed_same_chain_different_seed_differs(data):
    a = BayesianID(3, random_state=7, **FAST).fit(data)
    b = BayesianID(3, random_state=7, **FAST).fit(data)
    c = BayesianID(3, random_state=8, **FAST).fit(data)
    assert_same_trace(a.trace_, b.trace_)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert not np.array_equal(a.trace_["sigma2"], c.trace_["sigma2"])


def test_spawned_seed_sequences_give_independent_chains(data):
    """Children of SeedSequence.spawn share their parent's entropy; their spawn keys make
    them other streams (numpy's way to seed parallel runs), so they must fit apart, and
    a child's recorded entropy repeats its own fit."""
    parent = np.random.SeedSequence(123)
    kids = parent.spawn(2)
    fits = [BayesianID(3, random_state=s, **FAST).fit(data) for s in (parent, *kids)]
    sig = [f.trace_["sigma2"] for f in fits]
    assert not np.array_equal(sig[0], sig[1]) and not np.array_equal(sig[1], sig[2])
    assert fits[0].result_.params["entropy"] == str(123)
    again = BayesianID(3, random_state=int(fits[1].result_.params["entropy"]), **FAST).fit(data)
    assert_same_trace(fits[1].trace_, again.trace_)


def test_seed_independent_of_thread_count_and_block_layout_choice(data):
    # same block layout, one thread vs two: same chain
    a = BayesianID(3, random_state=3, block_size=7, n_threads=1, **FAST).fit(data)
    b = BayesianID(3, random_state=3, block_size=7, n_threads=2, **FAST).fit(data)
    assert_same_trace(a.trace_, b.trace_)
    np.testing.assert_array_equal(a.components_, b.components_)


def test_functional_twin_matches_estimator(data):
    res = bayesian_id(data, 3, random_state=5, **FAST)
    est = BayesianID(3, random_state=5, **FAST).fit(data)
    assert isinstance(res, BIDResult)
    np.testing.assert_array_equal(res.columns, est.columns_)
    np.testing.assert_array_equal(res.components, est.components_)
    assert res.draws_w is not None and res.draws_w["values"].shape[2] == 3


def test_several_chains(data):
    res = bayesian_id(data, 3, random_state=5, n_chains=3, **FAST)
    assert res.trace.shape == (3, FAST["n_iter"])
    assert res.draws_columns.shape[0] == 3
    # chains use different streams
    assert not np.array_equal(res.trace["sigma2"][0], res.trace["sigma2"][1])


def test_weak_bounds(data):
    est = BayesianID(3, bounds=(-2, 2), random_state=0, **FAST).fit(data)
    assert np.abs(est.components_).max() <= 2.0


@pytest.mark.parametrize("point_estimate", ["mode", "best"])
def test_point_estimates(data, point_estimate):
    res = bayesian_id(data, 3, point_estimate=point_estimate, random_state=2, **FAST)
    keys = [tuple(j) for j in res.draws_columns[0]]
    assert tuple(res.columns) in keys
    if point_estimate == "best":
        sse = res.draws_sse[0]
        best_key = keys[int(np.argmin(sse))]
        assert tuple(res.columns) == best_key


def test_paper_settings_run_and_differ_from_defaults(data):
    from dask_bid import PAPER_SETTINGS

    paper = BayesianID(3, random_state=4, **{**PAPER_SETTINGS, **FAST}).fit(data)
    assert paper.get_params()["init"] == "random"
    assert np.abs(paper.components_).max() <= 1.0
    default = BayesianID(3, random_state=4, **FAST).fit(data)
    assert not np.array_equal(paper.trace_["mse"], default.trace_["mse"])


@pytest.mark.parametrize("sampler", ["aggressive", "search", "collapsed"])
@pytest.mark.parametrize("w_estimate", ["mean", "map", "lstsq"])
def test_sampler_and_w_estimate_options(data, sampler, w_estimate):
    est = BayesianID(3, sampler=sampler, w_estimate=w_estimate, random_state=0,
                     **FAST).fit(data)
    assert np.abs(est.components_).max() <= 1.0
    direct = np.mean((data - data[:, est.columns_] @ est.components_) ** 2)
    assert est.mse_ == pytest.approx(direct, rel=1e-10)


def test_map_estimate_is_the_bounded_least_squares_fit(data):
    # W for the reported basis minimises the SSE within the bounds (up to the prior's
    # negligible ridge): no box-constrained least-squares solution does better
    from scipy.optimize import lsq_linear

    est = BayesianID(3, w_estimate="map", random_state=0, **FAST).fit(data)
    C = data[:, est.columns_]
    best = sum(lsq_linear(C, data[:, n], bounds=(-1, 1)).cost * 2 for n in range(25))
    assert est.mse_ * data.size <= best * (1 + 1e-6)


@pytest.mark.parametrize("missing", ["zero", "mask"])
def test_default_w_is_the_exact_bounded_least_squares_fit(data, missing):
    # the default W for the reported basis is the box-constrained least-squares
    # optimum itself, not an approximation of it
    from scipy.optimize import lsq_linear

    X = data.copy()
    obs = np.ones(X.shape, dtype=bool)
    if missing == "mask":
        obs = np.random.default_rng(1).random(X.shape) > 0.2
        X[~obs] = np.nan
    est = BayesianID(3, random_state=0, missing=missing, **FAST).fit(X)
    assert est.get_params()["w_estimate"] == "lstsq"
    # the masked model's basis holds the observed entries, 0 where missing
    A0 = np.where(obs, data, 0.0)
    C = A0[:, est.columns_]
    best = sum(2 * lsq_linear(C[obs[:, n]], A0[obs[:, n], n], bounds=(-1, 1),
                              method="bvls", tol=1e-14).cost for n in range(X.shape[1]))
    sse = np.sum(np.where(obs, A0 - C @ est.components_, 0.0) ** 2)
    assert sse == pytest.approx(best, rel=1e-9)
    assert np.abs(est.components_).max() <= 1.0


@pytest.mark.parametrize("missing", ["zero", "mask"])
def test_the_same_matrix_gives_the_same_chain_in_any_container(missing):
    """A Fortran-ordered array, a DataFrame (whose values are Fortran-ordered) and a
    DataFrame of pandas' nullable floats (pd.NA for a missing entry) give the chain of
    the C-ordered array bit for bit: the products' rounding follows the layout, so the
    in-memory fit works on a C-ordered copy."""
    import pandas as pd  # the [test] extra

    rng = np.random.default_rng(8)
    A = rng.standard_normal((50, 4)) @ rng.standard_normal((4, 20))
    if missing == "mask":
        A[0, 0] = A[7, 3] = np.nan
    kw = dict(FAST, random_state=0, missing=missing)
    ref = BayesianID(3, **kw).fit(A)
    nullable = pd.DataFrame(A).astype("Float64")
    assert nullable.isna().sum().sum() == (2 if missing == "mask" else 0)
    masked = np.ma.masked_invalid(A)  # a numpy masked array: masked reads as missing
    assert np.ma.count_masked(masked) == (2 if missing == "mask" else 0)
    for X in (np.asfortranarray(A), pd.DataFrame(A), nullable, masked):
        est = BayesianID(3, **kw).fit(X)
        for f in ref.trace_.dtype.names:
            np.testing.assert_array_equal(est.trace_[f], ref.trace_[f])
        np.testing.assert_array_equal(est.components_, ref.components_)


def test_a_masked_arrays_masked_entries_are_missing_not_the_values_under_them(tmp_path):
    """np.asarray drops a masked array's mask: the values hidden under it were fitted as
    data. They read as NaN now, in memory and on the engine; without missing='mask' the
    refusal speaks of masked entries."""
    from dask_bid._errors import NonFiniteInputError

    rng = np.random.default_rng(9)
    A = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 12))
    hidden = A.copy()
    hidden[2, 5] = hidden[30, 1] = 1e6  # would dominate any fit that reads them
    X = np.ma.masked_array(hidden, mask=np.abs(hidden) > 1e5)
    with_nan = np.where(X.mask, np.nan, hidden)
    kw = dict(FAST, random_state=0, missing="mask")
    for engine in ({}, {"client": "synchronous"}):
        ref = bayesian_id(with_nan, 3, **kw, **engine)
        res = bayesian_id(X, 3, **kw, **engine)
        np.testing.assert_array_equal(res.components, ref.components)
        np.testing.assert_array_equal(res.trace["sigma2"], ref.trace["sigma2"])
    with pytest.raises(NonFiniteInputError, match="masked array with 2 masked entries.*"
                       "missing='mask'"):
        BayesianID(3, **FAST).fit(X)


def test_a_dask_array_of_unknown_shape_is_refused_naming_the_fix():
    import dask.array as da

    from dask_bid._errors import InputShapeError

    A = da.from_array(np.random.default_rng(0).standard_normal((30, 8)), chunks=(10, 4))
    X = A[A[:, 0] > -10]  # boolean indexing: the row count is unknown (NaN)
    with pytest.raises(InputShapeError, match=r"unknown shape \(nan, 8\).*"
                       r"compute_chunk_sizes\(\)"):
        bayesian_id(X, 2, client="synchronous", **FAST)
    # to_zarr the same (zarr failed with "cannot convert float NaN to integer")
    from dask_bid.engine import to_zarr

    with pytest.raises(InputShapeError, match=r"unknown shape \(nan, 8\).*compute_chunk"):
        to_zarr(X, "never-written.zarr")


def test_a_reopened_fit_has_the_constructors_parameters(tmp_path):
    """open_result gives back "auto" where the store holds what "auto" resolved to
    (n_redraw, tempered_warmup), so set_params and clone resolve them again (scikit-
    learn's convention); its refit is the chain of the original parameters."""
    from sklearn.base import clone

    from dask_bid import open_result

    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 3)) @ rng.uniform(-1, 1, (3, 12))
    kw = dict(n_iter=30, burn_in=10, random_state=0)
    out = str(tmp_path / "r.zarr")
    est = BayesianID(3, **kw).fit(A, client="synchronous", out=out)
    assert est.result_.params["tempered_warmup"] == 7  # stored resolved (the chain's)
    back = open_result(out)
    params = back.get_params()
    assert params["n_redraw"] == "auto" and params["tempered_warmup"] == "auto"
    np.testing.assert_array_equal(back.fit(A).trace_["sigma2"],
                                  BayesianID(3, **kw).fit(A).trace_["sigma2"])
    # the stored 7 kept would exceed this burn-in; "auto" fits it
    assert open_result(out).set_params(burn_in=5).fit(A).result_.params[
        "tempered_warmup"] <= 5
    masked = clone(open_result(out)).set_params(missing="mask").fit(A)
    assert masked.result_.params["n_redraw"] == 4  # "auto" for a masked fit with K <= 16
    # an explicit value that "auto" would not give stays as it was
    BayesianID(3, **kw, tempered_warmup=3).fit(A, client="synchronous", out=out,
                                               overwrite=True)
    assert open_result(out).get_params()["tempered_warmup"] == 3
    # a fit started from given columns: open_result compared the column array with
    # "auto" (an array's ambiguous truth value) and failed on every such fit
    BayesianID(3, **kw, init=[0, 1, 2]).fit(A, client="synchronous", out=out,
                                            overwrite=True)
    np.testing.assert_array_equal(open_result(out).get_params()["init"], [0, 1, 2])


@pytest.mark.parametrize("where", ["memory", "engine"])
def test_a_dataframes_column_names_are_kept_in_the_result_and_its_store(where, tmp_path):
    import pandas as pd

    from dask_bid import open_result

    rng = np.random.default_rng(3)
    A = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 10))
    df = pd.DataFrame(A, columns=[f"drug{j}" for j in range(10)])
    kw = dict(FAST, random_state=0)
    engine = {} if where == "memory" else {"client": "synchronous",
                                           "out": str(tmp_path / "r.zarr")}
    est = BayesianID(3, **kw).fit(df, **engine)
    assert est.result_.feature_names == list(df.columns)
    assert list(est.feature_names_in_) == list(df.columns)
    assert bayesian_id(A, 3, **kw).feature_names is None  # a numpy array has none
    if where == "engine":
        back = open_result(tmp_path / "r.zarr")
        assert list(back.feature_names_in_) == list(df.columns)
        np.testing.assert_array_equal(back.get_feature_names_out(),
                                      est.get_feature_names_out())
        # a fit of the stored matrix without names keeps none
        res = bayesian_id(A, 3, **kw, client="synchronous", out=str(tmp_path / "n.zarr"))
        assert res.feature_names is None
        assert not hasattr(open_result(tmp_path / "n.zarr"), "feature_names_in_")


@pytest.mark.parametrize("where", ["memory", "engine"])
def test_names_given_to_the_fit_are_kept_like_a_dataframes(where, tmp_path):
    """``feature_names=`` names the columns of a numpy or Zarr input: kept in the
    result, in ``out`` and as ``feature_names_in_``; a resume that names none keeps
    them; wrong counts, non-strings and a DataFrame's other names are refused."""
    from dask_bid import ParameterError, open_result

    rng = np.random.default_rng(3)
    A = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 10))
    names = [f"drug{j}" for j in range(10)]
    kw = dict(FAST, random_state=0)
    out = str(tmp_path / "r.zarr")
    engine = {} if where == "memory" else {"client": "synchronous", "out": out}
    res = bayesian_id(A, 3, feature_names=names, **kw, **engine)
    assert res.feature_names == names
    est = BayesianID(3, **kw).fit(A, feature_names=names,
                                  **({} if where == "memory" else
                                     {"client": "synchronous", "out": str(tmp_path / "e.zarr")}))
    assert list(est.feature_names_in_) == names
    assert list(est.get_feature_names_out()) == [names[j] for j in est.columns_]
    if where == "engine":
        assert open_result(out).result_.feature_names == names
        # continued without names: the stored ones stay, in the result and in out
        more = bayesian_id(A, 3, **{**kw, "n_iter": kw["n_iter"] + 4}, resume=True, **engine)
        assert more.feature_names == names and open_result(out).result_.feature_names == names
    import pandas as pd

    for bad, match in [(names[:9], "has 9 names, but A has 10 columns"),
                       ("drug", "must be a sequence of 10 strings"),
                       (list(range(10)), "must be strings; entry 0 is 0 \\(int\\)")]:
        with pytest.raises(ParameterError, match=match):
            bayesian_id(A, 3, feature_names=bad, **kw)
    df = pd.DataFrame(A, columns=[f"x{j}" for j in range(10)])
    with pytest.raises(ParameterError, match="DataFrame whose column names differ"):
        bayesian_id(df, 3, feature_names=names, **kw)
    assert bayesian_id(df, 3, feature_names=list(df.columns), **kw).feature_names == list(
        df.columns)


@pytest.mark.parametrize("where", ["memory", "engine"])
def test_row_names_are_kept_and_name_the_rows_of_the_basis_frame(where, tmp_path):
    """A DataFrame's index of strings, or ``sample_names=``, names A's rows: kept in the
    result and in ``out``, kept by a resume that names none, and the index of
    ``basis_frame()`` (C with the selected columns' names); a RangeIndex names nothing;
    wrong counts and a DataFrame's other index are refused."""
    import pandas as pd

    from dask_bid import ParameterError, open_result

    rng = np.random.default_rng(3)
    A = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 10))
    rows = [f"cell{i}" for i in range(40)]
    df = pd.DataFrame(A, columns=[f"drug{j}" for j in range(10)], index=rows)
    kw = dict(FAST, random_state=0)
    out = str(tmp_path / "r.zarr")
    engine = {} if where == "memory" else {"client": "synchronous", "out": out}
    res = bayesian_id(df, 3, **kw, **engine)
    assert res.sample_names == rows
    assert bayesian_id(A, 3, sample_names=rows, **kw, **engine,
                       **({} if where == "memory" else {"overwrite": True})
                       ).sample_names == rows
    assert bayesian_id(df.reset_index(drop=True), 3, **kw).sample_names is None
    if where == "engine":
        frame = open_result(out).result_.basis_frame()
        assert list(frame.index) == rows
        # the stored fit is the numpy one (no column names): the columns' indices
        assert list(frame.columns) == [int(j) for j in res.columns]
        np.testing.assert_array_equal(frame.to_numpy(), A[:, res.columns])
        more = bayesian_id(A, 3, **{**kw, "n_iter": kw["n_iter"] + 4}, resume=True, **engine)
        assert more.sample_names == rows
    else:
        # a fit in memory holds its C as well: a copy, not a view of the caller's array
        frame = res.basis_frame()
        assert list(frame.index) == rows
        np.testing.assert_array_equal(frame.to_numpy(), A[:, res.columns])
        assert not np.shares_memory(res.C, A)
    with pytest.raises(ParameterError, match="sample_names has 39 names, but A has 40 rows"):
        bayesian_id(A, 3, sample_names=rows[:39], **kw)
    with pytest.raises(ParameterError, match="DataFrame whose index differ"):
        bayesian_id(df, 3, sample_names=[f"x{i}" for i in range(40)], **kw)


def test_the_engine_reads_a_fortran_array_as_the_c_array():
    """On the Dask engine too, a Fortran-ordered array gives the chain of the C-ordered
    one, bit for bit."""
    rng = np.random.default_rng(8)
    A = rng.standard_normal((50, 4)) @ rng.standard_normal((4, 20))
    kw = dict(FAST, random_state=0)
    ref = BayesianID(3, **kw).fit(A, client="synchronous")
    est = BayesianID(3, **kw).fit(np.asfortranarray(A), client="synchronous")
    for f in ref.trace_.dtype.names:
        np.testing.assert_array_equal(est.trace_[f], ref.trace_[f])
    np.testing.assert_array_equal(est.components_, ref.components_)


@pytest.mark.parametrize("where", ["memory", "engine"])
def test_progress_shows_a_bar_over_every_chains_iterations(where, capsys):
    """``progress=True`` draws one bar to the total of every chain's iterations, and the
    user's callback is still called after each iteration; anything but a bool is
    refused."""
    A = np.random.default_rng(0).standard_normal((30, 8))
    seen = []
    engine = {"client": "synchronous"} if where == "engine" else {}
    est = BayesianID(2, n_iter=40, burn_in=10, n_chains=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: the convergence warning
        est.fit(A, progress=True, callback=lambda s: seen.append(s.iteration), **engine)
    err = capsys.readouterr().err
    assert "sampling" in err and "80/80" in err, err
    assert sorted(seen) == sorted(list(range(1, 41)) * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(A, **engine)
    assert "sampling" not in capsys.readouterr().err  # off by default
    with pytest.raises(ParameterError, match="progress must be True or False, got 'yes'"):
        est.fit(A, progress="yes")


def test_a_result_reads_in_one_line(data):
    """``repr(result)`` (what a notebook shows) names the columns, the fit and the
    verdict in one line, not every array."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: the convergence warning
        res = bayesian_id(data, 3, random_state=5, **FAST)
    text = repr(res)
    assert "\n" not in text and len(text) < 400, text
    cols = ", ".join(str(int(j)) for j in res.columns)
    assert text.startswith(f"BIDResult(columns=[{cols}], A {data.shape[0]} x {data.shape[1]}, "
                           "GBT collapsed, 1 chain x ")
    assert f"mse={res.mse:.6g}" in text and f"sigma2={res.sigma2:.6g}" in text
    verdict = "converged" if res.convergence().converged else "NOT converged"
    assert f", {verdict}, {res.n_draws_point} of {res.draws_sigma2.size} retained" in text


@pytest.mark.parametrize("sampler", ["aggressive", "search"])
def test_a_search_result_is_not_judged_in_its_repr(data, sampler):
    """The search samplers target no known posterior: their repr says "not judged"
    (it said converged / NOT converged, where the CLI and info said not judged)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bayesian_id(data, 3, random_state=5, sampler=sampler, **FAST)
    assert f", convergence not judged ({sampler} sampler), " in repr(res), repr(res)


def test_a_tempered_chain_is_not_judged(data, tmp_path, capsys):
    """temperature != 1 changes the target (the chain samples no posterior): its
    ConvergenceWarning said "not yet posterior summaries; run longer", which running
    longer never mends. Not judged, as the searches: no warning, the repr and info say
    so, with no sigma2 credible interval."""
    from dask_bid import ConvergenceWarning
    from dask_bid.interface.cli import main

    kw = dict(random_state=5, n_iter=12, burn_in=4, thin=1)
    with pytest.warns(ConvergenceWarning):  # the same short chain at temperature 1
        bayesian_id(data, 3, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        res = bayesian_id(data, 3, temperature=0.5, out=str(tmp_path / "t.zarr"),
                          client="synchronous", **kw)
    assert ", convergence not judged (temperature 0.5), " in repr(res), repr(res)
    assert main(["info", str(tmp_path / "t.zarr")]) == 0
    out = capsys.readouterr().out
    check = [ln for ln in out.splitlines() if ln.startswith("  check  ")]
    assert len(check) == 1 and check[0].endswith(
        "not judged: a chain whose swaps run at a temperature other than 1 targets no "
        "posterior"), out
    assert "credible" not in out and "90% of the draws" not in out


def test_a_refit_of_an_opened_result_keeps_nothing_of_its_store(tmp_path):
    """open_result sets C_ and store_path_ beside the fitted attributes; a refit on other
    data kept them: C_ was the old store's columns beside the new columns_."""
    import pickle

    from dask_bid import open_result

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((60, 10)), rng.standard_normal((50, 12))
    BayesianID(3, n_iter=30, burn_in=10, random_state=0).fit(A, out=str(tmp_path / "o.zarr"),
                                                              client="synchronous")
    est = open_result(tmp_path / "o.zarr")
    assert est.C_ is not None and est.store_path_
    est.fit(B)
    assert not hasattr(est, "C_") and not hasattr(est, "store_path_")
    assert est.n_features_in_ == 12
    # results compare by identity (the dataclass' __eq__ raised on its arrays)
    res = est.result_
    assert res == res and res != pickle.loads(pickle.dumps(res))


def test_set_params_names_the_nearest_and_the_valid_parameters():
    """An unknown name was a bare ValueError ("invalid parameter 'n_iters'"), where
    RandomizedID lists the valid ones: ParameterError (a ValueError, as scikit-learn
    expects) with the nearest name and the list."""
    with pytest.raises(ParameterError, match=r"'n_iters' for BayesianID \(did you mean "
                                             r"'n_iter'\?\); valid: n_components, model, "):
        BayesianID(2).set_params(n_iters=3)
    assert issubclass(ParameterError, ValueError)


def test_text_of_every_numpy_string_dtype_is_called_text():
    """numpy 2's StringDType got the object-array advice ("If the objects are numbers")."""
    from dask_bid import InputDTypeError

    for S in (np.array([["1", "2"], ["3", "4"]]),
              np.array([["1", "2"], ["3", "4"]], dtype=np.dtypes.StringDType())):
        with pytest.raises(InputDTypeError, match="It holds text: parse the numbers first"):
            BayesianID(1).fit(S)
