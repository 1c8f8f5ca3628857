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
"""

from __future__ import annotations

import numpy as np

__all__ = ["ROW_PANEL", "row_products"]

#: Rows per BLAS product. One thread, tile 1000 x 2097, 512 rows: 1.9 times one large
#: product (16: 4.5 times, 256: 1.5 times, but a small batch is padded to it).
ROW_PANEL = 64


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
    rows, m = U.shape
    out = np.empty((m, T.shape[1]), dtype=np.result_type(U, T, np.float64))
    panel = np.zeros((rows, ROW_PANEL), dtype=out.dtype)
    TT = T.T
    for s in range(0, m, ROW_PANEL):
        w = min(ROW_PANEL, m - s)
        panel[:, :w] = U[:, s:s + w]
        if w < ROW_PANEL:
            panel[:, w:] = 0.0
        out[s:s + w] = (TT @ panel).T[:w]
    return out
