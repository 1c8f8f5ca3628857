"""From finished chains to a ``BIDResult``: the point estimate and the summaries.

Shared by the in-memory fit and the Dask engine; it only talks to backends through
their protocol (``posterior``, ``traces``, ``init_blocks`` for refinement).
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .._errors import ConvergenceWarning, ParameterError, sklearn_flavoured
from .._warn import warn
from .chain import ChainConfig, lstsq_estimate, map_estimate, refine
from .result import TRACE_DTYPE, BIDResult

__all__ = ["chain_config", "summarise", "versions", "SAMPLER_MOVES", "n_tries_for",
           "n_candidates_for", "candidate_row_bytes", "cluster_memory", "candidate_memory",
           "pool_for", "POOL_MIN_COLUMNS", "POOL_SIZE", "POOL_DRAWS", "EXACT_SAMPLERS",
           "judged_sampler", "PriorCheck",
           "failed_convergence"]

#: the samplers whose chains target the posterior p(J, W, sigma^2 | A); a fit of one of
#: them checks its chains' convergence and warns when they fail
EXACT_SAMPLERS = ("collapsed", "plain")


def judged_sampler(params) -> str:
    """The sampler of stored parameters as the convergence check sees it: the sampler
    (:func:`dask_bid.engine.result.stored_sampler`), or ``"tempered"`` for an exact
    sampler run at a ``temperature`` other than 1, whose swaps then target no posterior:
    like the searches', its chains have nothing to converge to, so they are not judged."""
    from .result import stored_sampler

    sampler = stored_sampler(params)
    t = params.get("temperature", 1.0)
    if sampler in EXACT_SAMPLERS and t is not None and float(t) != 1.0:
        return "tempered"
    return sampler


def failed_convergence(res):
    """The ``Convergence`` of a fit of an exact sampler whose chains failed the check;
    None when they passed, or for the searches and tempered chains (their R-hat
    describes no posterior, docs/model.md)."""
    if judged_sampler(res.params) not in EXACT_SAMPLERS:
        return None
    conv = res.convergence()
    return None if conv.converged else conv


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


#: Sweeps with the reported basis fixed when ``refine_sweeps=0`` and the blocks' sums of
#: W do not cover every retained draw that had it (none had it; or its sums were dropped).
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


#: n_candidates="auto": at the peak of a candidate pass the batch's rows may take this
#: fraction of the smallest worker memory limit (dask spills managed memory from 0.6 of it
#: and pauses a worker at 0.8; the rest of a block state and one tile are small beside it)
CANDIDATE_MEMORY_FRACTION = 0.5
#: ... and this many bytes (per worker, or in all for an in-memory or synchronous fit)
#: when no worker memory limit is known
DEFAULT_CANDIDATE_BYTES = 512 * 2**20


def cluster_memory(ex):
    """(smallest memory limit among the workers in bytes or None, number of workers) of
    an executor (``engine/cluster.py``); (None, 0) for the synchronous one. Workers
    started without a limit report 0 and are left out; None when none has one."""
    if not getattr(ex, "is_distributed", False):
        return None, 0
    workers = ex.client.scheduler_info(n_workers=-1)["workers"]
    limits = [int(w.get("memory_limit") or 0) for w in workers.values()]
    known = [m for m in limits if m > 0]
    return (min(known) if known else None), len(limits)


def candidate_row_bytes(n_cols, *, blocks=None, n_workers=0, n_chains=1, group_width=None,
                        n_row_tiles=1, fan_in=8):
    """Bytes one worker holds per row of a candidate batch at the peak of a pass.

    The blocks (round-robin over the workers) hold their slices of the rows: a worker
    with ``c`` of the columns holds ``8 c`` bytes a row, twice at the peak (the summed
    partials before they are cut into block slices, and the block slices; the previous
    batch is dropped before the pass and the new one is kept as received). With several
    row tiles a reduction node also holds up to ``fan_in + 1`` partials of its column
    group, ``8 (fan_in + 1) group_width`` bytes a row. Without workers (``n_workers=0``:
    an in-memory or synchronous fit) one process holds every block.
    """
    widths = [b - a for a, b in blocks] if blocks else [int(n_cols)]
    per = [0] * max(int(n_workers), 1)
    for i, w in enumerate(widths):
        per[i % len(per)] += w
    cols = max(per) * max(int(n_chains), 1)
    tree = 0
    if n_row_tiles > 1:
        tree = (min(int(fan_in), int(n_row_tiles)) + 1) * int(group_width or n_cols)
    return 8 * (2 * cols + tree)


def candidate_memory(ex, layout, n_chains=1):
    """``chain_config``'s ``memory`` and ``row_bytes`` for the executor ``ex`` and the
    engine's ``layout`` (``dask_backend.plan_layout``)."""
    from .dask_backend import FAN_IN

    memory, n_workers = cluster_memory(ex)
    return {"memory": memory, "row_bytes": candidate_row_bytes(
        layout.shape[1], blocks=layout.blocks, n_workers=n_workers, n_chains=n_chains,
        group_width=max(b - a for a, b in layout.groups), n_row_tiles=len(layout.row_tiles),
        fan_in=FAN_IN)}


def n_candidates_for(n_candidates, n_cols: int, n_iter: int, per_iter: int = 1, *,
                     memory=None, row_bytes=None) -> int:
    """Swap candidates computed per pass: ``n_candidates`` itself, or for ``"auto"`` as
    many rows as fit in :data:`CANDIDATE_MEMORY_FRACTION` of ``memory`` (the smallest
    worker memory limit; :data:`DEFAULT_CANDIDATE_BYTES` when it is None) at
    ``row_bytes`` a row (:func:`candidate_row_bytes`; by default two copies of a row of
    all ``n_cols`` columns), at least 8, and at most what the whole chain draws
    (``n_iter * per_iter + 1``; ``per_iter`` candidates per iteration) or all ``n_cols``
    rows of A^T A (held whole, no pass after the first). Every proposal needs its own row
    however they are batched, so larger batches cost memory, not arithmetic, and save
    passes over A; the chain is the same for every batch size."""
    if n_candidates != "auto":
        return int(n_candidates)
    budget = CANDIDATE_MEMORY_FRACTION * memory if memory else DEFAULT_CANDIDATE_BYTES
    per_row = row_bytes or candidate_row_bytes(n_cols)
    fit = int(budget // per_row)
    draws = int(n_iter) * max(int(per_iter), 1) + 1
    return int(max(8, min(fit, draws, max(int(n_cols), 1))))


#: candidate_pool="auto": every column outside J is a candidate (no pool) up to this many
#: columns; beyond it the exact sampler's candidates come from a pool of ``POOL_SIZE``
#: columns. A fixed size, never the workers' memory: a seed gives the same chain on any
#: cluster. Without a pool a default fit computes a row a_u^T A (2 M N flops) for each
#: of its ~17,000 candidates; with one, ``POOL_DRAWS`` x ``POOL_SIZE`` rows in all
#: (docs/engine.md, "The candidate pool").
POOL_MIN_COLUMNS = 16_384
POOL_SIZE = 512
#: pool_every="auto": the pool is drawn this many times per chain (the first with the pass
#: that computes H), so a fit makes POOL_DRAWS passes for its candidates
POOL_DRAWS = 3


def pool_for(candidate_pool, pool_every, n_cols: int, n_iter: int, *, sampler="collapsed"):
    """(pool size, iterations between draws of the pool); (0, 0) for no pool (every
    column outside J is a candidate). ``"auto"``: a pool of :data:`POOL_SIZE` columns for
    the exact sampler when N > :data:`POOL_MIN_COLUMNS`; an integer: a pool of that many
    columns for any sampler; None: no pool. A pool of N columns or more is no pool."""
    if candidate_pool is None:
        return 0, 0
    if candidate_pool == "auto":
        size = POOL_SIZE if sampler == "collapsed" and n_cols > POOL_MIN_COLUMNS else 0
    else:
        size = int(candidate_pool)
    if not size or size >= n_cols:
        return 0, 0
    every = -(-int(n_iter) // POOL_DRAWS) if pool_every == "auto" else int(pool_every)
    return size, max(every, 1)


def _check_pool_memory(size, memory, row_bytes):
    """Refuse a pool whose rows do not fit the workers (before any pass over A)."""
    if not size or not memory or not row_bytes:
        return
    need = size * row_bytes
    if need > CANDIDATE_MEMORY_FRACTION * memory:
        raise ParameterError(
            f"candidate_pool={size} needs {need / 2**30:.1f} GiB per worker for its rows of "
            f"A^T A, more than {CANDIDATE_MEMORY_FRACTION:g} of the smallest worker memory "
            f"limit ({memory / 2**30:.1f} GiB): pass a smaller candidate_pool (at most "
            f"{int(CANDIDATE_MEMORY_FRACTION * memory // row_bytes)}) or give the workers "
            "more memory.")


def traced_columns(p, n_cols: int) -> np.ndarray:
    """The columns whose W draws a fit keeps: ``trace_columns``, else
    ``n_trace_columns`` evenly spaced ones."""
    if p.get("trace_columns") is not None:
        return np.asarray(p["trace_columns"], dtype=np.int64)
    n = min(int(p["n_trace_columns"]), n_cols)
    return (np.unique(np.linspace(0, n_cols - 1, n).astype(np.int64)) if n
            else np.zeros(0, dtype=np.int64))


def chain_config(p, n_cols: int, *, memory=None, row_bytes=None,
                 settings_n_iter=None) -> ChainConfig:
    """The chain's settings from the validated parameters ``p``; ``memory`` and
    ``row_bytes`` size ``n_candidates="auto"`` (:func:`n_candidates_for`).

    ``settings_n_iter``: a chain continued past the ``n_iter`` it was started with
    keeps the automatic settings derived from that one (the pool's redraws,
    ``pool_every="auto"``, and the candidate batches), so that it stays one chain.
    """
    if settings_n_iter is not None and int(settings_n_iter) != int(p["n_iter"]):
        return chain_config({**p, "n_iter": int(settings_n_iter)}, n_cols, memory=memory,
                            row_bytes=row_bytes)._replace(n_iter=int(p["n_iter"]))
    move, score = SAMPLER_MOVES[p["sampler"]]
    m = n_tries_for(p.get("n_tries", 1), n_cols, p["n_components"]) if move == "collapsed" \
        else 1
    per_iter = 1
    if move == "collapsed":  # the collapsed set, the pivot attempts, the annealed swaps
        per_iter = (m + int(p.get("n_pivot", 0)) + int(p.get("n_redraw", 0))
                    + (1 if p.get("n_anneal", 0) else 0))
    nc = n_candidates_for(p["n_candidates"], n_cols, p["n_iter"], per_iter, memory=memory,
                          row_bytes=row_bytes)
    if move == "collapsed" and p.get("n_tries") == "all":
        nc = max(nc, m)  # every row of A^T A once, in the first pass
    # "auto": a pass replaces the whole cache (its batch holds every row the move needs),
    # so a worker never holds an old batch beside a new one
    cached = nc if p["n_candidates"] == "auto" else max(4 * nc, 16, nc + m)
    pool, every = pool_for(p.get("candidate_pool", "auto"), p.get("pool_every", "auto"),
                           n_cols, p["n_iter"], sampler=move)
    replace = p["n_candidates"] == "auto"
    if pool:
        # the blocks hold the pool's rows and nothing else; n_candidates is not used
        _check_pool_memory(pool, memory, row_bytes)
        nc = cached = pool
        replace = True
    return ChainConfig(n_components=p["n_components"], priors=p["priors"],
                       sampler=move, n_iter=p["n_iter"],
                       burn_in=p["burn_in"], thin=p["thin"], temperature=p["temperature"],
                       n_candidates=nc, max_cached_rows=cached,
                       replace_cache=replace, pool_size=pool, pool_every=every,
                       point_estimate=p["point_estimate"], proposal_init=p["proposal_init"],
                       w_init="prior" if isinstance(p["init"], str) and p["init"] == "random"
                       else "lstsq", swap_score=score, n_tries=m,
                       acceptance=p.get("acceptance", "barker"),
                       score_visited=p["point_estimate"] == "best",
                       masked=p.get("missing", "zero") == "mask",
                       n_anneal=int(p.get("n_anneal", 0)) if move == "collapsed" else 0,
                       n_pivot=int(p.get("n_pivot", 0)) if move == "collapsed" else 0,
                       n_redraw=int(p.get("n_redraw", 0)) if move == "collapsed" else 0,
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


def _warn_if_rank_deficient(G, M, K):
    """Warn when C (whose Gram is ``G``) is numerically rank deficient: an eigenvalue of
    G below M eps times its largest (G's own rounding error is of order eps ||C||^2)."""
    ev = np.linalg.eigvalsh(G)
    tol = max(M, K) * np.finfo(float).eps * max(float(ev[-1]), 0.0)
    rank = int(np.count_nonzero(ev > tol))
    if rank < K:
        warn(f"the reported basis is numerically rank deficient (rank {rank} < "
             f"n_components={K}): its W is not unique (the minimum-norm fit is reported). "
             "Choose a smaller n_components.", UserWarning)


def _warn_if_prior_outweighs_data(p, norm_a2, n_obs):
    """Warn when sigma^2's prior scale ``beta_sigma`` exceeds half of ||A||^2 (over the
    observed entries): then even the zero fit's SSE / 2 is below it, sigma^2 stays near
    the prior's scale and A reads as noise (data in small units, e.g. molar
    concentrations of 1e-6, with the default beta_sigma=1 meant for standardised data).
    In the scaled problem's units (engine/scaling.py) the ratio is the user's."""
    beta = float(p["priors"].beta_sigma)
    if not (norm_a2 > 0 and n_obs > 0 and beta > norm_a2 / 2):
        return  # (an all-zero A is fitted exactly whatever sigma^2 is)
    user_beta = float(p.get("beta_sigma", beta))
    # in A's units (user_beta / beta is the scale the problem was fitted at, squared),
    # through logarithms: the ratio of ||A||^2 to beta can be below float64's range
    log_sum = math.log(user_beta) + math.log(norm_a2) - math.log(beta)
    half = math.exp(log_sum - math.log(2.0)) if log_sum > -700 else 0.0
    mean_sq = math.exp(log_sum - math.log(n_obs)) if log_sum > -700 else 0.0
    # (A's squares below float64's range, as for entries of 1e-200: no beta_sigma to pass)
    hint = (f" (e.g. beta_sigma={mean_sq:.3g}, the mean of A^2, as 1 is for standardised "
            "data" if mean_sq > 0 else " (A's squares are below float64's range here")
    warn(f"beta_sigma={user_beta:g} (the scale of sigma^2's prior, in A's units squared) "
         f"exceeds half the sum of A^2 ({half:.3g}): the prior outweighs all of A, so "
         "sigma^2 stays near its prior's scale and A is read as noise. Standardise A, or "
         f"pass beta_sigma on A's scale{hint}; docs/errors.md, 'Scale').", UserWarning)


class PriorCheck:
    """The prior-outweighs-data warning of one fit, said once: after a chain's first
    iteration (``watching``: where ||A||^2 is first known, so a long fit says it at its
    start, not hours later at its summary), or at the summary (a resumed fit with no
    iteration left)."""

    def __init__(self, p):
        self.p = p
        self.done = False
        self._lock = threading.Lock()

    def __call__(self, norm_a2, n_obs):
        with self._lock:  # chains run side by side: the first says it, the others wait
            if not self.done:
                _warn_if_prior_outweighs_data(self.p, norm_a2, n_obs)
                self.done = True

    def watching(self, backend, callback=None):
        """``callback`` (a chain's, or None), checking the prior first, with ``backend``'s
        ||A||^2."""
        def cb(state):
            if not self.done:
                self(backend.norm_a2, backend.n_obs)
            if callback is not None:
                callback(state)
        return cb


def summarise(p, outputs, backends, entropy, shape, trace_cols, sse_fn, mask=None,
              prior_check=None):
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
    # the retained draws with the reported basis, counted from the draws themselves: the
    # blocks keep W sums for at most max_tracked_sets bases, dropping the least visited
    # when another arrives, so their count covers only the draws since the basis was last
    # taken up again (the default "best" basis, often rarely visited, read 0 of 1)
    n_point = int(np.all(np.sort(dJ, axis=2) == np.sort(cols), axis=2).sum())
    n_refine = int(p.get("refine_sweeps", 0))
    if n_tot != n_point and not n_refine:
        # no retained draw has the reported basis (visited in burn-in only), or the blocks
        # dropped its sums for some of them: the mean and sd of W over a subset of its
        # draws are not the documented ones; they come from sweeps with the basis fixed
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
    if held and not (isinstance(p["init"], str) and p["init"] != "random"):
        # the pivoted QR or sketch start warns when every basis of K columns is rank
        # deficient; a random or given start computes neither, so the reported basis is
        # checked itself (its Gram, which the blocks hold for it: one round trip)
        _warn_if_rank_deficient(backends[0].gram(cols), M, K)
    (prior_check or PriorCheck(p))(outputs[0].norm_a2, outputs[0].n_obs)
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
    res = BIDResult(
        columns=cols, components=W, components_sd=sd, sigma2=float(ds2.mean()),
        inclusion_probability=incl, trace=trace, draws_columns=dJ, draws_sigma2=ds2,
        draws_sse=dsse, n_draws_point=n_point, mse=sse_all / n_entries,
        mse_observed=None if sse_obs is None or mask is None else sse_obs / int(mask.sum()),
        max_abs_w=float(np.abs(W).max()),
        n_passes=sum(o.state.n_passes for o in outputs),
        elapsed=sum(o.state.elapsed for o in outputs), n_samples=M, n_features=N,
        params=params, draws_w=draws_w)
    conv = failed_convergence(res)
    if conv is not None:
        warn(conv.message(), sklearn_flavoured(ConvergenceWarning))
    return res
