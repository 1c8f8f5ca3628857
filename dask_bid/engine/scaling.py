"""Fits of matrices whose entries are huge or tiny: compute on A / s, report in A's units.

With entries near 1e200 the squares overflow (``||A||^2 = inf``, SSE NaN); near 1e-200
they underflow to 0. The model is equivariant under A -> A / s: the selected columns and W
do not change, and with sigma'^2 = sigma^2 / s^2 and the inverse-gamma prior's scale
beta_sigma' = beta_sigma / s^2 (its shape unchanged) the posterior of the scaled problem is
the paper's posterior in the user's units. So the engine computes on A / s with ``s = 2^e``
(exact in floating point: dividing by a power of two only changes exponents) and
multiplies sigma^2, SSE and MSE (their draws and traces) by s^2 at the end.

``e = 0`` (nothing changes, the chain is bitwise the unscaled one) whenever max|A| lies in
[2^-:data:`SAFE_LOG2`, 2^:data:`SAFE_LOG2`]: then squares and the sums of up to 2^300 of
them stay finite and normal. Only a matrix outside that range is rescaled; out of core,
its max is found by the first pass over A (which then runs again on A / s).
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import FitFailedError
from .._warn import warn

__all__ = ["SAFE_LOG2", "scale_exponent", "ScaledReader", "scale_params", "unscale_result",
           "check_finite_result", "check_range", "min_nonzero_abs", "fit_scaled_in_memory",
           "NeedsRescale"]

#: max|A| within 2^-SAFE_LOG2 .. 2^SAFE_LOG2 is computed on as is.
SAFE_LOG2 = 300
#: The rescaled prior scale beta_sigma / s^2 is kept within 2^-BETA_LOG2 .. 2^BETA_LOG2.
BETA_LOG2 = 1000


class NeedsRescale(Exception):
    """Raised by the first pass when max|A| is outside the safe range (internal)."""

    def __init__(self, amax):
        super().__init__(f"max|A| = {amax!r} needs rescaling")
        self.amax = amax


def scale_exponent(amax, beta_sigma=1.0) -> int:
    """``e`` of the A / 2^e the fit computes on; 0 when max|A| is in the safe range.

    Normally A / 2^e has max|.| in [0.5, 1). The prior scale beta_sigma / 2^(2e) must stay
    representable too (for tiny A it dominates sigma^2, so clamping it would change the
    answer): ``e`` is moved towards 0 as far as that needs, while max|A / 2^e| stays in
    [2^-SAFE_LOG2, 2^SAFE_LOG2]; only when both cannot hold is beta_sigma clamped
    (:func:`scale_params`), for huge A, where the data outweigh it.
    """
    amax = float(amax)
    if not math.isfinite(amax) or amax == 0.0:
        return 0
    if 2.0 ** -SAFE_LOG2 <= amax <= 2.0 ** SAFE_LOG2:
        return 0
    e = int(np.frexp(amax)[1])
    lb = math.log2(float(beta_sigma)) if beta_sigma > 0 else 0.0
    lo, hi = math.ceil((lb - BETA_LOG2) / 2), math.floor((lb + BETA_LOG2) / 2)
    clipped = min(max(e, lo), hi)
    if 2.0 ** -SAFE_LOG2 <= np.ldexp(amax, -clipped) <= 2.0 ** SAFE_LOG2:
        return clipped
    return e


def needs_rescale(amax) -> bool:
    return scale_exponent(amax) != 0  # the prior only moves a nonzero e


class ScaledReader:
    """A read-only view ``reader / 2^e`` as float64 (picklable; read on the workers)."""

    def __init__(self, reader, exponent):
        self._reader = reader
        self._e = int(exponent)

    shape = property(lambda self: self._reader.shape)
    ndim = property(lambda self: self._reader.ndim)
    chunks = property(lambda self: self._reader.chunks)
    dtype = property(lambda self: np.dtype(np.float64))

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        return np.ldexp(np.asarray(self._reader[key], dtype=np.float64), -self._e)

    def __array__(self, dtype=None, copy=None):
        x = self[...]
        return x if dtype is None else x.astype(dtype)


def scale_array(A, exponent):
    """``A / 2^exponent`` as float64 (numpy, dask or Zarr input; lazy for dask and Zarr)."""
    e = int(exponent)
    if hasattr(A, "dask"):
        return np.ldexp(A.astype(np.float64), -e)
    if isinstance(A, np.ndarray):
        return np.ldexp(np.asarray(A, dtype=np.float64), -e)
    import dask.array as da

    return da.from_array(ScaledReader(A, e), chunks=A.chunks, lock=False, asarray=True)


def scale_params(p, exponent):
    """Parameters for the scaled problem: beta_sigma / s^2 in the priors (nothing else)."""
    e = int(exponent)
    if not e:
        return p
    pri = p["priors"]
    # beta_sigma / s^2 can leave float64's range when A's range is extreme (one entry of
    # 1e200 among ones gives 1e-400): kept within [2^-1000, 2^1000], where it changes
    # beta' + SSE'/2 only when the fit is exact to 300 digits
    with np.errstate(over="ignore", under="ignore"):  # said below, in the user's words
        exact = np.ldexp(pri.beta_sigma, -2 * e)
    beta = float(np.clip(exact, 2.0 ** -BETA_LOG2, 2.0 ** BETA_LOG2))
    if beta != exact:
        used = float(np.ldexp(beta, 2 * e))
        warn(f"beta_sigma={pri.beta_sigma:g} cannot be held beside this matrix's scale (A "
             f"is fitted as A / 2^{e}): the fit uses beta_sigma={used:.3g} in A's units, "
             "a prior of sigma^2 on the data's scale. Standardise A, or pass a beta_sigma "
             "on its scale (docs/errors.md, 'Scale').", RuntimeWarning)
    return {**p, "priors": pri._replace(beta_sigma=beta)}


def unscale_result(res, exponent):
    """Bring a result of the scaled problem back to the user's units (in place)."""
    e = int(exponent)
    if not e:
        return res

    def up(x):
        return None if x is None else np.ldexp(np.asarray(x, dtype=np.float64), 2 * e)

    with np.errstate(over="ignore"):
        res.sigma2 = float(up(res.sigma2))
        res.mse = float(up(res.mse))
        if res.mse_observed is not None:
            res.mse_observed = float(up(res.mse_observed))
        res.draws_sigma2 = up(res.draws_sigma2)
        res.draws_sse = up(res.draws_sse)
        trace = res.trace.copy()
        trace["mse"] = up(trace["mse"])
        trace["sigma2"] = up(trace["sigma2"])
        res.trace = trace
    if not (np.isfinite(res.sigma2) and np.isfinite(res.mse)):
        warn(
            f"sigma2 and the MSE exceed float64's range in A's units (A was fitted as "
            f"A / 2^{e}); they are reported as inf. The columns and W are exact.",
            RuntimeWarning)
    res.params = {**res.params, "input_scale_log2": e}
    return res


def check_finite_result(res):
    """Raise :class:`~dask_bid.FitFailedError` when the summary is not finite (checked in
    the units the fit computed in: after rescaling, only a value beyond float64's range in
    A's units becomes inf, with a warning)."""
    bad = [name for name, v in (("sigma2", res.sigma2), ("MSE", res.mse),
                                ("W", res.components)) if not np.all(np.isfinite(v))]
    if bad:
        raise FitFailedError(
            f"the fit gave a non-finite {', '.join(bad)}: A's values are outside what float64 "
            "can represent in the model's sums (squares of the entries). Rescale A (e.g. "
            "divide by its largest absolute value) and fit again.")
    return res


def check_range(amax, amin_nonzero, exponent):
    """Refuse a matrix whose nonzero entries span more than one scale can hold.

    Fitting A / 2^e with e > 0 turns the smallest nonzero entries into numbers whose
    squares underflow, although their squares in A's units are representable: the SSE
    and sigma^2 (an outlier of 1e200 among entries near 1: the residual is made of the
    entries near 1) would come out as 0 and as the prior. Raises
    :class:`~dask_bid.FitFailedError` then, before any sampling.
    """
    e = int(exponent)
    if e <= 0 or not np.isfinite(amin_nonzero) or amin_nonzero <= 0:
        return
    lost = 2.0 ** -500
    if amin_nonzero >= lost and np.ldexp(amin_nonzero, -e) < lost:
        raise FitFailedError(
            f"A's nonzero entries span {amin_nonzero:.3g} to {amax:.3g}, more than float64 "
            "can square at one scale (about 1e150 apart at most): the fit would lose the "
            "small entries. Clip or rescale the extreme entries (e.g. winsorize, or fit "
            "log-transformed data) and fit again.")


def min_nonzero_abs(X) -> float:
    """The smallest nonzero |entry| of a numpy or dask array (inf when all are 0)."""
    if hasattr(X, "dask"):
        import dask.array as da

        a = da.fabs(X.astype(np.float64))
        return float(da.where(a > 0, a, np.inf).min().compute())
    a = np.abs(np.asarray(X, dtype=np.float64))
    nz = a[a > 0]
    return float(nz.min()) if nz.size else float("inf")


def fit_scaled_in_memory(X, p, run):
    """``run(X, p)`` for an in-memory matrix, on X / 2^e when its values need it.

    ``max|X|`` costs one read of the array in memory. With ``e = 0`` this is exactly
    ``run(X, p)``; otherwise the result is brought back to X's units and checked finite.
    """
    with np.errstate(invalid="ignore"):
        amax = float(np.max(np.abs(X))) if X.size else 0.0
    e = scale_exponent(amax, p["priors"].beta_sigma)
    if not e:
        return check_finite_result(run(X, p))
    check_range(amax, min_nonzero_abs(X), e)
    res = run(np.ldexp(np.asarray(X, dtype=np.float64), -e), scale_params(p, e))
    return unscale_result(check_finite_result(res), e)
