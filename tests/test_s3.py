"""Object storage (issue 13, item 3): input, output, checkpoints, resume and the CLI on S3.

Against a real S3-protocol server on 127.0.0.1: moto's standalone server (the one s3fs's
own tests use), reached through s3fs with credentials and endpoint in ``storage_options``
(the CLI: the standard AWS_* environment variables). The refusals (missing bucket, bad
credentials) run with moto's IAM enforcement switched on for that test; a read-only bucket
is one whose bucket policy denies s3:PutObject and s3:DeleteObject (moto enforces bucket
policies on object requests even without IAM). Read-only *credentials* (an IAM user allowed
only s3:GetObject/ListBucket) cannot be tested with moto 5.2: with IAM enforced it rejects
the signature of every listing whose query holds a '/' (s3fs's ``delimiter=/``, sent by
aiohttp), valid keys included, so such a user fails at its first listing, not at the
denied write.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import uuid
import warnings

import numpy as np
import pytest
from _support import StopFit, assert_same_chain, stop_at

pytest.importorskip("s3fs", reason="the [s3] extra (s3fs) is not installed")
moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed")
boto3 = pytest.importorskip("boto3")
requests = pytest.importorskip("requests")

from dask_bid import (  # noqa: E402
    OutputLocationError,
    ParameterError,
    StoreAccessError,
    StoreNotFoundError,
)
from dask_bid.engine import read_result, to_zarr  # noqa: E402
from dask_bid.interface import bayesian_id  # noqa: E402

# one pytest-xdist process runs this module: its module-scoped fixtures are then
# computed once, not once per process (the suite's time, README)
pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("s3")]

M, N, K = 40, 12, 3
CHUNKS = (10, 12)
KW = dict(n_iter=8, burn_in=2, random_state=3, client="synchronous", checkpoint_every=3)
# checkpoints cost some 56 requests each on moto (0.2 s; 220 and ~1 s before they were
# written in batches): one, at the end, where not tested
FEW = {**KW, "checkpoint_every": 100}
ADMIN = ("testing", "testing")  # any key passes while moto's IAM checks are off


def _matrix(seed=1):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
    A += 0.05 * rng.standard_normal((M, N))
    return A / np.abs(A).max() * 0.75


class _S3:
    """A moto server on 127.0.0.1 and the credentials it knows."""

    def __init__(self):
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0,
                                                     verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
    def client(self, service="s3", creds=ADMIN):
        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=creds[0], aws_secret_access_key=creds[1])

    def options(self, creds=ADMIN):
        return {"key": creds[0], "secret": creds[1],
                "client_kwargs": {"endpoint_url": self.endpoint, "region_name": "us-east-1"}}

    def bucket(self):
        name = f"b-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket):
        pages = self.client().get_paginator("list_objects_v2").paginate(
            Bucket=bucket)
        return {o["Key"]: o["ETag"] for p in pages for o in p.get("Contents", [])}

    def enforce_iam(self, on):
        # moto's switch: after this many unauthenticated requests, every request is
        # authenticated and authorised against its IAM users and policies
        r = requests.post(f"{self.endpoint}/moto-api/reset-auth",
                          data=b"0" if on else b"inf", timeout=10)
        r.raise_for_status()


def _forget_s3fs():
    """Drop s3fs's cached filesystems (a test that changes the AWS_* environment), and
    collect them here: their aiohttp sessions, some never opened to an endpoint that did
    not answer, warned "Unclosed client session" (ResourceWarning) when collected later,
    inside another test that turns warnings into errors."""
    import gc

    import s3fs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        s3fs.S3FileSystem.clear_instance_cache()
        gc.collect()


@pytest.fixture(scope="module", autouse=True)
def _no_sessions_left_behind():
    """The module's filesystems collected at its end (see :func:`_forget_s3fs`), and the
    aiohttp sessions still open then closed on their own event loop (fsspec's): one
    outlived the module and, collected inside a later test that turns warnings into
    errors (tests/test_truncnorm.py), failed it with "Unclosed client session"."""
    yield
    _forget_s3fs()
    import gc

    import aiohttp
    from fsspec.asyn import sync

    for obj in gc.get_objects():
        try:  # (isinstance of a dead weak proxy raises ReferenceError)
            if not isinstance(obj, aiohttp.ClientSession) or obj.closed:
                continue
            sync(obj._loop, obj.close, timeout=5)
        except Exception:  # a session of a loop that is gone: nothing to close on
            pass


@pytest.fixture(scope="module")
def s3():
    srv = _S3()
    yield srv
    srv.enforce_iam(False)
    srv.server.stop()


@pytest.fixture
def iam(s3):
    """IAM enforced for one test: a key moto does not know is refused."""
    s3.enforce_iam(True)
    yield s3
    s3.enforce_iam(False)


@pytest.fixture
def s3_input(s3):
    bucket = s3.bucket()
    url = f"s3://{bucket}/A.zarr"
    to_zarr(_matrix(), url, chunks=CHUNKS, storage_options=s3.options())
    return bucket, url


@pytest.fixture(scope="module")
def local_fit(tmp_path_factory):
    """The same fit from a local store: what every S3 fit must reproduce bitwise."""
    path = str(tmp_path_factory.mktemp("local") / "A.zarr")
    to_zarr(_matrix(), path, chunks=CHUNKS)
    return bayesian_id(path, K, **KW)


# ------------------------------------------------------------------ input and output
def test_fit_reads_its_input_from_s3_and_writes_its_output_there(s3, s3_input, local_fit):
    bucket, url = s3_input
    so = s3.options()
    before = {k: v for k, v in s3.keys(bucket).items() if k.startswith("A.zarr/")}
    out = f"s3://{bucket}/fit.zarr"
    res = bayesian_id(url, K, out=out, storage_options=so, **FEW)
    assert_same_chain(res, local_fit)
    back = read_result(out, storage_options=so)
    assert_same_chain(back, local_fit)
    np.testing.assert_array_equal(np.asarray(back.C), _matrix()[:, back.columns])
    keys = s3.keys(bucket)
    assert {k: v for k, v in keys.items() if k.startswith("A.zarr/")} == before  # input intact
    # only each chain's final state stays at the end (a larger n_iter continues from it)
    assert {k.split("/")[2] for k in keys if k.startswith("fit.zarr/checkpoint/c")} == {
        f"c{c}-it{FEW['n_iter']:08d}" for c in range(FEW.get("n_chains", 1))}
    assert "fit.zarr/C/zarr.json" in keys and "fit.zarr/W/zarr.json" in keys
    # an existing result on S3 is refused without overwrite, replaced with it
    with pytest.raises(Exception, match="already exists"):
        bayesian_id(url, K, out=out, storage_options=so, **FEW)
    again = bayesian_id(url, K, out=out, storage_options=so, overwrite=True, **FEW)
    assert_same_chain(again, local_fit)


@pytest.mark.parametrize("how", ["rewritten", "chunk removed"])
def test_an_s3_input_changed_during_the_fit_fails_it(s3, s3_input, how):
    """As for a local store (tests/test_engine_safety.py): the input rewritten with
    another matrix, or a chunk deleted, while the fit read it gave a "complete" fit of
    two matrices (a missing chunk reads as zeros). Watched by the listing's ETags."""
    from dask_bid import InputChangedError

    bucket, url = s3_input
    so = s3.options()

    def change(st):
        if st.iteration == 4:
            if how == "rewritten":
                to_zarr(_matrix(seed=9), url, chunks=CHUNKS, storage_options=so,
                        overwrite=True)
            else:
                key = next(k for k in s3.keys(bucket) if k.startswith("A.zarr/c/"))
                s3.client().delete_object(Bucket=bucket, Key=key)

    with pytest.raises(InputChangedError, match="changed while the fit read it .*(written|"
                                                "1 object.s. removed)"):
        bayesian_id(url, K, storage_options=so, callback=change, **FEW)


def test_one_storage_options_for_an_s3_input_and_a_local_output(s3, s3_input, local_fit,
                                                              tmp_path):
    bucket, url = s3_input
    out = str(tmp_path / "fit.zarr")  # Zarr refuses storage_options with a local path
    res = bayesian_id(url, K, out=out, storage_options=s3.options(), **FEW)
    assert_same_chain(res, local_fit)
    assert_same_chain(read_result(out, storage_options=s3.options()), local_fit)


def test_a_checkpoint_on_s3_costs_a_few_dozen_requests(s3, s3_input, local_fit,
                                                      monkeypatch):
    """A checkpoint on object storage cost some 220 requests for its dozen objects (each
    Zarr node made one by one: existence checks of parents and of v2 keys, listings) and
    a fit's result 300 more; on real S3 each is a round trip. The states and the result's
    arrays are now made in memory and written as batches. Counted where s3fs sends them
    (benchmarks/bench_s3_requests.py: 56 a checkpoint, 181 for a fit with one), bounded
    here at 90 and 300: the former way makes 220 and 570 (a planted return to it fails)."""
    import s3fs

    bucket, url = s3_input
    so = s3.options()
    calls = []
    orig = s3fs.S3FileSystem._call_s3

    async def counting(self, method, *a, **k):
        calls.append(method)
        return await orig(self, method, *a, **k)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counting)
    n = {}
    for every in (100, 3):  # a checkpoint at the end only; at 3, 6 and 8
        calls.clear()
        res = bayesian_id(url, K, out=f"s3://{bucket}/c{every}.zarr", storage_options=so,
                          **{**KW, "checkpoint_every": every})
        n[every] = len(calls)
        assert_same_chain(res, local_fit)
        assert_same_chain(read_result(f"s3://{bucket}/c{every}.zarr", storage_options=so),
                          local_fit)
    assert n[100] <= 300 and (n[3] - n[100]) / 2 <= 90, n


def test_checkpoints_on_s3_and_resume_give_the_uninterrupted_fit(s3, s3_input, local_fit,
                                                                 tmp_path):
    bucket, url = s3_input
    so = s3.options()
    out = f"s3://{bucket}/fit.zarr"

    stop = stop_at(7)

    with pytest.raises(StopFit):
        bayesian_id(url, K, out=out, storage_options=so, callback=stop, **KW)
    keys = s3.keys(bucket)
    ckpts = {k.split("/")[2] for k in keys
             if k.startswith("fit.zarr/checkpoint/") and k.count("/") > 2}
    # the two newest, on S3: the periodic one at 6 and the stop's own at 7
    assert ckpts == {"c0-it00000006", "c0-it00000007"}
    with pytest.raises(Exception, match="stopped before the end"):
        read_result(out, storage_options=so)  # marked interrupted, not taken for a result
    seen = []
    res = bayesian_id(url, K, out=out, storage_options=so, resume=True,
                      callback=lambda st: seen.append(st.iteration), **KW)
    assert seen[0] == 8  # continued right after the stop at iteration 7
    assert_same_chain(res, local_fit)
    assert_same_chain(read_result(out, storage_options=so), local_fit)
    # the chain's final state stays (a larger n_iter continues from it), nothing older
    assert {k.split("/")[2] for k in s3.keys(bucket)
            if k.startswith("fit.zarr/checkpoint/c")} == {f"c0-it{KW['n_iter']:08d}"}
    # and it continues on S3 to the chain of one longer fit (checked first, as the
    # command line does, then run)
    longer = {**FEW, "n_iter": KW["n_iter"] + 4}
    from dask_bid.engine.fit import check_resume
    from dask_bid.interface._params import validate_params
    from dask_bid.interface.functional import DEFAULTS

    p = validate_params({**DEFAULTS, **{k: v for k, v in longer.items()
                                        if k not in ("client", "checkpoint_every")},
                         "n_components": K, "n_iter": KW["n_iter"] - 1}, n_cols=N)
    with pytest.raises(ParameterError, match="never shortened"):
        check_resume(out, p, storage_options=so)
    more = bayesian_id(url, K, out=out, storage_options=so, resume=True, **longer)
    assert more.continued_from == KW["n_iter"]
    path = str(tmp_path / "A.zarr")
    to_zarr(_matrix(), path, chunks=CHUNKS)
    assert_same_chain(more, bayesian_id(path, K, **longer))


def test_cli_fit_from_s3_to_s3_with_aws_environment_variables(s3, s3_input, local_fit,
                                                              tmp_path, capsys):
    bucket, url = s3_input
    out = f"s3://{bucket}/fit.zarr"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=ADMIN[0], AWS_SECRET_ACCESS_KEY=ADMIN[1],
               AWS_ENDPOINT_URL=s3.endpoint, AWS_DEFAULT_REGION="us-east-1")
    cmd = [sys.executable, "-m", "dask_bid.interface.cli", "fit", url, "--k", str(K),
           "--out", out, "--n-iter", "8", "--burn-in", "2", "--seed", "3",
           "--scheduler", "synchronous", "-q"]
    # the figures of a result on object storage go to the current folder (they went into
    # a folder named "s3:", the printed s3:// path reaching no bucket)
    run = subprocess.run([*cmd[:-1], "--plot", "trace"], env=env, capture_output=True,
                         text=True, timeout=100, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "plot         fit.trace.png" in run.stdout, run.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.trace.png"]
    from dask_bid.interface.cli import main

    assert main(["plot", out, "--out", f"s3://{bucket}/figs"]) == 2
    assert "is a URL, and the figures are written as local files" in capsys.readouterr().err
    res = read_result(out, storage_options=s3.options())
    np.testing.assert_array_equal(res.columns, local_fit.columns)
    np.testing.assert_array_equal(res.trace["mse"], local_fit.trace["mse"])
    # without credentials for the endpoint the CLI refuses in one line
    bad = {**env, "AWS_ACCESS_KEY_ID": "AKIAUNKNOWN000000000"}
    s3.enforce_iam(True)
    try:
        run = subprocess.run(cmd[:-1] + ["--overwrite", "-q"], env=bad, capture_output=True,
                             text=True, timeout=100)
    finally:
        s3.enforce_iam(False)
    assert run.returncode != 0
    err = run.stderr.strip().splitlines()
    assert len(err) == 1 and "denied" in err[0] and "AWS_ACCESS_KEY_ID" in err[0], run.stderr
    assert read_result(out, storage_options=s3.options()).columns.tolist() \
        == local_fit.columns.tolist()  # the previous result is untouched


# ------------------------------------------------------------------ refusals
def test_an_output_url_with_an_empty_segment_never_deletes_the_input(s3, s3_input):
    """out="s3://bkt//A.zarr" for the input s3://bkt/A.zarr: s3fs found no "bkt//A.zarr"
    (so nothing to refuse) and its removal then deleted "bkt/A.zarr", the input. Now
    refused before anything is written, as is the same slip in to_zarr's path."""
    bucket, url = s3_input
    so = s3.options()
    before = s3.keys(bucket)
    twice = f"s3://{bucket}//A.zarr"
    for kw in ({}, {"overwrite": True}):  # the input, named as such
        with pytest.raises(OutputLocationError, match=f"is the input store '{url}'"):
            bayesian_id(url, K, out=twice, storage_options=so, **kw, **KW)
    # any other output or store path with one is refused too, naming the single-slash one
    for call in (lambda: bayesian_id(url, K, out=f"s3://{bucket}//fit.zarr",
                                     storage_options=so, **KW),
                 lambda: to_zarr(_matrix(), f"s3://{bucket}//B.zarr", storage_options=so)):
        with pytest.raises(OutputLocationError, match=r"empty path segment \('//'\).*"
                           rf"'s3://{bucket}/(fit|B).zarr'"):
            call()
    # '.' and '..' are key text on an object store, not resolved as in a local path
    for odd in (f"s3://{bucket}/./fit.zarr", f"s3://{bucket}/x/../fit.zarr"):
        with pytest.raises(OutputLocationError, match=r"has a '\.' or '\.\.' path segment"):
            bayesian_id(url, K, out=odd, storage_options=so, **KW)
    assert s3.keys(bucket) == before


def test_a_missing_bucket_is_named(s3, s3_input, monkeypatch, capsys):
    bucket, url = s3_input
    so = s3.options()
    with pytest.raises(StoreNotFoundError, match=r"bucket 'no-such-bucket' .* does not exist"):
        bayesian_id("s3://no-such-bucket/A.zarr", K, storage_options=so, **KW)
    before = s3.keys(bucket)
    with pytest.raises(OutputLocationError,
                       match=r"bucket 'no-such-bucket' of the output .* does not exist"):
        bayesian_id(url, K, out="s3://no-such-bucket/fit.zarr", storage_options=so, **KW)
    with pytest.raises(OutputLocationError, match="does not exist"):
        to_zarr(_matrix(), "s3://no-such-bucket/B.zarr", storage_options=so)
    assert s3.keys(bucket) == before
    names = {b["Name"] for b in s3.client().list_buckets()["Buckets"]}
    assert "no-such-bucket" not in names  # nothing created on the way
    # a bucket that exists but holds no store there
    with pytest.raises(StoreNotFoundError, match="no Zarr store at"):
        bayesian_id(f"s3://{bucket}/nothing.zarr", K, storage_options=so, **KW)
    # nor a result: StoreNotFoundError as for a local path (it was CorruptStoreError, and
    # info quoted zarr's GroupNotFoundError and StorePath)
    with pytest.raises(StoreNotFoundError, match="no dask_bid result at .*nothing is stored"):
        read_result(f"s3://{bucket}/nothing.zarr", storage_options=so)
    from dask_bid.interface.cli import main

    for k, v in (("AWS_ACCESS_KEY_ID", ADMIN[0]), ("AWS_SECRET_ACCESS_KEY", ADMIN[1]),
                 ("AWS_ENDPOINT_URL", s3.endpoint), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(k, v)
    _forget_s3fs()
    try:
        assert main(["info", f"s3://{bucket}/nothing.zarr"]) == 2
    finally:
        _forget_s3fs()
    err = capsys.readouterr().err
    assert err == f"dask-bid: error: no such file or store: 's3://{bucket}/nothing.zarr'\n", err


def test_bad_credentials_are_refused_in_one_line(s3_input, iam, tmp_path):
    bucket, url = s3_input
    bad = iam.options(("AKIAUNKNOWN000000000", "wrong-secret"))
    with pytest.raises(StoreAccessError) as info:
        bayesian_id(url, K, storage_options=bad, **KW)
    msg = str(info.value)
    assert "\n" not in msg and "denied" in msg and "storage_options" in msg
    assert "the input" in msg
    local = str(tmp_path / "A.zarr")
    to_zarr(_matrix(), local, chunks=CHUNKS)
    with pytest.raises(StoreAccessError, match=r"access to the output .*fit\.zarr' was denied"):
        bayesian_id(local, K, out=f"s3://{bucket}/fit.zarr", storage_options=bad, **KW)
    with pytest.raises(StoreAccessError, match="denied"):
        to_zarr(_matrix(), f"s3://{bucket}/B.zarr", storage_options=bad)
    # a result read back is "the result" (it was called "the input")
    with pytest.raises(StoreAccessError, match=r"access to the result .*fit\.zarr' was denied"):
        read_result(f"s3://{bucket}/fit.zarr", storage_options=bad)
    iam.enforce_iam(False)
    assert all(k.startswith("A.zarr/") for k in iam.keys(bucket))  # nothing written


def test_no_credentials_at_all_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """No key anywhere (environment, files, instance metadata): botocore's
    NoCredentialsError is not a PermissionError, and came out of the CLI as an "internal
    error" (exit 1), and of info as "is it a Zarr store?"."""

    from dask_bid.interface.cli import main

    for k in list(os.environ):
        if k.startswith("AWS_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    _forget_s3fs()
    np.save(tmp_path / "a.npy", _matrix())
    for args, what in [(["fit", str(tmp_path / "a.npy"), "--k", "2", "--out",
                         "s3://bucket/fit.zarr"], "the output"),
                       (["fit", "s3://bucket/A.zarr", "--k", "2", "--out",
                         str(tmp_path / "f.zarr")], "the input"),
                       (["info", "s3://bucket/A.zarr"], "the store"),
                       (["convert", str(tmp_path / "a.npy"), "--out", "s3://bucket/x.zarr"],
                        "the output")]:
        assert main([*args, "-q"] if args[0] != "info" else args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"no credentials for {what}" in err[0], err
        assert "AWS_ACCESS_KEY_ID" in err[0] and "internal error" not in err[0]
        # the command line has no storage_options to pass them in (it was advised)
        assert "storage_options" not in err[0], err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]  # nothing converted
    with pytest.raises(StoreAccessError, match="no credentials for the input.*pass them in "
                                               "storage_options"):
        bayesian_id("s3://bucket/A.zarr", K, **KW)


def test_an_endpoint_that_does_not_answer_is_named_in_one_line(tmp_path, monkeypatch,
                                                               capsys):
    """AWS_ENDPOINT_URL at a port where nothing listens: botocore's
    EndpointConnectionError came out of the CLI as an "internal error" (exit 1) after its
    retries, and raw from the Python API."""

    from dask_bid.interface.cli import main

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard: nobody there
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ADMIN[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ADMIN[1])
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore's retries: the suite's time
    _forget_s3fs()
    np.save(tmp_path / "a.npy", _matrix())
    for args, what in [(["fit", "s3://bucket/A.zarr", "--k", "2", "--out",
                         "s3://bucket/fit.zarr", "-q"], "the output"),
                       (["info", "s3://bucket/A.zarr"], "the store"),
                       (["convert", str(tmp_path / "a.npy"), "--out", "s3://bucket/x.zarr",
                         "-q"], "the output")]:
        assert main(args) == 2, args
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"cannot reach the object store of {what}" in err[0], err
        assert "AWS_ENDPOINT_URL" in err[0] and "internal error" not in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]
    with pytest.raises(StoreAccessError, match="cannot reach the object store of the input"):
        bayesian_id("s3://bucket/A.zarr", K, **KW)
    # a result read back (it said "not a dask_bid output group", with tracebacks)
    with pytest.raises(StoreAccessError, match="cannot reach the object store of the result"):
        read_result("s3://bucket/fit.zarr")
    _forget_s3fs()


def test_a_worker_without_the_clients_credentials_is_said_as_such():
    """Workers started without the AWS_* variables the client has: their write of an S3
    output raised botocore's NoCredentialsError back to the client, an "internal error"
    on the command line. The fit's cluster context says what it is (the error a task
    raises is re-raised as is by Client.gather: here raised inside that context)."""
    from botocore.exceptions import NoCredentialsError
    from distributed import Client, LocalCluster

    from dask_bid.engine.cluster import _cluster_errors

    with LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as lc, \
            Client(lc, set_as_default=False) as client:
        with pytest.raises(StoreAccessError, match="a Dask worker could not reach the object "
                           r"store the client reaches \(NoCredentialsError: Unable to locate "
                           "credentials\\): every worker needs the client's credentials"):
            with _cluster_errors(client):
                raise NoCredentialsError()


def test_a_read_only_bucket_is_refused_before_anything_is_written(s3, s3_input, tmp_path,
                                                                  monkeypatch, capsys):
    bucket, url = s3_input
    so = s3.options()
    out = f"s3://{bucket}/fit.zarr"

    def stop(st):
        if st.iteration == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):  # an interrupted fit to resume, on S3
        bayesian_id(url, K, out=out, storage_options=so, callback=stop, **FEW)
    deny = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": ["s3:PutObject", "s3:DeleteObject"],
        "Resource": f"arn:aws:s3:::{bucket}/*"}]}
    s3.client().put_bucket_policy(Bucket=bucket, Policy=json.dumps(deny))
    before = s3.keys(bucket)
    calls = []
    for kw in (dict(out=f"s3://{bucket}/new.zarr"), dict(out=out, resume=True),
               dict(out=out, overwrite=True)):
        with pytest.raises(StoreAccessError) as info:
            bayesian_id(url, K, storage_options=so, callback=calls.append, **kw, **FEW)
        msg = str(info.value)
        assert "\n" not in msg and msg.startswith(f"cannot write the output 's3://{bucket}/")
        assert "read-only" in msg
    assert calls == []  # refused before the first iteration (a resume: before its pass)
    with pytest.raises(StoreAccessError, match="cannot write"):
        to_zarr(_matrix(), f"s3://{bucket}/B.zarr", storage_options=so)
    # the command line's conversion of a file into it (it said "permission denied on a
    # file", naming none)

    from dask_bid.interface.cli import main

    for k, v in (("AWS_ACCESS_KEY_ID", ADMIN[0]), ("AWS_SECRET_ACCESS_KEY", ADMIN[1]),
                 ("AWS_ENDPOINT_URL", s3.endpoint), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(k, v)
    _forget_s3fs()
    np.save(tmp_path / "a.npy", _matrix())
    try:
        assert main(["convert", str(tmp_path / "a.npy"), "--out",
                     f"s3://{bucket}/conv.zarr", "-q"]) == 2
    finally:
        _forget_s3fs()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"cannot write the output 's3://{bucket}/conv.zarr'" in err[0], err
    assert s3.keys(bucket) == before  # nothing written, replaced or deleted
    with pytest.raises(Exception, match="stopped before the end"):
        read_result(out, storage_options=so)  # the interrupted fit is still resumable


def test_an_overwrite_the_store_refuses_to_delete_is_refused(s3, s3_input, tmp_path,
                                                            monkeypatch, capsys):
    """A policy denying DeleteObject (object lock, a no-delete role) while writes are
    allowed: s3fs's bulk delete dropped the refusals, so overwrite=True went on over the
    old fit's objects (its checkpoints then resumed as the new fit's), and convert
    --overwrite wrote over the old matrix's chunks. Now refused, naming what is left;
    the old fit stays readable."""
    from dask_bid.interface.cli import main

    bucket, url = s3_input
    so = s3.options()
    out = f"s3://{bucket}/nodel.zarr"
    first = bayesian_id(url, K, out=out, storage_options=so, **FEW)
    for k, v in (("AWS_ACCESS_KEY_ID", ADMIN[0]), ("AWS_SECRET_ACCESS_KEY", ADMIN[1]),
                 ("AWS_ENDPOINT_URL", s3.endpoint), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(k, v)
    np.save(tmp_path / "a.npy", _matrix())
    conv = ["convert", str(tmp_path / "a.npy"), "--out", f"s3://{bucket}/conv.zarr", "-q"]
    _forget_s3fs()
    assert main(conv) == 0
    deny = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": ["s3:DeleteObject"],
        "Resource": f"arn:aws:s3:::{bucket}/*"}]}
    s3.client().put_bucket_policy(Bucket=bucket, Policy=json.dumps(deny))
    try:
        calls = []
        with pytest.raises(StoreAccessError, match=rf"could not delete '{out}': \d+ "
                           r"object\(s\) are still there .*the store refused the deletes") \
                as info:
            bayesian_id(url, K, out=out, overwrite=True, storage_options=so,
                        callback=calls.append, **{**FEW, "random_state": 9})
        assert calls == [] and "may read but not write" not in str(info.value)
        # keep_final_state=False could not delete its checkpoints: said, not silent
        with pytest.warns(RuntimeWarning, match="could not be deleted .*refused the "
                          "deletes"):
            bayesian_id(url, K, out=f"s3://{bucket}/nf.zarr", storage_options=so,
                        keep_final_state=False, **FEW)
        capsys.readouterr()
        np.save(tmp_path / "a.npy", _matrix(seed=2))  # another matrix: converted again
        assert main([*conv, "--overwrite"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"could not delete 's3://{bucket}/conv.zarr'" in err[0], err
    finally:
        s3.client().delete_bucket_policy(Bucket=bucket)
        _forget_s3fs()
    back = read_result(out, storage_options=so)
    np.testing.assert_array_equal(back.columns, first.columns)


def test_a_chunk_this_process_may_not_read_is_not_called_damaged(s3, s3_input):
    """A chunk read refused (a worker without the client's credentials, a policy): the
    message said "the store is damaged ... rewrite the array", which would have the user
    rewrite good data. Here a bucket policy denies the chunks, not the metadata."""
    bucket, url = s3_input
    so = s3.options()
    deny = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": ["s3:GetObject"],
        "Resource": f"arn:aws:s3:::{bucket}/A.zarr/c/*"}]}
    s3.client().put_bucket_policy(Bucket=bucket, Policy=json.dumps(deny))
    try:
        with pytest.raises(StoreAccessError, match=f"cannot read the Zarr array at '{url}' "
                           r"in the process that read it \(pid .*Every Dask worker needs the "
                           "credentials") as info:
            bayesian_id(url, K, storage_options=so, **KW)
        assert "damaged" not in str(info.value)
    finally:
        s3.client().delete_bucket_policy(Bucket=bucket)


def test_a_write_refused_during_the_fit_names_the_output(s3, s3_input, monkeypatch, capsys):
    """A bucket policy that lets the output's start be written but not its checkpoints:
    the command line said "permission denied on a file: check its permissions (and its
    folder's)", naming no URL. It names the output and what to check; the fit resumes
    once the policy is lifted."""
    from dask_bid.interface.cli import main

    bucket, url = s3_input
    out = f"s3://{bucket}/mid.zarr"
    deny = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": ["s3:PutObject"],
        "Resource": f"arn:aws:s3:::{bucket}/mid.zarr/checkpoint/*"}]}
    s3.client().put_bucket_policy(Bucket=bucket, Policy=json.dumps(deny))
    for k, v in (("AWS_ACCESS_KEY_ID", ADMIN[0]), ("AWS_SECRET_ACCESS_KEY", ADMIN[1]),
                 ("AWS_ENDPOINT_URL", s3.endpoint), ("AWS_DEFAULT_REGION", "us-east-1")):
        monkeypatch.setenv(k, v)
    _forget_s3fs()
    argv = ["fit", url, "--k", str(K), "--out", out, "--n-iter", "8", "--burn-in", "2",
            "--seed", "3", "--scheduler", "synchronous", "--checkpoint-every", "3", "-q"]
    try:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"dask-bid: error: access denied while writing {out} (") and \
            "check the bucket's policy and the credentials" in err and err.count("\n") == 1, err
    finally:
        s3.client().delete_bucket_policy(Bucket=bucket)
        _forget_s3fs()
    try:
        assert main([*argv, "--resume"]) == 0, capsys.readouterr().err
    finally:
        _forget_s3fs()


def test_an_unknown_protocol_is_named(tmp_path):
    with pytest.raises(StoreNotFoundError, match=r"cannot open 'nosuchfs://b/A.zarr': .*nosuchfs"):
        bayesian_id("nosuchfs://b/A.zarr", K, **KW)
    local = str(tmp_path / "A.zarr")
    to_zarr(_matrix(), local, chunks=CHUNKS)
    with pytest.raises(OutputLocationError, match=r"cannot open 'nosuchfs://b/fit.zarr'"):
        bayesian_id(local, K, out="nosuchfs://b/fit.zarr", **KW)
    assert os.listdir(tmp_path) == ["A.zarr"]
