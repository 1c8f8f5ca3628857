"""A cluster the user brings is checked for the client's package versions (docs/deploy.md).

No mock: the workers are real processes of a ``LocalCluster``. A worker with another
dask_bid is one whose preload script sets ``dask_bid.__version__`` to another value, the
way a worker that imports another checkout would report it; a worker without dask_bid is
one whose preload makes ``import dask_bid`` fail.
"""

import hashlib
import logging
import os
import re
from pathlib import Path

import numpy as np
import pytest
from distributed import Client, LocalCluster, Nanny

import dask_bid
from dask_bid import BayesianID, VersionMismatchError
from dask_bid.engine.cluster import (
    CHECKED_PACKAGES,
    check_cluster_versions,
    check_worker_versions,
    package_versions,
)

# one pytest-xdist process runs this module: its module-scoped fixtures are then
# computed once, not once per process (the suite's time, README)
pytestmark = pytest.mark.xdist_group("deploy")

FAST = dict(n_iter=6, burn_in=2, thin=1, random_state=0)
DOCS = Path(__file__).resolve().parents[1] / "docs"
OTHER = "0.0.0+other"


@pytest.fixture(scope="module")
def A():
    rng = np.random.default_rng(0)
    return rng.standard_normal((40, 3)) @ rng.uniform(-1, 1, (3, 10))


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield cluster, client


@pytest.fixture(scope="module")
def matching(cluster):
    """The cluster with its one worker started like the client (used first: the tests of
    the mismatched cluster add workers to it, which saves starting a second cluster)."""
    return cluster[1]


@pytest.fixture(scope="module")
def mismatched(cluster, tmp_path_factory):
    """Two more workers: one with another dask_bid, one without dask_bid."""
    cluster, client = cluster
    d = tmp_path_factory.mktemp("preload")
    odd = d / "dask_bid_test_other_version.py"
    odd.write_text(f"import dask_bid\ndask_bid.__version__ = {OTHER!r}\n")
    bare = d / "dask_bid_test_not_importable.py"
    bare.write_text("import sys\nsys.modules['dask_bid'] = None  # import dask_bid fails\n")
    for name, script in (("odd", odd), ("bare", bare)):
        cluster.worker_spec[name] = {"cls": Nanny, "options": {
            "nthreads": 1, "preload": [str(script)], "silence_logs": logging.ERROR}}
    cluster.sync(cluster._correct_state)
    client.wait_for_workers(3, timeout=60)
    names = {w["name"]: a for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}
    return cluster, client, names


def _transitions(client):
    return client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.transition_counter)


def _tree_digest(path):
    h = hashlib.sha256()
    for root, _, files in sorted(os.walk(path)):
        for f in sorted(files):
            p = os.path.join(root, f)
            h.update(p.encode())
            h.update(Path(p).read_bytes())
    return h.hexdigest()


# --------------------------------------------------------------------------- a matching cluster
def test_matching_workers_pass_and_a_fit_runs(matching, A):
    here = package_versions()
    assert set(here) == set(CHECKED_PACKAGES) and here["dask_bid"] == dask_bid.__version__
    found = check_worker_versions(matching)
    assert len(found) == 1 and list(found.values()) == [here]
    assert check_worker_versions(matching) == {}  # checked once per worker and client
    before = _transitions(matching)
    est = BayesianID(3, **FAST).fit(A, client=matching)
    assert est.components_.shape == (3, 10)
    assert _transitions(matching) > before  # the fit did run on this cluster


def test_a_fit_on_a_users_client_leaves_daskconfig_alone(matching, A):
    """Client.as_current() set dask's global scheduler config for the whole fit; two fits
    in two threads left it set for good (the second restored the first's value), and the
    user's later .compute() asked for a closed client. The fit's client is current in
    its own thread only; the config is never touched."""
    import dask
    import dask.array as da

    seen = []
    with dask.config.set(scheduler="threads"):  # the user's own choice, for their work
        est = BayesianID(3, **FAST).fit(A, client=matching, callback=lambda st: seen.append(
            dask.config.get("scheduler", None)))
        assert dask.config.get("scheduler") == "threads"
    assert est.components_.shape == (3, 10)
    assert seen and set(seen) == {"threads"}, set(seen)
    assert dask.config.get("scheduler", None) is None
    assert float(da.ones(10, chunks=5).sum().compute()) == 10.0


# --------------------------------------------------------------------------- a mismatched one
def test_mismatch_is_refused_in_one_line_naming_package_and_versions(mismatched):
    cluster, client, names = mismatched
    with pytest.raises(VersionMismatchError) as info:
        check_worker_versions(client)
    msg = str(info.value)
    assert "\n" not in msg
    here = dask_bid.__version__
    assert re.search(
        rf"dask_bid {re.escape(here)} on this client, {re.escape(OTHER)} on "
        rf"{re.escape(names['odd'])} \(1 of 3 workers\); not importable on "
        rf"{re.escape(names['bare'])} \(1 of 3 workers\)", msg), msg
    assert names[0] not in msg  # the matching worker is not named
    assert f"pip install dask_bid=={here} numpy=={np.__version__}" in msg
    head = msg.split(". Install")[0]
    for name in CHECKED_PACKAGES[1:]:  # the others agree everywhere: not named
        assert f"{name} " not in head


@pytest.mark.parametrize("how", ["client", "address", "current"])
def test_a_fit_is_refused_before_any_task_or_output(mismatched, A, tmp_path, how):
    cluster, client, _ = mismatched
    out = tmp_path / "fit.zarr"
    before = _transitions(client)
    if how == "current":
        with client.as_current(), pytest.raises(VersionMismatchError, match="dask_bid"):
            BayesianID(3, **FAST).fit(A, out=str(out))
    else:
        arg = client if how == "client" else cluster.scheduler_address
        with pytest.raises(VersionMismatchError, match="dask_bid"):
            BayesianID(3, **FAST).fit(A, client=arg, out=str(out))
    assert not out.exists()
    assert _transitions(client) == before  # no task reached the scheduler


def test_an_existing_output_is_not_replaced_on_refusal(mismatched, A, tmp_path):
    _, client, _ = mismatched
    out = str(tmp_path / "fit.zarr")
    BayesianID(3, **FAST).fit(A, client="synchronous", out=out)
    digest = _tree_digest(out)
    with pytest.raises(VersionMismatchError):
        BayesianID(3, **FAST).fit(A, client=client, out=out, overwrite=True)
    assert _tree_digest(out) == digest


def test_a_worker_replaced_at_the_same_address_is_checked_again(tmp_path):
    """The client remembered checked workers by address: a worker replaced by one of
    another dask_bid at the same address (a fixed --worker-port) passed unchecked."""
    import socket
    import time

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    odd = tmp_path / "dask_bid_test_replaced_version.py"
    odd.write_text(f"import dask_bid\ndask_bid.__version__ = {OTHER!r}\n")
    with LocalCluster(n_workers=0, processes=True, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as client:
        for preload in ([], [str(odd)]):
            cluster.worker_spec.pop("w", None)
            cluster.sync(cluster._correct_state)  # the first worker stops
            deadline = time.monotonic() + 30
            while client.scheduler_info(n_workers=-1)["workers"]:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            cluster.worker_spec["w"] = {"cls": Nanny, "options": {
                "nthreads": 1, "worker_port": port, "host": "127.0.0.1", "preload": preload,
                "silence_logs": logging.ERROR}}
            cluster.sync(cluster._correct_state)
            client.wait_for_workers(1, timeout=60)
            if not preload:
                assert list(check_worker_versions(client)) == [f"tcp://127.0.0.1:{port}"]
        with pytest.raises(VersionMismatchError, match=re.escape(OTHER)):
            check_worker_versions(client)


def test_check_cluster_versions_skips_what_runs_here(A):
    # the synchronous path and no client at all (a fit then starts its own LocalCluster
    # with this interpreter) have no foreign worker to check
    assert check_cluster_versions("synchronous") is None
    assert check_cluster_versions(None) is None


def test_a_cluster_without_workers_is_said_once_a_fit(A, caplog):
    # the check before the output exists and the one at connect time both said it
    import threading

    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as client:
        threading.Timer(1.0, cluster.scale, (1,)).start()  # a worker joins later
        with caplog.at_level(logging.WARNING, logger="dask_bid"):
            est = BayesianID(3, **FAST).fit(A, client=client)
    assert est.components_.shape == (3, 10)
    said = [r for r in caplog.records if "has no worker yet" in r.getMessage()]
    assert len(said) == 1, [r.getMessage() for r in said]


def test_deploy_doc_and_error_row():
    text = (DOCS / "deploy.md").read_text()
    for needle in ("Client(\"tcp://", "SLURMCluster", "PBSCluster", "KubeCluster",
                   "coiled.Cluster", "Gateway()", "VersionMismatchError"):
        assert needle in text, needle
    rows = [r for r in (DOCS / "errors.md").read_text().splitlines() if r.startswith("|")]
    assert any("`VersionMismatchError`" in r and "on this client" in r for r in rows)


_WHERE = """\
from dask_bid.engine.cluster import unguarded_script_call


def where():
    return unguarded_script_call()


top = where()
if "__main__" == __name__:
    print(top[1], where(), (lambda: where())())
"""


def _python(args, cwd):
    import subprocess
    import sys

    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


def test_unguarded_script_call_finds_the_top_level_statement(tmp_path):
    """Only a statement of the ``__main__`` script outside ``if __name__ ==
    "__main__":`` is named (line 8 here), from wherever it calls; ``python -c`` has no
    script for a worker to import again."""
    (tmp_path / "where.py").write_text(_WHERE)
    done = _python(["where.py"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8", "None", "None"]
    done = _python(["-c", "from dask_bid.engine.cluster import unguarded_script_call as u;"
                    "print(u())"], tmp_path)
    assert done.stdout.split() == ["None"], done.stderr


def test_an_unguarded_script_is_refused_before_a_cluster_or_output(tmp_path):
    """A script that fits a Zarr input at its top level (a LocalCluster, whose spawned
    workers would run the script again) gets one line naming the line and the fix, not
    distributed's "Nanny failed to start" pages; nothing is created."""
    import zarr

    zarr.create_array(tmp_path / "A.zarr", shape=(30, 8), chunks=(10, 8), dtype="f8")[:] = (
        np.random.default_rng(0).standard_normal((30, 8)))
    (tmp_path / "fit.py").write_text(
        "import dask_bid\n\n"
        "res = dask_bid.bayesian_id('A.zarr', 2, n_iter=30, burn_in=10, out='out.zarr')\n")
    done = _python(["fit.py"], tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("dask_bid._errors.UnguardedScriptError: ")
    assert "fit.py, line 3, starts a local Dask cluster" in last
    assert 'if __name__ == "__main__":' in last and 'client="synchronous"' in last
    assert "Nanny" not in done.stderr
    assert not (tmp_path / "out.zarr").exists()
    # the program from standard input (`python - < fit.py`): its workers cannot import
    # '<stdin>' at all, guarded or not (FileNotFoundError, "Nanny failed to start")
    import subprocess
    import sys

    guarded = ("import dask_bid\n\nif __name__ == '__main__':\n"
               "    dask_bid.bayesian_id('A.zarr', 2, n_iter=30, burn_in=10, out='out.zarr')\n")
    done = subprocess.run([sys.executable, "-"], input=guarded, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("dask_bid._errors.UnguardedScriptError: this program runs from "
                           "'<stdin>', not a file"), done.stderr
    assert "Nanny" not in done.stderr and not (tmp_path / "out.zarr").exists()
