"""dask_bid: Bayesian interpolative decomposition for matrices larger than memory.

The public names are imported on first use (PEP 562 ``__getattr__``), so that
``import dask_bid`` and ``dask-bid --help`` stay fast: numba, Dask, Zarr and SciPy load
when a fit, a store or a baseline is first touched; matplotlib and ArviZ only when a
plot or a diagnostic is asked for.
"""

import os as _os

from ._errors import *  # noqa: F403
from ._errors import __all__ as _errors_all


def _default_numba_cache_dir():
    """A per-user cache folder for the compiled kernels (``~/.cache/dask_bid/numba``).

    numba caches next to the source by default, which fails where site-packages is
    read-only; an explicit folder makes the cache work for every install. The user's own
    ``NUMBA_CACHE_DIR`` always wins.
    """
    if _os.name == "nt":
        base = _os.environ.get("LOCALAPPDATA") or _os.path.expanduser("~\\AppData\\Local")
    else:
        base = _os.environ.get("XDG_CACHE_HOME") or _os.path.expanduser("~/.cache")
    return _os.path.join(base, "dask_bid", "numba")


# before numba is imported anywhere (it reads the variable once, at import); inherited by
# the worker processes a LocalCluster starts
_os.environ.setdefault("NUMBA_CACHE_DIR", _default_numba_cache_dir())

__version__ = "0.1.0"

#: public name -> module that defines it (imported on first access)
_LAZY = {
    "BayesianID": ".interface.estimator",
    "BIDResult": ".engine.result",
    "bayesian_id": ".interface.functional",
    "PAPER_SETTINGS": ".interface.functional",
    "RandomizedID": ".baselines",
    "open_result": ".interface.store",
    "plot_trace": ".interface.plots",
    "plot_autocorrelation": ".interface.plots",
    "plot_inclusion": ".interface.plots",
    "plot_error_vs_k": ".interface.plots",
    "plot_overview": ".interface.plots",
    "to_inference_data": ".interface.diagnostics",
    "summary": ".interface.diagnostics",
}

__all__ = ["__version__", *_LAZY, *_errors_all]


#: subpackages reached as attributes (``dask_bid.datasets.load_dataset``), imported on
#: first access as a plain ``import dask_bid`` gives no submodule
_SUBMODULES = ("datasets",)


def __getattr__(name):
    if name in _SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dask_bid' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_SUBMODULES))
