"""Ctrl-C stops a fit at the end of the current iteration; a second Ctrl-C at once.

Used by the command line and, for a fit with an output (``out=``), by the engine itself:
a notebook's "interrupt kernel" or a script's Ctrl-C then stops the chain after an
iteration whose checkpoint is written, so ``resume=True`` continues right after it
instead of replaying up to ``checkpoint_every`` iterations.
"""

from __future__ import annotations

import signal
import sys
import threading

__all__ = ["InterruptLatch", "fit_latch"]


class InterruptLatch:
    """The first SIGINT only sets :attr:`hit` and says so on stderr; :meth:`check` (called
    after every iteration) then raises KeyboardInterrupt, and the engine writes a
    checkpoint of that iteration before it stops. A second SIGINT raises
    KeyboardInterrupt where it lands, for a fit stuck waiting. Nothing is lost when an
    interrupt lands inside compiled code either: numba's ctypes callbacks, where Python
    drops an exception, are never asked to raise by the first one. Installed from the
    main thread only (elsewhere it is inert).
    """

    #: what the first Ctrl-C prints (stderr)
    MESSAGE = ("dask-bid: stopping after this iteration and saving a checkpoint "
               "(Ctrl-C again to stop at once)")

    def __init__(self, message=None, *, active=True, signals=(signal.SIGINT,)):
        self.hit = False
        self.message = self.MESSAGE if message is None else message
        # an inactive latch installs nothing: its check never raises
        self.active = active
        # the command line adds SIGTERM, what a batch system (SLURM, Kubernetes, docker
        # stop) sends before it kills: the fit then stops as after a Ctrl-C, saved
        self.signals = tuple(signals)
        self._old = {}

    def _handler(self, signum, frame):
        if self.hit:
            raise KeyboardInterrupt
        self.hit = True
        said = self.message
        if signum == getattr(signal, "SIGTERM", None):
            said = said.replace("dask-bid: ", "dask-bid: terminated (SIGTERM): ", 1).replace(
                "Ctrl-C again", "a second signal")
        print(f"\n{said}", file=sys.stderr, flush=True)

    def check(self):
        if self.hit:
            raise KeyboardInterrupt

    def __enter__(self):
        if self.active and threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                self._old[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}


def fit_latch(out):
    """The engine's latch for a fit writing ``out``: installed only where SIGINT still
    has Python's default handler (a caller with its own, like the command line's latch,
    keeps it) and only in the main thread; inert otherwise, and without an output
    (nothing to resume from)."""
    active = (out is not None and threading.current_thread() is threading.main_thread()
              and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
    return InterruptLatch(
        f"dask_bid: stopping after this iteration and saving a checkpoint to {out} "
        "(interrupt again to stop at once; resume=True continues)", active=active)
