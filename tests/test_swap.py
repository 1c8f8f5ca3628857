"""The column swap with Barker acceptance samples p(J | W, sigma^2, A).

N = 5, K = 2, W and sigma^2 fixed: the chain over (slot -> column) assignments is
driven by the package's own pieces (swap_delta, proposal_gram, swapped_h,
barker_accept) with incremental G and H; the visit frequencies of the 10 subsets
are compared with the exactly enumerated target by a chi-square test on a chain
thinned beyond its mixing time (from the exact transition matrix's spectral gap).
"""

import itertools

import numpy as np
import pytest
from scipy import stats

from dask_bid.kernels.stats import barker_accept, log_barker
from dask_bid.kernels.swap import proposal_gram, swap_delta, swapped_h

M, N, K = 8, 5, 2
SIGMA2 = 2.0


def _problem():
    rng = np.random.default_rng(7)
    A = rng.standard_normal((M, N))
    W = rng.uniform(-1, 1, (K, N))
    return A, W


def _sse(A, W, J):
    return float(np.sum((A - A[:, list(J)] @ W) ** 2))


def _ordered_states():
    return [s for s in itertools.permutations(range(N), K)]


def _target(A, W, log_factor=1.0):
    states = _ordered_states()
    e = np.array([-_sse(A, W, s) / (2 * SIGMA2) * log_factor for s in states])
    p = np.exp(e - e.max())
    p /= p.sum()
    return states, p


def _subset_probs(states, p):
    subsets = list(itertools.combinations(range(N), K))
    out = np.zeros(len(subsets))
    for s, q in zip(states, p, strict=True):
        out[subsets.index(tuple(sorted(s)))] += q
    return subsets, out


def _mixing_thin(A, W):
    # exact transition matrix of the swap chain -> thinning with lambda^thin < 1e-2
    states, p = _target(A, W)
    index = {s: i for i, s in enumerate(states)}
    P = np.zeros((len(states), len(states)))
    for s in states:
        e_s = _sse(A, W, s)
        I = [i for i in range(N) if i not in s]
        for slot in range(K):
            for u in I:
                t = list(s)
                t[slot] = u
                lo = log_barker(_sse(A, W, t) - e_s, SIGMA2)
                acc = 1.0 / (1.0 + np.exp(-lo))
                P[index[s], index[tuple(t)]] += acc / (K * len(I))
        P[index[s], index[s]] = 1.0 - P[index[s]].sum()
    lam = np.sort(np.abs(np.linalg.eigvals(P)))[-2]
    return int(np.ceil(np.log(1e-2) / np.log(lam))), P, p


def run_swap_chain(A, W, n_samples, thin, seed=0, temperature_bug=1.0):
    rng = np.random.default_rng(seed)
    J = np.array([0, 1])
    C = A[:, J]
    G, H = C.T @ C, C.T @ A
    AtA = A.T @ A  # rows a_u^T A, as one candidate pass would deliver them
    sq = np.diag(AtA)
    subsets = list(itertools.combinations(range(N), K))
    counts = np.zeros(len(subsets), dtype=np.int64)
    for t in range(n_samples * thin):
        p = int(rng.integers(K))
        I = [i for i in range(N) if i not in J]
        u = I[int(rng.integers(len(I)))]
        h_u = AtA[u]
        G2, g = proposal_gram(G, p, H[:, u], sq[u])
        d_hw, d_wgw = swap_delta(G, H, W, p, g, h_u, W[p])
        accepted, _ = barker_accept(rng, log_barker(-2 * d_hw + d_wgw, SIGMA2,
                                                    temperature_bug))
        if accepted:
            J = J.copy()
            J[p] = u
            G, H = G2, swapped_h(H, p, h_u)
        if (t + 1) % thin == 0:
            counts[subsets.index(tuple(sorted(J)))] += 1
    # the incremental G and H still equal the direct ones after all the swaps
    np.testing.assert_allclose(G, A[:, J].T @ A[:, J], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(H, A[:, J].T @ A, rtol=1e-10, atol=1e-10)
    return counts


def test_exact_transition_matrix_has_the_target_as_stationary_law():
    A, W = _problem()
    _, P, p = _mixing_thin(A, W)
    np.testing.assert_allclose(p @ P, p, atol=1e-12)


@pytest.fixture(scope="module")
def setup():
    A, W = _problem()
    thin, _, _ = _mixing_thin(A, W)
    states, p = _target(A, W)
    _, target = _subset_probs(states, p)
    return A, W, thin, target


# 2,000 draws thinned past the mixing time: the planted bug below gives p ~ 1e-77 (far
# below its 1e-6 threshold), the correct chain p = 0.28 (5,000 draws: the suite's time)
N_SAMPLES = 2000


def _chi2_pvalue(counts, target):
    expected = counts.sum() * target
    return stats.chisquare(counts, expected).pvalue


def test_swap_visits_match_enumerated_target(setup):
    A, W, thin, target = setup
    assert target.min() > 0.01  # every cell expects > 20 visits: chi-square applies
    counts = run_swap_chain(A, W, n_samples=N_SAMPLES, thin=thin)
    assert _chi2_pvalue(counts, target) > 1e-3


def test_swap_chi_square_catches_planted_bug(setup):
    # a factor 2 lost in the log-odds (-d / sigma^2 instead of -d / (2 sigma^2))
    A, W, thin, target = setup
    counts = run_swap_chain(A, W, n_samples=N_SAMPLES, thin=thin, temperature_bug=0.5)
    assert _chi2_pvalue(counts, target) < 1e-6
