"""The notebooks in examples/ are committed executed, with outputs made by their current cells.

``examples/run_notebooks.py`` runs them and stores a SHA-256 of every code cell's source in
the notebook's metadata; here each stored hash is recomputed from the committed source, so
a notebook edited after it was run fails until it is run again. A change of the package
alone does not fail it (every change would need all three run again): the script also
records a fingerprint of the package's source, and its ``--check`` says when the outputs
were made by another version. The quick start is also
executed here, in a fresh kernel whose temporary folder must stay empty; the other two take
minutes (a Dask cluster, the paper's data files) and run with
``DASK_BID_ALL_NOTEBOOKS=1`` or with ``python examples/run_notebooks.py``.
"""

import copy
import hashlib
import importlib.util
import os
from pathlib import Path

import nbformat
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NOTEBOOKS = sorted(EXAMPLES.glob("*.ipynb"))
NEEDS_DATA = {"03_paper_datasets.ipynb"}
#: executed by every test run; the others only with DASK_BID_ALL_NOTEBOOKS=1
QUICK = {"01_quickstart.ipynb"}
MAX_BYTES = 1_000_000


def _runner():
    spec = importlib.util.spec_from_file_location("run_notebooks",
                                                  EXAMPLES / "run_notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_the_three_notebooks_are_there():
    names = {p.name for p in NOTEBOOKS}
    assert {"01_quickstart.ipynb", "02_scale_out.ipynb", "03_paper_datasets.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_executed_and_fresh(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    cells = _code(nb)
    # run top to bottom in one kernel: execution counts 1, 2, 3, ...
    assert [c.execution_count for c in cells] == list(range(1, len(cells) + 1)), (
        f"{path.name} was not run top to bottom: python examples/run_notebooks.py {path.stem}")
    errors = [o.get("ename") for c in cells for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name} is stored with errors {errors}"
    # the stored hashes are those of the committed code, recomputed here
    stored = nb.metadata.get("dask_bid", {}).get("code_sha256")
    now = [hashlib.sha256(c.source.encode("utf-8")).hexdigest() for c in cells]
    stale = [i for i, (a, b) in enumerate(zip(stored or [], now, strict=False)) if a != b]
    assert stored is not None and len(stored) == len(now) and not stale, (
        f"{path.name}: code cells {stale or 'added or removed'} changed since the outputs "
        f"were made: python examples/run_notebooks.py {path.stem}")
    # a reader on the web sees results and figures, and the file stays small
    assert any("image/png" in o.get("data", {}) for c in cells for o in c.outputs), path.name
    assert path.stat().st_size < MAX_BYTES, f"{path.name}: {path.stat().st_size} bytes"


def test_freshness_check_catches_an_edit():
    """The planted counterpart of the check above: an edited, added or removed cell, or a
    notebook never run by the script, is reported stale by the runner's check."""
    rn = _runner()
    nb = nbformat.read(EXAMPLES / "01_quickstart.ipynb", as_version=4)
    assert rn.stale_cells(nb) == []
    edited = copy.deepcopy(nb)
    _code(edited)[2].source += "\n"
    assert rn.stale_cells(edited) == [2]
    added = copy.deepcopy(nb)
    added.cells.append(nbformat.v4.new_code_cell("1 + 1"))
    assert rn.stale_cells(added) == [len(_code(nb))]
    removed = copy.deepcopy(nb)
    removed.cells.remove(_code(removed)[-1])
    assert rn.stale_cells(removed) == [len(_code(nb)) - 1]
    never = copy.deepcopy(nb)
    del never.metadata["dask_bid"]
    assert rn.stale_cells(never) == list(range(len(_code(nb))))
    assert rn.main(["--check"]) == 0


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path, request, tmp_path, monkeypatch):
    if path.name not in QUICK and not os.environ.get("DASK_BID_ALL_NOTEBOOKS"):
        pytest.skip(f"{path.name} takes minutes: set DASK_BID_ALL_NOTEBOOKS=1 "
                    "or run python examples/run_notebooks.py")
    if path.name in NEEDS_DATA:
        data = request.getfixturevalue("shared_data_dir")  # skips with a reason if absent
        monkeypatch.setenv("DASK_BID_DATA", str(data))
    # the kernel's temporary folder (tempfile, Dask's worker folders): empty again after
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    for var in ("TMPDIR", "TEMP", "TMP"):
        monkeypatch.setenv(var, str(tmp))
    nb = _runner().execute(path, timeout=600)  # raises naming the cell that failed
    errors = [o for c in _code(nb) for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert [p.name for p in tmp.iterdir()] == [], f"{path.name} left files in its temp folder"
