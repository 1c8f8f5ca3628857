"""The collapsed swap: slot k's row of W integrated out (MODEL_NOTES section 8).

Given the other rows W_{-k}, sigma^2 and the slot's GTN parameters, the row k of W is a
product over columns n of one-dimensional Gaussians restricted to [a, b]. Its integral
has a closed form, so the marginal likelihood of "slot k holds column c" is

    L(c) = sum_n f(g_n(c), h_n(c)),
    f(g, h) = P m^2 / 2 - log(P) / 2 + log(Phi(sqrt(P) (b - m)) - Phi(sqrt(P) (a - m))),
    P = g / sigma^2 + tau_kn,   m = (h / sigma^2 + tau_kn mu_kn) / P,

with g_n = ||c||^2 (per column n over its observed rows when masked) and
h_n = c^T (a_n - sum_{j != k} c_j w_jn). Terms that are the same for every c cancel in
ratios (||a_n - sum_{j != k} c_j w_jn||^2, the GTN prior's normaliser at fixed
mu, tau, 2 pi's). A swap proposal whose incoming row is drawn from its exact
conditional then has the Metropolis-Hastings ratio exp(L(c') - L(c)): no draw of W
enters it, which is why the move is exact and still moves.

Everything here is one column block: the engine adds the blocks' sums.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .truncnorm import gtn_draw

__all__ = ["log_normal_mass", "slot_marginal", "draw_slot_row", "slot_terms", "candidate_terms"]

_LOG_HALF = math.log(0.5)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)


@njit(nogil=True, cache=True, inline="always")
def _log_q(x):
    # log of the upper tail Q(x) = 1 - Phi(x). erfc is exact to rounding until it
    # underflows (x near 37); the asymptotic series takes over well before that, where
    # its first omitted term is below 1e-16 relative.
    if x < 30.0:
        return _LOG_HALF + math.log(math.erfc(x * _INV_SQRT2))
    z = 1.0 / (x * x)
    s = 1.0 - z * (1.0 - 3.0 * z * (1.0 - 5.0 * z * (1.0 - 7.0 * z * (1.0 - 9.0 * z))))
    return -0.5 * x * x - math.log(x) - _HALF_LOG_2PI + math.log(s)


# 8-point Gauss-Legendre on [-1, 1]: the mass of a narrow interval, where the normal
# density changes by less than a factor e over it, to about 1e-15
_GL_X = np.polynomial.legendre.leggauss(8)[0]
_GL_W = np.polynomial.legendre.leggauss(8)[1]


@njit(nogil=True, cache=True, inline="always")
def _log_mass(lo, hi):
    # log(Phi(hi) - Phi(lo)) for lo < hi, without cancellation in either tail
    half = 0.5 * (hi - lo)
    if half * max(1.0, abs(lo), abs(hi)) < 0.25:
        # narrow: a difference of two nearly equal tails would cancel; integrate instead
        mid = 0.5 * (hi + lo)
        acc = 0.0
        for i in range(8):
            x = mid + half * _GL_X[i]
            acc += _GL_W[i] * math.exp(-0.5 * (x * x - mid * mid))
        return math.log(half * acc) - 0.5 * mid * mid - _HALF_LOG_2PI
    if lo >= 0.0:
        qlo = _log_q(lo)
        return qlo + math.log1p(-math.exp(_log_q(hi) - qlo))
    if hi <= 0.0:
        qhi = _log_q(-hi)
        return qhi + math.log1p(-math.exp(_log_q(-lo) - qhi))
    # straddles 0: both tails are at most 1/2
    return math.log1p(-(math.exp(_log_q(hi)) + math.exp(_log_q(-lo))))


@njit(nogil=True, cache=True)
def _log_mass_vec(lo, hi, out):
    for i in range(lo.size):
        out[i] = _log_mass(lo[i], hi[i])


def log_normal_mass(lo, hi):
    """log(Phi(hi) - Phi(lo)) elementwise (``lo < hi``), stable in both tails."""
    lo, hi = np.broadcast_arrays(np.asarray(lo, dtype=np.float64),
                                 np.asarray(hi, dtype=np.float64))
    out = np.empty(lo.shape)
    _log_mass_vec(np.ascontiguousarray(lo).ravel(), np.ascontiguousarray(hi).ravel(),
                  out.reshape(-1))
    return out


@njit(nogil=True, cache=True, inline="always")
def _slot_term(g, h, mu, tau, inv_s2, a, b):
    # f(g, h) of one column: log of the integral over w in [a, b] of
    # exp(-(g w^2 - 2 h w) / 2 s2) N(w; mu, 1/tau), up to factors equal for every basis
    P = g * inv_s2 + tau
    lin = h * inv_s2 + tau * mu
    m = lin / P
    sp = math.sqrt(P)
    return 0.5 * lin * m - 0.5 * math.log(P) + _log_mass(sp * (a - m), sp * (b - m))


@njit(nogil=True, cache=True, error_model="numpy")
def _marginal(g, h, mu, tau, inv_s2, a, b):
    total = 0.0
    for n in range(h.size):
        total += _slot_term(g[n], h[n], mu[n], tau[n], inv_s2, a, b)
    return total


@njit(nogil=True, cache=True, error_model="numpy")
def _draw_row(gen, g, h, mu, tau, inv_s2, a, b, out):
    for n in range(h.size):
        P = g[n] * inv_s2 + tau[n]
        out[n] = gtn_draw(gen, (h[n] * inv_s2 + tau[n] * mu[n]) / P, P, a, b)


def _f64(x, n):
    # called per slot and candidate: the common cases (a scalar, a ready float64 vector)
    # skip np.broadcast_to, which costs more than the kernel on a small block
    if isinstance(x, np.ndarray) and x.dtype == np.float64 and x.shape == (n,) \
            and x.flags.c_contiguous:
        return x
    if isinstance(x, (float, int, np.floating, np.integer)):
        out = np.empty(n)
        out.fill(x)
        return out
    return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype=np.float64), (n,)))


def slot_marginal(g, h, mu, tau, sigma2, a, b) -> float:
    """L = sum_n f(g_n, h_n): the log marginal of one slot's row, up to a constant.

    Parameters
    ----------
    g, h : (nb,) arrays (``g`` may be a scalar: the same column norm for every n)
    mu, tau : scalars (GBT) or (nb,) arrays (GBTN: the slot's row of Mu, Tau)
    sigma2 : float
    a, b : float
        The bounds of W.
    """
    h = np.ascontiguousarray(h, dtype=np.float64)
    n = h.size
    return float(_marginal(_f64(g, n), h, _f64(mu, n), _f64(tau, n), 1.0 / float(sigma2),
                           float(a), float(b)))


def draw_slot_row(gen, g, h, mu, tau, sigma2, a, b) -> np.ndarray:
    """Row k of W from its exact conditional: w_kn ~ GTN(m_n, 1/P_n, a, b)."""
    h = np.ascontiguousarray(h, dtype=np.float64)
    n = h.size
    out = np.empty(n)
    _draw_row(gen, _f64(g, n), h, _f64(mu, n), _f64(tau, n), 1.0 / float(sigma2),
              float(a), float(b), out)
    return out


def slot_terms(G, H, W, k, Gn=None):
    """(g, h) of the column slot k holds now: g = G_kk (or Gn[n, k, k] per column when
    masked) and h_n = H_kn - sum_{j != k} G_kj w_jn."""
    if Gn is None:
        s = G[k] @ W - G[k, k] * W[k]
        return float(G[k, k]), H[k] - s
    gk = Gn[:, k, :]  # (nb, K)
    s = np.einsum("nl,ln->n", gk, W) - gk[:, k] * W[k]
    return np.ascontiguousarray(gk[:, k]), H[k] - s


def candidate_terms(g_row, row_u, W, k, q=None):
    """(g, h) if slot k took column u: ``g_row`` is the new row k of G (C'^T a_u, with
    entry k = ||a_u||^2), ``row_u`` = a_u^T A[:, block]. Masked: ``q`` (K, nb) holds the
    new row k of every column's Gram and ``g_row`` is ignored."""
    if q is None:
        s = g_row @ W - g_row[k] * W[k]
        return float(g_row[k]), row_u - s
    s = np.einsum("ln,ln->n", q, W) - q[k] * W[k]
    return np.ascontiguousarray(q[k]), row_u - s
