"""BayesianID and RandomizedID as scikit-learn estimators (docs/sklearn.md).

``check_estimator`` runs every check of the installed scikit-learn; the two listed in
``EXPECTED_FAILED_CHECKS`` are run on their own to show that they still fail, for the
reason given. The sampler runs 4 iterations per fit here: the checks test the protocol,
not the chain (the whole check suite then takes about 2 s per estimator).
"""

import re
import warnings
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
import zarr
from sklearn.base import clone
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import check_estimator

from dask_bid import BayesianID, RandomizedID, open_result
from dask_bid._errors import (
    InputDTypeError,
    InputShapeError,
    NonFiniteInputError,
    ParameterError,
)
from dask_bid.interface._sklearn import EXPECTED_FAILED_CHECKS

TINY = dict(n_iter=4, burn_in=1, thin=1, random_state=0)
FAST = dict(n_iter=30, burn_in=10, thin=1, random_state=0)
DOCS = Path(__file__).resolve().parents[1] / "docs"


def estimators():
    return [BayesianID(1, **TINY), BayesianID(1, missing="mask", **TINY),
            RandomizedID(1, random_state=0), RandomizedID(1, method="cpqr")]


IDS = ["bid", "bid-mask", "rid", "rid-cpqr"]


@pytest.fixture(scope="module")
def A():
    rng = np.random.default_rng(0)
    C = rng.standard_normal((90, 3))
    return C @ rng.uniform(-1, 1, (3, 12)) + 0.05 * rng.standard_normal((90, 12))


def _check(name):
    return getattr(estimator_checks, name)


# --------------------------------------------------------------------------- check_estimator
@pytest.mark.parametrize("est", estimators(), ids=IDS)
def test_check_estimator(est):
    with warnings.catch_warnings():
        # "does not inherit from BaseEstimator": by design, see docs/sklearn.md
        warnings.simplefilter("ignore", UserWarning)
        results = check_estimator(est, expected_failed_checks=EXPECTED_FAILED_CHECKS,
                                  on_skip=None)
    ran = {r["check_name"]: r["status"] for r in results}
    assert len(ran) > 40  # the whole suite ran (not skipped by a tag)
    failed = [n for n, s in ran.items() if s == "failed"]
    assert not failed
    assert {n for n, s in ran.items() if s == "xfail"} == set(EXPECTED_FAILED_CHECKS)


@pytest.mark.parametrize("est", estimators()[::2], ids=IDS[::2])
@pytest.mark.parametrize("name", sorted(EXPECTED_FAILED_CHECKS))
def test_expected_failed_checks_still_fail_for_the_reason_given(est, name):
    with pytest.raises((AssertionError, InputDTypeError)) as info:
        _check(name)(type(est).__name__, est)
    if name == "check_dtype_object":
        assert isinstance(info.value, InputDTypeError) and "object is not supported" in str(
            info.value)
    else:
        assert "1 column" in str(info.value)
    # and the refusal the reason describes
    X = np.ones((5, 3), dtype=np.complex128)
    with pytest.raises(InputDTypeError, match="complex128 is not supported"):
        clone(est).fit(X)


@pytest.mark.parametrize("est", estimators(), ids=IDS)
@pytest.mark.parametrize("name", ["check_set_output_transform",
                                  "check_set_output_transform_pandas",
                                  "check_global_output_transform_pandas"])
def test_scikit_learns_set_output_checks_pass(est, name):
    """check_estimator yields these only for estimators built on scikit-learn's mixins:
    run here on their own (the polars ones need polars, not a test dependency)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        getattr(estimator_checks, name)(type(est).__name__, clone(est))


def test_expected_failed_checks_are_listed_in_the_docs():
    text = (DOCS / "sklearn.md").read_text()
    for name in EXPECTED_FAILED_CHECKS:
        assert f"`{name}`" in text


def test_tags():
    from sklearn.utils import get_tags

    tags = get_tags(BayesianID(3))
    assert not tags.target_tags.required and tags.requires_fit
    assert not tags.input_tags.sparse and not tags.input_tags.allow_nan
    assert get_tags(BayesianID(3, missing="mask")).input_tags.allow_nan
    assert tags.transformer_tags.preserves_dtype == ["float64", "float32"]
    assert not get_tags(RandomizedID(3)).input_tags.allow_nan


# --------------------------------------------------------------------------- clone, params
@pytest.mark.parametrize("est", [BayesianID(3, model="gbtn", bounds=(-2.0, 2.0), **TINY),
                                 RandomizedID(3, method="cpqr", oversampling=4)],
                         ids=["bid", "rid"])
def test_clone_keeps_params_and_drops_the_fit(est, A):
    est.fit(A)
    c = clone(est)
    assert type(c) is type(est) and c.get_params() == est.get_params()
    assert not hasattr(c, "components_")
    c.fit(A)
    np.testing.assert_array_equal(c.columns_, est.columns_)
    np.testing.assert_array_equal(c.components_, est.components_)


# --------------------------------------------------------------------------- score
def test_score_is_the_negative_reconstruction_error(A):
    est = BayesianID(3, **FAST).fit(A)
    J, W = est.columns_, est.components_
    assert est.score(A) == pytest.approx(-est.mse_, rel=1e-12)
    B = A[:40] * 1.5
    assert est.score(B) == pytest.approx(-np.mean((B - B[:, J] @ W) ** 2), rel=1e-12)
    # out of core: the same number from a dask array and a Zarr store
    assert est.score(da.from_array(B, chunks=(7, 5))) == pytest.approx(est.score(B), rel=1e-12)
    rid = RandomizedID(3, random_state=0).fit(A)
    assert rid.score(A) == pytest.approx(-rid.mse_, rel=1e-12)
    assert rid.score(B) == pytest.approx(-rid.score_mse(B), rel=1e-15)


def test_score_of_a_zarr_store(A, tmp_path):
    z = zarr.create_array(store=str(tmp_path / "B.zarr"), shape=A.shape, chunks=(30, 6),
                          dtype="f8")
    z[...] = A
    est = BayesianID(3, **FAST).fit(A)
    assert est.score(str(tmp_path / "B.zarr")) == pytest.approx(est.score(A), rel=1e-12)


def test_score_with_missing_mask_is_over_observed_entries(A):
    X = A.copy()
    X[np.random.default_rng(1).random(X.shape) < 0.1] = np.nan
    est = BayesianID(3, missing="mask", **FAST).fit(X)
    obs = ~np.isnan(X)
    X0 = np.where(obs, X, 0.0)
    resid = (X0 - X0[:, est.columns_] @ est.components_)[obs]
    assert est.score(X) == pytest.approx(-np.mean(resid ** 2), rel=1e-12)
    assert est.score(X) == pytest.approx(-est.mse_observed_, rel=1e-9)
    # fitted with mask= on a zero-filled matrix: scored with the same mask, the same
    # number (score had no mask and counted the zero-filled entries as observed)
    byarg = BayesianID(3, missing="mask", **FAST).fit(X0, mask=obs)
    np.testing.assert_array_equal(byarg.columns_, est.columns_)
    assert byarg.score(X0, mask=obs) == pytest.approx(est.score(X), rel=1e-12)
    assert byarg.score(X0) != pytest.approx(byarg.score(X0, mask=obs), rel=1e-3)
    with pytest.raises(ParameterError, match="mask= marks the observed entries"):
        BayesianID(3, **TINY).fit(A).score(A, mask=np.ones(A.shape, bool))


def test_masked_inverse_transform_counts_nan_as_zero_like_the_fit_and_score(A):
    """A missing entry of a basis column counts as 0 in the fit and in score;
    inverse_transform(transform(X)) made each such row all NaN (no imputation)."""
    X = A.copy()
    X[np.random.default_rng(1).random(X.shape) < 0.1] = np.nan
    est = BayesianID(3, missing="mask", **FAST).fit(X)
    C = est.transform(X)
    assert np.isnan(C).any()
    X0 = np.where(np.isnan(X), 0.0, X)
    want = X0[:, est.columns_] @ est.components_
    got = est.inverse_transform(C)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    obs = ~np.isnan(X)
    assert np.mean((X0 - got)[obs] ** 2) == pytest.approx(-est.score(X), rel=1e-12)
    lazy = est.inverse_transform(da.from_array(C, chunks=(25, 3)))
    np.testing.assert_allclose(lazy.compute(), want, rtol=0, atol=1e-12)
    # a missing='zero' model's C has no NaN (refused by transform); its reconstruction is
    # the plain product
    plain = BayesianID(3, **FAST).fit(X0)
    np.testing.assert_array_equal(plain.inverse_transform(X0[:, plain.columns_]),
                                  X0[:, plain.columns_] @ plain.components_)


def test_nan_is_refused_by_transform_and_score_unless_masked(A):
    est = BayesianID(3, **TINY).fit(A)
    X = A.copy()
    X[2, 5] = np.nan
    for method in (est.transform, est.score):
        with pytest.raises(NonFiniteInputError, match="1 NaN or infinite.*missing='mask'"):
            method(X)
    # a dask X is read only when scored: its NaN gave a NaN score without a word
    with pytest.raises(NonFiniteInputError, match="NaN or infinite.*missing='mask'"):
        est.score(da.from_array(X, chunks=(20, 10)))
    rid = RandomizedID(3, random_state=0).fit(A)
    for method in (rid.transform, rid.score):
        # (score named an internal row block and a dask fill, not the mask)
        with pytest.raises(NonFiniteInputError, match=r"row 2, column 5.*a mask"):
            method(X)
    est = BayesianID(3, missing="mask", **TINY).fit(X)
    assert np.isnan(est.transform(X)).sum() == np.isnan(X[:, est.columns_]).sum()
    # an infinity is not a missing entry: refused as by fit (score was NaN before)
    X[4, 1] = -np.inf
    for method in (est.transform, est.score):
        with pytest.raises(NonFiniteInputError, match="1 infinite entries; missing='mask'"):
            method(X)


def test_inverse_transform_refuses_another_number_of_columns(A):
    # one clear error for both estimators (BayesianID gave numpy's matmul message, and
    # took a 1-D C)
    for est in (BayesianID(3, **TINY).fit(A), RandomizedID(3, random_state=0).fit(A)):
        C = est.transform(A)
        np.testing.assert_allclose(est.inverse_transform(C), C @ est.components_)
        for bad in (C[:, :2], C[:, 0]):
            with pytest.raises(InputShapeError, match="C must be a 2-D matrix with "
                                                      "n_components=3 columns"):
                est.inverse_transform(bad)


def test_inverse_transform_refuses_what_transform_refuses(A):
    """C's dtype, sparse C, ragged lists and non-finite entries get transform's refusals
    (np.asarray(C, float) parsed '1.5', dropped imaginary parts, read None as NaN and
    gave a NaN reconstruction, and quoted numpy's errors); integers and float32 are
    read as numbers; a masked model counts NaN as 0 and refuses infinity."""
    import scipy.sparse as sp

    for est in (BayesianID(3, **TINY).fit(A), RandomizedID(3, random_state=0).fit(A)):
        C = est.transform(A)[:4]
        nan = C.copy()
        nan[0, 0] = np.nan
        for bad, err, words in [
                (C.astype(str), InputDTypeError, "dtype <U32 is not supported"),
                (C + 1j, InputDTypeError, "dtype complex128 is not supported"),
                (np.array([[None, 1, 2]], dtype=object), InputDTypeError, "dtype object"),
                (da.from_array(C.astype(str)), InputDTypeError, "is not supported"),
                (sp.csr_matrix(C), InputDTypeError, "C is a scipy.sparse csr_matrix"),
                ([[1.0, 2.0, 3.0], [1.0, 2.0]], InputShapeError, "C cannot be read as a"),
                (nan, NonFiniteInputError, "C contains 1 NaN or infinite entries")]:
            with pytest.raises(err, match=re.escape(words)):
                est.inverse_transform(bad)
        for ok in (C.astype(np.float32), np.round(C).astype(int), C.tolist()):
            np.testing.assert_allclose(est.inverse_transform(ok),
                                       np.asarray(ok, dtype=float) @ est.components_,
                                       rtol=1e-6)
        pd = pytest.importorskip("pandas")
        # pandas' nullable dtypes, as fit and transform take them (refused as object)
        for frame in (pd.DataFrame(C).astype("Float64"),
                      pd.DataFrame(np.round(C)).astype("Int64")):
            np.testing.assert_allclose(est.inverse_transform(frame),
                                       frame.to_numpy(dtype=float) @ est.components_)
        with pytest.raises(NonFiniteInputError, match="C is a masked array with 1 masked "
                                                      "entries"):
            est.inverse_transform(np.ma.masked_invalid(nan))  # named as masked, not NaN
    est = BayesianID(3, missing="mask", **TINY).fit(A)
    C = est.transform(A)[:4]
    C[0, 0] = np.nan
    assert np.isfinite(est.inverse_transform(C)).all()
    assert np.isfinite(est.inverse_transform(np.ma.masked_invalid(C))).all()
    C[0, 0] = np.inf
    with pytest.raises(NonFiniteInputError, match="C contains 1 infinite entries"):
        est.inverse_transform(C)


def test_score_of_a_finite_matrix_whose_error_overflows_is_minus_inf(A):
    """Entries near 1e200 square past float64's range: mse_ is inf (with a warning), and
    score is -inf, as -score(X_train) = mse_ says; it was refused as holding NaN."""
    H = A * 1e200
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for est in (BayesianID(3, **TINY), BayesianID(3, missing="mask", **TINY),
                    RandomizedID(3, random_state=0)):
            est.fit(H)
            assert est.score(H) == -np.inf == -est.mse_
            assert est.score(da.from_array(H, chunks=(30, 12))) == -np.inf
    X = A.copy()
    X[0, 0] = np.nan  # a dask X that does hold NaN: still refused
    with pytest.raises(NonFiniteInputError, match="X contains NaN or infinite entries"):
        BayesianID(3, **TINY).fit(A).score(da.from_array(X, chunks=(30, 12)))
    X[0, 0] = np.inf  # a masked model: NaN is missing there, the infinity is named
    masked = BayesianID(3, missing="mask", **TINY).fit(A)
    with warnings.catch_warnings(), pytest.raises(NonFiniteInputError,
                                                  match="X contains infinite entries, so"):
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's inf - inf in the sum
        masked.score(da.from_array(X, chunks=(30, 12)))


# --------------------------------------------------------------------------- model selection
def test_grid_search_scores_held_out_rows(A):
    grid = GridSearchCV(BayesianID(3, **FAST), {"n_components": [1, 3]}, cv=KFold(3))
    grid.fit(A)
    # more columns reconstruct better; a rank-3 matrix needs 3
    assert grid.best_params_ == {"n_components": 3}
    # split 0 by hand: fit on the other rows, -MSE on the held-out ones
    train, test = next(KFold(3).split(A))
    ref = BayesianID(3, **FAST).fit(A[train]).score(A[test])
    i = list(grid.cv_results_["param_n_components"]).index(3)
    assert grid.cv_results_["split0_test_score"][i] == pytest.approx(ref, rel=1e-12)
    assert grid.best_estimator_.components_.shape == (3, 12)
    assert grid.score(A) == pytest.approx(grid.best_estimator_.score(A))


def test_cross_val_score_randomized_id(A):
    s = cross_val_score(RandomizedID(3, method="cpqr"), A, cv=3)
    assert s.shape == (3,) and np.all(s < 0) and np.all(s > -0.01)


# --------------------------------------------------------------------------- pipelines, names
def test_pipeline_scaler_then_id(A):
    pipe = make_pipeline(StandardScaler(), BayesianID(3, **FAST)).fit(A)
    Z = StandardScaler().fit_transform(A)
    alone = BayesianID(3, **FAST).fit(Z)
    np.testing.assert_array_equal(pipe[-1].columns_, alone.columns_)
    np.testing.assert_array_equal(pipe.transform(A), Z[:, alone.columns_])
    assert pipe.score(A) == pytest.approx(alone.score(Z), rel=1e-12)
    names = pipe.get_feature_names_out()
    np.testing.assert_array_equal(names, [f"x{j}" for j in alone.columns_])


def test_pipeline_id_then_model(A):
    """The selected columns feed a downstream estimator (here a second scaler)."""
    pipe = Pipeline([("id", RandomizedID(3, method="cpqr")), ("scale", StandardScaler())])
    out = pipe.fit_transform(A)
    assert out.shape == (90, 3)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-12)


def test_feature_names_from_a_dataframe(A):
    pd = pytest.importorskip("pandas")
    cols = [f"gene_{j}" for j in range(A.shape[1])]
    df = pd.DataFrame(A, columns=cols)
    for est in (BayesianID(3, **FAST), RandomizedID(3, method="cpqr")):
        est.fit(df)
        np.testing.assert_array_equal(est.feature_names_in_, cols)
        out = est.get_feature_names_out()
        assert out.dtype == object
        np.testing.assert_array_equal(out, np.asarray(cols, dtype=object)[est.columns_])
        np.testing.assert_array_equal(est.transform(df), A[:, est.columns_])
        with pytest.raises(InputShapeError, match="feature names of X differ"):
            est.transform(df[cols[::-1]])
        with pytest.raises(InputShapeError, match="differ from feature_names_in_"):
            est.get_feature_names_out([f"c{j}" for j in range(A.shape[1])])
        # refit on a plain array: the names go away
        est.fit(A)
        assert not hasattr(est, "feature_names_in_")
        np.testing.assert_array_equal(est.get_feature_names_out(),
                                      [f"x{j}" for j in est.columns_])
        custom = [f"c{j}" for j in range(A.shape[1])]
        np.testing.assert_array_equal(est.get_feature_names_out(custom),
                                      np.asarray(custom, dtype=object)[est.columns_])
    pipe = make_pipeline(StandardScaler(), RandomizedID(2, method="cpqr")).fit(df)
    assert list(pipe.get_feature_names_out()) == [cols[j] for j in pipe[-1].columns_]


def test_both_estimators_take_names_from_feature_names_and_a_zarr_input(A, tmp_path):
    """docs/sklearn.md's sources of names hold for RandomizedID as for BayesianID: a Zarr
    input's recorded column names, and feature_names= (RandomizedID took neither: x4 ...,
    and a TypeError); such names raise no warning for a plain array later."""
    from dask_bid._attrs import COLUMN_NAMES_ATTR

    names = [f"n{j}" for j in range(A.shape[1])]
    path = str(tmp_path / "named.zarr")
    z = zarr.create_array(path, shape=A.shape, chunks=(30, 12), dtype="f8")
    z[:] = A
    z.attrs[COLUMN_NAMES_ATTR] = names
    given = [f"f{j}" for j in range(A.shape[1])]
    for make in (lambda: BayesianID(3, **TINY), lambda: RandomizedID(3, random_state=0)):
        est = make().fit(path)
        np.testing.assert_array_equal(est.get_feature_names_out(),
                                      np.asarray(names, dtype=object)[est.columns_])
        est = make().fit(A, feature_names=given)
        np.testing.assert_array_equal(est.feature_names_in_, given)
        # through fit_transform too, as a pipeline's step__feature_names passes them
        np.testing.assert_array_equal(
            make().fit_transform(A, feature_names=given), A[:, est.columns_])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est.transform(A)
        with pytest.raises(ParameterError, match="feature_names has 2 names, but A has 12"):
            make().fit(A, feature_names=["a", "b"])


def test_names_on_one_side_only_warn_and_mixed_names_are_refused(A, tmp_path):
    """As scikit-learn: fitted with names and given none (or the reverse), transform and
    score warn (a Pipeline's set_output then labels x8, x11, ... without a word); column
    names mixing strings and numbers are refused (they were dropped without a word)."""
    pd = pytest.importorskip("pandas")
    from dask_bid._errors import NotFittedError

    cols = [f"gene_{j}" for j in range(A.shape[1])]
    df = pd.DataFrame(A, columns=cols)
    for est in (BayesianID(3, **TINY), RandomizedID(3, method="cpqr")):
        est.fit(df)
        for method in (est.transform, est.score):
            with pytest.warns(UserWarning, match="^X does not have valid feature names, "
                              f"but {type(est).__name__} was fitted with feature names$"):
                method(A)
        est.fit(A)
        with pytest.warns(UserWarning, match="^X has feature names, but "
                          f"{type(est).__name__} was fitted without feature names$"):
            est.transform(df)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est.transform(A)  # names on neither side, and a store's: no warning
            zarr.create_array(str(tmp_path / f"{type(est).__name__}.zarr"), data=A)
            est.transform(zarr.open_array(str(tmp_path / f"{type(est).__name__}.zarr")))
        mixed = pd.DataFrame(A, columns=[*cols[:-1], 7])
        with pytest.raises(TypeError, match=r"mix strings with other types \(int, str\)"):
            type(est)(3).fit(mixed)
    # names given with a numpy matrix (feature_names=), or read back with a stored fit:
    # a numpy transform lost no DataFrame's names (it warned on the fit's own matrix)
    named = BayesianID(3, **TINY).fit(A, feature_names=cols, out=str(tmp_path / "n.zarr"))
    for est in (named, open_result(str(tmp_path / "n.zarr"))):
        np.testing.assert_array_equal(est.feature_names_in_, cols)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            est.transform(A), est.score(A)
        with pytest.raises(ValueError, match="not fitted"):  # as scikit-learn's
            type(est)(3).transform(A)
    assert issubclass(NotFittedError, AttributeError)


@pytest.mark.parametrize("make", [lambda: BayesianID(3, **TINY),
                                  lambda: RandomizedID(3, method="cpqr")],
                         ids=["bid", "rid"])
def test_set_output_pandas_gives_the_index_and_the_selected_names(A, make, tmp_path):
    """``set_output(transform="pandas")``, on the estimator, on a Pipeline, or through
    scikit-learn's global setting: a DataFrame of A[:, columns_] with the input's index
    and the selected columns' names; for a Zarr input, computed. "default" and no
    setting give the plain array; clone keeps the setting; "polars" and others are
    refused, naming them."""
    import sklearn

    pd = pytest.importorskip("pandas")
    cols = [f"drug{j}" for j in range(A.shape[1])]
    rows = [f"cell{i}" for i in range(A.shape[0])]
    df = pd.DataFrame(A, columns=cols, index=rows)
    est = make().set_output(transform="pandas")
    out = est.fit_transform(df)
    assert isinstance(out, pd.DataFrame) and list(out.index) == rows
    assert list(out.columns) == [cols[j] for j in est.columns_]
    np.testing.assert_array_equal(out.to_numpy(), A[:, est.columns_])
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        plain = est.transform(A)  # an array has no index; the names are the fit's
    assert list(plain.index) == list(range(A.shape[0]))
    assert list(plain.columns) == [cols[j] for j in est.columns_]
    assert clone(est)._sklearn_output_config == {"transform": "pandas"}
    path = str(tmp_path / "A.zarr")
    zarr.create_array(path, shape=A.shape, chunks=(10, A.shape[1]), dtype="f8")[...] = A
    np.testing.assert_array_equal(est.fit(path).transform(path).to_numpy(),
                                  A[:, est.columns_])
    assert est.set_output(transform=None)._sklearn_output_config == {"transform": "pandas"}
    assert isinstance(est.set_output(transform="default").transform(A), np.ndarray)
    fresh = make().fit(A)
    assert isinstance(fresh.transform(A), np.ndarray)
    with sklearn.config_context(transform_output="pandas"):
        with pytest.warns(UserWarning, match="X has feature names, but"):
            assert isinstance(fresh.transform(df), pd.DataFrame)
    pipe = make_pipeline(StandardScaler(), make()).set_output(transform="pandas")
    piped = pipe.fit_transform(df)
    assert list(piped.index) == rows and list(piped.columns) == [cols[j]
                                                                 for j in pipe[-1].columns_]
    from dask_bid import ParameterError

    with pytest.raises(ParameterError, match=r"transform='polars'\): choose one of "
                       r"'default', 'pandas' or None \(for polars: 'pandas', then"):
        make().set_output(transform="polars")
    with pytest.raises(ParameterError, match="transform='numpy'"):
        make().set_output(transform="numpy")


# --------------------------------------------------------------------------- refusals
def test_another_number_of_features_is_refused_with_sklearns_wording(A):
    for est in (BayesianID(3, **TINY).fit(A), RandomizedID(3, random_state=0).fit(A)):
        name = type(est).__name__
        msg = f"X has 5 features, but {name} is expecting 12 features as input"
        for method in (est.transform, est.score):
            with pytest.raises(InputShapeError, match=msg):
                method(A[:, :5])
            with pytest.raises(InputShapeError, match="X has 1 features"):
                method(A[:, :1])  # refused for its count, not for having one column
            with pytest.raises(InputShapeError, match=msg):
                method(da.from_array(A[:, :5]))
        with pytest.raises(InputShapeError, match="input_features has 3 names"):
            est.get_feature_names_out(["a", "b", "c"])


def test_sparse_input_is_refused_with_the_word_sparse(A):
    sp = pytest.importorskip("scipy.sparse")
    for est in (BayesianID(3, **TINY), RandomizedID(3)):
        for X in (sp.csr_matrix(A), sp.csr_array(A)):
            with pytest.raises(InputDTypeError, match=r"scipy.sparse .*sparse input is not "
                                                      r"supported.*A.toarray\(\)"):
                est.fit(X)
        est.fit(A)
        with pytest.raises(InputDTypeError, match="sparse input is not supported"):
            est.transform(sp.csr_matrix(A))


def test_unfitted_methods_raise_not_fitted(A):
    from dask_bid import NotFittedError

    for est in (BayesianID(3), RandomizedID(3)):
        for method in ("transform", "score", "get_feature_names_out"):
            with pytest.raises(NotFittedError, match="not fitted"):
                getattr(est, method)(*(() if method == "get_feature_names_out" else (A,)))


def test_scikit_learns_own_classes_catch_and_filter_ours(A):
    """With scikit-learn's exceptions module loaded (as a user catching its classes has
    it), NotFittedError and ConvergenceWarning are also instances of scikit-learn's
    classes, and still of dask_bid's; the error pickles."""
    import pickle

    from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning
    from sklearn.exceptions import NotFittedError as SkNotFittedError

    from dask_bid import ConvergenceWarning, NotFittedError

    for est in (BayesianID(3), RandomizedID(3)):
        with pytest.raises(SkNotFittedError) as info:
            est.transform(A)
        assert isinstance(info.value, NotFittedError) and isinstance(info.value, ValueError)
        assert type(pickle.loads(pickle.dumps(info.value))) is type(info.value)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        BayesianID(3, **FAST).fit(A)  # 20 retained draws: never judged converged
    cats = [w.category for w in seen if issubclass(w.category, ConvergenceWarning)]
    assert cats and all(issubclass(c, SkConvergenceWarning) for c in cats)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=SkConvergenceWarning)
        BayesianID(3, **FAST).fit(A)
    assert not [w for w in seen if issubclass(w.category, ConvergenceWarning)]
    # unpickled in another process (a worker, a restarted kernel): made there too (it
    # was "Can't get attribute '_SklearnNotFittedError'")
    import subprocess
    import sys

    try:
        BayesianID(3).transform(A)
    except NotFittedError as exc:
        blob = pickle.dumps(exc)
    code = ("import pickle, sys; e = pickle.loads(sys.stdin.buffer.read()); "
            "import sklearn.exceptions as s, dask_bid; "
            "print(isinstance(e, s.NotFittedError), isinstance(e, dask_bid.NotFittedError))")
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True,
                         check=True).stdout.decode().split()
    assert out == ["True", "True"]


def test_new_error_rows_are_documented():
    text = (DOCS / "errors.md").read_text()
    for phrase in ("X has 5 features, but BayesianID is expecting 10 features",
                   "sparse input is not supported", "feature names of X differ",
                   "this model was fitted with missing='zero'"):
        assert re.search(re.escape(phrase), text), phrase
