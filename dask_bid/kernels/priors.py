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


def gbtn_box_mass(priors) -> float:
    """The probability that the GBTN hyperprior's unconstrained draw of (mu, tau, w) puts
    w in the box [a, b]: the acceptance rate of the rejection sampler that draws W from
    the prior (``sweep._prior_gbtn``). Given mu, w - mu is Student-t with 2 alpha_t
    degrees of freedom and scale sqrt(beta_t / alpha_t), so the rate is a one-dimensional
    integral over mu (quadrature, accurate far below what Monte Carlo resolves), at most
    the probability that the gamma draw of tau is not 0 in float64 (it underflows for a
    tiny alpha_t, and the sampler rejects tau = 0; a w in the box needs a tau far above
    the smallest float, so the two are not multiplied)."""
    import warnings

    import numpy as np
    from scipy import integrate, special, stats

    sd = 1.0 / np.sqrt(priors.tau_mu)
    dof, scale = 2.0 * priors.alpha_t, np.sqrt(priors.beta_t / priors.alpha_t)

    def inside(m):
        return (stats.norm.pdf(m, priors.mu_mu, sd)
                * (stats.t.cdf((priors.b - m) / scale, dof)
                   - stats.t.cdf((priors.a - m) / scale, dof)))

    lo = min(priors.mu_mu - 40 * sd, priors.a - 1.0)
    hi = max(priors.mu_mu + 40 * sd, priors.b + 1.0)
    # the box and the prior's centre as break points: the integrand may be a narrow spike
    points = sorted({float(priors.a), float(priors.b), float(np.clip(priors.mu_mu, lo, hi))})
    with warnings.catch_warnings():
        # a spike far below the threshold it is compared with: its last digits do not count
        warnings.simplefilter("ignore", integrate.IntegrationWarning)
        mass = integrate.quad(inside, lo, hi, points=points, limit=200, epsabs=0.0,
                              epsrel=1e-6)[0]
    # tau = gamma(alpha_t) / beta_t is 0 where the gamma draw is below the smallest float
    positive = float(special.gammaincc(priors.alpha_t, np.finfo(float).tiny))
    return min(max(0.0, float(mass)), positive)
