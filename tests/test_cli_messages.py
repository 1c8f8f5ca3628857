"""The command line's refusals: one line on stderr, naming the problem, the place and the
flag that fixes it; nothing left behind that blocks the retry. One case per row of the
"Command line" table of docs/errors.md."""

import os
import re
from pathlib import Path

import numpy as np
import pytest
import zarr
from test_cli import FAST, assert_one_line_error

from dask_bid.interface.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


def _npy_empty(d):
    (d / "in.npy").write_bytes(b"")
    return d / "in.npy"


def _npy_object(d):
    np.save(d / "in.npy", np.array([[1, "a"], [2, None]], dtype=object), allow_pickle=True)
    return d / "in.npy"


def _npy_text(d):
    # 2 x 2: K = 2 is out of range as well; the dtype is said first (was the --k error)
    np.save(d / "in.npy", np.array([["1", "2"], ["3", "4"]]))
    return d / "in.npy"


def _npy_complex(d):
    np.save(d / "in.npy", np.ones((10, 4), dtype=complex))
    return d / "in.npy"


def _npy_wide(d):
    np.save(d / "in.npy", np.random.default_rng(0).standard_normal((10, 40)))
    return d / "in.npy"


def _npy_longdouble(d):
    np.save(d / "in.npy", np.ones((10, 4), dtype=np.longdouble))
    return d / "in.npy"


def _npy_structured(d):
    np.save(d / "in.npy", np.zeros(10, dtype=[("x", "f8"), ("y", "f8")]))
    return d / "in.npy"


def _npy_garbage(d):
    (d / "in.npy").write_bytes(b"these are not the bytes of a numpy file\n" * 4)
    return d / "in.npy"


def _npy_truncated(d):
    np.save(d / "in.npy", np.ones((50, 4)))
    data = (d / "in.npy").read_bytes()
    (d / "in.npy").write_bytes(data[:-100])
    return d / "in.npy"


def _csv_bad_cell(d):
    (d / "in.csv").write_text("a,b,c\n1,2,3\nabc,5,6\n".replace("abc,5", "4,abc"))
    return d / "in.csv"


def _txt_ragged(d):
    (d / "in.txt").write_text("1 2 3\n4 5 6\n7 8\n")
    return d / "in.txt"


def _csv_semicolon(d):
    (d / "in.csv").write_text("1|2|3\n4|5|6\n")
    return d / "in.csv"


def _txt_one_column(d):
    (d / "in.txt").write_text("1\n2\n3\n")
    return d / "in.txt"


def _txt_nan(d):
    (d / "in.txt").write_text("1 2 3\n4 5 nan\n7 8 9\n10 11 12\n")
    return d / "in.txt"


def _txt_inf(d):
    (d / "in.txt").write_text("1 2 3\n4 5 inf\n7 8 9\n")
    return d / "in.txt"


def _txt_empty_column(d):
    (d / "in.txt").write_text("1 nan 3\n4 nan 6\n7 nan 9\n10 nan 12\n")
    return d / "in.txt"


def _csv_row_numbers(d):
    # pandas' to_csv of a frame whose index is named: nothing says column 1 is an index
    A, _ = _planted()
    rows = "".join(f"{i}," + ",".join(map(repr, map(float, r))) + "\n" for i, r in enumerate(A))
    (d / "in.csv").write_text("id," + ",".join(f"c{j}" for j in range(A.shape[1])) + "\n"
                              + rows)
    return d / "in.csv"


def _csv_numeric_names(d):
    (d / "in.csv").write_text("gene,2001,2002,2003\nTP53,0.5,0.25,1.5\nKRAS,1,2,3\n")
    return d / "in.csv"


def _npy_good(d):
    A, _ = _planted()
    np.save(d / "in.npy", A)
    return d / "in.npy"


def _zarr_good(d):
    A, _ = _planted()
    z = zarr.create_array(str(d / "in.zarr"), shape=A.shape, chunks=(20, 10), dtype="f8")
    z[...] = A
    return d / "in.zarr"


def _npy_beside_a_foreign_store(d):
    """A Zarr array of another tool where fit would put the conversion of in.npy."""
    np.save(d / "in.npy", np.random.default_rng(0).standard_normal((30, 6)))
    z = zarr.create_array(store=str(d / "in.npy.zarr"), shape=(3, 3), dtype="f8")
    z[:] = 5.0
    return d / "in.npy"


def _csv_header_only(d):
    (d / "in.csv").write_text("a,b,c\n")
    return d / "in.csv"


def _triplets_from_one(d):
    """MovieLens' layout: user, item, rating, counted from 1."""
    rng = np.random.default_rng(0)
    lines = [f"{r}\t{c}\t{rng.integers(1, 6)}" for r in range(1, 13) for c in range(1, 6)]
    (d / "ratings.tsv").write_text("\n".join(lines) + "\n")
    return d / "ratings.tsv"


def _planted():
    from dask_bid.interface.demo import make_demo_matrix

    A, planted, _ = make_demo_matrix(40, 10, 2, seed=0)
    return A, planted


# id (the docs row says it too), input builder, extra arguments, fragments of the error line
CASES = [
    ("empty .npy", _npy_empty, [], ["is empty", "numpy.save"]),
    ("object .npy", _npy_object, [], ["Python objects", "save a float array"]),
    ("text or complex .npy", _npy_text, [], ["holds <U1 values, not real numbers",
                                              "A.astype(float)"]),
    ("text or complex .npy", _npy_complex, [], ["holds complex128 values", "A.real"]),
    ("long double .npy", _npy_longdouble, [], ["long double", "A.astype(numpy.float64)"]),
    ("structured .npy (named fields)", _npy_structured, [],
     ["structured array (fields x, y)", "column_stack"]),
    ("not a .npy", _npy_garbage, [], ["is not a .npy file", "numpy.save"]),
    ("truncated .npy", _npy_truncated, [], ["is truncated", "bytes"]),
    ("text cell not a number", _csv_bad_cell, [],
     ["line 3, column 2", "'abc'", "not a number"]),
    ("ragged text rows", _txt_ragged, [], ["line 3", "has 2 columns", "the first line has 3"]),
    ("one column (other delimiter)", _csv_semicolon, [],
     ["one column", "comma", "'|'", "at least 2 columns"]),
    ("one column", _txt_one_column, [], ["one column", "whitespace"]),
    ("NaN in a .npy or text input", _txt_nan, [],
     ["missing values (NaN)", "line 2, column 3", "--missing mask", "--fill-missing zero"]),
    ("infinity in a .npy or text input", _txt_inf, ["--fill-missing", "zero"],
     ["line 2, column 3", "infinite"]),
    ("Python parameter names", _npy_good, ["--n-iter", "10", "--burn-in", "10"],
     ["--burn-in (10) must be smaller than --n-iter (10)", "Lower --burn-in"]),
    ("K out of range", _npy_good, ["--k", "10"], ["--k must be between 1 and 9"]),
    # K > M, from the .npy header: before the conversion and the kernels (it was after)
    ("K out of range", _npy_wide, ["--k", "20"], ["--k 20 exceeds the number of rows M=10",
                                                   "choose --k <= 10"]),
    ("--missing mask with --fill-missing zero", _txt_nan,
     ["--missing", "mask", "--fill-missing", "zero"],
     ["--missing mask and --fill-missing zero disagree", "Pass one of them"]),
    ("--missing mask and infinity", _txt_inf, ["--missing", "mask"],
     ["line 2, column 3", "infinite"]),
    ("--missing mask and a column with no observed entry", _txt_empty_column,
     ["--missing", "mask"], ["columns [2] (counted from 1)", "no observed entry", "drop them"]),
    ("--fill-missing with a Zarr input", _zarr_good, ["--fill-missing", "zero"],
     ["--fill-missing applies to .npy and text files"]),
    ("a first column holding the row numbers", _csv_row_numbers, [],
     ["column 1 of", "row numbers 0, 1, ..., 39", "--row-labels first", "--row-labels none"]),
    ("line 1: a header or a row?", _csv_numeric_names, [],
     ["line 1 of", "could be a header", "--header yes or --header no"]),
    ("--scheduler that is not a scheduler address", _npy_good, ["--scheduler", "processes"],
     ["--scheduler processes names one of dask's single-machine schedulers",
      "--scheduler local (", "--scheduler synchronous (", "tcp://host:8786"]),
    ("a header and no data rows", _csv_header_only, [], ["has shape (0, 3)", "at least 1 row"]),
    ("--overwrite where the conversion goes, onto an array dask_bid did not write",
     _npy_beside_a_foreign_store, ["--overwrite"],
     ["refusing to replace", "in.npy.zarr", "not a Zarr array dask_bid wrote"]),
    ("a triplet file that counts from 1, without --index-base", _triplets_from_one,
     ["--format", "triplets", "--missing", "mask"],
     ["column 0 of", "holds no entry", "counts rows and columns from 1", "--index-base 1"]),
    ("--row-labels or --header with a file that is not text", _npy_good,
     ["--row-labels", "first"], ["--row-labels first applies to text INPUT files"]),
]


@pytest.mark.parametrize("row, build, extra, fragments", CASES, ids=[c[0] for c in CASES])
def test_fit_refusal_is_one_line_and_leaves_nothing(row, build, extra, fragments, tmp_path,
                                                    capsys):
    src = build(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    k = [] if "--k" in extra else ["--k", "2"]
    rc = main(["fit", str(src), *k, "--out", str(tmp_path / "o.zarr"), *FAST, *extra])
    cap = capsys.readouterr()
    assert rc == 2, cap.err
    assert_one_line_error(cap.err, *fragments, progress_allowed=True)
    assert "allow_pickle" not in cap.err and "n_components" not in cap.err
    assert "random_state" not in cap.err and "=True" not in cap.err
    assert cap.out == ""
    # no output, no converted store: the retry is not blocked
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_refused_fit_leaves_no_folder_it_made_for_out(tmp_path, capsys):
    """A refusal found while converting (after the output's lock was taken): the folders
    made for OUT were left behind, empty; an OUT in an existing folder keeps the folder."""
    src = _csv_bad_cell(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    rc = main(["fit", str(src), "--k", "2", "--out", str(tmp_path / "new" / "deeper" / "o.zarr"),
               *FAST])
    assert rc == 2 and "not a number" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_info_on_a_fit_whose_checkpoint_is_being_written_warns_nothing(tmp_path, capsys):
    """A checkpoint folder without its metadata yet (written or pruned by the running
    fit at that moment): `info` printed zarr's "Object at ... is not recognized as a
    component of a Zarr hierarchy" as a dask-bid warning, about 1 call in 10."""
    from dask_bid import bayesian_id

    out = tmp_path / "r.zarr"

    def stop(st):
        if st.iteration == 6:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bayesian_id(np.load(_npy_good(tmp_path)), 2, out=str(out), client="synchronous",
                    checkpoint_every=3, callback=stop, n_iter=20, burn_in=5)
    (out / "checkpoint" / "c0-it00000009").mkdir()  # a checkpoint as it is being written
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    cap = capsys.readouterr()
    assert "interrupted" in cap.out and "warning" not in cap.err, cap.err


def test_plot_refuses_an_empty_kind_list_and_a_result_given_twice(tmp_path, capsys):
    out = tmp_path / "r.zarr"
    assert main(["fit", str(_npy_good(tmp_path)), "--k", "2", "--out", str(out), *FAST,
                 "-q"]) == 0
    for args, fragment in ((["--kind", ","], "no plot kind in ','"),
                           ([str(out) + "/", "--kind", "error-k"], "is given twice")):
        assert main(["plot", str(out), *args]) == 2
        assert_one_line_error(capsys.readouterr().err, fragment)
    assert not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize("build, dtype", [(_npy_complex, "complex128"), (_npy_text, "<U1"),
                                          (_npy_structured, "('x', '<f8')"),
                                          (_npy_longdouble, "float128")])
def test_info_describes_a_npy_file_fit_refuses(build, dtype, tmp_path, capsys):
    """``info`` looks at the file: its dtype, and a note that fit needs real numbers."""
    assert main(["info", str(build(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert dtype in out and "not real numbers: dask-bid fits float" in out, out


@pytest.mark.parametrize("extra, fragments", [
    (["--n-tries", "0"], ["--n-tries must be >= 1"]),
    (["--thin", "31"], ["--thin 31 exceeds the 30 iterations after the burn-in (--n-iter 40, "
                        "--burn-in 10): it would keep their first draw only. Lower the "
                        "thinning (--thin) or raise --n-iter."]),
    (["--candidate-pool", "2"], ["--candidate-pool must be >= 3", "or none (every column)"]),
    (["--init", "1,99"], ["--init columns must be 2 distinct indices"]),
    (["--init", "sketchy"], ["unknown --init 'sketchy'"]),
    (["--trace-columns", "drug"], ["name the columns (--column-names FILE, or a text file's "
                                   "header)"]),
    (["--n-redraw", "-1"], ["--n-redraw must be >= 0"]),
    (["--tempered-warmup", "30"], ["--tempered-warmup (30) must not exceed --burn-in (10)",
                                   "Lower --tempered-warmup"]),
    (["--init", "1"], ["--init must hold 2 column indices (--k 2)", "got [1]"]),
    (["--bounds", "1", "-1"], ["--bounds must satisfy a < b", "e.g. --bounds -1 1"]),
    # a negative index is out of range, not a name
    (["--trace-columns", "-1"], ["--trace-columns must lie in [0, 10), got -1"]),
    # an empty entry is a typo (of a missing column, most likely), not read around
    (["--trace-columns", "3,,4"], ["--trace-columns '3,,4' has an empty entry"]),
    (["--init", "1,"], ["--init '1,' has an empty entry"]),
    # options another sampler would ignore without a word
    (["--sampler", "aggressive", "--n-tries", "3"],
     ["--n-tries applies to the collapsed sampler", "runs the aggressive one"]),
    (["--sampler", "plain", "--acceptance", "barker"],
     ["--acceptance applies to the collapsed sampler", "runs the plain one"]),
    (["--plain", "--n-pivot", "3", "--tempered-warmup", "2"],
     ["--n-pivot, --tempered-warmup apply to the collapsed sampler", "the plain one"]),
    # an empty list drew nothing and said nothing (exit 0)
    (["--plot", ""], ["no plot kind in ''", "choose among trace"]),
])
def test_parameter_refusals_name_the_flags(extra, fragments, tmp_path, capsys):
    """Messages written for the Python API spell their parameters as the flags the user
    typed (the sampler's options included), and show no numpy repr."""
    rc = main(["fit", str(_npy_good(tmp_path)), "--k", "2", "--out",
               str(tmp_path / "o.zarr"), *FAST, *extra])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert_one_line_error(err, *fragments, progress_allowed=True)
    for name in ("n_tries", "candidate_pool", "n_redraw", "tempered_warmup", "burn_in",
                 "error: init", "error: bounds", "array(", "None", " init ", "feature_names",
                 "as an array"):
        assert name not in err, err


@pytest.mark.parametrize("row, build, fragments", [
    ("empty .npy", _npy_empty, ["is empty"]),
    ("text cell not a number", _csv_bad_cell, ["line 3, column 2"]),
    ("NaN in a .npy or text input", _txt_nan, ["line 2, column 3", "--fill-missing zero"]),
    ("a header and no data rows", _csv_header_only, ["has shape (0, 3)"]),  # was a crash
])
def test_rid_gives_the_same_messages(row, build, fragments, tmp_path, capsys):
    assert main(["rid", str(build(tmp_path)), "--k", "2"]) == 2
    assert_one_line_error(capsys.readouterr().err, *fragments)


def test_rid_of_a_store_with_nan_says_it_in_command_line_words(tmp_path, capsys):
    """Not the Python fix (`A = da.where(...)`) nor "A": the store and the flags."""
    from dask_bid.engine import to_zarr

    A = np.random.default_rng(0).standard_normal((30, 6))
    A[3, 2] = np.nan
    to_zarr(A, str(tmp_path / "n.zarr"), chunks=(10, 6))
    assert main(["rid", str(tmp_path / "n.zarr"), "--k", "2"]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "n.zarr", "it contains NaN",
                          "--fill-missing zero", "--missing mask")
    assert "da.where" not in err and "A contains" not in err


def test_every_cli_row_of_the_docs_has_a_case():
    text = DOCS.read_text()
    section = text.split("## The command line", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    keys = [ln.split("|")[1].strip() for ln in rows]
    covered = {c[0] for c in CASES} | set(OTHER_ROWS)
    assert set(keys) == covered, set(keys) ^ covered


#: rows tested by the tests below, not by the table of cases
OTHER_ROWS = ("NaN in a Zarr input", "error-k over fits of different inputs",
              # test_cli_convert.py
              "two files of one name (from two folders) fitted into one output folder, where "
              "the second would convert to the first one's store",
              "fit --resume after another file of that name replaced the converted store",
              "a conversion made for the other treatment of NaN",  # test_cli_masked.py
              "permission denied", "an error inside a library",
              "rid --overwrite onto a file rid did not write",  # test_cli.py
              "rid of a Zarr store holding NaN",
              "rid --out with a suffix other than .npz, or a folder",  # test_cli.py
              "fit --out naming the store a .npy or text INPUT is converted to",
              # test_cli_convert.py
              "--missing zero with a store converted with --missing mask that kept NaN",
              "fit --resume after the .npy or text INPUT changed (size or time) since "
              "its conversion",  # test_cli.py
              "a figure dask-bid did not write where `plot`, `fit --plot` or `demo` would "
              "write one",
              # test_cli_sparse.py
              "a triplet file or a sparse store with --missing zero (without --missing, mask "
              "is chosen and said)",
              "--sep, --columns, --shape or --index-base without --format triplets")


# ----------------------------------------------------------------------------- fill

def test_fill_missing_zero_fits_and_records_it(tmp_path, capsys):
    src = _txt_nan(tmp_path)
    out = tmp_path / "o.zarr"
    assert main(["info", str(src)]) == 0
    text = capsys.readouterr().out
    assert "missing    1 NaN entries (8.3%)" in text and "--fill-missing zero" in text
    assert main(["fit", str(src), "--k", "2", "--out", str(out), *FAST,
                 "--fill-missing", "zero"]) == 0
    cap = capsys.readouterr()
    assert "filled       1 NaN entries" in cap.err
    conv = zarr.open_array(str(tmp_path / "in.txt.zarr"), mode="r")
    np.testing.assert_array_equal(conv[...], [[1, 2, 3], [4, 5, 0], [7, 8, 9], [10, 11, 12]])
    assert conv.attrs["dask_bid_missing"] == {"fill": "zero", "n_filled": 1}
    assert main(["info", str(out)]) == 0
    assert "filled     1 NaN entries of the input replaced by 0" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "in.txt.zarr")]) == 0
    assert "filled     1 NaN entries replaced by 0" in capsys.readouterr().out
    # rid fills the same way
    assert main(["rid", str(src), "--k", "2", "--fill-missing", "zero", "--seed", "0"]) == 0


def test_a_store_converted_with_missing_mask_and_rid_or_fill_missing(tmp_path, capsys):
    """rid of it said to fill the NaN with dask code; fit --fill-missing zero of it said
    that --missing mask (which the store chose, not the user) and --fill-missing disagree."""
    store = tmp_path / "m.zarr"
    assert main(["convert", str(_txt_nan(tmp_path)), "--format", "dense", "--missing", "mask",
                 "--out", str(store), "-q"]) == 0
    assert main(["rid", str(store), "--k", "2"]) == 2
    assert_one_line_error(capsys.readouterr().err, "keeps 1 NaN as missing entries",
                          "rid needs every entry", "--fill-missing zero")
    assert main(["fit", str(store), "--k", "2", "--out", str(tmp_path / "f.zarr"),
                 "--fill-missing", "zero", *FAST]) == 2
    err = capsys.readouterr().err
    # (after the phase line that says --missing mask was chosen for the store)
    assert err.splitlines()[-1].startswith("dask-bid: error: --fill-missing applies to .npy "
                                           "and text files"), err
    assert "disagree" not in err and "Traceback" not in err


def test_second_cli_audit_messages(tmp_path, capsys):
    """rid's sketch options with --method cpqr were ignored without a word; --resume with
    nothing at OUT started a new fit without a word; info rounded 1 NaN in 6000 to 0.0 %."""
    npy = _npy_good(tmp_path)
    assert main(["rid", str(npy), "--k", "2", "--method", "cpqr", "--oversampling", "3"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--oversampling applies to --method "
                          "randomized", "drop it")
    assert main(["fit", str(npy), "--k", "2", "--out", str(tmp_path / "new.zarr"), *FAST,
                 "--resume"]) == 0
    cap = capsys.readouterr()
    assert f"resume       nothing at {tmp_path / 'new.zarr'} yet: a new fit" in cap.err
    # info shows the two summary lines it dropped, with fit's numbers
    fit_lines = {ln.split()[0]: ln.split(None, 1)[1] for ln in cap.out.splitlines()
                 if ln.startswith(("max|W|", "accepted"))}
    assert main(["info", str(tmp_path / "new.zarr")]) == 0
    info_lines = {ln.split()[0]: ln.split(None, 1)[1] for ln in
                  capsys.readouterr().out.splitlines() if ln.strip().startswith(("max|W|",
                                                                                  "accepted"))}
    assert "off the basis" in fit_lines["max|W|"] and info_lines == fit_lines
    A = np.ones((60, 100))
    A[3, 4] = np.nan
    np.save(tmp_path / "few.npy", A)
    assert main(["info", str(tmp_path / "few.npy")]) == 0
    text = capsys.readouterr().out
    assert "missing    1 NaN entries (0.017%)" in text
    assert "observed   5999 of 6000 entries (99.9833%)" in text


def test_info_of_a_one_column_text_file_says_what_fit_says(tmp_path, capsys):
    # it advised --row-labels first (its rows read as one text field each)
    src = _csv_semicolon(tmp_path)
    assert main(["info", str(src)]) == 2
    assert_one_line_error(capsys.readouterr().err, "one column", "'|'", "at least 2 columns")


def test_info_counts_nan_of_a_npy(tmp_path, capsys):
    A = np.arange(12.0).reshape(4, 3)
    A[0, 1] = A[3, 2] = np.nan
    A[2, 0] = np.inf
    np.save(tmp_path / "a.npy", A)
    assert main(["info", str(tmp_path / "a.npy")]) == 0
    text = capsys.readouterr().out
    assert "missing    2 NaN entries (16.7%), 1 infinite" in text
    assert main(["info", "--json", str(tmp_path / "a.npy")]) == 0
    assert '"n_nan": 2' in capsys.readouterr().out


def test_info_says_what_fit_does_with_the_nan_of_a_store(tmp_path, capsys):
    """A file: --missing mask or --fill-missing zero; a store: --missing mask, or fill the
    store (--fill-missing applies to files only); a store converted with --missing mask:
    fit takes it by itself."""
    from dask_bid.engine import to_zarr

    A = np.arange(12.0).reshape(4, 3)
    A[0, 1] = np.nan
    to_zarr(A, str(tmp_path / "raw.zarr"))
    assert main(["info", str(tmp_path / "raw.zarr")]) == 0
    text = capsys.readouterr().out
    assert "fill them in the store" in text and "or --fill-missing zero (" not in text
    np.save(tmp_path / "a.npy", A)
    assert main(["convert", str(tmp_path / "a.npy"), "--out", str(tmp_path / "k.zarr"),
                 "--missing", "mask", "-q"]) == 0
    assert main(["info", str(tmp_path / "k.zarr")]) == 0
    assert "fits it with --missing mask by itself" in capsys.readouterr().out


def test_paper_data_file_from_the_command_line(shared_data_dir, tmp_path, capsys):
    """The README's user on the paper's CCLE IC50 file: a clear refusal naming the flag,
    nothing left behind, then the fit with the paper's zero fill."""
    src = shared_data_dir / "ccle_ic50" / "ic50.txt"
    out = tmp_path / "k5.zarr"
    assert main(["fit", str(src), "--k", "5", "--out", str(out)]) == 2
    assert_one_line_error(capsys.readouterr().err, "ic50.txt", "NaN", "--missing mask",
                          "--fill-missing zero", progress_allowed=True)
    assert list(tmp_path.iterdir()) == []
    assert main(["fit", str(src), "--k", "5", "--out", str(out), "--fill-missing", "zero",
                 "--n-iter", "30", "--burn-in", "10", "--seed", "0", "-q"]) == 0
    z = zarr.open_array(str(tmp_path / "ic50.txt.zarr"), mode="r")
    assert z.shape == (504, 24) and z.attrs["dask_bid_missing"]["n_filled"] == 504 * 24 - 11670
    assert np.isfinite(z[...]).all()


def test_nan_in_zarr_input_does_not_block_the_retry(tmp_path, capsys):
    A, _ = _planted()
    A[5, 3] = np.nan
    z = zarr.create_array(str(tmp_path / "in.zarr"), shape=A.shape, chunks=(20, 10),
                          dtype="f8")
    z[...] = A
    args = ["fit", str(tmp_path / "in.zarr"), "--k", "2", "--out", str(tmp_path / "o.zarr"),
            *FAST]
    assert main(args) == 2
    assert_one_line_error(capsys.readouterr().err, "NaN", "--missing mask",
                          "--fill-missing zero", progress_allowed=True)
    # the Zarr array is read as is: --fill-missing names --missing mask instead
    assert main([*args, "--fill-missing", "zero"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--fill-missing applies to .npy",
                          "--missing mask")
    z[5, 3] = 0.0  # the user fills it and runs the same command again
    assert main([*args, "-q"]) == 0, capsys.readouterr().err


# ----------------------------------------------------------------------------- tracebacks

def test_no_worker_traceback_on_a_local_cluster(tmp_path):
    """A task that fails on a worker process (NaN found in a tile) is reported once, as
    the command's line: the workers of the CLI's local cluster log nothing."""
    from test_cli import run_cli

    A, _ = _planted()
    A[5, 3] = np.nan
    z = zarr.create_array(str(tmp_path / "in.zarr"), shape=A.shape, chunks=(20, 10),
                          dtype="f8")
    z[...] = A
    r = run_cli("fit", tmp_path / "in.zarr", "--k", "2", "--out", tmp_path / "o.zarr",
                "--n-iter", "10", "--burn-in", "2", "--scheduler", "local", "-q")
    assert r.returncode == 2
    assert "Compute Failed" not in r.stderr
    assert_one_line_error(r.stderr, "NaN", "--fill-missing zero")


def test_debug_shows_the_traceback(tmp_path):
    from dask_bid import StoreNotFoundError

    argv = ["fit", str(tmp_path / "missing.npy"), "--k", "2", "--out", str(tmp_path / "o")]
    with pytest.raises(StoreNotFoundError):
        main(["--debug", *argv])
    with pytest.raises(StoreNotFoundError):
        main([*argv, "--debug"])


def test_an_out_whose_folder_is_a_file_is_refused_before_the_fit(tmp_path, capsys):
    """rid's --out under a file: os.makedirs failed inside the standard library after the
    fit (one line and a log file); refused before INPUT is read now, saying what is wrong.
    (A library's error with its log file: test_cli.py, the fit that fails on a full disk.)"""
    A, _ = _planted()
    np.save(tmp_path / "a.npy", A)
    (tmp_path / "f").write_text("x")
    rc = main(["rid", str(tmp_path / "a.npy"), "--k", "2", "--out", str(tmp_path / "f" / "r")])
    assert rc == 2
    assert_one_line_error(capsys.readouterr().err, f"{str(tmp_path / 'f')!r} is not a folder; "
                          "choose another --out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "f"]


def test_unexpected_error_exits_1_with_a_log(tmp_path, capsys, monkeypatch):
    """A bug (any other exception): exit status 1, one line naming the log file; the
    fault is injected into the info command, which no real input makes fail this way."""
    import dask_bid.interface.cli.info as info_cmd

    def boom(args):
        raise RuntimeError("injected fault")

    monkeypatch.setattr(info_cmd, "run", boom)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert main(["info", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert_one_line_error(err, "internal error (RuntimeError: injected fault)",
                          "Please report it")
    assert list((tmp_path / "cache" / "dask_bid" / "logs").iterdir())
    with pytest.raises(RuntimeError):
        main(["info", str(tmp_path), "--debug"])


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="permissions do not bind root")
def test_permission_denied_is_one_line(tmp_path, capsys):
    A, _ = _planted()
    np.save(tmp_path / "a.npy", A)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        rc = main(["rid", str(tmp_path / "a.npy"), "--k", "2", "--out", str(ro / "r.npz")])
    finally:
        ro.chmod(0o700)
    assert rc == 2
    assert_one_line_error(capsys.readouterr().err, "permission denied", "choose another path")


def test_npz_with_pickles_is_refused_without_pickle_advice(tmp_path, capsys):
    np.savez(tmp_path / "p.npz", a=np.array([{"x": 1}], dtype=object))
    assert main(["info", str(tmp_path / "p.npz")]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "never pickled objects")
    assert "allow_pickle" not in err


# ----------------------------------------------------------------------------- warnings

def test_warnings_are_one_line_and_quiet_silences_them(tmp_path, capsys):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 2)) @ rng.standard_normal((2, 8))  # rank 2
    np.save(tmp_path / "a.npy", A)
    assert main(["rid", str(tmp_path / "a.npy"), "--k", "4", "--seed", "0"]) == 0
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert err and all(ln.startswith("dask-bid: warning: ") for ln in err), err
    assert "rank deficient" in err[0] and "--k 4" in err[0]
    assert main(["rid", str(tmp_path / "a.npy"), "--k", "4", "--seed", "0", "-q"]) == 0
    cap = capsys.readouterr()
    assert cap.err == "" and cap.out == ""


@pytest.mark.filterwarnings("default::dask_bid.ConvergenceWarning")
def test_a_fit_that_has_not_converged_says_so_in_one_line(tmp_path, capsys):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "a.npy", rng.standard_normal((40, 12)))
    args = ["fit", str(tmp_path / "a.npy"), "--k", "3", "--n-chains", "2", *FAST]
    assert main([*args, "--out", str(tmp_path / "r.zarr")]) == 0
    cap = capsys.readouterr()
    warn = [ln for ln in cap.err.replace("\r", "\n").splitlines() if "warning" in ln]
    assert len(warn) == 1, cap.err
    assert re.fullmatch(r"dask-bid: warning: the 2 chains have not converged \(.*\): the "
                        r"inclusion probabilities, .* run longer \(a larger --n-iter; "
                        r"--resume continues a fit saved to an output from where it "
                        r"ended\) or see "
                        r"docs/diagnostics.md, 'Convergence'", warn[0]), warn[0]
    line = [ln for ln in cap.out.splitlines() if ln.startswith("convergence  ")]
    assert len(line) == 1 and line[0].endswith("FAILED: not yet posterior summaries")
    assert "split R-hat" in line[0] and "ESS >= 200" in line[0]
    # info shows the same numbers, stored with the result
    assert main(["info", str(tmp_path / "r.zarr")]) == 0
    check = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  check  ")]
    assert len(check) == 1 and check[0].split("check", 1)[1].strip() == \
        line[0].split("convergence", 1)[1].strip()
    # the paper's aggressive sampler targets no known distribution: not judged (it was
    # called "a search", which is another sampler)
    assert main([*args, "--sampler", "aggressive", "--out", str(tmp_path / "s.zarr")]) == 0
    cap = capsys.readouterr()
    assert "not converged" not in cap.err
    assert "not judged: this sampler targets no known posterior (aggressive" in cap.out


def test_the_convergence_line_of_one_chain_says_what_it_could_not_check():
    from dask_bid.engine.convergence import check
    from dask_bid.interface.cli.report import convergence_line

    rng = np.random.default_rng(0)
    one = check(rng.normal(size=(1, 400)), rng.normal(size=(1, 400)))
    assert one.converged
    line = convergence_line(one, "collapsed")
    # no R-hat from one chain, and none wanted (a FAILED line listed "R-hat <= 1.01");
    # the two ESS say which is which
    assert "R-hat" not in line, line
    assert re.search(r"bulk ESS \d+ \(sigma2\), \d+ \(SSE\) \(wanted: ESS >= 100\)", line)
    assert line.endswith("passed (ESS only: --resume --n-chains 4 adds chains to compare)")
    short = check(rng.normal(size=(1, 30)), rng.normal(size=(1, 30)))
    assert not short.converged and "R-hat" not in convergence_line(short, "collapsed")
    two = check(rng.normal(size=(2, 400)), rng.normal(size=(2, 400)))
    assert convergence_line(two, "plain").endswith(": passed")
    assert convergence_line(two, "search").endswith("search: an optimisation)")
    # too few draws for any statistic: said so, no "R-hat nan" (a demo of 3 iterations)
    few = check(rng.normal(size=(2, 2)), rng.normal(size=(2, 2)))
    line = convergence_line(few, "collapsed")
    assert "nan" not in line and "2 retained draws per chain, too few to judge" in line


# ----------------------------------------------------------------------------- plot

def test_error_k_refuses_fits_of_different_inputs(tmp_path, capsys):
    A, _ = _planted()
    np.save(tmp_path / "a.npy", A)
    np.save(tmp_path / "b.npy", A[:, :8])
    np.save(tmp_path / "c.npy", A + 1.0)
    outs = {}
    for name, k in (("a", 1), ("a", 2), ("b", 2), ("c", 2)):
        out = tmp_path / f"{name}{k}.zarr"
        assert main(["fit", str(tmp_path / f"{name}.npy"), "--k", str(k), "--out", str(out),
                     *FAST, "-q"]) == 0
        outs[f"{name}{k}"] = str(out)
    png = str(tmp_path / "ek.png")
    assert main(["plot", outs["a1"], outs["a2"], "--kind", "error-k", "--out", png, "-q"]) == 0
    assert main(["plot", outs["a1"], outs["b2"], "--kind", "error-k", "--out", png]) == 2
    assert_one_line_error(capsys.readouterr().err, "one matrix", "40 x 10", "40 x 8")
    assert main(["plot", outs["a1"], outs["c2"], "--kind", "error-k", "--out", png]) == 2
    assert_one_line_error(capsys.readouterr().err, "one matrix", "Plot them separately")
    # with per-result kinds too: refused before any figure is drawn (they were written,
    # and the refusal did not say so)
    before = set(tmp_path.iterdir())
    assert main(["plot", outs["a1"], outs["b2"], "--kind", "trace,error-k", "--out",
                 str(tmp_path / "x")]) == 2
    assert_one_line_error(capsys.readouterr().err, "one matrix")
    assert set(tmp_path.iterdir()) == before
    # a stem ending in .PNG: dropped for the per-result figures, and used as is for
    # error-k, as for .png (it wrote Fig.PNG.error-k.png)
    assert main(["plot", outs["a1"], "--kind", "trace,error-k", "--out",
                 str(tmp_path / "Fig.PNG"), "-q"]) == 0
    assert {p.name for p in set(tmp_path.iterdir()) - before} == {"Fig.trace.png", "Fig.PNG"}


# ----------------------------------------------------------------------------- help

def test_every_option_of_every_command_has_help():
    from dask_bid.interface.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        for action in p._actions:
            assert action.help, f"dask-bid {name} {action.option_strings or action.dest}"


def test_demo_refuses_a_scheduler_that_is_no_address_before_writing(tmp_path, capsys):
    """The demo writes its matrix and compiles before it connects: a misspelt --scheduler
    is refused first, and no output folder is made."""
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--scheduler", "http://127.0.0.1:8787"]) == 2
    assert_one_line_error(capsys.readouterr().err, "is a web address", "tcp://")
    assert not out.exists()


def test_a_triplet_file_counting_from_0_read_from_1_names_the_flag_once(tmp_path, capsys):
    """The library's advice names both spellings ("index_base=0 (--index-base 0)"); the
    command line names the flag alone."""
    src = tmp_path / "r.txt"
    src.write_text("0 0 1.5\n1 2 2.5\n2 1 3.5\n")
    assert main(["convert", str(src), "--format", "triplets", "--index-base", "1", "--out",
                 str(tmp_path / "r.zarr"), "-q"]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "index 0 is below the first index 1; pass --index-base 0 if "
                          "the file counts from 0.")
    assert "index_base" not in err


def test_a_triplet_file_counting_from_1_read_with_and_without_index_base(tmp_path, capsys):
    """convert refuses it as fit does (and leaves no store), info notes it, and
    --index-base 1 fits it."""
    src = _triplets_from_one(tmp_path)
    store = tmp_path / "r.zarr"
    assert main(["convert", str(src), "--format", "triplets", "--out", str(store), "-q"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--index-base 1")
    assert not store.exists()
    assert main(["info", str(src), "--format", "triplets"]) == 0
    assert "column 0 holds no entry" in capsys.readouterr().out
    assert main(["info", str(src), "--format", "triplets", "--index-base", "1"]) == 0
    assert "column 0 holds no entry" not in capsys.readouterr().out
    out = tmp_path / "o.zarr"
    assert main(["fit", str(src), "--format", "triplets", "--missing", "mask",
                 "--index-base", "1", "--k", "2", "--out", str(out), *FAST, "-q"]) == 0
    assert out.is_dir()


def test_info_diagnostics_as_json_and_refused_for_a_fit_that_did_not_finish(tmp_path,
                                                                           capsys):
    """--json carries the diagnostics too (it dropped them), and --diagnostics of a failed
    fit says why it has none (it printed nothing and exited 0)."""
    import json

    out = tmp_path / "r.zarr"
    assert main(["fit", str(_npy_good(tmp_path)), "--k", "2", "--out", str(out), *FAST,
                 "--n-chains", "2", "-q"]) == 0
    capsys.readouterr()
    assert main(["info", str(out), "--diagnostics", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)["diagnostics"]
    # strict JSON: one chain's R-hat (NaN) is null, not a bare NaN
    one = tmp_path / "one.zarr"
    assert main(["fit", str(tmp_path / "in.npy"), "--k", "2", "--out", str(one), *FAST,
                 "-q"]) == 0
    capsys.readouterr()
    assert main(["info", str(one), "--diagnostics", "--json"]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text and '"nan"' not in text
    assert json.loads(text)["diagnostics"]["chains"]["sigma2"]["r_hat"] is None
    # the stored summary's too (kept as the string "nan" in the attributes: docs/cli.md)
    assert json.loads(text)["summary"]["convergence"]["r_hat_sigma2"] is None
    assert json.loads(text)["summary"]["convergence"]["judged"] is True
    # a search sampler's verdict is no verdict: "judged": false beside it
    agg = tmp_path / "agg.zarr"
    assert main(["fit", str(tmp_path / "in.npy"), "--k", "2", "--out", str(agg), *FAST,
                 "--sampler", "aggressive", "-q"]) == 0
    capsys.readouterr()
    assert main(["info", str(agg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["convergence"]["judged"] is False
    assert main(["info", str(out), "--diagnostics"]) == 0
    text = capsys.readouterr().out
    for name in ("sigma2", "mse"):
        c = d["chains"][name]
        assert f"{name:<7} r_hat {c['r_hat']:.3f}  ess_bulk {c['ess_bulk']:.0f}" in text
    assert len(d["inclusion_probability"]) == len(d["inclusion_mcse"]) == 10
    bad = np.load(tmp_path / "in.npy")
    bad[3, 3] = np.nan
    zarr.create_array(str(tmp_path / "nan.zarr"), data=bad)
    failed = tmp_path / "failed.zarr"
    assert main(["fit", str(tmp_path / "nan.zarr"), "--k", "2", "--out", str(failed), *FAST,
                 "--missing", "zero", "-q"]) == 2
    capsys.readouterr()
    assert main(["info", str(failed), "--diagnostics"]) == 2
    assert_one_line_error(capsys.readouterr().err, "did not finish: it failed",
                          "run the same dask-bid fit again (it replaces a failed fit)")
    assert main(["info", str(tmp_path / "in.npy"), "--diagnostics"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--diagnostics describes the chains")


def test_a_foreign_store_where_the_conversion_goes_is_refused_without_advising_overwrite(
        tmp_path, capsys):
    # the advice was "pass --overwrite", which was then refused as not dask_bid's
    src = _npy_beside_a_foreign_store(tmp_path)
    assert main(["fit", str(src), "--k", "2", "--out", str(tmp_path / "o.zarr"), *FAST]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "refusing to replace", "not a Zarr array dask_bid wrote")
    assert "pass --overwrite" not in err


def test_where_the_conversion_goes_an_empty_folder_is_used_a_link_or_folder_refused(
        tmp_path, capsys):
    """An empty folder where the input converts to was refused "even with --overwrite"
    (docs/errors.md: empty folders are written into); a symbolic link there was told
    "remove it" as a folder would be; neither said where that path came from."""
    src = _npy_good(tmp_path)
    conv = tmp_path / f"{src.name}.zarr"
    conv.mkdir()
    assert main(["fit", str(src), "--k", "2", "--out", str(tmp_path / "o.zarr"), *FAST,
                 "-q"]) == 0
    assert zarr.open_array(str(conv), mode="r").shape == np.load(src).shape
    for name, make, words in (
            ("link", lambda p: p.symlink_to(tmp_path / "elsewhere", target_is_directory=True),
             "the store the input converts to, is a symbolic link, which dask-bid never "
             "writes through"),
            # a link to the input itself was told "--out ... is the input" of that path
            ("tolink", lambda p: p.symlink_to(p.parent / src.name),
             "the store the input converts to, is a symbolic link, which dask-bid never "
             "writes through"),
            ("mine", lambda p: (p.mkdir(), (p / "notes.txt").write_text("x")),
             "the store the input converts to, exists and is not a Zarr array: it is never "
             "replaced")):
        (tmp_path / "elsewhere").mkdir(exist_ok=True)
        d = tmp_path / name
        d.mkdir()
        (d / src.name).write_bytes(src.read_bytes())
        make(d / f"{src.name}.zarr")
        for more in ([], ["--overwrite"]):
            assert main(["fit", str(d / src.name), "--k", "2", "--out", str(d / "o.zarr"),
                         *FAST, *more]) == 2
            assert_one_line_error(capsys.readouterr().err, words, "choose another --out (a "
                                  "fit writes the conversion of its input into the folder")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_an_infinity_in_a_zarr_input_is_not_sent_to_missing_mask(tmp_path, capsys):
    """"NaN or infinity" of an infinity advised --missing mask, which then refused it
    ("treats only NaN as missing"): the entry is looked at, and an infinity is said so."""
    A, _ = _planted()
    A[5, 3] = np.inf
    zarr.create_array(str(tmp_path / "inf.zarr"), data=A)
    assert main(["fit", str(tmp_path / "inf.zarr"), "--k", "2", "--out",
                 str(tmp_path / "r.zarr"), *FAST, "--missing", "zero"]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "contains infinity (at row 5, column 3", "replace the "
                          "infinities", "--missing mask treats only NaN as missing",
                          progress_allowed=True)
    assert "Pass --missing mask" not in err
    # a link as convert's --out (to the input itself): named as a link, not "INPUT itself"
    np.save(tmp_path / "a.npy", A)
    os.symlink(tmp_path / "a.npy", tmp_path / "lk.zarr")
    assert main(["convert", str(tmp_path / "a.npy"), "--out", str(tmp_path / "lk.zarr")]) == 2
    assert_one_line_error(capsys.readouterr().err, "is a symbolic link, which dask-bid never "
                          "writes through")


def test_wrong_kinds_of_paths_are_named_with_the_fix(tmp_path, capsys):
    """Each said what it was and what to do (before: 'got 0-D shape ()' for rid of a
    sparse store, the .npy's bytes quoted back for --format triplets, '[Errno 17]' with a
    log for a demo --out that is a file, no fix for an --out that is a file, zarr's
    exception text for plot of something that is no result, and a folder of files taken
    for a store that --out lay inside)."""
    import scipy.sparse as sp

    from dask_bid.interface.sparse_io import convert_sparse

    npy = _npy_good(tmp_path)
    convert_sparse(sp.random(20, 6, density=0.5, format="coo", random_state=0),
                   tmp_path / "s.zarr", quiet=True)
    a_file = tmp_path / "f.zarr"
    a_file.write_text("")
    store = _zarr_good(tmp_path)
    for args, fragments in [
        # (it said "a pivoted-QR ID" of the default, randomized method)
        (["rid", str(tmp_path / "s.zarr"), "--k", "2"],
         ["is a sparse store, whose absent entries are unobserved",
          "rid (--method randomized) needs every entry", "fit the store with dask-bid fit"]),
        (["convert", str(npy), "--out", str(tmp_path / "c.zarr"), "--format", "triplets"],
         ["is a numpy file", "drop --format triplets"]),
        (["fit", str(npy), "--k", "2", "--out", str(tmp_path / "c.zarr"), "--format",
          "triplets"], ["is a numpy file", "drop --format triplets"]),
        (["demo", "--out", str(a_file)], ["is an existing file", "choose another --out"]),
        (["fit", str(npy), "--k", "2", "--out", str(a_file), "--overwrite"],
         ["is an existing file", "choose another --out, or move the file"]),
        # in words, not zarr's exception names (ContainsArrayError)
        (["plot", str(store)], ["is not a dask_bid output group (a Zarr array, perhaps an "
                                "input matrix)", "pass the --out of a fit"]),
        # a folder of files with --out inside it: the folder is no store (it said that
        # --out lay inside the input)
        (["fit", str(tmp_path), "--k", "2", "--out", str(tmp_path / "x.zarr")],
         ["no Zarr store at", "in.npy", "pass one of them"]),
    ]:
        assert main([*args, "-q"]) == 2, args
        err = capsys.readouterr().err
        assert_one_line_error(err, *fragments, progress_allowed=True)
        assert "Errno" not in err and "0-D" not in err and "Error:" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.zarr", "in.npy", "in.zarr",
                                                         "s.zarr"]


def test_the_demo_replaces_only_what_a_demo_wrote(tmp_path, capsys):
    """--out DIR may be a folder of the user's: a figure or a Zarr array of theirs under
    the demo's names is refused before any work (the demo replaced them)."""
    out = tmp_path / "work"
    out.mkdir()
    (out / "result.png").write_bytes(b"\x89PNG\r\n\x1a\n not the demo's")
    assert main(["demo", "--out", str(out), "-q"]) == 2
    assert_one_line_error(capsys.readouterr().err, "refusing to replace", "result.png")
    (out / "result.png").unlink()
    other = zarr.create_array(store=str(out / "A.zarr"), shape=(3, 3), dtype="f8")
    other[:] = 7.0
    assert main(["demo", "--out", str(out), "-q"]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "refusing to replace", "A.zarr", "not a Zarr array dask_bid "
                          "wrote", "Choose another --out folder")
    assert "--overwrite" not in err  # the demo has no such flag
    assert sorted(p.name for p in out.iterdir()) == ["A.zarr"]
    assert (zarr.open_array(str(out / "A.zarr"), mode="r")[...] == 7.0).all()


def test_the_demo_replaces_no_store_or_fit_of_the_users_own_made_by_dask_bid(tmp_path,
                                                                             capsys):
    """A store the user converted, and a fit of theirs, are dask_bid's but not the
    demo's: both refused (the demo replaced them); its own matrix and fit, even after a
    stop, are replaced."""
    import shutil

    out = tmp_path / "work"
    src = _npy_good(tmp_path)
    assert main(["convert", str(src), "--out", str(out / "A.zarr"), "-q"]) == 0
    demo = ["demo", "--out", str(out), "-q", "--scheduler", "synchronous", "--n-iter", "3"]
    assert main(demo) == 2
    assert_one_line_error(capsys.readouterr().err, "refusing to replace", "A.zarr",
                          "not the demo's matrix", "--out")
    shutil.rmtree(out)
    assert main(demo) == 0  # its own folder now: the demo's matrix and fit (a next demo
    # replaces them: tests/test_cli.py::test_demo_runs_end_to_end)
    # a demo fit that did not finish (stopped before its mark; here its status set so):
    # the demo's, replaced
    g = zarr.open_group(str(out / "result.zarr"), mode="r+")
    meta = dict(g.attrs["dask_bid"], status="interrupted")
    g.attrs.update({"dask_bid": meta})
    del g.attrs["dask_bid_demo"]
    assert main(demo) == 0
    # the demo's fit with a file of the user's in it: named as such (it said "not a
    # result dask_bid wrote")
    (out / "result.zarr" / "notes.txt").write_text("mine")
    assert main(demo) == 2
    assert_one_line_error(capsys.readouterr().err, "refusing to replace", "result.zarr",
                          "it is a result, but it holds notes.txt, which dask_bid did not "
                          "write")
    (out / "result.zarr" / "notes.txt").unlink()
    (out / "A.zarr" / "notes.txt").write_text("mine")  # and in its matrix
    assert main(demo) == 2
    assert_one_line_error(capsys.readouterr().err, "refusing to replace", "A.zarr",
                          "it is a Zarr array dask_bid wrote, but it holds notes.txt")
    (out / "A.zarr" / "notes.txt").unlink()
    assert main(["fit", str(out / "A.zarr"), "--k", "3", "--out", str(out / "result.zarr"),
                 "--overwrite", "-q", *FAST]) == 0
    assert main(demo) == 2  # a fit of the user's (complete, unmarked), of that matrix
    assert_one_line_error(capsys.readouterr().err, "refusing to replace", "result.zarr",
                          "not the demo's")
    assert zarr.open_group(str(out / "result.zarr"), mode="r").attrs["dask_bid"][
        "params"]["n_components"] == 3


def test_plots_replace_only_figures_dask_bid_wrote(tmp_path, capsys):
    """fit --plot and plot wrote over any file of the name they chose (or --out gave):
    now a figure of the user's there is refused before any work; their own is replaced."""
    src = _npy_good(tmp_path)
    out = tmp_path / "r.zarr"
    mine = tmp_path / "r.trace.png"
    mine.write_bytes(b"\x89PNG\r\n\x1a\n the user's figure")
    args = ["fit", str(src), "--k", "2", "--out", str(out), *FAST, "--plot", "trace"]
    assert main(args) == 2
    assert_one_line_error(capsys.readouterr().err, "refusing to replace", "r.trace.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.npy", "r.trace.png"]
    mine.unlink()
    assert main(args + ["-q"]) == 0  # writes its own figure ...
    assert main(["plot", str(out), "--kind", "trace", "-q"]) == 0  # ... and replaces it
    other = tmp_path / "fig.error-k.png"
    other.write_bytes(b"\x89PNG\r\n\x1a\n another figure")
    assert main(["plot", str(out), "--kind", "error-k", "--out", str(tmp_path / "fig")]) == 2
    assert_one_line_error(capsys.readouterr().err, "refusing to replace", "fig.error-k.png")
    assert other.read_bytes().endswith(b"another figure")


def test_a_prior_outweighing_the_data_is_said_with_the_flag_to_pass(tmp_path, capsys):
    """Data in small units with the default --beta-sigma 1: said in the command line's
    words, with the value to pass, which the command line now takes (--alpha-sigma and
    --beta-sigma: the prior of sigma^2 could not be set from the command line at all)."""
    from dask_bid.engine import read_result
    from dask_bid.interface.demo import make_demo_matrix

    A, _, _ = make_demo_matrix(60, 12, 2, seed=0)
    np.save(tmp_path / "A.npy", A * 1e-4)
    args = ["fit", str(tmp_path / "A.npy"), "--k", "2", *FAST]
    assert main([*args, "--out", str(tmp_path / "a.zarr")]) == 0
    warned = [ln for ln in capsys.readouterr().err.splitlines()
              if "exceeds half the sum of A^2" in ln]
    mean_sq = float(np.mean((A * 1e-4) ** 2))
    assert len(warned) == 1 and warned[0].startswith("dask-bid: warning: --beta-sigma 1 (")
    assert f"(e.g. --beta-sigma {mean_sq:.3g}, the mean of A^2" in warned[0], warned[0]
    assert main([*args, "--out", str(tmp_path / "b.zarr"), "--beta-sigma", f"{mean_sq:.3g}",
                 "--alpha-sigma", "0.5"]) == 0
    assert "exceeds half the sum" not in capsys.readouterr().err
    params = read_result(str(tmp_path / "b.zarr")).params
    assert params["beta_sigma"] == float(f"{mean_sq:.3g}") and params["alpha_sigma"] == 0.5
    assert main([*args, "--out", str(tmp_path / "c.zarr"), "--beta-sigma", "0"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--beta-sigma must be a positive finite "
                          "number, got 0.0")


def test_the_engines_log_is_said_as_warnings_are_and_quiet_silences_it(capsys):
    """The engine's log warnings (a lost worker replayed, a rescaled matrix, a cluster
    without workers) came out raw through Python's last-resort handler, without the
    prefix and under --quiet too."""
    import io
    import logging

    from dask_bid.interface.cli._core import warning_lines

    for quiet, want in ((False, "dask-bid: warning: chain 0: lost work (--n-iter)\n"),
                        (True, "")):
        buf = io.StringIO()
        with warning_lines(quiet=quiet, file=buf):
            logging.getLogger("dask_bid.engine").warning("chain %d: lost work (n_iter)", 0)
        assert buf.getvalue() == want
        assert capsys.readouterr().err == ""
    assert logging.getLogger("dask_bid").handlers == []  # given back


def test_a_resume_refused_for_the_burn_in_names_the_warm_up_in_flag_words(tmp_path, capsys):
    """The warm-up the burn-in derives is said to follow it "when not given" (the
    library's "when 'auto'": the flag takes no 'auto')."""
    path = _npy_good(tmp_path)
    args = ["fit", str(path), "--k", "2", "--out", str(tmp_path / "o.zarr"), *FAST]
    assert main([*args, "-q"]) == 0
    assert main([*args, "--resume", "--burn-in", "12"]) == 2
    assert_one_line_error(capsys.readouterr().err, "(--burn-in: stored 10, now 12; "
                          "--tempered-warmup: stored 7, now 9 (from --burn-in when not "
                          "given))", progress_allowed=True)


def test_info_shows_no_collapsed_option_of_another_samplers_fit(tmp_path, capsys):
    """A --sampler plain fit listed n_pivot=8, n_tries=8, tempered_warmup=7 ..., options
    fit refuses with that sampler since its chain never reads them."""
    path = _npy_good(tmp_path)
    for sampler, shown in (("plain", False), ("collapsed", True)):
        out = tmp_path / f"{sampler}.zarr"
        assert main(["fit", str(path), "--k", "2", "--out", str(out), *FAST, "--sampler",
                     sampler, "-q"]) == 0
        assert main(["info", str(out)]) == 0
        params = next(ln for ln in capsys.readouterr().out.splitlines()
                      if ln.startswith("  params "))
        for name in ("n_pivot=", "n_tries=", "tempered_warmup=", "n_anneal=", "n_redraw=",
                     "acceptance=", "warmup_temperature="):
            assert (name in params) is shown, (sampler, params)
