"""Held-out error of the ID on the paper's data (issue 12 item 4).

The training-set MSE at large K is an interpolation, not a result: with the paper's column
copies every column is in the span of K = N/2 selected columns, and a selected column is
reproduced exactly. This script measures instead how well ``C W`` predicts observed
entries the fit never saw:

1. Load the ORIGINAL matrix (no copies, no standardisation, NaN at missing entries).
2. Hold out 10 % of its observed entries, drawn with a fixed seed per (dataset, seed)
   (``SeedSequence([crc32(dataset), seed])``; the split does not depend on K or the
   method).
3. Standardise with the mean and sd of the training entries only, then copy every column
   twice as the paper does. A held-out entry is missing in BOTH copies: otherwise the
   copy would hold the answer.
4. Fit on the training entries and predict every entry by ``C W``, with ``C`` the
   selected columns of the training matrix (missing entries 0, as the masked model
   counts them).

Methods: ``bid_mask`` (``BayesianID(K, missing="mask")``, NaN at every missing or held-out
entry), ``bid_zero`` (``BayesianID(K)`` on the zero-filled training matrix: the paper's
practice), ``cpqr`` (the deterministic pivoted-QR ID, ``RandomizedID(K, method="cpqr")``,
on the zero-filled training matrix), ``col_mean`` (each column's mean over its
training entries; no K) and ``global_mean`` (every entry predicted by the mean of the
training entries, 0 after standardisation: the RMSE of knowing nothing). RMSEs are
in the units of the standardised training entries and are taken over both copies of
each entry (equal weights; both copies of an entry are held out or both are trained on).

    python benchmarks/bench_heldout.py --datasets ccle_ec50 ccle_ic50 --k 5 10 15 20 \\
        --seeds 0 1 2 3 4
    python benchmarks/bench_heldout.py --datasets movielens_100k --k 20 --seeds 0
    python benchmarks/bench_heldout.py --table       # the table of what is stored

Results go to ``benchmarks/results/heldout.json`` (``--out``), one record per
(dataset, K, method, seed, n_iter), written as each fit ends; a record already there is
not refitted, so an interrupted run resumes where it stopped. ``--merge FILE ...`` adds
the records of other runs' files (e.g. made on another machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from dask_bid import BayesianID, RandomizedID  # noqa: E402
from dask_bid.datasets import load_dataset  # noqa: E402

METHODS = ("bid_mask", "bid_zero", "cpqr", "col_mean", "global_mean")
#: methods without K or chain: one record per (dataset, seed)
NO_K = ("col_mean", "global_mean")
METHOD_LABELS = {
    "bid_mask": "BayesianID, missing=\"mask\"",
    "bid_zero": "BayesianID, zero-filled",
    "cpqr": "pivoted-QR ID (zero-filled)",
    "col_mean": "column mean",
    "global_mean": "training mean (0)",
}
DEFAULT_OUT = REPO / "benchmarks" / "results" / "heldout.json"
DEFAULT_DATA = REPO.parent / "shared" / "data"
HELDOUT_FRACTION = 0.1
N_COPIES = 2


# ----------------------------------------------------------------------------- the split

def split_seed(dataset: str, seed: int) -> np.random.SeedSequence:
    """The seed of the split of ``dataset`` for ``seed`` (independent of K and method)."""
    return np.random.SeedSequence([zlib.crc32(dataset.encode()), int(seed)])


def heldout_split(mask: np.ndarray, seed, fraction: float = HELDOUT_FRACTION) -> np.ndarray:
    """A boolean array of ``mask``'s shape: the held-out entries.

    Exactly ``round(fraction * n_observed)`` observed entries, drawn without replacement
    by ``np.random.default_rng(seed)``.
    """
    mask = np.asarray(mask, dtype=bool)
    observed = np.flatnonzero(mask)
    n_test = int(round(fraction * observed.size))
    rng = np.random.default_rng(seed)
    pick = rng.choice(observed, size=n_test, replace=False)
    test = np.zeros(mask.shape, dtype=bool)
    test.flat[pick] = True
    return test


def training_matrices(values: np.ndarray, mask: np.ndarray, test: np.ndarray,
                      n_copies: int = N_COPIES) -> dict:
    """Standardise on the training entries, then copy the columns ``n_copies`` times.

    Returns a dict with ``X_mask`` (NaN at every entry not trained on, in every copy),
    ``X_zero`` (the same with 0 there), ``Z`` (all observed entries standardised with the
    training statistics, NaN elsewhere; held-out values included, for scoring only),
    ``train`` and ``test`` (copied masks), ``mean`` and ``std``. Nothing the fits see
    depends on a held-out value.
    """
    values = np.asarray(values, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    train = mask & ~test
    obs = values[train]
    mean = float(obs.mean())
    std = float(obs.std())
    if not std > 0:
        std = 1.0
    Z = np.where(mask, (values - mean) / std, np.nan)
    X_mask = np.where(train, Z, np.nan)
    tile = (1, n_copies)
    return {
        "X_mask": np.ascontiguousarray(np.tile(X_mask, tile)),
        "X_zero": np.ascontiguousarray(np.tile(np.where(train, Z, 0.0), tile)),
        "Z": np.tile(Z, tile),
        "train": np.tile(train, tile),
        "test": np.tile(test, tile),
        "mean": mean,
        "std": std,
    }


def rmse(P: np.ndarray, Z: np.ndarray, where: np.ndarray) -> float:
    """Root mean squared error of ``P`` against ``Z`` over the entries ``where``."""
    d = P[where] - Z[where]
    return float(np.sqrt(np.mean(d * d)))


# ----------------------------------------------------------------------------- the fits

def fit_method(mats: dict, method: str, K: int | None, seed: int,
               n_iter: int | None = None) -> tuple[np.ndarray, dict]:
    """Fit ``method`` on the training entries; return (prediction of every entry, info)."""
    X_zero = mats["X_zero"]
    info: dict = {}
    if method == "global_mean":
        # the mean of the training entries is 0 after their standardisation
        return np.zeros(X_zero.shape), info
    if method == "col_mean":
        X = mats["X_mask"]
        n = np.sum(~np.isnan(X), axis=0)
        # a column with no training entry (possible on MovieLens) gets the global mean, 0
        col = np.where(n > 0, np.nansum(X, axis=0) / np.maximum(n, 1), 0.0)
        return np.broadcast_to(col, X.shape), info
    if method == "cpqr":
        est = RandomizedID(K, method="cpqr").fit(X_zero)
    elif method in ("bid_mask", "bid_zero"):
        kw = {}
        if n_iter is not None:
            # a shorter chain keeps the library's share of burn-in (200 of 1000)
            burn = BayesianID(K).get_params()["burn_in"]
            kw = {"n_iter": int(n_iter), "burn_in": min(burn, int(n_iter) // 5)}
        if method == "bid_mask":
            kw["missing"] = "mask"
        est = BayesianID(K, random_state=seed, **kw).fit(
            mats["X_mask"] if method == "bid_mask" else X_zero)
        info["sigma2"] = float(est.sigma2_)
        info["n_iter"] = int(est.n_iter)
    else:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    J = np.asarray(est.columns_, dtype=np.int64)
    W = np.asarray(est.components_, dtype=np.float64)
    info["columns"] = [int(j) for j in J]
    # C is the training matrix's columns with every untrained entry 0: the masked
    # model's own convention (NaN counts as 0 in C = A[:, J]), and the zero-fill's.
    return X_zero[:, J] @ W, info


def evaluate(mats: dict, P: np.ndarray, info: dict) -> dict:
    """Held-out and training RMSE of the prediction ``P``."""
    Z, test, train = mats["Z"], mats["test"], mats["train"]
    rec = {
        "rmse_heldout": rmse(P, Z, test),
        "rmse_train": rmse(P, Z, train),
        "std": mats["std"],
    }
    if "columns" in info:
        in_c = np.zeros(Z.shape[1], dtype=bool)
        in_c[info["columns"]] = True
        # held-out entries in a selected column are predicted by their fill value, 0
        rec["heldout_share_in_C"] = float(np.mean(np.broadcast_to(in_c, Z.shape)[test]))
    return rec


# ----------------------------------------------------------------------------- storage

def record_key(dataset: str, K, method: str, seed: int, n_iter) -> str:
    k = "-" if method in NO_K else int(K)
    it = "-" if method in (*NO_K, "cpqr") else ("default" if n_iter is None else n_iter)
    return f"{dataset}|K={k}|{method}|seed={seed}|n_iter={it}"


def load_store(path: Path) -> dict:
    if path.exists():
        with open(path) as fh:
            return json.load(fh)
    return {}


def save_store(path: Path, store: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(store, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)


def load_original(dataset: str, data_dir) -> tuple[np.ndarray, np.ndarray]:
    """The dataset after the paper's filters, unstandardised, uncopied, NaN where missing."""
    ds = load_dataset(dataset, data_dir, standardize=None, fill_value=np.nan, n_copies=1)
    return ds.data, ds.mask


def run(datasets, ks, seeds, methods, n_iter, data_dir, out: Path, log=print,
        load=load_original) -> dict:
    """Fit what ``out`` does not hold yet, writing each record as it ends.

    ``load(name, data_dir)`` returns (values with NaN at missing entries, observed mask).
    """
    store = load_store(out)
    for name in datasets:
        values, mask = load(name, data_dir)
        for seed in seeds:
            test = heldout_split(mask, split_seed(name, seed))
            mats = training_matrices(values, mask, test)
            for K in ks:
                for method in methods:
                    key = record_key(name, K, method, seed, n_iter)
                    if key in store:
                        continue
                    t0 = time.perf_counter()
                    P, info = fit_method(mats, method, K, seed, n_iter)
                    rec = evaluate(mats, P, info)
                    rec.update(info, dataset=name, K=None if method in NO_K else K,
                               method=method, seed=seed, n_heldout=int(test.sum()),
                               n_train=int((mask & ~test).sum()),
                               time_s=round(time.perf_counter() - t0, 3),
                               load_avg=round(os.getloadavg()[0], 2))
                    # re-read before writing: another process may share the file
                    store = load_store(out)
                    store[key] = rec
                    save_store(out, store)
                    log(f"{key}: held-out RMSE {rec['rmse_heldout']:.4f}, train RMSE "
                        f"{rec['rmse_train']:.4f} ({rec['time_s']:.1f} s)")
    return store


# ----------------------------------------------------------------------------- the table

def _pm(xs) -> str:
    if not xs:
        return "-"
    m = float(np.mean(xs))
    if len(xs) == 1:
        return f"{m:.4f} (1 seed)"
    return f"{m:.4f} ± {float(np.std(xs, ddof=1)):.4f} ({len(xs)})"


def table(store: dict) -> str:
    """Two Markdown tables (held-out, then training RMSE): mean ± sd over seeds."""
    cells: dict = {}
    for rec in store.values():
        cells.setdefault((rec["dataset"], rec["method"], rec["K"]), []).append(rec)
    rows = sorted({(d, k) for d, m, k in cells if k is not None})
    out = []
    for field, title in (("rmse_heldout", "Held-out RMSE"), ("rmse_train", "Training RMSE")):
        out += [f"{title} (standardised units; mean ± sd over seeds, number of seeds in "
                "brackets)", "",
                "| dataset | K | " + " | ".join(METHOD_LABELS[m] for m in METHODS) + " |",
                "|" + "---|" * (2 + len(METHODS))]
        for d, k in rows:
            vals = [_pm([r[field] for r in cells.get((d, m, None if m in NO_K else k), [])])
                    for m in METHODS]
            out.append(f"| {d} | {k} | " + " | ".join(vals) + " |")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DEFAULT_DATA), help="the shared data folder")
    ap.add_argument("--datasets", nargs="+", default=["ccle_ec50", "ccle_ic50"])
    ap.add_argument("--k", nargs="+", type=int, default=[5, 10, 15, 20])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument("--n-iter", type=int, default=None,
                    help="BayesianID n_iter (default: the library's)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="the JSON store")
    ap.add_argument("--merge", nargs="+", default=[],
                    help="add the records of these JSON files to --out, then print the table")
    ap.add_argument("--table", action="store_true", help="only print the stored table")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.merge:
        store = load_store(out)
        for f in args.merge:
            store.update(load_store(Path(f)))
        save_store(out, store)
    elif not args.table:
        run(args.datasets, args.k, args.seeds, args.methods, args.n_iter, args.data, out,
            log=lambda s: print(s, flush=True))
    store = load_store(out)
    print(table(store), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
