"""Interface layer: the estimator, its functional twin, the result object.

Imported on first use (see ``dask_bid/__init__.py``), so that the command line can load
without the engine.
"""

_LAZY = {"BayesianID": ".estimator", "bayesian_id": ".functional", "BIDResult": ".result"}

__all__ = list(_LAZY)


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dask_bid.interface' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
