import os
import shutil
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
_DASK_TMP = []


def pytest_configure(config):
    """Dask's worker folders (``dask-scratch-space``) go to a folder of this test process,
    removed at its end, so that the suite leaves nothing in the temporary folder. The
    environment variable carries it to the processes the tests start (CLI, dask worker);
    a ``LocalCluster`` passes the config to its workers."""
    import dask

    d = tempfile.mkdtemp(prefix="dask_bid-tests-")
    _DASK_TMP.append(d)
    os.environ["DASK_TEMPORARY_DIRECTORY"] = d
    dask.config.set({"temporary-directory": d})
    # Worker processes forked from a forkserver that has imported distributed, numpy and
    # the rest once, instead of spawned fresh interpreters that import them all again:
    # a LocalCluster starts in ~0.6 s instead of 2-3 s (the suite starts dozens, in this
    # process and in the CLI's; the suite's time, README). distributed's own test suite
    # does the same. The workers are still separate processes, killed for real.
    os.environ["DASK_DISTRIBUTED__WORKER__MULTIPROCESSING_METHOD"] = "forkserver"
    dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"})
    # The forkserver of this process (its LocalClusters) also imports dask_bid's engine
    # and kernels (numba, scipy, zarr) once, so that a new worker does not import them on
    # its first task (~0.4 s a worker). distributed sets its own list the first time it
    # asks for the context; ours replaces it before the server starts. Nothing is run
    # there: no numba thread pool exists before the fork.
    import distributed.utils

    distributed.utils.get_mp_context().set_forkserver_preload(
        ["distributed", "numpy", "dask", "scipy", "zarr", "numba", "dask_bid.engine.dask_backend",
         "dask_bid.engine.reports", "dask_bid.kernels.block"])
    # no statistical profiler in the workers (a thread sampling every 10 ms): nothing
    # here reads its profiles
    os.environ["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] = "False"
    dask.config.set({"distributed.worker.profile.enabled": False})


    _warm_kernels(config)


def _warm_kernels(config):
    """With an empty numba cache, compile the kernels once, in two processes at once,
    before pytest-xdist starts its test processes (tests/_warm_kernels.py says why).
    Only in the controller of a parallel run: a worker, or a run with ``-n 0``, compiles
    lazily as before. Its failure is no test result: the tests themselves then fail."""
    import subprocess
    import sys
    import time

    if hasattr(config, "workerinput") or not (getattr(config.option, "numprocesses", 0) or 0):
        return
    if os.environ.get("DASK_BID_TEST_WARM", "1") == "0":  # measured against it
        return
    if getattr(config.option, "collectonly", False):
        return
    import dask_bid  # noqa: F401  (sets NUMBA_CACHE_DIR, which the parts inherit)

    t = time.monotonic()
    script = str(Path(__file__).with_name("_warm_kernels.py"))
    parts = [subprocess.Popen([sys.executable, script, str(i)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for i in range(2)]
    codes = []
    for p in parts:
        try:
            codes.append(p.wait(timeout=600))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(p.wait())
    _WARMED.append((time.monotonic() - t, codes))


_WARMED = []


def pytest_report_header(config):
    if _WARMED:
        seconds, codes = _WARMED[0]
        return (f"numba kernels compiled or loaded from the cache in {seconds:.1f} s "
                f"(tests/_warm_kernels.py; exit codes {codes})")
    return None


def pytest_unconfigure(config):
    while _DASK_TMP:
        shutil.rmtree(_DASK_TMP.pop(), ignore_errors=True)


def _shared_data_dir() -> Path | None:
    env = os.environ.get("DASK_BID_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO_ROOT.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def shared_data_dir() -> Path:
    """The directory with the paper's datasets (``../shared/data`` or $DASK_BID_DATA)."""
    d = _shared_data_dir()
    if d is None:
        pytest.skip(
            "real datasets not available: set DASK_BID_DATA or place the shared data "
            "directory at ../shared/data next to the repository"
        )
    return d


@pytest.fixture(scope="module")
def shared_cluster():
    """A LocalCluster of 2 worker processes x 1 thread, shared by the tests of a module
    that neither kill its workers nor limit their memory: starting one and loading the
    kernels in its workers costs seconds each time (the suite's time, README). Not for
    the whole session: an idle cluster costs ~10 % of a core (heartbeats, monitors).
    Tests take their own Client (:func:`shared_client`), so no future outlives a test."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
        yield cluster


@pytest.fixture
def shared_client(shared_cluster):
    """A Client of :func:`shared_cluster` for one test (not the default client)."""
    from distributed import Client

    with Client(shared_cluster, set_as_default=False) as client:
        yield client
