"""Where and how a fit runs: the scheduler chosen for it, and the kernels' compilation.

A small input runs in this process (Dask's synchronous scheduler: no cluster to start,
no data to ship); a large one on a local Dask cluster; ``--scheduler`` always wins.
numba compiles the kernels on the first run only (they are cached on disk, see
``dask_bid/__init__.py``); the fit shows that as a phase of its own before the progress
bar, so that the bar's rate and ETA measure sampling.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import warnings

import numpy as np

from ._core import human_bytes

__all__ = ["IN_PROCESS_MAX_BYTES", "choose_scheduler", "compile_kernels", "memory_bytes",
           "local_cluster"]

#: The largest input run in this process when no scheduler is named: 1 GiB, or an eighth
#: of this machine's memory if that is less.
IN_PROCESS_MAX_BYTES = 2**30

_SYNC = ("sync", "synchronous", "single-threaded")


def memory_bytes() -> int | None:
    """This machine's physical memory (None where it cannot be read)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def choose_scheduler(requested, shape, itemsize=8):
    """``(client, description)`` for ``bayesian_id(client=...)``.

    Parameters
    ----------
    requested : str or None
        ``--scheduler``: None (choose), ``local`` (a local cluster), ``synchronous``,
        or a scheduler address.
    shape : (int, int)
        The input's shape; with ``itemsize`` it gives the input's size.
    """
    size = int(np.prod(shape, dtype=np.int64)) * int(itemsize)
    if requested is None:
        mem = memory_bytes()
        limit = IN_PROCESS_MAX_BYTES if mem is None else min(IN_PROCESS_MAX_BYTES, mem // 8)
        if size <= limit:
            return "synchronous", (f"in this process (the input, {human_bytes(size)}, fits in "
                                   "memory; --scheduler local starts a Dask cluster)")
        return None, (f"a local Dask cluster of 2 workers (the input, {human_bytes(size)}, "
                      f"is larger than {human_bytes(limit)}; --scheduler ADDRESS uses yours)")
    if requested.lower() == "local":
        return None, "a local Dask cluster of 2 workers (--scheduler local)"
    if requested.lower() in _SYNC:
        return "synchronous", "in this process (--scheduler synchronous)"
    return requested, f"the Dask scheduler at {requested}"


@contextlib.contextmanager
def local_cluster(n_workers=2):
    """A local Dask cluster for one command, and its client.

    Started here rather than by the engine so that its workers stay silent: a task that
    fails (NaN found in a tile, ...) is reported once, as the command's one-line error,
    not also as a worker's ``Compute Failed`` log with a traceback.
    """
    from distributed import Client, LocalCluster

    # ":0", not None: None still binds the scheduler's HTTP server to 8787 and warns when
    # that port is taken (a notebook's own dashboard); ":0" takes any free port
    with LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.CRITICAL) as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


#: sampler parameters the warm-up fit copies (the rest is made small)
_NOT_COPIED = ("n_iter", "burn_in", "thin", "n_chains", "init", "random_state",
               "refine_sweeps", "n_components")


def compile_kernels(params):
    """Run a tiny fit with the user's sampler settings, in this process, so that numba
    compiles (or loads from its cache) every kernel the real fit calls. Returns the
    seconds it took, or None if the warm-up failed (the real fit then reports why)."""
    from ..functional import bayesian_id

    p = {k: v for k, v in params.items() if k not in _NOT_COPIED}
    A = np.random.default_rng(0).standard_normal((24, 8))
    t = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # about the toy matrix, not the user's
            bayesian_id(A, 2, **p, n_iter=4, burn_in=1, thin=1, n_chains=1, init="random",
                        random_state=0, refine_sweeps=1, client="synchronous")
    except Exception:
        return None
    return time.perf_counter() - t


def kernels_compiled() -> bool:
    """Whether any compiled kernel of dask_bid was compiled in this process (a cache
    miss) rather than loaded from the numba cache: what the kernels line says."""
    import sys

    from numba.core.registry import CPUDispatcher

    for name, mod in list(sys.modules.items()):
        if not name.startswith("dask_bid.kernels") or mod is None:
            continue
        for obj in vars(mod).values():
            if isinstance(obj, CPUDispatcher) and sum(obj.stats.cache_misses.values()):
                return True
    return False


def numba_cache_dir() -> str:
    return os.environ.get("NUMBA_CACHE_DIR", "")
