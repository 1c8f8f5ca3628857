"""Converting to a sparse store (docs/sparse.md): (row, column, value) triplet files and
``scipy.sparse`` matrices, once, with a progress bar.

A triplet file (CSV, TSV, whitespace-separated text, or Parquet with the ``[parquet]``
extra) is streamed twice and never held whole: the first pass counts the entries of every
column (and checks every line), the second sends each entry to a temporary bucket file
of its column block; each bucket is then sorted by (column, row), checked for duplicates
and written as that block's arrays. Memory: one chunk of lines plus the largest column
block's entries (at most a few million by default), never the dense matrix.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field

import numpy as np

from .._errors import InputShapeError, NonFiniteInputError, ParameterError, StoreNotFoundError
from .._files import file_stamp
from .._na import NA_TOKENS, WHITESPACE, split_fields
from ..engine.sparse_store import (
    _check_shape,
    create_sparse_group,
    default_block_edges,
    finish_group,
    open_sparse,
    write_block,
    write_sparse_blocks,
)

__all__ = ["convert_triplets", "convert_sparse", "scan_triplets", "TripletScan",
           "TRIPLET_SUFFIXES"]

#: Files read as triplets, and their default separators (None: any whitespace).
TRIPLET_SUFFIXES = {".csv": ",", ".tsv": "\t", ".txt": None, ".parquet": None}
#: Lines parsed at once.
LINES_PER_CHUNK = 2**18
#: Column blocks (bucket files open at once) at most.
MAX_BLOCKS = 256
_REC = np.dtype([("r", "<i8"), ("c", "<i8"), ("v", "<f8")])


@dataclass
class TripletScan:
    """What the first pass over a triplet file found."""

    path: str
    shape: tuple
    nnz: int
    n_nan: int
    header: bool
    counts: np.ndarray = field(repr=False)
    n_lines: int = 0
    #: with ``drop_empty_columns``: the file's columns kept (``shape`` and ``counts`` are
    #: then theirs), and the file's own shape
    kept: np.ndarray | None = field(default=None, repr=False)
    file_shape: tuple | None = None

    @property
    def fraction(self) -> float:
        return self.nnz / float(self.shape[0] * self.shape[1])


def _suffix(path):
    return os.path.splitext(os.fspath(path))[1].lower()


def _separator(path, sep):
    """The separator a triplet file is split at: ``sep``, else by its suffix; None for
    runs of whitespace."""
    if sep is None:
        return TRIPLET_SUFFIXES.get(_suffix(path))
    if sep == WHITESPACE:
        return None
    if not isinstance(sep, str) or len(sep) != 1:
        # numpy's reader takes one character (MovieLens 1M's '::' was an internal
        # TypeError); the command line's words are its own
        raise ParameterError(
            f"sep must be one character (or 'whitespace'), got {sep!r}"
            + (": replace the separator first, e.g. sed 's/::/\\t/g' ratings.dat > "
               "ratings.tsv (MovieLens 1M)" if sep == "::" else "") + ".")
    return sep


def _progress(total, desc, unit, quiet):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=quiet,
                leave=False)


def _where(path, line):
    return f"{os.path.basename(path)}, line {line}"


def _unquote(field):
    """A field without its quotes; an unbalanced quote ("7) raises ValueError."""
    f = field.strip()
    if f.startswith(("\"", "'")) or f.endswith(("\"", "'")):
        if not (len(f) >= 2 and f[0] == f[-1]):
            raise ValueError(field)
        f = f[1:-1].strip()
    return f


def _parse_fields(text, sep, columns):
    """(row, column, value) of a line, or None; an empty value or one marked missing (NA,
    N/A, NULL ...: the dense reader's markers) is NaN, an unobserved entry. Quoted fields
    may hold the separator ("1,234.5" is then one field, and not a number)."""
    parts = split_fields(text, sep)
    try:
        r, c, v = (_unquote(parts[i]) for i in columns)
        return [float(r), float(c),
                np.nan if not v or v.lower() in NA_TOKENS else float(v)]
    except (IndexError, ValueError):
        return None


def _numbers_in(text, sep, columns) -> bool:
    """Whether any of the line's row, column and value fields is a number: a header
    names all three; a first line with a typo ("0,O,1.5") is a bad data line."""
    parts = split_fields(text, sep)
    for i in columns:
        try:
            float(_unquote(parts[i]))
            return True
        except (IndexError, ValueError):
            pass
    return False


def _is_header(s, sep, columns, header) -> bool:
    return header is True or (
        header == "auto" and _parse_fields(s, sep, columns) is None
        and any(ch.isalpha() for ch in s) and not _numbers_in(s, sep, columns))


def triplet_header(path, *, sep=None, columns=(0, 1, 2), header="auto"):
    """The names a text triplet file's header gives its row, column and value fields
    (those ``columns`` take, by position), or None without a header. Said by the command
    line: a header "rating,user,item" read by position made the ratings the rows."""
    path = os.fspath(path)
    if _suffix(path) == ".parquet":
        # a Parquet file always names its columns (picked by position or by name)
        try:
            import pyarrow.parquet as pq

            names = pq.ParquetFile(path).schema_arrow.names
            return [c if isinstance(c, str) else names[int(c)] for c in columns]
        except Exception:  # no pyarrow, or not readable: the conversion says why
            return None
    if header is False:
        return None
    _refuse_binary_text(path)
    sep = _separator(path, sep)
    with open(path, encoding="utf-8-sig", errors="replace") as fh:
        for text in fh:
            s = text.strip()
            if not s or s.startswith("#"):
                continue
            if not _is_header(s, sep, [int(c) for c in columns], header):
                return None
            parts = split_fields(s, sep)
            try:
                return [_unquote(parts[int(c)]) for c in columns]
            except (IndexError, ValueError):
                return None
    return None


#: The first bytes of compressed files (their bytes were quoted back as a bad line)
_COMPRESSED = {b"\x1f\x8b": "gzip: gunzip", b"BZh": "bzip2: bunzip2",
               b"\xfd7zXZ\x00": "xz: unxz", b"\x28\xb5\x2f\xfd": "zstd: unzstd",
               b"PK\x03\x04": "zip: unzip"}


def _refuse_binary_text(path):
    """A compressed or binary file given as a text triplet file: said as such, before
    its bytes are parsed as lines."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    for magic, what in _COMPRESSED.items():
        if head.startswith(magic):
            kind, tool = what.split(": ")
            raise InputShapeError(f"{path!r} is compressed ({kind}): decompress it first "
                                  f"({tool}), then read the text file.")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputShapeError(f"{path!r} is UTF-16 text: convert it to UTF-8 first (iconv -f "
                              "UTF-16 -t UTF-8), then read it.")
    if b"\x00" in head:
        raise InputShapeError(f"{path!r} is a binary file, not text lines of (row, column, "
                              "value) triplets: pass the text file (or a .parquet file).")


def _text_chunks(path, sep, columns, header, quiet):
    """Yield (line numbers, rows, cols, values as float64) per chunk of data lines;
    the first line is a header when ``header`` is True, or when "auto" and it is not a
    triplet of numbers and holds a letter (a name). Comment lines (#) and blank lines
    are skipped."""
    _refuse_binary_text(path)
    size = os.path.getsize(path)
    bar = _progress(size, f"reading {os.path.basename(path)}", "B", quiet)
    try:
        with open(path, encoding="utf-8-sig", errors="replace") as fh:
            nums, lines = [], []
            first = True
            seen = 0  # characters read since the bar's last update (one update a chunk)
            for lineno, text in enumerate(fh, start=1):
                seen += len(text)
                s = text.strip()
                if not s or s.startswith("#"):
                    continue
                # the line as written: a last empty field after a tab is an unobserved
                # value, which strip() took off with the tab
                s = text.rstrip("\r\n")
                if first:
                    first = False
                    # a header names its fields: a first line without a letter that
                    # does not parse ("0;0;1.5" in a comma file), or with a number among
                    # its fields ("0,O,1.5", a typo), is a bad data line, refused with
                    # its number below, not skipped with its entry
                    if _is_header(s, sep, columns, header):
                        continue
                nums.append(lineno)
                lines.append(s)
                if len(lines) >= LINES_PER_CHUNK:
                    bar.update(seen)
                    seen = 0
                    yield _parse_chunk(path, nums, lines, sep, columns)
                    nums, lines = [], []
            bar.update(seen)
            if lines:
                yield _parse_chunk(path, nums, lines, sep, columns)
    finally:
        bar.close()


def _parse_chunk(path, nums, lines, sep, columns):
    try:
        if any('"' in s or "'" in s for s in lines):
            raise ValueError("quoted fields: read line by line")
        arr = np.loadtxt(lines, delimiter=sep, usecols=columns, dtype=np.float64, ndmin=2,
                         comments=None)
    except ValueError:
        # line by line: a missing-value marker, or the line to name
        rows = []
        for n, s in zip(nums, lines, strict=True):
            got = _parse_fields(s, sep, columns)
            if got is None:
                raise InputShapeError(
                    f"{_where(path, n)}: {s[:60]!r} is not a (row, column, value) triplet of "
                    f"numbers in fields {[c + 1 for c in columns]}"
                    f"{'' if sep is None else f' separated by {sep!r}'}; fix the line, or "
                    "give the separator and fields (sep=, columns=; --sep, --columns).") from None
            rows.append(got)
        arr = np.asarray(rows, dtype=np.float64).reshape(len(rows), 3)
    return np.asarray(nums, dtype=np.int64), arr[:, 0], arr[:, 1], arr[:, 2]


def _parquet_chunks(path, columns, quiet):
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ParameterError("reading Parquet needs pyarrow: pip install 'dask_bid[parquet]' "
                             "(or convert the file to CSV / TSV).") from None
    f = pq.ParquetFile(path)
    names = f.schema_arrow.names
    cols = [names[c] if isinstance(c, int) else c for c in columns]
    bar = _progress(f.metadata.num_rows, f"reading {os.path.basename(path)}", "row", quiet)
    start = 1
    try:
        for batch in f.iter_batches(batch_size=LINES_PER_CHUNK, columns=cols):
            arrs = []
            for i in range(3):
                try:
                    arrs.append(np.asarray(batch.column(i).to_numpy(zero_copy_only=False),
                                           dtype=np.float64))
                except (ValueError, TypeError) as exc:  # strings (ids), dates ...
                    raise InputShapeError(
                        f"{os.path.basename(path)}: column {cols[i]!r} ("
                        f"{('row', 'column', 'value')[i]}) holds {batch.column(i).type} "
                        f"values, not numbers ({' '.join(str(exc).split())}): the row and "
                        "column fields must be integer indices and the value a number; map "
                        "ids to 0, 1, ... first (e.g. pandas.factorize).") from None
            n = len(arrs[0])
            bar.update(n)
            yield np.arange(start, start + n, dtype=np.int64), *arrs
            start += n
    finally:
        bar.close()


def _chunks(path, sep, columns, header, quiet):
    if _suffix(path) == ".parquet":
        return _parquet_chunks(path, columns, quiet)
    sep = _separator(path, sep)
    return _text_chunks(path, sep, [int(c) for c in columns], header, quiet)


def _num(x) -> str:
    """``x`` as written, all its digits (1.0000001 was said as 1, an integer; 2**53 as
    9007199254740992.0)."""
    x = float(x)
    if x.is_integer() and abs(x) < 1e17:
        return str(int(x))
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


#: a triplet file's row and column indices are below this: 2**53, up to which float64
#: (as the fields are read) holds every integer exactly
INDEX_MAX = 2**53


def _checked(path, nums, r, c, v, index_base, shape, keep_nan=False):
    """Integer (row, column) in 0-based terms and the values; NaN values dropped (kept
    with ``keep_nan``: a pair given twice is refused even if one of them is NaN)."""
    bad_idx = ~(np.isfinite(r) & np.isfinite(c)) | (r != np.floor(r)) | (c != np.floor(c))
    if bad_idx.any():
        k = int(np.flatnonzero(bad_idx)[0])
        raise InputShapeError(
            f"{_where(path, nums[k])}: row {_num(r[k])} and column {_num(c[k])} must "
            "be integers (the triplet's first two fields are indices).")
    # the fields are read as float64, exact up to 2**53; beyond it an index is rounded
    # (and near 2**63 its cast wraps): no matrix has that many rows or columns anyway
    huge = (np.abs(r) >= INDEX_MAX) | (np.abs(c) >= INDEX_MAX)
    if huge.any():
        k = int(np.flatnonzero(huge)[0])
        raise InputShapeError(
            f"{_where(path, nums[k])}: row {_num(r[k])} or column {_num(c[k])} (as read, "
            "in float64: rounded from 2**53 on) is too large to be an index (below 2**53 = "
            f"{INDEX_MAX:,}); fix the line, or map ids to 0, 1, ... first (e.g. "
            "pandas.factorize).")
    ri = r.astype(np.int64) - index_base
    ci = c.astype(np.int64) - index_base
    neg = (ri < 0) | (ci < 0)
    if neg.any():
        k = int(np.flatnonzero(neg)[0])
        low = int(min(r[k], c[k]))
        # a 0 read from 1 says the file counts from 0; a negative index is no index at all
        advice = ("; pass index_base=0 (--index-base 0) if the file counts from 0"
                  if index_base == 1 and low == 0 else
                  ": rows and columns are numbered from 0 (or from 1, --index-base 1); "
                  "fix the line")
        raise InputShapeError(
            f"{_where(path, nums[k])}: index {low} is below the first index "
            f"{index_base}{advice}.")
    if shape is not None:
        out = (ri >= shape[0]) | (ci >= shape[1])
        if out.any():
            k = int(np.flatnonzero(out)[0])
            raise InputShapeError(
                f"{_where(path, nums[k])}: entry (row {int(r[k])}, column {int(c[k])}) lies "
                f"outside the shape {shape[0]} x {shape[1]} given; give a larger shape, or "
                "none (the largest indices then set it)" + (
                    "; or, if the file counts from 1, pass index_base=1 (--index-base 1)"
                    if index_base == 0 and (int(r[k]) == shape[0] or int(c[k]) == shape[1])
                    else "") + ".")
    inf = np.isinf(v)
    if inf.any():
        k = int(np.flatnonzero(inf)[0])
        raise NonFiniteInputError(
            f"{_where(path, nums[k])}: the value is infinite; replace it (a NaN value marks "
            "an unobserved entry and is left out, infinity is refused).")
    keep = ~np.isnan(v)
    n_nan = int(np.count_nonzero(~keep))
    if keep_nan:
        return ri, ci, v, n_nan
    return ri[keep], ci[keep], v[keep], n_nan


def _check_args(path, shape, index_base, columns):
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise StoreNotFoundError(f"no triplet file at {path!r}: the path does not exist.")
    if index_base not in (0, 1):
        raise ParameterError(f"index_base must be 0 or 1, got {index_base!r}.")
    if isinstance(columns, (str, bytes)) or len(columns) != 3:
        raise ParameterError(f"columns must name 3 fields (row, column, value), got "
                             f"{columns!r}.")
    text = _suffix(path) != ".parquet"
    ok = all((isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 0)
             or (isinstance(c, str) and not text) for c in columns)
    if not ok or len(set(columns)) != 3:
        # (0, 0, 2) read the row ids as columns, (0, 1, 1) the column ids as values,
        # 2.5 was truncated, -1 read the last field, and names raised int()'s error
        raise ParameterError(
            f"columns must be 3 different 0-based field numbers (row, column, value)"
            f"{'' if text else ' or Parquet column names'}, got {columns!r}.")
    if shape is not None:
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or min(shape) < 1:
            raise ParameterError(f"shape must be (rows, columns), two positive integers, got "
                                 f"{shape!r}.")
        if max(shape) > INDEX_MAX:
            # the indices cannot reach it (read as float64: exact below 2**53), and a fit
            # of such a store failed with a MemoryError building its row chunks
            raise ParameterError(f"shape {shape} is larger than any triplet file can index "
                                 f"(at most 2**53 = {INDEX_MAX:,} rows and columns); give "
                                 "the matrix's real shape, or none.")
    return path, shape


def scan_triplets(path, *, sep=None, columns=(0, 1, 2), shape=None, index_base=0,
                  header="auto", quiet=True, drop_empty_columns=False) -> TripletScan:
    """The first pass over a triplet file: its shape, observed entries per column, NaN
    values (dropped) and whether it has a header line; every line is checked.
    ``drop_empty_columns``: the shape and counts are those of the columns with an entry
    (``kept``), found without a count per column id (ids of any size)."""
    path, shape = _check_args(path, shape, index_base, columns)
    counts = np.zeros(0, dtype=np.int64)
    far = []  # (ids, counts) of columns beyond _DENSE_COUNTS, merged at the end
    max_r, max_c, n_nan, n_lines, has_header = -1, -1, 0, 0, False
    for nums, r, c, v in _chunks(path, sep, columns, header, quiet):
        if n_lines == 0 and nums.size and nums[0] > 1 and _suffix(path) != ".parquet":
            has_header = _first_data_line_after_header(path, nums[0])
        n_lines += int(nums.size)
        ri, ci, v, dropped = _checked(path, nums, r, c, v, index_base, shape)
        n_nan += dropped
        if nums.size:  # every entry's indices set the shape, a dropped NaN's too (the
            # write pass checks them all against it)
            max_r = max(max_r, int(np.max(r)) - index_base)
            max_c = max(max_c, int(np.max(c)) - index_base)
        if ci.size:
            # a count per column up to the largest id, except for ids so large that the
            # count would not fit in memory (a field of timestamps taken as the column:
            # 50 lines asked for 7 GiB): those are counted apart, and refused below
            near = ci < _DENSE_COUNTS
            bc = np.bincount(ci[near]) if near.any() else np.zeros(0, np.int64)
            if bc.size > counts.size:
                counts = np.concatenate([counts, np.zeros(bc.size - counts.size, np.int64)])
            counts[:bc.size] += bc
            if not near.all():
                far.append(np.unique(ci[~near], return_counts=True))
    if shape is None:
        if n_lines == 0:
            raise InputShapeError(f"{path!r} holds no (row, column, value) triplet.")
        shape = (max_r + 1, max(max_c + 1, counts.size))
    if drop_empty_columns:
        # the columns with an entry only: their count, whatever the ids' size (ids of
        # 2e7 with 94 lines were refused as a matrix of 2e7 columns, the option no help)
        _refuse_sparse_extent(path, columns, (shape[0], 1), n_lines)
        near = np.flatnonzero(counts)
        ids = np.concatenate([near] + [i for i, _ in far]).astype(np.int64)
        k = np.concatenate([counts[near]] + [c for _, c in far]).astype(np.int64)
        kept, at = np.unique(ids, return_inverse=True)
        kept_counts = np.bincount(at, weights=k, minlength=kept.size).astype(np.int64)
        return TripletScan(path=path, shape=(shape[0], int(kept.size)),
                           nnz=int(kept_counts.sum()), n_nan=n_nan, header=has_header,
                           counts=kept_counts, n_lines=n_lines, kept=kept,
                           file_shape=tuple(shape))
    _refuse_sparse_extent(path, columns, shape, n_lines)
    counts = np.concatenate([counts, np.zeros(shape[1] - counts.size, np.int64)])
    for ids, k in far:
        np.add.at(counts, ids, k)
    return TripletScan(path=path, shape=shape, nnz=int(counts.sum()), n_nan=n_nan,
                       header=has_header, counts=counts, n_lines=n_lines)


#: Columns counted in one dense array while the file is read (512 MiB of counts at most)
_DENSE_COUNTS = 1 << 26
#: Matrices of more rows or columns than this are checked against the lines read
_EXTENT_CHECKED = 1 << 24


def _refuse_sparse_extent(path, columns, shape, n_lines):
    """A shape far beyond the entries read: more than 2^24 rows (columns) and more than
    64 times the lines, nearly all of them without an entry (a column without one cannot
    be fitted). Seen where a field of timestamps is taken as the row or column by a wrong
    ``columns=``, or in a ``shape=`` with a typo: refused, naming the field, before a
    count of that many columns is made (it asked for gigabytes, an internal
    MemoryError)."""
    for what, extent, field_ in (("column", shape[1], 1), ("row", shape[0], 0)):
        if extent > _EXTENT_CHECKED and extent > 64 * max(n_lines, 1):
            raise InputShapeError(
                f"{path!r}: a matrix of {extent:,} {what}s for {n_lines:,} lines, most of "
                f"them without an entry. Is field {_field_name(columns[field_])} the "
                f"{what}? Give the fields of row, column and value (columns=; --columns "
                "R,C,V), and the shape (shape=; --shape) or none.")


def _field_name(col) -> str:
    return repr(col) if isinstance(col, str) else str(int(col) + 1)


def _first_data_line_after_header(path, first_data):
    """Whether a skipped line before the first data line was a header (not a comment)."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        for i, text in enumerate(fh, start=1):
            if i >= first_data:
                return False
            s = text.strip()
            if s and not s.startswith("#"):
                return True
    return False


def convert_triplets(path, dst, *, sep=None, columns=(0, 1, 2), shape=None, index_base=0,
                     header="auto", overwrite=False, quiet=False, block_edges=None,
                     drop_empty_columns=False, on_scan=None):
    """Convert a (row, column, value) triplet file into a sparse store at ``dst``.

    Parameters
    ----------
    path : str or PathLike
        A ``.csv``, ``.tsv``, ``.txt`` (whitespace) or ``.parquet`` file with one observed
        entry per line (Parquet: per row); other fields are ignored.
    dst : str or PathLike
        The sparse store to write (a Zarr group; docs/sparse.md).
    sep : str, optional
        Field separator (default: by suffix: ``,`` for .csv, tab for .tsv, whitespace);
        ``"whitespace"`` for runs of spaces and tabs whatever the suffix.
    columns : 3 ints (or Parquet column names)
        Fields holding the row, the column and the value (0-based; default the first 3).
    shape : (M, N), optional
        Default: the largest indices + 1.
    index_base : {0, 1}
        The index of the first row and column in the file (1 for MovieLens).
    header : {"auto", True, False}
        "auto": the first line is a header when its fields are not numbers.
    overwrite : bool
        Replace an existing ``dst`` that is a sparse store.
    quiet : bool
        No progress bars.
    block_edges : list of int, optional
        The column blocks (default: about 4 Mi entries and at most 4096 columns each,
        at most 256 blocks).
    drop_empty_columns : bool
        Leave out the column ids with no observed entry (a slice of a ratings file skips
        items), which a fit refuses: the store's columns are the file's columns that
        hold an entry, in order, named by their ids in the file (``index_base`` added;
        ``dask_bid_column_names``). Default False: such columns are kept, empty.
    on_scan : callable, optional
        Called with the first pass's :class:`TripletScan` (the file's shape and entries
        per column) before anything is written: what it raises leaves ``dst`` as it was
        (the command line refuses columns a fit would refuse there).

    Returns
    -------
    SparseSource
        The written store, opened.

    Notes
    -----
    Refused, each with a one-line error naming the line: a field that is not a number, a
    row or column that is not a non-negative integer (after ``index_base``) or lies
    outside ``shape``, an infinite value, and a (row, column) given twice (named by its
    indices). A NaN value marks an unobserved entry: it is left out and counted
    (``attrs["dask_bid_sparse"]["n_nan_dropped"]``).
    """
    path, shape = _check_args(path, shape, index_base, columns)
    _check_dst(dst, overwrite)
    # with drop_empty_columns: the file's column ids that hold an entry (scan.kept),
    # renumbered 0, 1, ... in order
    scan = scan_triplets(path, sep=sep, columns=columns, shape=shape, index_base=index_base,
                         header=header, quiet=quiet, drop_empty_columns=drop_empty_columns)
    if on_scan is not None:
        on_scan(scan)
    file_shape = scan.file_shape or scan.shape
    kept = scan.kept
    M, N = scan.shape
    _check_shape(scan.shape, repr(os.fspath(path)))  # before anything is written
    counts = scan.counts
    if block_edges is None:
        target = max(4 * 2**20, -(-scan.nnz // MAX_BLOCKS))
        edges = default_block_edges(counts, target=target,
                                    max_width=max(4096, -(-N // MAX_BLOCKS)))
    else:
        edges = [int(e) for e in block_edges]
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    parent = os.path.dirname(os.path.abspath(os.fspath(dst))) or "."
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".dask_bid-buckets-", dir=parent)
    try:
        _bucket(path, sep, columns, header, index_base, file_shape, edges, tmp, quiet, kept)
        _write_buckets(path, dst, scan, edges, indptr, index_base, columns, overwrite, tmp,
                       quiet, shape_given=shape is not None, kept=kept, file_shape=file_shape)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return open_sparse(dst)


def _write_buckets(path, dst, scan, edges, indptr, index_base, columns, overwrite, tmp,
                   quiet, shape_given=False, kept=None, file_shape=None):
    """The store from the sorted buckets; a store left incomplete by a refusal (a
    duplicate entry) is removed. ``kept``: the file's columns the store holds (the
    others had no entry), else all."""
    g = None
    source = {"kind": "triplets", **file_stamp(path), "index_base": int(index_base),
              "columns": [c if isinstance(c, str) else int(c) for c in columns],
              # a shape given, not the largest indices': a call without --shape reads
              # the file as another matrix, and must not reuse this one
              "shape_given": bool(shape_given)}
    if kept is not None:
        # another matrix than the file's: a call without the option must not reuse it
        source.update(drop_empty_columns=True, file_shape=[int(s) for s in file_shape])
    try:
        g = create_sparse_group(dst, scan.shape, indptr, edges, overwrite=overwrite,
                                source=source, extra={"n_nan_dropped": int(scan.n_nan)})
        _name_by_file_ids(g, scan.shape, index_base, kept)
        bar = _progress(scan.nnz, f"writing {os.path.basename(os.fspath(dst))}", "entry",
                        quiet)
        try:
            for b in range(len(edges) - 1):
                rows, vals = _sorted_block(path, tmp, b, edges[b], indptr, index_base, kept)
                write_block(g, b, rows, vals)
                bar.update(rows.size)
        finally:
            bar.close()
        finish_group(g)
    except BaseException:
        if g is not None:
            shutil.rmtree(os.fspath(dst), ignore_errors=True)
        raise


def _name_by_file_ids(g, shape, index_base, kept=None):
    """A file that counts from ``index_base`` != 0 (MovieLens: 1) names the store's rows
    and columns by its own ids, so that a fit's summary shows item 100 where the store's
    column 99 was selected (the positions alone read as the wrong items); so does a
    store that left out empty columns (``kept``: the file's columns it holds), whatever
    the base. Up to COLUMN_NAMES_MAX of each (they live in the JSON attributes)."""
    from .._attrs import COLUMN_NAMES_ATTR, COLUMN_NAMES_MAX, ROW_NAMES_ATTR

    base = int(index_base)
    if base and shape[0] <= COLUMN_NAMES_MAX:
        g.attrs[ROW_NAMES_ATTR] = [str(i + base) for i in range(int(shape[0]))]
    if (base or kept is not None) and shape[1] <= COLUMN_NAMES_MAX:
        ids = np.arange(int(shape[1])) if kept is None else np.asarray(kept)
        g.attrs[COLUMN_NAMES_ATTR] = [str(int(i) + base) for i in ids]


def _bucket(path, sep, columns, header, index_base, shape, edges, tmp, quiet, kept=None):
    """Second pass: every entry appended to the bucket file of its column block.
    ``kept``: the file's columns the store holds, renumbered 0, 1, ... (an entry of
    another column is a NaN: unobserved, left out)."""
    edges_a = np.asarray(edges, dtype=np.int64)
    files = [open(os.path.join(tmp, f"b{b:05d}"), "wb") for b in range(len(edges) - 1)]
    try:
        for nums, r, c, v in _chunks(path, sep, columns, header, quiet):
            ri, ci, v, _ = _checked(path, nums, r, c, v, index_base, shape, keep_nan=True)
            if kept is not None:
                pos = np.searchsorted(kept, ci)
                ok = (pos < kept.size) & (kept[np.minimum(pos, kept.size - 1)] == ci)
                ri, ci, v = ri[ok], pos[ok], v[ok]
            blk = np.searchsorted(edges_a, ci, side="right") - 1
            order = np.argsort(blk, kind="stable")
            blk_sorted = blk[order]
            bounds = np.searchsorted(blk_sorted, np.arange(len(files) + 1))
            rec = np.empty(ri.size, dtype=_REC)
            rec["r"], rec["c"], rec["v"] = ri[order], ci[order], v[order]
            for b in np.unique(blk_sorted):
                rec[bounds[b]:bounds[b + 1]].tofile(files[b])
    finally:
        for f in files:
            f.close()


def _sorted_block(path, tmp, b, c0, indptr, index_base, kept=None):
    """Block b's entries sorted by (column, row); a repeated (row, column) is refused
    (named by the file's ids: ``kept`` maps the store's columns back to them)."""
    rec = np.fromfile(os.path.join(tmp, f"b{b:05d}"), dtype=_REC)
    os.remove(os.path.join(tmp, f"b{b:05d}"))
    order = np.lexsort((rec["r"], rec["c"]))
    rec = rec[order]
    dup = np.flatnonzero((rec["r"][1:] == rec["r"][:-1]) & (rec["c"][1:] == rec["c"][:-1]))
    if dup.size:
        k = int(dup[0])
        col = int(rec["c"][k]) if kept is None else int(kept[int(rec["c"][k])])
        raise InputShapeError(
            f"{os.path.basename(path)} gives entry (row {int(rec['r'][k]) + index_base}, "
            f"column {col + index_base}) more than once; each (row, column) may "
            "appear once: combine the duplicates first (e.g. their mean).")
    rec = rec[~np.isnan(rec["v"])]  # unobserved: checked for repeats above, not stored
    return rec["r"].copy(), rec["v"].copy()


def _check_dst(dst, overwrite):
    from ..engine.sparse_store import is_sparse_store, sparse_node
    from ..engine.zarr_io import empty_local_dir, refuse_inside_store, refuse_symlink

    d = os.fspath(dst)
    refuse_symlink(d, "the store")
    refuse_inside_store(d, "the store")
    if os.path.exists(d):
        empty_dir = empty_local_dir(d)
        # OutputExistsError, as for every other output (was ParameterError)
        from .._errors import OutputExistsError

        if not overwrite:
            raise OutputExistsError(f"{d!r} exists; pass overwrite=True to replace it, or "
                                    "choose another path.")
        if not (empty_dir or is_sparse_store(d)):
            raise OutputExistsError(f"{d!r} exists and is not a sparse store; overwrite "
                                    "replaces only a sparse store (or an empty directory): "
                                    "choose another path.")
        from ..engine.lock import refuse_if_read

        # a store a running fit reads: replacing it killed that fit (InputChangedError),
        # where to_zarr and the command line refuse it
        refuse_if_read(d, "replace it")
        from ..engine.zarr_io import foreign_entries

        foreign = [] if empty_dir else foreign_entries(d, nodes=sparse_node)
        if foreign:  # the store is replaced whole: never with a file of the user's in it
            raise OutputExistsError(
                f"refusing to replace {d!r}: besides a sparse store it holds "
                f"{', '.join(foreign[:4])}, which dask_bid did not write. Move them out, or "
                "choose another path.")


def convert_sparse(X, dst, *, overwrite=False, quiet=False, block_edges=None):
    """Write a ``scipy.sparse`` matrix (any format; converted to CSC) as a sparse store.

    Its stored entries are the observed ones (a stored 0 is an observed zero; a stored NaN
    is dropped: unobserved); a repeated (row, column) of a COO matrix is refused.
    Returns the written store, opened.
    """
    if not hasattr(X, "nnz") or not hasattr(X, "tocsc"):
        raise ParameterError(f"convert_sparse takes a scipy.sparse matrix, got "
                             f"{type(X).__name__}; a dense array is written with "
                             "dask_bid.engine.to_zarr (or scipy.sparse.csc_matrix(X) first).")
    _check_shape(X.shape, "the sparse matrix")  # before anything is written
    _check_dst(dst, overwrite)
    nnz = int(X.nnz)
    bar = _progress(nnz, f"writing {os.path.basename(os.fspath(dst))}", "entry", quiet)
    try:
        return write_sparse_blocks(X, dst, overwrite=overwrite, progress=bar.update,
                                   block_edges=block_edges)
    finally:
        bar.close()
