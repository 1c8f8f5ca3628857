"""Checkpoints, resume after the fitting process is killed, and lost workers.

Every recovery must give bitwise the chain of an undisturbed run: the random streams are
counter based and the block operations pure, so a replay draws the same numbers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import dask
import numpy as np
import pytest
import zarr
from _support import assert_same_chain, complete_checkpoints, kill_when
from distributed import Client, Future, LocalCluster

from dask_bid.engine import to_zarr
from dask_bid.interface import bayesian_id

# every test here may wait on a cluster: never hang the suite. One pytest-xdist worker
# runs them all, so that they share the module's cluster.
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("engine-faults")]

M, N, K = 300, 160, 4
TILES = (60, 80)
# 40 iterations: 4 checkpoints, the kills at 17 and 30 and the cancel at 23 inside the
# chain and after the burn-in's end at 20 (a cluster iteration costs ~5 round trips; the
# suite's time, README). 71 candidate rows per pass, what "auto" gives 70 iterations:
# these 40 iterations, their passes over A included, are the first 40 of the 70-iteration
# chain (the streams are counter based), which makes both its passes in them (at 6 and 20).
KW = dict(n_iter=40, burn_in=20, thin=2, random_state=21, block_size=40, checkpoint_every=10,
          chunks=TILES, n_candidates=71)


def _matrix(seed=3):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
            + 0.05 * rng.standard_normal((M, N)))


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("faults") / "A.zarr"
    to_zarr(_matrix(), path, chunks=TILES)
    return str(path)


@pytest.fixture(scope="module")
def reference(store):
    return bayesian_id(store, K, client="synchronous", **KW)


@pytest.fixture(scope="module")
def cluster():
    # LocalCluster closes a worker's nanny when no worker of that name is back 15 s after
    # it was lost; with kills less than 15 s apart that timer can fire while the second
    # victim restarts, and the cluster stays one worker short. Not what is tested here.
    with dask.config.set({"distributed.deploy.lost-worker-timeout": "1h"}), \
            LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as c, \
            Client(c, set_as_default=False) as client:
        yield client


_CHILD = textwrap.dedent("""
    import sys, time
    from dask_bid.interface import bayesian_id
    store, out, client, K = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    kw = {kw!r}
    # slow the chain down after its checkpoint at 20 so that the parent can kill it
    # between checkpoints (20 iterations, at least 4 s, before it would finish)
    bayesian_id(store, K, client=client, out=out,
                callback=lambda st: time.sleep(0.2) if st.iteration >= 20 else None, **kw)
""")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("where", ["synchronous", "cluster"])
def test_resume_after_the_fitting_process_is_killed(store, reference, cluster, tmp_path,
                                                    where):
    out = str(tmp_path / "fit.zarr")
    address = "synchronous" if where == "synchronous" else cluster.scheduler.address
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD.format(kw=KW), store, out, address, str(K)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kill_when(child, lambda: [t for t in complete_checkpoints(out) if t >= 20], 180,
              "checkpoint")
    assert child.returncode == -signal.SIGKILL
    meta = zarr.open_group(out, mode="r").attrs["dask_bid"]
    assert meta["status"] == "running"
    killed_at = max(complete_checkpoints(out))
    assert killed_at < KW["n_iter"], "the child finished before it was killed"

    seen = []
    res = bayesian_id(store, K, client=address if where == "cluster" else "synchronous",
                      out=out, resume=True, callback=lambda st: seen.append(st.iteration),
                      **{**KW, "random_state": None})
    assert seen[0] > killed_at, "the fit restarted instead of resuming"
    assert seen[-1] == KW["n_iter"]
    assert_same_chain(reference, res)
    assert zarr.open_group(out, mode="r").attrs["dask_bid"]["status"] == "complete"


@pytest.mark.timeout(240)
def test_killing_workers_does_not_change_the_result(store, reference, cluster,
                                                    monkeypatch):
    """A worker killed inside the burn-in (17), and then every worker (30), in one fit
    (two fits cost twice the time: the suite's time, README). After all of them died, the
    block tasks hinted at them stayed "no-worker" when new workers joined (distributed
    ignores allow_other_workers there) and the fit hung: a stalled collect now frees them
    (engine/reports.py), here after 1 s instead of 5."""
    from dask_bid.engine import reports

    monkeypatch.setattr(reports, "STALL_S", 1.0)
    cluster.wait_for_workers(2, timeout=60)
    killed = []

    def cb(state):
        if state.iteration in (17, 30):
            pids = cluster.run(os.getpid)
            victims = [sorted(pids)[0]] if state.iteration == 17 else sorted(pids)
            for victim in victims:
                killed.append(pids[victim])
                os.kill(pids[victim], signal.SIGKILL)

    res = bayesian_id(store, K, client=cluster, callback=cb, **KW)
    assert_same_chain(reference, res)
    assert len(killed) == 3
    cluster.wait_for_workers(2, timeout=60)
    alive = set(cluster.run(os.getpid).values())
    assert not alive & set(killed), "a worker was not killed"


def test_a_stalled_fit_on_a_cluster_without_workers_says_it_waits_for_one():
    """No worker at all (a cluster whose workers all died and are not replaced): the fit
    waits for one to join, and says so once instead of hanging without a word."""
    from dask_bid.engine.reports import _stalled

    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as lc, \
            Client(lc, set_as_default=False) as client:
        with pytest.warns(RuntimeWarning, match="has no worker left: the fit waits for one "
                                                "to join"):
            assert _stalled(client, False) is True
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert _stalled(client, True) is True  # said once


@pytest.mark.timeout(120)
def test_a_gather_whose_only_worker_died_goes_on_once_another_joins(monkeypatch):
    """Every worker killed while the client waited in a plain gather (a checkpoint's
    save, a column fetch; 2 of 4 such kills in a deploy audit): the tasks it waited on,
    recomputed and hinted at the dead worker, stayed ``no-worker`` once a new worker
    joined (distributed re-checks them by their restriction alone), and the fit hung
    without a word. The executor's gather now frees them as ``Inbox.collect`` did."""
    import threading
    import time

    from dask_bid.engine import reports
    from dask_bid.engine.cluster import DistributedExecutor

    monkeypatch.setattr(reports, "STALL_S", 0.5)
    with LocalCluster(n_workers=1, processes=False, threads_per_worker=1,
                      dashboard_address=":0") as lc, \
            Client(lc, set_as_default=False) as client:
        ex = DistributedExecutor(client)
        (w,) = ex.workers()
        first = ex.submit(_slow_increment, 1, hint=w)
        second = ex.submit(_slow_increment, first, hint=w)

        def kill_then_replace():
            time.sleep(0.2)  # while the first task runs
            (name,) = list(lc.workers)
            client.sync(lc.workers[name].close)
            lc.scale(2)  # a new worker, at another address (the spec keeps the dead one)

        threading.Thread(target=kill_then_replace, daemon=True).start()
        warnings.simplefilter("ignore", RuntimeWarning)  # "no worker left", if seen between
        got = []
        waiter = threading.Thread(target=lambda: got.append(ex.gather([second])), daemon=True)
        waiter.start()
        waiter.join(60)
        assert got == [[3]], "the gather hung with the tasks no-worker"
        assert w not in ex.workers()


def _slow_increment(x):
    import time

    time.sleep(0.5)
    return x + 1


@pytest.mark.timeout(240)
def test_lost_block_states_are_restored_from_the_checkpoint(store, reference, cluster):
    """When the cluster cannot recompute the chain's futures (here: cancelled), the fit
    restores the last checkpoint and replays."""
    done = []

    def cb(state):
        if state.iteration == 23 and not done:  # the replay passes 23 again
            done.append(True)
            keys = [k for k in cluster.futures if str(k).startswith("bid-block_collapsed_finish")]
            assert keys
            cluster.cancel([Future(k, cluster) for k in keys])

    res = bayesian_id(store, K, client=cluster, callback=cb, **KW)
    assert res.n_recoveries == 1
    assert_same_chain(reference, res)


_CHILD_SIGINT = textwrap.dedent("""
    import signal, sys, time
    from dask_bid.interface import bayesian_id
    # as in an interactive session: a suite started in the background (``cmd &`` in a
    # script) hands its children SIGINT ignored, and then a Ctrl-C could not reach the fit
    signal.signal(signal.SIGINT, signal.default_int_handler)
    store, out, K = sys.argv[1], sys.argv[2], int(sys.argv[3])
    kw = {kw!r}
    # slow after the checkpoint at 10, so that the parent's Ctrl-C lands mid-chain
    bayesian_id(store, K, client="synchronous", out=out,
                callback=lambda st: time.sleep(0.2) if st.iteration >= 10 else None, **kw)
""")


@pytest.mark.timeout(240)
def test_ctrl_c_in_the_python_api_saves_the_iteration_and_resumes(store, reference,
                                                                   tmp_path):
    """A Ctrl-C (SIGINT) in a script or notebook calling ``bayesian_id(..., out=...)``
    stops the chain after the current iteration with a checkpoint of it, so the resumed
    fit replays nothing and ends on the uninterrupted chain (dask_bid/_interrupt.py)."""
    out = str(tmp_path / "fit.zarr")
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD_SIGINT.format(kw=KW), store, out, str(K)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not [t for t in complete_checkpoints(out) if t >= 10]:
            assert child.poll() is None, child.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, "no checkpoint within 180 s"
            time.sleep(0.05)
        time.sleep(0.5)  # a few iterations past the checkpoint
        child.send_signal(signal.SIGINT)
        err = child.communicate(timeout=60)[1].decode()
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode != 0 and "KeyboardInterrupt" in err, err[-2000:]
    assert "stopping after this iteration and saving a checkpoint" in err
    saved = max(complete_checkpoints(out))
    # the iteration it stopped at, not the periodic checkpoint (every 10)
    assert 10 < saved < KW["n_iter"] and saved % KW["checkpoint_every"] != 0, saved
    assert zarr.open_group(out, mode="r").attrs["dask_bid"]["status"] == "interrupted"
    seen = []
    res = bayesian_id(store, K, client="synchronous", out=out, resume=True,
                      callback=lambda st: seen.append(st.iteration),
                      **{**KW, "random_state": None})
    assert seen[0] == saved + 1, "the resumed fit replayed iterations"
    assert_same_chain(reference, res)


_CHILD_START_SIGINT = """
import os, sys, time, warnings
import dask, psutil
from dask_bid.interface import bayesian_id
warnings.simplefilter("ignore")
if __name__ == "__main__":
    # the workers of the fit's own LocalCluster are children of this process (their
    # nannies run here): a worker's preload interrupts this process while the cluster
    # starts, as a notebook's "interrupt kernel" would
    # (once, by the first worker: a second Ctrl-C stops at once, wherever it lands)
    with open(sys.argv[2], "w") as fh:
        fh.write("import os, signal\\ndef dask_setup(worker):\\n"
                 "    try:\\n"
                 f"        os.close(os.open({sys.argv[2]!r} + '.sent', os.O_CREAT | os.O_EXCL))\\n"
                 "    except FileExistsError:\\n"
                 "        return\\n"
                 f"    os.kill({os.getpid()}, signal.SIGINT)\\n")
    with dask.config.set({"distributed.worker.preload": [sys.argv[2]]}):
        try:
            bayesian_id(sys.argv[1], 3, n_iter=10, burn_in=2)
            print("finished")
        except KeyboardInterrupt:
            print("interrupted")
    deadline = time.monotonic() + 20
    def cmdline(p):
        try:
            return " ".join(p.cmdline())
        except psutil.Error:  # gone meanwhile
            return ""

    while time.monotonic() < deadline:
        left = [p for p in psutil.Process().children(recursive=True)
                if "spawn_main" in cmdline(p)]
        if not left:
            break
        time.sleep(0.2)
    print("workers left", len(left))
"""


def test_ctrl_c_while_the_local_cluster_starts_leaves_no_worker(store, tmp_path):
    """An interrupt that landed inside LocalCluster(...) (a fit with client=None starting
    its own cluster) left its worker processes running: two more each time."""
    script = tmp_path / "fit.py"
    script.write_text(_CHILD_START_SIGINT)
    # spawned workers, as for a user (the suite's forkserver would hide them in its tree)
    env = {k: v for k, v in os.environ.items() if "MULTIPROCESSING_METHOD" not in k}
    done = subprocess.run([sys.executable, str(script), store, str(tmp_path / "pre.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    lines = done.stdout.split("\n")
    assert "interrupted" in lines and "workers left 0" in lines, (done.stdout,
                                                                  done.stderr[-2000:])
    assert "stopping once the local cluster has started" in done.stderr
