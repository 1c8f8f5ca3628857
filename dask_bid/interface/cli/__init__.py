"""The ``dask-bid`` command: demo, fit, rid, info and plot.

One module per command (``demo``, ``fit``, ``rid``, ``info``, ``plot``: its parser and
its ``run``) around a small shared core: ``_core`` (parser class, argument types, error
lines, formatting), ``progress`` (progress bar, Ctrl-C latch), ``convert`` (reading
``.npy`` and text matrices), ``report`` (a fit's summary lines) and ``plotting`` (PNG
files); ``main`` assembles the parser.

Every command exits with status 0 on success. A user error (bad argument, missing
file, existing output, unreachable scheduler, missing optional package ...) prints one
line ``dask-bid: error: <message>`` on stderr and exits with status 2 (set the
environment variable ``DASK_BID_DEBUG=1`` to get the traceback instead); an interrupted
run exits with 130.

Importing this package imports numpy and the standard library only; every heavy module
(numba, Dask, Zarr, SciPy) is imported by the command that needs it.
"""

from ._core import CLIError
from .convert import CONVERTIBLE_SUFFIXES, TEXT_SUFFIXES, convert_to_zarr
from .main import build_parser, main
from .progress import ChainProgress, InterruptLatch

__all__ = ["main", "build_parser", "ChainProgress", "InterruptLatch", "convert_to_zarr",
           "TEXT_SUFFIXES", "CONVERTIBLE_SUFFIXES", "CLIError"]
