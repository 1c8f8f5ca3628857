"""The column swap: incremental updates of G and H, and the SSE change it causes.

Replacing the column in slot p of the basis by column u changes one row and
column of G = C^T C and one row of H = C^T A. Everything comes from the row
a_u^T A (one streaming pass over A, shared by several candidates); C^T A is
never recomputed.
"""

from __future__ import annotations

import numpy as np

__all__ = ["proposal_gram", "swapped_h", "swap_delta", "swapped_grams", "swap_delta_masked",
           "masked_gram_rows"]


def proposal_gram(G, p, g_col, sq_u):
    """G after slot p takes column u.

    ``g_col`` is H[:, u] = C^T a_u (so its entry p is a_j^T a_u for the outgoing
    column and is replaced), ``sq_u`` = ||a_u||^2. Returns ``(G', g)`` with ``g``
    the new row p.
    """
    g = np.array(g_col, dtype=np.float64)
    g[p] = sq_u
    G2 = np.array(G, dtype=np.float64)
    G2[p, :] = g
    G2[:, p] = g
    return G2, g


def swapped_h(H, p, h_u):
    """H after slot p takes column u: row p becomes a_u^T A[:, block]."""
    H2 = H.copy()
    H2[p] = h_u
    return H2


def swap_delta(G, H, W, p, g_new, h_u, w_new):
    """This block's change of <H, W> and <W, G W> when slot p takes column u and
    row p of W becomes ``w_new``; O(K nb), no pass over A.

    SSE changes by ``-2 d_hw + d_wgw``.
    """
    wp = W[p]
    d_hw = float(h_u @ w_new - H[p] @ wp)
    # sum over l != p of G[p, l] w_l, before and after
    s_old = G[p] @ W - G[p, p] * wp
    s_new = g_new @ W - g_new[p] * wp
    d_wgw = float(2.0 * (w_new @ s_new) + g_new[p] * (w_new @ w_new)
                  - 2.0 * (wp @ s_old) - G[p, p] * (wp @ wp))
    return d_hw, d_wgw


def swapped_grams(Gn, p, q):
    """Per-column Grams (``missing="mask"``) after slot p takes column u.

    ``Gn`` is (nb, K, K); ``q`` (K, nb) holds, for every column n of the block, the new
    row p of its Gram: q[l, n] = sum over observed rows m of n of a_mu a_m,J'_l.
    """
    G2 = Gn.copy()
    G2[:, p, :] = q.T
    G2[:, :, p] = q.T
    return G2


def masked_gram_rows(XJ, au, Mf, p, pivot=False):
    """``missing="mask"``: what the blocks need of each incoming column, per column of A.

    ``XJ`` (M, K) holds the current basis and ``au`` (M, m) the incoming columns, both
    with missing entries as 0; ``Mf`` (M, nb) is the 0/1 mask of nb columns of A. Returns,
    for each incoming u, (C^T a_u over each column's observed rows), (m, K, nb), with row
    ``p`` replaced by ||a_u||^2 there: the new row p of every column's Gram if slot p took
    u. With ``pivot``, (m, K + 1, nb): the products with the current basis unchanged, then
    ||a_u||^2 (a pivot attempt's slot is chosen per attempt, kernels/pivot.py).
    """
    qs = np.stack([(XJ * au[:, [i]]).T @ Mf for i in range(au.shape[1])])
    sq = (au * au).T @ Mf
    if pivot:
        return np.concatenate([qs, sq[:, None]], axis=1)
    qs[:, p] = sq
    return qs


def swap_delta_masked(Gn, H, W, p, q, h_u, w_new):
    """:func:`swap_delta` with a Gram matrix per column (``missing="mask"``)."""
    wp = W[p]
    d_hw = float(h_u @ w_new - H[p] @ wp)
    gp = Gn[:, p, :]  # (nb, K): row p of every column's Gram
    s_old = np.einsum("nl,ln->n", gp, W) - gp[:, p] * wp
    s_new = np.einsum("ln,ln->n", q, W) - q[p] * wp
    d_wgw = float(2.0 * (w_new @ s_new) + (q[p] * w_new) @ w_new
                  - 2.0 * (wp @ s_old) - (gp[:, p] * wp) @ wp)
    return d_hw, d_wgw
