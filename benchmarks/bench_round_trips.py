"""Tasks and wall time per iteration of a default fit on a process LocalCluster.

Compares, in the same process and on the same cluster, three ways of running the block
maps (``DaskBackend.map``):

- ``packs``: what the engine does: a worker's small blocks in one task (``PACK_BYTES``),
  the small results sent with the task (``engine/reports.py``);
- ``events``: one task per block (``PACK_BYTES = 0``), results sent with the task;
- ``second task``: the former way: one task per block and a second task per block
  extracting its small result, gathered from the worker.

They run in turn, ``--repeats`` times each, after a warm-up fit (kernels compiled on the
workers). The chains are the same bit for bit (checked).

    python benchmarks/bench_round_trips.py [--rows 300 --cols 200 --k 5 --block-size 50]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

MODES = ("packs", "events", "second task")


def _second_task_way():
    """Patch DistributedExecutor back to the former map: a second task per block."""
    from dask_bid.engine import cluster
    from dask_bid.engine.reports import second

    def submit_reporting(self, fn, *args, key, hint=None):
        return self.submit(fn, *args, key=key, hint=hint)

    def collect(self, handles):
        return self.gather([self.client.submit(second, h, pure=False) for h in handles])

    saved = (cluster.DistributedExecutor.submit_reporting, cluster.DistributedExecutor.collect)
    cluster.DistributedExecutor.submit_reporting = submit_reporting
    cluster.DistributedExecutor.collect = collect
    return saved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--cols", type=int, default=200)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--block-size", type=int, default=50)
    ap.add_argument("--n-iter", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()

    from distributed import Client, LocalCluster, get_task_stream

    from dask_bid.engine import cluster, to_zarr
    from dask_bid.interface import bayesian_id

    M, N, K = args.rows, args.cols, args.k
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N)) \
        + 0.05 * rng.standard_normal((M, N))
    tmp = tempfile.mkdtemp(prefix="bench_rt_")
    store = os.path.join(tmp, "A.zarr")
    to_zarr(A, store, chunks=(64, 100))
    # burn-in 10 unless --n-iter is shorter (it crashed for --n-iter <= 10)
    kw = dict(n_iter=args.n_iter, burn_in=min(10, args.n_iter // 2), random_state=11,
              block_size=args.block_size, chunks=(64, 100))
    events = (cluster.DistributedExecutor.submit_reporting, cluster.DistributedExecutor.collect)
    rows = []
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cl, \
            Client(cl) as client:
        bayesian_id(store, K, client=client, **{**kw, "n_iter": 5, "burn_in": 1})
        ref = None
        from dask_bid.engine import dask_backend

        pack_bytes = dask_backend.PACK_BYTES
        for rep in range(args.repeats):
            for mode in MODES:
                dask_backend.PACK_BYTES = pack_bytes if mode == "packs" else 0
                if mode == "second task":
                    _second_task_way()
                stamps = []
                with get_task_stream(client) as ts:
                    t0 = time.perf_counter()
                    fit = bayesian_id(store, K, client=client,
                                      callback=lambda s, st=stamps: st.append(time.perf_counter()),
                                      **kw)
                    total = time.perf_counter() - t0
                (cluster.DistributedExecutor.submit_reporting,
                 cluster.DistributedExecutor.collect) = events
                draws = np.asarray(fit.trace["sigma2"])
                if ref is None:
                    ref = draws
                assert np.array_equal(ref, draws), "the two ways gave different chains"
                rows.append((rep, mode, len(ts.data) / len(stamps),
                             1000 * float(np.median(np.diff(stamps))), total))
    print(f"{M} x {N}, K = {K}, blocks of {args.block_size} columns, {args.n_iter} "
          "iterations, LocalCluster 2 processes x 1 thread")
    print("| repeat | small results | tasks / iteration | median ms / iteration | fit s |")
    print("|---|---|---|---|---|")
    for rep, mode, tpi, ms, tot in rows:
        print(f"| {rep} | {mode} | {tpi:.1f} | {ms:.1f} | {tot:.2f} |")
    for mode in MODES:
        ms = [r[3] for r in rows if r[1] == mode]
        print(f"{mode}: median ms / iteration over repeats {np.median(ms):.1f}")


if __name__ == "__main__":
    main()
