"""Convergence of a fit's chains: rank-normalised split R-hat and bulk ESS, numpy only.

The two statistics of Vehtari, Gelman, Simpson, Carpenter and Bürkner (2021), "Rank-
normalization, folding, and localization: an improved R-hat", computed exactly as ArviZ
computes ``rhat(method="rank")`` and ``ess(method="bulk")`` (the tests compare them),
so that every fit can check itself without the optional ``arviz`` extra.

``check(result)`` applies them to the retained draws of sigma^2 and of the SSE, which
every draw has whatever its basis: chains stuck in different bases disagree in both.
A fit of an exact sampler that fails the check warns (``ConvergenceWarning``): its
``inclusion_probability_``, credible intervals and posterior means are then not yet
summaries of the posterior.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy import fft, special

__all__ = ["rhat_rank", "ess_bulk", "ess_tail", "ess_mean", "mcse_mean", "inclusion_mcse",
           "check", "Convergence", "RHAT_MAX", "ESS_PER_CHAIN_MIN"]

# Vehtari et al. (2021), section 4: use the draws when R-hat < 1.01 and the bulk ESS is
# at least 100 per chain (400 for the recommended four chains)
RHAT_MAX = 1.01
ESS_PER_CHAIN_MIN = 100


def _split(x):
    # each chain's first and last halves as two chains (the middle draw of an odd
    # length is dropped), which catches a chain still drifting
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]])


def _average_ranks(x):
    # 1-based ranks of the flattened x, ties given their mean rank: scipy.stats.rankdata's
    # "average" with its formula, so the same floats. Written out because importing
    # scipy.stats costs ~0.4 s in every process that ends a fit (the CLI's start).
    flat = x.ravel()
    order = np.argsort(flat, kind="mergesort")
    s = flat[order]
    first = np.r_[True, s[1:] != s[:-1]]  # where each run of equal values starts
    dense = np.cumsum(first)
    bounds = np.r_[np.nonzero(first)[0], flat.size]
    ranks = np.empty(flat.size)
    ranks[order] = 0.5 * (bounds[dense] + bounds[dense - 1] + 1)
    return ranks.reshape(x.shape)


def _z_scale(x):
    # rank-normalise over all chains together (Blom's offset 3/8); ndtri is the normal
    # quantile function (what scipy.stats.norm.ppf calls)
    return special.ndtri((_average_ranks(x) - 0.375) / (x.size + 0.25))


def _rhat(x):
    n = x.shape[1]
    between = n * np.var(x.mean(axis=1), ddof=1)
    within = np.mean(np.var(x, axis=1, ddof=1))
    return float(np.sqrt((between / within + n - 1) / n))


def _valid(x, min_chains, constant_ok=False):
    # (chains, draws) with enough of both, finite, and (for R-hat) not constant
    return (x.ndim == 2 and x.shape[0] >= min_chains and x.shape[1] >= 4
            and np.isfinite(x).all() and (constant_ok or np.ptp(x) > 0.0))


def rhat_rank(x) -> float:
    """Rank-normalised split R-hat of ``x`` (chains, draws): the larger of the bulk and
    the folded (tail) versions. NaN for fewer than 2 chains or 4 draws, a constant or a
    non-finite array."""
    x = np.asarray(x, dtype=np.float64)
    if not _valid(x, 2):
        return np.nan
    s = _split(x)
    return max(_rhat(_z_scale(s)), _rhat(_z_scale(np.abs(s - np.median(s)))))


def _autocov(x):
    n = x.shape[1]
    x = x - x.mean(axis=1, keepdims=True)
    m = fft.next_fast_len(2 * n)
    f = np.fft.rfft(x, n=m, axis=1)
    f *= np.conjugate(f)
    return np.fft.irfft(f, n=m, axis=1)[:, :n] / n


def _ess(x):
    n_chain, n_draw = x.shape
    if np.max(x) - np.min(x) < np.finfo(float).resolution:
        return float(x.size)
    acov = _autocov(x)
    mean_var = np.mean(acov[:, 0]) * n_draw / (n_draw - 1.0)
    var_plus = mean_var * (n_draw - 1.0) / n_draw
    if n_chain > 1:
        var_plus += np.var(x.mean(axis=1), ddof=1)
    rho = np.zeros(n_draw)
    rho[0] = rho_even = 1.0
    rho[1] = rho_odd = 1.0 - (mean_var - np.mean(acov[:, 1])) / var_plus
    # Geyer's initial positive sequence: sum autocorrelation pairs while positive
    t = 1
    while t < n_draw - 3 and rho_even + rho_odd > 0.0:
        rho_even = 1.0 - (mean_var - np.mean(acov[:, t + 1])) / var_plus
        rho_odd = 1.0 - (mean_var - np.mean(acov[:, t + 2])) / var_plus
        if rho_even + rho_odd >= 0:
            rho[t + 1], rho[t + 2] = rho_even, rho_odd
        t += 2
    max_t = t - 2
    if rho_even > 0:
        rho[max_t + 1] = rho_even
    # ... made monotone (Geyer's initial monotone sequence)
    t = 1
    while t <= max_t - 2:
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2.0
        t += 2
    size = n_chain * n_draw
    tau = -1.0 + 2.0 * np.sum(rho[:max_t + 1]) + np.sum(rho[max_t + 1:max_t + 2])
    tau = max(tau, 1.0 / np.log10(size))
    return float(size / tau) if not np.isnan(rho).any() else np.nan


def ess_bulk(x) -> float:
    """Bulk effective sample size of ``x`` (chains, draws): the ESS of the rank-
    normalised split chains. NaN for fewer than 4 draws or a non-finite array."""
    x = np.asarray(x, dtype=np.float64)
    if not _valid(x, 1, constant_ok=True):
        return np.nan
    return _ess(_z_scale(_split(x)))


def ess_mean(x) -> float:
    """Effective sample size of the mean of ``x`` (chains, draws): the ESS of the split
    chains as they are (not rank-normalised), as ArviZ's ``ess(method="mean")``. NaN for
    fewer than 4 draws or a non-finite array; the number of draws for a constant one."""
    x = np.asarray(x, dtype=np.float64)
    if not _valid(x, 1, constant_ok=True):
        return np.nan
    return _ess(_split(x))


def mcse_mean(x) -> float:
    """Monte Carlo standard error of the mean of ``x`` (chains, draws): its standard
    deviation over all draws over the square root of :func:`ess_mean`, as ArviZ's
    ``mcse(method="mean")``. 0 for a constant array; NaN for fewer than 4 draws or a
    non-finite array."""
    x = np.asarray(x, dtype=np.float64)
    if not _valid(x, 1, constant_ok=True):
        return np.nan
    return float(np.std(x, ddof=1) / np.sqrt(_ess(_split(x))))


def inclusion_mcse(draws_columns, n_features: int) -> np.ndarray:
    """Monte Carlo standard error of each column's inclusion probability.

    ``draws_columns``: (chains, draws, K) bases of the retained draws. For column j the
    draws give the indicator series "j is in the basis", whose mean over all chains is
    the inclusion probability; its MCSE is :func:`mcse_mean` of that series, so it grows
    with the autocorrelation of the chains (a chain that rarely changes its basis
    estimates an inclusion probability from few effective draws). 0 for a column whose
    indicator is the same in every retained draw of every chain (never or always
    included: the draws cannot say more, and whether the chains agree is R-hat's
    question); NaN with fewer than 4 draws per chain.
    """
    d = np.asarray(draws_columns)
    out = np.zeros(int(n_features))
    if d.ndim != 3 or d.shape[1] < 4:
        out[:] = np.nan
        return out
    for j in np.unique(d):
        out[j] = mcse_mean((d == j).any(axis=2).astype(np.float64))
    return out


def ess_tail(x, prob=(0.05, 0.95)) -> float:
    """Tail effective sample size of ``x`` (chains, draws): the smaller ESS of the
    indicators ``x <= q`` for the 5 % and 95 % quantiles q (R's type 7, numpy's default),
    as ArviZ's ``ess(method="tail")``. NaN for fewer than 4 draws or a non-finite array."""
    x = np.asarray(x, dtype=np.float64)
    if not _valid(x, 1, constant_ok=True):
        return np.nan
    return min(_ess(_split((x <= np.quantile(x, p)).astype(np.float64))) for p in prob)


class Convergence(NamedTuple):
    """R-hat and bulk ESS of the retained sigma^2 and SSE draws, and the verdict.
    ``n_draws`` is the retained draws of one chain."""
    n_chains: int
    n_draws: int
    r_hat_sigma2: float
    r_hat_sse: float
    ess_bulk_sigma2: float
    ess_bulk_sse: float
    converged: bool
    problems: tuple[str, ...]

    @classmethod
    def from_dict(cls, d) -> Convergence:
        """Back from ``_asdict()`` stored as JSON (NaN stored as the string "nan")."""
        return cls(int(d["n_chains"]), int(d["n_draws"]), *(float(d[k]) for k in (
            "r_hat_sigma2", "r_hat_sse", "ess_bulk_sigma2", "ess_bulk_sse")),
            bool(d["converged"]), tuple(d["problems"]))

    def message(self) -> str:
        """One line: what failed, what it means and what to do (empty if converged)."""
        if self.converged:
            return ""
        who = f"the {self.n_chains} chains have" if self.n_chains > 1 else "the chain has"
        return (f"{who} not converged ({'; '.join(self.problems)}):"
                " the inclusion probabilities, credible intervals and posterior means are"
                " not yet posterior summaries; run longer (a larger n_iter; resume=True continues"
                " a fit saved to an output from where it ended) or see docs/diagnostics.md,"
                " 'Convergence'")


def check(draws_sigma2, draws_sse, *, rhat_max=RHAT_MAX,
          ess_per_chain_min=ESS_PER_CHAIN_MIN) -> Convergence:
    """Check the retained draws (chains, draws) of sigma^2 and of the SSE: split R-hat
    at most ``rhat_max`` (with 2 or more chains) and bulk ESS at least
    ``ess_per_chain_min`` per chain. A statistic that is NaN (a constant trace, too few
    draws) fails only when there are draws to judge."""
    s2 = np.asarray(draws_sigma2, dtype=np.float64)
    sse = np.asarray(draws_sse, dtype=np.float64)
    n_chains, n_draws = s2.shape if s2.ndim == 2 else (0, 0)
    r = {"sigma2": rhat_rank(s2), "SSE": rhat_rank(sse)}
    e = {"sigma2": ess_bulk(s2), "SSE": ess_bulk(sse)}
    problems = []
    if n_draws < 4:
        problems.append(f"{n_draws} retained draws per chain, too few to judge")
    else:
        bad = [f"{r[k]:.3f} ({k})" for k in r if n_chains >= 2 and not r[k] <= rhat_max]
        if bad:
            problems.append(f"split R-hat {', '.join(bad)} > {rhat_max}")
        need = ess_per_chain_min * n_chains
        bad = [f"{e[k]:.0f} ({k})" for k in e if not e[k] >= need]
        if bad:
            problems.append(f"bulk ESS {', '.join(bad)} < {need}")
    return Convergence(int(n_chains), int(n_draws), r["sigma2"], r["SSE"], e["sigma2"],
                       e["SSE"], not problems, tuple(problems))
