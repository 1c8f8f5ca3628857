"""Reproduce the experiments of Lu (2022) with dask_bid and write ``docs/results.md``.

For every dataset present in the data directory (CCLE EC50, CCLE IC50, MovieLens 100K, and
CTRP EC50 when its matrix exists), with the loaders' default preprocessing (the paper's:
global standardisation of the observed entries, missing entries filled with 0, every column
copied twice), this script fits, at the paper's ranks K:

* ``BayesianID`` with its defaults (GBT, the exact collapsed sampler: the headline), GBTN
  with its defaults, GBT with the plain sampler (the paper's Algorithm 1), GBT with the
  least-squares search (``sampler="search"``, an optimisation, the previous default) and
  GBT aggressive with ``dask_bid.PAPER_SETTINGS`` (the paper's exact Algorithm 2, search
  and summary), one fit per seed;
* ``RandomizedID(method="randomized")`` (Liberty et al. 2007), one fit per seed;
* ``RandomizedID(method="cpqr")`` (deterministic pivoted QR), once.

Every fit appends one record (MSE over all entries, MSE over observed entries, max |W|,
run time, selected columns, ...) to a JSON file, written after each fit so that an
interrupted run loses nothing; a second invocation skips the fits already recorded. Then
the script writes the report (Markdown) and the three panels of the paper's Figure 4 as PNG
files, from the JSON alone (``--report-only`` redoes just that).

Usage::

    python examples/reproduce_paper.py --data ../shared/data            # the full grid
    python examples/reproduce_paper.py --data ../shared/data --quick    # a smoke run
    python examples/reproduce_paper.py --data ../shared/data --report-only

The full grid on a 2-core machine takes over an hour, nearly all of it MovieLens; use
``--variant-seeds`` to run the non-headline variants there with fewer seeds and
``--no-mask`` / ``--mask-k`` to skip or reduce the masked-likelihood fits.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import platform
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

from dask_bid import PAPER_SETTINGS, BayesianID, ConvergenceWarning, RandomizedID  # noqa: E402
from dask_bid.datasets import (  # noqa: E402
    DATASETS,
    PAPER_K_VALUES,
    PAPER_SPECS,
    PAPER_TABLE1,
    available_datasets,
    load_dataset,
)

HEADLINE = "gbt_collapsed"
PAPER_VARIANT = "gbt_paper"

#: name -> (BayesianID keyword arguments, label in the report)
BID_VARIANTS: dict[str, tuple[dict, str]] = {
    "gbt_collapsed": ({"model": "gbt"}, "GBT, defaults (collapsed)"),
    "gbtn_collapsed": ({"model": "gbtn"}, "GBTN, defaults (collapsed)"),
    "gbt_plain": ({"model": "gbt", "sampler": "plain"}, "GBT plain"),
    "gbt_search": ({"model": "gbt", "sampler": "search"},
                   "GBT search (least-squares optimisation, the previous default)"),
    PAPER_VARIANT: ({"model": "gbt", **PAPER_SETTINGS}, "GBT aggressive, PAPER_SETTINGS"),
}
#: what each variant's chain targets (said in the report)
VARIANT_TARGETS = {
    "gbt_collapsed": "the posterior p(J, W, sigma^2 | A) of the GBT model (exact: pivot "
                     "swaps, the other rows of W following the swapped column; the swapped "
                     "row of W integrated out, multiple-try Metropolis; an annealed swap "
                     "every `anneal_every` iterations; a tempered warm-up within the "
                     "burn-in, discarded)",
    "gbtn_collapsed": "the posterior of the GBTN model (exact, the same moves, the slot's "
                      "mu and tau conditioned on)",
    "gbt_plain": "the posterior of the GBT model (exact, the paper's Algorithm 1; the "
                 "incoming row of W is a prior draw, so swaps are rarely accepted)",
    "gbt_search": "no distribution over bases: an optimisation (Algorithm 2 comparing bases "
                  "by the SSE of their clipped least-squares W; at fixed sigma^2 reversible "
                  "for exp(-S(J) / 2 sigma^2), a profile likelihood, not p(J | A))",
    PAPER_VARIANT: "no known stationary distribution (the paper's Algorithm 2: Barker's rule "
                   "on the SSE of two independent W draws is not a Metropolis-Hastings ratio)",
}
#: the masked likelihood; run on MovieLens only, when the library accepts it
MASK_VARIANT = "gbt_collapsed_mask"
MASK_KW = {"model": "gbt", "missing": "mask"}

BASELINES = {"rid": "RandomizedID (randomized)", "cpqr": "pivoted-QR ID (cpqr)"}

DATASET_LABELS = {
    "ccle_ec50": "CCLE EC50",
    "ccle_ic50": "CCLE IC50",
    "ctrp_ec50": "CTRP EC50",
    "movielens_100k": "MovieLens 100K",
}

#: Extra ranks for the error-against-K figure where fits are cheap (CCLE: 48 columns).
K_GRID = {"ccle_ec50": tuple(range(2, 23)), "ccle_ic50": tuple(range(2, 23))}

#: The sampler settings of ``--quick`` (a smoke run, not a reproduction).
QUICK_ITER = {"n_iter": 40, "burn_in": 10, "thin": 2, "refine_sweeps": 5}

#: Traces are stored every iteration up to here, then every TRACE_STRIDE iterations.
TRACE_DENSE, TRACE_STRIDE = 100, 5
ACF_MAX_LAG = 20
ACF_MIN_STRETCH = 8  # fixed-basis stretches shorter than this are left out of the figure
SIG = 12  # significant digits kept in the JSON (enough to tell near-ties apart)


# ----------------------------------------------------------------------------- small helpers

def _r(x, sig=SIG):
    """Round to ``sig`` significant digits for the JSON (None and NaN pass through)."""
    if x is None:
        return None
    x = float(x)
    if not math.isfinite(x) or x == 0.0:
        return x if math.isfinite(x) else None
    return float(f"{x:.{sig}g}")


def _key(dataset, K, method, seed):
    return f"{dataset}|K={K}|{method}|seed={seed}"


def _errors(A, mask, J, W):
    """(MSE over all entries, MSE over observed entries) of A ~ A[:, J] W."""
    R = A - A[:, J] @ W
    R2 = R * R
    return float(R2.mean()), float(R2[mask].sum() / mask.sum())


def autocorrelation(x, max_lag):
    """r_0..r_max_lag of a 1-D series (NaN beyond len(x) - 2 or if x is constant)."""
    x = np.asarray(x, dtype=np.float64) - np.mean(x)
    out = np.full(max_lag + 1, np.nan)
    denom = float(x @ x)
    if not denom > 1e-300:
        return out
    for lag in range(min(max_lag, x.size - 2) + 1):
        out[lag] = float(x[: x.size - lag] @ x[lag:]) / denom
    return out


def w_draw_acf(draws_w, max_lag=ACF_MAX_LAG):
    """Mean autocorrelation of the traced W draws over the longest fixed-basis stretch.

    ``draws_w["values"]`` is NaN for retained draws whose basis differed from the reported
    one, so only the longest run of consecutive draws with the reported basis (chain 0) is
    a Markov chain of W for that basis. Entries that are constant there (the identity rows
    of the selected columns) are left out.

    Returns
    -------
    acf : ndarray (max_lag + 1,)
        NaN at lags the stretch is too short for.
    length : int
        Number of draws in the stretch.
    n_series : int
        Number of W entries averaged.
    """
    vals = np.asarray(draws_w["values"])[0]
    valid = ~np.isnan(vals).any(axis=(1, 2))
    m = np.concatenate(([0], valid.astype(np.int8), [0]))
    edges = np.flatnonzero(np.diff(m))
    starts, stops = edges[::2], edges[1::2]
    if starts.size == 0:
        return np.full(max_lag + 1, np.nan), 0, 0
    i = int(np.argmax(stops - starts))
    s, e = int(starts[i]), int(stops[i])
    series = vals[s:e].reshape(e - s, -1)
    rows = [autocorrelation(series[:, j], max_lag) for j in range(series.shape[1])]
    rows = np.array([r for r in rows if not np.isnan(r[0])]).reshape(-1, max_lag + 1)
    acf = np.full(max_lag + 1, np.nan)
    # a lag is NaN in every row or in none (all rows have the same length)
    ok = ~np.isnan(rows).any(axis=0)
    if rows.shape[0]:
        acf[ok] = rows[:, ok].mean(axis=0)
    return acf, e - s, rows.shape[0]


def copy_period(A):
    """N / 2 when the second half of A's columns copies the first (the paper's
    preprocessing), else None."""
    n0 = A.shape[1] // 2
    if A.shape[1] == 2 * n0 and np.array_equal(A[:, :n0], A[:, n0:]):
        return n0
    return None


def basis_moves(draws_columns, n0=None):
    """How often the basis changed between consecutive retained draws of chain 0.

    Returns (changes, changes with a column and its copy counted as the same column,
    transitions). With copied columns, swapping a column for its own copy changes J but
    not the model: only the folded count says how often the chain reached another basis.
    """
    D = np.sort(np.asarray(draws_columns)[0], axis=1)
    if D.shape[0] < 2:
        return 0, 0, 0
    raw = int(np.any(D[1:] != D[:-1], axis=1).sum())
    if n0 is None:
        return raw, raw, int(D.shape[0] - 1)
    F = np.sort(D % n0, axis=1)
    return raw, int(np.any(F[1:] != F[:-1], axis=1).sum()), int(D.shape[0] - 1)


def _thin_trace(x):
    x = np.asarray(x, dtype=np.float64)
    idx = np.r_[np.arange(min(TRACE_DENSE, x.size)), np.arange(TRACE_DENSE, x.size, TRACE_STRIDE)]
    return [int(i) for i in idx], [_r(v, 5) for v in x[idx]]


# ----------------------------------------------------------------------------- the library

def library_version():
    """What identifies the dask_bid code that runs the fits.

    ``fingerprint`` hashes the source of the imported ``dask_bid`` package, so that results
    of a changed sampler are never mixed silently with older ones; ``commit`` and ``dirty``
    locate it in git when the package is a checkout; ``defaults`` are BayesianID's.
    """
    import hashlib
    import subprocess

    import dask_bid

    root = Path(dask_bid.__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    info = {"fingerprint": h.hexdigest()[:12], "commit": None, "dirty": None}
    try:
        git = ["git", "-C", str(root.parent)]
        info["commit"] = subprocess.run([*git, "rev-parse", "--short", "HEAD"], check=True,
                                        capture_output=True, text=True).stdout.strip()
        info["dirty"] = bool(subprocess.run([*git, "status", "--porcelain", "--", str(root)],
                                            check=True, capture_output=True,
                                            text=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        pass
    params = BayesianID(1).get_params()
    params.pop("n_components")
    info["defaults"] = {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}
    # the same source and seed give the same chain on one platform, but not across
    # numpy / BLAS / numba versions (a different rounding can send a chain to another
    # mode: CCLE IC50 K = 20 seed 0 gave MSE 0.02107 with the commit of version
    # a16d80275d7a on one machine in 2026-11 and 0.02419 with the same commit on another)
    import numba
    import scipy

    info["platform"] = {"python": platform.python_version(), "machine": platform.machine(),
                        "numpy": np.__version__, "scipy": scipy.__version__,
                        "numba": numba.__version__}
    return info


# ----------------------------------------------------------------------------- the store

class Store:
    """The raw results: a JSON file rewritten atomically after every fit."""

    def __init__(self, path: Path, traces_path: Path, config: dict, library: dict):
        self.path, self.traces_path = path, traces_path
        self.fingerprint = library["fingerprint"]
        self.data = {"meta": {}, "runs": {}}
        self.traces = {}
        if path.exists():
            self.data = json.loads(path.read_text())
            old = self.data.get("meta", {}).get("config")
            # seeds can grow between runs (records carry their seed); quick settings cannot mix
            if old is not None and old.get("quick") != config["quick"]:
                raise SystemExit(
                    f"{path} holds results made with quick={old.get('quick')}; pass another "
                    "--out or delete it to start again.")
        if traces_path.exists():
            self.traces = json.loads(traces_path.read_text())
        self.data["meta"].update(config=config, python=platform.python_version(),
                                 machine=f"{platform.machine()}, {os.cpu_count()} cores")
        libs = self.data["meta"].setdefault("libraries", {})
        # a copy of the same source outside git keeps the commit recorded earlier
        known = libs.get(self.fingerprint, {})
        libs[self.fingerprint] = {**library, **{k: v for k, v in known.items()
                                                if library.get(k) is None}}

    def has(self, key, stale_ok=False):
        """Whether ``key`` was fitted, by this library version unless ``stale_ok``."""
        rec = self.data["runs"].get(key)
        return rec is not None and (stale_ok or rec.get("library") == self.fingerprint)

    def add(self, key, record, trace=None):
        record["library"] = self.fingerprint
        self.data["runs"][key] = record
        if trace is not None:
            self.traces[key] = trace
            _write_json(self.traces_path, self.traces, indent=None)
        _write_json(self.path, self.data, indent=1)

    def runs(self):
        return self.data["runs"]

    def merge(self, path: Path):
        """Copy the records (and traces) of another runner output into this one; a
        record of the same fit is replaced. Returns the number of records copied."""
        other = json.loads(path.read_text())
        for fp, info in other.get("meta", {}).get("libraries", {}).items():
            self.data["meta"].setdefault("libraries", {}).setdefault(fp, info)
        self.data["runs"].update(other["runs"])
        tpath = path.with_name(path.stem + "_traces.json")
        if tpath.exists():
            self.traces.update(json.loads(tpath.read_text()))
            _write_json(self.traces_path, self.traces, indent=None)
        _write_json(self.path, self.data, indent=1)
        return len(other["runs"])


def _write_json(path: Path, obj, indent):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=indent, separators=(",", ":") if indent is None else None)
        f.write("\n")
    # mkstemp makes the file private (0600); a results file is read as any other
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- the fits

def fit_one(ds, K, method, seed, bid_extra):
    """One fit; returns (record, trace or None)."""
    A, mask = ds.data, ds.mask
    rec = {"dataset": ds.name, "K": int(K), "method": method, "seed": seed}
    trace = None
    t0 = time.perf_counter()
    if method in BASELINES:
        est = RandomizedID(K, method="randomized" if method == "rid" else "cpqr",
                           random_state=seed if method == "rid" else None).fit(A)
        elapsed = time.perf_counter() - t0
    else:
        kw = dict(MASK_KW) if method == MASK_VARIANT else dict(BID_VARIANTS[method][0])
        X = np.where(mask, A, np.nan) if kw.get("missing") == "mask" else A
        # quick settings give way to the variant's own (PAPER_SETTINGS' refine_sweeps=0)
        est = BayesianID(K, random_state=seed, **{**bid_extra, **kw}).fit(X)
        elapsed = time.perf_counter() - t0
        tr = est.trace_
        rec["accept_rate"] = _r(float(np.mean(tr["accepted"])))
        rec["sigma2"] = _r(est.sigma2_)
        if est.result_.draws_w is not None:
            acf, length, n_series = w_draw_acf(est.result_.draws_w)
            rec["acf_w"] = [_r(v, 4) if np.isfinite(v) else None for v in acf]
            rec["acf_run_length"] = int(length)
            rec["acf_n_series"] = int(n_series)
        if getattr(est.result_, "draws_columns", None) is not None:
            moves = basis_moves(est.result_.draws_columns, copy_period(A))
            rec["basis_moves"], rec["basis_moves_folded"], rec["n_transitions"] = moves
        it, mse = _thin_trace(tr["mse"][0])
        trace = {"iter": it, "mse": mse}
    J = np.asarray(est.columns_, dtype=np.int64)
    W = np.asarray(est.components_, dtype=np.float64)
    mse_all, mse_obs = _errors(A, mask, J, W)
    if hasattr(os, "getloadavg"):  # how busy the shared machine was (run times depend on it)
        rec["load_avg"] = _r(os.getloadavg()[0], 3)
    rec.update(mse=_r(mse_all), mse_observed=_r(mse_obs), mse_reported=_r(est.mse_),
               max_abs_w=float(np.abs(W).max()), time_s=_r(elapsed, 4),
               columns=[int(j) for j in J], n_features=int(A.shape[1]))
    return rec, trace


def plan(names, seeds, variant_seeds, quick, mask_ok, mask_k=None, grid_seeds=None):
    """The fits, in the order they should run (cheap and headline first).

    The extra ranks of the error-against-K figure (``K_GRID``) come last, with
    ``grid_seeds`` seeds (default ``seeds``): they feed only that figure.
    """
    grid_seeds = seeds if grid_seeds is None else grid_seeds
    big = [n for n in names if n in ("movielens_100k", "ctrp_ec50")]
    small = [n for n in names if n not in big]
    tasks = []

    def ks(name):
        k = PAPER_K_VALUES[name]
        return k[:1] if quick else k

    def headline_and_baselines(name, k_values, n_seeds=seeds):
        for K in k_values:
            tasks.append((name, K, "cpqr", None))
        for seed in range(n_seeds):
            for K in k_values:
                tasks.append((name, K, "rid", seed))
                tasks.append((name, K, HEADLINE, seed))

    for name in small:
        headline_and_baselines(name, ks(name))
        for seed in range(seeds):
            for K in ks(name):
                for v in BID_VARIANTS:
                    if v != HEADLINE:
                        tasks.append((name, K, v, seed))
    for name in big:
        headline_and_baselines(name, ks(name))
    # seed-major, so that a partial run still covers every cell
    for seed in range(variant_seeds):
        for name in big:
            for K in ks(name):
                for v in BID_VARIANTS:
                    if v != HEADLINE:
                        tasks.append((name, K, v, seed))
                if (mask_ok and name == "movielens_100k"
                        and (mask_k is None or K in mask_k)):
                    tasks.append((name, K, MASK_VARIANT, seed))
    if not quick:
        for name in small:
            extra = [K for K in K_GRID.get(name, ()) if K not in ks(name)]
            headline_and_baselines(name, extra, grid_seeds)
    return tasks


def exhaustive_best(ds, K, batch=20000):
    """The best K-column basis of ``ds.data`` by exhaustive search, W by least squares.

    A lower bound on the MSE of any K-column ID, bounded W or not (bounding W can only
    raise the error for a given basis). Column copies are folded: the search runs over the
    distinct columns (``C(N / 2, K)`` bases) and the residual counts twice.

    Returns
    -------
    mse : float
    columns : list of int
        Indices into the distinct columns.
    """
    from itertools import combinations

    A = ds.data
    n0 = A.shape[1] // 2
    A0 = A[:, :n0]
    G = A0.T @ A0
    tr = float(np.trace(G))
    best, best_cols = math.inf, None
    it = combinations(range(n0), K)
    while True:
        c = np.array([x for _, x in zip(range(batch), it, strict=False)], dtype=np.int64)
        if c.size == 0:
            break
        Gss = G[c[:, :, None], c[:, None, :]]
        Gsa = G[c]
        sse = tr - np.einsum("bkn,bkn->b", Gsa, np.linalg.solve(Gss, Gsa))
        i = int(np.argmin(sse))
        if sse[i] < best:
            best, best_cols = float(sse[i]), c[i].tolist()
    return 2.0 * best / A.size, best_cols


def exhaustive_feasible(ds, K, max_bases=3_000_000):
    """Copied columns (the paper's preprocessing) and few enough bases to enumerate."""
    A = ds.data
    n0 = A.shape[1] // 2
    return (A.shape[1] == 2 * n0 and np.array_equal(A[:, :n0], A[:, n0:])
            and math.comb(n0, K) <= max_bases)


def spot_check(store, data_dir, library, seeds=(0, 1)):
    """Refit, with the running library, the CCLE headline fits that an older one made.

    Stores, per older version, how many refits gave the same basis and the largest
    relative MSE difference, so that the report can say whether the numbers still hold.
    """
    fp = library["fingerprint"]
    old = [r for r in store.runs().values()
           if r.get("library") != fp and r["method"] == HEADLINE and r["seed"] in seeds
           and r["dataset"] in ("ccle_ec50", "ccle_ic50")]
    if not old:
        return
    out = {}
    data = {}
    for r in old:
        if r["dataset"] not in data:
            data[r["dataset"]] = load_dataset(r["dataset"], data_dir)
        rec, _ = fit_one(data[r["dataset"]], r["K"], HEADLINE, r["seed"], {})
        d = out.setdefault(r.get("library"), {"n": 0, "same_columns": 0, "max_rel_diff": 0.0})
        d["n"] += 1
        d["same_columns"] += sorted(rec["columns"]) == sorted(r["columns"])
        d["max_rel_diff"] = max(d["max_rel_diff"], abs(rec["mse"] - r["mse"]) / r["mse"])
    store.data["meta"].setdefault("spot_checks", {})[fp] = out
    _write_json(store.path, store.data, indent=1)
    print(f"spot check with {fp}: {out}", flush=True)


def mask_mode_available():
    """Whether ``BayesianID(K, missing="mask")`` fits a small matrix with NaN."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((12, 6))
    X[0, 0] = np.nan
    try:
        with warnings.catch_warnings():
            # a probe of 3 draws: its convergence is not what is asked
            warnings.simplefilter("ignore", ConvergenceWarning)
            BayesianID(2, missing="mask", n_iter=4, burn_in=1, thin=1, refine_sweeps=1,
                       random_state=0).fit(X)
    except Exception as exc:  # what it raises is the library's business; report why
        return False, f"{type(exc).__name__}: {exc}"
    return True, ""


# ----------------------------------------------------------------------------- aggregation

def _cells(runs):
    """{(dataset, K): {method: [record, ...]}}"""
    out = {}
    for rec in runs.values():
        out.setdefault((rec["dataset"], rec["K"]), {}).setdefault(rec["method"], []).append(rec)
    return out


def _stat(recs, field):
    v = np.array([r[field] for r in recs if r.get(field) is not None], dtype=float)
    if v.size == 0:
        return math.nan, math.nan, 0
    return float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else math.nan, v.size


def _fmt(x, sig=5):
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.{sig}g}"


def _pm(recs, field, sig=5):
    m, s, n = _stat(recs, field)
    if n == 0:
        return "-"
    if n == 1:
        return f"{_fmt(m, sig)} (1 seed)"
    return f"{_fmt(m, sig)} ± {_fmt(s, 2)}"


def _seed_range(cells, dataset, method):
    """Seeds present for ``method`` over the dataset's Table-1 cells, as "n" or "a-b"."""
    n = [len(cells[c].get(method, [])) for c in table_cells(cells) if c[0] == dataset]
    if not n:
        return "0"
    return str(min(n)) if min(n) == max(n) else f"{min(n)}-{max(n)}"


def _commands(cells, cfg):
    """The invocation that produces these results (a rerun resumes the same JSON)."""
    if cfg["quick"]:
        return ["python examples/reproduce_paper.py --data ../shared/data --quick"]
    ml = [len(cells[c].get("gbt_plain", [])) for c in table_cells(cells)
          if c[0] in ("movielens_100k", "ctrp_ec50")]
    # a variant missing in some MovieLens cells was stopped for time, not run with 0 seeds
    nv = (min(ml) or max(ml)) if ml else 0
    extra = f" --variant-seeds {nv}" if ml and nv < cfg["seeds"] else ""
    grid = [len(cells[(d, K)].get(HEADLINE, [])) for d, K in cells
            if K in K_GRID.get(d, ()) and K not in PAPER_K_VALUES[d]]
    if grid and min(grid) < cfg["seeds"]:
        extra += f" --grid-seeds {min(grid)}"
    mask_k = sorted(K for (d, K), c in cells.items() if c.get(MASK_VARIANT))
    if not mask_k:
        extra += " --no-mask"
    elif mask_k != [20, 100, 150]:
        extra += " --mask-k " + " ".join(map(str, mask_k))
    return [f"python examples/reproduce_paper.py --data ../shared/data --seeds "
            f"{cfg['seeds']}{extra}"]


def _order(names):
    return [n for n in DATASETS if n in names]


def table_cells(cells):
    """The (dataset, K) cells of the paper's Table 1 that have results, in order."""
    out = []
    for name in DATASETS:
        for K in PAPER_K_VALUES[name]:
            if (name, K) in cells and cells[(name, K)].get(HEADLINE):
                out.append((name, K))
    return out


# ----------------------------------------------------------------------------- the figures

def make_figures(store, img_dir: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = _cells(store.runs())
    names = _order({d for d, _ in cells})
    img_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if not names:
        return written
    width = 4.2 * len(names)

    # --- convergence: MSE of the current state per iteration, mean over seeds
    fig, axes = plt.subplots(1, len(names), figsize=(width, 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for i, K in enumerate(PAPER_K_VALUES[name]):
            for method, ls in ((HEADLINE, "-"), (PAPER_VARIANT, "--")):
                tr = [store.traces[_key(name, K, method, r["seed"])]
                      for r in cells.get((name, K), {}).get(method, [])
                      if _key(name, K, method, r["seed"]) in store.traces]
                if not tr:
                    continue
                it = np.array(tr[0]["iter"])
                y = np.nanmean(np.array([t["mse"] for t in tr], dtype=float), axis=0)
                ax.plot(it + 1, y, ls=ls, color=f"C{i}", lw=1.3,
                        label=f"K={K}" if ls == "-" else None)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(DATASET_LABELS[name])
        ax.set_xlabel("iteration")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # a dataset without traces has no lines
            ax.legend(fontsize="x-small", loc="upper right", ncol=2)
    axes[0][0].set_ylabel("MSE (all entries)")
    fig.suptitle("Convergence, mean over seeds (solid: GBT defaults, collapsed; "
                 "dashed: GBT aggressive, PAPER_SETTINGS)")
    fig.tight_layout()
    p = img_dir / "fig4_convergence.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)

    # --- autocorrelation of W draws (reported basis), pooled over seeds
    fig, axes = plt.subplots(1, len(names), figsize=(width, 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        for i, K in enumerate(PAPER_K_VALUES[name]):
            for method, ls in ((HEADLINE, "-"), ("gbt_plain", ":")):
                recs = [r for r in cells.get((name, K), {}).get(method, [])
                        if r.get("acf_w") is not None
                        and r.get("acf_run_length", 0) >= ACF_MIN_STRETCH]
                if not recs:
                    continue
                a = np.array([[np.nan if v is None else v for v in r["acf_w"]] for r in recs])
                for row, r in zip(a, recs, strict=True):
                    # beyond half the stretch an autocorrelation estimate is mostly noise
                    row[r["acf_run_length"] // 2 + 1:] = np.nan
                ok = np.isfinite(a).any(axis=0)
                if ok.sum() < 2:
                    continue
                y = np.array([np.mean(col[np.isfinite(col)]) for col in a[:, ok].T])
                lags = np.flatnonzero(ok)
                lens = [r["acf_run_length"] for r in recs]
                ax.plot(lags, y, ls=ls, color=f"C{i}", lw=1.3,
                        label=(f"K={K}: {len(recs)} fits, {min(lens)}-{max(lens)} draws"
                               if ls == "-" else None))
        ax.axhline(0.1, color="C3", ls="--", lw=0.8)
        ax.axhline(0.0, color="0.5", lw=0.6)
        ax.set_title(DATASET_LABELS[name])
        ax.set_xlabel("lag (retained draws, thin = 1)")
        ax.set_ylim(-0.5, 1.05)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small", loc="upper right")
    axes[0][0].set_ylabel("mean autocorrelation of W")
    fig.suptitle("Autocorrelation of W draws with the reported basis (solid: GBT defaults, "
                 "collapsed; dotted: GBT plain; longest fixed-basis stretch)",
                 fontsize="medium")
    fig.tight_layout()
    p = img_dir / "fig4_autocorrelation.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)

    # --- error against K
    fig, axes = plt.subplots(1, len(names), figsize=(width, 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        ks = sorted(K for (d, K) in cells if d == name)
        for method, label, color in ((HEADLINE, "BayesianID (defaults)", "C0"),
                                     ("rid", "RandomizedID", "C1"),
                                     ("cpqr", "pivoted-QR ID", "C2")):
            pts = [(K, *_stat(cells[(name, K)].get(method, []), "mse")[:2]) for K in ks]
            pts = [p for p in pts if math.isfinite(p[1])]
            if not pts:
                continue
            k, m, s = (np.array(v, dtype=float) for v in zip(*pts, strict=True))
            ax.plot(k, m, marker="o", ms=3, color=color, label=label)
            s = np.nan_to_num(s)
            if s.any():
                ax.fill_between(k, m - s, m + s, color=color, alpha=0.2, lw=0)
        ex = store.data.get("exhaustive", {})
        ek = [K for K in ks if f"{name}|K={K}" in ex]
        if ek:
            ax.plot(ek, [ex[f"{name}|K={K}"]["mse"] for K in ek], "k*", ms=7,
                    label="best possible (exhaustive)")
        pk = [K for K in PAPER_K_VALUES[name] if (name, K) in PAPER_TABLE1]
        ax.plot(pk, [PAPER_TABLE1[(name, K)][0] for K in pk], "k^", ms=6, mfc="none",
                label="paper GBT")
        ax.plot(pk, [PAPER_TABLE1[(name, K)][1] for K in pk], "kx", ms=6, label="paper RID")
        ax.set_yscale("log")
        ax.set_title(DATASET_LABELS[name])
        ax.set_xlabel("K")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="x-small")
    axes[0][0].set_ylabel("MSE (all entries)")
    fig.suptitle("Reconstruction error against K (mean ± sd over seeds)")
    fig.tight_layout()
    p = img_dir / "fig4_error_vs_k.png"
    fig.savefig(p, dpi=110)
    plt.close(fig)
    written.append(p)
    return written


# ----------------------------------------------------------------------------- the report

def _row(*cols):
    return "| " + " | ".join(str(c) for c in cols) + " |"


def _same_basis(r1, r2):
    """Same selected columns up to the column copies (column j and j + N / 2 coincide)."""
    n0 = r1.get("n_features", 2 * PAPER_SPECS[r1["dataset"]].shape[1]) // 2
    return sorted(j % n0 for j in r1["columns"]) == sorted(j % n0 for j in r2["columns"])


def _overlap(r1, r2):
    """Columns shared by two bases, up to the column copies."""
    n0 = r1.get("n_features", 2 * PAPER_SPECS[r1["dataset"]].shape[1]) // 2
    a = {j % n0 for j in r1["columns"]}
    return len(a & {j % n0 for j in r2["columns"]})


def _rel(x):
    """A relative difference in percent, in e-notation when it is tiny."""
    return f"{x:+.2e} %" if abs(x) < 1e-3 else f"{x:+.3f} %"


def _cpqr_is_best(store, cells, name, K):
    """Whether the pivoted-QR basis is the exhaustive search's best basis."""
    e = store.data.get("exhaustive", {}).get(f"{name}|K={K}")
    cp = cells[(name, K)].get("cpqr", [None])[0]
    return e is not None and cp is not None and _same_basis(
        cp, {"dataset": name, "columns": e["columns"],
             "n_features": 2 * PAPER_SPECS[name].shape[1]})


def _n_at_cpqr(cells, name, K):
    """Headline seeds whose basis is the pivoted-QR basis."""
    c = cells[(name, K)]
    return sum(_same_basis(r, c["cpqr"][0]) for r in c[HEADLINE])


#: issue 10 item 7: cells at least 1 % below the pivoted-QR ID (of 11)
TARGET_1PCT = 8

#: ours "at" the pivoted-QR ID: equal up to the rounding of two solvers of the same
#: least-squares problem (normal equations vs QR) on the same basis
RTOL_EQUAL = 1e-12


def _tie(a, b, sig=5):
    """Equal when printed with ``sig`` significant digits."""
    return math.isfinite(a) and math.isfinite(b) and _fmt(a, sig) == _fmt(b, sig)


def same_numbers(cells, tc, a, b):
    """Compare methods ``a`` and ``b`` over the (cell, seed) pairs both have.

    Returns None if there are none, else a dict of counts: ``n`` pairs, ``mse`` with
    identical MSE, ``basis`` with the same reported columns, ``accept`` with the same
    acceptance rate, ``sigma2`` with the same sigma^2 estimate.
    """
    out = dict(n=0, mse=0, basis=0, accept=0, sigma2=0)
    for c in tc:
        rb = {r["seed"]: r for r in cells[c].get(b, [])}
        for r in cells[c].get(a, []):
            o = rb.get(r["seed"])
            if o is None:
                continue
            out["n"] += 1
            out["mse"] += r["mse"] == o["mse"]
            out["basis"] += _same_basis(r, o)
            out["accept"] += r.get("accept_rate") == o.get("accept_rate")
            out["sigma2"] += r.get("sigma2") == o.get("sigma2")
    return out if out["n"] else None


def check_targets(cells):
    """Per Table-1 cell: the issue's three targets. Returns (rows, summary dict).

    Ours is at or below CPQR when ``ours <= CPQR * (1 + RTOL_EQUAL)``; ``tie`` flags
    cells where the two agree to 5 significant digits, so that the report can call them
    ties whichever side they fall.
    """
    rows = []
    summ = dict(n=0, paper=0, cpqr=0, cpqr_strict=0, ties=0, cpqr1=0, w=0)
    for name, K in table_cells(cells):
        c = cells[(name, K)]
        m, _, nseeds = _stat(c[HEADLINE], "mse")
        paper = PAPER_TABLE1[(name, K)][0]
        cp = c.get("cpqr", [{}])[0].get("mse", math.nan)
        wmax = max(r["max_abs_w"] for r in c[HEADLINE])
        rel = (m - cp) / cp * 100 if math.isfinite(cp) else math.nan
        tie = _tie(m, cp)
        row = dict(name=name, K=K, seeds=nseeds, mse=m, paper=paper, ok_paper=m <= paper,
                   cpqr=cp, rel=rel,
                   ok_cpqr=m <= cp * (1 + RTOL_EQUAL), tie=tie, ok_1pct=rel <= -1.0,
                   wmax=wmax, ok_w=wmax <= 1.0)
        summ["n"] += 1
        summ["paper"] += row["ok_paper"]
        summ["cpqr"] += row["ok_cpqr"]
        summ["cpqr_strict"] += row["ok_cpqr"] and not tie
        summ["ties"] += tie
        summ["cpqr1"] += row["ok_1pct"]
        summ["w"] += row["ok_w"]
        rows.append(row)
    return rows, summ


#: the ranks of the held-out evaluation: MovieLens at K = 100 and 150 costs about an hour
#: a fit on a 2-core machine, and with most movies rated fewer than 100 times a masked fit
#: there interpolates (see the MovieLens section)
HELDOUT_K = {"ccle_ec50": (5, 10, 15, 20), "ccle_ic50": (5, 10, 15, 20),
             "movielens_100k": (20,)}


@functools.lru_cache(maxsize=1)
def heldout_module():
    """benchmarks/bench_heldout.py, the held-out evaluation, loaded from the checkout."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_heldout", REPO / "benchmarks" / "bench_heldout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def heldout_path(args) -> Path:
    if args.heldout_out is not None:
        return args.heldout_out
    if args.quick:  # beside the quick run's results (--out's folder when given)
        base = (args.out.parent if args.out is not None
                else Path(tempfile.gettempdir()) / "dask_bid_reproduce_quick")
        return base / "heldout.json"
    return REPO / "benchmarks" / "results" / "heldout.json"


def run_heldout(names, seeds, args, bid_extra):
    """The held-out fits of ``names`` that the store does not hold yet (resumable)."""
    hm = heldout_module()
    out = heldout_path(args)
    n_iter = bid_extra.get("n_iter")
    for name in names:
        ks = [K for K in HELDOUT_K.get(name, ()) if args.k is None or K in args.k]
        if ks:
            hm.run([name], ks, list(range(seeds)), list(hm.METHODS), n_iter, args.data, out,
                   log=lambda m: print("heldout " + m, flush=True))
    return out


def heldout_finding(store: dict, hm) -> str:
    """One sentence per finding, computed from the stored held-out records."""
    mean = {}
    for r in store.values():
        mean.setdefault((r["dataset"], r["method"], r["K"]), []).append(r["rmse_heldout"])
    mean = {k: float(np.mean(v)) for k, v in mean.items()}
    ids = ("bid_mask", "bid_zero", "cpqr")
    cells = sorted({(d, K) for d, m, K in mean if K is not None})
    beat = [(d, K, m) for d, K in cells for m in ids
            if (d, m, K) in mean and (d, "col_mean", None) in mean
            and mean[(d, m, K)] < mean[(d, "col_mean", None)]]
    if beat:
        out = ("An interpolative decomposition predicts held-out entries better than the "
               "per-column mean in " + ", ".join(f"{d} K={K} ({m})" for d, K, m in beat)
               + "; elsewhere the column mean is better.")
    else:
        out = ("No interpolative decomposition here predicts held-out entries better than "
               "each column's mean, in any cell: the structure these matrices share across "
               "columns is small next to each column's own level, and the paper reports "
               "training errors only.")
    worse = [(d, K) for d, K in cells if (d, "bid_mask", K) in mean
             and (d, "global_mean", None) in mean
             and mean[(d, "bid_mask", K)] > mean[(d, "global_mean", None)]]
    if worse:
        out += (" The masked fit is worse than predicting the training mean in "
                + ", ".join(f"{d} K={K}" for d, K in worse) + ": it fits the observed "
                "entries of sparsely observed columns with K coefficients each and overfits "
                "(training RMSE far below held-out).")
    return out


def heldout_section(args) -> list[str]:
    """The report's held-out section: the stored table, or how to make it."""
    out = heldout_path(args)
    cmd = "python benchmarks/bench_heldout.py"
    L = ["## Held-out error (10 % of the observed entries)", ""]
    L.append("Every error above is a training error: the fit is scored on the entries it "
             "was fitted to, and with the paper's column copies it falls towards 0 as K "
             "grows whatever the data. Here 10 % of the observed entries of the original "
             "matrix are held out (fixed seed per dataset and seed, removed from both "
             "copies), the fit sees the rest, and `C W` is scored on the held-out entries "
             "against a per-column-mean baseline. Protocol and discussion: "
             "[heldout.md](heldout.md).")
    L.append("")
    if not out.exists():
        L += [f"Not run in this reproduction: `{cmd}`.", ""]
        return L
    hm = heldout_module()
    store = hm.load_store(out)
    L += [hm.table(store).rstrip(), ""]
    if not store:
        L += ["The store is empty.", ""]
        return L
    L.append(heldout_finding(store, hm))
    L += ["", f"Store: `{out.relative_to(REPO) if out.is_relative_to(REPO) else out}`; "
          f"commands: `{cmd}` (docs/heldout.md gives them; `--table` shows the stored "
          "table), or `python examples/reproduce_paper.py --data ../shared/data --heldout` "
          "after the paper's whole grid (hours on 2 cores).", ""]
    return L


def write_report(store, path: Path, args, img_dir: Path, mask_status):
    cells = _cells(store.runs())
    tc = table_cells(cells)
    names = _order({d for d, _ in cells})
    meta = store.data["meta"]
    cfg = meta["config"]
    img_rel = os.path.relpath(img_dir, path.parent)
    L = []
    add = L.append
    add("# Reproducing Lu (2022): results")
    add("")
    add("Generated by `examples/reproduce_paper.py` from the raw results in "
        "`benchmarks/results/paper_reproduction.json` (one record per fit) and "
        "`paper_reproduction_traces.json` (MSE traces). Do not edit by hand: rerun "
        "`python examples/reproduce_paper.py --data ../shared/data --report-only`.")
    add("")
    rows, summ = check_targets(cells)
    n = summ["n"]
    if n:
        add("## Summary")
        add("")
        add(f"On the {n} (dataset, K) cells of the paper's Table 1 with data here, BayesianID "
            "with its default settings (GBT, the exact collapsed sampler), mean over seeds:")
        add("")
        add(f"- is at or below the paper's GBT MSE in **{summ['paper']} of {n}** cells;")
        add(f"- is at or below our deterministic pivoted-QR ID in **{summ['cpqr']} of {n}** "
            f"cells, and at least 1 % below it in **{summ['cpqr1']} of {n}** (targets: all, "
            f"and ≥ {TARGET_1PCT}); {summ['ties']} cell(s) are ties to 5 significant digits;")
        bw = [r["max_abs_w"] for c in table_cells(cells) for m in BASELINES
              for r in cells[c].get(m, [])]
        add(f"- keeps max |W| ≤ 1 in every seed in **{summ['w']} of {n}** cells; the "
            f"baselines' max |W| over these cells lies between {min(bw):.17g} and "
            f"{max(bw):.17g}." if bw else
            f"- keeps max |W| ≤ 1 in every seed in **{summ['w']} of {n}** cells.")
        opt_ties = [r for r in rows if r["tie"]
                    and _cpqr_is_best(store, cells, r["name"], r["K"])]
        if opt_ties:
            add("")
            add("The ties (" + ", ".join(f"{DATASET_LABELS[r['name']]} K={r['K']}"
                                         for r in opt_ties)
                + ") are the best any ID can do there: the pivoted-QR basis is the best of "
                "all bases (exhaustive search below), "
                + ", ".join(f"{_n_at_cpqr(cells, r['name'], r['K'])} of {r['seeds']}"
                            for r in opt_ties)
                + " seeds report that basis, and with it W is the exact box-constrained "
                "least-squares fit, which equals the pivoted-QR ID's unbounded least squares "
                "because that already satisfies |W| ≤ 1 there (Δ "
                + ", ".join(_rel(r["rel"]) for r in opt_ties) + ").")
        add("")
        hm = [r for c in tc for r in cells[c][HEADLINE] if r.get("n_transitions")]
        if hm:
            nt = sum(r["n_transitions"] for r in hm)
            nr = sum(r["basis_moves"] for r in hm)
            nf = sum(r["basis_moves_folded"] for r in hm)
            ds_ = sorted({DATASET_LABELS[r["dataset"]] for r in hm})
            add(f"Mixing over bases: in the {len(hm)} headline fits that recorded it "
                f"({', '.join(ds_)}), the basis changed in {nr} of the {nt} transitions "
                f"between retained draws, but only {nf} of these changes reached another "
                "basis; the rest swapped a column for its own copy (every column is copied "
                "twice), which changes J, not the model. "
                + ("After burn-in the chain stayed on one basis in every one of these fits: "
                   "where the headline improves on its pivoted-QR start it did so during "
                   "burn-in, and its inclusion probabilities, R-hat and ESS over J describe "
                   "that one basis." if nf == 0 else ""))
            add("")
        add("The details, the gaps and their reasons are in "
            "[the targets section](#the-targets-of-issue-10-cell-by-cell).")
        add("")
    add("## How it was run")
    add("")
    add("```")
    for line in _commands(cells, cfg):
        add(line)
    add("```")
    add("")
    add("The runner is resumable (each fit is recorded as it finishes); these results were "
        "made by several invocations of it, some restricted with `--datasets`/`--methods`, "
        "some in a second process with its own `--out` merged in with `--merge`, some "
        "stopped for time; the line above is the one invocation that would resume them. "
        "Every record carries the dask_bid version that made it (below).")
    add("")
    add(f"- Machine: {meta.get('machine')}, Python {meta.get('python')}; the cores were "
        "shared with other jobs during the runs, so run times are indicative only.")
    add("- Data: the loaders' defaults, i.e. the paper's preprocessing: global standardisation "
        "of the observed entries, missing entries filled with 0, every column copied twice "
        "(CCLE EC50 502 x 48 with the 426 garbage entries kept as observed, as the paper did; "
        "CCLE IC50 504 x 48; MovieLens 100K 943 x 2946).")
    if "ctrp_ec50" not in names:
        add("- CTRP EC50 is not reported: its matrix is not in the shared data (only its label "
            "files are), so the 3 CTRP cells of the paper's tables are left out. The issue's "
            "targets concern the other 11 cells.")
    libs = meta.get("libraries", {})
    used = {}
    for r in store.runs().values():
        used[r.get("library")] = used.get(r.get("library"), 0) + 1
    main_fp = max(used, key=used.get)
    lib = libs.get(main_fp, {})
    defaults = lib.get("defaults", {})
    if cfg["quick"]:
        add(f"- **Quick smoke run** ({QUICK_ITER}): not a reproduction.")
    else:
        d = defaults
        add(f"- Sampler: one chain per fit. Defaults: `sampler={d.get('sampler')!r}`, "
            f"{d.get('n_iter')} iterations, burn-in {d.get('burn_in')}, thinning "
            f"{d.get('thin')}, `n_pivot={d.get('n_pivot', 0)!r}` pivot swaps per iteration, "
            f"`tempered_warmup={d.get('tempered_warmup', 0)!r}` (from temperature "
            f"{d.get('warmup_temperature', '-')}), `n_tries={d.get('n_tries')!r}`, "
            f"`acceptance={d.get('acceptance')!r}`, an annealed swap of "
            f"{d.get('n_anneal')} steps every {d.get('anneal_every')} iterations; "
            f"`PAPER_SETTINGS`: {PAPER_SETTINGS['n_iter']} iterations, burn-in "
            f"{PAPER_SETTINGS['burn_in']}, thinning {PAPER_SETTINGS['thin']}. Priors as in "
            "the paper (a = -1, b = 1, alpha_sigma = 0.1, beta_sigma = 1; GBT mu = 0, "
            "tau = 1; GBTN mu_mu = 0, tau_mu = 0.1, alpha_t = beta_t = 1).")
    add("- `defaults` are BayesianID's defaults; `PAPER_SETTINGS` are the paper's exact search "
        "and summary. Where they differ:")
    add("")
    add(_row("parameter", "default", "PAPER_SETTINGS"))
    add(_row("---", "---", "---"))
    for k, v in PAPER_SETTINGS.items():
        add(_row(f"`{k}`", f"`{defaults.get(k, '?')!r}`", f"`{v!r}`"))
    add("")
    add("- The BayesianID variants, and the distribution each chain targets (which decides "
        "what its acceptance rate, inclusion probabilities, R-hat and ESS mean):")
    add("")
    add(_row("variant", "key", "arguments (besides the defaults)", "the chain targets"))
    add(_row(*["---"] * 4))
    for v, (kw, label) in BID_VARIANTS.items():
        args_ = ", ".join(f"{k}={val!r}" for k, val in kw.items() if defaults.get(k) != val)
        add(_row(label, f"`{v}`", f"`{args_}`" if args_ else "none", VARIANT_TARGETS[v]))
    add("")
    for fp, n in sorted(used.items(), key=lambda kv: -kv[1]):
        info = libs.get(fp, {})
        add(f"- dask_bid version of {n} of the {len(store.runs())} fits: source fingerprint "
            f"`{fp}`, git commit `{info.get('commit')}`"
            + (" with uncommitted changes to `dask_bid/`" if info.get("dirty") else "") + ".")
    if len(used) > 1:
        add("  **The results mix versions of the library**: rerun without `--keep-stale` to "
            "refit the older ones.")
    for fp, checks in meta.get("spot_checks", {}).items():
        info = libs.get(fp, {})
        for old_fp, d in checks.items():
            add(f"- Spot check: {d['n']} CCLE headline fits of version `{old_fp}` refitted with "
                f"version `{fp}` (git `{info.get('commit')}`"
                + (", with uncommitted changes" if info.get("dirty") else "")
                + f"): {d['same_columns']} of {d['n']} gave the same basis, largest relative "
                f"MSE difference {d['max_rel_diff']:.2g}.")
    add("- A fit is reproducible for the same dask_bid source and seed on one platform, not "
        "across numpy, BLAS or numba versions: a different rounding can take a chain to "
        "another mode. On 2026-11-27, on this project's machine as it then was, the code of "
        "that day refitted CCLE IC50 at K = 17 and K = 20 to the stored errors in seeds 1-4, "
        "but seed 0 ended elsewhere: MSE 0.0543 against the stored 0.0511 at K = 17, and "
        "0.0242 (the pivoted-QR ID's) against 0.0211 at K = 20; a checkout of git `9340567` "
        "(version `a16d80275d7a`, which had reproduced these fits bit for bit) gave the "
        "same 0.0242 there. Of the other 82 stored CCLE headline fits of seeds 0 and 1, 81 "
        "were refitted to the stored error (some with a copy of a column for its original) "
        "and one to a lower one (IC50 K = 18 seed 1: 0.0411 against 0.0419); "
        "`benchmarks/spot_check_fits.py`, `benchmarks/results/spot_check_fits.txt`. New fits "
        "record the platform beside the fingerprint (`meta.libraries` in the JSON).")
    add("- Seeds per Table-1 cell (the pivoted-QR ID is deterministic and run once): "
        + "; ".join(f"{BID_VARIANTS[v][1] if v in BID_VARIANTS else BASELINES[v]}: "
                    + ", ".join(f"{DATASET_LABELS[d]} {_seed_range(cells, d, v)}"
                                for d in names)
                    for v in [*BID_VARIANTS, "rid"]) + ".")
    if any(_seed_range(cells, d, v) != str(cfg["seeds"]) for d in names for v in BID_VARIANTS):
        ml_t = [_stat(cells[c].get(HEADLINE, []), "time_s")[0] for c in tc
                if c[0] == "movielens_100k"]
        ml_t = [t for t in ml_t if math.isfinite(t)]
        loads = [r["load_avg"] for r in store.runs().values() if r.get("load_avg")]
        add("  Where a cell has fewer seeds than asked it is for lack of time: the 2 cores "
            "were shared with several other jobs"
            + (f" (1-minute load average {min(loads):.0f}-{max(loads):.0f} at the end of "
               f"the {len(loads)} fits that recorded it)" if loads else "") + " and "
            + (f"a MovieLens fit with the defaults took {min(ml_t) / 60:.0f}"
               + (f"-{max(ml_t) / 60:.0f}" if round(max(ml_t) / 60) > round(min(ml_t) / 60)
                  else "") + " minutes." if ml_t else
               "a MovieLens fit with the defaults took many minutes."))
    add("- MSE = sum of (A - C W)^2 over all M x 2N entries / (M x 2N), missing entries "
        "counted as the 0 they were filled with (the paper's measure); observed MSE = the "
        "same sum over the observed entries / their number. max|W| is that of the reported "
        "W after the paper's post-processing (W[:, J] = I).")
    add("")

    # ---- Table 1
    add("## Table 1: MSE over all entries")
    add("")
    add("Mean ± sd over seeds (sd with ddof = 1). Paper values are as printed (2 decimals).")
    add("")
    add(_row("dataset", "K", "ours: BayesianID defaults", "our RID", "our pivoted-QR ID",
             "paper GBT", "paper RID"))
    add(_row(*["---"] * 7))
    for name, K in tc:
        c = cells[(name, K)]
        pg, pr = PAPER_TABLE1[(name, K)]
        add(_row(DATASET_LABELS[name], K, _pm(c[HEADLINE], "mse"), _pm(c.get("rid", []), "mse"),
                 _fmt(c["cpqr"][0]["mse"]) if c.get("cpqr") else "-", f"{pg:.2f}", f"{pr:.2f}"))
    add("")
    add("## Table 1 (observed entries): MSE over observed entries")
    add("")
    worse = [c for c in tc if _stat(cells[c][HEADLINE], "mse_observed")[0]
             > _stat(cells[c][HEADLINE], "mse")[0]]
    add("The paper prints no per-cell values for this measure; it states that the observed "
        "MSE is worse than the MSE over all entries. For our headline that holds in "
        f"{len(worse)} of {len(tc)} cells"
        + ("" if len(worse) == len(tc) else
           "; it does not in " + ", ".join(f"{DATASET_LABELS[d]} K={K}" for d, K in tc
                                           if (d, K) not in worse)) + ".")
    add("")
    add(_row("dataset", "K", "observed fraction", "ours: BayesianID defaults", "our RID",
             "our pivoted-QR ID"))
    add(_row(*["---"] * 6))
    obs_frac = {"ccle_ec50": 0.632636, "ccle_ic50": 0.964782, "movielens_100k": 0.0717928}
    for name, K in tc:
        c = cells[(name, K)]
        add(_row(DATASET_LABELS[name], K, obs_frac.get(name, "-"),
                 _pm(c[HEADLINE], "mse_observed"), _pm(c.get("rid", []), "mse_observed"),
                 _fmt(c["cpqr"][0]["mse_observed"]) if c.get("cpqr") else "-"))
    add("")

    # ---- all variants
    add("## All BayesianID variants (MSE over all entries)")
    add("")
    variants = [v for v in BID_VARIANTS]
    # every Table-1 cell with any variant, also where the headline is missing
    tcv = [(d, K) for d in DATASETS for K in PAPER_K_VALUES[d]
           if any(cells.get((d, K), {}).get(v) for v in variants)]
    add(_row("dataset", "K", *[BID_VARIANTS[v][1] for v in variants]))
    add(_row(*["---"] * (2 + len(variants))))
    for name, K in tcv:
        c = cells[(name, K)]
        add(_row(DATASET_LABELS[name], K, *[_pm(c.get(v, []), "mse") for v in variants]))
    add("")
    same = same_numbers(cells, tc, HEADLINE, "gbtn_collapsed")
    if same is not None:
        n = same["n"]
        per = {d: same_numbers(cells, [c for c in tc if c[0] == d], HEADLINE,
                               "gbtn_collapsed") for d in names}
        per = {d: v for d, v in per.items() if v is not None}
        differ = [d for d, v in per.items() if v["mse"] < v["n"]]
        add("GBT and GBTN differ only in the prior of W (GBTN puts the GTNSNG hyperprior on "
            "each entry's mu and tau), so if they gave identical numbers the prior would "
            "never matter to the result. "
            f"With the collapsed default, GBT and GBTN give identical MSE in "
            f"**{same['mse']} of the {n}** (cell, seed) pairs compared (same seed, same "
            "cell: " + ", ".join(f"{DATASET_LABELS[d]} {v['mse']} of {v['n']}"
                                 for d, v in per.items())
            + f"); the same reported basis (copies folded) in {same['basis']} of {n}; "
            f"the same swap acceptance rate in {same['accept']} of {n}; the same sigma^2 "
            f"estimate in {same['sigma2']} of {n}. "
            + ("So the prior reaches the W draws (sigma^2 differs) but "
               + ("not the reported numbers" if not differ else
                  "not the reported numbers on "
                  + ", ".join(DATASET_LABELS[d] for d in per if d not in differ))
               + ": the point estimate (the best visited basis by least-squares SSE, W by "
               "box-constrained least squares) does not use the prior, and identical "
               "acceptance rates suggest that the two chains, driven by the same random "
               "numbers, take the same swap decisions (the likelihood of hundreds of rows "
               "outweighing the prior in the slot weights)."
               + (" On " + ", ".join(DATASET_LABELS[d] for d in differ)
                  + " the two chains part and the reported numbers differ: there the prior "
                  "does matter." if differ else "")
               if len(differ) < len(per) else
               f"The prior therefore matters to the result in {n - same['mse']} of the "
               f"{n} pairs."))
        add("")
    add("Swap acceptance rate (share of iterations whose basis changed), mean over seeds. "
        "It is a property of the chain, not a quality: the aggressive and search chains "
        "accept by a rule that is not a Metropolis-Hastings ratio, so their rates are not "
        "comparable with the exact samplers'.")
    add("")
    add(_row("dataset", "K", *[BID_VARIANTS[v][1] for v in variants]))
    add(_row(*["---"] * (2 + len(variants))))
    for name, K in tcv:
        c = cells[(name, K)]
        add(_row(DATASET_LABELS[name], K,
                 *[_fmt(_stat(c.get(v, []), "accept_rate")[0], 3) for v in variants]))
    add("")

    moved = [r for c in tc for v in variants for r in cells[c].get(v, [])
             if r.get("n_transitions")]
    if moved:
        add("Basis changes between consecutive retained draws, as a share of the "
            "transitions: all changes / changes to another basis when a column and its copy "
            "count as the same column (mean over the seeds that recorded it; `-`: not "
            "recorded). Every column of these matrices is copied twice, so swapping a "
            "column for its own copy changes J but not the model; only the second number "
            "says how often the chain reached another basis.")
        add("")
        add(_row("dataset", "K", *[BID_VARIANTS[v][1] for v in variants]))
        add(_row(*["---"] * (2 + len(variants))))

        def _moves(recs):
            recs = [r for r in recs if r.get("n_transitions")]
            if not recs:
                return "-"
            a = np.mean([r["basis_moves"] / r["n_transitions"] for r in recs])
            b = np.mean([r["basis_moves_folded"] / r["n_transitions"] for r in recs])
            return f"{a:.3g} / {b:.3g}" + (f" ({len(recs)} seeds)" if len(recs) > 1 else
                                            " (1 seed)")

        for name, K in tcv:
            c = cells[(name, K)]
            add(_row(DATASET_LABELS[name], K, *[_moves(c.get(v, [])) for v in variants]))
        add("")

    # ---- Table 2
    add("## Table 2: max |W|")
    add("")
    add("Largest |W| over all seeds of each method (ours: over every BayesianID variant and "
        "seed). The paper's Table 2 prints, for its RID, by how much max |W| exceeded 1. "
        "Because every column is copied twice, a least-squares ID can give a copy of a "
        "selected column the coefficient 1, so the baselines sit at 1 up to rounding.")
    add("")
    add(_row("dataset", "K", "ours (headline), max over seeds", "ours (all variants)",
             "our RID (max over seeds)", "our pivoted-QR ID", "paper RID: max|W| - 1"))
    add(_row(*["---"] * 7))
    paper_t2 = {("ccle_ec50", 5): "0.0", ("ccle_ec50", 10): "4.44e-16",
                ("ccle_ec50", 15): "4.44e-16", ("ccle_ic50", 5): "1.99e-2",
                ("ccle_ic50", 10): "4.44e-16", ("ccle_ic50", 15): "6.66e-16",
                ("ctrp_ec50", 20): "4.44e-16", ("ctrp_ec50", 100): "2.69e-2",
                ("ctrp_ec50", 150): "1.99e-15", ("movielens_100k", 20): "2.22e-16",
                ("movielens_100k", 100): "6.66e-16", ("movielens_100k", 150): "8.88e-16"}
    for name, K in tc:
        c = cells[(name, K)]
        allb = [r for v in BID_VARIANTS for r in c.get(v, [])]
        rid = c.get("rid", [])
        add(_row(DATASET_LABELS[name], K,
                 f"{max(r['max_abs_w'] for r in c[HEADLINE]):.17g}",
                 f"{max(r['max_abs_w'] for r in allb):.17g}",
                 f"{max(r['max_abs_w'] for r in rid):.17g}" if rid else "-",
                 f"{c['cpqr'][0]['max_abs_w']:.17g}" if c.get("cpqr") else "-",
                 paper_t2.get((name, K), "not printed")))
    add("")

    # ---- run times
    add("## Run times (seconds per fit, mean over seeds)")
    add("")
    add("Wall-clock, in memory, 2 threads, on the shared 2-core machine (other jobs were "
        "running, so these are upper bounds). BayesianID times include its pivoted-QR start.")
    add("")
    cols = [*BID_VARIANTS, "rid", "cpqr"]
    add(_row("dataset", "K", *[BID_VARIANTS[v][1] if v in BID_VARIANTS else BASELINES[v]
                               for v in cols]))
    add(_row(*["---"] * (2 + len(cols))))
    for name, K in tc:
        c = cells[(name, K)]
        add(_row(DATASET_LABELS[name], K,
                 *[_fmt(_stat(c.get(v, []), "time_s")[0], 3) for v in cols]))
    add("")

    # ---- targets
    add("## The targets of issue 10, cell by cell")
    add("")
    add("Targets of issue 10, item 7 (quality kept with the exact default sampler). "
        "Headline = BayesianID defaults (GBT, collapsed), mean over the seeds shown, printed "
        "with 7 significant digits. Δ vs CPQR = (ours - CPQR) / CPQR. Ours counts as at or "
        f"below the pivoted-QR ID when ours ≤ CPQR x (1 + {RTOL_EQUAL:g}), i.e. equal up "
        "to the rounding of two solvers of the same least-squares problem; a cell where "
        "ours and the pivoted-QR ID agree to 5 significant digits is marked a tie, "
        "whichever side it falls on.")
    add("")
    add(_row("dataset", "K", "seeds", "ours", "paper GBT", "≤ paper", "our CPQR",
             "Δ vs CPQR", "≤ CPQR", "≥ 1 % lower", "max|W| (all seeds)", "≤ 1"))
    add(_row(*["---"] * 12))
    yes = {True: "yes", False: "**no**"}
    for r in rows:
        le = yes[bool(r["ok_cpqr"])] + (" (tie)" if r["tie"] else "")
        add(_row(DATASET_LABELS[r["name"]], r["K"], r["seeds"], _fmt(r["mse"], 7),
                 f"{r['paper']:.2f}", yes[bool(r["ok_paper"])], _fmt(r["cpqr"], 7),
                 _rel(r["rel"]), le, yes[bool(r["ok_1pct"])], f"{r['wmax']:.17g}",
                 yes[bool(r["ok_w"])]))
    add("")
    n = summ["n"]
    add(f"- MSE at or below the paper's GBT value: **{summ['paper']} of {n}** cells "
        f"(target: all {n}).")
    add(f"- MSE at or below our pivoted-QR ID: **{summ['cpqr']} of {n}** cells (target: all "
        f"{n}); of the {n}, {summ['ties']} are ties to 5 significant digits and "
        f"{summ['cpqr_strict']} are below it by more than that. At least 1 % lower: "
        f"**{summ['cpqr1']} of {n}** (target: ≥ {TARGET_1PCT}).")
    add(f"- max |W| ≤ 1 in every seed: **{summ['w']} of {n}** cells (target: all {n}).")
    met = (summ["paper"] == n and summ["cpqr"] == n and summ["cpqr1"] >= min(TARGET_1PCT, n)
           and summ["w"] == n)
    add("")
    if n < 11 and not cfg["quick"]:
        gone = [f"{DATASET_LABELS[d]} K={K}" for d in names for K in PAPER_K_VALUES[d]
                if (d, K) not in tc]
        add(f"**Verdict: incomplete**: only {n} of the 11 cells have headline results"
            + (f"; missing: {', '.join(gone)} (not finished in time on the shared "
               "machine; other variants' fits there, if any, are in the variants table)"
               if gone else "") + ".")
        add("")
    if met:
        add(f"**Verdict: all targets met** on the {n} cells.")
    else:
        add(f"**Verdict: not all targets met** on the {n} cells. Gaps:")
        add("")
        for r in rows:
            lab = f"{DATASET_LABELS[r['name']]} K={r['K']}"
            if not r["ok_paper"]:
                add(f"- {lab}: MSE {_fmt(r['mse'], 7)} is above the paper's GBT "
                    f"{r['paper']:.2f} by {_fmt(r['mse'] - r['paper'], 3)}.")
            if not r["ok_cpqr"]:
                add(f"- {lab}: MSE {_fmt(r['mse'], 7)} is above our pivoted-QR ID "
                    f"{_fmt(r['cpqr'], 7)} by {_fmt(r['mse'] - r['cpqr'], 3)} "
                    f"({_rel(r['rel'])})" + (", a tie to 5 significant digits" if r["tie"]
                                             else "")
                    + ("; the pivoted-QR basis is the best basis there (exhaustive search "
                       "below), so no ID can be below it." if _cpqr_is_best(
                           store, cells, r["name"], r["K"]) else "."))
            if not r["ok_w"]:
                add(f"- {lab}: max|W| = {r['wmax']!r} > 1.")
        if summ["cpqr1"] < min(TARGET_1PCT, n):
            add(f"- Only {summ['cpqr1']} cells are ≥ 1 % below the pivoted-QR ID "
                f"(target {TARGET_1PCT}). Not ≥ 1 % below:")
            ex = store.data.get("exhaustive", {})
            for r in rows:
                if r["ok_1pct"]:
                    continue
                lab = f"{DATASET_LABELS[r['name']]} K={r['K']}"
                c = cells[(r["name"], r["K"])]
                why = f"Δ {_rel(r['rel'])}; {_n_at_cpqr(cells, r['name'], r['K'])} of " \
                      f"{r['seeds']} seeds report the pivoted-QR basis"
                e = ex.get(f"{r['name']}|K={r['K']}")
                if _cpqr_is_best(store, cells, r["name"], r["K"]):
                    why += ", which is the best basis (exhaustive search): no ID is below it"
                elif e is not None:
                    why += (f"; the best basis (exhaustive search) is "
                            f"{_rel((e['mse'] - r['cpqr']) / r['cpqr'] * 100)} from the "
                            "pivoted-QR ID, so the chain did not visit it")
                    srch = _stat(c.get("gbt_search", []), "mse")[0]
                    if math.isfinite(srch):
                        why += (f"; the least-squares search (`gbt_search`) reaches "
                                f"{_fmt(srch, 7)} ({_rel((srch - r['cpqr']) / r['cpqr'] * 100)})")
                add(f"  - {lab}: {why}.")
    short = [r for r in rows if r["seeds"] < cfg["seeds"]]
    if short and not cfg["quick"]:
        add("")
        add(f"**The headline has fewer than {cfg['seeds']} seeds in "
            + ", ".join(f"{DATASET_LABELS[r['name']]} K={r['K']} ({r['seeds']})"
                        for r in short)
            + "**, for lack of time on the shared machine; the verdict there rests on "
            "those seeds only.")
    add("")
    # per-seed detail of the headline, so ties and spread are visible
    add("Headline MSE per seed (all entries, 7 significant digits). `=` marks a seed whose "
        "reported basis is the pivoted-QR ID's basis (a column and its copy counted as the "
        "same column); its MSE then differs from the pivoted-QR ID's only through W "
        "(the default box-constrained least squares against unbounded least squares).")
    add("")
    add(_row("dataset", "K", "our CPQR", "seed 0", "seed 1", "seed 2", "seed 3", "seed 4"))
    add(_row(*["---"] * 8))
    for name, K in tc:
        recs = sorted(cells[(name, K)][HEADLINE], key=lambda r: r["seed"])
        cp = cells[(name, K)].get("cpqr", [None])[0]
        vals = [_fmt(r["mse"], 7) + (" =" if cp and _same_basis(r, cp)
                                      else f" ({_overlap(r, cp)})" if cp else "")
                for r in recs] + ["-"] * (5 - len(recs))
        add(_row(DATASET_LABELS[name], K, _fmt(cp["mse"], 7) if cp else "-", *vals[:5]))
    add("")
    add("In parentheses: how many of the K columns the seed's basis shares with the "
        "pivoted-QR basis (copies counted as the same column).")
    add("")

    ex = store.data.get("exhaustive", {})
    ex_rows = [(d, K) for d, K in tc if f"{d}|K={K}" in ex]
    if ex_rows:
        add("### The best possible basis (CCLE, exhaustive search)")
        add("")
        add("With 24 distinct columns every basis can be tried: for each of the C(24, K) bases "
            "the least-squares W (unbounded) gives the lowest error any ID with that basis "
            "can reach, so the best of them is a lower bound for every method, bounded W or "
            "not. `=` counts the seeds whose reported basis is the best one (copies folded).")
        add("")
        add(_row("dataset", "K", "bases tried", "best possible MSE", "our CPQR",
                 "CPQR basis is the best", "ours (mean)", "ours - best", "seeds at the best"))
        add(_row(*["---"] * 9))
        for d, K in ex_rows:
            e = ex[f"{d}|K={K}"]
            c = cells[(d, K)]
            best_rec = {"dataset": d, "columns": e["columns"],
                        "n_features": 2 * PAPER_SPECS[d].shape[1]}
            cp = c.get("cpqr", [None])[0]
            m = _stat(c[HEADLINE], "mse")[0]
            at = sum(_same_basis(r, best_rec) for r in c[HEADLINE])
            add(_row(DATASET_LABELS[d], K, f"{e['n_bases']:,}", _fmt(e["mse"], 7),
                     _fmt(cp["mse"], 7) if cp else "-",
                     ("yes" if _same_basis(cp, best_rec) else "no") if cp else "-",
                     _fmt(m, 7), f"{m - e['mse']:.3g}", f"{at} of {len(c[HEADLINE])}"))
        add("")
        ties = [r for r in rows if r["tie"] and _cpqr_is_best(store, cells, r["name"], r["K"])]
        if ties:
            add("Where the pivoted-QR basis is the best basis and its least-squares W already "
                "satisfies |W| ≤ 1 (its max|W| is 1, from the identity block), no ID can be "
                "below it: the target \"at or below the pivoted-QR ID\" can then only be met "
                "as a tie, which the default W (`w_estimate='lstsq'`, the exact "
                "box-constrained least squares) reaches to rounding; a W estimate with any "
                "shrinkage (`'map'`, the posterior mode under the GTN(0, 1) prior) would land "
                "a hair above. This is the case in: "
                + ", ".join(f"{DATASET_LABELS[r['name']]} K={r['K']} "
                            f"({_fmt(r['mse'] - r['cpqr'], 3)}, {_rel(r['rel'])})"
                            for r in ties) + ".")
            add("")

    # ---- MovieLens zero vs mask
    add("## MovieLens 100K: missing='zero' vs missing='mask'")
    add("")
    add("`missing='zero'` is the paper's likelihood: the 92.8 % unobserved entries are 0 after "
        "standardisation and count as data. `missing='mask'` leaves them out of the "
        "likelihood (the input has NaN there). Both are scored the same two ways: all entries "
        "with the missing ones taken as 0 (the paper's measure, which rewards predicting 0 "
        "where nothing was observed, so it is not a fair score for the masked model) and "
        "observed entries only (the measure the masked model optimises). Both are training "
        "errors on the entries the fit saw: a much lower observed MSE for the masked model "
        "says how closely it fits the ratings, not how well it would predict held-out ones. "
        "Mean ± sd over seeds; times in seconds per fit.")
    add("")
    add(_row("likelihood", "K", "MSE all entries", "MSE observed entries", "max|W|", "seeds",
             "time (s)"))
    add(_row(*["---"] * 7))
    ml_ks = [K for (d, K) in tc if d == "movielens_100k"]
    for method, label in ((HEADLINE, "missing='zero' (defaults)"),
                          (MASK_VARIANT, "missing='mask' (defaults otherwise)")):
        for K in ml_ks:
            recs = cells[("movielens_100k", K)].get(method, [])
            if not recs:
                add(_row(label, K, "pending", "pending", "-", 0, "-"))
                continue
            add(_row(label, K, _pm(recs, "mse"), _pm(recs, "mse_observed"),
                     f"{max(r['max_abs_w'] for r in recs):.17g}", len(recs),
                     _fmt(_stat(recs, "time_s")[0], 3)))
    done = [K for K in ml_ks if cells[("movielens_100k", K)].get(MASK_VARIANT)]
    add("")
    if not done and mask_status and mask_status.startswith("`BayesianID"):
        add(f"The `missing='mask'` rows are pending: {mask_status}.")
    elif not done:
        add("`missing='mask'` was not run in this reproduction (`--no-mask`), for lack of "
            "time: a masked fit keeps a K x K Gram matrix per column, runs in memory only and "
            "costs several times a zero-filled one on this shared 2-core machine.")
    elif len(done) < len(ml_ks):
        add(f"`missing='mask'` was run at K = {', '.join(map(str, done))} only: it keeps a "
            "K x K Gram matrix per column and its fits cost many times a zero-filled fit on "
            "this shared 2-core machine; the other ranks are pending (`--mask-k 100 150`).")
    if any(K >= 100 for K in done):
        ml = load_dataset("movielens_100k", args.data)
        n_obs = ml.mask[:, :ml.mask.shape[1] // 2].sum(axis=0)
        add("")
        add("At K = 100 and 150 the masked fit reproduces the observed ratings almost "
            f"exactly: most movies have fewer ratings than K (median {np.median(n_obs):g}; "
            f"{np.mean(n_obs < 100):.0%} have fewer than 100, {np.mean(n_obs < 150):.0%} "
            "fewer than 150), so for them K columns give more coefficients than equations. "
            "The observed MSE is then a training error close to 0, and the MSE over all "
            "entries (missing taken as 0) grows, because the masked model never sees "
            "those zeros. A fair comparison of the two likelihoods needs held-out ratings, "
            "which the paper's protocol does not have.")
    add("")
    if ml_ks:
        add("For comparison, the baselines on observed entries (they fit the zero-filled "
            "matrix): " + "; ".join(
                f"K={K}: RID {_pm(cells[('movielens_100k', K)].get('rid', []), 'mse_observed')}"
                f", CPQR {_fmt(cells[('movielens_100k', K)]['cpqr'][0]['mse_observed'])}"
                for K in ml_ks if cells[("movielens_100k", K)].get("cpqr")) + ".")
        add("")

    # ---- held-out error (issue 12.4)
    L.extend(heldout_section(args))

    # ---- figures
    add("## Figure 4")
    add("")
    add(f"![convergence]({img_rel}/fig4_convergence.png)")
    add("")
    add("Convergence: MSE of the chain's current state (its current W draw, not the "
        "reported point estimate, whose MSE is lower) at each iteration, log-log, mean over "
        "seeds. Solid: GBT defaults (collapsed sampler, pivoted-QR start, 1,000 "
        "iterations); dashed: GBT aggressive with PAPER_SETTINGS (random start, as in the "
        "paper's figure, 500 iterations).")
    add("")
    add(f"![autocorrelation]({img_rel}/fig4_autocorrelation.png)")
    add("")
    add("Autocorrelation of the retained W draws (`result_.draws_w`, 10 traced columns) "
        "against the lag in retained draws (thin = 1 with the defaults). Solid: the headline "
        "sampler (collapsed); its draws "
        "are only a fixed-basis chain between swaps, so each fit contributes the longest "
        "stretch of consecutive draws whose basis equals the reported one; fits whose stretch "
        f"is shorter than {ACF_MIN_STRETCH} draws are left out, and each fit counts only up to "
        "half its stretch (number of fits and stretch lengths in the legend). Short stretches "
        "bias the estimate downwards (the stretch mean is subtracted), hence the small "
        "negative values. Dotted: GBT plain, whose basis rarely moves, so most of its 800 "
        "retained draws form one stretch. The W update given the basis is the same Gibbs "
        "sweep in both samplers. Red dashed: 0.1, the paper's threshold. The collapsed "
        "chain's stretches are short (a few to a few tens of draws) mostly because it often "
        "swaps a column for its own copy, which changes J but not the model (see the "
        "basis-change table above); panels or ranks without a line had no stretch of "
        f"{ACF_MIN_STRETCH} draws or more.")
    add("")
    grid_n = [len(cells[(d, K)].get(HEADLINE, [])) for d, K in cells
              if K in K_GRID.get(d, ()) and K not in PAPER_K_VALUES[d]]
    add(f"![error vs K]({img_rel}/fig4_error_vs_k.png)")
    add("")
    add("MSE over all entries against K: BayesianID defaults and RandomizedID (mean ± sd over "
        "seeds), the pivoted-QR ID, the paper's Table 1 values and, on CCLE at the paper's K, "
        "the best possible basis (exhaustive search). CCLE: K = 2..22; MovieLens: the "
        "paper's K values."
        + (f" At the CCLE ranks outside the paper's, {min(grid_n)}"
           + (f"-{max(grid_n)}" if max(grid_n) > min(grid_n) else "")
           + " seed(s) per rank (the figure is all they feed)."
           if grid_n and min(grid_n) < cfg["seeds"] else ""))
    add("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(L))
    return summ


# ----------------------------------------------------------------------------- main

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="the shared data folder (../shared/data)")
    p.add_argument("--seeds", type=int, default=5, help="seeds per cell (default 5)")
    p.add_argument("--variant-seeds", type=int, default=None,
                   help="seeds for the non-headline BayesianID variants on MovieLens/CTRP "
                        "(default: --seeds)")
    p.add_argument("--grid-seeds", type=int, default=None,
                   help="seeds at the extra CCLE ranks of the error-against-K figure "
                        "(K = 2..22 outside the paper's; default: --seeds); run last")
    p.add_argument("--datasets", nargs="+", choices=DATASETS, default=None,
                   help="restrict to these datasets (default: all present)")
    p.add_argument("--methods", nargs="+", default=None,
                   choices=[*BID_VARIANTS, *BASELINES, MASK_VARIANT],
                   help="run only these methods (default: all); e.g. to run the variants "
                        "in a second process with its own --out")
    p.add_argument("--k", type=int, nargs="+", default=None,
                   help="run only these ranks K (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: first K of each dataset, 1 seed, 40 iterations; writes "
                        "under a temporary folder unless --out/--report/--img-dir are given")
    p.add_argument("--out", type=Path, default=None,
                   help="raw results JSON (default benchmarks/results/paper_reproduction.json)")
    p.add_argument("--report", type=Path, default=None, help="Markdown report (docs/results.md)")
    p.add_argument("--img-dir", type=Path, default=None, help="figure folder (docs/img)")
    p.add_argument("--report-only", action="store_true", help="no fits: report and figures")
    p.add_argument("--no-mask", action="store_true", help="skip the missing='mask' fits")
    p.add_argument("--merge", type=Path, nargs="+", default=(),
                   help="first copy the records of these runner outputs (e.g. made by a "
                        "second process with its own --out) into --out, replacing records "
                        "of the same fits")
    p.add_argument("--mask-k", type=int, nargs="+", default=[20, 100, 150],
                   help="MovieLens ranks K fitted with missing='mask' (default: 20 100 150; "
                        "a masked fit costs several times a zero-filled one)")
    p.add_argument("--max-fits", type=int, default=None, help="stop after this many new fits")
    p.add_argument("--no-exhaustive", action="store_true",
                   help="skip the exhaustive search for the best basis on CCLE (a lower "
                        "bound on any ID's error; minutes)")
    p.add_argument("--spot-check", action="store_true",
                   help="refit the CCLE headline fits (seeds 0, 1) made by another dask_bid "
                        "version and record whether they still agree")
    p.add_argument("--heldout", action="store_true",
                   help="also run the held-out evaluation (issue 12.4: 10 %% of the observed "
                        "entries held out; masked fit, zero-filled fit, pivoted-QR ID and "
                        "column mean) of benchmarks/bench_heldout.py for the selected "
                        "datasets and --seeds (CCLE: K = 5, 10, 15, 20; MovieLens: K = 20)")
    p.add_argument("--heldout-out", type=Path, default=None,
                   help="its JSON store (default benchmarks/results/heldout.json; with "
                        "--quick, beside the quick run's results)")
    p.add_argument("--keep-stale", action="store_true",
                   help="keep results made by another version of dask_bid (default: refit "
                        "them, so that every number comes from one version)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.quick:
        base = Path(tempfile.gettempdir()) / "dask_bid_reproduce_quick"
        out = args.out or base / "paper_reproduction.json"
        report = args.report or base / "results.md"
        img_dir = args.img_dir or base / "img"
        seeds = 1 if args.seeds == 5 else args.seeds
    else:
        out = args.out or REPO / "benchmarks" / "results" / "paper_reproduction.json"
        report = args.report or REPO / "docs" / "results.md"
        img_dir = args.img_dir or REPO / "docs" / "img"
        seeds = args.seeds
    variant_seeds = seeds if args.variant_seeds is None else min(args.variant_seeds, seeds)
    traces = out.with_name(out.stem + "_traces.json")
    grid_seeds = seeds if args.grid_seeds is None else min(args.grid_seeds, seeds)
    config = {"quick": bool(args.quick), "seeds": seeds, "variant_seeds": variant_seeds,
              "grid_seeds": grid_seeds}
    library = library_version()
    store = Store(out, traces, config, library)
    for other in args.merge:
        print(f"merged {store.merge(other)} records from {other}", flush=True)
    present = available_datasets(args.data)
    names = [n for n in present if args.datasets is None or n in args.datasets]
    if args.datasets:
        missing = sorted(set(args.datasets) - set(present))
        if missing:
            print(f"not present in {args.data}: {missing}", file=sys.stderr)
    bid_extra = dict(QUICK_ITER) if args.quick else {}
    mask_ok, mask_status = (False, "skipped (--no-mask)") if args.no_mask else \
        mask_mode_available()
    if not mask_ok and not args.no_mask:
        mask_status = f"`BayesianID(K, missing='mask')` failed here ({mask_status})"
    n_new = 0
    if not args.report_only:
        tasks = [t for t in plan(names, seeds, variant_seeds, args.quick, mask_ok,
                                    None if args.quick else set(args.mask_k), grid_seeds)
                 if not store.has(_key(*t), stale_ok=args.keep_stale)
                 and (args.methods is None or t[2] in args.methods)
                 and (args.k is None or t[1] in args.k)]
        print(f"{len(tasks)} fits to run ({len(store.runs())} already in {out})", flush=True)
        loaded = {}
        for i, (name, K, method, seed) in enumerate(tasks):
            if args.max_fits is not None and n_new >= args.max_fits:
                break
            if name not in loaded:
                loaded = {name: load_dataset(name, args.data)}
            rec, trace = fit_one(loaded[name], K, method, seed, bid_extra)
            keep_trace = trace if method in (HEADLINE, PAPER_VARIANT) else None
            store.add(_key(name, K, method, seed), rec, keep_trace)
            n_new += 1
            print(f"[{i + 1}/{len(tasks)}] {name} K={K} {method} seed={seed}: "
                  f"mse={rec['mse']:.6g} obs={rec['mse_observed']:.6g} "
                  f"max|W|={rec['max_abs_w']:.6g} {rec['time_s']:.3g}s", flush=True)
    if args.spot_check and not args.report_only:
        spot_check(store, args.data, library)
    if not args.report_only and not args.quick and not args.no_exhaustive:
        ex = store.data.setdefault("exhaustive", {})
        for name in names:
            if PAPER_SPECS[name].shape[1] > 64:
                continue
            ds = load_dataset(name, args.data)
            for K in PAPER_K_VALUES[name]:
                k = f"{name}|K={K}"
                if k in ex or not exhaustive_feasible(ds, K):
                    continue
                t0 = time.perf_counter()
                mse, cols = exhaustive_best(ds, K)
                ex[k] = {"mse": _r(mse), "columns": cols, "n_bases": math.comb(
                    ds.data.shape[1] // 2, K), "time_s": _r(time.perf_counter() - t0, 4)}
                _write_json(store.path, store.data, indent=1)
                print(f"exhaustive {k}: best mse={mse:.10g} ({ex[k]['time_s']:.3g}s)",
                      flush=True)
    if args.heldout and not args.report_only:
        run_heldout(names, seeds, args, bid_extra)
    summ = None
    if store.runs():
        figs = make_figures(store, img_dir)
        summ = write_report(store, report, args, img_dir, mask_status)
        print(f"wrote {report} and {', '.join(str(f) for f in figs)}")
    return {"new_fits": n_new, "out": out, "report": report, "img_dir": img_dir,
            "summary": summ}


if __name__ == "__main__":
    main()
