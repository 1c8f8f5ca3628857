"""The checkpoint folder of a fit without ``out=``: a temporary folder under a lease.

A fit without ``out=`` still checkpoints (a lost worker is recovered from them) into
``<tmp>/dask_bid-ckpt-XXXXXXXX``, removed when the fit ends, whatever the outcome. A process
killed outright (SIGKILL, the OOM killer) cannot remove it, and such a folder can hold
gigabytes. So the folder is held under a lease (:class:`~dask_bid.engine.lock.OutputLock`,
``<folder>.dask_bid.lock`` beside it), and every fit without ``out=`` first removes the
folders whose lease it can take over: their owner is gone (its ``flock`` released by the
kernel, or its pid dead on this host, or its heartbeat stale). A folder without a lease file,
or whose lease file holds no lease yet (made by another program, or one being created this
instant, between its owner's creating the file and locking it), is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time

from .._errors import OutputLockedError
from .lock import OutputLock, lock_path, read_lease

__all__ = ["CHECKPOINT_PREFIX", "scratch_checkpoints", "sweep_stale_checkpoints"]

log = logging.getLogger("dask_bid.engine")

#: The name prefix of the temporary checkpoint folders.
CHECKPOINT_PREFIX = "dask_bid-ckpt-"
_LOCK_SUFFIX = ".dask_bid.lock"


#: Seconds a lease file may hold no lease before its folder counts as left behind.
EMPTY_LEASE_GRACE_S = 3600


def _age(path) -> float:
    try:
        return time.time() - os.path.getmtime(path)
    except OSError:
        return 0.0


def sweep_stale_checkpoints(tmp=None) -> list[str]:
    """Remove the checkpoint folders of dead fits in ``tmp`` (default: the temporary
    folder); returns their paths."""
    tmp = tempfile.gettempdir() if tmp is None else os.fspath(tmp)
    try:
        names = os.listdir(tmp)
    except OSError:
        return []
    removed = []
    for name in sorted(names):
        path = os.path.join(tmp, name)
        if (not name.startswith(CHECKPOINT_PREFIX) or name.endswith(_LOCK_SUFFIX)
                or not os.path.isdir(path) or not os.path.isfile(lock_path(path))):
            continue
        if read_lease(lock_path(path)) is None and _age(lock_path(path)) < EMPTY_LEASE_GRACE_S:
            # a lease file with no lease yet: its owner has created it and is about to
            # lock it (the owner writes the lease after its flock). Taking it over here
            # made that live fit fail, "being written by another fit" (seen in the suite);
            # one left empty for an hour is of a process killed in that instant
            continue
        lock = OutputLock(path)
        try:
            lock.acquire()
        except (OutputLockedError, OSError):
            continue  # a live fit holds it (or it cannot be judged): not ours to remove
        try:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        finally:
            lock.release()  # removes the lease file too
    if removed:
        log.info("removed %d checkpoint folder(s) left by killed fits: %s", len(removed),
                 ", ".join(removed))
    return removed


@contextlib.contextmanager
def scratch_checkpoints():
    """A fresh checkpoint folder under its lease, removed with its lease at the end;
    the stale folders of dead fits are removed first."""
    sweep_stale_checkpoints()
    path = tempfile.mkdtemp(prefix=CHECKPOINT_PREFIX)
    lock = OutputLock(path)
    try:
        lock.acquire()
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        lock.release()
