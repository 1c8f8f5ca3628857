"""The W sweep kernel against a plain numpy sweep driven by the same random numbers.

The kernel forms r_k = (G w)_k lazily, as (G W_old)_kn plus a sum over the column's
entries already redrawn, and accumulates <W, G W> from the changes d = w_new - w_old.
The reference below does neither: before each entry it takes r_k = G[k] @ w with the
column as it stands (the quantity the old axpy updates kept current), computes the
conditional with the same formula and draws with ``sample_gtn`` from the same
Generator, in the same order. ``sample_gtn`` and the kernel's inlined ``gtn_draw``
consume the Generator identically (tests/test_truncnorm.py), so the two sweeps give
the same draws up to the rounding of r_k: any difference in the conditional
parameters shows as a difference in the draws.

Planted bugs tried in ``_sweep`` (dask_bid/kernels/sweep.py), each of which made
``test_sweep_matches_plain_reference`` and ``test_icm_sweep_matches_plain_reference``
fail by far more than the tolerance: storing ``dk[l] = 0.0`` instead of
``new - old`` (r_k from w_old for the entries j < k already redrawn), and summing
over ``j < k - 1`` (the last redrawn entry left out); and, for <W, G W>, ``2 R_k``
in place of ``2 r_k`` in its update (the <W, G W> check of all four
``test_sweep_matches_plain_reference`` cases failed). ``test_reference_has_power`` keeps
the first of these checked: the reference with w_old for j < k must disagree.
"""

import numpy as np
import pytest

from dask_bid.kernels.priors import Priors
from dask_bid.kernels.sweep import _TILE, block_quadratics, sweep_block
from dask_bid.kernels.truncnorm import sample_gtn


def _problem(seed, M=40, nb=300, K=13):
    # nb = 300: two full tiles of 128 columns and a partial one; K odd exercises the
    # kernel's unpaired last row of the lazy sum
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, nb))
    C = A[:, rng.choice(nb, K, replace=False)] + 0.3 * rng.standard_normal((M, K))
    G, H = C.T @ C, C.T @ A
    W = rng.uniform(-1, 1, (K, nb))
    return rng, C, G, H, W


def _order(K, nb, tiles):
    """(k, n) in the order the kernel draws them."""
    if not tiles:  # the masked kernel: column by column
        return [(k, n) for n in range(nb) for k in range(K)]
    return [(k, n) for n0 in range(0, nb, _TILE) for k in range(K)
            for n in range(n0, min(n0 + _TILE, nb))]


def _reference_sweep(gen, G, H, W, sigma2, pri, Mu=None, Tau=None, mode=False, Gn=None,
                     stale=False):
    """Plain numpy sweep: r_k = G[k] @ (current column) before every entry."""
    W = W.copy()
    W_old = W.copy()
    K, nb = W.shape
    for k, n in _order(K, nb, tiles=Gn is None):
        Gc = G if Gn is None else Gn[n]
        w = W_old[:, n] if stale else W[:, n]
        r_k = Gc[k] @ w
        m = pri.mu if Mu is None else Mu[k, n]
        t = pri.tau if Tau is None else Tau[k, n]
        tt = Gc[k, k] / sigma2 + t
        mt = ((H[k, n] - r_k + Gc[k, k] * W[k, n]) / sigma2 + t * m) / tt
        if mode:
            W[k, n] = min(max(mt, pri.a), pri.b)
        else:
            W[k, n] = float(sample_gtn(gen, mt, tt, pri.a, pri.b))
    return W


@pytest.mark.parametrize("hier", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_sweep_matches_plain_reference(seed, hier):
    rng, C, G, H, W = _problem(seed)
    sigma2 = 0.7
    pri = Priors(hierarchical=hier, mu=0.1, tau=2.0)
    Mu = Tau = None
    if hier:
        Mu = rng.normal(0.0, 0.5, W.shape)
        Tau = rng.gamma(2.0, 1.0, W.shape)
    ref = _reference_sweep(np.random.default_rng(seed + 10), G, H, W, sigma2, pri, Mu, Tau)
    got = W.copy()
    hw, wgw = sweep_block(np.random.default_rng(seed + 10), G, H, got, sigma2, pri, Mu, Tau)
    assert not np.allclose(got, W)  # the sweep moved every entry
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    hw_d, wgw_d = block_quadratics(G, H, got)
    assert hw == pytest.approx(hw_d, rel=1e-12)
    assert wgw == pytest.approx(wgw_d, rel=1e-12)


def test_icm_sweep_matches_plain_reference():
    # mode=True returns the clipped parent means: the conditional means themselves are
    # compared, so the lazy r_k is checked against G[k] @ w directly
    _, C, G, H, W = _problem(2)
    pri = Priors(tau=0.01)
    sigma2 = 50.0  # broad conditionals, so that most means fall inside the box
    ref = _reference_sweep(None, G, H, W, sigma2, pri, mode=True)
    got = W.copy()
    sweep_block(None, G, H, got, sigma2, pri, mode=True)
    inside = np.abs(ref) < 1.0
    assert inside.mean() > 0.5
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)


def test_masked_sweep_matches_plain_reference():
    rng, C, G, H, W = _problem(3, nb=40)
    observed = rng.uniform(size=(C.shape[0], W.shape[1])) < 0.7
    Gn = np.einsum("mk,mn,mj->nkj", C, observed.astype(float), C)
    pri = Priors()
    ref = _reference_sweep(np.random.default_rng(5), None, H, W, 0.4, pri, Gn=Gn)
    got = W.copy()
    hw, wgw = sweep_block(np.random.default_rng(5), None, H, got, 0.4, pri, Gn=Gn)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    assert hw == pytest.approx(np.vdot(H, got), rel=1e-12)
    assert wgw == pytest.approx(np.einsum("kn,nkj,jn->", got, Gn, got), rel=1e-12)


def test_sweep_of_a_strided_view_writes_in_place():
    _, C, G, H, W = _problem(4, nb=60)
    pri = Priors()
    big = np.zeros((W.shape[0], 2 * W.shape[1]))
    view = big[:, ::2]
    view[...] = W
    ref = _reference_sweep(np.random.default_rng(1), G, H, W, 0.5, pri)
    sweep_block(np.random.default_rng(1), G, H, view, 0.5, pri)
    np.testing.assert_allclose(big[:, ::2], ref, rtol=0, atol=1e-12)
    assert not big[:, 1::2].any()


def test_reference_has_power():
    # the comparison resolves the planted bug "r_k from w_old for j < k"
    _, C, G, H, W = _problem(0)
    pri = Priors()
    ref = _reference_sweep(np.random.default_rng(3), G, H, W, 0.7, pri)
    bad = _reference_sweep(np.random.default_rng(3), G, H, W, 0.7, pri, stale=True)
    got = W.copy()
    sweep_block(np.random.default_rng(3), G, H, got, 0.7, pri)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    assert np.max(np.abs(got - bad)) > 1e-3
