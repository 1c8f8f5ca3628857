"""dask_bid: Bayesian interpolative decomposition for matrices larger than memory."""

from ._errors import *  # noqa: F403
from ._errors import __all__ as _errors_all
from .interface import BayesianID, BIDResult, bayesian_id
from .interface.functional import PAPER_SETTINGS

__version__ = "0.1.0"

__all__ = ["__version__", "BayesianID", "BIDResult", "bayesian_id", "PAPER_SETTINGS",
           *_errors_all]

# the baselines, loading a stored fit, plots and convergence diagnostics (matplotlib and
# arviz are imported only when a plot or a diagnostic is asked for)
from .baselines import RandomizedID  # noqa: E402
from .interface.diagnostics import summary, to_inference_data  # noqa: E402
from .interface.plots import (  # noqa: E402
    plot_autocorrelation,
    plot_error_vs_k,
    plot_inclusion,
    plot_overview,
    plot_trace,
)
from .interface.store import open_result  # noqa: E402

__all__ += [
    "RandomizedID",
    "open_result",
    "plot_trace",
    "plot_autocorrelation",
    "plot_inclusion",
    "plot_error_vs_k",
    "plot_overview",
    "to_inference_data",
    "summary",
]
