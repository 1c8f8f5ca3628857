"""Box-constrained least squares of W given the basis (kernels/boxls.py)."""

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from dask_bid.kernels import box_lstsq, box_qp


def _problem(seed, M=40, K=6, N=30, scale=3.0, dup=False):
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((M, K))
    if dup:
        C[:, 1] = C[:, 0]  # singular Gram: the minimiser is not unique, its SSE is
    A = C @ rng.uniform(-scale, scale, (K, N)) + 0.3 * rng.standard_normal((M, N))
    return C, A


def _sse(C, A, W):
    return float(((A - C @ W) ** 2).sum())


def _reference(C, A, a=-1.0, b=1.0):
    return np.column_stack([lsq_linear(C, A[:, n], bounds=(a, b), method="bvls",
                                       tol=1e-14).x for n in range(A.shape[1])])


def _matches_bvls(C, A, unique):
    W = box_lstsq(C.T @ C, C.T @ A)
    assert W.min() >= -1 and W.max() <= 1
    ref = _reference(C, A)
    # a convex problem: equal optimal values (the minimiser itself is unique unless the
    # basis has dependent columns)
    assert _sse(C, A, W) == pytest.approx(_sse(C, A, ref), rel=1e-10)
    if unique:
        np.testing.assert_allclose(W, ref, atol=1e-7)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("dup", [False, True])
def test_matches_bvls(seed, dup):
    C, A = _problem(seed, dup=dup)
    _matches_bvls(C, A, unique=not dup)


def test_many_entries_at_the_bounds():
    # coefficients far outside the box: most entries end at a bound
    C, A = _problem(7, scale=20.0)
    W = box_lstsq(C.T @ C, C.T @ A)
    assert np.mean(np.abs(W) == 1.0) > 0.3
    assert _sse(C, A, W) == pytest.approx(_sse(C, A, _reference(C, A)), rel=1e-10)


def test_inside_the_box_it_is_plain_least_squares():
    C, A = _problem(3, scale=0.2)
    W = box_lstsq(C.T @ C, C.T @ A)
    ls = np.linalg.lstsq(C, A, rcond=None)[0]
    assert np.abs(ls).max() < 1
    np.testing.assert_allclose(W, ls, rtol=1e-9, atol=1e-12)


def test_other_bounds_and_warm_start():
    C, A = _problem(4, scale=5.0)
    G, H = C.T @ C, C.T @ A
    cold = box_lstsq(G, H, a=-2.0, b=2.0)
    warm = box_lstsq(G, H, a=-2.0, b=2.0, W0=np.zeros_like(H))
    ref = _reference(C, A, -2.0, 2.0)
    for W in (cold, warm):
        assert _sse(C, A, W) == pytest.approx(_sse(C, A, ref), rel=1e-10)


def test_masked_per_column_grams():
    C, A = _problem(5, scale=4.0)
    rng = np.random.default_rng(0)
    obs = rng.random(A.shape) < 0.6
    Gn = np.stack([C[obs[:, n]].T @ C[obs[:, n]] for n in range(A.shape[1])])
    H = np.column_stack([C[obs[:, n]].T @ A[obs[:, n], n] for n in range(A.shape[1])])
    W = box_lstsq(None, H, Gn=Gn)
    for n in range(A.shape[1]):
        ref = lsq_linear(C[obs[:, n]], A[obs[:, n], n], bounds=(-1, 1), method="bvls",
                         tol=1e-14).x
        r = A[obs[:, n], n]
        assert ((r - C[obs[:, n]] @ W[:, n]) ** 2).sum() == pytest.approx(
            ((r - C[obs[:, n]] @ ref) ** 2).sum(), rel=1e-10)


def test_kkt_check_is_needed():
    # planted bug: stopping before the optimality check on the held entries (a single
    # pass of the active-set loop) leaves the SSE above the optimum on this problem,
    # so the comparison with BVLS above can fail
    C, A = _problem(7, scale=20.0)
    G, H = C.T @ C, C.T @ A
    ref = _sse(C, A, _reference(C, A))
    once = np.column_stack([box_qp(G, H[:, n], np.clip(np.linalg.solve(G, H[:, n]), -1, 1),
                                   max_iter=1) for n in range(H.shape[1])])
    assert _sse(C, A, once) > ref * (1 + 1e-6)


@pytest.mark.parametrize("dup", [False, True])
def test_long_active_set_paths_match_bvls(dup):
    """K = 40 with coefficients far outside the box: each column's active set changes
    tens of times, every change updating the free block's factor (a row added, or a row
    removed and the triangle restored), and with dup the factor meets a singular block."""
    C, A = _problem(11, M=80, K=40, N=12, scale=20.0, dup=dup)
    if dup:
        C[:, 7] = C[:, 3] - C[:, 5]
        A = A + C[:, [7]]
    _matches_bvls(C, A, unique=not dup)


def test_masked_columns_with_fewer_observed_rows_than_k():
    """Per-column Grams of rank below K (a column observed on fewer rows than K): the
    minimiser is not unique; its SSE over the observed rows is BVLS's."""
    C, A = _problem(12, M=60, K=30, N=16, scale=10.0)
    rng = np.random.default_rng(1)
    obs = rng.random(A.shape) < 0.5
    obs[:, :4] &= rng.random((60, 4)) < 0.4  # about 12 observed rows of 30 coefficients
    Gn = np.stack([C[obs[:, n]].T @ C[obs[:, n]] for n in range(A.shape[1])])
    H = np.column_stack([C[obs[:, n]].T @ A[obs[:, n], n] for n in range(A.shape[1])])
    W = box_lstsq(None, H, Gn=Gn)
    assert W.min() >= -1 and W.max() <= 1
    for n in range(A.shape[1]):
        o = obs[:, n]
        ref = lsq_linear(C[o], A[o, n], bounds=(-1, 1), method="bvls", tol=1e-14).x
        assert _sse(C[o], A[o, [n]], W[:, [n]]) == pytest.approx(
            _sse(C[o], A[o, [n]], ref[:, None]), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("offset", [1e6, 1e7])
def test_box_lstsq_is_accurate_for_an_ill_conditioned_basis(offset):
    """Data with a large common offset make C ill-conditioned (cond 1.7e6-1.7e7 here): the
    unconstrained solve by pinv(G) @ H left residuals 10^4-10^9 times the least-squares
    ones (MSE 1564 and 2.8e9 where 0.30 is right), also through the fit's reported W. A
    Cholesky solve is backward stable: its residual is within what the normal equations
    allow, a relative excess of order eps cond(C)^2 (taken with a factor 100, plus 1 %)."""
    from dask_bid import BayesianID

    rng = np.random.default_rng(0)
    A = rng.standard_normal((60, 3)) @ rng.uniform(-1, 1, (3, 20))
    X = A + 0.01 * rng.standard_normal((60, 20)) + offset
    J = [1, 18, 19]
    C = X[:, J]
    tol = 1e-2 + 100 * np.finfo(float).eps * np.linalg.cond(C) ** 2
    W = box_lstsq(C.T @ C, C.T @ X)
    best = sum(float(((X[:, n] - C @ lsq_linear(C, X[:, n], bounds=(-1, 1)).x) ** 2).sum())
               for n in range(20))
    got = float(((X - C @ W) ** 2).sum())
    assert np.abs(W).max() <= 1 and got <= best * (1 + tol), (got, best, tol)
    est = BayesianID(3, n_iter=60, burn_in=20, random_state=0).fit(X)
    C = X[:, est.columns_]
    best = sum(float(((X[:, n] - C @ lsq_linear(C, X[:, n], bounds=(-1, 1)).x) ** 2).sum())
               for n in range(20))
    tol = 1e-2 + 100 * np.finfo(float).eps * np.linalg.cond(C) ** 2
    assert est.mse_ * X.size <= best * (1 + tol), (est.mse_ * X.size, best, tol)
