"""Smoke tests of the paper-reproduction runner, ``examples/reproduce_paper.py``.

The runner is exercised with ``--quick`` on a tiny synthetic data folder written in the
formats of the shared data README (a CCLE EC50 matrix and a MovieLens ``u.data``), and on
the real CCLE IC50 file when the shared data is present.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from dask_bid.datasets import PAPER_TABLE1

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def runner():
    spec = importlib.util.spec_from_file_location(
        "reproduce_paper", REPO / "examples" / "reproduce_paper.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write_synthetic(root: Path, rng) -> None:
    """CCLE EC50 (40 x 12, 20 % missing) and MovieLens (40 users x 30 items) folders."""
    d = root / "ccle_ec50"
    d.mkdir(parents=True)
    M, N = 40, 12
    R = np.exp(rng.standard_normal((M, 3)) @ rng.standard_normal((3, N)) * 0.5)
    R[rng.random((M, N)) < 0.2] = np.nan
    np.savetxt(d / "ec50.txt", R, delimiter="\t", fmt="%.18e")
    (d / "cell_lines.txt").write_text("".join(f"cl{i}\tCL-{i}\n" for i in range(M)))
    (d / "drugs.txt").write_text("".join(f"drug{j}\tDrug {j}\n" for j in range(N)))

    d = root / "movielens_100k"
    d.mkdir()
    users, items = 40, 30
    rated = rng.random((users, items)) < 0.5
    rated[:, :4] = True  # every user and item keeps >= 3 ratings after the filters
    rated[:4, :] = True
    u, i = np.nonzero(rated)
    ratings = rng.integers(1, 6, size=u.size)
    lines = [f"{a + 1}\t{b + 1}\t{r}\t{880000000 + k}\n"
             for k, (a, b, r) in enumerate(zip(u, i, ratings, strict=True))]
    (d / "u.data").write_text("".join(lines))


def test_quick_run_synthetic(runner, tmp_path):
    rng = np.random.default_rng(20220101)
    data = tmp_path / "data"
    _write_synthetic(data, rng)
    out = tmp_path / "results" / "runs.json"
    report = tmp_path / "results.md"
    img = tmp_path / "img"
    # --keep-stale: the resume below must not depend on dask_bid's source staying unchanged
    # between the three calls (other work may edit it while the test runs)
    args = ["--data", str(data), "--quick", "--out", str(out), "--report", str(report),
            "--img-dir", str(img), "--keep-stale"]

    # an interrupted run keeps what it did: stop after 3 fits, then resume
    first = runner.main([*args, "--max-fits", "3"])
    assert first["new_fits"] == 3
    assert len(json.loads(out.read_text())["runs"]) == 3
    second = runner.main(args)
    mask_ok, _ = runner.mask_mode_available()
    # per dataset: cpqr + rid + 5 BayesianID variants; MovieLens also the masked likelihood
    expected = 2 * 7 + (1 if mask_ok else 0)
    assert second["new_fits"] == expected - 3
    assert runner.main(args)["new_fits"] == 0  # nothing left to do

    stored = json.loads(out.read_text())
    runs = stored["runs"]
    assert len(runs) == expected
    # the platform is recorded beside the source fingerprint: the chains depend on both
    libs = stored["meta"]["libraries"] if "libraries" in stored["meta"] else stored["libraries"]
    (lib,) = libs.values()
    assert lib["platform"]["numpy"] == np.__version__ and lib["platform"]["numba"]
    methods = {rec["method"] for rec in runs.values()}
    assert methods == {*runner.BID_VARIANTS, *runner.BASELINES} | (
        {runner.MASK_VARIANT} if mask_ok else set())
    ds = {"ccle_ec50": runner.load_dataset("ccle_ec50", data),
          "movielens_100k": runner.load_dataset("movielens_100k", data)}
    for key, rec in runs.items():
        assert key == runner._key(rec["dataset"], rec["K"], rec["method"], rec["seed"])
        assert rec["K"] == (5 if rec["dataset"] == "ccle_ec50" else 20)
        assert len(rec["columns"]) == rec["K"]
        assert math.isfinite(rec["mse"]) and math.isfinite(rec["mse_observed"])
        if rec["method"] != runner.MASK_VARIANT:
            # the runner's own error agrees with the estimator's (6 significant digits kept)
            assert rec["mse"] == pytest.approx(rec["mse_reported"], rel=2e-6)
        if rec["method"] not in runner.BASELINES:
            assert rec["max_abs_w"] <= 1.0
            assert 0.0 <= rec["accept_rate"] <= 1.0
        # a K-column ID cannot beat the best rank-K approximation (Eckart-Young)
        A = ds[rec["dataset"]].data
        s = np.linalg.svd(A, compute_uv=False)
        assert rec["mse"] >= float(np.sum(s[rec["K"]:] ** 2)) / A.size * (1 - 1e-5)

    text = report.read_text()
    assert "## Table 1: MSE over all entries" in text
    assert "## Table 2: max |W|" in text
    assert "## MovieLens 100K: missing='zero' vs missing='mask'" in text
    assert "## The targets of issue 10, cell by cell" in text
    head = runs[runner._key("ccle_ec50", 5, runner.HEADLINE, 0)]
    assert f"| CCLE EC50 | 5 | {runner._fmt(head['mse'])} (1 seed) |" in text
    # every variant's row says what its chain targets
    for v, (_, label) in runner.BID_VARIANTS.items():
        assert f"| {label} | `{v}` |" in text
    assert "GBT and GBTN give identical MSE" in text
    for name in ("fig4_convergence", "fig4_autocorrelation", "fig4_error_vs_k"):
        assert (img / f"{name}.png").read_bytes()[:8] == PNG_MAGIC


def test_heldout_evaluation_runs_and_is_reported(runner, tmp_path):
    """--heldout runs benchmarks/bench_heldout.py's evaluation for the selected datasets
    (resumable) and results.md shows its table, rendered from its store."""
    rng = np.random.default_rng(3)
    data = tmp_path / "data"
    _write_synthetic(data, rng)
    held = tmp_path / "heldout.json"
    report = tmp_path / "results.md"
    args = ["--data", str(data), "--quick", "--out", str(tmp_path / "runs.json"),
            "--report", str(report), "--img-dir", str(tmp_path / "img"), "--keep-stale",
            "--datasets", "ccle_ec50", "--methods", "cpqr", "--k", "5",
            "--heldout-out", str(held)]
    runner.main(args)
    text = report.read_text()
    assert "## Held-out error (10 % of the observed entries)" in text
    assert "Not run in this reproduction" in text and not held.exists()

    runner.main([*args, "--heldout"])
    recs = json.loads(held.read_text())
    hm = runner.heldout_module()
    # one seed (--quick), K = 5: every method once, the split shared by all of them
    assert sorted(r["method"] for r in recs.values()) == sorted(hm.METHODS)
    assert {(r["dataset"], r["seed"]) for r in recs.values()} == {("ccle_ec50", 0)}
    assert len({r["n_heldout"] for r in recs.values()}) == 1
    for r in recs.values():
        assert math.isfinite(r["rmse_heldout"]) and r["K"] in (5, None)
    text = report.read_text()
    assert "Not run in this reproduction" not in text
    mean = recs[hm.record_key("ccle_ec50", None, "col_mean", 0, 40)]["rmse_heldout"]
    assert "| ccle_ec50 | 5 | " in text and f"{mean:.4f} (1 seed)" in text
    before = held.read_text()
    runner.main([*args, "--heldout"])  # resumed: nothing is refitted
    assert held.read_text() == before


def test_headline_is_the_library_default(runner):
    # the headline runs BayesianID's defaults (the exact collapsed sampler); the paper
    # variant runs PAPER_SETTINGS (Algorithm 2) and the search variant the optimisation
    defaults = runner.BayesianID(1).get_params()
    kw = runner.BID_VARIANTS[runner.HEADLINE][0]
    assert defaults["sampler"] == "collapsed" and defaults["model"] == "gbt"
    assert all(defaults[k] == v for k, v in kw.items())
    assert runner.BID_VARIANTS["gbtn_collapsed"][0] == {"model": "gbtn"}
    assert runner.BID_VARIANTS["gbt_plain"][0]["sampler"] == "plain"
    assert runner.BID_VARIANTS["gbt_search"][0]["sampler"] == "search"
    paper = runner.BID_VARIANTS[runner.PAPER_VARIANT][0]
    assert paper == {"model": "gbt", **runner.PAPER_SETTINGS}
    assert paper["sampler"] == "aggressive"
    assert set(runner.VARIANT_TARGETS) == set(runner.BID_VARIANTS)


def test_w_draw_acf_uses_longest_fixed_basis_stretch(runner):
    # AR(1) draws with phi = 0.8 in one long stretch, broken elsewhere by NaN (basis changes)
    rng = np.random.default_rng(5)
    n, phi = 4000, 0.8
    x = np.empty((n, 3, 4))
    x[0] = rng.standard_normal((3, 4))
    for t in range(1, n):
        x[t] = phi * x[t - 1] + np.sqrt(1 - phi**2) * rng.standard_normal((3, 4))
    x[:, 0, 1] = 1.0  # an identity entry: constant, left out
    x[100] = np.nan
    x[3500] = np.nan
    acf, length, n_series = runner.w_draw_acf({"values": x[None]}, max_lag=5)
    assert length == 3399 and n_series == 11
    assert acf[0] == 1.0
    # sd of a lag-1 autocorrelation estimate over ~3400 draws is about 0.01 per series
    np.testing.assert_allclose(acf[1:4], phi ** np.arange(1, 4), atol=0.03)
    # too short a stretch gives NaN beyond what it supports
    short = runner.w_draw_acf({"values": x[None, :6]}, max_lag=5)[0]
    assert np.isfinite(short[:5]).all() and np.isnan(short[5])


def test_quick_run_real_ccle(runner, shared_data_dir, tmp_path):
    res = runner.main(["--data", str(shared_data_dir), "--quick", "--datasets", "ccle_ic50",
                       "--out", str(tmp_path / "r.json"), "--report", str(tmp_path / "r.md"),
                       "--img-dir", str(tmp_path / "img")])
    assert res["new_fits"] == 7
    runs = json.loads((tmp_path / "r.json").read_text())["runs"]
    head = runs[runner._key("ccle_ic50", 5, runner.HEADLINE, 0)]
    cpqr = runs[runner._key("ccle_ic50", 5, "cpqr", None)]
    # even 40 iterations from the pivoted-QR start stay far below the paper's RID (0.45)
    assert head["mse"] < PAPER_TABLE1[("ccle_ic50", 5)][1]
    assert head["max_abs_w"] <= 1.0
    assert cpqr["mse"] < PAPER_TABLE1[("ccle_ic50", 5)][1]


def test_exhaustive_best_is_a_lower_bound(runner, tmp_path):
    rng = np.random.default_rng(11)
    _write_synthetic(tmp_path, rng)
    ds = runner.load_dataset("ccle_ec50", tmp_path)
    A = ds.data
    n0 = A.shape[1] // 2
    K = 3
    assert runner.exhaustive_feasible(ds, K)
    mse, cols = runner.exhaustive_best(ds, K, batch=37)  # a batch size that splits unevenly
    # brute force on the copied matrix itself
    from itertools import combinations

    errs = {}
    for c in combinations(range(n0), K):
        C = A[:, list(c)]
        W = np.linalg.lstsq(C, A, rcond=None)[0]
        errs[c] = float(np.mean((A - C @ W) ** 2))
    best = min(errs, key=errs.get)
    assert list(best) == cols
    assert mse == pytest.approx(errs[best], rel=1e-10)
    # no ID beats it: the pivoted-QR ID and a BayesianID fit, on the copied matrix
    for est in (runner.RandomizedID(K, method="cpqr"),
                runner.BayesianID(K, n_iter=30, burn_in=10, thin=2, random_state=0)):
        assert est.fit(A).mse_ >= mse * (1 - 1e-12)


def test_merge_and_methods(runner, tmp_path):
    # a second process with its own --out runs other methods; --merge copies its records in
    rng = np.random.default_rng(3)
    data = tmp_path / "data"
    _write_synthetic(data, rng)
    common = ["--data", str(data), "--quick", "--datasets", "ccle_ec50", "--no-mask",
              "--report", str(tmp_path / "r.md"), "--img-dir", str(tmp_path / "img")]
    a, b = tmp_path / "a" / "runs.json", tmp_path / "b" / "runs.json"
    assert runner.main([*common, "--out", str(a), "--methods", "cpqr", runner.HEADLINE])[
        "new_fits"] == 2
    assert runner.main([*common, "--out", str(b), "--methods", "gbt_plain"])["new_fits"] == 1
    res = runner.main([*common, "--out", str(a), "--merge", str(b), "--report-only"])
    assert res["new_fits"] == 0
    runs = json.loads(a.read_text())["runs"]
    assert {r["method"] for r in runs.values()} == {"cpqr", runner.HEADLINE, "gbt_plain"}
    plain = runs[runner._key("ccle_ec50", 5, "gbt_plain", 0)]
    assert plain == json.loads(b.read_text())["runs"][runner._key("ccle_ec50", 5, "gbt_plain", 0)]
    # the chain's basis moves are recorded, copies folded at most as often as not
    head = runs[runner._key("ccle_ec50", 5, runner.HEADLINE, 0)]
    assert 0 <= head["basis_moves_folded"] <= head["basis_moves"] <= head["n_transitions"]
    traces = json.loads(a.with_name("runs_traces.json").read_text())
    assert runner._key("ccle_ec50", 5, runner.HEADLINE, 0) in traces


def test_basis_moves_folds_copies(runner):
    n0 = 4
    # chain 0: J = {0, 1} -> {0, 5} (1 -> its copy 5) -> {0, 2} (another basis) -> same
    draws = np.array([[[0, 1], [0, 5], [2, 0], [0, 2]]])
    assert runner.basis_moves(draws, n0) == (2, 1, 3)
    assert runner.basis_moves(draws, None) == (2, 2, 3)
    A = np.arange(12.0).reshape(3, 4)
    assert runner.copy_period(np.hstack([A, A])) == 4
    assert runner.copy_period(np.hstack([A, A + 1])) is None
