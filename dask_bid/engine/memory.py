"""In-memory backend: the blocks of one chain as numpy arrays, swept in threads.

The numba kernels release the GIL, so a thread pool of ``n_threads`` runs
blocks in parallel without copying A. Below ``INLINE_ENTRIES`` entries of A a block's
work is shorter than handing it to a thread and back, so the blocks run one after the
other in the calling thread: the same blocks and the same results, only sooner (a
60 x 30 fit took 1.34 s inline against 1.99 s in 2 threads, a 502 x 48 one 0.58 s
against 0.97 s; at 2 million entries the two were even; docs/performance.md).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..kernels.block import (
    block_add_rows,
    block_aggressive,
    block_annealed_propose,
    block_collapsed_score,
    block_column,
    block_init,
    block_pivot_score,
    block_plain_propose,
    block_posterior,
    block_redraw_score,
    block_set_mask_row,
)
from ..kernels.products import row_products
from ..kernels.swap import masked_gram_rows

__all__ = ["MemoryBackend", "MaskedMemoryBackend", "column_blocks", "MASK_ROW_OPS",
           "INLINE_ENTRIES"]

#: matrices with fewer entries run their blocks in the calling thread (module docstring)
INLINE_ENTRIES = 1 << 20

#: ``missing="mask"``: the block operations that need the pending swap's new per-column
#: Gram rows first (``block_set_mask_row``), and which: ``"candidates"`` (slot
#: ``ctx.p`` taking each of ``ctx.cands``, (m, K, nb) a block) or ``"incoming"`` (slot
#: ``ctx.p`` of ``ctx.J`` taking ``ctx.u``, (K, nb)) or ``"pivot"`` (for each of
#: ``ctx.cands``, C^T a_u under the current basis then ||a_u||^2, over each column's
#: observed rows: (m, K + 1, nb) a block, whatever slot an attempt moves). The masked
#: backends (this one, the Dask engine's and the sparse one) dispatch on this table: a
#: new move whose block operation reads ``state.mrow`` is registered here once.
MASK_ROW_OPS = {block_collapsed_score: "candidates", block_aggressive: "incoming",
                block_plain_propose: "incoming", block_annealed_propose: "incoming",
                block_pivot_score: "pivot", block_redraw_score: "pivot"}


def column_blocks(n_cols: int, block_size: int | None, n_blocks_hint: int = 2):
    """Split range(n_cols) into contiguous blocks of about ``block_size`` columns."""
    if block_size is None:
        block_size = max(1, -(-n_cols // max(1, n_blocks_hint)))
    edges = list(range(0, n_cols, block_size)) + [n_cols]
    return [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]


class MemoryBackend:
    """Blocks of W and H in this process; A is a float64 numpy array (M x N)."""

    def __init__(self, A, *, block_size=None, n_threads=2, trace_cols=()):
        self.A = A
        self.n_rows, self.n_cols = A.shape
        self.n_entries = self.n_rows * self.n_cols
        self.blocks = column_blocks(self.n_cols, block_size, n_threads)
        self.n_threads = max(1, int(n_threads))
        self.trace_cols = tuple(int(c) for c in trace_cols)
        self.states = None
        self._pool = None

    # -- plumbing ---------------------------------------------------------
    def _run(self, fn, items):
        if self.n_threads == 1 or len(items) == 1 or self.n_entries < INLINE_ENTRIES:
            return [fn(x) for x in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.n_threads)
        return list(self._pool.map(fn, items))

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def _owner(self, col):
        for i, (a, b) in enumerate(self.blocks):
            if a <= col < b:
                return i
        raise IndexError(col)

    # -- the backend protocol ------------------------------------------------
    def init_blocks(self, J, priors, entropy, chain, extra=(), max_rows=0):
        """Blocks for basis J (and the rows of the swap candidates ``extra``, cached)."""
        A = self.A
        K = len(J)
        extra = [int(c) for c in extra]
        # H and the candidate rows from one product, as the Dask engine's pass makes them
        # (so that both give the same floats when A is read in one tile)
        C = A[:, list(J) + extra]

        def make(i):
            a, b = self.blocks[i]
            Ab = A[:, a:b]
            P = row_products(C, Ab)
            s = block_init(i, a, b, P[:K], np.einsum("ij,ij->j", Ab, Ab), priors,
                           entropy, chain, trace_cols=self.trace_cols)
            return block_add_rows(s, extra, P[K:], max_rows) if extra else s

        self.states = self._run(make, list(range(len(self.blocks))))
        self.norm_a2 = float(sum(s.sq.sum() for s in self.states))
        self.n_obs = self.n_entries
        return self.norm_a2, self.n_obs

    def gram(self, J):
        G = np.stack([self.column(int(j))[0] for j in J], axis=1)
        return 0.5 * (G + G.T)

    def quadratics(self, G):
        hw = sum(float(np.vdot(s.H, s.W)) for s in self.states)
        wgw = sum(float(np.vdot(s.W, G @ s.W)) for s in self.states)
        return hw, wgw

    def column(self, col, proposal=False):
        return block_column(self.states[self._owner(col)], col, proposal)

    def columns(self, cols, proposal=False):
        """[(H[:, c], ||a_c||^2) for c in cols]."""
        return [self.column(int(c), proposal) for c in cols]

    def add_rows(self, cols, max_rows):
        Ac = self.A[:, cols]

        def upd(i):
            a, b = self.blocks[i]
            return block_add_rows(self.states[i], cols, row_products(Ac, self.A[:, a:b]),
                                  max_rows)

        self.states = self._run(upd, list(range(len(self.blocks))))

    def map(self, fn, ctx):
        out = self._run(lambda s: fn(s, ctx), self.states)
        self.states = [o[0] for o in out]
        return [o[1] for o in out]

    def posterior(self, key):
        parts = [block_posterior(s, key) for s in self.states]
        n = parts[0][0]
        if n == 0:
            return 0, None, None
        return n, np.concatenate([p[1] for p in parts], axis=1), np.concatenate(
            [p[2] for p in parts], axis=1)

    def traces(self):
        return [s.traces for s in self.states]

    def sse(self, columns, W, mask=None):
        R = self.A - self.A[:, columns] @ W
        R2 = R * R
        return float(R2.sum()), (float(R2[mask].sum()) if mask is not None else None)


class MaskedMemoryBackend(MemoryBackend):
    """``missing="mask"``: the likelihood counts observed entries only.

    ``A`` holds the data with missing entries set to 0 and ``mask`` marks the observed
    ones. Every column n gets its own Gram matrix C[O_n]^T C[O_n] over its observed rows
    (K x K x N floats, so this mode is for matrices whose per-column Grams fit in
    memory). A swap needs, for every column, the new Gram row of the incoming column;
    that is one O(M K N) product per proposal, computed here.
    """

    def __init__(self, A, mask, **kwargs):
        super().__init__(A, **kwargs)
        self.mask = np.asarray(mask, dtype=bool)
        self.maskf = self.mask.astype(np.float64)

    def init_blocks(self, J, priors, entropy, chain, extra=(), max_rows=0):
        A, Mk = self.A, self.mask
        C = A[:, J]

        def make(i):
            a, b = self.blocks[i]
            Ab = A[:, a:b]
            Gn = np.empty((b - a, len(J), len(J)))
            for n in range(a, b):
                Cn = C[Mk[:, n]]
                Gn[n - a] = Cn.T @ Cn
            return block_init(i, a, b, C.T @ Ab, np.einsum("ij,ij->j", Ab, Ab), priors,
                              entropy, chain, trace_cols=self.trace_cols, Gn=Gn)

        self.states = self._run(make, list(range(len(self.blocks))))
        if len(extra):
            self.add_rows(list(extra), max_rows)
        self.norm_a2 = float(sum(s.sq.sum() for s in self.states))
        self.n_obs = int(Mk.sum())
        return self.norm_a2, self.n_obs

    def map(self, fn, ctx):
        kind = MASK_ROW_OPS.get(fn)
        if kind in ("candidates", "pivot"):
            # every candidate's new Gram row of slot p, per column: (m, K, nb) a block;
            # pivot: its products with the current basis and ||a_u||^2, (m, K + 1, nb)
            XJ = self.A[:, ctx.J]
            au = self.A[:, list(ctx.cands)]  # (M, m)

            def setqs(i):
                a, b = self.blocks[i]
                return block_set_mask_row(self.states[i], masked_gram_rows(
                    XJ, au, self.maskf[:, a:b], ctx.p, pivot=kind == "pivot"))

            self.states = self._run(setqs, list(range(len(self.blocks))))
            return super().map(fn, ctx)
        if kind == "incoming":
            J2 = np.array(ctx.J, dtype=np.int64)
            J2[ctx.p] = ctx.u
            au = self.A[:, ctx.u]
            X = self.A[:, J2] * au[:, None]

            def setq(i):
                a, b = self.blocks[i]
                return block_set_mask_row(self.states[i], X.T @ self.maskf[:, a:b])

            self.states = self._run(setq, list(range(len(self.blocks))))
        return super().map(fn, ctx)

    def quadratics(self, G):
        hw = sum(float(np.vdot(s.H, s.W)) for s in self.states)
        wgw = sum(float(np.einsum("kn,nkl,ln->", s.W, s.Gn, s.W)) for s in self.states)
        return hw, wgw

    def sse(self, columns, W, mask=None):
        return super().sse(columns, W, self.mask if mask is None else mask)
