"""Reading ``.npy`` and text matrices in row blocks, with one-line errors that say where.

Every problem is reported with its place in the file (line and column of a text file,
row and column of a ``.npy``) and what to do about it; nothing here suggests loading a
pickle.
"""

from __future__ import annotations

import io
import os
import re
from typing import NamedTuple

import numpy as np

from ..._na import NA_TOKENS, split_fields
from ._core import CLIError, file_suffix

__all__ = ["TextLayout", "detect_text_layout", "count_rows", "iter_text_blocks",
           "npy_header", "numeric_npy_dtype", "open_npy", "iter_npy_blocks", "MissingValuesError",
           "finite_or_filled", "scan_non_finite", "FILL_CHOICES", "MISSING_CHOICES", "KEEP_NAN",
           "fill_treatment",
           "NAN_ADVICE", "ROW_LABEL_CHOICES", "HEADER_CHOICES", "RowIndexCheck",
           "add_text_options", "text_options", "labels_line", "header_names",
           "TEXT_SUFFIXES", "count_subnormal", "SUBNORMAL_ADVICE",
           "SUBNORMAL_ADVICE_MASKED"]

#: What ``--fill-missing`` accepts: ``zero`` replaces every NaN by 0 (the paper's fill).
FILL_CHOICES = ("zero",)
#: What ``--missing`` accepts: ``zero`` (the default: every entry counts, NaN refused
#: unless filled) or ``mask`` (NaN marks a missing entry, left out of the likelihood).
MISSING_CHOICES = ("zero", "mask")
#: The conversion's mode for ``--missing mask``: NaN is kept, as the missing-entry marker.
KEEP_NAN = "keep"


def fill_treatment(fill_missing, masked):
    """What a conversion does with NaN for ``--fill-missing`` and ``--missing mask``
    (``masked``), for ``fit`` and ``convert`` alike: :data:`KEEP_NAN` when masked, else
    the ``--fill-missing`` choice (None: NaN refused); both together are refused."""
    if fill_missing and masked:
        raise CLIError("--missing mask and --fill-missing zero disagree: --missing mask "
                       "leaves every NaN out of the likelihood, --fill-missing zero makes "
                       "it a 0 that counts. Pass one of them.")
    return KEEP_NAN if masked else fill_missing


#: How to fit a matrix with NaN, in the words of every refusal that meets one.
NAN_ADVICE = ("Pass --missing mask to fit the observed entries only (NaN marks a missing "
              "entry), or --fill-missing zero to replace every NaN by 0 (the paper's fill)")

_DELIM_NAMES = {None: "whitespace", ",": "comma", "\t": "tab", ";": "semicolon"}

#: a number with thousands separators, "1,234.5" (quoted in a comma-separated file)
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$")
#: A number with a decimal comma (a semicolon-separated export of a European spreadsheet)
_DECIMAL_COMMA = re.compile(r"^[+-]?\d*,\d+(?:[eE][+-]?\d+)?$")

#: Text matrices: what ``fit`` converts and ``--row-labels`` / ``--header`` apply to.
TEXT_SUFFIXES = (".csv", ".txt", ".tsv")

#: What ``--row-labels`` accepts. ``auto``: the first column holds row labels when the
#: file says so (below); ``first``: it does; ``none``: every column is data.
ROW_LABEL_CHOICES = ("auto", "first", "none")
#: What ``--header`` accepts: ``auto`` (line 1 is a header when it is not a row of the
#: matrix, below), ``yes`` or ``no``.
HEADER_CHOICES = ("auto", "yes", "no")


def add_text_options(parser):
    """``--row-labels`` and ``--header``, how a text INPUT is read (fit, rid, info)."""
    parser.add_argument("--row-labels", choices=ROW_LABEL_CHOICES, default="auto",
                        help="text INPUT: whether its first column holds row labels, left "
                        "out of the matrix. auto (default): yes when the header's first "
                        "field is empty (pandas' to_csv, R's write.csv) or the rows start "
                        "with text; a first column holding the row numbers is refused")
    parser.add_argument("--header", choices=HEADER_CHOICES, default="auto",
                        help="text INPUT: whether line 1 holds column names. auto (default): "
                        "yes when it holds text; asks when it could be either")


def text_options(args, src, *, triplets=False) -> dict:
    """``row_labels`` and ``header`` from the command line; refuses them for an INPUT
    that is not a dense text file (they would change nothing): a store, a .npy, or a
    triplet file (``triplets``)."""
    opts = {"row_labels": getattr(args, "row_labels", "auto"),
            "header": getattr(args, "header", "auto")}
    given = [f"--{k.replace('_', '-')} {v}" for k, v in opts.items() if v != "auto"]
    if given and triplets:
        # (src was passed as None here, and the refusal said "None is read as is")
        raise CLIError(f"{' and '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to a "
                       f"dense text matrix; {src!r} is read as (row, column, value) triplets, "
                       "whose header is found by itself: leave "
                       f"{'them' if len(given) > 1 else 'it'} out.")
    text = isinstance(src, str) and "://" not in src and file_suffix(src) in TEXT_SUFFIXES
    if given and not text:
        raise CLIError(f"{' and '.join(given)} appl{'y' if len(given) > 1 else 'ies'} to text "
                       f"INPUT files (.csv, .txt, .tsv); {src!r} is read as is: leave "
                       f"{'them' if len(given) > 1 else 'it'} out.")
    return opts


def add_row_names_option(parser):
    """``--row-names FILE`` (fit)."""
    parser.add_argument("--row-names", default=None, metavar="FILE",
                        help="names of INPUT's rows, one per line (read as --column-names), "
                        "kept in OUT (result.basis_frame() names C's rows with them); "
                        "default: a text INPUT's row labels")


def add_names_option(parser, kept):
    """``--column-names FILE`` (fit, rid); ``kept``: where the names are written."""
    parser.add_argument("--column-names", default=None, metavar="FILE",
                        help="names of INPUT's columns, one per line (of a tab-separated "
                        "line the second field, as in the paper's drugs.txt), shown for "
                        f"the selected columns and {kept}; default: a text INPUT's header, "
                        "or the names a converted store records")


def read_names_file(path, shape, src, axis=1) -> list[str]:
    """``--column-names FILE`` (``--row-names FILE`` with ``axis=0``): one name per line
    for each column (row) of INPUT (of ``shape``).

    A line of tab-separated fields gives its second field when that is not empty, else
    its first: the label files of the paper's datasets (``drugs.txt``:
    ``normalised<TAB>display name``) read as the dataset loaders read them. Blank lines
    at the end are ignored; a blank line before them is refused (a name is missing).
    """
    flag = "--column-names" if axis == 1 else "--row-names"
    try:
        with open(path, encoding="utf-8-sig") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise CLIError(f"{flag}: no such file {path!r}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"{flag}: cannot read {path!r} as text "
                       f"({type(exc).__name__}: {exc}).") from None
    while lines and not lines[-1].strip():
        lines.pop()
    names = []
    for i, line in enumerate(lines, 1):
        fields = [f.strip() for f in line.split("\t")]
        name = fields[1] if len(fields) > 1 and fields[1] else fields[0]
        if not name:
            raise CLIError(f"{flag}: line {i} of {path!r} is empty; every "
                           f"{'column' if axis else 'row'} of INPUT needs a name (one per "
                           "line).")
        names.append(name)
    want, other = shape[axis], shape[1 - axis]
    what, other_what = ("columns", "rows") if axis == 1 else ("rows", "columns")
    if len(names) != want:
        hint = (f" ({other} is the number of its {other_what}: {path!r} may name the "
                f"{other_what})" if len(names) == other else "")
        raise CLIError(f"{flag}: {path!r} has {len(names)} names, but {src!r} has "
                       f"{want} {what}{hint}: pass a file with one name per {what[:-1]}, in "
                       "order.")
    return names


def labels_line(layout, path) -> str | None:
    """The phase line of a fit that found row labels by itself (``--row-labels auto``)."""
    if not (layout.row_labels and layout.why):
        return None
    return (f"rows         column 1 of {os.fspath(path)} holds row labels, left out ({layout.why}"
            "); --row-labels none fits it as data")


class MissingValuesError(CLIError):
    """The matrix holds NaN and neither ``--missing mask`` nor ``--fill-missing`` was
    given."""


class TextLayout(NamedTuple):
    delimiter: str | None
    header: bool
    #: fields per line, the row label (and an empty field after a trailing delimiter)
    #: included
    n_fields: int
    #: the first field of every line is a row label, not data
    row_labels: bool = False
    #: why the row labels were detected (``--row-labels auto``), for the phase line
    why: str = ""
    #: every data line ends with the delimiter: its last field is empty, not a column
    trailing: bool = False
    #: the decimal mark: "," in a semicolon-separated file of numbers like 1,5
    decimal: str = "."

    @property
    def n_cols(self) -> int:
        """Columns of the matrix (the label column and a trailing empty field left
        out)."""
        return self.n_fields - int(self.row_labels) - int(self.trailing)

    @property
    def data_fields(self) -> range:
        """The fields of a line that hold the matrix."""
        return range(int(self.row_labels), self.n_fields - int(self.trailing))

    @property
    def delimiter_name(self) -> str:
        return _DELIM_NAMES[self.delimiter]


def _value(field: str, decimal: str = ".") -> float:
    """The number a field holds: quotes are taken off, an empty field or a missing-value
    marker (:data:`NA_TOKENS`) is NaN. Raises ValueError for anything else."""
    f = _unquoted(field)
    if not f or f.lower() in NA_TOKENS:
        return np.nan
    return float(f.replace(",", ".") if decimal == "," else f)


def _numeric(field: str) -> bool:
    """A number or a missing value (empty, NA, ...), as the file's layout is read: a
    quoted field is a name (R's write.csv quotes its names, "2001" and the row name "1"
    too), unless the file quotes every field (then :func:`detect_text_layout` takes the
    quotes off first)."""
    if _quoted(field):
        return False
    try:
        _value(field)
    except ValueError:
        return False
    return True


def _a_number(field: str) -> bool:
    """An unquoted finite number (not a missing value)."""
    if _quoted(field):
        return False
    try:
        return bool(np.isfinite(float(field.strip())))
    except ValueError:
        return False


def _text(field: str) -> bool:
    """A field that is neither a number nor empty (a missing value): a name."""
    return not _numeric(field)


def _quoted(field: str) -> bool:
    s = field.strip()
    return len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'"


def _unquoted(field: str) -> str:
    """The field without the quotes around it; a lone quote (an inch mark, ``3.5"``) is
    part of the text."""
    s = field.strip()
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'":
        s = s[1:-1].strip()
    return s


def _column_numbers(fields) -> bool:
    """Fields 0, 1, 2, ... (3 or more): the column names pandas writes for a DataFrame
    made from an array."""
    try:
        vals = [int(_unquoted(f)) for f in fields]
    except ValueError:
        return False
    return len(vals) > 2 and vals == list(range(len(vals)))


def _content(line: str) -> bool:
    """A line that holds a row (or the header): not blank, not a comment. A comment is
    ``#`` then a space, another ``#`` or nothing ("# exported by ..."): a row may start
    with a spreadsheet's #N/A (a missing value) or #DIV/0!, and such a row read as a
    comment would be dropped without a word."""
    s = line.strip()
    return bool(s) and not _comment(s)


def _comment(s) -> bool:
    """``s`` (stripped, str or bytes) is a comment line (see :func:`_content`)."""
    if isinstance(s, bytes):
        s = s[:2].decode("latin-1")
    return s[:1] == "#" and (len(s) == 1 or s[1] in " \t#")


def _split(line, delim):
    return split_fields(line, delim or None)


def _integers(fields) -> bool:
    try:
        for f in fields:
            int(_unquoted(f))
    except ValueError:
        return False
    return True


def _labelled_row(fields) -> bool:
    """A row with a label: text first, numbers (or missing values) after."""
    return fields is not None and len(fields) > 1 and _text(fields[0]) and \
        all(map(_numeric, fields[1:]))


def _auto_header(path, fields, second, labels) -> bool:
    body = fields[1:] if labels else fields
    if any(map(_text, body)):
        numbers = [f for f in body if _a_number(f)]
        # (pandas' header of an indexed array, "id,0,1,2,...", names its columns so)
        if 2 * len(numbers) >= len(body) and not _column_numbers(numbers):
            # "1,2,x": mostly numbers with a stray word: a data row with a bad cell (read
            # as a header it would silently drop a row of the matrix), or a header of
            # mostly numeric names?
            word = next(_unquoted(f) for f in body if _text(f))
            # text in the first field only: row labels as likely (some labels numbers,
            # "22RV1" then "2004"), and --header yes then made line 2's label a number
            labels_hint = ("; if the first column holds row labels, pass --header no "
                           "--row-labels first" if not labels and _text(body[0])
                           and not any(map(_text, body[1:])) else "")
            raise CLIError(
                f"line 1 of {os.fspath(path)!r} holds numbers ({_unquoted(numbers[0])}, ...) "
                f"and text ({word[:40]!r}): a header, or a row of the matrix with a cell that "
                f"is not a number? Pass --header yes, or fix the cell and pass --header no"
                f"{labels_hint}.")
        return True
    if _column_numbers(fields[1:]) and (labels or not _unquoted(fields[0])):
        return True  # pandas: an index (named or not), the columns of an array
    later = None if second is None else (second[1:] if labels else second)
    spath = os.fspath(path)
    if _column_numbers(body) and not (later is not None and _column_numbers(later)):
        # pandas' names for the columns of an array, or a row of the matrix?
        raise CLIError(
            f"line 1 of {spath!r} holds {_unquoted(body[0])}, {_unquoted(body[1])}, ..., "
            f"{_unquoted(body[-1])}: column numbers (a header, as pandas writes an array's "
            "columns) or a row of the matrix? Pass --header yes or --header no.")
    if labels and _text(fields[0]) and _integers(body):
        # "name,2001,2002" then "TP53,0.1,0.2": numeric column names, or a data row? (a
        # row with decimals is taken as data)
        raise CLIError(
            f"line 1 of {spath!r} could be a header (column names "
            f"{', '.join(_unquoted(f) for f in body[:3])}, ...) or a row of the matrix "
            f"labelled {_unquoted(fields[0])[:40]!r}: pass --header yes or --header no.")
    return False


def detect_text_layout(path, row_labels="auto", header="auto") -> TextLayout:
    """Delimiter, header line, row labels and column count, from the first two non-empty
    lines.

    ``row_labels="auto"`` finds a column of row labels where the file shows one, so that
    a label column is never fitted as data:

    - the header's first field is empty and the others are names or the column numbers
      0, 1, ... (``pandas.DataFrame.to_csv`` and R's ``write.csv`` write a row index so,
      whether the index holds numbers or names);
    - or the rows start with text and go on with numbers (a column of names);
    - or the header has one name fewer than the rows have fields (R's ``write.table``;
      R's ``read.table`` reads such a file so).

    Line 1 is a header (``header="auto"``) when a field of it other than the row label is
    text, or when its first field is empty and the others are the column numbers 0, 1,
    ... (pandas' header for an array with its index). Where line 1 could be either a
    header of numeric column names or a row of the matrix (it holds the column numbers
    and line 2 does not; or a text label and integers after it; or mostly numbers with
    a stray word, a data row with a bad cell as likely as a header), ``auto`` refuses and
    asks for ``--header``. ``"first"`` / ``"none"`` and ``"yes"`` / ``"no"`` decide
    without looking.
    """
    lines = []
    with open(path, encoding="utf-8-sig") as fh:
        for line in fh:
            if _content(line):
                lines.append(line.rstrip("\r\n"))
                if len(lines) == 2:
                    break
    if not lines:
        raise CLIError(f"{os.fspath(path)!r} holds no data rows.")
    first = lines[0]
    delim = _delimiter(path, first, lines[1] if len(lines) > 1 else None)
    fields = _split(first, delim)
    second = _split(lines[1], delim) if len(lines) > 1 else None
    if delim == ",":
        # line 2 is data; line 1 only when it is no header ("1,000" may be a header name)
        for n, line_fields in ((1, fields if header == "no" else []), (2, second or [])):
            big = next((f for f in line_fields if _quoted(f)
                        and _THOUSANDS.match(_unquoted(f))), None)
            if big is not None:
                # quoted, it would pass for a name: a row label, the row shifted
                raise CLIError(
                    f"line {n} of {os.fspath(path)!r} holds {big.strip()}, a number written "
                    "with a thousands separator: save the numbers without it (e.g. "
                    f"{_unquoted(big).replace(',', '')}).")
    decimal = "," if delim == ";" and _decimal_commas(path) else "."
    if decimal == ",":  # the checks below read numbers with a decimal point
        fields = [f.replace(",", ".") for f in fields]
        second = None if second is None else [f.replace(",", ".") for f in second]
    if second is not None and any(_quoted(f) and _numeric(_unquoted(f)) for f in second[1:]):
        # the numbers of the data are quoted too (csv.QUOTE_ALL, some spreadsheets): the
        # quotes say nothing here, and a line of quoted numbers is data, not a header
        fields = [_unquoted(f) for f in fields]
        second = [_unquoted(f) for f in second]
    # a delimiter at the end of every data line (some exports): an empty last field that
    # is no column; the header may end with one too, or not. Only after a header of names
    # (in a file without one, two missing values would look the same)
    trailing = (delim is not None and second is not None and len(second) > 1
                and header != "no" and any(map(_text, fields)) and not second[-1].strip()
                and (len(fields) == len(second) - 1 or not fields[-1].strip()))
    n_fields = len(second) if trailing else len(fields)
    if trailing:
        second = second[:-1]
        if not fields[-1].strip():
            fields = fields[:-1]
    why = ""
    if (second is not None and len(second) == len(fields) + 1 and header != "no"
            and any(map(_text, fields)) and row_labels != "none"):
        # R's write.table (and read.table's rule): the header has one name fewer than the
        # rows have fields, the first field of a row being its name
        return TextLayout(delim, True, n_fields + int(not trailing), True,
                          "" if row_labels != "auto" else (
                              "its header has one name fewer than its rows have fields, as "
                              "R's write.table writes row names"), trailing, decimal)
    if row_labels != "auto":
        labels = row_labels == "first"
    elif (len(fields) > 1 and not _unquoted(fields[0]) and header != "no"
          and (any(map(_text, fields[1:])) or _column_numbers(fields[1:]))):
        labels, why = True, ("its header's first field is empty, as pandas' to_csv and R's "
                             "write.csv write a row index")
    else:
        if header == "yes" or (header == "auto" and any(map(_text, fields[1:]))):
            row = second  # line 1 is a header: the rows start at line 2
        elif header == "no" or not _text(fields[0]):
            row = fields
        else:  # a text first field, numbers after: labelled either way, line 2 tells
            row = second if second is not None else fields
        labels = _labelled_row(row)
        if labels:
            why = (f"its rows start with text (e.g. {_unquoted(row[0])[:40]!r}) and go on "
                   "with numbers")
    has_header = (header == "yes" if header != "auto"
                  else _auto_header(path, fields, second, labels))
    if (not trailing and not has_header and delim is not None and len(fields) > 2
            and not fields[-1].strip() and (second is None or not second[-1].strip())
            and _every_line_ends_with(path, delim)):
        # no header, and every line ends with the delimiter: an empty last field, not a
        # column (read as one, it was a column of NaN, and the NaN refusal's advice,
        # --fill-missing zero, made it a column of zeros). Known for sure only from every
        # line: one pass, for such files only
        trailing = True
    return TextLayout(delim, has_header, n_fields, labels, why, trailing, decimal)


def _every_line_ends_with(path, delim) -> bool:
    with open(path, encoding="utf-8-sig") as fh:
        return all(line.rstrip("\r\n").rstrip(" ").endswith(delim)
                   for line in fh if _content(line))


#: Lines of a semicolon file read to find a decimal comma (the first ones may hold integers)
DECIMAL_SCAN_LINES = 1000


def _decimal_commas(path) -> bool:
    """Whether a semicolon-separated file writes numbers with a decimal comma (1,5), from
    its first :data:`DECIMAL_SCAN_LINES` lines."""
    with open(path, encoding="utf-8-sig") as fh:
        for i, line in enumerate(fh):
            if i >= DECIMAL_SCAN_LINES:
                break
            if _content(line) and any(_DECIMAL_COMMA.match(_unquoted(f))
                                      for f in line.rstrip("\r\n").split(";")):
                return True
    return False


def _delimiter(path, first, second):
    """Comma (a .csv, or a comma without a tab), tab, semicolon (a spreadsheet's export
    where the comma is the decimal mark), else whitespace.

    The semicolon is taken where it splits both lines alike (the header may have one
    field fewer or more) and the comma does not, or where both do and the semicolon's
    fields are numbers with a decimal comma (a file without a header)."""
    def alike(d):
        n1 = first.count(d)
        return n1 >= 1 and (second is None or second.count(d) in (n1 - 1, n1, n1 + 1))

    if "\t" not in first and alike(";") and (not alike(",") or all(
            _DECIMAL_COMMA.match(_unquoted(f)) or _numeric(f) for f in first.split(";"))):
        return ";"
    if file_suffix(path) == ".csv" or ("," in first and "\t" not in first):
        return ","
    if "\t" in first:
        return "\t"
    return None


def header_names(path, layout: TextLayout) -> list[str] | None:
    """The column names of a text matrix's header (the label column's name left out), or
    None without a header or when they do not name every column."""
    if not layout.header:
        return None
    with open(path, encoding="utf-8-sig") as fh:
        first = next((ln for ln in fh if _content(ln)), "").rstrip("\r\n")
    names = [_unquoted(f) for f in _split(first, layout.delimiter)]
    if layout.trailing and names and not names[-1]:
        names = names[:-1]  # the header ends with the delimiter too
    if layout.row_labels and len(names) == layout.n_cols + 1:
        names = names[1:]  # the corner: the label column's name (or nothing)
    return names if len(names) == layout.n_cols else None


def check_text_columns(path, layout: TextLayout):
    """Refuse a text file with fewer than 2 columns, naming the delimiter tried."""
    if layout.n_cols >= 2:
        return
    with open(path, encoding="utf-8-sig") as fh:
        first = next((ln for ln in fh if _content(ln)), "")
    others = [c for c in ("|", ":") if c in first]
    hint = (f"; its first line holds {others[0]!r}: replace it by a comma, tab or space"
            if others else "")
    labels = (" besides the first, read as row labels (--row-labels none reads it as data)"
              if layout.row_labels else "")
    raise CLIError(f"{os.fspath(path)!r} has one column{labels} when split by "
                   f"{layout.delimiter_name} (the delimiter dask-bid tried){hint}. dask-bid "
                   "reads comma-, tab-, semicolon- or whitespace-separated matrices with at "
                   "least 2 columns.")


def count_rows(path, header) -> int:
    n = 0
    with open(path, "rb") as fh:
        for i, line in enumerate(fh):
            s = line.strip()
            if i == 0:  # a byte-order mark, as the text readers (utf-8-sig) drop it
                s = s.removeprefix(b"\xef\xbb\xbf").strip()
            if s and not _comment(s):
                n += 1
    return n - int(header)


def _scan_lines(numbered, layout: TextLayout, path):
    """Parse line by line, raising at the first bad line (the slow path)."""
    rows = []
    for lineno, line in numbered:
        fields = _split(line.rstrip("\r\n"), layout.delimiter)
        if len(fields) != layout.n_fields:
            raise CLIError(f"line {lineno} of {os.fspath(path)!r} has {len(fields)} "
                           f"columns, the first line has {layout.n_fields} (delimiter: "
                           f"{layout.delimiter_name}); every row needs the same number.")
        if layout.trailing and fields[-1].strip():
            raise CLIError(f"line {lineno} of {os.fspath(path)!r} ends with a value "
                           f"({fields[-1].strip()[:40]!r}) where the first lines end with the "
                           f"delimiter ({layout.delimiter_name}), a field that was not read "
                           "as a column; every row needs the same layout.")
        row = []
        for col in layout.data_fields:
            f = fields[col].strip()
            try:
                row.append(_value(f, layout.decimal))
            except ValueError:
                sep = (" with a thousands separator (save the numbers without it)"
                       if _THOUSANDS.match(_unquoted(f)) else "")
                raise CLIError(f"line {lineno}, column {col + 1} of {os.fspath(path)!r} holds "
                               f"{f[:40]!r}, not a number{sep} (an empty field, NA or nan "
                               f"marks a missing value){_label_hint(layout, col + 1)}") from None
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(len(rows), layout.n_cols)


def _label_hint(layout, col) -> str:
    """The end of a "not a number" refusal: text in the first column may be labels."""
    if not layout.row_labels and col == 1:
        return "; if the first column holds row labels, pass --row-labels first."
    return "."


def _check_one_decimal_mark(numbered, layout, path):
    """A file of decimal commas (1,5) with a decimal point in a number: "4.000" is four
    thousand in such a file, and was read as 4 (and "1.234,5" as a bad cell, or worse)."""
    for lineno, line in numbered:
        fields = _split(line.rstrip("\r\n"), layout.delimiter)
        for col in layout.data_fields:
            f = fields[col].strip() if col < len(fields) else ""
            if "." in f and _unquoted(f).lower() not in NA_TOKENS:
                raise CLIError(
                    f"line {lineno}, column {col + 1} of {os.fspath(path)!r} holds {f[:40]!r} "
                    "with a decimal point, in a file whose numbers have a decimal comma "
                    "(1,5): is the point a thousands separator? Save the file with one "
                    "decimal mark and no thousands separators.")


def _parse(numbered, layout, path):
    text = "".join(line for _, line in numbered)
    if layout.decimal == ",":  # the delimiter is ";": every comma is a decimal mark
        _check_one_decimal_mark(numbered, layout, path)
        text = text.replace(",", ".")
    some = layout.row_labels or layout.trailing
    try:
        block = np.loadtxt(io.StringIO(text), delimiter=layout.delimiter, dtype=np.float64,
                           ndmin=2, comments=None, quotechar='"',
                           usecols=layout.data_fields if some else None)
        # (usecols leaves extra fields unread: a ragged row is then found by counting)
        if block.shape == (len(numbered), layout.n_cols) and (not some or all(
                _n_fields(line, layout) == layout.n_fields for _, line in numbered)) and (
                not layout.trailing or all(not _last_field(line, layout)
                                           for _, line in numbered)):
            return block
    except ValueError:
        pass
    # an empty field, a bad cell or a ragged row: find it, line by line
    return _scan_lines(numbered, layout, path)


def _n_fields(line, layout):
    if layout.delimiter and '"' not in line:
        return line.count(layout.delimiter) + 1
    return len(_split(line.rstrip("\r\n"), layout.delimiter))


def _last_field(line, layout) -> str:
    if '"' in line:
        return _split(line.rstrip("\r\n"), layout.delimiter)[-1].strip()
    return line.rstrip("\r\n").rsplit(layout.delimiter, 1)[-1].strip()


def _data_lines(path, layout: TextLayout):
    """``(line_number, line)`` of every data row of a text matrix: blank lines, comment
    lines and the header left out."""
    with open(path, encoding="utf-8-sig") as fh:
        skip = layout.header
        for lineno, line in enumerate(fh, start=1):
            if not _content(line):
                continue
            if skip:
                skip = False
                continue
            yield lineno, line


def iter_text_blocks(path, layout: TextLayout, rows_per_block: int, labels=None):
    """Yield ``(first_row, block, line_numbers)`` over the data rows of a text matrix.

    ``labels``: a list that receives every row's label (its first field, unquoted) as
    the rows are read, for a layout with row labels: the conversion keeps them without
    reading the file again."""
    buf = []
    r0 = 0
    for lineno, line in _data_lines(path, layout):
        buf.append((lineno, line))
        if labels is not None:
            labels.append(_unquoted(_split(line.rstrip("\r\n"), layout.delimiter)[0]).strip())
        if len(buf) == rows_per_block:
            yield r0, _parse(buf, layout, path), [n for n, _ in buf]
            r0 += len(buf)
            buf = []
    if buf:
        yield r0, _parse(buf, layout, path), [n for n, _ in buf]


# ----------------------------------------------------------------------------- .npy

def npy_header(path, numbers=True):
    """``(shape, dtype)`` of a ``.npy`` file from its header, checked; nothing is loaded.
    ``numbers=False`` (``info``, which describes the file) lets a non-numeric dtype pass."""
    spath = os.fspath(path)
    size = os.path.getsize(spath)
    fix = "save the matrix with numpy.save(path, A) or use a .csv/.txt file"
    with open(spath, "rb") as fh:
        if size == 0:
            raise CLIError(f"{spath!r} is empty (0 bytes), not a .npy file: {fix}.")
        try:
            version = np.lib.format.read_magic(fh)
        except ValueError:
            raise CLIError(f"{spath!r} is not a .npy file (it does not start with the NumPy "
                           f"format's magic string): {fix}.") from None
        try:
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            else:
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        except (ValueError, OSError, EOFError):
            raise CLIError(f"{spath!r} has a damaged or truncated .npy header: {fix}.") from None
        offset = fh.tell()
    if dtype.hasobject:
        raise CLIError(f"{spath!r} holds Python objects (dtype {dtype}), not numbers; "
                       "dask-bid reads numeric .npy files only: save a float array, e.g. "
                       "numpy.save(path, A.astype(float)).")
    # before anything else is said about the array (its shape, K against its columns):
    # a matrix of strings or of records is not fitted whatever K is
    if numbers:
        _check_npy_numbers(spath, dtype)
    need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size < need:
        raise CLIError(f"{spath!r} is truncated: its header announces a {dtype} array of "
                       f"shape {shape} ({need} bytes with the header), the file has {size} "
                       "bytes. Save it again.")
    return tuple(int(s) for s in shape), dtype


def numeric_npy_dtype(dtype) -> bool:
    """Whether fit reads a .npy of this dtype (float16/32/64, integers, booleans)."""
    return not dtype.names and (dtype.kind in "iub" or (dtype.kind == "f"
                                                       and dtype.itemsize <= 8))


def _check_npy_numbers(spath, dtype):
    """Refuse a .npy whose values fit does not read, naming what to save instead."""
    if dtype.names:
        raise CLIError(f"{spath!r} holds a structured array (fields {', '.join(dtype.names)}), "
                       "not a matrix of numbers: save the fields as the columns of one float "
                       "array, e.g. numpy.save(path, numpy.column_stack([A[f] for f in "
                       "A.dtype.names]).astype(float)).")
    if dtype.kind == "f" and dtype.itemsize > 8:
        # Zarr has no long double: the conversion failed inside Zarr, leaving a folder
        raise CLIError(f"{spath!r} holds {dtype} (long double) values; dask-bid reads "
                       "float16, float32 and float64: save it as float64, e.g. "
                       "numpy.save(path, A.astype(numpy.float64)).")
    if dtype.kind not in "fiub":
        fix_values = ("A.real.astype(float)) if the data are really real"
                      if dtype.kind == "c" else "A.astype(float)) if the values are numbers")
        raise CLIError(f"{spath!r} holds {dtype} values, not real numbers; dask-bid fits float, "
                       f"integer or boolean .npy files: save a float array, e.g. "
                       f"numpy.save(path, {fix_values}.")


def open_npy(path):
    """A ``.npy`` file memory-mapped read-only, after :func:`npy_header`'s checks."""
    npy_header(path)
    return np.load(os.fspath(path), mmap_mode="r", allow_pickle=False)


def iter_npy_blocks(arr, rows_per_block: int, dtype):
    for r0 in range(0, arr.shape[0], rows_per_block):
        r1 = min(arr.shape[0], r0 + rows_per_block)
        yield r0, np.asarray(arr[r0:r1], dtype=dtype), None


# ----------------------------------------------------------------------------- NaN, infinity

def _where(path, first_row, lines, i, j, label_cols=0) -> str:
    if lines is not None:
        return f"line {lines[i]}, column {j + 1 + label_cols} of {os.fspath(path)!r}"
    return f"row {first_row + i}, column {j} (from 0) of {os.fspath(path)!r}"


def finite_or_filled(block, path, first_row, lines, fill, advice=NAN_ADVICE, label_cols=0):
    """Check a parsed block: NaN is refused (replaced by 0 with ``fill="zero"``, kept as
    the missing-entry marker with ``fill="keep"``, for ``--missing mask``), infinity is
    always refused. Returns ``(block, n)``: ``n`` NaN filled or kept. ``advice`` ends the
    NaN refusal (the flags of the command that reads the file); ``label_cols``: columns
    of row labels before the data (1 or 0), for the column numbers of the refusals."""
    finite = np.isfinite(block)
    if finite.all():
        return block, 0
    inf = np.isinf(block)
    if inf.any():
        i, j = np.argwhere(inf)[0]
        raise CLIError(f"{_where(path, first_row, lines, i, j, label_cols)} is infinite "
                       f"({block[i, j]}); "
                       "replace it by a finite value (--fill-missing only fills NaN).")
    nan = ~finite
    if fill is None:
        i, j = np.argwhere(nan)[0]
        raise MissingValuesError(
            f"{os.fspath(path)!r} has missing values (NaN), the first at "
            f"{_where(path, first_row, lines, i, j, label_cols).rsplit(' of ', 1)[0]}. {advice} "
            "(`dask-bid info FILE` counts them).")
    if fill == KEEP_NAN:
        return block, int(nan.sum())
    block = np.where(nan, 0.0, block)
    return block, int(nan.sum())


class RowIndexCheck:
    """Whether the first column of a text matrix read without row labels holds the row
    numbers 0, 1, ... or 1, 2, ... (the index ``pandas.DataFrame.to_csv`` writes when the
    header names it): fitted as data, it would be a column of A, and a likely pick for
    the basis. Fed block by block; :meth:`check` refuses such a column."""

    def __init__(self, layout: TextLayout | None, row_labels="auto"):
        # only where --row-labels was left to auto: "none" says the column is data
        self.live = [layout is not None and not layout.row_labels and row_labels == "auto"] * 2
        self.n = 0

    def update(self, first_row, block):
        if any(self.live):
            rows = np.arange(first_row, first_row + block.shape[0], dtype=np.float64)
            for base in (0, 1):
                self.live[base] = self.live[base] and np.array_equal(block[:, 0], rows + base)
        self.n = max(self.n, first_row + block.shape[0])

    @property
    def found(self) -> bool:
        """Whether the first column holds the row numbers (3 rows or more)."""
        return self.n >= 3 and any(self.live)

    def numbers(self) -> str:
        base = 0 if self.live[0] else 1
        return f"{base}, {base + 1}, ..., {base + self.n - 1}"

    def check(self, path):
        if self.found:
            raise CLIError(
                f"column 1 of {os.fspath(path)!r} holds the row numbers {self.numbers()}, "
                "like the index pandas' to_csv writes: pass --row-labels first to leave it "
                "out, or --row-labels none to fit it as a column of the matrix.")


def count_subnormal(block) -> int:
    """Entries of a block that are subnormal: 0 < |x| < 2.2e-308 (``np.finfo.tiny``).

    No instrument measures such a number; uninitialised memory reads as one. The CCLE
    EC50 file of the paper's data holds 426 (its README): a fit would take them for
    observed values of about 0."""
    if block.dtype.kind != "f":
        return 0
    a = np.abs(block)
    return int(np.count_nonzero((a > 0) & (a < np.finfo(block.dtype).tiny)))


#: The warning for subnormal entries, with their count and the file
SUBNORMAL_ADVICE = ("{n} entries of {src!r} are subnormal (0 < |x| < 2.2e-308): no "
                    "measurement is that small, uninitialised memory is (as in the CCLE EC50 "
                    "file). They are fitted as observed values of about 0; if they mark "
                    "missing values, replace them by NaN in the file and fit with --missing "
                    "mask")
#: the same for a fit already given --missing mask (it was told to pass it)
SUBNORMAL_ADVICE_MASKED = SUBNORMAL_ADVICE.replace(
    " and fit with --missing mask", " (--missing mask, given, then leaves them out)")


class EntryCounts(NamedTuple):
    """What :func:`scan_non_finite` counts."""

    n_nan: int
    n_inf: int
    #: entries with 0 < |x| < 2.2e-308 (:func:`count_subnormal`)
    n_subnormal: int


def scan_non_finite(path, rows_per_block=65536, row_labels="auto", header="auto",
                    index=None) -> EntryCounts:
    """Counts of NaN, infinite and subnormal entries of a ``.npy`` or text matrix (one
    pass). ``index``: a :class:`RowIndexCheck` fed on the way (text files)."""
    n_nan = n_inf = n_sub = 0
    if file_suffix(path) == ".npy":
        arr = open_npy(path)
        if arr.dtype.kind not in "fc":
            return EntryCounts(0, 0, 0)
        blocks = iter_npy_blocks(arr, rows_per_block, arr.dtype)
    else:
        layout = detect_text_layout(path, row_labels, header)
        blocks = iter_text_blocks(path, layout, rows_per_block)
    for r0, block, _ in blocks:
        if index is not None:
            index.update(r0, block)
        n_nan += int(np.isnan(block).sum())
        n_inf += int(np.isinf(block).sum())
        n_sub += count_subnormal(block)
    return EntryCounts(n_nan, n_inf, n_sub)
