"""Helpers shared by several test modules (imported as ``_support``)."""

from __future__ import annotations

import numpy as np
import pytest


def planted(M, N, K, sigma, seed):
    """A = C W + noise, |W| <= 1/2 off the planted (noise-free) columns J. Returns (A, J)."""
    rng = np.random.default_rng(seed)
    J = np.sort(rng.choice(N, K, replace=False))
    C = rng.standard_normal((M, K))
    W = rng.uniform(-0.5, 0.5, (K, N))
    W[:, J] = np.eye(K)
    E = sigma * rng.standard_normal((M, N))
    E[:, J] = 0.0
    return C @ W + E, J


def assert_same_chain(a, b, mse_rtol=0.0):
    """Two BIDResults hold the same chain and summary, bitwise (the MSE to ``mse_rtol``)."""
    for f in a.trace.dtype.names:
        np.testing.assert_array_equal(a.trace[f], b.trace[f], err_msg=f"trace {f}")
    np.testing.assert_array_equal(a.columns, b.columns)
    np.testing.assert_array_equal(a.components, b.components)
    np.testing.assert_array_equal(a.components_sd, b.components_sd)
    np.testing.assert_array_equal(a.draws_columns, b.draws_columns)
    np.testing.assert_array_equal(a.draws_sigma2, b.draws_sigma2)
    np.testing.assert_array_equal(a.draws_sse, b.draws_sse)
    np.testing.assert_array_equal(a.inclusion_probability, b.inclusion_probability)
    if mse_rtol:
        assert a.mse == pytest.approx(b.mse, rel=mse_rtol)
    else:
        assert a.mse == b.mse
