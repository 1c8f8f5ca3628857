"""Helpers shared by several test modules (imported as ``_support``)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import numpy as np
import pytest


def planted(M, N, K, sigma, seed):
    """A = C W + noise, |W| <= 1/2 off the planted (noise-free) columns J. Returns (A, J)."""
    rng = np.random.default_rng(seed)
    J = np.sort(rng.choice(N, K, replace=False))
    C = rng.standard_normal((M, K))
    W = rng.uniform(-0.5, 0.5, (K, N))
    W[:, J] = np.eye(K)
    E = sigma * rng.standard_normal((M, N))
    E[:, J] = 0.0
    return C @ W + E, J


def assert_same_chain(a, b, mse_rtol=0.0):
    """Two BIDResults hold the same chain and summary, bitwise (the MSE to ``mse_rtol``)."""
    for f in a.trace.dtype.names:
        np.testing.assert_array_equal(a.trace[f], b.trace[f], err_msg=f"trace {f}")
    np.testing.assert_array_equal(a.columns, b.columns)
    np.testing.assert_array_equal(a.components, b.components)
    np.testing.assert_array_equal(a.components_sd, b.components_sd)
    np.testing.assert_array_equal(a.draws_columns, b.draws_columns)
    np.testing.assert_array_equal(a.draws_sigma2, b.draws_sigma2)
    np.testing.assert_array_equal(a.draws_sse, b.draws_sse)
    np.testing.assert_array_equal(a.inclusion_probability, b.inclusion_probability)
    if mse_rtol:
        assert a.mse == pytest.approx(b.mse, rel=mse_rtol)
    else:
        assert a.mse == b.mse


def count_pivots(monkeypatch, move="pivot"):
    """A list that grows by one (the attempt's number) each time a block applies an
    accepted pivot swap (``move="redraw"``: redraw swap; every block applies each one),
    so that a test comparing chains can require that the comparison covered accepted
    swaps of that move."""
    import dask_bid.engine.chain as chain_mod

    calls = []
    name = f"block_{move}_apply"
    real = getattr(chain_mod, name)

    def counted(state, ctx):
        calls.append(getattr(ctx, move)[0].sub)
        return real(state, ctx)

    monkeypatch.setattr(chain_mod, name, counted)
    return calls


def complete_checkpoints(out):
    """Iterations of the complete checkpoints of chain 0 written so far under ``out``."""
    found = []
    for meta in Path(out, "checkpoint").glob("c0-it*/client/zarr.json"):
        try:
            attrs = json.loads(meta.read_text()).get("attributes", {})
        except (OSError, ValueError):
            continue  # being written
        if attrs.get("complete"):
            found.append(int(meta.parent.parent.name.split("-it")[1]))
    return sorted(found)


def kill_when(child, ready, timeout, what):
    """SIGKILL the subprocess ``child`` once ``ready()`` holds; fails if the child ends
    first (with its stderr) or ``timeout`` seconds pass ("no {what} within ...")."""
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            assert child.poll() is None, child.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, f"no {what} within {timeout} s"
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
        child.stderr.close()


class StopFit(KeyboardInterrupt):
    """What :func:`stop_at`'s callback raises: a stop that no real Ctrl-C is taken for."""


def stop_at(iteration):
    """A fit ``callback`` that stops the fit (:class:`StopFit`) once its chain has done
    ``iteration`` iterations: the engine first saves that iteration's checkpoint."""
    def stop(state):
        if state.iteration == iteration:
            raise StopFit()
    return stop
