"""What to say about a file that holds a matrix in a format dask_bid does not read.

Constants and one function, no imports of the engine, so that the command line's ``info``
gives the same advice as the engine without loading numba.
"""

import os

__all__ = ["other_file_advice", "local_path", "file_stamp", "same_file"]

#: URL forms fsspec reads as this machine's files: a path to them (``file://localhost/p``
#: is ``/p``). ``file:/p`` is RFC 8089's short form of ``file:///p``: read as a relative
#: path it wrote into a folder named ``file:`` of the current one.
_LOCAL_PREFIXES = ("file://localhost/", "local://localhost/", "file://", "local://")
_SHORT_FILE = "file:/"


def local_path(path):
    """``file://`` and ``local://`` URLs (fsspec's names of this machine's files) as plain
    paths; anything else unchanged. Every check of a path (the input is never the output,
    the output's lock, what is in it) works on this form: ``local://`` passed as a URL got
    past the check that the output is not the input, and the output's removal then
    deleted both."""
    path = os.fspath(path)
    for prefix in _LOCAL_PREFIXES:
        if path.startswith(prefix):
            return ("/" if prefix.endswith("localhost/") else "") + path[len(prefix):]
    if path.startswith(_SHORT_FILE):
        return path[len(_SHORT_FILE) - 1:]
    return path

#: Files people keep matrices in that are read by none of the paths: what to do instead
OTHER_FILES = {
    ".npz": ("it is a numpy archive of named arrays: save the matrix alone, "
             "numpy.save('A.npy', numpy.load(path)['NAME']) (`dask-bid info` lists the "
             "names), and fit A.npy"),
    ".xlsx": "it is a spreadsheet: export the sheet as CSV and fit the .csv",
    ".xls": "it is a spreadsheet: export the sheet as CSV and fit the .csv",
    ".ods": "it is a spreadsheet: export the sheet as CSV and fit the .csv",
    ".h5": ("it is an HDF5 file: write its dataset to Zarr once, "
            "dask_bid.engine.to_zarr(dask.array.from_array(h5py.File(path)['NAME']), "
            "'A.zarr') (chunk by chunk)"),
    ".hdf5": ("it is an HDF5 file: write its dataset to Zarr once, "
              "dask_bid.engine.to_zarr(dask.array.from_array(h5py.File(path)['NAME']), "
            "'A.zarr') (chunk by chunk)"),
    ".parquet": ("it is a Parquet file: a table of (row, column, value) triplets is fitted "
                 "with --format triplets (docs/sparse.md); a dense table, read with "
                 "pandas.read_parquet and passed as a DataFrame"),
    ".gz": ("it is compressed: decompress it first (gunzip), then fit the .csv, .txt, .tsv "
            "or .npy"),
}


def other_file_advice(path) -> str | None:
    """What the file at ``path`` is and what to do instead, by its suffix (None when it
    is not one of :data:`OTHER_FILES`)."""
    return OTHER_FILES.get(os.path.splitext(str(path))[1].lower())


def file_stamp(path) -> dict:
    """What a conversion records of the file it read, to tell whether a later fit of the
    same path reads the same file: its absolute path, size, modification time and change
    time. The change time is set by the kernel on every write and cannot be set back
    (``cp -p``, ``rsync -t`` and ``touch -r`` restore the modification time of a changed
    file, which then read as unchanged)."""
    st = os.stat(path)
    return {"path": os.path.abspath(path), "size": int(st.st_size),
            "mtime_ns": int(st.st_mtime_ns), "ctime_ns": int(st.st_ctime_ns)}


def same_file(recorded, path) -> bool:
    """Whether ``recorded`` (a :func:`file_stamp`, or an older one without the change
    time) describes the file at ``path`` as it is now."""
    if not isinstance(recorded, dict):
        return False
    now = file_stamp(path)
    keys = [k for k in now if k != "ctime_ns" or k in recorded]
    was = recorded.get("path")
    if (was != now["path"] and isinstance(was, str) and "ctime_ns" in recorded
            and not os.path.lexists(was)):
        # the file was moved (its folder renamed, a project moved whole): the same inode
        # keeps its size and times, the change time included, which no copy and no other
        # file has; its recorded path is gone
        keys.remove("path")
    return all(recorded.get(k) == now[k] for k in keys)


def tree_stamp(folder) -> str | None:
    """A digest of the files under a local store ``folder`` but its top ``zarr.json`` (the
    attributes, which a conversion writes last): each file's path, size and modification
    time. A conversion records it, so that a later fit tells a store whose chunks were
    rewritten since (a value edited in place) from the one it converted; a copy made
    without keeping the times also reads as changed, and is converted again. None for a
    URL or a folder that cannot be listed."""
    import hashlib

    folder = os.fspath(folder)
    if "://" in folder:
        return None
    h = hashlib.sha256()
    try:
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(root, name)
                rel = os.path.relpath(full, folder)
                if rel == "zarr.json":
                    continue
                st = os.stat(full)
                h.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    except OSError:
        return None
    return h.hexdigest()[:32]
