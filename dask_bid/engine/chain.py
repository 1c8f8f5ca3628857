"""The client side of one chain: swap decisions, sigma^2, bookkeeping.

The driver never touches A or W itself: it asks a backend to run block
operations (``dask_bid.kernels.block``) on every column block and gets back
scalars and K-vectors. ``MemoryBackend`` runs the blocks in threads on numpy
arrays; ``DaskBackend`` keeps them on Dask workers. Both give the same chain.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from ..kernels.block import (
    PivotAttempt,
    RedrawAttempt,
    StepContext,
    block_aggressive,
    block_annealed_finish,
    block_annealed_propose,
    block_box_lstsq,
    block_box_score,
    block_collapsed_finish,
    block_collapsed_score,
    block_icm,
    block_ls_bound,
    block_lstsq_score,
    block_lstsq_start,
    block_pivot_apply,
    block_pivot_score,
    block_plain_finish,
    block_plain_propose,
    block_rebase,
    block_redraw_apply,
    block_redraw_score,
    block_redraw_score_held,
)
from ..kernels.linalg import pinv_sym
from ..kernels.pivot import ghk_column
from ..kernels.priors import Priors
from ..kernels.rng import CANDIDATES, CLIENT, INIT, POOL, stream
from ..kernels.stats import barker_accept, choose_among, draw_sigma2, log_barker, sse_from_stats
from ..kernels.swap import proposal_gram

__all__ = ["ChainConfig", "ClientState", "ChainOutput", "run_chain", "step", "MOVES", "refine",
           "map_estimate", "lstsq_estimate", "retained_iterations"]


class ChainConfig(NamedTuple):
    n_components: int
    priors: Priors
    # "collapsed": the exact swap with the slot's row integrated out; "plain": Algorithm 1
    # (prior row); "aggressive": Algorithm 2 (swap_score "draw": the paper; "lstsq": the
    # least-squares search)
    sampler: str = "aggressive"
    n_iter: int = 500
    burn_in: int = 100
    thin: int = 5
    temperature: float = 1.0
    n_candidates: int = 8
    max_cached_rows: int = 32
    # a pass replaces the whole cache (n_candidates="auto"): its batch is the next
    # ``n_candidates`` stream entries whether cached or not, so that no row still to be
    # used is evicted (at most one move's candidates are computed twice)
    replace_cache: bool = False
    max_tracked_sets: int = 16
    point_estimate: str = "mode"
    proposal_init: str = "copy"
    w_init: str = "prior"  # or "lstsq": W starts at the clipped least-squares fit for J0
    swap_score: str = "draw"  # or "lstsq": compare bases by their clipped least-squares SSE
    n_tries: int = 1  # collapsed: candidates per slot update (>= N - K: every column)
    acceptance: str = "barker"  # collapsed: "barker" (Gibbs over the set) or "metropolis"
    # score every newly visited basis by its exact box-constrained least-squares SSE
    # (point_estimate="best"); at most this many scores are remembered to skip rescoring
    score_visited: bool = False
    # missing="mask": no shared Gram, so no cheap least-squares bound to rule a basis out
    # (every visited basis is scored exactly; no round trip for a bound)
    masked: bool = False
    # collapsed: an annealed swap through this many intermediate distributions every
    # ``anneal_every`` iterations (0: never)
    n_anneal: int = 0
    anneal_every: int = 1
    # collapsed: the first this many iterations (all within burn-in, so never retained)
    # run the least-squares search, which finds a good mode from a poor start faster
    search_warmup: int = 0
    # collapsed: the first this many iterations (all within burn-in) divide the swaps'
    # log-odds by a temperature falling geometrically from ``warmup_temperature`` to 1
    # (simulated annealing of the basis): a random start reaches a good mode
    tempered_warmup: int = 0
    warmup_temperature: float = 1e4
    # collapsed: pivot swap attempts per iteration (the other rows of W follow the swap)
    n_pivot: int = 0
    # collapsed: redraw swap attempts per iteration (every column of W drawn afresh)
    n_redraw: int = 0
    # warm-up only: never swap in a column that lies in the span of the other basis
    # columns (a copy of one of them): such bases trap the chain at the target
    avoid_degenerate: bool = False
    max_scored: int = 256
    # the candidate pool (``_draw_pool``): 0, every column outside J is a candidate;
    # else the candidates are the columns outside J of a pool S of this many columns
    # holding J, redrawn every ``pool_every`` iterations (its rows computed in one pass)
    pool_size: int = 0
    pool_every: int = 0


def retained_iterations(n_iter: int, burn_in: int, thin: int) -> np.ndarray:
    """Indices of the iterations whose draws are kept."""
    return np.arange(burn_in, n_iter, thin)


@dataclass
class ClientState:
    """Everything the client needs to continue a chain (checkpointed as is)."""

    iteration: int  # next iteration to run
    J: np.ndarray  # current basis, slot order
    G: np.ndarray
    sse: float
    sigma2: float
    J2: np.ndarray | None = None
    G2: np.ndarray | None = None
    sse2: float = np.nan
    score: float = np.nan  # swap_score="lstsq": SSE of the clipped least-squares W of J
    score2: float = np.nan
    cand_pos: int = 0  # position in the candidate stream
    cached: list = field(default_factory=list)  # columns whose A^T A rows the blocks hold
    # the candidate pool S (sorted; it holds J), or None: every column is a candidate
    pool: tuple | None = None
    peek: dict = field(default_factory=dict)  # (col, proposal) -> (H[:, col], sq), prefetched
    # masked: (J, columns) of the products over each column's observed rows that the blocks
    # hold from the pivot's last scoring pass (``state.mrow``), for the redraw swap that
    # follows in the same iteration; None otherwise (never left set across iterations)
    held_rows: tuple | None = None
    n_passes: int = 0
    trace_mse: list = field(default_factory=list)
    trace_sigma2: list = field(default_factory=list)
    trace_accepted: list = field(default_factory=list)
    trace_accept_prob: list = field(default_factory=list)
    draws_J: list = field(default_factory=list)
    draws_sigma2: list = field(default_factory=list)
    draws_sse: list = field(default_factory=list)
    set_counts: dict = field(default_factory=dict)  # sorted J -> retained draws
    set_best: dict = field(default_factory=dict)  # sorted J -> lowest SSE among them
    elapsed: float = 0.0
    # every basis the chain's retained draws visited, never evicted (point_estimate="mode")
    visits: dict = field(default_factory=dict)
    # score_visited: the best visited basis by exact box-constrained least-squares SSE,
    # and a bounded memo of scored bases (forgetting one only means scoring it again)
    best_key: tuple | None = None
    best_score: float = np.inf
    scored: dict = field(default_factory=dict)


@dataclass
class ChainOutput:
    state: ClientState
    norm_a2: float
    n_obs: int
    extra: dict[str, Any] = field(default_factory=dict)


@functools.lru_cache(maxsize=4096)
def _candidate(entropy, chain, pos, n_cols):
    # a pure function of its arguments, asked again for the same positions (peeks,
    # batches, the swap itself): remembered, it saves building a Generator each time
    return int(stream(entropy, chain, pos, 0, CANDIDATES).integers(n_cols))


def _draw(entropy, chain, pos, n_cols, pool):
    """Stream entry ``pos``: a uniform column, or a uniform column of the pool."""
    if pool is None:
        return _candidate(entropy, chain, pos, n_cols)
    return int(pool[_candidate(entropy, chain, pos, len(pool))])


def _outside(entropy, chain, pos, n_cols, J, pool=None):
    """The stream entries not in J from position ``pos`` on, each with the position after
    it (rejection from uniform on all columns, or on the pool: uniform on the columns
    outside J, or on those of the pool)."""
    inJ = set(int(j) for j in J)
    while True:
        u = _draw(entropy, chain, pos, n_cols, pool)
        pos += 1
        if u not in inJ:
            yield u, pos


def _next_candidate(entropy, chain, st: ClientState, n_cols, J):
    """Next stream entry not in J, and the position after it."""
    return next(_outside(entropy, chain, st.cand_pos, n_cols, J, st.pool))


def _next_candidates(entropy, chain, pos, n_cols, J, n, pool=None):
    """The ``n`` columns that ``n`` calls of :func:`_next_candidate` from stream position
    ``pos`` would return, without advancing the chain's position."""
    return [u for u, _ in itertools.islice(_outside(entropy, chain, pos, n_cols, J, pool), n)]


def _draw_pool(entropy, chain, t, n_cols, J, size):
    """The candidate pool drawn at iteration ``t``: J and ``size - K`` columns drawn
    uniformly without replacement from those outside J, sorted.

    Why the pool keeps every move exact (docs/model.md, "The candidate pool"): read S as
    an auxiliary variable with p(S | J) uniform on the ``size``-sets holding J. This
    draw is a Gibbs update of S; while S is fixed, every move proposes among S minus J,
    so J stays in S, p(S | J') = p(S | J), and a proposal's reverse (the outgoing column
    is in S) has the same probability: each move's acceptance rule is unchanged, with S
    in place of all columns. The chain's J-marginal is still p(J | A)."""
    J = np.asarray(J, dtype=np.int64)
    g = stream(entropy, chain, t, 0, POOL)
    outside = np.setdiff1d(np.arange(n_cols, dtype=np.int64), J)
    pick = g.choice(outside.size, size=size - J.size, replace=False)
    return tuple(int(c) for c in np.sort(np.concatenate([J, outside[pick]])))


def _load_pool(backend, st: ClientState):
    """One pass computes the rows a_u^T A of every pool column (the basis's included: a
    column leaving J must keep its row, since it stays a candidate); they replace the
    blocks' cache."""
    want = list(st.pool)
    backend.add_rows(want, len(want))
    st.cached = want
    st.n_passes += 1


def _refresh_pool(backend, cfg, entropy, chain, st: ClientState):
    """Draw the pool again given the current J, and compute its rows (one pass)."""
    st.pool = _draw_pool(entropy, chain, st.iteration, backend.n_cols, st.J, cfg.pool_size)
    _load_pool(backend, st)


def _merged(parts) -> dict:
    """One dict of the blocks' peeked columns (each block returns those it holds)."""
    out = {}
    for d in parts:
        out.update(d)
    return out


#: Whether a move asks its blocks for the columns (H[:, c], ||a_c||^2) the next move will
#: need, with its own results (see :func:`_columns`). It saves the collapsed sampler two
#: of its five round trips an iteration and never changes the chain (a peeked column is
#: the same floats as a fetched one; tests/test_pivot.py runs both ways).
PEEK_COLUMNS = True
#: the most columns a peek carries (n_tries="all" would ask for every column)
MAX_PEEK = 64


def _columns(backend, st: ClientState, cols):
    """[(H[:, c], ||a_c||^2) for c in cols]: from ``st.peek`` when the previous move
    prefetched all of them under the current basis, else in one round trip. The peek is
    consumed either way: it is valid only until the blocks' basis next changes."""
    peek, st.peek = st.peek, {}
    got = [peek.get((int(c), False)) for c in cols]
    if all(x is not None for x in got):
        return got
    return backend.columns(cols)


def _anneals(cfg, t) -> bool:
    return bool(cfg.n_anneal) and t % cfg.anneal_every == 0


def _batch(entropy, chain, pos, n_cols, J, cached, first, n):
    """``first`` and the next distinct stream entries from ``pos`` on that are neither in
    J nor cached, ``n`` in all (fewer if 50 n entries do not hold them).

    When ``n`` covers every column not cached, every one of them, in column order and the
    basis's included: A^T A is then held whole and no later proposal needs a pass (not
    even of a column that leaves the basis). Which rows a pass computes never changes the
    chain: a row's floats do not depend on its batch (``kernels/products.py``)."""
    held = set(int(c) for c in cached)
    want = [] if first is None else [first]
    held.update(want)
    if n - len(want) >= n_cols - len(held):
        return want + [c for c in range(n_cols) if c not in held]
    inJ = set(int(j) for j in J)
    # never more than the columns there are to find
    n = min(n, n_cols - len(inJ | held) + len(want))
    lookahead = 0
    while len(want) < n and lookahead < 50 * n:
        c = _candidate(entropy, chain, pos, n_cols)
        pos += 1
        lookahead += 1
        if c not in inJ and c not in held:
            want.append(c)
            held.add(c)
    return want


def _keep_cached(st: ClientState, want, cap):
    """The client's copy of the blocks' cache after ``block_add_rows(want, cap)``."""
    new = set(want)
    cached = [c for c in st.cached if c not in new] + list(want)
    st.cached = cached[-cap:]


def _ensure_cached(backend, cfg, entropy, chain, st: ClientState, u, J):
    """Make sure the blocks hold row a_u^T A; if not, one pass computes the rows of
    u and of the next few distinct stream entries, so that on average a pass serves
    ``n_candidates`` proposals."""
    if u in st.cached:
        return
    if st.pool is not None:  # a resumed chain: its blocks come back without cached rows
        _load_pool(backend, st)
        return
    want = _batch(entropy, chain, st.cand_pos, backend.n_cols, J,
                  () if cfg.replace_cache else st.cached, u, cfg.n_candidates)
    backend.add_rows(want, cfg.max_cached_rows)
    _keep_cached(st, want, cfg.max_cached_rows)
    st.n_passes += 1


def _record(cfg, st: ClientState, J):
    key = tuple(int(j) for j in np.sort(J))
    perm = np.argsort(J, kind="stable")
    evict = []
    if key not in st.set_counts and len(st.set_counts) >= cfg.max_tracked_sets:
        # forget the least visited basis to bound worker memory
        victim = min(st.set_counts, key=lambda k: (st.set_counts[k], -st.set_best[k]))
        del st.set_counts[victim]
        del st.set_best[victim]
        evict.append(victim)
    st.set_counts[key] = st.set_counts.get(key, 0) + 1
    st.set_best.setdefault(key, np.inf)
    return key, perm, tuple(evict)


#: random starts of the exact sampler redrawn at most this often while rank-deficient
MAX_REDRAWS = 20


def initial_state(backend, cfg: ChainConfig, entropy: int, chain: int, J0=None):
    """Pick the starting basis, set up the blocks, draw the first sigma^2."""
    K = cfg.n_components
    g = stream(entropy, chain, -1, 0, INIT)
    # the exact sampler's random start is a random basis of full rank: a basis holding
    # two copies of a column (the paper's data copies every column) is a mode it cannot
    # leave; up to MAX_REDRAWS redraws, one pass each (the paper's chain: no redraw)
    redraws = MAX_REDRAWS if J0 is None and cfg.sampler == "collapsed" else 0
    if J0 is None:
        J0 = np.sort(g.choice(backend.n_cols, size=K, replace=False))
    J0 = np.asarray(J0, dtype=np.int64)
    while True:
        # the first batch of swap candidates (or the pool's rows) rides on the pass that
        # computes H
        pool = _draw_pool(entropy, chain, 0, backend.n_cols, J0, cfg.pool_size) \
            if cfg.pool_size else None
        first = list(pool) if pool is not None else \
            _batch(entropy, chain, 0, backend.n_cols, J0, (), None, cfg.n_candidates)
        norm_a2, n_obs = backend.init_blocks(J0, cfg.priors, entropy, chain, extra=first,
                                             max_rows=cfg.max_cached_rows)
        G = backend.gram(J0)
        if not redraws or not any(_in_span(G, k, G[:, k], G[k, k]) for k in range(K)):
            break
        redraws -= 1
        J0 = np.sort(g.choice(backend.n_cols, size=K, replace=False))
    if cfg.w_init == "lstsq":
        # a W far from its conditional posterior makes the first swap decisions noise
        # and throws a good starting basis away
        backend.map(block_lstsq_start, StepContext(
            entropy=entropy, chain=chain, iteration=-1, priors=cfg.priors, sigma2=1.0, G=G,
            P2=pinv_sym(G)))
    hw, wgw = backend.quadratics(G)
    sse = sse_from_stats(norm_a2, hw, wgw)
    sigma2 = draw_sigma2(g, sse, n_obs, cfg.priors.alpha_sigma, cfg.priors.beta_sigma)
    score = np.nan
    if cfg.swap_score == "lstsq" or cfg.search_warmup:
        res = backend.map(block_lstsq_score, StepContext(
            entropy=entropy, chain=chain, iteration=-1, priors=cfg.priors, sigma2=1.0, G=G,
            P2=pinv_sym(G)))
        score = sse_from_stats(norm_a2, sum(r[0] for r in res), sum(r[1] for r in res))
    st = ClientState(iteration=0, J=J0, G=G, sse=sse, sigma2=sigma2, score=score,
                     cached=list(first), pool=pool)
    if cfg.score_visited:
        _score_current(backend, cfg, entropy, chain, st, norm_a2)
    return st, norm_a2, n_obs


def _move_aggressive(backend, cfg, entropy, chain, st, norm_a2, n_obs, g, retained):
    """Algorithm 2: Barker choice between the current basis and the carried proposal,
    a new proposal from the chosen one, sigma^2, then both W's swept."""
    K = cfg.n_components
    pri = cfg.priors
    t = st.iteration
    took = False
    prob = np.nan
    if st.J2 is not None:
        if cfg.swap_score == "lstsq":
            delta = st.score2 - st.score
        else:
            delta = st.sse2 - st.sse
        took, prob = barker_accept(g, log_barker(delta, st.sigma2, cfg.temperature))
        if took:
            st.J, st.G, st.sse, st.score = st.J2, st.G2, st.sse2, st.score2
    p = int(g.integers(K))
    u, pos = _next_candidate(entropy, chain, st, backend.n_cols, st.J)
    _ensure_cached(backend, cfg, entropy, chain, st, u, st.J)
    st.cand_pos = pos
    got = st.peek.get((u, took))
    gcol, squ = got if got is not None else backend.column(u, proposal=took)
    G2, _ = proposal_gram(st.G, p, gcol, squ)
    J2 = st.J.copy()
    J2[p] = u
    # the next incoming column, for either outcome of the next swap choice: the
    # blocks holding it return its H column with this iteration's results
    peek = ((_next_candidate(entropy, chain, st, backend.n_cols, st.J)[0], False),
            (_next_candidate(entropy, chain, st, backend.n_cols, J2)[0], True))
    st.sigma2 = draw_sigma2(g, st.sse, n_obs, pri.alpha_sigma, pri.beta_sigma)
    record = _record(cfg, st, st.J) if retained else None
    ls_start = cfg.proposal_init == "lstsq"
    ls_score = cfg.swap_score == "lstsq"
    P2 = pinv_sym(G2) if ls_start or ls_score else None
    ctx = StepContext(entropy=entropy, chain=chain, iteration=t, priors=pri,
                      sigma2=st.sigma2, G=st.G, G2=G2, take2=took, p=p, u=u, record=record,
                      P2=P2, ls_start=ls_start, ls_score=ls_score, J=st.J, peek=peek)
    res = backend.map(block_aggressive, ctx)
    st.peek = _merged(r[-1] for r in res)
    hw1 = sum(r[0] for r in res)
    wgw1 = sum(r[1] for r in res)
    hw2 = sum(r[2] for r in res)
    wgw2 = sum(r[3] for r in res)
    st.sse = sse_from_stats(norm_a2, hw1, wgw1)
    st.sse2 = sse_from_stats(norm_a2, hw2, wgw2)
    if ls_score:
        st.score2 = sse_from_stats(norm_a2, sum(r[4] for r in res), sum(r[5] for r in res))
    st.J2, st.G2 = J2, G2
    return took, prob


def _move_plain(backend, cfg, entropy, chain, st, norm_a2, n_obs, g, retained):
    """Algorithm 1: a swap whose incoming row is a prior draw, Barker's rule on the SSE
    change, sigma^2, then a sweep of W."""
    K = cfg.n_components
    pri = cfg.priors
    t = st.iteration
    p = int(g.integers(K))
    u, pos = _next_candidate(entropy, chain, st, backend.n_cols, st.J)
    _ensure_cached(backend, cfg, entropy, chain, st, u, st.J)
    st.cand_pos = pos
    gcol, squ = backend.column(u)
    G2, gnew = proposal_gram(st.G, p, gcol, squ)
    ctx = StepContext(entropy=entropy, chain=chain, iteration=t, priors=pri,
                      sigma2=st.sigma2, G=st.G, p=p, u=u, g_new=gnew, J=st.J)
    res = backend.map(block_plain_propose, ctx)
    d_hw = sum(r[0] for r in res)
    d_wgw = sum(r[1] for r in res)
    delta = -2.0 * d_hw + d_wgw
    accepted, prob = barker_accept(g, log_barker(delta, st.sigma2, cfg.temperature))
    if accepted:
        st.J = st.J.copy()
        st.J[p] = u
        st.G = G2
        st.sse = max(st.sse + delta, 0.0)
    st.sigma2 = draw_sigma2(g, st.sse, n_obs, pri.alpha_sigma, pri.beta_sigma)
    record = _record(cfg, st, st.J) if retained else None
    ctx = ctx._replace(sigma2=st.sigma2, G=st.G, accept=accepted, record=record)
    res = backend.map(block_plain_finish, ctx)
    st.sse = sse_from_stats(norm_a2, sum(r[0] for r in res), sum(r[1] for r in res))
    return accepted, prob


def _candidate_set(entropy, chain, pos, pool, n_cols, J, m):
    """The candidates of one collapsed slot update, drawn from stream position ``pos``
    (in the candidate ``pool`` when there is one): the next ``m`` distinct stream entries
    not in J, a uniformly random m-subset of the columns outside J (every such column
    when m >= N - K), and the position after them. The set is drawn the same way from
    either end of a move, which is what makes a choice within it by the target's weights
    exact."""
    inJ = set(int(j) for j in J)
    universe = range(n_cols) if pool is None else pool
    if m >= len(universe) - len(inJ):
        return [c for c in universe if c not in inJ], pos
    out = []
    while len(out) < m:
        u = _draw(entropy, chain, pos, n_cols, pool)
        pos += 1
        if u not in inJ and u not in out:
            out.append(u)
    return out, pos


def _ensure_rows(backend, cfg, entropy, chain, st: ClientState, S, J):
    """The blocks hold the rows a_u^T A of every u in S after this. If any is missing,
    one pass computes all of S (so that none is evicted by the others) and the next
    distinct stream entries up to ``n_candidates`` rows."""
    held = set(st.cached)
    if all(u in held for u in S):
        return
    if st.pool is not None:  # a resumed chain: its blocks come back without cached rows
        _load_pool(backend, st)
        return
    n = max(cfg.n_candidates - len(S), 0)
    more = _batch(entropy, chain, st.cand_pos, backend.n_cols, J,
                  set(S) if cfg.replace_cache else held | set(S), None, n) if n else []
    inS = set(S)
    want = list(S) + [c for c in more if c not in inS]
    cap = max(cfg.max_cached_rows, len(want))
    backend.add_rows(want, cap)
    _keep_cached(st, want, cap)
    st.n_passes += 1


def _move_collapsed(backend, cfg, entropy, chain, st, norm_a2, n_obs, g, retained):
    """The pivot and redraw swaps (``cfg.n_pivot``, ``cfg.n_redraw`` attempts), the
    annealed swap when due, then the exact collapsed swap (MODEL_NOTES 8), a sweep of W
    and sigma^2.

    Slot k is uniform; the candidates are a uniform random subset of the columns outside
    J (:func:`_candidate_set`). Every block returns its share of each candidate's log
    marginal with row k of W integrated out; the client picks by ``cfg.acceptance``
    (Barker: Gibbs over {current} + candidates; Metropolis: Metropolised Gibbs); the
    blocks then draw row k from its exact conditional if the slot changed, and sweep.
    """
    annealed = False
    if cfg.n_pivot:
        annealed = _move_pivot(backend, cfg, entropy, chain, st, g) > 0
    if cfg.n_redraw:
        annealed = (_move_redraw(backend, cfg, entropy, chain, st, g) > 0) or annealed
    if _anneals(cfg, st.iteration):
        st.peek = {}  # the annealed move changes the blocks' state
        took, _ = _move_annealed(backend, cfg, entropy, chain, st, norm_a2, n_obs, g,
                                 retained)
        _finish_annealed(backend, cfg, entropy, chain, st, norm_a2, n_obs, g, None, took)
        annealed = annealed or took
    K = cfg.n_components
    pri = cfg.priors
    t = st.iteration
    k = int(g.integers(K))
    S, pos = _candidate_set(entropy, chain, st.cand_pos, st.pool, backend.n_cols, st.J,
                            cfg.n_tries)
    _ensure_rows(backend, cfg, entropy, chain, st, S, st.J)
    st.cand_pos = pos
    cols = _columns(backend, st, S)
    g_rows = np.stack([proposal_gram(st.G, k, c, sq)[1] for c, sq in cols])
    bad = _in_span_many(st.G, k, cols) if cfg.avoid_degenerate else [False] * len(cols)
    ctx = StepContext(entropy=entropy, chain=chain, iteration=t, priors=pri,
                      sigma2=st.sigma2, G=st.G, p=k, J=st.J, cands=tuple(int(u) for u in S),
                      g_rows=g_rows)
    L = np.sum([np.asarray(r) for r in backend.map(block_collapsed_score, ctx)], axis=0)
    if cfg.temperature != 1.0:
        L = L / cfg.temperature
    if any(bad):
        L[1:][np.asarray(bad)] = -np.inf
    choice, prob = choose_among(g, L, cfg.acceptance)
    accepted = choice > 0
    if accepted:
        u = int(S[choice - 1])
        _swap_basis(st, k, u, cols[choice - 1][0], cols[choice - 1][1])
        ctx = ctx._replace(G=st.G, accept=True, u=u, choice=choice - 1)
    record = _record(cfg, st, st.J) if retained else None
    # the next iteration's first pivot attempts: their columns under the basis this
    # iteration ends with come back with the sweep
    peek = tuple((u, False) for u in _next_candidates(
        entropy, chain, st.cand_pos, backend.n_cols, st.J, cfg.n_pivot, st.pool)) \
        if PEEK_COLUMNS and 0 < cfg.n_pivot <= MAX_PEEK else ()
    _finish(backend, block_collapsed_finish, ctx._replace(record=record), cfg, entropy, chain,
            st, norm_a2, n_obs, g, peek=peek)
    return accepted or annealed, prob


def _in_span(G, k, gcol, squ, rtol=1e-8):
    """Whether column u (``gcol`` = C^T a_u, ``squ`` = ||a_u||^2) lies in the span of
    the basis columns other than slot k: its least-squares residual on them vanishes."""
    return _in_span_many(G, k, [(gcol, squ)], rtol)[0]


def _in_span_many(G, k, cols, rtol=1e-8):
    """:func:`_in_span` of every (``gcol``, ``squ``) in ``cols``, with one pseudo-inverse
    (it depends on G and k only; one per column made ``n_tries="all"`` cost a K x K
    pseudo-inverse per column of A in every warm-up iteration)."""
    idx = [i for i in range(G.shape[0]) if i != k]
    P = pinv_sym(G[np.ix_(idx, idx)])
    out = []
    for gcol, squ in cols:
        g = np.asarray(gcol, dtype=np.float64)[idx]
        out.append(bool(squ - g @ P @ g <= rtol * squ))
    return out


def _pivot_geometry(G, k, gcol, squ, p, u):
    """The pivot map of slot k: p -> u (kernels/pivot.py). Returns (gnew, G', forward,
    d, gs, ss, log|det|), or None where the map is degenerate (then the attempt is
    rejected, from either end, since both see the same source and target)."""
    G2, gnew = proposal_gram(G, k, gcol, squ)
    forward = p < u  # the source basis holds the smaller column index in slot k
    if forward:  # a_s = a_p: its representation in the target C' = the new basis
        gs, ss = G[:, k].copy(), float(G[k, k])
        rhs = G[:, k].copy()
        rhs[k] = gcol[k]
        Gt = G2
    else:  # a_s = a_u: its representation in the target C = the current basis
        gs, ss = gnew.copy(), float(squ)
        rhs = np.array(gcol, dtype=np.float64)
        Gt = G
    d = pinv_sym(Gt) @ rhs
    d[k] = 0.0
    gs[k] = 0.0
    rel = 1.0 - float(gs @ d) / ss if ss > 0 else 0.0
    if not np.isfinite(rel) or abs(rel) < 1e-10:
        return None
    return gnew, G2, forward, d, gs, ss, math.log(abs(rel))


def _attempts(entropy, chain, st: ClientState, n_cols, g, K, n):
    """``n`` swap attempts (slot, incoming column): each slot uniform from ``g``, each
    column the next candidate outside J (advancing the chain's stream position)."""
    out = []
    for _ in range(n):
        k = int(g.integers(K))
        u, st.cand_pos = _next_candidate(entropy, chain, st, n_cols, st.J)
        out.append((k, u))
    return out


def _move_pivot(backend, cfg, entropy, chain, st: ClientState, g):
    """``cfg.n_pivot`` pivot swaps (kernels/pivot.py): slot k (uniform) moves to a
    uniform column u outside J while the other rows of W follow the swap, row k is
    integrated out and the columns p and u get GHK proposals; accepted by the exact
    Metropolis-Hastings ratio. The attempts are scored together against the current
    state and decided in order; after an acceptance the remaining ones are drawn again
    from the new state. Masked (``cfg.masked``): every column has its own map and
    Jacobian, computed in the blocks from the attempts' products over each column's
    observed rows (``MASK_ROW_OPS``, kind "pivot"); the client adds no Jacobian and
    takes the GHK Grams of p and u from their blocks. Returns the number accepted."""
    K = cfg.n_components
    pri = cfg.priors
    n_cols = backend.n_cols
    done = accepted = 0
    while done < cfg.n_pivot:
        atts = _attempts(entropy, chain, st, n_cols, g, K, cfg.n_pivot - done)
        incoming = sorted({u for _, u in atts})
        _ensure_rows(backend, cfg, entropy, chain, st, incoming, st.J)
        cols = _columns(backend, st, [u for _, u in atts])
        # the redraw swap's candidates if no attempt here is accepted, and the stream
        # position after them (where the collapsed swap's candidates start)
        ahead = list(itertools.islice(_outside(entropy, chain, st.cand_pos, n_cols, st.J,
                                               st.pool), cfg.n_redraw))
        redraw_next = [u for u, _ in ahead]
        after = ahead[-1][1] if ahead else st.cand_pos
        masked_cols = incoming
        if cfg.masked and cfg.n_redraw:
            # their products over each column's observed rows come with this pass,
            # saving the redraw's
            masked_cols = sorted(set(incoming) | set(redraw_next))
        # per attempt: None (rejected before scoring) or (its index in ``sent``, G', log|det|)
        plan, sent = [], []
        for (k, u), (gcol, squ) in zip(atts, cols, strict=True):
            p = int(st.J[k])
            if cfg.avoid_degenerate and _in_span(st.G, k, gcol, squ):
                gm = None
            elif cfg.masked:
                # every column has its own map and Jacobian: the blocks compute them
                # from u's products over the column's observed rows (``row``)
                gm = (None, None, p < u, None, None, None, 0.0)
            else:
                gm = _pivot_geometry(st.G, k, gcol, squ, p, u)
            if gm is None:
                plan.append(None)
                continue
            gnew, G2, forward, d, gs, ss, logdet = gm
            plan.append((len(sent), G2, logdet))
            # the attempt's random stream: unique among the attempts applied in this
            # iteration, which is all that draws from it
            sent.append(PivotAttempt(k=k, p=p, u=int(u), d=d, gs=gs, ss=ss, forward=forward,
                                     gnew=gnew, squ=float(squ), sub=done + len(sent),
                                     row=masked_cols.index(int(u))))
        # the collapsed swap's candidates, drawn next if no attempt is accepted (and no
        # annealed move comes between): their columns come back with the scores
        peek = ()
        if PEEK_COLUMNS and sent:
            # and the redraw swap's, drawn next (before any annealed move)
            peeked = list(dict.fromkeys(redraw_next))
            if not _anneals(cfg, st.iteration):
                S, _ = _candidate_set(entropy, chain, after, st.pool, n_cols, st.J,
                                      cfg.n_tries)
                if len(S) <= MAX_PEEK:
                    seen = set(peeked)
                    peeked += [c for c in S if c not in seen]
            peek = tuple((int(c), False) for c in peeked)
        # ``cands``: the incoming columns whose products a masked backend computes first
        ctx = StepContext(entropy=entropy, chain=chain, iteration=st.iteration, priors=pri,
                          sigma2=st.sigma2, G=st.G, J=st.J, pivot=tuple(sent), peek=peek,
                          cands=tuple(int(c) for c in masked_cols) if cfg.masked else ())
        totals = np.zeros(len(sent))
        info = {}
        st.held_rows = None
        if sent:
            res = backend.map(block_pivot_score, ctx)
            if cfg.masked and cfg.n_redraw:
                st.held_rows = (tuple(int(j) for j in st.J), ctx.cands)
            for tot, part, *_ in res:
                totals += tot
                info.update(part)
            if peek:
                st.peek = _merged(r[-1] for r in res)
        took = False
        for (k, u), planned, (gcol, squ) in zip(atts, plan, cols, strict=True):
            done += 1
            if planned is None:
                continue
            i, G2, logdet = planned
            if not np.isfinite(totals[i]):
                continue
            att = sent[i]
            # dense: one map, so one Jacobian for the N - 2 mapped columns (masked: each
            # column's is in the blocks' totals)
            log_a = totals[i] + (n_cols - 2) * (logdet if att.forward else -logdet)
            w_new = []
            for c in (att.p, att.u):
                h, w, cu, mu, tau, *grams = info[(i, c)]
                # the column's Gram now and after the swap (masked: its own, from its block)
                Gc, G2c = grams if grams else (st.G, G2)
                mu = pri.mu if mu is None else mu
                tau = pri.tau if tau is None else tau
                old, _ = ghk_column(None, Gc, h, mu, tau, st.sigma2, pri.a, pri.b, w=w)
                h2 = h.copy()
                h2[k] = cu
                new, wn = ghk_column(g, G2c, h2, mu, tau, st.sigma2, pri.a, pri.b)
                log_a += new - old
                w_new.append(wn)
            if cfg.temperature != 1.0:
                log_a /= cfg.temperature
            if math.log(g.random()) < log_a:
                st.peek = {}  # peeked under the basis this swap leaves
                st.held_rows = None  # the apply drops the blocks' products
                backend.map(block_pivot_apply, ctx._replace(pivot=(att._replace(
                    w_new=tuple(w_new)),), peek=()))
                _swap_basis(st, k, int(u), gcol, squ)
                accepted += 1
                took = True
                break
        if not took:
            break
    return accepted


def _move_redraw(backend, cfg, entropy, chain, st: ClientState, g):
    """``cfg.n_redraw`` redraw swaps (kernels/redraw.py): slot k (uniform) moves to a
    uniform column u outside J and every column of W is drawn afresh from its GHK
    proposal under the new basis; accepted by the exact Metropolis-Hastings ratio, the
    sum of the columns' GHK weights (new under J' minus current under J). The attempts
    are scored together against the current state and decided in order; after an
    acceptance the remaining ones are drawn again from the new state. Masked: each
    column's Gram is its own (the blocks get u's products over each column's observed
    rows, ``MASK_ROW_OPS`` kind "pivot"). Returns the number accepted."""
    K = cfg.n_components
    n_cols = backend.n_cols
    done = accepted = 0
    held, st.held_rows = st.held_rows, None
    while done < cfg.n_redraw:
        atts = _attempts(entropy, chain, st, n_cols, g, K, cfg.n_redraw - done)
        incoming = sorted({u for _, u in atts})
        # masked: the blocks still hold the products of these columns under this basis
        # when the pivot's pass computed them and nothing has changed since
        reuse = (held is not None and held[0] == tuple(int(j) for j in st.J)
                 and set(incoming) <= set(held[1]))
        rows_of = list(held[1]) if reuse else incoming
        held = None
        _ensure_rows(backend, cfg, entropy, chain, st, incoming, st.J)
        peek = st.peek
        cols = _columns(backend, st, [u for _, u in atts])
        st.peek = peek  # still valid for the collapsed swap unless an attempt is taken
        sent, which = [], []
        for (k, u), (gcol, squ) in zip(atts, cols, strict=True):
            if cfg.avoid_degenerate and _in_span(st.G, k, gcol, squ):
                which.append(None)  # the warm-up's rank rule, as for the other swaps
                continue
            which.append(len(sent))
            # the attempt's stream: unique among the attempts of this iteration
            sent.append(RedrawAttempt(k=k, u=int(u),
                                      G2=proposal_gram(st.G, k, gcol, squ)[0],
                                      sub=done + len(sent), row=rows_of.index(int(u))))
        ctx = StepContext(entropy=entropy, chain=chain, iteration=st.iteration,
                          priors=cfg.priors, sigma2=st.sigma2, G=st.G, J=st.J,
                          redraw=tuple(sent),
                          cands=tuple(int(c) for c in rows_of) if cfg.masked else ())
        totals = np.zeros(len(sent))
        if sent:
            # the held rows' variant of the score is not in MASK_ROW_OPS: no pass
            score = block_redraw_score_held if reuse and cfg.masked else block_redraw_score
            for tot in backend.map(score, ctx):
                totals += tot
        took = False
        for (k, u), i, (gcol, squ) in zip(atts, which, cols, strict=True):
            done += 1
            if i is None or not np.isfinite(totals[i]):
                continue
            log_a = totals[i]
            if cfg.temperature != 1.0:
                log_a /= cfg.temperature
            if math.log(g.random()) < log_a:
                st.peek = {}  # peeked under the basis this swap leaves
                backend.map(block_redraw_apply, ctx._replace(redraw=(sent[i],)))
                _swap_basis(st, k, int(u), gcol, squ)
                accepted += 1
                took = True
                break
        if not took:
            break
    return accepted


def _finish(backend, fn, ctx, cfg, entropy, chain, st, norm_a2, n_obs, g, peek=()):
    """The second half of a swap (``fn``: apply it, sweep W), then sigma^2. With
    ``cfg.score_visited`` the blocks also return the least-squares bound of a basis not
    scored yet, which decides whether it gets its exact score; with ``peek`` (``fn``
    :func:`block_collapsed_finish`) the peeked columns under the new basis, kept in
    ``st.peek`` for the next move."""
    key = tuple(int(j) for j in np.sort(st.J))
    box = cfg.score_visited and key not in st.scored
    P = pinv_sym(st.G) if box else None
    res = backend.map(fn, ctx._replace(box_score=box, P2=P, peek=peek))
    if peek:
        st.peek = _merged(r[-1] for r in res)
    st.sse = sse_from_stats(norm_a2, sum(r[0] for r in res), sum(r[1] for r in res))
    if box:
        _score_bounded(backend, cfg, entropy, chain, st, norm_a2, key,
                       norm_a2 - sum(r[2] for r in res), P)
    pri = cfg.priors
    st.sigma2 = draw_sigma2(g, st.sse, n_obs, pri.alpha_sigma, pri.beta_sigma)


def _move_annealed(backend, cfg, entropy, chain, st, norm_a2, n_obs, g, retained):
    """The annealed swap (nonequilibrium candidate Monte Carlo): slot k moves to a
    uniform column u outside J while W follows through ``cfg.n_anneal`` intermediate
    distributions; accepted with min(1, exp(work)) (``block_annealed_propose``).
    Exact for p(J, W, sigma^2 | A); the other rows of W adapt to the new column on the
    way, which the collapsed move, at fixed W_{-k}, cannot do."""
    K = cfg.n_components
    pri = cfg.priors
    k = int(g.integers(K))
    direction = 1 if g.random() < 0.5 else -1
    u, pos = _next_candidate(entropy, chain, st, backend.n_cols, st.J)
    _ensure_rows(backend, cfg, entropy, chain, st, [u], st.J)
    st.cand_pos = pos
    gcol, squ = backend.column(u)
    if cfg.avoid_degenerate and _in_span(st.G, k, gcol, squ):
        return False, 0.0
    gnew = proposal_gram(st.G, k, gcol, squ)[1]
    T = cfg.n_anneal
    ctx = StepContext(entropy=entropy, chain=chain, iteration=st.iteration, priors=pri,
                      sigma2=st.sigma2, G=st.G, p=k, u=u, J=st.J, g_rows=gnew[None],
                      lambdas=tuple((t + 1) / T for t in range(T)), direction=direction)
    work = float(sum(backend.map(block_annealed_propose, ctx)))
    if cfg.temperature != 1.0:
        work = work / cfg.temperature
    accepted = bool(g.random() < math.exp(min(work, 0.0)))
    if accepted:
        _swap_basis(st, k, u, gcol, squ)
    return accepted, min(1.0, math.exp(min(work, 0.0)))


def _swap_basis(st: ClientState, k, u, gcol, squ):
    """Slot k takes column u (``gcol`` = C^T a_u, ``squ`` = ||a_u||^2). When a_u is a
    copy of the outgoing column (||a_u - a_j||^2 = 0 to rounding), the new basis is the
    same matrix C: it inherits the old basis's score instead of a new box-constrained
    fit (data with duplicated columns swap copies often)."""
    old_key = tuple(int(j) for j in np.sort(st.J))
    gkk = st.G[k, k]
    gap = squ + gkk - 2.0 * gcol[k]
    st.J = st.J.copy()
    st.J[k] = u
    st.G = proposal_gram(st.G, k, gcol, squ)[0]
    if old_key in st.scored and abs(gap) <= 1e-12 * max(squ, gkk, 1e-300):
        new_key = tuple(int(j) for j in np.sort(st.J))
        st.scored.setdefault(new_key, st.scored[old_key])


def _finish_annealed(backend, cfg, entropy, chain, st, norm_a2, n_obs, g, record, accepted):
    ctx = StepContext(entropy=entropy, chain=chain, iteration=st.iteration, priors=cfg.priors,
                      sigma2=st.sigma2, G=st.G, accept=accepted, record=record)
    _finish(backend, block_annealed_finish, ctx, cfg, entropy, chain, st, norm_a2, n_obs, g)


#: One function per move (blackjax style): ``ChainConfig.sampler`` -> the iteration body.
MOVES = {"aggressive": _move_aggressive, "plain": _move_plain, "collapsed": _move_collapsed}


def _remember_score(cfg, st: ClientState, key, score):
    if len(st.scored) >= cfg.max_scored:
        st.scored.pop(next(iter(st.scored)))  # oldest first: only costs a rescoring
    st.scored[key] = score
    if score < st.best_score:
        st.best_key, st.best_score = key, score


def _score_bounded(backend, cfg, entropy, chain, st: ClientState, norm_a2, key, bound, P):
    """Score the blocks' current basis ``key`` exactly unless its lower bound (the
    unconstrained least-squares SSE) already rules out beating the best basis so far;
    a ruled-out basis is remembered with its bound, which can never become the best.
    ``P`` = pinv(G) of the basis."""
    if bound >= st.best_score:
        _remember_score(cfg, st, key, bound)
        return
    ctx = StepContext(entropy=entropy, chain=chain, iteration=st.iteration, priors=cfg.priors,
                      sigma2=1.0, G=st.G, P2=P)
    res = backend.map(block_box_score, ctx)
    _remember_score(cfg, st, key, sse_from_stats(norm_a2, sum(r[0] for r in res),
                                                 sum(r[1] for r in res)))


def _score_current(backend, cfg, entropy, chain, st: ClientState, norm_a2):
    """Score the current basis by its exact box-constrained least-squares SSE, unless
    it was scored already or cannot beat the best (``cfg.score_visited``)."""
    key = tuple(int(j) for j in np.sort(st.J))
    if key in st.scored:
        return
    bound = -np.inf
    P = pinv_sym(st.G)
    if np.isfinite(st.best_score) and not cfg.masked:
        ctx = StepContext(entropy=entropy, chain=chain, iteration=st.iteration,
                          priors=cfg.priors, sigma2=1.0, G=st.G, P2=P)
        bound = norm_a2 - sum(backend.map(block_ls_bound, ctx))
    _score_bounded(backend, cfg, entropy, chain, st, norm_a2, key, bound, P)


def warmup_temperature_at(cfg: ChainConfig, t: int) -> float:
    """The swap temperature of warm-up iteration ``t``: ``warmup_temperature`` at the
    first, falling geometrically to 1 at ``tempered_warmup`` (1 from there on)."""
    if t >= cfg.tempered_warmup:
        return 1.0
    return float(cfg.warmup_temperature) ** (1.0 - t / cfg.tempered_warmup)


def step(backend, cfg: ChainConfig, entropy: int, chain: int, st: ClientState, norm_a2, n_obs):
    """Run iteration ``st.iteration`` with the move of ``cfg.sampler`` and advance ``st``
    in place (traces, retained draws, visited bases)."""
    t = st.iteration
    g = stream(entropy, chain, t, 0, CLIENT)
    retained = t >= cfg.burn_in and (t - cfg.burn_in) % cfg.thin == 0
    if cfg.pool_size and t and t % cfg.pool_every == 0:
        _refresh_pool(backend, cfg, entropy, chain, st)
    move_cfg = cfg
    if t < cfg.tempered_warmup:
        # warm-up (discarded): the same moves with flattened swap odds, and no swap into
        # a rank-deficient basis (two copies of one column can hold a coefficient the
        # box forbids either alone, a mode the chain cannot leave once cooled)
        move_cfg = cfg._replace(temperature=cfg.temperature * warmup_temperature_at(cfg, t),
                                avoid_degenerate=True)
    if t < cfg.search_warmup:
        # warm-up (discarded): the least-squares search; the chain is the configured
        # sampler from the state the search reached
        move_cfg = cfg._replace(sampler="aggressive", swap_score="lstsq")
    accepted, prob = MOVES[move_cfg.sampler](backend, move_cfg, entropy, chain, st, norm_a2,
                                             n_obs, g, retained)
    if cfg.score_visited:
        _score_current(backend, cfg, entropy, chain, st, norm_a2)
    if retained:
        # the retained draw is the state after the sweep: fix its SSE now
        key = tuple(int(j) for j in np.sort(st.J))
        st.set_best[key] = min(st.set_best[key], st.sse)
        st.visits[key] = st.visits.get(key, 0) + 1
        st.draws_J.append(np.sort(st.J))
        st.draws_sigma2.append(st.sigma2)
        st.draws_sse.append(st.sse)
    # the SSE is over the observed entries (all of them unless masked): its mean per entry
    st.trace_mse.append(st.sse / n_obs)
    st.trace_sigma2.append(st.sigma2)
    st.trace_accepted.append(bool(accepted))
    st.trace_accept_prob.append(float(prob))
    st.iteration = t + 1


def _fixed_basis_start(backend, cfg, entropy, key, chain, current=None):
    # ``current``: the basis the blocks hold now (slot order). When it is ``key`` up to
    # order, H is reordered in place of a pass over A.
    J = np.asarray(key, dtype=np.int64)
    if current is not None and np.array_equal(np.sort(current), np.sort(J)):
        pos = {int(c): i for i, c in enumerate(current)}
        backend.map(block_rebase, StepContext(
            entropy=entropy, chain=chain, iteration=-1, priors=cfg.priors, sigma2=1.0,
            G=np.zeros((0, 0)), perm=np.array([pos[int(j)] for j in J], dtype=np.int64)))
        norm_a2, n_obs = backend.norm_a2, backend.n_obs
    else:
        norm_a2, n_obs = backend.init_blocks(J, cfg.priors, entropy, chain)
    G = backend.gram(J)
    P = pinv_sym(G)
    base = StepContext(entropy=entropy, chain=chain, iteration=cfg.n_iter, priors=cfg.priors,
                       sigma2=1.0, G=G, P2=P)
    backend.map(block_lstsq_start, base)
    return G, norm_a2, n_obs


def map_estimate(backend, cfg: ChainConfig, entropy: int, key, sigma2: float, *,
                 started: bool = False, max_sweeps: int = 200, rtol: float = 1e-10,
                 chain: int = 0, current=None):
    """MAP of W given the basis ``key`` and sigma^2, by iterated conditional modes.

    The conditional posterior of W given J and sigma^2 is a Gaussian restricted to a
    box, so it is log-concave and coordinate-wise modes converge to its unique mode.
    Starts from the clipped least-squares fit unless ``started`` (blocks already hold
    ``key``, e.g. after :func:`refine`). Returns (W, n_sweeps).
    """
    if started:
        G = backend.gram(np.asarray(key, dtype=np.int64))
        norm_a2 = backend.norm_a2
    else:
        G, norm_a2, _ = _fixed_basis_start(backend, cfg, entropy, key, chain, current)
    ctx = StepContext(entropy=entropy, chain=chain, iteration=cfg.n_iter, priors=cfg.priors,
                      sigma2=sigma2, G=G)
    prev = np.inf
    n = 0
    while n < max_sweeps:
        res = backend.map(block_icm, ctx)
        n += 1
        sse = sse_from_stats(norm_a2, sum(r[0] for r in res), sum(r[1] for r in res))
        if prev - sse <= rtol * max(sse, 1e-300):
            break
        prev = sse
    map_key = ("map", *key)
    backend.map(block_icm, ctx._replace(record=(map_key, np.arange(len(key)), ())))
    _, W, _ = backend.posterior(map_key)
    return W, n + 1


def lstsq_estimate(backend, cfg: ChainConfig, entropy: int, key, *, started: bool = False,
                   chain: int = 0, current=None):
    """The exact box-constrained least-squares W given the basis ``key``: the W with
    ``a <= W <= b`` that minimises ||A - C W||^2 (the maximum-likelihood W inside the
    prior's support). Starts from the blocks' W when ``started`` (e.g. after
    :func:`refine`), else from the clipped least-squares fit. Returns W, rows in the
    order of ``key``."""
    J = np.asarray(key, dtype=np.int64)
    if started:
        G = backend.gram(J)
    else:
        G, _, _ = _fixed_basis_start(backend, cfg, entropy, key, chain, current)
    ls_key = ("lstsq", *key)
    backend.map(block_box_lstsq, StepContext(
        entropy=entropy, chain=chain, iteration=cfg.n_iter, priors=cfg.priors, sigma2=1.0,
        G=G, P2=pinv_sym(G), record=(ls_key, np.arange(len(J)), ())))
    _, W, _ = backend.posterior(ls_key)
    return W


def refine(backend, cfg: ChainConfig, entropy: int, key, n_sweeps: int, chain: int = 0,
           current=None):
    """Posterior of W given the reported basis: ``n_sweeps`` Gibbs sweeps (with sigma^2
    draws) with J fixed to ``key``, started from the clipped least-squares fit.

    The blocks are re-initialised for ``key`` (one pass over A for H), so call this
    after everything else has been read from them. Returns (count, mean, sd, sigma2s).
    """
    pri = cfg.priors
    G, norm_a2, n_obs = _fixed_basis_start(backend, cfg, entropy, key, chain, current)
    J = np.asarray(key, dtype=np.int64)
    hw, wgw = backend.quadratics(G)
    sse = sse_from_stats(norm_a2, hw, wgw)
    perm = np.arange(len(J))
    sigma2s = []
    for i in range(n_sweeps):
        t = cfg.n_iter + 1 + i
        g = stream(entropy, chain, t, 0, CLIENT)
        sigma2 = draw_sigma2(g, sse, n_obs, pri.alpha_sigma, pri.beta_sigma)
        ctx = StepContext(entropy=entropy, chain=chain, iteration=t, priors=pri,
                          sigma2=sigma2, G=G, record=(key, perm, ()))
        res = backend.map(block_plain_finish, ctx)
        sse = sse_from_stats(norm_a2, sum(r[0] for r in res), sum(r[1] for r in res))
        sigma2s.append(sigma2)
    n, mean, sd = backend.posterior(key)
    return n, mean, sd, np.asarray(sigma2s)


def run_chain(backend, cfg: ChainConfig, entropy: int, chain: int = 0, J0=None,
              state: ClientState | None = None, callback=None) -> ChainOutput:
    """Run (or continue) one chain to ``cfg.n_iter`` iterations."""
    t = time.perf_counter()
    if state is None:
        state, norm_a2, n_obs = initial_state(backend, cfg, entropy, chain, J0)
    else:
        norm_a2, n_obs = backend.norm_a2, backend.n_obs

    def tick():
        # the chain's time so far, in the state itself: a checkpoint (written by the
        # callback) carries it, so a fit stopped and resumed reports the time of all its
        # runs (it counted only the last one)
        nonlocal t
        now = time.perf_counter()
        state.elapsed += now - t
        t = now

    while state.iteration < cfg.n_iter:
        step(backend, cfg, entropy, chain, state, norm_a2, n_obs)
        tick()
        if callback is not None:
            callback(state)
            tick()
    tick()
    return ChainOutput(state=state, norm_a2=norm_a2, n_obs=n_obs)
