"""Seconds of a small default fit, in memory and on the engine's synchronous path.

    python benchmarks/bench_small_fit.py [--repeat 2] [--n-iter 1000]

A 504 x 48 random matrix (the paper's CCLE shapes), K = 5, every other fit parameter at
its default: ``bayesian_id(A, 5)`` in memory (numpy input) and ``bayesian_id(store, 5,
client="synchronous")`` from a Zarr store (the engine in this process: the path of a
``dask-bid fit`` of a small file, checkpoints included). The kernels are loaded first so
that neither time includes them. Prints one line per repeat and the medians. To compare
two trees, run it with ``PYTHONPATH=<tree>`` from outside both.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--n-iter", type=int, default=1000)
    args = ap.parse_args(argv)
    # the default burn-in (200) unless --n-iter is shorter: it crashed for --n-iter <= 200
    burn_in = min(200, args.n_iter // 2)

    import dask_bid
    from dask_bid import bayesian_id
    from dask_bid.engine import to_zarr

    print(f"dask_bid from {Path(dask_bid.__file__).parent}")
    A = np.random.default_rng(0).standard_normal((504, 48))
    with tempfile.TemporaryDirectory() as d:
        store = str(Path(d) / "A.zarr")
        to_zarr(A, store, chunks=A.shape)
        bayesian_id(A, 5, n_iter=20, burn_in=5)  # the kernels, loaded or compiled
        bayesian_id(store, 5, n_iter=20, burn_in=5, client="synchronous")
        mem, sync = [], []
        for r in range(args.repeat):
            t = time.perf_counter()
            bayesian_id(A, 5, n_iter=args.n_iter, burn_in=burn_in, random_state=r)
            mem.append(time.perf_counter() - t)
            t = time.perf_counter()
            bayesian_id(store, 5, n_iter=args.n_iter, burn_in=burn_in, random_state=r,
                        client="synchronous")
            sync.append(time.perf_counter() - t)
            print(f"repeat {r}: in memory {mem[-1]:.2f} s, engine (synchronous) {sync[-1]:.2f} s")
    print(f"median: in memory {statistics.median(mem):.2f} s, "
          f"engine (synchronous) {statistics.median(sync):.2f} s ({args.n_iter} iterations)")


if __name__ == "__main__":
    main()
