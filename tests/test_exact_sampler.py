"""The real chain against exact posteriors of tiny problems.

M = 6, N = 5, K = 2: p(J | A) for every basis and the marginal CDF of sigma^2 are
computed by quadrature over W and sigma^2 (``tests/_exact.py``, numpy and scipy only).
The chains run through ``run_chain`` with the package's backends; their visit
frequencies, the share of draws below exact sigma^2 quantiles and the share of draws
with a given basis and a positive W entry are compared with the exact values by
z-scores whose standard errors come from batch means (40 batches of the autocorrelated
chain). The family of 45 statistics is tested at |z| <= 4.5: under a correct sampler
P(|z| > 4.5) is about 6e-5 per statistic even with the t(39) tails of batch means, so
about 3e-3 for the family, while each planted bug below moves at least one statistic
beyond it.

Planted bugs, each caught directly (``test_planted_bug_is_caught``):
- ``barker_flip``: the collapsed move's log weights enter the choice with the wrong
  sign relative to the current column;
- ``no_logdet``: the -log(P)/2 normaliser of the integrated row is dropped;
- ``prior_row``: the incoming row is drawn from its prior instead of its conditional
  while the ratio still integrates it out (seen in the signs of W);
- ``sigma2_shape``: sigma^2's inverse-gamma shape is off by K N / 2 (what W integrated
  out of the likelihood would wrongly suggest).

The candidate pool (``candidate_pool``: every move proposes among a pool S holding J,
redrawn given J) has its own variants and bugs: ``pool_never_redrawn`` (S kept from the
start: the chain cannot reach a basis outside it) and ``pool_not_uniform`` (S's other
columns drawn with weights growing with their index instead of uniformly given J: an
irreducible chain whose target is no longer p(J | A)).

The masked pivot swap (missing="mask": every column its own map and Jacobian) has three:
``no_jacobian`` (the blocks' sum of log|det_n| dropped), ``shared_gram`` (every column's
map and terms from the Gram over all rows) and ``no_ghk_weight``.

The redraw swap (every column of W drawn afresh under the new basis) has
``no_reverse_weight`` (the current columns' GHK weights left out of the ratio),
``stale_h`` (the new columns' right-hand sides keep the outgoing column's row) and, masked,
``shared_gram`` (every column's proposal from the all-rows Gram).
"""

import numpy as np
import pytest
from _exact import posterior_tables

import dask_bid.engine.chain as chain_mod
import dask_bid.kernels.block as block_mod
from dask_bid.engine.chain import run_chain
from dask_bid.engine.memory import MaskedMemoryBackend, MemoryBackend
from dask_bid.engine.summary import chain_config
from dask_bid.interface._params import validate_params
from dask_bid.interface.functional import DEFAULTS
from dask_bid.kernels import collapsed as collapsed_mod
from dask_bid.kernels import stats as stats_mod

M, N, K = 6, 5, 2
Z_MAX = 4.5
N_BATCHES = 40


@pytest.fixture(scope="module")
def A():
    # a noisy rank-2 matrix whose basis posterior is spread over several subsets
    rng = np.random.default_rng(6)
    C0 = rng.standard_normal((M, 2))
    return C0 @ rng.uniform(-1, 1, (2, N)) + 0.5 * rng.standard_normal((M, N))


@pytest.fixture(scope="module")
def A_corr():
    # two correlated planted columns: W's rows are strongly dependent given the basis,
    # so a wrongly drawn incoming row is not washed out by the sweep that follows
    rng = np.random.default_rng(1)
    c = rng.standard_normal(M)
    C0 = np.stack([c, c + 0.3 * rng.standard_normal(M)], axis=1)
    return C0 @ rng.uniform(-1, 1, (2, N)) + 0.3 * rng.standard_normal((M, N))


def params(**kw):
    # the collapsed and annealed moves are tested on their own (n_pivot=0) and the pivot
    # swap in its own variants, so that each bug is caught by the move it is in
    p = {**DEFAULTS, "n_components": K, "n_iter": 8000, "burn_in": 0, "thin": 1,
         "point_estimate": "mode", "init": "random", "n_pivot": 0, "n_redraw": 0, **kw}
    return validate_params(p, n_cols=N)


_TABLES = {}


def exact(A, priors, mask=None):
    key = (A.tobytes(), priors.hierarchical, None if mask is None else mask.tobytes())
    if key not in _TABLES:
        _TABLES[key] = posterior_tables(A, K, priors, mask=mask)
    return _TABLES[key]


def run(A, p, seed=11, backend=None):
    """The real chain; returns its retained (J, sigma^2, W) draws, W rows in sorted J
    order (every column traced)."""
    cfg = chain_config(p, N)
    be = backend or MemoryBackend(A, n_threads=1, trace_cols=range(N))
    out = run_chain(be, cfg, seed, 0)
    blocks = be.traces()
    W = np.concatenate([np.stack([w for _, w in blk]) for blk in blocks], axis=2)
    return np.asarray(out.state.draws_J), np.asarray(out.state.draws_sigma2), W


def z_scores(A, p, draws_J, draws_s2, draws_W, mask=None):
    """Batch-means z-scores of the subset frequencies, of P(sigma^2 <= q) at exact
    quantiles q, and of P(J, w_kn > 0) for the three most probable subsets."""
    tab = exact(A, p["priors"], mask)
    stats, target = [], []
    for J, prob in tab["subsets"].items():
        stats.append(np.all(draws_J == np.array(J), axis=1).astype(float))
        target.append(prob)
    for J in sorted(tab["subsets"], key=tab["subsets"].get)[-3:]:
        inJ = np.all(draws_J == np.array(J), axis=1)
        for k in range(K):
            for n in range(N):
                stats.append((inJ & (draws_W[:, k, n] > 0)).astype(float))
                target.append(tab["positive"][J][k, n])
    for q, level in zip(tab["sigma2_quantiles"], tab["levels"], strict=True):
        stats.append((draws_s2 <= q).astype(float))
        target.append(level)
    X = np.stack(stats)  # (S, n)
    n = X.shape[1] // N_BATCHES * N_BATCHES
    B = X[:, :n].reshape(len(stats), N_BATCHES, -1).mean(axis=2)
    mean = X[:, :n].mean(axis=1)
    se = B.std(axis=1, ddof=1) / np.sqrt(N_BATCHES)
    target = np.asarray(target)
    # batch means can underestimate the error of a rare event (no batch saw it); the
    # error of n independent draws is a lower bound for a positively correlated chain
    floor = np.sqrt(target * (1 - target) / n)
    return (mean - target) / np.maximum(se, floor), mean, target


VARIANTS = {
    "gbt-barker-1": dict(model="gbt", n_tries=1, acceptance="barker"),
    "gbt-metropolis-3": dict(model="gbt", n_tries=3, acceptance="metropolis"),
    "gbt-all": dict(model="gbt", n_tries="all", acceptance="barker"),
    "gbtn-metropolis-1": dict(model="gbtn", n_tries=1, acceptance="metropolis"),
    "gbt-annealed": dict(model="gbt", n_tries=1, n_anneal=3, anneal_every=2),
    "gbtn-annealed": dict(model="gbtn", n_tries=2, n_anneal=2, anneal_every=3),
    "gbt-pivot": dict(model="gbt", n_tries=1, n_pivot=4, n_anneal=0, n_iter=3000),
    "gbtn-pivot": dict(model="gbtn", n_tries=1, n_pivot=4, n_anneal=0, n_iter=3000),
    # the pool: 3 or 4 of the 5 columns, J included, redrawn every few iterations
    "gbt-pool-barker": dict(model="gbt", n_tries=1, acceptance="barker", candidate_pool=3,
                            pool_every=3, n_iter=4000),
    "gbtn-pool-annealed": dict(model="gbtn", n_tries=2, n_anneal=2, anneal_every=3,
                               candidate_pool=4, pool_every=4, n_iter=4000),
    "gbt-pool-pivot": dict(model="gbt", n_tries=1, n_pivot=4, n_anneal=0, n_iter=3000,
                           candidate_pool=3, pool_every=2),
    # every column of W redrawn under the new basis (kernels/redraw.py; GBTN's path, a
    # factorisation per column, is the masked variants')
    "gbt-redraw": dict(model="gbt", n_tries=1, n_redraw=2, n_anneal=0, n_iter=3000),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_collapsed_chain_matches_the_exact_posterior(A, name):
    p = params(**VARIANTS[name])
    dJ, ds2, dW = run(A, p)
    z, mean, target = z_scores(A, p, dJ, ds2, dW)
    assert np.abs(z).max() <= Z_MAX, (np.round(z, 2), np.round(mean, 3), np.round(target, 3))


def run_masked(A, p):
    """``run`` with missing="mask": three entries of A unobserved (one in each of three
    columns); returns the draws and the exact tables' (A0, mask)."""
    mask = np.ones(A.shape, dtype=bool)
    mask[[0, 3, 5], [1, 2, 4]] = False
    A0 = np.where(mask, A, 0.0)
    be = MaskedMemoryBackend(A0, mask, n_threads=1, trace_cols=range(N))
    return run(A0, p, backend=be), A0, mask


MASKED_VARIANTS = {
    "gbtn-annealed": dict(model="gbtn", n_tries=2, n_anneal=2, anneal_every=3, n_iter=5000),
    # each column its own map and Jacobian (kernels/pivot.py, pivot_block_masked)
    "gbt-pivot": dict(model="gbt", n_tries=1, n_pivot=4, n_anneal=0, n_iter=3000),
    "gbtn-pivot": dict(model="gbtn", n_tries=1, n_pivot=4, n_anneal=0, n_iter=3000),
    # every column's proposal from its own Gram (kernels/redraw.py)
    "gbtn-redraw": dict(model="gbtn", n_tries=1, n_redraw=2, n_anneal=0, n_iter=3000),
    # with pivot swaps: the redraw reads the products the pivot's pass computed for it
    "gbt-pivot-redraw": dict(model="gbt", n_tries=1, n_pivot=2, n_redraw=2, n_anneal=0,
                             n_iter=3000),
}


@pytest.mark.parametrize("name", list(MASKED_VARIANTS))
def test_masked_chain_matches_the_exact_posterior(A, name):
    """missing="mask": the likelihood over the observed entries only (per-column Grams),
    with the same exact tables computed over the observed entries."""
    p = params(missing="mask", **MASKED_VARIANTS[name])
    (dJ, ds2, dW), A0, mask = run_masked(A, p)
    z, mean, target = z_scores(A0, p, dJ, ds2, dW, mask=mask)
    assert np.abs(z).max() <= Z_MAX, (np.round(z, 2), np.round(mean, 3), np.round(target, 3))


@pytest.mark.parametrize("model,pool", [("gbt", "auto"), ("gbtn", "auto"), ("gbt", 4)])
def test_dask_backend_runs_the_same_exact_chain(A, model, pool, monkeypatch):
    """Through the Dask engine (DaskBackend, synchronous scheduler) the collapsed chain,
    annealed, pivot and redraw swaps included, is bitwise the in-memory chain with the
    same block layout, so the exactness shown above holds for it draw for draw."""
    from _support import count_pivots

    from dask_bid import bayesian_id

    redraws = count_pivots(monkeypatch, "redraw")
    kw = dict(model=model, n_iter=60, burn_in=0, init="random", random_state=3,
              point_estimate="mode", block_size=N, n_threads=1, n_tries=2, n_anneal=2,
              anneal_every=2, n_pivot=2, n_redraw=2, candidate_pool=pool, pool_every=7)
    engine = bayesian_id(A, K, client="synchronous", **kw)
    memory = bayesian_id(A, K, **kw)
    assert engine.trace["accepted"].any()
    assert redraws, "no redraw swap accepted: the comparison would not cover them"
    np.testing.assert_array_equal(engine.draws_columns, memory.draws_columns)
    np.testing.assert_array_equal(engine.draws_sigma2, memory.draws_sigma2)
    np.testing.assert_array_equal(engine.trace["mse"], memory.trace["mse"])


@pytest.mark.parametrize("bounds", [(-0.5, 2.0), (-1.0, 1.0)])
def test_exact_tables_converge_whatever_the_bounds(A, bounds):
    """The tables' P(J, w > 0): 60 and 120 nodes agree to 1e-6. One Gauss-Legendre rule
    over [a, b] left the step at 0 inside a panel: over (-0.5, 2) off by about a node's
    width (0.2264 for 0.2425), which failed a correct chain at |z| 4.5-7, and over
    (-1, 1) by ~4e-4 (found by audits, tests/_exact.py)."""
    from dask_bid.kernels.priors import Priors

    priors = Priors(a=bounds[0], b=bounds[1])
    fine = posterior_tables(A, K, priors, n_quad=120, n_sigma=200)
    coarse = posterior_tables(A, K, priors, n_quad=60, n_sigma=200)
    for J in fine["subsets"]:
        np.testing.assert_allclose(coarse["positive"][J], fine["positive"][J], atol=1e-6)
    if bounds == (-0.5, 2.0):
        assert abs(fine["positive"][(0, 2)][0, 1] - 0.24254) < 1e-4


def test_the_search_is_not_the_posterior(A):
    """The least-squares search (``sampler="search"``) targets a profile likelihood: its
    visit frequencies are far from p(J | A), which is why it is not a sampler option."""
    p = params(sampler="search", n_iter=2000)
    dJ, ds2, dW = run(A, p)
    z, mean, target = z_scores(A, p, dJ, ds2, dW)
    tv = 0.5 * np.abs(mean[:10] - target[:10]).sum()
    # measured at this length: the search 0.317 (0.295 at 6,000 iterations), the exact
    # variants gbt-barker-1 and gbt-all 0.076 and 0.030
    assert tv > 0.15, (tv, np.round(mean[:10], 3), np.round(target[:10], 3))


def _planted(monkeypatch, bug):
    if bug == "barker_flip":
        real = chain_mod.choose_among

        def flipped(gen, L, rule="barker"):
            L = np.asarray(L)
            return real(gen, np.concatenate([L[:1], 2 * L[0] - L[1:]]), rule)

        monkeypatch.setattr(chain_mod, "choose_among", flipped)
    elif bug == "no_logdet":
        real = collapsed_mod._marginal.py_func

        def no_logdet(g, h, mu, tau, inv_s2, a, b):
            return real(g, h, mu, tau, inv_s2, a, b) + 0.5 * np.log(g * inv_s2 + tau).sum()

        def slot_marginal(g, h, mu, tau, sigma2, a, b):
            h = np.asarray(h, dtype=float)
            f = collapsed_mod._f64
            return float(no_logdet(f(g, h.size), h, f(mu, h.size), f(tau, h.size),
                                   1.0 / sigma2, a, b))

        monkeypatch.setattr(block_mod, "slot_marginal", slot_marginal)
    elif bug == "prior_row":
        def prior_row(gen, g, h, mu, tau, sigma2, a, b):
            h = np.asarray(h, dtype=float)
            return collapsed_mod.draw_slot_row(gen, 0.0, np.zeros_like(h), mu, tau, 1.0, a, b)

        monkeypatch.setattr(block_mod, "draw_slot_row", prior_row)
    elif bug == "sigma2_shape":
        real = stats_mod.draw_sigma2

        def shifted(gen, sse, n_obs, alpha, beta):
            return real(gen, sse, n_obs - K * N, alpha, beta)

        monkeypatch.setattr(chain_mod, "draw_sigma2", shifted)


PLANTED_RUN = dict(model="gbt", n_tries="all", acceptance="barker", n_iter=6000)


def test_draw_sigma2_shape_matters():
    """The planted sigma^2 bug changes the draw by more than the tests' resolution (a
    guard that the bug above is a real change): with MN = 30 the shape falls from
    15.1 to 10.1, a shift of the median by about half."""
    g1, g2 = np.random.default_rng(0), np.random.default_rng(0)
    a = [stats_mod.draw_sigma2(g1, 10.0, M * N, 0.1, 1.0) for _ in range(2000)]
    b = [stats_mod.draw_sigma2(g2, 10.0, M * N - K * N, 0.1, 1.0) for _ in range(2000)]
    assert np.median(b) > 1.3 * np.median(a)


# The pivot swap (kernels/pivot.py) has planted bugs of its own: each term of its ratio
# must matter on a problem whose W rows are strongly dependent (A_corr).
PIVOT_RUN = dict(model="gbt", n_tries=1, acceptance="barker", n_pivot=4, n_anneal=0,
                 n_iter=1500)  # bugs at |z| 9.2-16.5, the correct chain at 1.95


def _planted_pivot(monkeypatch, bug):
    if bug == "no_jacobian":
        real = chain_mod._pivot_geometry

        def geometry(*args):
            out = real(*args)
            return None if out is None else out[:-1] + (0.0,)

        monkeypatch.setattr(chain_mod, "_pivot_geometry", geometry)
    elif bug == "no_ghk_weight":
        real = chain_mod.ghk_column

        def ghk(gen, G, h, mu, tau, sigma2, a, b, w=None):
            _, col = real(gen, G, h, mu, tau, sigma2, a, b, w=w)
            return 0.0, col

        monkeypatch.setattr(chain_mod, "ghk_column", ghk)
    elif bug == "no_map":
        # the other rows stay where they are, but the ratio keeps the Jacobian
        real = chain_mod._pivot_geometry

        def geometry(*args):
            out = real(*args)
            if out is None:
                return None
            gnew, G2, forward, d, gs, ss, logdet = out
            return gnew, G2, forward, np.zeros_like(d), gs, ss, logdet

        monkeypatch.setattr(chain_mod, "_pivot_geometry", geometry)


def _planted_redraw(monkeypatch, bug):
    real = block_mod.redraw_block
    if bug == "no_reverse_weight":
        # the current columns' GHK weights left out: a Gibbs-like "accept the fresh W"
        # ratio, which is not the independence sampler's
        def ratio(gen, G, G2, H, W, Mu, Tau, pri, k, crow, s2, Gn=None, q=None):
            tot, W2 = real(gen, G, G2, H, W, Mu, Tau, pri, k, crow, s2, Gn=Gn, q=q)
            for n in range(W.shape[1]):
                tot += chain_mod.ghk_column(
                    None, G if Gn is None else Gn[n], H[:, n],
                    pri.mu if Mu is None else Mu[:, n], pri.tau if Tau is None else Tau[:, n],
                    s2, pri.a, pri.b, w=W[:, n])[0]
            return tot, W2

        monkeypatch.setattr(block_mod, "redraw_block", ratio)
    elif bug == "stale_h":
        # the new columns' right-hand sides keep the outgoing column's row of H
        def stale(gen, G, G2, H, W, Mu, Tau, pri, k, crow, s2, Gn=None, q=None):
            return real(gen, G, G2, H, W, Mu, Tau, pri, k, H[k], s2, Gn=Gn, q=q)

        monkeypatch.setattr(block_mod, "redraw_block", stale)
    elif bug == "shared_gram":
        # masked: every column's proposal from the Gram over all rows
        real_r = block_mod._redraw

        def shared(state, ctx, att):
            return real_r(state._replace(Gn=np.broadcast_to(ctx.G, state.Gn.shape).copy()),
                          ctx, att)

        monkeypatch.setattr(block_mod, "_redraw", shared)


#: the redraw swap's planted-bug run (measured at these 1,500 iterations: no_reverse_weight
#: |z| 14.7, stale_h 25.3; masked, shared_gram 8.1)
REDRAW_RUN = dict(model="gbt", n_tries=1, acceptance="barker", n_redraw=2, n_anneal=0,
                  n_iter=1500)


def _planted_pool(monkeypatch, bug):
    real = chain_mod._draw_pool
    if bug == "pool_never_redrawn":
        st_pool = []

        def first(entropy, chain, t, n_cols, J, size):
            if t == 0 or not st_pool:
                st_pool[:] = [real(entropy, chain, t, n_cols, J, size)]
            return st_pool[0]

        monkeypatch.setattr(chain_mod, "_draw_pool", first)
    elif bug == "pool_not_uniform":
        def weighted(entropy, chain, t, n_cols, J, size):
            J = np.asarray(J)
            out = np.setdiff1d(np.arange(n_cols), J)
            g = chain_mod.stream(entropy, chain, t, 0, chain_mod.POOL)
            w = (out + 1.0) ** 2
            pick = g.choice(out.size, size=size - J.size, replace=False, p=w / w.sum())
            return tuple(int(c) for c in np.sort(np.concatenate([J, out[pick]])))

        monkeypatch.setattr(chain_mod, "_draw_pool", weighted)


#: the pool's planted-bug run (measured at these 1,000 iterations: never_redrawn |z| 151,
#: not_uniform 11.3; the correct chain 2.9. At 3,000: 237, 15 and 3.3)
POOL_RUN = dict(model="gbt", n_tries=1, acceptance="barker", candidate_pool=3, pool_every=3,
                n_iter=1000)

#: the planted-bug runs: each move's run, its bugs and how to plant them
PLANTED = {
    # every column a candidate: the most swaps per iteration, so every bug bites
    "collapsed": (PLANTED_RUN, ["barker_flip", "no_logdet", "prior_row", "sigma2_shape"],
                  _planted),
    "pivot": (PIVOT_RUN, ["no_jacobian", "no_ghk_weight", "no_map"], _planted_pivot),
    "pool": (POOL_RUN, ["pool_never_redrawn", "pool_not_uniform"], _planted_pool),
    "redraw": (REDRAW_RUN, ["no_reverse_weight", "stale_h"], _planted_redraw),
}


#: bugs caught at |z| >= 15 in 1,500 iterations (measured: barker_flip 50, no_logdet 15,
#: sigma2_shape 51; at 6,000: 99, 33, 100) run that long; prior_row needs the full 6,000
#: (|z| 4.9; 3.5 at 3,000). The suite's time, README
BUG_ITERS = {"barker_flip": 1500, "no_logdet": 1500, "sigma2_shape": 1500}


def _planted_masked_pivot(monkeypatch, bug):
    if bug == "no_jacobian":  # the blocks' sum of log|det_n| dropped
        real = block_mod._pivot_masked

        def no_det(*args, **kw):
            out = real(*args, **kw)
            return (out[0], 0.0) + tuple(out[2:])

        monkeypatch.setattr(block_mod, "_pivot_masked", no_det)
    elif bug == "shared_gram":
        # every column's map and terms from the Gram over all rows (the dense move's),
        # not from the column's own observed rows
        real = block_mod._pivot_masked

        def shared(state, ctx, *args, **kw):
            return real(state._replace(Gn=np.broadcast_to(ctx.G, state.Gn.shape).copy()),
                        ctx, *args, **kw)

        monkeypatch.setattr(block_mod, "_pivot_masked", shared)
    else:
        _planted_pivot(monkeypatch, bug)


#: the masked pivot's planted-bug run (measured at these 1,500 iterations: no_jacobian
#: |z| 13.1, shared_gram 7.5, no_ghk_weight 5.7; the correct chain 1.8)
MASKED_PIVOT_RUN = dict(model="gbt", n_tries=1, acceptance="barker", n_pivot=4, n_anneal=0,
                        n_iter=1500, missing="mask")


#: the masked planted-bug runs: each move's run, its bugs and how to plant them
MASKED_PLANTED = {
    "pivot": (MASKED_PIVOT_RUN, ["no_jacobian", "shared_gram", "no_ghk_weight"],
              _planted_masked_pivot),
    "redraw": ({**REDRAW_RUN, "missing": "mask"}, ["shared_gram"], _planted_redraw),
}


@pytest.mark.parametrize("move,bug", [(m, b) for m, (_, bugs, _) in MASKED_PLANTED.items()
                                      for b in [None, *bugs]])
def test_masked_planted_bugs_are_caught(A_corr, monkeypatch, move, bug):
    """The masked pivot and redraw swaps on the planted-bug problem with three entries
    unobserved: the correct chain passes, each bug fails."""
    kw, _, plant = MASKED_PLANTED[move]
    p = params(**kw)
    if bug is not None:
        plant(monkeypatch, bug)
    (dJ, ds2, dW), A0, mask = run_masked(A_corr, p)
    z, mean, target = z_scores(A0, p, dJ, ds2, dW, mask=mask)
    if bug is None:
        assert np.abs(z).max() <= Z_MAX, np.round(z, 2)
    else:
        assert np.abs(z).max() > Z_MAX, (bug, np.round(z, 2))


@pytest.mark.parametrize("move", list(PLANTED))
def test_correct_chain_passes_on_the_planted_bug_problem(A_corr, move):
    """The baseline of the planted-bug tests: the same run without a bug passes."""
    p = params(**PLANTED[move][0])
    dJ, ds2, dW = run(A_corr, p)
    z, mean, target = z_scores(A_corr, p, dJ, ds2, dW)
    assert np.abs(z).max() <= Z_MAX, np.round(z, 2)


@pytest.mark.parametrize("move,bug", [(m, b) for m, (_, bugs, _) in PLANTED.items()
                                      for b in bugs])
def test_planted_bug_is_caught(A_corr, monkeypatch, move, bug):
    kw, _, plant = PLANTED[move]
    p = params(**{**kw, "n_iter": BUG_ITERS.get(bug, kw["n_iter"])})
    plant(monkeypatch, bug)
    dJ, ds2, dW = run(A_corr, p)
    z, mean, target = z_scores(A_corr, p, dJ, ds2, dW)
    assert np.abs(z).max() > Z_MAX, (bug, np.round(z, 2))


def test_inclusion_mcse_is_the_error_of_the_chains_estimate(A):
    """``BIDResult.inclusion_mcse()`` on a real fit (two chains of the collapsed move):
    the exact inclusion probabilities (the sum of p(J | A) over the bases holding the
    column) lie within 4.5 MCSE of the chains' estimates, and the MCSE agrees with the
    batch means' error of the same draws (40 batches; measured ratio 0.79-1.23 over six
    runs; the bounds are about 4 standard deviations of the ratio, so an MCSE that
    ignored the autocorrelation, or was inflated to pass, would fail). Its theory on
    chains of known autocorrelation: tests/test_diagnostics.py."""
    from dask_bid import bayesian_id

    res = bayesian_id(A, K, n_iter=3000, burn_in=200, n_chains=2, random_state=4,
                      init="random", n_pivot=0, n_anneal=0, n_tries=1)
    tab = exact(A, params()["priors"])
    p = np.array([sum(v for J, v in tab["subsets"].items() if j in J) for j in range(N)])
    se = res.inclusion_mcse()
    assert (se > 0).all() and (se < 0.06).all(), se
    z = (res.inclusion_probability - p) / se
    assert np.abs(z).max() <= Z_MAX, (np.round(z, 2), res.inclusion_probability, p)
    ind = (res.draws_columns[..., None] == np.arange(N)).any(axis=2)  # (chains, draws, N)
    batches = ind[:, : ind.shape[1] // 20 * 20].reshape(2, 20, -1, N).mean(axis=2)
    bm = batches.reshape(40, N).std(axis=0, ddof=1) / np.sqrt(40)
    assert ((se / bm > 0.6) & (se / bm < 1.6)).all(), np.round(se / bm, 2)
