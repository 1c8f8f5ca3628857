"""Candidate-row passes over tall matrices (issue 13): each task of a pass that computes
many rows sums the partials of FAN_IN consecutive row tiles itself (the reduction tree's
first level), in the tree's order, so the rows are the same floats as one task per tile;
and the row products write their panels in place, the same floats as before."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from dask_bid.engine import to_zarr
from dask_bid.engine.dask_backend import (
    FAN_IN,
    ZarrTile,
    _fused_parts,
    _init_part,
    _masked_init_part,
    _rows_part,
    _sum_arrays,
    _sum_init,
    _sum_masked_init,
    _take_zarr,
    _tree,
    fused_tiles,
    plan_layout,
)
from dask_bid.interface import bayesian_id
from dask_bid.kernels.products import ROW_PANEL, row_products, row_products_into

M, N, K = 330, 120, 3
CHUNKS = (32, 60)  # 11 row tiles (one fused task of 8, one of 3), 2 column groups


@pytest.fixture(scope="module")
def tall(tmp_path_factory):
    rng = np.random.default_rng(7)
    A = rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N)) \
        + 0.05 * rng.standard_normal((M, N))
    return A, to_zarr(A, tmp_path_factory.mktemp("tall") / "A.zarr", chunks=CHUNKS)


def test_tasks_sum_tiles_when_the_partials_outgrow_the_tiles():
    lay = plan_layout((M, N), ((32,) * 10 + (10,), (60, 60)), K, chunks=CHUNKS)
    assert len(lay.row_tiles) == 11
    # a partial of more rows than a tile (32 rows; the last one is a remainder of 10) is
    # larger than the tile
    assert fused_tiles(32, lay) == 1
    assert fused_tiles(33, lay) == FAN_IN
    # one row tile: nothing to sum
    one = plan_layout((M, N), ((M,), (60, 60)), K, chunks=(M, 60))
    assert fused_tiles(500, one) == 1


def _both(part, combine, tiles, gathers, u_local, segs, wheres):
    """(one task per tile summed by the tree, fused tasks summed by the tree)."""
    parts = [part(t, g, u_local, segs, *w) for t, g, w in zip(tiles, gathers, wheres,
                                                              strict=True)]
    level = [combine(parts[i:i + FAN_IN]) if len(parts[i:i + FAN_IN]) > 1 else parts[i]
             for i in range(0, len(parts), FAN_IN)]
    fused = [_fused_parts(part, combine, tiles[i:i + FAN_IN], gathers[i:i + FAN_IN], u_local,
                          segs, wheres[i:i + FAN_IN]) for i in range(0, len(tiles), FAN_IN)]
    return combine(level), combine(fused)


def _assert_same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y)
    else:
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("where", ["one group", "gathered"])
def test_fused_tasks_give_the_tree_sums_bitwise(tall, where):
    A, z = tall
    lay = plan_layout((M, N), ((32,) * 10 + (10,), (60, 60)), K, block_size=40, chunks=CHUNKS)
    rng = np.random.default_rng(1)
    cols = [int(c) for c in rng.permutation(N)[:70]]  # 70 rows > 32: a fused pass
    g = 1
    c0, c1 = lay.groups[g] if where == "gathered" else (0, N)
    segs = lay.segments(g) if where == "gathered" else [(0, 40), (40, 80), (80, 120)]
    tiles = [ZarrTile(z, r0, r1, c0, c1) for r0, r1 in lay.row_tiles]
    if where == "gathered":
        gathers = [_take_zarr(z, r0, r1, cols) for r0, r1 in lay.row_tiles]
        u_local = None
    else:
        gathers, u_local = [None] * len(tiles), cols
    wheres = [((r, g),) for r in range(len(tiles))]
    # the candidate rows of a pass
    tree, fused = _both(_rows_part, _sum_arrays, tiles, gathers, u_local, segs,
                        [()] * len(tiles))
    _assert_same(tree, fused)
    np.testing.assert_allclose(fused, A[:, cols].T @ A[:, c0:c1], rtol=1e-10, atol=1e-9)
    # the first pass: H and rows, squared norms, bad entries, max|A|, the tiles' digests
    tree, fused = _both(_init_part, _sum_init, tiles, gathers, u_local, segs, wheres)
    _assert_same(tree[:4], fused[:4])
    assert tree[4] == fused[4] and len(fused[4]) == len(tiles)
    # missing="mask": its Grams and observed counts too
    tree, fused = _both(partial(_masked_init_part, K=K), _sum_masked_init, tiles, gathers,
                        u_local, segs, wheres)
    _assert_same(tree[:6], fused[:6])
    assert tree[6] == fused[6]


def test_the_tree_above_fused_tasks_is_the_same_tree():
    # _tree over the fused tasks' results continues the one-task-per-tile tree at its
    # second level: with 11 tiles, (t0..t7) + (t8..t10) both ways
    vals = [np.array([v]) for v in np.random.default_rng(0).standard_normal(11) * 1e8]
    import dask

    ref = dask.compute(_tree(vals, _sum_arrays))[0]
    fused = [_fused_parts(lambda t, g, u, s: t, _sum_arrays, vals[i:i + FAN_IN],
                          [None] * len(vals[i:i + FAN_IN]), None, None,
                          [()] * len(vals[i:i + FAN_IN])) for i in range(0, 11, FAN_IN)]
    np.testing.assert_array_equal(dask.compute(_tree(fused, _sum_arrays))[0], ref)


def test_row_products_in_fortran_order_are_the_same_floats():
    rng = np.random.default_rng(2)
    T = rng.standard_normal((419, 300))
    U = np.ascontiguousarray(T[:, rng.permutation(300)[:2 * ROW_PANEL + 5]])
    c = row_products(U, T[:, 10:250])
    f = np.empty((U.shape[1], 240), order="F")  # as the pass's partials (_products)
    row_products_into(U, T[:, 10:250], f.T)
    assert c.flags.c_contiguous and f.flags.f_contiguous
    np.testing.assert_array_equal(c, f)
    # a row alone (padded panel) is the same floats as in the batch
    np.testing.assert_array_equal(row_products(U[:, [70]], T[:, 10:250])[0], c[70])


def test_chain_is_the_same_with_and_without_fused_passes(tall):
    # n_candidates=8: every pass computes fewer rows than a tile has (a task per tile;
    # the first pass: 11 rows);
    # "auto": the first pass computes all of A^T A (fused tasks). The same chain.
    A, z = tall
    kw = dict(n_iter=8, burn_in=3, thin=1, random_state=4, chunks=CHUNKS, client="synchronous")
    small = bayesian_id(z, K, n_candidates=8, **kw)
    whole = bayesian_id(z, K, n_candidates="auto", **kw)
    assert small.n_passes > whole.n_passes == 0
    for f in ("columns", "components", "draws_columns", "draws_sigma2", "draws_sse"):
        np.testing.assert_array_equal(getattr(small, f), getattr(whole, f), err_msg=f)
    np.testing.assert_array_equal(small.trace["mse"], whole.trace["mse"])
