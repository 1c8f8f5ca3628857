import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


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
