"""Sufficient statistics and the scalar draws decided on the client."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["sse_from_stats", "draw_sigma2", "barker_accept", "log_barker"]


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
