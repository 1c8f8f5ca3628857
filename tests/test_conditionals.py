"""Conditional parameters against a brute-force computation in the paper's own
X (M x N), Y (N x N) form (Lu 2022, Eq. for w_kl, sigma^2 and the swap odds)."""

import numpy as np
import pytest

from dask_bid.kernels.priors import Priors
from dask_bid.kernels.stats import sse_from_stats
from dask_bid.kernels.swap import proposal_gram, swap_delta, swapped_h
from dask_bid.kernels.sweep import conditional_params, draw_hyper_block


def _xy_problem(seed, M=7, N=6, K=3):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, N))
    J = np.sort(rng.choice(N, K, replace=False))
    # the paper's form: X is A with the columns of I zeroed, Y is N x N
    X = np.zeros_like(A)
    X[:, J] = A[:, J]
    Y = rng.uniform(-1, 1, (N, N))
    return rng, A, J, X, Y


def _brute_conditional(A, X, Y, k, l, sigma2, mu, tau):
    # paper: tau~ = sum_i x_ik^2 / s2 + tau_kl,
    # mu~ = (1/s2 sum_i x_ik (a_il - sum_{j != k} x_ij y_jl) + tau mu) / tau~
    tt = np.sum(X[:, k] ** 2) / sigma2 + tau
    others = X @ Y[:, l] - X[:, k] * Y[k, l]
    mt = (np.sum(X[:, k] * (A[:, l] - others)) / sigma2 + tau * mu) / tt
    return mt, tt


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mu,tau", [(0.0, 1.0), (0.3, 2.5)])
def test_w_conditional_matches_xy_form(seed, mu, tau):
    rng, A, J, X, Y = _xy_problem(seed)
    sigma2 = 0.37
    C = A[:, J]
    G = C.T @ C
    H = C.T @ A
    W = Y[J, :]  # the only rows of Y that touch the likelihood
    for slot, k in enumerate(J):
        for n in range(A.shape[1]):
            mt, tt = conditional_params(G, H[:, n], W[:, n], slot, sigma2, mu, tau)
            mb, tb = _brute_conditional(A, X, Y, k, n, sigma2, mu, tau)
            assert mt == pytest.approx(mb, rel=1e-10, abs=1e-12)
            assert tt == pytest.approx(tb, rel=1e-12)


def test_rows_outside_basis_have_prior_conditional():
    # rows of Y for columns in I never touch the likelihood: conditional = prior
    rng, A, J, X, Y = _xy_problem(5)
    I = np.setdiff1d(np.arange(A.shape[1]), J)
    for k in I:
        mb, tb = _brute_conditional(A, X, Y, k, 0, 0.5, 0.2, 1.7)
        assert mb == pytest.approx(0.2) and tb == pytest.approx(1.7)


def test_sse_from_sufficient_statistics_matches_direct():
    rng, A, J, X, Y = _xy_problem(3, M=20, N=9, K=4)
    C = A[:, J]
    W = Y[J, :]
    direct = np.sum((A - X @ Y) ** 2)
    G, H = C.T @ C, C.T @ A
    stats = sse_from_stats(np.sum(A * A), np.vdot(H, W), np.vdot(W, G @ W))
    assert stats == pytest.approx(direct, rel=1e-11)


@pytest.mark.parametrize("seed", [0, 4])
def test_swap_delta_and_incremental_updates_match_xy_form(seed):
    rng, A, J, X, Y = _xy_problem(seed, M=15, N=8, K=3)
    C = A[:, J]
    G, H, W = C.T @ C, C.T @ A, Y[J, :]
    I = np.setdiff1d(np.arange(A.shape[1]), J)
    for p in range(len(J)):
        for u in I:
            w_new = rng.uniform(-1, 1, A.shape[1])
            # the incoming column's row in the paper's Y is w_new
            J2 = J.copy()
            J2[p] = u
            X2 = np.zeros_like(A)
            X2[:, J2] = A[:, J2]
            Y2 = Y.copy()
            Y2[u] = w_new
            sse_old = np.sum((A - X @ Y) ** 2)
            sse_new = np.sum((A - X2 @ Y2) ** 2)
            h_u = A[:, u] @ A
            G2, g = proposal_gram(G, p, H[:, u], h_u[u])
            d_hw, d_wgw = swap_delta(G, H, W, p, g, h_u, w_new)
            assert sse_old - 2 * d_hw + d_wgw == pytest.approx(sse_new, rel=1e-10)
            # incremental G and H equal the direct Gram and cross-product of the new basis
            np.testing.assert_allclose(G2, A[:, J2].T @ A[:, J2], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(swapped_h(H, p, h_u), A[:, J2].T @ A, rtol=1e-12,
                                       atol=1e-12)


def test_gbtn_hyper_conditionals_moments():
    # mu | tau, w ~ N((tau w + tau_mu mu_mu) / (tau + tau_mu), 1 / (tau + tau_mu));
    # tau | mu, w ~ Gamma(alpha_t + 1/2, rate = beta_t + (w - mu)^2 / 2): check one step
    # against those laws with many independent entries
    pri = Priors(hierarchical=True, mu_mu=0.4, tau_mu=0.7, alpha_t=2.0, beta_t=1.5)
    n = 200_000
    W = np.full((1, n), 0.6)
    Tau = np.full((1, n), 2.0)
    Mu = np.zeros((1, n))
    draw_hyper_block(np.random.default_rng(11), W, Mu, Tau, pri)
    tt = 2.0 + 0.7
    mt = (2.0 * 0.6 + 0.7 * 0.4) / tt
    z_mean = (Mu.mean() - mt) / np.sqrt(1 / tt / n)
    assert abs(z_mean) < 4.0
    z_var = (Mu.var() - 1 / tt) / (1 / tt * np.sqrt(2.0 / n))
    assert abs(z_var) < 4.0
    # tau drawn given the new mu: E[tau | mu] = (alpha + 1/2) / (beta + (w - mu)^2 / 2)
    expected = (2.5 / (1.5 + 0.5 * (0.6 - Mu) ** 2)).mean()
    sd = np.sqrt((2.5 / (1.5 + 0.5 * (0.6 - Mu) ** 2) ** 2).mean() / n)
    assert abs(Tau.mean() - expected) / sd < 4.0
