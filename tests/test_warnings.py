"""Warnings name the user's line (dask_bid/_warn.py), not a module of dask_bid: the
filename and line a user sees, and that ``filterwarnings(..., module=...)`` matches."""

import numpy as np
import pytest
from _support import planted

from dask_bid import BayesianID, ConvergenceWarning, bayesian_id
from dask_bid.baselines import RandomizedID
from dask_bid.engine import to_zarr

SHORT = dict(n_iter=12, burn_in=4, thin=1, random_state=0)


def _where(record, category):
    return {(w.filename, w.lineno) for w in record if issubclass(w.category, category)}


def test_the_convergence_warning_of_an_in_memory_fit_names_the_callers_line():
    A, _ = planted(40, 12, 2, 0.3, seed=0)
    with pytest.warns(ConvergenceWarning) as rec:
        line = _line() + 1
        BayesianID(2, **SHORT).fit(A)
    assert _where(rec, ConvergenceWarning) == {(__file__, line)}


def test_the_convergence_warning_of_an_engine_fit_names_the_callers_line(tmp_path):
    A, _ = planted(40, 12, 2, 0.3, seed=0)
    to_zarr(A, str(tmp_path / "A.zarr"))
    with pytest.warns(ConvergenceWarning) as rec:
        line = _line() + 1
        bayesian_id(str(tmp_path / "A.zarr"), 2, client="synchronous", **SHORT)
    assert _where(rec, ConvergenceWarning) == {(__file__, line)}


def test_a_baselines_rank_warning_names_the_callers_line():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((30, 1))
    A = np.hstack([x, 2 * x, -x, 3 * x])  # rank 1: any basis of 2 columns is deficient
    with pytest.warns(UserWarning, match="rank deficient") as rec:
        line = _line() + 1
        RandomizedID(2, random_state=0).fit(A)
    assert _where(rec, UserWarning) == {(__file__, line)}


def _line():
    import sys

    return sys._getframe(1).f_lineno


def test_a_warning_inside_a_pipeline_names_the_callers_line():
    """A fit called by scikit-learn (a Pipeline, a search) pointed its ConvergenceWarning
    at sklearn/pipeline.py, not at the user's line (docs/diagnostics.md)."""
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    A = planted(40, 12, 3, 0.1, 0)[0]
    pipe = make_pipeline(StandardScaler(), BayesianID(3, n_iter=12, burn_in=4,
                                                      random_state=0))
    with pytest.warns(ConvergenceWarning) as rec:
        line = _line() + 1
        pipe.fit(A)
    assert _where(rec, ConvergenceWarning) == {(__file__, line)}
