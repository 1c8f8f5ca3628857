"""Reference: the paper's aggressive GBT sampler in its own X (M x N), Y (N x N) form.

A direct implementation of Algorithm 2 of Lu (2022): Y is N x N, X is A with the
columns outside J zeroed; each W sweep visits the N rows of Y one at a time,
vectorised over the row's N entries, with a maintained residual R = A - X Y. It is
the yardstick for ``bench_sampler.py``; it is not used by the package.

``skip_zero_rows=True`` is the one obvious shortcut: rows of Y whose column of X is
zero only see their prior, so their update needs no pass over R.
"""

from __future__ import annotations

import numpy as np

from dask_bid.kernels.truncnorm import sample_gtn


class ReferenceXY:
    def __init__(self, A, K, *, sigma2=1.0, a=-1.0, b=1.0, alpha=0.1, beta=1.0, mu=0.0,
                 tau=1.0, seed=0, skip_zero_rows=False):
        self.A = np.asarray(A, dtype=np.float64)
        M, N = self.A.shape
        self.rng = np.random.default_rng(seed)
        self.K, self.a, self.b = K, a, b
        self.alpha, self.beta, self.mu, self.tau = alpha, beta, mu, tau
        self.skip = skip_zero_rows
        self.r1 = np.zeros(N, dtype=bool)
        self.r1[self.rng.choice(N, K, replace=False)] = True
        self.Y1 = sample_gtn(self.rng, mu, tau, a, b, size=(N, N))
        self.X1 = np.where(self.r1, self.A, 0.0)
        self.R1 = self.A - self.X1 @ self.Y1
        self.r2, self.Y2, self.X2, self.R2 = None, None, None, None
        self.sigma2 = sigma2

    def _sweep(self, X, Y, R):
        sq = np.einsum("ij,ij->j", X, X)
        for k in range(Y.shape[0]):
            if self.skip and sq[k] == 0.0:
                Y[k] = sample_gtn(self.rng, self.mu, self.tau, self.a, self.b, size=Y.shape[1])
                continue
            x = X[:, k]
            tt = sq[k] / self.sigma2 + self.tau
            old = Y[k].copy()
            mt = ((x @ R + sq[k] * old) / self.sigma2 + self.tau * self.mu) / tt
            Y[k] = sample_gtn(self.rng, mt, tt, self.a, self.b)
            R -= np.outer(x, Y[k] - old)

    def iteration(self):
        rng = self.rng
        if self.r2 is not None:
            d = (np.sum(self.R2**2) - np.sum(self.R1**2)) / (2 * self.sigma2)
            if rng.random() < 1.0 / (1.0 + np.exp(np.clip(d, -700, 700))):
                self.r1, self.Y1, self.X1, self.R1 = self.r2, self.Y2, self.X2, self.R2
        J = np.flatnonzero(self.r1)
        I = np.flatnonzero(~self.r1)
        j, i = rng.choice(J), rng.choice(I)
        self.r2 = self.r1.copy()
        self.r2[j], self.r2[i] = False, True
        self.X2 = self.X1.copy()
        self.X2[:, j] = 0.0
        self.X2[:, i] = self.A[:, i]
        self.Y2 = self.Y1.copy()
        # maintained residual: R2 = R1 + x_j y_j^T - a_i y_i^T
        self.R2 = self.R1 + np.outer(self.X1[:, j], self.Y1[j]) - np.outer(self.A[:, i],
                                                                            self.Y1[i])
        sse = np.sum(self.R1**2)
        M, N = self.A.shape
        self.sigma2 = (0.5 * sse + self.beta) / rng.standard_gamma(0.5 * M * N + self.alpha)
        self._sweep(self.X1, self.Y1, self.R1)
        self._sweep(self.X2, self.Y2, self.R2)
        return np.sum(self.R1**2) / (M * N)
