"""A fit over a Zarr matrix larger than the memory of all its workers together.

2 workers x 500 MB (distributed's limit, 477 MiB), a 1.25 GiB float64 matrix (1.34 GB, a
third more than the workers' 1.0 GB together; 2 GiB before, cut for the suite's time): the
run must finish with no spilling to disk, no paused worker and no restarted worker. Peak worker
memory is recorded (printed; see docs/performance.md, "Engine").
"""

from __future__ import annotations

import os
import shutil
import threading
import time

import dask
import dask.array as da
import numpy as np
import psutil
import pytest
import zarr
from distributed import Client, LocalCluster

from dask_bid.interface import bayesian_id

M, N, K, RANK = 81_920, 2048, 10, 10  # 1.25 GiB of float64
LIMIT = "500MB"


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_fit_larger_than_worker_memory(tmp_path):
    path = str(tmp_path / "big.zarr")
    rng = da.random.default_rng(0)
    W = np.random.default_rng(1).uniform(-1, 1, (RANK, N))
    A = (rng.standard_normal((M, RANK), chunks=(1024, RANK)) @ W
         + 0.1 * rng.standard_normal((M, N), chunks=(1024, N)))
    # stored uncompressed (a user's plain Zarr array): random float64 does not compress
    # (zstd keeps 96 % of it), and each of the fit's passes would decode 2 GiB for nothing
    # (the suite's time, README); 16 MiB chunks of whole rows, as to_zarr writes them
    z = zarr.create_array(store=path, shape=(M, N), chunks=(1024, N), dtype=np.float64,
                          compressors=None, zarr_format=3)
    with dask.config.set(scheduler="threads"):
        da.store(A, z, lock=False)
    assert z.nbytes == 1.25 * 2**30
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=LIMIT,
                          dashboard_address=":0") as cluster, \
                Client(cluster, set_as_default=False) as client:
            limit = sum(w["memory_limit"] for w in
                        client.scheduler_info(n_workers=-1)["workers"].values())
            assert z.nbytes > limit, "the matrix must not fit in the workers' memory"
            pids = client.run(os.getpid)
            procs = {a: psutil.Process(p) for a, p in pids.items()}
            peak = dict.fromkeys(pids, 0)
            statuses = set()
            stop = threading.Event()

            def sample():
                while not stop.is_set():
                    for a, pr in procs.items():
                        try:
                            peak[a] = max(peak[a], pr.memory_info().rss)
                        except psutil.NoSuchProcess:
                            statuses.add("died")
                    try:
                        info = client.scheduler_info(n_workers=-1)["workers"]
                        statuses.update(w.get("status") for w in info.values())
                    except Exception:  # the client may be busy; the next sample retries
                        pass
                    time.sleep(0.05)

            th = threading.Thread(target=sample, daemon=True)
            th.start()
            t0 = time.perf_counter()
            try:
                res = bayesian_id(path, K, client=client, out=str(tmp_path / "out.zarr"),
                                  n_iter=24, burn_in=12, thin=2, random_state=0,
                                  # the subject is memory: the least-squares search from a
                                  # random start (no extra pass for a starting basis); in
                                  # 24 iterations it does not reach the rank-10 span, so
                                  # the check of the fit below is only a sanity bound
                                  sampler="search", init="random",
                                  # 80 candidate rows of A^T A per pass (1.3 MB): a few
                                  # passes for the proposals, each streaming all of A
                                  # ("auto" would size the batch from the 500 MB limits;
                                  # the subject here is the memory of a fixed batch)
                                  n_candidates=80)
            finally:
                stop.set()
                th.join()
            elapsed = time.perf_counter() - t0
            metrics = client.run(lambda dask_worker: dict(dask_worker.data.cumulative_metrics))
            assert client.run(os.getpid) == pids, "a worker was restarted"
        print(f"\n1.25 GiB fit, 2 x {LIMIT} workers: {elapsed:.1f} s, peak RSS per worker "
              + ", ".join(f"{v / 2**20:.0f} MiB" for v in peak.values()))
        assert statuses <= {"running"}, f"worker statuses seen: {statuses}"
        for a, m in metrics.items():
            assert m.get(("disk-write", "count"), 0) == 0, f"{a} spilled: {m}"
        assert max(peak.values()) < 0.8 * 500e6
        # a sanity check of the fit itself: rank-10 signal, noise variance 0.01
        assert 0.009 < res.mse < 0.2
        assert res.C.shape == (M, K)
    finally:
        shutil.rmtree(path, ignore_errors=True)
