"""The Gibbs sweep of one block of W columns, and GBTN's (mu, tau) draws.

Columns of W are conditionally independent given C and sigma^2, so a block is
swept on its own from G = C^T C (K x K), H = C^T A[:, block] and sigma^2.
Within a column the K entries are drawn in order. The conditional of w_kn needs
r_k = (G w_n)_k with the entries j < k already redrawn; it is formed lazily when
entry k is drawn,

    r_k = (G W_old)_kn + sum_{j < k} G_kj (w_new,jn - w_old,jn),

from one BLAS product G W_old before the sweep: K^2 / 2 multiply-adds per
column and no pass over A. <W, G W> after the sweep follows from the same
quantities with O(1) work per entry (see ``_sweep``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .truncnorm import gtn_draw

__all__ = ["sweep_block", "conditional_params", "draw_hyper_block", "draw_prior_block",
           "block_quadratics"]

# Columns drawn together: entry k of TILE columns at a time, so the lazy sums of r_k run
# over a contiguous row of TILE columns that numba vectorises without reassociation flags
# (a per-column dot product is a serial reduction, about as slow as the old axpy updates).
# 128 columns of D (K x 128 doubles, 150 KB at K = 150) stay in L2.
_TILE = 128


# error_model="numpy": no ZeroDivisionError branches in the hot loop, which would
# otherwise keep numba from pruning the Generator's refcounting around every draw
@njit(nogil=True, cache=True, inline="always", error_model="numpy")
def _conditional(h_kn, r_k, g_kk, w_kn, inv_s2, m, t):
    # w_kn | rest ~ GTN(mt, 1/tt): tt = G_kk / s2 + tau, and the data term is
    # c_k^T (a_n - sum_{j != k} c_j w_jn) = H_kn - (G w)_k + G_kk w_kn
    tt = g_kk * inv_s2 + t
    mt = ((h_kn - r_k + g_kk * w_kn) * inv_s2 + t * m) / tt
    return mt, tt


def conditional_params(G, h_n, w_n, k, sigma2, mu, tau):
    """Parent mean and precision (mu~, tau~) of w_kn given the rest of column n.

    The formula the sweep uses, exposed for tests: ``h_n`` = H[:, n], ``w_n`` = W[:, n].
    """
    r = np.asarray(G, dtype=np.float64) @ np.asarray(w_n, dtype=np.float64)
    return _conditional(float(h_n[k]), float(r[k]), float(G[k, k]), float(w_n[k]),
                        1.0 / sigma2, float(mu), float(tau))


@njit(nogil=True, cache=True, error_model="numpy")
def _sweep(gen, G, H, W, R, Mu, Tau, hier, mu0, tau0, inv_s2, a, b, mode):
    # Row-major (K x nb) W, H, R = G W_old, Mu, Tau. The block is cut into tiles of _TILE
    # columns; within a tile entry k of every column is drawn before entry k + 1, so each
    # column sees its own entries j < k already redrawn, as in a column-by-column sweep.
    # D[j, l] = w_new - w_old of entry j of the tile's column l; acc[l] = r_k of column l.
    # With d = w_new - w_old and s_k = sum_{j<k} G_kj d_j (so r_k = R_k + s_k),
    # w_new^T G w_new = w_old^T G w_old + 2 d^T G w_old + d^T G d
    #                 = sum_k [w_old,k R_k + d_k (2 r_k + G_kk d_k)],
    # accumulated per entry: no second K^2 product for <W, G W>.
    K, nb = W.shape
    D = np.zeros((K, _TILE))
    acc = np.zeros(_TILE)
    wgw = 0.0
    for n0 in range(0, nb, _TILE):
        L = min(_TILE, nb - n0)
        if L < _TILE:
            # lanes past the block's end take part in the vector sums; keep them finite
            D[:, L:] = 0.0
            acc[L:] = 0.0
        for k in range(K):
            gk = G[k]
            rk = R[k]
            for l in range(L):
                acc[l] = rk[n0 + l]
            # sum_{j<k} G_kj D[j, :], two rows at a time (one load and store of acc per
            # pair); the order of the additions is fixed here, not left to the compiler
            k2 = k - k % 2
            for j in range(0, k2, 2):
                g0 = gk[j]
                g1 = gk[j + 1]
                d0 = D[j]
                d1 = D[j + 1]
                for l in range(_TILE):
                    acc[l] += g0 * d0[l] + g1 * d1[l]
            if k2 < k:
                g0 = gk[k2]
                d0 = D[k2]
                for l in range(_TILE):
                    acc[l] += g0 * d0[l]
            gkk = G[k, k]
            wk = W[k]
            hk = H[k]
            dk = D[k]
            for l in range(L):
                n = n0 + l
                if hier:
                    m = Mu[k, n]
                    t = Tau[k, n]
                else:
                    m = mu0
                    t = tau0
                old = wk[n]
                mt, tt = _conditional(hk[n], acc[l], gkk, old, inv_s2, m, t)
                if mode:
                    # iterated conditional modes: the GTN's mode is its clipped parent mean
                    new = min(max(mt, a), b)
                else:
                    new = gtn_draw(gen, mt, tt, a, b)
                d = new - old
                dk[l] = d
                wk[n] = new
                wgw += old * rk[n] + d * (2.0 * acc[l] + gkk * d)
    return wgw


@njit(nogil=True, cache=True, error_model="numpy")
def _sweep_masked(gen, Gn, Ht, Wt, Mut, Taut, hier, mu0, tau0, inv_s2, a, b, mode):
    # missing="mask": column n has its own Gram Gn[n] over its observed rows, so columns
    # share no G and are swept one at a time, column-major (row n of Wt is column n of W).
    # r = Gn[n] w_n is formed here and kept current with one contiguous axpy per drawn
    # entry, which also leaves G w_new for <W, G W>.
    nb, K = Wt.shape
    r = np.empty(K)
    wgw = 0.0
    for n in range(nb):
        w = Wt[n]
        h = Ht[n]
        G = Gn[n]
        for k in range(K):
            acc = 0.0
            for j in range(K):
                acc += G[k, j] * w[j]
            r[k] = acc
        for k in range(K):
            gkk = G[k, k]
            old = w[k]
            if hier:
                m = Mut[n, k]
                t = Taut[n, k]
            else:
                m = mu0
                t = tau0
            mt, tt = _conditional(h[k], r[k], gkk, old, inv_s2, m, t)
            if mode:
                new = min(max(mt, a), b)
            else:
                new = gtn_draw(gen, mt, tt, a, b)
            d = new - old
            if d != 0.0:
                gk = G[k]
                for j in range(K):
                    r[j] += gk[j] * d
            w[k] = new
        for k in range(K):
            wgw += w[k] * r[k]
    return wgw


def sweep_block(gen, G, H, W, sigma2, priors, Mu=None, Tau=None, mode=False, Gn=None):
    """One Gibbs sweep of every entry of ``W`` (K x nb), in place.

    Parameters
    ----------
    gen : numpy.random.Generator
    G : (K, K) float64, C^T C
    H : (K, nb) float64, C^T A[:, block]
    W : (K, nb) float64, current values, overwritten with the new draws
    sigma2 : float
    priors : Priors
    Mu, Tau : (K, nb) float64 or None
        Per-entry GTN parameters (GBTN); None uses ``priors.mu``, ``priors.tau`` (GBT).
    mode : bool
        Set each entry to its conditional mode instead of drawing it (one sweep of
        iterated conditional modes towards the MAP of W given C and sigma^2).
    Gn : (nb, K, K) float64 or None
        Per-column Gram matrices over each column's observed rows (``missing="mask"``);
        when given, ``G`` is ignored.

    Returns
    -------
    hw, wgw : float
        <H, W> and <W, G W> over the block after the sweep, the block's share of
        SSE = ||A||^2 - 2 <H, W> + <W, G W>.

    Notes
    -----
    Each column's entries are drawn in the order k = 0, ..., K-1 from their exact full
    conditionals. Without ``Gn`` the columns are visited in tiles of 128, entry k of the
    whole tile before entry k + 1, so the Generator's numbers are consumed in that order.
    """
    hier = Mu is not None
    dummy = np.zeros((1, 1))
    if gen is None:  # mode=True draws nothing; the kernel still needs a Generator type
        gen = np.random.default_rng(0)
    args = (float(priors.mu), float(priors.tau), 1.0 / float(sigma2),
            float(priors.a), float(priors.b), bool(mode))
    if Gn is not None:
        Wt = np.ascontiguousarray(W.T)
        wgw = _sweep_masked(gen, Gn, np.ascontiguousarray(H.T), Wt,
                            np.ascontiguousarray(Mu.T) if hier else dummy,
                            np.ascontiguousarray(Tau.T) if hier else dummy, hier, *args)
        W[...] = Wt.T
        return float(np.vdot(H, W)), float(wgw)
    G = np.ascontiguousarray(G, dtype=np.float64)
    H = np.ascontiguousarray(H, dtype=np.float64)
    Wc = np.ascontiguousarray(W, dtype=np.float64)  # W itself when it is C-contiguous
    wgw = _sweep(gen, G, H, Wc, G @ Wc,
                 np.ascontiguousarray(Mu) if hier else dummy,
                 np.ascontiguousarray(Tau) if hier else dummy, hier, *args)
    if Wc is not W:
        W[...] = Wc
    return float(np.vdot(H, Wc)), float(wgw)


@njit(nogil=True, cache=True, error_model="numpy")
def _hyper(gen, W, Mu, Tau, mu_mu, tau_mu, alpha_t, beta_t):
    K, nb = W.shape
    shape = alpha_t + 0.5
    for n in range(nb):
        for k in range(K):
            t = Tau[k, n]
            tt = t + tau_mu
            mt = (t * W[k, n] + tau_mu * mu_mu) / tt
            m = mt + gen.standard_normal() / math.sqrt(tt)
            Mu[k, n] = m
            dev = W[k, n] - m
            rate = beta_t + 0.5 * dev * dev
            Tau[k, n] = gen.standard_gamma(shape) / rate


def draw_hyper_block(gen, W, Mu, Tau, priors):
    """GBTN: draw mu_kn | tau_kn, w_kn then tau_kn | mu_kn, w_kn for a block, in place."""
    _hyper(gen, W, Mu, Tau, float(priors.mu_mu), float(priors.tau_mu),
           float(priors.alpha_t), float(priors.beta_t))


@njit(nogil=True, cache=True)
def _prior_gbt(gen, out, mu, tau, a, b):
    for i in range(out.size):
        out.flat[i] = gtn_draw(gen, mu, tau, a, b)


@njit(nogil=True, cache=True)
def _prior_gbtn(gen, W, Mu, Tau, mu_mu, tau_mu, alpha_t, beta_t, a, b):
    # Forward simulation of the joint prior of (mu, tau, w) by rejection: with the
    # normaliser read as Z(mu, tau) (MODEL_NOTES 1) the joint is the unconstrained
    # triple conditioned on a <= w <= b.
    sd_mu = 1.0 / math.sqrt(tau_mu)
    for i in range(W.size):
        while True:
            m = mu_mu + sd_mu * gen.standard_normal()
            t = gen.standard_gamma(alpha_t) / beta_t
            if t <= 0.0:
                continue
            w = m + gen.standard_normal() / math.sqrt(t)
            if a <= w <= b:
                W.flat[i] = w
                Mu.flat[i] = m
                Tau.flat[i] = t
                break


def draw_prior_block(gen, shape, priors):
    """Draw W (and for GBTN, Mu and Tau) of ``shape`` from the prior.

    Returns ``(W, Mu, Tau)``; ``Mu`` and ``Tau`` are None for GBT.
    """
    W = np.empty(shape)
    if not priors.hierarchical:
        _prior_gbt(gen, W, float(priors.mu), float(priors.tau), float(priors.a), float(priors.b))
        return W, None, None
    Mu = np.empty(shape)
    Tau = np.empty(shape)
    _prior_gbtn(gen, W, Mu, Tau, float(priors.mu_mu), float(priors.tau_mu),
                float(priors.alpha_t), float(priors.beta_t), float(priors.a), float(priors.b))
    return W, Mu, Tau


def block_quadratics(G, H, W):
    """<H, W> and <W, G W> of a block, computed directly (no sweep)."""
    return float(np.vdot(H, W)), float(np.vdot(W, G @ W))
