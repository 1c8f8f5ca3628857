"""ArviZ export and convergence diagnostics (split R-hat, ESS)."""

import re
import sys
import warnings

import numpy as np
import pytest
from _support import planted

from dask_bid import (
    BayesianID,
    ConvergenceWarning,
    NotFittedError,
    bayesian_id,
    summary,
    to_inference_data,
)
from dask_bid.engine import convergence as conv
from dask_bid.engine.convergence import (
    check,
    ess_bulk,
    ess_mean,
    ess_tail,
    inclusion_mcse,
    mcse_mean,
    rhat_rank,
)
from dask_bid.interface.diagnostics import retained_iterations

# one pytest-xdist process runs this module: its module-scoped fixtures are then
# computed once, not once per process (the suite's time, README)
pytestmark = pytest.mark.xdist_group("diagnostics")

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az


@pytest.fixture(scope="module")
def easy():
    """Four chains that all sit on the planted basis: well mixed by construction."""
    A, J = planted(60, 40, 2, 0.3, seed=0)
    with warnings.catch_warnings():
        # a converged fit of the exact sampler passes its own check: no warning
        warnings.simplefilter("error", ConvergenceWarning)
        res = bayesian_id(A, 2, n_iter=300, burn_in=50, thin=1, n_chains=4, init="sketch",
                          random_state=1)
    assert np.array_equal(res.columns, J)
    assert np.all(res.draws_columns == J)  # every draw of every chain on the same basis
    return res


@pytest.fixture(scope="module")
def apart():
    """Four short chains, each from its own random basis: not converged."""
    A, _ = planted(60, 40, 2, 0.3, seed=0)
    return bayesian_id(A, 2, n_iter=30, burn_in=10, thin=1, n_chains=4, init="random",
                       random_state=0)


def split_rhat(x):
    """Classic split R-hat (Gelman et al., BDA3 eq. 11.4) of a (chain, draw) array."""
    half = x.shape[1] // 2
    s = np.concatenate([x[:, :half], x[:, -half:]], axis=0)
    n = s.shape[1]
    B = n * np.var(s.mean(axis=1), ddof=1)
    W = np.mean(np.var(s, axis=1, ddof=1))
    return np.sqrt(((n - 1) / n * W + B / n) / W)


# ----------------------------------------------------------------------------- export

def test_inference_data_groups_dims_and_values(easy):
    idata = to_inference_data(easy)
    assert set(idata.groups()) == {"posterior", "sample_stats"}
    post, stats = idata.posterior, idata.sample_stats
    n_chains, n_keep = easy.draws_sigma2.shape
    assert dict(post.sizes)["chain"] == n_chains and dict(post.sizes)["draw"] == n_keep
    its = retained_iterations(easy)
    np.testing.assert_array_equal(post["draw"].values, its)
    np.testing.assert_array_equal(its, np.arange(50, 300, 1))
    np.testing.assert_array_equal(post["sigma2"].values, easy.draws_sigma2)
    np.testing.assert_allclose(post["mse"].values, easy.draws_sse / (60 * 40))
    # W: rows = the reported basis, columns = traced columns outside it
    assert post["W"].dims == ("chain", "draw", "w_row", "w_col")
    np.testing.assert_array_equal(post["w_row"].values, easy.columns)
    wcols = post["w_col"].values
    assert not np.isin(wcols, easy.columns).any()
    traced = list(easy.draws_w["columns"])
    idx = [traced.index(c) for c in wcols]
    np.testing.assert_array_equal(post["W"].values, easy.draws_w["values"][..., idx])
    assert np.all(np.abs(post["W"].values) <= 1.0)
    np.testing.assert_array_equal(stats["accepted"].values, easy.trace["accepted"][:, its])
    assert stats["in_reported_basis"].values.all()
    assert post.attrs["model"] == "gbt" and post.attrs["thin"] == 1
    assert "w_row_name" not in post.coords  # no names: none made up
    # a fit that kept its columns' names carries them beside the indices
    import dataclasses

    names = [f"drug{j}" for j in range(easy.n_features)]
    post = to_inference_data(dataclasses.replace(easy, feature_names=names)).posterior
    assert list(post["w_row_name"].values) == [names[c] for c in easy.columns]
    assert list(post["w_col_name"].values) == [names[c] for c in wcols]


def test_draws_off_the_reported_basis_are_nan(apart):
    idata = to_inference_data(apart)
    inb = idata.sample_stats["in_reported_basis"].values
    assert inb.any() and not inb.all()
    W = idata.posterior["W"].values
    assert np.isnan(W[~inb]).all() and not np.isnan(W[inb]).any()


def test_estimator_and_result_methods_export_the_same(easy):
    A, _ = planted(60, 40, 2, 0.3, seed=0)
    est = BayesianID(2, n_iter=60, burn_in=10, thin=2, init="sketch", random_state=1).fit(A)
    a = est.to_inference_data()
    b = est.result_.to_inference_data()
    np.testing.assert_array_equal(a.posterior["sigma2"].values, b.posterior["sigma2"].values)
    with pytest.raises(NotFittedError):
        BayesianID(2).to_inference_data()
    with pytest.raises(TypeError, match="BIDResult"):
        to_inference_data(np.zeros(3))


def test_arviz_functions_accept_the_export(easy):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = az.summary(to_inference_data(easy), var_names=["sigma2", "mse"])
    assert {"sigma2", "mse"} <= set(table.index)
    assert table.loc["sigma2", "mean"] == pytest.approx(easy.draws_sigma2.mean(), abs=1e-3)


# ----------------------------------------------------------------------------- R-hat

def test_rhat_near_one_for_well_mixed_chains(easy):
    table = summary(easy)
    assert {"sigma2", "mse"} <= set(table.index)
    w_rows = [i for i in table.index if i.startswith("W[")]
    assert len(w_rows) == 2 * (len(easy.draws_w["columns"]) - np.isin(
        easy.draws_w["columns"], easy.columns).sum())
    assert (table["n_chains"] == 4).all()
    # 4 chains x 250 draws of the same target: R-hat is 1 up to O(1/sqrt(draws)) noise
    assert table["r_hat"].max() < 1.05, table.sort_values("r_hat").tail()
    assert table["r_hat"].min() > 0.98


def test_rhat_flags_chains_started_apart(apart):
    last = {tuple(c) for c in apart.draws_columns[:, -1]}
    assert len(last) > 1  # the chains did end on different bases
    table = summary(apart, var_names=["sigma2", "mse"])
    assert table.loc["sigma2", "r_hat"] > 1.1
    assert table.loc["mse", "r_hat"] > 1.1


@pytest.mark.parametrize("fixture", ["easy", "apart"])
def test_split_rhat_is_the_textbook_formula(request, fixture):
    res = request.getfixturevalue(fixture)
    table = summary(res, var_names=["sigma2", "mse"], method="split")
    mse = res.draws_sse / (res.n_samples * res.n_features)
    assert table.loc["sigma2", "r_hat"] == pytest.approx(split_rhat(res.draws_sigma2), rel=1e-9)
    assert table.loc["mse", "r_hat"] == pytest.approx(split_rhat(mse), rel=1e-9)


# ----------------------------------------------------------------------------- ESS

def test_ess_positive_and_bounded(easy, apart):
    for res in (easy, apart):
        table = summary(res)
        ok = table.dropna(subset=["ess_bulk"])
        n = ok["n_draws"].to_numpy()
        assert len(ok) >= 2
        assert (ok["ess_bulk"] > 0).all() and (ok["ess_tail"] > 0).all()
        # ArviZ caps its estimate at n log10(n), the most antithetic chains can give
        assert (ok["ess_bulk"] <= n * np.log10(n) + 1e-9).all()
    # sigma2 given a fixed basis is drawn afresh every iteration: close to independent
    t = summary(easy, var_names=["sigma2"])
    assert t.loc["sigma2", "ess_bulk"] > 0.3 * t.loc["sigma2", "n_draws"]
    # chains stuck at different levels: a handful of effective draws out of 80
    t = summary(apart, var_names=["mse"])
    assert t.loc["mse", "ess_bulk"] < 0.25 * t.loc["mse", "n_draws"]


def test_w_rows_use_only_chains_on_the_reported_basis(apart):
    table = summary(apart, var_names=["W"])
    full = np.all(apart.draws_columns == apart.columns, axis=-1).all(axis=1)
    assert (table["n_chains"] == full.sum()).all()
    if full.any():
        assert (table["n_draws"] == full.sum() * apart.draws_sigma2.shape[1]).all()


def test_unknown_var_name(easy):
    from dask_bid import ParameterError

    with pytest.raises(ParameterError, match="var_names"):
        summary(easy, var_names=["tau"])


def test_one_var_name_as_a_string(easy):
    """``var_names="sigma2"`` is that quantity, as in ArviZ (it was split into letters)."""
    table = summary(easy, var_names="sigma2")
    assert list(table.index) == ["sigma2"]
    assert table.loc["sigma2", "mean"] == pytest.approx(easy.draws_sigma2.mean(), rel=1e-12)


def test_short_and_single_chains_export_without_arviz_noise():
    """One chain: R-hat NaN without ArviZ's logged "Shape validation failed"; one draw a
    chain: no "More chains than draws" warning (the axes are right by construction)."""
    A, _ = planted(60, 20, 2, 0.3, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        one = bayesian_id(A, 2, n_iter=40, burn_in=10, random_state=0)
        short = bayesian_id(A, 2, n_iter=40, burn_in=39, n_chains=2, random_state=0)
    import logging

    records = []
    catch = logging.Handler(logging.WARNING)
    catch.emit = records.append
    # ArviZ's own Logger instance (not in logging's registry), which says a message once
    # per process: its memory emptied for this test
    logger = az._log
    logger.addHandler(catch)
    cache, logger.cache = logger.cache, []
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert np.isnan(summary(one, var_names=["sigma2"]).loc["sigma2", "r_hat"])
            assert to_inference_data(short).posterior["sigma2"].shape == (2, 1)
    finally:
        logger.removeHandler(catch)
        logger.cache = cache
    assert not records, [r.getMessage() for r in records]


def test_the_mse_of_a_masked_fit_is_over_the_observed_entries():
    """With missing="mask" the MSE of a draw is its SSE over the observed entries (the
    trace's and the ArviZ export's); summary divided by M N, low by the observed share."""
    A, _ = planted(60, 20, 2, 0.3, seed=0)
    observed = np.random.default_rng(3).random(A.shape) > 0.2
    A[~observed] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: not what is tested here
        res = bayesian_id(A, 2, n_iter=60, burn_in=20, thin=1, n_chains=2, missing="mask",
                          random_state=0)
    want = res.draws_sse / observed.sum()
    got = summary(res, var_names=["mse"]).loc["mse"]
    assert got["mean"] == pytest.approx(want.mean(), rel=1e-12)
    assert got["sd"] == pytest.approx(want.std(ddof=1), rel=1e-12)
    np.testing.assert_allclose(to_inference_data(res).posterior["mse"].values, want,
                               rtol=1e-12)


# ----------------------------------------------------------------------------- optional

def test_clear_error_without_arviz(easy, monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r'pip install "dask_bid\[arviz\]"'):
        to_inference_data(easy)
    with pytest.raises(ImportError, match="arviz"):
        summary(easy)


def test_a_package_arviz_needs_is_named_not_arviz(easy, monkeypatch):
    """ArviZ installed, a package it imports missing (pandas, matplotlib): said so (the
    message said ArviZ was not installed)."""
    import builtins

    real = builtins.__import__

    def failing(name, *args, **kw):
        if name == "arviz":
            raise ModuleNotFoundError("No module named 'pandas'", name="pandas")
        return real(name, *args, **kw)

    monkeypatch.delitem(sys.modules, "arviz", raising=False)
    monkeypatch.setattr(builtins, "__import__", failing)
    for f in (summary, to_inference_data):
        with pytest.raises(ImportError, match="ArviZ is installed but cannot be imported: a "
                                              "package it needs, 'pandas', is missing"):
            f(easy)


def test_summary_refuses_an_unknown_rhat_method(easy):
    """Refused before anything is computed, so for one chain too, where R-hat is never
    computed (it was accepted there; with several chains ArviZ raised a TypeError)."""
    from dask_bid import ParameterError

    A, _ = planted(30, 12, 2, 0.3, seed=0)
    one = bayesian_id(A, 2, n_iter=40, burn_in=10, random_state=0)
    for res in (easy, one):
        with pytest.raises(ParameterError, match="method='bogus' is not an R-hat method; "
                                                 "choose one of 'rank', 'split'"):
            summary(res, method="bogus")
    assert summary(one, method="split").shape[0] > 0


# ----------------------------------------------------------------------------- the check

def _ar1(rng, n_chains, n_draws, phi, shift=0.0):
    x = np.zeros((n_chains, n_draws))
    e = rng.standard_normal((n_chains, n_draws))
    x[:, 0] = e[:, 0] / np.sqrt(1 - phi**2)
    for t in range(1, n_draws):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x + shift * np.arange(n_chains)[:, None]


@pytest.mark.parametrize("n_chains,n_draws,phi,shift,ties", [
    (4, 500, 0.0, 0.0, False), (4, 500, 0.9, 0.0, False), (2, 101, 0.5, 0.0, False),
    (3, 40, -0.4, 0.0, False), (4, 300, 0.7, 2.0, False), (4, 200, 0.3, 0.0, True),
    (1, 200, 0.6, 0.0, False), (4, 7, 0.2, 0.0, False)])
def test_the_numpy_statistics_equal_arviz(n_chains, n_draws, phi, shift, ties):
    x = _ar1(np.random.default_rng(n_draws), n_chains, n_draws, phi, shift)
    if ties:
        x = np.round(x)  # many equal values: average ranks
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = float(az.rhat(x, method="rank")) if n_chains > 1 else np.nan
        e = float(az.ess(x, method="bulk"))
        t = float(az.ess(x, method="tail"))
        m = float(az.ess(x, method="mean"))
        se = float(np.squeeze(az.mcse(x, method="mean")))
    np.testing.assert_allclose(rhat_rank(x), r, rtol=1e-12)
    np.testing.assert_allclose(ess_bulk(x), e, rtol=1e-12)
    np.testing.assert_allclose(ess_tail(x), t, rtol=1e-12)
    np.testing.assert_allclose(ess_mean(x), m, rtol=1e-12)
    np.testing.assert_allclose(mcse_mean(x), se, rtol=1e-12)


@pytest.mark.parametrize("shape,values", [((4, 100), "continuous"), ((2, 7), "continuous"),
                                          ((4, 60), "ties"), ((3, 9), "three values"),
                                          ((1, 5), "constant")])
def test_rank_normalisation_equals_scipy_stats(shape, values):
    # the ranks and normal quantiles written out (no scipy.stats import in a fit) give
    # scipy's floats exactly: average ranks for ties, ndtri for norm.ppf
    import scipy.stats as st

    x = np.random.default_rng(shape[1]).standard_normal(shape)
    x = {"continuous": x, "ties": np.round(x, 1), "three values": np.round(x).clip(-1, 1),
         "constant": np.zeros(shape)}[values]
    ref = st.norm.ppf((st.rankdata(x, method="average").reshape(shape) - 0.375)
                      / (x.size + 0.25))
    np.testing.assert_array_equal(conv._z_scale(x), ref)


def test_the_statistics_match_their_theory():
    rng = np.random.default_rng(7)
    # independent draws of one distribution: R-hat - 1 is O(1/n) and ESS about the
    # number of draws; ESS of AR(1) draws is n (1 - phi) / (1 + phi). The bounds are about
    # 4 standard deviations of the estimate at these lengths (measured over 40 seeds: the
    # ratio to the true ESS has sd 0.036 for independent draws, 0.059 for phi = 0.8; the
    # largest R-hat of independent draws was 1.0008)
    x = _ar1(rng, 4, 2000, 0.0)
    assert rhat_rank(x) < 1.005
    assert ess_bulk(x) == pytest.approx(8000, rel=0.15)
    x = _ar1(rng, 4, 4000, 0.8)
    assert ess_bulk(x) == pytest.approx(16000 * 0.2 / 1.8, rel=0.25)
    # chains whose levels differ by one within-chain sd: between-chain variance shows
    assert rhat_rank(_ar1(rng, 4, 2000, 0.0, shift=1.0)) > 1.2
    # every chain drifting the same way: only the split into halves sees it (R-hat of
    # the unsplit chains is 1 up to noise), the case the split exists for
    drift = _ar1(rng, 4, 1000, 0.0) + np.linspace(0.0, 3.0, 1000)
    assert rhat_rank(drift) > 1.2
    assert conv._rhat(conv._z_scale(drift)) < 1.01


def _two_state(rng, n_chains, n_draws, p, rho):
    """Markov chains on {0, 1} with stationary P(1) = p and lag-1 autocorrelation rho:
    the variance of their mean is p (1 - p) (1 + rho) / (1 - rho) / n."""
    a, b = p * (1 - rho), (1 - p) * (1 - rho)  # P(0 -> 1), P(1 -> 0)
    x = np.zeros((n_chains, n_draws), dtype=bool)
    x[:, 0] = rng.random(n_chains) < p
    u = rng.random((n_chains, n_draws))
    for t in range(1, n_draws):
        x[:, t] = np.where(x[:, t - 1], u[:, t] >= b, u[:, t] < a)
    return x


@pytest.mark.parametrize("p, rho", [(0.5, 0.0), (0.3, 0.8), (0.1, 0.5)])
def test_inclusion_mcse_matches_its_theory(p, rho):
    """A column in the basis along two-state chains of known autocorrelation: its MCSE
    is sqrt(p (1 - p) (1 + rho) / (1 - rho) / n) to within 20 % (the ESS estimate's
    error at this length is a few percent; an MCSE without the autocorrelation, the
    sd over sqrt(n), is off by a factor 3 at rho = 0.8). A column never in the basis
    has MCSE 0, and fewer than 4 draws give NaN."""
    rng = np.random.default_rng(int(100 * p + 10 * rho))
    inside = _two_state(rng, 4, 4000, p, rho)
    # bases of K = 2: column 0 when inside, else column 1; column 2 always; 3 never
    cols = np.stack([np.where(inside, 0, 1), np.full(inside.shape, 2)], axis=2)
    se = inclusion_mcse(cols, 4)
    want = np.sqrt(p * (1 - p) * (1 + rho) / (1 - rho) / inside.size)
    assert se[0] == pytest.approx(want, rel=0.2)
    assert se[1] == pytest.approx(se[0], rel=1e-12)  # the complement's indicator
    assert se[2] == 0.0 and se[3] == 0.0
    assert np.isnan(inclusion_mcse(cols[:, :3], 4)).all()


def test_the_verdict_and_its_thresholds():
    rng = np.random.default_rng(3)
    good = check(rng.gamma(50, 1 / 50, (4, 400)), rng.normal(100, 1, (4, 400)))
    assert good.converged and good.problems == () and good.message() == ""
    assert good.n_chains == 4 and good.n_draws == 400
    # ESS wanted: 100 per chain. One chain (no R-hat) of independent draws: 300 pass,
    # 50 fail (ESS about 50, far from 100: its sd is about 7 at this length)
    one = check(rng.normal(size=(1, 300)), rng.normal(size=(1, 300)))
    assert one.converged and np.isnan(one.r_hat_sigma2)
    few = check(rng.normal(size=(1, 50)), rng.normal(size=(1, 50)))
    assert not few.converged and len(few.problems) == 1
    assert re.fullmatch(r"bulk ESS \d+ \(sigma2\), \d+ \(SSE\) < 100", few.problems[0])
    assert few.message().startswith("the chain has not converged (bulk ESS")
    # R-hat wanted <= 1.01: a chain on another level fails it (one statistic only)
    s2 = rng.normal(size=(4, 400))
    sse = rng.normal(size=(4, 400))
    sse[0] += 1.0
    bad = check(s2, sse)
    assert not bad.converged
    assert bad.problems[0].startswith("split R-hat ") and "(SSE)" in bad.problems[0]
    assert "(sigma2)" not in bad.problems[0]
    assert bad.message().startswith("the 4 chains have not converged (split R-hat")
    assert not check(np.ones((2, 3)), np.ones((2, 3))).converged  # too few to judge


def test_a_fit_that_has_not_converged_warns_and_says_so(apart):
    A, _ = planted(60, 40, 2, 0.3, seed=0)
    with pytest.warns(ConvergenceWarning, match=r"the 4 chains have not converged \(split "
                      r"R-hat .* > 1.01; bulk ESS .* < 400\): the inclusion probabilities"):
        est = BayesianID(2, n_iter=30, burn_in=10, thin=1, n_chains=4, init="random",
                         random_state=0).fit(A)
    c = est.convergence_
    assert not c.converged
    # the same numbers as ArviZ's, from the estimator and from the result
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert c.r_hat_sse == pytest.approx(float(az.rhat(est.result_.draws_sse,
                                                           method="rank")), rel=1e-12)
    assert c == apart.convergence()  # the fixture is the same fit


def test_a_converged_fit_passes_its_check(easy):
    c = easy.convergence()  # and the fixture's fit emitted no ConvergenceWarning
    assert c.converged and c.r_hat_sigma2 <= 1.01 and c.ess_bulk_sigma2 >= 400


def test_searches_are_not_judged():
    A, _ = planted(60, 40, 2, 0.3, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = BayesianID(2, sampler="search", n_iter=30, burn_in=10, thin=1, n_chains=4,
                         init="random", random_state=0).fit(A)
    assert not est.convergence_.converged  # computed, but the search is no posterior
