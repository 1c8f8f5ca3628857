"""Sparse input (issue 12.5, docs/sparse.md): costs that grow with the observed entries.

Two benchmarks:

``scaling``
    Seconds per iteration of the masked fit of a sparse input against the number of
    observed entries at a fixed shape (default 100,000 x 2,000, K = 10, densities 0.1 %
    to 3.2 %, synchronous scheduler), and the seconds of one pass over the store (the
    reads and the kernel of a candidate-row pass). Prints the log-log slope of both
    against the observed count (target: <= 1.1).

``large``
    A synthetic ratings matrix whose dense float64 form is larger than this machine's
    memory (default 500,000 x 20,000 = 80 GB, 10^7 observed entries missing at random,
    rank 10 plus noise): written as a TSV triplet file, converted with
    ``convert_triplets`` (timed), fitted on a LocalCluster of 2 single-thread worker
    processes with a memory limit (default 2 GB each), with the default sampler and
    ``--n-iter`` iterations; prints the conversion time, the time of one streaming pass
    over the store on the cluster, the fit's wall time (and in passes), the seconds per
    iteration and the peak RSS of every worker (polled every 0.5 s). Its files (about
    0.4 GB) are deleted at the end.

Usage::

    nice python benchmarks/bench_sparse.py scaling
    nice python benchmarks/bench_sparse.py large --n-iter 1000 --dir /tmp/bench_sparse
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
import time

import numpy as np


def synthetic(M, N, nnz, rank, seed, noise=0.1):
    """(rows, cols, values) of a rank-``rank`` matrix plus noise, ``nnz`` entries drawn
    at random without repeats (missing at random); never the dense matrix."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((M, rank)) / np.sqrt(rank)
    V = rng.standard_normal((rank, N))
    key = np.unique(rng.integers(0, M * N, int(nnz * 1.001) + 10))
    key = key[rng.permutation(key.size)[:nnz]]  # a random subset, in random order
    r, c = key // N, key % N
    v = np.empty(r.size)
    for a in range(0, r.size, 2**20):  # in chunks: U[r] of 10^7 rows would be 800 MB
        b = min(r.size, a + 2**20)
        v[a:b] = np.einsum("ik,ki->i", U[r[a:b]], V[:, c[a:b]])
    v += noise * rng.standard_normal(r.size)
    return r, c, v


def _slope(x, y):
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _pass_seconds(store, K, client="synchronous", repeat=3):
    """Seconds of one streaming pass over the store as the engine runs it: every column
    group read and multiplied by K gathered columns (the candidate-row pass)."""
    from dask_bid.engine.cluster import cluster_executor
    from dask_bid.engine.dask_backend import _sum_arrays
    from dask_bid.engine.sparse_backend import (
        SparseDaskBackend,
        SparseTileSource,
        _sparse_rows_part,
        plan_sparse_layout,
    )
    from dask_bid.engine.sparse_store import open_sparse

    src = open_sparse(store)
    lay = plan_sparse_layout(src.array.column_counts(), src.shape, K)
    rng = np.random.default_rng(0)
    times = []
    with cluster_executor(client) as ex:
        be = SparseDaskBackend(SparseTileSource(src, lay, ex), ex)
        for _ in range(repeat + 1):
            # other columns each time: other task keys, so no result is reused
            cols = rng.choice(src.shape[1], K, replace=False).tolist()
            t0 = time.perf_counter()
            totals = be._group_totals(_sparse_rows_part, _sum_arrays, cols)
            ex.gather(ex.compute(totals))
            times.append(time.perf_counter() - t0)
    # the first one compiles the kernels where they run
    return float(np.median(times[1:])), len(lay.groups)


def scaling(args):
    import scipy.sparse as sp

    from dask_bid.interface import bayesian_id
    from dask_bid.interface.sparse_io import convert_sparse

    M, N, K = args.rows, args.cols, args.k
    os.makedirs(args.dir, exist_ok=True)
    store = os.path.join(args.dir, "scaling.zarr")
    rows = []
    for dens in args.densities:
        nnz = int(dens * M * N)
        r, c, v = synthetic(M, N, nnz, 10, seed=1)
        convert_sparse(sp.coo_matrix((v, (r, c)), shape=(M, N)), store, overwrite=True,
                       quiet=True)
        stamps = []
        t0 = time.perf_counter()
        bayesian_id(store, K, missing="mask", n_iter=args.n_iter, burn_in=args.n_iter // 3,
                    random_state=0, client="synchronous", n_trace_columns=0,
                    callback=lambda st, stamps=stamps: stamps.append(time.perf_counter()))
        wall = time.perf_counter() - t0
        # the first iterations include the kernels' compilation and the first pass
        per_it = float(np.median(np.diff(stamps[2:])))
        pas, groups = _pass_seconds(store, K)
        rows.append({"density": dens, "nnz": nnz, "s_per_iteration": per_it,
                     "s_per_pass": pas, "groups": groups, "fit_wall_s": wall})
        print(f"density {dens:7.4f}  nnz {nnz:>9d}  {per_it:7.3f} s/iteration  "
              f"{pas:7.3f} s/pass  ({groups} groups, fit {wall:.1f} s)", flush=True)
    nnz = np.array([x["nnz"] for x in rows], dtype=float)
    it_slope = _slope(nnz, [x["s_per_iteration"] for x in rows])
    pass_slope = _slope(nnz, [x["s_per_pass"] for x in rows])
    print(f"log-log slope vs observed entries: {it_slope:.3f} (seconds per iteration), "
          f"{pass_slope:.3f} (one pass)  (target <= 1.1)")
    shutil.rmtree(store, ignore_errors=True)
    return {"benchmark": "scaling", "shape": [M, N], "K": K, "n_iter": args.n_iter,
            "rows": rows, "slope_iteration": it_slope, "slope_pass": pass_slope}


class _PeakMemory:
    """Peak RSS of every worker of ``client``, polled in a thread."""

    def __init__(self, client, every=0.5):
        self.client, self.every = client, every
        self.peak = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import psutil

        def rss():
            return psutil.Process().memory_info().rss

        while not self._stop.is_set():
            try:
                for w, v in self.client.run(rss).items():
                    self.peak[w] = max(self.peak.get(w, 0), v)
            except Exception:
                pass
            self._stop.wait(self.every)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def _write_tsv(path, r, c, v, chunk=1_000_000):
    with open(path, "w") as fh:
        fh.write("user\titem\trating\n")
        for a in range(0, r.size, chunk):
            b = min(r.size, a + chunk)
            block = np.column_stack([r[a:b], c[a:b]]).astype(np.int64)
            np.savetxt(fh, np.column_stack([block, v[a:b]]), fmt=["%d", "%d", "%.6f"],
                       delimiter="\t")


def large(args):
    from distributed import Client, LocalCluster

    from dask_bid.interface import bayesian_id
    from dask_bid.interface.sparse_io import convert_triplets

    M, N, K, nnz = args.rows, args.cols, args.k, int(args.nnz)
    os.makedirs(args.dir, exist_ok=True)
    tsv = os.path.join(args.dir, "ratings.tsv")
    store = os.path.join(args.dir, "ratings.zarr")
    out = os.path.join(args.dir, "fit.zarr")
    log = open(os.path.join(args.dir, "progress.log"), "w")
    res = {"benchmark": "large", "shape": [M, N], "dense_float64_GB": M * N * 8 / 1e9,
           "nnz": nnz, "K": K, "n_iter": args.n_iter, "burn_in": args.burn_in,
           "workers": 2, "memory_limit": args.memory_limit}
    try:
        t0 = time.perf_counter()
        r, c, v = synthetic(M, N, nnz, 10, seed=2)
        _write_tsv(tsv, r, c, v)
        del r, c, v
        res["tsv_bytes"] = os.path.getsize(tsv)
        res["generate_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        src = convert_triplets(tsv, store, shape=(M, N), overwrite=True, quiet=True)
        res["convert_s"] = time.perf_counter() - t0
        res["store_bytes"] = sum(os.path.getsize(os.path.join(d, f))
                                 for d, _, fs in os.walk(store) for f in fs)
        os.remove(tsv)
        print(json.dumps(res), file=log, flush=True)
        with LocalCluster(n_workers=2, threads_per_worker=1,
                          memory_limit=args.memory_limit, dashboard_address=":0") as cl, \
                Client(cl) as client:
            res["pass_s"], res["groups"] = _pass_seconds(store, K, client=client)
            print(json.dumps(res), file=log, flush=True)
            stamps = []

            def cb(st):
                stamps.append(time.perf_counter())
                if st.iteration % 5 == 0 or st.iteration < 5:
                    print(f"iteration {st.iteration} at {stamps[-1] - t0:.1f} s", file=log,
                          flush=True)

            with _PeakMemory(client) as mem:
                t0 = time.perf_counter()
                fit = bayesian_id(store, K, missing="mask", n_iter=args.n_iter,
                                  burn_in=args.burn_in, random_state=0, client=client,
                                  out=out, overwrite=True, callback=cb)
                res["fit_s"] = time.perf_counter() - t0
            res["sampling_s"] = stamps[-1] - t0
            res["s_per_iteration_median"] = float(np.median(np.diff(stamps)))
            res["fit_in_passes"] = res["fit_s"] / res["pass_s"]
            res["peak_worker_rss_MB"] = {w: v / 2**20 for w, v in mem.peak.items()}
            res["mse_observed"] = fit.mse_observed
            res["sigma2"] = fit.sigma2
            res["columns"] = [int(x) for x in fit.columns]
            res["nnz_stored"] = int(src.nnz)
    finally:
        print(json.dumps(res), file=log, flush=True)
        log.close()
        for p in (tsv, store, out):
            shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (
                os.remove(p) if os.path.exists(p) else None)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="which", required=True)
    s = sub.add_parser("scaling")
    s.add_argument("--rows", type=int, default=100_000)
    s.add_argument("--cols", type=int, default=2_000)
    s.add_argument("--k", type=int, default=10)
    s.add_argument("--n-iter", type=int, default=30)
    s.add_argument("--densities", type=float, nargs="+",
                   default=[0.001, 0.002, 0.004, 0.008, 0.016, 0.032])
    s.add_argument("--dir", default="/tmp/bench_sparse")
    g = sub.add_parser("large")
    g.add_argument("--rows", type=int, default=500_000)
    g.add_argument("--cols", type=int, default=20_000)
    g.add_argument("--nnz", type=float, default=1e7)
    g.add_argument("--k", type=int, default=20)
    g.add_argument("--n-iter", type=int, default=1000)
    g.add_argument("--burn-in", type=int, default=200)
    g.add_argument("--memory-limit", default="2GB")
    g.add_argument("--dir", default="/tmp/bench_sparse")
    g.add_argument("--json", default=None, help="also write the results here")
    p = sub.add_parser("pass", help="only the time of one pass over an existing store")
    p.add_argument("store")
    p.add_argument("--k", type=int, default=20)
    p.add_argument("--memory-limit", default="2GB")
    args = ap.parse_args()
    if args.which == "pass":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=args.memory_limit,
                          dashboard_address=":0") as cl, Client(cl) as client:
            sec, groups = _pass_seconds(args.store, args.k, client=client, repeat=5)
        print(json.dumps({"store": args.store, "pass_s": sec, "groups": groups}))
        return
    res = scaling(args) if args.which == "scaling" else large(args)
    print(json.dumps(res, indent=1))
    if getattr(args, "json", None):
        with open(args.json, "w") as fh:
            json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
