"""Mixing of the samplers on the paper's data: split R-hat, bulk ESS, acceptance, ESS/s.

For each dataset and sampler, four chains (one fit with ``n_chains=4``) run from
dispersed starts (``init="random"``: a uniformly random basis per chain) and, for the
default sampler, also from the default start (``init="auto"``: the pivoted-QR basis,
the same for every chain, so R-hat there measures agreement after a common start). The
retained draws of sigma^2 and of the SSE are summarised with ArviZ's rank-normalised
split R-hat and bulk ESS (``dask_bid.summary``).

    python benchmarks/bench_mixing.py --data ../shared/data
    python benchmarks/bench_mixing.py --data ../shared/data --datasets ccle_ec50 --k 10

Samplers: ``collapsed`` (the default, exact), ``plain`` (Algorithm 1, exact) and the
paper's aggressive sampler with its settings (``PAPER_SETTINGS``: 500 iterations, burn-in
100, thin 5). Every run uses its sampler's default number of iterations, unless
``--n-iter`` sets the collapsed runs' (to see how many they need).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from dask_bid import PAPER_SETTINGS, BayesianID, summary  # noqa: E402
from dask_bid.datasets import load_dataset  # noqa: E402

CASES = {"ccle_ec50": 10, "movielens_100k": 20}
SAMPLERS = {
    "collapsed": {},
    "plain": {"sampler": "plain"},
    "paper-aggressive": dict(PAPER_SETTINGS),
}


def run(A, K, kw, seed):
    t = time.perf_counter()
    est = BayesianID(K, n_chains=4, random_state=seed, **kw).fit(A)
    wall = time.perf_counter() - t
    s = summary(est).loc[["sigma2", "mse"]]  # mse: the retained SSE / (M N)
    acc = float(np.mean(est.trace_["accepted"][:, est.burn_in:]))
    final = est.trace_["mse"][:, -1]
    return est, s, acc, wall, final


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--datasets", nargs="+", default=list(CASES))
    ap.add_argument("--k", type=int, default=None, help="override K for every dataset")
    ap.add_argument("--samplers", nargs="+", default=list(SAMPLERS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--search-warmup", default=None,
                    help="search_warmup of the collapsed runs (an integer or auto; default: "
                    "the library's)")
    ap.add_argument("--tempered-warmup", default=None,
                    help="tempered_warmup of the collapsed runs (an integer or auto; "
                    "default: the library's)")
    ap.add_argument("--n-copies", type=int, default=2,
                    help="copies of every column (2: the paper's preprocessing)")
    ap.add_argument("--starts", nargs="+", default=["random", "default"],
                    help="starts of the collapsed runs: random and/or default")
    ap.add_argument("--n-iter", type=int, default=None,
                    help="iterations of the collapsed runs (default: the library's, 1000); "
                    "the burn-in stays the library's (200) unless --burn-in")
    ap.add_argument("--missing", choices=("zero", "mask"), default="zero",
                    help="zero: the paper's zero fill (default); mask: the missing entries "
                    "left out of the likelihood (loaded as NaN, fitted with missing='mask')")
    ap.add_argument("--n-redraw", default=None,
                    help="n_redraw of the collapsed runs (an integer or auto; default: the "
                    "library's)")
    ap.add_argument("--burn-in", type=int, default=None,
                    help="burn-in of the collapsed runs (default: the library's, 200); a "
                    "tempered warm-up is at most the burn-in")
    args = ap.parse_args(argv)
    print(f"command: python {' '.join(sys.argv)}")
    print(f"load average at start: {open('/proc/loadavg').read().split()[:3]}")
    for name in args.datasets:
        fill = {"fill_value": np.nan} if args.missing == "mask" else {}
        A = load_dataset(name, args.data, n_copies=args.n_copies, **fill).data
        K = args.k or CASES[name]
        print(f"\n## {name} {A.shape[0]} x {A.shape[1]}, K = {K}, missing={args.missing!r}")
        rows = []
        for label in args.samplers:
            starts = [("random", {"init": "random"})]
            if label == "collapsed":
                starts = [s for s in [("random", {"init": "random"}), ("default", {})]
                          if s[0] in args.starts]
            for start, extra in starts:
                kw = {**SAMPLERS[label], **extra}
                if args.missing == "mask":
                    kw["missing"] = "mask"
                if label == "collapsed":
                    for name in ("search_warmup", "tempered_warmup"):
                        w = getattr(args, name)
                        if w is not None:
                            kw[name] = w if w == "auto" else int(w)
                    if args.n_iter is not None:
                        kw["n_iter"] = args.n_iter
                    if args.burn_in is not None:
                        kw["burn_in"] = args.burn_in
                    if args.n_redraw is not None:
                        kw["n_redraw"] = args.n_redraw if args.n_redraw == "auto" \
                            else int(args.n_redraw)
                est, s, acc, wall, final = run(A, K, kw, args.seed)
                ess = s["ess_bulk"]
                rows.append((label, start, est.n_iter, s["r_hat"].iloc[0], ess.iloc[0],
                             s["r_hat"].iloc[1], ess.iloc[1], acc, wall,
                             float(ess.min() / wall), est.mse_,
                             [round(float(x), 4) for x in final]))
                print(f"  {label:17s} start={start:8s} done in {wall:.1f} s", flush=True)
                # how far apart the chains ended: columns shared by each pair of last bases
                last = [set(map(int, b)) for b in est.result_.draws_columns[:, -1]]
                pairs = [(i, j) for i in range(len(last)) for j in range(i + 1, len(last))]
                shared = [len(last[i] & last[j]) for i, j in pairs]
                # every column is there n_copies times (np.tile): a copy of a column is the
                # same column of the original matrix
                n0 = A.shape[1] // args.n_copies
                orig = [{c % n0 for c in b} for b in last]
                same = [len(orig[i] & orig[j]) for i, j in pairs]
                # how the basis moved: changes between retained draws, and those that
                # changed the set of original columns (not only a column for its copy)
                dc = est.result_.draws_columns
                moved = int(np.any(dc[:, 1:] != dc[:, :-1], axis=2).sum())
                o = np.sort(dc % n0, axis=2)
                moved_orig = int(np.any(o[:, 1:] != o[:, :-1], axis=2).sum())
                print(f"    basis changes between retained draws: {moved}, of which "
                      f"{moved_orig} changed the original columns", flush=True)
                print(f"    columns shared by the chains' last bases, pair by pair: {shared} "
                      f"of {K} ({same} counting a copy as its column); "
                      f"{est.convergence_.problems or 'converged'}", flush=True)
        print("\n| sampler | start | n_iter | R-hat sigma2 | ESS sigma2 | R-hat SSE | ESS SSE "
              "| acceptance | wall (s) | min ESS / s | reported MSE | last MSE per chain |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in rows:
            print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.0f} | {r[5]:.3f} | "
                  f"{r[6]:.0f} | {r[7]:.3f} | {r[8]:.1f} | {r[9]:.2f} | {r[10]:.5f} | "
                  f"{r[11]} |")
    print(f"\nload average at end: {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()
