"""The planted problem of ``dask-bid demo``: its settings and its matrix generator.

What the demo does (``dask_bid.interface.cli.demo.run_demo`` runs it):

1. A synthetic matrix ``A = C W + E`` (2000 x 300) whose columns ``J`` (K = 10 of them)
   are ``C`` itself (``W[:, J] = I``, no noise there); every other column mixes them
   with weights drawn uniformly in [-0.4, 0.4] (so |W| <= 1) plus Gaussian noise of
   standard deviation 0.1.
2. ``A`` is written to a local Zarr store, ``<out>/A.zarr``.
3. A ``LocalCluster`` (2 worker processes) is started, or an existing scheduler used.
4. Two chains of the GBT sampler, with the library's default settings, run on the store
   through the Dask engine; the result goes to ``<out>/result.zarr``.
5. A summary is printed (columns found against the planted ones, MSE, sigma^2, max |W|,
   times) and a four-panel figure is written to ``<out>/result.png``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DEMO_SETTINGS", "make_demo_matrix"]

#: What the demo runs (the fit's keyword arguments and the matrix's shape). Every draw
#: is kept (thin 1): its chains then pass the convergence check (ESS >= 100 a chain).
DEMO_SETTINGS = dict(n_rows=2000, n_cols=300, n_components=10, w_scale=0.4, noise=0.1,
                     n_iter=200, burn_in=50, thin=1, n_chains=2, seed=0)


def make_demo_matrix(n_rows=2000, n_cols=300, n_components=10, *, w_scale=0.4, noise=0.1,
                     seed=0):
    """A low-rank matrix with planted interpolative columns.

    Parameters
    ----------
    n_rows, n_cols, n_components : int
        M, N and K.
    w_scale : float
        Off-basis weights are uniform on [-w_scale, w_scale] (at most 1 for an ID).
    noise : float
        Standard deviation of the Gaussian noise added to the non-planted columns.
    seed : int

    Returns
    -------
    A : ndarray (n_rows, n_cols)
    planted : ndarray (n_components,)
        Sorted indices of the planted columns (``A[:, planted]`` is noise-free).
    W : ndarray (n_components, n_cols)
        The generating weights, ``W[:, planted] = I``.
    """
    rng = np.random.default_rng(seed)
    planted = np.sort(rng.choice(n_cols, n_components, replace=False))
    C = rng.standard_normal((n_rows, n_components))
    W = rng.uniform(-w_scale, w_scale, (n_components, n_cols))
    W[:, planted] = np.eye(n_components)
    E = noise * rng.standard_normal((n_rows, n_cols))
    E[:, planted] = 0.0
    return C @ W + E, planted, W
