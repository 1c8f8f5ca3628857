"""A progress bar over the iterations of every chain of a fit (``progress=True``, the
command line's bar)."""

from __future__ import annotations

import sys
import threading

__all__ = ["ChainProgress"]


class ChainProgress:
    """A tqdm progress bar over the iterations of every chain of a fit.

    Pass the instance as ``callback=`` to :func:`dask_bid.bayesian_id` (the chain driver
    calls it with the chain state after every iteration). A resumed chain's first call
    accounts for the iterations it had already done.

    Parameters
    ----------
    total : int
        ``n_chains * n_iter``.
    desc : str
    disable : bool
        No output at all (``--quiet``).
    file : file-like, optional
        Default: ``sys.stderr``.
    """

    def __init__(self, total, desc="sampling", disable=False, file=None):
        from tqdm.auto import tqdm

        file = file if file is not None else sys.stderr
        # a log file (no terminal) gets a line every 10 s rather than a stream of updates
        tty = bool(getattr(file, "isatty", lambda: False)())
        self.bar = tqdm(total=total, desc=desc, unit="it", disable=disable, leave=True,
                        dynamic_ncols=True, file=file, mininterval=0.2 if tty else 10.0)
        self._seen = {}
        # chains may run side by side in threads, each calling back
        self._lock = threading.Lock()

    def __call__(self, state):
        with self._lock:
            key = id(state)
            last = self._seen.get(key)
            # a chain's first call counts every iteration it has done (a resumed chain
            # starts past 0); never beyond the total (a replay after a lost worker)
            step = state.iteration - (last if last is not None else 0)
            step = min(step, self.bar.total - self.bar.n) if self.bar.total else step
            self._seen[key] = state.iteration
            if not self.bar.disable and state.trace_mse:
                self.bar.set_postfix(mse=f"{state.trace_mse[-1]:.4g}",
                                     sigma2=f"{state.sigma2:.4g}", refresh=False)
            self.bar.update(max(step, 0))

    def close(self):
        self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
