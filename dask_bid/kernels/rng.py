"""Counter-based random streams.

Every random draw of a chain comes from a Generator keyed by
``(chain, iteration, block, purpose)`` under one root SeedSequence. A worker
rebuilds its generator from the key alone, so the chain is the same whatever
the scheduler, the worker that runs a block, or a replay after a failure.
"""

from __future__ import annotations

import numpy as np

__all__ = ["root_entropy", "stream", "CLIENT", "SWEEP", "PRIOR", "CANDIDATES", "INIT", "SWEEP2",
           "SLOT", "ANNEAL", "PIVOT", "POOL", "REDRAW"]

# purposes: the last element of the spawn key (new purposes go at the end: the numbers
# key every saved chain's streams)
CLIENT, SWEEP, SWEEP2, PRIOR, CANDIDATES, INIT, SLOT, ANNEAL, PIVOT, POOL, REDRAW = range(11)


def root_entropy(random_state) -> int:
    """A 128-bit integer entropy from ``random_state`` (None, int, SeedSequence, Generator)."""
    if isinstance(random_state, np.random.SeedSequence):
        if (isinstance(random_state.entropy, (int, np.integer)) and not random_state.spawn_key
                and random_state.pool_size == 4):
            return int(random_state.entropy)
        # a spawned child (``ss.spawn(n)``) shares its parent's entropy: its spawn key is
        # what makes it another stream, so the root is drawn from the child's own state
        # (as is a sequence entropy's, which int() cannot hold)
        words = random_state.generate_state(4, np.uint32)
        return int(sum(int(w) << (32 * i) for i, w in enumerate(words)))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1)) << 64 | int(
            random_state.integers(0, 2**63 - 1)
        )
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**31 - 1))
    if random_state is None:
        return int(np.random.SeedSequence().entropy)
    return int(np.random.SeedSequence(int(random_state)).entropy)


def stream(entropy: int, chain: int, iteration: int, block: int,
           purpose: int, sub: int | None = None) -> np.random.Generator:
    """The Generator for one (chain, iteration, block, purpose) cell; ``sub`` tells apart
    several uses of one purpose within an iteration (the pivot swap's attempts)."""
    key = (chain, iteration + 1, block + 1, purpose) + (() if sub is None else (sub,))
    ss = np.random.SeedSequence(entropy, spawn_key=key)
    return np.random.Generator(np.random.PCG64(ss))
