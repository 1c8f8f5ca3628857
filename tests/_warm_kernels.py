"""Compile the package's numba kernels into the cache before the test processes start.

``python tests/_warm_kernels.py PART`` runs small fits that reach the kernels of one part:
the two parts together cover what most tests call, and take about as long as each other
to compile. ``conftest.py`` runs both at once (one a core) before pytest-xdist starts its
processes: with an empty cache (a fresh install, CI's fresh clone) each of the two test
processes, and every cluster worker a test starts, otherwise compiled every kernel it
used for itself, about half a minute each. With a warm cache a part only loads it.

Every fit here is a real one; nothing is asserted (the tests do that).
"""

from __future__ import annotations

import sys
import warnings


def _dense():
    import numpy as np

    from dask_bid import PAPER_SETTINGS, RandomizedID, bayesian_id

    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 3)) @ rng.uniform(-1, 1, (3, 12))
    A += 0.1 * rng.standard_normal(A.shape)
    kw = dict(n_iter=12, burn_in=4, random_state=0, client="synchronous")
    for model in ("gbt", "gbtn"):
        bayesian_id(A, 3, model=model, **kw)
    bayesian_id(A, 3, **{**PAPER_SETTINGS, **kw})
    for sampler in ("plain", "search"):
        bayesian_id(A, 3, sampler=sampler, **kw)
    RandomizedID(3, random_state=0).fit(A)


def _masked_and_sparse():
    import numpy as np
    import scipy.sparse as sp

    from dask_bid import bayesian_id

    rng = np.random.default_rng(1)
    A = rng.standard_normal((30, 3)) @ rng.uniform(-1, 1, (3, 12))
    A[rng.random(A.shape) < 0.2] = np.nan
    kw = dict(n_iter=12, burn_in=4, random_state=0, client="synchronous")
    for model in ("gbt", "gbtn"):
        bayesian_id(A, 3, missing="mask", model=model, **kw)
    S = sp.random(40, 12, density=0.4, random_state=2, format="csr")
    bayesian_id(S, 3, missing="mask", **kw)


PARTS = (_dense, _masked_and_sparse)

if __name__ == "__main__":
    warnings.simplefilter("ignore")  # convergence of 12-iteration chains: not the point
    PARTS[int(sys.argv[1])]()
