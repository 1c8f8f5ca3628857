"""Convergence diagnostics through ArviZ: ``to_inference_data`` and ``summary``.

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

__all__ = ["to_inference_data", "summary", "import_arviz"]

_INSTALL_HINT = (
    "ArviZ is needed for convergence diagnostics but is not installed. Install the "
    'optional extra: pip install "dask_bid[arviz]"  (or: pip install "arviz>=0.18,<1").'
)


def import_arviz():
    """Import ArviZ, or raise an ``ImportError`` that says how to install it."""
    try:
        with warnings.catch_warnings():
            # arviz 0.2x announces its refactor with a FutureWarning on every import
            warnings.simplefilter("ignore", FutureWarning)
            import arviz
    except ImportError as exc:
        raise ImportError(_INSTALL_HINT) from exc
    major = int(str(getattr(arviz, "__version__", "0")).split(".")[0] or 0)
    if major >= 1:
        # ArviZ 1.x replaced InferenceData by xarray.DataTree and moved the converters
        raise ImportError(
            f"dask_bid's diagnostics use the ArviZ 0.x API (InferenceData), found arviz "
            f'{arviz.__version__}. Install a 0.x release: pip install "arviz>=0.18,<1".')
    return arviz


def _as_result(obj):
    """Accept a BIDResult or a fitted estimator (anything with ``result_``)."""
    from .._errors import NotFittedError
    from .result import BIDResult

    if isinstance(obj, BIDResult):
        return obj
    res = getattr(obj, "result_", None)
    if isinstance(res, BIDResult):
        return res
    if hasattr(obj, "get_params") and res is None:
        raise NotFittedError(f"this {type(obj).__name__} is not fitted yet: call fit(A) first.")
    raise TypeError(f"expected a BIDResult or a fitted BayesianID, got {type(obj).__name__}")


def retained_iterations(result) -> np.ndarray:
    """Iteration numbers of the retained draws of ``result``."""
    p = result.params
    n_iter = int(p.get("n_iter", result.trace.shape[1]))
    burn_in = int(p.get("burn_in", 0))
    thin = int(p.get("thin", 1))
    its = np.arange(burn_in, n_iter, thin)
    n_keep = result.draws_sigma2.shape[1]
    if its.size != n_keep:  # a result written before the chain ended
        its = its[:n_keep]
    return its


def w_draws(result):
    """The traced W draws of the reported basis, without the identity columns.

    Returns
    -------
    values : ndarray (n_chains, n_keep, K, n_cols)
        NaN where the draw's basis was not ``result.columns``.
    columns : ndarray (n_cols,)
        Column indices of A that the last axis refers to.
    """
    K = len(result.columns)
    dw = result.draws_w
    if not dw or len(dw.get("columns", ())) == 0:
        n_chains, n_keep = result.draws_sigma2.shape
        return np.empty((n_chains, n_keep, K, 0)), np.empty(0, dtype=np.int64)
    cols = np.asarray(dw["columns"], dtype=np.int64)
    keep = ~np.isin(cols, result.columns)
    return np.asarray(dw["values"], dtype=np.float64)[..., keep], cols[keep]


def to_inference_data(result):
    """Export the retained draws of a fit as an ``arviz.InferenceData``.

    Parameters
    ----------
    result : BIDResult or fitted BayesianID

    Returns
    -------
    arviz.InferenceData
        Groups ``posterior`` (``sigma2``, ``mse``, ``W``) and ``sample_stats``
        (``accepted``, ``accept_prob``, ``sse``, ``in_reported_basis``), with dims
        ``chain`` and ``draw``; see the module docstring.

    Raises
    ------
    ImportError
        ArviZ is not installed (``pip install "dask_bid[arviz]"``).
    """
    az = import_arviz()
    res = _as_result(result)
    n_chains, n_keep = res.draws_sigma2.shape
    n_entries = res.n_samples * res.n_features
    its = retained_iterations(res)
    W, wcols = w_draws(res)
    in_basis = np.all(res.draws_columns == np.asarray(res.columns)[None, None, :], axis=-1)
    tr = res.trace[:, its]
    posterior = {
        "sigma2": np.asarray(res.draws_sigma2, dtype=np.float64),
        "mse": np.asarray(res.draws_sse, dtype=np.float64) / n_entries,
        "W": W,
    }
    sample_stats = {
        "accepted": np.asarray(tr["accepted"], dtype=bool),
        "accept_prob": np.asarray(tr["accept_prob"], dtype=np.float64),
        "sse": np.asarray(res.draws_sse, dtype=np.float64),
        "in_reported_basis": in_basis,
    }
    coords = {
        "chain": np.arange(n_chains),
        "draw": its,
        "w_row": np.asarray(res.columns, dtype=np.int64),
        "w_col": wcols,
    }
    p = res.params
    attrs = {
        "inference_library": "dask_bid",
        "model": str(p.get("model", "")),
        "aggressive": int(bool(p.get("aggressive", True))),
        "n_iter": int(p.get("n_iter", res.trace.shape[1])),
        "burn_in": int(p.get("burn_in", 0)),
        "thin": int(p.get("thin", 1)),
        "n_components": len(res.columns),
        "shape": [int(res.n_samples), int(res.n_features)],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return az.from_dict(posterior=posterior, sample_stats=sample_stats, coords=coords,
                            dims={"W": ["w_row", "w_col"]}, posterior_attrs=attrs,
                            sample_stats_attrs=attrs)


def _rhat_ess(az, x, method):
    """Split R-hat, bulk and tail ESS of one (chain, draw) array without NaN."""
    if x.shape[1] < 4 or np.ptp(x) == 0.0:
        return np.nan, np.nan, np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = float(az.rhat(x, method=method))
        eb = float(az.ess(x, method="bulk"))
        et = float(az.ess(x, method="tail"))
    return r, eb, et


def summary(result, *, var_names=None, method="rank"):
    """Posterior mean, sd, split R-hat and effective sample sizes per quantity.

    Parameters
    ----------
    result : BIDResult or fitted BayesianID
    var_names : list of str, optional
        Any of ``"sigma2"``, ``"mse"``, ``"W"`` (default: all three).
    method : str, default="rank"
        R-hat variant passed to ``arviz.rhat``: ``"rank"`` is the rank-normalised
        split R-hat of Vehtari et al. (2021); ``"split"`` the classic split R-hat.

    Returns
    -------
    pandas.DataFrame
        One row per quantity (``sigma2``, ``mse``, ``W[row, col]`` with the column
        indices of A), columns ``mean``, ``sd``, ``ess_bulk``, ``ess_tail``, ``r_hat``,
        ``n_chains`` and ``n_draws``. R-hat and ESS come from ``arviz.rhat`` and
        ``arviz.ess`` over the retained draws.

    Notes
    -----
    W exists only for the draws whose basis is the reported one. An entry of W is
    diagnosed on the chains whose every retained draw had that basis (``n_chains``
    says how many); with none it gets NaN. Whether the chains agree on the basis at
    all shows in the R-hat of ``sigma2`` and ``mse``, which every draw has. A
    quantity that never moved (e.g. W pinned at a bound) gets NaN R-hat and ESS.
    """
    import pandas as pd

    az = import_arviz()
    res = _as_result(result)
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
        add("mse", np.asarray(res.draws_sse, dtype=np.float64)
            / (res.n_samples * res.n_features))
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
