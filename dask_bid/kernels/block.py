"""Everything a column block does in one iteration, as pure functions.

A ``BlockState`` holds one block's slice of the chain: W, H = C^T A[:, block],
GBTN's Mu and Tau, the aggressive sampler's proposal, cached candidate rows of
A^T A and the posterior accumulators. Each operation returns a new state and a
small result (scalars or K-vectors): the engine may run it on any worker, retry
it, or replay it from a checkpoint, and get the same answer, because the random
stream is derived from (chain, iteration, block) alone.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .boxls import box_lstsq
from .collapsed import candidate_terms, draw_slot_row, slot_marginal, slot_terms
from .pivot import pivot_block, pivot_block_masked
from .priors import Priors
from .redraw import redraw_block
from .rng import ANNEAL, PIVOT, PRIOR, REDRAW, SLOT, SWEEP, SWEEP2, stream
from .swap import swap_delta, swap_delta_masked, swapped_grams, swapped_h
from .sweep import draw_hyper_block, draw_prior_block, sweep_block

__all__ = [
    "BlockState",
    "StepContext",
    "block_init",
    "block_column",
    "block_add_rows",
    "block_aggressive",
    "block_plain_propose",
    "block_plain_finish",
    "block_collapsed_score",
    "block_collapsed_finish",
    "block_pivot_score",
    "block_pivot_apply",
    "block_redraw_score",
    "block_redraw_score_held",
    "block_redraw_apply",
    "block_box_score",
    "block_ls_bound",
    "block_annealed_propose",
    "block_annealed_finish",
    "block_lstsq_start",
    "block_lstsq_score",
    "block_icm",
    "block_box_lstsq",
    "block_rebase",
    "block_set_mask_row",
    "block_posterior",
    "block_traces",
]


class BlockState(NamedTuple):
    index: int
    start: int
    stop: int
    W: np.ndarray  # (K, nb) current W, rows in slot order of J
    H: np.ndarray  # (K, nb) C^T A[:, block] for the current J
    Mu: np.ndarray | None
    Tau: np.ndarray | None
    sq: np.ndarray  # (nb,) ||a_n||^2, the diagonal of A^T A
    W2: np.ndarray | None = None  # aggressive proposal, or the plain sampler's pending row
    H2: np.ndarray | None = None
    Mu2: np.ndarray | None = None
    Tau2: np.ndarray | None = None
    cand_cols: tuple = ()  # cached rows a_u^T A[:, block], in insertion order
    cand_rows: np.ndarray | None = None
    acc: dict | None = None  # sorted J -> (count, sum, sum of squares), rows in sorted J order
    trace_local: np.ndarray | None = None  # local indices of columns whose W draws are kept
    traces: tuple = ()  # retained draws of W[:, trace_local] (K, t) in sorted J order
    # missing="mask": per-column Grams (nb, K, K) of the current basis and the proposal,
    # and the new row p of every column's Gram for the pending swap (K, nb)
    Gn: np.ndarray | None = None
    Gn2: np.ndarray | None = None
    mrow: np.ndarray | None = None


class StepContext(NamedTuple):
    """What the client sends to every block for one iteration (all small)."""

    entropy: int
    chain: int
    iteration: int
    priors: Priors
    sigma2: float
    G: np.ndarray  # Gram of the current J (after the choice / swap)
    G2: np.ndarray | None = None  # Gram of the proposal (aggressive)
    take2: bool = False  # aggressive: the proposal becomes current first
    accept: bool = False  # plain: the pending swap is accepted
    p: int = -1  # slot being swapped
    u: int = -1  # incoming column
    g_new: np.ndarray | None = None  # plain: row p of the proposal's Gram
    # when retained: (sorted J key, permutation slot -> sorted order, keys to forget)
    record: tuple | None = None
    # aggressive: pseudo-inverse of G2; when given, the proposal's W starts from the
    # clipped least-squares fit instead of a copy of the current W
    P2: np.ndarray | None = None
    ls_start: bool = False  # start the proposal's W at clip(P2 @ H2) (else a copy of W)
    ls_score: bool = False  # also return <H2, W_ls>, <W_ls, G2 W_ls> for W_ls = clip(P2 @ H2)
    J: np.ndarray | None = None  # the current basis (slot order), for masked swaps
    # aggressive: (column, proposal?) pairs whose (H[:, col], ||a_col||^2) the blocks
    # holding them return after the sweep: the next iteration's incoming column for
    # either outcome of its swap choice, so that it needs no round trip of its own
    peek: tuple = ()
    perm: np.ndarray | None = None  # block_rebase: new slot order as indices of the old
    # collapsed swap: the candidate columns for slot p, and for each the new row p of G
    # (C'^T a_u with entry p = ||a_u||^2); ``choice`` indexes ``cands`` (-1: none taken)
    cands: tuple = ()
    g_rows: np.ndarray | None = None
    choice: int = -1
    # after the sweep, also return <H, P2 H> (P2 = pinv(G)): ||A||^2 minus it is the
    # unconstrained least-squares SSE, a lower bound of the basis's box-constrained SSE
    box_score: bool = False
    # annealed swap: the path's lambdas (0 < ... < 1) and the sweep direction (+1 / -1)
    lambdas: tuple = ()
    direction: int = 1
    # pivot swap: one PivotAttempt per attempt (score), or the accepted one (apply)
    pivot: tuple = ()
    # redraw swap: one RedrawAttempt per attempt (score), or the accepted one (apply)
    redraw: tuple = ()


class PivotAttempt(NamedTuple):
    """One pivot swap proposal, slot k: p -> u (kernels/pivot.py for the map)."""

    k: int
    p: int
    u: int
    d: np.ndarray  # the map's coefficients (entry k unused)
    gs: np.ndarray  # C_{-k}^T a_s of the source's slot column a_s (entry k unused)
    ss: float  # ||a_s||^2
    forward: bool  # the current basis is the source
    gnew: np.ndarray  # row k of the Gram after the swap
    squ: float  # ||a_u||^2
    sub: int = 0  # the attempt's number within the iteration (its random stream)
    w_new: tuple = ()  # apply: the new columns p and u of W (the GHK draws)
    # missing="mask": d, gs and ss are per column and computed in the blocks (None here);
    # ``row`` indexes u's products over each column's observed rows in ``state.mrow``
    row: int = -1


class RedrawAttempt(NamedTuple):
    """One redraw swap proposal: slot k takes column u (kernels/redraw.py)."""

    k: int
    u: int
    G2: np.ndarray  # the Gram after the swap (dense; masked: the blocks' own)
    sub: int = 0  # the attempt's number within the iteration (its random stream)
    # missing="mask": u's products over each column's observed rows in ``state.mrow``
    row: int = -1


def _local(state, col):
    return col - state.start


def _row_of(state, col):
    i = state.cand_cols.index(col)
    return state.cand_rows[i]


def block_init(index, start, stop, H, sq, priors, entropy, chain, W=None, trace_cols=(),
               Gn=None):
    """Initial state: W drawn from the prior unless given."""
    K = H.shape[0]
    nb = stop - start
    Mu = Tau = None
    if W is None:
        W, Mu, Tau = draw_prior_block(stream(entropy, chain, -1, index, PRIOR), (K, nb), priors)
    elif priors.hierarchical:
        _, Mu, Tau = draw_prior_block(stream(entropy, chain, -1, index, PRIOR), (K, nb), priors)
    trace_local = np.array([c - start for c in trace_cols if start <= c < stop], dtype=np.int64)
    return BlockState(index=index, start=start, stop=stop, W=np.array(W, dtype=np.float64),
                      H=np.ascontiguousarray(H, dtype=np.float64), Mu=Mu, Tau=Tau,
                      sq=np.asarray(sq, dtype=np.float64), acc={}, trace_local=trace_local,
                      cand_rows=np.empty((0, nb)), Gn=Gn)


def block_column(state: BlockState, col: int, proposal: bool = False):
    """(H[:, col], ||a_col||^2) for a column this block holds."""
    H = state.H2 if proposal else state.H
    j = _local(state, col)
    return H[:, j].copy(), float(state.sq[j])


def _peeked(state: BlockState, peek) -> dict:
    """{(col, proposal): block_column(...)} for the peeked columns this block holds:
    a move returns the columns the client's next step will ask for with its own
    results, saving that step a round trip (the same floats as a separate fetch)."""
    return {(c, pr): block_column(state, c, pr) for c, pr in peek
            if state.start <= c < state.stop}


def block_add_rows(state: BlockState, cols, rows, max_rows: int):
    """Cache rows a_u^T A[:, block] of swap candidates, oldest evicted first."""
    cols = tuple(int(c) for c in cols)
    new = set(cols)
    keep = [i for i, c in enumerate(state.cand_cols) if c not in new]
    if len(cols) >= max_rows:
        keep = []  # every old row would be evicted: no copy of them
    all_cols = tuple(state.cand_cols[i] for i in keep) + cols
    rows = np.asarray(rows, dtype=np.float64)
    # a batch that replaces the whole cache is kept as received (no second copy of it)
    all_rows = np.concatenate([state.cand_rows[keep], rows]) if keep else rows
    if len(all_cols) > max_rows:
        all_cols = all_cols[-max_rows:]
        all_rows = all_rows[-max_rows:]
    return state._replace(cand_cols=all_cols, cand_rows=np.ascontiguousarray(all_rows))


def _record(state: BlockState, W, record):
    if record is None:
        return state
    key, perm, evict = record
    Ws = W[np.asarray(perm)]
    acc = dict(state.acc)
    for k in evict:
        acc.pop(k, None)
    if key in acc:
        n, s, s2 = acc[key]
        acc[key] = (n + 1, s + Ws, s2 + Ws * Ws)
    else:
        acc[key] = (1, Ws.copy(), Ws * Ws)
    traces = state.traces
    if state.trace_local is not None and state.trace_local.size:
        traces = traces + ((key, Ws[:, state.trace_local].copy()),)
    return state._replace(acc=acc, traces=traces)


def _sweep_with_hyper(gen, G, H, W, Mu, Tau, sigma2, priors, Gn=None):
    hw, wgw = sweep_block(gen, G, H, W, sigma2, priors, Mu, Tau, Gn=Gn)
    if priors.hierarchical:
        draw_hyper_block(gen, W, Mu, Tau, priors)
    return hw, wgw


def _copy(x):
    return None if x is None else x.copy()


def block_aggressive(state: BlockState, ctx: StepContext):
    """One aggressive iteration (Algorithm 2) on a block.

    Optionally promote the proposal to current, form the new proposal (row p of
    H from the cached row of the incoming column), sweep both W's.
    Returns the new state and (hw1, wgw1, hw2, wgw2), followed with ``ctx.ls_score`` by
    the quadratics of the proposal's clipped least-squares W and with ``ctx.peek`` by a
    dict {(col, proposal): (H[:, col], ||a_col||^2)} of the peeked columns held here.
    """
    if ctx.take2:
        W, H, Mu, Tau, Gn = state.W2, state.H2, state.Mu2, state.Tau2, state.Gn2
    else:
        W, H, Mu, Tau, Gn = state.W, state.H, state.Mu, state.Tau, state.Gn
    Gn2 = None if Gn is None else swapped_grams(Gn, ctx.p, state.mrow)
    W = W.copy()
    Mu, Tau = _copy(Mu), _copy(Tau)
    H2 = swapped_h(H, ctx.p, _row_of(state, ctx.u))
    score = ()
    if ctx.ls_start or ctx.ls_score:
        W_ls = np.clip(ctx.P2 @ H2, ctx.priors.a, ctx.priors.b)
        if ctx.ls_score:
            score = _quadratics(ctx.G2, Gn2, H2, W_ls)
    W2 = W_ls if ctx.ls_start else W.copy()
    Mu2, Tau2 = _copy(Mu), _copy(Tau)
    g1 = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, SWEEP)
    g2 = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, SWEEP2)
    hw1, wgw1 = _sweep_with_hyper(g1, ctx.G, H, W, Mu, Tau, ctx.sigma2, ctx.priors, Gn)
    hw2, wgw2 = _sweep_with_hyper(g2, ctx.G2, H2, W2, Mu2, Tau2, ctx.sigma2, ctx.priors, Gn2)
    new = state._replace(W=W, H=H, Mu=Mu, Tau=Tau, W2=W2, H2=H2, Mu2=Mu2, Tau2=Tau2,
                         Gn=Gn, Gn2=Gn2, mrow=None)
    if ctx.peek:
        return _record(new, W, ctx.record), (hw1, wgw1, hw2, wgw2, *score,
                                             _peeked(new, ctx.peek))
    return _record(new, W, ctx.record), (hw1, wgw1, hw2, wgw2, *score)


def block_plain_propose(state: BlockState, ctx: StepContext):
    """Plain sampler, swap half: draw the incoming row from its prior and return
    this block's share of the SSE change (d<H,W>, d<W,GW>) if slot p took column u.
    """
    p, G, g = ctx.p, ctx.G, ctx.g_new
    nb = state.stop - state.start
    gen = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, PRIOR)
    wn, mun, taun = draw_prior_block(gen, (1, nb), ctx.priors)
    wn = wn[0]
    if state.Gn is None:
        d_hw, d_wgw = swap_delta(G, state.H, state.W, p, g, _row_of(state, ctx.u), wn)
    else:
        d_hw, d_wgw = swap_delta_masked(state.Gn, state.H, state.W, p, state.mrow,
                                        _row_of(state, ctx.u), wn)
    pending = state._replace(W2=wn, Mu2=None if mun is None else mun[0],
                             Tau2=None if taun is None else taun[0])
    return pending, (d_hw, d_wgw)


def block_plain_finish(state: BlockState, ctx: StepContext):
    """Plain sampler, second half: apply the swap if accepted, then sweep W.
    Returns the new state and (hw, wgw)."""
    W, H, Mu, Tau = state.W.copy(), state.H, _copy(state.Mu), _copy(state.Tau)
    Gn = state.Gn
    if ctx.accept:
        H = swapped_h(H, ctx.p, _row_of(state, ctx.u))
        if Gn is not None:
            Gn = swapped_grams(Gn, ctx.p, state.mrow)
        W[ctx.p] = state.W2
        if Mu is not None:
            Mu[ctx.p] = state.Mu2
            Tau[ctx.p] = state.Tau2
    gen = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, SWEEP)
    hw, wgw = _sweep_with_hyper(gen, ctx.G, H, W, Mu, Tau, ctx.sigma2, ctx.priors, Gn)
    new = state._replace(W=W, H=H, Mu=Mu, Tau=Tau, W2=None, Mu2=None, Tau2=None, Gn=Gn,
                         mrow=None)
    return _record(new, W, ctx.record), (hw, wgw)


def _slot_prior(state: BlockState, priors: Priors, k: int):
    # GBTN conditions on the slot's own (mu, tau) row; GBT's are constants
    if state.Mu is None:
        return priors.mu, priors.tau
    return state.Mu[k], state.Tau[k]


def block_collapsed_score(state: BlockState, ctx: StepContext):
    """Collapsed swap, first half: this block's share of the log marginal L(c) of slot
    ``ctx.p`` for the column it holds now and for each candidate in ``ctx.cands``
    (row p of W integrated out, the other rows and sigma^2 fixed; MODEL_NOTES 8).

    Returns the unchanged state and an array of ``1 + len(ctx.cands)`` partial sums,
    the current column first. Masked: ``state.mrow`` holds the candidates' new Gram
    rows, (len(cands), K, nb).
    """
    k = ctx.p
    pri = ctx.priors
    mu, tau = _slot_prior(state, pri, k)
    out = np.empty(1 + len(ctx.cands))
    g, h = slot_terms(ctx.G, state.H, state.W, k, state.Gn)
    out[0] = slot_marginal(g, h, mu, tau, ctx.sigma2, pri.a, pri.b)
    for i, u in enumerate(ctx.cands):
        q = None if state.Gn is None else state.mrow[i]
        g, h = candidate_terms(ctx.g_rows[i], _row_of(state, u), state.W, k, q)
        out[1 + i] = slot_marginal(g, h, mu, tau, ctx.sigma2, pri.a, pri.b)
    return state, out


def block_collapsed_finish(state: BlockState, ctx: StepContext):
    """Collapsed swap, second half, then one Gibbs sweep of W (and GBTN's mu, tau).

    When ``ctx.accept``, slot ``ctx.p`` takes ``ctx.u`` (candidate ``ctx.choice``): row
    p of H becomes the cached row a_u^T A[:, block] and row p of W is drawn from its
    exact conditional given the other rows, which completes the Metropolis-Hastings
    proposal whose ratio :func:`block_collapsed_score` gave. ``ctx.G`` is the Gram of
    the basis after the decision. Returns the new state and (hw, wgw), followed with
    ``ctx.box_score`` by this block's share of <H, pinv(G) H> (a lower bound of the basis's
    box-constrained least-squares SSE is ||A||^2 minus the total), then with ``ctx.peek``
    by the peeked columns held here, under the new basis (:func:`_peeked`).
    """
    W, H, Mu, Tau = state.W.copy(), state.H, _copy(state.Mu), _copy(state.Tau)
    Gn = state.Gn
    k = ctx.p
    pri = ctx.priors
    if ctx.accept:
        q = None if Gn is None else state.mrow[ctx.choice]
        row_u = _row_of(state, ctx.u)
        g, h = candidate_terms(ctx.g_rows[ctx.choice], row_u, W, k, q)
        mu, tau = _slot_prior(state, pri, k)
        gen = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, SLOT)
        W[k] = draw_slot_row(gen, g, h, mu, tau, ctx.sigma2, pri.a, pri.b)
        H = swapped_h(H, k, row_u)
        if Gn is not None:
            Gn = swapped_grams(Gn, k, q)
    gen = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, SWEEP)
    hw, wgw = _sweep_with_hyper(gen, ctx.G, H, W, Mu, Tau, ctx.sigma2, pri, Gn)
    new = state._replace(W=W, H=H, Mu=Mu, Tau=Tau, Gn=Gn, mrow=None)
    out = (hw, wgw)
    if ctx.box_score:
        out = out + (_ls_term(new, ctx),)
    if ctx.peek:
        out = out + (_peeked(new, ctx.peek),)
    return _record(new, W, ctx.record), out


def _pivot_args(state: BlockState, att: PivotAttempt):
    crow = _row_of(state, att.u)
    hs = state.H[att.k] if att.forward else crow
    nb = state.stop - state.start
    skip = np.zeros(nb, dtype=np.bool_)
    for c in (att.p, att.u):
        if state.start <= c < state.stop:
            skip[c - state.start] = True
    return crow, hs, skip


def _pivot_masked(state: BlockState, ctx: StepContext, att: PivotAttempt, crow, skip,
                  write=False):
    # the masked map: every column its own (kernels/pivot.py, pivot_block_masked)
    return pivot_block_masked(state.Gn, state.H, state.W, state.Mu, state.Tau, ctx.priors,
                              att.k, state.mrow[att.row], crow, att.forward, ctx.sigma2,
                              skip, write=write)


def _new_gram_row(state: BlockState, att: PivotAttempt):
    # masked: row k of every column's Gram after the swap, (K, nb)
    X = state.mrow[att.row]
    q = X[:-1].copy()
    q[att.k] = X[-1]
    return q


def block_pivot_score(state: BlockState, ctx: StepContext):
    """Pivot swap, first half: for each attempt in ``ctx.pivot``, this block's share of
    the log ratio over its columns other than p and u (:func:`kernels.pivot.pivot_block`,
    -inf if the map leaves the box), and for p and u, where this block holds them,
    what the client needs for their GHK terms: {(attempt, column): (H[:, c], W[:, c],
    a_u^T a_c, Mu[:, c], Tau[:, c])}. Returns the unchanged state and (totals, dict),
    followed with ``ctx.peek`` by the peeked columns held here (:func:`_peeked`).

    Masked: ``state.mrow`` holds, for every column in ``ctx.cands`` (the attempts'
    incoming columns), its products over each column's observed rows, (m, K + 1, nb)
    (:func:`kernels.pivot.pivot_block_masked`); the totals include the block's
    sum_n log|det_n| of the map, and the GHK entries also carry the column's Gram
    before and after the swap (G_c, G'_c).
    """
    totals = np.empty(len(ctx.pivot))
    cols = {}
    masked = state.Gn is not None
    GW = None if masked else ctx.G @ state.W  # one product for every attempt
    for i, att in enumerate(ctx.pivot):
        crow, hs, skip = _pivot_args(state, att)
        if masked:
            tot, logdet = _pivot_masked(state, ctx, att, crow, skip)
            totals[i] = tot + logdet
            q = _new_gram_row(state, att)
        else:
            totals[i] = pivot_block(ctx.G, state.H, state.W, state.Mu, state.Tau,
                                    ctx.priors, att.k, att.d, att.gs, att.ss, hs,
                                    att.forward, att.gnew, crow, att.squ, ctx.sigma2, skip,
                                    GW=GW)
        for c in (att.p, att.u):
            if state.start <= c < state.stop:
                j = c - state.start
                cols[(i, c)] = (state.H[:, j].copy(), state.W[:, j].copy(), float(crow[j]),
                                None if state.Mu is None else state.Mu[:, j].copy(),
                                None if state.Tau is None else state.Tau[:, j].copy())
                if masked:
                    Gc = state.Gn[j].copy()
                    G2 = Gc.copy()
                    G2[att.k, :] = q[:, j]
                    G2[:, att.k] = q[:, j]
                    cols[(i, c)] += (Gc, G2)
    if ctx.peek:
        return state, (totals, cols, _peeked(state, ctx.peek))
    return state, (totals, cols)


def block_pivot_apply(state: BlockState, ctx: StepContext):
    """Pivot swap, second half (accepted): the other columns' rows != k follow the
    map, their row k is drawn from its exact conditional under the new basis, columns
    p and u take the client's GHK draws, and row k of H becomes a_u^T A[:, block]
    (masked: and row k of every column's Gram, from ``state.mrow``).
    ``ctx.G`` is the Gram *before* the swap. Returns the new state and None."""
    att = ctx.pivot[0]
    k = att.k
    pri = ctx.priors
    crow, hs, skip = _pivot_args(state, att)
    Gn = state.Gn
    if Gn is not None:
        _, _, W, h, g = _pivot_masked(state, ctx, att, crow, skip, write=True)
        Gn = swapped_grams(Gn, k, _new_gram_row(state, att))
    else:
        _, W, h = pivot_block(ctx.G, state.H, state.W, state.Mu, state.Tau, pri, k, att.d,
                              att.gs, att.ss, hs, att.forward, att.gnew, crow, att.squ,
                              ctx.sigma2, skip, write=True)
        g = att.squ
    mu, tau = _slot_prior(state, pri, k)
    gen = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, PIVOT, att.sub)
    W[k] = draw_slot_row(gen, g, h, mu, tau, ctx.sigma2, pri.a, pri.b)
    for c, w in zip((att.p, att.u), att.w_new, strict=True):
        if state.start <= c < state.stop:
            W[:, c - state.start] = w
    return state._replace(W=W, H=swapped_h(state.H, k, crow), Gn=Gn, mrow=None), None


def _redraw(state: BlockState, ctx: StepContext, att: RedrawAttempt):
    # the attempt's W' and log ratio share; its stream is keyed by the attempt, so the
    # apply pass draws the very W' the score pass weighed
    gen = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, REDRAW, att.sub)
    masked = state.Gn is not None
    q = _new_gram_row(state, att) if masked else None
    return redraw_block(gen, ctx.G, att.G2, state.H, state.W, state.Mu, state.Tau,
                        ctx.priors, att.k, _row_of(state, att.u), ctx.sigma2,
                        Gn=state.Gn, q=q)


def block_redraw_score(state: BlockState, ctx: StepContext):
    """Redraw swap, first half: for each attempt in ``ctx.redraw``, this block's share of
    the log acceptance ratio (:func:`kernels.redraw.redraw_block`: every column's GHK
    weight of a fresh draw under J' minus that of its current value under J). Masked:
    ``state.mrow`` holds u's products over each column's observed rows (MASK_ROW_OPS
    kind "pivot"). Returns the unchanged state and the totals."""
    totals = np.empty(len(ctx.redraw))
    for i, att in enumerate(ctx.redraw):
        totals[i] = _redraw(state, ctx, att)[0]
    return state, totals


def block_redraw_score_held(state: BlockState, ctx: StepContext):
    """:func:`block_redraw_score` on the products an earlier pass of the same iteration
    left in ``state.mrow`` (the pivot swap's, which computes the redraw's candidates too
    when nothing it does changes the basis): the same function, not registered in
    ``MASK_ROW_OPS``, so the masked backends make no pass for it."""
    return block_redraw_score(state, ctx)


def block_redraw_apply(state: BlockState, ctx: StepContext):
    """Redraw swap, second half (accepted): W becomes the attempt's W' (drawn again from
    the same stream: the same floats), row k of H becomes a_u^T A[:, block] (masked: and
    row k of every column's Gram). ``ctx.G`` is the Gram *before* the swap. Returns the
    new state and None."""
    att = ctx.redraw[0]
    _, W = _redraw(state, ctx, att)
    Gn = state.Gn
    if Gn is not None:
        Gn = swapped_grams(Gn, att.k, _new_gram_row(state, att))
    return state._replace(W=W, H=swapped_h(state.H, att.k, _row_of(state, att.u)), Gn=Gn,
                          mrow=None), None


def _delta_sse(H, W, k, row_u, d, Gn=None, q=None):
    # SSE under J' minus SSE under J at W, per column summed: J' differs from J in slot
    # k only, so H in row k (row_u - H_k) and G in row/column k (d = g' - G_k)
    x = W[k]
    lin = -2.0 * float((row_u - H[k]) @ x)
    if Gn is None:
        quad = 2.0 * float(x @ (d @ W)) - d[k] * float(x @ x)
    else:
        D = q - Gn[:, k, :].T  # (K, nb): per-column g' - G_k
        quad = 2.0 * float(x @ np.einsum("ln,ln->n", D, W)) - float((D[k] * x) @ x)
    return lin + quad


def _directed_sweep(gen, G, H, W, Mu, Tau, sigma2, priors, Gn, direction):
    # a sweep in slot order (+1) or in reverse (-1): the time reversal of one is the
    # other, which keeps the annealed proposal symmetric
    if direction > 0:
        return sweep_block(gen, G, H, W, sigma2, priors, Mu, Tau, Gn=Gn)
    r = slice(None, None, -1)
    Wr = W[r].copy()
    out = sweep_block(gen, G[r][:, r], H[r], Wr, sigma2, priors,
                      None if Mu is None else Mu[r], None if Tau is None else Tau[r],
                      Gn=None if Gn is None else np.ascontiguousarray(Gn[:, r][:, :, r]))
    W[...] = Wr[r]
    return out


def block_annealed_propose(state: BlockState, ctx: StepContext):
    """Annealed swap (nonequilibrium candidate Monte Carlo, Nilmeier et al. 2011), the
    proposal half: slot ``ctx.p`` moves from its column to ``ctx.u`` through the
    distributions pi_lambda(W) proportional to p(W) L_J(W)^(1 - lambda) L_J'(W)^lambda
    (sigma^2, GBTN's mu and tau fixed). Each step adds (lambda_t - lambda_{t-1}) times
    the log-likelihood change at the current W to the work, then sweeps W under
    pi_lambda_t (a Gaussian likelihood with the interpolated G and H: the ordinary
    sweep). Returns the state holding the path's end W in ``W2`` and this block's work.
    The client accepts with min(1, exp(total work)), which is exact because the
    reversed path, with reversed sweeps, is the proposal from the other end.
    """
    k, pri = ctx.p, ctx.priors
    row_u = _row_of(state, ctx.u)
    g_new = ctx.g_rows[0]
    d = g_new - ctx.G[k]
    Gn = state.Gn
    q = None if Gn is None else state.mrow
    H2 = swapped_h(state.H, k, row_u)
    G2 = ctx.G.copy()
    G2[k, :] = g_new
    G2[:, k] = g_new
    Gn2 = None if Gn is None else swapped_grams(Gn, k, q)
    W = state.W.copy()
    gen = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, ANNEAL)
    work = 0.0
    lam0 = 0.0
    inv = 1.0 / (2.0 * ctx.sigma2)
    for lam in ctx.lambdas:
        work -= (lam - lam0) * inv * _delta_sse(state.H, W, k, row_u, d, Gn, q)
        lam0 = lam
        if lam >= 1.0:
            break
        G_l = (1.0 - lam) * ctx.G + lam * G2
        H_l = (1.0 - lam) * state.H + lam * H2
        Gn_l = None if Gn is None else (1.0 - lam) * Gn + lam * Gn2
        _directed_sweep(gen, G_l, H_l, W, state.Mu, state.Tau, ctx.sigma2, pri, Gn_l,
                        ctx.direction)
    return state._replace(W2=W, H2=H2, Gn2=Gn2), work


def block_annealed_finish(state: BlockState, ctx: StepContext):
    """Annealed swap, second half: adopt the path's end if ``ctx.accept`` (slot p holds
    u, W is the end of the path), then one Gibbs sweep of W (and GBTN's mu, tau) under
    the resulting basis. Returns the new state and (hw, wgw), with ``ctx.box_score``
    also this block's share of <H, pinv(G) H> (see :func:`block_collapsed_finish`)."""
    if ctx.accept:
        W, H, Gn = state.W2.copy(), state.H2, state.Gn2
    else:
        W, H, Gn = state.W.copy(), state.H, state.Gn
    Mu, Tau = _copy(state.Mu), _copy(state.Tau)
    # its own stream: the collapsed move sweeps again in the same iteration with SWEEP,
    # and two sweeps on the same random numbers are not two Gibbs sweeps
    gen = stream(ctx.entropy, ctx.chain, ctx.iteration, state.index, SWEEP2)
    hw, wgw = _sweep_with_hyper(gen, ctx.G, H, W, Mu, Tau, ctx.sigma2, ctx.priors, Gn)
    new = state._replace(W=W, H=H, Mu=Mu, Tau=Tau, Gn=Gn, W2=None, H2=None, Gn2=None,
                         mrow=None)
    out = (hw, wgw)
    if ctx.box_score:
        out = out + (_ls_term(new, ctx),)
    return _record(new, W, ctx.record), out


def _ls_term(state: BlockState, ctx: StepContext) -> float:
    # masked: no shared Gram, so no cheap bound: +inf makes the bound ||A||^2 - sum of
    # these terms -inf, and the basis is always scored exactly (each column's least
    # squares over its observed rows costs as much as its box-constrained fit)
    if state.Gn is not None:
        return np.inf
    return float(np.vdot(state.H, ctx.P2 @ state.H))


def block_ls_bound(state: BlockState, ctx: StepContext):
    """This block's share of <H, pinv(G) H> (``ctx.P2`` = pinv(G)); the state is
    unchanged. ||A||^2 minus the total is the unconstrained least-squares SSE of the
    basis, a lower bound of its box-constrained one."""
    return state, _ls_term(state, ctx)


def _box_quadratics(state: BlockState, ctx: StepContext):
    Wb = box_lstsq(ctx.G, state.H, a=ctx.priors.a, b=ctx.priors.b, P=ctx.P2, W0=state.W,
                   Gn=state.Gn)
    return _quadratics(ctx.G, state.Gn, state.H, Wb)


def block_box_score(state: BlockState, ctx: StepContext):
    """(<H, W_box>, <W_box, G W_box>) for the current basis's exact box-constrained
    least-squares W (``ctx.P2`` = pinv(G)); the state is unchanged."""
    return state, _box_quadratics(state, ctx)


def _quadratics(G, Gn, H, W):
    if Gn is None:
        return float(np.vdot(H, W)), float(np.vdot(W, G @ W))
    return float(np.vdot(H, W)), float(np.einsum("kn,nkl,ln->", W, Gn, W))


def block_lstsq_score(state: BlockState, ctx: StepContext):
    """(<H, W_ls>, <W_ls, G W_ls>) for the current basis's clipped least-squares
    W_ls = clip(ctx.P2 @ H); the state is unchanged."""
    W = np.clip(ctx.P2 @ state.H, ctx.priors.a, ctx.priors.b)
    return state, _quadratics(ctx.G, state.Gn, state.H, W)


def block_lstsq_start(state: BlockState, ctx: StepContext):
    """Start W at the least-squares fit ``ctx.P2 @ H`` (P2 = pinv(G)) clipped to the
    bounds; GBTN's Mu and Tau are kept. Returns the new state and None."""
    W = np.clip(ctx.P2 @ state.H, ctx.priors.a, ctx.priors.b)
    return state._replace(W=W, acc={}, traces=()), None


def block_icm(state: BlockState, ctx: StepContext):
    """One sweep of iterated conditional modes of W (towards the MAP given C, sigma^2).
    Returns the new state and (hw, wgw)."""
    W = state.W.copy()
    out = sweep_block(None, ctx.G, state.H, W, ctx.sigma2, ctx.priors, state.Mu, state.Tau,
                      mode=True, Gn=state.Gn)
    return _record(state._replace(W=W), W, ctx.record), out


def block_box_lstsq(state: BlockState, ctx: StepContext):
    """W of the block set to the exact box-constrained least-squares fit given the basis
    (``ctx.G``, ``ctx.P2`` = pinv(G); per-column Grams when masked), warm-started from
    the current W. Returns the new state and (hw, wgw)."""
    W = box_lstsq(ctx.G, state.H, a=ctx.priors.a, b=ctx.priors.b, P=ctx.P2, W0=state.W,
                  Gn=state.Gn)
    return _record(state._replace(W=W), W, ctx.record), _quadratics(ctx.G, state.Gn, state.H, W)


def block_rebase(state: BlockState, ctx: StepContext):
    """The state :func:`block_init` would build for the current basis in the slot order
    ``ctx.perm`` (H's rows reordered: no pass over A). Returns the new state and None."""
    perm = np.asarray(ctx.perm, dtype=np.int64)
    Gn = None if state.Gn is None else np.ascontiguousarray(state.Gn[:, perm][:, :, perm])
    trace_cols = tuple(int(state.start + c) for c in state.trace_local)
    new = block_init(state.index, state.start, state.stop, state.H[perm], state.sq,
                     ctx.priors, ctx.entropy, ctx.chain, trace_cols=trace_cols, Gn=Gn)
    return new, None


def block_set_mask_row(state: BlockState, q):
    """``missing="mask"``: hold the pending swap's new Gram rows (K, nb) for the next op."""
    return state._replace(mrow=np.ascontiguousarray(q, dtype=np.float64))


def block_posterior(state: BlockState, key):
    """(count, mean, sd) of the retained W draws of this block for basis ``key``."""
    if key not in state.acc:
        return 0, None, None
    n, s, s2 = state.acc[key]
    mean = s / n
    var = np.maximum(s2 / n - mean * mean, 0.0) * (n / max(n - 1, 1))
    return n, mean, np.sqrt(var)


def block_traces(state: BlockState):
    """The retained draws of the traced columns: list of (key, (K, t) array)."""
    return list(state.traces)
