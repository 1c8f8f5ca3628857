"""Reading ``.npy`` and text matrices in row blocks, with one-line errors that say where.

Every problem is reported with its place in the file (line and column of a text file,
row and column of a ``.npy``) and what to do about it; nothing here suggests loading a
pickle.
"""

from __future__ import annotations

import io
import os
from typing import NamedTuple

import numpy as np

from ._core import CLIError, file_suffix

__all__ = ["TextLayout", "detect_text_layout", "count_rows", "iter_text_blocks",
           "npy_header", "open_npy", "iter_npy_blocks", "MissingValuesError",
           "finite_or_filled", "scan_non_finite", "FILL_CHOICES", "MISSING_CHOICES", "KEEP_NAN",
           "NAN_ADVICE"]

#: What ``--fill-missing`` accepts: ``zero`` replaces every NaN by 0 (the paper's fill).
FILL_CHOICES = ("zero",)
#: What ``--missing`` accepts: ``zero`` (the default: every entry counts, NaN refused
#: unless filled) or ``mask`` (NaN marks a missing entry, left out of the likelihood).
MISSING_CHOICES = ("zero", "mask")
#: The conversion's mode for ``--missing mask``: NaN is kept, as the missing-entry marker.
KEEP_NAN = "keep"
#: How to fit a matrix with NaN, in the words of every refusal that meets one.
NAN_ADVICE = ("Pass --missing mask to fit the observed entries only (NaN marks a missing "
              "entry), or --fill-missing zero to replace every NaN by 0 (the paper's fill)")

_DELIM_NAMES = {None: "whitespace", ",": "comma", "\t": "tab"}


class MissingValuesError(CLIError):
    """The matrix holds NaN and neither ``--missing mask`` nor ``--fill-missing`` was
    given."""


class TextLayout(NamedTuple):
    delimiter: str | None
    header: bool
    n_cols: int

    @property
    def delimiter_name(self) -> str:
        return _DELIM_NAMES[self.delimiter]


def _numeric(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return not field.strip()  # an empty field is a missing value
    return True


def detect_text_layout(path) -> TextLayout:
    """Delimiter, header line and column count from the first non-empty line."""
    with open(path, encoding="utf-8-sig") as fh:
        first = ""
        for line in fh:
            if line.strip():
                first = line.rstrip("\r\n")
                break
    if not first:
        raise CLIError(f"{os.fspath(path)!r} holds no data rows.")
    if file_suffix(path) == ".csv" or ("," in first and "\t" not in first):
        delim = ","
    elif "\t" in first:
        delim = "\t"
    else:
        delim = None
    fields = first.split(delim) if delim else first.split()
    header = not all(_numeric(f) for f in fields)
    return TextLayout(delim, header, len(fields))


def check_text_columns(path, layout: TextLayout):
    """Refuse a text file with fewer than 2 columns, naming the delimiter tried."""
    if layout.n_cols >= 2:
        return
    with open(path, encoding="utf-8-sig") as fh:
        first = next((ln for ln in fh if ln.strip()), "")
    others = [c for c in (";", "|", ":") if c in first]
    hint = (f"; its first line holds {others[0]!r}: replace it by a comma, tab or space"
            if others else "")
    raise CLIError(f"{os.fspath(path)!r} has one column when split by "
                   f"{layout.delimiter_name} (the delimiter dask-bid tried){hint}. dask-bid "
                   "reads comma-, tab- or whitespace-separated matrices with at least 2 "
                   "columns.")


def count_rows(path, header) -> int:
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                n += 1
    return n - int(header)


def _scan_lines(numbered, layout: TextLayout, path):
    """Parse line by line, raising at the first bad line (the slow path)."""
    rows = []
    for lineno, line in numbered:
        fields = line.rstrip("\r\n").split(layout.delimiter) if layout.delimiter \
            else line.split()
        if len(fields) != layout.n_cols:
            raise CLIError(f"line {lineno} of {os.fspath(path)!r} has {len(fields)} "
                           f"columns, the first line has {layout.n_cols} (delimiter: "
                           f"{layout.delimiter_name}); every row needs the same number.")
        row = []
        for col, f in enumerate(fields, start=1):
            f = f.strip()
            if not f:
                row.append(np.nan)
                continue
            try:
                row.append(float(f))
            except ValueError:
                raise CLIError(f"line {lineno}, column {col} of {os.fspath(path)!r} holds "
                               f"{f[:40]!r}, not a number (an empty field or 'nan' marks a "
                               "missing value).") from None
        rows.append(row)
    return np.array(rows, dtype=np.float64).reshape(len(rows), layout.n_cols)


def _parse(numbered, layout, path):
    text = "".join(line for _, line in numbered)
    try:
        block = np.loadtxt(io.StringIO(text), delimiter=layout.delimiter, dtype=np.float64,
                           ndmin=2, comments=None)
        if block.shape == (len(numbered), layout.n_cols):
            return block
    except ValueError:
        pass
    # an empty field, a bad cell or a ragged row: find it, line by line
    return _scan_lines(numbered, layout, path)


def iter_text_blocks(path, layout: TextLayout, rows_per_block: int):
    """Yield ``(first_row, block, line_numbers)`` over the data rows of a text matrix."""
    buf = []
    r0 = 0
    with open(path, encoding="utf-8-sig") as fh:
        skip = layout.header
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            if skip:
                skip = False
                continue
            buf.append((lineno, line))
            if len(buf) == rows_per_block:
                yield r0, _parse(buf, layout, path), [n for n, _ in buf]
                r0 += len(buf)
                buf = []
    if buf:
        yield r0, _parse(buf, layout, path), [n for n, _ in buf]


# ----------------------------------------------------------------------------- .npy

def npy_header(path):
    """``(shape, dtype)`` of a ``.npy`` file from its header, checked; nothing is loaded."""
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
    need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size < need:
        raise CLIError(f"{spath!r} is truncated: its header announces a {dtype} array of "
                       f"shape {shape} ({need} bytes with the header), the file has {size} "
                       "bytes. Save it again.")
    return tuple(int(s) for s in shape), dtype


def open_npy(path):
    """A ``.npy`` file memory-mapped read-only, after :func:`npy_header`'s checks."""
    npy_header(path)
    return np.load(os.fspath(path), mmap_mode="r", allow_pickle=False)


def iter_npy_blocks(arr, rows_per_block: int, dtype):
    for r0 in range(0, arr.shape[0], rows_per_block):
        r1 = min(arr.shape[0], r0 + rows_per_block)
        yield r0, np.asarray(arr[r0:r1], dtype=dtype), None


# ----------------------------------------------------------------------------- NaN, infinity

def _where(path, first_row, lines, i, j) -> str:
    if lines is not None:
        return f"line {lines[i]}, column {j + 1} of {os.fspath(path)!r}"
    return f"row {first_row + i}, column {j} (from 0) of {os.fspath(path)!r}"


def finite_or_filled(block, path, first_row, lines, fill, advice=NAN_ADVICE):
    """Check a parsed block: NaN is refused (replaced by 0 with ``fill="zero"``, kept as
    the missing-entry marker with ``fill="keep"``, for ``--missing mask``), infinity is
    always refused. Returns ``(block, n)``: ``n`` NaN filled or kept. ``advice`` ends the
    NaN refusal (the flags of the command that reads the file)."""
    finite = np.isfinite(block)
    if finite.all():
        return block, 0
    inf = np.isinf(block)
    if inf.any():
        i, j = np.argwhere(inf)[0]
        raise CLIError(f"{_where(path, first_row, lines, i, j)} is infinite ({block[i, j]}); "
                       "replace it by a finite value (--fill-missing only fills NaN).")
    nan = ~finite
    if fill is None:
        i, j = np.argwhere(nan)[0]
        raise MissingValuesError(
            f"{os.fspath(path)!r} has missing values (NaN), the first at "
            f"{_where(path, first_row, lines, i, j).rsplit(' of ', 1)[0]}. {advice} "
            "(`dask-bid info FILE` counts them).")
    if fill == KEEP_NAN:
        return block, int(nan.sum())
    block = np.where(nan, 0.0, block)
    return block, int(nan.sum())


def scan_non_finite(path, rows_per_block=65536):
    """Counts of NaN and infinite entries of a ``.npy`` or text matrix (one pass)."""
    n_nan = n_inf = 0
    if file_suffix(path) == ".npy":
        arr = open_npy(path)
        if arr.dtype.kind not in "fc":
            return 0, 0
        blocks = iter_npy_blocks(arr, rows_per_block, arr.dtype)
    else:
        layout = detect_text_layout(path)
        blocks = iter_text_blocks(path, layout, rows_per_block)
    for _, block, _ in blocks:
        n_nan += int(np.isnan(block).sum())
        n_inf += int(np.isinf(block).sum())
    return n_nan, n_inf
