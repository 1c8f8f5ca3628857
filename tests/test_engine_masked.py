"""missing="mask" on the Dask engine: NaN in the input marks a missing entry.

The engine's masked chain is bitwise the in-memory masked backend's when A is read in one
tile (the same products), for every sampler; bitwise the same on every execution path
(synchronous, LocalCluster threads and processes) and after an interruption and resume;
and a block's state stays within the bound that docs/engine.md states.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from _support import assert_same_chain, count_pivots
from distributed import Client, LocalCluster, WorkerPlugin

from dask_bid import BayesianID, InputShapeError, NonFiniteInputError
from dask_bid.engine import to_zarr
from dask_bid.engine.dask_backend import plan_layout
from dask_bid.interface import bayesian_id

# one pytest-xdist process runs this module: its module-scoped fixtures are then
# computed once, not once per process (the suite's time, README)
pytestmark = [pytest.mark.timeout(240), pytest.mark.xdist_group("engine-masked")]

M, N, K = 120, 80, 4
# two pivot attempts an iteration instead of the default 8: each costs a column-wise
# solve per column and their batch a pass, and two cover the move on every path (the
# suite's time, README); the pivot's own tests below set more
KW = dict(n_iter=24, burn_in=8, thin=2, random_state=5, block_size=20, missing="mask",
          n_trace_columns=4, n_pivot=2, n_redraw=0)  # the redraw swap: its own test
SYNC = dict(client="synchronous")
# 4 row tiles x 2 column groups: the gathers and the reduction tree are exercised
TILES = (32, 40)
SAMPLERS = ["collapsed", "plain", "aggressive", "search"]
# the chains of the store: shorter (every masked iteration streams the store once)
KWS = {**KW, "n_iter": 14, "burn_in": 4}


def _matrix(seed=0, frac=0.3, noise=0.05):
    rng = np.random.default_rng(seed)
    A = (rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
         + noise * rng.standard_normal((M, N)))
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
    return bayesian_id(store, K, chunks=TILES, checkpoint_every=5, **KWS, **SYNC)


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


@pytest.mark.parametrize("move,model,extra", [
    # the masked pivot swap (each column its own map, from one pass of the attempts'
    # products)
    ("pivot", "gbt", dict(n_pivot=6, n_redraw=0, n_iter=40)),
    ("pivot", "gbtn", dict(n_pivot=6, n_redraw=0, n_iter=40)),
    # the masked redraw swap (every column of W redrawn under the new basis, each with its
    # own Gram), its products from the pivot's pass or, after an accepted swap, from a
    # pass of their own (GBT in the sparse input's test)
    ("redraw", "gbtn", dict(n_pivot=2, n_redraw=4, n_iter=30)),
])
def test_engine_matches_memory_backend_with_accepted_swaps(monkeypatch, move, model, extra):
    # the same chain on the engine as in memory, accepted swaps of the move included
    calls = count_pivots(monkeypatch, move)
    A = _matrix(5, noise=0.5)  # noisy: the swaps are accepted often
    kw = {**KW, "model": model, "init": "random", "n_anneal": 0, **extra}
    mem = bayesian_id(A, K, **kw)
    n_mem = len(calls)
    assert n_mem > 0, f"no {move} swap accepted: the comparison would not cover them"
    assert_same_chain(mem, bayesian_id(A, K, **kw, **SYNC))
    assert len(calls) > n_mem


def test_engine_matches_memory_backend_with_a_candidate_pool():
    # the pool (docs/model.md): a masked chain drawing its candidates from 12 columns
    # redrawn every 5 iterations, the same on the engine as in memory
    A = _matrix(3)
    kw = {**KW, "init": "random", "candidate_pool": 12, "pool_every": 5}
    mem = bayesian_id(A, K, **kw)
    assert_same_chain(mem, bayesian_id(A, K, **kw, **SYNC))
    assert mem.trace["accepted"].any()
    assert not np.array_equal(mem.trace["accept_prob"],
                              bayesian_id(A, K, **KW, init="random").trace["accept_prob"])


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
    mem = bayesian_id(_matrix(), K, **KWS)
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
def test_sync_path_repeats_and_dask_input(store, reference):
    assert_same_chain(reference, bayesian_id(store, K, chunks=TILES, checkpoint_every=5,
                                             **KWS, **SYNC))
    # a dask array with the same NaN: the same chain
    x = da.from_array(_matrix(), chunks=TILES)
    assert_same_chain(reference, bayesian_id(x, K, chunks=TILES, checkpoint_every=5, **KWS,
                                             **SYNC))


@pytest.fixture(scope="module")
def process_client():
    """Two worker processes with a 600 MB memory limit each, which record the largest
    result of every kind of task (:class:`_LargestResult`); shared by the process path's
    determinism test and the memory test (one cluster start-up). In a fresh environment
    a worker compiling the kernels holds ~270 MiB before any data (CI, no numba cache):
    with 400 MB it paused at 80 % and the fit waited forever."""
    import sys

    import cloudpickle

    # the plugin class lives in this test module, which the workers cannot import
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, memory_limit="600MB",
                          dashboard_address=":0") as cluster, \
                Client(cluster, set_as_default=False) as client:
            client.register_plugin(_LargestResult())
            yield client
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


def test_process_cluster_matches_sync(store, reference, process_client):
    res = bayesian_id(store, K, client=process_client, chunks=TILES, checkpoint_every=5,
                      **KWS)
    assert_same_chain(reference, res)
    assert res.mse_observed == reference.mse_observed


def test_thread_cluster_matches_sync(store, reference):
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        res = bayesian_id(store, K, client=client, chunks=TILES, checkpoint_every=5, **KWS)
    assert_same_chain(reference, res)


# --------------------------------------------------------------- 3. checkpoints, resume
class _Stop(KeyboardInterrupt):
    pass


@pytest.mark.parametrize("sampler", ["collapsed", "aggressive"])
def test_interrupted_masked_fit_resumes_bitwise(store, reference, tmp_path, sampler):
    kw = {**KWS, "sampler": sampler}
    # the collapsed chain is the module's reference (the default sampler)
    whole = reference if sampler == "collapsed" else bayesian_id(
        store, K, chunks=TILES, checkpoint_every=5, **kw, **SYNC)
    out = str(tmp_path / "fit.zarr")

    def stop(st):
        if st.iteration == 8:
            raise _Stop()

    with pytest.raises(_Stop):
        bayesian_id(store, K, chunks=TILES, checkpoint_every=5, out=out, callback=stop, **kw,
                    **SYNC)
    seen = []
    res = bayesian_id(store, K, chunks=TILES, checkpoint_every=5, out=out, resume=True,
                      callback=lambda st: seen.append(st.iteration), **kw, **SYNC)
    assert seen[0] == 9, "resumed from the checkpoint of the stop at iteration 8"
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
    # said once (it said "A contains infinity (...): A contains infinite entries; ...")
    with pytest.raises(NonFiniteInputError, match=r"A contains infinity \(at row 7, column 9"
                                                  r"[^;]*; missing='mask' treats only NaN") as e:
        bayesian_id(str(tmp_path / "inf.zarr"), K, **KW, **SYNC)
    assert str(e.value).count("infinit") == 2, e.value  # "infinity", "the infinities"
    B = _matrix(3)
    B[:, [11, 50]] = np.nan
    to_zarr(B, tmp_path / "empty.zarr", chunks=TILES)
    with pytest.raises(InputShapeError, match=r"columns \[11, 50\] have no observed entry"):
        bayesian_id(str(tmp_path / "empty.zarr"), K, **{**KW, "init": "random"}, **SYNC)


def test_huge_values_are_rescaled_as_in_memory(tmp_path):
    # max|A| near 1e200: the engine finds it in its first pass (NaN aside) and fits A / 2^e
    A = _matrix(4) * 1e200
    kw = {**KW, "init": "random"}
    to_zarr(A, tmp_path / "A.zarr")
    with pytest.warns(RuntimeWarning, match="reported as inf"):
        mem = bayesian_id(A, K, **kw)
    with pytest.warns(RuntimeWarning, match="reported as inf"):
        eng = bayesian_id(str(tmp_path / "A.zarr"), K, **kw, **SYNC)
    assert eng.params["input_scale_log2"] == mem.params["input_scale_log2"] == 500
    assert_same_chain(mem, eng)


def test_estimator_fits_a_masked_store(store, reference):
    est = BayesianID(K, **KWS).fit(store, chunks=TILES, checkpoint_every=5, **SYNC)
    np.testing.assert_array_equal(est.columns_, reference.columns)
    assert est.mse_observed_ == reference.mse_observed


# --------------------------------------------------------------- 5. memory per block
def _nbytes(x, seen=None):
    """Bytes of the numpy arrays held by ``x`` (tuples, lists, dicts, NamedTuples)."""
    if isinstance(x, np.ndarray):
        return x.nbytes
    if isinstance(x, dict):
        return sum(_nbytes(k) + _nbytes(v) for k, v in x.items())
    if isinstance(x, (tuple, list)):
        return sum(_nbytes(v) for v in x)
    return 0


class _LargestResult(WorkerPlugin):
    """Worker plugin: the largest result (array bytes) of every kind of task, where the
    kind is the key's prefix (``bid-init``, ``bid-block_collapsed_score``, ``_masked_init_part``
    ...); block states are told apart from the small results that travel."""

    name = "largest-result"

    def setup(self, worker):
        self.worker = worker
        worker.largest_result = {}

    def transition(self, key, start, finish, **kwargs):
        if finish != "memory":
            return
        from dask.utils import key_split

        from dask_bid.kernels.block import BlockState

        value = self.worker.data.get(key) if key in self.worker.data else None
        if value is None:
            return
        sizes = self.worker.largest_result
        # a pack (DaskBackend.map): ((states), (smalls)); its states count one by one, and
        # the pack as a whole against PACK_BYTES
        if (isinstance(value, tuple) and value and isinstance(value[0], tuple) and value[0]
                and all(isinstance(v, BlockState) for v in value[0])):
            for v in value[0]:
                sizes["state"] = max(sizes.get("state", 0), _nbytes(v))
            sizes["pack"] = max(sizes.get("pack", 0), _nbytes(value[0]))
            return
        kind = "state" if isinstance(value, BlockState) else key_split(key)
        sizes[kind] = max(sizes.get(kind, 0), _nbytes(value))


def test_block_memory_stays_within_the_stated_bound(tmp_path, process_client):
    """The bound of docs/engine.md, measured: every block state a worker holds during a
    masked fit, and every partial result of a streaming task, on workers with a memory
    limit (none spills, pauses or restarts)."""
    import os

    from dask_bid.engine.dask_backend import (
        MAX_PACK_BYTES,
        PACK_BYTES,
        PACK_MEMORY_FRACTION,
        TILE_BYTES,
        masked_block_bytes,
    )

    Mb, Nb, Kb, nb = 6_000, 192, 5, 32
    rng = np.random.default_rng(7)
    A = rng.standard_normal((Mb, Kb)) @ rng.uniform(-1, 1, (Kb, Nb)) \
        + 0.1 * rng.standard_normal((Mb, Nb))
    A[rng.random(A.shape) < 0.4] = np.nan
    path = str(tmp_path / "big.zarr")
    to_zarr(A, path, chunks=(1000, 96))  # 9 MB: 6 x 2 chunks, 6 row tiles
    client = process_client
    client.run(lambda dask_worker: dask_worker.largest_result.clear())
    pids = client.run(os.getpid)
    res = bayesian_id(path, Kb, client=client, n_iter=6, burn_in=2, random_state=0,
                      block_size=nb, missing="mask", init="random", chunks=(1000, 96),
                      checkpoint_every=3, n_anneal=2, anneal_every=3, refine_sweeps=2)
    sizes = client.run(lambda dask_worker: dask_worker.largest_result)
    metrics = client.run(lambda dask_worker: dict(dask_worker.data.cumulative_metrics))
    statuses = {w["status"] for w in client.scheduler_info(n_workers=-1)["workers"].values()}
    assert client.run(os.getpid) == pids, "a worker was restarted"
    assert res.params["missing"] == "mask" and res.mse_observed > 0
    assert statuses == {"running"}
    for a, m in metrics.items():
        assert m.get(("disk-write", "count"), 0) == 0, f"{a} spilled: {m}"
    largest = {}
    for s in sizes.values():
        for k, v in s.items():
            largest[k] = max(largest.get(k, 0), v)
    from dask_bid.engine.summary import chain_config

    cfg = chain_config(res.params | {"priors": None, "n_components": Kb}, Nb)
    # traced columns: at most 2 per block of 32 of the 10 spread over 192, each with a
    # draw per iteration, refinement sweep and point estimate
    assert cfg.n_pivot > 0  # the pivot attempts' rows are part of the bound
    bound = masked_block_bytes(nb, Kb, n_tries=cfg.n_tries, n_pivot=cfg.n_pivot,
                               n_redraw=cfg.n_redraw,
                               max_cached_rows=cfg.max_cached_rows,
                               max_tracked_sets=cfg.max_tracked_sets,
                               trace_values=2 * (6 + 2 + 2))
    print(f"\nmasked block bound {bound} B; largest results: {largest}")
    assert 0 < largest["state"] <= bound
    # the blocks of a worker were updated together (a pack), within the packs' bound
    # (DaskBackend._pack_bytes: a share of the worker memory limit, at least PACK_BYTES)
    limit = min(w["memory_limit"] for w in client.scheduler_info(n_workers=-1)["workers"]
                .values())
    pack_bound = min(MAX_PACK_BYTES, max(PACK_BYTES, PACK_MEMORY_FRACTION * limit))
    assert 0 < largest["pack"] <= pack_bound
    # the per-column Grams the blocks hold make up much of the bound: it is not vacuous
    assert largest["state"] >= nb * Kb * Kb * 8
    # every other result (tile partials, per-block Gram rows, gathered columns) stays
    # below one tile's bytes, and the matrix is many of them
    others = {k: v for k, v in largest.items() if k not in ("state", "pack")}
    assert max(others.values()) <= TILE_BYTES, others
    assert A.nbytes > 8 * max(max(others.values()), bound)


# --------------------------------------------------------------- 6. an explicit mask
def _values_and_mask(seed=0):
    """A's values everywhere (the unobserved ones too) and the mask of the observed."""
    A = _matrix(seed)
    obs = ~np.isnan(A)
    values = np.where(obs, A, np.random.default_rng(99).standard_normal(A.shape) * 1e3)
    return values, obs, A


def test_explicit_zarr_mask_reads_like_nan(tmp_path, store, reference):
    values, obs, _ = _values_and_mask()
    to_zarr(values, tmp_path / "V.zarr", chunks=TILES)
    import zarr

    z = zarr.create_array(str(tmp_path / "M.zarr"), shape=obs.shape, chunks=TILES,
                          dtype=bool, config={"write_empty_chunks": True})
    z[...] = obs
    res = bayesian_id(str(tmp_path / "V.zarr"), K, mask=str(tmp_path / "M.zarr"),
                      chunks=TILES, checkpoint_every=5, **KWS, **SYNC)
    # the very chain of the store holding NaN where the mask is False
    assert_same_chain(reference, res)
    assert res.mse_observed == reference.mse_observed
    # the selected columns read with NaN where unobserved, as the NaN store's
    np.testing.assert_array_equal(np.asarray(res.C), _matrix()[:, res.columns])
    # the estimator takes it as a fit keyword too
    est = BayesianID(K, **KWS).fit(str(tmp_path / "V.zarr"), mask=z, chunks=TILES,
                                   checkpoint_every=5, **SYNC)
    np.testing.assert_array_equal(est.columns_, reference.columns)


def test_explicit_numpy_mask_in_memory_and_on_the_engine():
    values, obs, A = _values_and_mask(1)
    kw = {**KW, "init": "random"}
    nan_fit = bayesian_id(A, K, **kw)
    assert_same_chain(nan_fit, bayesian_id(values, K, mask=obs, **kw))
    assert_same_chain(nan_fit, bayesian_id(values, K, mask=obs, **kw, **SYNC))
    # a zarr values array with a numpy mask: read lazily through dask, the same chain
    assert_same_chain(nan_fit, bayesian_id(values, K, mask=da.from_array(obs, chunks=40),
                                           **kw, **SYNC))


def test_explicit_mask_refusals(tmp_path):
    from dask_bid import InputDTypeError, ParameterError

    values, obs, _ = _values_and_mask(2)
    with pytest.raises(ParameterError, match="mask= marks the observed entries.*"
                                             "missing='mask'"):
        bayesian_id(values, K, **{**KW, "missing": "zero"}, mask=obs)
    with pytest.raises(InputShapeError, match=r"mask has shape \(120, 79\) and A \(120, 80\)"):
        bayesian_id(values, K, **KW, mask=obs[:, :-1])
    with pytest.raises(InputDTypeError, match="mask must be boolean.*got dtype float64"):
        bayesian_id(values, K, **KW, mask=obs.astype(float))


def test_a_zarr_mask_with_missing_chunks_is_refused_unless_allowed(tmp_path):
    import zarr

    from dask_bid import IncompleteStoreError

    values, obs, _ = _values_and_mask(3)
    obs[:32, :40] = False  # one chunk all unobserved: Zarr omits it by default
    to_zarr(values, tmp_path / "V.zarr", chunks=TILES)
    z = zarr.create_array(str(tmp_path / "M.zarr"), shape=obs.shape, chunks=TILES, dtype=bool)
    z[...] = obs
    kw = {**KWS, "init": "random", "n_iter": 4, "burn_in": 1}
    with pytest.raises(IncompleteStoreError, match=r"M.zarr. has 1 of 8 chunks missing \(c/0/0\)"):
        bayesian_id(str(tmp_path / "V.zarr"), K, mask=z, chunks=TILES, **kw, **SYNC)
    res = bayesian_id(str(tmp_path / "V.zarr"), K, mask=z, chunks=TILES,
                      allow_missing_chunks=True, **kw, **SYNC)
    assert res.mse_observed > 0


# --------------------------------------------------------------- 7. the blocks' Grams
@pytest.mark.parametrize("sampler", SAMPLERS)
def test_blocks_hold_the_grams_of_their_basis_after_the_chain(sampler):
    """After every move of the default settings, each block's per-column Grams are
    C[O_n]^T C[O_n] of the chain's current basis (a move that swaps H but not the Grams
    would leave the masked likelihood of another basis)."""
    from dask_bid.engine.chain import run_chain
    from dask_bid.engine.cluster import SyncExecutor
    from dask_bid.engine.dask_backend import MaskedDaskBackend, TileSource, _state
    from dask_bid.engine.inputs import as_matrix_source
    from dask_bid.engine.summary import chain_config
    from dask_bid.interface._params import validate_params
    from dask_bid.interface.functional import DEFAULTS

    A = _matrix(5)
    obs = ~np.isnan(A)
    A0 = np.where(obs, A, 0.0)
    p = validate_params({**DEFAULTS, **KW, "sampler": sampler, "n_components": K,
                         "init": "random"}, n_cols=N)
    cfg = chain_config(p, N)
    src = as_matrix_source(A)
    lay = plan_layout((M, N), ((M,), (N,)), K, block_size=20, masked=True)
    ex = SyncExecutor()
    be = MaskedDaskBackend(TileSource(src, lay, ex), ex)
    out = run_chain(be, cfg, 7, chain=0)
    J = out.state.J
    assert len(set(out.state.trace_accepted)) == 2 or sampler == "plain"
    for s in be._held:
        st = _state(s)  # a state, or a block of a pack
        for n in range(st.start, st.stop):
            C = A0[obs[:, n]][:, J]
            np.testing.assert_allclose(st.Gn[n - st.start], C.T @ C, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(st.H, A0[:, J].T @ A0[:, st.start:st.stop], rtol=1e-10,
                                   atol=1e-10)
