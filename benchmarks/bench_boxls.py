"""Exact box-constrained least squares of W given a basis (kernels/boxls.py, what the
point estimate runs on every visited basis that might beat the best so far): this
tree's ``box_lstsq`` against a baseline version of the module, in the same process.

    git show 8734160:dask_bid/kernels/boxls.py > /tmp/boxls_base.py
    python benchmarks/bench_boxls.py --baseline /tmp/boxls_base.py

Problems: a random basis C (M x K) and N columns whose least-squares coefficients lie
far outside [-1, 1] (so that most columns run the active-set method; ``--coef 0.5``:
inside, the unconstrained solve alone); dense (one Gram),
masked with 60 % of the entries observed (per-column Grams of full rank), and masked
with fewer observed rows per column than K (singular per-column Grams). Prints the
seconds of each version (best of 3 after a compile run), their ratio, and the largest
difference of the two versions' SSE, relative to the column's squared norm.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import dask_bid.kernels.boxls as current  # noqa: E402


def _baseline(path):
    # loaded inside the package, so that its relative imports resolve
    spec = importlib.util.spec_from_file_location("dask_bid.kernels._boxls_baseline", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _problem(kind, M, K, N, rng, coef=4.0):
    C = rng.standard_normal((M, K))
    A = C @ rng.uniform(-coef, coef, (K, N)) + 0.3 * rng.standard_normal((M, N))
    if kind == "dense":
        return dict(G=C.T @ C, H=C.T @ A), C, A, np.ones(A.shape, bool)
    share = 0.6 if kind == "masked" else 0.6 * K / M
    obs = rng.random(A.shape) < share
    Gn = np.stack([C[obs[:, n]].T @ C[obs[:, n]] for n in range(N)])
    H = np.column_stack([C[obs[:, n]].T @ A[obs[:, n], n] for n in range(N)])
    return dict(G=None, H=H, Gn=Gn), C, A, obs


def _sse(C, A, obs, W):
    R = np.where(obs, A - C @ W, 0.0)
    return np.einsum("ij,ij->j", R, R)


def _time(f, kw):
    f(**kw)
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        W = f(**kw)
        best = min(best, time.perf_counter() - t)
    return best, W


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", required=True, help="a copy of kernels/boxls.py to compare")
    ap.add_argument("--k", type=int, nargs="+", default=[20, 60, 120])
    ap.add_argument("--rows", type=int, default=300)
    ap.add_argument("--cols", type=int, default=200)
    ap.add_argument("--coef", type=float, default=4.0,
                    help="coefficients drawn in [-coef, coef]: 4 puts most columns outside "
                         "the box (the active set), 0.5 inside (the unconstrained solve)")
    ap.add_argument("--kinds", nargs="+", default=["dense", "masked", "masked, rank < K"])
    args = ap.parse_args(argv)
    base = _baseline(args.baseline)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}")
    print("| problem | K | baseline (s) | this tree (s) | baseline / this | max SSE diff / norm |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind in args.kinds:
        for K in args.k:
            kw, C, A, obs = _problem(kind.split(",")[0] if kind != "masked, rank < K"
                                     else "singular", args.rows, K, args.cols,
                                     np.random.default_rng(K), coef=args.coef)
            tb, Wb = _time(base.box_lstsq, kw)
            tc, Wc = _time(current.box_lstsq, kw)
            sb, sc = _sse(C, A, obs, Wb), _sse(C, A, obs, Wc)
            # relative to each column's squared norm: a column fitted exactly has an SSE
            # of rounding size in both, whose ratio means nothing
            norm = np.einsum("ij,ij->j", np.where(obs, A, 0.0), np.where(obs, A, 0.0))
            diff = float(np.max(np.abs(sc - sb) / norm))
            print(f"| {kind} | {K} | {tb:.3f} | {tc:.3f} | {tb / tc:.1f} | {diff:.1e} |",
                  flush=True)
    print(f"load average at end: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
