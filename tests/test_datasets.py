"""Tests of dask_bid.datasets.

Real-data tests read the shared data folder in place (fixture ``shared_data_dir``) and
check the numbers of its README's verification table; they never copy the files.
The CTRP and MovieLens format tests use small synthetic files written to ``tmp_path``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dask_bid import CorruptStoreError, InputShapeError, ParameterError, StoreNotFoundError
from dask_bid.datasets import (
    DATASETS,
    PAPER_K_VALUES,
    PAPER_SPECS,
    PAPER_TABLE1,
    Dataset,
    available_datasets,
    load_ccle_ec50,
    load_ccle_ic50,
    load_ctrp_ec50,
    load_dataset,
    load_movielens_100k,
)

# README verification table: (loader options, shape before copying, observed, fraction).
README_TABLE = {
    "ccle_ec50 paper": ("ccle_ec50", {}, (502, 24), 7622, 0.632636),
    "ccle_ec50 clean": ("ccle_ec50", {"clean": True}, (501, 24), 7195, 0.598387),
    "ccle_ec50 raw": ("ccle_ec50", {"min_obs": 0}, (504, 24), 7626, 0.630456),
    "ccle_ic50": ("ccle_ic50", {}, (504, 24), 11670, 0.964782),
    "movielens_100k": ("movielens_100k", {}, (943, 1473), 99723, 0.0717928),
}
REAL = ("ccle_ec50", "ccle_ic50", "movielens_100k")


def _observed_stats(ds: Dataset) -> tuple[float, float]:
    obs = ds.data[ds.mask]
    return float(obs.mean()), float(obs.var())


# --------------------------------------------------------------------------- real data


@pytest.mark.parametrize("case", sorted(README_TABLE))
def test_readme_verification_table(shared_data_dir, case):
    name, opts, shape, n_obs, fraction = README_TABLE[case]
    ds = load_dataset(name, shared_data_dir, n_copies=1, **opts)
    assert ds.shape == shape
    assert ds.mask.sum() == n_obs
    # The README prints 6 significant digits.
    assert ds.observed_fraction == pytest.approx(fraction, abs=5e-7)
    assert ds.observed_fraction == n_obs / (shape[0] * shape[1])
    assert len(ds.row_labels) == shape[0] and len(ds.col_labels) == shape[1]


@pytest.mark.parametrize(
    "name, n_cols, raw_shape",
    [
        ("ccle_ec50", 48, (504, 24)),
        ("ccle_ic50", 48, (504, 24)),
        ("movielens_100k", 2946, (943, 1682)),
    ],
)
def test_paper_copied_shapes(shared_data_dir, name, n_cols, raw_shape):
    ds = load_dataset(name, shared_data_dir)
    assert ds.shape == PAPER_SPECS[name].copied_shape
    assert ds.shape[1] == n_cols
    assert ds.raw_shape == raw_shape
    assert ds.data.dtype == np.float64 and ds.mask.dtype == bool
    assert ds.preprocessing["n_copies"] == 2
    # The paper prints 3 decimals, truncated (0.632 for 0.632636).
    assert ds.observed_fraction == pytest.approx(PAPER_SPECS[name].observed_fraction, abs=1e-3)


def test_ccle_ec50_filter_drops_the_documented_cell_lines(shared_data_dir):
    ds = load_ccle_ec50(shared_data_dir, n_copies=1)
    everything = load_ccle_ec50(shared_data_dir, min_obs=0, n_copies=1)
    dropped = set(everything.row_labels) - set(ds.row_labels)
    assert dropped == {"NCI-H2172", "T84"}
    assert ds.row_labels[:3] == ["1321N1", "22Rv1", "42-MG-BA"]
    assert ds.col_labels[0] == "17-AAG"


@pytest.mark.parametrize("name", REAL)
def test_global_standardisation_mean0_var1(shared_data_dir, name):
    ds = load_dataset(name, shared_data_dir)
    mean, var = _observed_stats(ds)
    assert abs(mean) < 1e-12
    assert var == pytest.approx(1.0, abs=1e-12)
    assert np.ndim(ds.mean_) == 0 and ds.std_ > 0


@pytest.mark.parametrize("name", ("ccle_ec50", "ccle_ic50"))
def test_column_standardisation(shared_data_dir, name):
    ds = load_dataset(name, shared_data_dir, standardize="column")
    assert ds.mean_.shape == ds.std_.shape == (ds.shape[1],)
    for j in range(ds.shape[1]):
        col = ds.data[ds.mask[:, j], j]
        assert abs(col.mean()) < 1e-12
        assert col.var() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("name, fname", [("ccle_ec50", "ec50.txt"), ("ccle_ic50", "ic50.txt")])
def test_drug_values_match_file_without_any_log_undo(shared_data_dir, name, fname):
    raw = np.loadtxt(shared_data_dir / name / fname, delimiter="\t")
    ds = load_dataset(name, shared_data_dir, min_obs=0, standardize=None, n_copies=1)
    np.testing.assert_array_equal(ds.mask, ~np.isnan(raw))
    # Linear µM, unchanged: no exp(), no 10**x, no cap.
    np.testing.assert_array_equal(ds.data[ds.mask], raw[~np.isnan(raw)])
    # The mapping back from the standardised data recovers the file's values.
    std = load_dataset(name, shared_data_dir, min_obs=0, n_copies=1)
    back = std.inverse_transform(std.data)
    np.testing.assert_allclose(back[std.mask], raw[~np.isnan(raw)], rtol=1e-12, atol=1e-12)


def test_a_min_obs_no_row_reaches_is_refused(shared_data_dir):
    # it returned a 0 x 48 dataset (mean 0, sd 1) without a word
    with pytest.raises(ParameterError, match=r"min_obs=25: no row of ccle_ec50 .* \(the most "
                                             "is 24"):
        load_ccle_ec50(shared_data_dir, min_obs=25)


def test_ccle_ec50_garbage_entries(shared_data_dir):
    paper = load_ccle_ec50(shared_data_dir, min_obs=0, standardize=None, n_copies=1)
    clean = load_ccle_ec50(shared_data_dir, clean=True, min_obs=0, standardize=None, n_copies=1)
    tiny = paper.mask & (np.abs(paper.data) < 1e-300)
    assert tiny.sum() == 426
    np.testing.assert_array_equal(clean.mask, paper.mask & ~tiny)
    # README: the garbage sits exactly where ic50.txt has nan.
    ic50 = load_ccle_ic50(shared_data_dir, n_copies=1, standardize=None)
    np.testing.assert_array_equal(tiny, ~ic50.mask)


@pytest.mark.parametrize("name", REAL)
def test_missing_filled_masked_and_copies_equal(shared_data_dir, name):
    ds = load_dataset(name, shared_data_dir)
    n = ds.shape[1] // 2
    assert (ds.data[~ds.mask] == 0.0).all()
    assert np.isfinite(ds.data).all()
    np.testing.assert_array_equal(ds.data[:, :n], ds.data[:, n:])
    np.testing.assert_array_equal(ds.mask[:, :n], ds.mask[:, n:])
    assert ds.col_labels[n:] == [f"{lab}#copy2" for lab in ds.col_labels[:n]]
    assert len(set(ds.col_labels)) == ds.shape[1]
    single = load_dataset(name, shared_data_dir, n_copies=1)
    np.testing.assert_array_equal(single.data, ds.data[:, :n])


def test_movielens_values_are_ratings(shared_data_dir):
    ds = load_movielens_100k(shared_data_dir, standardize=None, n_copies=1)
    assert set(np.unique(ds.data[ds.mask])) == {1.0, 2.0, 3.0, 4.0, 5.0}
    assert ds.row_labels[0] == "1" and ds.row_labels[-1] == "943"
    assert (ds.mask.sum(axis=0) >= 3).all() and (ds.mask.sum(axis=1) >= 3).all()


def test_root_and_dataset_folder_are_both_accepted(shared_data_dir):
    a = load_ccle_ic50(shared_data_dir)
    b = load_ccle_ic50(str(shared_data_dir / "ccle_ic50"))
    np.testing.assert_array_equal(a.data, b.data)
    assert a.row_labels == b.row_labels and a.source == b.source


def test_real_ctrp_folder_without_matrix(shared_data_dir):
    if (shared_data_dir / "ctrp_ec50" / "ec50.txt").exists():
        pytest.skip("the CTRP matrix has been added to the shared data; see next test")
    with pytest.raises(StoreNotFoundError, match="ec50.txt") as info:
        load_ctrp_ec50(shared_data_dir)
    assert isinstance(info.value, FileNotFoundError)
    assert "ctrp_ec50" in str(info.value)
    assert "ctrp_ec50" not in available_datasets(shared_data_dir)


def test_real_ctrp_when_present(shared_data_dir):
    if not (shared_data_dir / "ctrp_ec50" / "ec50.txt").exists():
        pytest.skip("CTRP matrix ctrp_ec50/ec50.txt is not in the shared data (README sec. 3)")
    ds = load_ctrp_ec50(shared_data_dir, n_copies=1)
    assert ds.shape == (887, 545)
    assert ds.mask.sum() == 387130


def test_available_datasets_real(shared_data_dir):
    present = available_datasets(shared_data_dir)
    assert set(REAL) <= set(present)
    assert present == tuple(n for n in DATASETS if n in present)
    assert available_datasets(shared_data_dir / "ccle_ec50") == ("ccle_ec50",)


def test_other_dataset_folder_is_rejected(shared_data_dir):
    # ccle_ec50/ holds an ec50.txt too; it must not be read as CTRP.
    with pytest.raises(StoreNotFoundError, match="ctrp_ec50"):
        load_ctrp_ec50(shared_data_dir / "ccle_ec50")
    # said as such (it said "no dataset folder found" beside the file it holds)
    with pytest.raises(StoreNotFoundError, match="'.*ccle_ec50' is the folder of ccle_ec50 "
                                                 "\\(its 'ec50.txt' is ccle_ec50's\\)"):
        load_ctrp_ec50(shared_data_dir / "ccle_ec50")


def test_a_blank_line_within_a_label_file_is_refused(tmp_path):
    from dask_bid._errors import CorruptStoreError
    from dask_bid.datasets._loaders import _read_labels

    f = tmp_path / "drugs.txt"
    f.write_text("a\tA\n\nc\tC\n\n")  # a trailing blank line is fine, one within is not
    with pytest.raises(CorruptStoreError, match="drugs.txt', line 2, is blank"):
        _read_labels("x", f, 3, "drug")
    f.write_text("a\tA\nb\nc\tC\n\n")
    assert _read_labels("x", f, 3, "drug") == ["A", "b", "C"]


def test_another_datasets_folder_without_the_file_is_said_as_such(tmp_path):
    """A folder named for another dataset that holds no file of this one: it said "its
    'u.data' is ccle_ec50's" of a folder without u.data."""
    d = tmp_path / "ccle_ec50"
    d.mkdir()
    (d / "ec50.txt").write_text("1\t2\n")
    with pytest.raises(StoreNotFoundError, match="is the folder of ccle_ec50, which holds no "
                                                 "'u.data': pass the 'movielens_100k' folder"):
        load_movielens_100k(d)


def test_paper_spec_shapes_match_loaders(shared_data_dir):
    for name in REAL:
        ds = load_dataset(name, shared_data_dir, n_copies=1)
        assert ds.shape == PAPER_SPECS[name].shape
        assert abs(ds.observed_fraction - PAPER_SPECS[name].observed_fraction) < 1e-3


# --------------------------------------------------------------------------- synthetic CTRP

CTRP_ROWS = [
    "2004\t2004\t155823\t\t",
    "22rv1\t22RV1\t7\tcarcinoma\tprostate",
    "hela\t\t99\tcarcinoma\t",  # empty ccl_name: the normalised name is the label
    "a549\tA549\t4\tcarcinoma\tlung",
]
CTRP_COLS = [
    "16betabromoandrosterone\t16-beta-bromoandrosterone\t411726\tC[C@]12CC",
    "1s3rrsl3\t1S,3R-RSL-3\t609060\tCOC(=O)",
    "drugx\tDrug X\t1\t",
]


def _write_ctrp(folder, R, rows=CTRP_ROWS, cols=CTRP_COLS):
    folder.mkdir(parents=True, exist_ok=True)
    np.savetxt(folder / "ec50.txt", R, fmt="%.18e", delimiter="\t")
    (folder / "cell_lines.txt").write_text("\n".join(rows) + "\n")
    (folder / "drugs.txt").write_text("\n".join(cols) + "\n")
    return folder


@pytest.fixture
def ctrp_matrix():
    return np.array(
        [
            [0.5, np.nan, 250.0],
            [12.0, 100.0, np.nan],
            [np.nan, np.nan, np.nan],
            [3.0, 2.2250738585072014e-312, 7.5],
        ]
    )


def test_ctrp_file_format_and_labels(tmp_path, ctrp_matrix):
    folder = _write_ctrp(tmp_path / "ctrp_ec50", ctrp_matrix)
    text = (folder / "ec50.txt").read_text()
    assert "nan" in text and "\t" in text  # the format Brouwer's files use
    ds = load_ctrp_ec50(tmp_path, cap=None, standardize=None, n_copies=1)
    assert ds.shape == (4, 3) and ds.raw_shape == (4, 3)
    assert ds.row_labels == ["2004", "22RV1", "hela", "A549"]
    assert ds.col_labels == ["16-beta-bromoandrosterone", "1S,3R-RSL-3", "Drug X"]
    np.testing.assert_array_equal(ds.mask, ~np.isnan(ctrp_matrix))
    np.testing.assert_array_equal(ds.data[ds.mask], ctrp_matrix[~np.isnan(ctrp_matrix)])
    assert ds.observed_fraction == 7 / 12
    assert ds.preprocessing == {
        "clean": False,
        "min_obs": 0,
        "cap": None,
        "standardize": None,
        "fill_value": 0.0,
        "n_copies": 1,
    }


def test_ctrp_cap(tmp_path, ctrp_matrix):
    _write_ctrp(tmp_path / "ctrp_ec50", ctrp_matrix)
    capped = load_ctrp_ec50(tmp_path, standardize=None, n_copies=1)
    assert capped.preprocessing["cap"] == 100.0
    assert capped.data[0, 2] == 100.0
    expected = np.where(np.isnan(ctrp_matrix), 0.0, np.minimum(ctrp_matrix, 100.0))
    np.testing.assert_array_equal(capped.data, expected)
    lower = load_ctrp_ec50(tmp_path, cap=10.0, standardize=None, n_copies=1)
    assert lower.data[1, 0] == 10.0 and lower.data[0, 0] == 0.5


def test_ctrp_cap_is_noop_on_capped_data(tmp_path, ctrp_matrix):
    already = np.minimum(ctrp_matrix, 100.0)
    _write_ctrp(tmp_path / "ctrp_ec50", already)
    a = load_ctrp_ec50(tmp_path)
    b = load_ctrp_ec50(tmp_path, cap=None)
    np.testing.assert_array_equal(a.data, b.data)
    assert a.mean_ == b.mean_ and a.std_ == b.std_


def test_ctrp_row_filter_clean_and_standardisation(tmp_path, ctrp_matrix):
    _write_ctrp(tmp_path / "ctrp_ec50", ctrp_matrix)
    ds = load_ctrp_ec50(tmp_path, min_obs=1, n_copies=1)
    assert ds.row_labels == ["2004", "22RV1", "A549"]
    mean, var = _observed_stats(ds)
    assert abs(mean) < 1e-12 and var == pytest.approx(1.0, abs=1e-12)
    capped = np.minimum(ctrp_matrix[[0, 1, 3]], 100.0)
    obs = capped[~np.isnan(capped)]
    assert ds.mean_ == pytest.approx(obs.mean()) and ds.std_ == pytest.approx(obs.std())
    # A549's denormal no longer counts, leaving it 2 observations: every row would drop,
    # and that is refused, naming the most any row has (a 0-row dataset was returned,
    # which no fit can use)
    with pytest.raises(ParameterError, match=r"min_obs=3: no row of ctrp_ec50 .* \(the most "
                                             r"is 2\)"):
        load_ctrp_ec50(tmp_path, clean=True, min_obs=3, standardize=None, n_copies=1)
    cleaned = load_ctrp_ec50(tmp_path, clean=True, min_obs=2, standardize=None, n_copies=1)
    assert cleaned.row_labels == ["2004", "22RV1", "A549"]
    assert not cleaned.mask[2, 1]


def test_ctrp_renamed_folder_and_label_mismatch(tmp_path, ctrp_matrix):
    _write_ctrp(tmp_path / "my_copy", ctrp_matrix)
    assert load_ctrp_ec50(tmp_path / "my_copy").shape == (4, 6)
    assert available_datasets(tmp_path) == ()
    _write_ctrp(tmp_path / "bad" / "ctrp_ec50", ctrp_matrix, rows=CTRP_ROWS[:3])
    with pytest.raises(CorruptStoreError, match="3 row labels"):
        load_ctrp_ec50(tmp_path / "bad")
    _write_ctrp(tmp_path / "ok" / "ctrp_ec50", ctrp_matrix)
    assert available_datasets(tmp_path / "ok") == ("ctrp_ec50",)
    # a renamed folder's "ec50.txt" is CCLE's or CTRP's by its label files (a copy of the
    # CCLE folder under another name loaded as CTRP, and the reverse)
    with pytest.raises(StoreNotFoundError, match="holds ctrp_ec50's files \\(its "
                                                 "cell_lines.txt has 5 fields a line"):
        load_ccle_ec50(tmp_path / "my_copy")
    ccle = tmp_path / "ccle_copy"
    ccle.mkdir()
    np.savetxt(ccle / "ec50.txt", ctrp_matrix, fmt="%.18e", delimiter="\t")
    (ccle / "cell_lines.txt").write_text("".join(f"c{i}\tC{i}\n" for i in range(4)))
    (ccle / "drugs.txt").write_text("".join(f"d{j}\tD{j}\n" for j in range(3)))
    with pytest.raises(StoreNotFoundError, match="holds ccle_ec50's files"):
        load_ctrp_ec50(ccle)
    assert load_ccle_ec50(ccle, clean=False, min_obs=1, n_copies=1).shape[1] == 3


def test_ctrp_missing_label_file_named(tmp_path, ctrp_matrix):
    folder = _write_ctrp(tmp_path / "ctrp_ec50", ctrp_matrix)
    (folder / "drugs.txt").unlink()
    with pytest.raises(StoreNotFoundError, match="drugs.txt"):
        load_ctrp_ec50(tmp_path)
    assert available_datasets(tmp_path) == ()


def test_ctrp_corrupt_matrix(tmp_path):
    folder = tmp_path / "ctrp_ec50"
    folder.mkdir()
    (folder / "ec50.txt").write_text("1.0\tabc\n")
    (folder / "cell_lines.txt").write_text("a\tA\n")
    (folder / "drugs.txt").write_text("x\tX\ny\tY\n")
    with pytest.raises(CorruptStoreError, match="ec50.txt"):
        load_ctrp_ec50(tmp_path)


# --------------------------------------------------------------------------- synthetic MovieLens

# Built so that each of Brouwer's three passes (users, movies, users; min 3) removes
# something and a fourth pass would remove more (movie 101 ends with 2 ratings):
#   pass 1 drops user 50 (2 ratings); pass 2 drops movies 105 (2 ratings among the
#   remaining users) and 106 (0); pass 3 drops user 10 (2 ratings left).
# fmt: off
ML_LINES = [
    (10, 101, 4), (10, 102, 3), (10, 105, 5),
    (20, 101, 1), (20, 102, 2), (20, 103, 3), (20, 104, 4), (20, 105, 5),
    (30, 101, 5), (30, 102, 4), (30, 103, 3), (30, 104, 2),
    (40, 102, 1), (40, 103, 1), (40, 104, 2),
    (50, 103, 5), (50, 106, 4),
]
# fmt: on


def _write_movielens(folder, lines=ML_LINES):
    folder.mkdir(parents=True, exist_ok=True)
    text = "".join(f"{u}\t{i}\t{r}\t{880000000 + k}\n" for k, (u, i, r) in enumerate(lines))
    (folder / "u.data").write_text(text)
    return folder


def test_movielens_filter_order(tmp_path):
    _write_movielens(tmp_path / "movielens_100k")
    ds = load_movielens_100k(tmp_path, standardize=None, n_copies=1)
    assert ds.raw_shape == (5, 6)
    assert ds.row_labels == ["20", "30", "40"]
    assert ds.col_labels == ["101", "102", "103", "104"]
    expected = np.array([[1, 2, 3, 4], [5, 4, 3, 2], [0, 1, 1, 2]], dtype=float)
    np.testing.assert_array_equal(ds.data, expected)
    np.testing.assert_array_equal(ds.mask, expected > 0)
    assert ds.mask.sum() == 11 and ds.observed_fraction == 11 / 12
    assert ds.mask[:, 0].sum() == 2  # one pass each, not iterated to a fixed point
    everything = load_movielens_100k(tmp_path, min_obs=0, standardize=None, n_copies=1)
    assert everything.shape == (5, 6) and everything.mask.sum() == len(ML_LINES)


def test_movielens_copies_and_fill(tmp_path):
    _write_movielens(tmp_path / "movielens_100k")
    ds = load_movielens_100k(tmp_path / "movielens_100k", n_copies=3, fill_value=-7.5)
    assert ds.shape == (3, 12)
    assert ds.col_labels[4:] == [
        "101#copy2",
        "102#copy2",
        "103#copy2",
        "104#copy2",
        "101#copy3",
        "102#copy3",
        "103#copy3",
        "104#copy3",
    ]
    assert (ds.data[~ds.mask] == -7.5).all()
    for c in (1, 2):
        np.testing.assert_array_equal(ds.data[:, 4 * c : 4 * c + 4], ds.data[:, :4])
    nan_fill = load_movielens_100k(tmp_path, fill_value=float("nan"))
    assert np.isnan(nan_fill.data[~nan_fill.mask]).all()
    assert np.isfinite(nan_fill.data[nan_fill.mask]).all()


def test_movielens_duplicate_pair_rejected(tmp_path):
    _write_movielens(tmp_path / "movielens_100k", [*ML_LINES, (20, 101, 3)])
    with pytest.raises(CorruptStoreError, match=r"rates user 20, item 101 more than once "
                       r"\(lines 4 and 18; 1 repeated pairs in all\)"):
        load_movielens_100k(tmp_path)


def test_movielens_filter_that_keeps_nothing_is_refused(tmp_path):
    """users 1-3 rating items 10/20/30 too sparsely: the users, movies, users cascade
    left a 0 x 0 dataset, returned without a word (docs/datasets.md says refused)."""
    lines = [(1, 10, 4), (1, 20, 3), (1, 30, 5), (2, 10, 1), (2, 20, 2), (3, 30, 3),
             (3, 10, 2)]
    _write_movielens(tmp_path / "movielens_100k", lines)
    with pytest.raises(ParameterError, match="min_obs=3: no movie of movielens_100k keeps "
                       "that many ratings"):
        load_movielens_100k(tmp_path, min_obs=3)
    with pytest.raises(ParameterError, match="min_obs=9: no user"):
        load_movielens_100k(tmp_path, min_obs=9)
    assert load_movielens_100k(tmp_path, min_obs=2).shape[0] > 0


def test_column_standardisation_zero_spread_and_inverse(tmp_path):
    # Every rating of movie 103 set to 3: a column with zero spread is only centred.
    lines = [(u, i, 3 if i == 103 else r) for u, i, r in ML_LINES]
    _write_movielens(tmp_path / "movielens_100k", lines)
    ds = load_movielens_100k(tmp_path, standardize="column")
    raw = load_movielens_100k(tmp_path, standardize=None)
    j = ds.col_labels.index("103")
    assert ds.std_[j] == 1.0 and ds.mean_[j] == 3.0
    assert (ds.data[ds.mask[:, j], j] == 0.0).all()
    back = ds.inverse_transform(ds.data)
    np.testing.assert_allclose(back[ds.mask], raw.data[raw.mask], rtol=1e-14)
    with pytest.raises(InputShapeError, match="per column"):
        ds.inverse_transform(np.zeros((3, 5)))


# --------------------------------------------------------------------------- errors, API


def test_missing_directory_error(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(StoreNotFoundError, match="nowhere") as info:
        load_ccle_ec50(missing)
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(StoreNotFoundError, match="ccle_ic50"):
        load_ccle_ic50(tmp_path)  # exists, but holds no ccle_ic50/
    with pytest.raises(StoreNotFoundError, match="u.data"):
        load_movielens_100k(tmp_path)
    with pytest.raises(StoreNotFoundError):
        available_datasets(missing)


def test_bad_directory_arguments(tmp_path):
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(ParameterError, match="not a folder"):
        load_ccle_ec50(f)
    with pytest.raises(ParameterError, match="str or os.PathLike"):
        load_ccle_ec50(42)
    with pytest.raises(ParameterError, match="not a data folder"):
        available_datasets(f)


@pytest.mark.parametrize(
    "opts, match",
    [
        ({"standardize": "zscore"}, "standardize"),
        ({"standardize": True}, "standardize"),
        ({"n_copies": 0}, "n_copies"),
        ({"n_copies": 2.0}, "n_copies"),
        ({"min_obs": -1}, "min_obs"),
        ({"fill_value": "zero"}, "fill_value"),
        ({"fill_value": math.inf}, "fill_value"),
        ({"cap": -1.0}, "cap"),
        ({"clean": 1}, "clean"),
    ],
)
def test_option_validation(tmp_path, ctrp_matrix, opts, match):
    _write_ctrp(tmp_path / "ctrp_ec50", ctrp_matrix)
    with pytest.raises(ParameterError, match=match):
        load_ctrp_ec50(tmp_path, **opts)


def test_load_dataset_dispatch_and_errors(tmp_path, ctrp_matrix):
    _write_ctrp(tmp_path / "ctrp_ec50", ctrp_matrix)
    ds = load_dataset("ctrp_ec50", tmp_path, cap=None, n_copies=1)
    assert ds.name == "ctrp_ec50" and ds.shape == (4, 3)
    with pytest.raises(ParameterError, match="unknown dataset"):
        load_dataset("gdsc", tmp_path)
    with pytest.raises(ParameterError, match="cap"):
        load_dataset("movielens_100k", tmp_path, cap=100.0)


def test_dataset_is_frozen(tmp_path, ctrp_matrix):
    _write_ctrp(tmp_path / "ctrp_ec50", ctrp_matrix)
    ds = load_ctrp_ec50(tmp_path)
    with pytest.raises(AttributeError):
        ds.name = "other"
    assert ds.n_observed == 2 * 7


def test_paper_tables():
    assert DATASETS == ("ccle_ec50", "ccle_ic50", "ctrp_ec50", "movielens_100k")
    assert PAPER_K_VALUES["ccle_ec50"] == PAPER_K_VALUES["ccle_ic50"] == (5, 10, 15, 20)
    assert PAPER_K_VALUES["ctrp_ec50"] == PAPER_K_VALUES["movielens_100k"] == (20, 100, 150)
    assert set(PAPER_TABLE1) == {(n, k) for n in DATASETS for k in PAPER_K_VALUES[n]}
    assert PAPER_TABLE1[("ccle_ec50", 5)] == (0.35, 0.50)
    assert PAPER_TABLE1[("ccle_ic50", 20)] == (0.13, 0.09)
    assert PAPER_TABLE1[("ctrp_ec50", 100)] == (0.48, 1.91)
    assert PAPER_TABLE1[("movielens_100k", 150)] == (0.05, 0.26)
    for spec in PAPER_SPECS.values():
        assert spec.copied_shape == (spec.shape[0], 2 * spec.shape[1])
