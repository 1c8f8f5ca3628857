"""``warn``: a warning attributed to the user's line, not to ours.

``warnings.warn(..., stacklevel=2)`` names the caller of the function that warns, which for
a warning raised deep in a fit (the convergence check in the engine's summary, the rank
check of a baseline) is another module of dask_bid: the user saw
``dask_bid/interface/functional.py:227: ConvergenceWarning`` and a line of our code. Here
the stack is walked to the first frame outside the package, as Python 3.12's
``skip_file_prefixes`` does (3.11 is supported). ``-W error`` / ``filterwarnings`` by
module then match the user's module, as for numpy's and scikit-learn's warnings.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["warn"]

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


#: packages that call a fit on the user's behalf (a Pipeline's or GridSearchCV's fit,
#: joblib's workers): their frames are walked past too, to the user's own line
_CALLERS = ("sklearn", "joblib")


def _skipped_prefixes():
    out = [_PACKAGE]
    for name in _CALLERS:
        mod = sys.modules.get(name)
        path = getattr(mod, "__file__", None)
        if path:
            out.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(out)


def warn(message, category=UserWarning):
    """``warnings.warn(message, category)`` at the innermost caller outside dask_bid (and
    outside scikit-learn and joblib, which call a fit inside a Pipeline or a search)."""
    skipped = _skipped_prefixes()
    level, frame = 2, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(skipped):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
