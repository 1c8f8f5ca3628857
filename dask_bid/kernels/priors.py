"""Model hyperparameters as an immutable value that kernels can take."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Priors", "MODELS", "gbtn_box_mass"]

MODELS = ("gbt", "gbtn")


class Priors(NamedTuple):
    """Hyperparameters of the GBT / GBTN models (paper defaults).

    ``a``, ``b``: bounds of every W entry; ``alpha_sigma``, ``beta_sigma``: inverse-gamma
    prior on sigma^2; ``mu``, ``tau``: fixed GTN parent mean / precision of GBT;
    ``mu_mu``, ``tau_mu``, ``alpha_t``, ``beta_t``: GTNSNG hyperprior of GBTN.
    """

    hierarchical: bool = False
    a: float = -1.0
    b: float = 1.0
    alpha_sigma: float = 0.1
    beta_sigma: float = 1.0
    mu: float = 0.0
    tau: float = 1.0
    mu_mu: float = 0.0
    tau_mu: float = 0.1
    alpha_t: float = 1.0
    beta_t: float = 1.0


def gbtn_box_mass(priors, n=20000, seed=0) -> float:
    """The share of the GBTN hyperprior's unconstrained draws of (mu, tau, w) with w in
    the box [a, b]: the acceptance rate of the rejection sampler that draws W from the
    prior (``sweep._prior_gbtn``), estimated by the same steps on ``n`` draws with a fixed
    seed (numpy). A vague hyperprior (tau_mu = 1e-14, or alpha_t so small that the gamma
    draw underflows to 0) makes it ~0, and that loop, compiled and without a way out,
    never ends."""
    import numpy as np

    gen = np.random.default_rng(seed)
    m = priors.mu_mu + gen.standard_normal(n) / np.sqrt(priors.tau_mu)
    t = gen.standard_gamma(priors.alpha_t, n) / priors.beta_t
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        w = m + gen.standard_normal(n) / np.sqrt(t)
    ok = (t > 0) & (w >= priors.a) & (w <= priors.b)
    return float(ok.mean())
