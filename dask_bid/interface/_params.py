"""Validation of the sampler's parameters, done before any data is touched."""

from __future__ import annotations

import numbers

import numpy as np

from .._errors import ParameterError
from ..kernels.priors import MODELS, Priors

__all__ = ["validate_params", "POINT_ESTIMATES", "INITS", "MISSING"]

POINT_ESTIMATES = ("mode", "best")
INITS = ("random", "sketch", "cpqr")
MISSING = ("zero", "mask")
PROPOSAL_INITS = ("copy", "lstsq")


def _positive(name, value):
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not np.isfinite(value) \
            or value <= 0:
        raise ParameterError(f"{name} must be a positive finite number, got {value!r}.")
    return float(value)


def _int(name, value, low, high=None, hint=""):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ParameterError(f"{name} must be an integer, got {value!r}.{hint}")
    value = int(value)
    if value < low or (high is not None and value > high):
        rng = f">= {low}" if high is None else f"between {low} and {high}"
        raise ParameterError(f"{name} must be {rng}, got {value}.{hint}")
    return value


def validate_params(p: dict, n_cols: int | None = None) -> dict:
    """Check every parameter; return a normalised copy (model lower-cased, Priors built).

    ``n_cols`` (when known) bounds ``n_components``.
    """
    out = dict(p)
    model = str(p["model"]).lower() if isinstance(p["model"], str) else p["model"]
    if model not in MODELS:
        raise ParameterError(f"unknown model {p['model']!r}; choose one of {MODELS}.")
    out["model"] = model
    K = p["n_components"]
    hint = f" It is the number K of columns kept; it needs 1 <= K < N (N = {n_cols})." \
        if n_cols is not None else " It is the number K of columns kept; it needs K >= 1."
    _int("n_components", K, 1, None if n_cols is None else n_cols - 1, hint)
    n_iter = _int("n_iter", p["n_iter"], 1)
    burn_in = _int("burn_in", p["burn_in"], 0)
    if burn_in >= n_iter:
        raise ParameterError(
            f"burn_in ({burn_in}) must be smaller than n_iter ({n_iter}): no draw would be "
            "retained. Lower burn_in or raise n_iter.")
    _int("thin", p["thin"], 1, hint=" Use thin=1 to keep every draw after burn-in.")
    bounds = p["bounds"]
    try:
        a, b = (float(x) for x in bounds)
    except (TypeError, ValueError) as exc:
        raise ParameterError(f"bounds must be a pair (a, b) of numbers, got {bounds!r}.") from exc
    if not (a < b):
        raise ParameterError(f"bounds must satisfy a < b, got a={a}, b={b}.")
    if not (a <= 0.0 and b >= 1.0):
        raise ParameterError(
            f"bounds ({a}, {b}) must contain 0 and 1: the decomposition sets W[:, J] to the "
            "identity. Use e.g. (-1, 1) or the weak-ID (-2, 2).")
    for name in ("alpha_sigma", "beta_sigma", "tau", "tau_mu", "alpha_t", "beta_t",
                 "temperature"):
        out[name] = _positive(name, p[name])
    for name in ("mu", "mu_mu"):
        v = p[name]
        if not isinstance(v, numbers.Real) or not np.isfinite(v):
            raise ParameterError(f"{name} must be a finite number, got {v!r}.")
    if p["point_estimate"] not in POINT_ESTIMATES:
        raise ParameterError(
            f"unknown point_estimate {p['point_estimate']!r}; choose one of {POINT_ESTIMATES}.")
    init = p["init"]
    if isinstance(init, str):
        if init not in INITS:
            raise ParameterError(f"unknown init {init!r}; choose one of {INITS} or pass K "
                                 "column indices.")
    else:
        J0 = np.asarray(init)
        if J0.ndim != 1 or J0.size != K or J0.dtype.kind not in "iu":
            raise ParameterError(f"init as an array must hold K={K} integer column indices, "
                                 f"got {init!r}.")
        if n_cols is not None and (J0.min() < 0 or J0.max() >= n_cols
                                   or np.unique(J0).size != K):
            raise ParameterError(f"init columns must be {K} distinct indices in [0, {n_cols}).")
    if p["proposal_init"] not in PROPOSAL_INITS:
        raise ParameterError(f"unknown proposal_init {p['proposal_init']!r}; choose one of "
                             f"{PROPOSAL_INITS}.")
    if p["missing"] not in MISSING:
        raise ParameterError(f"unknown missing={p['missing']!r}; choose one of {MISSING}.")
    _int("n_chains", p["n_chains"], 1)
    _int("n_candidates", p["n_candidates"], 1)
    if p["block_size"] is not None:
        _int("block_size", p["block_size"], 1)
    out["priors"] = Priors(hierarchical=model == "gbtn", a=a, b=b,
                           alpha_sigma=float(p["alpha_sigma"]), beta_sigma=float(p["beta_sigma"]),
                           mu=float(p["mu"]), tau=float(p["tau"]), mu_mu=float(p["mu_mu"]),
                           tau_mu=float(p["tau_mu"]), alpha_t=float(p["alpha_t"]),
                           beta_t=float(p["beta_t"]))
    return out
