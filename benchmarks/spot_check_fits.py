"""Refit stored reproduction fits with the running dask_bid and list the ones that differ.

``examples/reproduce_paper.py --spot-check`` stores only counts per version; this prints
each refit whose basis or MSE differs from the stored record (the headline sampler, GBT
with the defaults), without writing to the store.

    python benchmarks/spot_check_fits.py --data ../shared/data --version a41ce49fe602
    python benchmarks/spot_check_fits.py --data ../shared/data \
        --cells ccle_ic50:17 ccle_ic50:20 --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))

import reproduce_paper as R  # noqa: E402

from dask_bid.datasets import load_dataset  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--store", default=os.path.join(HERE, "results", "paper_reproduction.json"))
    ap.add_argument("--version", help="refit the CCLE headline fits of seeds 0 and 1 made by "
                    "this source fingerprint")
    ap.add_argument("--cells", nargs="+", default=[], help="dataset:K cells to refit")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    args = ap.parse_args(argv)
    print(f"command: python {' '.join(sys.argv)}")
    runs = json.load(open(args.store))["runs"]
    want = []
    if args.version:
        want += sorted(k for k, r in runs.items() if r["method"] == R.HEADLINE
                       and r["seed"] in (0, 1) and r["dataset"] in ("ccle_ec50", "ccle_ic50")
                       and r.get("library") == args.version)
    for cell in args.cells:
        name, K = cell.split(":")
        want += [R._key(name, int(K), R.HEADLINE, s) for s in args.seeds]
    data = {}
    same = 0
    warnings.simplefilter("ignore")
    for key in want:
        r = runs[key]
        if r["dataset"] not in data:
            data[r["dataset"]] = load_dataset(r["dataset"], args.data)
        rec, _ = R.fit_one(data[r["dataset"]], r["K"], R.HEADLINE, r["seed"], {})
        cols = sorted(rec["columns"]) == sorted(r["columns"])
        if cols and rec["mse"] == r["mse"]:
            same += 1
            continue
        print(f"{key}: stored MSE {r['mse']:.6g} (version {r.get('library')}), refitted "
              f"{rec['mse']:.6g}, same columns: {cols}", flush=True)
    print(f"{same} of {len(want)} refits gave the stored basis and MSE")


if __name__ == "__main__":
    main()
