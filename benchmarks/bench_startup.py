"""Start-up benchmark of the command line (issue 14.4): what a new user waits for.

    python benchmarks/bench_startup.py [--repeat 3] [--n-iter N] [--input FILE]

Times, each in a fresh process and by wall clock from outside:

1. ``dask-bid fit`` of a 504 x 24 matrix (the paper's CCLE IC50 shape; random data
   unless ``--input FILE`` is given) with an empty numba cache: the first fit after an
   install, compilation included;
2. the same fit again in a new process: the kernels now load from the cache;
3. with ``--local``, the second fit again on a local Dask cluster (``--scheduler local``);
4. ``dask-bid --help``.

Every fit uses the command's defaults (no ``--scheduler``: it runs in this process for
an input this small) and a private numba cache folder (``NUMBA_CACHE_DIR`` in a temporary
directory), so the numbers do not depend on what ran before. Prints one table row per
repeat and the median.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def dask_bid_command():
    script = Path(sys.executable).with_name("dask-bid")
    return [str(script)] if script.exists() else [sys.executable, "-m",
                                                  "dask_bid.interface.cli"]


def timed(cmd, env):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    took = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-3000:]}")
    return took, r


def one_round(work, src, n_iter, extra, local=False):
    cache = work / "numba-cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    cli = dask_bid_command()
    times = {}
    for name in ("first fit", "second fit"):
        out = work / f"{name.split()[0]}.zarr"
        shutil.rmtree(out, ignore_errors=True)
        iters = [] if n_iter is None else ["--n-iter", str(n_iter)]
        times[name], r = timed([*cli, "fit", str(src), "--k", "5", "--out", str(out),
                                *iters, "--seed", "0", *extra], env)
        compile_line = next((ln for ln in r.stderr.splitlines()
                             if ln.startswith("kernels      ready")), "")
        times[f"{name}: kernels"] = float(compile_line.split()[3]) if compile_line else None
    if local:  # the same (warm) fit on a local cluster, for the scheduler choice
        out = work / "local.zarr"
        shutil.rmtree(out, ignore_errors=True)
        iters = [] if n_iter is None else ["--n-iter", str(n_iter)]
        times["fit, --scheduler local"], _ = timed(
            [*cli, "fit", str(src), "--k", "5", "--out", str(out), *iters, "--seed", "0",
             "--scheduler", "local", *extra], env)
    times["--help"], _ = timed([*cli, "--help"], env)
    return times


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n-iter", type=int, default=None,
                    help="iterations per chain (default: the command's default)")
    ap.add_argument("--local", action="store_true",
                    help="also time the warm fit on a local cluster (--scheduler local)")
    ap.add_argument("--input", default=None,
                    help="a 504 x 24-like file to fit instead of random data (a file with "
                    "NaN gets --fill-missing zero)")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dask_bid-bench-startup-"))
    try:
        extra = []
        if args.input:
            src = Path(args.input)
            extra = ["--fill-missing", "zero"]
        else:
            import numpy as np

            src = work / "a.npy"
            np.save(src, np.random.default_rng(0).standard_normal((504, 24)))
        rows = [one_round(work, src, args.n_iter, extra, args.local)
                for _ in range(args.repeat)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    keys = list(rows[0])
    print("| run | " + " | ".join(keys) + " |")
    print("|---" * (len(keys) + 1) + "|")
    for i, r in enumerate(rows):
        print(f"| {i} | " + " | ".join("-" if r[k] is None else f"{r[k]:.2f} s"
                                       for k in keys) + " |")
    med = {k: statistics.median(r[k] for r in rows if r[k] is not None) for k in keys}
    print("| median | " + " | ".join(f"{med[k]:.2f} s" for k in keys) + " |")
    try:
        print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    except OSError:
        pass


if __name__ == "__main__":
    main()
