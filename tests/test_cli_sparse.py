"""Sparse input on the command line: `dask-bid fit FILE --format triplets --missing mask`
converts a (row, column, value) file once into a sparse store next to OUT and fits it
(the Python API's fit of that store); `info` shows the observed count and fraction."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _support import assert_same_chain
from test_cli import FAST, assert_one_line_error

from dask_bid.engine import read_result
from dask_bid.interface import bayesian_id
from dask_bid.interface.cli import main

pytestmark = pytest.mark.timeout(240)

K = 2


def _triplets(path, seed=0, M=40, N=12, base=1):
    """A MovieLens-like file: user, item, rating, timestamp, tab separated, 1-based."""
    from dask_bid.interface.demo import make_demo_matrix

    A, _, _ = make_demo_matrix(M, N, K, seed=seed)
    A = A.copy()
    A[np.random.default_rng(seed).random(A.shape) < 0.6] = np.nan
    r, c = np.nonzero(~np.isnan(A))
    with open(path, "w") as fh:
        for i, j in zip(r, c, strict=True):
            fh.write(f"{i + base}\t{j + base}\t{float(A[i, j])!r}\t881250949\n")
    return A


def test_fit_a_triplet_file_end_to_end(tmp_path, capsys):
    src = tmp_path / "ratings.tsv"
    A = _triplets(src)
    out = tmp_path / "runs" / "fit.zarr"
    args = ["fit", str(src), "--k", str(K), "--out", str(out), *FAST, "--missing", "mask",
            "--format", "triplets", "--index-base", "1", "--shape", "40,12"]
    assert main(args) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    n = int((~np.isnan(A)).sum())
    store = tmp_path / "runs" / "ratings.tsv.zarr"
    assert f"converted    {src} -> {store} ({n} observed of 40 x 12" in err
    res = read_result(str(out))
    api = bayesian_id(str(store), K, n_iter=40, burn_in=10, thin=2, random_state=3,
                      missing="mask", client="synchronous")
    assert_same_chain(api, res)
    np.testing.assert_array_equal(np.asarray(res.C), A[:, res.columns])  # NaN: unobserved
    # a second run reuses the store (the file is unchanged)
    assert main([*args, "--overwrite"]) == 0
    assert main(args[:4] + ["--out", str(tmp_path / "runs" / "b.zarr"), *args[6:]]) == 0
    assert f"(converted from {src} before; unchanged)" in capsys.readouterr().err
    # info: the store and the file, with the observed count and fraction
    assert main(["info", str(store)]) == 0
    text = capsys.readouterr().out
    assert "sparse store" in text and f"observed   {n} of 480 entries ({n / 480:.3%})" in text
    assert main(["info", str(src), "--format", "triplets", "--index-base", "1"]) == 0
    text = capsys.readouterr().out
    assert "triplet file" in text and f"observed   {n} of 480 entries" in text


def test_a_conversion_read_otherwise_is_replaced_only_with_overwrite(tmp_path, capsys):
    """The store converted for one fit is not silently converted again for another
    reading of the file (another --index-base) or another version of it: fits made on
    it read it (their resume checks its contents). As for a dense file."""
    import os

    src = tmp_path / "ratings.tsv"
    _triplets(src)
    store = tmp_path / "runs" / "ratings.tsv.zarr"
    fit = ["fit", str(src), "--k", str(K), *FAST, "--format", "triplets", "-q"]
    assert main([*fit, "--index-base", "1", "--out", str(tmp_path / "runs" / "a.zarr")]) == 0
    before = (store / "zarr.json").read_bytes()
    capsys.readouterr()
    assert main([*fit, "--index-base", "0", "--out", str(tmp_path / "runs" / "b.zarr")]) == 2
    assert_one_line_error(capsys.readouterr().err, "was converted from", "with --index-base 1",
                          "reads it with --index-base 0", "pass --overwrite")
    assert (store / "zarr.json").read_bytes() == before
    assert not (tmp_path / "runs" / "b.zarr").exists()
    st = os.stat(src)
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # another version
    assert main([*fit, "--index-base", "1", "--out", str(tmp_path / "runs" / "c.zarr")]) == 2
    assert_one_line_error(capsys.readouterr().err, "from an earlier version of",
                          "pass --overwrite")
    assert (store / "zarr.json").read_bytes() == before
    assert main([*fit, "--index-base", "1", "--out", str(tmp_path / "runs" / "c.zarr"),
                 "--overwrite"]) == 0
    # another file of the same size, its modification time set back (cp -p, touch -r)
    st = os.stat(src)
    text = src.read_text()
    src.write_text(text.replace("881250949", "881250948", 1))  # a timestamp: same size
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(src).st_size == st.st_size
    assert main([*fit, "--index-base", "1", "--out", str(tmp_path / "runs" / "d.zarr")]) == 2
    assert_one_line_error(capsys.readouterr().err, "from an earlier version of")


def test_a_sparse_store_is_fitted_as_it_is(tmp_path, capsys):
    import scipy.sparse as sp

    from dask_bid.interface.sparse_io import convert_sparse

    A = _triplets(tmp_path / "r.tsv", seed=2, base=0)
    r, c = np.nonzero(~np.isnan(A))
    convert_sparse(sp.coo_matrix((A[r, c], (r, c)), shape=A.shape), tmp_path / "s.zarr",
                   quiet=True)
    out = tmp_path / "fit.zarr"
    # without --missing: its absent entries are unobserved, the one reading of them
    assert main(["fit", str(tmp_path / "s.zarr"), "--k", str(K), "--out", str(out),
                 *FAST]) == 0
    err = capsys.readouterr().err
    assert ("missing      the absent entries of a sparse store are unobserved: --missing "
            "mask") in err, err
    assert read_result(str(out)).params["missing"] == "mask"
    # triplet options with a store: "drop them" (it said "pass --format triplets too",
    # which then said "--format triplets reads a local file": a circle)
    for cmd in (["fit", str(tmp_path / "s.zarr"), "--k", str(K), "--out",
                 str(tmp_path / "f2.zarr"), *FAST], ["info", str(tmp_path / "s.zarr")]):
        assert main([*cmd, "--shape", "50,12", "--index-base", "1"]) == 2
        assert_one_line_error(capsys.readouterr().err, "--shape, --index-base describe a "
                              "triplet file, and ", "is a store, which holds its shape and "
                              "indices: drop them.")
    assert not (tmp_path / "f2.zarr").exists()


@pytest.mark.parametrize("extra,fragments", [
    (["--format", "triplets", "--missing", "zero"],
     ["is a triplet file: its absent entries are unobserved, not zero; drop --missing zero"]),
    # a triplet option implies --format triplets, as for convert (it was refused)
    (["--missing", "mask", "--shape", "3,3"],
     ["line 1: entry (row 3, column 1) lies outside the shape 3 x 3"]),
    (["--missing", "mask", "--format", "dense", "--shape", "3,3"],
     ["--shape describes a triplet file: pass --format triplets too"]),
    (["--missing", "mask", "--format", "triplets", "--shape", "3,3"],
     ["line 1: entry (row 3, column 1) lies outside the shape 3 x 3"]),
    (["--missing", "mask", "--format", "triplets", "--shape", "4,2"],
     ["gives entry (row 0, column 0) more than once"]),
    # empty columns are said after the first pass, before the duplicate the second finds
    (["--missing", "mask", "--format", "triplets", "--shape", "4,4"],
     ["--shape 4,4 leaves columns 2, 3"]),
])
def test_refusals_are_one_line(tmp_path, capsys, extra, fragments):
    src = tmp_path / "t.tsv"
    src.write_text("3\t1\t2.5\n0\t0\t1\n0\t0\t2\n")
    code = main(["fit", str(src), "--k", "1", "--out", str(tmp_path / "o.zarr"), *FAST,
                 *extra])
    assert code == 2
    assert_one_line_error(capsys.readouterr().err, *fragments, progress_allowed=True)
    assert not (tmp_path / "o.zarr").exists()


def test_a_file_counting_from_1_names_the_columns_by_its_ids(tmp_path, capsys):
    """Read with --index-base 1, the store's column 99 is the file's item 100: the store
    records the file's ids as row and column names, so the summary, the result and info
    say 100 beside the position 99 (only positions were shown: the wrong items to a
    MovieLens user). A file counting from 0 gets no names (they would be the positions)."""
    src = tmp_path / "r.tsv"
    _triplets(src)
    out = tmp_path / "o.zarr"
    assert main(["fit", str(src), "--format", "triplets", "--index-base", "1", "--k", "2",
                 "--missing", "mask", "--out", str(out), *FAST]) == 0
    text = capsys.readouterr().out
    res = read_result(str(out))
    ids = [str(j + 1) for j in res.columns]
    assert f"names        {', '.join(ids)}" in text, text
    assert res.feature_names == [str(j + 1) for j in range(12)]
    assert res.sample_names == [str(i + 1) for i in range(40)]
    assert main(["info", str(tmp_path / "r.tsv.zarr")]) == 0
    assert "names      1, 2, 3, ..., 12 (the file's ids of the store's columns 0 to 11" in \
        capsys.readouterr().out
    zero = tmp_path / "z.tsv"
    _triplets(zero, base=0)
    assert main(["fit", str(zero), "--format", "triplets", "--k", "2", "--missing", "mask",
                 "--out", str(tmp_path / "z.zarr"), *FAST]) == 0
    assert "names " not in capsys.readouterr().out
    assert read_result(str(tmp_path / "z.zarr")).feature_names is None


def test_sep_space_alone_reads_triplets_as_whitespace_fields(tmp_path, capsys):
    """`--sep space` is a triplet option as `--sep tab` is (it was taken as "not given":
    the file was fitted as a dense 162 x 3 matrix without a word), whatever the suffix."""
    A = _triplets(tmp_path / "r.tsv", base=0)
    text = (tmp_path / "r.tsv").read_text().replace("\t", "   ")
    for name in ("r.txt", "r.csv"):
        (tmp_path / name).write_text(text)
        assert main(["info", str(tmp_path / name), "--sep", "space"]) == 0
        out = capsys.readouterr().out
        assert f"{name}: triplet file" in out and "shape      40 x 12" in out, out
        assert f"observed   {int((~np.isnan(A)).sum())} of 480" in out
        # the fit it advises reads the file as info did
        assert "`dask-bid fit FILE --format triplets --sep space --missing mask`" in out


def test_columns_a_file_skips_are_refused_before_the_fit_in_the_files_ids(tmp_path, capsys):
    """A file whose column ids skip some (a slice of MovieLens): refused right after the
    conversion, naming the file's own ids (it failed after the kernels compiled, in store
    positions, with Python advice); info lists them."""
    src = tmp_path / "slice.tsv"
    src.write_text("1\t1\t1.0\n2\t2\t2.0\n1\t4\t3.0\n3\t7\t1.5\n2\t1\t0.5\n")
    code = main(["fit", str(src), "--format", "triplets", "--index-base", "1", "--k", "1",
                 "--missing", "mask", "--out", str(tmp_path / "o.zarr"), *FAST])
    assert code == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "has no entry in column(s) 3, 5, 6 (3 in all)",
                          "pass --drop-empty-columns", progress_allowed=True)
    assert "kernels" not in err and not (tmp_path / "o.zarr").exists()
    assert "pass --drop-empty-columns to leave them out" in err
    assert main(["info", str(src), "--format", "triplets", "--index-base", "1"]) == 0
    assert "empty      3 column(s) without an entry (3, 5, 6; the file's ids)" in \
        capsys.readouterr().out
    assert main(["info", str(src), "--format", "triplets", "--index-base", "1",
                 "--drop-empty-columns"]) == 0
    assert "(3, 5, 6; the file's ids): left out by --drop-empty-columns (the store has 4 " \
        "columns" in capsys.readouterr().out
    # --drop-empty-columns: the store holds the file's columns 1, 2, 4, 7 as 0..3, named
    # by those ids; the fit's C holds the file's values
    out = tmp_path / "d.zarr"
    assert main(["fit", str(src), "--format", "triplets", "--index-base", "1", "--k", "1",
                 "--missing", "mask", "--drop-empty-columns", "--out", str(out), *FAST]) == 0
    text = capsys.readouterr().out
    res = read_result(str(out))
    assert res.feature_names == ["1", "2", "4", "7"] and res.n_features == 4
    file_ids = ["1", "2", "4", "7"]
    assert f"names        {file_ids[int(res.columns[0])]}" in text, text
    dense = np.full((3, 4), np.nan)
    for i, j, v in [(1, 1, 1.0), (2, 2, 2.0), (1, 4, 3.0), (3, 7, 1.5), (2, 1, 0.5)]:
        dense[i - 1, file_ids.index(str(j))] = v
    np.testing.assert_array_equal(np.asarray(res.C), dense[:, res.columns])
    # the same options again reuse the store; other options are told apart
    assert main(["fit", str(src), "--format", "triplets", "--index-base", "1", "--k", "1",
                 "--missing", "mask", "--drop-empty-columns", "--out",
                 str(tmp_path / "e.zarr"), *FAST]) == 0
    assert "(converted from" in capsys.readouterr().err
    assert main(["fit", str(src), "--format", "triplets", "--index-base", "1", "--k", "1",
                 "--missing", "mask", "--out", str(tmp_path / "f.zarr"), *FAST]) == 2
    assert "with --index-base 1 --columns 1,2,3 --drop-empty-columns, and this call" in \
        capsys.readouterr().err
    # --overwrite without the option: refused before the store a fit was made on is
    # replaced (it was replaced, then the refusal came)
    before = sorted(p.name for p in (tmp_path / "slice.tsv.zarr").rglob("*"))
    assert main(["fit", str(src), "--format", "triplets", "--index-base", "1", "--k", "1",
                 "--missing", "mask", "--out", str(tmp_path / "f.zarr"), "--overwrite",
                 *FAST]) == 2
    assert "has no entry in column(s) 3, 5, 6" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "slice.tsv.zarr").rglob("*")) == before
    assert read_result(str(out)).feature_names == ["1", "2", "4", "7"]
    # a store converted in Python without dropping them: refused by the command line
    # before the fit, naming positions and ids (it failed late, with Python advice)
    from dask_bid.interface.sparse_io import convert_triplets

    convert_triplets(src, tmp_path / "api.zarr", index_base=1, quiet=True)
    assert main(["fit", str(tmp_path / "api.zarr"), "--k", "1", "--missing", "mask", "--out",
                 str(tmp_path / "g.zarr"), *FAST]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "no entry in column(s) 2, 4, 5 (named 3, 5, 6) (3 in all)",
                          "--drop-empty-columns", progress_allowed=True)
    assert "kernels" not in err
    assert main(["info", str(tmp_path / "api.zarr")]) == 0
    assert "empty      3 column(s) without an entry (2, 4, 5 (named 3, 5, 6))" in \
        capsys.readouterr().out
    assert main(["info", str(tmp_path / "api.zarr"), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["empty_columns"] == [2, 4, 5] and info["empty_column_ids"] == ["3", "5", "6"]


def test_compressed_and_far_indexed_triplet_files_are_refused_in_one_line(tmp_path, capsys):
    """A gzip file read as triplets (its bytes were quoted as a bad line), and a field
    taken as the column whose values are timestamps (50 lines asked for a 7 GiB count of
    columns: an internal MemoryError)."""
    import gzip

    plain = tmp_path / "r.tsv"
    _triplets(plain)
    for name in ("r.tsv.gz", "hidden.tsv"):
        (tmp_path / name).write_bytes(gzip.compress(plain.read_bytes()))
        assert main(["info", str(tmp_path / name), "--format", "triplets"]) == 2
        assert_one_line_error(capsys.readouterr().err, "is compressed (gzip): decompress it "
                              "first (gunzip)")
    (tmp_path / "u16.tsv").write_bytes(plain.read_text().encode("utf-16"))
    assert main(["info", str(tmp_path / "u16.tsv"), "--format", "triplets"]) == 2
    assert_one_line_error(capsys.readouterr().err, "is UTF-16 text: convert it to UTF-8 first")
    # a separator of several characters (MovieLens 1M's '::'): refused in one line, with
    # the way round (it was an internal TypeError of numpy's reader)
    assert main(["info", str(plain), "--sep", "::"]) == 2
    assert "expected one character, 'tab' or 'space', got '::' (MovieLens 1M: replace" in \
        capsys.readouterr().err
    assert main(["info", str(plain), "--index-base", "1", "--columns", "1,4,3"]) == 2
    assert_one_line_error(capsys.readouterr().err, "a matrix of 881,250,949 columns for",
                          "Is field 4 the column? Give the fields")
    # a given --shape as far beyond the file: refused too, before its count is made
    assert main(["info", str(plain), "--index-base", "1", "--shape", "40,900000000"]) == 2
    assert_one_line_error(capsys.readouterr().err, "a matrix of 900,000,000 columns for")
    # a share of entries too small for 3 decimals is not shown as 0 (it read "0.000%")
    (tmp_path / "far.tsv").write_text("0\t0\t1\n0\t1999999\t2\n")
    assert main(["info", str(tmp_path / "far.tsv"), "--format", "triplets"]) == 0
    assert "observed   2 of 2000000 entries (0.0001%)" in capsys.readouterr().out
    # --header with a triplet file: refused by info as by fit (it was accepted)
    assert main(["info", str(plain), "--format", "triplets", "--header", "yes"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--header yes applies to a dense text")


def test_convert_of_an_unknown_suffix_and_text_options_of_triplets_are_refused(tmp_path,
                                                                               capsys):
    """`convert m.dat` read any file of another suffix as triplets (a 4-column matrix lost
    a column) where fit refuses it; --row-labels / --header with a triplet file said
    "None is read as is"; a repeated --columns field was read as duplicate entries."""
    dat = tmp_path / "m.dat"
    dat.write_text("0 1 3.5 4.0\n1 0 7.25 8.0\n2 2 1.5 0.5\n")
    assert main(["convert", str(dat), "--out", str(tmp_path / "m.zarr")]) == 2
    assert_one_line_error(capsys.readouterr().err, "is not a file convert reads by its name: "
                          "pass --format triplets")
    assert not (tmp_path / "m.zarr").exists()
    src = tmp_path / "r.tsv"
    _triplets(src)
    for flag in (["--row-labels", "first"], ["--header", "yes"]):
        assert main(["fit", str(src), "--format", "triplets", "--index-base", "1", "--k", "2",
                     "--missing", "mask", "--out", str(tmp_path / "o.zarr"), *FAST,
                     *flag]) == 2
        err = capsys.readouterr().err
        assert_one_line_error(err, f"{' '.join(flag)} applies to a dense text matrix; "
                              f"{str(src)!r} is read as (row, column, value) triplets",
                              progress_allowed=True)
        assert "None" not in err
    assert not (tmp_path / "r.tsv.zarr").exists()
    assert main(["info", str(src), "--columns", "1,1,3"]) == 2
    assert "expected three different 1-based field numbers" in capsys.readouterr().err


def test_k_above_the_rows_of_the_given_shape_is_refused_before_converting(tmp_path, capsys):
    src = tmp_path / "t.txt"
    src.write_text("0 0 1\n1 1 2\n9 39 3\n")
    code = main(["fit", str(src), "--format", "triplets", "--shape", "10,40", "--k", "20",
                 "--missing", "mask",
                 "--out", str(tmp_path / "w" / "o.zarr"), *FAST])
    assert code == 2
    assert_one_line_error(capsys.readouterr().err, "--k 20 exceeds the number of rows M=10",
                          progress_allowed=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.txt"]  # no store converted


def test_the_headers_names_of_the_fields_read_are_said(tmp_path, capsys):
    src = tmp_path / "h.csv"
    src.write_text("rating,user_id,item_id\n5,1,1\n4,2,2\n3,3,3\n")
    assert main(["convert", str(src), "--out", str(tmp_path / "h.zarr"), "--index-base",
                 "1"]) == 0
    assert ("fields       row 'rating', column 'user_id', value 'item_id' (fields 1,2,3 "
            "of the header; --columns R,C,V reads others)") in capsys.readouterr().err
    # a Parquet file names its columns too (nothing was said: item,user,rating made the
    # items the rows without a word)
    pa = pytest.importorskip("pyarrow", reason="the [parquet] extra (pyarrow) is needed")
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"item": [1, 2, 3], "user": [1, 2, 2], "rating": [5.0, 4, 3]}),
                   tmp_path / "m.parquet")
    assert main(["convert", str(tmp_path / "m.parquet"), "--out", str(tmp_path / "m.zarr"),
                 "--index-base", "1", "--columns", "2,1,3"]) == 0
    assert ("fields       row 'user', column 'item', value 'rating' (columns 2,1,3 of the "
            "Parquet file; --columns R,C,V reads others)") in capsys.readouterr().err


def test_a_parquet_file_or_a_triplet_option_means_triplets_for_fit_and_info(tmp_path,
                                                                          capsys):
    """As for convert: fit and info of a Parquet file, or of a text file given a triplet
    option, read triplets (they were refused, asking for --format triplets)."""
    src = tmp_path / "ratings.tsv"
    A = _triplets(src)
    n = int((~np.isnan(A)).sum())
    assert main(["info", str(src), "--index-base", "1"]) == 0
    assert f"observed   {n} of 480 entries" in capsys.readouterr().out
    assert main(["fit", str(src), "--k", str(K), "--out", str(tmp_path / "f.zarr"), *FAST,
                 "--index-base", "1", "-q"]) == 0
    res = read_result(str(tmp_path / "f.zarr"))
    assert res.params["missing"] == "mask"
    np.testing.assert_array_equal(np.asarray(res.C), A[:, res.columns])
    pa = pytest.importorskip("pyarrow", reason="the [parquet] extra (pyarrow) is needed")
    import pyarrow.parquet as pq

    r, c = np.nonzero(~np.isnan(A))
    pq.write_table(pa.table({"user": r, "item": c, "rating": A[r, c]}),
                   tmp_path / "m.parquet")
    assert main(["fit", str(tmp_path / "m.parquet"), "--k", str(K), "--out",
                 str(tmp_path / "p.zarr"), *FAST, "-q"]) == 0
    assert_same_chain(read_result(str(tmp_path / "p.zarr")), res)
    assert main(["info", str(tmp_path / "m.parquet")]) == 0
    assert f"observed   {n} of 480 entries" in capsys.readouterr().out


def test_a_triplet_file_of_the_same_name_from_another_folder_is_named(tmp_path, capsys):
    """Two files named s.tsv fitted into one --out folder convert to one store name: the
    second was told only "exists; pass --overwrite", not whose store it is."""
    _triplets(tmp_path / "s.tsv")
    (tmp_path / "other").mkdir()
    _triplets(tmp_path / "other" / "s.tsv", seed=1)
    run = ["--k", str(K), *FAST, "--format", "triplets", "--index-base", "1", "-q"]
    assert main(["fit", str(tmp_path / "s.tsv"), "--out", str(tmp_path / "f" / "a.zarr"),
                 *run]) == 0
    capsys.readouterr()
    for cmd in (["fit", str(tmp_path / "other" / "s.tsv"), "--out",
                 str(tmp_path / "f" / "b.zarr"), *run],
                ["convert", str(tmp_path / "other" / "s.tsv"), "--index-base", "1", "--out",
                 str(tmp_path / "f" / "s.tsv.zarr")]):
        assert main(cmd) == 2
        assert_one_line_error(capsys.readouterr().err, "s.tsv.zarr' holds the conversion of "
                              f"another file of that name, {str(tmp_path / 's.tsv')!r}",
                              "pass --overwrite to replace it")
    assert not (tmp_path / "f" / "b.zarr").exists()


def test_convert_command(tmp_path, capsys):
    src = tmp_path / "r.tsv"
    A = _triplets(src, seed=3)
    store = tmp_path / "r.zarr"
    assert main(["convert", str(src), "--out", str(store), "--index-base", "1", "-q"]) == 0
    from dask_bid.engine.sparse_backend import dense_columns
    from dask_bid.engine.sparse_store import open_sparse

    s = open_sparse(store)
    np.testing.assert_array_equal(dense_columns(s.array, range(s.shape[1])),
                                  A[:s.shape[0], :s.shape[1]])
    capsys.readouterr()
    # the same file and options again: reused, as a dense file's conversion is
    assert main(["convert", str(src), "--out", str(store), "--index-base", "1"]) == 0
    assert capsys.readouterr().out == f"reusing {store} (already converted from {src})\n"
    # other options: the store is not replaced without --overwrite
    assert main(["convert", str(src), "--out", str(store), "--index-base", "0", "-q"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--index-base 1 --columns 1,2,3, and this "
                          "call reads it with --index-base 0", "pass --overwrite")
    assert main(["convert", str(src), "--out", str(store), "--index-base", "1", "-q",
                 "--overwrite"]) == 0
    # made with a larger --shape, then asked for without one (the largest indices': a
    # smaller matrix): it was reused, so fits of "the file" fitted the larger matrix
    M, N = open_sparse(store).shape
    assert main(["convert", str(src), "--out", str(store), "--index-base", "1", "--shape",
                 f"{M + 5},{N}", "-q", "--overwrite"]) == 0
    assert main(["convert", str(src), "--out", str(store), "--index-base", "1"]) == 2
    assert_one_line_error(capsys.readouterr().err, f"--shape {M + 5},{N}, and this call "
                          "reads it with --index-base 1 --columns 1,2,3 and no --shape")
    assert main(["convert", str(src), "--out", str(store), "--index-base", "1", "--shape",
                 f"{M + 5},{N}"]) == 0  # the same shape again: reused
    assert f"reusing {store}" in capsys.readouterr().out
    assert main(["convert", str(src), "--out", str(store), "--index-base", "1", "-q",
                 "--overwrite"]) == 0
    # a --shape wider than the file: columns a fit refuses, said at once, nothing written
    # (the store was written and the fit refused it with Python advice)
    wide = tmp_path / "wide.zarr"
    assert main(["convert", str(src), "--out", str(wide), "--index-base", "1", "--shape",
                 f"{A.shape[0]},{A.shape[1] + 3}", "-q"]) == 2
    assert_one_line_error(capsys.readouterr().err, f"--shape {A.shape[0]},{A.shape[1] + 3} "
                          "leaves columns", "(3 in all)", "a column with no entry cannot be "
                          "fitted")
    assert not wide.exists()
