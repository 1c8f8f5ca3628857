"""The result of a Bayesian ID fit (defined in the engine, which builds it)."""

from ..engine.result import TRACE_DTYPE, BIDResult

__all__ = ["BIDResult", "TRACE_DTYPE"]
