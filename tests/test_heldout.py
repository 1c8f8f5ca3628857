"""The held-out split of benchmarks/bench_heldout.py: fixed, leak-free, unseen by the fits."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_heldout as bh  # noqa: E402


def _matrix(seed=0, M=30, N=6, missing=0.2):
    """A small low-rank matrix with NaN at about ``missing`` of its entries."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, 2)) @ rng.uniform(-1, 1, (2, N)) + 3.0
    A += 0.1 * rng.standard_normal((M, N))
    mask = rng.random((M, N)) >= missing
    return np.where(mask, A, np.nan), mask


def test_split_is_fixed_by_dataset_and_seed():
    _, mask = _matrix()
    t1 = bh.heldout_split(mask, bh.split_seed("ccle_ec50", 3))
    t2 = bh.heldout_split(mask, bh.split_seed("ccle_ec50", 3))
    np.testing.assert_array_equal(t1, t2)
    assert t1.sum() == round(0.1 * mask.sum())
    assert not (t1 & ~mask).any(), "a held-out entry must be an observed one"
    assert not np.array_equal(t1, bh.heldout_split(mask, bh.split_seed("ccle_ec50", 4)))
    assert not np.array_equal(t1, bh.heldout_split(mask, bh.split_seed("ccle_ic50", 3)))


def test_both_copies_of_a_heldout_entry_leave_training():
    values, mask = _matrix()
    test = bh.heldout_split(mask, bh.split_seed("synthetic", 0))
    mats = bh.training_matrices(values, mask, test, n_copies=2)
    N = values.shape[1]
    rows, cols = np.nonzero(test)
    assert rows.size > 0
    for c in (0, 1):
        assert np.isnan(mats["X_mask"][rows, cols + c * N]).all()
        assert (mats["X_zero"][rows, cols + c * N] == 0).all()
        assert mats["test"][rows, cols + c * N].all()
        assert not mats["train"][rows, cols + c * N].any()
    # every training entry is there in both copies, standardised with training statistics
    train = mask & ~test
    z = (values[train] - values[train].mean()) / values[train].std()
    for c in (0, 1):
        np.testing.assert_allclose(mats["X_mask"][:, c * N:(c + 1) * N][train], z)
    assert mats["train"].sum() == 2 * train.sum()


@pytest.mark.parametrize("method", ["bid_mask", "bid_zero", "cpqr", "col_mean"])
def test_heldout_values_are_never_seen_by_the_fit(method):
    values, mask = _matrix()
    test = bh.heldout_split(mask, bh.split_seed("synthetic", 1))
    changed = values.copy()
    changed[test] = changed[test] * -7.0 + 50.0  # nothing like the truth
    m1 = bh.training_matrices(values, mask, test)
    m2 = bh.training_matrices(changed, mask, test)
    for key in ("X_mask", "X_zero"):
        np.testing.assert_array_equal(m1[key], m2[key])
    assert (m1["mean"], m1["std"]) == (m2["mean"], m2["std"])

    P1, info1 = bh.fit_method(m1, method, 2, 0, n_iter=30)
    P2, info2 = bh.fit_method(m2, method, 2, 0, n_iter=30)
    np.testing.assert_array_equal(P1, P2)  # bitwise: the fit saw the same numbers
    assert info1 == info2
    r1, r2 = bh.evaluate(m1, P1, info1), bh.evaluate(m2, P2, info2)
    assert r1["rmse_train"] == r2["rmse_train"]
    # ... while the held-out score does see the change, so the check above can fail
    assert r2["rmse_heldout"] > 5 * r1["rmse_heldout"]


def test_rmse_is_taken_over_the_heldout_entries_only():
    values, mask = _matrix()
    test = bh.heldout_split(mask, bh.split_seed("synthetic", 2))
    mats = bh.training_matrices(values, mask, test)
    P = np.where(mats["test"], np.nan_to_num(mats["Z"]) + 0.5, 99.0)
    rec = bh.evaluate(mats, P, {})
    assert rec["rmse_heldout"] == pytest.approx(0.5)
    assert rec["rmse_train"] > 50


def test_store_resumes_and_the_table_counts_seeds(tmp_path):
    values, mask = _matrix()
    out = tmp_path / "heldout.json"
    data = tmp_path / "unused"
    logs = []

    def load(name, data_dir):  # the synthetic matrix in place of a dataset
        return values, mask

    args = (["synthetic"], [2], [0, 1], ["cpqr", "col_mean"], None, data, out)
    bh.run(*args, log=logs.append, load=load)
    assert len(logs) == 4
    bh.run(*args, log=logs.append, load=load)
    assert len(logs) == 4, "records already stored are not refitted"
    text = bh.table(bh.load_store(out))
    assert "| synthetic | 2 |" in text and "(2)" in text
