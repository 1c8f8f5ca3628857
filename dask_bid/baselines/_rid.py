"""Deterministic and randomized interpolative decompositions (the paper's baselines).

Both estimators select K actual columns ``J`` of ``A`` and a coefficient matrix
``W`` (K x N) with ``A ~ A[:, J] @ W`` and ``W[:, J] = I``:

* ``method="cpqr"``: column-pivoted QR of A (Businger-Golub); J = first K pivots,
  ``W = R11^{-1} [R11 R12]`` permuted back, which is the least-squares W for C.
* ``method="randomized"``: Liberty, Woolfe, Martinsson, Rokhlin, Tygert (2007):
  column-pivoted QR of a Gaussian sketch ``S = Omega A`` picks J; W by least squares.

Out-of-core input (dask array, zarr array, path to a zarr array) is read in row
blocks holding all columns; every pass is a streaming reduction whose partials
have a size independent of the number of rows (see ``_streaming``).
"""

from __future__ import annotations

import numbers
import time
from functools import partial

import numpy as np
import scipy.linalg as sla

from .._errors import (
    NonFiniteInputError,
    NotFittedError,
    ParameterError,
    sklearn_flavoured,
)
from .._warn import warn
from ..engine.inputs import as_matrix_source, check_chunks, checked_mask
from ..interface._sklearn import (
    check_features,
    checked_names,
    estimator_tags,
    feature_names_out,
    reconstruct,
    refuse_sparse,
    set_feature_names,
    set_output,
    wrap_output,
)
from ..interface._sklearn import feature_names as _frame_feature_names
from ._streaming import (
    IN_MEMORY_BLOCK_ROWS,
    check_finite_block,
    omega_rows,
    row_blocks,
    stream_reduce,
    sum_combine,
    tsqr_combine,
    tsqr_leaf,
)

__all__ = ["RandomizedID", "randomized_id", "pivoted_qr_id"]

_METHODS = ("randomized", "cpqr")
_PARAM_NAMES = ("n_components", "method", "oversampling", "n_power_iter", "random_state",
                "chunks", "allow_missing_chunks")


# ----------------------------------------------------------------------------- validation

def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _base_seed(random_state) -> int:
    """A non-negative integer seed for the tile-wise Gaussian test matrix."""
    if random_state is None:
        return int(np.random.SeedSequence().entropy)
    if _is_int(random_state):
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**63 - 1, dtype=np.int64))
    if isinstance(random_state, np.random.SeedSequence):
        # its first word, without advancing it: the same SeedSequence, the same columns
        # (as BayesianID, which takes one too)
        return int(random_state.generate_state(1, np.uint64)[0] >> np.uint64(1))
    raise AssertionError("unreachable: random_state validated before")


# ----------------------------------------------------------------------------- input access

class _Matrix:
    """A numpy matrix (in memory) or a dask matrix with one column chunk."""

    def __init__(self, A, chunks):
        src = as_matrix_source(A)
        self.kind = src.kind
        self.shape = src.shape
        if src.kind == "numpy":
            self.np = np.asarray(src.array, dtype=np.float64)
            self.da = None
        else:
            x = src.to_dask()
            x = x.rechunk({0: chunks if chunks is not None else x.chunks[0], 1: -1})
            self.np = None
            self.da = x

    @property
    def in_memory(self) -> bool:
        return self.np is not None


def _as_mask(mask, like: _Matrix, allow_missing_chunks=False):
    """The mask as a boolean numpy array, or a dask array chunked like ``like.da``
    (checked as a masked fit's: its shape, a boolean dtype, a Zarr mask's chunks)."""
    mask, mpath = checked_mask(mask, like.shape, allow_missing_chunks=allow_missing_chunks,
                               nan_hint=False)
    is_dask = not isinstance(mask, np.ndarray) and hasattr(mask, "dask")
    if like.in_memory:
        return np.asarray(mask.compute() if is_dask else mask[...], dtype=bool)
    import dask.array as da

    if not is_dask:
        mask = da.from_array(mask, chunks=like.da.chunks, lock=False, name=False)
    return mask.astype(bool).rechunk(like.da.chunks)


# ----------------------------------------------------------------------------- block leaves

def _sketch_leaf(block, r0, r1, *, seed, n_sketch, check):
    """Omega[:, r0:r1] @ A[r0:r1, :] with Omega regenerated for these rows."""
    if check:
        check_finite_block(block, r0, r1)
    return omega_rows(seed, r0, r1, n_sketch).T @ block


def _power_leaf(block, r0, r1, *, basis):
    """(A_r V)^T A_r: one block of S <- (A V)^T A, V an orthonormal basis of S's rows."""
    return (block @ basis).T @ block


def _c_tsqr_leaf(block, r0, r1, *, columns):
    return tsqr_leaf(block[:, columns], block)


def _a_tsqr_leaf(block, r0, r1):
    check_finite_block(block, r0, r1)
    return tsqr_leaf(block)


_SCORE_ADVICE = ("Pass a mask of the observed entries (score_mse(A, mask=...)) to score "
                 "the rest, or replace the infinities.")


def _sse_leaf(block, r0, r1, mask=None, *, columns, W):
    """Sum of squared residuals (and entry count) of one row block."""
    if mask is None:
        # reached first by score_mse (a fit's earlier passes check every block)
        check_finite_block(block, r0, r1, advice=_SCORE_ADVICE)
        resid = block - block[:, columns] @ W
        return float(np.einsum("ij,ij->", resid, resid)), resid.size
    # unobserved entries count as 0 where they feed C (the paper's fill), and
    # whatever they hold (NaN included) never reaches the observed residuals
    block = np.where(mask, block, 0.0)
    check_finite_block(block, r0, r1, what="A at observed (mask=True) entries")
    resid = np.where(mask, block - block[:, columns] @ W, 0.0)
    return float(np.einsum("ij,ij->", resid, resid)), int(np.count_nonzero(mask))


# ----------------------------------------------------------------------------- linear algebra

def _rank_tol(d, n):
    """Below this, a diagonal entry of a triangular factor counts as zero."""
    return n * np.finfo(float).eps * (d.max() if d.size else 0.0)


def _solve_upper(R, B, n_rows_hint):
    """Least-squares ``R^{-1} B`` for square upper-triangular R, min-norm if singular."""
    d = np.abs(np.diag(R))
    tol = _rank_tol(d, max(n_rows_hint, R.shape[1]))
    if d.size and d.min() > tol:
        return sla.solve_triangular(R, B, check_finite=False), True
    return sla.lstsq(R, B, cond=tol / d.max() if d.max() > 0 else None)[0], False


def _w_from_pivoted_r(R, perm, K, n_rows):
    """W (K x N, rows in sorted-column order) from the R, P of a pivoted QR of A."""
    N = R.shape[1]
    W_piv, full_rank = _solve_upper(R[:K, :K], R[:K, :], n_rows)
    W = np.empty((K, N))
    W[:, perm] = W_piv
    J_piv = perm[:K]
    order = np.argsort(J_piv, kind="stable")
    return np.asarray(J_piv[order], dtype=np.int64), W[order], full_rank


def _check_finite(X):
    """In memory, NaN / inf are found up front; out of core, by the first pass."""
    if X.in_memory and not np.isfinite(X.np).all():
        bad = np.argwhere(~np.isfinite(X.np))[0]
        if np.isinf(X.np[bad[0], bad[1]]):
            raise NonFiniteInputError(
                f"A contains infinity (first at row {bad[0]}, column {bad[1]}). The "
                "baseline IDs need a finite matrix: replace the infinities first.")
        raise NonFiniteInputError(
            f"A contains NaN or infinity (first at row {bad[0]}, column {bad[1]}). The "
            "baseline IDs need a complete matrix: fill missing entries first (the paper "
            "fills them with 0 after standardising), e.g. `np.nan_to_num(A, nan=0.0)`; "
            "replace any infinities."
        )


def _refuse_masked(A, scoring=False):
    """A numpy masked array's masked entries read as NaN (engine/inputs.py): said in the
    array's own terms, not as NaN it never held."""
    if not isinstance(A, np.ma.MaskedArray):
        return
    n = int(np.ma.count_masked(A))
    if n:
        fix = ("pass its mask of observed entries, score_mse(A.data, mask=~A.mask)"
               if scoring else "fill them first, e.g. A.filled(0) (the paper's fill)")
        raise NonFiniteInputError(
            f"A is a masked array with {n} masked entries, which are missing values, and "
            f"the baseline IDs need every entry: {fix}.")


def _finalize_w(W, J):
    """Post-processing of the paper (Eq. 1): the selected columns reproduce exactly."""
    W[:, J] = np.eye(len(J))
    return W


# ----------------------------------------------------------------------------- the estimator

class RandomizedID:
    """Interpolative decomposition ``A ~ A[:, J] @ W`` by randomized or pivoted QR.

    Baseline for the Bayesian ID: it selects ``n_components`` actual columns of
    ``A`` and computes the least-squares coefficients ``W`` for them, with
    ``W[:, J] = I``. Unlike the Bayesian ID nothing bounds ``|W|``; ``max_abs_w_``
    reports the largest coefficient.

    Parameters
    ----------
    n_components : int
        Number K of columns to select, ``1 <= K < N`` and ``K <= M``.
    method : {"randomized", "cpqr"}, default "randomized"
        ``"randomized"``: column-pivoted QR of a Gaussian sketch ``Omega A``
        (Liberty et al. 2007). ``"cpqr"``: deterministic column-pivoted QR of ``A``.
    oversampling : int, default 10
        Sketch rows beyond K: ``l = min(K + oversampling, M)``. Randomized only.
    n_power_iter : int, default 0
        Power (subspace) iterations ``S <- S A^T A``, with re-orthonormalisation;
        each costs one more pass over A. Randomized only.
    random_state : None, int, numpy.random.SeedSequence, Generator or RandomState
        Seed of the Gaussian test matrix. An int gives results that do not depend
        on the input kind or chunking, up to rounding (Omega is generated tile by
        tile from it).
        Randomized only.
    chunks : int or None, default None
        Rows per block when reading dask / zarr input (each block holds all
        columns). None keeps the input's row chunking. Ignored for numpy input.
    allow_missing_chunks : bool, default False
        Zarr input (a dask array reading one, a Zarr mask) with chunk files missing is
        refused
        (:class:`~dask_bid.IncompleteStoreError`): Zarr reads a lost chunk as its fill
        value, rows of zeros, without a word. Pass True for a store whose missing chunks
        are meant to be all fill value (Zarr omits such chunks by default), as
        :class:`~dask_bid.BayesianID`'s ``allow_missing_chunks``.

    Attributes
    ----------
    columns_ : ndarray of int64, shape (K,)
        Selected column indices J, sorted increasingly.
    components_ : ndarray, shape (K, N)
        Coefficients W; row k belongs to column ``columns_[k]``; ``W[:, J] = I``.
    mse_ : float
        ``||A - A[:, J] W||_F^2 / (M N)``, computed directly from A.
    max_abs_w_ : float
        ``max |W|`` (the paper's Table 2 number; may exceed 1).
    n_features_in_ : int
        N, the number of columns of A.
    n_samples_ : int
        M, the number of rows of A.
    fit_time_ : float
        Wall-clock seconds of ``fit`` (including the pass that computes ``mse_``).
    n_passes_ : int
        Number of passes over A that ``fit`` made (out-of-core input; 0 for numpy).
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        The column names of A: defined only when ``fit`` saw a DataFrame whose column
        names are all strings.

    Notes
    -----
    Passes over out-of-core A: ``cpqr`` 2 (TSQR R of A, then the residual);
    ``randomized`` 3 + ``n_power_iter`` (sketch, power iterations, TSQR of C with
    ``Q^T A`` carried along, residual). See ``docs/baselines.md``.
    """

    def __init__(self, n_components, *, method="randomized", oversampling=10, n_power_iter=0,
                 random_state=None, chunks=None, allow_missing_chunks=False):
        self.n_components = n_components
        self.method = method
        self.oversampling = oversampling
        self.n_power_iter = n_power_iter
        self.random_state = random_state
        self.chunks = chunks
        self.allow_missing_chunks = allow_missing_chunks

    # -- scikit-learn plumbing ------------------------------------------------------------
    def get_params(self, deep=True):
        """Constructor parameters, as given."""
        return {name: getattr(self, name) for name in _PARAM_NAMES}

    def set_params(self, **params):
        """Set constructor parameters (validated at the next ``fit``)."""
        for name, value in params.items():
            if name not in _PARAM_NAMES:
                raise ParameterError(
                    f"unknown parameter {name!r} for RandomizedID; valid: {', '.join(_PARAM_NAMES)}"
                )
            setattr(self, name, value)
        return self

    def __repr__(self):
        args = [repr(self.n_components)] + [
            f"{k}={getattr(self, k)!r}" for k in _PARAM_NAMES[1:]
        ]
        return f"RandomizedID({', '.join(args)})"

    # -- validation -----------------------------------------------------------------------
    def _validate(self, shape):
        M, N = shape
        K = self.n_components
        if not _is_int(K):
            raise ParameterError(
                f"n_components must be an integer, got {K!r} ({type(K).__name__}); "
                "pass the number of columns to select, e.g. n_components=10."
            )
        K = int(K)
        if not 1 <= K < N:
            raise ParameterError(
                f"n_components={K} is out of range for A with N={N} columns: an ID selects "
                f"1 <= K < N columns; choose n_components between 1 and {N - 1}."
            )
        if K > M:
            raise ParameterError(
                f"n_components={K} exceeds the number of rows M={M}: more than M columns are "
                f"always linearly dependent; choose n_components <= {M}."
            )
        if self.method not in _METHODS:
            raise ParameterError(
                f"method={self.method!r} is unknown; use one of {', '.join(map(repr, _METHODS))}."
            )
        for name in ("oversampling", "n_power_iter"):
            v = getattr(self, name)
            if not _is_int(v) or v < 0:
                raise ParameterError(f"{name} must be an integer >= 0, got {v!r}.")
        rs = self.random_state
        ok_rs = rs is None or isinstance(rs, (np.random.Generator, np.random.RandomState,
                                              np.random.SeedSequence)) or (
            _is_int(rs) and rs >= 0
        )
        if not ok_rs:
            raise ParameterError(
                f"random_state must be None, a non-negative int, a numpy SeedSequence, "
                f"Generator or RandomState, got {rs!r}."
            )
        if not isinstance(self.allow_missing_chunks, (bool, np.bool_)):
            raise ParameterError(f"allow_missing_chunks must be True or False, got "
                                 f"{self.allow_missing_chunks!r}.")
        c = self.chunks
        if c is not None and (not _is_int(c) or c < 1):
            raise ParameterError(
                f"chunks must be None or a positive int (rows per block), got {c!r}."
            )
        return K

    def _check_fitted(self):
        if not hasattr(self, "components_"):
            raise sklearn_flavoured(NotFittedError)(
                "this RandomizedID is not fitted yet; call fit(A) before using it."
            )

    def _checked_source(self, A, *, finite=False):
        """``A`` as a MatrixSource with the fitted columns (and finite numpy values if
        ``finite``)."""
        refuse_sparse(A)
        check_features(self, A)
        src = as_matrix_source(A)
        check_features(self, A, src.shape[1])
        check_chunks(src, allow_missing=bool(self.allow_missing_chunks))
        if finite and src.kind == "numpy" and not np.isfinite(src.array).all():
            bad = np.argwhere(~np.isfinite(src.array))[0]
            raise NonFiniteInputError(
                f"X contains NaN or infinity (first at row {bad[0]}, column {bad[1]}); pass "
                "a complete matrix, or a mask of the observed entries to score_mse.")
        return src

    # -- fitting ---------------------------------------------------------------------------
    def fit(self, A, y=None, *, feature_names=None):
        """Select the columns and compute W.

        Parameters
        ----------
        A : ndarray, dask array, zarr array, or str / path to a zarr array
            The M x N matrix. Must be finite everywhere.
        y : ignored
        feature_names : sequence of N str, optional
            The names of A's columns, set as ``feature_names_in_`` (as ``BayesianID``
            takes them). Without it, a DataFrame's column names, else the names a Zarr
            input records (a text file converted by the command line, with a header).

        Returns
        -------
        self
        """
        t_start = time.perf_counter()
        refuse_sparse(A)
        _refuse_masked(A)
        frame_names = _frame_feature_names(A)
        src = as_matrix_source(A)
        names, from_frame = frame_names, frame_names is not None
        if feature_names is not None:
            names = checked_names(feature_names, frame_names, src.shape[1])
        elif names is None and src.kind == "zarr":
            from ..engine.zarr_io import stored_column_names

            stored = stored_column_names(src.array)
            names = None if stored is None else np.asarray(stored, dtype=object)
        K = self._validate(src.shape)
        check_chunks(src, allow_missing=bool(self.allow_missing_chunks))
        X = _Matrix(src.array, self.chunks)
        M, N = X.shape
        _check_finite(X)
        passes = 0
        if self.method == "cpqr":
            J, W, full_rank, passes = self._fit_cpqr(X, K)
        else:
            J, W, full_rank, passes = self._fit_randomized(X, K)
        if not full_rank:
            warn(
                f"the selected columns of A are numerically rank deficient (rank < "
                f"n_components={K}); W is the minimum-norm least-squares solution and the "
                "ID is not unique. Choose a smaller n_components.",
                UserWarning,
            )
        W = _finalize_w(W, J)
        self.columns_ = J
        self.components_ = W
        self.n_features_in_ = N
        self.n_samples_ = M
        sse, count = self._sse(X, None)
        self.mse_ = sse / count
        if not np.isfinite(self.mse_):  # the squares of entries near 1e200 (it said inf)
            warn("the MSE exceeds float64's range (the squares of A's entries do): it is "
                 "reported as inf; the columns and W are exact. Rescale A (e.g. divide it "
                 "by its largest entry) for a finite MSE.", RuntimeWarning)
        self.max_abs_w_ = float(np.abs(W).max())
        self.n_passes_ = 0 if X.in_memory else passes + 1
        self.fit_time_ = time.perf_counter() - t_start
        set_feature_names(self, names, from_frame=from_frame)
        return self

    def _fit_cpqr(self, X, K):
        M, N = X.shape
        R, perm, passes = self._cpqr_factor(X)
        J, W, full_rank = _w_from_pivoted_r(R, perm, K, M)
        return J, W, full_rank, passes

    def _cpqr_factor(self, X):
        if X.in_memory:
            # mode="raw" returns the economic R without forming Q or a full M x N R copy
            _, R, perm = sla.qr(X.np, pivoting=True, mode="raw", check_finite=False)
            passes = 0
        else:
            # CPQR is invariant under left orthogonal transforms: CPQR(R) of a TSQR
            # A = Q R gives the pivots and R-factor of CPQR(A)
            R_a, _ = stream_reduce(X.da, _a_tsqr_leaf, tsqr_combine)
            R, perm = sla.qr(R_a, pivoting=True, mode="r", check_finite=False)
            passes = 1
        return R, perm, passes

    def _fit_randomized(self, X, K):
        M = X.shape[0]
        J, _, passes = self._sketch_columns(X, K)
        # least squares W = argmin ||A - C W||_F through C = Q R: W = R^{-1} Q^T A
        if X.in_memory:
            q, R = sla.qr(X.np[:, J], mode="economic", check_finite=False)
            B = q.T @ X.np
        else:
            R, B = stream_reduce(X.da, partial(_c_tsqr_leaf, columns=J), tsqr_combine)
            passes += 1
        W, full_rank = _solve_upper(R, B, M)
        return J, W, full_rank, passes

    def _sketch_columns(self, X, K):
        M, N = X.shape
        n_sketch = min(K + int(self.oversampling), M)
        seed = _base_seed(self.random_state)
        passes = 0
        if X.in_memory:
            S = np.zeros((n_sketch, N))
            for r0, r1 in row_blocks(M, IN_MEMORY_BLOCK_ROWS):
                S += _sketch_leaf(X.np[r0:r1], r0, r1, seed=seed, n_sketch=n_sketch, check=False)
        else:
            leaf = partial(_sketch_leaf, seed=seed, n_sketch=n_sketch, check=True)
            S = stream_reduce(X.da, leaf, sum_combine)
            passes += 1
        for _ in range(int(self.n_power_iter)):
            # re-orthonormalise so the power iterations do not collapse onto the
            # leading singular vector in floating point
            basis = sla.qr(S.T, mode="economic", check_finite=False)[0]
            if X.in_memory:
                S = (X.np @ basis).T @ X.np
            else:
                S = stream_reduce(X.da, partial(_power_leaf, basis=basis), sum_combine)
                passes += 1
        _, R, perm = sla.qr(S, pivoting=True, mode="raw", check_finite=False)
        return np.sort(perm[:K]).astype(np.int64), R, passes

    def _sse(self, X, mask):
        J, W = self.columns_, self.components_
        if X.in_memory:
            sse, count = 0.0, 0
            for r0, r1 in row_blocks(X.shape[0], IN_MEMORY_BLOCK_ROWS):
                m = None if mask is None else mask[r0:r1]
                s, c = _sse_leaf(X.np[r0:r1], r0, r1, m, columns=J, W=W)
                sse += s
                count += c
            return sse, count
        leaf = partial(_sse_leaf, columns=J, W=W)
        if mask is None:
            return stream_reduce(X.da, leaf, sum_combine)
        return stream_reduce(X.da, leaf, sum_combine, mask)

    # -- using the fit ---------------------------------------------------------------------
    def transform(self, A):
        """The selected columns ``C = A[:, columns_]``.

        Numpy input gives a numpy array (of its dtype); dask / zarr / path input a lazy
        float64 dask array.
        """
        self._check_fitted()
        _refuse_masked(A)
        src = self._checked_source(A, finite=True)
        if src.kind == "numpy":
            return wrap_output(self, A, np.asarray(src.array)[:, self.columns_])
        X = _Matrix(src.array, self.chunks)
        return wrap_output(self, A, X.da[:, self.columns_])

    def set_output(self, *, transform=None):
        """What ``transform`` and ``fit_transform`` return: ``"default"`` or ``"pandas"``
        (see :meth:`dask_bid.BayesianID.set_output`; ``"polars"`` is refused). Returns
        self."""
        return set_output(self, transform)

    def fit_transform(self, A, y=None, **fit_params):
        """``fit(A, **fit_params)`` then ``transform(A)`` (``feature_names=`` passes to
        fit, as in a pipeline's ``randomizedid__feature_names``)."""
        return self.fit(A, **fit_params).transform(A)

    def inverse_transform(self, C):
        """The reconstruction ``C @ components_`` (M x N).

        ``C`` (M x K) may be numpy (numpy result) or dask / zarr / path (lazy dask
        result, computed block by block when the caller asks).
        """
        self._check_fitted()
        return reconstruct(C, self.components_)

    def score_mse(self, A, mask=None):
        """Mean squared error of the fitted ID on ``A``.

        Parameters
        ----------
        A : ndarray, dask array, zarr array or path
            M x N matrix with the fitted number of columns.
        mask : array-like of bool, optional
            Same shape as A; True marks observed entries. The MSE is then the mean
            over observed entries only. Unobserved entries of A may hold anything
            (NaN included): they are read as 0 (the paper's fill) where they enter
            ``C = A[:, columns_]``. Without a mask: the mean over all entries.

        Returns
        -------
        float
        """
        self._check_fitted()
        # without a mask every entry counts: NaN is refused at once, naming the mask (the
        # row-block reader's message gave a dask fill instead)
        if mask is None:
            _refuse_masked(A, scoring=True)
        src = self._checked_source(A, finite=mask is None)
        X = _Matrix(src.array, self.chunks)
        m = None if mask is None else _as_mask(mask, X, bool(self.allow_missing_chunks))
        sse, count = self._sse(X, m)
        if count == 0:
            raise ParameterError(
                "mask selects no entries, so the MSE is undefined; pass a mask with at "
                "least one True entry (True = observed)."
            )
        return sse / count

    # -- scikit-learn protocol (see docs/sklearn.md) ----------------------------------------
    def score(self, A, y=None):
        """Negative mean squared reconstruction error, ``-score_mse(A)``.

        Greater is better, as scikit-learn's model selection (``GridSearchCV``,
        ``cross_val_score``) expects; ``-score(A_train)`` equals ``mse_`` (up to rounding).

        Parameters
        ----------
        A : ndarray, dask array, zarr array or path
            M x N matrix with the fitted number of columns; must be finite.
        y : ignored

        Returns
        -------
        float
        """
        return -self.score_mse(A)

    def get_feature_names_out(self, input_features=None):
        """Names of the columns ``transform`` returns: the input names at ``columns_``.

        Parameters
        ----------
        input_features : array-like of str, optional
            Names of the N input columns; default ``feature_names_in_`` (fitted on a
            DataFrame with string column names), else ``x0 ... x{N-1}``.

        Returns
        -------
        ndarray of object, shape (K,)
        """
        return feature_names_out(self, input_features)

    def __sklearn_tags__(self):
        return estimator_tags()


def randomized_id(A, n_components, **kwargs):
    """Fit an interpolative decomposition; functional form of :class:`RandomizedID`.

    Parameters
    ----------
    A : ndarray, dask array, zarr array or path to a zarr array
    n_components : int
    **kwargs
        Keyword parameters of :class:`RandomizedID` (``method``, ``oversampling``,
        ``n_power_iter``, ``random_state``, ``chunks``, ``allow_missing_chunks``).

    Returns
    -------
    RandomizedID
        The fitted estimator: ``columns_``, ``components_``, ``mse_``, ``max_abs_w_`` ...
    """
    return RandomizedID(n_components, **kwargs).fit(A)


def select_columns(A, n_components, **kwargs):
    """The K columns a :class:`RandomizedID` would select, without computing W.

    The part of ``fit`` that picks J: for ``method="randomized"`` one pass over A (the
    sketch, plus one per power iteration), for ``"cpqr"`` the pivoted QR (one TSQR pass
    out of core). ``fit`` spends two more passes out of core (W by least squares and
    ``mse_``); a sampler that only needs a starting basis skips them.

    Parameters
    ----------
    A : ndarray, dask array, zarr array or path to a zarr array
    n_components : int
    **kwargs
        Keyword parameters of :class:`RandomizedID`.

    Returns
    -------
    columns : ndarray of shape (n_components,)
        Sorted column indices, the same as ``RandomizedID(...).fit(A).columns_``.
    """
    est = RandomizedID(n_components, **kwargs)
    refuse_sparse(A)
    _refuse_masked(A)
    src = as_matrix_source(A)
    K = est._validate(src.shape)
    check_chunks(src, allow_missing=bool(est.allow_missing_chunks))
    X = _Matrix(src.array, est.chunks)
    _check_finite(X)
    if est.method == "cpqr":
        R, perm, _ = est._cpqr_factor(X)
        J = np.sort(perm[:K]).astype(np.int64)
    else:
        J, R, _ = est._sketch_columns(X, K)
    # fit() warns when W's triangular solve meets a rank-deficient basis; the same test
    # on the pivoted R that chose J
    d = np.abs(np.diag(R)[:K])
    if d.size < K or d.min() <= _rank_tol(d, max(X.shape[0], K)):
        warn(
            f"the selected columns of A are numerically rank deficient (rank < "
            f"n_components={K}); any basis of K columns is. Choose a smaller n_components.",
            UserWarning)
    return J


def pivoted_qr_id(A, n_components, *, chunks=None, allow_missing_chunks=False):
    """Deterministic column-pivoted QR ID: ``randomized_id(A, K, method="cpqr")``.

    Returns
    -------
    RandomizedID
        The fitted estimator.
    """
    return RandomizedID(n_components, method="cpqr", chunks=chunks,
                        allow_missing_chunks=allow_missing_chunks).fit(A)
