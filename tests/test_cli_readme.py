"""The README's examples work after the README's first command (``pip install ".[plot]"``):
the Python block runs without ArviZ and pandas, and the optional imports name their extra."""

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"

#: what `pip install ".[plot]"` does not install: made unimportable in the subprocess
BLOCK = "import sys\nfor m in ('arviz', 'pandas', 'xarray'):\n    sys.modules[m] = None\n"


def _python_blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_python_example_runs_without_arviz_and_pandas(tmp_path):
    code = BLOCK + "import matplotlib\nmatplotlib.use('Agg')\n" + _python_blocks()[0]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[26 30 50 61 81] [26 30 50 61 81]" in r.stdout, r.stdout
    assert re.search(r"MSE 0\.0\d+, max\|W\| 1\.00", r.stdout), r.stdout
    assert list(tmp_path.iterdir()) == []  # nothing written to the current folder


def test_diagnostics_without_the_extra_say_which_to_install(tmp_path):
    code = BLOCK + (
        "import numpy as np\n"
        "from dask_bid import BayesianID, summary\n"
        "est = BayesianID(2, n_iter=20, burn_in=5, random_state=0).fit("
        "np.random.default_rng(0).standard_normal((30, 6)))\n"
        "try:\n    summary(est)\nexcept ImportError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'pip install "dask_bid[arviz]"' in r.stdout, r.stdout


def test_info_diagnostics_needs_no_arviz(tmp_path):
    out = tmp_path / "r.zarr"
    code = BLOCK + (
        "import numpy as np\n"
        "from dask_bid.interface.cli import main\n"
        f"np.save({str(tmp_path / 'a.npy')!r}, np.random.default_rng(0).standard_normal((30, 6)))\n"
        f"assert main(['fit', {str(tmp_path / 'a.npy')!r}, '--k', '2', '--out', {str(out)!r}, "
        "'--n-iter', '20', '--burn-in', '5', '-q']) == 0\n"
        f"print(main(['info', '--diagnostics', {str(out)!r}]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    out_lines = r.stdout.strip().splitlines()
    assert out_lines[-1] == "0", r.stdout  # the numbers come from numpy, not ArviZ
    diag = [ln.split() for ln in out_lines if ln.startswith("    sigma2 ") or
            ln.startswith("    mse ")]
    assert [d[0] for d in diag] == ["sigma2", "mse"], r.stdout
    assert all(d[1] == "r_hat" and d[3] == "ess_bulk" and d[5] == "ess_tail" for d in diag)
    assert "error" not in r.stderr, r.stderr
