"""Sufficient statistics and the scalar draws decided on the client."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["sse_from_stats", "draw_sigma2", "barker_accept", "log_barker", "choose_among"]


def sse_from_stats(norm_a2: float, hw: float, wgw: float) -> float:
    """SSE = ||A||^2 - 2 <H, W> + <W, G W>, floored at 0.

    The three terms nearly cancel when the fit is almost exact; the floor keeps
    the sigma^2 draw defined, and the engine recomputes the SSE directly from A
    for reported numbers.
    """
    return max(norm_a2 - 2.0 * hw + wgw, 0.0)


def draw_sigma2(gen: np.random.Generator, sse: float, n_obs: int, alpha: float,
                beta: float) -> float:
    """sigma^2 | rest ~ InvGamma(n_obs / 2 + alpha, sse / 2 + beta)."""
    shape = 0.5 * n_obs + alpha
    scale = 0.5 * sse + beta
    return scale / gen.standard_gamma(shape)


def log_barker(delta_sse: float, sigma2: float, temperature: float = 1.0) -> float:
    """log o with o the odds of the proposal: -(SSE' - SSE) / (2 sigma^2 T)."""
    return -delta_sse / (2.0 * sigma2 * temperature)


def barker_accept(gen: np.random.Generator, log_odds: float) -> tuple[bool, float]:
    """Accept with Barker's probability o / (1 + o); returns (accepted, probability).

    Computed as a logistic of ``log_odds`` so that huge odds neither overflow nor
    round the probability of the rare branch to exactly zero.
    """
    if log_odds >= 0:
        p = 1.0 / (1.0 + math.exp(-log_odds))
    else:
        e = math.exp(log_odds)
        p = e / (1.0 + e)
    return bool(gen.random() < p), p


def choose_among(gen: np.random.Generator, log_weights, rule: str = "barker"):
    """Pick index 0 (stay) or i >= 1 (move to candidate i) given log target weights.

    ``"barker"``: a draw from the weights normalised over the whole set (Gibbs over the
    set; with one candidate, Barker's rule). ``"metropolis"``: Metropolised Gibbs
    (Liu 1996): propose i >= 1 with probability proportional to its weight, accept with
    min(1, (Z - w_0) / (Z - w_i)), Z the total; with one candidate, Metropolis-Hastings.
    Both leave the weights invariant when the set is chosen symmetrically.
    Returns (index, probability of leaving index 0).
    """
    lw = np.asarray(log_weights, dtype=np.float64)
    top = lw.max()
    w = np.exp(lw - top)
    if rule == "barker":
        p = w / w.sum()
        i = int(np.searchsorted(np.cumsum(p), gen.random() * 1.0, side="right"))
        return min(i, lw.size - 1), float(1.0 - p[0])
    rest = w[1:]
    if rest.sum() == 0.0:  # every candidate below 1e-308 of the current column
        return 0, 0.0
    q = rest / rest.sum()
    i = 1 + min(int(np.searchsorted(np.cumsum(q), gen.random(), side="right")), rest.size - 1)
    # acceptance (Z - w_0) / (Z - w_i) = sum_{j>=1} w_j / sum_{j != i} w_j; the
    # denominator of the chosen i summed without cancellation; the ratio is only formed
    # when it is below 1, so it cannot overflow
    others = w[0] + rest[: i - 1].sum() + rest[i:].sum()
    acc_i = 1.0 if rest.sum() >= others else rest.sum() / others
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        acc = np.where(w.sum() - rest > 0, np.minimum(1.0, rest.sum() / (w.sum() - rest)), 1.0)
    move = float(np.dot(q, acc))
    return (i if gen.random() < acc_i else 0), move
