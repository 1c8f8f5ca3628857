"""The Dask backend: block states as futures on workers, A streamed in row-block tiles.

Layout
------
Three partitions of A, fixed by its shape and chunks only (never by the cluster), so the
chain is the same on any cluster:

- **blocks**: contiguous column ranges; block ``b``'s slice of the chain (W, H, ...) is one
  ``BlockState`` living on a worker. By default blocks are aligned to the input's column
  chunks (a chunk is split into equal blocks, or several chunks make one block).
- **groups**: contiguous column ranges aligned to column chunks, as wide as fits a tile.
- **row tiles**: contiguous row ranges made of whole input row chunks.

A *tile* ``A[rows r, group g]`` (about ``TILE_BYTES``) is what one streaming task reads.

Passes over A
-------------
The only reads of A are streaming reductions ``A[:, U]^T A`` (the first pass with U = J,
then one pass per batch of swap candidates) and the direct SSE at the end. Each tile task
produces a partial product; partials are summed over row tiles in a fixed tree (fan-in 8,
consecutive tiles), so the result is bitwise the same whatever the scheduler, the number of
workers or the order tasks finish. Per block, the rows are then handed to the task that
updates that block's state: only ``n_candidates x block`` arrays move between workers, and
nothing of size N reaches the client.

Block operations
----------------
``map(fn, ctx)`` runs ``fn(state_b, ctx)`` for every block and brings back only the small
second element of each result (scalars), which the task sends to the client itself
(``engine/reports.py``). Blocks hinted to the same worker whose states are small
(``PACK_BYTES`` together, as last measured) are updated by one task, a *pack*, whose result
holds all their states; a block of a pack is then referred to as ``{"pack": future, "i":
index}``, which every block task resolves (``_state``). The new futures replace the old
ones, which are released. ``rebase(checkpoint)`` replaces every state future by a task
that loads it from a checkpoint: that cuts the task lineage the scheduler keeps for
recomputation, so the task count is bounded by ``checkpoint_every`` iterations, and a
worker lost in between is recovered by the scheduler replaying (bitwise) the few tasks
since the checkpoint.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import numpy as np
from dask.sizeof import sizeof as _dask_sizeof

from ..kernels.block import (
    BlockState,
    block_add_rows,
    block_column,
    block_init,
    block_posterior,
    block_set_mask_row,
    block_traces,
)
from ..kernels.products import row_products, row_products_into
from ..kernels.swap import masked_gram_rows
from .checkpoint import load_blob, save_blob
from .fingerprint import combine_digests, tile_digest
from .memory import MASK_ROW_OPS, column_blocks
from .scaling import ScaledReader

__all__ = ["Layout", "plan_layout", "TileSource", "ZarrTile", "DaskBackend", "MaskedDaskBackend",
           "TILE_BYTES", "FAN_IN", "PACK_BYTES", "PackStates", "PACK_MEMORY_FRACTION",
           "MAX_PACK_BYTES", "MASKED_GRAM_BYTES", "masked_block_bytes",
           "fused_tiles"]

#: Target size of one tile (float64 bytes) read by one streaming task: small enough that a
#: worker with a few hundred MB streams A without spilling, big enough to amortise the
#: per-task overhead (~1 ms) against reading and multiplying it (tens of ms).
TILE_BYTES = 16 * 2**20
#: Partials merged per node of the reduction tree.
FAN_IN = 8
#: Default blocks: at most this many, ...
MAX_DEFAULT_BLOCKS = 8
#: ... each with at least this much sweep work (columns x K^2), ...
MIN_BLOCK_WORK = 2**21
#: ... and at least this many columns.
MIN_BLOCK_COLS = 32
#: The reported SSE comes from the blocks' statistics unless it is below this fraction of
#: ||A||^2 (see DaskBackend.final_sse).
STATS_SSE_FLOOR = 1e-4
#: A worker's blocks whose states together take at most this many bytes are updated by
#: one task per ``map`` (a *pack*) instead of one task each: fewer tasks per iteration, at
#: the cost of holding the pack's old and new states at once (at most this much more).
#: 0 turns packs off. With a known worker memory limit the bound grows to
#: ``PACK_MEMORY_FRACTION`` of the smallest limit, at most ``MAX_PACK_BYTES``: a wide
#: matrix's block holding the candidate pool's rows is ~16 MiB, and one task per block
#: (49 a map at N = 200,000) cost more wall time than the blocks' arithmetic.
PACK_BYTES = 16 * 2**20
PACK_MEMORY_FRACTION = 1 / 32
MAX_PACK_BYTES = 512 * 2**20


@_dask_sizeof.register(BlockState)
def _sizeof_block_state(state):
    """Every field's size. Dask's default for a tuple of more than 10 items samples 10 and
    scales by len / 10: a 20-field state was reported at twice its cached candidate rows
    whenever ``cand_rows`` was sampled, so a worker's managed memory read up to twice what
    it held, crossed dask's spill target (0.6 of the limit) with a batch sized for half of
    it, and every iteration read its states back from disk (docs/performance.md, "Wide
    matrices", run 4). Worker memory accounting and spilling go by this number."""
    return sys.getsizeof(state) + sum(_dask_sizeof(x) for x in state)


class PackStates(tuple):
    """The new states of a pack's blocks (``_apply_pack``), in order."""


# the same sampling would size a pack of more than 10 states by extrapolation
_dask_sizeof.register(PackStates)(_sizeof_block_state)


#: missing="mask": default blocks hold at most this many bytes of per-column Gram matrices
#: (nb x K x K float64 each), and a column group's Gram partial at most ``TILE_BYTES``
MASKED_GRAM_BYTES = 64 * 2**20


# --------------------------------------------------------------------------- layout
def _edges(sizes):
    return np.concatenate([[0], np.cumsum(np.asarray(sizes, dtype=np.int64))]).tolist()


def _ranges(edges):
    return [(int(edges[i]), int(edges[i + 1])) for i in range(len(edges) - 1)]


def _default_blocks(col_chunks, K, max_width=None):
    N = int(sum(col_chunks))
    width = max(-(-N // MAX_DEFAULT_BLOCKS), -(-MIN_BLOCK_WORK // max(1, K * K)), MIN_BLOCK_COLS)
    if max_width is not None:
        width = max(MIN_BLOCK_COLS, min(width, int(max_width)))
    edges = [0]
    acc = 0
    for c in col_chunks:
        c = int(c)
        if c >= width:
            if acc:
                edges.append(edges[-1] + acc)
                acc = 0
            parts = -(-c // width)
            base = edges[-1]
            for i in range(1, parts + 1):
                edges.append(base + (c * i) // parts)
        else:
            if acc and acc + c > width:
                edges.append(edges[-1] + acc)
                acc = 0
            acc += c
    if acc:
        edges.append(edges[-1] + acc)
    return _ranges(edges)


def _accumulate(sizes, limit):
    """Group consecutive sizes while the sum stays <= limit (at least one each)."""
    edges, acc = [0], 0
    for s in sizes:
        s = int(s)
        if acc and acc + s > limit:
            edges.append(edges[-1] + acc)
            acc = 0
        acc += s
    if acc:
        edges.append(edges[-1] + acc)
    return _ranges(edges)


@dataclass(frozen=True)
class Layout:
    """Blocks, column groups and row tiles (all as ``(start, stop)`` lists)."""

    shape: tuple
    blocks: tuple
    groups: tuple
    row_tiles: tuple

    @property
    def tile_chunks(self):
        return (tuple(b - a for a, b in self.row_tiles), tuple(b - a for a, b in self.groups))

    def pieces(self, b):
        """Where block ``b``'s columns lie: ``[(group, lo, hi)]`` local to each group."""
        a0, a1 = self.blocks[b]
        out = []
        for g, (c0, c1) in enumerate(self.groups):
            lo, hi = max(a0, c0), min(a1, c1)
            if lo < hi:
                out.append((g, lo - c0, hi - c0))
        return out

    def segments(self, g):
        """Column ranges (local to group ``g``) of its intersections with the blocks."""
        c0, c1 = self.groups[g]
        out = []
        for a0, a1 in self.blocks:
            lo, hi = max(a0, c0), min(a1, c1)
            if lo < hi:
                out.append((lo - c0, hi - c0))
        return out

    def locate(self, col):
        """(group, local column) of a global column."""
        for g, (c0, c1) in enumerate(self.groups):
            if c0 <= col < c1:
                return g, col - c0
        raise IndexError(col)

    def describe(self):
        return {"blocks": [list(x) for x in self.blocks], "groups": [list(x) for x in self.groups],
                "row_tiles": [list(x) for x in self.row_tiles]}


def plan_layout(shape, in_chunks, n_components, *, block_size=None, chunks=None,
                itemsize=8, masked=False):
    """The layout for a matrix of ``shape`` stored in ``in_chunks`` (dask-style tuples).

    ``chunks=(rows, cols)`` forces the tile shape; ``block_size`` the block width (the
    MemoryBackend's split, so both backends run the same chain layout). ``masked``
    (``missing="mask"``): default blocks hold at most :data:`MASKED_GRAM_BYTES` of
    per-column Grams, and a column group's Gram partial (group width x K x K) at most
    :data:`TILE_BYTES` (or one input column chunk's, when that is wider).
    """
    M, N = (int(s) for s in shape)
    K = int(n_components)
    row_chunks, col_chunks = (tuple(int(c) for c in x) for x in in_chunks)
    if block_size is not None:
        blocks = column_blocks(N, int(block_size))
    else:
        blocks = _default_blocks(col_chunks, K,
                                 MASKED_GRAM_BYTES // (8 * K * K) if masked else None)
    if chunks is not None:
        r, c = (int(x) for x in chunks)
        row_tiles = _ranges(list(range(0, M, r)) + [M])
        groups = _ranges(list(range(0, N, c)) + [N])
    else:
        first_rows = row_chunks[0]
        per_row = TILE_BYTES // (8 * max(1, first_rows))
        if masked:
            per_row = min(per_row, TILE_BYTES // (8 * K * K))
        groups = _accumulate(col_chunks, max(1, per_row))
        widest = max(b - a for a, b in groups)
        row_tiles = _accumulate(row_chunks, max(1, TILE_BYTES // (8 * widest)))
    return Layout(shape=(M, N), blocks=tuple(blocks), groups=tuple(groups),
                  row_tiles=tuple(row_tiles))


# --------------------------------------------------------------------------- the source
class ZarrTile(NamedTuple):
    """A tile of a Zarr array, read by the task that uses it (never held as a key)."""

    reader: Any
    r0: int
    r1: int
    c0: int
    c1: int


class TileSource:
    """Where the tile tasks get A from.

    Zarr input is read inside the tasks that use it (``ZarrTile``): no tile ever sits in
    worker memory between tasks, so a pass streams A with a few tiles in flight per
    worker. Dask input is rechunked (lazily) to the tiles, whose keys the passes use; numpy
    input is such a dask array persisted on the cluster once (the chunks live in the graph,
    so a lost worker's tiles are recomputed).
    """

    def __init__(self, src, layout: Layout, executor, scale_log2=0):
        import dask.array as da

        self.layout = layout
        # A / 2^scale_log2 is what every task reads (see engine/scaling.py); 0: A itself
        self.scale_log2 = int(scale_log2)
        self.kind = "zarr" if src.kind == "zarr" else "dask"
        self.array = None
        self.tiles = None
        self.reader = None
        if src.kind == "zarr":
            # the guarded reader (when inputs provides one) names the store in read errors
            self.reader = src.reader() if hasattr(src, "reader") else src.array
            if self.scale_log2:
                self.reader = ScaledReader(self.reader, self.scale_log2)
            return
        chunks = layout.tile_chunks
        if src.kind == "dask":
            x = src.array
            if x.chunks != chunks:
                x = x.rechunk(chunks)
            if self.scale_log2:
                x = np.ldexp(x.astype(np.float64), -self.scale_log2)
        else:
            a = src.array
            if self.scale_log2:
                a = np.ldexp(np.asarray(a, dtype=np.float64), -self.scale_log2)
            x = da.from_array(a, chunks=chunks, name=f"bid-A-{uuid.uuid4().hex[:12]}")
            x = executor.persist(x)
        self.array = x
        self.tiles = x.to_delayed()

    def tile(self, r, g):
        """Tile (r, g): a ``ZarrTile`` or a Delayed."""
        if self.kind == "zarr":
            (r0, r1), (c0, c1) = self.layout.row_tiles[r], self.layout.groups[g]
            return ZarrTile(self.reader, r0, r1, c0, c1)
        return self.tiles[r, g]

    def take(self, r, cols):
        """A Delayed of ``A[rows of tile r, cols]`` as a C-ordered float64 array."""
        import dask

        lay = self.layout
        if self.kind == "zarr":
            r0, r1 = lay.row_tiles[r]
            return dask.delayed(_take_zarr, pure=True)(self.reader, r0, r1, list(cols))
        # one small task per tile on the tile's worker, so that only the columns travel
        loc = [lay.locate(int(c)) for c in cols]
        need = sorted({g for g, _ in loc})
        local = {g: sorted({c for gg, c in loc if gg == g}) for g in need}
        pieces = [dask.delayed(_cols_of, pure=True)(self.tiles[r, g], local[g]) for g in need]
        spec = [(need.index(g), local[g].index(c)) for g, c in loc]
        return dask.delayed(_take_cols, pure=True)(spec, *pieces)

    def close(self):
        self.tiles = None
        self.array = None
        self.reader = None


# --------------------------------------------------------------------------- tasks
def _realign(x):
    """``x`` with every numpy array at least itemsize-aligned (copied if not).

    Arrays received from another worker can sit at any byte offset of a network frame,
    and OpenBLAS sums in another order for data that is not 8-byte aligned: without
    this, a product would depend on where its operands were computed.
    """
    if isinstance(x, np.ndarray):
        return x if x.flags.aligned else np.array(x, order="K")
    if isinstance(x, BlockState):
        # the retained draws and the per-basis sums grow with the chain and enter no
        # product (only elementwise sums, exact at any alignment): walking them at every
        # map made a fit quadratic in its length
        upd = {}
        for name in _ARRAY_FIELDS:
            v = getattr(x, name)
            r = _realign(v)
            if r is not v:
                upd[name] = r
        return x._replace(**upd) if upd else x
    if isinstance(x, (tuple, list)):
        # scalars (most items: column indices, flags) are not walked: a call per item
        # was most of a small fit's client time spent here
        items = [v if type(v) in _SCALARS else _realign(v) for v in x]
        if all(a is b for a, b in zip(items, x, strict=True)):
            return x
        if isinstance(x, list):
            return items
        return type(x)(*items) if hasattr(x, "_fields") else type(x)(items)
    if isinstance(x, dict):
        items = {k: v if type(v) in _SCALARS else _realign(v) for k, v in x.items()}
        return x if all(items[k] is x[k] for k in x) else items
    return x


_SCALARS = frozenset((int, float, bool, str, type(None), np.int64, np.float64, np.bool_))


def _read(x):
    if isinstance(x, ZarrTile):
        x = x.reader[x.r0:x.r1, x.c0:x.c1]
    return x


def _f64(x):
    return _realign(np.asarray(_read(x), dtype=np.float64))


def _take_zarr(reader, r0, r1, cols):
    # orthogonal selection: only the chunks holding ``cols`` are read
    return np.ascontiguousarray(np.asarray(reader[r0:r1, cols], dtype=np.float64))


def _state(held):
    """The BlockState of a held value: a state, or ``{"pack": (states, smalls), "i": i}``
    for block i of a pack (``_apply_pack``)."""
    if isinstance(held, dict):
        held = held["pack"][0][held["i"]]
    return _realign(held)


def _state_bytes(s):
    """Bytes of the arrays a block state holds (what a pack's size is measured in)."""
    if isinstance(s, np.ndarray):
        return s.nbytes
    if isinstance(s, BlockState):
        # the retained draws and the per-basis sums hold entries of one shape each:
        # counted as the first entry's bytes times their number, not walked
        return (sum(_state_bytes(getattr(s, name)) for name in _ARRAY_FIELDS)
                + _uniform_bytes(s.traces) + _uniform_bytes(s.acc or {}))
    if isinstance(s, dict):
        return sum(_state_bytes(v) for v in s.values())
    if isinstance(s, (tuple, list)):
        return sum(_state_bytes(v) for v in s if type(v) not in _SCALARS)
    return 0


#: the fields of a block state whose size does not grow with the chain's length
_FIXED_FIELDS = tuple(f for f in BlockState._fields if f not in ("traces", "acc"))
#: those that can hold arrays (the rest are ints and the cached rows' column indices)
_ARRAY_FIELDS = tuple(f for f in _FIXED_FIELDS if f not in ("index", "start", "stop",
                                                            "cand_cols"))


def _uniform_bytes(items):
    """Bytes of a tuple's items or a dict's values, all of the first one's shapes."""
    n = len(items)
    if n == 0:
        return 0
    first = next(iter(items.values())) if isinstance(items, dict) else items[0]
    return n * _state_bytes(first)


def _cols_of(tile, cols):
    return np.asarray(tile[:, cols], dtype=np.float64)


def _take_cols(spec, *tiles):
    """Columns ``spec = [(tile index, local column)]`` of a row of tiles, (rows, len) C order."""
    rows = tiles[0].shape[0]
    out = np.empty((rows, len(spec)), dtype=np.float64)
    for j, (i, c) in enumerate(spec):
        out[:, j] = tiles[i][:, c]
    return out


def _products(t, Au, segs):
    # one product per block segment: with one tile the very same products as MemoryBackend;
    # in fixed panels, so that a row's floats do not depend on the batch it came in. Each
    # panel is written in place into a Fortran-ordered partial (no concatenation, no
    # copy per panel); the assemblies hand C-ordered rows to the blocks
    out = np.empty((Au.shape[1], segs[-1][1] - segs[0][0]), order="F")
    for lo, hi in segs:
        row_products_into(Au, t[:, lo:hi], out.T[lo - segs[0][0]:hi - segs[0][0]])
    return out


def _rows_part(tile, Au, u_local, segs):
    t = _f64(tile)
    Au = t[:, u_local] if Au is None else _realign(Au)
    return _products(t, Au, segs)


def _init_part(tile, Au, u_local, segs, where=None):
    """Partial H (and candidate rows), squared column norms, the count of non-finite
    entries and max|A| of one tile; with ``where = (r, g)`` also the digest of the bytes
    read (the input's checksum, engine/fingerprint.py)."""
    raw = _read(tile)
    digests = [] if where is None else [(where[0], where[1], tile_digest(raw))]
    t = _realign(np.asarray(raw, dtype=np.float64))
    Au = t[:, u_local] if Au is None else _realign(Au)
    # an input that needs rescaling overflows here; the pass is then run again on A / s
    with np.errstate(over="ignore", invalid="ignore"):
        P = _products(t, Au, segs)
        sq = np.concatenate([np.einsum("ij,ij->j", t[:, lo:hi], t[:, lo:hi])
                             for lo, hi in segs])
    bad = int(t.size - np.count_nonzero(np.isfinite(t)))
    amax = float(max(t.max(), -t.min())) if t.size and not bad else 0.0
    return P, sq, bad, amax, digests


def _sum_arrays(parts):
    out = parts[0].copy()
    for p in parts[1:]:
        out += p
    return out


def _sum_init(parts):
    P = parts[0][0].copy()
    sq = parts[0][1].copy()
    bad, amax, digests = parts[0][2], parts[0][3], list(parts[0][4])
    with np.errstate(over="ignore", invalid="ignore"):
        for p in parts[1:]:
            P += p[0]
            sq += p[1]
            bad += p[2]
            amax = max(amax, p[3])
            digests += p[4]
    return P, sq, bad, amax, digests


def _sum_floats(parts):
    out = 0.0
    for p in parts:
        out += p
    return out


def _count_bad(totals):
    """(non-finite entries, max|A|, checksum or None) of the first pass."""
    digests = [d for t in totals for d in t[4]]
    return (int(sum(t[2] for t in totals)), float(max(t[3] for t in totals)),
            combine_digests(digests) if digests else None)


def _digest_tile(tile, r, g):
    return (r, g, tile_digest(_read(tile)))


def _combine(items):
    return combine_digests(items)


def _assemble_rows(*pieces):
    return np.ascontiguousarray(np.concatenate([t[:, lo:hi] for t, lo, hi in pieces], axis=1))


def _assemble_init(*pieces):
    H = np.ascontiguousarray(np.concatenate([t[0][:, lo:hi] for t, lo, hi in pieces], axis=1))
    sq = np.concatenate([t[1][lo:hi] for t, lo, hi in pieces])
    return H, sq


def _sse_part(tile, C, c_local, W_g):
    t = _f64(tile)
    C = t[:, c_local] if C is None else _realign(C)
    R = t - C @ _realign(W_g)
    return float((R * R).sum())


def _write_rows(C, target, r0, r1):
    target[r0:r1, :] = C
    return r1 - r0


def _init_block(assembled, index, a, b, priors, entropy, chain, trace_cols, extra=(),
                max_rows=0):
    P, sq = assembled
    K = P.shape[0] - len(extra)
    state = block_init(index, a, b, P[:K], sq, priors, entropy, chain, trace_cols=trace_cols)
    if extra:
        state = block_add_rows(state, extra, P[K:], max_rows)
    return state


def _init_stats(assembled):
    return float(assembled[1].sum())


def _apply_pack(helds, fn, ctx):
    """``fn(state, ctx)`` for the blocks of a pack (one block or more), in order:
    ((new states), ((small, bytes of the new state), ...))."""
    ctx = _realign(ctx)
    out = [fn(_state(h), ctx) for h in helds]
    return PackStates(o[0] for o in out), tuple((o[1], _state_bytes(o[0])) for o in out)


def _columns_of(held, cols, proposal):
    s = _state(held)
    return [block_column(s, c, proposal) for c in cols]


def _quadratics(held, G):
    s = _state(held)
    if s.Gn is not None:  # missing="mask": a Gram per column, as MaskedMemoryBackend
        return float(np.vdot(s.H, s.W)), float(np.einsum("kn,nkl,ln->", s.W, s.Gn, s.W))
    G = _realign(G)
    return float(np.vdot(s.H, s.W)), float(np.vdot(s.W, G @ s.W))


def _add_rows(held, cols, rows, max_rows):
    return block_add_rows(_state(held), cols, rows, max_rows)


def _drop_rows(held):
    s = _state(held)
    return s._replace(cand_cols=(), cand_rows=np.empty((0, s.cand_rows.shape[1])))


def _init_rows(assembled, K):
    return assembled[0][K:]


def _save_block_lean(held, spec, path, cols):
    """Save a state whose cached rows are the batch ``cols`` without them (they can be
    recomputed from A, and are reattached from the pass that made them)."""
    s = _state(held)
    if s.cand_cols == cols:
        s = _drop_rows(s)
    return save_blob(spec, path, s)


def _reattach(held, cols, rows, max_rows):
    s = _state(held)
    return block_add_rows(s, cols, rows, max_rows) if not s.cand_cols else s


def _inner_h(held, W):
    return float(np.vdot(_state(held).H, W))


def _posterior(held, key):
    return block_posterior(_state(held), key)


def _traces(held):
    return block_traces(_state(held))


def _save_block(held, spec, path):
    return save_blob(spec, path, _state(held))


def _load_block(spec, path):
    return load_blob(spec, path)


def _loaded(held):
    return isinstance(_state(held), BlockState)


def _add_arrays(acc, p):
    acc += p
    return acc


def _add_init(acc, p):
    P, sq, bad, amax, digests = acc
    with np.errstate(over="ignore", invalid="ignore"):
        P += p[0]
        sq += p[1]
    return P, sq, bad + p[2], max(amax, p[3]), digests + list(p[4])


def _add_masked_init(acc, p):
    P, sq, Gn, cnt, bad, amax, digests = acc
    with np.errstate(over="ignore", invalid="ignore"):
        P += p[0]
        sq += p[1]
        Gn += p[2]
        cnt += p[3]
    return P, sq, Gn, cnt, bad + p[4], max(amax, p[5]), digests + list(p[6])


#: combine -> the same sum as a left fold into an accumulator this task owns (in place):
#: ``combine([a, b, c]) == fold(fold(copy of a, b), c)``, bit for bit
_FOLDS = {_sum_arrays: _add_arrays, _sum_init: _add_init}  # + _sum_masked_init, below


def _fused_parts(part_fn, combine, tiles, gathers, u_local, segs, wheres):
    """``combine`` of ``part_fn`` over consecutive row tiles, in one task: the first
    level of the reduction tree (:func:`_tree`) without its partials ever leaving the
    worker. The sum runs in the tree's order, so the result is the same floats."""
    fold = _FOLDS.get(combine) or (lambda acc, p: combine([acc, p]))
    acc = None
    for tile, Au, where in zip(tiles, gathers, wheres, strict=True):
        p = part_fn(tile, Au, u_local, segs, *where)
        acc = p if acc is None else fold(acc, p)
    return acc


def _tree(parts, combine):
    import dask

    f = dask.delayed(combine, pure=True)
    level = list(parts)
    while len(level) > 1:
        level = [f(level[i:i + FAN_IN]) if len(level[i:i + FAN_IN]) > 1 else level[i]
                 for i in range(0, len(level), FAN_IN)]
    return level[0]


def fused_tiles(n_rows_out, layout):
    """Row tiles one task of a pass reads and sums (the reduction tree's first level,
    :func:`_fused_parts`): :data:`FAN_IN` when a tile's partial (``n_rows_out`` rows of
    the group's columns) is larger than the tile itself (more rows than a row tile: the
    tallest, the others are the same or a remainder), when the partials, not the tiles,
    would dominate the memory and the transfers of the pass; else 1 (a task per tile).
    The sums are the same floats either way."""
    tallest = max(b - a for a, b in layout.row_tiles)
    return FAN_IN if len(layout.row_tiles) > 1 and int(n_rows_out) > tallest else 1


# --------------------------------------------------------------------------- backend
class DaskBackend:
    """One chain's blocks on a Dask cluster (see the module docstring).

    Implements the backend protocol of :func:`dask_bid.engine.chain.run_chain`.
    """

    def __init__(self, source: TileSource, executor, *, trace_cols=(), chain=0):
        lay = source.layout
        self.source = source
        self.layout = lay
        self.ex = executor
        self.n_rows, self.n_cols = lay.shape
        self.n_entries = self.n_rows * self.n_cols
        self.blocks = list(lay.blocks)
        self.trace_cols = tuple(int(c) for c in trace_cols)
        self.chain = chain
        self.norm_a2 = None
        self.n_obs = None
        self._held = None
        self._run = uuid.uuid4().hex[:10]
        self._n = 0
        self._hints = [None] * len(self.blocks)
        #: bytes of each block's state as last measured by a map (None: not yet), plus
        #: the rows added since; decides which blocks are packed (``_packs``)
        self._sizes = [None] * len(self.blocks)
        self._pack_limit = None
        self._owner_starts = np.array([a for a, _ in self.blocks])
        self.n_stream_passes = 0
        #: per block (columns, rows future, max_rows) while the cache is exactly the batch
        #: of one pass: checkpoints then leave the rows out and the blocks reloaded from a
        #: checkpoint get them back from that pass's result (its lineage is one pass)
        self._rows_src = None
        #: the first pass also hashes what it reads (set by the fit when it records the
        #: input's fingerprint); afterwards ``checksum`` holds the result
        self.want_checksum = False
        self.checksum = None
        #: max|A| (of what the tasks read) seen by the last init pass
        self.amax = None
        #: ``on_first_pass(backend)``: called after the first init pass (checks on the
        #: input's checksum and range), before its blocks are used
        self.on_first_pass = None

    # -- plumbing -----------------------------------------------------------
    def _key(self, what, b=""):
        return f"bid-{what}-{self._run}-c{self.chain}-{self._n}-{b}"

    def _refresh_hints(self):
        ws = self.ex.workers()
        self._hints = [ws[b % len(ws)] if ws else None for b in range(len(self.blocks))]

    def _submit_blocks(self, what, fn, *args):
        self._n += 1
        return [self.ex.submit(fn, h, *args, key=self._key(what, b), hint=self._hints[b])
                for b, h in enumerate(self._held)]

    def _grow_sizes(self, n_rows):
        # the rows an add_rows pass caches (before evictions): counted until the next map
        # measures the states again, so a pack never outgrows PACK_BYTES unseen
        self._sizes = [None if z is None else z + 8 * n_rows * (e - a)
                       for z, (a, e) in zip(self._sizes, self.blocks, strict=True)]

    def _owner(self, col):
        return int(np.searchsorted(self._owner_starts, col, side="right") - 1)

    def close(self):
        self._held = None

    # -- streaming passes ---------------------------------------------------
    def _gathers(self, cols):
        """Per row tile: None (one group: each tile task takes its own columns) or a
        Delayed holding A[rows, cols]."""
        if len(self.layout.groups) == 1:
            return [None] * len(self.layout.row_tiles)
        return [self.source.take(r, cols) for r in range(len(self.layout.row_tiles))]

    def _group_totals(self, part_fn, combine, cols, hashed=False):
        import dask

        lay = self.layout
        gathers = self._gathers(cols)
        u_local = [int(c) for c in cols] if len(lay.groups) == 1 else None
        n_tiles = len(lay.row_tiles)
        fuse = fused_tiles(len(cols), lay)
        part = dask.delayed(part_fn, pure=True)
        fused = dask.delayed(_fused_parts, pure=True)
        totals = []
        for g in range(len(lay.groups)):
            segs = lay.segments(g)
            where = [((r, g),) if hashed else () for r in range(n_tiles)]
            if fuse > 1:
                parts = [fused(part_fn, combine, [self.source.tile(r, g) for r in rs],
                               [gathers[r] for r in rs], u_local, segs, [where[r] for r in rs])
                         for rs in (range(i, min(i + fuse, n_tiles))
                                    for i in range(0, n_tiles, fuse))]
            else:
                parts = [part(self.source.tile(r, g), gathers[r], u_local, segs, *where[r])
                         for r in range(n_tiles)]
            totals.append(_tree(parts, combine))
        self.n_stream_passes += 1
        return totals

    def _per_block(self, totals, assemble):
        import dask

        f = dask.delayed(assemble, pure=True)
        return [f(*[(totals[g], lo, hi) for g, lo, hi in self.layout.pieces(b)])
                for b in range(len(self.blocks))]

    # -- the backend protocol -----------------------------------------------
    def init_blocks(self, J, priors, entropy, chain, extra=(), max_rows=0):
        """Set up the blocks for basis J in one pass over A; the same pass also computes
        the rows a_u^T A of the swap candidates ``extra`` (cached as by ``add_rows``)."""
        import dask

        from .._errors import NonFiniteInputError

        J = [int(j) for j in J]
        extra = tuple(int(c) for c in extra)
        hashed = self.want_checksum
        totals = self._group_totals(_init_part, _sum_init, J + list(extra), hashed=hashed)
        bad = dask.delayed(_count_bad, pure=True)(totals)
        handles = self.ex.compute(self._per_block(totals, _assemble_init) + [bad])
        assembled, bad = handles[:-1], handles[-1]
        self._refresh_hints()
        self._n += 1
        self._held = [
            self.ex.submit(_init_block, assembled[b], b, a, e, priors, entropy, chain,
                           self.trace_cols, extra, int(max_rows), key=self._key("init", b),
                           hint=self._hints[b])
            for b, (a, e) in enumerate(self.blocks)]
        self._rows_src = None
        if extra and len(extra) <= int(max_rows):
            self._rows_src = [(extra, self.ex.submit(_init_rows, assembled[b], len(J),
                                                     key=self._key("irows", b),
                                                     hint=self._hints[b]), int(max_rows))
                              for b in range(len(self.blocks))]
        stats = self.ex.gather([self.ex.submit(_init_stats, h, key=self._key("sq", b))
                                for b, h in enumerate(assembled)] + [bad])
        n_bad, self.amax, checksum = stats[-1]
        if n_bad:
            raise NonFiniteInputError(
                f"A contains {n_bad} NaN or infinite entries. Fill NaN (e.g. with 0, as the "
                "paper does for missing values) or pass missing='mask' to treat NaN as "
                "missing; replace any infinities (no option accepts them).")
        if hashed:
            self.checksum, self.want_checksum = checksum, False
        if self.on_first_pass is not None:
            hook, self.on_first_pass = self.on_first_pass, None
            hook(self)
        self.norm_a2 = float(sum(stats[:-1]))
        self.n_obs = self.n_entries
        return self.norm_a2, self.n_obs

    def _fetch_columns(self, what, cols, proposal):
        """[block_column(state, c, proposal) for c in cols] in one round trip, one task
        per block holding any of them."""
        self._n += 1
        by_block = {}
        for i, c in enumerate(cols):
            by_block.setdefault(self._owner(int(c)), []).append(i)
        hs = [self.ex.submit(_columns_of, self._held[b], tuple(int(cols[i]) for i in idx),
                             bool(proposal), key=self._key(what, b), hint=self._hints[b])
              for b, idx in by_block.items()]
        out = [None] * len(cols)
        for idx, got in zip(by_block.values(), self.ex.gather(hs), strict=True):
            for i, v in zip(idx, got, strict=True):
                out[i] = v
        return out

    def gram(self, J):
        G = np.stack([c for c, _ in self._fetch_columns("gram", J, False)], axis=1)
        return 0.5 * (G + G.T)

    def quadratics(self, G):
        res = self.ex.gather(self._submit_blocks("quad", _quadratics, G))
        return sum(r[0] for r in res), sum(r[1] for r in res)

    def column(self, col, proposal=False):
        return self._fetch_columns("col", [col], proposal)[0]

    def columns(self, cols, proposal=False):
        """[(H[:, c], ||a_c||^2) for c in cols], in one round trip."""
        return self._fetch_columns("cols", cols, proposal)

    #: the tile task of the candidate-row passes (the masked and sparse backends supply
    #: their own, with the same results)
    _rows_part = staticmethod(_rows_part)
    #: whether a batch that evicts every cached row frees them before its pass and is
    #: left out of checkpoints (``_rows_src``); the masked backends keep their rows
    _lean_rows = True

    def add_rows(self, cols, max_rows):
        cols = [int(c) for c in cols]
        self._rows_src = None
        lean = self._lean_rows and len(cols) >= max_rows
        if lean and self._held is not None:
            # the batch evicts every cached row: free them before the pass, so that a
            # worker holds at most two copies of a batch (summed partials, block rows)
            self._n += 1
            self._held = [self.ex.submit(_drop_rows, h, key=self._key("drop", b),
                                         hint=self._hints[b])
                          for b, h in enumerate(self._held)]
        totals = self._group_totals(self._rows_part, _sum_arrays, cols)
        rows = self.ex.compute(self._per_block(totals, _assemble_rows))
        self._n += 1
        self._held = [self.ex.submit(_add_rows, h, tuple(cols), rows[b], int(max_rows),
                                     key=self._key("add", b), hint=self._hints[b])
                      for b, h in enumerate(self._held)]
        self._grow_sizes(len(cols))
        if lean:
            self._rows_src = [(tuple(cols), rows[b], int(max_rows))
                              for b in range(len(self.blocks))]

    def _pack_bytes(self):
        """The packs' bound: ``PACK_BYTES``, or a share of the smallest worker memory
        limit when that is larger (see ``PACK_MEMORY_FRACTION``); asked once a backend."""
        if PACK_BYTES <= 0:
            return 0
        if self._pack_limit is None:
            from .summary import cluster_memory

            memory, _ = cluster_memory(self.ex)
            self._pack_limit = PACK_BYTES if not memory else int(
                min(MAX_PACK_BYTES, max(PACK_BYTES, PACK_MEMORY_FRACTION * memory)))
        return self._pack_limit

    def _packs(self):
        """Lists of blocks updated by one task each: consecutive blocks of the same hinted
        worker while their states sum to at most :meth:`_pack_bytes` (a block of unknown
        size, or larger, alone). Which blocks share a task never changes a float of the
        chain."""
        limit = self._pack_bytes()
        by_worker = {}
        for b, h in enumerate(self._hints):
            by_worker.setdefault(h, []).append(b)
        packs = []
        for bs in by_worker.values():
            pack, total = [], 0
            for b in bs:
                size = limit + 1 if self._sizes[b] is None else self._sizes[b]
                if pack and total + size > limit:
                    packs.append(pack)
                    pack, total = [], 0
                pack.append(b)
                total += size
            packs.append(pack)
        return sorted(packs)

    def map(self, fn, ctx):
        # one task per pack of blocks (most often per worker): the new states stay on the
        # worker, their small results come back with the task (engine/reports.py)
        self._n += 1
        what = getattr(fn, "__name__", "op")
        packs = self._packs()
        hs = [self.ex.submit_reporting(
                  _apply_pack, [self._held[b] for b in pack], fn, ctx,
                  key=self._key(what, pack[0] if len(pack) == 1 else f"p{i}"),
                  hint=self._hints[pack[0]])
              for i, pack in enumerate(packs)]
        new = [None] * len(self.blocks)
        small = [None] * len(self.blocks)
        for pack, h, got in zip(packs, hs, self.ex.collect(hs), strict=True):
            for i, b in enumerate(pack):
                new[b] = {"pack": h, "i": i}
                small[b], self._sizes[b] = got[i]
        self._held = new
        return small

    def posterior(self, key):
        parts = self.ex.gather(self._submit_blocks("post", _posterior, key))
        n = parts[0][0]
        if n == 0:
            return 0, None, None
        return n, np.concatenate([p[1] for p in parts], axis=1), np.concatenate(
            [p[2] for p in parts], axis=1)

    def traces(self):
        return self.ex.gather(self._submit_blocks("traces", _traces))

    def final_sse(self, columns, W, held):
        """(||A - A[:, columns] W||^2, None) for the reported fit.

        When the blocks hold the basis ``columns`` (``held``), from their H with no pass
        over A: ||A||^2 - 2 <H, W> + <W, G W>, unless that cancels so much (SSE below
        :data:`STATS_SSE_FLOOR` of ||A||^2, losing more than 4 of the 16 digits) that the
        direct pass is worth it. Otherwise directly, as :meth:`sse`.
        """
        from .cluster import RECOVERABLE_ERRORS

        if held:
            try:
                G = self.gram(np.asarray(columns, dtype=np.int64))
                Ws = self.ex.scatter([np.ascontiguousarray(W[:, a:b]) for a, b in self.blocks])
                self._n += 1
                hw = sum(self.ex.gather([
                    self.ex.submit(_inner_h, h, w, key=self._key("hw", b))
                    for b, (h, w) in enumerate(zip(self._held, Ws, strict=True))]))
                sse = self.norm_a2 - 2.0 * hw + float(np.vdot(W, G @ W))
                if sse >= STATS_SSE_FLOOR * self.norm_a2:
                    return sse, None
            except RECOVERABLE_ERRORS:
                pass  # a worker died under us: the direct pass below retries
        return self.sse(columns, W)

    def sse(self, columns, W, mask=None):
        """(||A - A[:, columns] W||^2, None), directly from A in one streaming pass."""
        from .cluster import RECOVERABLE_ERRORS

        for attempt in range(3):
            try:
                return self._direct_sse(columns, W)
            except RECOVERABLE_ERRORS:
                # a worker holding a scattered slice of W died: send it again
                if attempt == 2:
                    raise

    def _direct_sse(self, columns, W):
        return float(self._stream_sse(columns, W, _sse_part, _sum_floats)), None

    def _stream_sse(self, columns, W, part_fn, combine):
        """One streaming pass: ``part_fn`` of every tile, summed by ``combine`` in the
        fixed tree (row tile, then column group order)."""
        import dask

        lay = self.layout
        cols = [int(c) for c in columns]
        gathers = self._gathers(cols)
        c_local = cols if len(lay.groups) == 1 else None
        part = dask.delayed(part_fn, pure=True)
        # W's slices are scattered (one message) rather than embedded in the graph: K x N
        # can be large, and the graph goes through the scheduler
        Ws = self.ex.scatter([np.ascontiguousarray(W[:, c0:c1]) for c0, c1 in lay.groups])
        parts = [part(self.source.tile(r, g), gathers[r], c_local, Ws[g])
                 for r in range(len(lay.row_tiles)) for g in range(len(lay.groups))]
        total = _tree(parts, combine)
        return self.ex.gather(self.ex.compute([total]))[0]

    def checksum_pass(self):
        """The input's checksum (engine/fingerprint.py) from a read of every tile.

        Only a resumed fit needs it on its own: a fresh fit hashes during its first pass.
        """
        import dask

        lay = self.layout
        f = dask.delayed(_digest_tile, pure=True)
        parts = [f(self.source.tile(r, g), r, g)
                 for r in range(len(lay.row_tiles)) for g in range(len(lay.groups))]
        total = dask.delayed(_combine, pure=True)(parts)
        self.n_stream_passes += 1
        return self.ex.gather(self.ex.compute([total]))[0]

    def write_columns(self, columns, target):
        """Stream A[:, columns] into the (M x K) array ``target``, one task per row tile."""
        import dask

        w = dask.delayed(_write_rows, pure=False)
        cols = [int(c) for c in columns]
        jobs = [w(self.source.take(r, cols), target, r0, r1)
                for r, (r0, r1) in enumerate(self.layout.row_tiles)]
        return int(sum(self.ex.gather(self.ex.compute(jobs))))

    # -- checkpoints --------------------------------------------------------
    def save_blocks(self, spec, prefix):
        """Each block's worker writes its state to ``prefix/block_#####``."""
        self._n += 1
        src = self._rows_src
        hs = [self.ex.submit(_save_block, h, spec, f"{prefix}/block_{b:05d}",
                             key=self._key("save", b), hint=self._hints[b]) if src is None
              else self.ex.submit(_save_block_lean, h, spec, f"{prefix}/block_{b:05d}",
                                  src[b][0][-src[b][2]:], key=self._key("save", b),
                                  hint=self._hints[b])
              for b, h in enumerate(self._held)]
        return sum(self.ex.gather(hs))

    def check_blocks(self):
        """Wait until every block state is loaded; raises what a failed load raised
        (:class:`~dask_bid.CheckpointError` for a checkpoint that cannot be read back)."""
        self._n += 1
        return all(self.ex.gather([self.ex.submit(_loaded, h, key=self._key("ok", b))
                                   for b, h in enumerate(self._held)]))

    def load_blocks(self, spec, prefix, norm_a2=None, n_obs=None, force=False):
        """Replace every block state by a task loading it from ``prefix`` (cuts lineage)."""
        if self.ex.is_distributed or self._held is None or force:
            self._refresh_hints()
            self._n += 1
            self._held = [self.ex.submit(_load_block, spec, f"{prefix}/block_{b:05d}",
                                         key=self._key("load", b), hint=self._hints[b])
                          for b in range(len(self.blocks))]
            src, self._rows_src = self._rows_src, None
            if force:
                # a restore: the rows of a lean checkpoint are gone with the run that
                # made them; the blocks start with no cached rows (ClientState.cached is
                # emptied by the caller), which changes passes, never the chain
                self._held = [self.ex.submit(_drop_rows, h, key=self._key("norows", b),
                                             hint=self._hints[b])
                              for b, h in enumerate(self._held)]
            elif src is not None:
                self._held = [self.ex.submit(_reattach, h, *src[b], key=self._key("rows", b),
                                             hint=self._hints[b])
                              for b, h in enumerate(self._held)]
                self._rows_src = src
        if norm_a2 is not None:
            self.norm_a2, self.n_obs = norm_a2, n_obs


# --------------------------------------------------------------------------- missing="mask"


def masked_block_bytes(nb, K, *, n_tries, max_cached_rows, max_tracked_sets=16,
                       trace_values=0, n_pivot=0, n_redraw=0):
    """Upper bound of the bytes one block's state holds under ``missing="mask"``
    (docs/engine.md, "Missing entries"); it does not grow with the number of rows M.

    For ``nb`` columns: two copies of the per-column Gram matrices (nb x K x K: the
    current basis's, and the aggressive or annealed proposal's), the pending swap's new
    Gram rows (``n_tries`` x K x nb, or the pivot and redraw attempts' products, computed
    in one pass, ``n_pivot + n_redraw`` x (K + 1) x nb, whichever is larger), W, H, GBTN's Mu
    and Tau and the same four for a proposal (8 K x nb), the squared norms, the cached
    candidate rows (``max_cached_rows`` x nb), and the posterior sums (2 K x nb) of up to
    ``max_tracked_sets`` bases plus the two the point estimate records; ``trace_values``
    is the number of (column, draw) pairs of the traced columns the block keeps (K floats
    each). While a task runs, the annealed swap's interpolated Grams take up to three
    more nb x K x K copies.
    """
    per_col = (2 * K * K + max(int(n_tries) * K, (int(n_pivot) + int(n_redraw)) * (K + 1))
               + 8 * K + 1
               + int(max_cached_rows)
               + 2 * K * (int(max_tracked_sets) + 2))
    return 8 * (int(nb) * per_col + K * int(trace_values))


def _observed(raw):
    """(A with every missing entry set to 0, the boolean mask of observed entries): NaN
    marks a missing entry, as ``bayesian_id(..., missing="mask")`` does in memory."""
    t = np.asarray(_read(raw), dtype=np.float64)
    m = ~np.isnan(t)
    return _realign(np.where(m, t, 0.0)), m


def _masked_cols(t, Au, u_local):
    """(array, its column indices of the wanted columns): the tile itself in a one-group
    layout, else the gathered columns (with NaN as 0). The callers index it exactly as
    MaskedMemoryBackend indexes A (``X[:, list]``: the same memory layout, so the same
    BLAS products in a one-tile layout)."""
    if Au is None:
        return t, list(u_local)
    return _observed(Au)[0], list(range(Au.shape[1]))


def _masked_init_part(tile, Au, u_local, segs, where=None, *, K):
    """The first pass's partials of one tile under missing="mask": H = C^T A and the
    candidate rows (one product each, as MaskedMemoryBackend), the per-column Grams
    C[O_n]^T C[O_n] over the tile's observed rows, squared norms, observed counts per
    column, infinities, max|A| over observed entries and (``where``) the tile's digest."""
    raw = _read(tile)
    digests = [] if where is None else [(where[0], where[1], tile_digest(raw))]
    t, m = _observed(raw)
    X, idx = _masked_cols(t, Au, u_local)
    C, Xc = X[:, idx[:K]], X[:, idx[K:]]
    CT = C.T
    with np.errstate(over="ignore", invalid="ignore"):
        P = np.concatenate([np.concatenate([CT @ t[:, lo:hi], row_products(Xc, t[:, lo:hi])])
                            for lo, hi in segs], axis=1)
        sq = np.concatenate([np.einsum("ij,ij->j", t[:, lo:hi], t[:, lo:hi])
                             for lo, hi in segs])
        Gn = []
        for lo, hi in segs:
            for n in range(lo, hi):
                Cn = C[m[:, n]]
                Gn.append(Cn.T @ Cn)
    Gn = np.stack(Gn) if Gn else np.empty((0, K, K))
    cnt = np.concatenate([m[:, lo:hi].sum(axis=0) for lo, hi in segs]).astype(np.int64)
    bad = int(np.isinf(t).sum())
    amax = float(max(t.max(), -t.min())) if t.size and not bad else 0.0
    return P, sq, Gn, cnt, bad, amax, digests


def _sum_masked_init(parts):
    P, sq, Gn, cnt = (parts[0][i].copy() for i in range(4))
    bad, amax, digests = parts[0][4], parts[0][5], list(parts[0][6])
    with np.errstate(over="ignore", invalid="ignore"):
        for p in parts[1:]:
            P += p[0]
            sq += p[1]
            Gn += p[2]
            cnt += p[3]
            bad += p[4]
            amax = max(amax, p[5])
            digests += p[6]
    return P, sq, Gn, cnt, bad, amax, digests


_FOLDS[_sum_masked_init] = _add_masked_init


def _count_masked_bad(totals):
    """(infinite entries, max|A|, checksum or None) of the first masked pass."""
    digests = [d for t in totals for d in t[6]]
    return (int(sum(t[4] for t in totals)), float(max(t[5] for t in totals)),
            combine_digests(digests) if digests else None)


def _assemble_masked_init(*pieces):
    P = np.concatenate([t[0][:, lo:hi] for t, lo, hi in pieces], axis=1)
    sq = np.concatenate([t[1][lo:hi] for t, lo, hi in pieces])
    Gn = np.ascontiguousarray(np.concatenate([t[2][lo:hi] for t, lo, hi in pieces]))
    cnt = np.concatenate([t[3][lo:hi] for t, lo, hi in pieces])
    return P, sq, Gn, cnt


def _init_masked_block(assembled, index, a, b, priors, entropy, chain, trace_cols, K,
                       extra=(), max_rows=0):
    P, sq, Gn, _ = assembled
    state = block_init(index, a, b, P[:K], sq, priors, entropy, chain, trace_cols=trace_cols,
                       Gn=Gn)
    if extra:
        state = block_add_rows(state, extra, P[K:], max_rows)
    return state


def _masked_init_stats(assembled, a):
    """(||A_b||^2, observed entries, the block's columns with none observed)."""
    cnt = assembled[3]
    return float(assembled[1].sum()), int(cnt.sum()), (a + np.flatnonzero(cnt == 0)).tolist()


def _masked_rows_part(tile, Au, u_local, segs):
    t, _ = _observed(tile)
    X, idx = _masked_cols(t, Au, u_local)
    return _products(t, X[:, idx], segs)


def _swap_rows_part(tile, Au, u_local, segs, *, K, p, kind):
    """A tile's share of the pending swap's new per-column Gram rows (missing="mask").

    The columns are the current basis J (slot order) then the incoming ones. ``kind``
    as in ``MASK_ROW_OPS``: "candidates": for every candidate u, row p of every column's
    Gram if slot p took u, (m, K, cols); "pivot": for every u, C^T a_u under the current
    basis then ||a_u||^2, (m, K + 1, cols); "incoming": for the one incoming column,
    (K, cols). The same products as MaskedMemoryBackend.map, so a one-tile layout gives
    the same floats.
    """
    t, m = _observed(tile)
    X, idx = _masked_cols(t, Au, u_local)
    mf = m.astype(np.float64)
    many = kind != "incoming"
    if many:
        XJ, au = X[:, idx[:K]], X[:, idx[K:]]
    else:
        J2 = list(idx[:K])
        J2[p] = idx[K]
        Xq = X[:, J2] * X[:, idx[K]][:, None]
    out = []
    for lo, hi in segs:
        Mb = mf[:, lo:hi]
        if many:
            qs = masked_gram_rows(XJ, au, Mb, p, pivot=kind == "pivot")
        else:
            qs = Xq.T @ Mb
        out.append(qs)
    return np.concatenate(out, axis=-1)


def _assemble_last(*pieces):
    return np.ascontiguousarray(np.concatenate([t[..., lo:hi] for t, lo, hi in pieces],
                                               axis=-1))


def _set_mask_rows(held, q):
    return block_set_mask_row(_state(held), _realign(q))


def _masked_sse_part(tile, C, c_local, W_g):
    t, m = _observed(tile)
    X, idx = _masked_cols(t, C, c_local)
    R = t - X[:, idx] @ _realign(W_g)
    R2 = R * R
    return np.array([R2.sum(), R2[m].sum()])


class MaskedDaskBackend(DaskBackend):
    """``missing="mask"`` on the Dask engine: NaN in A marks a missing entry, and the
    likelihood counts the observed entries only (:class:`~dask_bid.engine.memory.
    MaskedMemoryBackend` in memory, whose chain this one reproduces).

    Every block also holds the per-column Gram matrices C[O_n]^T C[O_n] of its columns
    (nb x K x K), computed by the tile tasks of the first pass, which reads the mask
    from the NaN of each tile. A swap changes row p of every column's Gram; that needs
    the mask of every column, so every move that proposes a swap runs one streaming pass
    (``n_tries`` incoming columns at once for the collapsed move) whose per-block
    results go from the tile tasks to the block's worker, never to the client.
    """

    #: the tile tasks of the passes; a subclass reading another input layout (the sparse
    #: backend, engine/sparse_backend.py) supplies its own with the same results
    _init_part = staticmethod(_masked_init_part)
    _rows_part = staticmethod(_masked_rows_part)
    _lean_rows = False
    _swap_part = staticmethod(_swap_rows_part)
    _sse_part = staticmethod(_masked_sse_part)

    def __init__(self, source: TileSource, executor, **kwargs):
        super().__init__(source, executor, **kwargs)
        self.n_swap_passes = 0

    def init_blocks(self, J, priors, entropy, chain, extra=(), max_rows=0):
        import dask

        from .._errors import InputShapeError, NonFiniteInputError

        J = [int(j) for j in J]
        K = len(J)
        extra = tuple(int(c) for c in extra)
        hashed = self.want_checksum
        totals = self._group_totals(partial(self._init_part, K=K), _sum_masked_init,
                                    J + list(extra), hashed=hashed)
        bad = dask.delayed(_count_masked_bad, pure=True)(totals)
        handles = self.ex.compute(self._per_block(totals, _assemble_masked_init) + [bad])
        assembled, bad = handles[:-1], handles[-1]
        self._refresh_hints()
        self._n += 1
        self._held = [
            self.ex.submit(_init_masked_block, assembled[b], b, a, e, priors, entropy, chain,
                           self.trace_cols, K, extra, int(max_rows), key=self._key("init", b),
                           hint=self._hints[b])
            for b, (a, e) in enumerate(self.blocks)]
        stats = self.ex.gather([self.ex.submit(_masked_init_stats, h, self.blocks[b][0],
                                               key=self._key("sq", b))
                                for b, h in enumerate(assembled)] + [bad])
        n_bad, self.amax, checksum = stats[-1]
        if n_bad:
            raise NonFiniteInputError(
                f"A contains {n_bad} infinite entries; missing='mask' treats only NaN as "
                "missing. Replace the infinities.")
        empty = [c for s in stats[:-1] for c in s[2]]
        if empty:
            raise InputShapeError(f"columns {empty[:5]} have no observed entry; drop them "
                                  "first.")
        if hashed:
            self.checksum, self.want_checksum = checksum, False
        if self.on_first_pass is not None:
            hook, self.on_first_pass = self.on_first_pass, None
            hook(self)
        self.norm_a2 = float(sum(s[0] for s in stats[:-1]))
        self.n_obs = int(sum(s[1] for s in stats[:-1]))
        return self.norm_a2, self.n_obs

    def _set_swap_rows(self, J, incoming, p, kind):
        """One pass: every block gets the new Gram rows of the pending swap (``kind`` as
        in ``MASK_ROW_OPS``)."""
        J = [int(j) for j in J]
        part = partial(self._swap_part, K=len(J), p=int(p), kind=kind)
        totals = self._group_totals(part, _sum_arrays, J + [int(u) for u in incoming])
        rows = self.ex.compute(self._per_block(totals, _assemble_last))
        self.n_swap_passes += 1
        self._n += 1
        self._held = [self.ex.submit(_set_mask_rows, h, rows[b], key=self._key("mrow", b),
                                     hint=self._hints[b])
                      for b, h in enumerate(self._held)]

    def map(self, fn, ctx):
        kind = MASK_ROW_OPS.get(fn)  # the same dispatch as MaskedMemoryBackend's
        if kind in ("candidates", "pivot"):
            self._set_swap_rows(ctx.J, ctx.cands, ctx.p, kind)
        elif kind == "incoming":
            self._set_swap_rows(ctx.J, [ctx.u], ctx.p, kind)
        return super().map(fn, ctx)

    def final_sse(self, columns, W, held):
        """(SSE over all entries with the missing ones as 0, SSE over the observed ones),
        directly from A in one pass (as MaskedMemoryBackend.sse)."""
        return self.sse(columns, W)

    def _direct_sse(self, columns, W):
        # (SSE with the missing entries as 0, SSE over the observed ones)
        out = self._stream_sse(columns, W, self._sse_part, _sum_arrays)
        return float(out[0]), float(out[1])
