"""Engine benchmark: seconds per iteration as N grows (issue 3, item 8, third bullet).

    python benchmarks/bench_engine_scaling.py --rows 1000 --rank 20 \
        --cols 10000 100000 1000000 --dir /tmp [--iters 24]

For each N: writes an M x N low-rank + noise float64 Zarr store with ``to_zarr`` (the
N = 10^6 store is 8 GB), fits ``--iters`` iterations on a LocalCluster (2 workers x 1
thread) with the default layout, times every iteration with the callback (steady state:
iterations 2..n, so the candidate passes over A are amortised as they fall), deletes the
store, and finally prints the least-squares slope of log(s/iter) on log(N)
(target <= 1.1).
"""

from __future__ import annotations

import argparse
import os
import shutil
import time

import dask
import dask.array as da
import numpy as np
from distributed import Client, LocalCluster

from dask_bid.engine import to_zarr
from dask_bid.interface import bayesian_id


def make_store(path, M, N, rank, seed=0):
    rng = da.random.default_rng(seed)
    cols = min(N, 65536)
    W = da.from_array(np.random.default_rng(seed + 1).uniform(-1, 1, (rank, N)),
                      chunks=(rank, cols))
    A = (rng.standard_normal((M, rank), chunks=(M, rank)) @ W
         + 0.1 * rng.standard_normal((M, N), chunks=(M, cols)))
    with dask.config.set(scheduler="threads"):
        return to_zarr(A, path, overwrite=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--rank", type=int, default=20)
    ap.add_argument("--cols", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--iters", type=int, default=24)
    ap.add_argument("--dir", default="/tmp")
    args = ap.parse_args(argv)
    M, K = args.rows, args.rank
    results = []
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cl, \
            Client(cl) as client:
        for N in args.cols:
            path = os.path.join(args.dir, f"bench_engine_scaling_{N}.zarr")
            t0 = time.perf_counter()
            z = make_store(path, M, N, K)
            t_write = time.perf_counter() - t0
            try:
                stamps = []
                res = bayesian_id(path, K, client=client, n_iter=args.iters,
                                  burn_in=args.iters - 2, thin=1, init="random",
                                  random_state=0,
                                  callback=lambda st, s=stamps: s.append(time.perf_counter()))
                s_iter = float(np.diff(stamps).mean())
            finally:
                shutil.rmtree(path, ignore_errors=True)
            results.append((N, s_iter))
            print(f"N = {N:>9,}: chunks {z.chunks}, write {t_write:.0f} s, "
                  f"{s_iter:.3f} s/iter ({res.n_passes} candidate passes in {args.iters} "
                  "iterations)", flush=True)
    n = np.log([r[0] for r in results])
    t = np.log([r[1] for r in results])
    slope = np.polyfit(n, t, 1)[0]
    print(f"log-log slope of s/iter on N: {slope:.3f} (target <= 1.1)")


if __name__ == "__main__":
    main()
