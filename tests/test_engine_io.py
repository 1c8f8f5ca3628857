"""Input, output and errors of the Dask engine (Zarr v3 stores in tmp_path, real clusters)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import time

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

from dask_bid._errors import (
    CorruptStoreError,
    NonFiniteInputError,
    OutputExistsError,
    OutputLocationError,
    ParameterError,
    SchedulerUnreachableError,
)
from dask_bid.engine import default_chunks, read_result, to_zarr
from dask_bid.interface import bayesian_id

# every test here may wait on a cluster: never hang the suite
pytestmark = pytest.mark.timeout(300)

M, N, K = 240, 120, 4
KW = dict(n_iter=40, burn_in=10, thin=2, random_state=5, block_size=40, checkpoint_every=10)
# the tests on a cluster are about input, output and clients, not the sampler: without the
# pivot swaps and the tempered warm-up an iteration is three round trips instead of six
# (the suite's time, README); the default sampler runs on every execution path in
# test_engine_determinism.py and test_engine_faults.py. 20 iterations: 2 checkpoints
KW_CLUSTER = KW | dict(n_iter=20, n_pivot=0, tempered_warmup=0)


def _matrix(seed=0, M=M, N=N):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
            + 0.05 * rng.standard_normal((M, N)))


def _tree_hash(path):
    """sha256 of every file (name and content) under ``path``."""
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(root, f)
            h.update(os.path.relpath(p, path).encode())
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


@pytest.fixture
def cluster(shared_client):
    """A client of the suite's shared 2-process LocalCluster (conftest)."""
    return shared_client


@pytest.fixture
def store(tmp_path):
    A = _matrix()
    path = tmp_path / "A.zarr"
    to_zarr(A, path, chunks=(48, 60))
    return A, str(path)


# --------------------------------------------------------------------------- to_zarr
def test_default_chunks_are_tall_row_blocks():
    assert default_chunks((200_000, 5000)) == (16 * 2**20 // (5000 * 8), 5000)
    rows, cols = default_chunks((1000, 1_000_000))
    # 245 near-equal chunks of at most 4096 columns, ~16 MiB each
    assert cols == 4082 and rows == 16 * 2**20 // (cols * 8)
    assert default_chunks((10, 20)) == (10, 20)


def test_to_zarr_numpy_and_dask(tmp_path):
    A = _matrix(1)
    z = to_zarr(A, tmp_path / "a.zarr")
    assert z.metadata.zarr_format == 3 and z.chunks == default_chunks(A.shape)
    np.testing.assert_array_equal(z[...], A)
    x = da.from_array(A.astype(np.float32), chunks=(50, 50))
    z2 = to_zarr(x, tmp_path / "b.zarr", chunks=(100, 120))
    assert z2.chunks == (100, 120) and z2.dtype == np.float32
    np.testing.assert_array_equal(z2[...], A.astype(np.float32))
    with pytest.raises(OutputExistsError, match="overwrite=True"):
        to_zarr(A, tmp_path / "a.zarr")
    z3 = to_zarr(2 * A, tmp_path / "a.zarr", overwrite=True)
    np.testing.assert_array_equal(z3[...], 2 * A)


# --------------------------------------------------------------------------- output
def test_a_result_missing_a_chunk_file_is_refused_not_read_as_zeros(store, tmp_path,
                                                                     capsys):
    """A chunk file deleted from a finished result read back as zeros: columns [0 0 0 0]
    beside the real MSE, W all zero, and info showed it complete. Every chunk is now
    written (also all-zero ones: the plain sampler's 'accepted' trace here), so a
    missing one is damage: refused by read_result, said by info."""
    from dask_bid.engine.zarr_io import ALL_CHUNKS, missing_result_chunks
    from dask_bid.interface.cli import main

    A, path = store
    out = tmp_path / "fit.zarr"
    res = bayesian_id(path, K, client="synchronous", out=str(out), sampler="plain",
                      **(KW | dict(n_iter=12, burn_in=4)))
    g = zarr.open_group(str(out), mode="r")
    assert not res.trace["accepted"].any() and missing_result_chunks(g) == []
    (out / "columns" / "c" / "0").unlink()
    (out / "W" / "c" / "0" / "0").unlink()
    with pytest.raises(CorruptStoreError, match=r"is a damaged dask_bid result: 2 chunk "
                       r"file\(s\) are missing \((W/c/0/0, columns/c/0)\), which would read "
                       "as zeros"):
        read_result(str(out))
    # info describes it, and exits 2 with the error line (it exited 0: `info && ...`)
    assert main(["info", str(out)]) == 2
    cap = capsys.readouterr()
    text = cap.out
    assert "status     DAMAGED: 2 chunk file(s) missing (W/c/0/0, columns/c/0)" in text
    assert "\n  columns " not in text and "MSE" not in text  # no number of it is shown
    assert cap.err.startswith("dask-bid: error: ") and "is a damaged dask_bid result (2 " \
        "chunk file(s) or arrays missing" in cap.err and cap.err.count("\n") == 1
    # a result written before every chunk was (no flag) reads as it did
    meta = g.attrs["dask_bid"]
    zarr.open_group(str(out), mode="r+").attrs["dask_bid"] = {
        k: v for k, v in meta.items() if k != ALL_CHUNKS}
    assert read_result(str(out)).columns.tolist() == [0] * K
    # a whole array deleted left no chunk file to miss, and read as complete
    import shutil

    zarr.open_group(str(out), mode="r+").attrs["dask_bid"] = meta
    shutil.rmtree(out / "traces" / "mse")
    with pytest.raises(CorruptStoreError, match=r"3 chunk file\(s\) are missing \(traces/mse "
                       r"\(the whole array\), W/c/0/0, columns/c/0\)"):
        read_result(str(out))
    assert main(["info", str(out), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["status"] == "damaged"


def test_output_group_layout_and_read_back(store, tmp_path, cluster):
    A, path = store
    before = _tree_hash(path)
    out = tmp_path / "fit.zarr"
    res = bayesian_id(path, K, client=cluster, out=str(out), **KW_CLUSTER)
    assert _tree_hash(path) == before, "the input store was modified"
    g = zarr.open_group(str(out), mode="r")
    assert g.metadata.zarr_format == 3
    # only each chain's final state stays (a larger n_iter continues from it)
    assert sorted(g["checkpoint"].group_keys()) == [
        f"c{c}-it{KW_CLUSTER['n_iter']:08d}" for c in range(KW_CLUSTER.get("n_chains", 1))]
    C = g["C"]
    assert C.shape == (M, K) and C.chunks == (48, K)
    np.testing.assert_array_equal(C[...], A[:, res.columns])
    np.testing.assert_array_equal(g["W"][...], res.components)
    np.testing.assert_array_equal(g["W_sd"][...], res.components_sd)
    np.testing.assert_array_equal(g["columns"][...], res.columns)
    np.testing.assert_array_equal(g["inclusion_probability"][...], res.inclusion_probability)
    for f in ("mse", "sigma2", "accepted", "accept_prob"):
        np.testing.assert_array_equal(g["traces"][f][...], res.trace[f])
    np.testing.assert_array_equal(g["draws/columns"][...], res.draws_columns)
    np.testing.assert_array_equal(g["draws/sse"][...], res.draws_sse)
    meta = g.attrs["dask_bid"]
    assert meta["status"] == "complete"
    assert int(meta["entropy"]) == int(res.params["entropy"])
    assert {"numpy", "dask", "distributed", "zarr"} <= set(meta["versions"])
    for k in ("n_iter", "burn_in", "thin", "bounds", "model", "n_candidates", "block_size"):
        assert k in meta["params"]
    assert meta["input_shape"] == [M, N] and meta["engine"]["checkpoint_every"] == 10
    back = read_result(str(out))
    np.testing.assert_array_equal(back.components, res.components)
    for f in res.trace.dtype.names:
        np.testing.assert_array_equal(back.trace[f], res.trace[f])
    assert back.mse == res.mse and back.params["entropy"] == res.params["entropy"]
    np.testing.assert_array_equal(np.asarray(back.C), A[:, res.columns])
    # the result of the fit itself reads C lazily from the output
    assert isinstance(res.C, da.Array)
    np.testing.assert_array_equal(res.C.compute(), A[:, res.columns])


def test_zarr_input_without_out_keeps_C_lazy_and_writes_nothing(store, tmp_path):
    A, path = store
    before = _tree_hash(path)
    listing = sorted(os.listdir(tmp_path))
    res = bayesian_id(zarr.open_array(path, mode="r"), K, client="synchronous", **KW)
    assert isinstance(res.C, da.Array)
    np.testing.assert_array_equal(res.C.compute(), A[:, res.columns])
    assert sorted(os.listdir(tmp_path)) == listing
    assert _tree_hash(path) == before


def test_output_location_errors(store, tmp_path):
    A, path = store
    with pytest.raises(OutputLocationError, match="input store"):
        bayesian_id(path, K, client="synchronous", out=path, **KW)
    with pytest.raises(OutputLocationError, match="input store"):
        bayesian_id(path, K, client="synchronous", out=os.path.join(path, "sub"), **KW)
    out = tmp_path / "o.zarr"
    out.mkdir()
    (out / "something").write_text("x")
    # said for what it is (the advice was "pass overwrite=True", then refused for it)
    with pytest.raises(OutputExistsError, match="already exists and is not a dask_bid result"
                                                ".*never replaces it. Choose another output"):
        bayesian_id(path, K, client="synchronous", out=str(out), **KW)
    assert (out / "something").read_text() == "x"
    # overwrite replaces only a dask_bid result or an empty directory (issue 11, item 1)
    with pytest.raises(OutputExistsError, match="not a dask_bid result"):
        bayesian_id(path, K, client="synchronous", out=str(out), overwrite=True, **KW)
    assert (out / "something").read_text() == "x"
    (out / "something").unlink()
    # an empty folder is written into as it is: not removed and made again, which lost
    # its permissions (a read-only folder came back writable)
    os.chmod(out, 0o710)
    before = os.stat(out)
    res = bayesian_id(path, K, client="synchronous", out=str(out), overwrite=True, **KW)
    assert read_result(str(out)).columns.tolist() == res.columns.tolist()
    after = os.stat(out)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    res = bayesian_id(path, K, client="synchronous", out=str(out), overwrite=True, **KW)
    assert read_result(str(out)).columns.tolist() == res.columns.tolist()
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(OutputLocationError, match="file"):
        bayesian_id(path, K, client="synchronous", out=str(f), **KW)


def test_resume_checks(store, tmp_path):
    A, path = store
    out = str(tmp_path / "o.zarr")
    res = bayesian_id(path, K, client="synchronous", out=out, **KW)
    # resuming a finished fit returns it
    again = bayesian_id(path, K, client="synchronous", out=out, resume=True,
                        **{**KW, "random_state": None})
    np.testing.assert_array_equal(again.components, res.components)
    # a finished fit is continued to a larger n_iter (tests/test_engine_continue.py),
    # never shortened, and nothing else may change
    with pytest.raises(ParameterError, match="never shortened"):
        bayesian_id(path, K, client="synchronous", out=out, resume=True,
                    **{**KW, "n_iter": KW["n_iter"] - 1})
    with pytest.raises(ParameterError, match="burn_in"):
        bayesian_id(path, K, client="synchronous", out=out, resume=True,
                    **{**KW, "burn_in": KW["burn_in"] + 1})
    with pytest.raises(ParameterError, match="seed"):
        bayesian_id(path, K, client="synchronous", out=out, resume=True,
                    **{**KW, "random_state": 6})
    with pytest.raises(ParameterError, match="needs out"):
        bayesian_id(path, K, client="synchronous", resume=True, **KW)


def test_engine_argument_errors(store):
    A, path = store
    with pytest.raises(ParameterError, match="checkpoint_every"):
        bayesian_id(path, K, client="synchronous", **{**KW, "checkpoint_every": 0})
    with pytest.raises(ParameterError, match="chunks"):
        bayesian_id(path, K, client="synchronous", chunks=(10,), **KW)
    with pytest.raises(ParameterError, match="client"):
        bayesian_id(path, K, client=3.5, **KW)


def test_non_finite_zarr_input(tmp_path):
    A = _matrix()
    A[7, 9] = np.nan
    A[100, 3] = np.inf
    to_zarr(A, tmp_path / "nan.zarr", chunks=(48, 60))
    # found by the engine's first streaming pass ...
    with pytest.raises(NonFiniteInputError, match="2 NaN or infinite"):
        bayesian_id(str(tmp_path / "nan.zarr"), K, client="synchronous", init="random", **KW)
    # ... or, with a computed initial basis, by its pass
    with pytest.raises(NonFiniteInputError, match="NaN or infinit"):
        bayesian_id(str(tmp_path / "nan.zarr"), K, client="synchronous", init="sketch", **KW)


@pytest.mark.timeout(60)
def test_unreachable_scheduler_fails_fast(store):
    A, path = store
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from dask_bid.engine.cluster import SCHEDULER_TIMEOUT, scheduler_timeout

    # the default wait (5 s) unless the config key says otherwise; the refusal is timed
    # with 1 s (a user's slow scheduler would set more; the suite's time)
    assert scheduler_timeout() == SCHEDULER_TIMEOUT == 5.0
    with dask.config.set({"dask_bid.scheduler-timeout": 30}):
        assert scheduler_timeout() == 30.0
    t0 = time.monotonic()
    with dask.config.set({"dask_bid.scheduler-timeout": 1}), pytest.raises(
            SchedulerUnreachableError, match=f"127.0.0.1:{port}.* within 1 s"):
        bayesian_id(path, K, client=f"tcp://127.0.0.1:{port}", **KW)
    assert time.monotonic() - t0 < 4


@pytest.mark.timeout(60)
@pytest.mark.parametrize("peer", ["silent", "http", "silent-host:port"])
def test_a_port_that_is_not_a_scheduler_is_refused_in_time(store, peer):
    """An address whose peer accepts the connection and then says nothing (another
    service's port, a scheduler's dashboard) made Client() wait without end; one that
    answers HTTP ended in "MemoryError: Unable to allocate 3.07 EiB" and a traceback at
    exit. Both are refused within the scheduler timeout now."""
    import threading

    A, path = store
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    held = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            if peer == "http":  # (the others accept and say nothing)
                conn.recv(100)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=serve, daemon=True).start()
    t0 = time.monotonic()
    try:
        with dask.config.set({"dask_bid.scheduler-timeout": 1}), pytest.raises(
                SchedulerUnreachableError, match=f"127.0.0.1:{port}.* within 1 s "
                + (r"\(OSError: Timed out" if peer.startswith("silent") else
                   r"\(ValueError: it does not speak Dask's protocol")):
            # an address without its scheme is a tcp one (it was not probed, and hung)
            bayesian_id(path, K, client=("" if peer == "silent-host:port" else "tcp://")
                        + f"127.0.0.1:{port}", **KW)
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert time.monotonic() - t0 < 5


@pytest.mark.timeout(120)
def test_address_string_and_default_client(store, cluster):
    A, path = store
    kw = KW_CLUSTER | dict(n_iter=12, burn_in=4)  # its subject is the client
    ref = bayesian_id(path, K, client="synchronous", **kw)
    res = bayesian_id(path, K, client=cluster.scheduler.address, **kw)
    np.testing.assert_array_equal(res.trace["mse"], ref.trace["mse"])
    with cluster.as_current():  # picked up as the default client
        res2 = bayesian_id(path, K, **kw)
    np.testing.assert_array_equal(res2.components, ref.components)


@pytest.mark.timeout(120)
def test_no_client_starts_and_stops_a_local_cluster(store):
    from distributed import default_client

    A, path = store
    with pytest.raises(ValueError):
        default_client()
    environ = dict(os.environ)
    seen = []
    res = bayesian_id(path, K, **{**KW_CLUSTER, "n_iter": 12, "burn_in": 4},
                      callback=lambda st: seen.append(os.environ.get("OMP_NUM_THREADS")))
    assert res.components.shape == (K, N)
    with pytest.raises(ValueError):  # nothing left behind as the default
        default_client()
    # nor in the environment: distributed's nannies set OMP_NUM_THREADS=1 and others in
    # this process for their workers, and left them for everything started after the fit
    nanny_sets = [*dask.config.get("distributed.nanny.pre-spawn-environ"), "PYTHONHASHSEED",
                  "__DASK_PARENT_PID"]
    assert "OMP_NUM_THREADS" in nanny_sets
    assert {k: os.environ.get(k) for k in nanny_sets} == {k: environ.get(k) for k in nanny_sets}
    assert set(seen) == {environ.get("OMP_NUM_THREADS")}  # during the fit as well


@pytest.mark.parametrize("extra", [
    dict(sampler="plain"), dict(sampler="aggressive"), dict(sampler="search"),
    dict(model="gbtn"), dict(n_chains=2), dict(n_tries="all", acceptance="barker"),
    dict(refine_sweeps=3, w_estimate="map"), dict(init="sketch"),
], ids=["plain", "aggressive", "search", "gbtn", "two-chains", "all-tries", "refine-map",
        "sketch-init"])
def test_engine_matches_memory_backend_bitwise_in_one_tile(extra):
    A = _matrix(2)
    kw = {k: v for k, v in KW.items() if k != "checkpoint_every"} | extra
    mem = bayesian_id(A, K, **kw)
    eng = bayesian_id(A, K, client="synchronous", checkpoint_every=7, **kw)
    for f in ("mse", "sigma2", "accepted"):
        np.testing.assert_array_equal(mem.trace[f], eng.trace[f])
    np.testing.assert_array_equal(mem.columns, eng.columns)
    np.testing.assert_array_equal(mem.components, eng.components)
    np.testing.assert_array_equal(mem.draws_columns, eng.draws_columns)
    np.testing.assert_array_equal(mem.inclusion_probability, eng.inclusion_probability)
    assert mem.mse == pytest.approx(eng.mse, rel=1e-12)


def test_file_urls_for_input_and_output(store, tmp_path):
    A, path = store
    url_in = "file://" + path
    url_out = "file://" + str(tmp_path / "url_out.zarr")
    res = bayesian_id(url_in, K, client="synchronous", out=url_out, **KW)
    back = read_result(url_out)
    np.testing.assert_array_equal(back.components, res.components)
    np.testing.assert_array_equal(np.asarray(back.C), A[:, res.columns])
    with pytest.raises(OutputLocationError):
        bayesian_id(url_in, K, client="synchronous", out=url_in, **KW)
    # fsspec's other spellings of local files: file://localhost/p is /p (it was written to
    # ./localhost/p), local:///p is /p; read back as the path they name
    for url, where in (("file://localhost" + str(tmp_path / "h.zarr"), tmp_path / "h.zarr"),
                       ("local://" + str(tmp_path / "l.zarr"), tmp_path / "l.zarr")):
        res = bayesian_id("local://" + path, K, client="synchronous", out=url, **KW)
        np.testing.assert_array_equal(read_result(str(where)).components, res.components)
        np.testing.assert_array_equal(read_result(url).components, res.components)


def test_a_sharded_store_gives_the_chain_of_the_unsharded_one(store, tmp_path, capsys):
    """A Zarr v3 array with sharding (its chunks stored inside shard files) is read as
    its chunks, read-only: the same chain as the unsharded store of the same chunks, bit
    for bit, as a Zarr v2 array's; ``info`` shows the shards."""
    from dask_bid.interface.cli import main

    A, path = store
    sharded = tmp_path / "sharded.zarr"
    zarr.create_array(sharded, shape=A.shape, chunks=(48, 60), shards=(96, 120),
                      dtype="f8")[:] = A
    before = _tree_hash(sharded)
    ref = bayesian_id(path, K, client="synchronous", **KW)
    got = bayesian_id(str(sharded), K, client="synchronous", **KW)
    for f in ("mse", "sigma2", "accepted"):
        np.testing.assert_array_equal(ref.trace[f], got.trace[f])
    np.testing.assert_array_equal(ref.components, got.components)
    np.testing.assert_array_equal(np.asarray(got.C), A[:, got.columns])
    assert _tree_hash(sharded) == before
    v2 = tmp_path / "v2.zarr"
    zarr.create_array(v2, shape=A.shape, chunks=(48, 60), dtype="f8", zarr_format=2)[:] = A
    np.testing.assert_array_equal(
        bayesian_id(str(v2), K, client="synchronous", **KW).trace["mse"], ref.trace["mse"])
    assert main(["info", str(sharded)]) == 0
    text = capsys.readouterr().out
    assert "chunks     48 x 60 (10 chunks)" in text
    assert "shards     96 x 120 (3 shard files, the chunks stored inside them)" in text
