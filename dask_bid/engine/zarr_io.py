"""Zarr v3 input and output: the chunking helper, the result group and its reader.

Layout of the output group written by a fit with ``out=`` (see ``docs/engine.md``)::

    out/                      group, attrs["dask_bid"] = parameters, seed, versions, summary
      C                       (M, K)  float64, chunks (row chunk of A, K): the selected columns
      W                       (K, N)  float64, the point estimate (W[:, columns] = I)
      W_sd                    (K, N)  float64, its posterior standard deviation
      columns                 (K,)    int64, sorted J
      inclusion_probability   (N,)    float64
      traces/{mse,sigma2,accepted,accept_prob}   (n_chains, n_iter)
      draws/{columns,sigma2,sse}                 (n_chains, n_keep[, K]) retained draws
      draws/{w_columns,w_values}                 traced columns and their W draws
      checkpoint/             only while a fit runs (removed when it completes)
"""

from __future__ import annotations

import math
import os
import shutil

import numpy as np

from .._errors import OutputExistsError, OutputLocationError

__all__ = [
    "default_chunks",
    "to_zarr",
    "read_result",
    "is_url",
    "local_path",
    "same_or_nested",
    "prepare_output",
    "write_result",
    "FORMAT_VERSION",
    "jsonable",
]

FORMAT_VERSION = 1

#: Target bytes of one chunk written by :func:`to_zarr`.
CHUNK_BYTES = 16 * 2**20
#: Widest chunk :func:`to_zarr` makes, in columns, when N is large.
MAX_CHUNK_COLS = 4096
#: Up to this many columns a chunk spans all of them.
FULL_WIDTH_COLS = 8192


def is_url(path) -> bool:
    return "://" in str(path)


def local_path(path):
    """``file://`` URLs as plain paths (local directories are created as needed)."""
    path = os.fspath(path)
    return path[len("file://"):] if path.startswith("file://") else path


def default_chunks(shape, itemsize=8):
    """Chunk shape suited to the engine's row-block streaming.

    Every pass of the engine reads A in tall row blocks ``A[r0:r1, c0:c1]`` spanning many
    columns. Chunks therefore span all columns when N <= 8192 (a row block reads whole
    chunks, nothing is decoded twice), otherwise about 4096 columns in near-equal widths;
    the number of rows makes a chunk about 16 MiB, big enough to amortise per-chunk
    overhead, small enough that a worker holds a few at once under a tight memory limit.
    """
    M, N = (int(s) for s in shape)
    if N <= FULL_WIDTH_COLS:
        cols = N
    else:
        cols = -(-N // -(-N // MAX_CHUNK_COLS))
    rows = max(1, min(M, CHUNK_BYTES // max(1, cols * itemsize)))
    return rows, cols


def _exists(path, storage_options=None) -> bool:
    if is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(path, **(storage_options or {}))
        return fs.exists(p) and bool(fs.ls(p))
    return os.path.exists(path) and (not os.path.isdir(path) or bool(os.listdir(path)))


def _remove(path, storage_options=None):
    if is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(path, **(storage_options or {}))
        if fs.exists(p):
            fs.rm(p, recursive=True)
    elif os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def to_zarr(array, path, *, chunks=None, overwrite=False, storage_options=None):
    """Write a numpy or dask array to a Zarr v3 array at ``path``.

    Parameters
    ----------
    array : numpy.ndarray or dask.array.Array (2-D)
    path : str or PathLike
        A local directory or an fsspec URL.
    chunks : (int, int), optional
        Chunk shape; by default :func:`default_chunks` (tall row blocks spanning all or a
        few thousand columns, about 16 MiB each), the access pattern of the engine.
    overwrite : bool, default=False
        Replace an existing store; otherwise an existing, non-empty ``path`` raises
        :class:`~dask_bid.OutputExistsError`.
    storage_options : dict, optional
        For fsspec URLs.

    Returns
    -------
    zarr.Array
        The written array, opened read-only.

    Notes
    -----
    Dask input is written chunk by chunk on the current scheduler (a distributed client if
    one is active), so an array larger than memory never materialises.
    """
    import zarr

    path = local_path(path)
    if array.ndim != 2:
        from .._errors import InputShapeError

        raise InputShapeError(f"to_zarr writes 2-D matrices, got shape {array.shape}.")
    if _exists(path, storage_options):
        if not overwrite:
            raise OutputExistsError(
                f"{path!r} already exists; pass overwrite=True to replace it or choose "
                "another path.")
        _remove(path, storage_options)
    dtype = np.dtype(array.dtype)
    if chunks is None:
        chunks = default_chunks(array.shape, dtype.itemsize)
    chunks = tuple(int(c) for c in chunks)
    z = zarr.create_array(store=path, shape=array.shape, chunks=chunks, dtype=dtype,
                          overwrite=True, zarr_format=3, storage_options=storage_options)
    if hasattr(array, "dask"):
        import dask.array as da

        da.store(array.rechunk(chunks), z, lock=False)
    else:
        # slabs of whole chunk rows: bounded temporaries, every chunk written once
        step = chunks[0] * max(1, (64 * 2**20) // max(1, chunks[0] * array.shape[1]
                                                     * dtype.itemsize))
        for r0 in range(0, array.shape[0], step):
            z[r0:r0 + step] = array[r0:r0 + step]
    return zarr.open_array(path, mode="r", storage_options=storage_options)


def _norm(path):
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def same_or_nested(a, b) -> bool:
    """Whether paths ``a`` and ``b`` are equal or one contains the other."""
    # file:// URLs name local paths: compare them as such
    a, b = (str(x)[len("file://"):] if str(x).startswith("file://") else x for x in (a, b))
    if is_url(a) or is_url(b):
        a, b = str(a).rstrip("/"), str(b).rstrip("/")
        return a == b or a.startswith(b + "/") or b.startswith(a + "/")
    a, b = _norm(a), _norm(b)
    return a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep)


def prepare_output(out, *, input_path=None, overwrite=False, resume=False,
                   storage_options=None):
    """Check ``out`` and open (or create) the output group.

    Returns ``(group, existing)`` with ``existing`` True when ``resume`` found a group of a
    previous run to continue.
    """
    import zarr

    out = local_path(out)
    if input_path is not None and same_or_nested(out, local_path(input_path)):
        raise OutputLocationError(
            f"out={out!r} is the input store {input_path!r} or overlaps it; the input is "
            "never written. Choose an output path outside the input store.")
    if not is_url(out) and os.path.isfile(out):
        raise OutputLocationError(f"out={out!r} is an existing file, not a directory.")
    exists = _exists(out, storage_options)
    if exists and resume:
        try:
            g = zarr.open_group(out, mode="r+", storage_options=storage_options)
        except Exception as exc:
            raise OutputLocationError(
                f"resume=True but {out!r} is not a dask_bid output group ({exc}).") from exc
        if "dask_bid" not in g.attrs:
            raise OutputLocationError(
                f"resume=True but {out!r} holds no dask_bid fit (no 'dask_bid' attributes); "
                "pass resume=False with overwrite=True to replace it.")
        return g, True
    if exists and not overwrite:
        raise OutputExistsError(
            f"the output {out!r} already exists. Pass overwrite=True to replace it, "
            "resume=True to continue an interrupted fit there, or choose another path.")
    if exists:
        _remove(out, storage_options)
    try:
        g = zarr.open_group(out, mode="w", zarr_format=3, storage_options=storage_options)
    except OSError as exc:
        raise OutputLocationError(
            f"cannot create the output group at {out!r}: {exc}. Choose an output path in a "
            "directory you can write to.") from exc
    return g, False


def jsonable(v):
    """Parameters as JSON values (tuples and arrays as lists, numpy scalars as Python)."""
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return jsonable(v.tolist())
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    return repr(v)


def _put(group, name, data, chunks=None):
    data = np.asarray(data)
    if chunks is None:
        chunks = data.shape if data.size else tuple(1 for _ in data.shape)
    chunks = tuple(max(1, int(c)) for c in chunks)
    arr = group.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks,
                             overwrite=True)
    if data.size:
        arr[...] = data
    return arr


def write_result(group, res, *, w_chunk_cols=None, extra_attrs=None):
    """Write every array of a :class:`~dask_bid.BIDResult` (all but C) and the attributes."""
    K, N = res.components.shape
    wc = (K, max(1, min(N, w_chunk_cols or N)))
    _put(group, "W", res.components, wc)
    _put(group, "W_sd", res.components_sd, wc)
    _put(group, "columns", res.columns)
    _put(group, "inclusion_probability", res.inclusion_probability,
         (min(N, 1 << 20),))
    tr = group.require_group("traces")
    for f in res.trace.dtype.names:
        _put(tr, f, np.ascontiguousarray(res.trace[f]))
    dr = group.require_group("draws")
    _put(dr, "columns", res.draws_columns)
    _put(dr, "sigma2", res.draws_sigma2)
    _put(dr, "sse", res.draws_sse)
    if res.draws_w is not None:
        _put(dr, "w_columns", res.draws_w["columns"])
        _put(dr, "w_values", res.draws_w["values"])
    summary = {
        "sigma2": res.sigma2, "n_draws_point": res.n_draws_point, "mse": res.mse,
        "mse_observed": res.mse_observed, "max_abs_w": res.max_abs_w,
        "n_passes": res.n_passes, "elapsed": res.elapsed, "n_samples": res.n_samples,
        "n_features": res.n_features,
    }
    meta = dict(group.attrs.get("dask_bid", {}))
    meta.update({"format_version": FORMAT_VERSION, "result_params": jsonable(res.params),
                 "summary": jsonable(summary)})
    meta.update(jsonable(extra_attrs or {}))
    group.attrs["dask_bid"] = meta


def read_result(path, *, storage_options=None):
    """Read the output group of a finished fit back as a :class:`~dask_bid.BIDResult`.

    ``result.C`` is a lazy dask array over the stored ``C``.

    Raises
    ------
    StoreNotFoundError
        Nothing at ``path``.
    CorruptStoreError
        ``path`` is not a complete dask_bid output group.
    """
    import dask.array as da
    import zarr

    from .._errors import CorruptStoreError, StoreNotFoundError
    from .result import TRACE_DTYPE, BIDResult

    path = local_path(path)
    if not is_url(path) and not os.path.exists(path):
        raise StoreNotFoundError(f"no dask_bid result at {path!r}: the path does not exist.")
    try:
        g = zarr.open_group(path, mode="r", storage_options=storage_options)
        meta = g.attrs["dask_bid"]
    except Exception as exc:
        raise CorruptStoreError(
            f"{path!r} is not a dask_bid output group ({type(exc).__name__}: {exc}).") from exc
    if meta.get("status") != "complete":
        raise CorruptStoreError(
            f"the fit at {path!r} did not finish (status {meta.get('status')!r}); continue "
            "it with resume=True.")
    s = meta["summary"]
    tr = g["traces"]
    n_chains, n_iter = tr["mse"].shape
    trace = np.empty((n_chains, n_iter), dtype=TRACE_DTYPE)
    for f in TRACE_DTYPE.names:
        trace[f] = tr[f][...]
    dr = g["draws"]
    draws_w = None
    if "w_columns" in dr:
        draws_w = {"columns": dr["w_columns"][...], "values": dr["w_values"][...]}
    res = BIDResult(
        columns=g["columns"][...], components=g["W"][...], components_sd=g["W_sd"][...],
        sigma2=float(s["sigma2"]), inclusion_probability=g["inclusion_probability"][...],
        trace=trace, draws_columns=dr["columns"][...], draws_sigma2=dr["sigma2"][...],
        draws_sse=dr["sse"][...], n_draws_point=int(s["n_draws_point"]), mse=float(s["mse"]),
        mse_observed=None if s["mse_observed"] is None else float(s["mse_observed"]),
        max_abs_w=float(s["max_abs_w"]), n_passes=int(s["n_passes"]),
        elapsed=float(s["elapsed"]), n_samples=int(s["n_samples"]),
        n_features=int(s["n_features"]), params=dict(meta["result_params"]),
        draws_w=draws_w)
    res.C = da.from_zarr(g["C"]) if "C" in g else None
    return res
