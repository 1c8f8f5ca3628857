"""Progress of a fit on the terminal: a bar over every chain's iterations, and a Ctrl-C latch."""

from __future__ import annotations

from ..._interrupt import InterruptLatch
from .._progress import ChainProgress

__all__ = ["ChainProgress", "InterruptLatch"]
