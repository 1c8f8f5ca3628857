"""Checkpoints of a chain: the client state and every block state, in a Zarr group.

A checkpoint of chain ``c`` at iteration ``t`` is the subgroup
``checkpoint/c{c}-it{t:08d}`` of the output group (or of a temporary group when the fit has
no ``out``), holding one state group per block (``block_00000`` ...), written by the worker
that holds the block, and ``client`` (the ``ClientState`` with ``norm_a2`` and ``n_obs``),
written last by the client. ``client.attrs["complete"]`` marks a checkpoint whose every part
is on disk, so a process killed while writing one leaves the previous one usable. The two
most recent complete checkpoints of each chain are kept.

Every state is stored by :mod:`dask_bid.engine.serialize`: Zarr arrays of numbers and JSON
attributes with digests, versioned; nothing is ever unpickled, so resuming an output
written by someone else cannot run their code. Restoring gives the very same floats and so,
the random streams being counter based, the very same continuation. A checkpoint that
cannot be read back (damaged file, digest mismatch, older pickled format) is skipped with a
warning, and the newest valid one is used instead.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings

from .._errors import CheckpointError, CheckpointFallbackWarning
from .._files import local_path
from .._warn import warn
from .serialize import load_state, save_state

__all__ = ["StoreSpec", "Checkpointer", "save_blob", "load_blob", "checkpoint_name",
           "saved_iterations", "CheckpointFallbackWarning", "quiet_listing"]

_NAME = re.compile(r"^c(\d+)-it(\d+)$")
log = logging.getLogger("dask_bid.engine")


class StoreSpec:
    """Where a Zarr group lives: root path or URL and fsspec options (picklable)."""

    def __init__(self, root, storage_options=None):
        # a local folder by its absolute path: the spec travels to the Dask workers, which
        # resolved a relative one against their own working folder
        self.root = str(root) if "://" in str(root) else os.path.abspath(str(root))
        # a local checkpoint store of a fit whose input is on object storage: no options
        self.storage_options = (dict(storage_options) if storage_options and not self.local
                                else None)

    @property
    def local(self) -> bool:
        """Whether the group is a directory of this machine (a path or a file:// URL)."""
        return "://" not in local_path(self.root)

    def __repr__(self):
        return f"StoreSpec({self.root!r})"

    def group(self, mode="r+"):
        import zarr

        if self.local and not os.path.isdir(local_path(self.root)):
            import socket

            from .._errors import StoreNotFoundError

            # a Dask worker that cannot see the client's folder (another machine, a
            # private mount) said only "... does not exist", of a folder the client made
            raise StoreNotFoundError(
                f"the output {self.root!r} is not visible from the process that writes to "
                f"it (pid {os.getpid()} on {socket.gethostname()!r}, working folder "
                f"{os.getcwd()!r}; a Dask worker on a cluster, which writes the checkpoints "
                "and C): every Dask worker must see the client's local paths (a shared file "
                "system), or write the output to object storage.")
        # zarr_format=3: the output is always a v3 group; left to guess, zarr also looked
        # for v2 keys, 8 requests an open on object storage instead of 2
        return zarr.open_group(self.root, mode=mode, storage_options=self.storage_options,
                               zarr_format=3)


def checkpoint_name(chain: int, iteration: int) -> str:
    return f"c{chain}-it{iteration:08d}"


@contextlib.contextmanager
def quiet_listing():
    """List a checkpoint group without zarr's warning about a member folder that holds
    no metadata yet (or any more): a checkpoint being written or pruned by the running
    fit, which ``info`` reading it showed as "dask-bid: warning: Object at c0-it... is not
    recognized as a component of a Zarr hierarchy"."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Object at .* is not recognized as a "
                                                  r"component of a Zarr hierarchy")
        yield


def saved_iterations(group) -> dict[int, int]:
    """Chain -> the iterations its newest complete checkpoint in ``group`` (an output
    group, opened) holds: where a resume continues that chain from. A chain without one
    is absent (it starts again from its start)."""
    out = {}
    if "checkpoint" not in group:
        return out
    meta = group.attrs.get("dask_bid")
    run_id = meta.get("run_id") if isinstance(meta, dict) else None
    with quiet_listing():
        names = list(group["checkpoint"].group_keys())
    for name in names:
        m = _NAME.match(name)
        if not m or int(m.group(2)) <= out.get(int(m.group(1)), -1):
            continue
        try:
            attrs = group[f"checkpoint/{name}/client"].attrs
            # another fit's (a delete an object store refused) is not where a resume goes on
            theirs = attrs.get("run_id")
            if attrs.get("complete", False) and not (run_id and theirs and theirs != run_id):
                out[int(m.group(1))] = int(m.group(2))
        except KeyError:  # a checkpoint whose writing was cut off: not one to resume from
            continue
    return dict(sorted(out.items()))


def save_blob(spec: StoreSpec, path: str, obj, attrs=None) -> int:
    """Write ``obj`` (a chain or block state) as the state group ``path``, with the group
    attributes ``attrs``; returns its bytes."""
    parent, _, name = path.rpartition("/")
    g = spec.group()
    return save_state(g[parent] if parent else g, name, obj, attrs)


def load_blob(spec: StoreSpec, path: str):
    """Read back what :func:`save_blob` wrote (raises :class:`~dask_bid.CheckpointError`)."""
    try:
        g = spec.group(mode="r")
    except Exception as exc:
        raise CheckpointError(f"cannot open the checkpoint store {spec.root!r} "
                              f"({type(exc).__name__}: {exc})") from exc
    parent, _, name = path.rpartition("/")
    try:
        node = g[parent] if parent else g
    except Exception as exc:
        raise CheckpointError(f"no checkpoint at {path!r}") from exc
    return load_state(node, name)


def warn_fallback(message: str):
    """Say that a checkpoint was skipped: a warning (the engine's log keeps it at INFO:
    as a WARNING it was said twice, the second time raw)."""
    log.info("%s", message)
    warn(message, CheckpointFallbackWarning)


class Checkpointer:
    """Writes and finds the checkpoints of every chain under ``spec``'s ``checkpoint/``."""

    def __init__(self, spec: StoreSpec, keep: int = 2, create: bool = True, run_id=None):
        self.spec = spec
        self.keep = keep
        #: the id of the fit these checkpoints belong to (the output's ``run_id``): one
        #: of another fit at this path (left by an overwrite whose deletes an object
        #: store refused) is never taken for this one's. None: written before ids.
        self.run_id = run_id
        #: called before each checkpoint is written (the fit's check that its input
        #: store did not change: it raises, and nothing is written)
        self.before_save = None
        if create:
            g = spec.group()
            if "checkpoint" not in g:
                g.require_group("checkpoint")

    def _names(self):
        """Names under ``checkpoint/``. A local store is listed as a directory: zarr's
        listing opens every entry, and warns (ZarrUserWarning) about the temporary file
        of a metadata write in progress (``zarr.<hex>.partial``), which another chain's
        thread may be making at that moment. Only checkpoint names are kept anyway."""
        if self.spec.local:
            path = os.path.join(local_path(self.spec.root), "checkpoint")
            try:
                return [n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n))]
            except FileNotFoundError:
                return []
        # on object storage one listing of the keys under checkpoint/ (zarr's group_keys
        # also read every member's metadata: a request or two per checkpoint)
        from zarr.core.sync import sync

        g = self.spec.group(mode="r")
        prefix = f"{g.path}/checkpoint" if g.path else "checkpoint"

        async def names():
            return [k async for k in g.store.list_dir(prefix)]

        return [n for n in sync(names()) if _NAME.match(n)]

    def _list(self, chain):
        out = []
        for name in self._names():
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
        if self.before_save is not None:
            self.before_save()
        name = checkpoint_name(chain, state.iteration)
        g = self.spec.group()
        if f"checkpoint/{name}" in g:
            # left by an earlier run (a chain restarted from its start): replaced whole, so
            # that no part of it passes for part of this one
            del g[f"checkpoint/{name}"]
        g.require_group(f"checkpoint/{name}")
        backend.save_blocks(self.spec, f"checkpoint/{name}")
        payload = {"state": state, "norm_a2": norm_a2, "n_obs": n_obs,
                   "n_blocks": len(backend.blocks), "chain": chain, "run_id": self.run_id}
        # "complete" goes with the state's own attributes, written after everything else
        # (one write: a second would encode the state's JSON again)
        save_blob(self.spec, f"checkpoint/{name}/client", payload,
                  {"complete": True, "run_id": self.run_id})
        return name

    def prune(self, chain, keep=None):
        """Delete all but the ``keep`` (default: ``self.keep``) most recent complete
        checkpoints of ``chain``."""
        listed = self._list(chain)
        complete = [n for _, n in listed if self._complete(n)]
        n = self.keep if keep is None else int(keep)
        if n < 1:  # complete[-0:] would keep them all
            raise ValueError(f"keep must be at least 1, got {n}: remove_all() deletes every "
                             "checkpoint")
        keep = set(complete[-n:])
        g = self.spec.group()
        for _, n in listed:
            if n not in keep and (not complete or n < complete[-1]):
                del g[f"checkpoint/{n}"]

    def candidates(self, chain):
        """``(name, payload)`` of the complete checkpoints of ``chain``, newest first.

        A checkpoint whose client state cannot be read back is skipped with a
        :class:`CheckpointFallbackWarning` naming it and the reason.
        """
        for _, name in reversed(self._list(chain)):
            if not self._complete(name):
                continue
            try:
                payload = load_blob(self.spec, f"checkpoint/{name}/client")
                if not isinstance(payload, dict) or "state" not in payload:
                    raise CheckpointError("its client state is not a chain checkpoint")
                if self.run_id is not None and payload.get("run_id") != self.run_id:
                    raise CheckpointError("it belongs to another fit written at this path "
                                          "(one whose deletion failed)")
            except CheckpointError as exc:
                warn_fallback(f"checkpoint {name} of {self.spec.root!r} cannot be read back "
                              f"({exc}); trying an older one")
                continue
            yield name, payload

    def has_any(self, chain) -> bool:
        """Whether ``chain`` has any checkpoint on disk (readable or not)."""
        return bool(self._list(chain))

    def latest(self, chain):
        """``(name, payload)`` of the newest readable complete checkpoint, or None."""
        return next(iter(self.candidates(chain)), None)

    def remove_all(self):
        g = self.spec.group()
        if "checkpoint" in g:
            del g["checkpoint"]
            if not self.spec.local and "checkpoint" in self.spec.group(mode="r"):
                # an object store that refuses deletes (Zarr's delete drops the refusals)
                warn(f"the checkpoints of {self.spec.root!r} could not be deleted (the store "
                     "refused the deletes): they stay, and take their space.",
                     RuntimeWarning)
