"""One BLAS thread for the products of a fit, in the process that runs the chain.

A fit's block products (C^T A, the Grams, the masked products) go through numpy's and
scipy's BLAS. OpenBLAS sums a large product in another order with 2 threads than with 1,
and Dask's worker processes run with one BLAS thread (distributed sets
``OPENBLAS_NUM_THREADS=1`` before it starts them), while the client process has as many
as cores: a chain computed on the synchronous scheduler, in memory or on an in-process
cluster then differed in the last bits from the same chain on worker processes, and the
difference grew (seen from iteration 0 to 15 on a 2000 x 300 matrix). The fit's own
parallelism is over blocks and chains, so one BLAS thread also keeps 2 block threads from
oversubscribing 2 cores.

The limit is process-wide (OpenBLAS has one thread count), so it is set once around a
whole fit (:func:`dask_bid.bayesian_id`, :func:`dask_bid.engine.fit_dask`), not per
chain or block; fits run side by side in threads of one process share it.
"""

from __future__ import annotations

import contextlib
import threading

__all__ = ["single_blas_thread"]

_controller = None
_lock = threading.Lock()
_depth = 0
_limit = None


def _get_controller():
    global _controller
    if _controller is None:
        from threadpoolctl import ThreadpoolController

        _controller = ThreadpoolController()
    return _controller


@contextlib.contextmanager
def single_blas_thread():
    """Run the block in this process with one BLAS thread (restored at the end; nested
    and concurrent uses keep the limit until the last one ends)."""
    global _depth, _limit
    with _lock:
        if _depth == 0:
            _limit = _get_controller().limit(limits=1, user_api="blas")
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _limit.restore_original_limits()
                _limit = None
