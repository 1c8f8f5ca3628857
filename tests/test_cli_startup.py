"""Small jobs start fast: lazy imports, the in-process scheduler, compiled kernels cached on
disk in a user folder, compilation shown as its own phase (issue 14.4)."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from test_cli import FAST, assert_same_trace

from dask_bid.interface.cli import main
from dask_bid.interface.cli.runtime import IN_PROCESS_MAX_BYTES, choose_scheduler

HEAVY = ("numba", "distributed", "scipy", "zarr", "dask", "pandas", "matplotlib", "arviz")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(extra)
    return env


def test_help_imports_nothing_heavy():
    code = ("import sys; from dask_bid.interface.cli import main, build_parser; "
            "build_parser().format_help(); "
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout


def test_a_fit_does_not_import_scipy_stats():
    """scipy.stats costs ~0.4 s to import, in the CLI's process and in every worker it
    starts; the convergence check ranks and takes normal quantiles without it."""
    code = ("import sys, numpy as np, dask_bid.interface.functional, dask_bid.engine.dask_backend\n"
            "from dask_bid.engine.convergence import ess_bulk, rhat_rank\n"
            "x = np.random.default_rng(0).standard_normal((4, 50))\n"
            "assert rhat_rank(x) > 0 and ess_bulk(x) > 0\n"
            "print('scipy.stats' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", (r.stdout, r.stderr)


def test_help_answers_quickly():
    script = Path(sys.executable).with_name("dask-bid")
    cmd = [str(script)] if script.exists() else [sys.executable, "-m",
                                                 "dask_bid.interface.cli"]
    t = time.perf_counter()
    r = subprocess.run([*cmd, "--help"], capture_output=True, text=True, timeout=60)
    took = time.perf_counter() - t
    assert r.returncode == 0 and "COMMAND" in r.stdout
    # under a second on a quiet machine (docs/performance.md); generous for a busy one
    assert took < 5.0, took


def test_numba_cache_dir_defaults_to_a_user_folder(tmp_path):
    code = "import os, dask_bid, numba; print(os.environ['NUMBA_CACHE_DIR'])"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=_env(XDG_CACHE_HOME=str(tmp_path)))
    assert r.stdout.strip() == str(tmp_path / "dask_bid" / "numba"), r.stderr
    # the user's own setting wins
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, env=_env(NUMBA_CACHE_DIR=str(tmp_path / "mine")))
    assert r.stdout.strip() == str(tmp_path / "mine"), r.stderr


def test_compiled_kernels_are_cached_across_processes(tmp_path):
    """A kernel compiled in one process is loaded from the user cache folder by the next
    (independent of whether the package folder is writable)."""
    code = ("import numpy as np, dask_bid\n"
            "from dask_bid.kernels.truncnorm import _sample_gtn_loop, sample_gtn\n"
            "sample_gtn(np.random.default_rng(0), np.zeros(5), np.ones(5))\n"
            "from dask_bid.interface.cli.runtime import kernels_compiled\n"
            "print(sum(_sample_gtn_loop.stats.cache_hits.values()),"
            " sum(_sample_gtn_loop.stats.cache_misses.values()), int(kernels_compiled()))\n")
    env = _env(XDG_CACHE_HOME=str(tmp_path))
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300, env=env) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[0].stderr + runs[1].stderr
    first, second = (tuple(map(int, r.stdout.split())) for r in runs)
    # and the fit's kernels line tells the two apart ("compiled" / "loaded from the cache")
    assert first == (0, 1, 1) and second == (1, 0, 0), (first, second)
    cached = list((tmp_path / "dask_bid" / "numba").rglob("*.nbi"))
    assert any("_sample_gtn_loop" in p.name for p in cached), cached


def test_scheduler_choice():
    assert choose_scheduler(None, (504, 24))[0] == "synchronous"
    assert "in this process" in choose_scheduler(None, (504, 24))[1]
    client, where = choose_scheduler(None, (IN_PROCESS_MAX_BYTES // 8 + 1, 8))
    assert client is None and "local Dask cluster" in where
    assert choose_scheduler("local", (10, 10))[0] is None
    assert choose_scheduler("synchronous", (10**6, 10**4))[0] == "synchronous"
    assert choose_scheduler("tcp://h:8786", (10, 10)) == ("tcp://h:8786",
                                                          "the Dask scheduler at tcp://h:8786")


def test_small_fit_runs_in_process_and_says_so(tmp_path, capsys):
    from dask_bid import open_result
    from dask_bid.interface.demo import make_demo_matrix

    A, _, _ = make_demo_matrix(60, 12, 2, seed=0)
    np.save(tmp_path / "a.npy", A)
    args = ["fit", str(tmp_path / "a.npy"), "--k", "2", *FAST]
    no_sched = [a for a in args if a not in ("--scheduler", "synchronous")]
    assert main([*no_sched, "--out", str(tmp_path / "auto.zarr")]) == 0
    err = capsys.readouterr().err
    lines = err.replace("\r", "\n").splitlines()
    assert any(ln.startswith("scheduler    in this process (the input, 5.6 KiB, fits in "
                             "memory") for ln in lines), err
    # compilation is its own phase, before the sampling bar starts
    ready = next(i for i, ln in enumerate(lines) if ln.startswith("kernels      ready in"))
    assert re.match(r"kernels      ready in [\d.]+ s \((compiled, cached|loaded from the "
                    r"cache) in ", lines[ready]), lines[ready]
    first_bar = next(i for i, ln in enumerate(lines) if ln.startswith("sampling"))
    assert ready < first_bar
    assert main([*args, "--out", str(tmp_path / "sync.zarr"), "-q"]) == 0
    assert_same_trace(open_result(tmp_path / "auto.zarr").trace_,
                      open_result(tmp_path / "sync.zarr").trace_)


def test_summary_labels_chain_time_and_wall_time(tmp_path, capsys):
    from dask_bid.interface.demo import make_demo_matrix

    A, _, _ = make_demo_matrix(60, 12, 2, seed=0)
    np.save(tmp_path / "a.npy", A)
    assert main(["fit", str(tmp_path / "a.npy"), "--k", "2", "--out",
                 str(tmp_path / "o.zarr"), "--n-chains", "2", *FAST]) == 0
    out = capsys.readouterr().out
    assert "chain time" in out and "s sampling, summed over 2 chains" in out
    assert "wall time" in out
    assert ("of the swap proposals (iterations whose proposed change of one basis column "
            "was taken, burn-in included") in out
