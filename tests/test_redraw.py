"""The redraw swap's pieces (dask_bid/kernels/redraw.py) against direct computations.

Its exactness as a whole is tested against the exact posterior in
tests/test_exact_sampler.py (variants ``gbt-redraw``, ``gbtn-redraw``, the masked chain
with redraw swaps, and their planted bugs); the engine and sparse backends against the
in-memory chain in tests/test_engine_masked.py and tests/test_sparse.py.
"""

import numpy as np
import pytest

from dask_bid.interface._params import REDRAW_AUTO, REDRAW_AUTO_MAX_K, validate_params
from dask_bid.interface.functional import DEFAULTS
from dask_bid.kernels.block import (
    RedrawAttempt,
    StepContext,
    block_init,
    block_redraw_apply,
    block_redraw_score,
    block_set_mask_row,
)
from dask_bid.kernels.pivot import ghk_column
from dask_bid.kernels.priors import Priors
from dask_bid.kernels.redraw import _ghk_prepared, _prep, redraw_block
from dask_bid.kernels.rng import REDRAW, stream
from dask_bid.kernels.swap import masked_gram_rows, proposal_gram


@pytest.mark.parametrize("K", [1, 2, 5, 12])
def test_one_factorisation_gives_the_ghk_weight_and_draw_of_ghk_column(K):
    """``_prep`` + ``_ghk_prepared`` (one Cholesky factorisation and one triangular
    inverse) are the GHK weight and draw of :func:`ghk_column` (four factorisations):
    the same factor of Lambda^-1, so the same weights and, from one stream, the same
    draws, to rounding."""
    rng = np.random.default_rng(K)
    X = rng.standard_normal((30, K))
    G, h = X.T @ X, 3 * rng.standard_normal(K)
    mu, tau, s2 = 0.2 * rng.standard_normal(K), rng.uniform(0.5, 2, K), 0.7
    L, S = np.zeros((K, K)), np.zeros((K, K))
    ld = _prep(G, tau, s2, L, S)
    Lam = G / s2 + np.diag(tau)
    np.testing.assert_allclose(S, np.linalg.cholesky(np.linalg.inv(Lam)), rtol=1e-10,
                               atol=1e-12)
    assert ld == pytest.approx(np.linalg.slogdet(Lam)[1], rel=1e-12)
    w = rng.uniform(-1, 1, K)
    ref, _ = ghk_column(None, G, h, mu, tau, s2, -1.0, 1.0, w=w)
    got = _ghk_prepared(np.random.default_rng(0), L, S, ld, h, mu, tau, s2, -1.0, 1.0,
                        w.copy(), False, np.empty(K), np.empty(K))
    assert got == pytest.approx(ref, rel=1e-10, abs=1e-10)
    ref_lw, ref_w = ghk_column(np.random.default_rng(5), G, h, mu, tau, s2, -1.0, 1.0)
    w2 = np.empty(K)
    lw = _ghk_prepared(np.random.default_rng(5), L, S, ld, h, mu, tau, s2, -1.0, 1.0, w2,
                       True, np.empty(K), np.empty(K))
    np.testing.assert_allclose(w2, ref_w, rtol=1e-9, atol=1e-12)
    assert lw == pytest.approx(ref_lw, rel=1e-10, abs=1e-10)


def test_a_matrix_that_is_not_positive_definite_is_flagged():
    # tau = 0 and a singular Gram: no GHK proposal exists, the attempt is rejected
    G = np.array([[1.0, 1.0], [1.0, 1.0]])
    assert np.isnan(_prep(G, np.zeros(2), 1.0, np.zeros((2, 2)), np.zeros((2, 2))))


@pytest.fixture
def problem():
    rng = np.random.default_rng(3)
    M, N, K = 12, 9, 3
    A = rng.standard_normal((M, 3)) @ rng.uniform(-1, 1, (3, N)) \
        + 0.2 * rng.standard_normal((M, N))
    return A, K


def _direct(A, J, k, u, W, s2, pri, gen, mask=None, Mu=None, Tau=None):
    """The redraw swap's log ratio and W', column by column with ghk_column."""
    mask = np.ones(A.shape, bool) if mask is None else mask
    A0 = np.where(mask, A, 0.0)
    J2 = list(J)
    J2[k] = u
    total, W2 = 0.0, np.empty_like(W)
    for n in range(A.shape[1]):
        o = mask[:, n]
        C, C2 = A0[o][:, J], A0[o][:, J2]
        mu = pri.mu if Mu is None else Mu[:, n]
        tau = pri.tau if Tau is None else Tau[:, n]
        old, _ = ghk_column(None, C.T @ C, C.T @ A0[o, n], mu, tau, s2, pri.a, pri.b,
                            w=W[:, n])
        new, W2[:, n] = ghk_column(gen, C2.T @ C2, C2.T @ A0[o, n], mu, tau, s2, pri.a,
                                   pri.b)
        total += new - old
    return total, W2


@pytest.mark.parametrize("model", ["gbt", "gbtn"])
@pytest.mark.parametrize("masked", [False, True])
def test_redraw_block_is_the_sum_of_the_columns_ghk_weights(problem, model, masked):
    """Every column's GHK weight of its draw under J' minus that of its current value
    under J, each column with its own Gram over its observed rows when masked (here
    against ghk_column on the columns' own C[O_n]), and the same W'."""
    A, K = problem
    rng = np.random.default_rng(1)
    mask = rng.random(A.shape) > 0.25 if masked else np.ones(A.shape, bool)
    mask[:, 0] = True
    A0 = np.where(mask, A, 0.0)
    J, k, u, s2 = [0, 4, 7], 1, 2, 0.3
    pri = Priors(hierarchical=model == "gbtn")
    W = rng.uniform(-1, 1, (K, A.shape[1]))
    Mu = Tau = None
    if pri.hierarchical:
        Mu, Tau = 0.3 * rng.standard_normal(W.shape), rng.uniform(0.5, 2, W.shape)
    C = A0[:, J]
    G = C.T @ C
    G2 = proposal_gram(G, k, C.T @ A0[:, u], A0[:, u] @ A0[:, u])[0]
    Gn = q = None
    if masked:
        Gn = np.stack([C[mask[:, n]].T @ C[mask[:, n]] for n in range(A.shape[1])])
        X = masked_gram_rows(C, A0[:, [u]], mask.astype(float), k, pivot=True)[0]
        q = X[:-1].copy()
        q[k] = X[-1]
    tot, W2 = redraw_block(np.random.default_rng(9), G, G2, C.T @ A0, W, Mu, Tau, pri, k,
                           A0[:, u] @ A0, s2, Gn=Gn, q=q)
    ref, Wref = _direct(A, J, k, u, W, s2, pri, np.random.default_rng(9),
                        mask=mask if masked else None, Mu=Mu, Tau=Tau)
    assert tot == pytest.approx(ref, rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(W2, Wref, rtol=1e-8, atol=1e-10)
    assert np.all(np.abs(W2) <= 1.0)


def test_the_shared_factorisation_of_a_dense_gbt_block_changes_nothing(problem):
    """Dense GBT factorises J's and J''s matrices once for the block; the same prior
    given per column (the GBTN path, a factorisation per column) gives the same sum and
    the same W' to rounding."""
    A, K = problem
    J, k, u = [0, 4, 7], 2, 5
    pri = Priors()
    C = A[:, J]
    G = C.T @ C
    G2 = proposal_gram(G, k, C.T @ A[:, u], A[:, u] @ A[:, u])[0]
    W = np.random.default_rng(2).uniform(-1, 1, (K, A.shape[1]))
    args = (G, G2, C.T @ A, W)
    a, Wa = redraw_block(np.random.default_rng(4), *args, None, None, pri, k, A[:, u] @ A,
                         0.2)
    full = np.full(W.shape, 1.0)
    b, Wb = redraw_block(np.random.default_rng(4), *args, 0 * full, full, pri, k,
                         A[:, u] @ A, 0.2)
    assert a == pytest.approx(b, rel=1e-12)
    np.testing.assert_allclose(Wa, Wb, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("masked", [False, True])
def test_apply_installs_the_w_the_score_weighed(problem, masked):
    """The apply pass redraws W' from the attempt's own stream: bit for bit the W' whose
    weight the score pass returned; row k of H (and of every column's Gram) is u's."""
    A, K = problem
    nb = A.shape[1]
    mask = np.random.default_rng(0).random(A.shape) > 0.2 if masked else None
    A0 = A if mask is None else np.where(mask, A, 0.0)
    J, k, u = np.array([0, 4, 7]), 0, 3
    pri = Priors()
    C = A0[:, J]
    Gn = None
    if masked:
        Gn = np.stack([C[mask[:, n]].T @ C[mask[:, n]] for n in range(nb)])
    st = block_init(0, 0, nb, C.T @ A0, (A0 * A0).sum(0), pri, 5, 0, Gn=Gn)
    st = st._replace(cand_cols=(u,), cand_rows=(A0[:, u] @ A0)[None])
    G = C.T @ C
    att = RedrawAttempt(k=k, u=u,
                        G2=proposal_gram(G, k, C.T @ A0[:, u], A0[:, u] @ A0[:, u])[0],
                        sub=3, row=0)
    if masked:
        st = block_set_mask_row(st, masked_gram_rows(C, A0[:, [u]], mask.astype(float), k,
                                                     pivot=True))
    ctx = StepContext(entropy=5, chain=0, iteration=7, priors=pri, sigma2=0.4, G=G, J=J,
                      redraw=(att,))
    _, (tot,) = block_redraw_score(st, ctx)
    new, _ = block_redraw_apply(st, ctx)
    gen = stream(5, 0, 7, 0, REDRAW, 3)
    q = None
    if masked:
        X = st.mrow[0]
        q = X[:-1].copy()
        q[k] = X[-1]
    ref_tot, ref_W = redraw_block(gen, G, att.G2, st.H, st.W, None, None, pri, k,
                                  A0[:, u] @ A0, 0.4, Gn=Gn, q=q)
    assert tot == ref_tot
    np.testing.assert_array_equal(new.W, ref_W)
    np.testing.assert_array_equal(new.H[k], A0[:, u] @ A0)
    np.testing.assert_array_equal(np.delete(new.H, k, 0), np.delete(st.H, k, 0))
    if masked:
        J2 = J.copy()
        J2[k] = u
        C2 = A0[:, J2]
        for n in range(nb):
            o = mask[:, n]
            np.testing.assert_allclose(new.Gn[n], C2[o].T @ C2[o], rtol=1e-12)
        assert new.mrow is None


@pytest.mark.parametrize("missing,K,want", [
    ("mask", 3, REDRAW_AUTO), ("mask", REDRAW_AUTO_MAX_K, REDRAW_AUTO),
    ("mask", REDRAW_AUTO_MAX_K + 1, 0), ("zero", 3, 0)])
def test_auto_turns_the_redraw_swap_on_for_masked_fits_of_small_k(missing, K, want):
    p = validate_params({**DEFAULTS, "n_components": K, "missing": missing}, n_cols=40)
    assert p["n_redraw"] == want
    p = validate_params({**DEFAULTS, "n_components": K, "missing": missing, "n_redraw": 2},
                        n_cols=40)
    assert p["n_redraw"] == 2


def test_after_the_pivot_swap_the_redraw_swap_needs_no_pass_of_its_own(monkeypatch):
    """Masked: the pivot's pass over A also computes the redraw's candidates' products
    (the columns the redraw will draw if no pivot attempt is accepted), so the redraw
    makes a pass of its own only after an accepted pivot attempt changed the basis."""
    import dask_bid.engine.chain as chain_mod
    from dask_bid import bayesian_id

    calls = {}

    def counted(name, key):
        # block 0's calls of the block operation ``name``, under ``key``
        real = getattr(chain_mod, name)
        calls[key] = 0

        def wrapper(state, ctx):
            calls[key] += state.index == 0
            return real(state, ctx)

        monkeypatch.setattr(chain_mod, name, wrapper)
        return wrapper

    score = counted("block_redraw_score", "pass")
    counted("block_redraw_score_held", "held")
    counted("block_pivot_apply", "pivots")
    counted("block_redraw_apply", "redraws")
    # the registered function is what the masked backend keys its pass on
    import dask_bid.engine.memory as memory_mod

    monkeypatch.setitem(memory_mod.MASK_ROW_OPS, score, "pivot")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 4)) @ rng.uniform(-1, 1, (4, 20)) \
        + 0.3 * rng.standard_normal((30, 20))
    A[rng.random(A.shape) < 0.2] = np.nan
    # no warm-up: its rank rule can turn every pivot attempt down before any pass
    bayesian_id(A, 4, missing="mask", n_iter=30, burn_in=10, n_pivot=2, n_redraw=2,
                random_state=1, block_size=10, tempered_warmup=0)
    assert calls["held"] > 0
    # a pass only where an accepted swap (a pivot's, or an earlier redraw attempt's in
    # the same iteration) changed the basis since the pivot's pass
    assert calls["pass"] <= calls["pivots"] + calls["redraws"], calls
    assert calls["held"] + calls["pass"] >= 30  # every iteration made its redraw attempts
