"""``missing="mask"`` on a sparse (column-compressed) input: every cost grows with the
number of observed entries, never with M x N.

:class:`SparseDaskBackend` is :class:`~dask_bid.engine.dask_backend.MaskedDaskBackend`
with other tile tasks: a tile is a range of columns (all rows), read as its CSC arrays
(:mod:`dask_bid.engine.sparse_store`), and the columns a pass takes statistics against
(the basis, swap candidates) travel as the CSR arrays of their observed entries. The
tasks return what the dense masked tasks return (H = C^T A and candidate rows, the
per-column Grams C[O_n]^T C[O_n], squared norms, observed counts, the swap's Gram rows,
the SSEs) from loops over the observed entries (:mod:`dask_bid.kernels.sparse`); the
block states, the client's chain and the random streams are the masked engine's, so
the chain is the same distribution and, up to the rounding of the sums' order, the
same chain as the masked fit of the densified matrix with NaN at every unobserved entry.
"""

from __future__ import annotations

import hashlib
from typing import Any, NamedTuple

import numpy as np

from ..kernels.sparse import csc_grams, csc_products, csc_residuals, rows_to_csr
from .dask_backend import (
    MASKED_GRAM_BYTES,
    TILE_BYTES,
    Layout,
    MaskedDaskBackend,
    _default_blocks,
    _ranges,
)
from .memory import column_blocks

__all__ = ["SparseDaskBackend", "SparseTileSource", "plan_sparse_layout", "SparseTile",
           "dense_columns", "TILE_ENTRIES"]

#: Observed entries a tile task reads at most (16 MiB of values; one wider column is read
#: whole).
TILE_ENTRIES = TILE_BYTES // 8


def plan_sparse_layout(counts, shape, n_components, *, block_size=None, chunks=None):
    """Blocks and column groups of a sparse input (one row tile: a tile is all rows).

    Groups hold at most :data:`TILE_ENTRIES` observed entries and, as the masked layout,
    at most ``TILE_BYTES / (8 K^2)`` columns (their Gram partial); ``chunks=(rows, cols)``
    forces groups of ``cols`` columns (rows are ignored). Blocks: ``block_size`` as in
    memory, else the masked engine's default over the groups.
    """
    M, N = (int(s) for s in shape)
    K = int(n_components)
    counts = np.asarray(counts, dtype=np.int64)
    if chunks is not None:
        c = int(chunks[1])
        groups = _ranges(list(range(0, N, c)) + [N])
    else:
        width_cap = max(1, TILE_BYTES // (8 * K * K))
        edges, acc, width = [0], 0, 0
        for n in range(N):
            c = int(counts[n])
            if width and (acc + c > TILE_ENTRIES or width >= width_cap):
                edges.append(n)
                acc, width = 0, 0
            acc += c
            width += 1
        edges.append(N)
        groups = _ranges(edges)
    if block_size is not None:
        blocks = column_blocks(N, int(block_size))
    else:
        blocks = _default_blocks([b - a for a, b in groups], K, MASKED_GRAM_BYTES // (8 * K * K))
    return Layout(shape=(M, N), blocks=tuple(blocks), groups=tuple(groups),
                  row_tiles=((0, M),))


class SparseTile(NamedTuple):
    """Columns c0:c1 of a sparse input, read by the task that uses them."""

    reader: Any
    c0: int
    c1: int


class SparseTileSource:
    """Tiles and column gathers of a sparse input (the ``TileSource`` protocol)."""

    kind = "sparse"

    def __init__(self, src, layout: Layout, executor=None, scale_log2=0):
        self.layout = layout
        self.scale_log2 = int(scale_log2)
        self.reader = src.array.scaled(self.scale_log2) if self.scale_log2 else src.array
        self.unscaled = src.array

    def tile(self, r, g):
        c0, c1 = self.layout.groups[g]
        return SparseTile(self.reader, int(c0), int(c1))

    def take(self, r, cols):
        """A Delayed of the CSR arrays of the observed entries of ``cols`` (all rows)."""
        import dask

        return dask.delayed(_take_sparse, pure=True)(self.reader, [int(c) for c in cols])

    def close(self):
        self.reader = None


# --------------------------------------------------------------------------- tasks
def _read_tile(tile):
    return tile.reader.read_cols(tile.c0, tile.c1)


def _digest(ptr, rows, vals):
    h = hashlib.blake2b(digest_size=16)
    for a in (ptr, rows, vals):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.data if a.size else b"")
    return h.hexdigest()


def _take_sparse(reader, cols):
    ptr, rows, vals = reader.read_columns(cols)
    return (*rows_to_csr(reader.shape[0], ptr, rows, vals), len(cols))


def _x(csc, M, Au, u_local):
    """CSR arrays of the wanted columns: gathered (``Au``) or from the tile itself."""
    if Au is not None:
        return tuple(np.ascontiguousarray(a) for a in Au[:3])
    ptr, rows, vals = csc
    u = np.asarray(u_local, dtype=np.int64)
    counts = ptr[u + 1] - ptr[u]
    idx = (np.concatenate([np.arange(ptr[c], ptr[c + 1]) for c in u]) if u.size
           else np.empty(0, dtype=np.int64)).astype(np.int64)
    xp = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return rows_to_csr(M, xp, rows[idx], vals[idx])


def _col_sums(ptr, x):
    cols = np.repeat(np.arange(ptr.size - 1), np.diff(ptr))
    return np.bincount(cols, weights=x, minlength=ptr.size - 1).astype(np.float64)


def _sparse_init_part(tile, Au, u_local, segs, where=None, *, K):
    """The first pass's partials of a column range (as ``_masked_init_part``)."""
    ptr, rows, vals = _read_tile(tile)
    M = tile.reader.shape[0]
    digests = [] if where is None else [(where[0], where[1], _digest(ptr, rows, vals))]
    X = _x((ptr, rows, vals), M, Au, u_local)
    L = _n_wanted(Au, u_local)
    with np.errstate(over="ignore", invalid="ignore"):
        P = csc_products(ptr, rows, vals, *X, L)
        sq = _col_sums(ptr, vals * vals)
        Gn = csc_grams(ptr, rows, *X, 0, K, 0, K)
    cnt = np.diff(ptr).astype(np.int64)
    bad = int(np.count_nonzero(~np.isfinite(vals)))
    amax = float(np.abs(vals).max()) if vals.size and not bad else 0.0
    return P, sq, Gn, cnt, bad, amax, digests


def _n_wanted(Au, u_local):
    return len(u_local) if u_local is not None else int(Au[3])


def _sparse_rows_part(tile, Au, u_local, segs):
    ptr, rows, vals = _read_tile(tile)
    X = _x((ptr, rows, vals), tile.reader.shape[0], Au, u_local)
    return csc_products(ptr, rows, vals, *X, _n_wanted(Au, u_local))


def _sparse_swap_part(tile, Au, u_local, segs, *, K, p, kind):
    """The pending swap's new Gram rows (as ``_swap_rows_part``)."""
    ptr, rows, vals = _read_tile(tile)
    X = _x((ptr, rows, vals), tile.reader.shape[0], Au, u_local)
    L = _n_wanted(Au, u_local)
    if kind != "incoming":
        cross = csc_grams(ptr, rows, *X, 0, K, K, L)          # (n, K, m)
        qs = np.ascontiguousarray(cross.transpose(2, 1, 0))   # (m, K, n)
        diag = csc_grams(ptr, rows, *X, K, L, K, L)           # (n, m, m)
        sq = np.diagonal(diag, axis1=1, axis2=2).T            # (m, n)
        if kind == "pivot":
            return np.ascontiguousarray(np.concatenate([qs, sq[:, None]], axis=1))
        qs[:, p] = sq
        return qs
    G = csc_grams(ptr, rows, *X, 0, K + 1, K, K + 1)[:, :, 0]  # (n, K + 1)
    q = np.ascontiguousarray(G[:, :K].T)
    q[p] = G[:, K]
    return q


def _sparse_sse_part(tile, C, c_local, W_g):
    """(SSE over all entries with the unobserved ones as 0, SSE over the observed ones)
    of a column range: the observed part entry by entry; the unobserved entries' share
    W_n^T (C^T C - C[O_n]^T C[O_n]) W_n from the squared predictions."""
    ptr, rows, vals = _read_tile(tile)
    M = tile.reader.shape[0]
    X = _x((ptr, rows, vals), M, C, c_local)
    W = np.ascontiguousarray(W_g, dtype=np.float64)
    K = W.shape[0]
    res = csc_residuals(ptr, rows, vals, *X, W)
    G = _full_gram(X, K)
    full = np.einsum("kn,kl,ln->n", W, G, W)
    unobs = np.maximum(full - res[1], 0.0)
    return np.array([float((res[0] + unobs).sum()), float(res[0].sum())])


def _full_gram(X, K):
    """C^T C from the CSR arrays of C (its unobserved entries as 0)."""
    import scipy.sparse as sp

    xptr, xcol, xval = X
    C = sp.csr_matrix((xval, xcol, xptr), shape=(xptr.size - 1, K))
    return np.asarray((C.T @ C).toarray(), dtype=np.float64)


def _sparse_digest(tile, r, g):
    return (r, g, _digest(*_read_tile(tile)))


def dense_columns(reader, columns, r0=0, r1=None):
    """Rows r0:r1 of A[:, columns] as a dense float64 array, NaN where unobserved."""
    M = reader.shape[0]
    r1 = M if r1 is None else r1
    ptr, rows, vals = reader.read_columns([int(c) for c in columns])
    out = np.full((r1 - r0, len(columns)), np.nan)
    for j in range(len(columns)):
        r = rows[ptr[j]:ptr[j + 1]]
        v = vals[ptr[j]:ptr[j + 1]]
        keep = (r >= r0) & (r < r1)
        out[r[keep] - r0, j] = v[keep]
    return out


def _write_sparse_rows(reader, columns, target, r0, r1):
    target[r0:r1, :] = dense_columns(reader, columns, r0, r1)
    return r1 - r0


class SparseDaskBackend(MaskedDaskBackend):
    """``missing="mask"`` on a sparse input (see the module docstring).

    The source is a :class:`SparseTileSource`: one row tile, column groups of bounded
    observed entries. Every pass (the first, the candidate rows, the swap's Gram rows,
    the SSE) reads each group's observed entries once and loops over them.
    """

    _init_part = staticmethod(_sparse_init_part)
    _rows_part = staticmethod(_sparse_rows_part)
    _swap_part = staticmethod(_sparse_swap_part)
    _sse_part = staticmethod(_sparse_sse_part)

    def checksum_pass(self):
        import dask

        from .fingerprint import combine_digests

        f = dask.delayed(_sparse_digest, pure=True)
        parts = [f(self.source.tile(0, g), 0, g) for g in range(len(self.layout.groups))]
        total = dask.delayed(combine_digests, pure=True)(parts)
        self.n_stream_passes += 1
        return self.ex.gather(self.ex.compute([total]))[0]

    def write_columns(self, columns, target):
        """A[:, columns] into the (M x K) array ``target``, NaN where unobserved, one
        task per row chunk of ``target`` (each reads the K columns' observed entries)."""
        import dask

        w = dask.delayed(_write_sparse_rows, pure=False)
        cols = [int(c) for c in columns]
        M = self.layout.shape[0]
        step = int(target.chunks[0])
        jobs = [w(self.source.unscaled, cols, target, r0, min(M, r0 + step))
                for r0 in range(0, M, step)]
        return int(sum(self.ex.gather(self.ex.compute(jobs))))
