"""Execute the example notebooks and store them with their outputs.

Usage (from the root of a clone, after ``pip install ".[notebook]"``)::

    python examples/run_notebooks.py                 # all three, in place
    python examples/run_notebooks.py 01_quickstart   # one (name or path)
    python examples/run_notebooks.py --check         # only say which are stale

Each notebook runs top to bottom in a fresh kernel of this interpreter (nbclient), with
``examples/`` as its working folder, and is written back with its outputs, figures as
PNG. The notebook's metadata then holds a hash of every code cell's source
(``metadata["dask_bid"]["code_sha256"]``): ``tests/test_notebooks.py`` compares them
with the cells' current source, so a notebook whose code changed after it was run is
reported as stale until this script runs again. It also holds a fingerprint of the
dask_bid source that made the outputs (``dask_bid_source``); ``--check`` says when the
package has changed since (not an error). Notebook 03 needs the paper's data
files (``DASK_BID_DATA`` or ``../shared/data`` next to the clone; ``docs/datasets.md``).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent
#: where the hashes live in a notebook's metadata
META_KEY = "dask_bid"
#: a committed notebook above this size is reported (outputs should stay small)
MAX_BYTES = 1_000_000


def cell_hash(source: str) -> str:
    """SHA-256 of a code cell's source (its text as stored, UTF-8)."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


def code_hashes(nb) -> list[str]:
    """The hash of every code cell of ``nb``, in order."""
    return [cell_hash(c.source) for c in nb.cells if c.cell_type == "code"]


def stale_cells(nb) -> list[int]:
    """Indices (among the code cells) whose source differs from when the outputs were made.

    Every code cell is stale in a notebook that was never run by this script; a cell
    added or removed since makes the cells from there on stale.
    """
    stored = nb.metadata.get(META_KEY, {}).get("code_sha256", [])
    now = code_hashes(nb)
    stale = [i for i, h in enumerate(now) if i >= len(stored) or stored[i] != h]
    if len(stored) > len(now):
        stale.append(len(now))
    return stale


def _resolve(name: str) -> Path:
    p = Path(name)
    if p.suffix != ".ipynb":
        p = p.with_suffix(".ipynb")
    if not p.is_file():
        p = EXAMPLES / p.name
    if not p.is_file():
        known = ", ".join(q.stem for q in sorted(EXAMPLES.glob("*.ipynb")))
        raise SystemExit(f"run_notebooks: no notebook {name!r} in {EXAMPLES} (known: {known})")
    return p


def execute(path: Path, timeout: int = 900):
    """Run the notebook at ``path`` in a fresh kernel; return it with outputs and hashes.

    Raises ``RuntimeError`` naming the cell when a cell fails; the file is not touched.
    """
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.metadata.pop("execution", None)
    # kernel "python3" is this interpreter's own kernel (ipykernel), so the notebook sees
    # the installed dask_bid; record_timing=False keeps timestamps out of the file
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        raise RuntimeError(f"{path.name}: a cell failed with {exc.ename}: {exc.evalue}") from exc
    nb.metadata[META_KEY] = {"code_sha256": code_hashes(nb),
                             "dask_bid_source": library_fingerprint()}
    return nb


def library_fingerprint() -> str:
    """A SHA-256 (12 hex digits) of the imported dask_bid package's source: the outputs of
    a notebook run by another version may differ (numbers, printed lines)."""
    import dask_bid

    root = Path(dask_bid.__file__).resolve().parent
    h = hashlib.sha256()
    for f in sorted(root.rglob("*.py")):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*",
                    help="names or paths (default: every notebook in examples/)")
    ap.add_argument("--check", action="store_true",
                    help="run nothing; exit 1 if a notebook's outputs are older than its code")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per cell (default 900)")
    args = ap.parse_args(argv)
    import nbformat

    paths = ([_resolve(n) for n in args.notebooks] if args.notebooks
             else sorted(EXAMPLES.glob("*.ipynb")))
    if args.check:
        bad = 0
        now = library_fingerprint()
        for p in paths:
            nb = nbformat.read(p, as_version=4)
            stale = stale_cells(nb)
            made = nb.metadata.get(META_KEY, {}).get("dask_bid_source")
            # the cells decide (exit 1); another library version is said, not failed:
            # every change to the package would otherwise need a rerun of all three
            made = made or "not recorded"
            note = ("" if made == now else
                    f"; its outputs were made by another version of dask_bid ({made}, now "
                    f"{now}): run it again to refresh them")
            print(f"{p.name}: " + (f"stale (code cells {stale})" if stale else "up to date")
                  + note)
            bad += bool(stale)
        return int(bad > 0)
    for p in paths:
        t0 = time.perf_counter()
        try:
            nb = execute(p, timeout=args.timeout)
        except RuntimeError as exc:  # one line; the notebook file is left as it was
            print(f"run_notebooks: {exc}", file=sys.stderr)
            return 1
        nbformat.validate(nb)
        nbformat.write(nb, p)
        size = p.stat().st_size
        note = (f"  (over {MAX_BYTES // 1000} kB: make its outputs smaller)"
                if size > MAX_BYTES else "")
        print(f"{p.name}: ran in {time.perf_counter() - t0:.0f} s, {size / 1000:.0f} kB{note}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
