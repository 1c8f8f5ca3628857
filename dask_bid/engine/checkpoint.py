"""Checkpoints of a chain: the client state and every block state, in a Zarr group.

A checkpoint of chain ``c`` at iteration ``t`` is the subgroup
``checkpoint/c{c}-it{t:08d}`` of the output group (or of a temporary group when the fit has
no ``out``), holding one ``uint8`` array per block (``block_00000`` ...), written by the worker
that holds the block, and ``client`` (the pickled ``ClientState`` with ``norm_a2`` and
``n_obs``), written last by the client. ``client.attrs["complete"]`` marks a checkpoint whose
every part is on disk, so a process killed while writing one leaves the previous one usable.
The two most recent complete checkpoints of each chain are kept.

The blobs are Python pickles of the in-memory objects: restoring gives the very same floats
and so, the random streams being counter based, the very same continuation. They are an
internal format tied to the dask_bid version recorded in the output attributes; load only
checkpoints you wrote.
"""

from __future__ import annotations

import pickle
import re

import numpy as np

__all__ = ["StoreSpec", "Checkpointer", "save_blob", "load_blob", "checkpoint_name"]

_BLOB_CHUNK = 64 * 2**20
_NAME = re.compile(r"^c(\d+)-it(\d+)$")


class StoreSpec:
    """Where a Zarr group lives: root path or URL and fsspec options (picklable)."""

    def __init__(self, root, storage_options=None):
        self.root = str(root)
        self.storage_options = dict(storage_options) if storage_options else None

    def __repr__(self):
        return f"StoreSpec({self.root!r})"

    def group(self, mode="r+"):
        import zarr

        return zarr.open_group(self.root, mode=mode, storage_options=self.storage_options)


def checkpoint_name(chain: int, iteration: int) -> str:
    return f"c{chain}-it{iteration:08d}"


def save_blob(spec: StoreSpec, path: str, obj) -> int:
    """Pickle ``obj`` into the uint8 array ``path`` of the group; returns its size."""
    blob = pickle.dumps(obj, protocol=5)
    data = np.frombuffer(blob, dtype=np.uint8)
    g = spec.group()
    n = max(1, data.size)
    arr = g.create_array(path, shape=(data.size,), dtype=np.uint8,
                         chunks=(min(n, _BLOB_CHUNK),), compressors=None, overwrite=True)
    if data.size:
        arr[:] = data
    return int(data.size)


def load_blob(spec: StoreSpec, path: str):
    g = spec.group(mode="r")
    return pickle.loads(np.asarray(g[path][...]).tobytes())


class Checkpointer:
    """Writes and finds the checkpoints of every chain under ``spec``'s ``checkpoint/``."""

    def __init__(self, spec: StoreSpec, keep: int = 2):
        self.spec = spec
        self.keep = keep
        g = spec.group()
        g.require_group("checkpoint")

    def _list(self, chain):
        g = self.spec.group(mode="r")
        if "checkpoint" not in g:
            return []
        out = []
        for name in g["checkpoint"].group_keys():
            m = _NAME.match(name)
            if m and int(m.group(1)) == chain:
                out.append((int(m.group(2)), name))
        return sorted(out)

    def _complete(self, name):
        g = self.spec.group(mode="r")
        try:
            return bool(g[f"checkpoint/{name}/client"].attrs.get("complete", False))
        except KeyError:
            return False

    def save(self, backend, state, chain, norm_a2, n_obs):
        """Write a checkpoint of ``state`` and the backend's blocks; returns its name."""
        name = checkpoint_name(chain, state.iteration)
        self.spec.group().require_group(f"checkpoint/{name}")
        backend.save_blocks(self.spec, f"checkpoint/{name}")
        payload = {"state": state, "norm_a2": norm_a2, "n_obs": n_obs,
                   "n_blocks": len(backend.blocks), "chain": chain}
        save_blob(self.spec, f"checkpoint/{name}/client", payload)
        g = self.spec.group()
        g[f"checkpoint/{name}/client"].attrs["complete"] = True
        return name

    def prune(self, chain):
        """Delete all but the ``keep`` most recent complete checkpoints of ``chain``."""
        listed = self._list(chain)
        complete = [n for _, n in listed if self._complete(n)]
        keep = set(complete[-self.keep:])
        g = self.spec.group()
        for _, n in listed:
            if n not in keep and (not complete or n < complete[-1]):
                del g[f"checkpoint/{n}"]

    def latest(self, chain):
        """``(name, payload)`` of the most recent complete checkpoint of ``chain``, or None."""
        for _, name in reversed(self._list(chain)):
            if self._complete(name):
                return name, load_blob(self.spec, f"checkpoint/{name}/client")
        return None

    def remove_all(self):
        g = self.spec.group()
        if "checkpoint" in g:
            del g["checkpoint"]
