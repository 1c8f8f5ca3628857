"""Rows a_u^T A of several columns u at once, each independent of the others.

A BLAS product ``U^T T`` does not give row ``i`` the same floats for every number of
rows in ``U``: OpenBLAS picks its kernels, blocking and threading by the shapes, and a
row computed in a batch of 600 can differ in the last bits from the same row computed in
a batch of 20 (measured: SkylakeX OpenBLAS 0.3.31, tiles of 1000 rows). The engine
sizes its batches of candidate rows from the cluster's memory, so a row must not depend
on its batch, or the chain would depend on the cluster. Every product here is therefore
made of products ``T^T P`` with a panel P of exactly :data:`ROW_PANEL` columns of U (the
last one zero-padded): the shape handed to BLAS is fixed, and a column's slot in the panel
is the product's second (broadcast) dimension, which BLAS kernels treat alike (measured:
no slot dependence with 1 or 2 threads, panels of 16 to 256, in 5 tile shapes; the other
orientation, ``P^T T``, showed slot dependence with one thread). So a row's floats depend
only on its column and the tile (``tests/test_engine_wide.py`` checks rows against batch
sizes and slots, and chains against batch sizes).

Each panel's product ``T^T P`` (n x 64) is written by BLAS straight into its place in
the transpose of the result, so the result is built in Fortran order, without a copy
per panel (:func:`row_products_into`; where the output memory lies does not change the
arithmetic: the same floats as a product into a fresh array). On one thread at a tile
of 419 x 5,000 and 5,050 rows this halved the time of the products (1.2 s -> 0.66 s;
one unpanelled product: 0.42 s).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ROW_PANEL", "row_products", "row_products_into"]

#: Rows per BLAS product. One thread, tile 1000 x 2097, 512 rows: 1.9 times one large
#: product (16: 4.5 times, 256: 1.5 times, but a small batch is padded to it).
ROW_PANEL = 64


def row_products_into(U, T, out_t):
    """Write ``(U.T @ T).T`` into ``out_t`` in panels of :data:`ROW_PANEL` columns of U.

    Parameters
    ----------
    U : ndarray, shape (rows, m)
        The columns a_u (of one tile's rows), float64.
    T : ndarray, shape (rows, n)
        The tile (or a column range of it), float64.
    out_t : ndarray, shape (n, m)
        float64 with unit stride along its second axis (e.g. ``out.T[lo:hi]`` of an
        (m, N) array in Fortran order): column ``i`` receives a_{u_i}^T T, the same
        floats whatever ``m`` and the other columns.
    """
    rows, m = U.shape
    TT = T.T
    panel = np.zeros((rows, ROW_PANEL), dtype=out_t.dtype)
    for s in range(0, m, ROW_PANEL):
        w = min(ROW_PANEL, m - s)
        panel[:, :w] = U[:, s:s + w]
        if w < ROW_PANEL:
            panel[:, w:] = 0.0
            out_t[:, s:s + w] = (TT @ panel)[:, :w]
        else:
            np.matmul(TT, panel, out=out_t[:, s:s + w])


def row_products(U, T):
    """``U.T @ T`` computed in panels of :data:`ROW_PANEL` columns of ``U``.

    Parameters
    ----------
    U : ndarray, shape (rows, m)
        The columns a_u (of one tile's rows).
    T : ndarray, shape (rows, n)
        The tile (or a column range of it).

    Returns
    -------
    ndarray, shape (m, n)
        Row ``i`` is a_{u_i}^T T, the same floats whatever ``m`` and the other columns.
    """
    m, n = U.shape[1], T.shape[1]
    out = np.empty((m, n), dtype=np.result_type(U, T, np.float64), order="F")
    row_products_into(U, T, out.T)
    return np.ascontiguousarray(out)
