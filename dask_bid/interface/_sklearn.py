"""The scikit-learn estimator protocol, shared by ``BayesianID`` and ``RandomizedID``.

scikit-learn's tools (``clone``, ``Pipeline``, ``GridSearchCV``, ``check_estimator``) use
an estimator through its methods only: ``get_params`` / ``set_params``, ``fit(X, y=None)``,
``transform``, ``score``, ``get_feature_names_out`` and ``__sklearn_tags__``. The estimators
implement that protocol without inheriting from ``sklearn.base.BaseEstimator``, so that
``import dask_bid`` (done by every Dask worker and every ``dask-bid`` command) does not
import scikit-learn, which costs more than half a second (it imports pandas and
scipy.stats). scikit-learn is imported here only when one of its own functions asks for
the tags, and it is then already loaded. See ``docs/sklearn.md``.
"""

from __future__ import annotations

import os

import numpy as np

from .._errors import InputDTypeError, InputShapeError
from .._warn import warn

__all__ = ["refuse_sparse", "refuse_non_finite", "feature_names", "checked_names",
           "sample_names", "set_feature_names", "check_features",
           "feature_names_out", "estimator_tags", "n_features_message", "reconstruction_mse",
           "reconstruct", "is_scipy_sparse", "sparse_selected_columns",
           "sparse_reconstruction_mse",
           "set_output", "wrap_output", "EXPECTED_FAILED_CHECKS"]

#: What ``set_output(transform=...)`` takes (scikit-learn's "polars" is not offered: it
#: would be untested here, polars not being a dependency of the tests)
OUTPUT_CHOICES = ("default", "pandas")

#: Rows per block when the in-memory reconstruction error is summed (bounds the residual
#: temporary to this many rows)
SCORE_BLOCK_ROWS = 4096


def _check_output_kind(kind):
    if kind not in OUTPUT_CHOICES:
        from .._errors import ParameterError

        more = (" (for polars: 'pandas', then polars.from_pandas)" if kind == "polars"
                else "")
        raise ParameterError(f"set_output(transform={kind!r}): choose one of "
                             f"{', '.join(map(repr, OUTPUT_CHOICES))} or None{more}.")


def set_output(est, transform=None):
    """``est.set_output(transform=...)``: the container ``transform`` and
    ``fit_transform`` return, as scikit-learn's ``set_output`` API (kept in the attribute
    scikit-learn reads and ``clone`` copies, ``_sklearn_output_config``). None leaves it
    unchanged."""
    if transform is None:
        return est
    _check_output_kind(transform)
    config = dict(getattr(est, "_sklearn_output_config", None) or {})
    config["transform"] = transform
    est._sklearn_output_config = config
    return est


def _output_kind(est) -> str:
    """The estimator's own setting, else scikit-learn's global ``transform_output`` when
    scikit-learn is loaded (never imported here), else "default"."""
    import sys

    own = (getattr(est, "_sklearn_output_config", None) or {}).get("transform")
    if own is not None:
        return own
    sklearn = sys.modules.get("sklearn")
    if sklearn is not None and hasattr(sklearn, "get_config"):
        return sklearn.get_config().get("transform_output", "default")
    return "default"


def wrap_output(est, A, C):
    """``transform``'s result ``C`` in the container ``set_output`` asked for: for
    "pandas" a DataFrame with A's index (a DataFrame's) and the selected columns' names
    (``get_feature_names_out``), a lazy dask ``C`` computed first (a container holds
    values); ``C`` as it is for "default"."""
    kind = _output_kind(est)
    if kind == "default":
        return C
    _check_output_kind(kind)  # scikit-learn's global setting may ask for polars
    try:
        import pandas as pd
    except ImportError as exc:
        raise ImportError('set_output(transform="pandas") needs pandas: pip install '
                          'pandas.') from exc
    if hasattr(C, "compute"):
        C = C.compute()
    index = getattr(A, "index", None) if hasattr(A, "iloc") else None
    if index is not None and len(index) != np.shape(C)[0]:
        index = None
    return pd.DataFrame(np.asarray(C), index=index,
                        columns=[str(n) for n in est.get_feature_names_out()])


def refuse_sparse(A, *, mask_hint=False):
    """Raise ``InputDTypeError`` for a scipy.sparse matrix or array.

    ``np.asarray`` would wrap it in a 0-D object array and the error would talk about
    dimensions; the ID needs every entry (``A[:, J]`` and the Gram matrix are dense).
    ``mask_hint``: the estimator fits sparse input with ``missing="mask"`` (its stored
    entries are the observed ones, docs/sparse.md); the message says so.
    """
    if type(A).__module__.startswith("scipy.sparse"):
        if mask_hint:
            raise InputDTypeError(
                f"A is a scipy.sparse {type(A).__name__}; sparse input is not supported with "
                "missing='zero': its unstored entries are unobserved, not zeros. Pass "
                "missing='mask' to fit its stored entries as the observed ones, or a dense "
                "matrix (`A.toarray()`).")
        raise InputDTypeError(
            f"A is a scipy.sparse {type(A).__name__}; sparse input is not supported: the ID "
            "reads every entry. Pass a dense matrix (`A.toarray()`), or a dask / Zarr array "
            "for a matrix larger than memory.")


def _frame_labels(A, axis):
    """A pandas-like ``A``'s column names (``"columns"``) or index (``"index"``) as an
    object array when every label is a string, else None (scikit-learn too keeps names
    only when they are all strings; a default RangeIndex names nothing)."""
    labels = getattr(A, axis, None)
    if labels is None or not hasattr(A, "iloc"):
        return None
    names = np.asarray(list(labels), dtype=object)
    if names.size == 0 or not all(isinstance(n, str) for n in names):
        return None
    return names


def feature_names(A):
    """Column names of a pandas-like ``A`` (all strings) as an object array, else None;
    names of mixed types (strings and others) are refused, as scikit-learn refuses them
    (they were dropped without a word)."""
    names = _frame_labels(A, "columns")
    if names is None and hasattr(A, "iloc") and getattr(A, "columns", None) is not None:
        kinds = {type(n) for n in A.columns}
        if str in kinds and len(kinds) > 1:
            shown = ", ".join(sorted(t.__name__ for t in kinds))
            raise TypeError(
                f"the column names of X mix strings with other types ({shown}); feature "
                "names are kept only when all are strings: convert them with "
                "X.columns = X.columns.astype(str), or drop them.")
    return names


def checked_names(given, frame_names, n, what="feature_names", axis="columns",
                 frame="column names"):
    """``feature_names=`` (``sample_names=``): one string per column (row) of A, agreeing
    with a DataFrame's own column names (index)."""
    from .._attrs import COLUMN_NAMES_MAX
    from .._errors import ParameterError

    one = axis[:-1]
    if isinstance(given, str) or not hasattr(given, "__len__"):
        raise ParameterError(f"{what} must be a sequence of {n} strings, one per {one} of "
                             f"A, got {type(given).__name__}.")
    names = list(given)
    if len(names) != n:
        raise ParameterError(f"{what} has {len(names)} names, but A has {n} {axis}: pass "
                             f"one name per {one}.")
    bad = [i for i, x in enumerate(names) if not isinstance(x, str)]
    if bad:
        raise ParameterError(f"{what} must be strings; entry {bad[0]} is "
                             f"{names[bad[0]]!r} ({type(names[bad[0]]).__name__}).")
    if n > COLUMN_NAMES_MAX:
        raise ParameterError(f"{what}: names are kept for at most {COLUMN_NAMES_MAX:,} "
                             f"{axis} (they live in the result's JSON metadata); A has "
                             f"{n:,}. Drop {what}.")
    if frame_names is not None and list(frame_names) != names:
        raise ParameterError(f"A is a DataFrame whose {frame} differ from {what}: pass one "
                             f"of them (rename the DataFrame's {frame}, or drop {what}).")
    return np.asarray(names, dtype=object)


def sample_names(A):
    """Row names of a pandas-like ``A`` (its index, all strings), else None."""
    return _frame_labels(A, "index")


def result_names(res):
    """A fit result's column names (``BIDResult.feature_names``) as ``feature_names_in_``
    holds them, or None."""
    names = getattr(res, "feature_names", None)
    return None if names is None else np.asarray(list(names), dtype=object)


def set_feature_names(est, names, from_frame=True):
    """Set ``feature_names_in_`` after a fit (removed when the new input has none);
    ``from_frame``: they are a DataFrame's columns (not ``feature_names=`` or a store's
    recorded names: a later numpy ``transform`` is then no DataFrame without names)."""
    est._names_from_frame = bool(from_frame)
    if names is None:
        est.__dict__.pop("feature_names_in_", None)
    else:
        est.feature_names_in_ = names


def n_features_message(name, n_got, n_fitted):
    """The one-line refusal of a matrix with another number of columns.

    Worded as scikit-learn's (``X has 1 features, but ... is expecting 4 features``).
    """
    return (f"X has {n_got} features, but {name} is expecting {n_fitted} features as input "
            f"(the number of columns of the matrix it was fitted on); pass a matrix with "
            f"those {n_fitted} columns.")


def check_features(est, A, n_got=None):
    """Refuse ``A`` if its number of columns (or its column names) differ from the fit's.

    ``n_got=None``: the columns of a 2-D in-memory ``A`` (anything else passes), so that a
    matrix with 1 column is refused for its count, before the input checks refuse it for
    having fewer than 2.
    """
    name = type(est).__name__
    if n_got is None:
        if isinstance(A, (str, os.PathLike)):
            return
        shape = getattr(A, "shape", None)
        if shape is None:
            try:
                shape = np.shape(A)
            except Exception:  # ragged lists: the input checks say what is wrong
                return
        if len(shape) != 2:
            return
        n_got = int(shape[1])
        first = True  # the call on A as given (the second one has its column count)
    else:
        first = False
    if n_got != est.n_features_in_:
        raise InputShapeError(n_features_message(name, n_got, est.n_features_in_))
    fitted = getattr(est, "feature_names_in_", None)
    names = feature_names(A)
    if first and (fitted is None) != (names is None) and not type(A).__module__.startswith(
            "zarr"):
        # scikit-learn's warnings, word for word: names given on one side only (a store
        # or path carries its names in its own metadata: not judged here)
        if names is None:
            # only after a DataFrame: names given as feature_names= or read from a store
            # with a numpy matrix are no DataFrame's columns lost on the way
            if getattr(est, "_names_from_frame", True):
                warn(f"X does not have valid feature names, but {name} was fitted with "
                     "feature names", UserWarning)
        else:
            warn(f"X has feature names, but {name} was fitted without feature names",
                 UserWarning)
    if fitted is not None and names is not None and not np.array_equal(names, fitted):
        bad = [f"{a!r} != {b!r}" for a, b in zip(names, fitted, strict=True) if a != b][:3]
        raise InputShapeError(
            f"the feature names of X differ from those {name} was fitted on "
            f"({', '.join(bad)}); pass the columns in the order of feature_names_in_.")


def feature_names_out(est, input_features=None):
    """Names of the selected columns: ``input_features[columns_]``.

    ``transform`` returns ``A[:, columns_]``, so the output features are input features
    (like a scikit-learn feature selector). ``input_features`` defaults to
    ``feature_names_in_`` (set when fitted on a DataFrame with string column names),
    else ``x0, x1, ...``.
    """
    est._check_fitted()
    n = est.n_features_in_
    fitted = getattr(est, "feature_names_in_", None)
    if input_features is None:
        names = fitted if fitted is not None else np.asarray(
            [f"x{i}" for i in range(n)], dtype=object)
    else:
        names = np.asarray(input_features, dtype=object)
        if names.ndim != 1 or names.shape[0] != n:
            raise InputShapeError(
                f"input_features has {names.size} names, but {type(est).__name__} was "
                f"fitted on {n} features; pass one name per column, or None.")
        if fitted is not None and not np.array_equal(names, fitted):
            raise InputShapeError(
                "input_features differ from feature_names_in_ (the DataFrame columns the "
                "model was fitted on); pass None or the same names.")
    return np.asarray(names, dtype=object)[est.columns_]


def estimator_tags(*, allow_nan=False, sparse=False):
    """The scikit-learn ``Tags`` of an unsupervised column-selecting transformer.

    Dense 2-D float input (no strings or categories; sparse only where ``sparse``: the
    masked ``BayesianID.fit``), no target, fit required; ``transform`` returns columns of
    its input, so it keeps float64 and float32.
    """
    from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

    return Tags(
        estimator_type=None,
        target_tags=TargetTags(required=False),
        transformer_tags=TransformerTags(preserves_dtype=["float64", "float32"]),
        input_tags=InputTags(two_d_array=True, sparse=sparse, allow_nan=allow_nan),
        requires_fit=True,
    )


def refuse_non_finite(X, masked, name="X"):
    """Refuse NaN or infinity in a numpy ``X`` given to a ``missing="zero"`` model, and
    infinity given to a ``missing="mask"`` one (NaN is its missing entry), as ``fit``
    does: ``transform`` and ``score``'s X, ``inverse_transform``'s C."""
    from .._errors import NonFiniteInputError

    if not masked:
        n_bad = int(np.count_nonzero(~np.isfinite(X)))
        if n_bad:
            raise NonFiniteInputError(
                f"{name} contains {n_bad} NaN or infinite entries, and this model was fitted "
                "with missing='zero'. Fill them as for fit, or fit with missing='mask' to "
                "treat NaN as missing.")
        return
    n_inf = int(np.count_nonzero(np.isinf(X)))
    if n_inf:
        raise NonFiniteInputError(
            f"{name} contains {n_inf} infinite entries; missing='mask' treats only NaN as "
            "missing. Replace the infinities (by NaN to mark them missing).")


def reconstruct(C, W, *, masked=False):
    """``C @ W`` for ``inverse_transform``: ``C`` (M x K) numpy (numpy result) or dask /
    Zarr / path (a lazy dask result), refused unless it is 2-D with W's K columns.

    ``masked`` (a ``missing="mask"`` model): NaN in ``C`` is a missing entry and counts
    as 0, as in the fit and in ``score``, so a row missing one basis entry is still
    reconstructed (filled), not turned into a row of NaN."""
    from ..engine.inputs import open_zarr_array

    K = W.shape[0]
    if isinstance(C, (str, os.PathLike)):
        C = open_zarr_array(C)
    is_dask = hasattr(C, "dask") and hasattr(C, "chunks") and hasattr(C, "compute")
    if not is_dask and type(C).__module__.startswith("zarr"):
        import dask.array as da

        C = da.from_array(C, chunks=C.chunks, lock=False, name=False)
        is_dask = True
    if is_scipy_sparse(C):
        raise InputDTypeError(f"C is a scipy.sparse {type(C).__name__}: pass a dense C "
                              "(`C.toarray()`), as transform(A) returns it.")
    if not is_dask:
        if isinstance(C, np.ma.MaskedArray):  # its masked entries are missing: NaN
            n_masked = int(np.ma.count_masked(C))
            if n_masked and not masked:
                from .._errors import NonFiniteInputError

                raise NonFiniteInputError(
                    f"C is a masked array with {n_masked} masked entries, which are missing "
                    "values, and this model was fitted with missing='zero': fill them "
                    "first, e.g. C.filled(0).")
            C = C.astype(np.float64).filled(np.nan) if n_masked else C.data
        else:
            from ..engine.inputs import _frame_of_numbers

            if _frame_of_numbers(C):
                # pandas' nullable dtypes (Float64, Int64): pd.NA is NaN, as for fit and
                # transform (np.asarray gave an object matrix, refused for its dtype)
                C = C.to_numpy(dtype=np.float64, na_value=np.nan)
        try:
            C = np.asarray(C)
        except (ValueError, TypeError) as exc:  # ragged nested lists
            raise InputShapeError(f"C cannot be read as a matrix ({exc}); pass a 2-D "
                                  "array, as transform(A) returns it.") from exc
    # the dtypes fit and transform take (float, integer, boolean): np.asarray(C, float)
    # parsed strings such as '1.5', dropped an imaginary part, and read None as NaN
    from ..engine.inputs import check_float_dtype

    check_float_dtype(C.dtype)
    if not is_dask:
        C = C.astype(np.float64, copy=False)
        refuse_non_finite(C, masked, "C")
    if C.ndim != 2 or C.shape[1] != K:
        raise InputShapeError(
            f"C must be a 2-D matrix with n_components={K} columns, got shape "
            f"{tuple(C.shape)}; pass the output of transform(A)."
        )
    if is_dask:
        C = C.rechunk({1: -1}).astype(np.float64)
    if masked:
        C = C.map_blocks(np.nan_to_num, nan=0.0, posinf=np.inf, neginf=-np.inf) if is_dask \
            else np.where(np.isnan(C), 0.0, C)
    return C @ W


def is_scipy_sparse(A) -> bool:
    return type(A).__module__.startswith("scipy.sparse")


def sparse_selected_columns(A, columns):
    """``A[:, columns]`` of a scipy.sparse ``A`` as a dense (M, K) float64 array, NaN at
    the unstored entries (unobserved, as the masked fit reads them)."""
    from ..engine.sparse_store import csc_parts

    return _selected(csc_parts(A), columns)  # NaN dropped, infinity and duplicates refused


def _selected(parts, columns):
    indptr, rows, vals, (M, _) = parts
    C = np.full((M, len(columns)), np.nan)
    for k, j in enumerate(columns):
        lo, hi = int(indptr[j]), int(indptr[j + 1])
        C[rows[lo:hi], k] = vals[lo:hi]
    return C


def sparse_reconstruction_mse(A, columns, W, *, block=1 << 20):
    """The masked reconstruction error of a scipy.sparse ``A`` over its stored entries
    (the observed ones; unstored entries count as 0 in ``A[:, J]``), as
    :func:`reconstruction_mse` of the dense matrix with NaN at the unstored entries."""
    from ..engine.sparse_store import csc_parts

    parts = csc_parts(A)
    indptr, rows, vals, (M, N) = parts
    C0 = np.nan_to_num(_selected(parts, columns), nan=0.0)
    cols = np.repeat(np.arange(N, dtype=np.int64), np.diff(indptr))
    sse = 0.0
    for s in range(0, rows.size, block):  # bounds the (entries x K) temporaries
        r, c = rows[s:s + block], cols[s:s + block]
        pred = np.einsum("ik,ki->i", C0[r], W[:, c])
        sse += float(np.sum((vals[s:s + block] - pred) ** 2))
    return sse / rows.size if rows.size else float("nan")


def reconstruction_mse(src, columns, W, *, masked=False):
    """``||A - A[:, J] W||^2 / (M N)`` for a MatrixSource (the mean over observed entries
    when ``masked``: NaN marks a missing entry and counts as 0 in ``A[:, J]``).

    Numpy input is summed in row blocks; dask / Zarr input by one dask reduction.
    """
    if src.kind == "numpy":
        X = np.asarray(src.array)
        sse, count = 0.0, 0
        for r0 in range(0, X.shape[0], SCORE_BLOCK_ROWS):
            block = np.asarray(X[r0:r0 + SCORE_BLOCK_ROWS], dtype=np.float64)
            if masked:
                obs = ~np.isnan(block)
                block = np.where(obs, block, 0.0)
                resid = np.where(obs, block - block[:, columns] @ W, 0.0)
                count += int(np.count_nonzero(obs))
            else:
                resid = block - block[:, columns] @ W
                count += resid.size
            sse += float(np.einsum("ij,ij->", resid, resid))
    else:
        import dask
        import dask.array as da

        x = src.to_dask()
        if masked:
            obs = ~da.isnan(x)
            x = da.where(obs, x, 0.0)
            resid = da.where(obs, x - x[:, columns] @ W, 0.0)
            count = obs.sum()
        else:
            resid = x - x[:, columns] @ W
            count = resid.size
        sse, count = dask.compute((resid ** 2).sum(), count)
        sse, count = float(sse), int(count)
    if count == 0:
        from .._errors import InputShapeError

        raise InputShapeError("X has no observed (non-NaN) entry, so its reconstruction "
                              "error is undefined; pass a matrix with observed entries.")
    if not np.isfinite(sse) and _holds_non_finite(src, masked):
        from .._errors import NonFiniteInputError

        # a dask or Zarr X is only read here: its NaN gave a NaN score without a word
        if masked:  # NaN is the missing entry there: only an infinity is at fault
            raise NonFiniteInputError(
                "X contains infinite entries, so its reconstruction error is not a number; "
                "missing='mask' treats only NaN as missing. Replace the infinities (by NaN "
                "to mark them missing).")
        raise NonFiniteInputError(
            "X contains NaN or infinite entries, and this model was fitted with "
            "missing='zero', so its reconstruction error is not a number. Fill them as for "
            "fit, or fit with missing='mask' to treat NaN as missing.")
    return sse / count


def _holds_non_finite(src, masked) -> bool:
    """Whether X itself holds what made its error non-finite (NaN, or with ``masked`` an
    infinity), read again only on that path: a finite X whose squares overflow (entries
    near 1e200) has an infinite error, as ``mse_`` is then, not a refusal naming NaN."""
    if src.kind == "numpy":
        X = np.asarray(src.array)
        return bool(np.isinf(X).any() if masked else not np.isfinite(X).all())
    x = src.to_dask()
    return bool((abs(x) == np.inf).any().compute() if masked else
                (~(abs(x) < np.inf)).any().compute())


#: The checks of ``sklearn.utils.estimator_checks.check_estimator`` that do not apply to
#: ``BayesianID`` and ``RandomizedID``, with the reason; pass it as
#: ``check_estimator(est, expected_failed_checks=EXPECTED_FAILED_CHECKS)`` (scikit-learn
#: >= 1.6). ``tests/test_sklearn.py`` checks that each of them still fails, and why.
EXPECTED_FAILED_CHECKS = {
    "check_dtype_object": (
        "object arrays are refused (InputDTypeError) instead of converted element by element: "
        "scikit-learn would parse strings such as '1.5' silently, and a Zarr or dask object "
        "array cannot be streamed as numbers; convert with A.astype(float)."),
    "check_complex_data": (
        "complex input is refused as a wrong dtype (InputDTypeError, a TypeError, 'input dtype "
        "complex128 is not supported'), the same for numpy, dask and Zarr input, where the "
        "check wants a ValueError 'Complex data not supported'; its 1-column matrix is refused "
        "first for its column count (an ID needs N >= 2)."),
}
