"""The starting basis of a sparse input: the randomized ID's sketch of its observed entries.

``select_columns(A, K, method="randomized")`` on the dense matrix with every unobserved
entry as 0 sketches S = Omega A (l x N) and takes the first K pivots of S's pivoted QR.
Here S is computed from the observed entries alone, column group by column group (the
same Omega, regenerated tile by tile from the same seed), so the cost is the number of
observed entries times l, and the columns are those of the dense computation up to the
rounding of the sums' order.
"""

from __future__ import annotations

import numpy as np

from ._rid import RandomizedID, _base_seed
from ._streaming import omega_rows

__all__ = ["sparse_select_columns", "sparse_sketch"]

#: Rows of Omega generated at once (a multiple of its tile, 512 rows).
_OMEGA_ROWS = 2**16


def _sketch_group(reader, c0, c1, seed, n_sketch):
    """Omega A[:, c0:c1] from the observed entries: (n_sketch, c1 - c0)."""
    import scipy.sparse as sp

    ptr, rows, vals = reader.read_cols(c0, c1)
    M = reader.shape[0]
    A = sp.csc_matrix((vals, rows, ptr), shape=(M, c1 - c0)).tocsr()
    S = np.zeros((c1 - c0, n_sketch))
    for r0 in range(0, M, _OMEGA_ROWS):
        r1 = min(M, r0 + _OMEGA_ROWS)
        block = A[r0:r1]
        if block.nnz:
            S += block.T @ omega_rows(seed, r0, r1, n_sketch)
    return S.T


def sparse_sketch(src, n_sketch, seed, *, group_entries=2**22):
    """The sketch Omega A (n_sketch x N) of a sparse input, one task per column group of
    about ``group_entries`` observed entries (computed by the current dask scheduler)."""
    import dask

    r = src.array
    counts = r.column_counts()
    edges, acc = [0], 0
    for n, c in enumerate(counts):
        if acc and acc + int(c) > group_entries:
            edges.append(n)
            acc = 0
        acc += int(c)
    edges.append(len(counts))
    f = dask.delayed(_sketch_group, pure=True)
    parts = dask.compute(*[f(r, a, b, seed, n_sketch) for a, b in zip(edges[:-1], edges[1:],
                                                                     strict=True)])
    return np.concatenate(parts, axis=1)


def sparse_select_columns(src, n_components, init, random_state):
    """K starting columns of a sparse input for ``init`` "auto" or "sketch": the
    randomized ID's choice ("cpqr", which needs the dense matrix, is refused by
    ``bayesian_id`` before the fit starts)."""
    import scipy.linalg as sla

    assert init in ("auto", "sketch"), init
    est = RandomizedID(n_components, method="randomized", random_state=random_state)
    K = est._validate(src.shape)
    n_sketch = min(K + int(est.oversampling), src.shape[0])
    S = sparse_sketch(src, n_sketch, _base_seed(est.random_state))
    _, _, perm = sla.qr(S, pivoting=True, mode="raw", check_finite=False)
    return np.sort(perm[:K]).astype(np.int64)
