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

import contextlib
import json
import math
import os
import re
import shutil

import numpy as np

from .._attrs import COLUMN_NAMES_ATTR, COLUMN_NAMES_MAX, MISSING_ATTR, ROW_NAMES_ATTR
from .._errors import OutputExistsError, OutputLocationError
from .._files import local_path
from .result import TRACE_DTYPE

__all__ = [
    "default_chunks",
    "to_zarr",
    "read_result",
    "is_url",
    "local_path",
    "url_options",
    "same_or_nested",
    "prepare_output",
    "write_result",
    "FORMAT_VERSION",
    "jsonable",
    "create_matrix_array",
    "write_error",
    "mark_complete",
    "ARRAY_ATTR",
    "check_output",
    "check_output_location",
    "mark_failed",
    "remove_zarr_partials",
    "result_node",
    "result_columns",
    "RUN_ATTR",
    "refuse_symlink",
    "empty_local_dir",
    "output_status",
]

#: Attribute of the arrays :func:`to_zarr` (and the CLI's conversion) write:
#: ``{"complete": false}`` until the last chunk is written, then ``true``.
ARRAY_ATTR = "dask_bid_array"

FORMAT_VERSION = 1
#: a result's attribute: every chunk of its arrays was written (``write_empty_chunks``),
#: so that a missing chunk file is damage (results written before lack it)
ALL_CHUNKS = "all_chunks"
#: the attribute listing a result's arrays by path, written with them
RESULT_ARRAYS = "arrays"

#: Target bytes of one chunk written by :func:`to_zarr`.
CHUNK_BYTES = 16 * 2**20
#: Widest chunk :func:`to_zarr` makes, in columns, when N is large.
MAX_CHUNK_COLS = 4096
#: Up to this many columns a chunk spans all of them.
FULL_WIDTH_COLS = 8192


def is_url(path) -> bool:
    return "://" in str(path)


def url_options(path, storage_options):
    """``storage_options`` for a URL, None for a local path: one ``storage_options`` serves
    an input on object storage and a local output (or the reverse), and Zarr refuses
    options with a local path."""
    return storage_options if is_url(local_path(path)) else None


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
        # a Zarr group or array there: one HEAD request, no listing
        if fs.exists(p.rstrip("/") + "/zarr.json"):
            return True
        return fs.exists(p) and bool(fs.ls(p))
    return (os.path.exists(path) and (not os.path.isdir(path) or bool(os.listdir(path)))
            and not _bare_group(path))


def empty_local_dir(path) -> bool:
    """Whether ``path`` is a local directory with nothing in it, or only the metadata of
    an empty Zarr group without attributes (an output may be written there as it is)."""
    return not is_url(path) and os.path.isdir(path) and (not os.listdir(path)
                                                         or _bare_group(path))


def _bare_group(path) -> bool:
    """A local folder holding nothing but an empty Zarr v3 group's ``zarr.json`` with no
    attributes: what a fit that failed while writing its first attributes (a full disk)
    left, refused ever after as "not a dask_bid result". It holds nothing of anyone's."""
    try:
        if os.listdir(path) != ["zarr.json"]:
            return False
        with open(os.path.join(path, "zarr.json")) as fh:
            meta = json.load(fh)
    except (OSError, ValueError):
        return False
    return (isinstance(meta, dict) and meta.get("node_type") == "group"
            and not meta.get("attributes") and set(meta) <= {"attributes", "zarr_format",
                                                             "node_type",
                                                             "consolidated_metadata"})


def refuse_symlink(path, what="the output"):
    """Refuse a local write target that is itself a symbolic link (its parents may be).

    Replacing one removed what it points to (``shutil.rmtree("link/")`` follows the link,
    then fails on it: the old result gone, no new one), and a lock taken by the link's
    name let a second fit write the same folder beside a running one."""
    if path is None or is_url(path):
        return
    p = os.fspath(path).rstrip(os.sep) or os.sep
    if os.path.islink(p):
        target = os.readlink(p)
        gone = "" if os.path.exists(p) else ", which does not exist"
        raise OutputLocationError(
            f"{what} {os.fspath(path)!r} is a symbolic link (to {target!r}{gone}); dask_bid "
            "writes and replaces folders, never through a link: pass the path it points to, "
            "or another path.")
    # "link/." or "link/sub/..": the last name read as written is not where the path
    # leads (removing "link/." emptied the result the link named)
    spelled = os.path.normpath(os.path.abspath(p))
    here = os.path.join(os.path.realpath(os.path.dirname(spelled)), os.path.basename(spelled))
    if os.path.lexists(p) and os.path.realpath(p) != here:
        raise OutputLocationError(
            f"{what} {os.fspath(path)!r} leads through a symbolic link to "
            f"{os.path.realpath(p)!r}; dask_bid writes and replaces folders, never through a "
            "link: pass that path, or another path.")


def _enclosing_kind(folder) -> str | None:
    """What the local ``folder`` is, if an output must not lie inside it: "the Zarr
    array", "the dask_bid result", "the sparse store"; None for anything else (a plain
    folder, or a Zarr group of the user's own, which may hold outputs)."""
    if os.path.isfile(os.path.join(folder, ".zarray")):  # a Zarr v2 array (an input)
        return "the Zarr array"
    # results and sparse stores are Zarr v3 groups: their zarr.json holds the attributes
    try:
        with open(os.path.join(folder, "zarr.json"), encoding="utf-8") as fh:
            meta = json.load(fh)
        attrs = meta.get("attributes") or {}
        if meta.get("node_type") == "array":
            return "the Zarr array"
    except (OSError, ValueError, AttributeError):
        return None  # no metadata, or unreadable: nothing to say of it
    from .sparse_store import SPARSE_ATTR

    if "dask_bid" in attrs:
        return "the dask_bid result"
    return "the sparse store" if SPARSE_ATTR in attrs else None


def refuse_inside_store(path, what="the output", into=False):
    """Refuse a local write target inside a Zarr array, a dask_bid result or a sparse
    store: it was written among their chunks or checkpoints (a later overwrite of the
    result then refused it as "not written by dask_bid", and removing the result's
    checkpoints would take it along)."""
    if path is None or is_url(path):
        return
    p = os.fspath(path).rstrip(os.sep) or os.sep
    # into: the files go into ``path`` itself (a plot's stem "x/" names x/.trace.png), so
    # x may be the store; else ``path`` is the target (``--out fit.zarr/`` is fit.zarr)
    folder = os.path.abspath(p) if into else os.path.dirname(os.path.abspath(p))
    found = None
    while True:
        kind = _enclosing_kind(folder)
        if kind is not None:
            found = kind, folder  # the outermost is named: the suggestion lies outside all
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    if found is not None:
        kind, folder = found
        raise OutputLocationError(
            f"{what} {os.fspath(path)!r} lies inside {kind} {folder!r}; dask_bid writes "
            "nothing among a store's own files: choose a path outside it, e.g. "
            f"{os.path.join(os.path.dirname(folder), 'fit' if into else os.path.basename(p))!r}.")


def _remove(path, storage_options=None):
    refuse_symlink(path)  # never the target of a link (the checks before say so first)
    if is_url(path):
        import fsspec

        fs, p = fsspec.core.url_to_fs(path, **(storage_options or {}))
        if fs.exists(p):
            fs.rm(p, recursive=True)
            # an object store's bulk delete can drop per-object refusals (a policy that
            # denies DeleteObject): what is left would pass for part of the new store
            with contextlib.suppress(FileNotFoundError):
                fs.invalidate_cache(p)
                left = fs.find(p)
                if left:
                    from .._errors import StoreAccessError

                    raise StoreAccessError(
                        f"could not delete {path!r}: {len(left)} object(s) are still there "
                        f"(e.g. {fs.unstrip_protocol(left[0])!r}); the store refused the "
                        "deletes (a read-only bucket or key, or a policy that refuses "
                        "deletes): write to another path, or delete them with the store's "
                        "own tools if you may.")
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
        Replace an existing array that ``to_zarr`` (or the command line's conversion)
        wrote, or an empty directory; anything else at ``path`` (a folder of other files,
        another tool's Zarr array) is never deleted: :class:`~dask_bid.OutputExistsError`.
        An ``array`` that reads from ``path`` (``da.from_zarr(path) * 2``) is refused
        (:class:`~dask_bid.OutputLocationError`): the old store would be removed first.
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
    storage_options = url_options(path, storage_options)
    if array.ndim != 2:
        from .._errors import InputShapeError

        raise InputShapeError(f"to_zarr writes 2-D matrices, got shape {array.shape}.")
    if any(isinstance(s, float) and math.isnan(s) for s in array.shape):
        from .._errors import InputShapeError

        # as bayesian_id says it (zarr failed with "cannot convert float NaN to integer")
        raise InputShapeError(
            f"to_zarr got a dask array of unknown shape {array.shape} (after boolean "
            "indexing, or from a dataframe): call array.compute_chunk_sizes() first (for a "
            "dask dataframe, df.to_dask_array(lengths=True)).")
    if is_url(path):
        from .remote import check_bucket

        check_url_segments(path, "path")
        check_bucket(path, storage_options, output=True)
    refuse_symlink(path, "path")
    _check_not_read_from(array, path)  # the more telling one, of a store it reads
    refuse_inside_store(path, "path")
    if _exists(path, storage_options):
        if not overwrite:
            raise OutputExistsError(
                f"{path!r} already exists; pass overwrite=True to replace it or choose "
                "another path.")
        check_replaceable_array(path, storage_options)
        from .lock import refuse_if_read

        # a store a running fit reads (its read-hold): replacing it would fail that fit
        refuse_if_read(path, "replace it")
        _remove(path, storage_options)
    dtype = np.dtype(array.dtype)
    if chunks is None:
        chunks = default_chunks(array.shape, dtype.itemsize)
    chunks = tuple(int(c) for c in chunks)
    try:
        z = create_matrix_array(path, array.shape, dtype, chunks,
                                storage_options=storage_options)
    except PermissionError as exc:
        raise write_error(path, exc) from exc
    if hasattr(array, "dask"):
        import dask.array as da

        da.store(array.rechunk(chunks), z, lock=False)
    else:
        # slabs of whole chunk rows: bounded temporaries, every chunk written once
        step = chunks[0] * max(1, (64 * 2**20) // max(1, chunks[0] * array.shape[1]
                                                     * dtype.itemsize))
        for r0 in range(0, array.shape[0], step):
            z[r0:r0 + step] = array[r0:r0 + step]
    mark_complete(z)
    return zarr.open_array(path, mode="r", storage_options=storage_options)


def _zarr_sources(array):
    """The Zarr arrays ``array`` reads from: itself, or those in its dask graph."""
    import zarr

    if isinstance(array, zarr.Array):
        return [array]
    graph = getattr(array, "dask", None)
    found = []
    for layer in getattr(graph, "layers", {}).values():
        if type(layer).__name__ != "MaterializedLayer":  # from_zarr keeps the array in one
            continue
        found += [v for v in dict(layer).values() if isinstance(v, zarr.Array)]
    return found


def zarr_sources_of(array) -> list[str]:
    """Where the Zarr arrays that ``array`` reads from live (paths or URLs)."""
    from .inputs import zarr_array_location

    locs = [zarr_array_location(a) for a in _zarr_sources(array)]
    return [loc for loc in locs if loc is not None]


def _check_not_read_from(array, path):
    """Refuse to write an array onto the store it is read from: the old store is removed
    before the new one is written, so its data would be lost."""
    for loc in zarr_sources_of(array):
        if same_or_nested(loc, path):
            raise OutputLocationError(
                f"the array is read from {loc!r}, which {path!r} is, holds or lies in: "
                "writing it there would delete what it reads. Write it to another path "
                "(then move it), or compute it first.")


def check_replaceable_array(path, storage_options=None):
    """``overwrite=True`` replaces an empty directory or a Zarr array that dask_bid wrote
    (marked ``dask_bid_array``) holding nothing else; anything else is the user's."""
    import zarr

    refuse_symlink(path, "the store")
    if empty_local_dir(path):
        return
    try:
        ours = ARRAY_ATTR in zarr.open_array(
            path, mode="r", storage_options=url_options(path, storage_options)).attrs
    except Exception:
        ours = False
    if not ours:
        raise OutputExistsError(
            f"refusing to replace {path!r}: it is not a Zarr array dask_bid wrote, and "
            "overwrite=True only replaces those or empty directories. Remove it yourself "
            "or choose another path.")
    if not is_url(path):
        foreign = foreign_entries(path)
        if foreign:
            raise OutputExistsError(
                f"refusing to replace {path!r}: besides a Zarr array it holds "
                f"{', '.join(foreign[:4])}, which dask_bid did not write. Move them out, or "
                "choose another path.")


def create_matrix_array(path, shape, dtype, chunks, *, storage_options=None, attrs=None):
    """Create the Zarr v3 array a matrix is written to, marked incomplete.

    Every chunk is stored, also one equal to the fill value (``write_empty_chunks``), so
    that a missing chunk file always means a damaged or unfinished store (the engine
    refuses those). ``attrs[ARRAY_ATTR]["complete"]`` is False until :func:`mark_complete`:
    a write that was killed or failed leaves an array the engine and ``dask-bid info``
    recognise as unfinished instead of a matrix of zeros.
    """
    import zarr

    storage_options = url_options(path, storage_options)
    if is_url(path) and _exists(path, storage_options):
        # removed by our own delete, which checks that the store let it happen (Zarr's
        # overwrite dropped an object store's refusals: the old objects stayed)
        _remove(path, storage_options)
    # an empty folder is written into as it is (overwrite removes and re-makes it: a
    # read-only folder of the user's came back writable); anything else is replaced
    empty_dir = empty_local_dir(path)
    z = zarr.create_array(store=path, shape=tuple(int(s) for s in shape),
                          chunks=tuple(int(c) for c in chunks), dtype=np.dtype(dtype),
                          overwrite=not empty_dir, zarr_format=3,
                          storage_options=storage_options,
                          config={"write_empty_chunks": True},
                          # marked from its first metadata write: no moment without it
                          attributes={**(attrs or {}), ARRAY_ATTR: {"complete": False}})
    return z


def mark_complete(z, **extra_attrs):
    """Mark an array made by :func:`create_matrix_array` as completely written."""
    # one metadata write (``attrs.update`` writes once per key)
    z.update_attributes({**jsonable(extra_attrs), ARRAY_ATTR: {"complete": True}})


def _norm(path):
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def _url_key(url) -> str:
    """A URL with each run of slashes after ``scheme://`` made one."""
    scheme, sep, rest = str(url).partition("://")
    return scheme + sep + re.sub("/{2,}", "/", rest) if sep else str(url)


def check_url_segments(url, what="out"):
    """Refuse a URL with an empty path segment (``s3://bkt//A.zarr``): s3fs found no
    ``bkt//A.zarr`` and then deleted ``bkt/A.zarr`` (the input) when replacing it."""
    scheme, sep, rest = str(url).partition("://")
    if sep and "//" in rest.rstrip("/"):
        raise OutputLocationError(
            f"{what} {url!r} has an empty path segment ('//'), which object stores read "
            f"inconsistently: write it with single slashes ({_url_key(url).rstrip('/')!r}).")
    if sep and any(part in (".", "..") for part in rest.rstrip("/").split("/")):
        # object stores keep them as key text ("x/../B.zarr" is its own key), where a
        # local path would be resolved: refused rather than written somewhere unexpected
        raise OutputLocationError(
            f"{what} {url!r} has a '.' or '..' path segment, which an object store keeps "
            "as part of the key: write the key without them.")


def same_or_nested(a, b) -> bool:
    """Whether paths ``a`` and ``b`` are equal or one contains the other."""
    # file:// URLs name local paths: compare them as such
    a, b = (local_path(x) for x in (a, b))
    if is_url(a) or is_url(b):
        # object stores read "bkt//A.zarr" as "bkt/A.zarr" in some calls and not in others
        # (s3fs: exists no, remove yes): compared without repeated slashes
        a, b = (_url_key(x).rstrip("/") for x in (a, b))
        return a == b or a.startswith(b + "/") or b.startswith(a + "/")
    a, b = _norm(a), _norm(b)
    return a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep)


def _result_meta(out, storage_options=None):
    """The ``dask_bid`` attributes of the group at ``out``, or None if it is not one."""
    import zarr

    try:
        g = zarr.open_group(out, mode="r", storage_options=url_options(out, storage_options))
        meta = g.attrs.get("dask_bid")
    except PermissionError as exc:  # refused credentials are not "not ours"
        from .remote import access_error

        raise (access_error(out, exc, output=True) or exc) from exc
    except Exception:
        return None
    return meta if isinstance(meta, dict) else None


#: the temporary file of a Zarr (LocalStore) atomic write, renamed into place at its end
_ZARR_PARTIAL = re.compile(r"^.*\.[0-9a-f]{32}\.partial$")


def remove_zarr_partials(out) -> int:
    """Delete what killed Zarr writes left in the local output ``out`` (the temporary files
    ``<name>.<32 hex digits>.partial`` of its atomic writes; Zarr warns of each when it
    lists the group), by the process that holds the output's lock (a resume, before it
    reads the group and again when it has rewritten it); returns their count. Only files
    of that name: nothing of anyone else's is touched."""
    n = 0
    for root, _, files in os.walk(out):
        for name in files:
            if _ZARR_PARTIAL.match(name):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(root, name))
                    n += 1
    return n


#: The nodes of a result group (the module docstring's layout) by their path in it; a
#: checkpoint's states (``client``, ``block_#####``) hold the serialiser's own names
_RESULT_TOP = frozenset({"C", "W", "W_sd", "columns", "inclusion_probability", "traces",
                         "draws", "checkpoint"})
_RESULT_DRAWS = frozenset({"columns", "sigma2", "sse", "w_columns", "w_values"})
_CHECKPOINT_NAME = re.compile(r"^c\d+-it\d+$")
_BLOCK_STATE = re.compile(r"^block_\d+$")


def result_node(parts) -> bool:
    """Whether a node at path ``parts`` (names from the group down) is one a fit writes:
    a Zarr array or group of the user's added to a result is not (``overwrite=True``
    deleted it with the result)."""
    # (below an array's own folder, met only while its zarr.json is being written, the
    # walk of foreign_entries judges the chunks; below a checkpoint's states, the
    # serialiser's nodes)
    top = parts[0]
    if len(parts) == 1:
        return top in _RESULT_TOP
    if top == "draws":
        return parts[1] in _RESULT_DRAWS
    if top == "traces":
        return parts[1] in TRACE_DTYPE.names
    if top == "checkpoint":
        return bool(_CHECKPOINT_NAME.match(parts[1])) and (
            len(parts) == 2 or parts[2] == "client" or bool(_BLOCK_STATE.match(parts[2])))
    return True  # below an array's folder


def foreign_entries(out, nodes=None):
    """Paths (relative to ``out``) in a local Zarr v3 node's directory tree that Zarr did
    not write: anything but a node's ``zarr.json``, a group's child nodes and an array's
    chunk files (``c/<digits>/.../<digits>``). Walked to the bottom: a file of the user's
    inside an array of a result (``W/notes.txt``) was deleted by ``overwrite=True``.
    ``nodes``, a predicate on a child node's path (a tuple of names), says which Zarr
    nodes are the writer's (e.g. :func:`result_node`); a node it refuses is foreign, and
    what is below it is not walked.

    What a Zarr write cut off by a kill leaves is Zarr's too: the temporary file of its
    atomic write (``<name>.<32 hex digits>.partial``) and, in a group, a child folder
    whose ``zarr.json`` was not yet written (a checkpoint being written), walked the same
    way. Counting them foreign left a killed fit that neither resume nor overwrite
    accepted."""
    bad = []

    def node(path, rel, kind=None):
        # kind: "group" for a group's child folder without zarr.json (being written)
        if rel and nodes is not None and not nodes(tuple(rel.rstrip("/").split("/"))):
            bad.append(rel.rstrip("/"))
            return
        if kind is None:
            try:
                with open(os.path.join(path, "zarr.json"), encoding="utf-8") as fh:
                    kind = json.load(fh).get("node_type")
            except (OSError, ValueError, AttributeError):
                kind = None
        for name in sorted(os.listdir(path)):
            full, r = os.path.join(path, name), f"{rel}{name}"
            if (name == "zarr.json" and kind is not None) or _ZARR_PARTIAL.match(name):
                continue
            if kind == "array" and name == "c" and os.path.isdir(full):
                chunks(full, r + "/")
            elif kind == "group" and os.path.isdir(full):
                node(full, r + "/", None if os.path.isfile(os.path.join(full, "zarr.json"))
                     else "group")
            else:
                bad.append(r)

    def chunks(path, rel):
        for name in sorted(os.listdir(path)):
            full, r = os.path.join(path, name), f"{rel}{name}"
            if _ZARR_PARTIAL.match(name):
                continue
            if not name.isdigit():
                bad.append(r)
            elif os.path.isdir(full):
                chunks(full, r + "/")

    node(out, "")
    return bad


def check_output(out, *, inputs=(), overwrite=False, resume=False, storage_options=None,
                 flags=None):
    """Refuse an output location the fit must not write to, before anything is read.

    ``out`` may be written when it does not exist, is an empty directory, or (with
    ``overwrite`` or ``resume``) is a dask_bid result: a Zarr group carrying the
    ``dask_bid`` attributes our writer sets, holding nothing but Zarr nodes. Anything
    else is refused, and so is an ``out`` that is, contains or lies in one of ``inputs``
    (paths of the input: a store, a ``.csv`` / ``.npy`` file): the input is never written
    or deleted. ``flags`` names the options in messages (``{"overwrite": "--overwrite",
    "resume": "--resume", "out": "--out"}`` for the CLI).

    Returns True when ``out`` holds something (a result that may be replaced or resumed).
    """
    f = {"overwrite": "overwrite=True", "resume": "resume=True", "out": "out",
         **(flags or {})}
    out = local_path(out)
    storage_options = url_options(out, storage_options)
    if is_url(out):
        check_url_segments(out, f["out"])
    for ip in inputs:
        if ip is not None and same_or_nested(out, local_path(ip)):
            raise OutputLocationError(
                f"{f['out']} {out!r} is the input {os.fspath(ip)!r}, contains it or lies "
                f"inside it; the input is never written or deleted. Choose an output path "
                "outside the input.")
    refuse_symlink(out, f["out"])
    refuse_inside_store(out, f["out"])
    if not is_url(out) and os.path.isfile(out):
        raise OutputLocationError(f"{f['out']} {out!r} is an existing file, not a directory "
                                  "(an output is a Zarr group, a directory): choose another "
                                  f"{f['out']}, or move the file.")
    if is_url(out):
        from .remote import check_bucket

        check_bucket(out, storage_options, output=True)
    try:
        exists = _exists(out, storage_options)
    except PermissionError as exc:
        from .remote import access_error

        raise (access_error(out, exc, output=True) or exc) from exc
    if not exists:
        return False
    if not is_url(out):
        from .lock import lease_holder, locked_error

        # a fit running there first: what it is writing at this moment (its metadata not
        # yet, a checkpoint half) is no reason to refuse, nor is "it exists": the lock is
        holder = lease_holder(out)
        if holder is not None and not holder.get("mine"):
            raise locked_error(out, holder)
    if not (overwrite or resume):
        if _result_meta(out, storage_options) is None and not empty_local_dir(out):
            # said first: the advice to pass --overwrite was then refused for it
            raise OutputExistsError(
                f"the output {out!r} already exists and is not a dask_bid result (no Zarr "
                "group with 'dask_bid' attributes): dask_bid never replaces it. Choose "
                "another output path, or move it away yourself.")
        raise OutputExistsError(
            f"the output {out!r} already exists. Pass {f['overwrite']} to replace it, "
            f"{f['resume']} to continue an interrupted fit there (or, with more iterations, a "
            "finished one), or choose another path.")
    meta = _result_meta(out, storage_options)
    what = "resume" if resume else "replace"
    if meta is None:
        raise OutputExistsError(
            f"refusing to {what} {out!r}: it is not a dask_bid result (no Zarr group with "
            f"'dask_bid' attributes), and {f['overwrite']} only replaces dask_bid results "
            "or empty directories. Remove it yourself or choose another output path.")
    if not is_url(out):
        foreign = foreign_entries(out, nodes=result_node)
        if foreign:
            shown = ", ".join(foreign[:4]) + (f" (+{len(foreign) - 4} more)"
                                               if len(foreign) > 4 else "")
            raise OutputExistsError(
                f"refusing to {what} {out!r}: besides a dask_bid result it holds {shown}, "
                "which dask_bid did not write. Move them out, or choose another output path.")
    return True


def mark_failed(group, reason):
    """Record that the fit writing ``group`` failed (status ``failed`` and the reason)."""
    import contextlib

    with contextlib.suppress(Exception):
        meta = dict(group.attrs.get("dask_bid", {}))
        meta.update({"status": "failed", "error": " ".join(str(reason).split())[:500]})
        group.attrs["dask_bid"] = meta


def output_status(path, meta=None, *, storage_options=None):
    """``(status, detail)`` of the fit at ``path`` for people: ``complete``, ``running``
    (a live fit holds its lock; detail names it), ``interrupted`` (stopped before the end:
    continue it with resume), ``failed`` (detail: the reason) or ``unknown``."""
    from .lock import describe, lease_holder

    if meta is None:
        meta = _result_meta(local_path(path), storage_options) or {}
    status = meta.get("status") if isinstance(meta, dict) else None
    if status == "complete":
        return "complete", ""
    if status == "failed":
        return "failed", str(meta.get("error") or "no reason recorded")
    if status in ("running", "interrupted"):
        holder = lease_holder(local_path(path))
        if holder is not None:
            return "running", describe(holder)
        return "interrupted", "stopped before the end; continue it with resume"
    if status is None:  # no dask_bid fit there: say which case ("status None" before)
        lp = local_path(path)
        if not is_url(lp) and not os.path.exists(lp):
            return "unknown", "nothing at this path"
        return "unknown", "not a dask_bid result (no 'dask_bid' attributes)"
    return "unknown", f"status {status!r}"


def check_output_location(out, *, input_path=None, overwrite=False, resume=False,
                          storage_options=None, inputs=()):
    """:func:`check_output` after refusing an ``out`` that overlaps the input store
    ``input_path``; creates nothing. Returns whether ``out`` holds something."""
    out = local_path(out)
    if input_path is not None and same_or_nested(out, local_path(input_path)):
        raise OutputLocationError(
            f"out={out!r} is the input store {input_path!r} or overlaps it; the input is "
            "never written. Choose an output path outside the input store.")
    return check_output(out, inputs=inputs, overwrite=overwrite, resume=resume,
                        storage_options=storage_options)


def _opened(out):
    """Where the output group is opened: a local folder by its absolute path, since its
    arrays (C, written by the Dask workers) travel to workers that resolved a relative
    one against their own working folder."""
    return out if is_url(out) else os.path.abspath(out)


def _refuse_if_any_read(out):
    """Refuse to replace a local result one of whose arrays (its ``C``, say) is the input
    of a fit running in another process (the read-hold of engine/lock.py): removed under
    it, that fit failed as "removed while the fit read it"."""
    from .lock import refuse_if_read

    for root, dirs, files in os.walk(out):
        dirs.sort()
        if "zarr.json" in files and root != out:
            refuse_if_read(root, f"replace {out!r}, which holds it,",
                           fix="choose another output path")


def prepare_output(out, *, input_path=None, overwrite=False, resume=False,
                   storage_options=None, inputs=()):
    """Check ``out`` (:func:`check_output`) and open (or create) the output group.

    Returns ``(group, existing)`` with ``existing`` True when ``resume`` found a group of a
    previous run to continue. Replacing removes only a dask_bid result.
    """
    import zarr

    out = local_path(out)
    storage_options = url_options(out, storage_options)
    exists = check_output_location(out, input_path=input_path, overwrite=overwrite,
                                   resume=resume, storage_options=storage_options,
                                   inputs=inputs)
    if exists and resume:
        if not is_url(out):  # what a kill left mid-write (this process holds the lock)
            remove_zarr_partials(out)
        try:
            g = zarr.open_group(_opened(out), mode="r+", storage_options=storage_options)
        except Exception as exc:
            raise OutputLocationError(
                f"resume=True but {out!r} is not a dask_bid output group ({exc}).") from exc
        try:
            # rewrite the attributes unchanged: read-only access is refused here, not
            # after the checksum pass that precedes the first write of a resume
            g.attrs["dask_bid"] = dict(g.attrs["dask_bid"])
        except PermissionError as exc:
            raise (write_error(out, exc)) from exc
        return g, True
    if exists:
        if not is_url(out):
            _refuse_if_any_read(out)
        try:
            _remove(out, storage_options)
        except PermissionError as exc:
            raise write_error(out, exc) from exc
        except OSError as exc:
            raise OutputLocationError(
                f"cannot replace the output {out!r} ({type(exc).__name__}: {exc}). Check its "
                "permissions, or choose another output path.") from exc
    # an empty folder given as the output is written into, not removed and made again
    # (zarr's mode "w" does that: a read-only folder of the user's came back writable)
    try:
        g = zarr.open_group(_opened(out), mode="a" if empty_local_dir(out) else "w",
                             zarr_format=3,
                             storage_options=storage_options)
    except PermissionError as exc:
        raise write_error(out, exc) from exc
    except OSError as exc:
        raise OutputLocationError(
            f"cannot create the output group at {out!r}: {exc}. Choose an output path in a "
            "directory you can write to.") from exc
    return g, False


def write_error(out, exc):
    """The one-line error for a write to ``out`` that was refused (PermissionError)."""
    from .remote import access_error

    return access_error(out, exc, output=True, write=True) or OutputLocationError(
        f"cannot write the output {out!r}: permission denied ({' '.join(str(exc).split())})."
        " Choose an output path you can write to.")


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
    # every chunk stored, also one of zeros: a missing chunk file then means damage
    # (read_result refuses it), never "all zeros" (Zarr reads a missing chunk as zeros)
    arr = group.create_array(name, shape=data.shape, dtype=data.dtype, chunks=chunks,
                             overwrite=True, config={"write_empty_chunks": True})
    if data.size:
        arr[...] = data
    return arr


def valid_column_names(names, n_cols):
    """``names`` as a list of ``n_cols`` strings, or None when they are not that (or when
    there are more than :data:`COLUMN_NAMES_MAX`)."""
    if names is None or n_cols > COLUMN_NAMES_MAX:
        return None
    names = list(names)
    if len(names) != n_cols or not all(isinstance(n, str) for n in names):
        return None
    return names


def stored_kept_nan(attrs) -> int:
    """How many NaN a converted input store kept as missing entries, from its attributes
    ``attrs`` (``dask_bid_missing``, written with ``--missing mask``); 0 if none or
    unknown."""
    try:
        missing = attrs.get(MISSING_ATTR) or {}
        return int(missing.get("n_kept") or 0) if missing.get("fill") == "keep" else 0
    except Exception:
        return 0


def stored_column_names(array, axis=1):
    """The column names (``axis=1``) or row names (``axis=0``) recorded on an input Zarr
    array, or None."""
    try:
        names = array.attrs.get(COLUMN_NAMES_ATTR if axis == 1 else ROW_NAMES_ATTR)
    except Exception:
        return None
    return (valid_column_names(names, int(array.shape[axis])) if isinstance(names, list)
            else None)


def write_result(group, res, *, w_chunk_cols=None, extra_attrs=None):
    """Write every array of a :class:`~dask_bid.BIDResult` (all but C) and the attributes.

    On object storage the arrays are made in memory and written as a batch of concurrent
    puts (:func:`write_batched`): made node by node there, each cost about a dozen
    requests (existence checks of its parents and of v2 keys, a listing)."""
    from zarr.storage import LocalStore

    if isinstance(group.store, LocalStore):
        written = _write_result_arrays(group, res, w_chunk_cols)
    else:
        import zarr
        from zarr.storage import MemoryStore

        mem = zarr.open_group(MemoryStore(), mode="w", zarr_format=3)
        _write_result_arrays(mem, res, w_chunk_cols)
        write_batched(mem, group.store, group.path, root=False)
        # C sorts first among the group's own arrays, as _result_arrays lists them
        written = (["C"] if "C" in group else []) + _result_arrays(mem)
    summary = {
        "sigma2": res.sigma2, "n_draws_point": res.n_draws_point, "mse": res.mse,
        "mse_observed": res.mse_observed, "max_abs_w": res.max_abs_w,
        "n_passes": res.n_passes, "elapsed": res.elapsed, "n_samples": res.n_samples,
        "n_features": res.n_features,
        # the convergence check's numbers, so that ``info`` shows them without the draws
        "convergence": res.convergence()._asdict(),
    }
    meta = dict(group.attrs.get("dask_bid", {}))
    meta.update({"format_version": FORMAT_VERSION, "result_params": jsonable(res.params),
                 "summary": jsonable(summary), ALL_CHUNKS: True,
                 # which arrays the result has (C, written before, among them): a whole
                 # array deleted left no chunk file to miss, and read as "complete"
                 RESULT_ARRAYS: written})
    meta.update(jsonable(extra_attrs or {}))
    group.attrs["dask_bid"] = meta


def write_batched(mem, store, prefix, *, root=True):
    """Copy the Zarr group ``mem`` (made in a ``MemoryStore``) to ``prefix`` of ``store``
    as concurrent puts: the arrays and chunks first, then the groups' metadata, the group
    itself last (its attributes mark what it holds complete); ``root=False`` leaves its
    ``zarr.json`` out (the target group keeps its own metadata and attributes). On object
    storage each Zarr node made in place cost about a dozen requests (existence checks
    of its parents and of v2 keys, a listing): this is one put per object."""
    import asyncio

    from zarr.core.buffer import default_buffer_prototype
    from zarr.core.sync import sync

    prefix = f"{prefix}/" if prefix else ""
    src, proto = mem.store, default_buffer_prototype()

    def is_group(key, value):
        return key.rpartition("/")[2] == "zarr.json" and \
            json.loads(value.to_bytes()).get("node_type") == "group"

    async def copy():
        keys = [k async for k in src.list()]
        values = await asyncio.gather(*(src.get(k, prototype=proto) for k in keys))
        items = dict(zip(keys, values, strict=True))
        top = items.pop("zarr.json")
        groups = {k: v for k, v in items.items() if is_group(k, v)}
        await asyncio.gather(*(store.set(prefix + k, v) for k, v in items.items()
                               if k not in groups))
        await asyncio.gather(*(store.set(prefix + k, v) for k, v in groups.items()))
        if root:
            await store.set(prefix + "zarr.json", top)

    sync(copy())


def _write_result_arrays(group, res, w_chunk_cols):
    """The arrays of :func:`write_result` into ``group``; returns the result's arrays."""
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
    return _result_arrays(group)


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
    import zarr

    from .._errors import CorruptStoreError, OutputLockedError, StoreNotFoundError

    path = local_path(path)
    storage_options = url_options(path, storage_options)
    if not is_url(path) and not os.path.exists(path):
        raise StoreNotFoundError(f"no dask_bid result at {path!r}: the path does not exist.")
    if is_url(path):  # a missing bucket, no credentials, an endpoint that does not answer
        from .remote import check_bucket

        check_bucket(path, storage_options, what="the result")
        if not _exists(path, storage_options):  # as for a local path (it was "corrupt")
            raise StoreNotFoundError(f"no dask_bid result at {path!r}: nothing is stored "
                                     "there.")
    try:
        g = zarr.open_group(path, mode="r", storage_options=storage_options)
        meta = g.attrs["dask_bid"]
    except Exception as exc:
        # what it is instead, in words (zarr's exception names told a user nothing)
        what = {"GroupNotFoundError": "no Zarr group there",
                "ContainsArrayError": "a Zarr array, perhaps an input matrix",
                "KeyError": "a Zarr group without dask_bid's attributes",
                "JSONDecodeError": "its zarr.json is not valid JSON: a damaged store"}.get(
                    type(exc).__name__, type(exc).__name__)
        raise CorruptStoreError(
            f"{path!r} is not a dask_bid output group ({what}): pass the out= of a fit "
            "(dask-bid fit --out).") from exc
    if not isinstance(meta, dict) or meta.get("status") != "complete":
        status, detail = output_status(path, meta if isinstance(meta, dict) else {},
                                       storage_options=storage_options)
        detail = str(detail).rstrip(".")
        # the resume takes the parameters it was started with: n_iter above all, which a
        # continuation of a finished fit raised (the default would be refused)
        p = meta.get("params") if isinstance(meta, dict) else None
        p = p if isinstance(p, dict) else {}
        same = ", ".join(f"{k}={p[k]}" for k in ("n_iter", "n_chains") if p.get(k) is not None)
        resumable = ""
        if status == "failed":
            from .checkpoint import saved_iterations

            with contextlib.suppress(Exception):
                saved = saved_iterations(g)
                if any(saved.values()):  # a failure after a checkpoint: a resume goes on
                    resumable = (", or continue it from its last checkpoint (iteration "
                                 f"{max(saved.values())}) with resume=True and the "
                                 f"parameters it was started with ({same}, ...)")
        hint = {"failed": f"it failed: {detail}. Fix the cause and fit again (overwrite=True)"
                          + resumable,
                "running": f"it is still running ({detail})",
                "interrupted": "it was stopped before the end; continue it with resume=True"
                               + (f" and the parameters it was started with ({same}, ...)"
                                  if same else "")
                }.get(status, f"status {status!r}")
        if status == "running":  # nothing is damaged: another process holds it
            raise OutputLockedError(f"the fit at {path!r} did not finish: {hint}; open it "
                                    "once it has.")
        raise CorruptStoreError(f"the fit at {path!r} did not finish: {hint}.")
    s = meta.get("summary") if isinstance(meta.get("summary"), dict) else {}
    if meta.get(ALL_CHUNKS):
        missing = missing_result_chunks(g, meta.get(RESULT_ARRAYS))
        if missing:
            raise CorruptStoreError(
                f"{path!r} is a damaged dask_bid result: {len(missing)} chunk file(s) are "
                f"missing ({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}), "
                "which would read as zeros; restore them, or fit again with overwrite=True.")
    try:
        return _read_complete(g, meta, s, path, storage_options)
    except Exception as exc:
        # the array at fault, read again on the error path only, to name it
        bad = undecodable_arrays(g, first=True)
        raise CorruptStoreError(
            f"{path!r} is an incomplete or damaged dask_bid result"
            f"{f', array {bad[0][0]!r}' if bad else ''} ({type(exc).__name__}: {exc}); "
            "restore it from a copy, or fit again with overwrite=True.") from exc


def undecodable_arrays(g, skip=(), *, max_bytes=None, first=False) -> list:
    """(path, exception) of the arrays of a result group (``W``, ``traces/mse``, ...;
    those in ``skip`` aside) whose chunks do not decode, each read whole; none when they
    hold more than ``max_bytes`` together or cannot be listed; ``first``: the first
    only."""
    try:
        names = [a for a in _result_arrays(g) if a not in skip]
        if max_bytes is not None and sum(int(g[a].nbytes) for a in names) > max_bytes:
            return []
    except Exception:
        return []
    bad = []
    for name in names:
        try:
            g[name][...]
        except Exception as exc:
            bad.append((name, exc))
            if first:
                break
    return bad


def _result_arrays(g) -> list[str]:
    """The arrays of a result group, by path (``C``, ``W``, ``traces/mse``, ...)."""
    out = []
    for sub in ("", "traces", "draws"):
        node = g if not sub else g[sub] if sub in g else None
        if node is not None:
            out += [f"{sub + '/' if sub else ''}{name}" for name in sorted(node.array_keys())]
    return out


def missing_result_chunks(g, expected=None) -> list[str]:
    """The chunk files missing from a result group's arrays (``W/c/0/0``, ...), its
    checkpoints aside, and the arrays of ``expected`` (``meta[RESULT_ARRAYS]``, the ones
    written) missing whole (``columns (the whole array)``). Only meaningful for a result
    written with every chunk (``meta[ALL_CHUNKS]``): before, Zarr left out chunks equal
    to the fill value."""
    from .inputs import missing_chunks

    present = _result_arrays(g)
    out = [f"{a} (the whole array)" for a in (expected or ()) if a not in present]
    for path in present:
        miss = missing_chunks(g[path]) or []
        out += [f"{path}/{k}" for k in miss]
    return out


def _num(x, kind=float, default=float("nan")):
    """A stored summary number (JSON may hold "nan", "inf", null or nothing)."""
    try:
        return kind(x) if kind is float else kind(float(x))
    except (TypeError, ValueError, OverflowError):
        return default


def _read_complete(g, meta, s, path, storage_options):
    from .result import BIDResult

    tr = g["traces"]
    n_chains, n_iter = tr["mse"].shape
    trace = np.empty((n_chains, n_iter), dtype=TRACE_DTYPE)
    for f in TRACE_DTYPE.names:
        trace[f] = tr[f][...]
    dr = g["draws"]
    draws_w = None
    if "w_columns" in dr:
        draws_w = {"columns": dr["w_columns"][...], "values": dr["w_values"][...]}
    n_samples = _num(s.get("n_samples"), int, g["C"].shape[0] if "C" in g else 0)
    res = BIDResult(
        columns=g["columns"][...], components=g["W"][...], components_sd=g["W_sd"][...],
        sigma2=_num(s.get("sigma2")), inclusion_probability=g["inclusion_probability"][...],
        trace=trace, draws_columns=dr["columns"][...], draws_sigma2=dr["sigma2"][...],
        draws_sse=dr["sse"][...], n_draws_point=_num(s.get("n_draws_point"), int, 0),
        mse=_num(s.get("mse")),
        mse_observed=None if s.get("mse_observed") is None else _num(s["mse_observed"]),
        max_abs_w=_num(s.get("max_abs_w")), n_passes=_num(s.get("n_passes"), int, 0),
        elapsed=_num(s.get("elapsed"), float, 0.0),
        n_samples=n_samples,
        n_features=_num(s.get("n_features"), int, g["W"].shape[1]),
        params=dict(meta["result_params"]) if isinstance(meta.get("result_params"), dict)
        else {}, draws_w=draws_w,
        feature_names=valid_column_names(meta.get("feature_names"), g["W"].shape[1]),
        sample_names=valid_column_names(meta.get("sample_names"), n_samples),
        continued_from=_num(meta.get("continued_from"), int, None),
        continued_from_chains=_num(meta.get("continued_from_chains"), int, None))
    res.C = result_columns(path, storage_options, g["C"]) if "C" in g else None
    return res


#: Attribute of a result's C: an id of the fit run that wrote it (a fresh one each run)
RUN_ATTR = "dask_bid_run"


class _ResultC:
    """C of a result group, read lazily chunk by chunk, refusing a C that another run
    wrote there since this result was read or returned: a result object kept in a
    notebook while the same ``out`` was fitted again (``overwrite=True``) showed the new
    fit's columns beside its own W, without a word."""

    def __init__(self, group_path, storage_options, z):
        self.path = group_path.rstrip("/") + "/C"
        self.storage_options = storage_options
        self.run = z.attrs.get(RUN_ATTR)
        self.shape, self.dtype, self.chunks = tuple(z.shape), z.dtype, tuple(z.chunks)
        self.ndim = len(self.shape)

    def __getitem__(self, key):
        import zarr

        from .._errors import ResultReplacedError

        try:
            z = zarr.open_array(self.path, mode="r", storage_options=self.storage_options)
            run = z.attrs.get(RUN_ATTR)
        except Exception:  # removed, or not an array any more
            z, run = None, object()
        group = self.path.rsplit("/", 1)[0]
        if z is None and not is_url(group) and not os.path.exists(group):
            from .._errors import StoreNotFoundError

            # deleted, not replaced: "read it again" would fail too
            raise StoreNotFoundError(
                f"the result's output {group!r} no longer exists: its C (the selected "
                "columns of A) went with it. columns_, W and the summaries are still in "
                "memory; A[:, columns_] gives C from the input.")
        if run != self.run:
            raise ResultReplacedError(
                f"the result at {group!r} was written by another fit "
                "after this result was read (overwrite, or a resume that extended it): its "
                "C is no longer this result's. Read it again: "
                "dask_bid.open_result(path) (or read_result).")
        return z[key]


def result_columns(group_path, storage_options, z):
    """The lazy dask array of a result's C (``z``, its Zarr array) guarded by
    :class:`_ResultC`."""
    import dask.array as da

    src = _ResultC(local_path(group_path), url_options(group_path, storage_options), z)
    # named by its run (a C without one, written before runs were marked: a fresh name)
    name = f"dask_bid-C-{src.run}" if src.run else False
    return da.from_array(src, chunks=src.chunks, asarray=True, lock=False, name=name,
                         meta=np.empty((0, 0), dtype=src.dtype))
