"""Sparse input: a column-compressed matrix in a Zarr v3 group, and its readers.

The layout (docs/sparse.md)::

    <store>/                  group, attrs["dask_bid_sparse"] = {"format": "dask_bid.csc",
                              "version": 1, "shape": [M, N], "nnz": ..., "block_edges":
                              [0, ..., N], "complete": true, ...}
    <store>/indptr            (N + 1,) int64: the entries of column n are the global
                              entries indptr[n]:indptr[n+1]
    <store>/blocks/b00000/indices   (nnz_b,) int32 (int64 when M >= 2^31): row of each
                              entry of column block 0, increasing within each column
    <store>/blocks/b00000/data      (nnz_b,) float64: its value
    ...

Column block ``b`` holds columns ``block_edges[b]:block_edges[b+1]`` and its entries
``indptr[block_edges[b]]:indptr[block_edges[b+1]]`` of the global numbering. An entry
that is not stored is **unobserved** (missing), never zero; a stored 0.0 is an observed
zero. Nothing here holds or builds the dense matrix.

Readers (picklable, opened lazily on the worker that reads): :class:`SparseZarrReader`
for a store, :class:`SparseMemoryReader` for a ``scipy.sparse`` matrix in memory. Both
give the CSC arrays of a column range (:meth:`read_cols`) and the observed entries of
any set of columns (:meth:`read_columns`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

import numpy as np

from .._errors import CorruptStoreError, IncompleteStoreError, InputShapeError, StoreNotFoundError
from .._files import local_path
from .inputs import MatrixSource

__all__ = ["SPARSE_ATTR", "SPARSE_FORMAT", "SPARSE_VERSION", "SparseZarrReader",
           "SparseMemoryReader", "SparseSource", "is_sparse_store", "open_sparse",
           "sparse_source", "write_sparse_blocks", "ENTRIES_PER_CHUNK", "sparse_node",
           "csc_parts"]

_BLOCK_NAME = re.compile(r"^b\d{5,}$")


def sparse_node(parts) -> bool:
    """Whether a node at path ``parts`` in a sparse store is one its writer makes (the
    layout above): an array of the user's added to the store is not, and is never
    deleted with it."""
    if parts[0] == "indptr" or parts == ("blocks",):
        return len(parts) == 1
    return (parts[0] == "blocks" and bool(_BLOCK_NAME.match(parts[1]))
            and (len(parts) == 2 or (len(parts) == 3 and parts[2] in ("indices", "data"))))


#: The group attribute that marks a sparse store, and its format name and version.
SPARSE_ATTR = "dask_bid_sparse"
SPARSE_FORMAT = "dask_bid.csc"
SPARSE_VERSION = 1
#: Rows per chunk of the dense C (M x K, NaN where unobserved) of a sparse fit's output.
C_ROWS = 2**16
#: Entries per Zarr chunk of a block's ``indices`` and ``data`` (8 MiB of values).
ENTRIES_PER_CHUNK = 2**20


def _is_url(s: str) -> bool:
    return "://" in s


def _local_meta(path):
    """The sparse attribute of a local Zarr v3 group at ``path`` (None if it is not one)."""
    f = os.path.join(path, "zarr.json")
    if not os.path.isfile(f):
        return None
    try:
        with open(f) as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return None
    if meta.get("node_type") != "group":
        return None
    return (meta.get("attributes") or {}).get(SPARSE_ATTR)


def is_sparse_store(path, storage_options=None) -> bool:
    """Whether ``path`` is a dask_bid sparse group (metadata only)."""
    spath = os.fspath(path)
    if not _is_url(spath):
        return _local_meta(spath) is not None
    try:
        import zarr

        g = zarr.open_group(spath, mode="r", storage_options=storage_options)
        return SPARSE_ATTR in g.attrs
    except Exception:
        return False


class SparseZarrReader:
    """Reads a sparse store (see the module docstring); picklable, opened lazily."""

    def __init__(self, path, storage_options=None, scale_log2=0):
        self.path = os.fspath(path)
        self.storage_options = storage_options
        self.scale_log2 = int(scale_log2)
        self._group = None
        self._indptr = None
        meta = self.meta
        self.shape = tuple(int(s) for s in meta["shape"])
        self.nnz = int(meta["nnz"])
        self.block_edges = np.asarray(meta["block_edges"], dtype=np.int64)

    def __getstate__(self):
        d = dict(self.__dict__)
        d["_group"] = None
        d["_indptr"] = None
        return d

    def scaled(self, exponent):
        """The same store read as A / 2^exponent (engine/scaling.py)."""
        return type(self)(self.path, self.storage_options, exponent)

    @property
    def group(self):
        if self._group is None:
            import zarr

            self._group = zarr.open_group(
                self.path, mode="r",
                storage_options=self.storage_options if _is_url(self.path) else None)
        return self._group

    @property
    def meta(self):
        return dict(self.group.attrs[SPARSE_ATTR])

    @property
    def attrs(self):
        """The store's attributes (the row and column names a conversion recorded, as
        a Zarr array's: ``zarr_io.stored_column_names`` reads both)."""
        return self.group.attrs

    @property
    def indptr(self):
        if self._indptr is None:
            ptr = np.asarray(self._get(self.group["indptr"], slice(None)), dtype=np.int64)
            if ptr.size and (ptr[0] != 0 or ptr[-1] != self.nnz or np.any(np.diff(ptr) < 0)):
                # a lost chunk of it reads as zeros: the columns after it would read as
                # empty or overlapping, a wrong matrix without an error
                raise CorruptStoreError(
                    f"the sparse store at {self.path!r} is damaged: its column pointers "
                    "(indptr) do not run from 0 to its entry count (a lost or rewritten "
                    "chunk file); convert the matrix again.")
            self._indptr = ptr
        return self._indptr

    def _get(self, arr, sl):
        try:
            return arr[sl]
        except Exception as exc:
            raise CorruptStoreError(
                f"cannot read the sparse store at {self.path!r} ({arr.path}): "
                f"{type(exc).__name__}: {exc}. The store is damaged; convert the matrix "
                "again.") from exc

    def _block(self, b, e0, e1):
        """(rows, values) of the global entries e0:e1 of column block b."""
        base = int(self.indptr[self.block_edges[b]])
        g = self.group[f"blocks/b{b:05d}"]
        sl = slice(e0 - base, e1 - base)
        rows = np.asarray(self._get(g["indices"], sl), dtype=np.int64)
        vals = np.asarray(self._get(g["data"], sl), dtype=np.float64)
        return rows, vals

    def read_cols(self, c0, c1):
        """CSC arrays of columns c0:c1: (indptr from 0, row indices int64, values)."""
        ptr = self.indptr
        rows, vals = [], []
        b0 = int(np.searchsorted(self.block_edges, c0, side="right") - 1)
        b = b0
        while b < len(self.block_edges) - 1 and self.block_edges[b] < c1:
            lo = max(c0, int(self.block_edges[b]))
            hi = min(c1, int(self.block_edges[b + 1]))
            if ptr[hi] > ptr[lo]:
                r, v = self._block(b, int(ptr[lo]), int(ptr[hi]))
                rows.append(r)
                vals.append(v)
            b += 1
        local = ptr[c0:c1 + 1] - ptr[c0]
        rows = np.concatenate(rows) if rows else np.empty(0, dtype=np.int64)
        vals = np.concatenate(vals) if vals else np.empty(0)
        self._check_rows(local, rows)
        if self.scale_log2:
            vals = np.ldexp(vals, -self.scale_log2)
        return local, rows, vals

    def read_columns(self, cols):
        """CSC arrays of the columns ``cols`` (any order, repeats allowed). The entries
        of each column block are read in one selection, so a Zarr chunk holding several
        of the columns is decoded once."""
        cols = np.asarray([int(c) for c in cols], dtype=np.int64)
        ptr_all = self.indptr
        counts = ptr_all[cols + 1] - ptr_all[cols]
        ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        rows = np.empty(int(ptr[-1]), dtype=np.int64)
        vals = np.empty(int(ptr[-1]))
        blk = np.searchsorted(self.block_edges, cols, side="right") - 1
        for b in np.unique(blk):
            which = np.flatnonzero(blk == b)
            # global entries of these columns, and where they go in the output
            src = np.concatenate([np.arange(ptr_all[cols[j]], ptr_all[cols[j] + 1])
                                  for j in which]).astype(np.int64)
            dst = np.concatenate([np.arange(ptr[j], ptr[j + 1]) for j in which])
            if src.size:
                r, v = self._points(int(b), src)
                rows[dst], vals[dst] = r, v
        self._check_rows(ptr, rows)
        if self.scale_log2:
            vals = np.ldexp(vals, -self.scale_log2)
        return ptr, rows, vals

    def _points(self, b, entries):
        """(rows, values) of the given global entries of column block b."""
        base = int(self.indptr[self.block_edges[b]])
        g = self.group[f"blocks/b{b:05d}"]
        idx = entries - base
        lo, hi = int(idx.min()), int(idx.max()) + 1
        if hi - lo <= 4 * idx.size:  # nearly contiguous: one slice
            r = self._get(g["indices"], slice(lo, hi))[idx - lo]
            v = self._get(g["data"], slice(lo, hi))[idx - lo]
        else:
            r = self._get_points(g["indices"], idx)
            v = self._get_points(g["data"], idx)
        return np.asarray(r, dtype=np.int64), np.asarray(v, dtype=np.float64)

    def _get_points(self, arr, idx):
        try:
            return arr.get_coordinate_selection(idx)
        except Exception as exc:
            raise CorruptStoreError(
                f"cannot read the sparse store at {self.path!r} ({arr.path}): "
                f"{type(exc).__name__}: {exc}. The store is damaged; convert the matrix "
                "again.") from exc

    def column_counts(self):
        return np.diff(self.indptr)

    def _check_rows(self, ptr, rows):
        """Row indices in [0, M) and increasing within each column, as the writer left
        them: a rewritten chunk of them (bytes that still decode) sent rows beyond M to
        the kernels, which index without bounds checks (a segmentation fault), or fitted
        a shuffled matrix without a word."""
        if not rows.size:
            return
        up = np.diff(rows) > 0
        # a column's first entry may be below the previous column's last
        starts = np.asarray(ptr[1:-1], dtype=np.int64)
        starts = starts[(starts > 0) & (starts < rows.size)]
        up[starts - 1] = True
        if rows.min() < 0 or rows.max() >= self.shape[0] or not up.all():
            raise CorruptStoreError(
                f"the sparse store at {self.path!r} is damaged: its row indices are out of "
                f"range (0 to {self.shape[0] - 1}) or out of order within a column (a "
                "rewritten chunk file); convert the matrix again.")


class SparseMemoryReader(SparseZarrReader):
    """The reader's interface over a ``scipy.sparse`` matrix held in memory (CSC)."""

    def __init__(self, indptr, indices, data, shape, scale_log2=0):
        self.path = None
        self.storage_options = None
        self.scale_log2 = int(scale_log2)
        self._indptr = np.asarray(indptr, dtype=np.int64)
        self._indices = np.asarray(indices, dtype=np.int64)
        self._data = np.asarray(data, dtype=np.float64)
        self.shape = tuple(int(s) for s in shape)
        self.nnz = int(self._indptr[-1])
        self.block_edges = np.array([0, self.shape[1]], dtype=np.int64)

    def __getstate__(self):
        return dict(self.__dict__)

    def scaled(self, exponent):
        return type(self)(self._indptr, self._indices, self._data, self.shape, exponent)

    @property
    def indptr(self):
        return self._indptr

    def _block(self, b, e0, e1):
        return self._indices[e0:e1], self._data[e0:e1]

    def _points(self, b, entries):
        return self._indices[entries], self._data[entries]


@dataclass(frozen=True)
class SparseSource(MatrixSource):
    """Sparse input (``kind="sparse"``): ``array`` is its reader. Missing means
    unobserved; only ``missing="mask"`` fits it."""

    nnz: int = 0

    @property
    def in_chunks(self):
        """What the engine records as the input's chunks: rows in chunks of
        :data:`C_ROWS` (the row chunks of the dense C an output holds), columns in the
        store's blocks."""
        M = self.shape[0]
        rows = min(M, C_ROWS)
        edges = np.asarray(self.array.block_edges)
        return (tuple([rows] * (M // rows) + ([M % rows] if M % rows else [])),
                tuple(int(w) for w in np.diff(edges)))

    def reader(self):
        return self.array

    def to_dask(self, chunks=None):
        """The observed values as a 1-D dask array (what the range checks of
        engine/scaling.py read): the dense matrix is never built."""
        import dask.array as da

        r = self.array
        parts = [da.from_delayed(_delayed_values(r, int(a), int(b)),
                                 shape=(int(r.indptr[b] - r.indptr[a]),), dtype=np.float64)
                 for a, b in zip(r.block_edges[:-1], r.block_edges[1:], strict=True)]
        return da.concatenate(parts) if parts else da.zeros(0)


def _values(reader, a, b):
    return reader.read_cols(a, b)[2]


def _delayed_values(reader, a, b):
    import dask

    return dask.delayed(_values, pure=True)(reader, a, b)


def _check_shape(shape, where):
    M, N = shape
    if M < 1 or N < 2:
        raise InputShapeError(
            f"{where} has shape {M} x {N}; a matrix with at least 1 row and 2 columns is "
            "needed.")


def open_sparse(path, *, storage_options=None) -> SparseSource:
    """Open a sparse store (refusing one whose conversion did not finish)."""
    spath = local_path(path)
    if not _is_url(spath) and not os.path.exists(spath):
        raise StoreNotFoundError(f"no sparse store at {spath!r}: the path does not exist.")
    # the reader goes to the workers: a relative path named another folder there (a worker
    # started elsewhere), as the dense reader's path, it is made absolute here
    where = spath if _is_url(spath) else os.path.abspath(spath)
    try:
        reader = SparseZarrReader(where, storage_options)
        meta = reader.meta
    except Exception as exc:
        raise CorruptStoreError(
            f"cannot read the sparse store at {spath!r} ({type(exc).__name__}: {exc}); "
            "convert the matrix again.") from exc
    if meta.get("format") != SPARSE_FORMAT or int(meta.get("version", 0)) > SPARSE_VERSION:
        raise CorruptStoreError(
            f"{spath!r} is a sparse store of format {meta.get('format')!r} version "
            f"{meta.get('version')!r}; this dask_bid reads {SPARSE_FORMAT!r} up to version "
            f"{SPARSE_VERSION}. Convert the matrix again with this version.")
    if not meta.get("complete"):
        raise IncompleteStoreError(
            f"the sparse store at {spath!r} was not completely written (its conversion was "
            "interrupted or failed). Convert the matrix again (with overwrite).")
    if not _is_url(spath):
        _refuse_missing_chunks(reader, spath)
    _check_shape(reader.shape, repr(spath))
    return SparseSource(kind="sparse", array=reader, path=where, shape=reader.shape,
                        dtype=np.dtype(np.float64), nnz=reader.nnz)


def _refuse_missing_chunks(reader, spath):
    """Every chunk of a sparse store's entries is written (``write_empty_chunks``): one
    that is not there was lost, and Zarr would read it as zeros (row 0, value 0: a fit
    with MSE 0, or a wrong one, without an error). A local store is listed (no chunk is
    read); its column pointers are checked when read (``SparseZarrReader.indptr``)."""
    from .inputs import missing_chunks

    lost = []
    for b in range(len(reader.block_edges) - 1):
        name = f"blocks/b{b:05d}"
        if name not in reader.group:
            lost.append(f"{name} (the whole block)")
            continue
        for part in ("indices", "data"):
            arr = reader.group[f"{name}/{part}"]
            lost += [f"{name}/{part}/{k}" for k in (missing_chunks(arr) or [])]
    if lost:
        raise CorruptStoreError(
            f"the sparse store at {spath!r} is damaged: {len(lost)} chunk file(s) are missing "
            f"({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''}), which would read as "
            "zeros; convert the matrix again.")


def csc_parts(X):
    """(indptr, indices, data, shape) of a scipy.sparse matrix or array as canonical CSC:
    NaN entries are dropped (unobserved), duplicates refused."""
    import scipy.sparse as sp

    from .._errors import NonFiniteInputError

    shape = tuple(int(s) for s in X.shape)
    if len(shape) != 2:
        raise InputShapeError(f"the sparse input has shape {shape}; a matrix is needed.")
    if X.dtype.kind not in "fiub":
        raise InputShapeError(f"the sparse input has dtype {X.dtype}; real numbers are "
                              "needed.")
    coo = sp.coo_matrix(X)
    rows = np.asarray(coo.row, dtype=np.int64)
    cols = np.asarray(coo.col, dtype=np.int64)
    vals = np.asarray(coo.data, dtype=np.float64)
    if np.isinf(vals).any():
        k = int(np.flatnonzero(np.isinf(vals))[0])
        raise NonFiniteInputError(
            f"the sparse input holds an infinite value at (row {rows[k]}, column {cols[k]}); "
            "replace it (NaN marks an unobserved entry, infinity is refused).")
    keep = ~np.isnan(vals)
    rows, cols, vals = rows[keep], cols[keep], vals[keep]
    order = np.lexsort((rows, cols))
    rows, cols, vals = rows[order], cols[order], vals[order]
    dup = np.flatnonzero((rows[1:] == rows[:-1]) & (cols[1:] == cols[:-1]))
    if dup.size:
        k = int(dup[0])
        raise InputShapeError(
            f"the sparse input holds entry (row {rows[k]}, column {cols[k]}) more than once; "
            "each (row, column) may be given once: combine the duplicates first (e.g. "
            "X.sum_duplicates() adds them).")
    indptr = np.zeros(shape[1] + 1, dtype=np.int64)
    np.cumsum(np.bincount(cols, minlength=shape[1]), out=indptr[1:])
    return indptr, rows, vals, shape


def sparse_source(X) -> SparseSource:
    """A ``scipy.sparse`` matrix (any format) as an in-memory sparse input: its stored
    entries are the observed ones (a stored NaN is dropped: unobserved)."""
    indptr, rows, vals, shape = csc_parts(X)
    _check_shape(shape, "the sparse input")
    reader = SparseMemoryReader(indptr, rows, vals, shape)
    return SparseSource(kind="sparse", array=reader, path=None, shape=shape,
                        dtype=np.dtype(np.float64), nnz=int(indptr[-1]))


def default_block_edges(counts, target=4 * ENTRIES_PER_CHUNK, max_width=4096):
    """Column blocks of at most ``target`` entries (a wider single column stays one
    block) and at most ``max_width`` columns."""
    edges, acc, width = [0], 0, 0
    for n, c in enumerate(np.asarray(counts, dtype=np.int64)):
        c = int(c)
        if width and (acc + c > target or width >= max_width):
            edges.append(n)
            acc, width = 0, 0
        acc += c
        width += 1
    edges.append(len(counts))
    return [int(e) for e in edges]


def create_sparse_group(path, shape, indptr, block_edges, *, overwrite=False,
                        source=None, extra=None):
    """Create the group (marked incomplete) with ``indptr`` written; returns it."""
    import zarr

    M, N = (int(s) for s in shape)
    g = zarr.open_group(os.fspath(path), mode="w" if overwrite else "w-")
    meta = {"format": SPARSE_FORMAT, "version": SPARSE_VERSION, "shape": [M, N],
            "nnz": int(indptr[-1]), "block_edges": [int(e) for e in block_edges],
            "index_dtype": "int32" if M < 2**31 else "int64", "complete": False}
    if source is not None:
        meta["source"] = source
    if extra:
        meta.update(extra)
    g.attrs[SPARSE_ATTR] = meta
    # every chunk written, zeros included (leading empty columns), so that a missing one
    # is a lost one
    ip = g.create_array("indptr", shape=(N + 1,), dtype=np.int64,
                        chunks=(min(N + 1, 2**20),), config={"write_empty_chunks": True})
    ip[:] = np.asarray(indptr, dtype=np.int64)
    g.require_group("blocks")
    return g


def write_block(g, b, rows, vals):
    """Write column block ``b``'s row indices and values (already in CSC order)."""
    idt = np.int32 if g.attrs[SPARSE_ATTR]["index_dtype"] == "int32" else np.int64
    n = int(rows.size)
    chunk = max(1, min(n, ENTRIES_PER_CHUNK))
    bg = g.require_group(f"blocks/b{b:05d}")
    ia = bg.create_array("indices", shape=(n,), dtype=idt, chunks=(chunk,),
                         config={"write_empty_chunks": True})
    da_ = bg.create_array("data", shape=(n,), dtype=np.float64, chunks=(chunk,),
                          config={"write_empty_chunks": True})
    if n:
        ia[:] = rows.astype(idt)
        da_[:] = vals


def finish_group(g):
    meta = dict(g.attrs[SPARSE_ATTR])
    meta["complete"] = True
    g.attrs[SPARSE_ATTR] = meta


def write_sparse_blocks(X, path, *, overwrite=False, progress=None, block_edges=None):
    """Write a ``scipy.sparse`` matrix (any format) as a sparse store at ``path``.

    ``progress(n)`` is called with the entries written after each block. Returns the
    :class:`SparseSource` of the written store.
    """
    indptr, rows, vals, shape = csc_parts(X)
    edges = default_block_edges(np.diff(indptr)) if block_edges is None else list(block_edges)
    # the stored NaN it dropped, counted as a triplet file's are (docs/sparse.md)
    n_nan = int(np.count_nonzero(np.isnan(np.asarray(getattr(X, "data", []), dtype=float))))
    g = create_sparse_group(path, shape, indptr, edges, overwrite=overwrite,
                            source={"kind": "scipy.sparse", "format": type(X).__name__},
                            extra={"n_nan_dropped": n_nan})
    for b in range(len(edges) - 1):
        e0, e1 = int(indptr[edges[b]]), int(indptr[edges[b + 1]])
        write_block(g, b, rows[e0:e1], vals[e0:e1])
        if progress is not None:
            progress(e1 - e0)
    finish_group(g)
    return open_sparse(path)


def as_sparse_source(A, *, storage_options=None):
    """A :class:`SparseSource` for a ``scipy.sparse`` matrix or the path of a sparse
    store; None for anything else (metadata only)."""
    if type(A).__module__.startswith("scipy.sparse"):
        return sparse_source(A)
    if isinstance(A, (str, os.PathLike)):
        spath = local_path(A)
        if is_sparse_store(spath, storage_options):
            return open_sparse(spath, storage_options=storage_options)
    return None
