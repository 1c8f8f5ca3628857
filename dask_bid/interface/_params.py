"""Validation of the sampler's parameters, done before any data is touched.

Every check here looks at the parameters alone (and at N, the number of columns, read
from the input's metadata), so a bad parameter fails in microseconds even for a store of
terabytes. Each failure raises :class:`~dask_bid.ParameterError` with a message naming
the parameter, the value received, and what to pass instead; ``docs/errors.md`` lists them.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._errors import ParameterError
from ..kernels.priors import MODELS, Priors

__all__ = ["validate_params", "POINT_ESTIMATES", "INITS", "MISSING", "PROPOSAL_INITS",
           "W_ESTIMATES", "SAMPLERS", "ACCEPTANCES", "HYPERPARAMETERS"]

POINT_ESTIMATES = ("mode", "best")
INITS = ("auto", "random", "sketch", "cpqr")
MISSING = ("zero", "mask")
PROPOSAL_INITS = ("copy", "lstsq")
W_ESTIMATES = ("mean", "map", "lstsq")
#: collapsed: exact, the swapped row integrated out (default); plain: exact, Algorithm 1;
#: aggressive: Algorithm 2 (the paper, a heuristic); search: least-squares optimisation
SAMPLERS = ("collapsed", "plain", "aggressive", "search")
ACCEPTANCES = ("barker", "metropolis")

#: Strictly positive parameters, with what they are (for the messages) and the default.
HYPERPARAMETERS = {
    "alpha_sigma": ("the shape of the inverse-gamma prior of sigma^2", 0.1),
    "beta_sigma": ("the scale of the inverse-gamma prior of sigma^2", 1.0),
    "tau": ("the GTN parent precision of every W entry (GBT)", 1.0),
    "tau_mu": ("the precision of the GTNSNG hyperprior's mean (GBTN)", 0.1),
    "alpha_t": ("the gamma shape of the GTNSNG hyperprior's precision (GBTN)", 1.0),
    "beta_t": ("the gamma rate of the GTNSNG hyperprior's precision (GBTN)", 1.0),
    "temperature": ("the divisor of the swap log-odds (1 = the paper)", 1.0),
    "warmup_temperature": ("the swap temperature at the start of the tempered warm-up", 100.0),
}


def _real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _positive(name, value):
    if not _real(value) or not np.isfinite(value) or value <= 0:
        what, default = HYPERPARAMETERS[name]
        raise ParameterError(
            f"{name} must be a positive finite number, got {value!r}. It is {what}; pass a "
            f"value > 0 (default {default}).")
    return float(value)


def _int(name, value, low, high=None, hint=""):
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{name} must be an integer, got {value!r}.{hint}")
    value = int(value)
    if value < low or (high is not None and value > high):
        rng = f">= {low}" if high is None else f"between {low} and {high}"
        raise ParameterError(f"{name} must be {rng}, got {value}.{hint}")
    return value


def _warmup(name, value, auto, burn_in, hint, why):
    # a warm-up length: an integer >= 0 or "auto", within the (discarded) burn-in
    if isinstance(value, str) and value.lower() == "auto":
        n = auto
    else:
        n = _int(name, value, 0, hint=hint)
    if n > burn_in:
        raise ParameterError(
            f"{name} ({n}) must not exceed burn_in ({burn_in}): {why} and must be "
            f"discarded. Lower {name} or raise burn_in.")
    return n


#: ``n_redraw="auto"``: redraw swap attempts per iteration of a masked fit with at most
#: ``REDRAW_AUTO_MAX_K`` components (each attempt costs about K / 3 sweeps there: a GHK
#: proposal of every column, each with its own K x K factorisation); 0 otherwise, where
#: the pivot swap already mixes (dense) or the attempt's cost grows as K^3 per column
REDRAW_AUTO = 4
REDRAW_AUTO_MAX_K = 16


def _n_redraw(value, missing, K):
    if isinstance(value, str) and value.lower() == "auto":
        return REDRAW_AUTO if missing == "mask" and K <= REDRAW_AUTO_MAX_K else 0
    return _int("n_redraw", value, 0,
                hint=" It is the number of redraw swap attempts per iteration, or 'auto'; "
                     "0 for none.")


def _choice(name, value, choices, extra=""):
    # string options are case-insensitive ("GBT" is "gbt"); returned lower-cased
    v = value.lower() if isinstance(value, str) else value
    if not isinstance(v, str) or v not in choices:
        raise ParameterError(
            f"unknown {name} {value!r}; choose one of {', '.join(map(repr, choices))}{extra}.")
    return v


def _check_random_state(rs):
    if rs is None or isinstance(rs, (np.random.SeedSequence, np.random.Generator,
                                     np.random.RandomState)):
        return
    if isinstance(rs, numbers.Integral) and not isinstance(rs, (bool, np.bool_)) and rs >= 0:
        return
    hint = (": a stored entropy (params['entropy'], a decimal string) is passed as "
            f"random_state=int({rs!r})" if isinstance(rs, str) and rs.isdigit() else "")
    raise ParameterError(
        f"random_state must be None, a non-negative integer, a numpy SeedSequence, "
        f"Generator or RandomState, got {rs!r}{hint}.")


#: At most this many columns have their W draws kept (``trace_columns``): a traced
#: column holds n_keep x K floats per chain in its block, on a worker.
MAX_TRACE_COLUMNS = 1000


def columns_by_name(value, names, what="trace_columns"):
    """``value`` with every string entry replaced by the index of the column of that name
    (``names``: A's column names, or None); integers pass through. Anything else is left
    for the parameter's own check."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return value
    value = list(value)
    wanted = [c for c in value if isinstance(c, str)]
    if not wanted:
        return value
    if names is None:
        raise ParameterError(
            f"{what} names columns ({wanted[0]!r}), but A's columns have no names: pass "
            "column indices, or name the columns (a DataFrame, feature_names=, a text "
            "file's header; command line: --column-names).")
    where = {}
    for j, n in enumerate(names):
        where.setdefault(str(n), j)
    unknown = [c for c in wanted if c not in where]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(where), n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise ParameterError(f"{what}: no column is named {unknown[0]!r}{hint}; the names "
                             "are A's column names, exactly.")
    for c in wanted:  # a name two columns share says neither (it took the first)
        at = [j for j, n in enumerate(names) if str(n) == c]
        if len(at) > 1:
            shown = ", ".join(map(str, at[:5])) + (", ..." if len(at) > 5 else "")
            raise ParameterError(f"{what}: {len(at)} columns are named {c!r} (columns "
                                 f"{shown}): give the column index instead, or give the "
                                 "columns distinct names.")
    return [where[c] if isinstance(c, str) else c for c in value]


def _trace_columns(value, n_cols):
    """``trace_columns``: distinct column indices in [0, N), sorted, as a list of ints."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
        raise ParameterError(f"trace_columns must be a sequence of column indices (the "
                             f"columns whose W draws are kept), got {value!r}.")
    cols = list(value)
    bad = [c for c in cols if isinstance(c, bool) or not isinstance(c, (int, np.integer))]
    if bad:
        raise ParameterError(f"trace_columns must hold column indices (integers), got "
                             f"{bad[0]!r}.")
    cols = sorted({int(c) for c in cols})
    if not cols:
        raise ParameterError("trace_columns is empty: pass the columns whose W draws are "
                             "kept, or leave it out (10 evenly spaced ones by default).")
    if cols[0] < 0 or (n_cols is not None and cols[-1] >= n_cols):
        raise ParameterError(f"trace_columns must lie in [0, {n_cols if n_cols else 'N'}), "
                             f"got {cols[0] if cols[0] < 0 else cols[-1]}.")
    if len(cols) > MAX_TRACE_COLUMNS:
        raise ParameterError(f"trace_columns holds {len(cols)} columns; at most "
                             f"{MAX_TRACE_COLUMNS} keep their W draws (each holds n_keep x K "
                             "floats per chain on a worker). Pass fewer.")
    return cols


def validate_params(p: dict, n_cols: int | None = None) -> dict:
    """Check every parameter; return a normalised copy.

    Parameters
    ----------
    p : dict
        The parameters of :class:`dask_bid.BayesianID` (every key of
        ``dask_bid.interface.functional.DEFAULTS`` and ``n_components``).
    n_cols : int, optional
        N, the number of columns of A (from its metadata): bounds ``n_components`` and
        explicit ``init`` columns.

    Returns
    -------
    dict
        ``p`` with string options lower-cased, numbers as Python ints and floats, and
        ``priors`` (a :class:`~dask_bid.kernels.priors.Priors`) added.

    Raises
    ------
    ParameterError
        For the first parameter out of its domain.
    """
    out = dict(p)
    out["model"] = _choice("model", p["model"], MODELS,
                           " (GBT: fixed prior; GBTN: hierarchical prior)")
    K = p["n_components"]
    hint = (f" It is the number K of columns kept; it needs 1 <= K < N (N = {n_cols})."
            if n_cols is not None else " It is the number K of columns kept; it needs K >= 1.")
    out["n_components"] = K = _int("n_components", K, 1,
                                   None if n_cols is None else n_cols - 1, hint)
    n_iter = out["n_iter"] = _int("n_iter", p["n_iter"], 1,
                                  hint=" It is the number of Gibbs iterations.")
    burn_in = out["burn_in"] = _int(
        "burn_in", p["burn_in"], 0, hint=" It is the number of iterations discarded first.")
    if burn_in >= n_iter:
        raise ParameterError(
            f"burn_in ({burn_in}) must be smaller than n_iter ({n_iter}): no draw would be "
            "retained. Lower burn_in or raise n_iter.")
    out["thin"] = thin = _int("thin", p["thin"], 1,
                              hint=" It keeps every thin-th draw; use thin=1 to keep every "
                                   "draw after burn-in.")
    if thin > n_iter - burn_in:
        # a thinning interval longer than the sampling window is a slip (thin=200 of 90
        # iterations ran the whole fit for one retained draw, the burn-in's next: no
        # interval, no convergence check). Draws are kept at burn_in, burn_in + thin, ...
        # < n_iter: a shorter thin may keep one draw too, as short trial runs do.
        raise ParameterError(
            f"thin={thin} exceeds the {n_iter - burn_in} iterations after the burn-in "
            f"(n_iter={n_iter}, burn_in={burn_in}): it would keep their first draw only. "
            "Lower the thinning (thin=) or raise n_iter.")
    if "aggressive" in p:
        raise ParameterError(
            "aggressive= was replaced by sampler=: use sampler='aggressive' (Algorithm 2), "
            "'plain' (Algorithm 1), 'collapsed' (exact, the default) or 'search'.")
    out["sampler"] = _choice("sampler", p["sampler"], SAMPLERS,
                             " (collapsed: exact and mixing; plain: Algorithm 1; aggressive: "
                             "Algorithm 2, the paper; search: least-squares optimisation)")
    if isinstance(p["n_tries"], str) and p["n_tries"].lower() == "all":
        out["n_tries"] = "all"
    else:
        out["n_tries"] = _int(
            "n_tries", p["n_tries"], 1,
            hint=" It is the number of candidate columns per collapsed slot update, or "
                 "'all' (every column: the slot's full conditional).")
    out["n_anneal"] = _int("n_anneal", p["n_anneal"], 0,
                           hint=" It is the number of intermediate distributions of the "
                                "annealed swap; 0 for none.")
    out["n_pivot"] = _int("n_pivot", p.get("n_pivot", 0), 0,
                          hint=" It is the number of pivot swap attempts per iteration; "
                               "0 for none.")
    out["anneal_every"] = _int("anneal_every", p["anneal_every"], 1,
                               hint=" It is how often (in iterations) an annealed swap runs.")
    out["search_warmup"] = _warmup(
        "search_warmup", p["search_warmup"], out["burn_in"] // 2, out["burn_in"],
        " It is the number of burn-in iterations run by the least-squares search before "
        "the sampler, or 'auto' (half the burn-in); 0 for none.",
        "the search's iterations are not posterior draws")
    # the search warm-up, when asked for, takes the place of the default tempered one
    out["tempered_warmup"] = _warmup(
        "tempered_warmup", p.get("tempered_warmup", 0),
        0 if out["search_warmup"] else (3 * out["burn_in"]) // 4, out["burn_in"],
        " It is the number of burn-in iterations whose swaps run at a falling "
        "temperature, or 'auto' (three quarters of the burn-in); 0 for none.",
        "tempered iterations are not posterior draws")
    if out["tempered_warmup"] and out["search_warmup"]:
        raise ParameterError(
            "search_warmup and tempered_warmup are two warm-ups for the same purpose; "
            "pass one of them (the other 0).")
    out["warmup_temperature"] = _positive("warmup_temperature",
                                          p.get("warmup_temperature", 100.0))
    if out["warmup_temperature"] < 1.0:
        raise ParameterError(
            f"warmup_temperature must be >= 1, got {out['warmup_temperature']}: the warm-up "
            "starts hotter than the target and cools to it (default 100).")
    out["acceptance"] = _choice("acceptance", p["acceptance"], ACCEPTANCES,
                                " (barker: Gibbs over the candidate set; metropolis: "
                                "Metropolised Gibbs)")
    bounds = p["bounds"]
    try:
        if isinstance(bounds, (str, bytes)) or len(bounds) != 2:
            raise TypeError
        a, b = (float(x) for x in bounds)
    except (TypeError, ValueError) as exc:
        raise ParameterError(
            f"bounds must be a pair (a, b) of numbers, got {bounds!r}. Use e.g. (-1, 1).") from exc
    if not (np.isfinite(a) and np.isfinite(b)):
        raise ParameterError(
            f"bounds must be finite, got ({a}, {b}): the model bounds every W entry. "
            "Use e.g. (-1, 1) or the weak-ID (-2, 2).")
    if not (a < b):
        raise ParameterError(
            f"bounds must satisfy a < b, got a={a}, b={b}. Pass them in increasing order, "
            "e.g. (-1, 1).")
    if not (a <= 0.0 and b >= 1.0):
        raise ParameterError(
            f"bounds ({a}, {b}) must contain 0 and 1: the decomposition sets W[:, J] to the "
            "identity. Use e.g. (-1, 1) or the weak-ID (-2, 2).")
    out["bounds"] = (a, b)
    for name in HYPERPARAMETERS:
        out[name] = _positive(name, p[name])
    for name in ("mu", "mu_mu"):
        v = p[name]
        if not _real(v) or not np.isfinite(v):
            raise ParameterError(f"{name} must be a finite number, got {v!r} (default 0.0).")
        out[name] = float(v)
    out["point_estimate"] = _choice("point_estimate", p["point_estimate"], POINT_ESTIMATES)
    init = p["init"]
    if isinstance(init, str):
        out["init"] = _choice("init", init, INITS, ", or pass K column indices")
    else:
        try:
            J0 = np.asarray(init)
        except Exception as exc:
            raise ParameterError(f"init must be one of {INITS} or K column indices, got "
                                 f"{init!r}.") from exc
        if J0.ndim != 1 or J0.size != K or J0.dtype.kind not in "iu":
            raise ParameterError(f"init as an array must hold K={K} integer column indices, "
                                 f"got {J0.tolist()!r}.")
        if n_cols is not None and (J0.min() < 0 or J0.max() >= n_cols
                                   or np.unique(J0).size != K):
            raise ParameterError(f"init columns must be {K} distinct indices in [0, {n_cols}), "
                                 f"got {J0.tolist()!r}.")
    out["proposal_init"] = _choice("proposal_init", p["proposal_init"], PROPOSAL_INITS)
    out["missing"] = _choice("missing", p["missing"], MISSING,
                             " ('zero': every entry counts; 'mask': NaN marks a missing entry)")
    out["n_redraw"] = _n_redraw(p.get("n_redraw", 0), out["missing"], out["n_components"])
    out["n_chains"] = _int("n_chains", p["n_chains"], 1)
    if isinstance(p["n_candidates"], str) and p["n_candidates"].lower() == "auto":
        out["n_candidates"] = "auto"
    else:
        out["n_candidates"] = _int(
            "n_candidates", p["n_candidates"], 1,
            hint=" It is the number of swap candidates computed per pass over A, or 'auto' "
                 "(the default).")
    pool = p.get("candidate_pool", "auto")
    if pool is None or (isinstance(pool, str) and pool.lower() == "auto"):
        out["candidate_pool"] = None if pool is None else "auto"
    else:
        out["candidate_pool"] = _int(
            "candidate_pool", pool, K + 1,
            hint=" It is the number of columns the swap candidates are drawn from (the "
                 "basis's included), 'auto' (the default) or None (every column).")
    every = p.get("pool_every", "auto")
    if isinstance(every, str) and every.lower() == "auto":
        out["pool_every"] = "auto"
    else:
        out["pool_every"] = _int("pool_every", every, 1,
                                 hint=" It is the number of iterations between draws of "
                                      "the candidate pool, or 'auto' (the default).")
    if p["block_size"] is not None:
        out["block_size"] = _int("block_size", p["block_size"], 1,
                                 hint=" Pass None to split the columns evenly.")
    out["n_threads"] = _int("n_threads", p["n_threads"], 1)
    out["n_trace_columns"] = _int("n_trace_columns", p["n_trace_columns"], 0,
                                  hint=" Pass 0 to keep no W draws.")
    # left out when None, so that the parameters of fits stored before it existed
    # compare equal on resume
    out.pop("trace_columns", None)
    if p.get("trace_columns") is not None:
        out["trace_columns"] = _trace_columns(p["trace_columns"], n_cols)
    if "refine_sweeps" in p:
        out["refine_sweeps"] = _int(
            "refine_sweeps", p["refine_sweeps"], 0,
            hint=" It is the number of sweeps of W with the reported basis fixed; 0 for none.")
    if "swap_score" in p:
        raise ParameterError(
            "swap_score= was replaced by sampler=: swap_score='lstsq' is sampler='search' "
            "(an optimisation, not a posterior sampler); swap_score='draw' is "
            "sampler='aggressive'.")
    if "w_estimate" in p:
        out["w_estimate"] = _choice("w_estimate", p["w_estimate"], W_ESTIMATES,
                                    " (posterior mean or mode of W for the reported basis, or its "
                                    "box-constrained least squares)")
    _check_random_state(p["random_state"])
    out["priors"] = Priors(hierarchical=out["model"] == "gbtn", a=a, b=b,
                           alpha_sigma=out["alpha_sigma"], beta_sigma=out["beta_sigma"],
                           mu=out["mu"], tau=out["tau"], mu_mu=out["mu_mu"],
                           tau_mu=out["tau_mu"], alpha_t=out["alpha_t"], beta_t=out["beta_t"])
    if out["priors"].hierarchical:
        # the W entries drawn from the prior: every chain's start, and the plain
        # sampler's incoming row at each iteration
        rows = out["n_components"] + (out["n_iter"] if out.get("sampler") == "plain" else 0)
        # (without N, as before the input is read, for one column: the fit checks again)
        _check_gbtn_mass(out["priors"], out["n_chains"] * rows * (n_cols or 1))
    return out


#: The most unconstrained draws (about 25 ns each: two minutes) that drawing W from the
#: GBTN prior may take (rejection: 1/acceptance draws an entry) before a fit is refused
#: rather than left to run for hours in a compiled loop that Ctrl-C does not stop
GBTN_MAX_PRIOR_DRAWS = 5e9


def _check_gbtn_mass(pr, n_entries):
    from ..kernels.priors import gbtn_box_mass

    mass = gbtn_box_mass(pr)
    if n_entries > mass * GBTN_MAX_PRIOR_DRAWS:
        raise ParameterError(
            f"the GBTN hyperprior (mu_mu={pr.mu_mu:g}, tau_mu={pr.tau_mu:g}, "
            f"alpha_t={pr.alpha_t:g}, beta_t={pr.beta_t:g}) puts "
            + ("almost none" if mass < 1e-300 else f"only {mass:.1e}")
            + f" of its mass in the bounds ({pr.a:g}, {pr.b:g}): the {n_entries:,} entries of "
            "W drawn from it (a rejection sampler) would take "
            + ("for ever" if mass < 1e-300 else f"about {n_entries / mass:.0e} draws")
            + ". Use a tighter hyperprior, e.g. the defaults (tau_mu=0.1, alpha_t=1, "
            "beta_t=1).")
