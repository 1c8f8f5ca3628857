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

Both executors expose the same tiny interface (``submit``, ``gather``, ``compute``, and
``submit_reporting`` / ``collect`` for a task whose small result the client needs while its
state stays on the worker, :mod:`.reports`), so the
backend code is the same on every path and the random streams, being counter based, give the
same draws whatever runs them.

A cluster the user brings (a ``Client``, an address, the current client) is checked before
any task is sent: every worker must import the client's versions of dask_bid, numpy, numba,
zarr, dask and distributed (:func:`check_worker_versions`), else
:class:`~dask_bid.VersionMismatchError` names the package and the versions. A worker with
another numba or numpy would otherwise fail inside a task, or draw other numbers than the
client expects. The ``LocalCluster`` started here runs this interpreter: not checked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import weakref

import dask

from .._errors import (
    DaskBidError,
    ParameterError,
    SchedulerUnreachableError,
    UnguardedScriptError,
    VersionMismatchError,
)

__all__ = ["cluster_executor", "SyncExecutor", "DistributedExecutor", "RECOVERABLE_ERRORS",
           "SCHEDULER_TIMEOUT", "scheduler_timeout", "current_client", "fit_scheduler",
           "CHECKED_PACKAGES", "check_worker_versions",
           "check_cluster_versions", "package_versions", "check_client_arg"]

log = logging.getLogger("dask_bid.engine")

#: Seconds to wait for a scheduler address to answer, unless the dask config key
#: ``dask_bid.scheduler-timeout`` says otherwise (a cluster still starting may need more;
#: a test of an address that never answers, less).
SCHEDULER_TIMEOUT = 5.0


def scheduler_timeout():
    """The seconds to wait for a scheduler address: ``dask_bid.scheduler-timeout`` in the
    dask config (e.g. ``DASK_DASK_BID__SCHEDULER_TIMEOUT=30``), else
    :data:`SCHEDULER_TIMEOUT`."""
    return float(dask.config.get("dask_bid.scheduler-timeout", SCHEDULER_TIMEOUT))


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

    def submit_reporting(self, fn, *args, key=None, hint=None):
        return fn(*args)

    def collect(self, handles):
        return [h[1] for h in handles]

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
        from .reports import gather_watching

        return gather_watching(self.client, handles)

    def submit_reporting(self, fn, *args, key, hint=None):
        """Submit ``fn(*args) -> (state, small)``; :meth:`collect` then returns the
        ``small`` parts without a second task per future (:mod:`.reports`)."""
        from .reports import inbox, reporting_task

        kw = {"workers": [hint], "allow_other_workers": True} if hint else {}
        return self.client.submit(reporting_task, inbox(self.client).topic, key, fn, *args,
                                  key=key, pure=False, **kw)

    def collect(self, handles):
        from .reports import inbox

        return inbox(self.client).collect(self.client, list(handles))

    def compute(self, objs):
        return self.client.compute(list(objs))

    def workers(self):
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def persist(self, x):
        return self.client.persist(x)

    def scatter(self, x):
        """Send ``x`` to one worker (not through the scheduler); returns its future."""
        return self.client.scatter(x, hash=False)


#: Packages whose version on every worker must equal the client's: the code the tasks run
#: (dask_bid), the numerical kernels (numpy, numba: compiled and random draws) and the I/O and
#: task machinery (zarr, dask, distributed).
CHECKED_PACKAGES = ("dask_bid", "numpy", "numba", "zarr", "dask", "distributed")


def _make_probe():
    # defined inside a function so that cloudpickle sends it by value: a worker that cannot
    # import dask_bid still runs it, and reports dask_bid as missing
    def probe(packages):
        import importlib

        found = {}
        for name in packages:
            try:
                module = importlib.import_module(name)
            except Exception:  # not installed, or broken: either way not usable
                found[name] = None
            else:
                found[name] = str(getattr(module, "__version__", "unknown"))
        return found

    return probe


_probe = _make_probe()


def package_versions(packages=CHECKED_PACKAGES):
    """``{package: version}`` as imported in this process (None: cannot be imported).

    The version is the imported module's ``__version__``, i.e. the code that actually runs,
    which is what matters (a checkout on ``PYTHONPATH`` can shadow the installed package).
    """
    return _probe(list(packages))


# client -> addresses of the workers already found to match (so a client reused for many
# fits, e.g. by GridSearchCV, probes only the workers that joined since)
_VERIFIED = weakref.WeakKeyDictionary()


def _describe_workers(addresses, n_workers):
    shown = ", ".join(sorted(addresses)[:3])
    more = f" and {len(addresses) - 3} more" if len(addresses) > 3 else ""
    return f"{shown}{more} ({len(addresses)} of {n_workers} workers)"


def check_worker_versions(client, packages=CHECKED_PACKAGES, *, warn_empty=True):
    """Refuse a cluster whose workers import other versions of ``packages`` than this client.

    Runs one small function on each worker (``Client.run``: no task, nothing on the
    scheduler's task graph). Workers that joined after a successful check are checked at
    the next call.

    Parameters
    ----------
    client : distributed.Client
    packages : sequence of str
        Default :data:`CHECKED_PACKAGES`.
    warn_empty : bool
        Log that a cluster without workers cannot be checked (the fit's own check at
        connect time does; the one before its output exists does not: said once a fit).

    Returns
    -------
    dict
        ``{worker address: {package: version}}`` of the workers checked now (empty if
        none was new, or the cluster has no worker yet: then nothing can be checked, and
        the workers that come later are checked by the next fit).

    Raises
    ------
    VersionMismatchError
        One line naming each differing package, the client's version and the workers'.
    """
    packages = list(packages)
    info = client.scheduler_info(n_workers=-1)["workers"]
    workers = set(info)
    # a worker is known by its address and its scratch folder, which every start of a
    # worker makes anew: a worker replaced at the same address (--worker-port) was taken
    # for the checked one
    ident = {a: (a, str(w.get("local_directory"))) for a, w in info.items()}
    try:
        known = _VERIFIED.get(client, frozenset())
    except TypeError:  # a client object that cannot be weakly referenced
        known = frozenset()
    new = sorted(a for a in workers if ident[a] not in known)
    if not new:
        if not workers and warn_empty:
            log.warning("the Dask cluster has no worker yet: the package versions of the "
                        "workers that join later are not checked by this fit")
        return {}
    mine = _probe(packages)
    theirs = client.run(_probe, packages, workers=new, on_error="return")
    problems = []
    for name in packages:
        by_version = {}
        for address, found in theirs.items():
            if isinstance(found, dict) and found.get(name) != mine[name]:
                by_version.setdefault(found.get(name), []).append(address)
        if by_version:
            there = "; ".join(
                f"{'not importable' if v is None else v} on {_describe_workers(a, len(workers))}"
                for v, a in sorted(by_version.items(), key=lambda kv: str(kv[0])))
            problems.append(f"{name} {mine[name]} on this client, {there}")
    failed = {a: r for a, r in theirs.items() if not isinstance(r, dict)}
    for address, exc in sorted(failed.items()):
        problems.append(f"the version check failed on worker {address} "
                        f"({type(exc).__name__}: {' '.join(str(exc).split())})")
    if problems:
        pins = " ".join(f"{n}=={mine[n]}" for n in packages if mine[n] is not None)
        raise VersionMismatchError(
            "the Dask workers do not run this client's packages: " + " | ".join(problems)
            + f". Install the client's versions on every worker (e.g. `pip install {pins}`; "
            "see docs/deploy.md), or connect from an environment that matches them.")
    try:
        _VERIFIED[client] = frozenset(known | {ident[a] for a in new})
    except TypeError:
        pass
    return theirs


def check_cluster_versions(client):
    """:func:`check_worker_versions` for a fit's ``client=`` argument, before any output.

    A ``Client`` (or the current one for None) is checked as is; an address is connected
    to, checked and closed (the fit connects again); the synchronous path and the
    ``LocalCluster`` a fit starts itself run this interpreter and are not checked.
    """
    if client is None:
        from distributed import Client

        try:
            client = Client.current(allow_global=True)
        except ValueError:
            if not _sync_configured():
                check_script_guard()  # a LocalCluster will start
            return
    if isinstance(client, str):
        if client.lower() in _SYNC_NAMES:
            return
        c = _connect(client, scheduler_timeout())
        try:
            check_worker_versions(c, warn_empty=False)
        finally:
            c.close()
        return
    if hasattr(client, "run") and hasattr(client, "scheduler_info"):
        check_worker_versions(client, warn_empty=False)


def _sync_configured() -> bool:
    """Whether ``dask.config`` selects the synchronous scheduler (then ``client=None``
    runs in this process, no LocalCluster)."""
    return str(dask.config.get("scheduler", "")).lower() in _SYNC_NAMES


def check_script_guard():
    """Refuse to start a ``LocalCluster`` from the top level of a script, outside
    ``if __name__ == "__main__":``.

    Its worker processes are spawned, and a spawned process imports the main script again
    (as ``__mp_main__``): an unguarded call would start a cluster in every worker, which
    fails deep inside ``distributed`` ("Nanny failed to start", after a page of
    tracebacks). A notebook, the REPL and ``python -c`` have no script to import again,
    and a call under the guard, or from a function called under it, is not at issue.
    """
    import sys

    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if isinstance(main_file, str) and not os.path.isfile(main_file):
        # `python - < prog.py`: multiprocessing makes each worker run the main module from
        # its __file__ ('<stdin>'), which is no file (FileNotFoundError, "Nanny failed to
        # start", pages of tracebacks)
        raise UnguardedScriptError(
            f"this program runs from {main_file!r}, not a file, and the worker processes "
            "of a local Dask cluster start by importing the program from its file: pass "
            "client=\"synchronous\" (this process) or a running cluster's Client, or save "
            "the program to a .py file and run that.")
    where = unguarded_script_call()
    if where is not None:
        path, line = where
        raise UnguardedScriptError(
            f"{path}, line {line}, starts a local Dask cluster at the top level of the "
            "script, and each worker process would run the script again: put the script's "
            "work under `if __name__ == \"__main__\":`, or pass client=\"synchronous\" "
            "(this process) or a running cluster's Client.")


def unguarded_script_call():
    """``(path, line)`` of the top-level statement of the ``__main__`` script that is
    running now, if that statement is not an ``if __name__ == "__main__":`` block; None
    when there is no such script (notebook, REPL, ``-c``) or its source cannot be read."""
    import ast
    import sys

    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    # a spawned process re-imports only a main module that is a Python file
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is vars(main)
                                     and frame.f_code.co_name == "<module>"):
        frame = frame.f_back
    if frame is None:
        return None
    line = frame.f_lineno
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if node.lineno <= line <= (node.end_lineno or node.lineno):
            return None if _is_main_guard(node) else (path, line)
    return None


def _is_main_guard(node) -> bool:
    """``if __name__ == "__main__":`` (either side of the ``==``)."""
    import ast

    if not (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and len(node.test.ops) == 1 and isinstance(node.test.ops[0], ast.Eq)):
        return False
    sides = [node.test.left, node.test.comparators[0]]
    return (any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides)
            and any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides))


#: dask's own single-machine schedulers, which a user may take for ours
_DASK_LOCAL_NAMES = ("threads", "threading", "processes", "multiprocessing")
_CHOICES = ("pass client=None (a LocalCluster of 2 worker processes, started and stopped "
            "here), client='synchronous' (this process) or a running scheduler's address "
            "(tcp://host:8786)")


def check_client_arg(client):
    """Refuse a ``client=`` string that cannot be a scheduler address, before anything is
    read or connected to.

    ``distributed.Client`` fails on such a string only while connecting, and the half-made
    client then hangs the interpreter's exit for 10 s with a traceback (its ``__del__``):
    hence this check, with a message that says what was probably meant. A ``Client``
    that was closed (or whose cluster was: its status is then "closed" too) is refused
    here as well: it failed later with a bare ``KeyError: 'workers'``.
    """
    status = getattr(client, "status", None)
    if not isinstance(client, str) and status in ("closing", "closed", "failed"):
        raise ParameterError(
            f"client is a distributed.Client that is {status} (it, or its cluster, was "
            "closed): start a new Client, or pass client=None (a local cluster started and "
            "stopped here) or client='synchronous' (this process).")
    if not isinstance(client, str) or client.lower() in _SYNC_NAMES:
        return
    from distributed.comm import registry
    from distributed.comm.addressing import parse_address

    low = client.strip().lower()
    if low in _DASK_LOCAL_NAMES:
        raise ParameterError(
            f"client={client!r} names one of dask's single-machine schedulers, which "
            f"dask_bid does not use (its tasks keep state on distributed workers): {_CHOICES}.")
    if low.startswith(("http://", "https://")):
        raise ParameterError(
            f"client={client!r} is a web address (a dashboard's?), not a scheduler's: the "
            "scheduler's address starts with tcp:// and has its own port, 8786 by default "
            "(the 'Scheduler at:' line of `dask scheduler`, or Client.scheduler.address).")
    try:
        scheme, loc = parse_address(client, strict=False)
        backend = registry.get_backend(scheme)
        try:
            backend.get_address_host_port(loc)
        except NotImplementedError:  # inproc:// has no host and port
            pass
    except (ValueError, TypeError) as exc:
        raise ParameterError(
            f"client={client!r} is not a scheduler address ({_one_line(exc)}): "
            f"{_CHOICES}.") from None


def _one_line(exc) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _probe_scheduler(address, timeout):
    """Ask ``address`` who it is (the Dask ``identity`` call), within ``timeout`` s.

    ``Client(address, timeout=...)`` waited without end for a peer that accepts the
    connection and says nothing (a port of another service, a scheduler's dashboard
    port), and read an HTTP server's reply as a message of 3 EiB (``MemoryError``). Plain
    ``tcp://`` only (TLS needs the security settings the Client gets). Run in a thread of
    its own: a notebook's thread already runs an event loop."""
    address = str(address)
    if "://" not in address:  # "host:port" is a tcp address to distributed too
        address = "tcp://" + address
    if not address.startswith("tcp://"):
        return
    import asyncio
    import concurrent.futures

    from distributed.comm import connect

    async def ask():
        try:
            comm = await asyncio.wait_for(connect(address, timeout=timeout), timeout)
        except (TimeoutError, OSError) as exc:  # nobody there: as the Client says it
            raise OSError(f"Timed out trying to connect to {address} after {timeout:g} s"
                          if isinstance(exc, TimeoutError) else str(exc)) from exc
        try:
            await asyncio.wait_for(comm.write({"op": "identity", "reply": True}), timeout)
            return await asyncio.wait_for(comm.read(), timeout)
        finally:
            comm.abort()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        try:
            reply = pool.submit(asyncio.run, ask()).result(3 * timeout + 5)
        except TimeoutError as exc:  # (before OSError, its base class)
            raise TimeoutError(f"no answer to the Dask handshake within {timeout:g} s: is "
                               "it a Dask scheduler's port?") from exc
        except OSError:
            raise
        except Exception as exc:  # undecodable bytes: another protocol (HTTP ...)
            raise ValueError(f"it does not speak Dask's protocol ({type(exc).__name__}): is "
                             "it a Dask scheduler's port?") from exc
    if not (isinstance(reply, dict) and reply.get("type") == "Scheduler"):
        kind = reply.get("type") if isinstance(reply, dict) else type(reply).__name__
        raise ValueError(f"it answers as a {kind}, not a Dask scheduler")


def _connect(address, timeout):
    from distributed import Client

    check_client_arg(address)
    try:
        _probe_scheduler(str(address), timeout)
        return Client(address, timeout=timeout, set_as_default=False)
    except Exception as exc:  # OSError, TimeoutError, ValueError for malformed addresses
        raise SchedulerUnreachableError(
            f"could not connect to a Dask scheduler at {address!r} within {timeout:g} s "
            f"({type(exc).__name__}: {exc}). Check that `dask scheduler` runs there and the "
            "port is reachable, or pass client=None to start a local cluster."
        ) from exc


@contextlib.contextmanager
def _cluster_errors(client):
    """Errors of a fit on a cluster said as what they are: a client that lost its
    scheduler (killed, restarted, the network), which came out as whatever the last call
    met (a cancelled future, ``KeyError: 'workers'``), and a worker that cannot reach an
    object store the client can (no credentials there: botocore's error), both an
    "internal error" on the command line."""
    # its address now: a client that lost its scheduler may no longer say it
    addr = getattr(getattr(client, "scheduler", None), "address", None) or "?"
    try:
        yield
    except DaskBidError:
        raise
    except Exception as exc:
        from .remote import missing_credentials, unreachable_endpoint

        if missing_credentials(exc) or unreachable_endpoint(exc):
            from .._errors import StoreAccessError

            raise StoreAccessError(
                "a Dask worker could not reach the object store the client reaches "
                f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}): every worker "
                "needs the client's credentials and endpoint (the AWS_* environment "
                "variables on the workers, or storage_options=).") from exc
        if getattr(client, "status", "running") == "running":
            raise
        raise SchedulerUnreachableError(
            f"the Dask scheduler {addr} stopped answering during the fit "
            f"({type(exc).__name__}: {' '.join(str(exc).split())[:200]}); the output, if "
            "any, keeps what it saved (its last checkpoint, if one was written: "
            "`dask-bid info` says how far): with a working scheduler, resume=True "
            "continues the same chain (from its start if nothing was saved).") from exc


@contextlib.contextmanager
def current_client(client):
    """``client`` as distributed's current client in this thread and task while a fit
    runs on it (``Client.current()``, dask's ``get_client``), for the computations the
    engine does not submit itself. ``Client.as_current()`` also sets dask's global
    ``scheduler`` config, which two fits in two threads left set for good (the second
    restored the first's value): a user's later ``.compute()`` then asked for a closed
    client ("Requested dask.distributed scheduler but no Client active")."""
    try:
        from distributed.client import _current_client
    except ImportError:  # another distributed: its own context
        with client.as_current():
            yield
        return
    token = _current_client.set(client)
    try:
        yield
    finally:
        _current_client.reset(token)


def fit_scheduler():
    """``scheduler=`` for a dask computation inside a fit: the client of
    :func:`current_client` (a user's global ``scheduler`` config would otherwise take
    the engine's own reads of A elsewhere), or None."""
    try:
        from distributed.client import _current_client

        return _current_client.get()
    except (ImportError, LookupError):
        return None


@contextlib.contextmanager
def cluster_executor(client=None, *, timeout=None, n_workers=2,
                     threads_per_worker=1):
    """Yield the executor for ``client`` (see the module docstring) and clean up after it."""
    if isinstance(client, str) and client.lower() in _SYNC_NAMES:
        yield SyncExecutor()
        return
    if isinstance(client, str):
        c = _connect(client, scheduler_timeout() if timeout is None else timeout)
        try:
            check_worker_versions(c)
            with _cluster_errors(c):
                yield DistributedExecutor(c)
        finally:
            c.close()
        return
    if client is not None:
        if not (hasattr(client, "submit") and hasattr(client, "scheduler_info")):
            raise ParameterError(
                f"client must be a distributed.Client, a scheduler address string, "
                f"'synchronous' or None, got {type(client).__name__}.")
        check_worker_versions(client)
        with _cluster_errors(client):
            yield DistributedExecutor(client)
        return
    from distributed import Client

    try:
        current = Client.current(allow_global=True)  # as_current() context, else global
    except ValueError:
        current = None
    if current is not None:
        check_worker_versions(current)
        with _cluster_errors(current):
            yield DistributedExecutor(current)
        return
    if _sync_configured():
        yield SyncExecutor()
        return
    from distributed import LocalCluster

    from .._interrupt import InterruptLatch

    check_script_guard()
    # a Ctrl-C while the cluster starts (a notebook's "interrupt kernel") landed inside
    # LocalCluster(...) and left its worker processes running: it is held until the
    # cluster and its client exist, then both are closed and the interrupt raised
    environ = dict(os.environ)
    with InterruptLatch("dask-bid: stopping once the local cluster has started (Ctrl-C "
                        "again to stop at once)") as starting:
        try:
            cluster = LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                                   processes=True, dashboard_address=":0",
                                   silence_logs=logging.ERROR)
            try:
                c = Client(cluster, set_as_default=False)
            except BaseException:
                cluster.close()
                raise
        finally:
            _restore_environ(environ)
    try:
        starting.check()
        yield DistributedExecutor(c)
    finally:
        c.close()
        cluster.close()
        _restore_environ(environ)  # a worker the nanny restarted set them again


def _restore_environ(before):
    """The calling process's environment as it was. distributed's nannies set
    OMP_NUM_THREADS=1 (MKL's, OpenBLAS'), MALLOC_TRIM_THRESHOLD_ and PYTHONHASHSEED in the
    process that starts them, for their workers to inherit, and leave them there: after a
    fit on the cluster dask_bid started, a notebook's later subprocesses, and libraries that
    read them when first imported (a thread pool), ran on one thread. The workers started
    already have their copy; a nanny restarting one sets them again."""
    for k in set(os.environ) - set(before):
        del os.environ[k]
    for k, v in before.items():
        if os.environ.get(k) != v:
            os.environ[k] = v
