"""Kernels of the collapsed swap: the normal mass in log space, the slot marginal, the
row draw and the choice rules, each against an independent computation."""

import numpy as np
import pytest
from scipy import integrate, special, stats

from dask_bid.kernels.collapsed import draw_slot_row, log_normal_mass, slot_marginal
from dask_bid.kernels.stats import choose_among


def _reference_log_mass(lo, hi):
    # log(Phi(hi) - Phi(lo)): adaptive quadrature of the density scaled at the interval's
    # point nearest 0 for short intervals (a difference of tails would cancel there),
    # scipy's log_ndtr in the tail where both lie otherwise
    lo, hi = np.broadcast_arrays(np.asarray(lo, float), np.asarray(hi, float))
    out = np.empty(lo.shape)
    for i, (x, y) in enumerate(zip(lo.ravel(), hi.ravel(), strict=True)):
        if y - x < 1.0:
            c = min(abs(x), abs(y)) if x * y > 0 else 0.0
            v = integrate.quad(lambda t, c=c: np.exp(-0.5 * (t * t - c * c)), x, y,
                               epsabs=0, epsrel=1e-13)[0]
            out.flat[i] = np.log(v) - 0.5 * c * c - 0.5 * np.log(2 * np.pi)
            continue
        if x >= 0:
            a, b = special.log_ndtr(-x), special.log_ndtr(-y)
        else:
            a, b = special.log_ndtr(y), special.log_ndtr(x)
        out.flat[i] = a + np.log1p(-np.exp(b - a))
    return out


@pytest.mark.parametrize("lo,hi", [
    (-1.0, 1.0), (-0.1, 5.0), (2.0, 2.5), (8.0, 9.0), (29.0, 31.0), (35.0, 36.0),
    (100.0, 100.001), (-40.0, -39.0), (-1e3, -999.0), (-3.0, -2.99999), (0.0, 1e-12),
    (0.5, 0.5 + 1e-9), (-0.1, 0.1), (3.0, 3.05), (50.0, 50.004),
])
def test_log_normal_mass_matches_scipy_in_every_tail(lo, hi):
    got = log_normal_mass(lo, hi)
    ref = _reference_log_mass(lo, hi)
    assert np.isfinite(got)
    # relative to the magnitude of the log (a deep tail's log is large: its relative
    # accuracy is what matters), 1e-10 or better
    assert abs(got - ref) <= 1e-10 * max(1.0, abs(ref)), (got, ref)


def test_slot_marginal_is_the_integral_over_the_row():
    """L(c) = sum_n f(g, h_n) equals log of the integral over w of
    exp(-(g w^2 - 2 h w) / (2 sigma^2)) GTN(w; mu, 1/tau, a, b) up to terms that do not
    depend on (g, h): compare differences between two (g, h) pairs with quadrature."""
    mu, tau, s2, a, b = 0.2, 1.5, 0.3, -1.0, 1.0

    def log_integral(g, h):
        f = lambda w: np.exp(-(g * w * w - 2 * h * w) / (2 * s2)  # noqa: E731
                             - 0.5 * tau * (w - mu) ** 2)
        return np.log(integrate.quad(f, a, b, epsabs=0, epsrel=1e-13, limit=200)[0])

    pairs = [(2.0, 0.5), (7.0, -1.5), (0.5, 0.05), (30.0, 12.0)]
    ref = np.array([log_integral(g, h) for g, h in pairs])
    got = np.array([slot_marginal(g, [h], mu, tau, s2, a, b) for g, h in pairs])
    # the dropped constant is -log(sqrt(2 pi)) + const: the same for every pair
    shift = got - ref
    np.testing.assert_allclose(shift - shift[0], 0.0, atol=1e-9)


def test_draw_slot_row_follows_the_conditional():
    g, h, mu, tau, s2, a, b = 4.0, 1.1, 0.0, 1.0, 0.5, -1.0, 1.0
    gen = np.random.default_rng(0)
    x = draw_slot_row(gen, g, np.full(20000, h), mu, tau, s2, a, b)
    P = g / s2 + tau
    m = (h / s2 + tau * mu) / P
    sd = 1 / np.sqrt(P)
    ref = stats.truncnorm((a - m) / sd, (b - m) / sd, loc=m, scale=sd)
    assert stats.kstest(x, ref.cdf).pvalue > 1e-3


@pytest.mark.parametrize("rule", ["barker", "metropolis"])
def test_choice_rules_leave_the_weights_invariant(rule):
    """On a fixed set, the chain 'current -> choose_among' has the normalised weights as
    its stationary distribution (chi-square on 40,000 steps, thinned by 2)."""
    logw = np.log(np.array([0.05, 0.4, 0.1, 0.3, 0.15]))
    gen = np.random.default_rng(1)
    x, visits = 0, np.zeros(5)
    for t in range(40000):
        order = [x] + [i for i in range(5) if i != x]
        j, _ = choose_among(gen, logw[order], rule)
        x = order[j]
        if t % 2 == 0:
            visits[x] += 1
    expected = np.exp(logw) / np.exp(logw).sum() * visits.sum()
    assert stats.chisquare(visits, expected).pvalue > 1e-3


def test_a_flipped_choice_is_detected():
    """The planted bug of the test above: weights inverted around the current one."""
    logw = np.log(np.array([0.05, 0.4, 0.1, 0.3, 0.15]))
    gen = np.random.default_rng(1)
    x, visits = 0, np.zeros(5)
    for t in range(40000):
        order = [x] + [i for i in range(5) if i != x]
        L = logw[order]
        j, _ = choose_among(gen, np.concatenate([L[:1], 2 * L[0] - L[1:]]), "barker")
        x = order[j]
        if t % 2 == 0:
            visits[x] += 1
    expected = np.exp(logw) / np.exp(logw).sum() * visits.sum()
    assert stats.chisquare(visits, expected).pvalue < 1e-6


def test_metropolis_with_a_dominant_candidate_does_not_overflow():
    gen = np.random.default_rng(0)
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        j, prob = choose_among(gen, np.array([-800.0, 0.0, -900.0]), "metropolis")
    assert j == 1 and prob == pytest.approx(1.0)
