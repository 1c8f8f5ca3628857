"""dask_bid: Bayesian interpolative decomposition for matrices larger than memory."""

from ._errors import *  # noqa: F403
from ._errors import __all__ as _errors_all
from .interface import BayesianID, BIDResult, bayesian_id

__version__ = "0.1.0"

__all__ = ["__version__", "BayesianID", "BIDResult", "bayesian_id", *_errors_all]
