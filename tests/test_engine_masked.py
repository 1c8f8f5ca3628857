"""missing="mask" on the Dask engine: NaN in the input marks a missing entry.

The engine's masked chain is bitwise the in-memory masked backend's when A is read in one
tile (the same products), for every sampler; bitwise the same on every execution path
(synchronous, LocalCluster threads and processes) and after an interruption and resume;
and a block's state stays within the bound that docs/engine.md states.
"""

from __future__ import annotations

import numpy as np
import pytest
from _support import assert_same_chain
from distributed import Client, LocalCluster

from dask_bid import BayesianID, InputShapeError, NonFiniteInputError
from dask_bid.engine import to_zarr
from dask_bid.engine.dask_backend import plan_layout
from dask_bid.interface import bayesian_id

pytestmark = pytest.mark.timeout(240)

M, N, K = 120, 80, 4
KW = dict(n_iter=24, burn_in=8, thin=2, random_state=5, block_size=20, missing="mask",
          n_trace_columns=4)
SYNC = dict(client="synchronous")
# 4 row tiles x 2 column groups: the gathers and the reduction tree are exercised
TILES = (32, 40)
SAMPLERS = ["collapsed", "plain", "aggressive", "search"]


def _matrix(seed=0, frac=0.3):
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
         + 0.05 * rng.standard_normal((M, N)))
    A[rng.random((M, N)) < frac] = np.nan
    return A


def _no_checkpoint_kw(kw):
    return {k: v for k, v in kw.items() if k != "checkpoint_every"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("masked") / "A.zarr"
    to_zarr(_matrix(), path, chunks=TILES)
    return str(path)


@pytest.fixture(scope="module")
def reference(store):
    """The masked chain of the store on the synchronous path."""
    return bayesian_id(store, K, chunks=TILES, checkpoint_every=7, **KW, **SYNC)


# --------------------------------------------------------------- 1. the in-memory chain
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_engine_matches_memory_backend_bitwise_in_one_tile(sampler):
    A = _matrix(1)
    # from a random start every sampler accepts swaps within these iterations (the plain
    # sampler, which rarely moves, at a high temperature)
    kw = {**KW, "sampler": sampler, "init": "random",
          "temperature": 500.0 if sampler == "plain" else 1.0}
    mem = bayesian_id(A, K, **kw)
    eng = bayesian_id(A, K, **kw, **SYNC)
    assert_same_chain(mem, eng)
    assert eng.mse_observed == mem.mse_observed
    assert mem.params["missing"] == eng.params["missing"] == "mask"
    # the chain moved: the comparison covers accepted swaps
    assert eng.trace["accepted"].any()


def test_engine_matches_memory_backend_gbtn_and_all_candidates():
    A = _matrix(2, frac=0.5)
    kw = {**KW, "model": "gbtn", "n_tries": "all", "n_chains": 2}
    assert_same_chain(bayesian_id(A, K, **kw), bayesian_id(A, K, **kw, **SYNC))


def test_masked_likelihood_differs_from_the_zero_fill():
    # the masked engine is not the zero-filled fit under another name
    A = _matrix(1)
    masked = bayesian_id(A, K, **KW, **SYNC)
    filled = bayesian_id(np.nan_to_num(A), K, **{**KW, "missing": "zero"}, **SYNC)
    assert not np.array_equal(masked.trace["sigma2"], filled.trace["sigma2"])
    # the observed entries' mean square residual is what sigma^2 models
    obs = ~np.isnan(A)
    R = np.where(obs, A, 0.0) - np.where(obs, A, 0.0)[:, masked.columns] @ masked.components
    assert masked.mse_observed == pytest.approx(np.mean(R[obs] ** 2), rel=1e-12)


def test_many_tiles_close_to_memory_backend(reference):
    mem = bayesian_id(_matrix(), K, **KW)
    # the partial products are summed over row tiles in another order: equal to rounding
    np.testing.assert_array_equal(mem.columns, reference.columns)
    np.testing.assert_allclose(mem.trace["mse"], reference.trace["mse"], rtol=1e-10)
    np.testing.assert_allclose(mem.components, reference.components, rtol=0, atol=1e-10)
    assert reference.mse_observed == pytest.approx(mem.mse_observed, rel=1e-10)


def test_layout_is_multi_tile():
    lay = plan_layout((M, N), ((32,) * 3 + (24,), (40, 40)), K, block_size=20, chunks=TILES,
                      masked=True)
    assert len(lay.row_tiles) == 4 and len(lay.groups) == 2 and len(lay.blocks) == 4


# --------------------------------------------------------------- 2. execution paths
def test_sync_path_repeats(store, reference):
    assert_same_chain(reference, bayesian_id(store, K, chunks=TILES, **KW, **SYNC))


@pytest.mark.parametrize("processes", [True, False], ids=["processes", "threads"])
def test_local_cluster_matches_sync(store, reference, processes):
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=processes,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        res = bayesian_id(store, K, client=client, chunks=TILES, checkpoint_every=7, **KW)
        # numpy input on the cluster: the same chain as the store's
        res_np = bayesian_id(_matrix(), K, client=client, chunks=TILES, checkpoint_every=7,
                             **KW)
    assert_same_chain(reference, res)
    assert_same_chain(reference, res_np)
    assert res.mse_observed == reference.mse_observed


# --------------------------------------------------------------- 3. checkpoints, resume
class _Stop(KeyboardInterrupt):
    pass


@pytest.mark.parametrize("sampler", ["collapsed", "aggressive"])
def test_interrupted_masked_fit_resumes_bitwise(store, tmp_path, sampler):
    kw = {**KW, "sampler": sampler}
    whole = bayesian_id(store, K, chunks=TILES, checkpoint_every=5, **kw, **SYNC)
    out = str(tmp_path / "fit.zarr")

    def stop(st):
        if st.iteration == 13:
            raise _Stop()

    with pytest.raises(_Stop):
        bayesian_id(store, K, chunks=TILES, checkpoint_every=5, out=out, callback=stop, **kw,
                    **SYNC)
    seen = []
    res = bayesian_id(store, K, chunks=TILES, checkpoint_every=5, out=out, resume=True,
                      callback=lambda st: seen.append(st.iteration), **kw, **SYNC)
    assert seen[0] == 11, "resumed from the checkpoint at iteration 10"
    assert_same_chain(whole, res)
    assert res.mse_observed == whole.mse_observed
    # the stored result reads back with the masked fit's numbers
    from dask_bid import open_result

    back = open_result(out)
    np.testing.assert_array_equal(back.columns_, whole.columns)
    assert back.missing == "mask" and back.mse_observed_ == whole.mse_observed


# --------------------------------------------------------------- 4. refusals
def test_masked_engine_refuses_infinity_and_empty_columns(tmp_path):
    A = _matrix(3)
    A[7, 9] = np.inf
    to_zarr(A, tmp_path / "inf.zarr", chunks=TILES)
    with pytest.raises(NonFiniteInputError, match="infinite entries; missing='mask' treats"):
        bayesian_id(str(tmp_path / "inf.zarr"), K, **KW, **SYNC)
    B = _matrix(3)
    B[:, [11, 50]] = np.nan
    to_zarr(B, tmp_path / "empty.zarr", chunks=TILES)
    with pytest.raises(InputShapeError, match=r"columns \[11, 50\] have no observed entry"):
        bayesian_id(str(tmp_path / "empty.zarr"), K, **{**KW, "init": "random"}, **SYNC)


def test_estimator_fits_a_masked_store(store, reference):
    est = BayesianID(K, **KW).fit(store, chunks=TILES, checkpoint_every=7, **SYNC)
    np.testing.assert_array_equal(est.columns_, reference.columns)
    assert est.mse_observed_ == reference.mse_observed
