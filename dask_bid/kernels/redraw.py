"""The redraw swap: slot k moves to column u and every column of W is drawn afresh.

The pivot swap (:mod:`.pivot`) carries W_{-k} over by a linear map; where the two bases
want different W_{-k} (correlated basis columns, or a masked column whose observed rows
see the bases differently) the mapped W is a poor state under J' and the move is
rejected even when J' is the better basis. The redraw swap is a Metropolis-Hastings
move on (J, W) with an independence proposal for the whole of W:

* J' = J with slot k <- u (k uniform, u uniform outside J: a symmetric proposal);
* every column n of W gets w'_n from the GHK proposal of its full conditional under J'
  (:func:`.pivot.ghk_column`: the sequence of truncated conditionals of the column's
  Gaussian posterior restricted to the box, whose density is known);
* the acceptance ratio is prod_n [target_J'(w'_n) / q_J'(w'_n)] / [target_J(w_n) /
  q_J(w_n)], the columns' GHK weights: each is an unbiased-in-expectation estimate of the
  column's marginal likelihood with all of w_n integrated out, so the move accepts in
  proportion to p(J' | A, sigma^2) / p(J | A, sigma^2) up to the weights' noise, which
  is small where the columns' posteriors lie inside the box.

It leaves p(J, W | sigma^2, A) invariant for any proposal density that is evaluated
exactly, as GHK's is (docs/model.md, "The redraw swap"). GBTN: the slot hyperparameters
(Mu, Tau) stay with their slots, as in the other swaps. Masked (``missing="mask"``):
every column's Gram and right-hand side are over its observed rows, so the proposal of
each column uses its own Gram, and nothing else changes.

Everything here is one column block: the engine adds the blocks' sums.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .collapsed import _HALF_LOG_2PI
from .pivot import _ghk

__all__ = ["redraw_block"]


@njit(nogil=True, cache=True, error_model="numpy")
def _prep(G, tau, sigma2, Lr, LS):
    # Lambda = G / sigma^2 + diag(tau): its Cholesky factor in reversed coordinate order
    # (Lr, for the mean), and the Cholesky factor of Lambda^-1 (LS, for GHK), which is
    # the reversal of Lr^-T: one K^3/6 factorisation and one K^3/6 triangular inverse,
    # where inverting and factorising Lambda^-1 directly costs several times that.
    # Returns log det(Lambda), or nan if Lambda is not positive definite.
    K = G.shape[0]
    logdet = 0.0
    for j in range(K):
        s = G[K - 1 - j, K - 1 - j] / sigma2 + tau[K - 1 - j]
        for m in range(j):
            s -= Lr[j, m] * Lr[j, m]
        if not s > 0.0:
            return np.nan
        Lr[j, j] = np.sqrt(s)
        logdet += 2.0 * np.log(Lr[j, j])
        for i in range(j + 1, K):
            t = G[K - 1 - i, K - 1 - j] / sigma2
            for m in range(j):
                t -= Lr[i, m] * Lr[j, m]
            Lr[i, j] = t / Lr[j, j]
    # X = Lr^-1 (lower triangular), column by column, stored as LS[i, j] = X[K-1-j, K-1-i]
    # (only LS's lower triangle is written and read)
    for c in range(K):
        for i in range(c, K):
            t = 1.0 if i == c else 0.0
            for m in range(c, i):
                t -= Lr[i, m] * LS[K - 1 - c, K - 1 - m]
            LS[K - 1 - c, K - 1 - i] = t / Lr[i, i]
    return logdet


@njit(nogil=True, cache=True, error_model="numpy")
def _ghk_prepared(gen, Lr, LS, logdet, h, mu, tau, sigma2, a, b, w, draw, rhs, m):
    # the GHK log weight of column w (drawn into w if ``draw``) given _prep's factors:
    # the same quantity as pivot._ghk_column, computed from one factorisation
    K = h.size
    for i in range(K):
        rhs[i] = h[i] / sigma2 + tau[i] * mu[i]
    # Lambda m = rhs in reversed order: Lr y = rhs~, Lr^T m~ = y
    for i in range(K):
        t = rhs[K - 1 - i]
        for j in range(i):
            t -= Lr[i, j] * m[K - 1 - j]
        m[K - 1 - i] = t / Lr[i, i]
    for i in range(K - 1, -1, -1):
        t = m[K - 1 - i]
        for j in range(i + 1, K):
            t -= Lr[j, i] * m[K - 1 - j]
        m[K - 1 - i] = t / Lr[i, i]
    logz = _ghk(gen, m, LS, a, b, w, draw)
    quad = 0.0
    for i in range(K):
        quad += m[i] * rhs[i]
    return 0.5 * quad - 0.5 * logdet + K * _HALF_LOG_2PI + logz


@njit(nogil=True, cache=True, error_model="numpy")
def _redraw_block(gen, G, G2, Gn, q, H, W, Mu, Tau, hier, mu0, tau0, k, crow, sigma2, a,
                  b, masked, out_w):
    K, nb = W.shape
    total = 0.0
    h = np.empty(K)
    w = np.empty(K)
    mu = np.full(K, mu0)
    tau = np.full(K, tau0)
    rhs = np.empty(K)
    m = np.empty(K)
    Gc = np.empty((K, K))
    L1, S1 = np.zeros((K, K)), np.zeros((K, K))  # J's factors
    L2, S2 = np.zeros((K, K)), np.zeros((K, K))  # J''s factors
    shared = not masked and not hier
    if shared:  # one Gram and one prior for every column: factorise once
        ld1 = _prep(G, tau, sigma2, L1, S1)
        ld2 = _prep(G2, tau, sigma2, L2, S2)
    for n in range(nb):
        if hier:
            for i in range(K):
                mu[i] = Mu[i, n]
                tau[i] = Tau[i, n]
        for i in range(K):
            h[i] = H[i, n]
            w[i] = W[i, n]
        if not shared:
            if masked:
                for i in range(K):
                    for j in range(K):
                        Gc[i, j] = Gn[n, i, j]
                ld1 = _prep(Gc, tau, sigma2, L1, S1)
                for i in range(K):
                    Gc[k, i] = q[i, n]
                    Gc[i, k] = q[i, n]
                ld2 = _prep(Gc, tau, sigma2, L2, S2)
            else:
                ld1 = _prep(G, tau, sigma2, L1, S1)
                ld2 = _prep(G2, tau, sigma2, L2, S2)
        if not (np.isfinite(ld1) and np.isfinite(ld2)):
            return -np.inf
        # the current column under J, evaluated (the reverse move's proposal)
        old = _ghk_prepared(gen, L1, S1, ld1, h, mu, tau, sigma2, a, b, w, False, rhs, m)
        # the new column under J' (slot k <- u: row k of h is a_u^T a_n), drawn
        h[k] = crow[n]
        new = _ghk_prepared(gen, L2, S2, ld2, h, mu, tau, sigma2, a, b, w, True, rhs, m)
        total += new - old
        for i in range(K):
            out_w[i, n] = w[i]
    return total


def redraw_block(gen, G, G2, H, W, Mu, Tau, priors, k, crow, sigma2, Gn=None, q=None):
    """One block's share of the redraw swap's log acceptance ratio, and its new W.

    Parameters
    ----------
    gen : numpy.random.Generator
        The block's stream for this attempt (the same in the score and the apply pass,
        so that both draw the same W').
    G, G2 : (K, K) arrays
        The Gram of the current basis J and of J' (slot k <- u); unused when masked.
    H, W : (K, nb) arrays
        C^T A[:, block] and W[:, block] under J.
    Mu, Tau : (K, nb) arrays or None
        GBTN's slot hyperparameters (None for GBT: ``priors.mu``, ``priors.tau``).
    k : int
        The slot that takes column u.
    crow : (nb,) array
        a_u^T A[:, block] (missing entries as 0): row k of H under J'.
    Gn : (nb, K, K) array, optional
        ``missing="mask"``: every column's Gram of J over its observed rows.
    q : (K, nb) array, optional
        ``missing="mask"``: row k of every column's Gram under J'.

    Returns
    -------
    (float, ndarray)
        sum over the block's columns of log GHK weight of w'_n under J' minus that of
        w_n under J, and W' (K, nb).
    """
    masked = Gn is not None
    K, nb = W.shape
    hier = Mu is not None
    out_w = np.empty((K, nb))
    e2 = np.empty((1, 1))
    total = _redraw_block(
        gen, np.ascontiguousarray(G if not masked else e2, np.float64),
        np.ascontiguousarray(G2 if not masked else e2, np.float64),
        np.ascontiguousarray(Gn if masked else np.empty((1, 1, 1)), np.float64),
        np.ascontiguousarray(q if masked else e2, np.float64),
        np.ascontiguousarray(H, np.float64), np.ascontiguousarray(W, np.float64),
        Mu if hier else e2, Tau if hier else e2, hier, float(priors.mu), float(priors.tau),
        int(k), np.ascontiguousarray(crow, np.float64), float(sigma2), float(priors.a),
        float(priors.b), masked, out_w)
    return float(total), out_w
