"""missing="mask": the likelihood and the sigma^2 update over observed entries only."""

import numpy as np
import pytest

from dask_bid import BayesianID
from dask_bid.kernels.priors import Priors
from dask_bid.kernels.stats import draw_sigma2
from dask_bid.kernels.swap import swap_delta_masked, swapped_grams, swapped_h
from dask_bid.kernels.sweep import (
    conditional_params,
    draw_hyper_block,
    draw_prior_block,
    sweep_block,
)


def _per_column_grams(C, mask):
    return np.stack([C[mask[:, n]].T @ C[mask[:, n]] for n in range(mask.shape[1])])


def _problem(seed, M=9, N=7, K=3):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, N))
    mask = rng.random((M, N)) < 0.6
    A0 = np.where(mask, A, 0.0)
    J = np.sort(rng.choice(N, K, replace=False))
    return rng, A0, mask, J


@pytest.mark.parametrize("seed", [0, 1])
def test_masked_conditionals_match_brute_force(seed):
    rng, A0, mask, J = _problem(seed)
    C = A0[:, J]
    Gn = _per_column_grams(C, mask)
    H = C.T @ A0
    W = rng.uniform(-1, 1, (len(J), A0.shape[1]))
    sigma2, mu, tau = 0.4, 0.1, 1.3
    for n in range(A0.shape[1]):
        O = mask[:, n]
        for k in range(len(J)):
            # brute force over observed rows only, in the paper's per-entry form
            tt = np.sum(C[O, k] ** 2) / sigma2 + tau
            others = C[O] @ W[:, n] - C[O, k] * W[k, n]
            mt = (np.sum(C[O, k] * (A0[O, n] - others)) / sigma2 + tau * mu) / tt
            m2, t2 = conditional_params(Gn[n], H[:, n], W[:, n], k, sigma2, mu, tau)
            assert m2 == pytest.approx(mt, rel=1e-10, abs=1e-12)
            assert t2 == pytest.approx(tt, rel=1e-12)


def _observed_sse(A0, mask, J, W):
    return float(np.sum(((A0 - A0[:, J] @ W) * mask) ** 2))


@pytest.mark.parametrize("seed", [2, 3])
def test_masked_sse_swap_delta_and_grams(seed):
    rng, A0, mask, J = _problem(seed)
    C = A0[:, J]
    Gn = _per_column_grams(C, mask)
    H = C.T @ A0
    W = rng.uniform(-1, 1, (len(J), A0.shape[1]))
    # sufficient statistics give the observed SSE
    wgw = np.einsum("kn,nkl,ln->", W, Gn, W)
    sse = np.sum(A0 * A0) - 2 * np.vdot(H, W) + wgw
    assert sse == pytest.approx(_observed_sse(A0, mask, J, W), rel=1e-10)
    for p in range(len(J)):
        for u in np.setdiff1d(np.arange(A0.shape[1]), J):
            J2 = J.copy()
            J2[p] = u
            q = (A0[:, J2] * A0[:, u][:, None]).T @ mask.astype(float)  # as the backend
            w_new = rng.uniform(-1, 1, A0.shape[1])
            W2 = W.copy()
            W2[p] = w_new
            d_hw, d_wgw = swap_delta_masked(Gn, H, W, p, q, A0[:, u] @ A0, w_new)
            direct = _observed_sse(A0, mask, J2, W2) - _observed_sse(A0, mask, J, W)
            assert -2 * d_hw + d_wgw == pytest.approx(direct, rel=1e-9, abs=1e-9)
            np.testing.assert_allclose(swapped_grams(Gn, p, q),
                                       _per_column_grams(A0[:, J2], mask), atol=1e-12)
            np.testing.assert_allclose(swapped_h(H, p, A0[:, u] @ A0), A0[:, J2].T @ A0,
                                       atol=1e-12)


# -- Geweke test with a fixed mask ------------------------------------------------------
M, N, K = 6, 3, 2
N_DRAWS = 40_000
Z_MAX = 4.5


def _geweke_z(model, bug=False, seed=0):
    pri = Priors(hierarchical=model == "gbtn", alpha_sigma=3.0, beta_sigma=2.0)
    rng = np.random.default_rng(seed)
    C = np.random.default_rng(99).standard_normal((M, K))
    mask = np.random.default_rng(98).random((M, N)) < 0.6
    mask[0] = True  # every column observed somewhere
    n_obs = int(mask.sum())
    Gn = _per_column_grams(C, mask)

    def stats(W, s2, A, Mu):
        cols = [W.reshape(len(W), -1), W.reshape(len(W), -1) ** 2, s2[:, None],
                1 / s2[:, None], (A * mask).reshape(len(W), -1)[:, :2]]
        if Mu is not None:
            cols.append((Mu.reshape(len(W), -1) ** 2).mean(1, keepdims=True))
        return np.concatenate(cols, axis=1)

    W, Mu, Tau = draw_prior_block(rng, (N_DRAWS, K, N), pri)
    s2 = pri.beta_sigma / rng.standard_gamma(pri.alpha_sigma, N_DRAWS)
    A = np.einsum("mk,ikn->imn", C, W) + np.sqrt(s2)[:, None, None] * rng.standard_normal(
        (N_DRAWS, M, N))
    mc = stats(W, s2, A, Mu)

    sweep_pri = pri._replace(tau=1.3) if bug else pri
    W, Mu, Tau = draw_prior_block(rng, (K, N), pri)
    sigma2 = pri.beta_sigma / rng.standard_gamma(pri.alpha_sigma)
    A = (C @ W + np.sqrt(sigma2) * rng.standard_normal((M, N))) * mask
    out = [np.empty((N_DRAWS, K, N)), np.empty(N_DRAWS), np.empty((N_DRAWS, M, N)),
           np.empty((N_DRAWS, K, N)) if pri.hierarchical else None]
    for t in range(N_DRAWS):
        R = (A - C @ W) * mask
        sigma2 = draw_sigma2(rng, float(np.sum(R * R)), n_obs, pri.alpha_sigma,
                             pri.beta_sigma)
        sweep_block(rng, None, C.T @ A, W, sigma2, sweep_pri, Mu, Tau, Gn=Gn)
        if pri.hierarchical:
            draw_hyper_block(rng, W, Mu, Tau, pri)
            out[3][t] = Mu
        A = (C @ W + np.sqrt(sigma2) * rng.standard_normal((M, N))) * mask
        out[0][t], out[1][t], out[2][t] = W, sigma2, A
    sc = stats(*out)
    b = sc.reshape(100, -1, sc.shape[1]).mean(1)
    se = np.sqrt(mc.var(0, ddof=1) / len(mc) + b.var(0, ddof=1) / 100)
    return (mc.mean(0) - sc.mean(0)) / se


@pytest.mark.parametrize("model", ["gbt", "gbtn"])
def test_masked_geweke(model):
    z = _geweke_z(model)
    assert np.max(np.abs(z)) < Z_MAX, z


def test_masked_geweke_catches_planted_bug():
    z = _geweke_z("gbt", bug=True)
    assert np.max(np.abs(z)) > Z_MAX, z


# -- recovery with 50% missing -----------------------------------------------------------
def test_recovery_with_half_missing():
    rng = np.random.default_rng(4)
    M_, N_, K_, sigma = 120, 300, 2, 0.2
    J = np.array([40, 211])
    C = rng.standard_normal((M_, K_))
    W = rng.uniform(0.3, 0.5, (K_, N_)) * rng.choice([-1.0, 1.0], (K_, N_))
    W[:, J] = np.eye(K_)
    A = C @ W + sigma * rng.standard_normal((M_, N_))
    A[:, J] = C
    missing = rng.random((M_, N_)) < 0.5
    missing[:, J] = False  # the planted basis is observed in full
    A[missing] = np.nan
    est = BayesianID(K_, missing="mask", random_state=1, n_iter=200, burn_in=50).fit(A)
    np.testing.assert_array_equal(est.columns_, J)
    np.testing.assert_array_equal(est.result_.C, A[:, J])  # the input's, not the zero-filled
    assert np.all(est.inclusion_probability_[J] > 0.9)
    draws = est.result_.draws_sigma2.ravel()
    lo, hi = np.quantile(draws, [0.025, 0.975])
    # the K basis columns are fitted exactly, so their M K entries carry no residual: the
    # posterior targets sigma^2 (n_obs - M K) / n_obs
    n_obs = int((~missing).sum())
    # the trace's MSE is the SSE over the observed entries per observed entry
    np.testing.assert_array_equal(est.trace_["mse"][0, 50:], est.result_.draws_sse[0] / n_obs)
    target = sigma**2 * (n_obs - M_ * K_) / n_obs
    assert lo <= target <= hi, (lo, target, hi)
    assert est.mse_observed_ < 1.2 * sigma**2
    # the zero-fill mode on the same data is biased: missing entries count as zeros
    est0 = BayesianID(K_, random_state=1, n_iter=200, burn_in=50).fit(np.nan_to_num(A))
    assert est0.sigma2_ > 2 * sigma**2
