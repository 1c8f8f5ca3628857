"""kernels/linalg.py: the client's pseudo-inverse of a small symmetric Gram matrix."""

import numpy as np
import pytest

from dask_bid.kernels.linalg import pinv_sym

# numpy 2.x's pinv(hermitian=True) is the sequence of operations pinv_sym repeats, so the
# two agree bit for bit there (the claim that the switch changed no chain); other numpy
# versions are held to the pseudo-inverse's definition only
NUMPY2 = int(np.__version__.split(".")[0]) >= 2


def _grams(K, rng):
    X = rng.standard_normal((K + 3, K))
    yield X.T @ X  # positive definite
    if K > 1:
        Y = X.copy()
        Y[:, -1] = Y[:, 0]  # two equal columns: singular
        yield Y.T @ Y
        yield np.asfortranarray(X.T @ X)  # another memory layout
        idx = list(range(1, K))
        yield (X.T @ X)[np.ix_(idx, idx)]  # the span check's submatrix
    yield (X.T @ X) * 1e-9
    yield (X.T @ X) * 1e9
    S = rng.standard_normal((K, K))
    yield S + S.T  # indefinite: eigenvalues of both signs


@pytest.mark.parametrize("K", [1, 2, 3, 5, 10, 20, 40])
def test_pinv_sym_is_numpys_pinv(K):
    rng = np.random.default_rng(K)
    for _ in range(30):
        for G in _grams(K, rng):
            P = pinv_sym(G)
            ref = np.linalg.pinv(G, hermitian=True)
            if NUMPY2:
                np.testing.assert_array_equal(P, ref)
            else:
                np.testing.assert_allclose(P, ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max())
            # the Moore-Penrose conditions (a pseudo-inverse whatever numpy does)
            scale = np.abs(G).max() * np.abs(P).max()
            np.testing.assert_allclose(G @ P @ G, G, atol=1e-8 * scale * np.abs(G).max())
            np.testing.assert_allclose(P @ G @ P, P, atol=1e-8 * scale * np.abs(P).max())


def test_pinv_sym_of_zero_and_empty_matrices():
    assert pinv_sym(np.zeros((0, 0))).shape == (0, 0)
    np.testing.assert_array_equal(pinv_sym(np.zeros((3, 3))), np.zeros((3, 3)))
    np.testing.assert_array_equal(pinv_sym(np.array([[4.0]])), [[0.25]])
