"""Tests of the baseline interpolative decompositions (randomized ID and pivoted-QR ID)."""

import hashlib
import os
import warnings

import dask.array as da
import numpy as np
import pytest
import scipy.linalg as sla
import zarr

from dask_bid import InputShapeError, NonFiniteInputError, NotFittedError, ParameterError
from dask_bid.baselines import RandomizedID, pivoted_qr_id, randomized_id
from dask_bid.baselines._streaming import omega_rows

METHODS = ["cpqr", "randomized"]
KINDS = ["numpy", "dask", "zarr", "path"]


def exact_rank(M=300, N=50, K=6, seed=0):
    """A = C W_true with C = A[:, J_true], |W_true| < 1 off J_true: rank exactly K."""
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((M, K))
    J = np.sort(rng.choice(N, K, replace=False))
    W = rng.uniform(-0.99, 0.99, (K, N))
    W[:, J] = np.eye(K)
    return C @ W


def noisy_low_rank(M=400, N=120, K=6, sigma=0.05, seed=0):
    """Rank-K signal with column scales spread over e^{+-1.5}, plus N(0, sigma^2) noise."""
    rng = np.random.default_rng(seed)
    L = rng.standard_normal((M, K)) @ rng.standard_normal((K, N))
    L *= np.exp(rng.uniform(-1.5, 1.5, N))
    return L + sigma * rng.standard_normal((M, N))


def as_kind(A, kind, tmp_path, chunks=(64, 16)):
    """A in the requested input kind (zarr stores are written under tmp_path)."""
    if kind == "numpy":
        return A
    if kind == "dask":
        return da.from_array(A, chunks=chunks)
    path = tmp_path / f"A_{kind}.zarr"
    z = zarr.create_array(store=str(path), shape=A.shape, chunks=chunks, dtype="f8",
                          zarr_format=3)
    z[:] = A
    return z if kind == "zarr" else str(path)


def tree_hashes(root):
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


# ----------------------------------------------------------------------------- exact recovery

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", METHODS)
def test_exact_rank_recovery(method, kind, tmp_path):
    A = exact_rank()
    K = 6
    est = RandomizedID(K, method=method, random_state=3).fit(as_kind(A, kind, tmp_path))
    J, W = est.columns_, est.components_
    assert J.dtype == np.int64 and W.shape == (K, A.shape[1])
    assert np.all(np.diff(J) > 0)
    # rank-K data is reproduced to rounding: entries of A are O(1), so the squared
    # residual per entry is O(eps^2) ~ 1e-32; 1e-20 leaves a wide margin
    assert est.mse_ <= 1e-20 * np.mean(A**2)
    np.testing.assert_array_equal(W[:, J], np.eye(K))
    assert est.max_abs_w_ == np.abs(W).max()
    assert est.n_features_in_ == A.shape[1] and est.n_samples_ == A.shape[0]
    assert est.fit_time_ > 0


@pytest.mark.parametrize("kind", ["dask", "zarr", "path"])
@pytest.mark.parametrize("method", METHODS)
def test_out_of_core_matches_in_memory(method, kind, tmp_path):
    A = noisy_low_rank(M=300, N=60, K=5, seed=4)
    kw = dict(method=method, random_state=11, n_power_iter=1)
    ref = RandomizedID(5, **kw).fit(A)
    # chunks=50 rows does not align with the zarr chunking (64 rows) nor the Omega tiles
    X = as_kind(A, kind, tmp_path)
    for chunks in (None, 50):
        est = RandomizedID(5, chunks=chunks, **kw).fit(X)
        np.testing.assert_array_equal(est.columns_, ref.columns_)
        np.testing.assert_allclose(est.components_, ref.components_, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(est.mse_, ref.mse_, rtol=1e-8)
        assert est.max_abs_w_ == pytest.approx(ref.max_abs_w_, rel=1e-8)
    # passes over A: cpqr = TSQR + residual; randomized = sketch + power + TSQR(C) + residual
    assert est.n_passes_ == (2 if method == "cpqr" else 4)
    assert ref.n_passes_ == 0


def test_cpqr_matches_scipy_pivoted_qr():
    A = noisy_low_rank(M=200, N=40, K=4, seed=2)
    K = 7
    _, R, P = sla.qr(A, pivoting=True, mode="economic")
    est = pivoted_qr_id(A, K)
    np.testing.assert_array_equal(est.columns_, np.sort(P[:K]))
    # the classic ID W = [I, R11^{-1} R12] P^T is the least-squares W for C = A[:, J]
    W_ls = np.linalg.lstsq(A[:, est.columns_], A, rcond=None)[0]
    W_ls[:, est.columns_] = np.eye(K)
    np.testing.assert_allclose(est.components_, W_ls, rtol=1e-9, atol=1e-12)


def test_randomized_is_cpqr_of_the_gaussian_sketch():
    """J is the first K pivots of CPQR(Omega A), Omega from the documented tile generator."""
    A = noisy_low_rank(M=700, N=60, K=5, seed=6)
    K, p, seed = 8, 4, 1234
    est = randomized_id(A, K, oversampling=p, random_state=seed)
    S = omega_rows(seed, 0, A.shape[0], K + p).T @ A
    _, _, P = sla.qr(S, pivoting=True, mode="economic")
    np.testing.assert_array_equal(est.columns_, np.sort(P[:K]))


# ----------------------------------------------------------------------------- quality

@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("method", METHODS)
def test_noisy_low_rank_error(method, seed):
    M, N, K, sigma = 400, 120, 6, 0.05
    A = noisy_low_rank(M, N, K, sigma, seed)
    est = RandomizedID(K, method=method, random_state=seed).fit(A)
    J, W = est.columns_, est.components_
    s = np.linalg.svd(A, compute_uv=False)
    svd_mse = (s[K:] ** 2).sum() / (M * N)
    assert svd_mse <= est.mse_ <= 2.0 * svd_mse
    # W is the least-squares solution: the residual is orthogonal to C
    resid = A - A[:, J] @ W
    assert np.abs(A[:, J].T @ resid).max() <= 1e-9 * np.abs(A).max() ** 2 * M
    # with A = L + E, the LS residual of column n (not in J) is about (I - P_C)(e_n - E_J w_n),
    # expected sum of squares sigma^2 (M - K)(1 + ||w_n||^2); the total over ~4e4 chi-square
    # terms has relative sd ~ 0.7 %, so 5 % leaves room for the neglected O(sigma^2 K / M)
    notJ = np.setdiff1d(np.arange(N), J)
    predicted = sigma**2 * (M - K) * (1 + (W[:, notJ] ** 2).sum(axis=0)).sum() / (M * N)
    assert est.mse_ == pytest.approx(predicted, rel=0.05)


def test_power_iterations_keep_quality_and_mse_definition():
    A = noisy_low_rank(M=300, N=80, K=5, seed=8)
    for q in (0, 2):
        est = RandomizedID(5, n_power_iter=q, random_state=0).fit(A)
        resid = A - A[:, est.columns_] @ est.components_
        assert est.mse_ == pytest.approx(np.mean(resid**2), rel=1e-12)
        s = np.linalg.svd(A, compute_uv=False)
        assert est.mse_ <= 2.0 * (s[5:] ** 2).sum() / A.size


def test_max_abs_w_can_exceed_one():
    """Nothing bounds |W| in the baselines (the Bayesian ID's selling point): not clipped."""
    A = noisy_low_rank(M=300, N=80, K=5, seed=3)
    est = pivoted_qr_id(A, 5)
    assert est.max_abs_w_ == np.abs(est.components_).max()
    assert est.max_abs_w_ > 1.05


def test_an_mse_beyond_float64_is_said_not_only_inf():
    A = np.random.default_rng(0).standard_normal((40, 10)) * 1e200
    with pytest.warns(RuntimeWarning, match="the MSE exceeds float64's range"):
        est = RandomizedID(3, random_state=0).fit(A)
    assert est.mse_ == np.inf
    # the columns are those of the matrix at a usual scale
    np.testing.assert_array_equal(est.columns_,
                                  RandomizedID(3, random_state=0).fit(A / 1e200).columns_)


# ----------------------------------------------------------------------------- randomness

def test_same_random_state_identical_and_seeds_matter():
    A = np.random.default_rng(5).standard_normal((200, 60))  # no structure: pivots are random
    a = randomized_id(A, 5, random_state=42)
    b = randomized_id(A, 5, random_state=42)
    np.testing.assert_array_equal(a.columns_, b.columns_)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.mse_ == b.mse_
    others = {tuple(randomized_id(A, 5, random_state=s).columns_) for s in range(5)}
    assert len(others) > 1  # the sketch really is random (not a hidden deterministic CPQR)
    g1 = randomized_id(A, 5, random_state=np.random.default_rng(7))
    g2 = randomized_id(A, 5, random_state=np.random.default_rng(7))
    np.testing.assert_array_equal(g1.columns_, g2.columns_)
    r1 = randomized_id(A, 5, random_state=np.random.RandomState(7))
    r2 = randomized_id(A, 5, random_state=np.random.RandomState(7))
    np.testing.assert_array_equal(r1.columns_, r2.columns_)
    # a SeedSequence, as BayesianID takes: the same one twice, the same columns; other
    # entropies, other sketches
    ss = np.random.SeedSequence(7)
    s1, s2 = (randomized_id(A, 5, random_state=ss) for _ in range(2))
    np.testing.assert_array_equal(s1.columns_, s2.columns_)
    assert len({tuple(randomized_id(A, 5, random_state=np.random.SeedSequence(e)).columns_)
                for e in range(5)}) > 1


# ----------------------------------------------------------------------------- transforms

@pytest.mark.parametrize("kind", KINDS)
def test_transform_round_trip(kind, tmp_path):
    A = exact_rank(seed=1)
    X = as_kind(A, kind, tmp_path)
    est = RandomizedID(6, method="cpqr")
    C = est.fit_transform(X)
    if kind == "numpy":
        assert isinstance(C, np.ndarray)
    else:
        assert isinstance(C, da.Array)
    A_hat = est.inverse_transform(C)
    assert isinstance(A_hat, np.ndarray if kind == "numpy" else da.Array)
    A_hat = np.asarray(A_hat)
    np.testing.assert_allclose(np.asarray(C), A[:, est.columns_])
    np.testing.assert_allclose(A_hat, A, atol=1e-12 * np.abs(A).max())
    assert est.score_mse(X) == pytest.approx(est.mse_, rel=1e-9, abs=1e-30)


def test_inverse_transform_from_zarr(tmp_path):
    A = exact_rank(seed=2)
    est = pivoted_qr_id(A, 6)
    C = est.transform(A)
    path = tmp_path / "C.zarr"
    z = zarr.create_array(store=str(path), shape=C.shape, chunks=(50, 6), dtype="f8",
                          zarr_format=3)
    z[:] = C
    for c in (z, str(path)):
        out = est.inverse_transform(c)
        assert isinstance(out, da.Array)
        np.testing.assert_allclose(out.compute(), C @ est.components_)


@pytest.mark.parametrize("kind", KINDS)
def test_score_mse_with_mask(kind, tmp_path):
    rng = np.random.default_rng(9)
    A = noisy_low_rank(M=200, N=40, K=4, seed=9)
    mask = rng.random(A.shape) < 0.7
    est = RandomizedID(4, method="randomized", random_state=0).fit(A)
    J, W = est.columns_, est.components_
    A0 = np.where(mask, A, 0.0)
    expected = np.mean((A0 - A0[:, J] @ W)[mask] ** 2)
    # unobserved entries may hold NaN: they are ignored (read as 0 where they enter C)
    X_nan = as_kind(np.where(mask, A, np.nan), kind, tmp_path)
    for m in (mask, da.from_array(mask, chunks=(30, 40))):
        got = est.score_mse(X_nan, mask=m)
        assert got == pytest.approx(expected, rel=1e-10)
    assert est.score_mse(A) == pytest.approx(est.mse_, rel=1e-12)
    with pytest.raises(ParameterError, match="no entries"):
        est.score_mse(A, mask=np.zeros(A.shape, bool))
    with pytest.raises(InputShapeError, match="mask has shape"):
        est.score_mse(A, mask=mask[:, :-1])


# ----------------------------------------------------------------------------- zarr is read-only

@pytest.mark.parametrize("method", METHODS)
def test_zarr_store_untouched(method, tmp_path):
    A = noisy_low_rank(M=200, N=40, K=4, seed=3)
    path = as_kind(A, "path", tmp_path)
    before = tree_hashes(path)
    assert before  # the store has files to compare
    est = RandomizedID(4, method=method, random_state=0, n_power_iter=1).fit(path)
    est.transform(path).compute()
    est.score_mse(path, mask=np.ones(A.shape, bool))
    est.fit(zarr.open_array(path, mode="r+"))
    assert tree_hashes(path) == before


# ----------------------------------------------------------------------------- validation

@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(n_components=0), "between 1 and 19"),
        (dict(n_components=20), "between 1 and 19"),
        (dict(n_components=2.5), "must be an integer"),
        (dict(n_components=True), "must be an integer"),
        (dict(n_components=3, method="svd"), "unknown"),
        (dict(n_components=3, oversampling=-1), "oversampling"),
        (dict(n_components=3, n_power_iter=1.0), "n_power_iter"),
        (dict(n_components=3, random_state=-1), "random_state"),
        (dict(n_components=3, random_state="x"), "random_state"),
        (dict(n_components=3, chunks=0), "chunks"),
    ],
)
def test_parameter_errors(kwargs, match):
    A = np.random.default_rng(0).standard_normal((30, 20))
    est = RandomizedID(**kwargs)
    assert est.get_params()["n_components"] is kwargs["n_components"]  # stored verbatim
    with pytest.raises(ParameterError, match=match):
        est.fit(A)
    assert not hasattr(est, "components_")


def test_more_components_than_rows():
    A = np.random.default_rng(0).standard_normal((5, 20))
    with pytest.raises(ParameterError, match="exceeds the number of rows"):
        RandomizedID(6).fit(A)
    est = RandomizedID(5, method="cpqr").fit(A)  # K = M is allowed: exact fit
    assert est.mse_ < 1e-28


def test_parameter_error_before_reading_out_of_core_data():
    """Validation is metadata-only: a bad K fails even if reading A would fail."""
    def boom(block):
        raise AssertionError("A was read")

    A = da.ones((40, 10), chunks=(10, 10)).map_blocks(boom, dtype=float)
    with pytest.raises(ParameterError):
        RandomizedID(10).fit(A)


def test_non_finite_input():
    A = np.random.default_rng(0).standard_normal((50, 10))
    A[17, 3] = np.nan
    for method in METHODS:
        with pytest.raises(NonFiniteInputError, match="row 17, column 3"):
            RandomizedID(3, method=method).fit(A)
        with pytest.raises(NonFiniteInputError, match="row 17, column 3"):
            RandomizedID(3, method=method).fit(da.from_array(A, chunks=(10, 5)))
    A[17, 3] = np.inf
    # filling NaN would not help: the message says to replace the infinity
    with pytest.raises(NonFiniteInputError, match=r"infinity \(first at row 17, column 3\).*"
                                                  "replace the infinities"):
        RandomizedID(3).fit(A)
    # scoring checks too: observed entries must be finite, unobserved ones may be anything
    est = RandomizedID(3, random_state=0).fit(np.nan_to_num(A, posinf=0.0))
    for X in (A, da.from_array(A, chunks=(10, 10))):
        with pytest.raises(NonFiniteInputError, match="row 17, column 3"):
            est.score_mse(X)
        mask = np.ones(A.shape, bool)
        with pytest.raises(NonFiniteInputError, match="observed"):
            est.score_mse(X, mask=mask)
        mask[17, 3] = False
        assert np.isfinite(est.score_mse(X, mask=mask))


def test_not_fitted_and_shape_errors():
    A = exact_rank()
    est = RandomizedID(6)
    with pytest.raises(NotFittedError, match="fit"):
        est.transform(A)
    with pytest.raises(NotFittedError):
        est.score_mse(A)
    est.fit(A)
    with pytest.raises(InputShapeError, match="columns"):
        est.transform(A[:, :-1])
    with pytest.raises(InputShapeError, match="n_components=6"):
        est.inverse_transform(np.ones((10, 5)))


def test_rank_deficient_selection_warns():
    A = exact_rank(M=100, N=20, K=3)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        est = pivoted_qr_id(A, 5)
    assert any("rank deficient" in str(w.message) for w in rec)
    assert np.isfinite(est.components_).all()
    assert est.mse_ <= 1e-20 * np.mean(A**2)
    np.testing.assert_array_equal(est.components_[:, est.columns_], np.eye(5))


def test_params_api():
    est = RandomizedID(4, method="cpqr", chunks=100)
    assert est.get_params() == dict(n_components=4, method="cpqr", oversampling=10,
                                    n_power_iter=0, random_state=None, chunks=100,
                                    allow_missing_chunks=False)
    assert est.set_params(oversampling=3) is est and est.oversampling == 3
    with pytest.raises(ParameterError, match="unknown parameter"):
        est.set_params(k=3)
    assert "RandomizedID(4" in repr(est)


@pytest.mark.parametrize("method", ["randomized", "cpqr"])
@pytest.mark.parametrize("kind", ["numpy", "zarr"])
def test_select_columns_matches_fit_with_fewer_passes(tmp_path, method, kind):
    from dask_bid.baselines import select_columns
    from dask_bid.engine import to_zarr

    rng = np.random.default_rng(3)
    A = rng.standard_normal((300, 6)) @ rng.standard_normal((6, 40)) \
        + 0.01 * rng.standard_normal((300, 40))
    X = A if kind == "numpy" else to_zarr(A, tmp_path / "A.zarr", chunks=(64, 40))
    kw = dict(method=method, random_state=5) if method == "randomized" else dict(method=method)
    fitted = RandomizedID(6, **kw).fit(X)
    J = select_columns(X, 6, **kw)
    np.testing.assert_array_equal(J, fitted.columns_)


def test_a_zarr_input_or_mask_with_chunks_missing_is_refused(tmp_path):
    """A lost chunk file read as rows of zeros: RandomizedID fitted (and scored) such a
    store without a word, where BayesianID refuses it. Refused now, naming the chunks;
    ``allow_missing_chunks=True`` reads them as the fill value, as BayesianID's does."""
    from dask_bid import IncompleteStoreError
    from dask_bid.baselines import select_columns

    A = exact_rank(M=200, N=40, K=5)
    path = str(tmp_path / "A.zarr")
    z = zarr.create_array(path, shape=A.shape, chunks=(64, 40), dtype="f8", fill_value=0.0)
    z[:64] = A[:64]  # chunks 1-3 never written: no files
    for fit in (lambda: RandomizedID(5, random_state=0).fit(path),
                lambda: select_columns(path, 5, random_state=0),
                lambda: pivoted_qr_id(path, 5)):
        with pytest.raises(IncompleteStoreError, match=r"3 of 4 chunks missing \(c/1/0"):
            fit()
    est = RandomizedID(5, random_state=0, allow_missing_chunks=True).fit(path)
    np.testing.assert_array_equal(est.columns_, RandomizedID(5, random_state=0).fit(
        np.concatenate([A[:64], np.zeros((136, 40))])).columns_)
    full = RandomizedID(5, random_state=0).fit(A)
    with pytest.raises(IncompleteStoreError, match="chunks missing"):
        full.score_mse(path)
    mpath = str(tmp_path / "mask.zarr")
    m = zarr.create_array(mpath, shape=A.shape, chunks=(64, 40), dtype=bool, fill_value=False)
    m[:64] = True
    with pytest.raises(IncompleteStoreError, match=f"{mpath}.*3 of 4 chunks missing"):
        full.score_mse(A, mask=mpath)
    with pytest.raises(ParameterError, match="allow_missing_chunks must be True or False"):
        RandomizedID(5, allow_missing_chunks="yes").fit(A)


def test_masks_and_masked_arrays_are_taken_as_bayesian_id_takes_them():
    """A mask of 0.5 (or counts) read every entry as observed; a masked array's masked
    entries were called NaN it never held, and scoring NaN without a mask advised a fill."""
    from dask_bid import InputDTypeError

    A = exact_rank(M=60, N=12, K=3)
    est = RandomizedID(3, random_state=0).fit(A)
    with pytest.raises(InputDTypeError, match="mask must be boolean.*float64"):
        est.score_mse(A, mask=np.full(A.shape, 0.5))
    hidden = np.ma.masked_array(A, mask=np.eye(60, 12, dtype=bool))
    for call in (lambda: RandomizedID(3).fit(hidden), lambda: est.transform(hidden)):
        with pytest.raises(NonFiniteInputError, match=r"masked array with 12 masked .*"
                                                      r"A\.filled\(0\)"):
            call()
    with pytest.raises(NonFiniteInputError, match=r"mask=~A\.mask"):
        est.score_mse(hidden)
    assert est.score_mse(hidden.data, mask=~hidden.mask) == pytest.approx(
        est.score_mse(A, mask=~hidden.mask))
    B = A.copy()
    B[3, 4] = np.nan
    with pytest.raises(NonFiniteInputError, match=r"row 3, column 4.*Pass a mask of the "
                                                  r"observed entries"):
        est.score_mse(da.from_array(B, chunks=(20, 12)))
