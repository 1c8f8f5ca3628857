"""``dask-bid convert`` (interface/cli/convert_command.py): a dense .npy or text matrix
into a Zarr array, a triplet file into a sparse store; what it refuses."""

import numpy as np
import pytest
import zarr
from test_cli import FAST, assert_one_line_error

from dask_bid.interface.cli import main


@pytest.fixture
def npy(tmp_path):
    A = np.random.default_rng(0).standard_normal((30, 7))
    path = tmp_path / "a.npy"
    np.save(path, A)
    return path, A


def _listing(d):
    return sorted(p.name for p in d.iterdir())


def test_a_npy_becomes_a_zarr_array_that_fit_reads(npy, tmp_path, capsys):
    path, A = npy
    store = tmp_path / "A.zarr"
    assert main(["convert", str(path), "--out", str(store)]) == 0
    # the outcome on stdout, for a script (it was on stderr, stdout empty); the progress
    # bar on stderr
    out = capsys.readouterr().out
    assert out == f"converted    {path} -> {store} (30 x 7 float64, chunks 30 x 7)\n", out
    z = zarr.open_array(store, mode="r")
    assert z.metadata.zarr_format == 3
    np.testing.assert_array_equal(z[...], A)
    # the same command again reuses it
    assert main(["convert", str(path), "--out", str(store)]) == 0
    out = capsys.readouterr().out
    assert out == f"reusing {store} (already converted from {path})\n", out  # not both
    # --overwrite converts it again, as for a triplet file (it said "reusing")
    assert main(["convert", str(path), "--out", str(store), "--overwrite"]) == 0
    assert capsys.readouterr().out.startswith(f"converted    {path} -> {store}")
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], A)
    fit = tmp_path / "fit.zarr"
    assert main(["fit", str(store), "--k", "2", "--out", str(fit), "-q", *FAST]) == 0
    assert zarr.open_group(fit, mode="r").attrs["dask_bid"]["input"]["path"].endswith(
        "A.zarr")


def test_chunks_are_chosen_and_other_chunks_need_overwrite(npy, tmp_path, capsys):
    path, A = npy
    store = tmp_path / "A.zarr"
    assert main(["convert", str(path), "--out", str(store), "--chunks", "8,7", "-q"]) == 0
    assert zarr.open_array(store, mode="r").chunks == (8, 7)
    capsys.readouterr()
    assert main(["convert", str(path), "--out", str(store), "--chunks", "10,3"]) == 2
    assert_one_line_error(capsys.readouterr().err, "with chunks (8, 7); pass --overwrite")
    assert main(["convert", str(path), "--out", str(store), "--chunks", "10,3",
                 "--overwrite", "-q"]) == 0
    z = zarr.open_array(store, mode="r")
    assert z.chunks == (10, 3)
    np.testing.assert_array_equal(z[...], A)


def test_a_text_matrix_keeps_names_and_its_nan_only_when_asked(tmp_path, capsys):
    A = np.arange(24, dtype=float).reshape(4, 6) / 7
    A[2, 3] = np.nan
    rows = ["," + ",".join(f"d{j}" for j in range(6))]
    rows += [f"cell{i}," + ",".join("" if np.isnan(v) else repr(float(v)) for v in r)
             for i, r in enumerate(A)]
    src = tmp_path / "m.csv"
    src.write_text("\n".join(rows) + "\n")
    store = tmp_path / "m.zarr"
    # a NaN is refused, naming its line, and nothing is left behind
    assert main(["convert", str(src), "--format", "dense", "--out", str(store)]) == 2
    assert_one_line_error(capsys.readouterr().err, "line 4", "--missing mask",
                          progress_allowed=True)
    assert _listing(tmp_path) == ["m.csv"]
    assert main(["convert", str(src), "--format", "dense", "--out", str(store),
                 "--missing", "mask"]) == 0
    assert "1 NaN kept as missing entries (fitted with --missing mask)" in \
        capsys.readouterr().out
    z = zarr.open_array(store, mode="r")
    np.testing.assert_array_equal(z[...], A)  # NaN where it was, the labels left out
    assert z.attrs["dask_bid_column_names"] == [f"d{j}" for j in range(6)]
    assert z.attrs["dask_bid_row_names"] == [f"cell{i}" for i in range(4)]
    zero = tmp_path / "zero.zarr"
    assert main(["convert", str(src), "--format", "dense", "--out", str(zero),
                 "--fill-missing", "zero"]) == 0
    assert "1 NaN replaced by 0" in capsys.readouterr().out
    np.testing.assert_array_equal(zarr.open_array(zero, mode="r")[...], np.nan_to_num(A))


def test_a_store_that_keeps_its_nan_is_fitted_masked(tmp_path, capsys):
    """A store converted with --missing mask records its kept NaN: ``fit`` then takes
    --missing mask (saying so), and refuses --missing zero before anything is written,
    as the Python API refuses missing="zero" (before, both failed on the first NaN after
    sampling had begun)."""
    A = np.random.default_rng(3).standard_normal((20, 6))
    A[4, 1] = np.nan
    np.save(tmp_path / "a.npy", A)
    store = tmp_path / "A.zarr"
    assert main(["convert", str(tmp_path / "a.npy"), "--out", str(store), "--missing",
                 "mask", "-q"]) == 0
    out = tmp_path / "f.zarr"
    assert main(["fit", str(store), "--k", "2", "--out", str(out), *FAST]) == 0
    err = capsys.readouterr().err
    assert f"missing      {store} keeps 1 NaN as missing entries" in err
    assert zarr.open_group(out, mode="r").attrs["dask_bid"]["params"]["missing"] == "mask"
    assert main(["fit", str(store), "--k", "2", "--out", str(tmp_path / "g.zarr"),
                 "--missing", "zero", *FAST]) == 2
    assert_one_line_error(capsys.readouterr().err, "keeps 1 NaN as missing entries",
                          "drop --missing zero")
    assert not (tmp_path / "g.zarr").exists()
    # the Python API does not choose for the user: it refuses at once, naming the fix
    from dask_bid import NonFiniteInputError, bayesian_id

    with pytest.raises(NonFiniteInputError, match="keeps 1 NaN as missing entries.*"
                                                  "missing='mask'"):
        bayesian_id(str(store), 2, client="synchronous", out=str(tmp_path / "h.zarr"))
    assert not (tmp_path / "h.zarr").exists()


def test_a_table_is_not_read_as_triplets_by_default(tmp_path, capsys):
    """An integer table's first three numbers would pass for (row, column, value). A line
    of more fields than a triplet holds (4) is a matrix, read as one and said (it was
    refused, asking for --format dense, which nothing else could mean)."""
    src = tmp_path / "counts.csv"
    counts = np.random.default_rng(1).integers(1, 9, size=(5, 8))
    np.savetxt(src, counts, delimiter=",", fmt="%d")
    store = tmp_path / "c.zarr"
    assert main(["convert", str(src), "--out", str(store), "--header", "no"]) == 0
    assert ("format       dense (8 fields on the first line: a matrix; --format triplets "
            "--columns R,C,V reads triplets from it)") in capsys.readouterr().err
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...], counts)
    # 3 or 4 fields (MovieLens' timestamp): a narrow matrix or triplets? Asked: read as
    # triplets by default, a 4-column matrix became a sparse store of other numbers than
    # the matrix `fit` reads from the file
    trip = tmp_path / "r.tsv"
    trip.write_text("0\t0\t1.5\t99\n1\t1\t2.0\t98\n1\t0\t0.5\t97\n")
    assert main(["convert", str(trip), "--out", str(tmp_path / "r.zarr"), "-q"]) == 2
    assert_one_line_error(capsys.readouterr().err, "4 fields on its first line",
                          "a matrix of 4 columns (as `dask-bid fit` reads it)",
                          "Pass --format dense or --format triplets")
    assert _listing(tmp_path) == ["c.zarr", "counts.csv", "r.tsv"]
    assert main(["convert", str(trip), "--out", str(tmp_path / "r.zarr"), "-q",
                 "--format", "triplets"]) == 0
    assert zarr.open_group(tmp_path / "r.zarr", mode="r").attrs["dask_bid_sparse"]
    # a triplet option says it too
    assert main(["convert", str(trip), "--out", str(tmp_path / "r1.zarr"), "-q",
                 "--index-base", "0"]) == 0
    assert zarr.open_group(tmp_path / "r1.zarr", mode="r").attrs["dask_bid_sparse"]


@pytest.mark.parametrize("extra, fragment", [
    (["--sep", ","], "--sep describes a triplet file, and"),
    # not "pass --format triplets too", which then read the binary file as text lines
    (["--index-base", "1"], "--index-base describes a triplet file, and "),
    (["--index-base", "1", "--format", "dense"], "--index-base describes a triplet file, "
                                                 "and "),
])
def test_triplet_options_are_refused_for_a_dense_matrix(npy, tmp_path, capsys, extra,
                                                        fragment):
    path, _ = npy
    assert main(["convert", str(path), "--out", str(tmp_path / "A.zarr"), *extra]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, fragment)
    assert "is a .npy file, a dense matrix: drop them." in err
    assert _listing(tmp_path) == ["a.npy"]


def test_fill_and_mask_together_are_refused_as_by_fit(npy, tmp_path, capsys):
    # the same refusal, in the same words, as `fit` (reading.fill_treatment)
    path, _ = npy
    assert main(["convert", str(path), "--out", str(tmp_path / "A.zarr"), "--missing",
                 "mask", "--fill-missing", "zero"]) == 2
    assert_one_line_error(capsys.readouterr().err,
                          "--missing mask and --fill-missing zero disagree", "Pass one of them")
    assert _listing(tmp_path) == ["a.npy"]


def test_dense_options_are_refused_for_a_triplet_file(tmp_path, capsys):
    trip = tmp_path / "r.tsv"
    trip.write_text("0\t0\t1.5\n1\t1\t2.0\n")
    for extra in (["--chunks", "2,2"], ["--missing", "mask"], ["--header", "yes"]):
        assert main(["convert", str(trip), "--out", str(tmp_path / "r.zarr"), *extra]) == 2
        assert_one_line_error(capsys.readouterr().err, "appl", "--format dense")
    assert _listing(tmp_path) == ["r.tsv"]


def test_the_input_and_other_files_are_never_replaced(npy, tmp_path, capsys):
    path, A = npy
    before = path.read_bytes()
    for out, fragment in ((path, "is INPUT itself"), (tmp_path / "b.npy", "is a file"),
                          # the folder holding the input (it said "remove it")
                          (tmp_path, "or holds it; the input is never written or deleted")):
        if out != path:
            np.save(out, A)
        assert main(["convert", str(path), "--out", str(out), "--overwrite"]) == 2
        assert_one_line_error(capsys.readouterr().err, fragment)
    assert path.read_bytes() == before
    # the same folders by file:// and local:// URLs (a folder of the user's was deleted,
    # then the write failed: the URL went unread by every check)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("mine")
    for url in ("file://" + str(keep), "local://" + str(keep), "file://" + str(tmp_path)):
        assert main(["convert", str(path), "--out", url, "--overwrite"]) == 2
        capsys.readouterr()
    assert (keep / "notes.txt").read_text() == "mine" and path.read_bytes() == before
    assert main(["convert", str(path), "--out", "file://" + str(tmp_path / "u.zarr"),
                 "-q"]) == 0
    assert (tmp_path / "u.zarr" / "zarr.json").is_file()
    mine = tmp_path / "mine.zarr"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    assert main(["convert", str(path), "--out", str(mine), "--overwrite"]) == 2
    assert_one_line_error(capsys.readouterr().err, "is not a Zarr array")
    assert (mine / "notes.txt").read_text() == "my notes"
    assert main(["convert", str(path), "--out", str(tmp_path / "x.zarr"),
                 "--chunks", "0,3"]) == 2
    assert "chunk sizes must be >= 1" in capsys.readouterr().err
    # a store is not converted again (rechunking is dask's)
    assert main(["convert", str(path), "--out", str(tmp_path / "A.zarr"), "-q"]) == 0
    for fmt in ([], ["--format", "dense"], ["--format", "triplets"]):
        assert main(["convert", str(tmp_path / "A.zarr"), "--out", str(tmp_path / "B.zarr"),
                     *fmt]) == 2
        assert_one_line_error(capsys.readouterr().err, "is not a file", "fitted as it is")
    assert not (tmp_path / "B.zarr").exists()


def test_a_store_of_another_file_of_that_name_or_of_an_older_version_is_named_so(
        tmp_path, capsys):
    """Two files M.csv from two folders, fitted into one output folder, meet at one
    converted store: the refusal said "not converted from this version" of the second
    file; now it names the other file and what --overwrite would do to its fits. A file
    that changed says that."""
    A = np.random.default_rng(0).standard_normal((20, 5))
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
        np.savetxt(tmp_path / d / "M.csv", A, delimiter=",")
    out = tmp_path / "runs"
    out.mkdir()
    first, second = str(tmp_path / "one" / "M.csv"), str(tmp_path / "two" / "M.csv")
    assert main(["fit", first, "--k", "2", "--out", str(out / "x.zarr"), "-q", *FAST]) == 0
    assert main(["fit", second, "--k", "2", "--out", str(out / "y.zarr"), "-q", *FAST]) == 2
    assert_one_line_error(capsys.readouterr().err, f"{str(out / 'M.csv.zarr')!r} holds the "
                          f"conversion of another file of that name, {first!r}",
                          "fit from another --out folder", "could then not resume")
    # the second, with --overwrite, replaces it; then a resume of the first says so (it
    # said the first file had changed)
    assert main(["fit", second, "--k", "2", "--out", str(out / "y.zarr"), "-q", "--overwrite",
                 *FAST]) == 0
    assert main(["fit", first, "--k", "2", "--out", str(out / "x.zarr"), "-q", "--resume",
                 *FAST]) == 2
    assert_one_line_error(capsys.readouterr().err, f"now holds the conversion of another "
                          f"file of that name, {second!r}", "add --overwrite to convert")
    assert main(["fit", first, "--k", "2", "--out", str(out / "x.zarr"), "-q", "--resume",
                 "--overwrite", *FAST]) == 0  # as the message says
    np.savetxt(first, A + 1.0, delimiter=",")  # the first file changes
    assert main(["fit", first, "--k", "2", "--out", str(out / "z.zarr"), "-q", *FAST]) == 2
    assert_one_line_error(capsys.readouterr().err, "was converted from an earlier version of "
                          f"{first!r} (the file changed since")
    # a file replaced by another of the same size, its modification time set back (cp -p,
    # rsync -t, touch -r) read as unchanged: the old conversion was fitted
    import os

    npy = tmp_path / "N.npy"
    np.save(npy, A)
    assert main(["fit", str(npy), "--k", "2", "--out", str(out / "n1.zarr"), "-q", *FAST]) == 0
    st = os.stat(npy)
    np.save(npy, A[::-1].copy())  # the same size
    os.utime(npy, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(npy).st_size == st.st_size and os.stat(npy).st_mtime_ns == st.st_mtime_ns
    assert main(["fit", str(npy), "--k", "2", "--out", str(out / "n2.zarr"), "-q", *FAST]) == 2
    assert_one_line_error(capsys.readouterr().err, "was converted from an earlier version of "
                          f"{str(npy)!r}")
