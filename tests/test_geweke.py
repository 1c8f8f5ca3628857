"""Geweke (2004) joint-distribution test of the W / sigma^2 (/ mu, tau) updates with
the basis J fixed.

Marginal-conditional simulator: (theta, A) drawn forward, theta from the prior (GBTN
by rejection, MODEL_NOTES 1), A ~ N(C W, sigma^2). Successive-conditional simulator:
alternate one Gibbs scan theta | A with a fresh A | theta. Both have the joint law as
stationary distribution iff the conditionals are right, so the means of test
functions must agree within Monte Carlo error (batch means for the correlated chain).
A planted bug (a prior precision x 1.3: W's in the GBT sweep, mu's in the GBTN
hyper step) must be caught.
"""

import numpy as np
import pytest

from dask_bid.kernels.priors import Priors
from dask_bid.kernels.stats import draw_sigma2
from dask_bid.kernels.sweep import draw_hyper_block, draw_prior_block, sweep_block

M, N, K = 6, 3, 2
N_MC = 60_000
N_SC = 60_000
Z_MAX = 4.5  # ~ 1e-5 two-sided per statistic; about 20 statistics per test


def _priors(model):
    # sigma^2 ~ InvGamma(3, 2) so that the test functions have finite variances
    return Priors(hierarchical=model == "gbtn", alpha_sigma=3.0, beta_sigma=2.0)


def _design():
    return np.random.default_rng(2024).standard_normal((M, K))


def _stats(W, sigma2, A, Mu=None, Tau=None):
    """Test functions, one row per draw: W, W^2, sigma^2, 1/sigma^2, A_00, A^2 mean,
    W_0 * W_1 cross moments, and for GBTN mean mu, mean mu^2, mean log tau."""
    n = W.shape[0]
    Wf = W.reshape(n, -1)
    cols = [Wf, Wf**2, sigma2[:, None], 1.0 / sigma2[:, None],
            A.reshape(n, -1)[:, :1], (A.reshape(n, -1) ** 2).mean(1, keepdims=True),
            (W[:, 0, :] * W[:, 1, :])]
    if Mu is not None:
        cols += [Mu.reshape(n, -1).mean(1, keepdims=True),
                 (Mu.reshape(n, -1) ** 2).mean(1, keepdims=True),
                 np.log(Tau.reshape(n, -1)).mean(1, keepdims=True)]
    return np.concatenate(cols, axis=1)


def _marginal_conditional(pri, C, rng):
    W, Mu, Tau = draw_prior_block(rng, (N_MC, K, N), pri)
    sigma2 = pri.beta_sigma / rng.standard_gamma(pri.alpha_sigma, N_MC)
    A = np.einsum("mk,ikn->imn", C, W) + np.sqrt(sigma2)[:, None, None] * rng.standard_normal(
        (N_MC, M, N))
    return _stats(W, sigma2, A, Mu, Tau)


def _successive_conditional(pri, C, rng, sweep_priors, hyper_priors):
    G = C.T @ C
    W, Mu, Tau = draw_prior_block(rng, (K, N), pri)
    sigma2 = pri.beta_sigma / rng.standard_gamma(pri.alpha_sigma)
    A = C @ W + np.sqrt(sigma2) * rng.standard_normal((M, N))
    Ws = np.empty((N_SC, K, N))
    s2 = np.empty(N_SC)
    As = np.empty((N_SC, M, N))
    Mus = np.empty((N_SC, K, N)) if pri.hierarchical else None
    Taus = np.empty((N_SC, K, N)) if pri.hierarchical else None
    for t in range(N_SC):
        R = A - C @ W
        sigma2 = draw_sigma2(rng, float(np.sum(R * R)), M * N, pri.alpha_sigma, pri.beta_sigma)
        sweep_block(rng, G, C.T @ A, W, sigma2, sweep_priors, Mu, Tau)
        if pri.hierarchical:
            draw_hyper_block(rng, W, Mu, Tau, hyper_priors)
            Mus[t], Taus[t] = Mu, Tau
        A = C @ W + np.sqrt(sigma2) * rng.standard_normal((M, N))
        Ws[t], s2[t], As[t] = W, sigma2, A
    return _stats(Ws, s2, As, Mus, Taus)


def _batch_se(x, n_batches=100):
    b = x[: len(x) // n_batches * n_batches].reshape(n_batches, -1, x.shape[1]).mean(1)
    return b.std(0, ddof=1) / np.sqrt(n_batches)


def geweke_z(model, bug=False, seed=0):
    pri = _priors(model)
    C = _design()
    rng = np.random.default_rng(seed)
    mc = _marginal_conditional(pri, C, rng)
    sweep_priors = hyper_priors = pri
    if bug and model == "gbt":
        sweep_priors = pri._replace(tau=pri.tau * 1.3)  # W's prior precision
    elif bug:
        hyper_priors = pri._replace(tau_mu=pri.tau_mu * 1.3)  # mu's prior precision
    sc = _successive_conditional(pri, C, rng, sweep_priors, hyper_priors)
    se_mc = mc.std(0, ddof=1) / np.sqrt(len(mc))
    se_sc = _batch_se(sc)
    return (mc.mean(0) - sc.mean(0)) / np.sqrt(se_mc**2 + se_sc**2)


@pytest.mark.parametrize("model", ["gbt", "gbtn"])
def test_geweke_passes(model):
    z = geweke_z(model)
    assert np.all(np.isfinite(z))
    assert np.max(np.abs(z)) < Z_MAX, z


@pytest.mark.parametrize("model", ["gbt", "gbtn"])
def test_geweke_catches_planted_bug(model):
    z = geweke_z(model, bug=True)
    assert np.max(np.abs(z)) > Z_MAX, z
