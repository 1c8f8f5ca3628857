"""Sparse input (docs/sparse.md): the sparse store, its converters, and the masked fit
of a sparse input, which equals the in-memory masked fit of the densified matrix (NaN at
every unobserved entry) up to the rounding of the sums' order."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp
from _support import StopFit, assert_same_chain, count_pivots, stop_at

import dask_bid.interface.sparse_io as sio
from dask_bid import (
    BayesianID,
    CorruptStoreError,
    IncompleteStoreError,
    InputShapeError,
    NonFiniteInputError,
    OutputExistsError,
    ParameterError,
)
from dask_bid.engine.sparse_backend import dense_columns, plan_sparse_layout
from dask_bid.engine.sparse_store import SPARSE_ATTR, open_sparse
from dask_bid.interface import bayesian_id
from dask_bid.interface.sparse_io import convert_sparse, convert_triplets, scan_triplets

pytestmark = pytest.mark.timeout(240)

M, N, K = 150, 60, 4
# two pivot attempts an iteration, not the default 8 (tests/test_engine_masked.py, KW)
KW = dict(n_iter=20, burn_in=6, thin=2, random_state=3, block_size=20, missing="mask",
          n_trace_columns=4, init="random", n_pivot=2, n_redraw=0)  # redraw: its own test
SYNC = dict(client="synchronous")


def _matrix(seed=0, frac=0.7):
    """Low rank plus noise, ``frac`` of the entries unobserved (NaN); an observed 0 too."""
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
         + 0.05 * rng.standard_normal((M, N)))
    A[rng.random((M, N)) < frac] = np.nan
    A[0, 0] = 0.0  # an observed zero stays observed
    return A


def _coo(A):
    r, c = np.nonzero(~np.isnan(A))
    return sp.coo_matrix((A[r, c], (r, c)), shape=A.shape)


def _dense(src):
    return dense_columns(src.array, range(src.shape[1]))


def _write_triplets(path, A, *, sep="\t", base=0, header="row\tcol\tvalue", extra=True,
                    seed=0):
    r, c = np.nonzero(~np.isnan(A))
    order = np.random.default_rng(seed).permutation(r.size)  # any order of lines
    with open(path, "w") as fh:
        if header:
            fh.write(header.replace("\t", sep) + "\n")
        for k in order:
            fields = [str(r[k] + base), str(c[k] + base), repr(float(A[r[k], c[k]]))]
            if extra:
                fields.append("881250949")  # a timestamp, as in MovieLens: ignored
            fh.write(sep.join(fields) + "\n")
    return str(path)


# --------------------------------------------------------------- 1. converters
@pytest.mark.parametrize("fmt", ["coo", "csr", "csc", "array"])
def test_scipy_formats_round_trip(tmp_path, fmt):
    A = _matrix()
    X = {"coo": _coo, "csr": lambda A: _coo(A).tocsr(), "csc": lambda A: _coo(A).tocsc(),
         "array": lambda A: sp.coo_array(_coo(A))}[fmt](A)
    src = convert_sparse(X, tmp_path / "X.zarr", quiet=True, block_edges=[0, 13, 40, N])
    np.testing.assert_array_equal(_dense(src), A)  # NaN where unobserved, the 0 kept
    meta = open_sparse(tmp_path / "X.zarr").array.meta
    assert meta["format"] == "dask_bid.csc" and meta["version"] == 1
    assert meta["nnz"] == int((~np.isnan(A)).sum()) and meta["shape"] == [M, N]
    assert meta["block_edges"] == [0, 13, 40, N] and meta["complete"] is True


def test_triplet_files_round_trip_streamed_in_chunks(tmp_path, monkeypatch):
    A = _matrix(1)
    # chunks of 64 lines: the file is read in many chunks, bucketed into 3 blocks; the
    # columns from 7 on counted apart, as the ids beyond memory's reach are
    monkeypatch.setattr(sio, "LINES_PER_CHUNK", 64)
    monkeypatch.setattr(sio, "_DENSE_COUNTS", 7)
    tsv = _write_triplets(tmp_path / "r.tsv", A, base=1)
    src = convert_triplets(tsv, tmp_path / "r.zarr", index_base=1, shape=(M, N), quiet=True,
                           block_edges=[0, 20, 21, N])
    np.testing.assert_array_equal(_dense(src), A)
    csv = _write_triplets(tmp_path / "r.csv", A, sep=",", header=None, extra=False)
    src = convert_triplets(csv, tmp_path / "c.zarr", quiet=True)
    # without shape=, the largest indices set it
    r, c = np.nonzero(~np.isnan(A))
    assert src.shape == (r.max() + 1, c.max() + 1)
    np.testing.assert_array_equal(_dense(src), A[:src.shape[0], :src.shape[1]])


@pytest.mark.parametrize("columns", [(0, 0, 2), (0, 1, 1), (0, 1, 2.5), (-1, 1, 2),
                                     ("a", "b", "c"), (True, 1, 2)])
def test_the_fields_of_a_text_triplet_file_are_checked(tmp_path, columns):
    """(0, 0, 2) read the row ids as columns, (0, 1, 1) the column ids as values, 2.5 was
    truncated, -1 read the last field, names raised int()'s error."""
    f = tmp_path / "t.txt"
    f.write_text("0 1 2.5\n1 0 1.5\n")
    with pytest.raises(ParameterError, match="columns must be 3 different 0-based field "
                                             "numbers"):
        scan_triplets(f, columns=columns)


@pytest.mark.parametrize("base", [0, 1])
def test_drop_empty_columns_keeps_the_files_columns_with_entries_named_by_their_ids(
        tmp_path, monkeypatch, base):
    """The file's columns 2 and 5 hold no entry (a NaN in 5): left out, the others
    renumbered in order across column blocks and chunks, named by their ids; a repeated
    entry is named by the file's ids; without the option the empty columns stay."""
    from dask_bid.engine.zarr_io import stored_column_names

    monkeypatch.setattr(sio, "LINES_PER_CHUNK", 3)
    entries = [(0, 0, 1.0), (1, 1, 2.0), (2, 3, 3.0), (0, 4, 4.0), (3, 6, 5.0),
               (1, 6, 6.0), (2, 0, 7.0), (1, 5, float("nan"))]
    f = tmp_path / "t.tsv"
    f.write_text("".join(f"{i + base}\t{j + base}\t{v}\n" for i, j, v in entries))
    src = convert_triplets(f, tmp_path / "d.zarr", index_base=base, quiet=True,
                           drop_empty_columns=True, block_edges=[0, 2, 5])
    kept = [0, 1, 3, 4, 6]
    want = np.full((4, 5), np.nan)
    for i, j, v in entries:
        if j in kept and not np.isnan(v):
            want[i, kept.index(j)] = v
    np.testing.assert_array_equal(_dense(src), want)
    assert stored_column_names(src.array) == [str(j + base) for j in kept]
    meta = src.array.meta["source"]
    assert meta["drop_empty_columns"] and meta["file_shape"] == [4, 7]
    full = convert_triplets(f, tmp_path / "f.zarr", index_base=base, quiet=True)
    assert full.shape == (4, 7)
    assert stored_column_names(full.array) == (None if base == 0 else
                                               [str(j + 1) for j in range(7)])
    # ids of any size (here beyond the dense count, 2^26): their columns kept, in order,
    # without a count per id (ids of 2e7 with a few lines were refused as a matrix of
    # 2e7 columns, the option no help)
    big = tmp_path / "big.tsv"
    big.write_text("".join(f"{i + base}\t{j + base}\t{v}\n" for i, j, v in
                           [(0, 90_000_000, 1.0), (1, 5, 2.0), (2, 90_000_000, 3.0),
                            (0, 70_000_000, 4.0)]))
    wide = convert_triplets(big, tmp_path / "w.zarr", index_base=base, quiet=True,
                            drop_empty_columns=True)
    assert wide.shape == (3, 3)
    assert stored_column_names(wide.array) == [str(j + base) for j in (5, 70_000_000,
                                                                       90_000_000)]
    np.testing.assert_array_equal(_dense(wide), [[np.nan, 4.0, 1.0], [2.0, np.nan, np.nan],
                                                 [np.nan, np.nan, 3.0]])
    f.write_text(f.read_text() + f"{2 + base}\t{6 + base}\t9\n{2 + base}\t{6 + base}\t8\n")
    with pytest.raises(InputShapeError, match=f"gives entry \\(row {2 + base}, column "
                                              f"{6 + base}\\) more than once"):
        convert_triplets(f, tmp_path / "e.zarr", index_base=base, quiet=True,
                         drop_empty_columns=True)


def test_nan_values_are_dropped_and_counted(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("0,0,1.5\n1,1,nan\n2,1,-2\n")
    scan = scan_triplets(path)
    assert scan.shape == (3, 2) and scan.nnz == 2 and scan.n_nan == 1 and not scan.header
    src = convert_triplets(path, tmp_path / "t.zarr", quiet=True)
    assert src.array.meta["n_nan_dropped"] == 1
    np.testing.assert_array_equal(_dense(src), [[1.5, np.nan], [np.nan, np.nan],
                                                [np.nan, -2.0]])
    # a NaN at the largest row or column index: without shape= the largest indices of
    # every entry set the shape (the NaN's row was "outside the shape 2 x 2 given")
    last = tmp_path / "last.csv"
    last.write_text("0,0,1.5\n1,1,2\n2,0,nan\n")
    assert scan_triplets(last).shape == (3, 2)
    assert convert_triplets(last, tmp_path / "last.zarr", quiet=True).shape == (3, 2)
    # a scipy matrix's stored NaN: dropped and counted too (no count was written)
    X = sp.coo_matrix(([1.0, np.nan, 2.0], ([0, 1, 1], [0, 0, 1])), shape=(2, 2))
    assert convert_sparse(X, tmp_path / "x.zarr", quiet=True).array.meta["n_nan_dropped"] == 1


def test_missing_value_markers_are_unobserved_entries(tmp_path):
    """R's NA (and #N/A, NULL ...) as a value: before, a later line was refused as "not a
    triplet of numbers" and a first line was taken for a header and dropped."""
    path = tmp_path / "t.csv"
    path.write_text("0,1,NA\n0,0,1.5\n1,1,\"NA\"\n2,1,-2\n1,0,#N/A\n")
    scan = scan_triplets(path)
    assert scan.shape == (3, 2) and scan.nnz == 2 and scan.n_nan == 3 and not scan.header
    src = convert_triplets(path, tmp_path / "t.zarr", quiet=True)
    np.testing.assert_array_equal(_dense(src), [[1.5, np.nan], [np.nan, np.nan],
                                                [np.nan, -2.0]])


@pytest.mark.parametrize("text,kw,error,match", [
    ("0,0,1\n1,1,2\n0,0,3\n", {}, InputShapeError,
     r"gives entry \(row 0, column 0\) more than once"),
    ("0,0,1\n5,1,2\n", {"shape": (3, 2)}, InputShapeError,
     r"line 2: entry \(row 5, column 1\) lies outside the shape 3 x 2 given; give a "
     r"larger shape, or none \(the largest indices then set it\)\.$"),
    # an index equal to the shape: a file counting from 1, read from 0
    ("1,1,1\n2,2,2\n3,3,3\n", {"shape": (3, 3)}, InputShapeError,
     r"line 3: .* lies outside the shape 3 x 3 given; .*; or, if the file counts from 1, "
     r"pass index_base=1 \(--index-base 1\)\.$"),
    ("0,0,1\n1,1,2\n", {"index_base": 1}, InputShapeError,
     r"line 1: index 0 is below the first index 1"),
    ("0,0,1\n1.5,1,2\n", {}, InputShapeError, r"line 2: row 1.5 and column 1 must be"),
    ("0,0,1\n1,1,inf\n", {}, NonFiniteInputError, r"line 2: the value is infinite"),
    ("r,c,v\n0,0,1\n1;1;2\n", {}, InputShapeError,
     r"line 3: '1;1;2' is not a \(row, column, value\) triplet"),
    # a bad first line without a letter is no header: named, not skipped with its entry
    ("0;0;1.5\n1,1,2\n2,0,3\n0,2,1\n1,0,1\n", {}, InputShapeError,
     r"line 1: '0;0;1.5' is not a \(row, column, value\) triplet"),
])
def test_triplet_refusals(tmp_path, text, kw, error, match):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(error, match=match):
        convert_triplets(path, tmp_path / "t.zarr", quiet=True, **kw)
    assert not (tmp_path / "t.zarr").exists()  # nothing is left behind


def test_parquet_files_round_trip_by_column_name_and_position(tmp_path, monkeypatch):
    """A real Parquet file (pyarrow, the [parquet] extra; in [test]), read in batches:
    the same store as the text file, with the fields picked by name or by position."""
    pa = pytest.importorskip("pyarrow", reason="the [parquet] extra (pyarrow) is needed")
    import pyarrow.parquet as pq

    A = _matrix(2)
    r, c = np.nonzero(~np.isnan(A))
    order = np.random.default_rng(1).permutation(r.size)  # any order of rows
    table = pa.table({"user": (r[order] + 1).astype(np.int32),
                      "stamp": np.full(r.size, 881250949, dtype=np.int64),  # ignored
                      "item": (c[order] + 1).astype(np.int64),
                      "rating": A[r, c][order].astype(np.float32).astype(np.float64)})
    path = tmp_path / "r.parquet"
    # several row groups and 64-row batches: the file is read in many pieces
    pq.write_table(table, path, row_group_size=200)
    monkeypatch.setattr(sio, "LINES_PER_CHUNK", 64)
    want = np.full((M, N), np.nan)
    want[r[order], c[order]] = table.column("rating").to_numpy()
    by_name = convert_triplets(path, tmp_path / "n.zarr", columns=("user", "item", "rating"),
                               index_base=1, shape=(M, N), quiet=True,
                               block_edges=[0, 25, N])
    np.testing.assert_array_equal(_dense(by_name), want)
    by_pos = convert_triplets(path, tmp_path / "p.zarr", columns=(0, 2, 3), index_base=1,
                              shape=(M, N), quiet=True)
    np.testing.assert_array_equal(_dense(by_pos), want)
    # a NaN rating is unobserved, as in a text file; a duplicate is refused naming it
    t2 = table.set_column(3, "rating", pa.array(np.r_[np.nan, want[r[order], c[order]][1:]]))
    pq.write_table(t2, tmp_path / "nan.parquet")
    src = convert_triplets(tmp_path / "nan.parquet", tmp_path / "nan.zarr",
                           columns=("user", "item", "rating"), index_base=1, shape=(M, N),
                           quiet=True)
    assert src.array.meta["nnz"] == r.size - 1
    dup = pa.concat_tables([table, table.slice(5, 1)])
    pq.write_table(dup, tmp_path / "dup.parquet")
    dr, dc = r[order][5] + 1, c[order][5] + 1  # in the file's terms (index_base=1)
    with pytest.raises(InputShapeError, match=rf"\(row {dr}, column {dc}\) more than once"):
        convert_triplets(tmp_path / "dup.parquet", tmp_path / "dup.zarr",
                         columns=("user", "item", "rating"), index_base=1, shape=(M, N),
                         quiet=True)
    assert not (tmp_path / "dup.zarr").exists()
    # ids as strings: one line naming the column (was numpy's "could not convert string
    # to float" and a traceback log on the command line)
    ids = pa.table({"user": [f"u{i}" for i in r], "item": c, "rating": A[r, c]})
    pq.write_table(ids, tmp_path / "ids.parquet")
    with pytest.raises(InputShapeError, match="column 'user' \\(row\\) holds .*string values, "
                                              "not numbers.*pandas.factorize"):
        convert_triplets(tmp_path / "ids.parquet", tmp_path / "ids.zarr",
                         columns=("user", "item", "rating"), quiet=True)


def test_parquet_without_pyarrow_names_the_extra(tmp_path, monkeypatch):
    # pyarrow made unimportable for this test (None in sys.modules makes `import` raise
    # ImportError), as on an install without the [parquet] extra
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    path = tmp_path / "t.parquet"
    path.write_bytes(b"PAR1")
    with pytest.raises(ParameterError, match=r"pip install 'dask_bid\[parquet\]'"):
        convert_triplets(path, tmp_path / "t.zarr", quiet=True)


def test_the_python_converters_refuse_a_store_a_fit_reads_and_paths_go_absolute(
        tmp_path, monkeypatch):
    """convert_sparse / convert_triplets(overwrite=True) replaced a store a running fit
    read (the fit then died, its run lost), where to_zarr and the command line refuse it;
    a relative store path named another folder on a worker started elsewhere."""
    import os

    from dask_bid import OutputLockedError
    from dask_bid.engine.lock import hold_for_reading

    A = _matrix()
    path = tmp_path / "X.zarr"
    convert_sparse(_coo(A), path, quiet=True)
    fd = hold_for_reading(str(path))  # as a running fit holds its input
    assert fd is not None
    try:
        with pytest.raises(OutputLockedError, match="is the input of a dask-bid fit still"):
            convert_sparse(_coo(A), path, quiet=True, overwrite=True)
        f = tmp_path / "t.tsv"
        f.write_text("0\t0\t1\n1\t1\t2\n")
        with pytest.raises(OutputLockedError, match="is the input of a dask-bid fit still"):
            convert_triplets(f, path, quiet=True, overwrite=True)
    finally:
        os.close(fd)
    monkeypatch.chdir(tmp_path)
    src = open_sparse("X.zarr")
    assert os.path.isabs(src.array.path) and src.path == str(path)


def test_a_sparse_store_with_rewritten_rows_is_refused_not_crashed(tmp_path):
    """Row indices rewritten in a chunk (bytes that still decode): a row beyond M went to
    the kernels, which index without bounds checks (a segmentation fault); rows out of
    order fitted a shuffled matrix without a word."""
    import zarr

    A = _matrix()
    for bad in (10**8, 0):
        src = convert_sparse(_coo(A), tmp_path / "X.zarr", quiet=True, overwrite=True)
        rows = zarr.open_group(str(src.path), mode="r+")["blocks/b00000/indices"]
        rows[5] = bad if bad else rows[7]  # beyond M; or equal to a later row: not increasing
        with pytest.raises(CorruptStoreError, match="row indices are out of range .* or out "
                                                    "of order within a column"):
            bayesian_id(str(src.path), K, n_iter=4, burn_in=1, random_state=0,
                        missing="mask", client="synchronous")


@pytest.mark.parametrize("lost", ["blocks/b00001/data/c/0", "blocks/b00000/indices/c/0",
                                  "indptr/c/0"])
def test_a_sparse_store_with_a_lost_chunk_file_is_refused(tmp_path, lost):
    """Zarr reads a lost chunk as zeros: a fit of MSE 0, or a wrong one, without a word
    (the entries' chunks are all written, so a missing one is lost; the column pointers
    are checked against the entry count when read)."""
    import shutil

    A = _matrix()
    src = convert_sparse(_coo(A), tmp_path / "X.zarr", quiet=True, block_edges=[0, 30, N])
    bayesian_id(str(src.path), K, n_iter=4, burn_in=1, random_state=0, missing="mask",
                client="synchronous")  # intact: fitted
    path = tmp_path / "X.zarr" / lost
    assert path.is_file()
    path.unlink()
    with pytest.raises(CorruptStoreError, match="sparse store at .* is damaged"):
        bayesian_id(str(tmp_path / "X.zarr"), K, n_iter=4, burn_in=1, random_state=0,
                    missing="mask", client="synchronous")
    shutil.rmtree(tmp_path / "X.zarr")


def test_refusals_of_the_destination_and_of_incomplete_stores(tmp_path):
    A = _matrix()
    convert_sparse(_coo(A), tmp_path / "X.zarr", quiet=True)
    with pytest.raises(OutputExistsError, match="exists; pass overwrite=True to replace it"):
        convert_sparse(_coo(A), tmp_path / "X.zarr", quiet=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "f.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="is not a sparse store; overwrite replaces only"):
        convert_sparse(_coo(A), tmp_path / "other", quiet=True, overwrite=True)
    # one column: refused before anything is written (the store was written, then
    # refused, and blocked the retry); a dense array: named (an AttributeError before)
    one = tmp_path / "one.csv"
    one.write_text("0,0,1\n1,0,2\n")
    with pytest.raises(InputShapeError, match="has shape 2 x 1; a matrix with at least"):
        convert_triplets(one, tmp_path / "one.zarr", quiet=True)
    with pytest.raises(InputShapeError, match="has shape 5 x 1"):
        convert_sparse(_coo(np.ones((5, 1))), tmp_path / "one2.zarr", quiet=True)
    with pytest.raises(ParameterError, match="takes a scipy.sparse matrix, got ndarray"):
        convert_sparse(np.ones((3, 3)), tmp_path / "dense.zarr", quiet=True)
    assert not any((tmp_path / n).exists() for n in ("one.zarr", "one2.zarr", "dense.zarr"))
    import zarr

    g = zarr.open_group(str(tmp_path / "X.zarr"), mode="r+")
    g.attrs[SPARSE_ATTR] = {**g.attrs[SPARSE_ATTR], "complete": False}
    with pytest.raises(IncompleteStoreError, match="was not completely written"):
        bayesian_id(str(tmp_path / "X.zarr"), K, **KW, **SYNC)


def test_scipy_duplicates_and_infinity_are_refused():
    X = sp.coo_matrix(([1.0, 2.0, 3.0], ([0, 0, 1], [0, 0, 1])), shape=(3, 3))
    with pytest.raises(InputShapeError, match=r"entry \(row 0, column 0\) more than once"):
        bayesian_id(X, 1, **KW)
    Y = sp.coo_matrix(([1.0, np.inf], ([0, 1], [0, 1])), shape=(3, 3))
    with pytest.raises(NonFiniteInputError, match=r"infinite value at \(row 1, column 1\)"):
        bayesian_id(Y, 1, **KW)


# --------------------------------------------------------------- 2. the fit
def _close(mem, spr):
    """The same chain up to rounding: the same bases and accept decisions, numbers to
    ~1e-10."""
    np.testing.assert_array_equal(mem.draws_columns, spr.draws_columns)
    np.testing.assert_array_equal(mem.trace["accepted"], spr.trace["accepted"])
    np.testing.assert_array_equal(mem.columns, spr.columns)
    np.testing.assert_allclose(spr.trace["sigma2"], mem.trace["sigma2"], rtol=1e-9)
    np.testing.assert_allclose(spr.trace["mse"], mem.trace["mse"], rtol=1e-9)
    np.testing.assert_allclose(spr.components, mem.components, rtol=0, atol=1e-9)
    assert spr.mse_observed == pytest.approx(mem.mse_observed, rel=1e-10)
    assert spr.mse == pytest.approx(mem.mse, rel=1e-10)


@pytest.mark.parametrize("sampler", ["collapsed", "aggressive", "plain", "search"])
def test_scipy_input_matches_the_in_memory_masked_fit(sampler):
    A = _matrix(2)
    kw = {**KW, "sampler": sampler, "temperature": 500.0 if sampler == "plain" else 1.0}
    mem = bayesian_id(A, K, **kw)
    spr = bayesian_id(_coo(A).tocsr(), K, **kw)
    _close(mem, spr)
    assert spr.trace["accepted"].any()  # swaps accepted: the comparison covers them
    np.testing.assert_array_equal(spr.C, A[:, spr.columns])  # NaN where unobserved


def test_pivot_swaps_match_the_in_memory_fit(monkeypatch):
    # the masked pivot swap: the products of its attempts from the sparse tiles
    calls = count_pivots(monkeypatch)
    A = _matrix(6)
    kw = {**KW, "init": "random", "n_pivot": 6, "n_anneal": 0, "n_redraw": 0}
    mem = bayesian_id(A, K, **kw)
    assert calls, "no pivot swap accepted: the comparison would not cover them"
    _close(mem, bayesian_id(_coo(A).tocsr(), K, **kw))


def test_redraw_swaps_match_the_in_memory_fit(monkeypatch):
    # the masked redraw swap: its attempts' products over each column's observed rows
    # from the sparse tiles
    calls = count_pivots(monkeypatch, "redraw")
    A = _matrix(6)
    kw = {**KW, "init": "random", "n_pivot": 2, "n_anneal": 0, "n_redraw": 4}
    mem = bayesian_id(A, K, **kw)
    assert calls, "no redraw swap accepted: the comparison would not cover them"
    _close(mem, bayesian_id(_coo(A).tocsr(), K, **kw))


def test_a_pooled_chain_matches_the_in_memory_fit():
    A = _matrix(4)
    kw = {**KW, "candidate_pool": 12, "pool_every": 4}
    _close(bayesian_id(A, K, **kw), bayesian_id(_coo(A).tocsr(), K, **kw))


def test_gbtn_all_candidates_and_two_chains_match_the_in_memory_fit():
    A = _matrix(8, frac=0.5)
    kw = {**KW, "model": "gbtn", "n_tries": "all", "n_chains": 2}
    _close(bayesian_id(A, K, **kw), bayesian_id(_coo(A).tocsc(), K, **kw))


def test_store_in_several_groups_matches_and_writes_c(tmp_path):
    A = _matrix(3)
    store = str(tmp_path / "A.zarr")
    convert_sparse(_coo(A), store, quiet=True, block_edges=[0, 25, N])
    mem = bayesian_id(A, K, **KW)
    # groups of 16 columns: the candidate and basis columns are gathered across groups
    out = str(tmp_path / "fit.zarr")
    res = bayesian_id(store, K, chunks=(M, 16), out=out, **KW, **SYNC)
    _close(mem, res)
    assert res.params["missing"] == "mask"
    # C in the output: dense M x K, NaN where unobserved
    np.testing.assert_array_equal(np.asarray(res.C), A[:, res.columns])
    from dask_bid import open_result

    back = open_result(out)
    np.testing.assert_array_equal(back.columns_, res.columns)
    assert back.mse_observed_ == res.mse_observed
    # the store is only read: an output inside it is refused
    from dask_bid import OutputLocationError

    with pytest.raises(OutputLocationError, match="is the input store .* or overlaps it"):
        bayesian_id(store, K, out=store + "/fit", **KW, **SYNC)


def test_layout_bounds_the_entries_of_a_group():
    counts = np.array([5, 1, 7, 0, 2] * 4)
    import dask_bid.engine.sparse_backend as sb

    lay = plan_sparse_layout(counts, (10, 20), 2)
    assert lay.row_tiles == ((0, 10),) and lay.groups == ((0, 20),)
    old = sb.TILE_ENTRIES
    try:
        sb.TILE_ENTRIES = 8
        lay = plan_sparse_layout(counts, (10, 20), 2)
    finally:
        sb.TILE_ENTRIES = old
    for a, b in lay.groups:
        assert counts[a:b].sum() <= 8 or b - a == 1
    assert lay.groups[0] == (0, 2) and lay.groups[-1][1] == 20


def test_default_init_is_the_sketch_of_the_zero_filled_matrix():
    from dask_bid.baselines import select_columns
    from dask_bid.baselines._sparse import sparse_select_columns
    from dask_bid.engine.sparse_store import sparse_source

    A = _matrix(4, frac=0.5)
    rng = np.random.default_rng(11)
    J = sparse_select_columns(sparse_source(_coo(A)), K, "auto", np.random.default_rng(11))
    np.testing.assert_array_equal(
        J, select_columns(np.nan_to_num(A), K, method="randomized", random_state=rng))
    res = bayesian_id(_coo(A), K, **{**KW, "init": "auto", "n_iter": 4, "burn_in": 2})
    assert res.columns.size == K


def test_refusals_of_sparse_fits(tmp_path):
    X = _coo(_matrix())
    with pytest.raises(ParameterError, match="unobserved, not zero: pass missing=.mask."):
        bayesian_id(X, K, **{**KW, "missing": "zero"})
    with pytest.raises(ParameterError, match="mask= does not apply to a sparse input"):
        bayesian_id(X, K, mask=np.ones((M, N), bool), **KW)
    with pytest.raises(ParameterError, match="init='cpqr' needs the dense matrix"):
        bayesian_id(X, K, **{**KW, "init": "cpqr"})
    B = _matrix()
    B[:, 7] = np.nan
    with pytest.raises(InputShapeError, match=r"columns \[7\] have no observed entry"):
        bayesian_id(_coo(B), K, **KW)


def test_a_store_from_a_file_counting_from_1_read_from_0_is_refused_naming_index_base(
        tmp_path):
    """Its column 0 is empty: refused from the store's column counts, before any pass,
    with the conversion's fix."""
    A = _matrix()
    path = tmp_path / "t.tsv"
    _write_triplets(path, A, base=1)
    convert_triplets(path, tmp_path / "t0.zarr", quiet=True)  # index_base=0, the default
    with pytest.raises(InputShapeError, match=r"columns \[0\] have no observed entry.*"
                       "convert it with index_base=1"):
        bayesian_id(str(tmp_path / "t0.zarr"), K, **KW)
    convert_triplets(path, tmp_path / "t1.zarr", index_base=1, quiet=True)
    assert bayesian_id(str(tmp_path / "t1.zarr"), K, **KW).components.shape == (K, N)


def test_estimator_refuses_scipy_input_with_missing_zero():
    from dask_bid import InputDTypeError

    with pytest.raises(InputDTypeError, match="not supported with missing='zero': its "
                                              "unstored entries are unobserved"):
        BayesianID(K).fit(_coo(_matrix()))


def test_estimator_fits_scipy_input():
    A = _matrix(5)
    est = BayesianID(K, **{k: v for k, v in KW.items()}).fit(_coo(A))
    mem = BayesianID(K, **KW).fit(A)
    np.testing.assert_array_equal(est.columns_, mem.columns_)
    assert est.mse_observed_ == pytest.approx(mem.mse_observed_, rel=1e-10)
    # any case of "mask", as every other check takes it (missing="MASK" was refused here
    # as "not supported with missing='zero'")
    upper = BayesianID(K, **{**KW, "missing": "MASK"}).fit(_coo(A))
    np.testing.assert_array_equal(upper.columns_, est.columns_)


def test_a_masked_model_transforms_and_scores_the_sparse_input_it_was_fitted_on():
    """fit took the scipy.sparse matrix; transform and score refused the very same one
    ("sparse input is not supported: the ID reads every entry"). Now as for the dense
    matrix with NaN at the unstored entries: C with NaN there, the masked score
    (-score = mse_observed_ on the training matrix)."""
    from dask_bid import InputDTypeError

    A = _matrix(5)  # NaN at the unobserved entries
    est = BayesianID(K, **KW).fit(_coo(A))
    C = est.transform(_coo(A))
    np.testing.assert_array_equal(C, A[:, est.columns_])  # NaN where unstored
    assert est.score(_coo(A)) == pytest.approx(est.score(A), rel=1e-12)
    assert est.score(_coo(A)) == pytest.approx(-est.mse_observed_, rel=1e-9)
    for fmt in ("csr", "csc"):
        assert est.score(_coo(A).asformat(fmt)) == pytest.approx(est.score(A), rel=1e-12)
    with pytest.raises(ParameterError, match="mask= does not apply to a scipy.sparse X"):
        est.score(_coo(A), mask=~np.isnan(A))
    with pytest.raises(InputShapeError, match="X has 59 features"):
        est.score(_coo(A[:, 1:]))
    # a missing='zero' model still refuses it (its unstored entries are not zeros)
    dense = BayesianID(K, **{**KW, "missing": "zero"}).fit(np.nan_to_num(A))
    with pytest.raises(InputDTypeError, match="sparse input is not supported"):
        dense.score(_coo(A))


def test_process_cluster_matches_sync_and_resume(tmp_path, shared_client):
    """Two worker processes (the reads happen on the workers): bitwise the synchronous
    fit; an interrupted fit resumed from its checkpoint: bitwise the whole fit."""
    A = _matrix(6)
    store = str(tmp_path / "A.zarr")
    convert_sparse(_coo(A), store, quiet=True, block_edges=[0, 30, N])
    kw = {**KW, "checkpoint_every": 5}
    sync = bayesian_id(store, K, chunks=(M, 16), **kw, **SYNC)
    res = bayesian_id(store, K, chunks=(M, 16), client=shared_client, **kw)
    assert_same_chain(sync, res)

    stop = stop_at(12)

    out = str(tmp_path / "fit.zarr")
    with pytest.raises(StopFit):
        bayesian_id(store, K, chunks=(M, 16), out=out, callback=stop, **kw, **SYNC)
    resumed = bayesian_id(store, K, chunks=(M, 16), out=out, resume=True, **kw, **SYNC)
    assert_same_chain(sync, resumed)


def test_every_sparse_refusal_has_a_row_in_the_docs():
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text()
    for phrase in ("sparse input is not supported with missing='zero'",
                   "a sparse input's entries that are not stored are unobserved, not zero",
                   "mask= does not apply to a sparse input",
                   "init='cpqr' needs the dense matrix",
                   "the sparse input holds entry (row 0, column 0) more than once",
                   "the sparse input holds an infinite value",
                   "is not a (row, column, value) triplet of numbers",
                   "must be integers (the triplet's first two fields are indices)",
                   "is below the first index 1",
                   "lies outside the shape 3 x 2 given",
                   "the value is infinite; replace it",
                   "gives entry (row 0, column 0) more than once",
                   "reading Parquet needs pyarrow: pip install 'dask_bid[parquet]'",
                   "exists; pass overwrite=True to replace it, or choose another path",
                   "the sparse store at 'X.zarr' was not completely written",
                   "this dask_bid reads 'dask_bid.csc' up to version 1",
                   "is a triplet file: its absent entries are unobserved, not zero",
                   "describes a triplet file: pass --format triplets too"):
        assert re.search(re.escape(phrase), text), phrase


def test_a_newer_store_version_is_refused(tmp_path):
    import zarr

    from dask_bid import CorruptStoreError

    convert_sparse(_coo(_matrix()), tmp_path / "X.zarr", quiet=True)
    g = zarr.open_group(str(tmp_path / "X.zarr"), mode="r+")
    g.attrs[SPARSE_ATTR] = {**g.attrs[SPARSE_ATTR], "version": 2}
    with pytest.raises(CorruptStoreError, match="version 2; this dask_bid reads "
                                                "'dask_bid.csc' up to version 1"):
        bayesian_id(str(tmp_path / "X.zarr"), K, **KW, **SYNC)


def test_huge_values_are_rescaled_as_in_memory():
    # max|A| near 1e200: found by the first pass over the observed entries, fitted as
    # A / 2^e as the in-memory masked fit is
    A = _matrix(7) * 1e200
    with pytest.warns(RuntimeWarning, match="reported as inf"):
        mem = bayesian_id(A, K, **KW)
    with pytest.warns(RuntimeWarning, match="reported as inf"):
        spr = bayesian_id(_coo(A), K, **KW)
    assert spr.params["input_scale_log2"] == mem.params["input_scale_log2"] == 500
    np.testing.assert_array_equal(spr.draws_columns, mem.draws_columns)
    np.testing.assert_allclose(spr.components, mem.components, rtol=0, atol=1e-9)


def test_masked_estimator_says_it_takes_sparse_input():
    pytest.importorskip("sklearn")
    from sklearn.utils import get_tags

    assert get_tags(BayesianID(3, missing="mask")).input_tags.sparse
    assert not get_tags(BayesianID(3)).input_tags.sparse


def test_a_sparse_store_replaced_during_the_fit_fails_it_as_changed(tmp_path):
    """A sparse store replaced mid-fit by one of another entry count failed deep in a
    task (IndexError; "internal error" on the command line): said as the input changed."""
    import shutil

    from dask_bid import InputChangedError
    from dask_bid.engine.zarr_io import output_status

    path, other = str(tmp_path / "S.zarr"), str(tmp_path / "T.zarr")
    convert_sparse(_coo(_matrix()), path)
    convert_sparse(_coo(_matrix(seed=5, frac=0.3)), other)
    out = str(tmp_path / "r.zarr")

    def swap(st):
        if st.iteration == 5:
            shutil.rmtree(path)
            shutil.copytree(other, path)

    with pytest.raises(InputChangedError, match="changed while the fit read it"):
        bayesian_id(path, K, out=out, callback=swap, **{**KW, "n_iter": 30}, **SYNC)
    assert output_status(out)[0] == "failed"

    # whatever fails after the change (on a cluster, a pass reading the new store) is
    # reported as the change, the failure its cause
    shutil.rmtree(path)
    convert_sparse(_coo(_matrix()), path)

    def swap_then_fail(st):
        swap(st)
        if st.iteration == 6:
            raise IndexError("index 836 is out of bounds")

    with pytest.raises(InputChangedError, match="changed while the fit read it") as info:
        bayesian_id(path, K, out=out, overwrite=True, callback=swap_then_fail,
                    **{**KW, "n_iter": 30}, **SYNC)
    # the failure its cause: the planted one, or the reader's check of the rows it read
    # from the new store (out of range for the pointers read before)
    assert isinstance(info.value.__cause__, (IndexError, CorruptStoreError))
    assert "changed while" in output_status(out)[1]


# ------------------------------------------------------------ text triplet files, odd lines
@pytest.mark.parametrize("text, want", [
    # all fields quoted (csv.QUOTE_ALL), a UTF-8 byte-order mark before a file without header
    ('"0","0","1.5"\n"1","1","2"\n', [[1.5, np.nan], [np.nan, 2]]),
    ("\ufeff0,0,1.5\n1,1,2\n", [[1.5, np.nan], [np.nan, 2]]),
    # an empty value is unobserved, as NA is (and as in the dense reader)
    ("0,0,1.5\n1,1,\n1,0,3\n", [[1.5, np.nan], [3, np.nan]]),
    # ... also at the end of a tab-separated line (strip() took the tab off with it)
    ("0\t0\t1.5\n1\t1\t\n0\t1\t4\n", [[1.5, 4], [np.nan, np.nan]]),
], ids=["quoted", "bom", "empty-value", "empty-value-tab"])
def test_triplet_lines_read_as_written(text, want, tmp_path):
    src = tmp_path / ("t.tsv" if "\t" in text else "t.csv")
    src.write_bytes(text.encode("utf-8"))
    want = np.asarray(want, dtype=float)
    got = _dense(convert_triplets(src, tmp_path / "t.zarr", shape=want.shape, quiet=True))
    np.testing.assert_array_equal(got, want)


def test_a_shape_no_triplet_file_can_index_is_refused(tmp_path):
    """--shape 10**20,2 made a store whose fit failed with a MemoryError
    (its row chunks listed)."""
    src = tmp_path / "t.csv"
    src.write_text("0,0,1.5\n1,1,2\n")
    with pytest.raises(ParameterError, match=r"shape \(100000000000000000000, 2\) is larger "
                       r"than any triplet file can index \(at most 2\*\*53"):
        convert_triplets(src, tmp_path / "t.zarr", shape=(10**20, 2), quiet=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


@pytest.mark.parametrize("text, match", [
    # a quoted value holding the separator was read as its first half (1.0)
    ('0,0,"1,234.5"\n1,1,2\n', "line 1: .* is not a \\(row, column, value\\) triplet"),
    # an unbalanced quote was taken off (7)
    ('0,0,"7\n1,1,2\n', "line 1: .* is not a \\(row, column, value\\) triplet"),
    # a first line with a typo was dropped as a "header", with its entry
    ("0,O,1.5\n1,1,2\n2,0,3\n", "line 1: '0,O,1.5' is not a"),
    # a pair given twice, once as NaN: which one?
    ("1,1,2\n1,1,nan\n0,0,1\n", r"gives entry \(row 1, column 1\) more than once"),
    # a negative index: not "pass index_base=1" (which makes it worse)
    ("-1,0,5\n1,1,2\n", "index -1 is below the first index 0: rows and columns are "
                          "numbered from 0"),
    ("2,1.0000001,3\n", "column 1.0000001 must be integers"),
    # read as float64 and cast: a numpy cast warning, then "index 0 is below the first
    # index 0" (and beyond 2**53 indices were rounded without a word)
    ("0,0,1.5\n1,1,2\n99999999999999999999,0,3\n", "line 3: row 1e\\+20 or column 0 "
     "\\(as read, in float64: rounded from 2\\*\\*53 on\\) is too large to be an index"),
    # the number as read, said to be rounded (the file has ...993)
    ("9007199254740993,0,3\n", "line 1: row 9007199254740992 or column 0 \\(as read, in "
     "float64: rounded from 2\\*\\*53 on\\) is too large to be an index"),
], ids=["quoted-separator", "unbalanced-quote", "typo-first-line", "duplicate-nan",
        "negative", "fraction", "huge-index", "index-above-2**53"])
def test_triplet_lines_that_would_be_misread_are_refused(text, match, tmp_path):
    src = tmp_path / "t.csv"
    src.write_text(text)
    with pytest.raises((InputShapeError, ParameterError), match=match):
        convert_triplets(src, tmp_path / "t.zarr", quiet=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.csv"]


def test_a_headers_names_are_said_as_read(tmp_path):
    """Fields are taken by position; the header's names for them are given back (the
    command line prints them): "rating,user,item" read by position makes the ratings the
    rows."""
    from dask_bid.interface.sparse_io import triplet_header

    src = tmp_path / "t.csv"
    src.write_text("rating,user_id,item_id\n5,1,1\n4,2,2\n")
    assert triplet_header(src) == ["rating", "user_id", "item_id"]
    assert triplet_header(src, columns=(1, 2, 0)) == ["user_id", "item_id", "rating"]
    src.write_text("1,1,5\n2,2,4\n")
    assert triplet_header(src) is None
