"""Numerical edge cases of the in-memory sampler: extreme scales, zero, constant and
duplicated columns, rank-deficient A, float32 input, and the SSE kept from sufficient
statistics against a direct computation.

Every fit runs with numpy floating-point errors raised (overflow, division by zero,
invalid operations) and every warning turned into an error, and is checked for finite
output with max |W| <= the bound (``check_fit``).
"""

import contextlib
import warnings

import numpy as np
import pytest

from dask_bid import BayesianID, ConvergenceWarning
from dask_bid.engine.chain import ChainConfig, run_chain
from dask_bid.engine.memory import MemoryBackend
from dask_bid.kernels.priors import Priors
from dask_bid.kernels.stats import sse_from_stats

M, N, K = 60, 20, 3
EPS = np.finfo(np.float64).eps
FAST = dict(n_iter=120, burn_in=40, thin=2)
SAMPLERS = [("gbt", "collapsed"), ("gbt", "plain"), ("gbtn", "collapsed"), ("gbtn", "aggressive"),
            ("gbt", "search")]
SAMPLER_IDS = ["gbt-collapsed", "gbt-plain", "gbtn-collapsed", "gbtn-aggr", "gbt-search"]


def low_rank(seed, noise=0.01, m=M, n=N, k=K):
    """C0 W0 + noise, with W0[:, :k] = I and |W0| <= 1: columns 0..k-1 are an exact basis."""
    rng = np.random.default_rng(seed)
    C0 = rng.standard_normal((m, k))
    W0 = rng.uniform(-1, 1, (k, n))
    W0[:, :k] = np.eye(k)
    return C0 @ W0 + noise * rng.standard_normal((m, n))


@contextlib.contextmanager
def strict(expected=None):
    """Warnings as errors, but ``expected`` (a message's start) is let through to the
    test's ``pytest.warns``."""
    with warnings.catch_warnings(), np.errstate(over="raise", divide="raise", invalid="raise"):
        warnings.simplefilter("error")
        # these chains are short on purpose: their convergence is not what is tested
        warnings.simplefilter("ignore", ConvergenceWarning)
        if expected:
            warnings.filterwarnings("always", message=expected)
        yield


def fit(A, k=K, expected_warning=None, **kw):
    params = {**FAST, "random_state": 3, **kw}
    with strict(expected_warning):
        return BayesianID(k, **params).fit(A)


def check_fit(est, A, bound=1.0):
    """Finite output, and every reported and retained W within the bounds."""
    res = est.result_
    W = est.components_
    assert np.isfinite(W).all() and np.isfinite(est.components_sd_).all()
    assert np.isfinite(est.mse_) and est.mse_ >= 0
    assert np.isfinite(est.sigma2_) and est.sigma2_ > 0
    assert np.isfinite(res.trace["mse"]).all() and np.isfinite(res.trace["sigma2"]).all()
    assert np.isfinite(res.draws_sse).all() and (res.draws_sse >= 0).all()
    assert np.abs(W).max() <= bound
    assert est.max_abs_w_ <= bound
    np.testing.assert_array_equal(W[:, est.columns_], np.eye(len(est.columns_)))
    if res.draws_w is not None:
        vals = res.draws_w["values"]
        vals = vals[np.isfinite(vals)]  # NaN marks draws with another basis
        assert vals.size == 0 or np.abs(vals).max() <= bound
    # the reported MSE is the direct one
    A = np.asarray(A, dtype=np.float64)
    direct = np.mean((A - A[:, est.columns_] @ W) ** 2)
    assert est.mse_ == pytest.approx(direct, rel=1e-9, abs=1e-300)


def fit_checked(A, k=K, bound=1.0, **kw):
    est = fit(A, k, bounds=(-bound, bound), **kw)
    check_fit(est, A, bound)
    return est


# --------------------------------------------------------------------------- scale
@pytest.mark.parametrize("s", [1e-12, 1e12])
@pytest.mark.parametrize("model,sampler", SAMPLERS, ids=SAMPLER_IDS)
def test_scaled_data_gives_the_same_fit_with_beta_sigma_scaled(s, model, sampler):
    """s A with beta_sigma = s^2 b is the fit of A with beta_sigma = b: W is scale free,
    sigma^2 and the SSE scale by s^2, and the random streams are the same, so the same
    columns and W (to rounding), MSE and sigma^2 times s^2."""
    A = low_rank(0)
    kw = dict(model=model, sampler=sampler)
    ref = fit_checked(A, **kw)
    scaled = fit_checked(s * A, beta_sigma=s * s, **kw)
    np.testing.assert_array_equal(scaled.columns_, ref.columns_)
    np.testing.assert_allclose(scaled.components_, ref.components_, rtol=0, atol=1e-9)
    assert scaled.mse_ / s**2 == pytest.approx(ref.mse_, rel=1e-9)
    assert scaled.sigma2_ / s**2 == pytest.approx(ref.sigma2_, rel=1e-9)
    np.testing.assert_allclose(scaled.result_.trace["mse"] / s**2, ref.result_.trace["mse"],
                               rtol=1e-7)


PRIOR_OUTWEIGHS = r"beta_sigma=\S+ \(the scale of sigma\^2's prior"


@pytest.mark.parametrize("s", [1e-12, 1e12])
def test_default_beta_sigma_makes_scale_matter_exactly_as_documented(s):
    """With the default beta_sigma = 1, s A behaves as A with beta_sigma = 1 / s^2."""
    A = low_rank(1)
    # at 1e-12 the prior outweighs all of A in both fits, and they say so
    said = PRIOR_OUTWEIGHS if s < 1 else None
    with pytest.warns(UserWarning, match=PRIOR_OUTWEIGHS) if said else \
            contextlib.nullcontext():
        scaled = fit_checked(s * A, expected_warning=said)
        ref = fit_checked(A, beta_sigma=1.0 / s**2, expected_warning=said)
    np.testing.assert_array_equal(scaled.columns_, ref.columns_)
    np.testing.assert_allclose(scaled.components_, ref.components_, rtol=0, atol=1e-9)
    assert scaled.mse_ / s**2 == pytest.approx(ref.mse_, rel=1e-9)


def test_tiny_data_with_default_beta_sigma_is_read_as_noise():
    """At scale 1e-12 the SSE (~1e-24) is nothing next to beta_sigma = 1: each sigma^2
    draw is InvGamma(MN/2 + alpha, ~beta), whose mean is beta / (MN/2 + alpha - 1).
    The retained draws average to it within a few of its relative sd sqrt(2/(MN)) / sqrt(n)."""
    with pytest.warns(UserWarning, match=PRIOR_OUTWEIGHS):  # and the fit says so
        est = fit_checked(1e-12 * low_rank(2), n_iter=200, burn_in=40, thin=2,
                          expected_warning=PRIOR_OUTWEIGHS)
    alpha, beta = 0.1, 1.0
    expected = beta / (M * N / 2 + alpha - 1)
    assert est.sigma2_ == pytest.approx(expected, rel=0.05)


# --------------------------------------------------------------------------- zero / constant
def zero_constant_matrix(seed):
    A = low_rank(seed)
    A[:, [4, 11, 17]] = 0.0
    A[:, 0] = 2.0  # column 0 is a basis column of the exact part: a constant basis column
    # column 6 is a constant multiple of column 0 (within the bounds)
    A[:, 6] = -1.0
    return A


@pytest.mark.parametrize("init", ["random", "auto"])
@pytest.mark.parametrize("seed", [0, 1])
def test_zero_and_constant_columns(init, seed):
    """A zero column in the basis leaves K-1 useful columns: its SSE is that of a
    rank-(K-1) fit, hundreds of times the noise level, so the chain never keeps one."""
    A = zero_constant_matrix(seed)
    est = fit_checked(A, init=init)
    zero = [4, 11, 17]
    assert not set(est.columns_) & set(zero)
    assert est.inclusion_probability_[zero].max() == 0.0
    # W of a zero column: its likelihood term is zero, the posterior mean is near 0
    assert np.abs(est.components_[:, zero]).max() <= 1.0


@pytest.mark.parametrize("proposal_init", ["copy", "lstsq"])
def test_chain_started_on_a_zero_column_leaves_it(proposal_init):
    """G has a zero row and column while the basis holds a zero column: the conditionals
    fall back to the prior for that row, nothing divides by G_kk."""
    A = zero_constant_matrix(0)
    est = fit_checked(A, init=[4, 1, 2], proposal_init=proposal_init, n_iter=150)
    assert 4 not in est.columns_


DEFICIENT = "the reported basis is numerically rank deficient"


def test_all_zero_matrix():
    """SSE = 0 for any (J, W): the fit is exact, sigma^2 is its prior's posterior."""
    A = np.zeros((M, N))
    # a random start computes no rank: the reported basis (of zero columns) is checked
    with pytest.warns(UserWarning, match=r"reported basis is numerically rank deficient "
                      r"\(rank 0 < n_components=3\)"):
        est = fit_checked(A, init="random", expected_warning=DEFICIENT)
    assert est.mse_ == 0.0
    assert (est.result_.draws_sse == 0).all()
    assert est.sigma2_ == pytest.approx(1.0 / (M * N / 2 + 0.1 - 1), rel=0.1)
    # the pivoted-QR start ("auto") says the matrix has rank < K, and the fit goes on
    with pytest.warns(UserWarning, match="rank deficient"):
        est = BayesianID(K, **FAST, random_state=0).fit(A)
    assert est.mse_ == 0.0 and np.abs(est.components_).max() <= 1.0


@pytest.mark.parametrize("value", [2.5, -1e-3])
def test_all_constant_matrix(value):
    """Every column is the same: K = 1 reproduces A with W = 1 up to the posterior sd,
    which the small beta_sigma lets shrink to ~sqrt(sigma^2 / ||a||^2)."""
    A = np.full((M, N), value)
    est = fit_checked(A, k=1, beta_sigma=1e-12 * value**2)
    assert est.mse_ <= 1e-10 * value**2
    np.testing.assert_allclose(est.components_, 1.0, atol=1e-5)


# --------------------------------------------------------------------------- duplicates
def duplicated(seed):
    A = low_rank(seed)
    A[:, 9] = A[:, 1]
    A[:, 15] = A[:, 1]
    A[:, 12] = A[:, 5]
    return A, [(1, 9, 15), (5, 12)]


def count_copies(J, groups):
    return max(len(set(J) & set(g)) for g in groups)


@pytest.mark.parametrize("bound", [1.0, 2.0])
@pytest.mark.parametrize("init", ["random", "auto"])
def test_duplicated_columns_never_both_in_a_retained_basis(bound, init):
    """Two copies in the basis make C rank K-1 (SSE of a rank-(K-1) fit, far above the
    noise), so no retained draw holds both."""
    A, groups = duplicated(0)
    est = fit_checked(A, bound=bound, init=init)
    draws = est.result_.draws_columns.reshape(-1, K)
    assert max(count_copies(J, groups) for J in draws) <= 1
    assert count_copies(est.columns_, groups) <= 1


@pytest.mark.parametrize("proposal_init", ["copy", "lstsq"])
def test_chain_started_on_two_copies_runs_and_leaves(proposal_init):
    """G is exactly singular at the start (two equal rows): the Gibbs conditionals use
    only G_kk > 0, the lstsq proposal a pseudo-inverse; the fit is finite and bounded,
    and the aggressive sampler leaves the degenerate basis."""
    A, groups = duplicated(1)
    est = fit_checked(A, init=[1, 9, 3], proposal_init=proposal_init, n_iter=150)
    assert count_copies(est.columns_, groups) <= 1
    draws = est.result_.draws_columns.reshape(-1, K)
    assert max(count_copies(J, groups) for J in draws) <= 1


def test_plain_sampler_started_on_two_copies_is_finite_and_bounded():
    """Algorithm 1 proposes the incoming row of W from its prior: from a basis of rank
    K-1 with sigma^2 already fitted to it, such proposals are almost never accepted, so
    it may stay there (observed for this seed: a mixing limit of the paper's plain
    sampler, not a numerical one). The run is still finite, bounded, and its SSE is that
    of the rank-2 basis it holds."""
    A, groups = duplicated(1)
    # (it stays: the reported basis of rank 2 is said to be rank deficient)
    with pytest.warns(UserWarning, match=r"reported basis is numerically rank deficient "
                      r"\(rank 2 < n_components=3\)"):
        est = fit_checked(A, init=[1, 9, 3], sampler="plain", n_iter=150,
                          expected_warning=DEFICIENT)
    C = A[:, est.columns_]
    rank = np.linalg.matrix_rank(C)
    assert rank == 2
    # the best any W can do with this basis: the least-squares residual of its span
    floor = np.mean((A - C @ np.linalg.lstsq(C, A, rcond=None)[0]) ** 2)
    assert est.mse_ >= floor * (1 - 1e-9)
    assert rank == K - (count_copies(est.columns_, groups) - 1)


# --------------------------------------------------------------------------- rank deficient
@pytest.mark.parametrize("model,sampler", SAMPLERS, ids=SAMPLER_IDS)
def test_rank_deficient_with_K_equal_to_the_rank_is_fitted_near_exactly(model, sampler):
    """A = C0 W0 exactly (rank 3, N = 20) started from an exact basis, beta_sigma tiny:
    sigma^2 shrinks to about beta / (MN/2) ~ 1e-15, W's posterior sd to ~sqrt(sigma^2/||c||^2),
    so the MSE is ~ sigma^2 K (N-K) / (MN) ~ 1e-16, far below 1e-12 ||A||^2/(MN)."""
    A = low_rank(0, noise=0.0)
    assert np.linalg.matrix_rank(A) == K
    scale = np.mean(A**2)
    est = fit_checked(A, init=[0, 1, 2], beta_sigma=1e-12, model=model, sampler=sampler,
                      n_iter=100, burn_in=50)
    assert est.mse_ <= 1e-12 * scale
    # whichever basis it reports spans the column space exactly
    C = A[:, est.columns_]
    assert np.linalg.matrix_rank(C) == K


@pytest.mark.parametrize("init", ["auto", "random"])
def test_rank_deficient_from_the_default_start_is_finite_and_bounded(init):
    """Without a given basis the search may stop in a basis whose exact W would leave the
    bounds (a local mode when sigma^2 is tiny); whatever it reports stays finite and
    bounded, and is no worse than the best bounded fit's error bound: the reported MSE is
    below the variance of A (the zero fit)."""
    A = low_rank(4, noise=0.0)
    est = fit_checked(A, init=init, beta_sigma=1e-12)
    assert est.mse_ < np.mean(A**2)


@pytest.mark.parametrize("engine", [False, True], ids=["memory", "engine"])
@pytest.mark.parametrize("init", ["random", "given"])
def test_a_rank_deficient_reported_basis_warns_whatever_the_start(init, engine):
    """Only the pivoted-QR / sketch start tested the rank, so a random or given start
    reported a basis of rank 3 < K = 5 without a word; a full-rank matrix gives none."""
    A = low_rank(6, noise=0.0)
    start = "random" if init == "random" else [0, 1, 2, 3, 4]
    kw = dict(n_iter=30, burn_in=10, random_state=0, init=start)
    fit_kw = {"client": "synchronous"} if engine else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(UserWarning, match=r"reported basis is numerically rank deficient "
                          r"\(rank 3 < n_components=5\)"):
            est = BayesianID(K + 2, **kw).fit(A, **fit_kw)
        assert np.linalg.matrix_rank(A[:, est.columns_]) == K
        full = A + 0.01 * np.random.default_rng(1).standard_normal(A.shape)
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # (a UserWarning)
        BayesianID(K + 2, **kw).fit(full, **fit_kw)


@pytest.mark.parametrize("engine", [False, True], ids=["memory", "engine"])
def test_a_prior_that_outweighs_the_data_is_said(engine):
    """Data in small units (1e-3 here: sum of A^2 ~ 0.003) with the default beta_sigma=1,
    meant for standardised data: sigma^2 stays at the prior's scale (~1e-3, where the
    noise variance is ~1e-8) without a word before. Said, with the mean of A^2 as the
    beta_sigma to pass, once, after the first iteration (it came at the end of a fit);
    the same data standardised (or beta_sigma on its scale): silent."""
    A = low_rank(7) * 1e-3
    fit_kw = {"client": "synchronous"} if engine else {}
    kw = dict(n_iter=30, burn_in=10, random_state=0)
    mean_sq = float(np.mean(A**2))
    seen = []  # (iteration, warnings so far): said after the first iteration, once
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with pytest.warns(UserWarning, match=r"beta_sigma=1 \(the scale of sigma\^2's prior, "
                          r"in A's units squared\) exceeds half the sum of A\^2 \("
                          f"{A.size * mean_sq / 2:.3g}" r"\).*\(e\.g\. beta_sigma="
                          f"{mean_sq:.3g}, the mean of A") as got:
            est = BayesianID(K, n_chains=2, **kw).fit(
                A, callback=lambda st: seen.append((st.iteration, len(got))), **fit_kw)
        assert est.sigma2_ > 100 * mean_sq  # the prior's scale, not the noise's
        assert [n for it, n in seen if it == 1] == [1, 1], seen  # at the start, not the end
        assert len([w for w in got if "outweighs" in str(w.message)]) == 1
        warnings.simplefilter("error", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = BayesianID(K, beta_sigma=mean_sq, **kw).fit(A, **fit_kw)
        BayesianID(K, **kw).fit(A / np.sqrt(mean_sq), **fit_kw)
    assert fitted.sigma2_ < 0.01 * est.sigma2_


def _copies(scale):
    A = low_rank(5, noise=0.01, n=12)
    return np.hstack([A, A[:, :4]]) * scale


RANK1 = np.outer(np.arange(1.0, 11.0), [1.0, -1.0, 1.0, 0.5])


@pytest.mark.parametrize("case,A,k,kw", [
    ("rank-1, entries 1e6", RANK1 * 1e6, 3, {}),
    ("rank-1, beta_sigma 1e-12", RANK1, 3, dict(beta_sigma=1e-12)),
    ("rank-1, gbtn", RANK1 * 1e6, 3, dict(model="gbtn")),
    ("rank-1, masked", RANK1 * 1e6, 3, dict(missing="mask")),
    ("rank-1, engine", RANK1 * 1e6, 3, dict(client="synchronous")),
    ("copies, K = rank", _copies(1e6), 12, {}),
    ("copies, K > rank", _copies(1e6), 13, {}),
], ids=lambda v: v if isinstance(v, str) else "")
def test_more_basis_columns_than_the_rank_at_large_scale(case, A, k, kw):
    """K above A's rank (or a basis holding a column and its copy): the Gram of such a
    basis is singular, and where G / sigma^2 dwarfs the prior's diag(tau) (entries of
    1e6, or a tiny sigma^2) the pivot swap's Lambda = G / sigma^2 + diag(tau) is not
    positive definite in floating point. Such an attempt is rejected (its GHK weight
    NaN); before, numpy's LinAlgError came out of the chain. Finite and bounded, and
    where K exceeds the rank the warning says why."""
    fit_kw = {"client": kw.pop("client")} if "client" in kw else {}
    deficient = np.linalg.matrix_rank(A) < k
    with warnings.catch_warnings():
        warnings.simplefilter("error" if not deficient else "default", UserWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)  # short chains, on purpose
        with (pytest.warns(UserWarning, match="rank deficient") if deficient
              else contextlib.nullcontext()):
            est = BayesianID(k, **FAST, random_state=0, **kw).fit(A, **fit_kw)
    check_fit(est, A)
    assert est.mse_ <= 1e-12 * np.mean(A**2)


# --------------------------------------------------------------------------- float32
def test_float32_input():
    """float32 is upcast once: the fit equals the float64 fit of the same rounded values
    bitwise, and differs from the fit of the unrounded float64 data by O(float32 eps)."""
    A = low_rank(5)
    A32 = A.astype(np.float32)
    f32 = fit_checked(A32)
    up = fit_checked(A32.astype(np.float64))
    np.testing.assert_array_equal(f32.columns_, up.columns_)
    np.testing.assert_array_equal(f32.components_, up.components_)
    assert f32.mse_ == up.mse_
    ref = fit_checked(A)
    np.testing.assert_array_equal(f32.columns_, ref.columns_)
    # rounding A to float32 moves it by ~6e-8 relative; W moves by a small multiple
    np.testing.assert_allclose(f32.components_, ref.components_, rtol=0, atol=1e-6)
    # and the MSE by a few float32 eps relative (1e-5 = ~170 eps_32)
    assert f32.mse_ == pytest.approx(ref.mse_, rel=1e-5)


def test_float32_extreme_scale():
    """float32 data near its range limits (1e30: squares overflow float32, not float64)."""
    A = (1e30 * low_rank(6)).astype(np.float32)
    est = fit_checked(A, beta_sigma=1e60)
    assert np.isfinite(est.mse_) and est.mse_ > 0


# --------------------------------------------------------------------------- SSE
def run_memory_chain(A, J0, sampler, n_iter=60, beta_sigma=1e-12, seed=0):
    pri = Priors(beta_sigma=beta_sigma)
    cfg = ChainConfig(n_components=len(J0), priors=pri, sampler=sampler, n_iter=n_iter,
                      burn_in=n_iter // 2, thin=1, proposal_init="lstsq")
    be = MemoryBackend(A, block_size=7, n_threads=1)
    with strict():
        out = run_chain(be, cfg, entropy=seed, chain=0, J0=np.asarray(J0))
    st = out.state
    W = np.concatenate([s.W for s in be.states], axis=1)
    return out, st, W, be


@pytest.mark.parametrize("sampler", ["collapsed", "aggressive", "plain"])
@pytest.mark.parametrize("noise", [0.0, 1e-6, 0.1])
def test_sse_from_statistics_matches_the_direct_sse(sampler, noise):
    """SSE = ||A||^2 - 2<H, W> + <W, G W> for the chain's final state against
    ||A - A[:, J] W||^2. Each term is a sum of products whose rounding error is a few
    eps times its magnitude, so the two agree to ~eps (||A||^2 + 2|<H,W>| + |<W,GW>|):
    absolutely, not relative to the SSE, which near an exact fit is below that floor
    (there the statistic is floored at 0, never negative)."""
    A = low_rank(7, noise=noise)
    out, st, W, be = run_memory_chain(A, [0, 1, 2], sampler)
    J = st.J
    direct = float(np.sum((A - A[:, J] @ W) ** 2))
    C = A[:, J]
    hw = float(np.vdot(C.T @ A, W))
    wgw = float(np.vdot(W, (C.T @ C) @ W))
    magnitude = out.norm_a2 + 2 * abs(hw) + abs(wgw)
    assert st.sse >= 0.0
    assert abs(st.sse - direct) <= 16 * EPS * magnitude
    # the same statistic, recomputed from the exact pieces, agrees too
    assert abs(sse_from_stats(out.norm_a2, hw, wgw) - direct) <= 16 * EPS * magnitude
    # the trace's last MSE is that statistic over MN
    assert st.trace_mse[-1] == st.sse / A.size
    # G and H kept by the chain are the direct C^T C and C^T A
    np.testing.assert_allclose(st.G, C.T @ C, rtol=0, atol=64 * EPS * np.abs(C.T @ C).max())
    H = np.concatenate([s.H for s in be.states], axis=1)
    np.testing.assert_allclose(H, C.T @ A, rtol=0, atol=64 * EPS * out.norm_a2)
    assert np.abs(W).max() <= 1.0
    if noise == 0.0 and sampler == "aggressive":
        # near exact: the true SSE is below the rounding floor of the statistic
        assert direct <= 1e-10 * out.norm_a2


def test_sse_floor_never_returns_a_negative_number():
    assert sse_from_stats(1.0, 0.5 + 1e-16, 0.0) == 0.0
    assert sse_from_stats(1.0, 0.5, 0.0) == 0.0
    assert sse_from_stats(4.0, 1.0, 0.5) == pytest.approx(2.5)


def test_retained_draw_sse_matches_direct_recomputation_for_traced_columns():
    """Each retained draw's SSE (from statistics) against a direct recomputation: all
    columns are traced (n_trace_columns = N), so every retained draw of W with the
    reported basis is known and its SSE can be recomputed from A."""
    A = low_rank(8, noise=0.05)
    est = fit_checked(A, n_trace_columns=N, init="auto", n_iter=80, burn_in=20, thin=3)
    res = est.result_
    cols = res.draws_w["columns"]
    assert len(cols) == N
    key = tuple(est.columns_)
    checked = 0
    norm = float(np.sum(A**2))
    for c in range(res.draws_columns.shape[0]):
        for d in range(res.draws_columns.shape[1]):
            if tuple(res.draws_columns[c, d]) != key:
                continue
            W = res.draws_w["values"][c, d]
            direct = float(np.sum((A - A[:, est.columns_] @ W) ** 2))
            assert res.draws_sse[c, d] == pytest.approx(direct, rel=1e-9, abs=64 * EPS * norm)
            checked += 1
    assert checked >= 5
