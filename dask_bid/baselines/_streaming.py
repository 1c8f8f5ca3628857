"""Row-block streaming reductions shared by the baseline decompositions.

Every pass over an out-of-core matrix is written the same way: a leaf function
maps one row block ``A[r0:r1, :]`` (all columns) to a small partial result, and a
combine function merges a list of partials; the partials are merged in a fixed
tree so the result does not depend on the order in which the scheduler runs the
leaves. Only the partials (sizes independent of the number of rows) ever reach
the client.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from .._errors import NonFiniteInputError

__all__ = [
    "OMEGA_TILE_ROWS",
    "IN_MEMORY_BLOCK_ROWS",
    "row_blocks",
    "stream_reduce",
    "omega_rows",
    "check_finite_block",
    "tsqr_leaf",
    "tsqr_combine",
    "sum_combine",
]

#: Rows per tile of the Gaussian test matrix. Omega is generated tile by tile from
#: (seed, tile index), so any row block can regenerate its own rows and the sketch
#: is the same for every chunking of A, in memory or out of core.
OMEGA_TILE_ROWS = 512

#: Rows per block when a numpy input is processed in pieces (bounds temporaries).
IN_MEMORY_BLOCK_ROWS = 8192

#: How many partials one combine step merges.
_FAN_IN = 8


def row_blocks(n_rows: int, block_rows: int):
    """Yield ``(r0, r1)`` covering ``range(n_rows)`` in blocks of ``block_rows``."""
    for r0 in range(0, n_rows, block_rows):
        yield r0, min(r0 + block_rows, n_rows)


def _tree(partials, combine):
    """Merge a list of partials (delayed or not) with a fixed-shape tree."""
    import dask

    delayed_combine = dask.delayed(combine, pure=False)
    level = list(partials)
    while len(level) > 1:
        level = [
            delayed_combine(level[i:i + _FAN_IN]) if len(level[i:i + _FAN_IN]) > 1
            else level[i]
            for i in range(0, len(level), _FAN_IN)
        ]
    return level[0]


def stream_reduce(x, leaf, combine, *extra):
    """Reduce a dask matrix over its row blocks.

    Parameters
    ----------
    x : dask.array.Array
        2-D, one chunk along the columns.
    leaf : callable
        ``leaf(block, r0, r1, *extra_blocks)`` -> partial, for the numpy block
        ``x[r0:r1, :]``.
    combine : callable
        ``combine(list_of_partials)`` -> partial.
    *extra : dask.array.Array
        Arrays with the same row chunks as ``x`` whose matching blocks are passed
        to ``leaf`` after ``r1`` (e.g. a mask).

    Returns
    -------
    The combined partial, computed.
    """
    import dask

    if len(x.chunks[1]) != 1:
        raise ValueError("stream_reduce needs a single column chunk")
    blocks = x.to_delayed().ravel()
    extra_blocks = [e.to_delayed().ravel() for e in extra]
    # pure=False: leaves carry large arguments (W, bases) not worth hashing for keys
    delayed_leaf = dask.delayed(leaf, pure=False)
    partials = []
    r0 = 0
    for i, rows in enumerate(x.chunks[0]):
        partials.append(delayed_leaf(blocks[i], r0, r0 + rows, *[eb[i] for eb in extra_blocks]))
        r0 += rows
    (out,) = dask.compute(_tree(partials, combine))
    return out


def omega_rows(seed: int, r0: int, r1: int, n_cols: int) -> np.ndarray:
    """Rows ``r0:r1`` of the (M x l) standard Gaussian test matrix ``Omega^T``.

    Tile ``t`` (rows ``t*T`` to ``(t+1)*T``) is drawn from its own stream seeded
    by ``SeedSequence(seed, spawn_key=(t,))``: a block regenerates exactly its
    rows, whatever the chunking, and no process ever holds all of Omega.
    """
    T = OMEGA_TILE_ROWS
    out = np.empty((r1 - r0, n_cols))
    t0, t1 = r0 // T, (r1 - 1) // T
    for t in range(t0, t1 + 1):
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(t,))))
        tile = rng.standard_normal((T, n_cols))
        a, b = max(r0, t * T), min(r1, (t + 1) * T)
        out[a - r0:b - r0] = tile[a - t * T:b - t * T]
    return out


#: what to do about NaN met while fitting (the scoring's advice differs: the mask)
FILL_ADVICE = ("The baseline IDs need a complete matrix: fill missing entries first (the "
               "paper fills them with 0 after standardising), e.g. "
               "`A = da.where(da.isfinite(A), A, 0)`.")


def check_finite_block(block: np.ndarray, r0: int, r1: int, what: str = "A",
                       advice: str = FILL_ADVICE) -> None:
    """Raise ``NonFiniteInputError`` if the block holds NaN or infinity."""
    if not np.isfinite(block).all():
        bad = np.argwhere(~np.isfinite(block))[0]
        raise NonFiniteInputError(
            # the first of this row block, not of A: the blocks are checked as they are
            # read, in parallel and in no set order
            f"{what} contains NaN or infinity (at row {r0 + int(bad[0])}, column "
            f"{int(bad[1])}: the first of row block {r0}:{r1}). {advice}"
        )


def tsqr_leaf(block: np.ndarray, rhs: np.ndarray | None = None):
    """R factor of ``block`` and, if given, ``Q^T rhs`` (one TSQR leaf).

    Returns ``(R, B)`` with ``R`` of shape ``(min(m, k), k)`` and ``B = Q^T rhs``
    (or ``None``).
    """
    if rhs is None:
        return np.linalg.qr(block, mode="r"), None
    q, r = np.linalg.qr(block, mode="reduced")
    return r, q.T @ rhs


def tsqr_combine(parts):
    """Merge TSQR partials ``(R_i, B_i)``: QR of the stacked R's, rotate the B's alike.

    Only orthogonal transformations are applied, so the final ``R`` is the R factor
    of the whole tall matrix (up to row signs) and ``B`` is ``Q^T rhs`` for its Q.
    """
    R = np.vstack([p[0] for p in parts])
    if parts[0][1] is None:
        return sla.qr(R, mode="r", check_finite=False)[0][: min(R.shape), :], None
    B = np.vstack([p[1] for p in parts])
    q, r = sla.qr(R, mode="economic", check_finite=False)
    return r, q.T @ B


def sum_combine(parts):
    """Elementwise sum of partials that are tuples of numbers / arrays."""
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(sum(p[i] for p in parts) for i in range(len(first)))
    return sum(parts[1:], first)
