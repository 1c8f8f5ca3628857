"""Convergence diagnostics through ArviZ: ``to_inference_data`` and ``summary``.

``to_inference_data`` and the arrays it is built from live in ``dask_bid.engine.draws``
(``BIDResult.to_inference_data()`` calls it without the interface); they are
re-exported here.

ArviZ is an optional dependency (``pip install "dask_bid[arviz]"``); it is imported
only when one of these functions is called.

What is exported
----------------
``posterior`` (dims ``chain``, ``draw``; one draw per retained iteration):

* ``sigma2``: the noise variance.
* ``mse``: ||A - C W||^2 / (M N) of the state after the iteration's sweep.
* ``W`` (extra dims ``w_row``, ``w_col``): the entries of W for the reported basis
  (``result.columns``, the ``w_row`` coordinate) in the traced columns of A
  (``result.draws_w["columns"]``, the ``w_col`` coordinate), leaving out traced
  columns that belong to the basis (their W is the identity by construction). A draw
  whose basis differs from the reported one has no such W: those entries are NaN.

``sample_stats`` (same dims): ``accepted`` (the swap of that iteration was taken),
``accept_prob`` (its Barker probability), ``sse`` and ``in_reported_basis`` (the
draw's basis equals the reported one).

The ``draw`` coordinate holds the iteration number of each retained draw.
"""

from __future__ import annotations

import warnings

import numpy as np

from ..engine.draws import as_result as _as_result
from ..engine.draws import (
    import_arviz,
    mse_draws,
    retained_iterations,
    to_inference_data,
    w_draws,
)

__all__ = ["to_inference_data", "summary", "import_arviz", "retained_iterations", "w_draws"]


def _rhat_ess(az, x, method):
    """Split R-hat, bulk and tail ESS of one (chain, draw) array without NaN."""
    if x.shape[1] < 4 or np.ptp(x) == 0.0:
        return np.nan, np.nan, np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # R-hat compares chains: NaN for one (ArviZ's logger said "Shape validation
        # failed" to get there)
        r = float(az.rhat(x, method=method)) if x.shape[0] > 1 else np.nan
        eb = float(az.ess(x, method="bulk"))
        et = float(az.ess(x, method="tail"))
    return r, eb, et


#: ``arviz.rhat``'s methods (ArviZ 0.x)
RHAT_METHODS = ("rank", "split", "folded", "z_scale", "identity")


def summary(result, *, var_names=None, method="rank"):
    """Posterior mean, sd, split R-hat and effective sample sizes per quantity.

    Parameters
    ----------
    result : BIDResult or fitted BayesianID
    var_names : str or list of str, optional
        Any of ``"sigma2"``, ``"mse"``, ``"W"`` (default: all three). The MSE of a draw
        is over the observed entries with ``missing="mask"``.
    method : str, default="rank"
        R-hat variant passed to ``arviz.rhat``: ``"rank"`` is the rank-normalised
        split R-hat of Vehtari et al. (2021); ``"split"`` the classic split R-hat; also
        ``"folded"``, ``"z_scale"``, ``"identity"``. Another value is refused
        (``ParameterError``).

    Returns
    -------
    pandas.DataFrame
        One row per quantity (``sigma2``, ``mse``, ``W[row, col]`` with the column
        indices of A), columns ``mean``, ``sd``, ``ess_bulk``, ``ess_tail``, ``r_hat``,
        ``n_chains`` and ``n_draws`` (all chains together; ``Convergence.n_draws`` is
        per chain). R-hat and ESS come from ``arviz.rhat`` and
        ``arviz.ess`` over the retained draws.

    Notes
    -----
    W exists only for the draws whose basis is the reported one. An entry of W is
    diagnosed on the chains whose every retained draw had that basis (``n_chains``
    says how many); with none it gets NaN. Whether the chains agree on the basis at
    all shows in the R-hat of ``sigma2`` and ``mse``, which every draw has. A
    quantity that never moved (e.g. W pinned at a bound) gets NaN R-hat and ESS.
    """
    az = import_arviz()  # first: its message says which extra to install
    try:
        import pandas as pd
    except ImportError as exc:  # arviz 0.x depends on pandas: a broken install
        raise ImportError('summary() returns a pandas DataFrame and pandas is not installed: '
                          'pip install "dask_bid[arviz]" (ArviZ brings pandas).') from exc
    if method not in RHAT_METHODS:
        from .._errors import ParameterError

        # checked here: with one chain R-hat is never computed, and any method passed;
        # with several ArviZ raised its own TypeError
        raise ParameterError(f"method={method!r} is not an R-hat method; choose one of "
                             f"{', '.join(map(repr, RHAT_METHODS))}.")
    res = _as_result(result)
    if isinstance(var_names, str):  # one name, as ArviZ takes it
        var_names = [var_names]
    names = ["sigma2", "mse", "W"] if var_names is None else list(var_names)
    unknown = set(names) - {"sigma2", "mse", "W"}
    if unknown:
        from .._errors import ParameterError

        raise ParameterError(f"unknown var_names {sorted(unknown)}; choose among "
                             "'sigma2', 'mse', 'W'.")
    n_chains, n_keep = res.draws_sigma2.shape
    rows, index = [], []

    def add(label, x):
        r, eb, et = _rhat_ess(az, x, method)
        rows.append(dict(mean=float(x.mean()), sd=float(x.std(ddof=1)) if x.size > 1 else np.nan,
                         ess_bulk=eb, ess_tail=et, r_hat=r, n_chains=x.shape[0],
                         n_draws=int(x.size)))
        index.append(label)

    if "sigma2" in names:
        add("sigma2", np.asarray(res.draws_sigma2, dtype=np.float64))
    if "mse" in names:
        # over the observed entries when masked (it divided by M N: biased low)
        add("mse", mse_draws(res))
    if "W" in names:
        W, wcols = w_draws(res)
        full = ~np.isnan(W).any(axis=(1, 2, 3))
        for k, row in enumerate(res.columns):
            for c, col in enumerate(wcols):
                label = f"W[{int(row)}, {int(col)}]"
                if not full.any():
                    rows.append(dict(mean=np.nan, sd=np.nan, ess_bulk=np.nan, ess_tail=np.nan,
                                     r_hat=np.nan, n_chains=0, n_draws=0))
                    index.append(label)
                else:
                    add(label, W[full, :, k, c])
    cols = ["mean", "sd", "ess_bulk", "ess_tail", "r_hat", "n_chains", "n_draws"]
    return pd.DataFrame(rows, index=index, columns=cols)
