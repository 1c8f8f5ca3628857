"""Never lose, mix or invent a user's data (issue 11, items 1-8).

Every test runs the real engine on real Zarr stores in ``tmp_path``; the refusals also
check that the input store is byte-for-byte unchanged afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from _support import StopFit, assert_same_chain, kill_when, stop_at

from dask_bid import (
    CheckpointError,
    ConvergenceWarning,
    CorruptStoreError,
    FitFailedError,
    IncompleteStoreError,
    InputChangedError,
    NonFiniteInputError,
    OutputExistsError,
    OutputLocationError,
    OutputLockedError,
)
from dask_bid.engine import read_result, to_zarr
from dask_bid.engine.checkpoint import CheckpointFallbackWarning, load_blob
from dask_bid.engine.inputs import as_matrix_source, missing_chunks
from dask_bid.engine.lock import OutputLock, lock_path
from dask_bid.engine.serialize import load_state, save_state
from dask_bid.engine.zarr_io import (
    check_output,
    create_matrix_array,
    mark_complete,
    output_status,
)
from dask_bid.interface import bayesian_id

pytestmark = pytest.mark.timeout(300)

M, N, K = 60, 24, 3
CHUNKS = (20, 24)
KW = dict(n_iter=30, burn_in=10, thin=2, random_state=4)
SYNC = dict(client="synchronous", checkpoint_every=10)


def _matrix(seed=1, scale=1.0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
    A += 0.05 * rng.standard_normal((M, N))
    return A / np.abs(A).max() * 0.75 * scale  # max|A| in [0.5, 1): exponent 0


def tree_digest(root):
    """{relative path: sha256} of every file under ``root``."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


@pytest.fixture
def store(tmp_path):
    path = str(tmp_path / "A.zarr")
    to_zarr(_matrix(), path, chunks=CHUNKS)
    return path


class _Stop(KeyboardInterrupt):
    pass


def _interrupted(store, out, at=15, **kw):
    """A fit of ``store`` into ``out`` stopped (as by Ctrl-C) at iteration ``at``."""

    def cb(st):
        if st.iteration == at:
            raise _Stop()

    with pytest.raises(_Stop):
        bayesian_id(store, K, out=out, callback=cb, **{**KW, **SYNC, **kw})


# --------------------------------------------------------------------- 1. overwrite
def test_overwrite_refuses_a_directory_it_did_not_write(store, tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    (out / "data.csv").write_text("1,2\n3,4\n")
    before = tree_digest(out)
    with pytest.raises(OutputExistsError, match="not a dask_bid result"):
        bayesian_id(store, K, out=str(out), overwrite=True, **KW, **SYNC)
    assert tree_digest(out) == before


def test_overwrite_refuses_a_result_holding_foreign_files(store, tmp_path):
    out = tmp_path / "res.zarr"
    bayesian_id(store, K, out=str(out), **KW, **SYNC)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="notes.txt.*did not write"):
        bayesian_id(store, K, out=str(out), overwrite=True, **KW, **SYNC)
    assert (out / "notes.txt").read_text() == "mine"


def test_overwrite_never_deletes_an_input_inside_the_output(tmp_path):
    out = tmp_path / "runs"
    out.mkdir()
    for name in ("data.csv", "data.npy"):
        with pytest.raises(OutputLocationError, match="input is never written or deleted"):
            check_output(str(out), inputs=[str(out / name)], overwrite=True)
    inner = str(out / "A.zarr")
    to_zarr(_matrix(), inner, chunks=CHUNKS)
    before = tree_digest(out)
    with pytest.raises(OutputLocationError, match="input"):
        bayesian_id(inner, K, out=str(out), overwrite=True, **KW, **SYNC)
    assert tree_digest(out) == before


def test_overwrite_replaces_an_empty_directory_and_a_result(store, tmp_path):
    out = tmp_path / "res.zarr"
    out.mkdir()
    first = bayesian_id(store, K, out=str(out), overwrite=True, **KW, **SYNC)
    again = bayesian_id(store, K, out=str(out), overwrite=True, **KW, **SYNC)
    assert_same_chain(first, again)
    assert read_result(str(out)).columns.tolist() == first.columns.tolist()


def test_overwrite_never_deletes_a_file_inside_a_result_an_array_or_a_sparse_store(
        store, tmp_path):
    """Only the top level was looked at: a file of the user's inside a result's array
    (W/notes.txt), a folder in one of its groups, a file among an array's chunks, or
    anything inside a sparse store was deleted by overwrite=True with the rest."""
    import scipy.sparse as sp

    from dask_bid.interface.sparse_io import convert_sparse

    out = tmp_path / "res.zarr"
    bayesian_id(store, K, out=str(out), **KW, **SYNC)
    arr = tmp_path / "written.zarr"
    to_zarr(_matrix(), str(arr), chunks=CHUNKS)
    sparse = tmp_path / "s.zarr"
    X = sp.random(20, 6, density=0.5, format="csc", random_state=0)
    convert_sparse(X, sparse, quiet=True)
    cases = [(out / "W" / "notes.txt", lambda: bayesian_id(store, K, out=str(out),
                                                            overwrite=True, **KW, **SYNC)),
             (out / "draws" / "mine" / "x.npy", lambda: bayesian_id(
                 store, K, out=str(out), overwrite=True, **KW, **SYNC)),
             (out / "C" / "c" / "0" / "notes", lambda: bayesian_id(
                 store, K, out=str(out), resume=True, **KW, **SYNC)),
             (arr / "c" / "mine" / "n.txt", lambda: to_zarr(_matrix(), str(arr),
                                                             overwrite=True)),
             (sparse / "top.txt", lambda: convert_sparse(X, sparse, overwrite=True,
                                                         quiet=True)),
             (sparse / "blocks" / "note.txt", lambda: convert_sparse(X, sparse, overwrite=True,
                                                                     quiet=True))]
    for path, replace in cases:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("mine")
        before = tree_digest(tmp_path)
        with pytest.raises(OutputExistsError, match="which dask_bid did not write"):
            replace()
        assert tree_digest(tmp_path) == before and path.read_text() == "mine"
        path.unlink()
        if path.parent.name == "mine":
            path.parent.rmdir()
    # without them, each is replaced as before
    bayesian_id(store, K, out=str(out), overwrite=True, **KW, **SYNC)
    to_zarr(_matrix(), str(arr), overwrite=True)
    convert_sparse(X, sparse, overwrite=True, quiet=True)


def test_what_a_killed_zarr_write_leaves_does_not_block_resume_or_overwrite(store,
                                                                             tmp_path):
    """A kill during a Zarr write leaves its temporary file (``<name>.<hex>.partial``)
    and, for a checkpoint being written, folders without zarr.json: counted as files
    dask_bid did not write, they made resume, overwrite and a rerun all refuse the fit.
    A file of the user's in such a folder is still refused."""
    out = tmp_path / "fit.zarr"
    reference = bayesian_id(store, K, **KW, **SYNC)
    _interrupted(store, str(out), at=15)
    part = "zarr.0123456789abcdef0123456789abcdef.partial"
    (out / "checkpoint" / part).write_text("{")
    cut = out / "checkpoint" / "c0-it00000016"
    (cut / "client").mkdir(parents=True)
    (cut / "client" / part).write_text("{")
    (cut / "block_00000").mkdir()
    (out / "W" / "c").mkdir(parents=True, exist_ok=True)
    (out / "W" / "c" / "0.0123456789abcdef0123456789abcdef.partial").write_bytes(b"\0")
    (cut / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match="c0-it00000016/notes.txt, which dask_bid "
                                                "did not write"):
        bayesian_id(store, K, out=str(out), resume=True, **KW, **SYNC)
    (cut / "notes.txt").unlink()
    (out / part).write_text("{")
    with warnings.catch_warnings():  # Zarr warned of each as the resume listed the group
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # 30 iterations
        res = bayesian_id(store, K, out=str(out), resume=True, **KW, **SYNC)
    assert_same_chain(reference, res)
    # the finished fit keeps none of them (Zarr warned of each when it listed the group)
    assert not list(out.rglob("*.partial"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sorted(zarr.open_group(str(out), mode="r").keys())
    (out / part).write_text("{")
    bayesian_id(store, K, out=str(out), overwrite=True, **KW, **SYNC)


@pytest.mark.parametrize("where", ["my_recon", "checkpoint/my_recon", "draws/mine",
                                   "mygroup", "traces/mine", "checkpoint/c0-it00000030/mine"])
def test_a_zarr_node_of_the_users_in_a_result_is_never_deleted(store, tmp_path, where):
    """An array (or group) the user added to a result is not the fit's: `--overwrite`
    deleted it silently (any Zarr node counted as dask_bid's). Refused, as a file is."""
    out = tmp_path / "fit.zarr"
    bayesian_id(store, K, out=str(out), **KW, **SYNC)
    g = zarr.open_group(str(out), mode="r+")
    if where == "mygroup":
        g.create_group("mygroup").create_array("x", shape=(3,), dtype="f8")[:] = 42
    else:
        g.create_array(where, shape=(5,), dtype="f8")[:] = 42
    before = tree_digest(out)
    for kw in (dict(overwrite=True), dict(resume=True, n_iter=40)):
        with pytest.raises(OutputExistsError, match=f"holds {where}, which dask_bid did not "
                                                    "write"):
            bayesian_id(store, K, out=str(out), **{**KW, **SYNC, **kw})
    assert tree_digest(out) == before
    # the fit's own nodes, a finished fit's checkpoint and traced draws included, are its
    del g[where]
    bayesian_id(store, K, out=str(out), overwrite=True, trace_columns=[0, 1],
                **{**KW, "n_iter": 40}, **SYNC)
    bayesian_id(store, K, out=str(out), resume=True, trace_columns=[0, 1],
                **{**KW, "n_iter": 50}, **SYNC)


def test_a_resume_records_where_it_read_and_how_it_checkpoints(store, tmp_path):
    """A resume from a copy of the input (same content: accepted) with another
    checkpoint cadence: the stored metadata named the first run's input path and
    cadence. The content's checksum stays, so a later resume still checks it."""
    import shutil

    out = tmp_path / "fit.zarr"
    reference = bayesian_id(store, K, **KW, **SYNC)
    _interrupted(store, str(out), at=15)
    first = zarr.open_group(str(out), mode="r").attrs["dask_bid"]
    assert first["input"].get("checksum") is not None
    copy = str(tmp_path / "copy.zarr")
    shutil.copytree(store, copy)
    res = bayesian_id(copy, K, out=str(out), resume=True, **KW,
                      **{**SYNC, "checkpoint_every": 7})
    assert_same_chain(reference, res)
    meta = zarr.open_group(str(out), mode="r").attrs["dask_bid"]
    assert meta["input"]["path"] == copy and meta["engine"]["checkpoint_every"] == 7
    assert meta["input"]["checksum"] == first["input"]["checksum"]


def test_to_zarr_overwrite_replaces_only_its_own_arrays(tmp_path):
    """overwrite=True deleted whatever was at the path: a folder of the user's files, or
    a Zarr array of another tool. It replaces an empty directory or an array to_zarr
    wrote (holding nothing else)."""
    A = _matrix()
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    other = zarr.create_array(store=str(tmp_path / "other.zarr"), shape=(3, 3), dtype="f8")
    other[:] = 1.0
    ours = str(tmp_path / "ours.zarr")
    to_zarr(A, ours, chunks=CHUNKS)
    (tmp_path / "ours2.zarr").mkdir()
    to_zarr(A, str(tmp_path / "ours2.zarr"), chunks=CHUNKS)
    (tmp_path / "ours2.zarr" / "notes.txt").write_text("mine")
    (tmp_path / "empty").mkdir()
    before = tree_digest(tmp_path)
    for path, why in ((mine, "not a Zarr array dask_bid wrote"),
                      (tmp_path / "other.zarr", "not a Zarr array dask_bid wrote"),
                      (tmp_path / "ours2.zarr", "notes.txt, which dask_bid did not write")):
        with pytest.raises(OutputExistsError, match=why):
            to_zarr(2 * A, str(path), overwrite=True)
    assert tree_digest(tmp_path) == before
    to_zarr(2 * A, ours, overwrite=True)
    # an empty folder is written into as it is, not removed and made again (its mode lost)
    os.chmod(tmp_path / "empty", 0o710)
    st = os.stat(tmp_path / "empty")
    to_zarr(2 * A, str(tmp_path / "empty"), overwrite=True)
    assert (os.stat(tmp_path / "empty").st_ino, os.stat(tmp_path / "empty").st_mode) == (
        st.st_ino, st.st_mode)
    for path in (ours, tmp_path / "empty"):
        np.testing.assert_array_equal(zarr.open_array(str(path), mode="r")[...], 2 * A)


def test_an_array_is_never_written_onto_the_store_it_reads(tmp_path):
    """to_zarr(da.from_zarr(p) * 2, p, overwrite=True) removed p before reading it: the
    data was lost. So did a fit whose dask input reads a result it replaces."""
    import dask.array as da

    A = _matrix()
    path = str(tmp_path / "A.zarr")
    to_zarr(A, path, chunks=CHUNKS)
    before = tree_digest(tmp_path)
    for x in (da.from_zarr(path) * 2, zarr.open_array(path, mode="r")):
        for dst in (path, path + "/inner"):
            with pytest.raises(OutputLocationError, match="writing it there would delete"):
                to_zarr(x, dst, overwrite=True)
    assert tree_digest(tmp_path) == before
    res = str(tmp_path / "res.zarr")
    bayesian_id(path, K, out=res, **KW, **SYNC)
    before = tree_digest(tmp_path)
    with pytest.raises(OutputLocationError, match="input is never written or deleted"):
        bayesian_id(da.from_zarr(res + "/C"), 2, out=res, overwrite=True, **KW, **SYNC)
    assert tree_digest(tmp_path) == before
    np.testing.assert_array_equal(zarr.open_array(path, mode="r")[...], A)


# --------------------------------------------------------------------- 2. resume identity
def test_resume_with_another_matrix_of_the_same_shape_is_refused(store, tmp_path):
    out = str(tmp_path / "fit.zarr")
    _interrupted(store, out)
    other = str(tmp_path / "B.zarr")
    to_zarr(_matrix(seed=9), other, chunks=CHUNKS)
    before, stored = tree_digest(other), tree_digest(out)
    with pytest.raises(InputChangedError, match="content differs"):
        bayesian_id(other, K, out=out, resume=True, **KW, **SYNC)
    assert tree_digest(other) == before
    assert tree_digest(out) == stored, "a refused resume touched the stored fit"
    # the original input, even copied elsewhere, resumes into the uninterrupted chain
    copy = str(tmp_path / "copy.zarr")
    to_zarr(_matrix(), copy, chunks=CHUNKS)
    res = bayesian_id(copy, K, out=out, resume=True, **KW, **SYNC)
    assert_same_chain(bayesian_id(store, K, **KW, **SYNC), res)


def test_a_complete_fit_is_returned_only_for_its_own_input(store, tmp_path):
    """resume=True on a complete fit returns the stored result, after one read of the
    input for its checksum: another matrix of the same shape is refused (before, the
    stored fit of the old matrix came back as the result of the new one), the same
    matrix copied elsewhere gets the stored result, and nothing is written."""
    out = str(tmp_path / "fit.zarr")
    first = bayesian_id(store, K, out=out, **KW, **SYNC)
    stored = tree_digest(out)
    other = str(tmp_path / "B.zarr")
    to_zarr(_matrix(seed=9), other, chunks=CHUNKS)
    with pytest.raises(InputChangedError, match="content differs"):
        bayesian_id(other, K, out=out, resume=True, **KW, **SYNC)
    assert tree_digest(out) == stored, "a refused resume touched the stored fit"
    copy = str(tmp_path / "copy.zarr")
    to_zarr(_matrix(), copy, chunks=CHUNKS)
    again = bayesian_id(copy, K, out=out, resume=True, **KW, **SYNC)
    np.testing.assert_array_equal(again.draws_sigma2, first.draws_sigma2)
    np.testing.assert_array_equal(again.columns, first.columns)
    assert tree_digest(out) == stored


def test_resume_with_another_dtype_is_refused_before_any_pass(store, tmp_path):
    out = str(tmp_path / "fit.zarr")
    _interrupted(store, out)
    other = str(tmp_path / "B32.zarr")
    to_zarr(_matrix().astype(np.float32), other, chunks=CHUNKS)
    with pytest.raises(InputChangedError, match="dtype float64 then, float32 now"):
        bayesian_id(other, K, out=out, resume=True, **KW, **SYNC)


# --------------------------------------------------------------------- 3. missing chunks
def test_missing_chunk_is_refused_unless_allowed(store, tmp_path):
    os.remove(os.path.join(store, "c", "1", "0"))
    assert missing_chunks(zarr.open_array(store, mode="r")) == ["c/1/0"]
    before = tree_digest(store)
    out = str(tmp_path / "r.zarr")
    with pytest.raises(IncompleteStoreError, match=r"1 of 3 chunks missing \(c/1/0\).*fill "
                                                   r"value 0\.0.*allow_missing_chunks=True .*a "
                                                   r"keyword of BayesianID\.fit and "
                                                   r"bayesian_id, a parameter of RandomizedID"):
        bayesian_id(store, K, out=out, **KW, **SYNC)
    assert not os.path.exists(out), "the output was created before the input was checked"
    res = bayesian_id(store, K, allow_missing_chunks=True, **KW, **SYNC)
    assert np.isfinite(res.mse)
    assert tree_digest(store) == before
    # the same store read through a dask array (da.from_zarr, a notebook's habit) was
    # fitted with the lost chunk as zeros, by BayesianID and RandomizedID alike
    import dask
    import dask.array as da

    from dask_bid import RandomizedID

    # the array in an "original-" layer; inlined in the tasks (inline_array=True); fused
    # by dask.optimize (both got past the first check)
    for x in (da.from_zarr(store), da.from_zarr(store, inline_array=True),
              dask.optimize(da.from_zarr(store) * 2)[0]):
        for fit in (lambda x=x: bayesian_id(x, K, **KW, **SYNC),
                    lambda x=x: RandomizedID(K).fit(x)):
            with pytest.raises(IncompleteStoreError, match=r"\(read by the dask array\) has 1 "
                                                           r"of 3 chunks missing \(c/1/0\)"):
                fit()
    x = da.from_zarr(store)
    assert np.isfinite(bayesian_id(x, K, allow_missing_chunks=True, **KW, **SYNC).mse)


def test_missing_chunks_of_sharded_and_zarr_v2_arrays(tmp_path):
    sharded = zarr.create_array(store=str(tmp_path / "s.zarr"), shape=(40, 10),
                                chunks=(10, 10), shards=(20, 10), dtype="f8")
    sharded[:] = 1.0
    v2 = zarr.create_array(store=str(tmp_path / "v2.zarr"), shape=(40, 10), chunks=(10, 10),
                           dtype="f8", zarr_format=2)
    v2[:] = 1.0
    assert missing_chunks(sharded) == [] and missing_chunks(v2) == []
    os.remove(tmp_path / "s.zarr" / "c" / "1" / "0")
    os.remove(tmp_path / "v2.zarr" / "2.0")
    assert missing_chunks(sharded) == ["c/1/0"] and missing_chunks(v2) == ["2.0"]


def test_to_zarr_writes_every_chunk_even_all_zero_ones(tmp_path):
    path = str(tmp_path / "Z.zarr")
    A = _matrix()
    A[20:40] = 0.0
    z = to_zarr(A, path, chunks=CHUNKS)
    assert missing_chunks(z) == []
    assert z.attrs["dask_bid_array"] == {"complete": True}


def test_an_unfinished_write_is_not_taken_for_a_matrix(tmp_path):
    path = str(tmp_path / "half.zarr")
    z = create_matrix_array(path, (M, N), np.float64, CHUNKS)
    z[:20] = _matrix()[:20]  # killed here: the rest would read as zeros
    with pytest.raises(IncompleteStoreError, match="not completely written"):
        bayesian_id(path, K, **KW, **SYNC)
    with pytest.raises(IncompleteStoreError, match="not completely written"):
        as_matrix_source(path)
    z[20:] = _matrix()[20:]
    mark_complete(z)
    assert as_matrix_source(path).shape == (M, N)


# --------------------------------------------------------------------- 4. extreme values
# (at 2^-400 both fits' priors outweigh A: said, tested in test_edge_cases.py)
@pytest.mark.filterwarnings("ignore:beta_sigma=.* exceeds half the sum of A")
@pytest.mark.parametrize("e", [400, -400])
def test_extreme_values_give_the_model_in_the_users_units(e):
    A = _matrix()
    ref = bayesian_id(A, K, beta_sigma=2.0 ** (-2 * e), **KW)
    res = bayesian_id(np.ldexp(A, e), K, **KW)
    np.testing.assert_array_equal(res.columns, ref.columns)
    np.testing.assert_array_equal(res.components, ref.components)
    assert res.sigma2 == np.ldexp(ref.sigma2, 2 * e)
    assert res.mse == np.ldexp(ref.mse, 2 * e)
    np.testing.assert_array_equal(res.trace["sigma2"], np.ldexp(ref.trace["sigma2"], 2 * e))
    np.testing.assert_array_equal(res.draws_sse, np.ldexp(ref.draws_sse, 2 * e))


def test_tiny_values_keep_the_prior_representable():
    """1e-210: A / 2^-700 would need beta_sigma * 2^1400; the fit computes on A * 2^500
    instead, so sigma2 stays the prior-dominated value of the model in A's units."""
    A = _matrix()
    # both priors outweigh all of A, and that is said (A's squares here below float64's
    # range: no beta_sigma to suggest, and no "beta_sigma=0")
    with pytest.warns(UserWarning, match=r"beta_sigma=1 \(the scale.*exceeds half the sum of "
                      r"A\^2 \(0\).*A's squares are below float64's range here; docs") as rec:
        res = bayesian_id(np.ldexp(A, -700), K, **KW)
    assert "e.g. beta_sigma" not in str(rec[0].message)
    with pytest.warns(UserWarning, match=r"e\.g\. beta_sigma=1\.\d+e-122, the mean"):
        ref = bayesian_id(np.ldexp(A, -200), K, beta_sigma=2.0 ** 1000, **KW)
    np.testing.assert_array_equal(res.columns, ref.columns)
    np.testing.assert_array_equal(res.components, ref.components)
    assert res.sigma2 == np.ldexp(ref.sigma2, -1000)
    assert 1e-4 < res.sigma2 < 1e-2  # ~ beta_sigma / (alpha_sigma + M N / 2)
    # 1e-300: beta_sigma * 2^1988 is beyond float64 whatever e is kept; the prior is then
    # the data's scale, and that is said (it changed without a word, beside numpy's raw
    # "overflow encountered in ldexp")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        tiny = bayesian_id(np.ldexp(A, -994), K, **KW)
    said = [str(w.message) for w in seen if "beta_sigma=1 cannot be held" in str(w.message)]
    assert len(said) == 1 and "the fit uses beta_sigma=" in said[0], [str(w.message)
                                                                       for w in seen]
    assert not [w for w in seen if "overflow encountered" in str(w.message)]
    assert tiny.sigma2 < 1e-290


# (at 2^-400 both fits' priors outweigh A: said, tested in test_edge_cases.py)
@pytest.mark.filterwarnings("ignore:beta_sigma=.* exceeds half the sum of A")
@pytest.mark.parametrize("e", [400, -400])
def test_extreme_values_on_the_engine(tmp_path, e):
    A = _matrix()
    path, out = str(tmp_path / "X.zarr"), str(tmp_path / "r.zarr")
    to_zarr(np.ldexp(A, e), path, chunks=CHUNKS)
    ref = bayesian_id(A, K, beta_sigma=2.0 ** (-2 * e), **KW, **SYNC)
    seen = []  # a callback (the progress bar) sees the chain in A's units, as the result
    res = bayesian_id(path, K, out=out, **KW, **SYNC,
                      callback=lambda st: seen.append((st.sigma2, st.trace_mse[-1])))
    assert seen[-1] == (res.trace["sigma2"][0, -1], res.trace["mse"][0, -1])
    np.testing.assert_array_equal(res.columns, ref.columns)
    np.testing.assert_array_equal(res.components, ref.components)
    assert res.sigma2 == np.ldexp(ref.sigma2, 2 * e)
    back = read_result(out)
    assert back.mse == res.mse and np.isfinite(back.mse)
    np.testing.assert_array_equal(np.asarray(back.C), np.ldexp(A, e)[:, res.columns])


# one huge entry makes every basis numerically rank deficient: the fit says so (a
# UserWarning), which is not what these tests check
@pytest.mark.filterwarnings("ignore:the selected columns of A are numerically rank deficient")
def test_one_huge_entry_is_refused_not_reported_as_nan(tmp_path):
    """1e200 among entries near 1: no single scale holds both squares (the residual is
    made of the small entries), so the fit stops with a message instead of NaN."""
    A = _matrix()
    A[3, 4] = 1e200
    path, out = str(tmp_path / "X.zarr"), str(tmp_path / "r.zarr")
    to_zarr(A, path, chunks=CHUNKS)
    for src, kw in ((A, {}), (path, {}), (path, dict(out=out))):
        with pytest.raises(FitFailedError, match="span .* to 1e\\+200.*Clip or rescale"):
            bayesian_id(src, K, **KW, **SYNC, **kw)
    status, why = output_status(out)
    assert status == "failed" and "span" in why
    # no fit there: which case, not "status None"
    assert output_status(str(tmp_path / "none.zarr")) == ("unknown", "nothing at this path")
    assert output_status(path)[1].startswith("not a dask_bid result")


def test_huge_values_whose_square_overflows_in_the_result_give_inf_not_nan(tmp_path):
    A = _matrix()
    with pytest.warns(RuntimeWarning, match="reported as inf"), \
            pytest.warns(RuntimeWarning, match="beta_sigma=1 cannot be held beside"):
        res = bayesian_id(np.ldexp(A, 1000), K, **KW)
    assert res.sigma2 == np.inf and res.mse == np.inf
    np.testing.assert_array_equal(res.columns, bayesian_id(A, K, beta_sigma=2.0 ** -1000,
                                                           **KW).columns)


def test_read_result_survives_any_stored_summary(store, tmp_path):
    out = str(tmp_path / "r.zarr")
    bayesian_id(store, K, out=out, **KW, **SYNC)
    g = zarr.open_group(out, mode="r+")
    meta = dict(g.attrs["dask_bid"])
    meta["summary"] = {"sigma2": "nan", "mse": "inf", "max_abs_w": None}
    g.attrs["dask_bid"] = meta
    res = read_result(out)
    assert np.isnan(res.sigma2) and res.mse == np.inf and np.isnan(res.max_abs_w)
    assert res.n_features == N


# --------------------------------------------------------------------- 5. failed fits
def test_a_failed_fit_marks_its_output_failed(tmp_path):
    A = _matrix()
    A[5, 5] = np.nan
    path, out = str(tmp_path / "nan.zarr"), str(tmp_path / "r.zarr")
    to_zarr(A, path, chunks=CHUNKS)
    with pytest.raises(NonFiniteInputError):
        bayesian_id(path, K, out=out, init="random", **KW, **SYNC)
    status, why = output_status(out)
    assert status == "failed" and "NaN" in why
    with pytest.raises(CorruptStoreError, match="failed: A contains 1 NaN"):
        read_result(out)


def test_a_fit_that_failed_after_a_checkpoint_says_a_resume_continues_it(store, tmp_path,
                                                                          capsys):
    # a failure after a checkpoint (a lost scheduler, a full disk) was told to start afresh
    # (overwrite=True) only, though resume=True continues the same chain from there
    from dask_bid.interface.cli import main

    out = str(tmp_path / "r.zarr")

    def fail(st):
        if st.iteration == 25:
            raise RuntimeError("the disk is full")

    with pytest.raises(RuntimeError, match="disk is full"):
        bayesian_id(store, K, out=out, callback=fail, **KW, **SYNC)
    assert output_status(out)[0] == "failed"
    with pytest.raises(CorruptStoreError, match=r"it failed: .*disk is full.*or continue it "
                       r"from its last checkpoint \(iteration 20\) with resume=True and the "
                       r"parameters it was started with \(n_iter=30, n_chains=1"):
        read_result(out)
    assert main(["info", out]) == 0
    text = capsys.readouterr().out
    assert "the same dask-bid fit with --resume continues from its last checkpoint" in text
    assert "saved      20 of 30 iterations" in text
    res = bayesian_id(store, K, out=out, resume=True, **KW, **SYNC)
    assert_same_chain(bayesian_id(store, K, **KW, **SYNC), res)
    # a failure before any checkpoint: nothing to continue, so nothing said of resuming
    out2 = str(tmp_path / "r2.zarr")

    def fail_early(st):
        if st.iteration == 5:
            raise RuntimeError("the disk is full")

    with pytest.raises(RuntimeError):
        bayesian_id(store, K, out=out2, callback=fail_early, **KW, **SYNC)
    with pytest.raises(CorruptStoreError, match=r"disk is full\. Fix the cause and fit again "
                       r"\(overwrite=True\)\.$"):
        read_result(out2)
    assert main(["info", out2]) == 0
    assert "run the same dask-bid fit again: it replaces a failed fit" in capsys.readouterr().out


@pytest.mark.parametrize("how", ["replaced", "chunk removed", "rewritten in place"])
def test_an_input_changed_during_the_fit_fails_it(store, tmp_path, how):
    """The store replaced (another matrix of the same shape) or a chunk deleted while the
    fit ran: the fit said "complete" with W and the MSE of the first matrix and C read
    from the second (or zeros, a missing chunk read as the fill value)."""
    import shutil

    out = str(tmp_path / "r.zarr")
    other = str(tmp_path / "B.zarr")
    to_zarr(_matrix(seed=9), other, chunks=CHUNKS)

    def change(st):
        if st.iteration == 12:
            if how == "replaced":  # rm -rf A.zarr; cp -rp B.zarr A.zarr (times kept)
                shutil.rmtree(store)
                shutil.copytree(other, store)
            elif how == "chunk removed":
                os.remove(next(p for p in Path(store).rglob("*") if p.is_file()
                               and p.name != "zarr.json"))
            else:  # by another tool (dask_bid's to_zarr refuses a store a fit reads)
                zarr.open_array(store, mode="r+")[...] = _matrix(seed=9)

    with pytest.raises(InputChangedError, match="changed while the fit read it .*would mix two "
                                                "matrices"):
        bayesian_id(store, K, out=out, callback=change, **KW, **SYNC)
    assert output_status(out)[0] == "failed"
    # no checkpoint after the change (at 12): a resume on the restored input would carry
    # the other matrix's draws on
    assert [c for c in _checkpoints(out)] == ["c0-it00000010"], _checkpoints(out)
    # without an output too: the chain read it
    shutil.rmtree(store)
    to_zarr(_matrix(), store, chunks=CHUNKS)
    with pytest.raises(InputChangedError):
        bayesian_id(store, K, callback=change, **KW, **SYNC)


def test_a_running_fit_read_as_a_result_is_said_locked_not_damaged(store, tmp_path):
    """read_result on a fit still running: not a CorruptStoreError (code cleaning up
    damaged stores would take a live fit for one), the lock's error."""
    from dask_bid import CorruptStoreError, OutputLockedError

    out = str(tmp_path / "r.zarr")
    seen = []

    def peek(st):
        if st.iteration == 3:
            try:
                read_result(out)
            except Exception as exc:  # noqa: BLE001  the type is the subject
                seen.append(exc)

    bayesian_id(store, K, out=out, callback=peek, **KW, **SYNC)
    (exc,) = seen
    assert isinstance(exc, OutputLockedError) and not isinstance(exc, CorruptStoreError)
    assert "still running" in str(exc)
    assert read_result(out).columns.shape == (K,)  # once finished, it opens


def test_a_store_that_cannot_be_listed_is_read_unwatched_with_a_warning():
    """The watch of an object store lists it; where no listing is possible (plain HTTP,
    credentials that may read but not list) the fit reads on, unwatched, and says so (a
    warning, which a notebook can filter): a safety check never stops a fit that can
    read its input. An in-memory store of this process is not watched, and says
    nothing (it printed a made-up memory:// URL and an OSError)."""
    import warnings

    from dask_bid.engine.fingerprint import StoreWatch

    with pytest.warns(RuntimeWarning, match="is not watched for changes during the fit: "
                                            "it could not be listed"):
        watch = StoreWatch("http://127.0.0.1:9/A.zarr").start()  # port 9: nothing there
    watch.check()  # nothing to compare: no error
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StoreWatch("memory://140604336350656").start().check()


def test_a_result_whose_output_was_deleted_says_so(store, tmp_path):
    """Deleted, not replaced: "another fit wrote it, read it again" sent the user to a
    read that fails too."""
    import shutil

    from dask_bid import StoreNotFoundError

    out = str(tmp_path / "r.zarr")
    res = bayesian_id(store, K, out=out, **KW, **SYNC)
    shutil.rmtree(out)
    with pytest.raises(StoreNotFoundError, match="no longer exists: its C .* went with it"):
        np.asarray(res.C)
    assert res.columns.shape == (K,)  # the rest is in memory


def test_a_result_whose_output_another_fit_replaced_refuses_to_read_c(store, tmp_path):
    """A result read (or returned) from an output, that output then fitted again with
    overwrite=True: the old object's lazy C read the new fit's columns beside its own W."""
    from dask_bid import ResultReplacedError

    out = str(tmp_path / "r.zarr")
    returned = bayesian_id(store, K, out=out, **KW, **SYNC)
    opened = read_result(out)
    A = _matrix()
    np.testing.assert_array_equal(np.asarray(opened.C), A[:, opened.columns])
    other = str(tmp_path / "B.zarr")
    to_zarr(_matrix(seed=9), other, chunks=CHUNKS)
    bayesian_id(other, K, out=out, overwrite=True, **KW, **SYNC)
    for res in (returned, opened):
        with pytest.raises(ResultReplacedError, match="written by another fit after this "
                                                      "result was read"):
            np.asarray(res.C)
    again = read_result(out)
    np.testing.assert_array_equal(np.asarray(again.C), _matrix(seed=9)[:, again.columns])


def test_an_interrupted_fit_is_marked_interrupted_not_running(store, tmp_path):
    out = str(tmp_path / "r.zarr")
    _interrupted(store, out)
    assert output_status(out)[0] == "interrupted"
    with pytest.raises(CorruptStoreError, match="continue it with resume=True"):
        read_result(out)


# --------------------------------------------------------------------- 6-7. checkpoints
def _deep_equal(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _deep_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _deep_equal(x, y)
    elif hasattr(a, "__dataclass_fields__"):
        for f in a.__dataclass_fields__:
            _deep_equal(getattr(a, f), getattr(b, f))
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


def _checkpoints(out):
    return sorted(p.name for p in Path(out, "checkpoint").glob("c0-it*"))


def test_checkpoint_states_round_trip_without_pickle(store, tmp_path):
    out = str(tmp_path / "r.zarr")
    _interrupted(store, out, at=25, n_chains=1)
    name = _checkpoints(out)[-1]
    from dask_bid.engine.checkpoint import StoreSpec

    spec = StoreSpec(out)
    client = load_blob(spec, f"checkpoint/{name}/client")
    block = load_blob(spec, f"checkpoint/{name}/block_00000")
    assert type(client["state"]).__name__ == "ClientState"
    assert type(block).__name__ == "BlockState"
    g = zarr.open_group(str(tmp_path / "copy.zarr"), mode="w")
    gen = np.random.default_rng(7)
    extra = {"gen": gen, ("map", 1, 2): np.arange(3), (1, (2, "x")): [None, True, 2.5]}
    for obj in (client, block, extra):
        save_state(g, "s", obj)
        _deep_equal_or_gen(obj, load_state(g, "s"))
    # the stored form is numbers and JSON: no pickle opcode anywhere in the checkpoint
    for f in Path(out, "checkpoint", name).rglob("zarr.json"):
        json.loads(f.read_text())


def _deep_equal_or_gen(a, b):
    if isinstance(a, dict) and "gen" in a:
        assert a["gen"].bit_generator.state == b["gen"].bit_generator.state
        assert a["gen"].random() == b["gen"].random()
        a = {k: v for k, v in a.items() if k != "gen"}
        b = {k: v for k, v in b.items() if k != "gen"}
    _deep_equal(a, b)


def test_traces_are_packed_exactly_and_version_1_states_still_load(tmp_path, monkeypatch):
    """Lists of one kind (a chain's traces and retained draws, which grow with every
    iteration) are stored as one array each, not as a JSON node per item, and come back
    of the same Python types bit for bit; lists that are not of one kind, and states of
    version 1 (every item a JSON node), keep loading."""
    import dask_bid.engine.serialize as ser

    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    odd = [0.0, -0.0, np.inf, -np.inf, float.fromhex("0x1.0000000000001p-1074"), 1 / 3, 1e308]
    nan = float.fromhex("0x1.8p+1") * np.inf * 0  # a NaN
    obj = {
        "floats": odd + [nan],
        "bools": (True, False, True, True),
        "ints": list(range(-3, 3)) + [2**63 - 1],
        "big ints": [1, 2, 3, 2**63],  # beyond int64: kept as JSON
        "mixed": [1.0, np.float64(2.0), 3.0, 4.0],  # a numpy scalar among floats
        "bool or int": [True, 1, 0, False],
        "arrays": [np.arange(3) + i for i in range(5)],
        "scalars": [np.float32(i) for i in range(4)],
        "ragged": [np.arange(i) for i in range(1, 6)],
        "tuple of arrays": tuple(np.ones((2, 2), dtype=np.float32) * i for i in range(4)),
        "short": [1.5, 2.5],
        "records": tuple(((i, i + 1), np.full((2, 3), i / 7)) for i in range(6)),
        "uneven records": [(1, 2.0), (3, 4.0), (5,), (6, 7.0)],
        "mixed records": [(1, "a"), (2.5, "b"), (3, None), (4, "d")],
    }
    save_state(g, "s", obj)
    tree = g["s"].attrs["dask_bid_state"]["tree"]
    kinds = {ser.decode(k, None): v["t"] for k, v in tree["items"]}
    assert kinds == {"floats": "packed", "bools": "packed", "ints": "packed",
                     "big ints": "list", "mixed": "list", "bool or int": "list",
                     "arrays": "packed", "scalars": "list", "ragged": "list",
                     "tuple of arrays": "packed", "short": "list", "records": "zip",
                     "uneven records": "list", "mixed records": "zip"}
    records = dict((ser.decode(k, None), v) for k, v in tree["items"])["records"]
    assert [c["t"] for c in records["columns"]] == ["zip", "packed"]
    back = load_state(g, "s")
    _deep_equal(obj, back)
    assert [float(x).hex() for x in back["floats"][:-1]] == [float(x).hex() for x in odd]
    assert np.isnan(back["floats"][-1]) and type(back["floats"][-1]) is float
    # each array its own: writable, contiguous, not a view of its neighbours
    a = back["arrays"]
    assert all(x.flags.owndata and x.flags.writeable and x.flags.c_contiguous for x in a)
    a[0][0] = 99
    assert a[1][0] == 1
    # a state written as version 1 (no packed lists) loads to the same objects
    monkeypatch.setattr(ser, "_PACK_MIN", 10**9)
    save_state(g, "v1", obj)
    meta = dict(g["v1"].attrs["dask_bid_state"])
    assert all(v["t"] not in ("packed", "zip") for _, v in meta["tree"]["items"])
    meta["version"] = 1
    g["v1"].attrs["dask_bid_state"] = meta
    _deep_equal(obj, load_state(g, "v1"))
    meta["version"] = 3
    g["v1"].attrs["dask_bid_state"] = meta
    with pytest.raises(CheckpointError, match="version 3; this dask_bid reads versions 1, 2"):
        load_state(g, "v1")


def test_a_state_and_its_marks_are_one_metadata_write():
    """A checkpoint's state and its ``complete`` mark reach ``zarr.json`` in one write, as
    do a converted matrix's attributes and its completion mark: zarr's ``attrs.update``
    writes once per key, and a fit killed between two such writes left a checkpoint
    marked complete without its state (seen as a resume falling back to an older one).
    A real zarr store that records what is written to it."""
    from zarr.storage import MemoryStore

    from dask_bid.engine.zarr_io import ARRAY_ATTR, mark_complete

    class Recording(MemoryStore):
        writes: list = []

        async def set(self, key, value, byte_range=None):
            if key.endswith("zarr.json"):
                self.writes.append((key, json.loads(value.to_bytes())))
            await super().set(key, value)

    store = Recording()
    g = zarr.open_group(store=store, mode="w")
    save_state(g, "client", {"trace": [0.5] * 10, "n": 3}, {"complete": True})
    client = [a.get("attributes", {}) for k, a in store.writes if k == "client/zarr.json"]
    assert client and all("dask_bid_state" in a for a in client if a.get("complete")), client
    assert sum(bool(a) for a in client) == 1, client
    assert load_state(g, "client") == {"trace": [0.5] * 10, "n": 3}

    store.writes.clear()
    z = zarr.create_array(store=store, name="A", shape=(2, 2), dtype="f8",
                          attributes={ARRAY_ATTR: {"complete": False}})
    mark_complete(z, source={"file": "a.csv"}, n=2)
    marks = [a["attributes"] for k, a in store.writes if k == "A/zarr.json"]
    assert all(ARRAY_ATTR in a for a in marks), marks
    assert marks[-1] == {ARRAY_ATTR: {"complete": True}, "source": {"file": "a.csv"}, "n": 2}
    assert len(marks) == 2, marks  # the creation, then one write for the mark and the rest


def test_a_long_chain_writes_checkpoints_of_bounded_json(store, tmp_path):
    """Neither the client's nor a block's checkpoint JSON grows with the chain: the traces
    and retained draws are arrays in the buffers (they grew by JSON nodes per iteration,
    every checkpoint encoding the whole history: quadratic in the chain's length)."""
    out = str(tmp_path / "r.zarr")
    sizes = {}

    def cb(st):
        for name in _checkpoints(out):
            for part in ("client", "block_00000"):
                f = Path(out, "checkpoint", name, part, "zarr.json")
                if f.exists():
                    sizes[part, int(name.split("-it")[1])] = f.stat().st_size

    bayesian_id(store, K, out=out, callback=cb, **{**KW, **SYNC, "n_iter": 60,
                                                   "checkpoint_every": 10})
    assert {("client", 20), ("client", 50), ("block_00000", 20),
            ("block_00000", 50)} <= set(sizes), sizes
    # 30 more iterations past the burn-in: the client's 7 traces, ~210 JSON nodes (> 8 kB),
    # and a block's 15 retained draws (> 5 kB), before the change
    assert sizes["client", 50] - sizes["client", 20] < 2000, sizes
    assert sizes["block_00000", 50] - sizes["block_00000", 20] < 500, sizes


def test_a_pickled_checkpoint_is_never_loaded(store, tmp_path):
    import pickle

    out = str(tmp_path / "r.zarr")
    _interrupted(store, out, at=15)
    name = _checkpoints(out)[-1]
    marker = tmp_path / "owned"

    class Evil:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    blob = np.frombuffer(pickle.dumps({"state": Evil()}), dtype=np.uint8)
    g = zarr.open_group(out, mode="r+")
    del g[f"checkpoint/{name}/client"]
    arr = g.create_array(f"checkpoint/{name}/client", shape=blob.shape, dtype=np.uint8)
    arr[:] = blob
    arr.attrs["complete"] = True
    with pytest.warns(CheckpointFallbackWarning, match=f"{name}.*never loaded"):
        res = bayesian_id(store, K, out=out, resume=True, **KW, **SYNC)
    assert not marker.exists()
    assert_same_chain(bayesian_id(store, K, **KW, **SYNC), res)


def test_a_corrupted_newest_checkpoint_falls_back_to_the_previous_one(store, tmp_path):
    out = str(tmp_path / "r.zarr")
    _interrupted(store, out, at=25)
    names = _checkpoints(out)
    # the periodic checkpoint at 20 and the stop's own at 25 (the two newest are kept)
    assert names == ["c0-it00000020", "c0-it00000025"]
    # damage the newest checkpoint's first block on disk
    buf = next(Path(out, "checkpoint", names[-1], "block_00000").rglob("c/0"))
    data = bytearray(buf.read_bytes())
    data[len(data) // 2] ^= 0xFF
    buf.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="digest"):
        load_blob(__import__("dask_bid.engine.checkpoint", fromlist=["StoreSpec"])
                  .StoreSpec(out), f"checkpoint/{names[-1]}/block_00000")
    seen = []
    with pytest.warns(CheckpointFallbackWarning, match="c0-it00000025.*trying an older"):
        res = bayesian_id(store, K, out=out, resume=True,
                          callback=lambda st: seen.append(st.iteration), **KW, **SYNC)
    assert seen[0] == 21, "did not resume from the previous checkpoint"
    assert_same_chain(bayesian_id(store, K, **KW, **SYNC), res)


# --------------------------------------------------------------------- 8. one writer
_HOLDER = textwrap.dedent("""
    import sys, time
    from dask_bid.interface import bayesian_id
    store, out = sys.argv[1], sys.argv[2]
    def cb(st):
        if st.iteration == 1:
            print("started", flush=True)
        time.sleep(0.2)
    bayesian_id(store, 3, out=out, client="synchronous", n_iter=2000, burn_in=10,
                random_state=4, callback=cb)
""")


def test_a_second_writer_is_refused_naming_the_holder(store, tmp_path):
    out = str(tmp_path / "r.zarr")
    child = subprocess.Popen([sys.executable, "-c", _HOLDER, store, out],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert child.stdout.readline().decode().strip() == "started", child.stderr.read()
        # (a plain rerun too: it said "already exists, pass overwrite=True")
        for kw in (dict(overwrite=True), dict(resume=True), {}):
            with pytest.raises(OutputLockedError, match=f"pid {child.pid} on host"):
                bayesian_id(store, K, out=out, **kw, **KW, **SYNC)
        # the lock is the reason given first: what the running fit has there at that
        # moment (no metadata yet, a part of a checkpoint) made it "not a dask_bid
        # result" or "files dask_bid did not write", telling the user to remove them
        stray = Path(out, "checkpoint", "c0-it99999999", "part")
        stray.parent.mkdir(parents=True)
        stray.write_text("being written")
        with pytest.raises(OutputLockedError, match=f"pid {child.pid} on host"):
            bayesian_id(store, K, out=out, overwrite=True, **KW, **SYNC)
        stray.unlink()
        assert output_status(out)[0] == "running"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stdout.close()
        child.stderr.close()
    # the killed holder's lease is stale: the next fit takes it over
    assert os.path.exists(lock_path(out))
    assert output_status(out)[0] == "interrupted"
    res = bayesian_id(store, K, out=out, overwrite=True, **KW, **SYNC)
    assert read_result(out).columns.tolist() == res.columns.tolist()
    assert not os.path.exists(lock_path(out)), "the lease was not released"


def test_lock_in_one_process_and_stale_leases(tmp_path):
    out = str(tmp_path / "o.zarr")
    with OutputLock(out):
        with pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"):
            OutputLock(out).acquire()
    assert not os.path.exists(lock_path(out))
    # a lease left by a dead process of this host, or with an old heartbeat elsewhere
    import socket

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    for lease in ({"host": socket.gethostname(), "pid": int(dead), "start": time.time(),
                   "heartbeat": time.time()},
                  {"host": "elsewhere", "pid": 1, "start": 0, "heartbeat": 0}):
        Path(lock_path(out)).write_text(json.dumps(lease))
        with OutputLock(out) as lk:
            assert lk.lease["pid"] == os.getpid()
    # a fresh lease from another host is respected
    Path(lock_path(out)).write_text(json.dumps(
        {"host": "elsewhere", "pid": 1, "start": time.time(), "heartbeat": time.time()}))
    with pytest.raises(OutputLockedError, match="host 'elsewhere'"):
        OutputLock(out).acquire()


def test_a_symbolic_link_is_never_written_through(store, tmp_path, capsys):
    """`--out latest.zarr/ --overwrite`, latest.zarr a link to a result, emptied the result
    (rmtree follows "link/") and then failed: the old result gone, no new one. A link as
    the output is refused, whatever it points to; so is one where the lock file goes
    (its target was truncated to the lease), and a symbolically linked parent folder is
    the same output, with the same lock."""
    from dask_bid.interface.cli import main

    kept = tmp_path / "k3.zarr"
    bayesian_id(store, K, out=str(kept), **KW, **SYNC)
    before = tree_digest(kept)
    link = tmp_path / "latest.zarr"
    link.symlink_to(kept.name)
    for out in (str(link), str(link) + "/", str(link) + "/."):
        for kw in (dict(overwrite=True), dict(resume=True)):
            with pytest.raises(OutputLocationError, match="symbolic link .*never through a "
                               "link: pass"):
                bayesian_id(store, K, out=out, **kw, **KW, **SYNC)
        assert main(["fit", store, "--k", str(K), "--out", out, "--overwrite", "-q",
                     "--scheduler", "synchronous", "--n-iter", "30"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--out" in err and "symbolic link" in err, err
    dangling = tmp_path / "d.zarr"
    dangling.symlink_to("nowhere.zarr")
    with pytest.raises(OutputLocationError, match="which does not exist"):
        bayesian_id(store, K, out=str(dangling), **KW, **SYNC)
    # to_zarr's overwrite: a store it wrote, reached by a link
    written = tmp_path / "w.zarr"
    to_zarr(_matrix(), str(written), chunks=CHUNKS)
    w_before = tree_digest(written)
    (tmp_path / "w-link.zarr").symlink_to(written.name)
    for spelled in ("/", "/."):
        with pytest.raises(OutputLocationError, match="symbolic link"):
            to_zarr(_matrix(), str(tmp_path / "w-link.zarr") + spelled, overwrite=True)
    assert tree_digest(kept) == before and tree_digest(written) == w_before
    # the lock file's place holds a link to a file of the user's
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    Path(lock_path(str(tmp_path / "r.zarr"))).symlink_to(notes.name)
    with pytest.raises(OutputLocationError, match="lock file .* is a symbolic link"):
        bayesian_id(store, K, out=str(tmp_path / "r.zarr"), **KW, **SYNC)
    assert notes.read_text() == "my notes"
    Path(lock_path(str(tmp_path / "r.zarr"))).unlink()
    os.link(notes, lock_path(str(tmp_path / "r.zarr")))  # a hard link, not followed: written
    with pytest.raises(OutputLocationError, match="lock file .* has other names"):
        bayesian_id(store, K, out=str(tmp_path / "r.zarr"), **KW, **SYNC)
    assert notes.read_text() == "my notes"
    # one folder by two spellings: one lock
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs-link").symlink_to("runs")
    assert lock_path(str(tmp_path / "runs" / "r.zarr")) == lock_path(
        str(tmp_path / "runs-link" / "r.zarr"))
    with OutputLock(str(tmp_path / "runs" / "r.zarr")):
        with pytest.raises(OutputLockedError):
            bayesian_id(store, K, out=str(tmp_path / "runs-link" / "r.zarr"), **KW, **SYNC)


def test_a_lease_whose_pid_was_reused_is_not_a_running_fit(tmp_path):
    # a killed fit's lease names its pid; another process given that pid later made
    # `info` (and the refusals) say "running" until the heartbeat went stale (2 min)
    import socket

    from dask_bid.engine.lock import lease_holder

    out = str(tmp_path / "o.zarr")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        Path(lock_path(out)).write_text(json.dumps(
            {"host": socket.gethostname(), "pid": other.pid, "start": time.time(),
             "heartbeat": time.time()}))  # a live pid, no flock: nobody holds it
        assert lease_holder(out) is None
        with OutputLock(out):  # held (flock) by this process: live, and "mine"
            assert lease_holder(out)["mine"] is True
        # held by another process: live, not mine
        holder = subprocess.Popen(
            [sys.executable, "-c", "import sys, time; from dask_bid.engine.lock import "
             "OutputLock; OutputLock(sys.argv[1]).acquire(); print('held', flush=True); "
             "time.sleep(60)", out], stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "held"
            found = lease_holder(out)
            assert found is not None and found["pid"] == holder.pid and not found["mine"]
        finally:
            holder.kill()
            holder.wait()
        assert lease_holder(out) is None  # killed: its lease stays, its flock does not
    finally:
        other.kill()
        other.wait()


def test_no_nan_is_reported_as_success():
    from dask_bid.engine.scaling import check_finite_result

    class R:
        sigma2, mse, components = float("nan"), 1.0, np.zeros((2, 2))

    with pytest.raises(FitFailedError, match="non-finite sigma2"):
        check_finite_result(R())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        R.sigma2 = 1.0
        check_finite_result(R())


# --------------------------------------------------------------------- the command line
def _cli(*args):
    from dask_bid.interface.cli import main

    return main([str(a) for a in args])


@pytest.mark.parametrize("suffix", [".csv", ".npy"])
def test_cli_overwrite_never_deletes_the_input_inside_out(tmp_path, monkeypatch, capsys,
                                                          suffix):
    """`dask-bid fit runs/data.csv --k 3 --out runs --overwrite` deleted runs/data.csv."""
    monkeypatch.chdir(tmp_path)
    runs = Path("runs")
    runs.mkdir()
    data = runs / f"data{suffix}"
    if suffix == ".csv":
        np.savetxt(data, _matrix(), delimiter=",")
    else:
        np.save(data, _matrix())
    (runs / "notes.txt").write_text("keep me")
    before = tree_digest(runs)
    assert _cli("fit", data, "--k", 3, "--out", runs, "--overwrite", "--quiet") == 2
    err = capsys.readouterr().err
    assert "never written or deleted" in err and "--out" in err
    assert tree_digest(runs) == before
    assert not Path(f"data{suffix}.zarr").exists(), "converted before refusing"


def test_cli_info_says_failed_running_or_interrupted(store, tmp_path, capsys):
    out = str(tmp_path / "r.zarr")
    _interrupted(store, out)
    assert _cli("info", out) == 0
    text = capsys.readouterr().out
    assert "status     interrupted  (continue it: dask-bid fit ... --resume)" in text
    with OutputLock(out):
        assert _cli("info", out) == 0
        assert f"status     running  (pid {os.getpid()} on host" in capsys.readouterr().out
    g = zarr.open_group(out, mode="r+")
    meta = dict(g.attrs["dask_bid"])
    meta.update(status="failed", error="A contains 1 NaN or infinite entries.",
                summary={"mse": "nan", "sigma2": None, "elapsed": "inf"})
    g.attrs["dask_bid"] = meta
    assert _cli("info", out) == 0
    text = capsys.readouterr().out
    assert "status     failed: A contains 1 NaN" in text and "running" not in text


def test_cli_info_flags_an_unfinished_conversion(tmp_path, capsys):
    """Described, then exit status 2 (it exited 0, as a damaged result did: `dask-bid info
    X && ...` went on); an array of the user's with chunk files absent is described as
    such, without failing (they may be meant as fill value)."""
    path = str(tmp_path / "half.zarr")
    create_matrix_array(path, (M, N), np.float64, CHUNKS)
    assert _cli("info", path) == 2
    cap = capsys.readouterr()
    assert "INCOMPLETE" in cap.out
    assert cap.err.startswith("dask-bid: error: ") and "writing was interrupted" in cap.err
    z = zarr.create_array(str(tmp_path / "sparse.zarr"), shape=(M, N), chunks=CHUNKS,
                          dtype="f8", fill_value=0.0)
    z[: CHUNKS[0]] = 1.0
    assert _cli("info", str(tmp_path / "sparse.zarr")) == 0
    out = capsys.readouterr().out
    assert re.search(r"absent     \d+ chunk file\(s\) \(c/1/0, .*read as the fill value 0\.0; "
                     r"fit and rid refuse it unless --allow-missing-chunks", out), out


def test_cli_info_names_an_undecodable_chunk(tmp_path, capsys):
    """A chunk file whose bytes do not decode (a disk error, a truncated copy): info says
    which chunk, as a fit does, and exits 2 (it was an "internal error" with zstd's
    traceback in a log file)."""
    path = str(tmp_path / "a.zarr")
    z = zarr.create_array(path, shape=(M, N), chunks=(20, 12), dtype="f8", zarr_format=3)
    z[:] = np.arange(M * N, dtype=float).reshape(M, N)
    with open(os.path.join(path, "c", "1", "0"), "wb") as f:
        f.write(b"not a zstd frame")
    assert _cli("info", path) == 2
    cap = capsys.readouterr()
    assert "status     DAMAGED: cannot read the Zarr array at" in cap.out
    assert "missing    not counted: a chunk cannot be read" in cap.out
    assert cap.err.startswith("dask-bid: error: cannot read the Zarr array at ")
    assert cap.err.count("\n") == 1 and "chunk c/1/0" in cap.err
    assert "restore that chunk from a copy" in cap.err


@pytest.mark.parametrize("array", ["columns", "W", "draws/sigma2", "traces/mse", "W_sd"])
def test_a_result_with_an_undecodable_chunk_is_damaged_for_info_and_open_result(
        tmp_path, capsys, array):
    """A result whose chunk bytes are garbage: `info` says DAMAGED naming the array and
    exits 2 (columns was an internal error; W and the draws were left out of a "complete"
    description), and open_result names the array."""
    A = np.random.default_rng(0).standard_normal((M, N))
    out = str(tmp_path / "r.zarr")
    bayesian_id(A, K, out=out, **KW, **SYNC)
    chunk = sorted(p for p in Path(out, *array.split("/"), "c").rglob("*") if p.is_file())[0]
    chunk.write_bytes(b"not a zstd frame")
    assert _cli("info", out) == 2
    cap = capsys.readouterr()
    assert f"status     DAMAGED: cannot read {array} (" in cap.out
    assert cap.err.startswith(f"dask-bid: error: {out!r} is a damaged dask_bid result: "
                              f"cannot read {array} (") and cap.err.count("\n") == 1
    assert _cli("info", out, "--json") == 2  # the JSON says so too (it said "complete")
    assert json.loads(capsys.readouterr().out)["status"] == "damaged"
    with pytest.raises(CorruptStoreError, match=f"damaged dask_bid result, array '{array}'"):
        read_result(out)
    # a fit that failed (or is running, or was interrupted) may have half written its
    # arrays: described by its status, not as damaged
    g = zarr.open_group(out, mode="r+")
    g.attrs["dask_bid"] = {**dict(g.attrs["dask_bid"]), "status": "failed",
                           "error": "a planted failure"}
    assert _cli("info", out) == 0
    text = capsys.readouterr().out
    assert "status     failed: a planted failure" in text and "DAMAGED" not in text


def test_state_format_refuses_types_outside_dask_bid(tmp_path):
    import collections

    g = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    Point = collections.namedtuple("Point", "x y")
    with pytest.raises(CheckpointError, match="only NamedTuples and dataclasses of dask_bid"):
        save_state(g, "p", Point(1, 2))
    save_state(g, "ok", {"a": {1, 2}, "b": frozenset({(1, "x")})})
    assert load_state(g, "ok") == {"a": {1, 2}, "b": frozenset({(1, "x")})}
    # a file naming a class elsewhere (os.system, say) is refused, not imported
    meta = dict(g["ok"].attrs["dask_bid_state"])
    meta["tree"] = {"t": "record", "cls": "os:system", "fields": {}}
    g["ok"].attrs["dask_bid_state"] = meta
    with pytest.raises(CheckpointError, match="unknown state type 'os:system'"):
        load_state(g, "ok")


def test_cli_missing_chunks_refused_then_allowed(store, tmp_path, capsys):
    os.remove(os.path.join(store, "c", "1", "0"))
    out = tmp_path / "r.zarr"
    assert _cli("fit", store, "--k", 3, "--out", out, "--n-iter", 20, "--burn-in", 5,
                "--quiet") == 2
    err = capsys.readouterr().err
    assert "chunks missing (c/1/0)" in err and "--allow-missing-chunks" in err
    assert "BayesianID.fit" not in err and "write_empty_chunks=True)" in err  # CLI words
    assert not out.exists()
    assert _cli("fit", store, "--k", 3, "--out", out, "--n-iter", 20, "--burn-in", 5,
                "--quiet", "--allow-missing-chunks") == 0
    assert read_result(str(out)).columns.shape == (3,)


@pytest.mark.parametrize("meta", [
    "garbage", {"status": "complete", "summary": "x", "params": [1], "input_shape": "ab"},
    {"status": None, "summary": {"mse": [1, 2], "sigma2": {}, "elapsed": "soon"}},
])
def test_cli_info_survives_any_stored_attributes(store, tmp_path, capsys, meta):
    out = str(tmp_path / "r.zarr")
    bayesian_id(store, K, out=out, **KW, **SYNC)
    zarr.open_group(out, mode="r+").attrs["dask_bid"] = meta
    assert _cli("info", out) == 0
    assert "dask_bid result" in capsys.readouterr().out
    if isinstance(meta, dict) and meta.get("status") == "complete":
        assert np.isnan(read_result(out).mse)  # the arrays are read, the summary is not
    else:
        with pytest.raises(CorruptStoreError, match="did not finish"):
            read_result(out)


# ----------------------------------------------------------- checkpoints without out=
_KILLED_CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    from dask_bid.interface import bayesian_id
    A = np.random.default_rng(0).standard_normal((60, 24))
    # slow after the first checkpoint, so that the parent kills it mid-fit
    bayesian_id(A, 3, client="synchronous", n_iter=400, checkpoint_every=2,
                callback=lambda st: time.sleep(0.2) if st.iteration > 2 else None)
""")


def test_a_checkpoint_folder_whose_lease_is_being_taken_is_left_to_its_owner(tmp_path):
    """Between a fit's creating its lease file and locking it (it writes the lease after
    the lock), another fit's sweep took the folder over, and the owner failed with
    "being written by another fit" (seen once in the suite: two test processes). A lease
    file without a lease is left alone, unless an hour old (a process killed then)."""
    import time

    from dask_bid.engine.scratch import CHECKPOINT_PREFIX, sweep_stale_checkpoints

    fresh = tmp_path / f"{CHECKPOINT_PREFIX}fresh"
    fresh.mkdir()
    Path(lock_path(fresh)).write_text("")  # created, not yet locked
    assert sweep_stale_checkpoints(tmp_path) == []
    assert fresh.is_dir() and Path(lock_path(fresh)).is_file()
    old = time.time() - 7200
    os.utime(lock_path(fresh), (old, old))
    assert sweep_stale_checkpoints(tmp_path) == [str(fresh)]
    assert not fresh.exists() and not Path(lock_path(fresh)).exists()


def test_checkpoints_of_a_killed_fit_without_out_are_removed_by_the_next(tmp_path,
                                                                         monkeypatch):
    """A fit without out= killed outright leaves its temporary checkpoint folder; the next
    fit without out= removes it (its lease is stale), and nothing else: not a folder a
    live fit holds, not one without a lease, not another program's file."""
    import tempfile

    from dask_bid.engine.scratch import CHECKPOINT_PREFIX

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    child = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD],
                             env={**os.environ, "TMPDIR": str(tmp)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    kill_when(child, lambda: list(tmp.glob(f"{CHECKPOINT_PREFIX}*/checkpoint")), 120,
              "checkpoint")
    (dead,) = [p for p in tmp.glob(f"{CHECKPOINT_PREFIX}*") if p.is_dir()]
    assert Path(lock_path(dead)).is_file()  # left behind, with its lease
    live = tmp / f"{CHECKPOINT_PREFIX}live"
    live.mkdir()
    unleased = tmp / f"{CHECKPOINT_PREFIX}unleased"
    unleased.mkdir()
    other = tmp / "someone-elses.txt"
    other.write_text("x")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    with OutputLock(live):  # a fit still running
        res = bayesian_id(np.random.default_rng(1).standard_normal((30, 12)), 2,
                          client="synchronous", n_iter=6, burn_in=2)
        assert res.columns.shape == (2,)
        assert not dead.exists() and not Path(lock_path(dead)).exists()
        assert live.is_dir() and Path(lock_path(live)).is_file()
    assert unleased.is_dir() and other.read_text() == "x"
    # the fit's own folder and lease are gone too
    assert sorted(p.name for p in tmp.iterdir()) == sorted(
        [live.name, unleased.name, other.name])


def test_a_checkpoint_of_another_fit_at_the_path_is_never_resumed(tmp_path):
    """An object store that refuses deletes let overwrite=True leave the old fit's
    checkpoints; a resume of the new fit then continued the OLD chain (another seed's
    draws under the new seed's name). Each checkpoint now carries its fit's run id: one
    of another fit is skipped, said, and the resume is the uninterrupted new fit."""
    import shutil

    A = _matrix()
    old, new = tmp_path / "old.zarr", tmp_path / "new.zarr"
    kw = dict(KW, n_iter=30, **SYNC)
    bayesian_id(A, K, out=str(old), **{**kw, "random_state": 4})
    want = bayesian_id(A, K, **{**kw, "random_state": 5})

    stop = stop_at(12)

    with pytest.raises(StopFit):
        bayesian_id(A, K, out=str(new), callback=stop, **{**kw, "random_state": 5})
    # what a delete the store refused leaves: the old fit's final checkpoint, newer than
    # the new fit's own (iteration 30 against 12)
    name = "c0-it00000030"
    shutil.copytree(old / "checkpoint" / name, new / "checkpoint" / name)
    from dask_bid.engine.checkpoint import saved_iterations

    # info's "saved": where the resume goes on (it said 30, the other fit's)
    assert saved_iterations(zarr.open_group(str(new), mode="r")) == {0: 12}
    with pytest.warns(CheckpointFallbackWarning, match=f"checkpoint {name} .* belongs to "
                      "another fit written at this path"):
        res = bayesian_id(A, K, out=str(new), resume=True, **{**kw, "random_state": 5})
    assert_same_chain(want, res)


def test_an_output_a_worker_cannot_see_is_named_as_such(tmp_path):
    """A worker that cannot see the client's output folder (another machine, a private
    mount) failed at the first checkpoint with "... does not exist", of a folder the
    client had just made. The worker's write says what it is (StoreSpec travels to the
    workers; this is what one of them runs)."""
    from dask_bid import StoreNotFoundError
    from dask_bid.engine.checkpoint import StoreSpec, save_blob

    spec = StoreSpec(tmp_path / "elsewhere" / "fit.zarr")
    with pytest.raises(StoreNotFoundError, match=r"the output '.*fit\.zarr' is not visible "
                       r"from the process that writes to it \(pid \d+ on .*every Dask worker "
                       "must see the client's local paths"):
        save_blob(spec, "checkpoint/c0-it00000005/block_00000", {"x": 1})
    assert not (tmp_path / "elsewhere").exists()  # nothing made on the way


def test_a_resumed_fit_reports_the_time_of_all_its_runs(tmp_path):
    """A fit stopped and resumed reported (chain time, BIDResult.elapsed) the last run's
    time only: the state a checkpoint keeps now carries the chain's time so far. The
    first run here spends 0.1 s in each of its 10 callbacks; iteration 10's checkpoint is
    saved before its callback, so it carries at least 0.9 s (9 callbacks; 0.994 s was
    seen). The resumed run's 20 iterations of a 60 x 24 matrix take a small part of that
    (0.05 s here), so a fit reporting only its last run fails."""
    import time as _time

    A = _matrix()
    out = str(tmp_path / "r.zarr")
    stop = stop_at(10)

    def slow_then_stop(st):
        _time.sleep(0.1)
        stop(st)

    with pytest.raises(StopFit):
        bayesian_id(A, K, out=out, callback=slow_then_stop, **KW, **SYNC)
    res = bayesian_id(A, K, out=out, resume=True, **KW, **SYNC)
    assert res.elapsed >= 0.9, res.elapsed


def test_the_bare_group_of_a_fit_that_failed_at_its_start_is_written_into(store, tmp_path,
                                                                          capsys):
    """A fit that failed while writing its first attributes (a full disk) left OUT as an
    empty Zarr group without attributes, then refused ever after ("not a dask_bid result",
    with --overwrite too). Such a group holds nothing: written into, as an empty folder
    is. A group holding anything else (an attribute, an array) is still the user's."""
    from dask_bid.interface.cli import main

    out = tmp_path / "r0.zarr"
    zarr.open_group(str(out), mode="w", zarr_format=3)  # what the failed fit left
    res = bayesian_id(store, K, out=str(out), **KW, **SYNC)
    assert_same_chain(res, read_result(str(out)))
    for name, make in (("attrs.zarr", lambda g: g.attrs.update(mine=1)),
                       ("array.zarr", lambda g: g.create_array("x", shape=(2,), dtype="f8"))):
        make(zarr.open_group(str(tmp_path / name), mode="w", zarr_format=3))
        before = tree_digest(tmp_path / name)
        with pytest.raises(OutputExistsError, match="not a dask_bid result"):
            bayesian_id(store, K, out=str(tmp_path / name), **KW, **SYNC)
        assert main(["fit", store, "--k", str(K), "--out", str(tmp_path / name), "-q",
                     "--overwrite", "--n-iter", "30", "--burn-in", "10"]) == 2
        assert "not a dask_bid result" in capsys.readouterr().err
        assert tree_digest(tmp_path / name) == before
