"""Exact, fast sampler and exact distribution functions for the general truncated normal.

``GTN(mu, 1/tau, a, b)`` is the normal with parent mean ``mu`` and parent *precision* ``tau``,
truncated to ``[a, b]``. Every ``w_kn`` of the model is drawn from it once per Gibbs sweep, so
the scalar sampler :func:`gtn_draw` is a nopython, allocation-free numba function meant to be
called from other numba kernels.

Sampling picks, by acceptance rate, one of three exact rejection samplers. In standardised
coordinates ``z = (x - mu) sqrt(tau)`` the interval is
``[lo, hi] = [(a - mu) sqrt(tau), (b - mu) sqrt(tau)]``:

* the mode is inside and the interval is wide (``hi - lo >= sqrt(2 pi)``): normal rejection,
  acceptance ``>= 0.49`` and 1 draw in the common Gibbs case (small posterior sd);
* the mode is inside and the interval is narrow: uniform proposal, acceptance ``>= 0.49``;
* the interval is entirely on one side of the mode (``mu <= a`` or ``mu >= b``): a one-sided
  tail. Robert (1995) exponential proposal with the optimal rate, or a uniform proposal when
  the interval is short compared with the tail's scale ``1/lo`` (whichever has the larger
  acceptance rate; the worst case over all tails is about 0.6). The upper tail is mirrored
  onto the lower one.

In a tail the draw is computed as an *offset from the bound nearer the mode*, directly in the
units of ``x`` (:func:`tail_offset`): ``x = a + d`` or ``x = b - d``. A draw 1e-12 away from
``b`` is therefore not rounded to the grid of ``mu + z / sqrt(tau)``, and the tail needs one
square root and one division per draw.

The distribution functions (:func:`gtn_cdf`, :func:`gtn_logpdf`, :func:`gtn_offset_cdf`) are
plain numpy/scipy, exact and stable in the far tails and for tiny widths; they exist to test the
sampler. They never subtract two nearly equal normal CDF values: every probability mass is a
sum of positive one-sided pieces ``phi(p) * G(p, t)`` with
``G(p, t) = int_0^t exp(-p u - u^2 / 2) du`` computed either from the Mills ratio (when the
integrand falls by more than ``e``) or by Gauss-Legendre quadrature (when it is nearly flat).

References
----------
C. P. Robert, "Simulation of truncated normal variables", Statistics and Computing 5 (1995).
"""

import math

import numba
import numpy as np
from scipy import special

from .._errors import ParameterError

__all__ = [
    "gtn_draw",
    "std_tn_draw",
    "std_tail_offset",
    "tail_offset",
    "sample_gtn",
    "gtn_cdf",
    "gtn_logpdf",
    "gtn_offset_cdf",
]

_SQRT_2PI = math.sqrt(2.0 * math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


# ---------------------------------------------------------------------------------------------
# Samplers (numba, nopython, allocation-free)
# ---------------------------------------------------------------------------------------------


# Design notes for speed (the W sweep calls gtn_draw K*N times per iteration). Observed with
# numba 0.68; see docs/perf_truncnorm.md.
# * inline="always" inlines at numba-IR level into the caller's loop. Without it numba increfs
#   and decrefs the Generator's meminfo around every call (two atomic operations per draw,
#   tripling the cost of the common case).
# * Even inlined, the incref/decref pair only leaves the caller's loop if numba's refcount
#   pruning manages the inlined control flow, and it gives up easily. It did so for: a float
#   "/" (the default error model adds a ZeroDivisionError branch; x ** -1.0 compiles to the
#   same divsd without one), an early "return" guard clause, and extra branches or extra
#   inlined copies of the random-number code (each generator call inlines a ziggurat with
#   loops). Hence: no "/", no guard clauses, min/max and conditional expressions for
#   selections, one copy of the tail sampler for both tails and one loop for its two
#   proposals. tests/test_truncnorm.py checks the result on a caller loop.
# * Invalid parameters must not hang a worker, yet cannot be rejected with an early return.
#   Every loop exit is written as "not (reject condition)", so a NaN exits at once; tau <= 0
#   and b < a are clamped to harmless values; the result is then replaced by NaN.


@numba.njit(nogil=True, cache=True, inline="always")
def tail_offset(gen, l, tau, width):
    """Offset ``d`` in ``[0, width]`` with density proportional to ``exp(-l d - tau d^2 / 2)``.

    This is the distance from the bound nearer the mode of a GTN draw in a one-sided tail,
    in the units of ``x``: with ``l = (a - mu) * tau >= 0`` it is ``x - a`` for
    ``x ~ GTN(mu, 1/tau, a, a + width)``. Working in ``x`` units needs one square root and
    one division per draw instead of two of each in standardised units.

    Parameters
    ----------
    gen : numpy.random.Generator
        Random source (not thread-safe: one generator per thread).
    l : float
        ``(bound - mu) * tau`` signed towards the interval, ``l >= 0``.
    tau : float
        Precision, ``0 < tau < inf``.
    width : float
        Interval width ``b - a >= 0``; may be ``inf``.

    Returns
    -------
    float
        The offset, exact (up to rounding) for any ``l``, ``tau`` and ``width``.
    """
    # Standardised, this is Robert's sampler for N(0, 1) on [lo, lo + w] with lo = l / s,
    # w = width * s, s = sqrt(tau). Rate of the exponential proposal, in x units:
    # lam = s * (lo + sqrt(lo^2 + 4)) / 2; it solves lam (lam - l) = tau, so the mode of
    # target / proposal, (lam - l) / tau, equals 1 / lam and needs no cancelling subtraction.
    # Where l^2 would overflow the rate is l itself (also exact: target / proposal then peaks
    # at 0).
    lc = min(l, 1e150)
    lam = max(0.5 * lc + math.sqrt(0.25 * lc * lc + tau), l)
    inv_lam = lam**-1.0
    peak = inv_lam if l < 1e150 else 0.0
    # Acceptance of the uniform proposal is Z / (w phi(lo)), of the exponential one
    # Z lam exp(lam lo - lam^2 / 2) / phi(0) (standardised); uniform wins iff
    # w lam < exp(1 / (2 lam^2)) = exp(y / 2), y = tau / lam^2 in (0, 1]. Either choice is
    # exact, so a cubic Taylor polynomial (error < 0.3 %) stands in for the exp.
    y = tau * inv_lam * inv_lam
    uniform = width * lam < 1.0 + y * (0.5 + y * (0.125 + y * (1.0 / 48.0)))
    # One loop for both proposals: fewer inlined copies of the random-number code keep the
    # caller's control-flow graph small enough for numba's refcount pruning.
    while True:
        if uniform:
            d = width * gen.random()
            # accept with probability exp(-(l d + tau d^2 / 2))
            bar = d * (l + 0.5 * tau * d)
        else:
            # worst case P(d <= width) = 1 - exp(-width lam) >= 1 - 1/e here
            d = gen.standard_exponential() * inv_lam
            e = d - peak
            # accept with probability exp(-tau (d - peak)^2 / 2)
            bar = 0.5 * tau * e * e
        # written so that NaN accepts (see the notes above); "&" does not short-circuit
        if (not d > width) & (not gen.standard_exponential() < bar):
            return d


@numba.njit(nogil=True, cache=True, inline="always")
def _mode_inside_draw(gen, mu, tau, a, b):
    """GTN draw for ``a < mu < b`` (the interval contains the mode)."""
    s = math.sqrt(tau)
    sd = s**-1.0
    lo = (a - mu) * s
    hi = (b - mu) * s
    # the width from (b - a), not hi - lo: no cancellation for narrow intervals
    w = (b - a) * s
    if w >= _SQRT_2PI:
        # the common Gibbs case (small posterior sd): usually accepted at the first draw
        while True:
            z = gen.standard_normal()
            if not (z < lo or z > hi):
                return mu + z * sd
    while True:
        d = w * gen.random()
        z = lo + d
        if not gen.standard_exponential() < 0.5 * z * z:
            return a + d * sd


@numba.njit(nogil=True, cache=True, inline="always")
def std_tail_offset(gen, lo, w):
    """Offset ``d`` in ``[0, w]`` such that ``lo + d`` is N(0, 1) truncated to ``[lo, lo + w]``.

    Parameters
    ----------
    gen : numpy.random.Generator
        Random source (not thread-safe: one generator per thread).
    lo : float
        Lower end of the standardised interval, ``lo >= 0`` (the mode is at or below it).
    w : float
        Width of the interval, ``w >= 0``; may be ``inf``.

    Returns
    -------
    float
        The offset from ``lo``; exact for any ``lo`` and ``w``, including ``lo = 1e10``.
    """
    return tail_offset(gen, lo, 1.0, w)


@numba.njit(nogil=True, cache=True, inline="always")
def std_tn_draw(gen, lo, hi):
    """One draw of the standard normal truncated to ``[lo, hi]`` (``lo < hi``, may be infinite).

    Parameters
    ----------
    gen : numpy.random.Generator
        Random source.
    lo, hi : float
        Bounds of the interval.

    Returns
    -------
    float
        The draw, clipped to ``[lo, hi]``; NaN if ``lo > hi`` or a bound is NaN. For a tail
        far from 0 prefer :func:`gtn_draw`, which keeps the offset from the bound instead of
        adding it to a large ``lo``.
    """
    ok = lo <= hi
    width = max(hi - lo, 0.0)
    if lo >= 0.0:
        z = lo + tail_offset(gen, lo, 1.0, width)
    elif hi <= 0.0:
        z = hi - tail_offset(gen, -hi, 1.0, width)
    else:
        z = _mode_inside_draw(gen, 0.0, 1.0, lo, hi)
    z = min(max(z, lo), hi)
    return z if ok else math.nan


@numba.njit(nogil=True, cache=True, inline="always")
def gtn_draw(gen, mu, tau, a, b):
    """One draw of GTN(mu, 1/tau, a, b): N(mu, 1/tau) truncated to ``[a, b]``.

    Parameters
    ----------
    gen : numpy.random.Generator
        Random source (numba accepts Generator objects in nopython mode). Not thread-safe: use
        one generator per thread.
    mu : float
        Parent mean, finite; may lie far outside ``[a, b]``.
    tau : float
        Parent precision, ``0 < tau < inf``.
    a, b : float
        Bounds, ``a <= b``; ``a = -inf`` and ``b = inf`` are allowed.

    Returns
    -------
    float
        A draw in ``[a, b]``; ``a`` when ``a == b``. Invalid parameters (NaN, ``tau <= 0``,
        ``a > b``, infinite ``mu`` or ``tau``) give NaN, and never an endless loop;
        :func:`sample_gtn` turns them into a ParameterError.

    Notes
    -----
    Inlined into the calling numba function (``inline="always"``). It allocates nothing,
    raises nothing and keeps its control flow simple, so that numba's reference-count pruning
    can drop the per-call incref/decref of ``gen`` from the caller's loop (see the design notes
    in the source). A caller keeps that benefit by avoiding float ``/`` in the same loop, or by
    compiling with ``error_model="numpy"``. To check, look for ``NRT_incref`` in
    ``caller.inspect_asm(sig)``.
    """
    ok = (tau > 0.0) & (tau < math.inf) & (a <= b) & (abs(mu) < math.inf)
    tau = max(tau, 5e-324)
    width = max(b - a, 0.0)
    # The sign of a - mu is exact in floating point, so these are lo >= 0 and hi <= 0.
    # a == b needs no special case: the tail sampler then returns the offset 0.
    lower = mu <= a
    if lower | (mu >= b):
        # one inlined copy of the tail sampler for both tails; exactly one of a - mu, mu - b
        # is >= 0 here
        d = tail_offset(gen, max(a - mu, mu - b) * tau, tau, width)
        x = a + d if lower else b - d
    else:
        x = _mode_inside_draw(gen, mu, tau, a, b)
    x = min(max(x, a), b)
    return x if ok else math.nan


@numba.njit(nogil=True, cache=True)
def _sample_gtn_loop(gen, mu, smu, tau, stau, a, sa, b, sb, out):
    """Fill ``out``; return the first index with invalid parameters, or -1.

    ``s*`` are 0 for a broadcast scalar and 1 for a full-length array, so the common case
    (array mu and tau, scalar bounds) needs no broadcast copies, and validating inside the loop
    saves five passes over the parameter arrays.
    """
    for i in range(out.size):
        ai = a[i * sa]
        bi = b[i * sb]
        x = gtn_draw(gen, mu[i * smu], tau[i * stau], ai, bi)
        if x != x or not ai < bi:
            return i
        out[i] = x
    return -1


def _flat_param(x, shape, n):
    """A 1-D float64 view (or copy) of ``x`` broadcast to ``shape`` and its index stride."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 1:
        return x.reshape(1), 0
    if x.shape == tuple(shape):
        return np.ascontiguousarray(x).reshape(n), 1
    return np.ascontiguousarray(np.broadcast_to(x, shape)).reshape(n), 1


def sample_gtn(rng, mu, tau, a=-1.0, b=1.0, size=None):
    """Draw from GTN(mu, 1/tau, a, b) with numpy broadcasting of the parameters.

    Parameters
    ----------
    rng : numpy.random.Generator, int, numpy.random.SeedSequence or None
        Random source; anything else is passed to :func:`numpy.random.default_rng`. A
        Generator is advanced in place.
    mu : array_like
        Parent means (finite).
    tau : array_like
        Parent precisions, finite and ``> 0``.
    a, b : array_like, default -1.0 and 1.0
        Bounds, ``a < b`` elementwise; infinite bounds are allowed.
    size : int or tuple of int, optional
        Output shape; the parameters must broadcast to it. Default: their broadcast shape.

    Returns
    -------
    numpy.ndarray
        float64 draws, every one inside ``[a, b]``.

    Raises
    ------
    ParameterError
        If a parameter is NaN, ``mu`` is infinite, ``tau`` is not finite and positive,
        ``a >= b``, or the parameters do not broadcast to ``size``. (Validation happens inside
        the sampling loop, so a Generator passed in has been advanced when this is raised.)
    """
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    params = []
    for name, val in (("mu", mu), ("tau", tau), ("a", a), ("b", b)):
        try:
            params.append(np.asarray(val, dtype=np.float64))
        except (TypeError, ValueError) as exc:
            raise ParameterError(
                f"sample_gtn: {name} must be real numbers convertible to float64 ({exc}); "
                f"pass a float or a numeric array"
            ) from None
    try:
        shape = np.broadcast_shapes(*(p.shape for p in params))
        if size is not None:
            size = (int(size),) if np.ndim(size) == 0 else tuple(int(k) for k in size)
            if np.broadcast_shapes(shape, size) != size:
                raise ValueError
            shape = size
    except ValueError:
        names = ("mu", "tau", "a", "b")
        shapes = ", ".join(f"{n} {p.shape}" for n, p in zip(names, params, strict=True))
        target = "a common shape" if size is None else f"size={size}"
        raise ParameterError(
            f"sample_gtn: the shapes of {shapes} do not broadcast to {target}; reshape the "
            f"parameters or change size"
        ) from None
    n = math.prod(shape)
    out = np.empty(n, dtype=np.float64)
    if n:
        flat = [_flat_param(p, shape, n) for p in params]
        bad = _sample_gtn_loop(gen, *flat[0], *flat[1], *flat[2], *flat[3], out)
        if bad >= 0:
            vals = [float(v[bad * stride]) for v, stride in flat]
            raise ParameterError(_invalid_message(np.unravel_index(bad, shape), *vals))
    return out.reshape(shape)


def _invalid_message(index, mu, tau, a, b):
    where = f"sample_gtn: at index {tuple(int(i) for i in index)}"
    if not math.isfinite(mu):
        return f"{where}, mu = {mu} is not finite; check the upstream parent means"
    if not (tau > 0 and math.isfinite(tau)):
        return (f"{where}, tau = {tau}: tau is the parent PRECISION and must be finite and "
                f"> 0; pass 1 / variance")
    if math.isnan(a) or math.isnan(b):
        return f"{where}, the bounds a = {a}, b = {b} must not be NaN; use -inf / inf"
    return (f"{where}, a = {a} is not below b = {b}; the lower bound must be strictly below "
            f"the upper bound, swap or widen them")


# ---------------------------------------------------------------------------------------------
# Exact distribution functions (numpy / scipy), for tests and diagnostics
# ---------------------------------------------------------------------------------------------

_GL_X, _GL_W = np.polynomial.legendre.leggauss(24)


def _log_g(p, t):
    """``log G(p, t)``, ``G(p, t) = int_0^t exp(-p u - u^2 / 2) du`` for ``p >= 0, t >= 0``.

    ``t`` may be ``inf``. Relative accuracy is a few ulp everywhere.
    """
    p, t = np.broadcast_arrays(np.asarray(p, dtype=np.float64), np.asarray(t, dtype=np.float64))
    out = np.full(p.shape, -np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        drop = t * (p + 0.5 * t)  # how far the log-integrand falls over [0, t]
    closed = drop > 1.0
    if np.any(closed):
        pc, tc, dc = p[closed], t[closed], drop[closed]
        # G = R(p) - exp(-drop) R(p + t), R the Mills ratio; the subtracted term is at most
        # exp(-1) times the first, so the difference keeps its relative accuracy.
        r0 = special.erfcx(pc / math.sqrt(2.0))
        with np.errstate(invalid="ignore"):
            pt = pc + tc
        r1 = np.where(np.isinf(tc), 0.0, special.erfcx(np.where(np.isinf(tc), 0.0, pt)
                                                       / math.sqrt(2.0)))
        out[closed] = (0.5 * math.log(0.5 * math.pi) + np.log(r0)
                       + np.log1p(-np.exp(-dc) * r1 / r0))
    quad = (drop <= 1.0) & (t > 0.0)
    if np.any(quad):
        # the integrand varies by at most a factor e: 24-point Gauss-Legendre is exact to ulp
        pq, tq = p[quad][:, None], t[quad][:, None]
        u = 0.5 * tq * (1.0 + _GL_X[None, :])
        vals = np.exp(-u * (pq + 0.5 * u)) @ _GL_W
        out[quad] = np.log(0.5 * t[quad] * vals)
    return out


def _log_mass0(p, q, t):
    """log of (standard normal mass of ``[p, q]``) / phi(0), given ``t = q - p`` accurately.

    ``p`` may be ``-inf`` and ``q`` may be ``inf`` (then ``t`` is ``inf``). Use it where the
    interval contains the mode; in a far tail the ``-p^2 / 2`` term is huge and must not be
    formed, see :func:`_log_pieces`.
    """
    p, q, t = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (p, q, t)))
    out = np.empty(p.shape)
    upper = p >= 0.0
    lower = ~upper & (q <= 0.0)
    mid = ~upper & ~lower
    if np.any(upper):
        pu = p[upper]
        out[upper] = -0.5 * pu * pu + _log_g(pu, t[upper])
    if np.any(lower):
        ql = q[lower]
        out[lower] = -0.5 * ql * ql + _log_g(-ql, t[lower])
    if np.any(mid):
        # two one-sided pieces from the mode outward: a sum of positives, no cancellation
        out[mid] = np.logaddexp(_log_g(0.0, -p[mid]), _log_g(0.0, q[mid]))
    return out


def _log_pieces(z, lo, hi, w, tb, ta):
    """Log masses of ``[lo, z]``, ``[z, hi]``, ``[lo, hi]`` and the log density at ``z``.

    All four are relative to the same reference density ``phi(c)``, ``c`` the point of
    ``[lo, hi]`` nearest 0, so that differences between them never cancel a huge ``c^2 / 2``
    (``c = 1e7`` for ``mu = 100, sd = 1e-5, b = 1``). ``w = hi - lo``, ``tb = z - lo`` and
    ``ta = hi - z`` must be computed from ``x`` and the bounds, not from ``z``.
    """
    z, lo, hi, w, tb, ta = np.broadcast_arrays(z, lo, hi, w, tb, ta)
    below, above, total, dens = (np.empty(z.shape) for _ in range(4))
    up = lo >= 0.0
    dn = ~up & (hi <= 0.0)
    mid = ~up & ~dn
    with np.errstate(invalid="ignore"):
        if np.any(up):
            zu, lu, tbu = z[up], lo[up], tb[up]
            # log phi(z) - log phi(lo) = -(z - lo)(z + lo) / 2 with z - lo = tb exactly
            dens[up] = np.where(tbu > 0, -0.5 * tbu * (zu + lu), 0.0)
            below[up] = _log_g(lu, tbu)
            above[up] = dens[up] + _log_g(zu, ta[up])
            total[up] = _log_g(lu, w[up])
        if np.any(dn):
            zd, hd, tad = z[dn], hi[dn], ta[dn]
            dens[dn] = np.where(tad > 0, -0.5 * tad * (-zd - hd), 0.0)
            above[dn] = _log_g(-hd, tad)
            below[dn] = dens[dn] + _log_g(-zd, tb[dn])
            total[dn] = _log_g(-hd, w[dn])
    if np.any(mid):
        zm = z[mid]
        dens[mid] = -0.5 * zm * zm
        below[mid] = _log_mass0(lo[mid], zm, tb[mid])
        above[mid] = _log_mass0(zm, hi[mid], ta[mid])
        total[mid] = _log_mass0(lo[mid], hi[mid], w[mid])
    return below, above, total, dens


def _standardise(mu, tau, a, b):
    mu, tau, a, b = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (mu, tau, a, b))
    )
    if np.any(~(tau > 0)) or np.any(~(a < b)) or np.any(~np.isfinite(mu)):
        raise ParameterError(
            "GTN needs a finite mu, tau > 0 (a precision) and a < b elementwise; check the "
            "parameters"
        )
    s = np.sqrt(tau)
    with np.errstate(invalid="ignore"):
        lo = (a - mu) * s
        hi = (b - mu) * s
        w = (b - a) * s
    return mu, s, a, b, lo, hi, w


def _x_pieces(x, mu, tau, a, b):
    x = np.asarray(x, dtype=np.float64)
    x, mu, tau, a, b = np.broadcast_arrays(
        x, *(np.asarray(v, dtype=np.float64) for v in (mu, tau, a, b))
    )
    mu, s, a, b, lo, hi, w = _standardise(mu, tau, a, b)
    xc = np.clip(x, a, b)
    with np.errstate(invalid="ignore"):
        # offsets from the bounds straight from x: accurate even when z is 1e7
        tb = np.where(xc == a, 0.0, (xc - a) * s)
        ta = np.where(xc == b, 0.0, (b - xc) * s)
    z = (xc - mu) * s
    return x, s, a, b, _log_pieces(z, lo, hi, w, tb, ta)


def gtn_logpdf(x, mu, tau, a=-1.0, b=1.0):
    """Log density of GTN(mu, 1/tau, a, b) at ``x``; ``-inf`` outside ``[a, b]``.

    Parameters
    ----------
    x, mu, tau, a, b : array_like
        Points and parameters (broadcast together); ``tau`` is the parent precision.

    Returns
    -------
    numpy.ndarray
        Exact log density; the normaliser is computed in log space relative to the density at
        the bound nearest the mode, so it stays accurate for means 1e7 standard deviations
        outside the interval.
    """
    x, s, a, b, (_, _, total, dens) = _x_pieces(x, mu, tau, a, b)
    # phi(z) = phi(c) exp(dens) and mass = phi(c) exp(total): phi(c) cancels exactly
    return np.where((x >= a) & (x <= b), dens - total + np.log(s), -np.inf)


def gtn_cdf(x, mu, tau, a=-1.0, b=1.0):
    """Cumulative distribution function of GTN(mu, 1/tau, a, b) at ``x``.

    Parameters
    ----------
    x, mu, tau, a, b : array_like
        Points and parameters (broadcast together); ``tau`` is the parent precision.

    Returns
    -------
    numpy.ndarray
        ``P(X <= x)``. Where it is below 1/2 it is computed from the mass below ``x``, elsewhere
        as one minus the mass above ``x``, so both small values and small complements are
        accurate. For draws packed against a bound far from ``mu`` use :func:`gtn_offset_cdf`.
    """
    _, _, _, _, (below, above, total, _) = _x_pieces(x, mu, tau, a, b)
    below = below - total
    above = above - total
    cdf = np.where(below <= above, np.exp(below), -np.expm1(above))
    return np.clip(cdf, 0.0, 1.0)


def gtn_offset_cdf(t, mu, tau, a=-1.0, b=1.0, bound="auto"):
    """CDF of the standardised offset of a GTN draw from one of its bounds.

    ``T = (x - a) * sqrt(tau)`` for ``bound="lower"`` and ``T = (b - x) * sqrt(tau)`` for
    ``bound="upper"``. For ``mu`` far above ``b`` the draws are ``b`` minus something tiny,
    and ``T`` is what a test can resolve: it is close to Exp(rate ``(mu - b) sqrt(tau)``),
    but this function is exact.

    Parameters
    ----------
    t : array_like
        Offsets in standard deviations, ``0 <= t <= (b - a) sqrt(tau)``.
    mu, tau, a, b : array_like
        Parameters (broadcast together with ``t``); ``tau`` is the parent precision.
    bound : {"auto", "lower", "upper"}
        Bound to measure from; ``"auto"`` takes the one nearer ``mu`` (the finite one when the
        other is infinite).

    Returns
    -------
    numpy.ndarray
        ``P(T <= t)``.
    """
    t = np.asarray(t, dtype=np.float64)
    t, mu, tau, a, b = np.broadcast_arrays(
        t, *(np.asarray(v, dtype=np.float64) for v in (mu, tau, a, b))
    )
    mu, s, a, b, lo, hi, w = _standardise(mu, tau, a, b)
    if bound == "auto":
        with np.errstate(invalid="ignore"):
            upper = np.isinf(a) | (~np.isinf(b) & (mu - b > a - mu))
    elif bound in ("lower", "upper"):
        upper = np.full(mu.shape, bound == "upper")
    else:
        raise ParameterError(f"bound must be 'auto', 'lower' or 'upper', got {bound!r}")
    if np.any(np.isinf(np.where(upper, b, a))):
        raise ParameterError("gtn_offset_cdf: the chosen bound is infinite; use the finite one")
    tc = np.clip(t, 0.0, w)
    # mirror an upper bound onto a lower one: the offset from b of N(mu) truncated to [a, b]
    # is the offset from -b of N(-mu) truncated to [-b, -a]
    p = np.where(upper, -hi, lo)
    q = np.where(upper, -lo, hi)
    with np.errstate(invalid="ignore"):
        z = p + tc
        ta = np.where(tc >= w, 0.0, w - tc)
    below, _, total, _ = _log_pieces(z, p, q, w, tc, ta)
    return np.clip(np.exp(below - total), 0.0, 1.0)
