"""Wide matrices (issue 13.1): the candidate batch sized from the workers' memory, rows and
chains independent of the batch, bounded passes, and nothing of size N for the client."""

from __future__ import annotations

import math

import dask
import dask.array as da
import numpy as np
import pytest
from dask.sizeof import sizeof
from distributed import Client, LocalCluster

from dask_bid.engine import to_zarr
from dask_bid.engine.cluster import DistributedExecutor, SyncExecutor
from dask_bid.engine.dask_backend import plan_layout
from dask_bid.engine.summary import (
    CANDIDATE_MEMORY_FRACTION,
    DEFAULT_CANDIDATE_BYTES,
    candidate_memory,
    candidate_row_bytes,
    chain_config,
)
from dask_bid.interface import bayesian_id
from dask_bid.interface._params import validate_params
from dask_bid.interface.functional import DEFAULTS
from dask_bid.kernels.products import ROW_PANEL, row_products

pytestmark = pytest.mark.timeout(300)

# a wide matrix whose candidate rows are large beside a small worker memory limit
M, N, K = 16, 12_000, 3
N_ITER = 12
KW = dict(n_iter=N_ITER, burn_in=4, thin=1, random_state=5)
PER_ITER = 8 + 8 + 1  # n_tries + n_pivot + the annealed swap


def _equal(a, b):
    for f in ("columns", "components", "components_sd", "draws_sigma2", "draws_sse",
              "draws_columns", "inclusion_probability"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    for f in ("mse", "sigma2", "accepted", "accept_prob"):
        np.testing.assert_array_equal(a.trace[f], b.trace[f], err_msg=f)
    assert a.mse == b.mse and a.sigma2 == b.sigma2


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    rng = np.random.default_rng(3)
    A = (rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
         + 0.05 * rng.standard_normal((M, N)))
    return A, to_zarr(A, tmp_path_factory.mktemp("wide") / "A.zarr")


def _params(**kw):
    return validate_params(dict(DEFAULTS, n_components=K, **dict(KW, **kw)), N)


@pytest.fixture(scope="module")
def small_cluster():
    """Two in-process workers that report a 60 MB memory limit (the memory monitor is
    off: in one process it would count the test's own memory)."""
    off = {f"distributed.worker.memory.{k}": False
           for k in ("target", "spill", "pause", "terminate")}
    with dask.config.set(off), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                         memory_limit="60MB", dashboard_address=":0") as cl, \
            Client(cl) as client:
        yield client


def test_row_products_do_not_depend_on_the_batch():
    # a plain U.T @ T gives a row other floats in other batch sizes (OpenBLAS picks its
    # kernels by shape); the panels give every row the same floats in every batch
    rng = np.random.default_rng(0)
    T = rng.standard_normal((1000, 700))
    cols = rng.permutation(700)[:300]
    ref = {}
    for m in (1, 5, ROW_PANEL, ROW_PANEL + 1, 2 * ROW_PANEL + 3, 300):
        for _ in range(2):
            pick = rng.permutation(cols)[:m]
            out = row_products(np.ascontiguousarray(T[:, pick]), T[:, 100:650])
            np.testing.assert_allclose(out, T[:, pick].T @ T[:, 100:650], rtol=1e-12,
                                       atol=1e-9)
            for s, c in enumerate(pick):
                if c in ref:
                    np.testing.assert_array_equal(out[s], ref[c], err_msg=f"m={m} col {c}")
                ref.setdefault(c, out[s])


def test_the_batch_follows_the_workers_memory(small_cluster):
    layout = plan_layout((M, N), ((M,), (N // 4,) * 4), K)
    p = _params(n_iter=400)  # 6801 draws: the memory decides
    small = candidate_memory(DistributedExecutor(small_cluster), layout)
    assert small["memory"] == 60 * 10**6
    # two copies of a worker's share of every row (its blocks: every other one), no tree
    share = max(sum(b - a for a, b in layout.blocks[w::2]) for w in range(2))
    assert small["row_bytes"] == candidate_row_bytes(N, blocks=layout.blocks, n_workers=2)
    assert small["row_bytes"] == 2 * 8 * share
    nc_small = chain_config(p, N, **small).n_candidates
    assert nc_small == int(CANDIDATE_MEMORY_FRACTION * 60e6 // (16 * share))
    # twice the memory, twice the batch (up to rounding)
    nc_big = chain_config(p, N, memory=120 * 10**6, row_bytes=small["row_bytes"]).n_candidates
    assert nc_big in (2 * nc_small, 2 * nc_small + 1)
    # without a known limit (synchronous, in memory): the documented default
    sync = candidate_memory(SyncExecutor(), layout)
    assert sync["memory"] is None
    nc_sync = chain_config(p, N, **sync).n_candidates
    assert nc_sync == int(DEFAULT_CANDIDATE_BYTES // (16 * N))
    # at most what the chain draws
    assert chain_config(_params(n_iter=6), N, **small).n_candidates == 6 * PER_ITER + 1
    # several chains share the workers: each gets its part
    two = candidate_memory(DistributedExecutor(small_cluster), layout, n_chains=2)
    assert two["row_bytes"] == 2 * small["row_bytes"]
    # explicit values stay as given
    assert chain_config(_params(n_candidates=7, n_iter=400), N, **small).n_candidates == 7


def test_small_memory_gives_more_passes_and_the_same_chain(wide, small_cluster):
    A, z = wide
    layout = plan_layout((M, N), da.from_zarr(z).chunks, K)
    nc = chain_config(_params(), N, **candidate_memory(DistributedExecutor(small_cluster),
                                                        layout)).n_candidates
    draws = N_ITER * PER_ITER + 1
    assert 2 * PER_ITER < nc < draws, "the test needs a batch below the chain's draws"
    last = []
    # checkpoints every 4 iterations leave the rows out and the reloaded blocks get them
    # back from the pass that made them: no pass more, the same chain
    on_cluster = bayesian_id(z, K, client=small_cluster, callback=lambda st: last.append(
        st.cand_pos), checkpoint_every=4, **KW)
    # the synchronous path batches every draw (the default budget): no pass after the first
    sync = bayesian_id(z, K, client="synchronous", **KW)
    assert sync.n_passes == 0
    # the small batch costs passes: the first covers nc stream entries, each later one
    # (the next nc from the move that missed) at least nc - 8 more (8: a move's set)
    used = last[-1]  # stream entries the chain consumed (pivot redraws included)
    assert 1 <= on_cluster.n_passes <= math.ceil((used - nc) / (nc - 8))
    _equal(on_cluster, sync)


@pytest.mark.parametrize("where", ["memory", "synchronous"])
def test_chains_do_not_depend_on_the_batch_size(where):
    # tiles of 1000 rows: the shape at which plain products gave other floats per batch
    rng = np.random.default_rng(4)
    A = rng.standard_normal((1000, 3)) @ rng.uniform(-1, 1, (3, 300)) \
        + 0.05 * rng.standard_normal((1000, 300))
    kw = dict(n_iter=15, burn_in=5, thin=1, random_state=2)
    if where == "synchronous":
        kw["client"] = "synchronous"
    runs = [bayesian_id(A, 3, n_candidates=nc, **kw) for nc in (8, 61, "auto")]
    assert runs[0].n_passes > runs[1].n_passes > runs[2].n_passes == 0
    _equal(runs[0], runs[1])
    _equal(runs[0], runs[2])


def test_the_client_never_receives_an_n_vector(wide, small_cluster, monkeypatch):
    # what the client gathers during the iterations (all but the first and the summary):
    # scalars, K-vectors and per-candidate shares, never a row or column of size N
    A, z = wide
    sizes, in_chain = [], [False]

    def measured(receive):
        def wrapper(self, handles):
            out = receive(self, handles)
            if in_chain[0]:
                sizes.append(sizeof(out))
            return out
        return wrapper

    def callback(state):
        in_chain[0] = 1 <= state.iteration < N_ITER

    # gather: results fetched from the workers; collect: the block maps' small results,
    # which come with the tasks (engine/reports.py)
    monkeypatch.setattr(DistributedExecutor, "gather", measured(DistributedExecutor.gather))
    monkeypatch.setattr(DistributedExecutor, "collect", measured(DistributedExecutor.collect))
    bayesian_id(z, K, client=small_cluster, callback=callback, **KW)
    assert len(sizes) >= 3 * (N_ITER - 2)  # a few round trips an iteration
    # the largest (~8 kB here: a prefetch of up to 64 columns' H[:, c] and ||a_c||^2,
    # K + 1 floats each, chain.MAX_PEEK) is a small fraction of one N-vector (96 kB)
    assert max(sizes) < 8 * N / 4, max(sizes)


def test_checkpoints_leave_the_rows_out_and_resume_without_them(wide, small_cluster,
                                                                tmp_path):
    # the cached rows (most of a wide block's state) are recomputable: a checkpoint does
    # not write them; a resumed fit starts with an empty cache and gives the same chain
    from dask_bid.engine.checkpoint import StoreSpec, checkpoint_name, load_blob

    A, z = wide
    out = tmp_path / "fit.zarr"
    seen = []

    def callback(state):
        if state.iteration == 5:  # after the checkpoint of iteration 4
            blob = load_blob(StoreSpec(out), f"checkpoint/{checkpoint_name(0, 4)}/block_00000")
            client = load_blob(StoreSpec(out), f"checkpoint/{checkpoint_name(0, 4)}/client")
            seen.append((blob.cand_cols, blob.cand_rows.shape, len(client["state"].cached)))
        if state.iteration == 9:
            raise KeyboardInterrupt  # stop the fit after the checkpoint of iteration 8

    with pytest.raises(KeyboardInterrupt):
        bayesian_id(z, K, client=small_cluster, out=out, checkpoint_every=4,
                    callback=callback, **KW)
    (cols, shape, n_cached), = seen
    assert cols == () and shape[0] == 0 and n_cached > 0
    resumed = bayesian_id(z, K, client=small_cluster, out=out, resume=True,
                          checkpoint_every=4, **KW)
    _equal(resumed, bayesian_id(z, K, client="synchronous", **KW))


def test_pool_for_is_fixed_by_the_shape_never_the_memory():
    from dask_bid.engine.summary import POOL_MIN_COLUMNS, POOL_SIZE, pool_for

    big = POOL_MIN_COLUMNS + 1
    assert pool_for("auto", "auto", big, 1000) == (POOL_SIZE, 334)
    assert pool_for("auto", "auto", POOL_MIN_COLUMNS, 1000) == (0, 0)  # every column
    assert pool_for("auto", 50, big, 1000, sampler="aggressive") == (0, 0)  # the paper's
    assert pool_for(None, "auto", big, 1000) == (0, 0)
    assert pool_for(40, 7, 100, 1000, sampler="plain") == (40, 7)
    assert pool_for(100, 7, 100, 1000) == (0, 0)  # a pool of every column is no pool
    # the same chain settings whatever the workers' memory, as long as the pool fits
    p = validate_params(dict(DEFAULTS, n_components=K, **KW), big)
    rb = candidate_row_bytes(big, n_workers=2)
    cfgs = [chain_config(p, big, memory=m, row_bytes=rb) for m in (None, 2**30, 2**34)]
    assert {(c.pool_size, c.pool_every, c.max_cached_rows) for c in cfgs} == {
        (POOL_SIZE, 4, POOL_SIZE)}  # pool_every "auto": ceil(12 / 3)


def test_a_pool_that_does_not_fit_the_workers_is_refused_before_any_pass():
    from dask_bid import ParameterError

    big = 20_000
    p = validate_params(dict(DEFAULTS, n_components=K, **KW), big)
    rb = candidate_row_bytes(big)  # 320 kB a row: every column on one worker
    with pytest.raises(ParameterError, match=r"candidate_pool=512 needs .* pass a smaller "
                                             r"candidate_pool \(at most 163\)"):
        chain_config(p, big, memory=100 * 2**20, row_bytes=rb)
    with pytest.raises(ParameterError, match="candidate_pool must be >= 4"):
        validate_params(dict(DEFAULTS, n_components=K, candidate_pool=3), big)


def test_a_pooled_chain_resumes_and_makes_one_pass_per_draw_of_the_pool(wide, small_cluster,
                                                                        tmp_path):
    # candidates only from the pool: its rows come in one pass per draw (the first with
    # H), whatever the chain proposes; a resumed fit (its cache is not checkpointed)
    # computes the current pool's rows again and continues the same chain
    A, z = wide
    kw = dict(KW, candidate_pool=64, pool_every=5)
    pools = []

    def watch(st):
        # the blocks hold the rows of the pool and nothing else; the pool holds J
        assert len(st.pool) == 64 and list(st.cached) == list(st.pool)
        assert set(int(j) for j in st.J) <= set(st.pool)
        pools.append(st.pool)

    ref = bayesian_id(z, K, client="synchronous", callback=watch, **kw)
    assert ref.n_passes == (N_ITER - 1) // 5  # the draws at iterations 5 and 10
    # redrawn at the start of iterations 5 and 10 (the callback runs after each)
    assert [i for i in range(1, N_ITER) if pools[i] != pools[i - 1]] == [5, 10]
    out = tmp_path / "fit.zarr"

    def callback(state):
        if state.iteration == 7:
            raise KeyboardInterrupt  # after the checkpoint of iteration 4

    with pytest.raises(KeyboardInterrupt):
        bayesian_id(z, K, client=small_cluster, out=out, checkpoint_every=4,
                    callback=callback, **kw)
    resumed = bayesian_id(z, K, client=small_cluster, out=out, resume=True,
                          checkpoint_every=4, **kw)
    _equal(resumed, ref)


def test_a_block_state_is_sized_exactly():
    # dask's default for a tuple of more than 10 items samples 10 and scales: a block
    # state (20 fields) came out at its cached rows' size times 0, 1 or 2 at random, and
    # the workers spilled states they had room for (engine/dask_backend.py)
    import dask_bid.engine.dask_backend  # noqa: F401  (registers the size)
    from dask_bid.kernels.block import BlockState

    rows = np.zeros((64, 4096))
    state = BlockState(*([None] * 13), rows, *([None] * 6))
    assert len(state) > 10  # what made dask sample
    sizes = {sizeof(state) for _ in range(50)}
    assert len(sizes) == 1 and rows.nbytes <= sizes.pop() < rows.nbytes + 4096
    # a pack's states (engine/dask_backend.py PackStates): 12 states, one of them large
    from dask_bid.engine.dask_backend import PackStates

    empty = BlockState(*([None] * 20))
    pack = PackStates([state] + [empty] * 11)
    sizes = {sizeof(pack) for _ in range(50)}
    assert len(sizes) == 1 and rows.nbytes <= sizes.pop() < rows.nbytes + 8192


def _walked_bytes(x):
    # every array reachable from x, walked (what _state_bytes must equal)
    if isinstance(x, np.ndarray):
        return x.nbytes
    if isinstance(x, dict):
        return sum(_walked_bytes(v) for v in x.values())
    if isinstance(x, (tuple, list)):
        return sum(_walked_bytes(v) for v in x)
    return 0


def test_a_state_with_a_long_history_is_sized_and_realigned_without_walking_it():
    """A block state's retained draws (``traces``) and per-basis sums (``acc``) grow with
    the chain. A pack's size is their first entry's bytes times their number (it equals
    the walked size), and realignment leaves them alone (they enter no product): walking
    both at every map made a fit's client time quadratic in its length."""
    from dask_bid.engine.chain import run_chain
    from dask_bid.engine.dask_backend import _realign, _state_bytes
    from dask_bid.engine.memory import MemoryBackend
    from dask_bid.engine.summary import chain_config

    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 12))
    p = validate_params({**DEFAULTS, "n_components": 3, "n_iter": 60, "burn_in": 10,
                         "thin": 1, "init": "random"}, n_cols=12)
    be = MemoryBackend(A, n_threads=1, trace_cols=range(12))
    run_chain(be, chain_config(p, 12), 5, 0)
    st = be.states[0]
    assert len(st.traces) == 50 and len(st.acc) >= 1
    assert _state_bytes(st) == _walked_bytes(st) > 0
    # a state received at an odd byte offset: its working arrays are copied to aligned
    # memory, the history is passed through as it is
    buf = np.zeros(st.W.size * 8 + 1, dtype=np.uint8)
    W = np.frombuffer(buf[1:].data, dtype=np.float64).reshape(st.W.shape)
    W[...] = st.W
    assert not W.flags.aligned
    moved = _realign(st._replace(W=W))
    assert moved.W.flags.aligned and np.array_equal(moved.W, st.W)
    assert moved.traces is st.traces and moved.acc is st.acc
    assert _realign(st) is st  # nothing to copy: the same object
    # a misaligned draw in the history stays where it is: the history is not walked
    key, w = st.traces[-1]
    odd = np.frombuffer(np.zeros(w.size * 8 + 1, np.uint8)[1:].data,
                        dtype=np.float64).reshape(w.shape)
    longer = st._replace(traces=st.traces + ((key, odd),))
    assert _realign(longer).traces is longer.traces
