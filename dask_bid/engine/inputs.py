"""Turn what a user passes as "A" into something the engine can read.

Accepted: a numpy array, a dask array, a ``zarr.Array``, or a path / URL to a
Zarr array. Nothing here reads the data beyond metadata: the checks that need
values (finiteness) are done by the callers in one streaming pass.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import (
    CorruptStoreError,
    InputDTypeError,
    InputShapeError,
    NotAnArrayError,
    StoreNotFoundError,
)

__all__ = ["MatrixSource", "as_matrix_source", "open_zarr_array", "check_float_dtype"]


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

    def to_dask(self, chunks=None):
        """A dask array view (lazy for Zarr and dask input), converted to float64."""
        import dask.array as da

        if self.kind == "dask":
            x = self.array
        elif self.kind == "zarr":
            x = da.from_array(self.array, chunks=self.array.chunks if chunks is None else chunks,
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
        "(float, integer or boolean). Convert the matrix, e.g. `A.real.astype(float)` "
        "for complex data that is really real."
    )


def _is_url(s: str) -> bool:
    return "://" in s


def open_zarr_array(path, *, storage_options=None):
    """Open an existing Zarr array read-only, with errors that say what is wrong."""
    import zarr

    spath = os.fspath(path)
    if not _is_url(spath) and not os.path.exists(spath):
        raise StoreNotFoundError(f"no Zarr store at {spath!r}: the path does not exist")
    try:
        node = zarr.open(spath, mode="r", storage_options=storage_options)
    except FileNotFoundError as exc:
        raise StoreNotFoundError(f"no Zarr store at {spath!r}: {exc}") from exc
    except Exception as exc:  # zarr raises several types for unreadable metadata
        raise CorruptStoreError(
            f"cannot read Zarr metadata at {spath!r} ({type(exc).__name__}: {exc}); "
            "is it a Zarr store?"
        ) from exc
    if not isinstance(node, zarr.Array):
        names = sorted(node.array_keys()) if hasattr(node, "array_keys") else []
        hint = f" It contains arrays {names}; pass e.g. {spath!r} + '/{names[0]}'." if names else ""
        raise NotAnArrayError(f"{spath!r} is a Zarr group, not an array.{hint}")
    return node


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

    path = None
    if isinstance(A, (str, os.PathLike)):
        path = os.fspath(A)
        A = open_zarr_array(path, storage_options=storage_options)
    if isinstance(A, zarr.Array):
        kind = "zarr"
        if path is None:
            path = str(A.store_path) if hasattr(A, "store_path") else None
    elif type(A).__module__.startswith("dask.array") or (
        hasattr(A, "dask") and hasattr(A, "chunks") and hasattr(A, "compute")
    ):
        kind = "dask"
    else:
        kind = "numpy"
        if not isinstance(A, np.ndarray):
            try:
                A = np.asarray(A)
            except Exception as exc:
                raise InputDTypeError(f"cannot convert input of type {type(A).__name__} "
                                      f"to an array: {exc}") from exc
    shape = tuple(int(s) for s in A.shape)
    if len(shape) != 2:
        raise InputShapeError(
            f"A must be a 2-D matrix (rows x columns), got {len(shape)}-D shape {shape}. "
            "Reshape it, e.g. `A.reshape(n_rows, -1)`."
        )
    if shape[0] == 0 or shape[1] == 0:
        raise InputShapeError(f"A is empty (shape {shape}); it needs at least 1 row and 2 columns.")
    if shape[1] < 2:
        raise InputShapeError(
            f"A has {shape[1]} column; an interpolative decomposition needs at least 2 columns."
        )
    check_float_dtype(A.dtype)
    return MatrixSource(kind=kind, array=A, path=path, shape=shape, dtype=np.dtype(A.dtype))
