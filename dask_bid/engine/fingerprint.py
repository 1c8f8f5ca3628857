"""The identity of an input matrix: metadata and a content checksum.

A fit with ``out=`` records the fingerprint of its input when it starts; ``resume=True``
compares the input it is given against it and refuses another matrix
(:class:`~dask_bid.InputChangedError`), naming what differs. Shape, dtype and chunks come
from metadata and are compared before anything is read. The checksum is computed in the
first pass over A (the pass that computes H = CᵀA): every tile task hashes the bytes it
read (BLAKE2b), and the per-tile digests are combined in the fixed order of their tile
index, so the checksum does not depend on the scheduler, the workers or the order tasks
finish in. A resumed run, which restores its chains from checkpoints and has no such pass,
reads A once for the checksum before it touches any chain state or writes anything.
"""

from __future__ import annotations

import hashlib
import os
import time

import numpy as np

from .._errors import InputChangedError
from .._files import local_path

__all__ = ["tile_digest", "combine_digests", "metadata_fingerprint", "compare_metadata",
           "compare_checksum", "StoreWatch"]


def tile_digest(tile) -> str:
    """BLAKE2b (128 bits) of a tile's dtype, shape and bytes (C order)."""
    a = np.ascontiguousarray(tile)
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{a.dtype.str}{a.shape}".encode())
    h.update(a.data if a.size else b"")
    return h.hexdigest()


def combine_digests(items) -> str:
    """One checksum from ``[(row tile, column group, digest)]`` in any order."""
    h = hashlib.blake2b(digest_size=16)
    for r, g, d in sorted((int(r), int(g), str(d)) for r, g, d in items):
        h.update(f"{r},{g},{d};".encode())
    return h.hexdigest()


def metadata_fingerprint(src, chunks) -> dict:
    """Shape, dtype and chunks of a :class:`~dask_bid.engine.inputs.MatrixSource`."""
    return {"shape": [int(s) for s in src.shape], "dtype": str(src.dtype),
            "chunks": [[int(c) for c in axis] for axis in chunks]}


def _short_chunks(ch):
    try:
        return "x".join(str(axis[0]) for axis in ch)
    except (TypeError, IndexError):
        return repr(ch)


def compare_metadata(stored, now, where):
    """Refuse a resume whose input metadata differ from the stored fingerprint."""
    if not stored:
        return
    diffs = []
    for k, show in (("shape", lambda v: "x".join(map(str, v))), ("dtype", str),
                    ("chunks", _short_chunks)):
        if k in stored and stored[k] != now[k]:
            diffs.append(f"{k} {show(stored[k])} then, {show(now[k])} now")
    if diffs:
        raise InputChangedError(
            f"resume=True, but the input differs from the one the fit at {where!r} started "
            f"on ({'; '.join(diffs)}). Resume with the original input, or start a new fit "
            "(resume=False, overwrite=True).")


def compare_checksum(stored, now, where):
    """Refuse a resume whose input content differs from the stored checksum."""
    if stored and now and stored != now:
        raise InputChangedError(
            f"resume=True, but the input's content differs from the matrix the fit at "
            f"{where!r} started on (checksum {now[:12]} now, {stored[:12]} then; shape, "
            "dtype and chunks are the same). Resume with the original input, or start a new "
            "fit (resume=False, overwrite=True).")


class StoreWatch:
    """Whether the files of an input store changed while a fit read it.

    The checksum above is taken once, in the first pass; later passes, and the copy of
    the basis columns into the output's C at the end, read the store again. A store
    replaced or deleted meanwhile (``rm -rf A.zarr; cp -r B.zarr A.zarr``, another fit's
    ``--overwrite`` converting the same text file again) gave a fit that said "complete"
    with its W and MSE from one matrix and its C from another (or zeros: missing chunks
    read as the fill value). Every write to a file sets its change time (``st_ctime``),
    which no copy can set back: :meth:`check` refuses a store with a file changed since
    :meth:`start`, or with files added or removed.

    An object store (``s3://...``) is watched by its listing: each object's size and
    ETag (a digest of its bytes; the modification time where a store gives none), one
    listing of the store per check (a request per 1,000 objects). Where it cannot be listed
    (credentials that may read the objects but not list them, plain HTTP), the fit runs
    unwatched, with a RuntimeWarning; an in-memory store of this process is not watched."""

    def __init__(self, path, storage_options=None):
        p = None if path is None else local_path(str(path))
        self.fs = self.root = None
        self.storage_options = storage_options
        if p is not None and "://" in p:
            self.path = p
        else:
            self.path = p if p is not None and os.path.isdir(p) else None
        self.t0 = None
        self.n_files = None
        self.objects = None

    def _scan(self):
        n, newest = 0, 0
        for root, _, files in os.walk(self.path):
            for f in files:
                try:
                    st = os.stat(os.path.join(root, f))
                except FileNotFoundError:  # removed while listed: counted as a change
                    continue
                n += 1
                newest = max(newest, st.st_ctime_ns)
        return n, newest

    def _list(self):
        """``{key: (size, tag)}`` of the objects under the store, listed afresh."""
        self.fs.invalidate_cache(self.root)  # s3fs keeps listings: a change must show
        found = self.fs.find(self.root, detail=True)
        return {k: (v.get("size"), _object_tag(v)) for k, v in found.items()
                if v.get("type", "file") != "directory"}

    def start(self):
        if self.path is not None and self.path.startswith("memory://"):
            # an in-memory store of this process (zarr's MemoryStore): no file to watch,
            # and no other process to change it
            self.path = None
            return self
        if self.path is not None and "://" in self.path:
            try:
                import fsspec

                self.fs, self.root = fsspec.core.url_to_fs(self.path,
                                                           **(self.storage_options or {}))
                self.objects = self._list()
                if not self.objects:  # a store that is read has files: HTTP lists none
                    raise OSError("the listing is empty")
            except Exception as exc:  # noqa: BLE001  a watch never stops a fit that reads
                # (listing refused to credentials that may read, a store without listings
                # such as plain HTTP): unwatched, said once
                from .._warn import warn

                warn(f"the input {self.path!r} is not watched for changes during the fit: "
                     f"it could not be listed ({' '.join(str(exc).split())}); the fit "
                     "reads it as usual.", RuntimeWarning)
                self.path = self.fs = None
                return self
            self.t0 = time.time_ns()
        elif self.path is not None:
            self.t0 = time.time_ns()
            self.n_files = self._scan()[0]
        return self

    def check(self):
        """Raise :class:`~dask_bid.InputChangedError` if the store changed since start."""
        if self.path is None or self.t0 is None:
            return
        if self.fs is not None:
            return self._check_objects()
        if not os.path.isdir(self.path):
            self._removed()
        n, newest = self._scan()
        if n != self.n_files or newest >= self.t0:
            why = (f"{abs(n - self.n_files)} file(s) {'added' if n > self.n_files else 'removed'}"
                   if n != self.n_files else "its files were written")
            self._changed(why)

    def _check_objects(self):
        now = self._list()
        if now == self.objects:
            return
        if not now:
            self._removed()
        added, removed = len(now.keys() - self.objects), len(self.objects.keys() - now)
        why = (f"{added} object(s) added" if added else
               f"{removed} object(s) removed" if removed else "its objects were written")
        self._changed(why)

    def _removed(self):
        raise InputChangedError(
            f"the input {self.path!r} was removed while the fit read it: the result "
            "would not be of one matrix. Fit again on a store that stays in place.")

    def _changed(self, why):
        raise InputChangedError(
            f"the input {self.path!r} changed while the fit read it ({why} after it "
            "started): the result would mix two matrices. Fit again once the input "
            "stays as it is (a copy of it to fit from, if something else writes it).")


def _object_tag(info):
    """What identifies an object's bytes in a listing: its ETag (S3, GCS, Azure), else
    its modification time."""
    for key in ("ETag", "etag", "md5Hash", "LastModified", "last_modified", "mtime",
                "updated"):
        if info.get(key) is not None:
            return str(info[key])
    return None
