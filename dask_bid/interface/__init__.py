"""Interface layer: the estimator, its functional twin, the result object."""

from .estimator import BayesianID
from .functional import bayesian_id
from .result import BIDResult

__all__ = ["BayesianID", "bayesian_id", "BIDResult"]
