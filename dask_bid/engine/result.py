"""The result of a Bayesian ID fit, shared by the estimator and the function."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

__all__ = ["BIDResult", "WIntervals", "TRACE_DTYPE", "draws_interval", "stored_sampler"]

TRACE_DTYPE = np.dtype([("mse", "f8"), ("sigma2", "f8"), ("accepted", "?"),
                        ("accept_prob", "f8")])


class WIntervals(NamedTuple):
    """Credible intervals of W[rows, columns] (:meth:`BIDResult.w_intervals`)."""
    columns: np.ndarray
    rows: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    n_draws: int


# eq=False: results compare by identity (the generated __eq__ compared tuples of
# arrays and raised "truth value of an array is ambiguous")
@dataclass(repr=False, eq=False)
class BIDResult:
    """What :func:`dask_bid.bayesian_id` returns.

    Its ``repr`` (what a notebook shows) is one line: the columns, the shape, the
    sampler, the chains, the errors, sigma^2, the convergence verdict and how many
    retained draws had the reported columns.

    Attributes
    ----------
    columns : (K,) int64
        Sorted indices J of the selected columns (the point estimate).
    components : (K, N) float64
        W for ``columns`` as chosen by ``w_estimate`` (default: the box-constrained
        least-squares fit; ``"map"``: the posterior mode; ``"mean"``: the posterior mean),
        with W[:, columns] set to the identity. Rows follow ``columns``.
    components_sd : (K, N) float64
        Posterior standard deviation of W given ``columns`` (0 on the identity block): a
        Monte Carlo estimate from the ``refine_sweeps`` sweeps (20 by default: a rough
        scale, ~1/sqrt(2 n) relative error at best), or from the retained draws in that
        basis with ``refine_sweeps=0``; ``w_intervals`` gives quantiles of the draws.
    sigma2 : float
        Posterior mean of sigma^2 over all retained draws.
    inclusion_probability : (N,) float64
        Share of retained draws (all chains) whose basis contains each column.
    trace : (n_chains, n_iter) structured array
        Per iteration: ``mse`` (of the current state, before post-processing; with
        ``missing="mask"`` over the observed entries and per observed entry),
        ``sigma2``, ``accepted`` (swap taken), ``accept_prob`` (Barker probability).
    draws_columns : (n_chains, n_keep, K) int64
        Sorted basis of every retained draw.
    draws_sigma2, draws_sse : (n_chains, n_keep) float64
    draws_w : dict or None
        Retained draws of W for a few traced columns: ``{"columns": (n_trace,),
        "values": (n_chains, n_keep, K, n_trace)}`` for draws whose basis equals
        ``columns`` (NaN elsewhere).
    n_draws_point : int
        Number of retained draws that had the reported basis.
    mse, mse_observed : float
        ||A - C W||^2 / (M N) for the point estimate (see ``docs/model.md``); the second
        over observed entries only (None when no mask is known).
    max_abs_w : float
    n_passes : int
        Streaming passes over A for swap candidates (all chains).
    params : dict
        Every parameter of the fit, the seed entropy and the package versions.
    C : ndarray, dask array or None
        The selected columns A[:, columns], NaN kept where unobserved (Dask engine: lazy
        for Zarr and dask input, read from the output group when ``out`` was given; a
        numpy copy for a fit in memory; None for a result read back by ``open_result``
        from a store without ``C``).
    n_recoveries : int
        Dask engine: times the chains were restored from a checkpoint after losing a
        worker.
    feature_names : list of str or None
        The names of A's N columns, when the input had them: a DataFrame's column names,
        or those a Zarr input records (``dask_bid_column_names``, written by the command
        line's conversion of a text file with a header). Kept in ``out``.
    sample_names : list of str or None
        The names of A's M rows, when the input had them: ``sample_names=``, a
        DataFrame's index of strings, or the row labels of a text file the command line
        converted (``dask_bid_row_names``). Kept in ``out``; :meth:`basis_frame` uses
        them.
    continued_from, continued_from_chains : int or None
        The ``n_iter`` and ``n_chains`` of the finished fit whose chains this one
        continued (a fit saved to ``out`` and called again with ``resume=True`` and a
        larger ``n_iter`` or ``n_chains``: its chains ran on, the added ones from their
        start); None for chains run in one go. The chains keep the automatic settings of the
        ``n_iter`` they started with (docs/engine.md, "Continuing a finished fit").
    """

    columns: np.ndarray
    components: np.ndarray
    components_sd: np.ndarray
    sigma2: float
    inclusion_probability: np.ndarray
    trace: np.ndarray
    draws_columns: np.ndarray
    draws_sigma2: np.ndarray
    draws_sse: np.ndarray
    n_draws_point: int
    mse: float
    mse_observed: float | None
    max_abs_w: float
    n_passes: int
    elapsed: float
    n_samples: int
    n_features: int
    params: dict[str, Any] = field(default_factory=dict)
    draws_w: dict | None = None
    C: Any = None
    n_recoveries: int = 0
    feature_names: list | None = None
    continued_from: int | None = None
    continued_from_chains: int | None = None
    sample_names: list | None = None

    @property
    def n_chains(self) -> int:
        return self.trace.shape[0]

    def __repr__(self) -> str:
        # a notebook shows this for ``res``: what was fitted and found in a few lines,
        # not every array (the dataclass's repr ran to hundreds of lines)
        p = self.params or {}
        n_chains, n_iter = (self.trace.shape if getattr(self.trace, "ndim", 0) == 2
                            else (0, 0))
        cols = [int(j) for j in self.columns]
        shown = ", ".join(map(str, cols[:12])) + (f", ... ({len(cols)} in all)"
                                                   if len(cols) > 12 else "")
        mse = f"mse={self.mse:.6g}"
        if self.mse_observed is not None:
            mse += f", mse_observed={self.mse_observed:.6g}"
        from .summary import EXACT_SAMPLERS, judged_sampler

        sampler = judged_sampler(p)
        if sampler == "tempered":  # no known target to converge to
            check = f"convergence not judged (temperature {p.get('temperature')})"
        elif sampler not in EXACT_SAMPLERS:
            check = f"convergence not judged ({sampler} sampler)"
        else:
            try:
                conv = self.convergence()
                check = "converged" if conv.converged else "NOT converged"
            except Exception:  # too few draws to judge
                check = "convergence not judged"
        model = f"{str(p.get('model', '?')).upper()} {p.get('sampler', '?')}"
        chains = f"{n_chains} chain{'s' if n_chains != 1 else ''}"
        return (f"BIDResult(columns=[{shown}], A {self.n_samples} x {self.n_features}, "
                f"{model}, {chains} x {n_iter} iterations, {mse}, "
                f"sigma2={self.sigma2:.6g}, {check}, "
                f"{self.n_draws_point} of {self.draws_sigma2.size} retained draws with "
                "these columns)")

    def convergence(self, **kwargs):
        """Split R-hat and bulk ESS of the retained sigma^2 and SSE draws, and whether
        they pass (R-hat <= 1.01 with 2+ chains, bulk ESS >= 100 per chain); numpy only.

        See :func:`dask_bid.engine.convergence.check` (``kwargs`` go to it).
        """
        from .convergence import check

        return check(self.draws_sigma2, self.draws_sse, **kwargs)

    def basis_frame(self):
        """The selected columns C = A[:, columns] as a pandas DataFrame (needs pandas):
        rows named by ``sample_names`` (else 0 .. M-1), columns by ``feature_names`` of
        the selected columns (else their indices). A lazy ``C`` (a Zarr or dask input, or
        ``out``) is computed: M x K values."""
        try:
            import pandas as pd
        except ImportError as exc:
            raise ImportError("basis_frame() needs pandas: pip install pandas.") from exc
        if self.C is None:
            from .._errors import ParameterError

            raise ParameterError("this result holds no C (its store has none): take "
                                 "A[:, result.columns].")
        C = self.C.compute() if hasattr(self.C, "compute") else self.C
        cols = [int(j) for j in self.columns]
        names = ([self.feature_names[j] for j in cols] if self.feature_names is not None
                 else cols)
        return pd.DataFrame(np.asarray(C), index=self.sample_names, columns=names)

    def w_intervals(self, prob: float = 0.9) -> WIntervals:
        """Equal-tailed credible intervals of W's entries in the traced columns.

        For each traced column n (``trace_columns``, else ``n_trace_columns`` evenly
        spaced ones) and each row k of the reported basis, the ``(1 - prob) / 2`` and
        ``(1 + prob) / 2`` quantiles of W[k, n] over the retained draws whose basis is the
        reported one (all chains): the posterior of W given that basis. Numpy only.

        Parameters
        ----------
        prob : float, default=0.9
            Posterior probability inside each interval, in (0, 1).

        Returns
        -------
        WIntervals
            ``columns`` (n_trace,), the traced columns outside the basis; ``rows`` (K,),
            ``columns`` of the result (W's rows); ``lower`` and ``upper`` (K, n_trace);
            ``n_draws``, the draws they come from (NaN intervals when none).
        """
        q = _tails(prob)
        K = len(self.columns)
        if self.draws_w is None:
            empty = np.zeros((K, 0))
            return WIntervals(np.zeros(0, dtype=np.int64), np.asarray(self.columns), empty,
                              empty, 0)
        cols = np.asarray(self.draws_w["columns"], dtype=np.int64)
        v = np.asarray(self.draws_w["values"], dtype=np.float64)  # chains, draws, K, n
        keep = ~np.isin(cols, self.columns)  # W[:, J] is the identity
        n_draws = v.shape[0] * v.shape[1]
        # the draws with the reported basis: finite W (a draw of another basis is NaN),
        # judged on every traced column, so that it holds when all are in the basis
        ok = np.isfinite(v.reshape(n_draws, -1)).all(axis=1)
        v = v[..., keep].reshape(n_draws, K, int(keep.sum()))[ok]
        if len(v):
            lower, upper = np.quantile(v, q, axis=0)
        else:
            lower = upper = np.full((K, int(keep.sum())), np.nan)
        return WIntervals(cols[keep], np.asarray(self.columns), lower, upper, len(v))

    def sigma2_interval(self, prob: float = 0.9) -> tuple[float, float]:
        """Equal-tailed credible interval of sigma^2: its ``(1 - prob) / 2`` and
        ``(1 + prob) / 2`` quantiles over every retained draw (all chains, whatever their
        basis), the posterior of sigma^2 with J integrated out. For the exact samplers
        (``"collapsed"``, ``"plain"``) whose chains converged; the search samplers'
        draws have no such target (docs/model.md). Numpy only.

        Parameters
        ----------
        prob : float, default=0.9
            Posterior probability inside the interval, in (0, 1).

        Returns
        -------
        (float, float)
            The lower and upper bounds (NaN when no draw was retained).
        """
        return draws_interval(self.draws_sigma2, prob)

    def inclusion_mcse(self) -> np.ndarray:
        """Monte Carlo standard error of ``inclusion_probability``, per column (N,).

        The standard deviation of the column's inclusion indicator over the retained
        draws divided by the square root of its effective sample size (split chains, as
        ArviZ's ``mcse(method="mean")``): ``inclusion_probability[j] +- 2 *
        inclusion_mcse()[j]`` is the range the chains' estimate is good for. 0 for a
        column never or always in the basis; numpy only. See
        :func:`dask_bid.engine.convergence.inclusion_mcse`.
        """
        from .convergence import inclusion_mcse

        return inclusion_mcse(self.draws_columns, self.components.shape[1])

    def to_inference_data(self):
        """The retained draws as an ``arviz.InferenceData`` (needs the ``arviz`` extra).

        See :func:`dask_bid.engine.draws.to_inference_data`.
        """
        from .draws import to_inference_data

        return to_inference_data(self)


def stored_sampler(params) -> str:
    """The sampler of a fit's stored parameters: ``sampler`` if recorded, else the older
    ``aggressive`` flag (results written before samplers had names)."""
    if params.get("sampler"):
        return str(params["sampler"])
    return "aggressive" if params.get("aggressive", True) else "plain"


def _tails(prob) -> tuple[float, float]:
    """The quantiles of an equal-tailed interval of probability ``prob`` in (0, 1)."""
    from .._errors import ParameterError

    if (isinstance(prob, (bool, np.bool_)) or not isinstance(prob, (int, float, np.floating))
            or not 0.0 < float(prob) < 1.0):
        raise ParameterError(f"prob must be a number in (0, 1), got {prob!r}.")
    return ((1.0 - float(prob)) / 2.0, (1.0 + float(prob)) / 2.0)


def draws_interval(draws, prob=0.9) -> tuple[float, float]:
    """The equal-tailed interval of probability ``prob`` of the finite values of
    ``draws`` (any shape): ``BIDResult.sigma2_interval``, and ``info``'s from a stored
    fit's draws. (NaN, NaN) when there are none; (inf, inf) when every draw is +inf
    (beyond float64's range in A's units)."""
    q = _tails(prob)
    d = np.asarray(draws, dtype=np.float64).ravel()
    if d.size and np.all(np.isposinf(d)):
        # every draw beyond float64's range in A's units (sigma2 reported as inf): so
        # is the interval (it said NaN to NaN, as for no draw at all)
        return (float("inf"), float("inf"))
    d = d[np.isfinite(d)]
    if not d.size:
        return (float("nan"), float("nan"))
    lo, hi = np.quantile(d, q)
    return (float(lo), float(hi))
