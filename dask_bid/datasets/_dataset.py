"""The :class:`Dataset` result and the preprocessing shared by every loader."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._errors import InputShapeError, ParameterError

__all__ = ["Dataset", "STANDARDIZE_OPTIONS"]

#: Accepted values of the ``standardize`` option of every loader.
STANDARDIZE_OPTIONS = ("global", "column", None)


@dataclass(frozen=True, eq=False)
class Dataset:
    """A preprocessed real-world matrix with its observation mask.

    Parameters
    ----------
    name : str
        Dataset name, one of :data:`dask_bid.datasets.DATASETS`.
    data : ndarray of shape (M, N), float64
        The matrix after filtering, capping, standardisation, filling of the missing
        entries with ``preprocessing["fill_value"]`` and column copying.
    mask : ndarray of shape (M, N), bool
        True where the entry was observed in the source file.
    row_labels, col_labels : list of str
        One label per row / column of ``data``. Copied columns carry a suffix
        ``"#copy2"``, ``"#copy3"``, ... (the first block keeps the plain labels).
    raw_shape : tuple of int
        Shape of the matrix in the source file, before any filter or copy.
    observed_fraction : float
        ``mask.mean()``: observed entries over all entries after the filters (copying
        columns does not change it).
    preprocessing : dict
        The options the loader used (filters, cap, ``standardize``, ``fill_value``,
        ``n_copies``), so that a result records how it was produced.
    mean_, std_ : float or ndarray of shape (N,)
        The standardisation: ``data[mask] == (original - mean_) / std_`` on observed
        entries. Floats for ``standardize="global"`` (and ``0.0`` / ``1.0`` for
        ``standardize=None``); arrays with one value per column of ``data`` (copies
        included) for ``standardize="column"``. Use :meth:`inverse_transform` to map a
        reconstruction back to the source units.
    source : str
        Path of the file the values were read from.

    Notes
    -----
    The dataclass is frozen (its fields cannot be rebound) but the arrays are ordinary
    writable numpy arrays; copy them before modifying them in place if the result is
    shared.
    """

    name: str
    data: np.ndarray = field(repr=False)
    mask: np.ndarray = field(repr=False)
    row_labels: list[str] = field(repr=False)
    col_labels: list[str] = field(repr=False)
    raw_shape: tuple[int, int]
    observed_fraction: float
    preprocessing: dict[str, Any]
    mean_: float | np.ndarray = field(repr=False)
    std_: float | np.ndarray = field(repr=False)
    source: str = field(default="", repr=False)

    @property
    def shape(self) -> tuple[int, int]:
        """Shape ``(M, N)`` of :attr:`data` (copies included)."""
        return tuple(self.data.shape)

    @property
    def n_observed(self) -> int:
        """Number of True entries of :attr:`mask` (copies included)."""
        return int(self.mask.sum())

    def inverse_transform(self, X: Any) -> np.ndarray:
        """Map standardised values back to the units of the source file.

        Parameters
        ----------
        X : array_like of shape (..., N)
            Values on the scale of :attr:`data`, for example a reconstruction ``C @ W``.
            The last axis must match the columns of :attr:`data` when the
            standardisation is per column.

        Returns
        -------
        ndarray of float64
            ``X * std_ + mean_``. Capping, the CCLE garbage entries and the fill value
            are not undone.
        """
        X = np.asarray(X, dtype=np.float64)
        if np.ndim(self.mean_) == 1 and (X.ndim == 0 or X.shape[-1] != self.data.shape[1]):
            raise InputShapeError(
                f"inverse_transform: the last axis of X has {X.shape[-1] if X.ndim else 0} "
                f"entries but this dataset was standardised per column with "
                f"{self.data.shape[1]} columns; pass an array of shape (..., "
                f"{self.data.shape[1]})"
            )
        return X * self.std_ + self.mean_


# --------------------------------------------------------------------------- validation


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterError(
            f"{name} must be an integer >= {minimum}, got {value!r} of type {type(value).__name__}"
        )
    if value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value}")
    return int(value)


def _check_standardize(value: Any) -> str | None:
    if value is not None and (not isinstance(value, str) or value not in STANDARDIZE_OPTIONS):
        raise ParameterError(
            f"standardize must be one of 'global', 'column' or None, got {value!r}"
        )
    return value


def _check_fill_value(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterError(
            f"fill_value must be a real number (NaN allowed), got {value!r} "
            f"of type {type(value).__name__}"
        )
    value = float(value)
    if np.isinf(value):
        raise ParameterError(f"fill_value must be finite or NaN, got {value!r}")
    return value


def _check_bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool | np.bool_):
        raise ParameterError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def _check_cap(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ParameterError(f"cap must be a positive number or None, got {value!r}")
    return float(value)


# --------------------------------------------------------------------------- preprocessing


def _standardize(
    values: np.ndarray, mask: np.ndarray, how: str | None
) -> tuple[np.ndarray, float | np.ndarray, float | np.ndarray]:
    """Standardise the observed entries; return (values, mean, std).

    The population variance (ddof=0) is used so that the observed entries have variance
    exactly 1 afterwards. A spread of 0 (constant data, or a column with one observation)
    leaves the scale unchanged (std 1) instead of dividing by zero.
    """
    out = values.copy()
    if how is None:
        return out, 0.0, 1.0
    if how == "global":
        obs = values[mask]
        if obs.size == 0:
            return out, 0.0, 1.0
        mean = float(obs.mean())
        std = float(obs.std())
        if not std > 0:
            std = 1.0
        out[mask] = (obs - mean) / std
        return out, mean, std
    # per column
    n_obs = mask.sum(axis=0)
    masked = np.where(mask, values, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n_obs > 0, masked.sum(axis=0) / np.maximum(n_obs, 1), 0.0)
        centred = np.where(mask, values - mean, 0.0)
        std = np.sqrt((centred**2).sum(axis=0) / np.maximum(n_obs, 1))
    std = np.where(std > 0, std, 1.0)
    out = np.where(mask, (values - mean) / std, values)
    return out, mean, std


def _finish(
    *,
    name: str,
    values: np.ndarray,
    mask: np.ndarray,
    row_labels: list[str],
    col_labels: list[str],
    raw_shape: tuple[int, int],
    standardize: str | None,
    fill_value: float,
    n_copies: int,
    preprocessing: dict[str, Any],
    source: str,
) -> Dataset:
    """Standardise, fill, copy columns and wrap the result (shared tail of every loader)."""
    values = np.asarray(values, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    std_values, mean, std = _standardize(values, mask, standardize)
    filled = np.where(mask, std_values, fill_value)
    observed_fraction = float(mask.mean()) if mask.size else 0.0

    # The paper's "copy every column twice" is a block copy [A, A], not an interleave
    # [a1, a1, a2, a2, ...]: the first N columns are the original matrix, so
    # data[:, :N] is what n_copies=1 would return.
    data = np.ascontiguousarray(np.tile(filled, (1, n_copies)))
    full_mask = np.ascontiguousarray(np.tile(mask, (1, n_copies)))
    labels = list(col_labels)
    for c in range(2, n_copies + 1):
        labels.extend(f"{lab}#copy{c}" for lab in col_labels)
    if isinstance(mean, np.ndarray):
        mean = np.tile(mean, n_copies)
        std = np.tile(std, n_copies)

    options = dict(preprocessing)
    options.update(standardize=standardize, fill_value=fill_value, n_copies=n_copies)
    return Dataset(
        name=name,
        data=data,
        mask=full_mask,
        row_labels=list(row_labels),
        col_labels=labels,
        raw_shape=(int(raw_shape[0]), int(raw_shape[1])),
        observed_fraction=observed_fraction,
        preprocessing=options,
        mean_=mean,
        std_=std,
        source=source,
    )
