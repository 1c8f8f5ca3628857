"""From finished chains to a ``BIDResult``: the point estimate and the summaries.

Shared by the in-memory fit and the Dask engine; it only talks to backends through
their protocol (``posterior``, ``traces``, ``init_blocks`` for refinement).
"""

from __future__ import annotations

import numpy as np

from .chain import ChainConfig, lstsq_estimate, map_estimate, refine
from .result import TRACE_DTYPE, BIDResult

__all__ = ["chain_config", "summarise", "versions", "SAMPLER_MOVES", "n_tries_for"]


def versions():
    import importlib.metadata as md

    out = {}
    for pkg in ("dask_bid", "numpy", "scipy", "numba", "dask", "distributed", "zarr"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


def _point_estimate(p, outputs):
    """The reported basis: ``"best"``, the visited basis with the lowest exact
    box-constrained least-squares SSE (every chain scores each basis it visits, burn-in
    included); ``"mode"``, the basis of the most retained draws (ties: lower SSE)."""
    if p["point_estimate"] == "best":
        return min((o.state.best_score, o.state.best_key) for o in outputs)[1]
    visits, best = {}, {}
    for o in outputs:
        for k, v in o.state.visits.items():
            visits[k] = visits.get(k, 0) + v
            best[k] = min(best.get(k, np.inf), o.state.set_best.get(k, np.inf))
    return max(visits, key=lambda k: (visits[k], -best[k]))


#: Sweeps with the reported basis fixed when no retained draw had it and
#: ``refine_sweeps=0``.
FALLBACK_REFINE_SWEEPS = 20

#: The public ``sampler`` option -> the chain's move and how it compares bases.
SAMPLER_MOVES = {
    "collapsed": ("collapsed", "draw"),
    "plain": ("plain", "draw"),
    "aggressive": ("aggressive", "draw"),
    "search": ("aggressive", "lstsq"),
}


def n_tries_for(n_tries, n_cols: int, K: int) -> int:
    """Candidates per collapsed slot update: ``n_tries``, or N - K for ``"all"``."""
    if n_tries == "all":
        return int(n_cols) - int(K)
    return min(int(n_tries), int(n_cols) - int(K))


#: n_candidates="auto": the candidate rows of A^T A one pass computes may take this many
#: bytes over all blocks (8 N bytes a row), between 8 and 512 rows
AUTO_CANDIDATE_BYTES = 32 * 2**20


def n_candidates_for(n_candidates, n_cols: int, n_iter: int, per_iter: int = 1) -> int:
    """Swap candidates computed per pass: ``n_candidates`` itself, or for ``"auto"`` as
    many rows as :data:`AUTO_CANDIDATE_BYTES` holds (8 to 512, at most what the whole
    chain draws, ``n_iter * per_iter + 1``; ``per_iter`` candidates per iteration):
    every proposal needs its own row whatever the batching, so larger batches cost
    memory, not arithmetic, and save passes over A."""
    if n_candidates != "auto":
        return int(n_candidates)
    fit = AUTO_CANDIDATE_BYTES // (8 * max(int(n_cols), 1))
    return int(max(8, min(512, fit, int(n_iter) * max(int(per_iter), 1) + 1)))


def chain_config(p, n_cols: int) -> ChainConfig:
    move, score = SAMPLER_MOVES[p["sampler"]]
    m = n_tries_for(p.get("n_tries", 1), n_cols, p["n_components"]) if move == "collapsed" \
        else 1
    per_iter = 1
    if move == "collapsed":  # the collapsed set, the pivot attempts, the annealed swaps
        per_iter = m + int(p.get("n_pivot", 0)) + (1 if p.get("n_anneal", 0) else 0)
    nc = n_candidates_for(p["n_candidates"], n_cols, p["n_iter"], per_iter)
    if move == "collapsed" and p.get("n_tries") == "all":
        nc = max(nc, m)  # every row of A^T A once, in the first pass
    return ChainConfig(n_components=p["n_components"], priors=p["priors"],
                       sampler=move, n_iter=p["n_iter"],
                       burn_in=p["burn_in"], thin=p["thin"], temperature=p["temperature"],
                       n_candidates=nc, max_cached_rows=max(4 * nc, 16, nc + m),
                       point_estimate=p["point_estimate"], proposal_init=p["proposal_init"],
                       w_init="prior" if isinstance(p["init"], str) and p["init"] == "random"
                       else "lstsq", swap_score=score, n_tries=m,
                       acceptance=p.get("acceptance", "barker"),
                       score_visited=p["point_estimate"] == "best",
                       n_anneal=int(p.get("n_anneal", 0)) if move == "collapsed" else 0,
                       n_pivot=int(p.get("n_pivot", 0)) if move == "collapsed"
                       and p.get("missing", "zero") != "mask" else 0,
                       anneal_every=int(p.get("anneal_every", 1)),
                       search_warmup=int(p.get("search_warmup", 0)) if move == "collapsed"
                       else 0,
                       tempered_warmup=int(p.get("tempered_warmup", 0)) if move == "collapsed"
                       else 0,
                       warmup_temperature=float(p.get("warmup_temperature", 100.0)))


def _traced_draws(backends, key, n_keep, K, trace_cols):
    vals = np.full((len(backends), n_keep, K, len(trace_cols)), np.nan)
    for c, be in enumerate(backends):
        col_pos = 0
        for blk in be.traces():
            if not blk:
                continue
            width = blk[0][1].shape[1]
            for d, (k, w) in enumerate(blk):
                if k == key:
                    vals[c, d, :, col_pos:col_pos + width] = w
            col_pos += width
    return {"columns": np.asarray(trace_cols, dtype=np.int64), "values": vals}


def summarise(p, outputs, backends, entropy, shape, trace_cols, sse_fn, mask=None):
    """Point estimate and summaries of finished chains (see ``bayesian_id``'s Notes).

    ``sse_fn(cols, W, held)`` returns (SSE over all entries, SSE over observed ones or
    None); ``held`` says whether the first backend's blocks hold the basis ``cols`` in
    this order (so that the SSE may come from their H without a pass over A).

    With ``refine_sweeps > 0`` the first backend's blocks are re-initialised for the
    reported basis and swept with it fixed; everything else is read from the blocks
    before that.
    """
    M, N = shape
    K = p["n_components"]
    key = _point_estimate(p, outputs)
    cols = np.asarray(key, dtype=np.int64)
    dJ = np.stack([np.asarray(o.state.draws_J, dtype=np.int64).reshape(-1, K) for o in outputs])
    draws_w = _traced_draws(backends, key, dJ.shape[1], K, trace_cols) if len(trace_cols) \
        else None
    n_tot, s, s2 = 0, np.zeros((K, N)), np.zeros((K, N))
    for be in backends:
        n, mean, sd = be.posterior(key)
        if n:
            s += n * mean
            s2 += (n - 1) * sd**2 + n * mean**2
            n_tot += n
    n_refine = int(p.get("refine_sweeps", 0))
    if n_tot == 0 and not n_refine:
        # the reported basis has no retained draw (visited in burn-in only): its
        # posterior of W comes from sweeps with it fixed
        n_refine = FALLBACK_REFINE_SWEEPS
    cfg = chain_config(p, N)
    sigma2_hat = float(np.mean([np.mean(o.state.draws_sigma2) for o in outputs]))
    # the blocks of chain 0 still hold its last basis: when it is the reported one, the
    # fixed-basis passes below reorder H instead of recomputing it from A
    current = outputs[0].state.J
    if n_refine:
        _, W, sd, s2_ref = refine(backends[0], cfg, entropy, key, n_refine, current=current)
        sigma2_hat = float(np.mean(s2_ref))
    else:
        W = s / n_tot
        var = np.maximum(s2 / n_tot - W * W, 0.0) * (n_tot / max(n_tot - 1, 1))
        sd = np.sqrt(var)
    if p.get("w_estimate", "mean") == "map":
        W, _ = map_estimate(backends[0], cfg, entropy, key, sigma2_hat,
                            started=bool(n_refine), current=current)
    elif p.get("w_estimate") == "lstsq":
        W = lstsq_estimate(backends[0], cfg, entropy, key, started=bool(n_refine),
                           current=current)
    a, b = p["priors"].a, p["priors"].b
    np.clip(W, a, b, out=W)
    W[:, cols] = np.eye(K)
    sd[:, cols] = 0.0
    held = bool(n_refine) or p.get("w_estimate") in ("map", "lstsq")
    sse_all, sse_obs = sse_fn(cols, W, held)
    trace = np.empty((len(outputs), p["n_iter"]), dtype=TRACE_DTYPE)
    for c, o in enumerate(outputs):
        trace["mse"][c] = o.state.trace_mse
        trace["sigma2"][c] = o.state.trace_sigma2
        trace["accepted"][c] = o.state.trace_accepted
        trace["accept_prob"][c] = o.state.trace_accept_prob
    ds2 = np.stack([np.asarray(o.state.draws_sigma2) for o in outputs])
    dsse = np.stack([np.asarray(o.state.draws_sse) for o in outputs])
    incl = np.zeros(N)
    np.add.at(incl, dJ.reshape(-1), 1.0)
    incl /= dJ.shape[0] * dJ.shape[1]
    n_entries = M * N
    params = {k: v for k, v in p.items() if k not in ("priors", "random_state")}
    params["bounds"] = [a, b]
    params["entropy"] = str(entropy)
    params["versions"] = versions()
    return BIDResult(
        columns=cols, components=W, components_sd=sd, sigma2=float(ds2.mean()),
        inclusion_probability=incl, trace=trace, draws_columns=dJ, draws_sigma2=ds2,
        draws_sse=dsse, n_draws_point=int(n_tot), mse=sse_all / n_entries,
        mse_observed=None if sse_obs is None or mask is None else sse_obs / int(mask.sum()),
        max_abs_w=float(np.abs(W).max()),
        n_passes=sum(o.state.n_passes for o in outputs),
        elapsed=sum(o.state.elapsed for o in outputs), n_samples=M, n_features=N,
        params=params, draws_w=draws_w)
