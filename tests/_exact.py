"""Exact posteriors of tiny problems by quadrature, for tests of the real chains.

p(J | A) for every K-subset J, with W integrated over the box by tensor Gauss-Legendre
quadrature (K = 2) and sigma^2 by the trapezoidal rule on a log grid. Independent of the
package's kernels: only numpy and scipy.
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy import special, stats


def gtn_prior_logpdf(w, priors):
    """Log prior density of one W entry (normalised on [a, b]).

    GBT: GTN(mu, 1/tau, a, b). GBTN: the joint (mu, tau, w) restricted to a <= w <= b
    (MODEL_NOTES 1), so w's marginal is the unconstrained marginal restricted: w | tau
    ~ N(mu_mu, 1/tau + 1/tau_mu), tau ~ Gamma(alpha_t, beta_t), integrated numerically.
    """
    a, b = priors.a, priors.b
    if not priors.hierarchical:
        sd = 1.0 / np.sqrt(priors.tau)
        z = stats.norm.cdf(b, priors.mu, sd) - stats.norm.cdf(a, priors.mu, sd)
        return stats.norm.logpdf(w, priors.mu, sd) - np.log(z)
    # Gauss-Laguerre over tau ~ Gamma(alpha_t, rate beta_t)
    x, wt = special.roots_genlaguerre(80, priors.alpha_t - 1.0)
    tau = x / priors.beta_t
    lw = np.log(wt) - special.gammaln(priors.alpha_t)
    var = 1.0 / tau + 1.0 / priors.tau_mu
    w = np.asarray(w, dtype=np.float64)
    dens = stats.norm.logpdf(w[..., None], priors.mu_mu, np.sqrt(var)) + lw
    logp = special.logsumexp(dens, axis=-1)
    # normalise on [a, b] with a fine grid
    g = np.linspace(a, b, 4001)
    dg = special.logsumexp(stats.norm.logpdf(g[:, None], priors.mu_mu, np.sqrt(var)) + lw,
                           axis=-1)
    z = np.trapezoid(np.exp(dg), g)
    return logp - np.log(z)


def _log_joint(A, K, priors, n_quad, n_sigma, log_s2_range, mask=None):
    """(subsets, s grid, f[J, s]) with f = log p(A, J, sigma^2 = e^s) + s (the Jacobian
    of s = log sigma^2), J uniform (a constant dropped). ``mask``: the likelihood counts
    the observed entries only (A holds 0 elsewhere)."""
    A = np.asarray(A, dtype=np.float64)
    M, N = A.shape
    obs = np.ones((M, N)) if mask is None else np.asarray(mask, dtype=np.float64)
    n_obs = obs.sum()
    a, b = priors.a, priors.b
    # P(w > 0) integrates a step at 0, which one Gauss-Legendre rule over [a, b] does not
    # integrate exactly: over (-0.5, 2) it was off by a node's width (0.226 for 0.2425, a
    # false |z| of 4.5-7 against a correct chain), over (-1, 1) by ~4e-4. The rule is
    # split at 0, half the nodes on each side (the same grid size)
    split = a < 0.0 < b
    x0, w0 = special.roots_legendre(n_quad // 2 if split else n_quad)
    pieces = [(a, 0.0), (0.0, b)] if split else [(a, b)]
    x = np.concatenate([0.5 * (hi - lo) * x0 + 0.5 * (hi + lo) for lo, hi in pieces])
    wq = np.concatenate([0.5 * (hi - lo) * w0 for lo, hi in pieces])
    W1, W2 = np.meshgrid(x, x, indexing="ij")
    Wg = np.stack([W1.ravel(), W2.ravel()])  # (2, Q)
    log_wq = np.log(np.outer(wq, wq).ravel())
    log_prior = gtn_prior_logpdf(Wg, priors).sum(axis=0)
    if log_s2_range is None:
        # around the residual variances of the subsets: wide enough for their posteriors
        lo = np.log(max(np.var(A) * 1e-4, 1e-12))
        log_s2_range = (lo - 4.0, np.log(np.mean(A * A) * 4.0) + 4.0)
    s = np.linspace(*log_s2_range, n_sigma)
    s2 = np.exp(s)
    log_ps2 = stats.invgamma.logpdf(s2, priors.alpha_sigma, scale=priors.beta_sigma) + s
    base = log_prior + log_wq
    E = np.exp(base - base.max())  # (Q,)
    subsets = list(itertools.combinations(range(N), K))
    F = np.empty((len(subsets), n_sigma))
    # P(w_kn > 0 | J, sigma^2, A) per subset, grid point, row (sorted J order), column
    pos = np.empty((len(subsets), n_sigma, K, N))
    up = (Wg > 0).astype(float)  # (K, Q)
    for j, J in enumerate(subsets):
        C = A[:, list(J)]
        R = A[:, :, None] - (C @ Wg)[:, None, :]  # (M, N, Q)
        sse = np.einsum("mnq,mnq,mn->nq", R, R, obs)  # (N, Q), observed entries only
        # per column, shift by its best grid point so exp() cannot underflow wholesale
        lo = sse.min(axis=1, keepdims=True)
        d = sse - lo
        for i, v in enumerate(s2):
            P = np.exp(-d / (2.0 * v)) * E  # (N, Q)
            t = P.sum(axis=1)  # (N,)
            pos[j, i] = (up @ P.T) / t
            F[j, i] = (np.log(t) - lo[:, 0] / (2.0 * v)).sum() + N * base.max() \
                - 0.5 * n_obs * np.log(2 * np.pi * v)
        F[j] += log_ps2
    return subsets, s, F, pos


def posterior_tables(A, K, priors, *, n_quad=60, n_sigma=400, log_s2_range=None,
                     levels=(0.1, 0.3, 0.5, 0.7, 0.9), mask=None):
    """Exact posterior summaries (K = 2): ``subsets`` {J: p(J | A)}, the sigma^2
    quantiles at ``levels`` of its marginal posterior, and ``positive`` {J: (K, N)
    array of P(J, w_kn > 0 | A)}, rows of W in sorted J order."""
    if K != 2:
        raise ValueError("quadrature is tensor Gauss-Legendre in K = 2 dimensions")
    subsets, s, F, pos = _log_joint(A, K, priors, n_quad, n_sigma, log_s2_range, mask)
    top = F.max()
    dens = np.exp(F - top)  # (J, s)
    mass = np.trapezoid(dens, s, axis=1)
    pJ = mass / mass.sum()
    # P(J, w_kn > 0 | A), rows in sorted J order
    positive = np.trapezoid(dens[:, :, None, None] * pos, s, axis=1) / mass.sum()
    ds = dens.sum(axis=0)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (ds[1:] + ds[:-1]) * np.diff(s))])
    cdf /= cdf[-1]
    q = np.exp(np.interp(levels, cdf, s))
    return {"subsets": dict(zip(subsets, pJ, strict=True)), "sigma2_quantiles": q,
            "levels": np.asarray(levels),
            "positive": dict(zip(subsets, positive, strict=True))}


def subset_posterior(A, K, priors, *, n_quad=120, n_sigma=600, log_s2_range=None):
    """{sorted subset J: p(J | A)} with J uniform a priori (K = 2 only)."""
    return posterior_tables(A, K, priors, n_quad=n_quad, n_sigma=n_sigma,
                            log_s2_range=log_s2_range)["subsets"]
