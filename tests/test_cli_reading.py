"""How the command line reads text matrices: row labels and header lines.

The files a user has are mostly written by pandas (``DataFrame.to_csv`` writes the index
as a first column) or R (``write.csv`` writes the row names). Fitted as data, such a
column becomes a column of A, and a likely pick for the basis: a result silently built
from other data. These tests write the files with pandas itself where it made them.
"""

import csv
import json
import os

import numpy as np
import pandas as pd
import pytest
import zarr

from dask_bid import open_result
from dask_bid.interface.cli import CLIError, convert_to_zarr, main
from dask_bid.interface.cli.convert import load_in_memory
from dask_bid.interface.cli.reading import KEEP_NAN
from dask_bid.interface.demo import make_demo_matrix

M, N, K = 40, 12, 3


@pytest.fixture(scope="module")
def A():
    return make_demo_matrix(M, N, K, seed=3)[0]


def _info(path, capsys, *flags):
    assert main(["info", str(path), "--json", *flags]) == 0
    return json.loads(capsys.readouterr().out)


def _pandas(A, path, **kw):
    pd.DataFrame(A, **kw.pop("frame", {})).to_csv(path, **kw)
    return path


def _r_write_csv(A, path, names=None):
    """The format of R's ``write.csv(matrix)``: quoted names, a quoted empty corner.
    ``names``: the column names (R's default V1, V2, ...); numbers (years) are quoted as
    the row names are: the quotes, not the digits, say they are names."""
    names = names or [f"V{j + 1}" for j in range(A.shape[1])]
    with open(path, "w") as fh:
        fh.write(",".join(['""'] + [f'"{n}"' for n in names]) + "\n")
        for i, row in enumerate(A):
            fh.write(",".join([f'"{i + 1}"'] + [repr(float(x)) for x in row]) + "\n")
    return path


def _r_write_table(A, path):
    """The format of R's ``write.table(matrix, sep="\\t")``: the header has no field for
    the row names."""
    with open(path, "w") as fh:
        fh.write("\t".join(f'"V{j + 1}"' for j in range(A.shape[1])) + "\n")
        for i, row in enumerate(A):
            fh.write("\t".join([f'"{i + 1}"'] + [repr(float(x)) for x in row]) + "\n")
    return path


LABELLED = {
    # pandas' default: an unnamed integer index, named columns
    "pandas-default-index": lambda A, p: _pandas(
        A, p, frame={"columns": [f"drug{j}" for j in range(N)]}),
    # an array's DataFrame: the header is ",0,1,2,..."
    "pandas-array": lambda A, p: _pandas(A, p),
    # a named index of names (cell lines x drugs)
    "pandas-named-labels": lambda A, p: _pandas(
        A, p, frame={"index": pd.Index([f"cell{i}" for i in range(M)], name="cell_line"),
                     "columns": [f"drug{j}" for j in range(N)]}),
    # labels and no header at all
    "labels-no-header": lambda A, p: _pandas(
        A, p, frame={"index": [f"cell{i}" for i in range(M)]}, header=False),
    "r-write-csv": _r_write_csv,
    "r-write-csv-years": lambda A, p: _r_write_csv(
        A, p, names=[str(2001 + j) for j in range(A.shape[1])]),
    # R's write.table(col.names = FALSE, sep = ","): quoted row names "1", "2", ... and no
    # header; the quotes say they are names
    "r-quoted-row-names-no-header": lambda A, p: p.write_text("".join(
        ",".join([f'"{i + 1}"'] + [repr(float(x)) for x in row]) + "\n"
        for i, row in enumerate(A))) and p,
    "r-write-table": _r_write_table,
}


@pytest.mark.parametrize("kind", sorted(LABELLED))
def test_row_labels_are_left_out(kind, A, tmp_path, capsys):
    path = LABELLED[kind](A, tmp_path / f"{kind}.{'tsv' if 'table' in kind else 'csv'}")
    # the values, bit for bit, and the shape without the label column
    np.testing.assert_array_equal(load_in_memory(str(path)), A)
    info = _info(path, capsys)
    assert info["shape"] == [M, N] and info["row_labels"] and info["row_labels_why"]
    dst = str(tmp_path / "c.zarr")
    convert_to_zarr(str(path), dst, quiet=True)
    z = zarr.open_array(dst, mode="r")
    np.testing.assert_array_equal(z[...], A)
    assert z.attrs["dask_bid_text_layout"]["row_labels"] is True
    # the header's names of the data columns are kept (the corner, the label column's
    # name, is not one of them)
    names = z.attrs.get("dask_bid_column_names")
    if "no-header" in kind:
        assert names is None
    else:
        assert len(names) == N and names[-1] in ("drug11", "11", "V12", "2012")
    # --row-labels none: every column is data (the label column of numbers is then
    # refused only where it holds text)
    if kind in ("pandas-default-index", "pandas-array"):
        assert _info(path, capsys, "--row-labels", "none")["shape"] == [M, N + 1]


def test_plain_numeric_files_read_as_before(tmp_path, capsys):
    path = tmp_path / "plain.csv"
    path.write_text("1,2,3\n4,5,6\n7,8,9\n")
    info = _info(path, capsys)
    assert info["shape"] == [3, 3] and not info["header"] and not info["row_labels"]
    path = tmp_path / "named.csv"
    path.write_text("a,b,c\n1,2,3\n4,5,6\n")
    assert _info(path, capsys)["shape"] == [2, 3]
    np.testing.assert_array_equal(load_in_memory(str(path)), [[1, 2, 3], [4, 5, 6]])
    # a first row that starts with an empty field is data with a missing value
    path = tmp_path / "missing.csv"
    path.write_text(",2.5,3.5\n4,5,6\n")
    info = _info(path, capsys)
    assert info["shape"] == [2, 3] and info["n_nan"] == 1 and not info["row_labels"]


def test_a_fit_of_a_pandas_file_is_the_fit_of_its_matrix(A, tmp_path, capsys):
    path = LABELLED["pandas-named-labels"](A, tmp_path / "cells.csv")
    np.save(tmp_path / "a.npy", A)
    common = ["--k", str(K), "--n-iter", "30", "--burn-in", "10", "--seed", "4",
              "--scheduler", "synchronous", "-q"]
    assert main(["fit", str(tmp_path / "a.npy"), "--out", str(tmp_path / "ref.zarr"),
                 *common]) == 0
    capsys.readouterr()
    assert main(["fit", str(path), "--out", str(tmp_path / "csv.zarr"), *common[:-1]]) == 0
    cap = capsys.readouterr()
    # the phase line says what was left out, why, and how to keep it
    assert "rows         column 1 of" in cap.err and "--row-labels none" in cap.err
    ref = zarr.open_group(tmp_path / "ref.zarr", mode="r")
    got = zarr.open_group(tmp_path / "csv.zarr", mode="r")
    np.testing.assert_array_equal(got["columns"][...], ref["columns"][...])
    np.testing.assert_array_equal(got["W"][...], ref["W"][...])
    # the summary names the selected columns by the header's names
    picked = ", ".join(f"drug{j}" for j in ref["columns"][...])
    assert f"names        {picked}\n" in cap.out, cap.out
    # ... and the result keeps them: info RESULT and the library read them back
    assert main(["info", str(tmp_path / "csv.zarr")]) == 0
    assert f"  names      {picked}\n" in capsys.readouterr().out
    est = open_result(tmp_path / "csv.zarr")
    assert list(est.feature_names_in_) == [f"drug{j}" for j in range(A.shape[1])]
    assert ", ".join(est.get_feature_names_out()) == picked
    assert main(["info", str(tmp_path / "cells.csv.zarr")]) == 0  # the converted store
    assert "  names      drug0, drug1, drug2, drug3, drug4, drug5, drug6, drug7, ..., " \
        f"drug11 ({N} columns)\n" in capsys.readouterr().out
    assert main(["info", str(tmp_path / "ref.zarr")]) == 0  # a .npy has no names
    assert "names" not in capsys.readouterr().out
    assert not hasattr(open_result(tmp_path / "ref.zarr"), "feature_names_in_")


def test_a_column_of_row_numbers_is_refused(A, tmp_path, capsys):
    # a named integer index: nothing in the header says it is one
    path = _pandas(A, tmp_path / "ids.csv", frame={"index": pd.RangeIndex(M, name="id")})
    info = _info(path, capsys)
    assert info["shape"] == [M, N + 1] and info["row_numbers_in_column_1"] == \
        f"0, 1, ..., {M - 1}"
    out = tmp_path / "r.zarr"
    args = ["fit", str(path), "--k", str(K), "--n-iter", "30", "--burn-in", "10",
            "--out", str(out), "--scheduler", "synchronous", "-q"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("dask-bid: error: column 1 of") and "--row-labels first" in \
        err[-1] and "--row-labels none" in err[-1]
    # nothing left that would block the retry: no output, no converted store
    assert not out.exists() and not (tmp_path / "ids.csv.zarr").exists()
    assert main([*args, "--row-labels", "first"]) == 0
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "ids.csv.zarr", mode="r")[...], A)
    with pytest.raises(CLIError, match="row numbers 0, 1"):
        load_in_memory(str(path))
    np.testing.assert_array_equal(load_in_memory(str(path), row_labels="none")[:, 0],
                                  np.arange(M))


def test_ambiguous_first_lines_ask_for_header(A, tmp_path, capsys):
    years = tmp_path / "years.csv"
    years.write_text("gene," + ",".join(str(2000 + j) for j in range(3)) + "\n"
                     "TP53,0.5,0.25,1.5\nKRAS,1,2,3\n")
    with pytest.raises(CLIError, match="could be a header.*--header yes or --header no"):
        load_in_memory(str(years))
    np.testing.assert_array_equal(load_in_memory(str(years), header="yes"),
                                  [[0.5, 0.25, 1.5], [1, 2, 3]])
    assert load_in_memory(str(years), header="no").shape == (3, 3)
    # pandas writes an array's columns as 0, 1, ...; without its index (index=False)
    # line 1 could as well be a row of the matrix
    cols = _pandas(A, tmp_path / "cols.csv", index=False)
    assert main(["info", str(cols)]) == 2
    err = capsys.readouterr().err
    assert "holds 0, 1, ..., 11" in err and "--header yes or --header no" in err
    np.testing.assert_array_equal(load_in_memory(str(cols), header="yes"), A)
    # mostly numbers and a stray word in line 1: a typo in the first data row was read as
    # a header, and the row silently left out of the matrix
    typo = tmp_path / "typo.csv"
    typo.write_text("1,2,x\n4,5,6\n7,8,9\n")
    with pytest.raises(CLIError, match=r"holds numbers \(1, ...\) and text \('x'\).*"
                                       "--header yes, or fix the cell and pass --header no"):
        load_in_memory(str(typo))
    assert load_in_memory(str(typo), header="yes").shape == (2, 3)
    names = tmp_path / "names.csv"  # mostly names: a header, as before
    names.write_text("a,b,2\n4,5,6\n7,8,9\n")
    assert load_in_memory(str(names)).shape == (2, 3)


@pytest.mark.parametrize("text, match", [
    # the columns named are the file's (the label column counted)
    ("name,a,b,c\nx,1,2,3\ny,4,inf,6\n", "line 3, column 3 of"),
    ("name,a,b,c\nx,1,2,3\ny,4,,6\n", "line 3, column 3"),
    ("name,a,b,c\nx,1,2,3\ny,4,oops,6\n", "line 3, column 3 of .* holds 'oops'"),
    # a ragged labelled row is found, though numpy reads only the data columns
    ("name,a,b\nx,1,2\ny,4,5,6\n", "line 3 of .* has 4 columns, the first line has 3"),
    # unlabelled, text in the first column: the refusal points at --row-labels
    ("1,2,3\nx,5,6\n", "--row-labels first"),
], ids=["inf", "nan", "text", "ragged", "unlabelled"])
def test_refusals_name_the_files_columns(text, match, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(CLIError, match=match):
        load_in_memory(str(path))


def test_reading_options_are_checked(A, tmp_path, capsys):
    np.save(tmp_path / "a.npy", A)
    assert main(["fit", str(tmp_path / "a.npy"), "--k", "3", "--out",
                 str(tmp_path / "o.zarr"), "--row-labels", "first"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("dask-bid: error: --row-labels first applies to text INPUT") \
        and len(err.splitlines()) == 1
    assert not (tmp_path / "o.zarr").exists()
    # a conversion read with labels is not reused by a call that reads it without
    path = LABELLED["pandas-default-index"](A, tmp_path / "p.csv")
    dst = str(tmp_path / "p.zarr")
    convert_to_zarr(str(path), dst, quiet=True)
    with pytest.raises(CLIError, match="read with a column of row labels.*--overwrite"):
        convert_to_zarr(str(path), dst, quiet=True, row_labels="none")
    convert_to_zarr(str(path), dst, quiet=True, row_labels="none", overwrite=True)
    assert zarr.open_array(dst, mode="r").shape == (M, N + 1)
    assert os.path.exists(path)  # the input is never touched


def test_a_file_of_another_suffix_points_at_the_triplet_reader(tmp_path, capsys):
    # MovieLens' u.data: user, item, rating, time, tab-separated, no suffix dask-bid knows
    path = tmp_path / "u.data"
    path.write_text("196\t242\t3\t881250949\n186\t302\t3\t891717742\n")
    for args in (["fit", str(path), "--k", "2", "--out", str(tmp_path / "o.zarr")],
                 ["info", str(path)]):
        assert main(args) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "--format triplets" in err, err
    assert not (tmp_path / "o.zarr").exists()


# ----------------------------------------------------------------------------- other exports
def _with_missing(A):
    B = A.copy()
    B[0, 0] = B[5, 3] = B[M - 1, N - 1] = np.nan
    return B


def _trailing(A, path, header_too):
    names = ",".join(f"drug{j}" for j in range(N)) + ("," if header_too else "")
    rows = (",".join(repr(float(x)) for x in r) + "," for r in A)
    path.write_text(names + "\n" + "\n".join(rows) + "\n")
    return path


#: writer, whether the matrix has the NaN of _with_missing
EXPORTS = {
    # a European spreadsheet: semicolons, decimal commas, CRLF
    "semicolon-decimal-comma": (lambda A, p: _pandas(
        A, p, sep=";", decimal=",", index=False, lineterminator="\r\n",
        frame={"columns": [f"drug{j}" for j in range(N)]}), False),
    # ... with NA for a missing value (read line by line)
    "semicolon-decimal-comma-na": (lambda A, p: _pandas(
        _with_missing(A), p, sep=";", decimal=",", index=False, na_rep="NA",
        frame={"columns": [f"drug{j}" for j in range(N)]}), True),
    # every field quoted, a byte-order mark (Excel's "CSV UTF-8")
    "quote-all-bom": (lambda A, p: _pandas(
        A, p, quoting=csv.QUOTE_ALL, index=False, encoding="utf-8-sig",
        frame={"columns": [f"drug{j}" for j in range(N)]}), False),
    # quoted numbers and no header: line 1 is data, not a header of quoted names
    "quote-all-no-header": (lambda A, p: _pandas(
        A, p, quoting=csv.QUOTE_ALL, index=False, header=False), False),
    # R's write.csv: NA for a missing value, quoted row names
    "r-na": (lambda A, p: _pandas(
        _with_missing(A), p, na_rep="NA",
        frame={"index": [str(i + 1) for i in range(M)],
               "columns": [f"drug{j}" for j in range(N)]}), True),
    # other markers of a missing value, and no header
    "na-markers": (lambda A, p: _pandas(
        _with_missing(A), p, na_rep="#N/A", index=False, header=False), True),
    # a delimiter at the end of every data line, with and without one after the header
    "trailing-delimiter": (lambda A, p: _trailing(A, p, header_too=False), False),
    "trailing-delimiter-header-too": (lambda A, p: _trailing(A, p, header_too=True), False),
}


@pytest.mark.parametrize("kind", sorted(EXPORTS))
def test_other_exports_read_as_their_matrix(kind, A, tmp_path, capsys):
    """Each export reads as its matrix bit for bit: the shape, every value, NaN where a
    value is missing. Before: the semicolon file, quoted numbers and NA were refused;
    the headerless quoted file lost its first row to a 'header'; a trailing delimiter
    made R's row-name rule drop the first column of data."""
    write, has_nan = EXPORTS[kind]
    path = write(A, tmp_path / f"{kind}.csv")
    want = _with_missing(A) if has_nan else A
    np.testing.assert_array_equal(load_in_memory(str(path), fill_missing="keep"), want)
    info = _info(path, capsys)
    assert info["shape"] == [M, N] and info["n_nan"] == (3 if has_nan else 0)
    assert info["row_labels"] == (kind == "r-na")
    assert info["trailing_delimiter"] == kind.startswith("trailing")
    assert info["decimal"] == ("," if kind.startswith("semicolon") else ".")
    dst = str(tmp_path / "c.zarr")
    convert_to_zarr(str(path), dst, quiet=True, fill_missing="keep")
    z = zarr.open_array(dst, mode="r")
    np.testing.assert_array_equal(z[...], want)
    names = z.attrs.get("dask_bid_column_names")
    assert names == (None if "no-header" in kind or kind == "na-markers"
                     else [f"drug{j}" for j in range(N)])
    assert info["column_names"] == names  # info shows the names it found
    if names:
        assert main(["info", str(path)]) == 0
        assert (f"  names      drug0, drug1, drug2, drug3, drug4, drug5, drug6, drug7, ..., "
                f"drug11 ({N} columns)\n") in capsys.readouterr().out


@pytest.mark.parametrize("first, second, delim", [
    ("a;b;c", "1,5;2,5;3,5", ";"),        # a header, decimal commas
    ("1,5;2,5;3,5", "4,5;5,5;6,5", ";"),  # no header: the fields are decimal-comma numbers
    ("1;2;3", "4;5;6", ";"),
    ("cell;A,1,2", "cell;B,3,4", ","),    # a semicolon inside a label of a comma file
    ("x;y,1,2", "3,4,5", ","),            # ... inside a header name
    ("a,b,c", "1,2,3", ","),
])
def test_the_semicolon_is_taken_only_where_it_splits_the_lines(first, second, delim):
    from dask_bid.interface.cli.reading import _delimiter

    assert _delimiter("f.csv", first, second) == delim


def test_a_decimal_comma_is_found_after_lines_of_integers(tmp_path):
    """The first lines of a semicolon file may hold integers only: the decimal mark is
    looked for further on."""
    path = tmp_path / "eu.csv"
    path.write_text("a;b\n1;2\n3;4\n5;6,25\n")
    np.testing.assert_array_equal(load_in_memory(str(path)), [[1, 2], [3, 4], [5, 6.25]])


def test_a_trailing_delimiter_then_a_value_is_refused(A, tmp_path):
    path = _trailing(A, tmp_path / "t.csv", header_too=False)
    lines = path.read_text().splitlines()
    lines[7] = lines[7] + "5.0"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CLIError, match=r"line 8 of .* ends with a value \('5.0'\) where the "
                       "first lines end with the delimiter"):
        load_in_memory(str(path))


@pytest.mark.parametrize("text, want", [
    # a quoted field holding the delimiter is one field: a label, a header name
    ('"cell, A",1.5,2\n"cell, B",3,4\n', [[1.5, 2], [3, 4]]),
    ('"IC50, uM","EC50, uM"\n1,2\n3,4\n', [[1, 2], [3, 4]]),
    # comment lines ("#" then a space) are skipped, at the top and between rows
    ("# exported by a pipeline\n1,2\n# a note\n3,4\n", [[1, 2], [3, 4]]),
    # ... but a row starting with a spreadsheet's #N/A is a row (its first value missing)
    ("1,2\n#N/A,4\n", [[1, 2], [np.nan, 4]]),
    # every line ends with the delimiter, no header: no fourth column of NaN (the NaN
    # refusal's --fill-missing zero then made it a column of zeros)
    ("1,2,3,\n4,5,6,\n", [[1, 2, 3], [4, 5, 6]]),
    # a byte-order mark before a comment line: counted as a row, it left a row of zeros
    ("\ufeff# exported by Excel\r\n1,2,3\r\n4,5,6\r\n", [[1, 2, 3], [4, 5, 6]]),
    # a lone quote is a character (an inch mark), not the start of a quoted field
    ('name,a,b\nDrive 3.5",1.5,2\nX,3,4\n', [[1.5, 2], [3, 4]]),
    # quoted labels holding spaces in a whitespace-separated file (R's write.table)
    ('"A" "B" "C"\n"cell A" 1 2 3\n"cell B" 4 5 6\n', [[1, 2, 3], [4, 5, 6]]),
], ids=["quoted-label", "quoted-header", "comments", "na-row", "trailing-no-header",
        "bom-comment", "inch-mark", "space-quoted-labels"])
def test_quotes_comments_and_trailing_delimiters_read_as_the_matrix(text, want, tmp_path):
    path = tmp_path / ("m.txt" if text.startswith('"A" ') else "m.csv")
    path.write_bytes(text.encode("utf-8"))
    np.testing.assert_array_equal(load_in_memory(str(path), fill_missing=KEEP_NAN),
                                  np.asarray(want, dtype=float))
    # and the conversion (its own count of the rows) stores the same matrix
    store = tmp_path / "m.zarr"
    convert_to_zarr(str(path), str(store), quiet=True, fill_missing=KEEP_NAN)
    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[...],
                                  np.asarray(want, dtype=float))


def test_names_keep_a_lone_quote_and_numeric_names_with_commas(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text('name,Size 3.5",b\nr1,1.5,2\nX,3,4\n')
    convert_to_zarr(str(path), str(tmp_path / "h.zarr"), quiet=True)
    z = zarr.open_array(tmp_path / "h.zarr", mode="r")
    assert z.attrs["dask_bid_column_names"] == ['Size 3.5"', "b"]
    assert z.attrs["dask_bid_row_names"] == ["r1", "X"]
    # quoted names that look like thousands are names in a header
    path = tmp_path / "t.csv"
    path.write_text(',"1,000","2,000","5,000"\nr1,1,2,3\nr2,4,5,6\n')
    convert_to_zarr(str(path), str(tmp_path / "t.zarr"), quiet=True, header="yes",
                    row_labels="first")
    z = zarr.open_array(tmp_path / "t.zarr", mode="r")
    assert z.attrs["dask_bid_column_names"] == ["1,000", "2,000", "5,000"]
    np.testing.assert_array_equal(z[...], [[1, 2, 3], [4, 5, 6]])


@pytest.mark.parametrize("text, match", [
    # "1,234.5" was split at its comma: row labels '1', '3', and a shifted row of numbers
    ('a,b\n"1,234.5",2\n"3,456.0",4\n', r'holds "1,234.5", a number written with a '
                                          r"thousands separator.*\(e.g. 1234.5\)"),
    # a decimal comma file with a decimal point: "4.000" was read as 4
    ("a;b\n1,5;2\n3;4.000\n", r"line 3, column 2 of .* holds '4.000' with a decimal point.*"
                              "decimal comma"),
    # labels, some of them numbers, no header: --header yes made line 2's label data
    ("22RV1,1,2\n2004,3,4\n2313287,5,6\n", "--header no --row-labels first"),
], ids=["thousands", "two-decimal-marks", "labels-no-header"])
def test_numbers_that_would_be_misread_are_refused(text, match, tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(text)
    with pytest.raises(CLIError, match=match):
        load_in_memory(str(path))


def test_a_file_that_is_not_utf8_is_named_in_one_line(tmp_path, capsys):
    path = tmp_path / "latin1.csv"
    path.write_bytes("\u00b5M_a,\u00b5M_b\n1,2\n3,4\n".encode("latin-1"))
    for cmd in (["convert", str(path), "--format", "dense", "--out", str(tmp_path / "o")],
                ["fit", str(path), "--k", "1", "--out", str(tmp_path / "f.zarr")],
                ["info", str(path)]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is not UTF-8 text (byte 0xb5" in err, err
        assert "iconv" in err and "traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latin1.csv"]


def test_subnormal_entries_are_counted_and_warned_about(A, tmp_path, capsys):
    """Entries like the CCLE EC50 file's garbage (uninitialised memory, 0 < |x| < 2.2e-308)
    are named by info and by a fit's warning, which reads them as observed values."""
    B = A.copy()
    B[2, 3], B[7, 0], B[9, 9] = 5e-320, -1e-315, 0.0  # two subnormals; 0 is a number
    path = tmp_path / "g.txt"
    np.savetxt(path, B, delimiter="\t")
    info = _info(path, capsys)
    assert info["n_subnormal"] == 2
    assert main(["info", str(path)]) == 0
    assert "  subnormal  2 entries with 0 < |x| < 2.2e-308" in capsys.readouterr().out
    assert main(["fit", str(path), "--k", "2", "--out", str(tmp_path / "o.zarr"),
                 "--n-iter", "10", "--burn-in", "2", "--scheduler", "synchronous"]) == 0
    err = capsys.readouterr().err
    assert "dask-bid: warning: 2 entries of" in err and "are subnormal" in err
    assert "replace them by NaN in the file and fit with --missing mask" in err
    # given --missing mask, the advice does not ask for it (it did)
    assert main(["fit", str(path), "--k", "2", "--out", str(tmp_path / "m.zarr"),
                 "--n-iter", "10", "--burn-in", "2", "--scheduler", "synchronous",
                 "--missing", "mask", "--overwrite"]) == 0
    err = capsys.readouterr().err
    assert ("replace them by NaN in the file (--missing mask, given, then leaves them out)"
            in err), err
    assert zarr.open_array(tmp_path / "g.txt.zarr", mode="r").attrs[
        "dask_bid_n_subnormal"] == 2
    # convert says it too, and info of the store (only a fit of the file did)
    assert main(["convert", str(path), "--format", "dense", "--out",
                 str(tmp_path / "c.zarr")]) == 0
    assert "dask-bid: warning: 2 entries of" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "c.zarr")]) == 0
    assert "  subnormal  2 entries with 0 < |x| < 2.2e-308" in capsys.readouterr().out
    # the store converted from it, fitted directly, says it too (only the file's fit did)
    assert main(["fit", str(tmp_path / "g.txt.zarr"), "--k", "2", "--out",
                 str(tmp_path / "s.zarr"), "--n-iter", "10", "--burn-in", "2",
                 "--scheduler", "synchronous"]) == 0
    err = capsys.readouterr().err
    assert f"dask-bid: warning: 2 entries of {str(tmp_path / 'g.txt.zarr')!r} are subnormal" \
        in err, err
    np.save(tmp_path / "clean.npy", A)  # none: no line, no warning
    assert "n_subnormal" in _info(tmp_path / "clean.npy", capsys)
    assert main(["info", str(tmp_path / "clean.npy")]) == 0
    assert "  subnormal" not in capsys.readouterr().out
