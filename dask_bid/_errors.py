"""Exception types raised by dask_bid.

Every validation error subclasses both a dask_bid base class and the builtin
exception a scientific-Python user would catch (``ValueError``, ``TypeError``,
``FileNotFoundError`` ...), so existing ``except ValueError`` code keeps working.
"""

__all__ = [
    "DaskBidError",
    "InputShapeError",
    "InputDTypeError",
    "NonFiniteInputError",
    "ParameterError",
    "StoreNotFoundError",
    "NotAnArrayError",
    "CorruptStoreError",
    "OutputExistsError",
    "OutputLocationError",
    "SchedulerUnreachableError",
    "NotFittedError",
    "VersionMismatchError",
    "InputChangedError",
    "IncompleteStoreError",
    "CheckpointError",
    "OutputLockedError",
    "FitFailedError",
    "StoreAccessError",
    "UnguardedScriptError",
    "ResultReplacedError",
    "ConvergenceWarning",
    "CheckpointFallbackWarning",
]


class DaskBidError(Exception):
    """Base class of every error raised by dask_bid on purpose."""


class InputShapeError(DaskBidError, ValueError):
    """The input matrix has the wrong number of dimensions or is too small."""


class InputDTypeError(DaskBidError, TypeError):
    """The input matrix has a dtype that cannot be converted to float safely."""


class NonFiniteInputError(DaskBidError, ValueError):
    """The input contains NaN or infinity and ``missing="mask"`` was not chosen."""


class ParameterError(DaskBidError, ValueError):
    """A parameter of the estimator or of a function is out of its domain."""


class StoreNotFoundError(DaskBidError, FileNotFoundError):
    """No Zarr array (or file) exists at the given path."""


class NotAnArrayError(DaskBidError, ValueError):
    """The path holds a Zarr group (or something else) where an array was expected."""


class CorruptStoreError(DaskBidError, OSError):
    """A chunk or the metadata of a store cannot be read or decoded."""


class OutputExistsError(DaskBidError, FileExistsError):
    """The output location already holds data and ``overwrite`` was not set."""


class OutputLocationError(DaskBidError, OSError):
    """The output location cannot be written, or equals the input."""


class SchedulerUnreachableError(DaskBidError, ConnectionError):
    """The Dask scheduler address did not answer within the timeout."""


class NotFittedError(DaskBidError, ValueError, AttributeError):
    """The estimator was used before ``fit``. A ValueError and an AttributeError, as
    scikit-learn's ``NotFittedError`` is (``except ValueError`` catches both)."""


class InputChangedError(DaskBidError, ValueError):
    """``resume=True`` with an input other than the one the stored fit started on."""


class IncompleteStoreError(DaskBidError, ValueError):
    """A Zarr input has chunks missing, or was left behind by a write that did not finish."""


class CheckpointError(CorruptStoreError):
    """A checkpoint cannot be read back (damaged, incomplete, or of an unsupported format)."""


class OutputLockedError(DaskBidError, BlockingIOError):
    """Another fit holds the lock of the output location."""


class FitFailedError(DaskBidError, ArithmeticError):
    """The fit could not give a finite result (the output is marked failed)."""


class VersionMismatchError(DaskBidError, RuntimeError):
    """The Dask workers import other versions of dask_bid or its dependencies than the client."""


class StoreAccessError(DaskBidError, PermissionError):
    """An object store (or file system) refused access: bad credentials or no permission."""


class UnguardedScriptError(DaskBidError, RuntimeError):
    """A script would start a local cluster from its top level, outside
    ``if __name__ == "__main__":``: each worker process would run the script again."""


class ResultReplacedError(DaskBidError, RuntimeError):
    """The output group a result reads its C from was written by another fit since
    (``overwrite=True``, or a resume that extended it): open the result again."""


class ConvergenceWarning(UserWarning):
    """The chains of an exact sampler failed the convergence check (split R-hat above
    1.01 or bulk ESS below 100 per chain, for sigma^2 or the SSE): the posterior
    summaries of the fit are not yet to be trusted. See ``BIDResult.convergence()``."""


class CheckpointFallbackWarning(RuntimeWarning):
    """A checkpoint could not be read back; an older one (or a fresh start) is used."""


def sklearn_flavoured(cls):
    """``cls``, or a subclass of it and of scikit-learn's class of the same name
    (``NotFittedError``, ``ConvergenceWarning``) when ``sklearn.exceptions`` is loaded.

    dask_bid does not import scikit-learn (over a second at import), so its classes cannot
    inherit from scikit-learn's. A user who catches ``sklearn.exceptions.NotFittedError``
    or filters scikit-learn's ``ConvergenceWarning`` (once per fold of a grid search) has
    imported that module: what is raised or warned then is also an instance of their
    class, and still of dask_bid's."""
    import sys

    mod = sys.modules.get("sklearn.exceptions")
    base = getattr(mod, cls.__name__, None) if mod is not None else None
    if not isinstance(base, type) or issubclass(cls, base):
        return cls
    name = _SKLEARN_PREFIX + cls.__name__
    both = globals().get(name)
    if both is None or base not in both.__mro__:
        # named in this module so that pickle finds it (an error sent between processes)
        # its own name, as warnings print it; the qualified name is what pickle looks up
        both = type(cls.__name__, (cls, base), {"__module__": __name__,
                                                "__qualname__": name, "__doc__": cls.__doc__})
        globals()[name] = both
    return both


_SKLEARN_PREFIX = "_Sklearn"


def __getattr__(name):
    # unpickling a scikit-learn flavoured error or warning in another process (a Dask
    # worker, a notebook restarted): made there as it was here, importing scikit-learn's
    # module (it was "Can't get attribute '_SklearnNotFittedError'")
    base = globals().get(name[len(_SKLEARN_PREFIX):]) if name.startswith(_SKLEARN_PREFIX) \
        else None
    if isinstance(base, type):
        import sklearn.exceptions  # noqa: F401

        made = sklearn_flavoured(base)
        if made is not base:
            return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
