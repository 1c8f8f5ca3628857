"""engine/reports.py: a block task's small result reaches the client with the task.

Real LocalCluster workers; the reporting tasks run exactly as DaskBackend.map submits them.
"""

import numpy as np
import pytest

from dask_bid.engine import reports
from dask_bid.engine.cluster import DistributedExecutor, SyncExecutor


def _pair(i, n):
    # (a state that must stay on the worker, the small result the client needs)
    return np.full(n, float(i)), {"i": i, "sum": np.arange(3) * i}


def _fails(i):
    raise ValueError(f"block {i} is broken")


@pytest.mark.parametrize("executor", ["distributed", "synchronous"])
def test_collect_returns_each_small_result_in_order(executor, shared_client):
    ex = DistributedExecutor(shared_client) if executor == "distributed" else SyncExecutor()
    ws = ex.workers()
    hs = [ex.submit_reporting(_pair, i, 100_000, key=f"rep-order-{executor}-{i}",
                              hint=ws[i % len(ws)] if ws else None) for i in range(5)]
    got = ex.collect(hs)
    assert [g["i"] for g in got] == list(range(5))
    np.testing.assert_array_equal(got[3]["sum"], [0, 3, 6])
    # the states stay usable where they are: a next task reads them
    if executor == "distributed":
        nxt = shared_client.submit(lambda p: float(p[0][0]), hs[4], pure=False)
        assert nxt.result() == 4.0


def test_one_task_per_block_and_no_fetch_of_the_state(shared_client):
    import time

    from distributed import get_task_stream

    ex = DistributedExecutor(shared_client)
    with get_task_stream(shared_client) as ts:
        hs = [ex.submit_reporting(_pair, i, 10, key=f"rep-count-{i}") for i in range(4)]
        assert [g["i"] for g in ex.collect(hs)] == [0, 1, 2, 3]
        # collect can return before the scheduler has heard that the last task finished
        # (the event travels ahead of the task's "finished" message): only then does the
        # task stream list it
        deadline = time.monotonic() + 30
        while not all(h.done() for h in hs) and time.monotonic() < deadline:
            time.sleep(0.01)
    # the old way ran a second task per block (pair[1]) and fetched its result
    assert sorted(str(t["key"]) for t in ts.data) == [f"rep-count-{i}" for i in range(4)]


def test_a_failed_task_raises_its_own_error(shared_client):
    ex = DistributedExecutor(shared_client)
    hs = [ex.submit_reporting(_pair, 0, 10, key="rep-ok"),
          ex.submit_reporting(_fails, 1, key="rep-bad")]
    with pytest.raises(ValueError, match="block 1 is broken"):
        ex.collect(hs)


def test_a_result_without_its_event_is_fetched_after_the_grace_period(shared_client,
                                                                        monkeypatch):
    # a task that finished but published nothing (the safety net of Inbox.collect): its
    # result comes through a second task instead of the wait hanging
    monkeypatch.setattr(reports, "GRACE_S", 0.2)
    fut = shared_client.submit(_pair, 7, 10, key="rep-silent", pure=False)
    fut.result()
    assert reports.inbox(shared_client).collect(shared_client, [fut])[0]["i"] == 7


def test_unclaimed_results_are_bounded(shared_client, monkeypatch):
    monkeypatch.setattr(reports, "MAX_UNCLAIMED", 3)
    box = reports.inbox(shared_client)
    for i in range(6):
        box._on_event((0.0, (f"rep-unclaimed-{i}", b"")))
    assert [k for k in box._got if k.startswith("rep-unclaimed")] == [
        f"rep-unclaimed-{i}" for i in (3, 4, 5)]
