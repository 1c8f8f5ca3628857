"""Which Dask cluster a fit runs on, and the two ways work is sent to it.

``cluster_executor(client)`` resolves the user's ``client=`` argument:

- a ``distributed.Client``: used as is (never closed by us);
- a scheduler address (``"tcp://host:port"``): connected to with a timeout, closed at the end;
  an address that does not answer raises :class:`~dask_bid.SchedulerUnreachableError`;
- ``"synchronous"`` (or ``"sync"``): everything runs in this process, block states are plain
  values, the streaming passes use dask's synchronous scheduler (for debugging and for the
  determinism tests: it gives the same chain bitwise);
- ``None``: the current client if there is one (``Client.current()``: the ``as_current()``
  context, else the default client), the
  synchronous path if ``dask.config`` selects the synchronous scheduler, otherwise a
  ``LocalCluster`` (processes, 2 workers x 1 thread) that is shut down at the end.

Both executors expose the same tiny interface (``submit``, ``gather``, ``compute``), so the
backend code is the same on every path and the random streams, being counter based, give the
same draws whatever runs them.
"""

from __future__ import annotations

import contextlib
import logging

import dask

from .._errors import SchedulerUnreachableError

__all__ = ["cluster_executor", "SyncExecutor", "DistributedExecutor", "RECOVERABLE_ERRORS",
           "SCHEDULER_TIMEOUT"]

#: Seconds to wait for a scheduler address to answer.
SCHEDULER_TIMEOUT = 5.0

_SYNC_NAMES = ("sync", "synchronous", "single-threaded")


def _recoverable():
    from concurrent.futures import CancelledError

    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    return (CancelledError, KilledWorker, CommClosedError)


#: Exceptions that mean "a worker (and the data it held) went away": the fit restores the
#: chain from its last checkpoint and replays instead of failing.
RECOVERABLE_ERRORS = _recoverable()


class SyncExecutor:
    """Run every operation immediately in this process; handles are the values."""

    is_distributed = False
    client = None

    def submit(self, fn, *args, key=None, hint=None):
        return fn(*args)

    def gather(self, handles):
        return list(handles)

    def compute(self, objs):
        return list(dask.compute(*objs, scheduler="synchronous"))

    def workers(self):
        return []

    def persist(self, x):
        return x

    def scatter(self, x):
        return x


class DistributedExecutor:
    """Operations as tasks on a ``distributed`` cluster; handles are futures.

    ``hint`` names the worker an operation should preferably run on (a loose restriction:
    if that worker is gone the scheduler picks another one).
    """

    is_distributed = True

    def __init__(self, client):
        self.client = client

    def submit(self, fn, *args, key=None, hint=None):
        kw = {"workers": [hint], "allow_other_workers": True} if hint else {}
        return self.client.submit(fn, *args, key=key, pure=False, **kw)

    def gather(self, handles):
        return self.client.gather(list(handles))

    def compute(self, objs):
        return self.client.compute(list(objs))

    def workers(self):
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def persist(self, x):
        return self.client.persist(x)

    def scatter(self, x):
        """Send ``x`` to one worker (not through the scheduler); returns its future."""
        return self.client.scatter(x, hash=False)


def _connect(address, timeout):
    from distributed import Client

    try:
        return Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # OSError, TimeoutError, ValueError for malformed addresses
        raise SchedulerUnreachableError(
            f"could not connect to a Dask scheduler at {address!r} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}). Check that `dask scheduler` runs there and the "
            "port is reachable, or pass client=None to start a local cluster."
        ) from exc


@contextlib.contextmanager
def cluster_executor(client=None, *, timeout=SCHEDULER_TIMEOUT, n_workers=2,
                     threads_per_worker=1):
    """Yield the executor for ``client`` (see the module docstring) and clean up after it."""
    if isinstance(client, str) and client.lower() in _SYNC_NAMES:
        yield SyncExecutor()
        return
    if isinstance(client, str):
        c = _connect(client, timeout)
        try:
            yield DistributedExecutor(c)
        finally:
            c.close()
        return
    if client is not None:
        if not (hasattr(client, "submit") and hasattr(client, "scheduler_info")):
            from .._errors import ParameterError

            raise ParameterError(
                f"client must be a distributed.Client, a scheduler address string, "
                f"'synchronous' or None, got {type(client).__name__}.")
        yield DistributedExecutor(client)
        return
    from distributed import Client

    try:
        current = Client.current(allow_global=True)  # as_current() context, else global
    except ValueError:
        current = None
    if current is not None:
        yield DistributedExecutor(current)
        return
    if str(dask.config.get("scheduler", "")).lower() in _SYNC_NAMES:
        yield SyncExecutor()
        return
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                           processes=True, dashboard_address=":0",
                           silence_logs=logging.ERROR)
    c = Client(cluster, set_as_default=False)
    try:
        yield DistributedExecutor(c)
    finally:
        c.close()
        cluster.close()
