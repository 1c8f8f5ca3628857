"""Plots of a Bayesian ID fit (matplotlib, an optional dependency imported lazily).

Each function takes a :class:`~dask_bid.BIDResult`, a fitted
:class:`~dask_bid.BayesianID` or the result of :func:`dask_bid.open_result`, and an
optional matplotlib ``Axes`` to draw into (a new figure otherwise); it returns the
Axes it drew on. ``ax.figure.savefig("file.png")`` writes it.

* :func:`plot_trace`: MSE and sigma^2 per iteration, one line per chain.
* :func:`plot_autocorrelation`: autocorrelation of the W draws against the lag,
  averaged over the traced entries (the paper's Figure 4, middle).
* :func:`plot_inclusion`: inclusion probability of every column.
* :func:`plot_error_vs_k`: reconstruction error against K (the paper's Figure 4,
  bottom), from a list of fits or by fitting over a grid of K.
"""

from __future__ import annotations

import numbers
import textwrap

import numpy as np

__all__ = ["plot_trace", "plot_autocorrelation", "plot_inclusion", "plot_error_vs_k",
           "plot_overview", "autocorrelation", "fit_k_grid", "close"]

_INSTALL_HINT = ('matplotlib is needed for plots but is not installed. Install the optional '
                 'extra: pip install "dask_bid[plot]"  (or: pip install matplotlib).')


def _plt():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    return plt


def close(fig):
    """Close a figure made by these functions, or ``"all"`` (frees memory in scripts)."""
    _plt().close(fig)


def _as_result(obj):
    from .diagnostics import _as_result as as_result

    return as_result(obj)


def _new_axes(ax, n=1, figsize=(6.4, 3.6)):
    if ax is not None:
        return ax
    plt = _plt()
    if n == 1:
        _, ax = plt.subplots(figsize=figsize, layout="constrained")
        return ax
    _, axes = plt.subplots(n, 1, figsize=(figsize[0], figsize[1] * n * 0.75), sharex=True,
                           layout="constrained")
    return axes


# ----------------------------------------------------------------------------- trace

def plot_trace(result, ax=None, *, which=("mse", "sigma2"), log=True, burn_in=True):
    """Trace of the MSE and of sigma^2 per iteration, one line per chain.

    Parameters
    ----------
    result : BIDResult or fitted BayesianID
    ax : Axes or sequence of Axes, optional
        One Axes per entry of ``which`` (a single Axes when ``which`` has one entry).
    which : sequence of {"mse", "sigma2"}
    log : bool, default=True
        Logarithmic y axis when the trace spans more than a factor 10 (the first
        iterations from a random start are orders of magnitude above the rest).
    burn_in : bool, default=True
        Shade the burn-in iterations.

    Returns
    -------
    ndarray of Axes (or one Axes when ``which`` has one entry)
    """
    from .._errors import ParameterError

    res = _as_result(result)
    which = (which,) if isinstance(which, str) else tuple(which)
    bad = set(which) - {"mse", "sigma2"}
    if bad or not which:
        raise ParameterError(f"which must hold 'mse' and/or 'sigma2', got {which!r}.")
    axes = _new_axes(ax, len(which))
    axes_arr = np.atleast_1d(np.asarray(axes, dtype=object)).ravel()
    if axes_arr.size != len(which):
        raise ParameterError(f"got {axes_arr.size} Axes for {len(which)} panels ({which}).")
    masked = str(res.params.get("missing", "zero")).lower() == "mask"
    # a masked fit's trace is the SSE over the observed entries per observed entry
    labels = {"mse": "MSE (observed entries)" if masked else "MSE", "sigma2": r"$\sigma^2$"}
    n_chains, n_iter = res.trace.shape
    # iterations counted from 0, as the retained draws' numbers (ArviZ's "draw"): the
    # first retained draw, iteration burn_in, sits on the burn-in band's edge (it was
    # drawn one to the right of it)
    its = np.arange(n_iter)
    b = int(res.params.get("burn_in", 0))
    for a, field in zip(axes_arr, which, strict=True):
        for c in range(n_chains):
            a.plot(its, res.trace[field][c], lw=1.0, alpha=0.85, label=f"chain {c}")
        y = res.trace[field]
        # a log axis only helps when the trace spans more than a decade
        if log and np.all(y > 0) and y.max() > 10 * y.min():
            a.set_yscale("log")
        if burn_in and 0 < b < n_iter:
            a.axvspan(0, b, color="0.85", alpha=0.5, lw=0, label="burn-in")
        a.set_ylabel(labels[field])
        a.grid(True, alpha=0.3)
    axes_arr[-1].set_xlabel("iteration")
    if n_chains > 1 or (burn_in and 0 < b < n_iter):
        axes_arr[0].legend(loc="upper right", fontsize="small", ncol=min(n_chains + 1, 4))
    axes_arr[0].set_title(f"trace ({n_chains} chain{'s' if n_chains > 1 else ''}, "
                          f"K = {len(res.columns)})")
    return axes_arr[0] if len(which) == 1 else axes_arr


# ----------------------------------------------------------------------------- autocorrelation

def autocorrelation(x, max_lag):
    """Sample autocorrelation r_0..r_max_lag of a 1-D series (r_0 = 1; NaN if constant)."""
    x = np.asarray(x, dtype=np.float64)
    x = x - x.mean()
    denom = float(np.dot(x, x))
    out = np.full(max_lag + 1, np.nan)
    if denom <= 0.0 or not np.isfinite(denom):
        return out
    n = x.size
    for lag in range(min(max_lag, n - 1) + 1):
        out[lag] = float(np.dot(x[: n - lag], x[lag:])) / denom
    return out


def _longest_valid_run(mask):
    """(start, stop) of the longest run of True in a 1-D boolean array."""
    m = np.concatenate(([False], np.asarray(mask, dtype=bool), [False])).astype(np.int8)
    edges = np.flatnonzero(np.diff(m))
    if edges.size == 0:
        return 0, 0
    starts, stops = edges[::2], edges[1::2]
    i = int(np.argmax(stops - starts))
    return int(starts[i]), int(stops[i])


def _acf_matrix(res, quantity, max_lag):
    """Per chain: (n_series, max_lag + 1) autocorrelations of ``quantity``."""
    from .diagnostics import w_draws

    per_chain = []
    if quantity == "W":
        W, _ = w_draws(res)
        n_chains = W.shape[0]
        for c in range(n_chains):
            valid = ~np.isnan(W[c]).any(axis=(1, 2))
            s, e = _longest_valid_run(valid)
            rows = []
            if e - s > max_lag + 1:
                series = W[c, s:e].reshape(e - s, -1)
                for j in range(series.shape[1]):
                    r = autocorrelation(series[:, j], max_lag)
                    if not np.isnan(r[0]):
                        rows.append(r)
            per_chain.append(np.array(rows).reshape(-1, max_lag + 1))
    else:
        x = res.draws_sigma2 if quantity == "sigma2" else res.draws_sse
        for c in range(x.shape[0]):
            r = autocorrelation(x[c], max_lag)
            per_chain.append(r[None, :] if not np.isnan(r[0]) else np.empty((0, max_lag + 1)))
    return per_chain


def plot_autocorrelation(result, ax=None, *, max_lag=None, quantity="W", threshold=0.1):
    """Autocorrelation of the retained draws against the lag.

    For ``quantity="W"`` (the paper's Figure 4, middle) the autocorrelation of every
    traced entry of W in the reported basis is computed per chain and averaged over the
    entries; thin lines are the chains, the thick line their mean, the band the 10-90 %
    range over entries and chains. A chain contributes the longest stretch of its draws
    that had the reported basis.

    Parameters
    ----------
    result : BIDResult or fitted BayesianID
    ax : Axes, optional
    max_lag : int, optional
        Default: min(40, draws per chain // 2). Lags count retained draws (so a lag of 1
        is ``thin`` iterations).
    quantity : {"W", "sigma2", "mse"}
    threshold : float or None, default=0.1
        Draw a dashed line there (the paper reads mixing off the lag where the mean
        autocorrelation falls under 0.1).

    Returns
    -------
    Axes

    Raises
    ------
    ParameterError
        The chains kept too few draws for ``max_lag`` (at least ``max_lag + 2`` a
        chain); no chain kept W draws of the reported basis long enough (use
        ``quantity="sigma2"``, more iterations or more ``n_trace_columns``); or the
        quantity never changed.
    """
    from .._errors import ParameterError

    res = _as_result(result)
    if quantity not in ("W", "sigma2", "mse"):
        raise ParameterError(f"quantity must be 'W', 'sigma2' or 'mse', got {quantity!r}.")
    n_keep = res.draws_sigma2.shape[1]
    if max_lag is None:
        max_lag = max(1, min(40, n_keep // 2))
    if not isinstance(max_lag, numbers.Integral) or max_lag < 1:
        raise ParameterError(f"max_lag must be a positive integer, got {max_lag!r}.")
    if n_keep <= max_lag + 1:
        # too short whatever the quantity: say so, not "use sigma2" (and sigma^2's lag 1
        # from two draws, one pair, was drawn as if it were an estimate)
        raise ParameterError(
            f"the chains kept {n_keep} draw{'s' if n_keep != 1 else ''} each, and an "
            f"autocorrelation up to lag {max_lag} needs at least {max_lag + 2}: fit more "
            "iterations after the burn-in.")
    per_chain = _acf_matrix(res, quantity, int(max_lag))
    allr = np.concatenate([m for m in per_chain if m.size], axis=0) if any(
        m.size for m in per_chain) else np.empty((0, max_lag + 1))
    traced = res.draws_w is not None and np.size(res.draws_w["columns"]) > 0
    if allr.shape[0] == 0 and quantity == "W" and not traced:
        # (it said no chain kept enough draws with the reported basis, of chains that
        # kept nothing else: the cause is that no column's W draws were kept at all)
        raise ParameterError(
            "no W draws to correlate: the fit kept no column's W draws (n_trace_columns=0 "
            "and no trace_columns). Use quantity='sigma2', or fit with n_trace_columns > 0 "
            "or trace_columns=[...].")
    all_in_basis = traced and not (set(int(c) for c in np.ravel(res.draws_w["columns"]))
                                - set(int(j) for j in res.columns))
    if allr.shape[0] == 0 and quantity == "W" and all_in_basis:
        # W at a basis column is the identity, never a draw: only the traced columns
        # outside the basis have W draws (it said no chain kept enough draws, of 300)
        raise ParameterError(
            "no W draws to correlate: every traced column is in the reported basis, where "
            "W is the identity. Use quantity='sigma2', or trace other columns "
            "(trace_columns=[...] outside the basis, or a larger n_trace_columns).")
    if allr.shape[0] == 0 and quantity == "W" and not res.n_draws_point:
        # (it said "no chain kept more than 41 consecutive draws" of a basis none had)
        raise ParameterError(
            "no W draws to correlate: no retained draw has the reported basis (the lowest "
            "SSE the chains visited, in the burn-in only). Use quantity='sigma2', or "
            "point_estimate='mode' for the draws' most frequent basis.")
    if allr.shape[0] == 0 and quantity == "W":
        raise ParameterError(
            f"no W draws to correlate: no chain kept more than {max_lag + 1} consecutive "
            "draws with the reported basis (and a non-constant value). Use "
            "quantity='sigma2', more iterations, or a larger n_trace_columns.")
    if allr.shape[0] == 0:
        raise ParameterError(f"no {quantity} draws to correlate: every chain's {quantity} "
                             "is constant over its retained draws.")
    ax = _new_axes(ax)
    lags = np.arange(max_lag + 1)
    thin = int(res.params.get("thin", 1))
    if len(per_chain) > 1:
        for c, m in enumerate(per_chain):
            if m.size:
                ax.plot(lags, np.nanmean(m, axis=0), lw=0.8, alpha=0.6, label=f"chain {c}")
    if allr.shape[0] > 1:
        lo, hi = np.nanquantile(allr, [0.1, 0.9], axis=0)
        ax.fill_between(lags, lo, hi, color="C0", alpha=0.15, lw=0, label="10-90 %")
    ax.plot(lags, np.nanmean(allr, axis=0), color="k", lw=2.0, label="mean")
    if threshold is not None:
        ax.axhline(threshold, color="C3", ls="--", lw=1.0, label=f"{threshold:g}")
    ax.axhline(0.0, color="0.5", lw=0.6)
    ax.set_xlabel(f"lag (retained draws; 1 = {thin} iteration{'s' if thin > 1 else ''})")
    ax.set_ylabel("autocorrelation")
    what = {"W": f"W entries ({allr.shape[0]} series)", "sigma2": r"$\sigma^2$",
            "mse": "MSE"}[quantity]
    ax.set_title(f"autocorrelation of {what}")
    ax.set_ylim(min(-0.2, float(np.nanmin(allr)) - 0.05), 1.05)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    return ax


# ----------------------------------------------------------------------------- inclusion

def plot_inclusion(result, ax=None, *, planted=None, labels=None):
    """Inclusion probability of every column (share of retained draws with it in J),
    with +- 2 Monte Carlo standard errors (``BIDResult.inclusion_mcse``) on every column
    the chains visited.

    Parameters
    ----------
    result : BIDResult or fitted BayesianID
    ax : Axes, optional
    planted : array of int, optional
        Known true columns (for synthetic data), marked with open circles.
    labels : sequence of str, optional
        Column names, shown on the x axis when there are at most 60 columns. Default:
        the names the fit kept (``feature_names``: a DataFrame's, a text header's).
        With more columns, the reported columns are named beside their points (up to 20).

    Returns
    -------
    Axes
    """
    from .._errors import ParameterError

    res = _as_result(result)
    p = np.asarray(res.inclusion_probability, dtype=np.float64)
    N = p.size
    if labels is None:
        labels = getattr(res, "feature_names", None)
    if labels is not None and len(labels) != N:
        raise ParameterError(f"labels has {len(labels)} names for the {N} columns of A; "
                             "pass one name per column.")
    pl = None if planted is None else _planted_columns(planted, res, N)
    ax = _new_axes(ax)  # after the checks: a refusal left an empty figure open
    x = np.arange(N)
    ax.vlines(x, 0, p, color="0.55", lw=1.0 if N <= 500 else 0.5)
    from ..engine.convergence import inclusion_mcse

    se = inclusion_mcse(res.draws_columns, N)
    seen = np.flatnonzero(p > 0)
    if seen.size and np.isfinite(se[seen]).all():
        # how far the chains' estimate can be trusted: a chain that rarely changes its
        # basis estimates p from few effective draws
        # clipped to [0, 1], where a probability lies
        yerr = np.vstack([np.minimum(2 * se[seen], p[seen]),
                          np.minimum(2 * se[seen], 1.0 - p[seen])])
        ax.errorbar(seen, p[seen], yerr=yerr, fmt="none", ecolor="C1",
                    elinewidth=1.0, capsize=2, label="± 2 MCSE")
    cols = np.asarray(res.columns)
    ax.plot(cols, p[cols], "o", color="C0", ms=5, label="reported columns")
    if pl is not None:
        ax.plot(pl, p[pl], "o", mfc="none", mec="C3", ms=9, mew=1.5, label="planted")
    ax.set_xlim(-0.5, N - 0.5)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("column of A")
    ax.set_ylabel("inclusion probability")
    ax.set_title(f"inclusion probability (K = {cols.size}, {res.draws_columns.shape[0]} "
                 f"chain{'s' if res.draws_columns.shape[0] > 1 else ''})")
    if labels is not None and N <= 60:
        ax.set_xticks(x)
        ax.set_xticklabels(list(labels), rotation=90, fontsize="small")
    elif labels is not None and cols.size <= 20:
        for c in cols:
            # above a low point, below a high one: above p near 1 a name ran out of the
            # axes into the title
            high = p[c] > 0.6
            ax.annotate(str(labels[int(c)]), (c, p[c]), textcoords="offset points",
                        xytext=(0, -6 if high else 6), ha="center",
                        va="top" if high else "bottom", fontsize="x-small", rotation=90)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="best", fontsize="small", framealpha=0.9)
    return ax


def _planted_columns(planted, res, N) -> np.ndarray:
    """``planted`` as column indices: integers in [0, N), or the fit's column names (a
    raw IndexError, a silent -1 for the last column, and int('f08') before)."""
    from .._errors import ParameterError
    from ._params import columns_by_name

    cols = columns_by_name(np.ravel(np.asarray(planted, dtype=object)).tolist(),
                           getattr(res, "feature_names", None), what="planted")
    bad = [c for c in cols if not isinstance(c, (int, np.integer)) or not 0 <= int(c) < N]
    if bad:
        raise ParameterError(f"planted: {bad[0]!r} is not a column of A (integers 0 to "
                             f"{N - 1}, or the fit's column names).")
    return np.asarray(cols, dtype=np.int64)


# ----------------------------------------------------------------------------- error vs K

def _is_fit(obj) -> bool:
    """A BIDResult or a fitted estimator (not a matrix, nor a list of fits)."""
    from .result import BIDResult

    return isinstance(obj, BIDResult) or hasattr(obj, "columns_")


def _k_and_mse(obj):
    """(family, K, mse) of a BIDResult, BayesianID, RandomizedID or open_result object."""
    from ..engine.result import stored_sampler
    from .result import BIDResult

    if isinstance(obj, BIDResult):
        p = obj.params
        family = str(p.get("model", "gbt")).upper()
        sampler = stored_sampler(p)
        if sampler != "collapsed":  # another chain: its own line, not merged with the default
            family += f" {sampler}"
        return family, len(obj.columns), float(obj.mse)
    if hasattr(obj, "result_") and isinstance(obj.result_, BIDResult):
        return _k_and_mse(obj.result_)
    if hasattr(obj, "columns_") and hasattr(obj, "mse_"):
        method = getattr(obj, "method", None)
        family = {"randomized": "RID", "cpqr": "CPQR"}.get(method, type(obj).__name__)
        return family, len(obj.columns_), float(obj.mse_)
    raise TypeError(f"cannot read K and the MSE from a {type(obj).__name__}; pass BIDResult, "
                    "fitted BayesianID or fitted RandomizedID objects.")


def fit_k_grid(A, k_values, *, baseline="randomized", random_state=0, **params):
    """Fit the Bayesian ID (and a baseline) for every K of a grid.

    Parameters
    ----------
    A : array-like (M, N)
    k_values : sequence of int
    baseline : {"randomized", "cpqr", None}
        Also fit :class:`dask_bid.baselines.RandomizedID` with this method.
    random_state : int
    **params
        Passed to :func:`dask_bid.bayesian_id`.

    Returns
    -------
    list
        The BIDResults, then the fitted baselines.

    Warns
    -----
    ConvergenceWarning
        Once for the grid, naming the K whose chains failed the convergence check.
    """
    from .._errors import ParameterError
    from .functional import bayesian_id

    ks = [int(k) for k in k_values]
    if not ks:
        raise ParameterError("k_values is empty: give the ranks K to fit, e.g. [2, 4, 8].")
    from ..engine.inputs import as_matrix_source

    # every K checked before the first fit: a bad one last in the grid wasted the others
    M, N = as_matrix_source(A, storage_options=params.get("storage_options")).shape
    bad = [k for k in ks if not (1 <= k < N and k <= M)]
    if bad:
        raise ParameterError(
            f"k_values {bad} are out of range for A ({M} x {N}): each K needs 1 <= K < N "
            f"and K <= M; give K between 1 and {min(N - 1, M)}.")
    import warnings

    from .._errors import ConvergenceWarning, sklearn_flavoured
    from .._warn import warn
    from ..engine.summary import failed_convergence

    out, failed = [], []
    for k in ks:
        # one warning for the grid, not one per fit: the curve uses each fit's reported
        # basis (the best one visited), which does not need the chain to have converged
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = bayesian_id(A, k, random_state=random_state, **params)
        out.append(res)
        if failed_convergence(res) is not None:
            failed.append(k)
    if failed:
        warn(
            f"{len(failed)} of the {len(ks)} fits of the grid did not pass the convergence "
            f"check (K = {', '.join(map(str, failed))}): their error is that of the best "
            "basis visited, but their posterior summaries are not to be trusted (longer "
            "chains: n_iter)", sklearn_flavoured(ConvergenceWarning))
    if baseline is not None:
        from ..baselines import RandomizedID

        out += [RandomizedID(k, method=baseline, random_state=random_state).fit(A) for k in ks]
    return out


def plot_error_vs_k(results, k_values=None, ax=None, *, baseline="randomized",
                    observed=False, **params):
    """Reconstruction error ||A - C W||^2 / (M N) against the rank K.

    Parameters
    ----------
    results : sequence of fits, or array-like (M, N)
        BIDResults, fitted BayesianID or RandomizedID estimators (one line per kind of
        fit: GBT, GBTN, RID ...), or a matrix: then every K of ``k_values`` is fitted
        (with :func:`fit_k_grid`, passing ``baseline`` and ``**params``).
    k_values : sequence of int, optional
        Needed when ``results`` is a matrix.
    ax : Axes, optional
    baseline : {"randomized", "cpqr", None}
        Only used when fitting.
    observed : bool, default=False
        Plot the MSE over observed entries (``mse_observed``) where a fit has it; a fit
        without it (a baseline fitted on the filled matrix) keeps its MSE over all
        entries, its line labelled "(all entries)".

    Returns
    -------
    Axes
    """
    from .._errors import ParameterError

    if _is_fit(results):  # one fit: a point (it was called "a matrix")
        fits = [results]
    elif isinstance(results, np.ndarray) and results.dtype == object:
        fits = list(results.ravel())  # an object array of fits
    elif isinstance(results, (list, tuple, set, frozenset)) or hasattr(results, "__next__"):
        fits = list(results)  # a collection or a generator of fits
    else:
        if k_values is None:
            raise ParameterError("plot_error_vs_k got a matrix: pass k_values, the ranks K "
                                 "to fit (or pass a list of fitted results).")
        fits = fit_k_grid(results, k_values, baseline=baseline, **params)
    if not fits:
        raise ParameterError("no fits to plot: results is empty.")
    series, any_observed = {}, False
    for f in fits:
        fam, k, mse = _k_and_mse(f)
        if observed:
            r = f if not hasattr(f, "result_") else f.result_
            mo = getattr(r, "mse_observed", None)
            if mo is None:
                # a fit without an observed-entries MSE (a baseline of the filled
                # matrix): its MSE over all entries, said in its label, not passed off as
                # the axis's measure
                fam += " (all entries)"
            else:
                mse, any_observed = float(mo), True
        series.setdefault(fam, []).append((k, mse))
    ax = _new_axes(ax)
    markers = "osD^v<>"
    for i, (fam, pts) in enumerate(series.items()):
        pts = sorted(pts)
        ks, ms = zip(*pts, strict=True)
        ax.plot(ks, ms, marker=markers[i % len(markers)], lw=1.5, label=fam)
    ax.set_xlabel("K (columns selected)")
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # K is a count: no 3.25
    all_k = sorted({k for pts in series.values() for k, _ in pts})
    if len(all_k) == 1:
        # one K: the axis spanned 4.74 .. 5.26, and the locator fell back to fractions
        ax.set_xlim(all_k[0] - 1, all_k[0] + 1)
        ax.set_xticks(all_k)
    # no fit with an observed-entries MSE: every point is over all entries
    ax.set_ylabel("MSE (observed entries)" if any_observed else "MSE")
    ax.set_title("reconstruction error against K")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return ax


# ----------------------------------------------------------------------------- overview

def plot_overview(result, *, planted=None, figsize=(11.0, 6.5)):
    """Four panels: MSE and sigma^2 traces, inclusion probability, W autocorrelation.

    The autocorrelation panel falls back to sigma^2 when no chain kept enough W draws
    of the reported basis, and says why in words when the chains are too short for any.

    Parameters
    ----------
    result : BIDResult or fitted BayesianID
    planted : sequence of int, optional
        Known basis columns, marked in the inclusion panel (the demo's planted ones).
    figsize : (float, float), default=(11.0, 6.5)
        The figure's size in inches.

    Returns
    -------
    Figure
    """
    from .._errors import ParameterError

    res = _as_result(result)
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=figsize, layout="constrained")
    plot_trace(res, ax=axes[:, 0], which=("mse", "sigma2"))
    plot_inclusion(res, ax=axes[0, 1], planted=planted)
    try:
        plot_autocorrelation(res, ax=axes[1, 1])
    except ParameterError:
        axes[1, 1].clear()
        try:
            plot_autocorrelation(res, ax=axes[1, 1], quantity="sigma2")
        except ParameterError as exc:  # too few draws at all: the panel says why
            axes[1, 1].clear()
            axes[1, 1].set_axis_off()
            axes[1, 1].text(0.5, 0.5, "no autocorrelation:\n" + textwrap.fill(str(exc), 48),
                            ha="center", va="center", transform=axes[1, 1].transAxes)
    p = res.params
    # a masked fit's headline is its MSE over the observed entries, as the trace panel's
    # (the MSE over all entries counts the unobserved ones as 0: another number, unlabelled)
    observed = getattr(res, "mse_observed", None)
    mse = (f"MSE {res.mse:.4g}" if observed is None else
           f"MSE {observed:.4g} (observed entries)")
    fig.suptitle(f"{str(p.get('model', 'gbt')).upper()} on a {res.n_samples} x {res.n_features} "
                 f"matrix, K = {len(res.columns)}: {mse}, max|W| {res.max_abs_w:.3g}")
    return fig
