"""How often the engine reads A: candidate batches, the fused first batch, the summary."""

from __future__ import annotations

import numpy as np
import pytest

from dask_bid.engine import to_zarr
from dask_bid.engine.dask_backend import DaskBackend
from dask_bid.engine.summary import DEFAULT_CANDIDATE_BYTES, n_candidates_for
from dask_bid.interface import bayesian_id

pytestmark = pytest.mark.timeout(300)

M, N, K = 200, 90, 4
KW = dict(n_iter=40, burn_in=10, thin=2, random_state=3, block_size=30, init="random")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(1)
    A = (rng.standard_normal((M, K)) @ rng.uniform(-1, 1, (K, N))
         + 0.05 * rng.standard_normal((M, N)))
    return A, to_zarr(A, tmp_path_factory.mktemp("passes") / "A.zarr", chunks=(50, 45))


def test_auto_candidates():
    # explicit values as given; "auto" from the memory budget (default: 512 MiB for two
    # copies of every row), at least 8, at most the chain's draws or all N rows
    assert n_candidates_for(7, 10**6, 500) == 7
    assert n_candidates_for("auto", 5_000, 500) == 501
    assert n_candidates_for("auto", 5_000, 2000) == 2001
    assert n_candidates_for("auto", 5_000, 1000, per_iter=17) == 5_000  # A^T A whole
    assert n_candidates_for("auto", 5_000, 10) == 11
    # the exact sampler draws several candidates per iteration: its batch covers them
    assert n_candidates_for("auto", 5_000, 10, per_iter=17) == 171
    assert n_candidates_for("auto", 10**8, 500) == 8
    wide = DEFAULT_CANDIDATE_BYTES // (2 * 8 * 200_000)
    assert n_candidates_for("auto", 200_000, 500) == wide


@pytest.mark.parametrize("where", ["memory", "zarr"])
def test_first_batch_rides_on_the_init_pass(store, where):
    A, z = store
    X = A if where == "memory" else z
    kw = dict(KW, client="synchronous") if where == "zarr" else KW
    # "auto" batches n_iter + 1 candidates here, all computed by the pass that computes H;
    # only columns of the starting basis that are swapped out and proposed again later
    # need a pass of their own
    fused = bayesian_id(X, K, **kw)
    small = bayesian_id(X, K, n_candidates=8, **kw)
    assert small.n_passes >= 40 // 8 - 1
    assert fused.n_passes < small.n_passes
    # batching changes which pass computes a row, not the chain
    np.testing.assert_array_equal(fused.trace["accepted"], small.trace["accepted"])
    np.testing.assert_array_equal(fused.draws_columns, small.draws_columns)


def test_initial_state_holds_the_first_batch(store):
    from dask_bid.engine.chain import initial_state, step
    from dask_bid.engine.memory import MemoryBackend
    from dask_bid.engine.summary import chain_config
    from dask_bid.interface._params import validate_params
    from dask_bid.interface.functional import DEFAULTS

    A, _ = store
    p = validate_params(dict(DEFAULTS, n_components=K, n_iter=40, burn_in=10,
                                    random_state=3), N)
    cfg = chain_config(p, N)
    be = MemoryBackend(A, block_size=30)
    J0 = np.array([0, 1, 2, 3])
    st, norm_a2, n_obs = initial_state(be, cfg, 11, 0, J0)
    # 40 iterations of the default sampler draw 17 candidates each (8 tries, 8 pivot
    # attempts, 1 annealed): more than N, so the batch is all of A^T A, the starting
    # basis's rows included (a column that leaves the basis needs no pass later)
    assert cfg.n_candidates == N
    assert sorted(st.cached) == list(range(N))
    for s in be.states:
        assert s.cand_cols == tuple(st.cached)
        np.testing.assert_allclose(s.cand_rows, A[:, st.cached].T @ A[:, s.start:s.stop])
    for _ in range(5):
        step(be, cfg, 11, 0, st, norm_a2, n_obs)
    assert st.n_passes == 0


def test_summary_reuses_the_final_basis(store, monkeypatch):
    # the reported basis is the one the chain ended in: the summary reorders H instead
    # of a pass, and the SSE comes from the blocks' statistics, equal to the direct one
    A, z = store
    calls = {"init": 0, "sse": 0}
    init, sse = DaskBackend.init_blocks, DaskBackend.sse

    def counting_init(self, *a, **k):
        calls["init"] += 1
        return init(self, *a, **k)

    def counting_sse(self, *a, **k):
        calls["sse"] += 1
        return sse(self, *a, **k)

    monkeypatch.setattr(DaskBackend, "init_blocks", counting_init)
    monkeypatch.setattr(DaskBackend, "sse", counting_sse)
    res = bayesian_id(z, K, client="synchronous", **KW)
    final = np.sort(res.draws_columns[0, -1])
    assert np.array_equal(final, np.sort(res.columns)), "pick a seed that ends on the best"
    assert calls == {"init": 1, "sse": 0}
    direct = np.sum((A - A[:, res.columns] @ res.components) ** 2)
    assert res.mse * A.size == pytest.approx(direct, rel=1e-10)
