"""Recovery of a planted interpolative decomposition.

Data: A = C_true W_true + noise with |W_true| <= 1/2 and W_true[:, J] = I; the
planted columns are noise-free so that A[:, J] = C_true and the model is exactly
the generating process for the other columns. (The K basis columns themselves are
fitted exactly, which biases sigma^2 by a factor of about 1 - K/N; the sigma^2 test
takes N large enough for that to be far below the credible interval's width.)
"""

import numpy as np
import pytest

from dask_bid import BayesianID


def planted(M, N, K, sigma, seed, low=0.0):
    """|W_true| entries in [low, 1/2] with random signs: low > 0 makes every other
    column a poor substitute for a planted one (it would need coefficients >= 1/low)."""
    rng = np.random.default_rng(seed)
    J = np.sort(rng.choice(N, K, replace=False))
    C = rng.standard_normal((M, K))
    if low > 0:
        W = rng.uniform(low, 0.5, (K, N)) * rng.choice([-1.0, 1.0], (K, N))
    else:
        W = rng.uniform(-0.5, 0.5, (K, N))
    W[:, J] = np.eye(K)
    E = sigma * rng.standard_normal((M, N))
    E[:, J] = 0.0
    return C @ W + E, J, W


@pytest.mark.parametrize("model", ["gbt", "gbtn"])
def test_planted_columns_found_from_random_start(model):
    # a random start (the paper's): the sampler's warm-up search leaves it, the
    # exact chain then stays on the planted basis; moderate noise keeps the swap
    # landscape free of the local optima that trap a search at very low noise
    A, J, _ = planted(M=100, N=20, K=3, sigma=0.3, seed=0)
    est = BayesianID(3, model=model, init="random", search_warmup="auto",
                     random_state=0).fit(A)
    np.testing.assert_array_equal(est.columns_, J)
    assert np.all(est.inclusion_probability_[J] > 0.9)


def test_sigma2_in_credible_interval_and_columns_kept():
    sigma = 0.3
    A, J, W_true = planted(M=50, N=1000, K=2, sigma=sigma, seed=2, low=0.3)
    # 200 draws after the default burn-in of 200 (the suite's time, README): sigma^2's
    # 95 % interval and W's posterior sd are estimated well from them
    est = BayesianID(2, init="cpqr", n_iter=400, random_state=0).fit(A)
    assert np.all(est.inclusion_probability_[J] > 0.9)
    draws = est.result_.draws_sigma2.ravel()
    lo, hi = np.quantile(draws, [0.025, 0.975])
    assert lo <= sigma**2 <= hi, (lo, sigma**2, hi)
    # the posterior mean of W is close to the truth: error within a few posterior sd
    z = (est.components_ - W_true) / np.maximum(est.components_sd_, 1e-12)
    outside = np.abs(z[:, np.setdiff1d(np.arange(A.shape[1]), J)]) > 4
    assert outside.mean() < 0.01
