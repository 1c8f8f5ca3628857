"""Tests of the truncated-normal sampler and its exact distribution functions.

The sampler is checked against the exact CDF with Kolmogorov-Smirnov tests over a parameter
grid; in the far tails the test is on the standardised offset from the nearer bound, which is
what the float64 draws can resolve. Every KS case rejects at ``P_FAMILY / n_cases`` so the whole
grid has a false-alarm probability below ``P_FAMILY`` (Bonferroni); the seeds are fixed, so the
outcome is deterministic. Planted bugs show the same check has power.
"""

import math

import numba
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from dask_bid._errors import ParameterError
from dask_bid.kernels import gtn_cdf, gtn_draw, gtn_logpdf, sample_gtn
from dask_bid.kernels.truncnorm import gtn_offset_cdf, std_tail_offset, std_tn_draw

pytestmark = pytest.mark.filterwarnings("error")

INF = math.inf
N_KS = 20_000
P_FAMILY = 1e-3

# (name, mu, sd, a, b, representation): "x" tests gtn_cdf on the draws, "lower"/"upper" tests
# gtn_offset_cdf on (x - a) sqrt(tau) / (b - x) sqrt(tau).
KS_CASES = [
    ("mode inside, wide", 0.3, 0.2, -1.0, 1.0, "x"),
    ("mode inside, sd 1 (uniform proposal)", 0.0, 1.0, -1.0, 1.0, "x"),
    ("mode inside, sd 50 (nearly uniform)", 0.5, 50.0, -1.0, 1.0, "x"),
    ("mode inside near b, acceptance ~0.5", 0.99, 0.5, -1.0, 1.0, "x"),
    ("mode inside, width 4e-9", 0.2, 1e-3, 0.2 - 1e-9, 0.2 + 3e-9, "lower"),
    ("mode at width 1e-12 interval's end", 0.5, 1.0, 0.5, 0.5 + 1e-12, "lower"),
    ("mode on the bound b", 1.0, 0.1, -1.0, 1.0, "upper"),
    ("tail alpha=2 (mu=1.02, sd=0.01)", 1.02, 0.01, -1.0, 1.0, "upper"),
    ("one-sided tail alpha=3", 0.0, 1.0, 3.0, INF, "lower"),
    ("one-sided tail alpha=8", 0.0, 1.0, 8.0, INF, "lower"),
    ("tail alpha=3, width 0.5 (exponential)", 0.0, 1.0, 3.0, 3.5, "lower"),
    ("tail alpha=3, width 0.3 (uniform)", 0.0, 1.0, 3.0, 3.3, "lower"),
    ("far tail mu=40 sd=0.01", 40.0, 0.01, -1.0, 1.0, "upper"),
    ("far tail mu=100 sd=1e-5", 100.0, 1e-5, -1.0, 1.0, "upper"),
    ("far tail mirror mu=-40 sd=0.01", -40.0, 0.01, -1.0, 1.0, "lower"),
    ("narrow far out, lo=5000, width 1e-6", 0.0, 1e-3, 5.0, 5.0 + 1e-9, "lower"),
    ("narrow far out, lo=50, width 2", 0.0, 0.01, 0.5, 0.52, "lower"),
    ("width 1e-12 in the tail", -3.0, 1.0, 0.7, 0.7 + 1e-12, "lower"),
    ("a=-inf, mode inside", 0.0, 1.0, -INF, 0.3, "x"),
    ("a=-inf, b=inf", 0.7, 3.0, -INF, INF, "x"),
    ("a=-inf, far tail at b=-40", 0.0, 1.0, -INF, -40.0, "upper"),
    ("b=inf, mode inside", -0.2, 2.0, -1.0, INF, "x"),
]
P_CASE = P_FAMILY / len(KS_CASES)


def _offsets(x, mu, tau, a, b, rep):
    s = math.sqrt(tau)
    return (x - a) * s if rep == "lower" else (b - x) * s


def _ks_pvalue(x, mu, tau, a, b, rep):
    """KS p-value of draws ``x`` against the exact GTN(mu, 1/tau, a, b) in representation rep."""
    if rep == "x":
        return stats.kstest(x, lambda v: gtn_cdf(v, mu, tau, a, b)).pvalue
    t = _offsets(x, mu, tau, a, b, rep)
    return stats.kstest(t, lambda v: gtn_offset_cdf(v, mu, tau, a, b, bound=rep)).pvalue


def _case_seed(i):
    return 20240 + i


# ------------------------------------------------------------------------------------------
# The exact distribution functions (the test oracle) are themselves checked first
# ------------------------------------------------------------------------------------------


def _offset_cdf_by_quadrature(t, p, w):
    """CDF at ``t`` of U on [0, w] with density proportional to exp(-(p + u)^2 / 2), p >= 0.

    Independent of the module: adaptive quadrature after rescaling u = v / max(1, p), with the
    factor exp(-p^2 / 2) removed analytically.
    """
    c = 1.0 / max(1.0, p)

    def f(v):
        u = v * c
        return math.exp(-(p * u + 0.5 * u * u))

    upper = min(w / c, 800.0)  # the integrand is below e^-800 beyond, relative to its maximum
    num = integrate.quad(f, 0.0, t / c, epsabs=0, epsrel=1e-13, limit=200)[0]
    den = integrate.quad(f, 0.0, upper, epsabs=0, epsrel=1e-13, limit=200)[0]
    return num / den


@pytest.mark.parametrize(
    "mu, sd, a, b",
    [(0.3, 0.2, -1, 1), (0, 1, -1, 1), (0, 1, 3, INF), (0, 1, -INF, 0.3), (2.5, 0.7, -1, 1),
     (-1.2, 0.3, -1, 1), (0, 1, -INF, INF), (0.9, 0.05, -1, 1)],
)
def test_cdf_and_logpdf_match_scipy_in_moderate_cases(mu, sd, a, b):
    ref = stats.truncnorm((a - mu) / sd, (b - mu) / sd, loc=mu, scale=sd)
    lo, hi = max(a, mu - 6 * sd), min(b, mu + 6 * sd)
    x = np.linspace(lo, hi, 201)
    np.testing.assert_allclose(gtn_cdf(x, mu, 1 / sd**2, a, b), ref.cdf(x), rtol=1e-9,
                               atol=1e-14)
    np.testing.assert_allclose(gtn_logpdf(x, mu, 1 / sd**2, a, b), ref.logpdf(x), rtol=1e-9,
                               atol=1e-9)


@pytest.mark.parametrize(
    "mu, sd, a, b, bound",
    [(100.0, 1e-5, -1.0, 1.0, "upper"), (40.0, 0.01, -1.0, 1.0, "upper"),
     (-40.0, 0.01, -1.0, 1.0, "lower"), (0.0, 1.0, 3.0, 3.5, "lower"),
     (0.0, 1.0, 8.0, INF, "lower"), (0.0, 1.0, 3.0, 3.0 + 1e-12, "lower"),
     (0.0, 1e-3, 5.0, 5.0 + 1e-9, "lower"), (0.0, 1.0, -INF, -40.0, "upper")],
)
def test_offset_cdf_matches_quadrature_in_far_tails(mu, sd, a, b, bound):
    tau = 1 / sd**2
    s = math.sqrt(tau)
    p = (a - mu) * s if bound == "lower" else (mu - b) * s
    w = (b - a) * s
    for q in (1e-4, 0.01, 0.3, 0.7, 0.99):
        # a spread of offsets: quantiles of the limiting exponential, or of the width
        t = min(-math.log1p(-q) / p if p > 1 else q * min(w, 5.0), q * w)
        got = float(gtn_offset_cdf(t, mu, tau, a, b, bound=bound))
        want = _offset_cdf_by_quadrature(t, p, w)
        assert got == pytest.approx(want, rel=1e-10), (t, got, want)


def test_offset_cdf_tends_to_exponential_in_the_extreme_tail():
    # mu=100, sd=1e-5: lo' = 9.9e6 sd, the offset is Exp(lo') up to O(1 / lo'^2)
    mu, tau = 100.0, 1e10
    rate = 99.0 * 1e5
    t = np.array([1e-9, 1e-8, 1e-7, 5e-7]) / 0.99
    exact = gtn_offset_cdf(t, mu, tau, -1.0, 1.0)
    np.testing.assert_allclose(exact, -np.expm1(-rate * t), rtol=1e-12)


def test_cdf_and_offset_cdf_agree_and_are_monotone():
    mu, tau, a, b = 2.0, 25.0, -1.0, 1.0
    t = np.linspace(0, 2.0, 401)
    f_off = gtn_offset_cdf(t, mu, tau, a, b, bound="upper")
    f_x = gtn_cdf(b - t / 5.0, mu, tau, a, b)
    np.testing.assert_allclose(1 - f_x, f_off, atol=1e-14)
    assert np.all(np.diff(f_off) >= 0)
    assert f_off[0] == 0.0
    assert gtn_cdf(a, mu, tau, a, b) == 0.0 and gtn_cdf(b, mu, tau, a, b) == 1.0
    assert gtn_cdf(b + 1, mu, tau, a, b) == 1.0 and gtn_cdf(a - 1, mu, tau, a, b) == 0.0


@pytest.mark.parametrize("mu, sd", [(40.0, 0.01), (-3.0, 0.5), (0.1, 0.3), (0.0, 30.0)])
def test_logpdf_integrates_to_one(mu, sd):
    tau = 1 / sd**2
    s = math.sqrt(tau)
    # integrate over the standardised offset from the bound nearer mu, on the tail's own scale
    if mu > 1:
        def f(t):
            return math.exp(gtn_logpdf(1.0 - t / s, mu, tau)) / s
    else:
        def f(t):
            return math.exp(gtn_logpdf(-1.0 + t / s, mu, tau)) / s
    total = integrate.quad(f, 0.0, 2.0 * s, epsabs=0, epsrel=1e-11, limit=400,
                           points=[min(2.0 * s, 1e-3 * s)])[0]
    assert total == pytest.approx(1.0, rel=1e-9)
    assert gtn_logpdf(1.5, mu, tau) == -INF


def test_distribution_functions_are_finite_in_the_extremes():
    x = np.array([-1.0, -0.5, 0.0, 1.0 - 1e-12, 1.0])
    for mu, tau in [(100.0, 1e10), (-1e3, 1e16), (1e3, 1e-6), (0.0, 1e16)]:
        c = gtn_cdf(x, mu, tau)
        assert np.all(np.isfinite(c)) and np.all((c >= 0) & (c <= 1))
        lp = gtn_logpdf(x, mu, tau)
        assert not np.any(np.isnan(lp))


# ------------------------------------------------------------------------------------------
# The sampler against the exact distribution
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("i", range(len(KS_CASES)), ids=[c[0] for c in KS_CASES])
def test_sampler_passes_ks_against_exact_cdf(i):
    _, mu, sd, a, b, rep = KS_CASES[i]
    tau = 1.0 / sd**2
    x = sample_gtn(_case_seed(i), mu, tau, a, b, size=N_KS)
    assert np.all(np.isfinite(x)) and np.all((x >= a) & (x <= b))
    p = _ks_pvalue(x, mu, tau, a, b, rep)
    assert p >= P_CASE, f"KS rejects GTN({mu}, {sd}^2, {a}, {b}): p = {p:.3g} < {P_CASE:.3g}"


def _exact_offset_moments(p, w):
    """Mean, variance and 4th central moment of U on [0, w], density ~ exp(-(p + u)^2 / 2)."""
    c = 1.0 / max(1.0, p)  # the tail's scale when p is large
    # beyond v = 80 the rescaled tail density is below e^-80: negligible even times v^4
    upper = min(w / c, 80.0) if p > 0 else w / c

    def raw(k):
        def f(v):
            u = v * c
            # for p > 0 divide out exp(-p^2 / 2) analytically: (p + u)^2 - p^2 = u (2 p + u)
            e = u * (p + 0.5 * u) if p > 0 else 0.5 * (p + u) ** 2
            return u**k * math.exp(-e)
        brk = [-p / c] if p < 0 and -p / c < upper else None
        return integrate.quad(f, 0.0, upper, epsabs=0, epsrel=1e-10, limit=400, points=brk)[0]

    m0, m1, m2, m3, m4 = (raw(k) for k in range(5))
    mean = m1 / m0
    var = m2 / m0 - mean**2
    mu4 = m4 / m0 - 4 * mean * m3 / m0 + 6 * mean**2 * m2 / m0 - 3 * mean**4
    return mean, var, mu4


MOMENT_CASES = [
    (0.3, 0.2, -1.0, 1.0, "lower"),
    (0.0, 1.0, -1.0, 1.0, "lower"),
    (0.0, 1.0, 3.0, INF, "lower"),
    (0.0, 1.0, 8.0, INF, "lower"),
    (0.0, 1.0, 3.0, 3.5, "lower"),
    (0.0, 1.0, 3.0, 3.3, "lower"),
    (0.0, 1.0, 0.5, 1.5, "lower"),
    (1.0, 0.1, -1.0, 1.0, "upper"),
    (0.99, 0.5, -1.0, 1.0, "upper"),
    (40.0, 0.01, -1.0, 1.0, "upper"),
    (100.0, 1e-5, -1.0, 1.0, "upper"),
    (-40.0, 0.01, -1.0, 1.0, "lower"),
]


@pytest.mark.parametrize("mu, sd, a, b, rep", MOMENT_CASES)
def test_sample_mean_and_variance_match_exact_moments(mu, sd, a, b, rep):
    tau = 1.0 / sd**2
    s = math.sqrt(tau)
    p = (a - mu) * s if rep == "lower" else (mu - b) * s
    mean, var, mu4 = _exact_offset_moments(p, (b - a) * s)
    # many draws are cheap here (no CDF to evaluate); 4e5 resolves a 1% error of scale
    n = 400_000
    t = _offsets(sample_gtn(7, mu, tau, a, b, size=n), mu, tau, a, b, rep)
    # two z-scores per case, Bonferroni over the cases at family level P_FAMILY
    z_max = stats.norm.isf(P_FAMILY / (2 * 2 * len(MOMENT_CASES)))
    z_mean = (t.mean() - mean) / math.sqrt(var / n)
    z_var = (t.var(ddof=1) - var) / math.sqrt((mu4 - var**2) / n)
    assert abs(z_mean) < z_max, (z_mean, t.mean(), mean)
    assert abs(z_var) < z_max, (z_var, t.var(), var)


# ------------------------------------------------------------------------------------------
# Planted bugs: the same checks must reject a wrong sampler (the tests have power)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("i", [0, 8, 12, 13], ids=[KS_CASES[i][0] for i in [0, 8, 12, 13]])
def test_ks_check_rejects_a_sampler_with_wrong_precision(i):
    _, mu, sd, a, b, rep = KS_CASES[i]
    tau = 1.0 / sd**2
    wrong = sample_gtn(_case_seed(i), mu, 1.3 * tau, a, b, size=N_KS)
    assert _ks_pvalue(wrong, mu, tau, a, b, rep) < P_CASE


def test_ks_check_rejects_a_tail_sampler_without_the_acceptance_step():
    # Exp(alpha) proposals returned as they are: right to first order in 1/alpha only
    alpha = 3.0
    offsets = np.random.default_rng(1).standard_exponential(N_KS) / alpha
    p = stats.kstest(offsets, lambda t: gtn_offset_cdf(t, 0.0, 1.0, alpha, INF)).pvalue
    assert p < P_CASE


def test_ks_check_rejects_draws_quantised_by_adding_to_mu():
    # Reconstructing a far-tail draw as mu + z / sqrt(tau) instead of as an offset from the
    # bound rounds it to a grid ~1.4% of the tail's scale; the offset test must see that.
    mu, sd, a, b = 100.0, 1e-5, -1.0, 1.0
    tau = 1 / sd**2
    s = math.sqrt(tau)
    x = sample_gtn(0, mu, tau, a, b, size=N_KS)
    z = (b - mu) * s - (b - x) * s
    quantised = mu + z / s
    assert _ks_pvalue(x, mu, tau, a, b, "upper") >= P_CASE
    assert _ks_pvalue(quantised, mu, tau, a, b, "upper") < P_CASE


# ------------------------------------------------------------------------------------------
# Range, finiteness and reproducibility
# ------------------------------------------------------------------------------------------

EXTREMES = [
    (40.0, 0.01, -1.0, 1.0), (100.0, 1e-5, -1.0, 1.0), (-100.0, 1e-5, -1.0, 1.0),
    (0.0, 1.0, 0.3, 0.3 + 1e-12), (1e3, 1e-8, -1.0, 1.0), (-1e3, 1e3, -1.0, 1.0),
    (0.0, 1e-8, -1.0, 1.0), (0.0, 1e8, -1.0, 1.0), (5.0, 1.0, -INF, 1.0), (-5.0, 1.0, 1.0, INF),
    (0.0, 1.0, -INF, INF), (1.0, 1e-150, -1.0, 1.0), (0.0, 1e150, -1e-300, 1e-300),
    (1e3, 1e-8, 0.0, 5e-324), (0.5, 1e-8, 0.5, 0.5 + 1e-15), (0.0, 1e-150, 1e-10, 1.0),
    (0.0, 1e-150, -1.0, -1e-300),
]


@pytest.mark.parametrize("mu, sd, a, b", EXTREMES)
def test_draws_inside_bounds_and_finite_for_extreme_parameters(mu, sd, a, b):
    x = sample_gtn(3, mu, 1.0 / sd**2, a, b, size=2000)
    assert x.dtype == np.float64
    assert np.all(np.isfinite(x))
    assert np.all((x >= a) & (x <= b))


def test_far_tail_draws_are_not_quantised():
    # mu=100, sd=1e-5: draws are 1 - O(1e-12); as offsets from b they have ~1e4 distinct
    # values in 2e4 draws (float64 spacing below 1 is 1.1e-16), not a few hundred
    x = sample_gtn(5, 100.0, 1e10, size=N_KS)
    assert np.all(x < 1.0)
    assert len(np.unique(x)) > 5000


def test_grid_of_parameters_never_leaves_the_bounds():
    mus = np.array([-1e3, -40.0, -1.5, -1.0, -0.3, 0.0, 0.999, 1.0, 1.001, 3.0, 100.0])
    sds = 10.0 ** np.arange(-8.0, 4.0)
    bounds = [(-1.0, 1.0), (-2.0, 2.0), (0.0, 1e-12), (-INF, 0.5), (-0.5, INF), (10.0, 10.5)]
    for a, b in bounds:
        mu, sd = np.meshgrid(mus, sds)
        x = sample_gtn(11, mu[..., None], 1 / sd[..., None] ** 2, a, b,
                       size=mu.shape + (200,))
        assert np.all(np.isfinite(x)) and np.all((x >= a) & (x <= b)), (a, b)


@settings(max_examples=150, deadline=None)
@given(
    mu=st.floats(-1e3, 1e3),
    log_sd=st.floats(-8.0, 3.0),
    a=st.one_of(st.floats(-1e3, 1e3), st.just(-INF)),
    log_width=st.floats(-12.0, 4.0),
    upper_inf=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_draws_in_bounds_finite_and_reproducible(mu, log_sd, a, log_width, upper_inf,
                                                          seed):
    if upper_inf:
        b = INF
    elif a == -INF:
        b = mu + 10.0 ** log_width * (1 if log_width > 0 else -1)
    else:
        b = a + 10.0 ** log_width * max(1.0, abs(a))
    if not a < b:  # the width was lost to rounding next to a
        b = np.nextafter(a, INF)
    tau = 10.0 ** (-2 * log_sd)
    x = sample_gtn(seed, mu, tau, a, b, size=64)
    assert np.all(np.isfinite(x))
    assert np.all((x >= a) & (x <= b))
    np.testing.assert_array_equal(x, sample_gtn(seed, mu, tau, a, b, size=64))


# ------------------------------------------------------------------------------------------
# The numba kernels as the Gibbs sweep uses them
# ------------------------------------------------------------------------------------------


@numba.njit
def _draw_in_a_caller(gen, mu, tau, a, b):
    out = np.empty(mu.size)
    for i in range(mu.size):
        out[i] = gtn_draw(gen, mu[i], tau[i], a, b)
    return out


def test_gtn_draw_from_another_numba_kernel_matches_sample_gtn():
    rng = np.random.default_rng(0)
    mu = rng.uniform(-3, 3, 500)
    tau = 10.0 ** rng.uniform(-2, 6, 500)
    x1 = _draw_in_a_caller(np.random.default_rng(42), mu, tau, -1.0, 1.0)
    x2 = sample_gtn(np.random.default_rng(42), mu, tau, -1.0, 1.0)
    np.testing.assert_array_equal(x1, x2)


@numba.njit
def _fill_in_a_caller(gen, mu, tau, a, b, out):
    for i in range(out.size):
        out[i] = gtn_draw(gen, mu[i], tau[i], a, b)


def test_caller_loop_keeps_no_reference_counting_per_draw():
    # Performance guard (docs/perf_truncnorm.md): once gtn_draw is inlined, numba's refcount
    # pruning must remove the per-call incref/decref of the Generator from the caller's loop;
    # an early return or a "/" in the kernel brings it back and triples the cost per draw.
    mu = np.zeros(4)
    _fill_in_a_caller(np.random.default_rng(0), mu, mu + 1.0, -1.0, 1.0, np.empty(4))
    asm = _fill_in_a_caller.inspect_asm(_fill_in_a_caller.signatures[0])
    body = asm.split("_ZN7cpython")[0]  # the nopython function, before its CPython wrapper
    assert "_fill_in_a_caller" in body
    assert body.count("NRT_incref") == 0


@numba.njit
def _scalar_kernels(gen, mu, tau, a, b, lo, hi):
    return gtn_draw(gen, mu, tau, a, b), std_tn_draw(gen, lo, hi)


def test_scalar_kernels_handle_degenerate_and_invalid_input_without_looping():
    gen = np.random.default_rng(0)
    x, z = _scalar_kernels(gen, 0.0, 1.0, 0.25, 0.25, 2.0, 1.0)
    assert x == 0.25 and math.isnan(z)
    for mu, tau, a, b in [(0.0, 0.0, -1.0, 1.0), (0.0, -1.0, -1.0, 1.0), (np.nan, 1.0, -1.0, 1.0),
                          (INF, 1.0, -1.0, 1.0), (0.0, INF, -1.0, 1.0), (0.0, 1.0, 1.0, -1.0),
                          (0.0, 1.0, np.nan, 1.0)]:
        assert math.isnan(_scalar_kernels(gen, mu, tau, a, b, -1.0, 1.0)[0])


@pytest.mark.timeout(120)
def test_gtn_draw_terminates_and_flags_every_invalid_combination():
    # a hang here (a rejection loop that never accepts) is caught by the timeout
    vals_mu = [0.0, 0.5, -2.0, 2.0, np.nan, INF, -INF]
    vals_tau = [1.0, 0.0, -1.0, np.nan, INF, 1e-300, 1e300]
    bounds = [(-1.0, 1.0), (1.0, -1.0), (np.nan, 1.0), (-1.0, np.nan), (np.nan, np.nan),
              (-INF, 1.0), (-1.0, INF), (INF, INF), (-INF, -INF), (0.5, 0.5), (1.0, -1e10),
              (INF, -INF)]
    grid = np.array([(m, t, a, b) for m in vals_mu for t in vals_tau for a, b in bounds])
    mu, tau, a, b = (np.ascontiguousarray(c) for c in grid.T)
    out = np.empty(len(grid))
    _fill_elementwise(np.random.default_rng(0), mu, tau, a, b, out)
    valid = (tau > 0) & (tau < INF) & (a <= b) & (np.abs(mu) < INF)
    assert np.all(np.isnan(out[~valid]))
    finite_bounds = valid & np.isfinite(a) & np.isfinite(b)
    assert np.all((out[finite_bounds] >= a[finite_bounds]) & (out[finite_bounds]
                                                            <= b[finite_bounds]))


@numba.njit
def _fill_elementwise(gen, mu, tau, a, b, out):
    for i in range(out.size):
        out[i] = gtn_draw(gen, mu[i], tau[i], a[i], b[i])


@numba.njit
def _std_tn_many(gen, lo, hi, n):
    out = np.empty(n)
    for i in range(n):
        out[i] = std_tn_draw(gen, lo, hi)
    return out


@numba.njit
def _tail_offsets(gen, lo, w, n):
    out = np.empty(n)
    for i in range(n):
        out[i] = std_tail_offset(gen, lo, w)
    return out


@pytest.mark.parametrize("lo, hi", [(-0.5, 2.0), (-0.2, 0.3), (3.0, 4.0), (-5.0, -4.5),
                                    (-INF, -2.0)])
def test_std_tn_draw_matches_scipy(lo, hi):
    z = _std_tn_many(np.random.default_rng(8), lo, hi, 10_000)
    assert np.all((z >= lo) & (z <= hi))
    assert stats.kstest(z, stats.truncnorm(lo, hi).cdf).pvalue >= P_FAMILY / 5


def test_std_tail_offset_with_huge_lower_bound():
    # lo = 1e200: the offset is Exp(1e200) to within 1e-400; lo^2 would overflow
    d = _tail_offsets(np.random.default_rng(2), 1e200, INF, 5000)
    assert np.all(np.isfinite(d)) and np.all(d >= 0)
    assert stats.kstest(d * 1e200, "expon").pvalue >= P_FAMILY


# ------------------------------------------------------------------------------------------
# Public wrapper: broadcasting, seeding, validation
# ------------------------------------------------------------------------------------------


def test_broadcasting_and_size():
    mu = np.linspace(-1, 1, 3)[:, None]
    tau = np.array([1.0, 4.0, 9.0, 16.0])[None, :]
    x = sample_gtn(0, mu, tau)
    assert x.shape == (3, 4)
    assert sample_gtn(0, mu, tau, -2.0, np.full((3, 4), 2.0)).shape == (3, 4)
    assert sample_gtn(0, 0.0, 1.0, size=(2, 5)).shape == (2, 5)
    assert sample_gtn(0, mu, 1.0, size=(7, 3, 6)).shape == (7, 3, 6)
    assert sample_gtn(0, 0.0, 1.0).shape == ()
    assert sample_gtn(0, 0.0, 1.0, size=0).shape == (0,)
    # a non-contiguous parameter array is read correctly
    big = np.linspace(-0.9, 0.9, 20)[::2]
    y = sample_gtn(1, big, 1e12)
    np.testing.assert_allclose(y, big, atol=1e-4)


def test_seed_and_generator_handling():
    np.testing.assert_array_equal(sample_gtn(5, 0.0, 1.0, size=10), sample_gtn(5, 0.0, 1.0,
                                                                              size=10))
    gen = np.random.default_rng(5)
    first = sample_gtn(gen, 0.0, 1.0, size=10)
    second = sample_gtn(gen, 0.0, 1.0, size=10)
    assert not np.array_equal(first, second)  # the Generator was advanced in place
    np.testing.assert_array_equal(first, sample_gtn(np.random.default_rng(5), 0.0, 1.0,
                                                    size=10))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mu=0.0, tau=0.0), "PRECISION"),
        (dict(mu=0.0, tau=-2.0), "PRECISION"),
        (dict(mu=0.0, tau=np.nan), "PRECISION"),
        (dict(mu=0.0, tau=INF), "PRECISION"),
        (dict(mu=np.array([0.0, np.nan]), tau=1.0), r"index \(1,\).*mu"),
        (dict(mu=INF, tau=1.0), "mu"),
        (dict(mu=0.0, tau=1.0, a=1.0, b=1.0), "strictly below"),
        (dict(mu=0.0, tau=1.0, a=2.0, b=1.0), "strictly below"),
        (dict(mu=0.0, tau=1.0, a=np.nan), "NaN"),
        (dict(mu=np.zeros(3), tau=np.ones(4)), "broadcast"),
        (dict(mu=np.zeros(3), tau=1.0, size=(4,)), "size"),
        (dict(mu="zero", tau=1.0), "float64"),
    ],
)
def test_invalid_parameters_raise_parameter_error(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        sample_gtn(0, **kwargs)
    with pytest.raises(ValueError):
        sample_gtn(0, **kwargs)


def test_distribution_functions_validate_parameters():
    with pytest.raises(ParameterError):
        gtn_cdf(0.0, 0.0, -1.0, -1.0, 1.0)
    with pytest.raises(ParameterError):
        gtn_logpdf(0.0, 0.0, 1.0, 1.0, -1.0)
    with pytest.raises(ParameterError, match="infinite"):
        gtn_offset_cdf(0.1, 0.0, 1.0, -INF, 1.0, bound="lower")
    with pytest.raises(ParameterError, match="bound"):
        gtn_offset_cdf(0.1, 0.0, 1.0, bound="middle")
