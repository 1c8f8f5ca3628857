"""``dask-bid convert``: a matrix file into a Zarr store, once, to fit it many times.

A ``.npy`` or dense text matrix becomes a chunked Zarr v3 array (``convert.py``, the
conversion ``fit`` makes on its way); a triplet file (ROW COL VALUE per line) becomes a
sparse store (``sparse.py``). ``dask-bid fit OUT ...`` then reads the store as it is.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

from ._core import CLIError, file_suffix, is_url, say
from .reading import (
    FILL_CHOICES,
    KEEP_NAN,
    MISSING_CHOICES,
    TEXT_SUFFIXES,
    add_text_options,
    fill_treatment,
    text_options,
)

__all__ = ["add_parser", "run"]

_FORMAT_HELP = ("dense: INPUT is a matrix (.npy, or a .csv / .tsv / .txt table), written as "
                "a Zarr array; triplets: INPUT holds one observed entry per line, ROW COL "
                "VALUE, written as a sparse store (fitted with --missing mask). Default: "
                "dense for a .npy, triplets for a parquet file or where a triplet option "
                "(--sep, --columns, --shape, --index-base) is given; a text file without "
                "them is asked for, as a matrix and triplets of 3 or 4 fields look alike")


def _chunks(text):
    try:
        r, c = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected ROWS,COLS (e.g. 4096,1000), got {text!r}") from None
    if r < 1 or c < 1:
        raise argparse.ArgumentTypeError(f"chunk sizes must be >= 1, got {text!r}")
    return (r, c)


def _is_dense(args) -> bool:
    if args.format is not None:
        return args.format == "dense"
    return file_suffix(args.input) == ".npy"


def run(args):
    src, dst = args.input, args.out
    if not dst.strip():  # '' was taken for the current folder (it "held the input")
        raise CLIError("--out is empty: name the store to write, e.g. --out A.zarr.")
    if is_url(src) and file_suffix(src) != ".zarr":
        raise CLIError(f"dask-bid convert reads a local file; {src!r} is a URL: copy the "
                       "file here first.")
    if is_url(src) or os.path.isdir(src):
        # a store already: nothing to convert (its chunks are the reader's business)
        raise CLIError(f"{src!r} is not a file: dask-bid convert reads a .npy, text or "
                       "triplet file; a Zarr store is fitted as it is (to rechunk it: "
                       "dask.array.from_zarr(IN).rechunk((ROWS, COLS)).to_zarr(OUT)).")
    from .sparse import _given_triplet_options

    width = None if args.format is not None or _given_triplet_options(args) else \
        _first_line_fields(src)
    if width is not None and width[0] > _TRIPLET_FIELDS_MAX:
        # more fields than a triplet line holds: a matrix, as `dask-bid fit` reads it (it
        # was refused, asking for --format dense, which no other reading could mean)
        say(f"format       dense ({width[0]} fields on the first line: a matrix; "
            "--format triplets --columns R,C,V reads triplets from it)", quiet=args.quiet)
        args.format = "dense"
    if _is_dense(args):
        return _convert_dense(args, src, dst)
    dense_only = [flag for flag, v in (("--fill-missing", args.fill_missing),
                                       ("--missing", args.missing),
                                       ("--chunks", args.chunks),
                                       ("--row-labels", args.row_labels != "auto"),
                                       ("--header", args.header != "auto")) if v]
    if dense_only:
        # said, not guessed, as a text file without options is (below)
        raise CLIError(f"{', '.join(dense_only)} appl{'y' if len(dense_only) > 1 else 'ies'} "
                       f"to a dense matrix: pass --format dense to convert {src!r} as one "
                       "(or --format triplets without them).")
    if args.format is None and not _given_triplet_options(args):
        if file_suffix(src) not in (*TEXT_SUFFIXES, ".parquet"):
            # a file of another kind (m2.dat, u.data) was read as triplets without a word
            # (a 4-column matrix lost a column), where fit and info refuse it
            from ..._files import other_file_advice

            kind = other_file_advice(src)
            if kind:
                raise CLIError(f"{src!r} is a file dask-bid does not read: {kind}.")
            raise CLIError(f"{src!r} is not a file convert reads by its name: pass --format "
                           "triplets for a file of (row, column, value) lines "
                           "(docs/sparse.md); a matrix is read from a .npy, .csv, .txt or "
                           ".tsv file (rename it).")
        _refuse_a_table_read_either_way(src, width)
    from .sparse import convert_triplet_file

    args.format = "triplets"  # a parquet file, or a text file given a triplet option
    return convert_triplet_file(args)


#: a triplet line has row, column, value, and sometimes one more field (MovieLens'
#: timestamp); a default-read line with more is a dense table, whose first three numbers
#: would otherwise be taken for (row, column, value)
_TRIPLET_FIELDS_MAX = 4


def _first_line_fields(src):
    """(fields, separator) of a text file's first data line (a comment or blank line
    aside), split as a triplet file of its suffix is; None for anything else."""
    from ..sparse_io import TRIPLET_SUFFIXES

    if is_url(src) or not os.path.isfile(src) or file_suffix(src) not in TEXT_SUFFIXES:
        return None
    sep = TRIPLET_SUFFIXES[file_suffix(src)]
    with open(src, encoding="utf-8", errors="replace") as fh:
        for line in itertools.islice(fh, 50):
            if line.strip() and not line.lstrip().startswith("#"):
                return (len(line.rstrip("\r\n").split(sep) if sep is not None
                            else line.split()), sep)
    return None


def _refuse_a_table_read_either_way(src, width):
    """A text file of 1 to 4 fields a line given no --format and no triplet option:
    asked, never guessed (wider ones are read as the matrix). Read as triplets by default
    (once the default), a 3- or 4-column matrix became a sparse store of other numbers
    than the matrix `dask-bid fit` reads from the same file."""
    if width is None:
        return
    n, sep = width
    if n < 3:
        raise CLIError(f"{src!r} has {n} field{'s' if n > 1 else ''} on its first line "
                       f"(split by {sep or 'whitespace'!r}), not (row, column, value) "
                       "triplets: pass --format dense for a matrix, or --format triplets "
                       "--sep SEP.")
    raise CLIError(f"{src!r} has {n} fields on its first line: a matrix of {n} columns (as "
                   "`dask-bid fit` reads it) or (row, column, value) triplets? Pass --format "
                   "dense or --format triplets.")


def _convert_dense(args, src, dst):
    from .convert import (
        CONVERTIBLE_SUFFIXES,
        convert_to_zarr,
        warn_subnormal,
    )
    from .sparse import check_sparse_options

    check_sparse_options(args)  # --sep, --columns ... describe a triplet file
    if file_suffix(src) not in CONVERTIBLE_SUFFIXES:
        raise CLIError(f"--format dense converts a .npy or text file "
                       f"({', '.join(TEXT_SUFFIXES)}); {src!r} is not one.")
    if not os.path.isfile(src):
        raise CLIError(f"no such file: {src!r}")
    if os.path.islink(dst.rstrip("/")):
        raise CLIError(f"--out {dst!r} is a symbolic link, which dask-bid never writes "
                       "through: name a new store, or remove the link yourself.")
    if os.path.exists(dst) and os.path.samefile(src, dst):
        raise CLIError(f"--out {dst!r} is INPUT itself; name a new store, e.g. --out "
                       f"{src}.zarr.")
    if os.path.isfile(dst):
        raise CLIError(f"--out {dst!r} is a file; a Zarr store is a folder: name another, "
                       "e.g. --out A.zarr.")
    fill = fill_treatment(args.fill_missing, args.missing == "mask")
    # the outcome ("converted ..." or "reusing ...") on stdout, as other commands'
    # results: the progress and phase lines on stderr
    convert_to_zarr(src, dst, quiet=args.quiet, overwrite=args.overwrite, chunks=args.chunks,
                    fill_missing=fill, outcome_to=sys.stdout, again=args.overwrite,
                    **text_options(args, src))
    warn_subnormal(dst, src, fill == KEEP_NAN)  # as a fit of the file says it (only fits did)
    return 0


def add_parser(sub):
    """Add the ``convert`` command to the subparsers ``sub``."""
    from .sparse import add_sparse_options

    conv = sub.add_parser(
        "convert", help="convert a matrix or triplet file into a Zarr store, once",
        description="Convert INPUT into a Zarr store OUT, once, so that later fits read it "
        "as it is: a .npy or dense text matrix into a chunked Zarr v3 array (streamed in row "
        "blocks: a file larger than memory converts too), a triplet file (one observed "
        "entry per line, ROW COL VALUE) into a sparse store (docs/sparse.md). Then: "
        "dask-bid fit OUT --k K --out FIT.zarr.")
    conv.add_argument("input", metavar="INPUT", help="a .npy, .csv, .tsv, .txt file (or a "
                      ".parquet triplet file)")
    conv.add_argument("--out", required=True, metavar="OUT", help="the Zarr store to write")
    conv.add_argument("--overwrite", action="store_true",
                      help="replace an existing OUT that dask-bid wrote (or an empty "
                      "directory); anything else is refused")
    add_sparse_options(conv, _FORMAT_HELP)
    conv.add_argument("--missing", choices=MISSING_CHOICES, default=None,
                      help="dense: mask keeps every NaN as a missing entry (a fit of the "
                      "store then takes --missing mask by itself); default: a NaN is refused, "
                      "naming its line")
    conv.add_argument("--fill-missing", choices=FILL_CHOICES, default=None,
                      help="dense: zero replaces every NaN by 0 (the paper's fill, recorded "
                      "in the store)")
    add_text_options(conv)
    conv.add_argument("--chunks", type=_chunks, default=None, metavar="ROWS,COLS",
                      help="dense: the Zarr chunk shape (default: about 16 MiB chunks spanning "
                      "all columns up to 8192, as the engine streams row blocks)")
    conv.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    conv.set_defaults(func=run)
    return conv
