"""DaskBackend packs: a worker's small blocks are updated by one task per map.

A real 2-process LocalCluster and a Zarr store on disk; which blocks share a task must
change no float of the chain, only the number of tasks.
"""

import numpy as np
import pytest
from _support import assert_same_chain

from dask_bid.engine import dask_backend, to_zarr
from dask_bid.interface import bayesian_id

M, N, K = 120, 96, 3
KW = dict(n_iter=12, burn_in=4, random_state=5, block_size=24, chunks=(60, 48))  # 4 blocks


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N)) \
        + 0.05 * rng.standard_normal((M, N))
    path = str(tmp_path_factory.mktemp("packs") / "A.zarr")
    to_zarr(A, path, chunks=(60, 48))
    return path


@pytest.fixture(scope="module")
def reference(store):
    return bayesian_id(store, K, client="synchronous", **KW)


@pytest.mark.parametrize("pack_bytes, tasks_per_map", [(dask_backend.PACK_BYTES, 2), (0, 4)],
                         ids=["packed", "one-task-per-block"])
def test_packs_change_the_task_count_not_the_chain(store, reference, shared_client,
                                                   monkeypatch, pack_bytes, tasks_per_map):
    from distributed import get_task_stream

    # the pack rule runs on the client: with 0 bytes no two blocks share a task
    monkeypatch.setattr(dask_backend, "PACK_BYTES", pack_bytes)
    with get_task_stream(shared_client) as ts:
        res = bayesian_id(store, K, client=shared_client, **KW)
    assert_same_chain(reference, res)
    # the collapsed swap's second half runs once an iteration; its tasks after the first
    # (the states' sizes are measured by the first map) are one per pack: one per worker
    finish = [str(t["key"]) for t in ts.data if "block_collapsed_finish" in str(t["key"])]
    by_iteration = {}
    for key in finish:
        n = key.rsplit("-", 2)[-2]  # bid-<what>-<run>-c<chain>-<n>-<block or pack>
        by_iteration[n] = by_iteration.get(n, 0) + 1
    counts = list(by_iteration.values())
    assert len(counts) >= KW["n_iter"] - 1
    assert counts[1:] == [tasks_per_map] * (len(counts) - 1), counts
