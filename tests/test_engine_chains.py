"""Several chains on a cluster run side by side and give the chains of a sequential run."""

import numpy as np
import pytest
from distributed import Client, LocalCluster

from dask_bid import bayesian_id

KW = dict(n_iter=30, burn_in=10, thin=2, random_state=11, checkpoint_every=10, n_chains=3)


@pytest.mark.timeout(300)
def test_chains_in_parallel_on_a_cluster_equal_sequential_chains():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((80, 3)) @ rng.uniform(-1, 1, (3, 40))
    A += 0.05 * rng.standard_normal(A.shape)
    seq = bayesian_id(A, 3, client="synchronous", **KW)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        par = bayesian_id(A, 3, client=client, **KW)
    assert par.trace.shape == (3, KW["n_iter"])
    for f in ("mse", "sigma2", "accepted"):
        np.testing.assert_array_equal(seq.trace[f], par.trace[f])
    np.testing.assert_array_equal(seq.draws_columns, par.draws_columns)
    np.testing.assert_array_equal(seq.components, par.components)
