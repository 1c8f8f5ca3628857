"""The pivot swap's pieces (dask_bid/kernels/pivot.py) against direct computations,
and the warm-up and random start of the exact sampler (engine/chain.py).

The pivot swap's exactness as a whole is tested against the exact posterior in
tests/test_exact_sampler.py (variants ``gbt-pivot``, ``gbtn-pivot``, the masked chain with
pivot swaps, and their planted bugs).
"""

import numpy as np
import pytest
from scipy import integrate, stats

from dask_bid.engine.chain import (
    ClientState,  # noqa: F401  (the state ``step`` advances)
    _in_span,
    _in_span_many,
    _pivot_geometry,
    initial_state,
    step,
)
from dask_bid.engine.memory import MemoryBackend
from dask_bid.engine.summary import chain_config
from dask_bid.interface._params import validate_params
from dask_bid.interface.functional import DEFAULTS
from dask_bid.kernels.pivot import ghk_column, pivot_block, pivot_block_masked
from dask_bid.kernels.priors import Priors
from dask_bid.kernels.swap import proposal_gram


def _log_marginal_row_k(A, C, w_rest, k, s2, mu, tau, a, b):
    """Per column: log of the integral over row k of the likelihood times the rows'
    priors (rows != k at ``w_rest``), by quadrature, up to terms equal for every basis."""
    K = C.shape[1]
    others = [i for i in range(K) if i != k]
    out = []
    for n in range(A.shape[1]):
        r = A[:, n] - C[:, others] @ w_rest[:, n]
        c = C[:, k]
        # integrand in w, scaled by its value at the unconstrained maximiser
        P = c @ c / s2 + tau
        m = (c @ r / s2 + tau * mu) / P
        f = lambda w, r=r, c=c, m=m: np.exp(  # noqa: E731
            -(r - c * w) @ (r - c * w) / (2 * s2) - tau * (w - mu) ** 2 / 2
            + (r - c * m) @ (r - c * m) / (2 * s2) + tau * (m - mu) ** 2 / 2)
        val, _ = integrate.quad(f, a, b, points=[min(max(m, a), b)], epsabs=0, epsrel=1e-12)
        base = -(r - c * m) @ (r - c * m) / (2 * s2) - tau * (m - mu) ** 2 / 2
        prior_rest = -0.5 * tau * np.sum((w_rest[:, n] - mu) ** 2)
        out.append(np.log(val) + base + prior_rest)
    return np.array(out)


@pytest.fixture
def problem():
    rng = np.random.default_rng(3)
    M, N, K = 12, 9, 3
    A = rng.standard_normal((M, 3)) @ rng.uniform(-1, 1, (3, N)) + 0.2 * rng.standard_normal((M, N))
    return A, K


@pytest.mark.parametrize("forward", [True, False])
def test_pivot_block_is_the_difference_of_integrated_marginals(problem, forward):
    """The kernel's O(K)-per-column algebra equals the difference of the log marginals
    (row k integrated by quadrature) at the mapped and the current W_{-k}."""
    A, K = problem
    rng = np.random.default_rng(0)
    J = np.array([0, 2, 5])
    k, u = 1, 7
    p = int(J[k])
    if not forward:  # the current basis holds the larger index in slot k
        J = np.array([0, 7, 5])
        p, u = 7, 2
    C = A[:, J]
    G, H = C.T @ C, C.T @ A
    W = np.clip(np.linalg.lstsq(C, A, rcond=None)[0], -1, 1) * 0.6
    W += 0.05 * rng.standard_normal(W.shape)
    gcol, squ = C.T @ A[:, u], float(A[:, u] @ A[:, u])
    gnew, G2, fwd, d, gs, ss, logdet = _pivot_geometry(G, k, gcol, squ, p, u)
    assert fwd == forward
    hs = H[k] if forward else A[:, u] @ A
    crow = A[:, u] @ A
    skip = np.zeros(A.shape[1], bool)
    skip[[p, u]] = True
    pri = Priors(a=-3.0, b=3.0)  # a box the map stays in, so that every term is finite
    s2 = 0.3
    total, Wm, h = pivot_block(G, H, W, None, None, pri, k, d, gs, ss, hs, forward, gnew,
                               crow, squ, s2, skip, write=True)
    assert np.isfinite(total)  # the mapped W stays in the box here
    others = [i for i in range(K) if i != k]
    J2 = J.copy()
    J2[k] = u
    keep = ~skip
    before = _log_marginal_row_k(A[:, keep], C, W[others][:, keep], k, s2, 0.0, 1.0, -3, 3)
    after = _log_marginal_row_k(A[:, keep], A[:, J2], Wm[others][:, keep], k, s2, 0.0, 1.0,
                                -3, 3)
    np.testing.assert_allclose(total, (after - before).sum(), rtol=1e-9, atol=1e-8)
    # the map is the documented one: w' = w +- d m(w)
    m = (hs - gs @ np.where(np.arange(K)[:, None] == k, 0.0, W)) / (ss if forward else
                                                                   ss - gs @ d)
    expect = W[others] + (1 if forward else -1) * np.outer(d[others], m)
    np.testing.assert_allclose(Wm[others][:, keep], expect[:, keep], rtol=1e-12)


def test_pivot_map_and_its_inverse_are_each_others_inverse(problem):
    """Source -> target from J, then target -> source from J' (the reverse move's map)
    returns W_{-k}: the move is an involution on its pair of bases."""
    A, K = problem
    pri = Priors(a=-5.0, b=5.0)  # wide box: no rejection
    J, k, u = np.array([0, 2, 5]), 1, 7
    C = A[:, J]
    G, H = C.T @ C, C.T @ A
    W = np.random.default_rng(1).uniform(-1, 1, (K, A.shape[1]))
    skip = np.zeros(A.shape[1], bool)
    gcol, squ = C.T @ A[:, u], float(A[:, u] @ A[:, u])
    gnew, G2, fwd, d, gs, ss, _ = _pivot_geometry(G, k, gcol, squ, 2, u)
    crow = A[:, u] @ A
    _, W1, _ = pivot_block(G, H, W, None, None, pri, k, d, gs, ss, H[k], fwd, gnew, crow,
                           squ, 1.0, skip, write=True)
    J2 = J.copy()
    J2[k] = u
    C2 = A[:, J2]
    G2b, H2 = C2.T @ C2, C2.T @ A
    gcol2, squ2 = C2.T @ A[:, 2], float(A[:, 2] @ A[:, 2])
    gnew2, _, fwd2, d2, gs2, ss2, _ = _pivot_geometry(G2b, k, gcol2, squ2, u, 2)
    assert not fwd2
    np.testing.assert_allclose(d2, d, rtol=1e-10, atol=1e-12)
    _, W0, _ = pivot_block(G2b, H2, W1, None, None, pri, k, d2, gs2, ss2, A[:, 2] @ A,
                           fwd2, gnew2, A[:, 2] @ A, squ2, 1.0, skip, write=True)
    others = [i for i in range(K) if i != k]
    np.testing.assert_allclose(W0[others], W[others], rtol=1e-10, atol=1e-12)


def test_pivot_block_rejects_a_map_out_of_the_box(problem):
    A, K = problem
    pri = Priors()
    J, k, u = np.array([0, 2, 5]), 1, 7
    C = A[:, J]
    G, H = C.T @ C, C.T @ A
    W = np.full((K, A.shape[1]), 0.999)
    gcol, squ = C.T @ A[:, u], float(A[:, u] @ A[:, u])
    gnew, _, fwd, d, gs, ss, _ = _pivot_geometry(G, k, gcol, squ, 2, u)
    d = d + np.sign(d) + 1.0  # push every mapped entry out of [-1, 1]
    d[k] = 0.0
    total = pivot_block(G, H, W, None, None, pri, k, d, gs, ss, H[k], fwd, gnew,
                        A[:, u] @ A, squ, 1.0, np.zeros(A.shape[1], bool))
    assert total == -np.inf


def _masked_products(A0, mask, J, u):
    """Per column n over its observed rows: Gram of C = A0[:, J] (nb, K, K) and, for the
    current basis, C^T a_u then ||a_u||^2 (K + 1, nb): what a masked block holds."""
    Mf = mask.astype(float)
    C = A0[:, J]
    Gn = np.einsum("mi,mj,mn->nij", C, C, Mf)
    au = A0[:, u]
    X = np.vstack([(C * au[:, None]).T @ Mf, (au * au) @ Mf])
    return Gn, X


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("model", ["gbt", "gbtn"])
def test_masked_pivot_block_is_the_dense_move_column_by_column(problem, forward, model):
    """missing="mask": every column's term, map and Jacobian are those of the dense move
    on that column's observed rows alone (C's missing entries as 0), so the masked block
    equals the sum of one-column dense moves, each with its own geometry; and with every
    entry observed it is the dense move itself, its Jacobian (N - 2) log|det|."""
    A, K = problem
    M, N = A.shape
    rng = np.random.default_rng(4)
    mask = rng.random((M, N)) > 0.3
    # basis column 0 unobserved wherever column 4 is observed: column 4's Gram is
    # singular, and its map takes the pseudo-inverse (the dense move's) instead of Cholesky
    mask[mask[:, 4], 0] = False
    J = np.array([0, 2, 5]) if forward else np.array([0, 7, 5])
    k = 1
    p, u = (2, 7) if forward else (7, 2)
    W = np.clip(rng.uniform(-0.6, 0.6, (K, N)), -1, 1)
    Mu = Tau = None
    pri = Priors(a=-20.0, b=20.0)  # wide: no column's map leaves it
    if model == "gbtn":
        Mu, Tau = rng.normal(0, 0.2, (K, N)), rng.uniform(0.5, 2.0, (K, N))
    skip = np.zeros(N, bool)
    skip[[p, u]] = True
    s2 = 0.3
    for mk in (mask, np.ones_like(mask)):
        A0 = np.where(mk, A, 0.0)
        Gn, X = _masked_products(A0, mk, J, u)
        assert mk.all() or np.linalg.matrix_rank(Gn[4]) < K
        H = A0[:, J].T @ A0
        crow = A0[:, u] @ A0
        tot, logdet, Wm, h, g = pivot_block_masked(Gn, H, W, Mu, Tau, pri, k, X, crow,
                                                   forward, s2, skip, write=True)
        assert np.isfinite(tot)
        want_tot = want_det = 0.0
        for n in np.flatnonzero(~skip):
            rows = mk[:, n]
            An = A0[rows]  # the column's observed rows, C's missing entries as 0
            C = An[:, J]
            G = C.T @ C
            gcol, squ = C.T @ An[:, u], float(An[:, u] @ An[:, u])
            gm = _pivot_geometry(G, k, gcol, squ, p, u)
            if gm is None:
                # a_s is 0 on this column's observed rows (column 0 has one, where a_p is
                # unobserved): the identity map, det 1
                assert (G[k, k] if forward else squ) == 0.0
                gm = (proposal_gram(G, k, gcol, squ)[1], None, forward, np.zeros(K),
                      np.zeros(K), 1.0, 0.0)
            gnew, _, fwd, d, gs, ss, ld = gm
            assert fwd == forward
            hs = (C.T @ An[:, n])[k] if forward else An[:, u] @ An[:, n]
            t, Wn, hn = pivot_block(G, (C.T @ An[:, n])[:, None], W[:, [n]],
                                    None if Mu is None else Mu[:, [n]],
                                    None if Tau is None else Tau[:, [n]], pri, k, d, gs, ss,
                                    np.array([hs]), forward, gnew,
                                    np.array([An[:, u] @ An[:, n]]), squ, s2,
                                    np.zeros(1, bool), write=True)
            want_tot += t
            want_det += ld if forward else -ld
            np.testing.assert_allclose(Wm[:, n], Wn[:, 0], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(h[n], hn[0], rtol=1e-10, atol=1e-10)
            assert g[n] == pytest.approx(squ, rel=1e-12)
        np.testing.assert_allclose(tot, want_tot, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(logdet, want_det, rtol=1e-9, atol=1e-9)
    # all observed: the dense move, with one Jacobian for the N - 2 mapped columns
    C = A[:, J]
    G = C.T @ C
    gnew, _, _, d, gs, ss, ld = _pivot_geometry(G, k, C.T @ A[:, u], float(A[:, u] @ A[:, u]),
                                                p, u)
    dense = pivot_block(G, C.T @ A, W, Mu, Tau, pri, k, d, gs, ss,
                        (C.T @ A)[k] if forward else A[:, u] @ A, forward, gnew, A[:, u] @ A,
                        float(A[:, u] @ A[:, u]), s2, skip)
    np.testing.assert_allclose(tot, dense, rtol=1e-9)
    np.testing.assert_allclose(logdet, (N - 2) * (ld if forward else -ld), rtol=1e-9)


def test_masked_pivot_leaves_a_column_alone_where_the_source_is_unobserved(problem):
    """Where the source column a_s is 0 on a column's observed rows, it explains nothing
    there: that column's map is the identity (det 1), from either end."""
    A, K = problem
    M, N = A.shape
    mask = np.ones((M, N), bool)
    J, k, p, u = np.array([0, 2, 5]), 1, 2, 7
    mask[:, 3] = False
    mask[:4, 3] = True
    A0 = np.where(mask, A, 0.0)
    A0[:4, p] = 0.0  # a_p (the source) is 0 where column 3 is observed
    Gn, X = _masked_products(A0, mask, J, u)
    W = np.random.default_rng(2).uniform(-0.5, 0.5, (K, N))
    skip = np.zeros(N, bool)
    skip[[p, u]] = True
    tot, logdet, Wm, _, _ = pivot_block_masked(Gn, A0[:, J].T @ A0, W, None, None,
                                               Priors(a=-3.0, b=3.0), k, X, A0[:, u] @ A0,
                                               True, 0.5, skip, write=True)
    assert np.isfinite(tot) and np.isfinite(logdet)
    np.testing.assert_array_equal(Wm[[0, 2], 3], W[[0, 2], 3])
    assert not np.allclose(Wm[[0, 2]][:, ~skip], W[[0, 2]][:, ~skip])  # the others moved


@pytest.mark.parametrize("K", [1, 3])
def test_ghk_weight_is_log_target_minus_log_proposal(K):
    """log w(x) = log target(x) - log q(x) for the drawn x: the target's log density is
    computed directly, q's as the product of the truncated conditionals' densities
    (scipy). For K = 1 the weight is the exact log integral over [a, b] (quadrature)."""
    rng = np.random.default_rng(K)
    C = rng.standard_normal((8, K))
    a_n = C @ rng.uniform(-0.8, 0.8, K) + 0.3 * rng.standard_normal(8)
    G, h = C.T @ C, C.T @ a_n
    s2, mu, tau, lo, hi = 0.5, 0.1, 2.0, -1.0, 1.0
    lw, x = ghk_column(np.random.default_rng(5), G, h, mu, tau, s2, lo, hi)
    assert np.all((x >= lo) & (x <= hi))
    log_target = (h @ x / s2 - x @ G @ x / (2 * s2) - tau * np.sum((x - mu) ** 2) / 2
                  + K * tau * mu ** 2 / 2)
    Lam = G / s2 + tau * np.eye(K)
    m = np.linalg.solve(Lam, h / s2 + tau * mu)
    L = np.linalg.cholesky(np.linalg.inv(Lam))
    eta = np.zeros(K)
    log_q = 0.0
    for i in range(K):
        base = m[i] + L[i, :i] @ eta[:i]
        s = L[i, i]
        log_q += stats.truncnorm.logpdf(x[i], (lo - base) / s, (hi - base) / s, base, s)
        eta[i] = (x[i] - base) / s
    np.testing.assert_allclose(lw, log_target - log_q, rtol=1e-10)
    # evaluating at a given point gives the same weight
    lw2, x2 = ghk_column(None, G, h, mu, tau, s2, lo, hi, w=x)
    np.testing.assert_allclose(lw2, lw, rtol=1e-12)
    if K == 1:
        f = lambda w: np.exp(h[0] * w / s2 - G[0, 0] * w * w / (2 * s2)  # noqa: E731
                             - tau * (w - mu) ** 2 / 2 + tau * mu ** 2 / 2)
        val, _ = integrate.quad(f, lo, hi, epsabs=0, epsrel=1e-12)
        np.testing.assert_allclose(lw, np.log(val), rtol=1e-10)


def _duplicated(seed=0, M=30, n=8):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((M, 4)) @ rng.standard_normal((4, n)) + 0.1 * rng.standard_normal(
        (M, n))
    return np.concatenate([X, X], axis=1)  # the paper's preprocessing: every column twice


def _cfg(A, **kw):
    p = validate_params({**DEFAULTS, "n_components": 4, "init": "random", "n_iter": 40,
                         "burn_in": 20, **kw}, n_cols=A.shape[1])
    return chain_config(p, A.shape[1])


def _full_rank(G):
    return not any(_in_span(G, k, G[:, k], G[k, k]) for k in range(G.shape[0]))


def test_ghk_weight_is_nan_where_lambda_is_not_positive_definite_in_floating_point():
    # G / sigma^2 = 1e20 on a rank-1 Gram: 1e20 + tau rounds to 1e20 and Lambda is
    # singular in floating point; the weight is NaN (the move's ratio NaN: rejected)
    # instead of numpy's LinAlgError out of the chain, evaluated or drawn
    G = np.full((2, 2), 1e20)
    logw, _ = ghk_column(None, G, np.ones(2), 0.0, 1.0, 1.0, -1.0, 1.0, w=np.zeros(2))
    assert np.isnan(logw)
    assert np.isnan(ghk_column(np.random.default_rng(0), G, np.ones(2), 0.0, 1.0, 1.0, -1.0,
                               1.0)[0])
    # at a scale where the prior's curvature survives, a finite weight
    assert np.isfinite(ghk_column(None, G * 1e-18, np.ones(2), 0.0, 1.0, 1.0, -1.0, 1.0,
                                  w=np.zeros(2))[0])


def test_random_start_of_the_exact_sampler_is_full_rank():
    """On a matrix with every column twice, a uniformly random basis of 4 out of 16 holds
    a copy pair with probability 0.37: the exact sampler redraws it, the paper's chain
    (bit for bit) does not."""
    A = _duplicated()
    n_deficient = {"collapsed": 0, "aggressive": 0}
    for sampler in n_deficient:
        cfg = _cfg(A, sampler=sampler)
        for seed in range(12):
            be = MemoryBackend(A, n_threads=1)
            st = initial_state(be, cfg, seed, 0)[0]
            n_deficient[sampler] += not _full_rank(st.G)
    assert n_deficient["collapsed"] == 0
    assert n_deficient["aggressive"] > 0  # the paper's random start is left as it was


def test_the_span_test_of_many_columns_is_the_one_column_test():
    """The collapsed move tests all its candidates with one pseudo-inverse: the same
    answer, and the same floats, as one test per column."""
    A = _duplicated()
    J = np.array([0, 3, 5, 9])
    G = A[:, J].T @ A[:, J]
    cols = [(A[:, J].T @ A[:, u], float(A[:, u] @ A[:, u])) for u in range(A.shape[1])]
    for k in range(len(J)):
        many = _in_span_many(G, k, cols)
        assert many == [_in_span(G, k, c, sq) for c, sq in cols]
        assert sum(many) >= 3  # the copies of the other three basis columns


def test_tempered_warmup_never_enters_a_rank_deficient_basis():
    """Through the real ``step``: while the warm-up runs, every basis the chain is in is
    of full rank, although at its temperatures copies would be swapped in freely."""
    A = _duplicated(1)
    cfg = _cfg(A, tempered_warmup=20, warmup_temperature=1e4)
    assert cfg.tempered_warmup == 20 and cfg.n_pivot == 8
    be = MemoryBackend(A, n_threads=1)
    st = initial_state(be, cfg, 7, 0)[0]
    norm_a2 = float((A * A).sum())
    moved = 0
    for _ in range(cfg.tempered_warmup):
        J = st.J.copy()
        step(be, cfg, 7, 0, st, norm_a2, A.size)
        moved += not np.array_equal(np.sort(J), np.sort(st.J))
        assert _full_rank(st.G), st.J
    assert moved >= 5  # the warm-up does move


def test_tempered_warmup_changes_only_the_burn_in():
    """The temperature is 1 from ``tempered_warmup`` on (the retained chain is the exact
    sampler) and falls geometrically before."""
    from dask_bid.engine.chain import warmup_temperature_at

    A = _duplicated()
    cfg = _cfg(A, tempered_warmup=10, warmup_temperature=100.0)
    temps = [warmup_temperature_at(cfg, t) for t in range(15)]
    assert temps[0] == pytest.approx(100.0)
    assert temps[5] == pytest.approx(10.0)
    assert temps[10:] == [1.0] * 5
    assert all(x > y for x, y in zip(temps[:10], temps[1:11], strict=True))


@pytest.mark.parametrize("model,n_redraw", [("gbt", 0), ("gbtn", 0), ("gbt", 2)])
def test_peeked_columns_save_round_trips_and_change_nothing(monkeypatch, model, n_redraw):
    """The collapsed sampler's moves return the columns the next move needs (the next
    iteration's pivot attempts with the sweep, the redraw and collapsed candidates with
    the pivot scores): the chain is bitwise the chain that fetches them, with fewer
    fetches."""
    from _support import assert_same_chain

    from dask_bid.engine import chain as chain_mod
    from dask_bid.engine.dask_backend import DaskBackend
    from dask_bid.interface import bayesian_id

    A = np.random.default_rng(3).standard_normal((30, 40))  # noise: the basis moves often
    fetches = []
    real = DaskBackend.columns

    def counted(self, cols, proposal=False):
        fetches[-1] += 1
        return real(self, cols, proposal)

    monkeypatch.setattr(DaskBackend, "columns", counted)
    kw = dict(model=model, n_iter=40, burn_in=10, init="random", random_state=2,
              block_size=10, client="synchronous", n_redraw=n_redraw)
    runs = {}
    for peek in (False, True):
        monkeypatch.setattr(chain_mod, "PEEK_COLUMNS", peek)
        fetches.append(0)
        runs[peek] = bayesian_id(A, 4, **kw)
    assert_same_chain(runs[False], runs[True])
    # two fetches an iteration without peeking (the pivot's and the collapsed swap's; and
    # the redraw swap's); with it, only where an accepted swap or an annealed move spoils
    # the peek
    assert fetches[0] >= (3 if n_redraw else 2) * 40 - 5
    assert fetches[1] <= fetches[0] / 2, fetches
    # the same on the in-memory backend, whose moves share the code
    mem = {}
    for peek in (False, True):
        monkeypatch.setattr(chain_mod, "PEEK_COLUMNS", peek)
        mem[peek] = bayesian_id(A, 4, **{k: v for k, v in kw.items() if k != "client"})
    assert_same_chain(mem[False], mem[True])
