"""Model hyperparameters as an immutable value that kernels can take."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Priors", "MODELS"]

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
