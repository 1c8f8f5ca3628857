"""One writer per output: a lease file next to the output group.

A fit with ``out=`` holds ``<out>.dask_bid.lock`` (beside the output directory, so that
replacing the output never touches it) for as long as it runs. The file records the owner
(host, pid, start time) and a heartbeat the owner refreshes every
:data:`HEARTBEAT_SECONDS`. A second fit writing the same output is refused with
:class:`~dask_bid.OutputLockedError` naming the holder.

Two mechanisms, so that a lock is never left stuck and never taken twice:

- the file is ``flock``-ed while held: the kernel releases that when the owner dies, so a
  killed fit on this host never blocks the next one (where the system or file system has
  no ``flock``, the lease below decides alone);
- a lease found on disk is *stale* (taken over) when its owner is on this host and its pid
  is gone, or when its heartbeat is older than :data:`STALE_SECONDS` (owners on other hosts
  sharing the file system, where ``flock`` may not reach). Whether a lease of this host
  is held (``info``'s "running", the refusals) is asked of ``flock`` too: a killed
  fit's pid reused by another process is no holder.

The lease is removed when the fit ends, whatever the outcome. Outputs given as URLs
(object stores) are not locked: there is no portable atomic create there.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import threading
import time

from .._errors import OutputLocationError, OutputLockedError

__all__ = ["OutputLock", "lock_path", "read_lease", "lease_holder", "locked_error",
           "hold_for_reading", "refuse_if_read", "HEARTBEAT_SECONDS", "STALE_SECONDS"]

#: ``open`` flag that refuses a symbolic link as the file itself (0 where there is none)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

#: Seconds between heartbeats of a held lease.
HEARTBEAT_SECONDS = 10.0
#: A lease whose heartbeat is older than this is stale.
STALE_SECONDS = 120.0


def lock_path(out) -> str:
    """The lease file of output ``out``: ``<out>.dask_bid.lock`` beside it, in the folder
    its parents' symbolic links resolve to (two spellings of one folder, ``runs/r.zarr``
    and ``link-to-runs/r.zarr``, are one output with one lock)."""
    out = os.path.abspath(os.fspath(out)).rstrip(os.sep)
    parent, name = os.path.split(out)
    return os.path.join(os.path.realpath(parent), name) + ".dask_bid.lock"


def read_lease(path):
    """The lease recorded in ``path`` (a dict), or None when absent or unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.loads(fh.read() or "null")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _pid_alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _is_stale(lease, now=None) -> bool:
    now = time.time() if now is None else now
    if lease.get("host") == socket.gethostname() and not _pid_alive(lease.get("pid", -1)):
        return True
    try:
        return now - float(lease.get("heartbeat", 0.0)) > STALE_SECONDS
    except (TypeError, ValueError):
        return True


def describe(lease) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(lease.get("start", 0))))
    return (f"pid {lease.get('pid')} on host {lease.get('host')!r}, started {started}, "
            f"heartbeat {time.time() - float(lease.get('heartbeat', 0)):.0f} s ago")


def _flock_free(path):
    """Whether no process holds the ``flock`` of lease file ``path`` (True), one does
    (False), or it cannot be told (None: no ``flock`` here or on that file system)."""
    fcntl = fcntl_module()
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return False if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK) else None
    else:
        return True
    finally:
        os.close(fd)  # and with it the shared lock just taken


def lease_holder(out):
    """The live lease of output ``out`` (a dict, with ``"mine"``: whether this process
    holds it), or None when nobody holds it."""
    if "://" in str(out):
        return None
    path = lock_path(out)
    lease = read_lease(path)
    if lease is None or _is_stale(lease):
        return None
    # on this host the kernel's lock says it exactly: a killed fit whose pid was reused
    # by another process read as running until its heartbeat went stale
    if lease.get("host") == socket.gethostname() and _flock_free(path):
        return None
    return {**lease, "mine": (lease.get("host") == socket.gethostname()
                              and lease.get("pid") == os.getpid())}


def locked_error(out, lease) -> OutputLockedError:
    """The refusal of an output another fit holds (its lease ``lease``, or None)."""
    who = describe(lease) if lease else "another process"
    return OutputLockedError(
        f"the output {os.fspath(out)!r} is being written by another fit ({who}); wait for "
        f"it to finish or stop it, or choose another output. (Lock file: {lock_path(out)})")


class OutputLock:
    """The lease of one output (a context manager; see the module docstring)."""

    def __init__(self, out):
        self.out = os.fspath(out)
        self.path = None if "://" in self.out else lock_path(self.out)
        self._fd = None
        self._stop = threading.Event()
        self._thread = None
        self.lease = None
        #: the folders acquire created for the lock (deepest first), removed by release
        #: if they are still empty: a fit refused after its lock left an empty OUT folder
        self._made = []

    def _write(self):
        data = json.dumps(self.lease).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def acquire(self):
        if self.path is None:
            return self
        fcntl = fcntl_module()  # None where not POSIX: the lease alone (pid, heartbeat)
        for _ in range(20):
            try:
                self._made = _missing_dirs(os.path.dirname(self.path)) or self._made
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                # never through a link put where the lock goes (its target was truncated)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | _NOFOLLOW, 0o644)
            except FileNotFoundError:
                continue  # the folder was removed between the two (another's release)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise OutputLocationError(
                        f"the lock file of {self.out!r}, {self.path!r}, is a symbolic link: "
                        "dask_bid never writes through one. Remove the link (or choose "
                        "another output path).") from exc
                # makedirs(exist_ok=True) raises FileExistsError only for a file in the way
                why = (f"[Errno 20] Not a directory: {exc.filename!r}"
                       if isinstance(exc, FileExistsError) else str(exc))
                raise OutputLocationError(
                    f"cannot create the output group at {self.out!r}: {why}. Choose an output "
                    "path in a directory you can write to.") from exc
            if os.fstat(fd).st_nlink > 1:  # a hard link to a file of someone's
                os.close(fd)
                raise OutputLocationError(
                    f"the lock file of {self.out!r}, {self.path!r}, has other names (hard "
                    "links): dask_bid writes its lease only to a file of its own. Remove it "
                    "(or choose another output path).")
            flocked = fcntl is not None
            if flocked:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    if exc.errno == errno.ENOLCK:  # a file system without locks
                        flocked = False
                    else:
                        os.close(fd)
                        if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                            raise
                        self._refuse(read_lease(self.path))
            # the previous holder may have removed the file between our open and flock:
            # then we hold a lock on a dead inode, try again
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            lease = read_lease(self.path)
            if (lease is not None and not _is_stale(lease)
                    and (lease.get("host") != socket.gethostname() or not flocked)):
                # held from another host (flock may not reach it) with a fresh heartbeat;
                # on this host the flock alone says the holder is gone
                os.close(fd)
                self._refuse(lease)
            self._fd = fd
            now = time.time()
            self.lease = {"host": socket.gethostname(), "pid": os.getpid(), "start": now,
                          "heartbeat": now, "output": os.path.abspath(self.out)}
            self._write()
            self._thread = threading.Thread(target=self._beat, daemon=True,
                                            name="dask_bid-lease")
            self._thread.start()
            return self
        raise OutputLockedError(f"could not take the lock {self.path!r} (it keeps changing); "
                                "is another fit starting on the same output?")

    def _refuse(self, lease):
        raise locked_error(self.out, lease)

    def _beat(self):
        while not self._stop.wait(HEARTBEAT_SECONDS):
            with contextlib.suppress(OSError, TypeError):
                self.lease["heartbeat"] = time.time()
                self._write()

    def release(self):
        if self._fd is None:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            os.remove(self.path)
        with contextlib.suppress(OSError):
            os.close(self._fd)  # closing releases the flock
        self._fd = None
        for d in self._made:  # only while empty: an output written there stays
            try:
                os.rmdir(d)
            except OSError:
                break
        self._made = []

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _missing_dirs(d) -> list[str]:
    """The folders of path ``d`` that do not exist yet, deepest first."""
    out = []
    d = os.path.abspath(d)
    while d and not os.path.exists(d):
        out.append(d)
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return out


def hold_for_reading(store):
    """A shared lock (``flock``) on a local store's metadata file (``zarr.json``) for as
    long as the returned descriptor stays open (None where it cannot be taken: no such
    file, no locks on this system). A fit holds its input so while it reads it; a
    conversion that would replace the store asks for it exclusively and is refused
    (:func:`refuse_if_read`): it rewrote the store under a running fit, which then failed
    ("the input changed while the fit read it"), its run lost. Reading a file and locking
    it writes nothing to it."""
    fcntl = fcntl_module()
    fd = None if fcntl is None else _open_meta(store)
    if fd is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # a conversion holds it: it refuses its own replacement first
        os.close(fd)
        return None
    return fd


def refuse_if_read(store, what="convert it again",
                   fix="fit into another folder (its own conversion)"):
    """Refuse (``OutputLockedError``) to replace a store another process's fit reads
    (see :func:`hold_for_reading`)."""
    fcntl = fcntl_module()
    fd = None if fcntl is None else _open_meta(store)
    if fd is None:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise OutputLockedError(
            f"{os.fspath(store)!r} is the input of a dask-bid fit still running in another "
            f"process: to {what} would change that fit's input under it. Wait for it to "
            f"end, or {fix}.") from None
    except OSError:
        pass
    finally:
        os.close(fd)


def _open_meta(store):
    """A read-only descriptor of a local store's ``zarr.json``, or None (a URL, no such
    file)."""
    if "://" in os.fspath(store):
        return None
    try:
        return os.open(os.path.join(os.fspath(store), "zarr.json"), os.O_RDONLY)
    except OSError:
        return None


def fcntl_module():
    """``fcntl`` where the system has it (POSIX), else None."""
    try:
        import fcntl
    except ImportError:
        return None
    return fcntl
