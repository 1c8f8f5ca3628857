"""Chain state as Zarr arrays and JSON: the checkpoint format, never a pickle.

A checkpointed object (a chain's ``ClientState``, a block's ``BlockState``, or anything
they hold) is written to a Zarr group as

- ``attrs["dask_bid_state"]``: ``{"format", "version", "tree", "buffers"}``. ``tree`` is the
  object's structure in JSON with a type tag per node (numbers as exact strings: integers
  in decimal, floats as ``float.hex``), arrays replaced by references ``(dtype, offset,
  shape)`` into the buffers; ``buffers`` gives every buffer's length and BLAKE2b digest;
- one flat 1-D Zarr array per dtype (``f8``, ``i8``, ``b1`` ...), the concatenated bytes of
  every array of that dtype (a few arrays per state whatever its size, so a checkpoint
  costs a handful of writes, not one per array).

A list or tuple whose items are all Python floats, all bools or all int64-sized ints, or
all numpy arrays of one dtype and shape (a chain's traces and retained draws, which grow
with every iteration), is stored as one array in the buffers (version 2), not as a JSON
node per item; one whose items are all tuples of one length is stored by position, each
position's items a list packed the same way (a block's retained (basis, W draw) pairs).
The JSON a checkpoint writes then stays small however long the chain, and the items come
back of the same Python types, bit for bit. Version 1 states (a JSON node per item) still
load.

Only these node types are decoded: None, bool, int, float, str, numpy scalars and numeric
arrays, tuple, list, set, dict (keys are nodes too, so tuples of ints and strings work),
numpy ``Generator`` / bit-generator states (integers), and the NamedTuples and dataclasses
of the dask_bid package (by module and name; :data:`STATE_TYPES` gives short names to the
chain's own), rebuilt by field name (a field the stored object lacks takes its default, so
states written before a field was added still load). Nothing outside dask_bid is imported
and no code of the file's is run; a digest or structure mismatch raises
:class:`~dask_bid.CheckpointError`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import numbers

import numpy as np

from .._errors import CheckpointError

__all__ = ["STATE_FORMAT", "STATE_VERSION", "STATE_TYPES", "register_state_type", "encode",
           "decode", "save_state", "load_state"]

STATE_FORMAT = "dask_bid.state"
STATE_VERSION = 2
#: versions this code reads (1: no packed lists)
_READS = (1, 2)
#: fewest items for a list to be packed into one array (a shorter one is cheaper as JSON)
_PACK_MIN = 4
_INT64 = (-(2**63), 2**63 - 1)
_ATTR = "dask_bid_state"
#: Bytes per chunk of a buffer array.
_CHUNK = 64 * 2**20
#: numpy bit generators whose state may be restored.
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")

#: name -> class of the NamedTuples / dataclasses a state may contain.
STATE_TYPES: dict[str, type] = {}


def register_state_type(cls):
    """Allow ``cls`` (a NamedTuple or a dataclass) in checkpoints; returns ``cls``."""
    if not (dataclasses.is_dataclass(cls) or hasattr(cls, "_fields")):
        raise TypeError(f"{cls.__name__} is neither a NamedTuple nor a dataclass")
    STATE_TYPES[cls.__name__] = cls
    return cls


def _register_defaults():
    if STATE_TYPES:
        return
    from ..kernels.block import BlockState, StepContext
    from ..kernels.priors import Priors
    from .chain import ChainOutput, ClientState

    for cls in (BlockState, StepContext, Priors, ClientState, ChainOutput):
        register_state_type(cls)


def _type_name(cls) -> str:
    """How a record type is named in a checkpoint: its registered name, or
    ``module:qualname`` for a NamedTuple / dataclass of the dask_bid package."""
    if STATE_TYPES.get(cls.__name__) is cls:
        return cls.__name__
    if cls.__module__.split(".")[0] == "dask_bid" and "<" not in cls.__qualname__:
        return f"{cls.__module__}:{cls.__qualname__}"
    raise CheckpointError(f"cannot checkpoint a {cls.__name__}: only NamedTuples and "
                          "dataclasses of dask_bid are state types")


def _type_of(name: str):
    """The record type ``name`` names; only dask_bid's own NamedTuples and dataclasses
    (importing a dask_bid module is all a checkpoint can make happen)."""
    cls = STATE_TYPES.get(name)
    if cls is not None:
        return cls
    module, _, qual = str(name).partition(":")
    if module.split(".")[0] != "dask_bid" or not qual:
        raise CheckpointError(f"unknown state type {name!r} in a checkpoint")
    import importlib

    try:
        cls = importlib.import_module(module)
        for part in qual.split("."):
            cls = getattr(cls, part)
    except (ImportError, AttributeError) as exc:
        raise CheckpointError(f"unknown state type {name!r} in a checkpoint") from exc
    is_record = isinstance(cls, type) and (
        dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields")))
    if not is_record:
        raise CheckpointError(f"{name!r} in a checkpoint is not a state type")
    return cls


def _dtype_ok(dt: np.dtype) -> bool:
    return dt.kind in "biufc" and not dt.hasobject and dt.fields is None


class _Writer:
    def __init__(self):
        self.parts: dict[str, list[bytes]] = {}
        self.sizes: dict[str, int] = {}

    def array(self, a: np.ndarray):
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if not _dtype_ok(dt):
            raise CheckpointError(f"cannot checkpoint an array of dtype {a.dtype}")
        name = dt.str.lstrip("<|=")
        data = np.ascontiguousarray(a, dtype=dt).tobytes()
        off = self.sizes.get(name, 0)
        self.parts.setdefault(name, []).append(data)
        self.sizes[name] = off + len(data)
        return {"t": "ndarray", "buf": name, "off": off, "shape": [int(s) for s in a.shape]}


def _float(x: float) -> str:
    return float(x).hex()


def _packed(seq, w: _Writer):
    """The node of ``seq`` (a list or tuple) as one array, or None if its items are not
    all of one packable kind. Exact types only (``type(x) is float``): a numpy scalar or
    a bool among ints keeps the generic form, so that every item decodes to its type."""
    if len(seq) < _PACK_MIN:
        return None
    kind = "tuple" if isinstance(seq, tuple) else "list"
    first = type(seq[0])
    if first in (float, bool, int) and all(type(x) is first for x in seq):
        if first is int and not all(_INT64[0] <= x <= _INT64[1] for x in seq):
            return None
        dtype = {float: np.float64, bool: np.bool_, int: np.int64}[first]
        node = w.array(np.array(seq, dtype=dtype))
        node.update(t="packed", kind=kind, item=first.__name__)
        return node
    if first is tuple:
        # records of one length (a block's retained draws: (basis, W draw) pairs): stored
        # by position, each position's items a list that packs in its turn
        width = len(seq[0])
        if width == 0 or not all(type(x) is tuple and len(x) == width for x in seq):
            return None
        return {"t": "zip", "kind": kind, "n": len(seq),
                "columns": [encode(list(col), w) for col in zip(*seq, strict=True)]}
    if first is np.ndarray:
        a0 = seq[0]
        if not _dtype_ok(a0.dtype) or not all(
                type(x) is np.ndarray and x.dtype == a0.dtype and x.shape == a0.shape
                for x in seq):
            return None
        node = w.array(np.stack(seq))
        node.update(t="packed", kind=kind, item="ndarray")
        return node
    return None


def encode(obj, w: _Writer):
    """The JSON tree of ``obj`` (arrays go to ``w``)."""
    _register_defaults()
    if obj is None:
        return {"t": "none"}
    if isinstance(obj, np.ndarray):
        return w.array(obj)
    if isinstance(obj, np.generic):
        if not _dtype_ok(obj.dtype):
            raise CheckpointError(f"cannot checkpoint a numpy scalar of dtype {obj.dtype}")
        node = w.array(np.asarray(obj))
        node["t"] = "npscalar"
        return node
    if isinstance(obj, bool):
        return {"t": "bool", "v": obj}
    if isinstance(obj, numbers.Integral):
        return {"t": "int", "v": str(int(obj))}
    if isinstance(obj, float):
        return {"t": "float", "v": _float(obj)}
    if isinstance(obj, str):
        return {"t": "str", "v": obj}
    if isinstance(obj, np.random.Generator):
        return {"t": "generator", "state": encode(obj.bit_generator.state, w)}
    if isinstance(obj, np.random.BitGenerator):
        return {"t": "bitgen", "state": encode(obj.state, w)}
    name = type(obj).__name__
    if hasattr(obj, "_fields") and isinstance(obj, tuple):
        return {"t": "record", "cls": _type_name(type(obj)),
                "fields": {f: encode(getattr(obj, f), w) for f in obj._fields}}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {"t": "record", "cls": _type_name(type(obj)),
                "fields": {f.name: encode(getattr(obj, f.name), w)
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, (set, frozenset)):
        return {"t": "set" if isinstance(obj, set) else "frozenset",
                "items": [encode(x, w) for x in obj]}
    if isinstance(obj, (tuple, list)):
        node = _packed(obj, w) if type(obj) in (tuple, list) else None
        if node is not None:
            return node
        return {"t": "tuple" if isinstance(obj, tuple) else "list",
                "items": [encode(x, w) for x in obj]}
    if isinstance(obj, dict):
        return {"t": "dict", "items": [[encode(k, w), encode(v, w)] for k, v in obj.items()]}
    raise CheckpointError(f"cannot checkpoint an object of type {name}")


class _Reader:
    def __init__(self, buffers: dict[str, bytes]):
        self.buffers = buffers

    def array(self, node):
        name = node["buf"]
        dt = np.dtype("<" + name if name[0] not in "b?" else name)
        if not _dtype_ok(dt):
            raise CheckpointError(f"unsupported dtype {name!r} in a checkpoint")
        shape = tuple(int(s) for s in node["shape"])
        off = int(node["off"])
        n = math.prod(shape) * dt.itemsize
        buf = self.buffers.get(name)
        if buf is None or off < 0 or off + n > len(buf):
            raise CheckpointError("a checkpoint array lies outside its buffer")
        # a fresh, aligned, writable array of its own, as the kernels expect
        return np.frombuffer(buf, dtype=dt, count=math.prod(shape), offset=off) \
            .reshape(shape).copy()


def decode(node, r: _Reader):
    """The object the JSON tree ``node`` describes."""
    _register_defaults()
    try:
        t = node["t"]
        if t == "none":
            return None
        if t == "bool":
            return bool(node["v"])
        if t == "int":
            return int(str(node["v"]))
        if t == "float":
            return float.fromhex(str(node["v"]))
        if t == "str":
            return str(node["v"])
        if t == "ndarray":
            return r.array(node)
        if t == "npscalar":
            return r.array(node)[()]
        if t == "packed":
            a = r.array(node)
            item = node["item"]
            if item == "ndarray":
                # each its own fresh array, as the unpacked form gives
                items = [np.array(x) for x in a]
            elif item in ("float", "bool", "int") and a.ndim == 1:
                items = a.tolist()  # Python floats, bools, ints: the same values, exactly
            else:
                raise CheckpointError(f"unknown packed item type {item!r} in a checkpoint")
            return _sequence(node, items)
        if t == "zip":
            n = int(node["n"])
            columns = [decode(c, r) for c in node["columns"]]
            if not columns or any(type(c) is not list or len(c) != n for c in columns):
                raise CheckpointError("a checkpoint's zipped list has columns of another "
                                      "length")
            return _sequence(node, list(zip(*columns, strict=True)))
        if t == "tuple":
            return tuple(decode(x, r) for x in node["items"])
        if t == "list":
            return [decode(x, r) for x in node["items"]]
        if t == "dict":
            return {decode(k, r): decode(v, r) for k, v in node["items"]}
        if t in ("set", "frozenset"):
            items = [decode(x, r) for x in node["items"]]
            return set(items) if t == "set" else frozenset(items)
        if t in ("generator", "bitgen"):
            state = decode(node["state"], r)
            name = state.get("bit_generator") if isinstance(state, dict) else None
            if name not in _BIT_GENERATORS:
                raise CheckpointError(f"unknown bit generator {name!r} in a checkpoint")
            bg = getattr(np.random, name)()
            bg.state = state
            return np.random.Generator(bg) if t == "generator" else bg
        if t == "record":
            cls = _type_of(node["cls"])
            fields = {k: decode(v, r) for k, v in node["fields"].items()}
            known = (set(cls._fields) if hasattr(cls, "_fields")
                     else {f.name for f in dataclasses.fields(cls)})
            extra = set(fields) - known
            if extra:
                raise CheckpointError(
                    f"the checkpoint's {node['cls']} has fields {sorted(extra)} this version "
                    "does not know")
            return cls(**fields)
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointError(f"malformed checkpoint ({type(exc).__name__}: {exc})") from exc
    raise CheckpointError(f"unknown node type {t!r} in a checkpoint")


def _sequence(node, items: list):
    """``items`` as the list or tuple a packed or zipped ``node`` says it was."""
    kind = node["kind"]
    if kind not in ("list", "tuple"):
        raise CheckpointError(f"unknown packed kind {kind!r} in a checkpoint")
    return tuple(items) if kind == "tuple" else items


def save_state(group, name: str, obj, attrs=None) -> int:
    """Write ``obj`` as the subgroup ``name`` of the Zarr ``group``; returns its bytes.

    The attributes (with the digests) are written last, so a group without them is an
    incomplete write. ``attrs``: more attributes of the group, written in the same write
    (a second write would encode the state's JSON again).
    """
    import zarr

    w = _Writer()
    tree = encode(obj, w)
    if not _is_local(group.store):
        return _save_state_batched(group, name, w, tree, attrs)
    if name in group and not isinstance(group[name], zarr.Group):
        del group[name]  # e.g. a state of the older, pickled format
    _write_state(group.require_group(name), w, tree, attrs, overwrite=True)
    return sum(w.sizes.values())


def _write_state(g, w, tree, attrs, overwrite=False):
    """The buffers of ``w`` as arrays of the group ``g``, then its attributes."""
    buffers = {}
    for buf, parts in w.parts.items():
        data = np.frombuffer(b"".join(parts), dtype=np.uint8)
        n = int(data.size)
        arr = g.create_array(buf, shape=(n,), dtype=np.uint8,
                             chunks=(max(1, min(n, _CHUNK)),), compressors=None,
                             overwrite=overwrite)
        if n:
            arr[:] = data
        buffers[buf] = {"nbytes": n, "blake2b": hashlib.blake2b(data, digest_size=16)
                        .hexdigest()}
    # one metadata write, atomic on a local store (``attrs.update`` writes once per key:
    # a process killed between two writes would leave ``attrs`` marking a state that is
    # not there)
    g.update_attributes({**(attrs or {}), _ATTR: {"format": STATE_FORMAT,
                                                  "version": STATE_VERSION, "tree": tree,
                                                  "buffers": buffers}})


def _is_local(store) -> bool:
    from zarr.storage import LocalStore

    return isinstance(store, LocalStore)


def _save_state_batched(group, name, w, tree, attrs) -> int:
    """:func:`save_state` on object storage: the same Zarr group, made in memory and then
    written as a batch of concurrent puts (:func:`~dask_bid.engine.zarr_io.write_batched`;
    made node by node there, a checkpoint cost some 200 requests for its dozen objects).
    The group's ``zarr.json``, which holds the attributes marking the state complete, is
    written after everything else, as on a local store."""
    import zarr
    from zarr.storage import MemoryStore

    from .zarr_io import write_batched

    mem = zarr.open_group(MemoryStore(), mode="w", zarr_format=3)
    _write_state(mem, w, tree, attrs)
    if name in group:
        del group[name]  # replaced whole (an older format's, another run's): nothing stale
    write_batched(mem, group.store, f"{group.path}/{name}" if group.path else name)
    return sum(w.sizes.values())


def load_state(group, name: str):
    """Read back what :func:`save_state` wrote, checking versions and digests.

    Raises
    ------
    CheckpointError
        The group is missing, incomplete, of another format or version, or damaged.
    """
    try:
        g = group[name]
        meta = g.attrs.get(_ATTR)
    except Exception as exc:  # missing group, unreadable metadata
        raise CheckpointError(f"cannot open {name!r} ({type(exc).__name__}: {exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != STATE_FORMAT:
        raise CheckpointError(f"{name!r} holds no dask_bid state (an incomplete write, or "
                              "the pickled format of older versions, which is never loaded)")
    if meta.get("version") not in _READS:
        raise CheckpointError(f"{name!r} is state format version {meta.get('version')!r}; "
                              f"this dask_bid reads versions {', '.join(map(str, _READS))}")
    buffers = {}
    try:
        for buf, info in meta["buffers"].items():
            data = np.asarray(g[buf][...], dtype=np.uint8)
            if (data.size != int(info["nbytes"])
                    or hashlib.blake2b(data, digest_size=16).hexdigest() != info["blake2b"]):
                raise CheckpointError(f"{name}/{buf} does not match its digest (damaged)")
            buffers[buf] = data.tobytes()
    except CheckpointError:
        raise
    except Exception as exc:  # undecodable chunk, missing array, malformed attributes
        raise CheckpointError(f"cannot read {name!r} ({type(exc).__name__}: {exc})") from exc
    return decode(meta["tree"], _Reader(buffers))
