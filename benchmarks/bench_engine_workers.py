"""Engine benchmark: speed-up from 1 to 2 workers on a sampling-bound fit (issue 3, item 8).

    python benchmarks/bench_engine_workers.py --rows 1000 --cols 100000 --rank 50 --iters 16

A numpy matrix (persisted on the cluster by the engine) whose sweeps, O(K^2 N) per
iteration, dwarf its candidate passes (2 M N n_candidates flops every ~8 iterations). The
same fit (same seed, same default block layout: identical chains) runs on a LocalCluster
with 1 worker and with 2 workers (1 thread each); steady-state seconds per iteration are
timed by the callback. Prints the speed-up (target >= 1.6).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from distributed import Client, LocalCluster

from dask_bid.interface import bayesian_id


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--cols", type=int, default=100_000)
    ap.add_argument("--rank", type=int, default=50)
    ap.add_argument("--iters", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=1, help="measure this many times")
    args = ap.parse_args(argv)
    M, N, K = args.rows, args.cols, args.rank
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N)) + 0.1 * rng.standard_normal(
        (M, N))
    for rep in range(args.repeat):
        out = {}
        traces = {}
        for n_workers in (1, 2):
            with LocalCluster(n_workers=n_workers, threads_per_worker=1,
                              dashboard_address=":0") as cl, Client(cl) as client:
                stamps = []
                res = bayesian_id(A, K, client=client, n_iter=args.iters,
                                  burn_in=args.iters - 2, thin=1, init="random", random_state=0,
                                  callback=lambda st, s=stamps: s.append(time.perf_counter()))
                # iterations 3..n: the first ones include numba loading on the workers
                d = np.diff(stamps[1:])
                out[n_workers] = float(d.mean())
                traces[n_workers] = res.trace["mse"]
                print(f"[{rep}] {n_workers} worker(s): {out[n_workers]:.3f} s/iter (median "
                      f"{np.median(d):.3f})", flush=True)
        assert np.array_equal(traces[1], traces[2]), "1 and 2 workers must give the same chain"
        print(f"[{rep}] speed-up 1 -> 2 workers: {out[1] / out[2]:.2f} (target >= 1.6)",
              flush=True)

if __name__ == "__main__":
    main()
