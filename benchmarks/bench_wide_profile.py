"""Where a wide fit's iteration goes: worker compute per block operation (issue 13.2).

Runs a default fit (shortened to ``--n-iter`` iterations, burn-in a fifth) on an existing
Zarr store on a LocalCluster 2 x 1 and sums, from the task stream, the compute time of
each kind of task over iterations 11 to the last, per iteration (both workers together).

    python benchmarks/bench_wide_profile.py /tmp/bench_wide_1000x200000.zarr --n-iter 150

(the store is what ``bench_engine_wide.py --keep`` leaves). ``--packs 16MiB auto`` runs the
fit once per packs' bound, alternating, in the same cluster: ``16MiB`` the former fixed
bound, ``auto`` the default (a share of the worker memory limit).
"""

from __future__ import annotations

import argparse
import collections
import time

from distributed import Client, LocalCluster, get_task_stream

from dask_bid import bayesian_id


def _kind(key):
    # engine keys: bid-<what>-<run>-c<chain>-<n>-<block or pack>
    key = str(key)
    return key.split("-")[1] if key.startswith("bid-") else key.split("-")[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store")
    ap.add_argument("--rank", type=int, default=20)
    ap.add_argument("--n-iter", type=int, default=150)
    ap.add_argument("--packs", nargs="+", default=["auto"], choices=["16MiB", "auto"])
    args = ap.parse_args(argv)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cl, \
            Client(cl) as client:
        # compile the workers' kernels first
        bayesian_id(args.store, args.rank, client=client, n_iter=3, burn_in=1, init="random",
                    random_state=0)
        for packs in args.packs:
            _profile(client, args, packs)


def _profile(client, args, packs):
    from dask_bid.engine import dask_backend

    saved = dask_backend.MAX_PACK_BYTES
    if packs == "16MiB":  # the bound before it grew with the worker memory
        dask_backend.MAX_PACK_BYTES = dask_backend.PACK_BYTES
    stamps = []  # wall-clock times: the task stream's clock
    try:
        with get_task_stream(client) as ts:
            t0 = time.perf_counter()
            bayesian_id(args.store, args.rank, client=client, n_iter=args.n_iter,
                        burn_in=args.n_iter // 5, random_state=2,
                        callback=lambda st: stamps.append(time.time()))
            t_fit = time.perf_counter() - t0
    finally:
        dask_backend.MAX_PACK_BYTES = saved
    lo, hi = stamps[9], stamps[-1]
    n = len(stamps) - 10
    agg = collections.defaultdict(lambda: [0.0, 0])
    for task in ts.data:
        for s in task["startstops"]:
            if s["action"] == "compute" and lo <= s["start"] and s["stop"] <= hi:
                agg[_kind(task["key"])][0] += s["stop"] - s["start"]
                agg[_kind(task["key"])][1] += 1
    total = sum(v[0] for v in agg.values())
    tasks = sum(v[1] for v in agg.values())
    print(f"packs {packs}: fit {t_fit:.1f} s; iterations 11-{len(stamps)}: "
          f"{(hi - lo) / n:.3f} s each, {tasks / n:.1f} tasks; "
          f"worker compute {total / n * 1000:.0f} ms per iteration (both workers)")
    for k, (t, c) in sorted(agg.items(), key=lambda x: -x[1][0])[:12]:
        print(f"  {k:28s} {t / n * 1000:7.1f} ms/iter  {c / n:5.1f} tasks/iter")


if __name__ == "__main__":
    main()
