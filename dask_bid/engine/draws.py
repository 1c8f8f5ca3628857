"""The retained draws of a fit as arrays, and their export to ArviZ.

ArviZ is an optional dependency (``pip install "dask_bid[arviz]"``), imported only
when :func:`to_inference_data` is called. This module lives in the engine, beside
``BIDResult``, so that ``BIDResult.to_inference_data()`` needs nothing from the
interface layer; ``dask_bid.interface.diagnostics`` re-exports it beside ``summary``.

What is exported
----------------
``posterior`` (dims ``chain``, ``draw``; one draw per retained iteration):

* ``sigma2``: the noise variance.
* ``mse``: ||A - C W||^2 / (M N) of the state after the iteration's sweep (with
  ``missing="mask"``, over the observed entries and their count: the trace's ``mse``).
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

from .result import stored_sampler

__all__ = ["to_inference_data", "import_arviz", "as_result", "retained_iterations", "mse_draws",
           "w_draws"]

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
        missing = getattr(exc, "name", None) or ""
        if missing and missing.split(".")[0] != "arviz":
            # ArviZ is there, a package it imports is not (matplotlib, pandas, xarray):
            # "ArviZ is not installed" sent the user to install what they had
            raise ImportError(
                f"ArviZ is installed but cannot be imported: a package it needs, "
                f"{missing.split('.')[0]!r}, is missing ({exc}). Install it, or reinstall "
                'the extra: pip install "dask_bid[arviz]".') from exc
        raise ImportError(_INSTALL_HINT) from exc
    major = int(str(getattr(arviz, "__version__", "0")).split(".")[0] or 0)
    if major >= 1:
        # ArviZ 1.x replaced InferenceData by xarray.DataTree and moved the converters
        raise ImportError(
            f"dask_bid's diagnostics use the ArviZ 0.x API (InferenceData), found arviz "
            f'{arviz.__version__}. Install a 0.x release: pip install "arviz>=0.18,<1".')
    return arviz


def as_result(obj):
    """Accept a BIDResult or a fitted estimator (anything with a ``result_`` BIDResult)."""
    from .._errors import NotFittedError, sklearn_flavoured
    from .result import BIDResult

    if isinstance(obj, BIDResult):
        return obj
    res = getattr(obj, "result_", None)
    if isinstance(res, BIDResult):
        return res
    if hasattr(obj, "get_params") and res is None:
        raise sklearn_flavoured(NotFittedError)(
            f"this {type(obj).__name__} is not fitted yet: call fit(A) first.")
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


def mse_draws(result) -> np.ndarray:
    """The MSE of each retained draw, (n_chains, n_keep): the trace's value at the retained
    iteration, ``draws_sse`` over the entries it sums (the observed ones with
    ``missing="mask"``, all M N otherwise)."""
    return np.asarray(result.trace[:, retained_iterations(result)]["mse"], dtype=np.float64)


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
        ``chain`` and ``draw``; see the module docstring. When the fit kept its columns'
        names (``feature_names``), ``W``'s dims ``w_row`` / ``w_col`` carry them as the
        coordinates ``w_row_name`` / ``w_col_name``.

    Raises
    ------
    ImportError
        ArviZ is not installed (``pip install "dask_bid[arviz]"``).
    """
    az = import_arviz()
    res = as_result(result)
    n_chains, n_keep = res.draws_sigma2.shape
    its = retained_iterations(res)
    W, wcols = w_draws(res)
    in_basis = np.all(res.draws_columns == np.asarray(res.columns)[None, None, :], axis=-1)
    tr = res.trace[:, its]
    posterior = {
        "sigma2": np.asarray(res.draws_sigma2, dtype=np.float64),
        "mse": mse_draws(res),
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
        "sampler": stored_sampler(p),
        "n_iter": int(p.get("n_iter", res.trace.shape[1])),
        "burn_in": int(p.get("burn_in", 0)),
        "thin": int(p.get("thin", 1)),
        "n_components": len(res.columns),
        "shape": [int(res.n_samples), int(res.n_features)],
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        # the arrays are (chain, draw, ...) by construction: ArviZ's guess that more
        # chains than draws means swapped axes is wrong here (one draw a chain)
        warnings.filterwarnings("ignore", message="More chains", category=UserWarning)
        idata = az.from_dict(posterior=posterior, sample_stats=sample_stats, coords=coords,
                             dims={"W": ["w_row", "w_col"]}, posterior_attrs=attrs,
                             sample_stats_attrs=attrs)
    names = getattr(res, "feature_names", None)
    if names is not None and len(names) == res.n_features:
        # the columns' names beside their indices (a DataFrame's, a text header's)
        pick = np.asarray(names, dtype=object)
        idata.posterior = idata.posterior.assign_coords(
            w_row_name=("w_row", pick[coords["w_row"]].astype(str)),
            w_col_name=("w_col", pick[coords["w_col"]].astype(str)))
    return idata
