"""Seconds of an in-memory fit with one BLAS thread (what a fit sets, engine/blas.py)
against the process's default BLAS threads, in the same process, alternated.

    python benchmarks/bench_blas_threads.py [--repeat 2]

A 2000 x 1500 rank-20 matrix plus noise, K = 20, 100 iterations (burn-in 20): its
products are large enough for OpenBLAS to split them across threads. The "default" runs
replace the limit by a no-op, as before the change.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import warnings

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import dask_bid.engine.blas as blas
    from dask_bid import bayesian_id

    rng = np.random.default_rng(0)
    A = rng.standard_normal((2000, 20)) @ rng.uniform(-1, 1, (20, 1500)) \
        + 0.1 * rng.standard_normal((2000, 1500))
    bayesian_id(A, 20, n_iter=10, burn_in=2)  # the kernels, loaded or compiled
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    times = {"one": [], "default": []}
    original = blas.single_blas_thread
    for _ in range(args.repeat):
        for mode in times:
            blas.single_blas_thread = original if mode == "one" else contextlib.nullcontext
            t = time.perf_counter()
            bayesian_id(A, 20, n_iter=100, burn_in=20, random_state=0)
            times[mode].append(time.perf_counter() - t)
            blas.single_blas_thread = original
            print(f"{mode:8s} {times[mode][-1]:.2f} s")
    print("median: " + ", ".join(f"{m} {np.median(v):.2f} s" for m, v in times.items()))


if __name__ == "__main__":
    main()
