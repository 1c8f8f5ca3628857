"""Box-constrained least squares for the columns of W given the basis.

For a fixed basis C, the W that minimises ||A - C W||_F^2 subject to a <= W <= b
splits into one bounded quadratic programme per column:

    min_w  w^T G w - 2 h^T w   subject to  a <= w <= b,

with G = C^T C and h = C^T a_n. It is convex, so a primal active-set method
(Stark & Parker's bounded-variable least squares, written on the normal equations)
reaches the exact optimum in finitely many steps. Most columns of a good basis are
already inside the box at the unconstrained optimum, which one product with pinv(G)
gives for a whole block; only the others enter the active-set loop, compiled (numba):
scoring a basis exactly, which the point estimate does for every basis the chain visits
that might beat the best so far, runs it for thousands of columns.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .linalg import cho_solve_into, pinv_sym

__all__ = ["box_lstsq", "box_qp"]


@njit(nogil=True, cache=True, error_model="numpy")
def _solve_into(G, r, L, x):
    # x = G^-1 r for a principal block G of a Gram matrix (positive semi-definite):
    # Cholesky first; a singular block (duplicated or dependent columns) takes the
    # minimum-norm solution, which is a minimiser all the same
    m = r.size
    ok = True
    for j in range(m):
        s = G[j, j]
        for q in range(j):
            s -= L[j, q] * L[j, q]
        if not s > 0.0:
            ok = False
            break
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, m):
            t = G[i, j]
            for q in range(j):
                t -= L[i, q] * L[j, q]
            L[i, j] = t / L[j, j]
    if not ok:
        x[:] = np.linalg.lstsq(G, r, rcond=-1.0)[0]
        return
    cho_solve_into(L, r, x, m)


#: a pivot of the free block's factor at most this times its diagonal entry: the block is
#: taken as singular (duplicated or dependent basis columns) and solved by least squares
_SINGULAR = 1e-12


@njit(nogil=True, cache=True, error_model="numpy")
def _factor(G, free, nf, L, tol):
    # the Cholesky factor of G[free, free] (in the order of ``free``); False if singular
    # (a pivot at most ``tol`` times its diagonal entry)
    for j in range(nf):
        fj = free[j]
        s = G[fj, fj]
        for q in range(j):
            s -= L[j, q] * L[j, q]
        if not s > tol * G[fj, fj]:
            return False
        L[j, j] = np.sqrt(s)
        for i in range(j + 1, nf):
            t = G[free[i], fj]
            for q in range(j):
                t -= L[i, q] * L[j, q]
            L[i, j] = t / L[j, j]
    return True


@njit(nogil=True, cache=True, error_model="numpy")
def _append(G, free, nf, L):
    # the factor grows by free[nf] (its row from one forward substitution, O(nf^2));
    # False if the grown block is singular
    k = free[nf]
    d = G[k, k]
    for j in range(nf):
        t = G[k, free[j]]
        for q in range(j):
            t -= L[nf, q] * L[j, q]
        L[nf, j] = t / L[j, j]
        d -= L[nf, j] * L[nf, j]
    if not d > _SINGULAR * G[k, k]:
        return False
    L[nf, nf] = np.sqrt(d)
    return True


@njit(nogil=True, cache=True, error_model="numpy")
def _delete(L, nf, p):
    # the factor without entry p of the free list: its rows below p move up one, and
    # Givens rotations of neighbouring columns restore the triangle (O(nf^2))
    for i in range(p, nf - 1):
        for q in range(i + 2):
            L[i, q] = L[i + 1, q]
    for j in range(p, nf - 1):
        x, y = L[j, j], L[j, j + 1]
        rr = np.hypot(x, y)
        c, s = x / rr, y / rr
        for i in range(j, nf - 1):
            u, v = L[i, j], L[i, j + 1]
            L[i, j] = c * u + s * v
            L[i, j + 1] = -s * u + c * v
        L[j, j + 1] = 0.0


@njit(nogil=True, cache=True, error_model="numpy")
def _box_qp(G, h, w, a, b, max_iter):
    # the active-set method of :func:`box_qp`, in place on w (already in the box). The
    # free block's Cholesky factor is kept from step to step (one entry joins or leaves
    # the free set per step): O(K^2) a step instead of a factorisation, O(K^3)
    K = h.size
    at = np.zeros(K, dtype=np.int64)  # -1: held at a, +1: held at b, 0: free
    free = np.empty(K, dtype=np.int64)  # the free entries, in the factor's order
    nf = 0
    for i in range(K):
        if w[i] <= a:
            at[i] = -1
        elif w[i] >= b:
            at[i] = 1
        else:
            free[nf] = i
            nf += 1
    scale = 1e-300
    for i in range(K):
        scale = max(scale, abs(h[i]), abs(G[i, i]))
    tol = 1e-13 * scale
    L = np.zeros((K, K))
    valid = False  # whether L holds the factor of G[free, free]
    r = np.empty(K)
    x = np.empty(K)
    g = np.empty(K)
    for _ in range(max_iter):
        stepped = False
        if nf:
            for q in range(nf):
                fq = free[q]
                t = h[fq]
                for j in range(K):
                    if at[j] != 0:
                        t -= G[fq, j] * w[j]
                r[q] = t
            if not valid:
                valid = _factor(G, free, nf, L, _SINGULAR)
            if valid:
                cho_solve_into(L, r, x, nf)
            else:  # singular: the minimum-norm solution, a minimiser all the same
                Gf = np.empty((nf, nf))
                for i in range(nf):
                    for q in range(nf):
                        Gf[i, q] = G[free[i], free[q]]
                x[:nf] = np.linalg.lstsq(Gf, r[:nf], rcond=-1.0)[0]
            # longest step towards x that stays in the box
            best, ib = np.inf, -1
            for q in range(nf):
                d = x[q] - w[free[q]]
                if d > 0:
                    t = (b - w[free[q]]) / d
                elif d < 0:
                    t = (a - w[free[q]]) / d
                else:
                    t = np.inf
                if t < best:
                    best, ib = t, q
            if best < 1.0:
                step = max(best, 0.0)
                up = x[ib] - w[free[ib]] > 0
                for q in range(nf):
                    w[free[q]] += step * (x[q] - w[free[q]])
                k = free[ib]
                w[k] = b if up else a
                at[k] = 1 if up else -1
                if valid:
                    _delete(L, nf, ib)
                for q in range(ib, nf - 1):
                    free[q] = free[q + 1]
                nf -= 1
                stepped = True
            else:
                for q in range(nf):
                    w[free[q]] = x[q]
        if stepped:
            continue
        # KKT for the held entries: the gradient G w - h must push each against its bound
        for i in range(K):
            t = -h[i]
            for j in range(K):
                t += G[i, j] * w[j]
            g[i] = t
        k, vmax = -1, -np.inf
        for i in range(K):
            v = -g[i] if at[i] == -1 else (g[i] if at[i] == 1 else 0.0)
            if v > vmax:
                vmax, k = v, i
        if vmax <= tol:
            break
        at[k] = 0
        free[nf] = k
        if valid:
            valid = _append(G, free, nf, L)
        nf += 1


def box_qp(G, h, w0, a=-1.0, b=1.0, *, max_iter=None):
    """Minimise ``w^T G w - 2 h^T w`` over ``a <= w <= b`` (one column of W).

    Parameters
    ----------
    G : ndarray of shape (K, K)
        Gram matrix of the basis, positive semi-definite.
    h : ndarray of shape (K,)
        ``C^T a_n``.
    w0 : ndarray of shape (K,)
        Start; clipped to the box first.
    a, b : float
        The bounds.
    max_iter : int, optional
        Cap on active-set changes (default ``10 K + 10``); the objective decreases at
        every change, so the last iterate is returned if the cap is hit.

    Returns
    -------
    w : ndarray of shape (K,)
    """
    G = np.ascontiguousarray(G, dtype=np.float64)
    h = np.ascontiguousarray(h, dtype=np.float64)
    K = h.shape[0]
    w = np.clip(np.asarray(w0, dtype=np.float64), a, b)
    _box_qp(G, h, w, float(a), float(b), 10 * K + 10 if max_iter is None else int(max_iter))
    return w


#: the unconstrained solve factors G when every pivot of its Cholesky factor is above
#: this times its diagonal entry (G numerically non-singular), else takes pinv(G) @ H
_SOLVABLE = 1e-15


def _cholesky_solve(G, H):
    """G^-1 H by a Cholesky factor of G (backward stable: the residual it leaves is as good
    as the Gram allows), the columns solved together (LAPACK's triangular solves, as fast
    as the product with pinv(G)); None where G is singular at working precision
    (duplicated or dependent columns)."""
    from scipy.linalg import cho_solve

    K = G.shape[0]
    L = np.zeros((K, K))
    if not _factor(G, np.arange(K), K, L, _SOLVABLE):
        return None
    return np.ascontiguousarray(cho_solve((L, True), H, check_finite=False))


@njit(nogil=True, cache=True, error_model="numpy")
def _box_columns(G, H, W, cols, a, b, max_iter):
    # box_qp of the listed columns of one block against one Gram (W holds their starts)
    K = G.shape[0]
    w = np.empty(K)
    h = np.empty(K)
    for c in cols:
        for i in range(K):
            v = W[i, c]
            w[i] = a if v < a else (b if v > b else v)
            h[i] = H[i, c]
        _box_qp(G, h, w, a, b, max_iter)
        for i in range(K):
            W[i, c] = w[i]


@njit(nogil=True, cache=True, error_model="numpy")
def _box_masked(Gn, H, W0, warm, a, b, max_iter, W):
    # every column against its own Gram: the unconstrained solve, and box_qp where it
    # leaves the box (from W0's column with ``warm``)
    nb = H.shape[1]
    K = H.shape[0]
    L = np.empty((K, K))
    w = np.empty(K)
    h = np.empty(K)
    for n in range(nb):
        for i in range(K):
            h[i] = H[i, n]
        _solve_into(Gn[n], h, L, w)
        out = False
        for i in range(K):
            if w[i] < a or w[i] > b:
                out = True
        if out:
            for i in range(K):
                v = W0[i, n] if warm else w[i]
                w[i] = a if v < a else (b if v > b else v)
            _box_qp(Gn[n], h, w, a, b, max_iter)
        for i in range(K):
            W[i, n] = w[i]


def box_lstsq(G, H, *, a=-1.0, b=1.0, P=None, W0=None, Gn=None):
    """Box-constrained least squares for every column of a block.

    Parameters
    ----------
    G : ndarray of shape (K, K)
        Gram matrix of the basis (ignored when ``Gn`` is given).
    H : ndarray of shape (K, nb)
        ``C^T A[:, block]``.
    a, b : float
        The bounds.
    P : ndarray of shape (K, K), optional
        ``pinv(G)``; computed when not given.
    W0 : ndarray of shape (K, nb), optional
        Warm start for the columns whose unconstrained optimum leaves the box (default:
        that optimum, clipped).
    Gn : ndarray of shape (nb, K, K), optional
        ``missing="mask"``: each column's Gram over its observed rows.

    Returns
    -------
    W : ndarray of shape (K, nb)
        The exact minimiser of ``||A[:, block] - C W||^2`` over ``a <= W <= b`` (over the
        observed entries with ``Gn``).
    """
    H = np.ascontiguousarray(H, dtype=np.float64)
    K, nb = H.shape
    max_iter = 10 * K + 10
    if Gn is None:
        G = np.ascontiguousarray(G, dtype=np.float64)
        # the unconstrained optimum by a Cholesky solve: pinv(G) @ H, which the chain's
        # other moves share, loses the fit where C is ill-conditioned (a large common
        # offset: residuals 10^4-10^9 times the least-squares ones); pinv where G is
        # singular at working precision
        W = _cholesky_solve(G, H)
        if W is None:
            P = pinv_sym(G) if P is None else P
            W = np.ascontiguousarray(P @ H)
        out = np.flatnonzero(((W < a) | (W > b)).any(axis=0))
        if out.size:
            if W0 is not None:
                W[:, out] = W0[:, out]
            _box_columns(G, H, W, out.astype(np.int64), float(a), float(b), max_iter)
        return W
    W = np.empty((K, nb))
    warm = W0 is not None
    _box_masked(np.ascontiguousarray(Gn, dtype=np.float64), H,
                np.ascontiguousarray(W0 if warm else np.empty((1, 1)), dtype=np.float64), warm,
                float(a), float(b), max_iter, W)
    return W
