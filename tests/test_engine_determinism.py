"""The Dask engine gives one chain, bitwise, on every execution path.

Paths: dask's synchronous scheduler (in process), LocalCluster with 1 and 2 worker
processes, a threaded LocalCluster, and a `dask scheduler` + `dask worker` pair started here
on 127.0.0.1. The reference in-memory backend gives the same chain bitwise when the matrix is
read in one tile (same products), and to rounding otherwise.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from _support import assert_same_chain
from distributed import Client, LocalCluster

from dask_bid.engine import dask_backend, plan_layout, to_zarr
from dask_bid.interface import bayesian_id

# every test here may wait on a cluster: never hang the suite
# one pytest-xdist process runs this module: its module-scoped fixtures are then
# computed once, not once per process (the suite's time, README)
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("engine-determinism")]

M, N, K = 300, 200, 5
# 30 iterations, 3 checkpoints: a cluster fit costs ~5 round trips per iteration (the
# suite's time, README); the chain is compared bitwise at every iteration. 61 candidate
# rows per pass, what "auto" gives 60 iterations: these 30 iterations, their passes over A
# included, are the first 30 of the 60-iteration chain (the streams are counter based),
# which makes all its 3 passes in them (at iterations 5, 10 and 23).
KW = dict(n_iter=30, burn_in=10, thin=2, random_state=11, block_size=50, checkpoint_every=10,
          n_candidates=61)
# the lineage test runs 60 iterations: 6 cuts, and a growing graph would gain ~350 tasks.
# Its subject is the graph, not the sampler: without the pivot swaps and the tempered
# warm-up an iteration makes half the round trips (the suite's time, README)
KW60 = {**KW, "n_iter": 60, "burn_in": 20, "n_pivot": 0, "tempered_warmup": 0}
# 5 row tiles x 2 column groups: the gather path and the fixed reduction tree are exercised
TILES = (64, 100)


def _matrix(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
            + 0.05 * rng.standard_normal((M, N)))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("det") / "A.zarr"
    to_zarr(_matrix(), path, chunks=TILES)
    return str(path)


@pytest.fixture(scope="module")
def reference(store):
    """The chain on the synchronous path."""
    return bayesian_id(store, K, client="synchronous", chunks=TILES, **KW)


@pytest.fixture(scope="module")
def reference60(store):
    """The 60-iteration chain (collapsed swaps only) on the synchronous path."""
    return bayesian_id(store, K, client="synchronous", chunks=TILES, **KW60)


def test_layout_is_multi_tile():
    lay = plan_layout((M, N), ((64,) * 4 + (44,), (100, 100)), K, block_size=50, chunks=TILES)
    assert len(lay.row_tiles) == 5 and len(lay.groups) == 2 and len(lay.blocks) == 4


def test_sync_path_matches_memory_backend_bitwise_in_one_tile():
    A = _matrix(1)
    kw = {k: v for k, v in KW.items() if k != "checkpoint_every"}
    mem = bayesian_id(A, K, **kw)
    sync = bayesian_id(A, K, client="synchronous", **kw)
    # the engine takes the reported SSE from its blocks' statistics, the in-memory
    # backend directly from A: equal to rounding, everything else bitwise
    assert_same_chain(mem, sync, mse_rtol=1e-10)


def test_sync_path_close_to_memory_backend_with_many_tiles(reference):
    mem = bayesian_id(_matrix(), K, **{k: v for k, v in KW.items() if k != "checkpoint_every"})
    # the partial products are summed in another order: the chains agree to rounding
    # (the swap decisions are the same unless a Barker draw falls within 1e-12 of its
    # probability, which these seeds do not)
    np.testing.assert_array_equal(mem.columns, reference.columns)
    np.testing.assert_allclose(mem.trace["mse"], reference.trace["mse"], rtol=1e-10)
    np.testing.assert_allclose(mem.components, reference.components, rtol=0, atol=1e-10)


def test_sync_path_repeats(store, reference):
    again = bayesian_id(store, K, client="synchronous", chunks=TILES, **KW)
    assert_same_chain(reference, again)


@pytest.fixture
def two_processes(shared_cluster, shared_client):
    """The suite's shared LocalCluster of 2 worker processes (conftest) and a client."""
    return shared_cluster, shared_client


@pytest.mark.timeout(240)
def test_products_large_enough_for_threaded_blas_match_on_worker_processes(
        tmp_path, two_processes):
    """The client ran OpenBLAS with 2 threads and distributed's worker processes with 1:
    on a matrix whose products OpenBLAS splits across threads (2000 x 300 here) the
    synchronous chain and the worker processes' chain differed in the last bits (from
    iteration 0 with these tiles; engine/blas.py: a fit now runs its process with one
    BLAS thread)."""
    from threadpoolctl import threadpool_info

    r = np.random.default_rng(3)
    A = r.standard_normal((2000, 8)) @ r.uniform(-1, 1, (8, 300)) \
        + 0.05 * r.standard_normal((2000, 300))
    path = str(tmp_path / "big.zarr")
    to_zarr(A, path, chunks=(500, 100))
    kw = dict(n_iter=8, burn_in=2, random_state=2)
    before = [i["num_threads"] for i in threadpool_info()]
    sync = bayesian_id(path, 6, client="synchronous", **kw)
    assert [i["num_threads"] for i in threadpool_info()] == before  # restored
    _, client = two_processes
    assert_same_chain(sync, bayesian_id(path, 6, client=client, **kw))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("n_workers,processes", [(2, True), (2, False)],
                         ids=["2-processes", "2-threads"])
def test_local_clusters_match_sync(store, reference, n_workers, processes, request,
                                   monkeypatch):
    from distributed import get_task_stream

    if (n_workers, processes) == (2, True):
        _, client = request.getfixturevalue("two_processes")
        with get_task_stream(client) as ts:
            res = bayesian_id(store, K, client=client, chunks=TILES, **KW)
        # the 4 blocks are updated in packs, one task per worker (DaskBackend._packs)
        assert _finish_tasks_per_iteration(ts) == 2
        # a second fit on the same cluster: no state leaks between fits (once, on the
        # cluster whose workers keep their memory between fits, and between tests)
        res2 = bayesian_id(store, K, client=client, chunks=TILES, **KW)
        assert_same_chain(reference, res2)
    else:
        # the threaded cluster reads a dask array (a graph shipped to the workers), the
        # process cluster the store: both give the store's chain. Here without packs
        # (PACK_BYTES = 0, read on the client): one task per block, the same chain (the
        # process cluster above packs the blocks)
        x = da.from_array(_matrix(), chunks=TILES)
        monkeypatch.setattr(dask_backend, "PACK_BYTES", 0)
        with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=processes,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            with get_task_stream(client) as ts:
                res = bayesian_id(x, K, client=client, chunks=TILES, **KW)
        assert _finish_tasks_per_iteration(ts) == 4
    assert_same_chain(reference, res)


def _finish_tasks_per_iteration(ts):
    """Tasks of the collapsed swap's second half (one map an iteration) per iteration,
    after the first (the states' sizes, which decide the packs, are measured by it)."""
    counts = {}
    for t in ts.data:
        key = str(t["key"])
        if "block_collapsed_finish" in key:
            n = key.rsplit("-", 2)[-2]  # bid-<what>-<run>-c<chain>-<n>-<block or pack>
            counts[n] = counts.get(n, 0) + 1
    # the last iteration dropped as well: its tasks can finish after the fit has their
    # results (a result travels ahead of its task's "finished" message, engine/reports.py)
    per = [counts[n] for n in sorted(counts, key=int)][1:-1]
    assert len(per) >= KW["n_iter"] // 2, counts
    # the usual count, and never more tasks than it: an iteration after a checkpoint
    # reload may find every block on one worker (the hints follow the states) and pack
    # them into one task (seen once in CI under load), which is no regression
    usual = max(set(per), key=per.count)
    assert max(per) == usual and per.count(usual) >= len(per) // 2, counts
    return usual


@pytest.mark.timeout(240)
def test_task_count_bounded_and_numpy_input(reference60, two_processes):
    cluster, client = two_processes
    A = _matrix()
    counts = {}

    def cb(state):
        counts[state.iteration] = len(cluster.scheduler.tasks)

    res_np = bayesian_id(A, K, client=client, chunks=TILES, callback=cb, **KW60)
    assert_same_chain(reference60, res_np)
    # the graph does not grow with iterations (lineage is cut at every checkpoint): the
    # scheduler holds no more tasks late in the chain than early. Without the cut it would
    # gain about 2 x 4 blocks + 1 tasks per iteration, ~350 more by iteration 60.
    early = max(counts[t] for t in range(1, 21))
    late = max(counts[t] for t in range(41, 61))
    assert late <= early + 30, counts
    assert max(counts.values()) < 400, counts


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_SCHEDULERS = {}


@pytest.fixture
def cli_cluster():
    """`dask scheduler` + `dask worker --nworkers 2` on 127.0.0.1, from the venv's bin."""
    dask_cli = Path(sys.executable).parent / "dask"
    if not dask_cli.exists():
        pytest.fail(f"the dask CLI is not installed next to {sys.executable}")
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = []
    try:
        procs.append(subprocess.Popen(
            [str(dask_cli), "scheduler", "--host", "127.0.0.1", "--port", str(port),
             "--no-dashboard"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(
            [str(dask_cli), "worker", addr, "--nworkers", "2", "--nthreads", "1",
             "--host", "127.0.0.1", "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(addr, timeout=5) as c:
                    c.wait_for_workers(2, timeout=max(1, deadline - time.monotonic()))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        _SCHEDULERS[addr] = procs[0]  # a test may kill it
        yield addr
    finally:
        # the workers first, while their scheduler still answers: a worker whose
        # scheduler is gone waits ~10 s for it before it exits
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


@pytest.mark.timeout(240)
def test_cli_scheduler_and_workers_match_sync(store, reference, cli_cluster, tmp_path):
    res = bayesian_id(store, K, client=cli_cluster, chunks=TILES, **KW)
    assert_same_chain(reference, res)
    # the scheduler killed mid-fit: said as such (it came out as "KeyError: 'workers'", an
    # internal error on the command line), the output keeps its checkpoint, and a resume
    # elsewhere gives the same chain
    import dask

    from dask_bid import SchedulerUnreachableError

    out = str(tmp_path / "fit.zarr")

    def kill_the_scheduler(state):
        if state.iteration == 15:
            _SCHEDULERS[cli_cluster].kill()

    with dask.config.set({"dask_bid.scheduler-timeout": 1}), \
            pytest.raises(SchedulerUnreachableError, match=f"the Dask scheduler {cli_cluster} "
                          "stopped answering during the fit .*resume=True continues the "
                          "same chain"):
        bayesian_id(store, K, client=cli_cluster, chunks=TILES, out=out,
                    callback=kill_the_scheduler, **KW)
    res = bayesian_id(store, K, client="synchronous", chunks=TILES, out=out, resume=True,
                      **KW)
    assert_same_chain(reference, res)
