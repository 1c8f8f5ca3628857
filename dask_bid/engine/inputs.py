"""Turn what a user passes as "A" into something the engine can read.

Accepted: a numpy array, a dask array, a ``zarr.Array``, or a path / URL to a
Zarr array; and sparse input (a ``scipy.sparse`` matrix or a sparse store,
engine/sparse_store.py). Nothing here reads the data beyond metadata: the checks that need
values (finiteness) are done by the callers in one streaming pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import (
    CorruptStoreError,
    IncompleteStoreError,
    InputDTypeError,
    InputShapeError,
    NotAnArrayError,
    StoreNotFoundError,
)
from .._files import local_path, other_file_advice

__all__ = [
    "MatrixSource",
    "as_matrix_source",
    "open_zarr_array",
    "check_float_dtype",
    "GuardedZarrArray",
    "zarr_array_location",
    "check_written",
    "missing_chunks",
    "check_chunks",
    "NaNMarkedArray",
    "MaskedZarrSource",
    "with_mask",
]


@dataclass(frozen=True)
class MatrixSource:
    """A matrix and where it came from.

    Attributes
    ----------
    kind : {"numpy", "dask", "zarr"}
    array : numpy.ndarray, dask.array.Array or zarr.Array
    path : str or None
        Filesystem path or URL of the store for Zarr input.
    shape, dtype : the matrix's shape and (original) dtype.
    """

    kind: str
    array: Any
    path: str | None
    shape: tuple[int, int]
    dtype: np.dtype

    def reader(self):
        """What chunked reads should go through.

        For Zarr input a :class:`GuardedZarrArray` (a failed chunk read raises
        :class:`~dask_bid.CorruptStoreError` naming the store and the chunk); the array
        itself otherwise.
        """
        if self.kind == "zarr":
            return GuardedZarrArray(self.array, self.path)
        return self.array

    def to_dask(self, chunks=None):
        """A dask array view (lazy for Zarr and dask input), converted to float64."""
        import dask.array as da

        if self.kind == "dask":
            x = self.array
        elif self.kind == "zarr":
            x = da.from_array(self.reader(),
                              chunks=self.array.chunks if chunks is None else chunks,
                              lock=False, asarray=True, name=False)
        else:
            x = da.from_array(self.array, chunks="auto" if chunks is None else chunks)
        if chunks is not None and self.kind == "dask":
            x = x.rechunk(chunks)
        if x.dtype != np.float64:
            x = x.astype(np.float64)
        return x


def check_float_dtype(dtype) -> np.dtype:
    """Return the float dtype computations use, or raise ``InputDTypeError``.

    Floats are kept (float32 is upcast per block, never stored twice); integers and
    booleans are converted to float64; complex, object, string and datetime dtypes
    are refused.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return dtype
    if dtype.kind in "iub":
        return np.dtype(np.float64)
    raise InputDTypeError(
        f"input dtype {dtype} is not supported: dask_bid needs real numbers "
        f"(float, integer or boolean). {_DTYPE_FIX.get(dtype.kind, _DTYPE_FIX['O'])}"
    )


#: how to get numbers from what was passed, by dtype kind (the end of the refusal)
_DTYPE_FIX = {
    "c": "Convert the matrix, e.g. `A.real.astype(float)` for complex data that is really "
         "real.",
    "O": "If the objects are numbers, convert them: `A.astype(float)`; a pandas DataFrame "
         "with a label column: make it the index (`df.set_index(...)`).",
    "U": "It holds text: parse the numbers first (`A.astype(float)` where every entry "
         "is a number); a text file is read by `dask-bid fit FILE`.",
    "T": "It holds text: parse the numbers first (`A.astype(float)` where every entry "
         "is a number); a text file is read by `dask-bid fit FILE`.",  # numpy's StringDType
    "S": "It holds bytes: parse the numbers first (`A.astype(float)` where every entry "
         "is a number).",
    "M": "Dates and times are not numbers: convert them (e.g. to days since a reference "
         "date) if they are meant as data.",
    "m": "Durations are not numbers: convert them (e.g. `A / np.timedelta64(1, 's')`).",
    "V": "A structured (record) array: make it a plain matrix first, "
         "`numpy.lib.recfunctions.structured_to_unstructured(A)`.",
}


def _frame_of_numbers(A) -> bool:
    """Whether ``A`` is a DataFrame; one with columns that are not numbers (a label
    column, typically) is refused, naming them.

    ``np.asarray`` would make one object matrix of it, refused for its dtype without a
    word on which column is at fault or what to do. Duck-typed: pandas is not imported.
    """
    cols, dtypes = getattr(A, "columns", None), getattr(A, "dtypes", None)
    if cols is None or dtypes is None or not hasattr(A, "select_dtypes") \
            or not hasattr(A, "to_numpy"):
        return False
    bad = [c for c, dt in zip(cols, dtypes, strict=False)
           if getattr(dt, "kind", "O") not in "iufb"]
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise InputDTypeError(
            f"the DataFrame's columns {bad[:5]}{more} do not hold numbers (dtype "
            f"{dict(zip(cols, dtypes, strict=False))[bad[0]]}): dask_bid fits a matrix of "
            f"numbers. Make a label column the index (df.set_index({bad[0]!r})) or leave "
            "such columns out (df.select_dtypes('number')).")
    return True


def _is_url(s: str) -> bool:
    return "://" in s


class GuardedZarrArray:
    """Read-only view of a ``zarr.Array`` whose failed reads say which store is damaged.

    Zarr reports an undecodable chunk as whatever its codec raises (``RuntimeError``
    from zstd, ``ValueError`` for a wrong size, ``OSError`` for an unreadable file). Reads
    through this view turn any of them into :class:`~dask_bid.CorruptStoreError` naming
    the store path and the chunk keys, so that a fit dies with a message saying which file
    to restore. Picklable: dask ships it to the workers, which do the reads.
    """

    def __init__(self, array, path=None):
        self._array = array
        self._path = path
        self._seen = False

    def __getstate__(self):
        # unpickled in a worker: it checks again there that it sees the store
        return {**self.__dict__, "_seen": False}

    def _check_visible(self):
        """A local store that this process cannot see (a worker on another machine, or
        in another folder for a relative path) reads as missing chunks, i.e. zeros: a
        wrong fit without an error. Checked once per process, on the first read."""
        store = getattr(self._array, "store", None)
        root = getattr(store, "root", None)
        if root is not None and type(store).__name__ == "LocalStore":
            sub = [p for p in (getattr(self._array, "path", "") or "").split("/") if p]
            meta = os.path.join(os.fspath(root), *sub, "zarr.json")
            if not os.path.isfile(meta) and not os.path.isfile(
                    os.path.join(os.fspath(root), *sub, ".zarray")):
                import socket

                raise StoreNotFoundError(
                    f"the input store {self._path or os.fspath(root)!r} is not visible from "
                    f"the process that reads it (pid {os.getpid()} on "
                    f"{socket.gethostname()!r}, working folder {os.getcwd()!r}; a Dask worker "
                    "on a cluster): every Dask worker must see the client's "
                    "local paths (a shared file system), or put the store on object "
                    "storage.")
        self._seen = True

    @property
    def shape(self):
        return self._array.shape

    @property
    def dtype(self):
        return self._array.dtype

    @property
    def ndim(self):
        return self._array.ndim

    @property
    def chunks(self):
        return self._array.chunks

    def __len__(self):
        return self.shape[0]

    def _bad_chunks(self, key):
        """The chunk files a failed read of ``key`` touched, the undecodable ones if
        they can be told apart (by reading each alone: only on the error path). A
        sharded array's files are its shards, named by the shard grid (the inner chunks'
        keys named an intact shard, or none)."""
        try:
            if not isinstance(key, tuple):
                key = (key,)
            key = key + (slice(None),) * (self.ndim - len(key))
            shards = getattr(self._array, "shards", None)
            grid = shards or self.chunks
            ranges = []
            for k, n, c in zip(key, self.shape, grid, strict=True):
                if isinstance(k, slice):
                    start, stop, _ = k.indices(n)
                else:
                    start, stop = int(k), int(k) + 1
                ranges.append(range(start // c, max(start // c + 1, -(-stop // c))))
            coords = [(i, j) for i in ranges[0] for j in ranges[1]]
            bad = []
            for i, j in coords:
                (rc, cc) = grid
                try:
                    self._array[i * rc:(i + 1) * rc, j * cc:(j + 1) * cc]
                except Exception:
                    bad.append((i, j))
            enc = self._array.metadata.encode_chunk_key
            keys = [enc(c) for c in (bad or coords)]
        except Exception:
            return ""
        shown = ", ".join(keys[:4]) + (f" (+{len(keys) - 4} more)" if len(keys) > 4 else "")
        return f", {'shard' if shards else 'chunk'} {shown}"

    def __getitem__(self, key):
        if not self._seen:
            self._check_visible()
        try:
            return self._array[key]
        except (CorruptStoreError, MemoryError):
            raise
        except Exception as exc:
            from .remote import missing_credentials, unreachable_endpoint

            if missing_credentials(exc) or unreachable_endpoint(exc) or isinstance(
                    exc, PermissionError):
                # not the store's fault: this process (a Dask worker, most often) cannot
                # read it; "damaged, rewrite it" would have the user rewrite good data
                import socket

                from .._errors import StoreAccessError

                raise StoreAccessError(
                    f"cannot read the Zarr array at {self._path!r} in the process that "
                    f"read it (pid {os.getpid()} on {socket.gethostname()!r}, a Dask worker "
                    f"on a cluster): {type(exc).__name__}: "
                    f"{' '.join(str(exc).split())[:200]}. Every Dask worker needs the "
                    "credentials and the endpoint the client has (the AWS_* environment "
                    "variables on the workers, or storage_options=).") from exc
            unit = "shard" if getattr(self._array, "shards", None) else "chunk"
            raise CorruptStoreError(
                f"cannot read the Zarr array at {self._path!r}{self._bad_chunks(key)}: "
                f"{type(exc).__name__}: {exc}. The store is damaged or unreadable; restore "
                f"that {unit} from a copy, or rewrite the array (e.g. with "
                "dask_bid.engine.to_zarr)."
            ) from exc

    def __array__(self, dtype=None, copy=None):
        x = self[...]
        return x if dtype is None else x.astype(dtype)

    def __repr__(self):
        return f"GuardedZarrArray({self._path!r}, shape={self.shape}, dtype={self.dtype})"


def zarr_array_location(array) -> str | None:
    """Where a ``zarr.Array`` lives: a filesystem path for local stores, else a URL.

    A local path (not ``file://...``) so that the engine's "output overlaps the input"
    check compares like with like.
    """
    store = getattr(array, "store", None)
    root = getattr(store, "root", None)
    sub = [p for p in (getattr(array, "path", "") or "").split("/") if p]
    if root is not None and type(store).__name__ == "LocalStore":
        return os.path.join(os.fspath(root), *sub)
    fs = getattr(store, "fs", None)
    if fs is not None and isinstance(getattr(store, "path", None), str):
        # an FsspecStore (dask's from_zarr opens even a local path through fsspec): the
        # str() of its store_path names the store object, not where it is
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        if "file" in protocols or "local" in protocols:
            return os.path.join(store.path, *sub)
        return "/".join([fs.unstrip_protocol(store.path).rstrip("/"), *sub])
    return str(array.store_path) if hasattr(array, "store_path") else None


#: Files a user may have meant when giving their folder (the command line converts them)
_MATRIX_SUFFIXES = (".npy", ".csv", ".tsv", ".txt", ".zarr", ".parquet")


def no_store_in_folder(spath) -> StoreNotFoundError:
    """The refusal of a local directory that holds no Zarr metadata, naming what it holds
    (raised by :func:`open_zarr_array`, and by ``dask-bid fit`` before its output checks)."""
    return StoreNotFoundError(f"no Zarr store at {spath!r}: the directory holds no Zarr "
                              f"metadata (zarr.json or .zarray){folder_hint(spath)}.")


def folder_hint(path) -> str:
    """The end of a refusal of a directory that is not a Zarr store: the matrix files and
    Zarr stores inside it, which the user may have meant."""
    try:
        inside = sorted(n for n in os.listdir(path)
                        if os.path.splitext(n)[1].lower() in _MATRIX_SUFFIXES)
    except OSError:
        return ""
    if not inside:
        return "; pass the path of a Zarr array"
    shown = ", ".join(repr(os.path.join(path, n)) for n in inside[:3])
    more = f" (+{len(inside) - 3} more)" if len(inside) > 3 else ""
    return f"; it holds {shown}{more}: pass one of them"


def open_zarr_array(path, *, storage_options=None):
    """Open an existing Zarr array read-only, with errors that say what is wrong."""
    import zarr

    spath = local_path(path)
    if not _is_url(spath) and not os.path.exists(spath):
        raise StoreNotFoundError(
            f"no Zarr store at {spath!r}: the path does not exist. Check the path, or write "
            "the matrix first, e.g. with dask_bid.engine.to_zarr(A, path).")
    if not _is_url(spath) and os.path.isfile(spath):
        raise StoreNotFoundError(f"{spath!r} is a file, not a Zarr store: {_file_fix(spath)}")
    if _is_url(spath):  # a missing bucket or refused credentials: said as such
        from .remote import check_bucket

        check_bucket(spath, storage_options)
    try:
        # a local store by its absolute path: the array travels to the Dask workers, which
        # resolved a relative one against their own working folder (and read zeros)
        node = zarr.open(spath if _is_url(spath) else os.path.abspath(spath), mode="r",
                         storage_options=storage_options if _is_url(spath) else None)
    except PermissionError as exc:
        from .remote import access_error

        raise (access_error(spath, exc) or CorruptStoreError(
            f"cannot read {spath!r}: permission denied ({exc}).")) from exc
    except FileNotFoundError as exc:
        if _is_url(spath):
            raise StoreNotFoundError(
                f"no Zarr store at {spath!r}: nothing there holds Zarr metadata (zarr.json or "
                ".zarray). Check the URL, or write the matrix first, e.g. with "
                "dask_bid.engine.to_zarr(A, url, storage_options=...).") from exc
        raise no_store_in_folder(spath) from exc
    except Exception as exc:  # zarr raises several types for unreadable metadata
        raise CorruptStoreError(
            f"cannot read Zarr metadata at {spath!r} ({type(exc).__name__}: {exc}). The "
            "metadata (zarr.json or .zarray) is damaged or not Zarr: restore it from a copy, "
            "or rewrite the array (e.g. with dask_bid.engine.to_zarr)."
        ) from exc
    if not isinstance(node, zarr.Array):
        names = sorted(node.array_keys()) if hasattr(node, "array_keys") else []
        if not names and hasattr(node, "members"):
            # arrays deeper down ("g.zarr/sub/matrix"): said "it contains no array"
            try:
                names = sorted(k for k, m in node.members(max_depth=None)
                               if isinstance(m, zarr.Array))[:10]
            except Exception:
                names = []
        hint = (f" It contains the arrays {names}: pass one of them, e.g. "
                f"{spath.rstrip('/') + '/' + names[0]!r}." if names else
                " It contains no array: pass the path of a Zarr array.")
        raise NotAnArrayError(f"{spath!r} is a Zarr group, not an array.{hint}")
    return node


def _file_fix(path) -> str:
    """How to fit a file given where a Zarr array is read: by its suffix."""
    suffix = os.path.splitext(path)[1].lower()
    if suffix == ".npy":
        return ("pass the array, numpy.load(path, mmap_mode='r') (read on demand), or write "
                "it to Zarr once, dask_bid.engine.to_zarr(numpy.load(path, mmap_mode='r'), "
                "'A.zarr') or `dask-bid convert A.npy --out A.zarr`; `dask-bid fit` "
                "converts it by itself.")
    if suffix in (".csv", ".txt", ".tsv"):
        return ("read it and pass the array (numpy.loadtxt; pandas.read_csv(path, "
                "index_col=0) where a column holds row labels), or convert it to Zarr once "
                "with dask_bid.interface.cli.convert_to_zarr(path, 'A.zarr') or `dask-bid "
                "convert FILE --format dense --out A.zarr`, which find a header and row "
                "labels as `dask-bid fit` does.")
    kind = other_file_advice(path)
    if kind is not None:
        return f"{kind}; or pass the path of a Zarr array (a directory)."
    return ("pass the path of a Zarr array (a directory); `dask-bid fit` also reads .npy, "
            ".csv, .txt and .tsv matrices, and files of (row, column, value) triplets with "
            "--format triplets (docs/sparse.md).")


def check_written(array, path=None):
    """Refuse an array whose writer (``to_zarr``, the CLI's conversion) did not finish.

    Such an array carries ``attrs["dask_bid_array"] = {"complete": False}``: its chunks
    not yet written would read as the fill value, a matrix of zeros.
    """
    try:
        info = array.attrs.get("dask_bid_array")
    except Exception:
        return
    if isinstance(info, dict) and info.get("complete") is False:
        where = path or zarr_array_location(array)
        raise IncompleteStoreError(
            f"the Zarr array at {where!r} was not completely written (its conversion or "
            "to_zarr was interrupted or failed); its unwritten chunks would read as zeros. "
            "Write it again (a conversion: `dask-bid convert FILE --out STORE --overwrite`; "
            "from Python: dask_bid.engine.to_zarr(A, path, overwrite=True)).")


def missing_chunks(array) -> list[str] | None:
    """Keys of the chunks of a ``zarr.Array`` that have no object in the store.

    Lists the store (metadata only, no chunk is read). Returns None when the store cannot
    be listed.
    """
    import itertools

    try:
        from zarr.core.sync import sync

        prefix = array.store_path.path
        store = array.store_path.store

        async def _list():
            return [k async for k in store.list_prefix(prefix)]

        keys = sync(_list())
        cut = len(prefix) + 1 if prefix else 0
        present = {k[cut:] for k in keys}
        enc = array.metadata.encode_chunk_key
        # a sharded array stores one object per shard, named like a chunk of the shard grid
        grid = getattr(array, "shards", None) or array.chunks
        shape = [-(-n // c) for n, c in zip(array.shape, grid, strict=True)]
        return [enc(coords) for coords in itertools.product(*(range(n) for n in shape))
                if enc(coords) not in present]
    except Exception:
        return None


#: Tasks of a dask graph looked into for inlined Zarr arrays (~0.4 s for 20,000 here;
#: beyond, only the ``original-`` layers are)
_SCAN_TASKS = 20_000


def _zarr_sources(x) -> list:
    """The Zarr arrays a dask array reads (``da.from_zarr``, ``da.from_array`` of a Zarr
    array). dask keeps each in a layer named ``original-...``; with ``inline_array=True``,
    or after ``dask.optimize``, it sits in the tasks themselves, which are then looked
    into (graphs of up to :data:`_SCAN_TASKS` tasks)."""
    try:
        import zarr

        graph = x.__dask_graph__()
        found = {id(v): v for name, layer in graph.layers.items()
                 if name.startswith("original-") for v in layer.values()
                 if isinstance(v, zarr.Array)}
        if not found and len(graph) <= _SCAN_TASKS:
            for task in graph.values():
                for v in _zarr_in(task, zarr.Array):
                    found[id(v)] = v
        return list(found.values())
    except Exception:
        return []


def _zarr_in(node, cls, depth=0):
    """The ``cls`` instances inside a task (its arguments, nested a few levels)."""
    if isinstance(node, cls):
        yield node
        return
    if depth > 6:
        return
    args = getattr(node, "args", None)  # a dask Task
    if isinstance(args, (tuple, list)):
        for a in (*args, *getattr(node, "kwargs", {}).values()):
            yield from _zarr_in(a, cls, depth + 1)
    elif hasattr(node, "value") and type(node).__name__ == "DataNode":
        yield from _zarr_in(node.value, cls, depth + 1)
    elif isinstance(node, (tuple, list)):
        for a in node:
            yield from _zarr_in(a, cls, depth + 1)


def check_chunks(src, *, allow_missing=False, behind=False):
    """Refuse Zarr input with chunks missing, unless ``allow_missing``.

    Zarr reads a missing chunk as the fill value without a word, so a lost chunk file
    would silently become zeros. Zarr itself omits chunks equal to the fill value by
    default, so a store written elsewhere may lack chunks legitimately: the user says so
    with ``allow_missing_chunks=True``. (:func:`~dask_bid.engine.to_zarr` and the CLI's
    conversion write every chunk.)
    """
    if src.kind == "dask" and not allow_missing:
        for z in _zarr_sources(src.array):  # da.from_zarr(...): the same lost chunks
            check_chunks(MatrixSource(kind="zarr", array=z, path=zarr_array_location(z),
                                      shape=tuple(z.shape), dtype=np.dtype(z.dtype)),
                         allow_missing=False, behind=True)
        return
    if src.kind != "zarr":
        return
    check_written(src.array, src.path)
    if allow_missing:
        return
    missing = missing_chunks(src.array)
    if missing:
        total = 1
        grid = getattr(src.array, "shards", None) or src.array.chunks
        for n, c in zip(src.array.shape, grid, strict=True):
            total *= -(-n // c)
        shown = ", ".join(missing[:4]) + (f" (+{len(missing) - 4} more)"
                                           if len(missing) > 4 else "")
        fill = src.array.fill_value
        fill = fill.item() if hasattr(fill, "item") else fill
        raise IncompleteStoreError(
            f"the Zarr array at {src.path!r}{' (read by the dask array)' if behind else ''} "
            f"has {len(missing)} of {total} chunks missing "
            f"({shown}); Zarr would read them as the fill value {fill!r}. Restore the "
            "chunk files, or pass allow_missing_chunks=True if they are meant to be all fill "
            "value (Zarr omits such chunks unless written with write_empty_chunks=True; "
            "a keyword of BayesianID.fit and bayesian_id, a parameter of RandomizedID).")


def as_matrix_source(A, *, storage_options=None) -> MatrixSource:
    """Classify ``A`` and check its shape and dtype (metadata only).

    Raises
    ------
    InputShapeError
        Not 2-D, empty, or fewer than 2 columns.
    InputDTypeError
        Complex, object, string or other non-real dtype.
    StoreNotFoundError, NotAnArrayError, CorruptStoreError
        For paths that do not hold a readable Zarr array.
    """
    import zarr

    from .sparse_store import as_sparse_source

    # a scipy.sparse matrix or a sparse store (engine/sparse_store.py): kind "sparse"
    sparse = as_sparse_source(A, storage_options=storage_options)
    if sparse is not None:
        return sparse
    path = None
    if isinstance(A, (str, os.PathLike)):
        path = os.fspath(A)
        A = open_zarr_array(path, storage_options=storage_options)
    if isinstance(A, (zarr.Group, zarr.abc.store.Store)):
        # a store object or a group read as a 0-D array ("got 0-D shape ()")
        what = "Zarr group" if isinstance(A, zarr.Group) else "Zarr store object"
        raise NotAnArrayError(
            f"A is a {what} ({type(A).__name__}), not an array: pass the array, e.g. "
            "zarr.open_array(store, path=...) or group['name'], or its path.")
    if isinstance(A, zarr.Array):
        kind = "zarr"
        # a local store is named by its filesystem path whatever the user passed
        # (relative path, file:// URL, zarr.Array): the output-overlap check needs it
        local = zarr_array_location(A)
        if path is None or (local is not None and not _is_url(local)):
            path = local
    elif type(A).__module__.startswith("dask.array") or (
        hasattr(A, "dask") and hasattr(A, "chunks") and hasattr(A, "compute")
    ):
        kind = "dask"
    else:
        kind = "numpy"
        if isinstance(A, np.ma.MaskedArray):
            # np.asarray would drop the mask and fit the values hidden under it: a masked
            # entry reads as NaN instead, the missing-value marker (missing="mask")
            if np.ma.getmask(A) is np.ma.nomask or not np.ma.getmask(A).any():
                A = np.ma.getdata(A)
            else:
                A = (A if A.dtype.kind == "f" else A.astype(np.float64)).filled(np.nan)
        elif not isinstance(A, np.ndarray):
            if _frame_of_numbers(A):
                # pandas' nullable and Arrow dtypes: pd.NA becomes NaN (the missing-value
                # marker), where np.asarray would give an object matrix
                A = A.to_numpy(dtype=np.float64, na_value=np.nan)
            try:
                A = np.asarray(A)
            except Exception as exc:
                raise InputDTypeError(f"cannot convert input of type {type(A).__name__} "
                                      f"to an array: {exc}") from exc
    if kind == "dask" and any(np.isnan(s) for s in A.shape):
        raise InputShapeError(
            f"A is a dask array of unknown shape {A.shape} (after boolean indexing, or from "
            "a dataframe): call A.compute_chunk_sizes() first (for a dask dataframe, "
            "df.to_dask_array(lengths=True)).")
    shape = tuple(int(s) for s in A.shape)
    if len(shape) != 2:
        raise InputShapeError(
            f"A must be a 2-D matrix (rows x columns), got {len(shape)}-D shape {shape}. "
            "Reshape your data, e.g. `A.reshape(n_rows, -1)`."
        )
    # worded like scikit-learn's check_array (its estimator checks match these phrases)
    if shape[0] == 0:
        raise InputShapeError(f"A is empty: found array with 0 sample(s) (shape={shape}) while "
                              "a minimum of 1 is required; pass a matrix with rows.")
    if shape[1] == 0:
        raise InputShapeError(f"A is empty: found array with 0 feature(s) (shape={shape}) while "
                              "a minimum of 2 is required; pass a matrix with columns.")
    if shape[1] < 2:
        raise InputShapeError(
            f"A has 1 column: found array with 1 feature(s) (shape={shape}) while a minimum of "
            "2 is required; an interpolative decomposition needs at least 2 columns."
        )
    check_float_dtype(A.dtype)
    if kind == "zarr":
        check_written(A, path)
    return MatrixSource(kind=kind, array=A, path=path, shape=shape, dtype=np.dtype(A.dtype))


# --------------------------------------------------------------------------- explicit mask
class NaNMarkedArray:
    """Read-only view of a values array and a boolean mask of its shape (True: observed)
    that reads as float64 with NaN at every unobserved entry.

    ``missing="mask"`` with an explicit mask (``mask=``) thus reads exactly like input
    whose missing entries hold NaN: every task of the engine reads both stores for its
    tile. An entry whose value is NaN is missing whatever the mask says. Picklable: dask
    ships it to the workers, which do the reads.
    """

    def __init__(self, values, mask):
        self._values = values
        self._mask = mask

    @property
    def shape(self):
        return self._values.shape

    @property
    def dtype(self):
        return np.dtype(np.float64)

    @property
    def ndim(self):
        return 2

    @property
    def chunks(self):
        return self._values.chunks

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        v = np.asarray(self._values[key], dtype=np.float64)
        m = np.asarray(self._mask[key], dtype=bool)
        return np.where(m, v, np.nan)

    def __array__(self, dtype=None, copy=None):
        x = self[...]
        return x if dtype is None else x.astype(dtype)

    def __repr__(self):
        return f"NaNMarkedArray(shape={self.shape})"


@dataclass(frozen=True)
class MaskedZarrSource(MatrixSource):
    """A Zarr input with an explicit Zarr mask: ``array`` is the values' array (its
    metadata, chunks and path are the input's), and every read goes through
    :class:`NaNMarkedArray`."""

    mask: Any = None
    mask_path: str | None = None

    def reader(self):
        return NaNMarkedArray(GuardedZarrArray(self.array, self.path),
                              GuardedZarrArray(self.mask, self.mask_path))


def checked_mask(mask, shape, *, storage_options=None, allow_missing_chunks=False,
                 nan_hint=True):
    """``mask`` (True: observed) checked against a matrix of ``shape``: a Zarr array (or
    its path / URL, opened), a dask array or anything else as a numpy array; returns it
    with the Zarr mask's location (None for the others). ``nan_hint``: the dtype refusal
    also offers NaN in A instead (the masked fit reads it so; a score does not).

    Raises
    ------
    InputShapeError
        The mask's shape is not ``shape``.
    InputDTypeError
        The mask is not boolean (a mask of 0.5 or of counts read every entry as observed).
    IncompleteStoreError
        A Zarr mask with chunk files missing (unless ``allow_missing_chunks``: they read
        as its fill value, False, without a word).
    """
    import zarr

    mpath = None
    if isinstance(mask, (str, os.PathLike)):
        mpath = os.fspath(mask)
        mask = open_zarr_array(mpath, storage_options=storage_options)
    is_zarr = isinstance(mask, zarr.Array)
    is_dask = not is_zarr and hasattr(mask, "dask") and hasattr(mask, "chunks")
    if not (is_zarr or is_dask):
        mask = np.asarray(mask)
    got = tuple(int(s) for s in mask.shape)
    if got != tuple(shape):
        raise InputShapeError(
            f"mask has shape {got} and A {tuple(shape)}: the mask needs one entry per "
            "entry of A (True: observed, False: missing).")
    if np.dtype(mask.dtype) != np.bool_:
        raise InputDTypeError(
            f"mask must be boolean (True: observed, False: missing), got dtype {mask.dtype}. "
            "Pass e.g. mask.astype(bool)"
            + (", or write NaN into A's missing entries instead." if nan_hint else "."))
    if is_zarr:
        mpath = mpath if mpath is not None else zarr_array_location(mask)
        check_chunks(MatrixSource(kind="zarr", array=mask, path=mpath, shape=got,
                                  dtype=np.dtype(np.bool_)), allow_missing=allow_missing_chunks)
    return mask, mpath


def with_mask(src, mask, *, storage_options=None, allow_missing_chunks=False):
    """``src`` read with NaN wherever the boolean ``mask`` is False (``missing="mask"``
    with ``mask=``): numpy input at once, dask input lazily, a Zarr input with a Zarr
    mask (a ``zarr.Array`` or a path / URL) through :class:`NaNMarkedArray` in every task.

    Raises
    ------
    InputShapeError
        The mask's shape is not A's.
    InputDTypeError
        The mask is not boolean.
    IncompleteStoreError
        A Zarr mask with chunk files missing (unless ``allow_missing_chunks``: they read
        as its fill value).
    """
    import zarr

    mask, mpath = checked_mask(mask, src.shape, storage_options=storage_options,
                               allow_missing_chunks=allow_missing_chunks)
    is_zarr = isinstance(mask, zarr.Array)
    is_dask = not is_zarr and not isinstance(mask, np.ndarray)
    if src.kind == "zarr" and is_zarr:
        return MaskedZarrSource(kind="zarr", array=src.array, path=src.path, shape=src.shape,
                                dtype=src.dtype, mask=mask, mask_path=mpath)
    if src.kind == "numpy" and not (is_zarr or is_dask):
        X = np.where(mask, np.asarray(src.array, dtype=np.float64), np.nan)
        return MatrixSource(kind="numpy", array=X, path=None, shape=src.shape,
                            dtype=np.dtype(np.float64))
    import dask.array as da

    x = src.to_dask()
    m = (da.from_array(GuardedZarrArray(mask, mpath), chunks=mask.chunks, lock=False,
                       asarray=True) if is_zarr else da.asarray(mask)).rechunk(x.chunks)
    return MatrixSource(kind="dask", array=da.where(m, x, np.nan), path=None, shape=src.shape,
                        dtype=np.dtype(np.float64))
