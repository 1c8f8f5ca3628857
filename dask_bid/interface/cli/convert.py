"""Reading the files ``fit``, ``rid`` and ``info`` accept: ``.npy`` and text matrices.

``fit`` converts such a file to a Zarr array next to its output (:func:`convert_to_zarr`);
``rid`` reads it into memory (:func:`load_in_memory`).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import sys
import time
import warnings

import numpy as np

from ..._attrs import (
    COLUMN_NAMES_ATTR,
    COLUMN_NAMES_MAX,
    CONVERTED_FROM_ATTR,
    MISSING_ATTR,
    ROW_NAMES_ATTR,
)
from ..._files import file_stamp, same_file, tree_stamp
from ._core import CLIError, file_suffix, is_url
from .reading import (
    KEEP_NAN,
    NAN_ADVICE,
    TEXT_SUFFIXES,
    RowIndexCheck,
    check_text_columns,
    count_rows,
    count_subnormal,
    detect_text_layout,
    finite_or_filled,
    header_names,
    iter_npy_blocks,
    iter_text_blocks,
    npy_header,
    open_npy,
)

__all__ = ["convert_to_zarr", "TEXT_SUFFIXES", "CONVERTIBLE_SUFFIXES", "load_in_memory",
           "input_shape", "converted_path", "detect_text_layout", "count_rows",
           "MISSING_ATTR", "NAMES_ATTR"]

#: Files converted to a Zarr store before a fit (TEXT_SUFFIXES: reading.py).
CONVERTIBLE_SUFFIXES = (".npy", *TEXT_SUFFIXES)
#: Attribute of a store converted from a text file: ``{"header": bool, "row_labels":
#: bool}``, how the file was read (a store made before it was recorded had no labels).
LAYOUT_ATTR = "dask_bid_text_layout"
#: Attribute of a store converted from a text file with a header: the column names (kept
#: up to :data:`NAMES_MAX` columns), which ``fit`` prints beside the selected columns.
NAMES_ATTR = COLUMN_NAMES_ATTR  # the engine keeps them in a fit's result
NAMES_MAX = COLUMN_NAMES_MAX
#: Attribute of a converted store: how many entries are subnormal (reading.py,
#: count_subnormal), when there are any.
SUBNORMAL_ATTR = "dask_bid_n_subnormal"


def _not_this_conversion(existing, src, dst, stamp) -> str:
    """Why the store at ``dst`` is not the conversion of ``src`` as it is now: another
    file of the same name (from another folder), or an earlier version of this one."""
    was = existing.attrs.get(CONVERTED_FROM_ATTR)
    was = was if isinstance(was, dict) else {}
    if was.get("path") and was["path"] != stamp["path"]:
        return (f"{dst!r} holds the conversion of another file of that name, "
                f"{was['path']!r}, which fits of it read: fit from another --out folder, or "
                f"pass --overwrite to replace it by {src!r} (a fit of the other file could "
                "then not resume).")
    if was.get("path"):
        return (f"{dst!r} was converted from an earlier version of {src!r} (the file "
                "changed since: its size or time); pass --overwrite to convert it again.")
    return (f"{dst!r} exists and was not converted from {src!r}; pass --overwrite to replace "
            "it.")


def convert_to_zarr(src, dst, *, quiet=False, overwrite=False, chunks=None,
                    fill_missing=None, row_labels="auto", header="auto", hold=False,
                    outcome_to=None, again=False):
    """Convert a ``.npy``, ``.csv``, ``.txt`` or ``.tsv`` matrix to a Zarr v3 array.

    The file is streamed in row blocks (a ``.npy`` is memory-mapped), so a matrix larger
    than memory converts too. Text files may have one header line and a first column of
    row labels, both left out (:func:`~dask_bid.interface.cli.reading.detect_text_layout`
    finds them; a first column holding the row numbers 0, 1, ... is refused unless
    ``row_labels`` says what it is). Empty fields and ``nan`` are missing values (NaN).
    A NaN is refused (naming its line and column, before anything is left behind) unless
    ``fill_missing="zero"`` replaces it by 0 or ``fill_missing="keep"`` keeps it
    (``--missing mask``: NaN marks a missing entry); infinity is always refused. The
    store records where it came from (attribute ``dask_bid_converted_from``), how many
    entries were filled or kept (``dask_bid_missing``) and how a text file was read
    (``dask_bid_text_layout``): a later call with the same, unchanged source, the same
    treatment of NaN and the same reading reuses it instead of converting again.

    Parameters
    ----------
    src : str or PathLike
        The file to convert.
    dst : str
        The Zarr array to write (a local directory or fsspec URL).
    quiet : bool
        No progress bar.
    overwrite : bool
        Replace an existing ``dst`` that was not converted from this very file.
    chunks : (int, int), optional
        Default: :func:`dask_bid.engine.default_chunks`.
    fill_missing : {None, "zero", "keep"}
        ``"zero"``: every NaN becomes 0 (the paper's fill for missing entries); ``"keep"``:
        NaN stays, the marker of a missing entry for ``missing="mask"``.
    row_labels : {"auto", "first", "none"}
        Text files: whether the first column holds row labels (``--row-labels``).
    header : {"auto", "yes", "no"}
        Text files: whether line 1 is a header (``--header``).
    hold : bool
        Hold the store for reading until the command ends (``fit``): no other process
        converts it again meanwhile (:func:`hold_for_command`).
    outcome_to : file, optional
        Where the line saying the outcome, "converted ..." or "reusing ...", goes
        (default stderr, a phase line of ``fit``; the result of ``convert``, on stdout).
        Said here, where the lease is held: a fit that waited for another process's
        conversion reuses it.
    again : bool
        Convert again even where this very file's conversion could be reused
        (``convert --overwrite``, as for a triplet file; it said "reusing").

    Returns
    -------
    str
        ``dst``.
    """
    from ...engine.zarr_io import refuse_inside_store

    refuse_inside_store(dst, "the store")  # before its lock file is made beside it
    # one conversion at a time per destination: fits started side by side on the same file
    # (K = 5, 10, 20 into one folder) wait for the first one's store, then reuse it
    with conversion_lock(dst, quiet):
        out = _convert(src, dst, quiet=quiet, overwrite=overwrite, chunks=chunks,
                       fill_missing=fill_missing, row_labels=row_labels, header=header,
                       outcome_to=outcome_to, again=again)
        if hold:
            hold_for_command(dst)  # before the lock goes: no conversion in between
        return out


#: the stores this command holds for reading (engine/lock.py: hold_for_reading)
_HELD = []


def hold_for_command(store):
    """Hold the converted store for reading until the command ends (:func:`release_held`):
    no other process converts it again under the fit (engine/lock.py: hold_for_reading)."""
    from ...engine.lock import hold_for_reading

    fd = hold_for_reading(store)
    if fd is not None:
        _HELD.append(fd)


def release_held():
    """Let go of the stores held for reading (the end of a command run in-process: a
    notebook's or a test's ``main([...])``)."""
    while _HELD:
        with contextlib.suppress(OSError):
            os.close(_HELD.pop())


@contextlib.contextmanager
def conversion_lock(dst, quiet):
    """Hold the lease of ``dst`` (engine/lock.py), waiting while another process holds
    it."""
    from ..._errors import OutputLockedError
    from ...engine.lock import OutputLock

    lock = OutputLock(dst)
    said = False
    while True:
        try:
            lock.acquire()
            break
        except OutputLockedError:
            if not said and not quiet:
                print(f"waiting      for another dask-bid converting to {dst}", file=sys.stderr,
                      flush=True)
            said = True
            time.sleep(0.25)
    try:
        yield
    finally:
        lock.release()


def _convert(src, dst, *, quiet, overwrite, chunks, fill_missing, row_labels, header,
             outcome_to=None, again=False):
    from tqdm.auto import tqdm

    from ..._errors import OutputExistsError, StoreNotFoundError
    from ...engine.zarr_io import default_chunks

    src = os.fspath(src)
    if not os.path.isfile(src):
        raise StoreNotFoundError(f"no such file: {src!r}")
    if not is_url(dst):
        from ..._errors import OutputLocationError
        from ...engine.zarr_io import same_or_nested

        # a link to the input itself was told "--out ... is the input" of a path that was
        # no --out, suggesting that very path
        _refuse_link(dst.rstrip("/"))
        if same_or_nested(os.path.abspath(dst), os.path.abspath(src)):
            # "remove it or choose another --out" (the folder held the input)
            beside = os.path.join(os.path.dirname(dst.rstrip("/")) or ".",
                                  os.path.basename(src) + ".zarr")
            raise OutputLocationError(
                f"--out {dst!r} is the input {src!r} or holds it; the input is never written "
                f"or deleted. Choose an output path outside it, e.g. {beside!r}.")
    if is_url(dst):  # a missing bucket or credentials: said before the file is read
        from ...engine.remote import check_bucket

        check_bucket(dst, output=True)
    stamp = file_stamp(src)
    suffix = file_suffix(src)
    layout = None
    if suffix in TEXT_SUFFIXES:
        # read first: a file that cannot be read is refused before anything else
        layout = detect_text_layout(src, row_labels, header)
        check_text_columns(src, layout)
    existing = _open_existing(dst)
    if existing is not None:
        if _same_source(existing, src):
            _check_reusable(existing, src, dst, fill_missing, overwrite)
            _check_layout(existing, src, dst, layout, overwrite)
            rechunk = chunks is not None and tuple(existing.chunks) != tuple(chunks)
            if rechunk and not overwrite:
                raise OutputExistsError(
                    f"{dst!r} was converted from {src!r} with chunks "
                    f"{tuple(existing.chunks)}; pass --overwrite to convert it again with "
                    f"{tuple(chunks)}.")
            edited = _store_edited(existing, dst)
            if not (_needs_reconversion(existing, fill_missing)
                    or _layout_differs(existing, layout) or rechunk or again or edited):
                if not quiet:
                    print(f"reusing {dst} (already converted from {src})",
                          file=outcome_to or sys.stderr)
                return dst
            if edited:
                # ours, derived from this unchanged file: made again from it, never fitted
                # as it is (a value written into it since was fitted without a word)
                if not quiet:
                    print(f"replacing    {dst} (its chunks changed since it was converted "
                          f"from {src})", file=sys.stderr)
                overwrite = True
        elif _unfinished(existing):
            # a conversion that was stopped (Ctrl-C, a killed process): ours and of no use;
            # no one else writes it, as this process holds its lease
            if not quiet:
                print(f"replacing    {dst} (a conversion that did not finish)",
                      file=sys.stderr)
            overwrite = True
        elif not overwrite:
            from ...engine.zarr_io import check_replaceable_array

            # --overwrite would be refused for a store dask_bid did not write: say that first
            check_replaceable_array(dst)
            raise OutputExistsError(_not_this_conversion(existing, src, dst, stamp))
        if overwrite:  # replaced below: only a Zarr array dask_bid wrote, holding no more
            from ...engine.zarr_io import check_replaceable_array

            check_replaceable_array(dst)
            from ...engine.lock import refuse_if_read

            refuse_if_read(dst)
    if suffix == ".npy":
        arr = open_npy(src)
        if arr.ndim != 2:
            from ..._errors import InputShapeError

            raise InputShapeError(f"{src!r} holds a {arr.ndim}-D array of shape {arr.shape}; "
                                  "a matrix (2-D) is needed.")
        from ...engine.inputs import check_float_dtype

        dtype = check_float_dtype(arr.dtype)
        shape = arr.shape
    elif suffix in TEXT_SUFFIXES:
        shape = (count_rows(src, layout.header), layout.n_cols)
        dtype = np.dtype(np.float64)
    else:
        raise CLIError(f"cannot convert {src!r}: expected one of {', '.join(CONVERTIBLE_SUFFIXES)}")
    if shape[0] < 1 or shape[1] < 2:
        from ..._errors import InputShapeError

        raise InputShapeError(f"{src!r} has shape {shape}; a matrix with at least 1 row and "
                              "2 columns is needed.")
    chunks = tuple(chunks) if chunks is not None else default_chunks(shape, dtype.itemsize)
    from ...engine.zarr_io import create_matrix_array, mark_complete, write_error

    # every chunk written, and marked incomplete until the last one is: a killed conversion
    # never passes for a matrix of zeros
    try:
        z = create_matrix_array(dst, shape, dtype, chunks)
    except PermissionError as exc:  # a read-only bucket or folder: named, as for fit
        raise write_error(dst, exc) from exc
    rows_per_write = chunks[0] * max(1, (64 * 2**20) // max(1, chunks[0] * shape[1] * 8))
    # a text file's row labels, gathered as its rows are read (kept up to NAMES_MAX rows)
    labels = ([] if suffix != ".npy" and layout.row_labels and shape[0] <= NAMES_MAX
              else None)
    blocks = (iter_npy_blocks(arr, rows_per_write, dtype) if suffix == ".npy"
              else iter_text_blocks(src, layout, rows_per_write, labels=labels))
    n_filled = n_subnormal = n_read = 0
    observed = np.zeros(shape[1], dtype=np.int64)
    index = RowIndexCheck(layout, row_labels)
    label_cols = int(layout is not None and layout.row_labels)
    try:
        with tqdm(total=shape[0], desc=f"converting {os.path.basename(src)}", unit="row",
                  disable=quiet, file=sys.stderr, dynamic_ncols=True) as bar:
            for r0, block, lines in blocks:
                block, n = finite_or_filled(block, src, r0, lines, fill_missing,
                                            label_cols=label_cols)
                n_subnormal += count_subnormal(block)
                index.update(r0, block)
                n_filled += n
                if fill_missing == KEEP_NAN:
                    observed += np.count_nonzero(~np.isnan(block), axis=0)
                z[r0:r0 + block.shape[0]] = block
                bar.update(block.shape[0])
                n_read = r0 + block.shape[0]
        if n_read != shape[0]:
            # the rows counted (the shape) and the rows read must be the same lines: a
            # mismatch left rows of zeros in a store marked complete (a BOM before a
            # comment line, counted as a row)
            raise CLIError(
                f"{src!r}: {n_read} rows read where {shape[0]} were counted; dask-bid "
                "misread the file's layout. Please report it, with the file's first lines; "
                "meanwhile save it without comment lines or a byte-order mark.")
        index.check(src)
        if fill_missing == KEEP_NAN and not observed.all():
            # found here, before the fit creates OUT: the masked model needs one each
            base = 0 if suffix == ".npy" else 1
            cols = (np.flatnonzero(observed == 0) + base + label_cols)[:5].tolist()
            raise CLIError(
                f"columns {cols} (counted from {base}) of {src!r} have no observed entry "
                "(all NaN); --missing mask fits each column from its observed entries: "
                "drop them first.")
    except (CLIError, UnicodeDecodeError):
        # a refusal (NaN, a bad cell, a byte that is not UTF-8): leave no half-written
        # store that could pass for data
        _remove_store(dst)
        raise
    missing = ({"fill": fill_missing, "n_filled": 0, "n_kept": n_filled}
               if fill_missing == KEEP_NAN else {"fill": fill_missing, "n_filled": n_filled})
    more = {} if layout is None else {
        LAYOUT_ATTR: {"header": bool(layout.header), "row_labels": bool(layout.row_labels),
                      "delimiter": layout.delimiter_name, "decimal": layout.decimal,
                      "trailing_delimiter": bool(layout.trailing)}}
    names = header_names(src, layout) if layout is not None and shape[1] <= NAMES_MAX \
        else None
    if names is not None:
        more[NAMES_ATTR] = names
    if labels is not None:
        more[ROW_NAMES_ATTR] = labels
    if n_subnormal:
        more[SUBNORMAL_ATTR] = n_subnormal
    stamp_now = tree_stamp(dst)  # the chunks as written (the attributes follow)
    if stamp_now is not None:
        more[STORE_STAMP_ATTR] = stamp_now
    # with the completion mark, in one metadata write
    mark_complete(z, **{MISSING_ATTR: missing, CONVERTED_FROM_ATTR: stamp, **more})
    if not quiet:  # said as "reusing" is (a fit of a .npy said nothing)
        nan = ("" if not n_filled else
               f", {n_filled} NaN kept as missing entries (fitted with --missing mask)"
               if fill_missing == KEEP_NAN else f", {n_filled} NaN replaced by 0")
        print(f"converted    {src} -> {dst} ({shape[0]} x {shape[1]} {dtype}, "
              f"chunks {chunks[0]} x {chunks[1]}{nan})", file=outcome_to or sys.stderr)
    return dst


#: the digest of a converted store's chunk files (_files.tree_stamp), recorded at its end
STORE_STAMP_ATTR = "dask_bid_store_stamp"


def _store_edited(existing, dst) -> bool:
    """Whether the chunks of the converted store ``dst`` changed since its conversion
    recorded them (a store of an older version, without the record: not known, False)."""
    recorded = existing.attrs.get(STORE_STAMP_ATTR)
    if not isinstance(recorded, str):
        return False
    now = tree_stamp(dst)
    return now is not None and now != recorded


def _stored_nan(existing):
    """(how the conversion treated NaN, how many it met) of a converted store."""
    missing = existing.attrs.get(MISSING_ATTR) or {}
    fill = missing.get("fill")
    n = int(missing.get("n_kept" if fill == KEEP_NAN else "n_filled") or 0)
    return fill, n


def source_changed(src, dst) -> bool:
    """Whether ``dst`` exists as a conversion of another version of the file ``src``
    (``fit --resume`` refuses it before converting again: the fit started on the old
    one)."""
    existing = _open_existing(dst)
    if existing is None or _unfinished(existing):
        return False
    return not _same_source(existing, src)


def _same_source(existing, src) -> bool:
    return same_file(existing.attrs.get(CONVERTED_FROM_ATTR), src)


def converted_from(dst) -> str | None:
    """The absolute path of the file the store ``dst`` was converted from, if it says."""
    existing = _open_existing(dst)
    was = existing.attrs.get(CONVERTED_FROM_ATTR) if existing is not None else None
    return was.get("path") if isinstance(was, dict) else None


def _needs_reconversion(existing, fill_missing) -> bool:
    # a file without NaN converts to the same store whatever the treatment of NaN
    fill, n = _stored_nan(existing)
    return bool(n) and fill != fill_missing


def _check_reusable(existing, src, dst, fill_missing, overwrite):
    """Refuse to reuse a conversion that treated the file's NaN otherwise than asked
    now (``--overwrite`` converts again)."""
    from .reading import MissingValuesError

    fill, n = _stored_nan(existing)
    if not _needs_reconversion(existing, fill_missing) or overwrite:
        return
    if fill_missing is None:
        raise MissingValuesError(
            f"{src!r} has {n} missing values (NaN). {NAN_ADVICE} (the conversion {dst!r} "
            f"was made with {_treatment(fill)}).")
    raise MissingValuesError(
        f"{dst!r} was converted from {src!r} with {_treatment(fill)}, and this call asks for "
        f"{_treatment(fill_missing)}: pass --overwrite to convert it again, or the same "
        "option as before.")


def _stored_layout(existing):
    # a store converted before the layout was recorded read every column as data
    got = existing.attrs.get(LAYOUT_ATTR) or {}
    return bool(got.get("row_labels", False)), got.get("header")


def _layout_differs(existing, layout) -> bool:
    if layout is None:
        return False
    labels, header = _stored_layout(existing)
    return labels != layout.row_labels or (header is not None and header != layout.header)


def _check_layout(existing, src, dst, layout, overwrite):
    """Refuse to reuse a conversion that read the file otherwise than this call reads it
    (another --row-labels or --header; ``--overwrite`` converts again)."""
    if overwrite or not _layout_differs(existing, layout):
        return
    labels, header = _stored_layout(existing)

    def says(lab, head):
        return (("with" if lab else "without") + " a column of row labels"
                + ("" if head is None else (", with" if head else ", without") + " a header"))

    raise CLIError(f"{dst!r} was converted from {src!r} read {says(labels, header)}, and this "
                   f"call reads it {says(layout.row_labels, layout.header)}: pass --overwrite "
                   "to convert it again, or the same --row-labels / --header as before.")


def _treatment(fill) -> str:
    return {KEEP_NAN: "--missing mask (NaN kept)",
            "zero": "--fill-missing zero (NaN replaced by 0)"}.get(fill, "no NaN allowed")


def _stored_count(path, read) -> int:
    """A count the conversion at ``path`` recorded, ``read(attrs)``; 0 if none or
    unknown (no store there, or one made before the count was recorded)."""
    import zarr

    try:
        return int(read(zarr.open_array(path, mode="r").attrs) or 0)
    except Exception:
        return 0


def converted_fill_count(path, kept=False) -> int:
    """How many NaN the conversion at ``path`` replaced by 0, or with ``kept`` kept as
    missing entries (``--missing mask``; the engine's reading, which the Python API
    refuses missing="zero" by); 0 if none or unknown."""
    if kept:
        from ...engine.zarr_io import stored_kept_nan

        return _stored_count(path, stored_kept_nan)
    return _stored_count(path, lambda attrs: (attrs.get(MISSING_ATTR) or {}).get("n_filled"))


def converted_subnormal_count(path) -> int:
    """How many subnormal entries the conversion at ``path`` met (0 if none or unknown)."""
    return _stored_count(path, lambda attrs: attrs.get(SUBNORMAL_ATTR))


def warn_subnormal(store, named, masked):
    """Warn of the subnormal entries the conversion at ``store`` met, naming ``named``
    (the file, or the store fitted); ``masked``: --missing mask is in force, so the advice
    does not ask for it. ``fit`` of a file or a store and ``convert`` say it alike."""
    n = converted_subnormal_count(store)
    if n:
        from .reading import SUBNORMAL_ADVICE, SUBNORMAL_ADVICE_MASKED

        advice = SUBNORMAL_ADVICE_MASKED if masked else SUBNORMAL_ADVICE
        warnings.warn(advice.format(n=n, src=named), UserWarning, stacklevel=1)


def _remove_store(path):
    """Remove a store this conversion created (a local directory; URLs are left)."""
    import shutil

    if not is_url(path):
        shutil.rmtree(path, ignore_errors=True)


def _unfinished(existing) -> bool:
    """A store dask_bid began to write and never marked complete."""
    from ...engine.zarr_io import ARRAY_ATTR

    mark = existing.attrs.get(ARRAY_ATTR)
    return isinstance(mark, dict) and mark.get("complete") is False


def _open_existing(path):
    import zarr

    if not is_url(path):
        if not os.path.lexists(path):
            return None
        _refuse_link(path)
        if os.path.isdir(path) and not os.listdir(path):
            return None  # an empty folder is written into, as an empty --out is
    try:
        return zarr.open_array(path, mode="r")
    except Exception:
        if is_url(path):
            return None
        from ..._errors import OutputExistsError

        raise OutputExistsError(f"{path!r}, the store the input converts to, exists and is "
                                "not a Zarr array: it is never replaced. Move it away "
                                f"yourself, or {_ELSEWHERE}.") from None


#: the way out of a refused conversion target (a fit converts its input to <folder of
#: --out>/<file name>.zarr)
_ELSEWHERE = ("choose another --out (a fit writes the conversion of its input into the "
              "folder of its --out)")


def _refuse_link(path):
    """Refuse a symbolic link where a conversion would be written (never written
    through), saying what that path is."""
    if not is_url(path) and os.path.islink(path):
        from ..._errors import OutputExistsError

        raise OutputExistsError(
            f"{path!r}, the store the input converts to, is a symbolic link, which dask-bid "
            f"never writes through: {_ELSEWHERE}, or remove the link yourself.")


def converted_path(input_path, out):
    """Where a converted input goes: ``<folder of OUT>/<input file name>.zarr``."""
    name = os.path.basename(os.fspath(input_path))
    out = str(out).rstrip("/")
    join = posixpath.join if is_url(out) else os.path.join
    parent = posixpath.dirname(out) if is_url(out) else os.path.dirname(os.path.abspath(out))
    return join(parent, f"{name}.zarr")


def load_in_memory(path, fill_missing=None, row_labels="auto", header="auto"):
    """A .npy / text matrix as a numpy array, for the baselines (NaN, row labels and the
    header as in :func:`convert_to_zarr`)."""
    suffix = file_suffix(path)
    if not os.path.isfile(path):
        from ..._errors import StoreNotFoundError

        raise StoreNotFoundError(f"no such file: {path!r}")
    if suffix == ".npy":
        arr = open_npy(path)
        if arr.ndim != 2 or arr.dtype.kind not in "f":
            return arr  # the estimator names the problem (shape, dtype)
        blocks = iter_npy_blocks(arr, 65536, arr.dtype)
        layout = None
    else:
        layout = detect_text_layout(path, row_labels, header)
        check_text_columns(path, layout)
        blocks = iter_text_blocks(path, layout, 65536)
    # the baselines have no missing-data model: only the fill is offered
    advice = "Pass --fill-missing zero to replace every NaN by 0 (the paper's fill)"
    index = RowIndexCheck(layout, row_labels)
    label_cols = int(layout is not None and layout.row_labels)
    parts = []
    for r0, block, lines in blocks:
        parts.append(finite_or_filled(block, path, r0, lines, fill_missing, advice,
                                      label_cols=label_cols)[0])
        index.update(r0, parts[-1])
    index.check(path)
    if not parts:  # a header line and nothing after it
        from ..._errors import InputShapeError

        raise InputShapeError(f"{path!r} has shape (0, {layout.n_cols}); a matrix with at "
                              "least 1 row and 2 columns is needed.")
    return np.concatenate(parts, axis=0)


def input_column_names(src, text, n_cols=None):
    """INPUT's column names: a text file's header, or those a Zarr array records (a
    converted text file's); None for a .npy, or names that do not count ``n_cols``.
    Names are a courtesy: anything unreadable gives None."""
    try:
        suffix = "" if is_url(src) else file_suffix(src)
        if suffix == ".npy":
            return None
        if suffix in CONVERTIBLE_SUFFIXES:
            names = header_names(src, detect_text_layout(src, **text))
        else:
            import zarr

            from ...engine.zarr_io import stored_column_names

            names = stored_column_names(zarr.open_array(src, mode="r"))
    except Exception:
        return None
    return names if names is not None and (n_cols is None or len(names) == n_cols) else None


def input_shape(src, row_labels="auto", header="auto"):
    """Shape of INPUT from metadata (a .npy header, a text file's rows, Zarr metadata)."""
    from ...engine.inputs import as_matrix_source

    if not is_url(src) and file_suffix(src) in CONVERTIBLE_SUFFIXES:
        if not os.path.isfile(src):
            from ..._errors import StoreNotFoundError

            raise StoreNotFoundError(f"no such file: {src!r}")
        if file_suffix(src) == ".npy":
            return npy_header(src)[0]
        layout = detect_text_layout(src, row_labels, header)
        check_text_columns(src, layout)
        return (count_rows(src, layout.header), layout.n_cols)
    return as_matrix_source(src).shape
