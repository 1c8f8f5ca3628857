"""Box-constrained least squares for the columns of W given the basis.

For a fixed basis C, the W that minimises ||A - C W||_F^2 subject to a <= W <= b
splits into one bounded quadratic programme per column:

    min_w  w^T G w - 2 h^T w   subject to  a <= w <= b,

with G = C^T C and h = C^T a_n. It is convex, so a primal active-set method
(Stark & Parker's bounded-variable least squares, written on the normal equations)
reaches the exact optimum in finitely many steps. Most columns of a good basis are
already inside the box at the unconstrained optimum, which one product with pinv(G)
gives for a whole block; only the others enter the active-set loop.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .linalg import pinv_sym

__all__ = ["box_lstsq", "box_qp"]


def _solve(G, r):
    # G is a principal block of a Gram matrix: positive semi-definite. Cholesky first;
    # a singular block (duplicated or dependent columns) takes the minimum-norm solution,
    # which is a minimiser all the same.
    try:
        return linalg.cho_solve(linalg.cho_factor(G, check_finite=False), r,
                                check_finite=False)
    except linalg.LinAlgError:
        return linalg.lstsq(G, r, check_finite=False, cond=None)[0]


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
    G = np.asarray(G, dtype=np.float64)
    h = np.asarray(h, dtype=np.float64)
    K = h.shape[0]
    w = np.clip(np.asarray(w0, dtype=np.float64), a, b)
    # -1: held at a, +1: held at b, 0: free
    at = np.where(w <= a, -1, np.where(w >= b, 1, 0))
    scale = max(float(np.abs(h).max(initial=0.0)), float(np.abs(np.diag(G)).max(initial=0.0)),
                1e-300)
    tol = 1e-13 * scale
    max_iter = 10 * K + 10 if max_iter is None else max_iter
    for _ in range(max_iter):
        free = np.flatnonzero(at == 0)
        if free.size:
            held = np.flatnonzero(at != 0)
            r = h[free] - G[np.ix_(free, held)] @ w[held]
            x = _solve(G[np.ix_(free, free)], r)
            d = x - w[free]
            # longest step towards x that stays in the box
            with np.errstate(divide="ignore", invalid="ignore"):
                t = np.where(d > 0, (b - w[free]) / d, np.where(d < 0, (a - w[free]) / d, np.inf))
            i = int(np.argmin(t))
            if t[i] < 1.0:
                w[free] += max(t[i], 0.0) * d
                k = free[i]
                w[k] = b if d[i] > 0 else a
                at[k] = 1 if d[i] > 0 else -1
                continue
            w[free] = x
        # KKT for the held entries: the gradient G w - h must push each against its bound
        g = G @ w - h
        viol = np.where(at == -1, -g, np.where(at == 1, g, 0.0))
        k = int(np.argmax(viol))
        if viol[k] <= tol:
            break
        at[k] = 0
    return w


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
    H = np.asarray(H, dtype=np.float64)
    K, nb = H.shape
    if Gn is None:
        P = pinv_sym(G) if P is None else P
        W = P @ H
        out = np.flatnonzero(((W < a) | (W > b)).any(axis=0))
        for n in out:
            start = W[:, n] if W0 is None else W0[:, n]
            W[:, n] = box_qp(G, H[:, n], start, a, b)
        return W
    W = np.empty((K, nb))
    for n in range(nb):
        w = _solve(Gn[n], H[:, n])
        if (w < a).any() or (w > b).any():
            w = box_qp(Gn[n], H[:, n], w if W0 is None else W0[:, n], a, b)
        W[:, n] = w
    return W
