"""Per-column statistics of a column-compressed (CSC) block under ``missing="mask"``.

A block of columns is given by its CSC arrays (``indptr`` local to the block, the row
``indices`` of its observed entries and their ``data``); the columns the statistics are
taken against (the basis C, swap candidates) by a row-compressed matrix ``X`` (CSR:
``xptr``, ``xcol``, ``xval``) holding only their observed entries, so that a missing entry
of X counts as 0, as the dense masked engine reads it. Every loop runs over the observed
entries of the block, and for each over the few stored entries of X in that row: the cost
grows with the number of observed entries, never with M x N.

These are the quantities :class:`~dask_bid.engine.memory.MaskedMemoryBackend` computes
with dense products (the same sums, in another order: equal to rounding).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["csc_products", "csc_grams", "csc_residuals", "rows_to_csr"]


@njit(nogil=True, cache=True)
def csc_products(indptr, indices, data, xptr, xcol, xval, L):
    """``P[l, n] = sum over observed rows i of column n of X[i, l] * a[i, n]``, (L, n)."""
    n = indptr.shape[0] - 1
    P = np.zeros((L, n))
    for c in range(n):
        for e in range(indptr[c], indptr[c + 1]):
            i = indices[e]
            v = data[e]
            for t in range(xptr[i], xptr[i + 1]):
                P[xcol[t], c] += xval[t] * v
    return P


@njit(nogil=True, cache=True)
def csc_grams(indptr, indices, xptr, xcol, xval, a0, a1, b0, b1):
    """``G[n, a - a0, b - b0] = sum over observed rows i of column n of X[i, a] X[i, b]``
    for ``a0 <= a < a1`` and ``b0 <= b < b1``: per-column (partial) Gram matrices of X
    over each column's observed rows, (n, a1 - a0, b1 - b0)."""
    n = indptr.shape[0] - 1
    G = np.zeros((n, a1 - a0, b1 - b0))
    for c in range(n):
        for e in range(indptr[c], indptr[c + 1]):
            i = indices[e]
            for s in range(xptr[i], xptr[i + 1]):
                a = xcol[s]
                if a < a0 or a >= a1:
                    continue
                va = xval[s]
                for t in range(xptr[i], xptr[i + 1]):
                    b = xcol[t]
                    if b >= b0 and b < b1:
                        G[c, a - a0, b - b0] += va * xval[t]
    return G


@njit(nogil=True, cache=True)
def csc_residuals(indptr, indices, data, xptr, xcol, xval, W):
    """Per column n: the SSE over its observed entries, sum (a[i, n] - X[i] W[:, n])^2,
    and the sum of the squared predictions there, sum (X[i] W[:, n])^2; (2, n)."""
    n = indptr.shape[0] - 1
    out = np.zeros((2, n))
    for c in range(n):
        s_res = 0.0
        s_pred = 0.0
        for e in range(indptr[c], indptr[c + 1]):
            i = indices[e]
            pred = 0.0
            for t in range(xptr[i], xptr[i + 1]):
                pred += xval[t] * W[xcol[t], c]
            r = data[e] - pred
            s_res += r * r
            s_pred += pred * pred
        out[0, c] = s_res
        out[1, c] = s_pred
    return out


def rows_to_csr(n_rows, indptr, indices, data):
    """The columns given in CSC form (``indptr`` over them) as CSR arrays
    ``(xptr, xcol, xval)`` over ``n_rows`` rows (a stable sort by row)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    counts = np.diff(indptr)
    col = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    rows = np.asarray(indices, dtype=np.int64)
    order = np.argsort(rows, kind="stable")
    xptr = np.zeros(int(n_rows) + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=int(n_rows)), out=xptr[1:])
    return (xptr, np.ascontiguousarray(col[order]),
            np.ascontiguousarray(np.asarray(data, dtype=np.float64)[order]))
