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
