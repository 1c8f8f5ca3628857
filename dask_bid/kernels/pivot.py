"""The pivot swap: slot k moves to column u and the other rows of W follow.

The collapsed swap (:mod:`.collapsed`) integrates out row k of W but keeps the other
rows W_{-k} fixed, so it only accepts columns that explain what the outgoing column
explained with the same W_{-k}: near-copies. The pivot swap is a Metropolis-Hastings
move on (J, W) that also moves W_{-k}:

* Orientation. Of the two bases J (slot k holds p) and J' (slot k holds u), the one
  whose slot-k column has the smaller index is the *source* s, the other the target t;
  a_s is the source's slot column. Everything below depends on the unordered pair
  {J, J'} and this orientation only, so the move from J' back to J uses the inverse map.
* The map. With m_n(w) = (a_s^T a_n - g_s^T w_{-k}) / ||a_s||^2 (the least-squares
  coefficient of a_s for column n given the other rows; g_s = C_{-k}^T a_s) and d the
  least-squares coefficients of the other basis columns in a_s ~ C_t x (rows != k),
  source -> target is w'_{-k} = w_{-k} + d m_n(w): the columns that used a_s now use
  its representation in the target basis. It is affine with Jacobian
  det = 1 - g_s^T d / ||a_s||^2 per column; target -> source is its inverse,
  w_{-k} = w'_{-k} - d (a_s^T a_n - g_s^T w'_{-k}) / (||a_s||^2 - g_s^T d).
* Row k of every other column is integrated out and redrawn from its exact
  conditional, as in the collapsed swap: the column's term in the ratio is its log
  marginal with row k integrated (:func:`column_terms`).
* The two columns p and u themselves (the outgoing column must be refitted, the
  incoming one becomes e_k) get a fresh proposal: the GHK sequence of truncated
  conditionals of their Gaussian full conditional under J' (:func:`ghk_column`); its
  density enters the ratio, evaluated for the old column under J on the way back.

The log acceptance ratio is then sum over the other columns of (their terms under J'
minus under J) + (N - 2) log|det| (source -> target; minus for the inverse) + the GHK
terms of p and u, and the move leaves p(J, W | sigma^2, A) invariant (docs/model.md).
A map that leaves the box [a, b] for some column is rejected (the target is 0 there).

Masked (``missing="mask"``, :func:`pivot_block_masked`): every column n has its own Gram
over its observed rows, so every quantity of the map is per column (d_n, g_s,n,
||a_s||^2_n and the Jacobian det_n), computed in the block from the column's Gram and the
incoming column's products over the column's observed rows; the blocks then return
sum_n log|det_n| with their columns' terms.

Everything here is one column block or one column: the engine adds the blocks' sums.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .collapsed import _HALF_LOG_2PI, _log_mass, _slot_term
from .linalg import cho_solve_into
from .truncnorm import gtn_draw

__all__ = ["pivot_block", "pivot_block_masked", "ghk_column"]


@njit(nogil=True, cache=True, error_model="numpy")
def _mapped_column(W, H, Mu, Tau, hier, mu0, tau0, n, k, gw0, gkk, d, gs, dGd, hs, denom,
                   sign, gnew, crow_n, squ, inv_s2, a, b, wp, write, out_w, out_h):
    # column n's term of the ratio: its log marginal with row k integrated at the mapped
    # w_{-k} under J' minus at w_{-k} under J. gw0 = G w0 (w0: the column with row k
    # zeroed; G the column's Gram now), gkk = G_kk, gnew / squ: row k / entry kk of the
    # Gram after the swap; the mapped rows go to wp (and, with ``write``, to column n of
    # out_w, the new slot's h to out_h[n]). Returns (term, whether the mapped column
    # stays in [a, b])
    K = W.shape[0]
    q0 = 0.0
    lin0 = 0.0
    dgw = 0.0
    dh = 0.0
    sdot = 0.0
    pri0 = 0.0
    pri1 = 0.0
    hk = H[k, n]
    for i in range(K):
        if i == k:
            hk -= gw0[i]
            continue
        wi = W[i, n]
        q0 += wi * gw0[i]
        lin0 += wi * H[i, n]
        dgw += d[i] * gw0[i]
        dh += d[i] * H[i, n]
        sdot += gs[i] * wi
    m = (hs - sdot) / denom
    sm = sign * m
    hnew = crow_n
    ok = True
    for i in range(K):
        if i == k:
            wp[i] = 0.0
            continue
        wi = W[i, n]
        v = wi + sm * d[i]
        if v < a or v > b:
            ok = False
        wp[i] = v
        hnew -= gnew[i] * v
        if hier:
            pri0 -= 0.5 * Tau[i, n] * (wi - Mu[i, n]) ** 2
            pri1 -= 0.5 * Tau[i, n] * (v - Mu[i, n]) ** 2
        else:
            pri0 -= 0.5 * tau0 * (wi - mu0) ** 2
            pri1 -= 0.5 * tau0 * (v - mu0) ** 2
    if not ok:
        return -np.inf, False
    if write:
        for i in range(K):
            if i != k:
                out_w[i, n] = wp[i]
        out_h[n] = hnew
    q1 = q0 + 2.0 * sm * dgw + m * m * dGd
    lin1 = lin0 + sm * dh
    muk = Mu[k, n] if hier else mu0
    tauk = Tau[k, n] if hier else tau0
    l0 = 0.5 * (2.0 * lin0 - q0) * inv_s2 + _slot_term(gkk, hk, muk, tauk, inv_s2, a, b)
    l1 = 0.5 * (2.0 * lin1 - q1) * inv_s2 + _slot_term(squ, hnew, muk, tauk, inv_s2, a, b)
    return (l1 + pri1) - (l0 + pri0), True


@njit(nogil=True, cache=True, error_model="numpy")
def _pivot_block(G, H, W, GW, Mu, Tau, hier, mu0, tau0, k, d, gs, ss, hs, forward, gnew,
                 crow, squ, inv_s2, a, b, skip, write, out_w, out_h):
    K, nb = W.shape
    Gd = np.zeros(K)
    for i in range(K):
        for j in range(K):
            if j != k:
                Gd[i] += G[i, j] * d[j]
    dGd = 0.0
    gsd = 0.0
    for i in range(K):
        if i != k:
            dGd += d[i] * Gd[i]
            gsd += gs[i] * d[i]
    denom = ss if forward else ss - gsd
    sign = 1.0 if forward else -1.0
    total = 0.0
    wp = np.empty(K)
    gw0 = np.empty(K)
    for n in range(nb):
        if skip[n]:
            continue
        wk = W[k, n]
        for i in range(K):
            gw0[i] = GW[i, n] - G[i, k] * wk  # (G w0)_i, w0 = w with row k zeroed
        term, ok = _mapped_column(W, H, Mu, Tau, hier, mu0, tau0, n, k, gw0, G[k, k], d,
                                  gs, dGd, hs[n], denom, sign, gnew, crow[n], squ, inv_s2,
                                  a, b, wp, write, out_w, out_h)
        if not ok:
            return -np.inf
        total += term
    return total


def pivot_block(G, H, W, Mu, Tau, priors, k, d, gs, ss, hs, forward, gnew, crow, squ,
                sigma2, skip, write=False, GW=None):
    """One block's share of the pivot swap's log ratio (without the Jacobian and the
    GHK terms of the two swapped columns).

    Parameters
    ----------
    G, H, W : arrays
        The current basis's Gram (K, K), H = C^T A[:, block] (K, nb) and W (K, nb).
    Mu, Tau : (K, nb) arrays or None
        GBTN's per-entry prior parameters (None: GBT's ``priors.mu``, ``priors.tau``).
    k : int
        The slot.
    d, gs : (K,) arrays
        The map's coefficients (entry k ignored) and C_{-k}^T a_s (entry k ignored).
    ss : float
        ||a_s||^2.
    hs : (nb,) array
        a_s^T A[:, block].
    forward : bool
        The current basis is the source (apply the map; else its inverse).
    gnew : (K,) array
        Row k of the Gram after the swap (C'^T a_u, entry k = ||a_u||^2).
    crow : (nb,) array
        a_u^T A[:, block].
    squ : float
        ||a_u||^2.
    sigma2 : float
    skip : (nb,) bool array
        The swapped columns p and u (they get their own proposal).
    write : bool
        Also return the mapped W_{-k} (row k untouched) and, per column, the h of the
        new slot's conditional (``h_n = a_u^T a_n - sum_{i != k} g'_i w'_in``).
    GW : (K, nb) array, optional
        ``G @ W``, when the caller scores several attempts against one state.

    Returns
    -------
    float, or (float, W', h)
        The sum over the block's other columns of (log marginal with row k integrated
        under the proposal) - (the same under the current state), -inf when the map
        leaves the box [a, b] for some column.
    """
    hier = Mu is not None
    K, nb = W.shape
    Mu_ = Mu if hier else np.zeros((1, 1))
    Tau_ = Tau if hier else np.zeros((1, 1))
    if GW is None:
        GW = G @ W
    out_w = W.copy() if write else np.empty((1, 1))
    out_h = np.zeros(nb) if write else np.empty(1)
    total = _pivot_block(G, H, W, GW, Mu_, Tau_, hier, float(priors.mu), float(priors.tau),
                         int(k), np.asarray(d, np.float64), np.asarray(gs, np.float64),
                         float(ss), np.ascontiguousarray(hs, np.float64), bool(forward),
                         np.asarray(gnew, np.float64), np.ascontiguousarray(crow, np.float64),
                         float(squ), 1.0 / float(sigma2), float(priors.a), float(priors.b),
                         np.asarray(skip, np.bool_), bool(write), out_w, out_h)
    total = float(total)
    if write:
        return total, out_w, out_h
    return total


@njit(nogil=True, cache=True, error_model="numpy")
def _solve_psd(G, rhs, L, out):
    # G x = rhs for a symmetric positive semi-definite K x K G: a Cholesky solve (a few
    # microseconds; the masked move solves one per column and attempt), and the
    # pseudo-inverse, as the dense move's, where G is singular to working precision
    K = G.shape[0]
    top = 0.0
    for i in range(K):
        top = max(top, G[i, i])
    ok = top > 0.0
    for j in range(K):
        if not ok:
            break
        s = G[j, j]
        for m in range(j):
            s -= L[j, m] * L[j, m]
        if s <= 1e-12 * top:
            ok = False
            break
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, K):
            t = G[i, j]
            for m in range(j):
                t -= L[i, m] * L[j, m]
            L[i, j] = t / L[j, j]
    if not ok:
        out[:] = np.linalg.pinv(G) @ rhs
        return
    cho_solve_into(L, rhs, out, K)


@njit(nogil=True, cache=True, error_model="numpy")
def _pivot_block_masked(Gn, H, W, Mu, Tau, hier, mu0, tau0, k, X, crow, forward, inv_s2,
                        a, b, skip, write, out_w, out_h, out_g):
    # _pivot_block with column n's own Gram Gn[n] and its own map (d_n, g_s,n, ||a_s||^2_n)
    K, nb = W.shape
    total = 0.0
    logdet = 0.0
    Gt = np.empty((K, K))
    rhs = np.empty(K)
    gs = np.empty(K)
    q = np.empty(K)
    d = np.zeros(K)
    Lw = np.zeros((K, K))
    Gd = np.empty(K)
    wp = np.empty(K)
    gw0 = np.empty(K)
    for n in range(nb):
        if skip[n]:
            continue
        Gc = Gn[n]
        # q: row k of the column's Gram after the swap (C'^T a_u over its observed rows)
        for i in range(K):
            q[i] = X[i, n]
        apu = q[k]  # a_p^T a_u over the observed rows
        squ = X[K, n]
        q[k] = squ
        for i in range(K):
            for j in range(K):
                Gt[i, j] = Gc[i, j]
        if forward:  # a_s = a_p, represented in the new basis: target Gram = Gc with q in k
            ss = Gc[k, k]
            for i in range(K):
                gs[i] = Gc[i, k]
                rhs[i] = Gc[i, k]
                Gt[i, k] = q[i]
                Gt[k, i] = q[i]
            rhs[k] = apu
            hs = H[k, n]
        else:  # a_s = a_u, represented in the current basis
            ss = squ
            for i in range(K):
                gs[i] = q[i]
                rhs[i] = X[i, n]
            hs = crow[n]
        gs[k] = 0.0
        if ss > 0.0:
            _solve_psd(Gt, rhs, Lw, d)
            d[k] = 0.0
            gsd = 0.0
            for i in range(K):
                gsd += gs[i] * d[i]
            rel = 1.0 - gsd / ss
            if not np.isfinite(rel) or abs(rel) < 1e-10:
                return -np.inf, 0.0  # degenerate from either end: rejected
            logdet += np.log(abs(rel))
            denom = ss if forward else ss - gsd
        else:
            # a_s is 0 on this column's observed rows: it explains nothing here, and the
            # map leaves the column alone (det 1), from either end
            d[:] = 0.0
            denom = 1.0
        Gd[:] = 0.0
        for i in range(K):
            for j in range(K):
                if j != k:
                    Gd[i] += Gc[i, j] * d[j]
        dGd = 0.0
        for i in range(K):
            if i != k:
                dGd += d[i] * Gd[i]
        sign = 1.0 if forward else -1.0
        for i in range(K):
            gw0[i] = 0.0  # (Gc w0)_i, w0 = w with row k zeroed
            for j in range(K):
                if j != k:
                    gw0[i] += Gc[i, j] * W[j, n]
        term, ok = _mapped_column(W, H, Mu, Tau, hier, mu0, tau0, n, k, gw0, Gc[k, k], d,
                                  gs, dGd, hs, denom, sign, q, crow[n], squ, inv_s2, a, b,
                                  wp, write, out_w, out_h)
        if not ok:
            return -np.inf, 0.0
        total += term
        if write:
            out_g[n] = squ
    return total, (logdet if forward else -logdet)


def pivot_block_masked(Gn, H, W, Mu, Tau, priors, k, X, crow, forward, sigma2, skip,
                       write=False):
    """:func:`pivot_block` for ``missing="mask"``: one block's share of the pivot swap's
    log ratio, each column with its own Gram and its own map.

    Parameters
    ----------
    Gn : (nb, K, K) array
        The block's per-column Grams of the current basis, over each column's observed
        rows (the basis columns' own missing entries as 0).
    X : (K + 1, nb) array
        Per column n, over its observed rows: C^T a_u for the *current* basis C (entry k
        = a_p^T a_u), then ||a_u||^2.
    crow : (nb,) array
        a_u^T A[:, block] (A with missing entries as 0).
    H, W, Mu, Tau, priors, k, forward, sigma2, skip, write
        As :func:`pivot_block`.

    Returns
    -------
    (float, float), or (float, float, W', h, g)
        The block's sum over its other columns of (log marginal with row k integrated
        under the proposal) - (the same now), -inf when the map leaves the box or is
        degenerate for some column; and sum_n log|det_n| of the map as applied (source
        -> target, or its inverse), which a dense move adds on the client as
        (N - 2) log|det|. With ``write`` also the mapped W_{-k}, and per column the h and
        g = ||a_u||^2_n of the new slot's conditional.
    """
    hier = Mu is not None
    K, nb = W.shape
    Mu_ = Mu if hier else np.zeros((1, 1))
    Tau_ = Tau if hier else np.zeros((1, 1))
    out_w = W.copy() if write else np.empty((1, 1))
    out_h = np.zeros(nb) if write else np.empty(1)
    out_g = np.zeros(nb) if write else np.empty(1)
    total, logdet = _pivot_block_masked(
        np.ascontiguousarray(Gn, np.float64), H, W, Mu_, Tau_, hier, float(priors.mu),
        float(priors.tau), int(k), np.ascontiguousarray(X, np.float64),
        np.ascontiguousarray(crow, np.float64), bool(forward), 1.0 / float(sigma2),
        float(priors.a), float(priors.b), np.asarray(skip, np.bool_), bool(write), out_w,
        out_h, out_g)
    total, logdet = float(total), float(logdet)
    if write:
        return total, logdet, out_w, out_h, out_g
    return total, logdet


@njit(nogil=True, cache=True)
def _ghk(gen, m, L, a, b, w, draw):
    # coordinate i from N(m_i + sum_{j<i} L_ij eta_j, L_ii^2) truncated to [a, b], drawn
    # into w (``draw``) or read from it (the reverse move); returns sum_i log Z_i
    K = m.size
    eta = np.zeros(K)
    logz = 0.0
    for i in range(K):
        base = m[i]
        for j in range(i):
            base += L[i, j] * eta[j]
        s = L[i, i]
        logz += _log_mass((a - base) / s, (b - base) / s)
        if draw:
            w[i] = gtn_draw(gen, base, 1.0 / (s * s), a, b)
        eta[i] = (w[i] - base) / s
    return logz


def _vector(x, K):
    # a K-vector of float64 from a scalar or a K-vector (np.full: broadcast_to's
    # generality cost more than the compiled call below)
    if np.ndim(x) == 0:
        return np.full(K, float(x))
    return np.ascontiguousarray(np.broadcast_to(np.asarray(x, np.float64), (K,)))


#: the generator argument of a GHK evaluation, which draws nothing
_NO_DRAWS = np.random.default_rng(0)


def ghk_column(gen, G, h, mu, tau, sigma2, a, b, w=None):
    """The GHK proposal of one column of W and its log weight.

    The column's full conditional given the basis is N(w; m, Lambda^-1) restricted to the
    box [a, b]^K, with Lambda = G / sigma^2 + diag(tau), m = Lambda^-1 (h / sigma^2 +
    tau mu) (``h`` = C^T a_n). The proposal draws the coordinates in order, each from the
    Gaussian's conditional given the earlier ones, truncated to [a, b]; its density is
    the product of these truncated normal densities, so that

        log target(w) - log proposal(w) = c + sum_i log Z_i(w_{<i}),

    with c = m^T Lambda m / 2 - log det(Lambda) / 2 + K log(2 pi) / 2 (the column's
    unconstrained log marginal up to terms that do not depend on the basis) and Z_i the
    mass of [a, b] under the i-th conditional. With ``w`` given, it is evaluated at
    ``w`` (the reverse move) instead of drawn.

    Returns
    -------
    (float, ndarray)
        The log weight and the column. The weight is NaN where Lambda is not positive
        definite in floating point (G / sigma^2 so much larger than diag(tau) that the
        prior's curvature is lost to rounding: a rank-deficient basis of a matrix with
        large entries or a tiny sigma^2), and the column is then not a draw: the
        move's ratio is NaN and the move rejected, from either end (its reverse needs
        the same factorisations), as the redraw swap does.
    """
    K = G.shape[0]
    tau = _vector(tau, K)
    mu = _vector(mu, K)
    out = np.empty(K)
    if w is not None:
        out[:] = w
    # one compiled call: the client runs 4 of these per pivot attempt (the two swapped
    # columns, forward and reverse), ~20 times faster than numpy's per-call overhead
    try:
        logw = _ghk_column(_NO_DRAWS if w is not None else gen,
                           np.ascontiguousarray(G, np.float64),
                           np.ascontiguousarray(h, np.float64), mu, tau, float(sigma2),
                           float(a), float(b), out, w is None)
    except np.linalg.LinAlgError:
        return np.nan, out
    return float(logw), out


@njit(nogil=True, cache=True)
def _ghk_column(gen, G, h, mu, tau, sigma2, a, b, out, draw):
    K = G.shape[0]
    Lam = G / sigma2
    for i in range(K):
        Lam[i, i] += tau[i]
    rhs = h / sigma2 + tau * mu
    Lc = np.linalg.cholesky(Lam)
    m = np.linalg.solve(Lam, rhs)
    # covariance factor S = Lam^-1 = L L^T, L lower triangular: w = m + L eta
    S = np.linalg.inv(Lam)
    S = 0.5 * (S + S.T)
    L = np.linalg.cholesky(S)
    logz = _ghk(gen, m, L, a, b, out, draw)
    logdet = 0.0
    for i in range(K):
        logdet += np.log(Lc[i, i])
    logdet *= 2.0
    c = 0.5 * np.dot(m, rhs) - 0.5 * logdet + K * _HALF_LOG_2PI
    return c + logz
