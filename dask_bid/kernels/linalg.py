"""Small dense linear algebra for the client's per-proposal work.

The exact sampler's moves take the pseudo-inverse of a K x K Gram matrix several times
an iteration (each pivot attempt, each span check, each least-squares score), for K of
a few to a few dozen. ``numpy.linalg.pinv`` spends most of its ~55 us on its
generality (stacked arrays, broadcasting, dtype dispatch); :func:`pinv_sym` does the
same floating-point operations on one real symmetric matrix in about a third of the time.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["pinv_sym", "PINV_RCOND", "cho_solve_into"]

#: singular values below this fraction of the largest are treated as zero (numpy's
#: ``pinv`` default)
PINV_RCOND = 1e-15


def pinv_sym(a):
    """Moore-Penrose pseudo-inverse of a real symmetric matrix ``a`` (K x K).

    The steps of ``numpy.linalg.pinv(a, hermitian=True)`` (numpy 2.x) on one matrix:
    the eigendecomposition, eigenvalues ordered by magnitude with their signs moved
    into V, singular values at or below ``PINV_RCOND`` times the largest set to zero,
    and V diag(1/s) U^T formed by the same products. It gives numpy's result bit for
    bit (tests/test_linalg.py), so switching to it changed no chain.
    """
    a = np.asarray(a, dtype=np.float64)
    s, u = np.linalg.eigh(a)
    sgn = np.copysign(1.0, s)
    s = np.abs(s)
    order = np.argsort(s)[::-1]
    sgn = sgn[order]
    s = s[order]
    # C-ordered, as numpy's take_along_axis gives it: the products below then run the
    # same BLAS path
    u = np.ascontiguousarray(u[:, order])
    vt = (u * sgn).T.conjugate()
    large = s > PINV_RCOND * s.max() if s.size else s > 0
    np.divide(1.0, s, where=large, out=s)
    s[~large] = 0.0
    return np.matmul(vt.T, np.multiply(s[:, None], u.T))


@njit(nogil=True, cache=True, error_model="numpy")
def cho_solve_into(L, rhs, out, m):
    """``out[:m]`` = (L L^T)^-1 ``rhs[:m]`` for the lower-triangular factor ``L[:m, :m]``
    (forward then back substitution, in place; the kernels' Cholesky solves share it, so
    each is the same sequence of operations)."""
    for i in range(m):
        t = rhs[i]
        for q in range(i):
            t -= L[i, q] * out[q]
        out[i] = t / L[i, i]
    for i in range(m - 1, -1, -1):
        t = out[i]
        for q in range(i + 1, m):
            t -= L[q, i] * out[q]
        out[i] = t / L[i, i]
