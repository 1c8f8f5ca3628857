"""Sparse input on the command line (docs/sparse.md): ``--format triplets`` for ``fit``
and ``info``, what ``info`` says about a sparse store, and ``dask-bid convert``'s
triplet files (``convert_command.py``).

``dask-bid fit ratings.tsv --format triplets --missing mask --k 20 --out fit.zarr``
converts the (row, column, value) file once into a sparse store next to OUT
(``<folder of OUT>/ratings.tsv.zarr``, reused while the file is unchanged) and fits it.
"""

from __future__ import annotations

import os

import numpy as np

from ..._files import same_file
from ..._na import WHITESPACE
from ._core import CLIError, file_suffix, human_bytes, is_url, print_lines, say

__all__ = ["add_sparse_options", "sparse_input", "sparse_kind", "describe_sparse",
           "sparse_info_lines", "convert_triplet_file"]


def _columns(text):
    try:
        cols = [int(x) - 1 for x in text.split(",")]
    except ValueError:
        cols = []
    if len(cols) != 3 or min(cols) < 0 or len(set(cols)) < 3:
        import argparse

        raise argparse.ArgumentTypeError(
            f"expected three different 1-based field numbers ROW,COL,VALUE (e.g. 1,2,3), "
            f"got {text!r}")
    return tuple(cols)


def _shape(text):
    try:
        M, N = (int(x) for x in text.lower().replace("x", ",").split(","))
    except ValueError:
        M = N = 0
    if M < 1 or N < 1:
        import argparse

        raise argparse.ArgumentTypeError(f"expected ROWS,COLS (e.g. 943,1682), got {text!r}")
    return (M, N)


def _sep(text):
    # "space": runs of whitespace, given (None would be "not given", the suffix's default:
    # `--sep space` alone then read a triplet file as a dense matrix)
    sep = {"tab": "\t", "\\t": "\t", "space": WHITESPACE, "whitespace": WHITESPACE}.get(
        text, text)
    if sep != WHITESPACE and len(sep) != 1:
        import argparse

        # (numpy's reader takes one character: '::' was an internal TypeError)
        raise argparse.ArgumentTypeError(
            f"expected one character, 'tab' or 'space', got {text!r}" + (
                " (MovieLens 1M: replace '::' first, e.g. sed 's/::/\\t/g' ratings.dat > "
                "ratings.tsv, then --sep tab)" if text == "::" else ""))
    return sep


#: ``--format``'s help for ``fit`` and ``info``
FORMAT_HELP = ("triplets: INPUT holds one observed entry per line, ROW COL VALUE (csv, tsv, "
               "whitespace text, or parquet with the [parquet] extra); absent entries are "
               "unobserved (fitted with --missing mask). Default: triplets for a parquet file "
               "or where a triplet option (--sep, --columns, --shape, --index-base) is "
               "given, else dense for files; a sparse store is recognised")


def add_sparse_options(parser, format_help=FORMAT_HELP):
    """``--format`` and the triplet file's options (for ``fit``, ``info`` and
    ``convert``)."""
    parser.add_argument("--format", choices=("dense", "triplets"), default=None,
                        help=format_help)
    parser.add_argument("--sep", type=_sep, default=None, metavar="SEP",
                        help="triplets: field separator (default by suffix: ',' for .csv, "
                        "tab for .tsv, whitespace; 'tab' and 'space' are accepted)")
    parser.add_argument("--columns", type=_columns, default=None, metavar="R,C,V",
                        help="triplets: 1-based fields of row, column and value (default "
                        "1,2,3; other fields are ignored)")
    parser.add_argument("--shape", type=_shape, default=None, metavar="M,N",
                        help="triplets: the matrix's shape (default: the largest indices)")
    parser.add_argument("--index-base", type=int, choices=(0, 1), default=None,
                        help="triplets: index of the first row and column in the file "
                        "(default 0; MovieLens counts from 1)")
    parser.add_argument("--drop-empty-columns", action="store_true", default=None,
                        help="triplets: leave out the column ids with no entry (a slice of "
                        "a ratings file skips items), which a fit refuses; the store's "
                        "columns are then named by the file's ids")


def _triplet_kw(args):
    """The reader's keywords (scan_triplets and convert_triplets take them all)."""
    return dict(sep=args.sep, columns=args.columns or (0, 1, 2), shape=args.shape,
                index_base=args.index_base or 0,
                drop_empty_columns=bool(getattr(args, "drop_empty_columns", None)))


def _first_absent(kept, n, limit=1000) -> np.ndarray:
    """The first ``limit`` of 0..n-1 missing from the sorted ``kept`` (without listing
    all n: ids may run to 1e8)."""
    out, at = [], 0
    for k in np.append(np.asarray(kept, dtype=np.int64), n):
        while at < k and len(out) < limit:
            out.append(at)
            at += 1
        at = int(k) + 1
        if len(out) >= limit:
            break
    return np.asarray(out, dtype=np.int64)


def _shown_option(flag, args) -> str:
    """A given triplet option's value as typed on the command line."""
    if flag == "--sep":
        return {"\t": "tab", WHITESPACE: "space"}.get(args.sep, repr(args.sep) if
                                                        args.sep == " " else args.sep)
    if flag == "--columns":
        return ",".join(str(int(c) + 1) for c in args.columns)
    if flag == "--shape":
        return f"{args.shape[0]},{args.shape[1]}"
    if flag == "--index-base":
        return str(args.index_base)
    return ""  # a switch


def _given_triplet_options(args):
    return [flag for flag, v in (("--sep", args.sep), ("--columns", args.columns),
                                 ("--shape", args.shape), ("--index-base", args.index_base),
                                 ("--drop-empty-columns",
                                  getattr(args, "drop_empty_columns", None)))
            if v is not None]


def check_sparse_options(args):
    """Without ``--format``, a Parquet file, or a text file given a triplet option, is a
    triplet file (``args.format`` is set: ``fit`` and ``info`` read it as ``convert``
    does; ``fit X.parquet`` was refused, asking for --format triplets). Refuse triplet
    options with anything else: a store, a .npy, ``--format dense``."""
    given = _given_triplet_options(args)
    src = getattr(args, "input", None) or getattr(args, "path", None)
    if (args.format is None and src is not None and not is_url(src)
            and os.path.isfile(src) and file_suffix(src) != ".npy"
            and (given or file_suffix(src) == ".parquet")):
        args.format = "triplets"
    if given and args.format != "triplets":
        verb = "describes" if len(given) == 1 else "describe"
        if src is not None and (is_url(src) or os.path.isdir(src)):
            # a store already holds its shape and indices (--format triplets then said
            # "reads a local file", a circle of advice)
            raise CLIError(f"{', '.join(given)} {verb} a triplet file, and {src!r} is a "
                           "store, which holds its shape and indices: drop them.")
        if src is not None and file_suffix(src) == ".npy":
            # (--format triplets, as advised, then read the binary file as text lines, or
            # refused it: "drop --format triplets", a loop of advice)
            raise CLIError(f"{', '.join(given)} {verb} a triplet file, and {src!r} is a .npy "
                           "file, a dense matrix: drop them.")
        raise CLIError(f"{', '.join(given)} {verb} a triplet file: pass --format triplets "
                       "too.")


def sparse_kind(args) -> str | None:
    """"a triplet file" (``--format triplets``), "a sparse store", or None (dense)."""
    from ...engine.sparse_store import is_sparse_store

    if args.format == "triplets":
        return "a triplet file"
    return "a sparse store" if is_sparse_store(args.input) else None


def sparse_input(args, out, masked, quiet):
    """For ``fit``: the path of the sparse store to fit, or None for dense input.

    A triplet file is converted (once) to ``<folder of OUT>/<file name>.zarr``; a sparse
    store is fitted as it is. Both are fitted with ``--missing mask``, chosen when
    ``--missing`` is not given.
    """
    from .convert import conversion_lock, converted_path, hold_for_command

    check_sparse_options(args)
    src = args.input
    what = sparse_kind(args)
    if what is None:
        return None
    store = what == "a sparse store"
    if not masked:  # --missing zero given (without --missing, mask is chosen: fit.run)
        raise CLIError(f"{src!r} is {what}: its absent entries are unobserved, not zero; drop "
                       "--missing zero (--missing mask is what it means).")
    if getattr(args, "fill_missing", None):
        raise CLIError(f"--fill-missing does not apply to {what}: pass --missing mask only.")
    if store:
        _refuse_empty_store_columns(src)
        return src
    if is_url(src) or not os.path.isfile(src):
        raise CLIError(f"--format triplets reads a local file; {src!r} is not one.")
    _refuse_binary(src)
    dst = converted_path(src, out)
    # fits started side by side on one file wait for the first conversion (convert.py)
    with conversion_lock(dst, quiet):
        out = _convert_triplets_once(src, dst, args, quiet)
        hold_for_command(dst)  # the fit reads it: no conversion under it (convert.py)
        return out


def _empty_store_columns(reader):
    """(positions of the columns without an entry, the column names the store records or
    None) of a sparse store's reader."""
    from ...engine.zarr_io import stored_column_names

    return np.flatnonzero(reader.column_counts() == 0), stored_column_names(reader)


def _first_few(items, shown=5) -> str:
    """The first ``shown`` of ``items``, then "..." if there are more."""
    return ", ".join(map(str, items[:shown])) + (", ..." if len(items) > shown else "")


def _shown_columns(empty, names) -> str:
    text = _first_few([int(c) for c in empty])
    if names is not None:
        text += f" (named {_first_few([names[int(c)] for c in empty])})"
    return text


def _refuse_empty_store_columns(src):
    """A sparse store with columns that hold no entry (converted in Python, without
    drop_empty_columns): refused before the fit, in the command line's terms (it failed
    after the kernels compiled, with Python advice)."""
    from ...engine.sparse_store import SparseZarrReader

    empty, names = _empty_store_columns(SparseZarrReader(src))
    if empty.size:
        raise CLIError(f"{src!r} is a sparse store with no entry in column(s) "
                       f"{_shown_columns(empty, names)} ({empty.size} in all), and a column "
                       "with no entry cannot be fitted: convert its triplet file again with "
                       "--drop-empty-columns (dask-bid convert FILE --format triplets "
                       "--drop-empty-columns --out STORE).")


def _refuse_binary(src):
    """A .npy or .npz is a dense matrix, not lines of triplets (read as text, its bytes
    were quoted back in the error)."""
    if file_suffix(src) in (".npy", ".npz"):
        raise CLIError(f"{src!r} is a numpy file, not a text file of (row, column, value) "
                       "lines: drop --format triplets (or pass --format dense) to read it "
                       "as a dense matrix.")


def _convert_triplets_once(src, dst, args, quiet):
    if _reusable(dst, src, args):
        from ...engine.sparse_store import SparseZarrReader

        _check_empty_columns(SparseZarrReader(dst).column_counts(), src, args)
        say(f"input        {dst} (converted from {src} before; unchanged)", quiet=quiet)
        return dst
    # a fit replaces its own earlier conversion of this file (any options) freely
    _convert(src, dst, args, quiet, overwrite=args.overwrite or _ours(dst, src))
    return dst


def _convert(src, dst, args, quiet, overwrite, outcome=False):
    """The conversion itself, for ``fit`` and ``convert``: refused where it would
    replace another conversion or a store a fit reads, then said with its header's
    fields; columns a fit would refuse are said at once. ``outcome``: the "converted"
    line is the command's result (``convert``: stdout), not a phase line (``fit``)."""
    from ...engine.lock import refuse_if_read
    from ..sparse_io import convert_triplets

    _refuse_another_conversion(dst, src, args)  # says which options differ
    refuse_if_read(dst)  # a store a fit reads (none there, or unread: passes)
    kw = _triplet_kw(args)
    # columns a fit refuses, said after the first pass and before anything is written
    check = None if kw["drop_empty_columns"] else (
        lambda scan: _check_empty_columns(scan.counts, src, args))
    res = convert_triplets(src, dst, overwrite=overwrite, quiet=quiet, on_scan=check, **kw)
    M, N = res.shape
    line = f"converted    {src} -> {dst} ({res.nnz} observed of {M} x {N}, " \
        f"{res.nnz / (M * N):.3%})"
    if outcome:
        print_lines([line], quiet)
    else:
        say(line, quiet=quiet)
    _say_fields(src, args, quiet)


def _refuse_another_conversion(dst, src, args):
    """A finished conversion of this file that this call would read otherwise (another
    --index-base, --columns or --shape) or that was made from an earlier version of the
    file is replaced only with --overwrite, as a dense file's: fits made on it (and their
    resumption) read that store. An unfinished conversion is replaced freely."""
    meta = _source_meta(dst)
    if args.overwrite or not meta or not meta.get("complete"):
        return
    s = meta.get("source") or {}
    if s.get("kind") == "triplets" and s.get("path") and not _ours(dst, src, meta):
        # as a dense file's conversion says it (convert.py, _not_this_conversion)
        raise CLIError(f"{dst!r} holds the conversion of another file of that name, "
                       f"{s['path']!r}, which fits of it read: choose another --out (a "
                       f"fit converts next to it), or pass --overwrite to replace it by "
                       f"{src!r} (a fit of the other file could then not resume).")
    if not _ours(dst, src, meta):
        return
    if not same_file(s, src):
        raise CLIError(f"{dst!r} was converted from an earlier version of {src!r}: pass "
                       "--overwrite to convert it again (fits of the earlier version then "
                       "no longer resume), or choose another --out folder.")
    kw = _triplet_kw(args)
    given = s.get("file_shape", meta.get("shape")) if s.get("shape_given", True) else None
    before = _options_text(s.get("index_base"), s.get("columns"), given,
                           s.get("drop_empty_columns"))
    now = _options_text(kw["index_base"], kw["columns"], kw["shape"],
                        kw["drop_empty_columns"])
    if kw["shape"] is None and given:
        now += " and no --shape (the largest indices set the shape)"
    raise CLIError(f"{dst!r} was converted from {src!r} with {before}, and this call reads it "
                   f"with {now}: pass --overwrite to convert it again, or the same options "
                   "as before.")


def _options_text(index_base, columns, shape, drop_empty=False):
    cols = ",".join(str(int(c) + 1) for c in (columns or (0, 1, 2)))
    text = f"--index-base {index_base or 0} --columns {cols}"
    text += f" --shape {shape[0]},{shape[1]}" if shape else ""
    return text + (" --drop-empty-columns" if drop_empty else "")


def _check_empty_columns(counts, src, args):
    """Columns a fit would refuse as "have no observed entry; drop them first", said with
    the command line's fix: an empty column 0 of a file that counts from 1 read from 0
    (no --index-base: pass --index-base 1), the empty columns a --shape wider than the
    file makes, or ids the file skips (--drop-empty-columns). ``counts``: the entries per
    column, of the first pass over the file (before anything is written: a refusal after
    the conversion had replaced the store a fit was made on, with --overwrite) or of a
    store converted before."""
    empty = np.flatnonzero(np.asarray(counts) == 0)
    if args.index_base is None and counts.size and counts[0] == 0:
        why = (f"column 0 of {src!r} holds no entry, as when a file counts rows and columns "
               "from 1 (read here from 0, the default): pass --index-base 1 if it does "
               "(MovieLens does); a column with no entry cannot be fitted.")
    elif args.shape is not None and empty.size:
        # a --shape wider than the file: columns a fit refuses (with Python advice)
        why = (f"--shape {args.shape[0]},{args.shape[1]} leaves columns "
               f"{file_ids(empty, args)} of {src!r} without an entry ({empty.size} in all), "
               "and a column with no entry cannot be fitted: give a --shape that ends at the "
               "file's last column, or none (the largest indices set it).")
    elif empty.size:
        # column ids the file skips (a slice of MovieLens): the fit refused them late, in
        # store positions, with Python advice
        why = (f"{src!r} has no entry in column(s) {file_ids(empty, args)} ({empty.size} "
               "in all), and a column with no entry cannot be fitted: pass "
               "--drop-empty-columns to leave them out (the columns are then named by "
               "the file's ids).")
    else:
        return
    raise CLIError(why)


def file_ids(positions, args, shown=5) -> str:
    """Column positions of the store as the triplet file numbers them (``--index-base``
    added), the first ``shown``: the ids a user finds in the file."""
    base = int(getattr(args, "index_base", None) or 0)
    return _first_few([int(p) + base for p in positions], shown)


def _source_meta(dst):
    from ...engine.sparse_store import SparseZarrReader, is_sparse_store

    if not is_sparse_store(dst):
        return None
    try:
        meta = SparseZarrReader(dst).meta
    except Exception:
        return None
    return meta


def _ours(dst, src, meta=None):
    """A sparse store converted from the same file (any options): replaced freely.
    ``meta``: the store's metadata when the caller has read it."""
    meta = _source_meta(dst) if meta is None else meta
    s = (meta or {}).get("source") or {}
    return s.get("kind") == "triplets" and s.get("path") == os.path.abspath(src)


def _reusable(dst, src, args):
    """The store at ``dst`` was converted from this unchanged file with these options."""
    meta = _source_meta(dst)
    if not meta or not meta.get("complete") or args.overwrite:
        return False
    s = meta.get("source") or {}
    kw = _triplet_kw(args)
    # no --shape now: the shape is the largest indices', so a store made with a given
    # shape (possibly larger) is another matrix (stores made before "shape_given" was
    # recorded are taken as made without one, as they were reused)
    same_shape = (not s.get("shape_given") if kw["shape"] is None
                  else list(kw["shape"]) == s.get("file_shape", meta.get("shape")))
    return (s.get("kind") == "triplets" and same_file(s, src)
            and s.get("index_base") == kw["index_base"]
            and s.get("columns") == list(kw["columns"]) and same_shape
            and bool(s.get("drop_empty_columns")) == kw["drop_empty_columns"])


def describe_sparse(args):
    """``info``'s dict for a triplet file (``--format triplets``: one pass over it) or a
    sparse store; None for anything else."""
    from ...engine.sparse_store import is_sparse_store, open_sparse

    check_sparse_options(args)
    path = args.path
    if args.format == "triplets":
        from ..sparse_io import scan_triplets

        kw = _triplet_kw(args)
        drop = kw["drop_empty_columns"]
        # with --drop-empty-columns the scan counts the columns with an entry only (ids of
        # any size, as the conversion reads them)
        scan = scan_triplets(path, quiet=True, **kw)
        shape = list(scan.file_shape or scan.shape)
        empty = (_first_absent(scan.kept, shape[1]) if drop
                 else np.flatnonzero(scan.counts == 0))
        return {"kind": "triplet file", "path": path, "shape": shape,
                "n_observed": scan.nnz, "n_nan_dropped": scan.n_nan, "header": scan.header,
                "file_size": os.path.getsize(path),
                # (with --drop-empty-columns an empty column 0 is left out as the others)
                "column_0_empty": bool(args.index_base is None and not drop and empty.size
                                       and empty[0] == 0),
                "n_empty_columns": int(shape[1] - scan.shape[1]) if drop else int(empty.size),
                "empty_columns": empty.tolist(),
                # as the text line names them (the file's ids); the above are positions
                "empty_column_ids": (empty + int(args.index_base or 0)).tolist(),
                "index_base": int(args.index_base or 0),
                "drop_empty": drop,
                # the options this reading took, for the fit it advises
                "options": "".join(f" {flag} {_shown_option(flag, args)}".rstrip()
                                   for flag in _given_triplet_options(args))}
    if not is_sparse_store(path):
        return None
    src = open_sparse(path)
    meta = src.array.meta
    empty, names = _empty_store_columns(src.array)
    empty = empty.tolist()
    return {"kind": "sparse store", "path": path, "shape": list(src.shape),
            "n_observed": src.nnz, "n_blocks": len(meta["block_edges"]) - 1,
            "format": f"{meta['format']} v{meta['version']}",
            "source": meta.get("source"), "n_nan_dropped": meta.get("n_nan_dropped", 0),
            "column_names": names, "empty_columns": empty,
            # as the text line names them (a file's ids, where the store records them)
            "empty_column_ids": [names[c] for c in empty] if names else None}


def _observed_share(n, total) -> str:
    """``n / total`` to 3 decimals of a percent, never shown as 0 when entries exist (4
    of 270,000,003 read "0.000%")."""
    text = f"{n / total:.3%}"
    return f"{n / total * 100:.2g}%" if n and text == "0.000%" else text


def sparse_info_lines(info):
    M, N = info["shape"]
    total = M * N
    lines = [f"{info['path']}: {info['kind']}",
             f"  shape      {M} x {N}",
             f"  observed   {info['n_observed']} of {total} entries "
             f"({_observed_share(info['n_observed'], total)}); the others are unobserved "
             "(missing)"]
    if info.get("n_nan_dropped"):
        lines.append(f"  NaN        {info['n_nan_dropped']} NaN values left out (unobserved)")
    if info["kind"] == "triplet file":
        lines.append(f"  size       {human_bytes(info['file_size'])} on disk"
                     + (", one header line" if info["header"] else ""))
        lines.append(f"  note       `dask-bid fit FILE --format triplets{info.get('options', '')}"
                     " --missing mask` converts it to a sparse store next to --out")
        if info.get("column_0_empty"):
            lines.append("  note       column 0 holds no entry: the file counts from 1? Then "
                         "pass --index-base 1 (read here from 0, the default)")
        elif info.get("empty_columns"):
            n_empty = info["n_empty_columns"]
            lines.append(f"  empty      {n_empty} column(s) without an entry "
                         f"({_first_few(info['empty_column_ids'])}; the file's ids): " + (
                             f"left out by --drop-empty-columns (the store has {N - n_empty}"
                             " columns, named by the file's ids)" if info.get("drop_empty")
                             else "a fit refuses them (--drop-empty-columns leaves them "
                             "out)"))
    else:
        lines.append(f"  layout     {info['format']}, {info['n_blocks']} column block(s)")
        src = info.get("source") or {}
        if src.get("path"):
            lines.append(f"  converted  from {src['path']}")
        names = info.get("column_names")
        if info.get("empty_columns"):
            empty = info["empty_columns"]
            lines.append(f"  empty      {len(empty)} column(s) without an entry "
                         f"({_shown_columns(empty, names)}): a fit refuses them "
                         "(convert the file again with --drop-empty-columns)")
        if names:  # a file counting from 1: its ids (sparse_io._name_by_file_ids)
            shown = ", ".join(names[:3]) + (f", ..., {names[-1]}" if len(names) > 3 else "")
            lines.append(f"  names      {shown} (the file's ids of the store's columns "
                         f"0 to {len(names) - 1}; a fit's summary names its columns so)")
        lines.append("  note       fit it with --missing mask")
    return lines


def convert_triplet_file(args):
    """``dask-bid convert --format triplets``: a triplet file into a sparse store, once."""
    check_sparse_options(args)
    src, dst = args.input, args.out
    if is_url(src) or not os.path.isfile(src):
        raise CLIError(f"--format triplets reads a local file; {src!r} is not one.")
    _refuse_binary(src)
    if _reusable(dst, src, args):  # as a dense file's conversion: made once
        import sys

        if not args.quiet:  # the outcome, on stdout as the "converted" line
            print(f"reusing {dst} (already converted from {src})", file=sys.stdout)
        return 0
    _convert(src, dst, args, args.quiet, overwrite=args.overwrite, outcome=True)
    return 0


def _say_fields(src, args, quiet):
    """Which of the header's names were read as the row, the column and the value: by
    position (--columns), whatever the names say ("rating,user,item" made the ratings
    the rows, and nothing said so)."""
    from ..sparse_io import triplet_header

    kw = _triplet_kw(args)
    names = triplet_header(src, sep=kw["sep"], columns=kw["columns"])
    if names:
        cols = ",".join(c if isinstance(c, str) else str(int(c) + 1) for c in kw["columns"])
        where = ("columns", "of the Parquet file") if file_suffix(src) == ".parquet" else (
            "fields", "of the header")
        say(f"fields       row {names[0]!r}, column {names[1]!r}, value {names[2]!r} "
            f"({where[0]} {cols} {where[1]}; --columns R,C,V reads others)", quiet=quiet)
