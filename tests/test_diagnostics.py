"""ArviZ export and convergence diagnostics (split R-hat, ESS)."""

import sys
import warnings

import numpy as np
import pytest
from _support import planted

from dask_bid import BayesianID, NotFittedError, bayesian_id, summary, to_inference_data
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


# ----------------------------------------------------------------------------- optional

def test_clear_error_without_arviz(easy, monkeypatch):
    monkeypatch.setitem(sys.modules, "arviz", None)  # as if it were not installed
    with pytest.raises(ImportError, match=r'pip install "dask_bid\[arviz\]"'):
        to_inference_data(easy)
    with pytest.raises(ImportError, match="arviz"):
        summary(easy)
