"""Reading the files ``fit``, ``rid`` and ``info`` accept: ``.npy`` and text matrices.

``fit`` converts such a file to a Zarr array next to its output (:func:`convert_to_zarr`);
``rid`` reads it into memory (:func:`load_in_memory`).
"""

from __future__ import annotations

import os
import posixpath
import sys

import numpy as np

from ._core import CLIError, file_suffix, is_url

__all__ = ["convert_to_zarr", "TEXT_SUFFIXES", "CONVERTIBLE_SUFFIXES", "load_in_memory",
           "input_shape", "converted_path", "detect_text_layout", "count_rows"]

#: Files converted to a Zarr store before a fit.
TEXT_SUFFIXES = (".csv", ".txt", ".tsv")
CONVERTIBLE_SUFFIXES = (".npy", *TEXT_SUFFIXES)


def _source_stamp(path):
    st = os.stat(path)
    return {"path": os.path.abspath(path), "size": int(st.st_size),
            "mtime_ns": int(st.st_mtime_ns)}


def detect_text_layout(path):
    """(delimiter, has_header, n_cols) from the first non-empty line of a text matrix."""
    with open(path, encoding="utf-8-sig") as fh:
        first = ""
        for line in fh:
            if line.strip():
                first = line.rstrip("\r\n")
                break
    if not first:
        raise CLIError(f"{path!r} holds no data rows.")
    if file_suffix(path) == ".csv" or ("," in first and "\t" not in first):
        delim = ","
    elif "\t" in first:
        delim = "\t"
    else:
        delim = None
    fields = first.split(delim) if delim else first.split()
    try:
        [float(f) if f.strip() else np.nan for f in fields]
        header = False
    except ValueError:
        header = True
    return delim, header, len(fields)


def count_rows(path, header):
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                n += 1
    return n - int(header)


def _parse_block(lines, delim, n_cols, first_row, path):
    import io

    text = "".join(lines)
    try:
        block = np.loadtxt(io.StringIO(text), delimiter=delim, dtype=np.float64, ndmin=2)
    except ValueError:
        # empty fields ("1,,3") are missing values: the slower parser fills them with NaN
        try:
            block = np.genfromtxt(io.StringIO(text), delimiter=delim, dtype=np.float64,
                                  filling_values=np.nan, invalid_raise=True)
            block = np.atleast_2d(block)
        except ValueError as exc:
            raise CLIError(f"cannot parse {path!r} near data row {first_row + 1}: "
                           f"{' '.join(str(exc).split())}") from exc
    if block.shape[1] != n_cols:
        raise CLIError(f"{path!r}: data row {first_row + 1} onwards has {block.shape[1]} "
                       f"columns, the first row has {n_cols}; every row needs the same number.")
    return block


def convert_to_zarr(src, dst, *, quiet=False, overwrite=False, chunks=None):
    """Convert a ``.npy``, ``.csv``, ``.txt`` or ``.tsv`` matrix to a Zarr v3 array.

    The file is streamed in row blocks (a ``.npy`` is memory-mapped), so a matrix larger
    than memory converts too. Text files may have one header line; empty fields and
    ``nan`` become NaN. The store records where it came from: a later call with the same,
    unchanged source reuses it instead of converting again.

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

    Returns
    -------
    str
        ``dst``.
    """
    import zarr
    from tqdm.auto import tqdm

    from ..._errors import OutputExistsError, StoreNotFoundError
    from ...engine.zarr_io import default_chunks

    src = os.fspath(src)
    if not os.path.isfile(src):
        raise StoreNotFoundError(f"no such file: {src!r}")
    stamp = _source_stamp(src)
    existing = _open_existing(dst)
    if existing is not None:
        if existing.attrs.get("dask_bid_converted_from") == stamp:
            if not quiet:
                print(f"reusing {dst} (already converted from {src})", file=sys.stderr)
            return dst
        if not overwrite:
            raise OutputExistsError(
                f"{dst!r} exists and was not converted from this version of {src!r}; pass "
                "--overwrite to replace it.")
    suffix = file_suffix(src)
    if suffix == ".npy":
        arr = np.load(src, mmap_mode="r", allow_pickle=False)
        if arr.ndim != 2:
            from ..._errors import InputShapeError

            raise InputShapeError(f"{src!r} holds a {arr.ndim}-D array of shape {arr.shape}; "
                                  "a matrix (2-D) is needed.")
        from ...engine.inputs import check_float_dtype

        dtype = check_float_dtype(arr.dtype)
        shape = arr.shape
    elif suffix in TEXT_SUFFIXES:
        delim, header, n_cols = detect_text_layout(src)
        shape = (count_rows(src, header), n_cols)
        dtype = np.dtype(np.float64)
    else:
        raise CLIError(f"cannot convert {src!r}: expected one of {', '.join(CONVERTIBLE_SUFFIXES)}")
    if shape[0] < 1 or shape[1] < 2:
        from ..._errors import InputShapeError

        raise InputShapeError(f"{src!r} has shape {shape}; a matrix with at least 1 row and "
                              "2 columns is needed.")
    chunks = tuple(chunks) if chunks is not None else default_chunks(shape, dtype.itemsize)
    z = zarr.create_array(store=dst, shape=shape, chunks=chunks, dtype=dtype, overwrite=True,
                          zarr_format=3)
    rows_per_write = chunks[0] * max(1, (64 * 2**20) // max(1, chunks[0] * shape[1] * 8))
    with tqdm(total=shape[0], desc=f"converting {os.path.basename(src)}", unit="row",
              disable=quiet, file=sys.stderr, dynamic_ncols=True) as bar:
        if suffix == ".npy":
            for r0 in range(0, shape[0], rows_per_write):
                r1 = min(shape[0], r0 + rows_per_write)
                z[r0:r1] = np.asarray(arr[r0:r1], dtype=dtype)
                bar.update(r1 - r0)
        else:
            r0 = 0
            buf = []
            with open(src, encoding="utf-8-sig") as fh:
                skip = header
                for line in fh:
                    if not line.strip():
                        continue
                    if skip:
                        skip = False
                        continue
                    buf.append(line)
                    if len(buf) == rows_per_write:
                        z[r0:r0 + len(buf)] = _parse_block(buf, delim, shape[1], r0, src)
                        bar.update(len(buf))
                        r0 += len(buf)
                        buf = []
            if buf:
                z[r0:r0 + len(buf)] = _parse_block(buf, delim, shape[1], r0, src)
                bar.update(len(buf))
    z.attrs["dask_bid_converted_from"] = stamp
    return dst


def _open_existing(path):
    import zarr

    if not is_url(path) and not os.path.exists(path):
        return None
    try:
        return zarr.open_array(path, mode="r")
    except Exception:
        if is_url(path):
            return None
        from ..._errors import OutputExistsError

        raise OutputExistsError(f"{path!r} exists and is not a Zarr array; remove it or choose "
                                "another --out.") from None


def converted_path(input_path, out):
    """Where a converted input goes: ``<folder of OUT>/<input file name>.zarr``."""
    name = os.path.basename(os.fspath(input_path))
    out = str(out).rstrip("/")
    join = posixpath.join if is_url(out) else os.path.join
    parent = posixpath.dirname(out) if is_url(out) else os.path.dirname(os.path.abspath(out))
    return join(parent, f"{name}.zarr")


def load_in_memory(path):
    """A .npy / text matrix as a numpy array, for the baselines."""
    suffix = file_suffix(path)
    if not os.path.isfile(path):
        from ..._errors import StoreNotFoundError

        raise StoreNotFoundError(f"no such file: {path!r}")
    if suffix == ".npy":
        return np.load(path, mmap_mode="r", allow_pickle=False)
    delim, header, n_cols = detect_text_layout(path)
    with open(path, encoding="utf-8-sig") as fh:
        lines = [ln for ln in fh if ln.strip()][int(header):]
    return _parse_block(lines, delim, n_cols, 0, path)


def input_shape(src):
    """Shape of INPUT from metadata (a .npy header, a text file's rows, Zarr metadata)."""
    from ...engine.inputs import as_matrix_source

    if not is_url(src) and file_suffix(src) in CONVERTIBLE_SUFFIXES:
        if not os.path.isfile(src):
            from ..._errors import StoreNotFoundError

            raise StoreNotFoundError(f"no such file: {src!r}")
        if file_suffix(src) == ".npy":
            return tuple(np.load(src, mmap_mode="r", allow_pickle=False).shape)
        delim, header, n_cols = detect_text_layout(src)
        return (count_rows(src, header), n_cols)
    return as_matrix_source(src).shape
