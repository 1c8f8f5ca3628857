"""Property-based tests (hypothesis) of the swap algebra.

The sampler never recomputes G = C^T C or H = C^T A: a swap (slot p takes column u)
replaces row and column p of G and row p of H from the row a_u^T A of one streaming pass
(``proposal_gram``, ``swapped_h``), and the plain sampler decides the swap from
``swap_delta``'s change of <H, W> and <W, G W> without touching A. These tests drive
random sequences of swaps over random matrices, including zero and duplicated columns
and extreme scales, split in random column blocks as the engine does, and compare with
the direct products.

The truncated-normal sampler's property tests live in ``tests/test_truncnorm.py``.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dask_bid.kernels.stats import sse_from_stats
from dask_bid.kernels.swap import proposal_gram, swap_delta, swapped_h

EPS = np.finfo(np.float64).eps
SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def problems(draw):
    """(A, J0, blocks): a random matrix with optional zero / duplicated columns, a random
    starting basis, and a random split of the columns into contiguous blocks."""
    N = draw(st.integers(3, 12))
    M = draw(st.integers(1, 15))
    K = draw(st.integers(1, N - 1))
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([1e-150, 1e-8, 1.0, 1e8, 1e150]))
    rng = np.random.default_rng(seed)
    A = scale * rng.standard_normal((M, N))
    if draw(st.booleans()):
        A[:, draw(st.integers(0, N - 1))] = 0.0
    if draw(st.booleans()):
        i, j = draw(st.lists(st.integers(0, N - 1), min_size=2, max_size=2, unique=True))
        A[:, j] = A[:, i]
    J0 = np.array(draw(st.lists(st.integers(0, N - 1), min_size=K, max_size=K, unique=True)))
    cuts = sorted(draw(st.sets(st.integers(1, N - 1), max_size=3)))
    edges = [0, *cuts, N]
    blocks = [(edges[i], edges[i + 1]) for i in range(len(edges) - 1)]
    return A, J0, blocks


def swap_sequences(K):
    """Raw (slot, candidate) draws, mapped onto valid swaps as the chain goes."""
    return st.lists(st.tuples(st.integers(0, K - 1), st.integers(0, 10**6)), min_size=1,
                    max_size=25)


@SETTINGS
@given(data=st.data())
def test_incremental_gram_and_h_equal_the_direct_products(data):
    A, J0, blocks = data.draw(problems())
    M, N = A.shape
    K = len(J0)
    AtA = A.T @ A  # rows a_u^T A, as one candidate pass delivers them
    J = J0.copy()
    C = A[:, J]
    G = C.T @ C
    G = 0.5 * (G + G.T)
    Hb = [C.T @ A[:, a:b] for a, b in blocks]
    owner = {c: i for i, (a, b) in enumerate(blocks) for c in range(a, b)}
    norm = float(np.sum(A * A))
    for raw in data.draw(swap_sequences(K)):
        p = raw[0]
        outside = [j for j in range(N) if j not in set(J.tolist())]
        u = outside[raw[1] % len(outside)]
        b = owner[u]
        a0 = blocks[b][0]
        g_col = Hb[b][:, u - a0]  # C^T a_u from the block that holds column u
        G, g = proposal_gram(G, p, g_col, AtA[u, u])
        Hb = [swapped_h(H, p, AtA[u, a:bb]) for H, (a, bb) in zip(Hb, blocks, strict=True)]
        J[p] = u
        C = A[:, J]
        tol = 16 * EPS * norm
        np.testing.assert_allclose(G, C.T @ C, rtol=0, atol=tol)
        np.testing.assert_allclose(np.concatenate(Hb, axis=1), C.T @ A, rtol=0, atol=tol)
        np.testing.assert_array_equal(G, G.T)  # exactly symmetric, whatever the rounding
        np.testing.assert_array_equal(g, G[p])
        assert np.all(np.diag(G) >= 0)


@SETTINGS
@given(data=st.data(), bound=st.sampled_from([1.0, 2.0]))
def test_swap_delta_is_the_direct_change_of_the_sse(data, bound):
    A, J, blocks = data.draw(problems())
    M, N = A.shape
    K = len(J)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    W = rng.uniform(-bound, bound, (K, N))
    w_new = rng.uniform(-bound, bound, N)
    p = data.draw(st.integers(0, K - 1))
    outside = [j for j in range(N) if j not in set(J.tolist())]
    u = outside[data.draw(st.integers(0, len(outside) - 1))]
    C = A[:, J]
    G = C.T @ C
    H = C.T @ A
    AtA = A.T @ A
    G2, g_new = proposal_gram(G, p, H[:, u], AtA[u, u])
    J2 = J.copy()
    J2[p] = u
    C2 = A[:, J2]
    W2 = W.copy()
    W2[p] = w_new
    total = 0.0
    norm = float(np.sum(A * A))
    for a, b in blocks:
        d_hw, d_wgw = swap_delta(G, H[:, a:b], W[:, a:b], p, g_new, AtA[u, a:b], w_new[a:b])
        Ab = A[:, a:b]
        hw, hw2 = np.vdot(C.T @ Ab, W[:, a:b]), np.vdot(C2.T @ Ab, W2[:, a:b])
        wgw = np.vdot(W[:, a:b], (C.T @ C) @ W[:, a:b])
        wgw2 = np.vdot(W2[:, a:b], (C2.T @ C2) @ W2[:, a:b])
        # |W| <= bound, so every product is bounded by bound^2 K^2 ||A||^2
        tol = 64 * EPS * (1 + bound**2 * K * K) * norm
        assert abs(d_hw - (hw2 - hw)) <= tol
        assert abs(d_wgw - (wgw2 - wgw)) <= tol
        sse = np.sum((Ab - C @ W[:, a:b]) ** 2)
        sse2 = np.sum((Ab - C2 @ W2[:, a:b]) ** 2)
        assert abs((-2.0 * d_hw + d_wgw) - (sse2 - sse)) <= 4 * tol
        total += -2.0 * d_hw + d_wgw
    full = np.sum((A - C2 @ W2) ** 2) - np.sum((A - C @ W) ** 2)
    assert abs(total - full) <= 4 * 64 * EPS * (1 + bound**2 * K * K) * norm * len(blocks)


@SETTINGS
@given(data=st.data())
def test_sse_from_statistics_is_the_direct_sse_up_to_rounding(data):
    A, J, _ = data.draw(problems())
    K = len(J)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    W = rng.uniform(-1, 1, (K, A.shape[1]))
    W[:, J] = np.eye(K)  # the identity block, as in a reported W: SSE can be exactly 0
    C = A[:, J]
    norm = float(np.sum(A * A))
    hw = float(np.vdot(C.T @ A, W))
    wgw = float(np.vdot(W, (C.T @ C) @ W))
    sse = sse_from_stats(norm, hw, wgw)
    direct = float(np.sum((A - C @ W) ** 2))
    assert sse >= 0.0
    assert abs(sse - direct) <= 64 * EPS * (norm + 2 * abs(hw) + abs(wgw))
