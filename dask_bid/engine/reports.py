"""Small task results sent to the client with the task, not fetched by a second task.

A block operation of the engine (``DaskBackend.map``) returns ``(new state, small result)``:
the state must stay on its worker for the next iteration, and the client needs only the
small result (a few numbers per block) to decide the next move. Done with futures alone,
that takes a second task per block (``held[1]``) and a fetch of its result from the
worker: on a 2-core process cluster a map over 4 blocks then costs ~40 ms instead of
~25 ms, and a default iteration has three of them.

Here the task itself publishes its small result as an event on a topic of the client
(``Worker.log_event``). The event travels on the worker's batched stream to the scheduler
and on to the client, ahead of the task's own "finished" message, so the client has it as
soon as it would learn that the task is done, with no further round trip.

Nothing is lost if an event goes astray: :meth:`Inbox.collect` watches the futures too. A
task that failed, or whose worker died, raises its error from ``Client.gather`` exactly as
before (the fit's recovery path sees the same exceptions); a task that finished without an
event seen within a grace period has its result fetched the old way (a second task). The
payload is pickled (an event must be msgpack-serialisable); pickling keeps every float bit
for bit, so the chain is the same on every path.
"""

from __future__ import annotations

import pickle
import threading
import time
import weakref
from collections import OrderedDict

__all__ = ["Inbox", "inbox", "reporting_task", "second", "gather_watching"]

#: futures whose task finished but whose event has not arrived after this many seconds
#: are fetched with a second task (the event normally precedes the "finished" message)
GRACE_S = 2.0

#: the most unclaimed results kept per client: results of abandoned operations (a map
#: whose chain was restored from a checkpoint) are dropped oldest first
MAX_UNCLAIMED = 4096

_BAD_STATUS = ("error", "cancelled", "lost")

#: a collect that sees no task finish for this long asks the scheduler about stuck tasks
STALL_S = 5.0


def _unstick_task():
    """A function for ``Client.run_on_scheduler``: send to any worker the ``no-worker``
    tasks whose only allowed workers are gone although their restriction is loose
    (``allow_other_workers``); returns (tasks sent, workers running).

    distributed re-checks such tasks when a worker joins, but by their worker
    restrictions alone (``valid_workers``, ignoring ``loose_restrictions``): after every
    worker of a fit died, the block tasks hinted at them stayed ``no-worker`` forever
    and the fit hung, new workers idle. Nested, so that it is pickled by value: the
    scheduler needs no dask_bid to run it.
    """
    def unstick(dask_scheduler):
        import time as _time

        running = set(dask_scheduler.workers)
        recs = {}
        for ts in list(dask_scheduler.unrunnable):
            if (running and ts.loose_restrictions and ts.worker_restrictions
                    and not (set(ts.worker_restrictions) & running)):
                ts.worker_restrictions = None
                recs[ts.key] = "processing"
        if recs:
            dask_scheduler.transitions(recs, stimulus_id=f"dask-bid-unstick-{_time.time()}")
        return len(recs), len(running)

    return unstick


def reporting_task(topic, key, fn, *args):
    """Run ``fn(*args) -> (state, small)`` on a worker, publish ``small`` under ``topic``
    as ``(key, pickled small)``, and return the pair (the state stays on the worker)."""
    from distributed import get_worker

    out = fn(*args)
    get_worker().log_event(topic, (key, pickle.dumps(out[1], protocol=pickle.HIGHEST_PROTOCOL)))
    return out


def second(pair):
    """The small result of a ``(state, small)`` pair (the fallback fetch)."""
    return pair[1]


class Inbox:
    """The small results of one client's reporting tasks, by task key."""

    def __init__(self, client):
        self.topic = f"dask-bid-results-{client.id}"
        self._got = OrderedDict()
        self._cond = threading.Condition()
        client.subscribe_topic(self.topic, self._on_event)

    def _on_event(self, event):
        # runs on the client's event loop thread
        _, (key, payload) = event
        with self._cond:
            self._got[key] = payload
            while len(self._got) > MAX_UNCLAIMED:
                self._got.popitem(last=False)
            self._cond.notify_all()

    def _take(self, keys):
        return [pickle.loads(self._got.pop(k)) for k in keys]

    def collect(self, client, futures, *, poll=0.05):
        """The small results of ``futures`` (submitted with :func:`reporting_task`), in
        order. Raises what ``client.gather(futures)`` raises if a task failed or was lost."""
        keys = [f.key for f in futures]
        finished_since = None
        n_waiting, stalled_since, warned = len(keys), time.monotonic(), False
        while True:
            with self._cond:
                if all(k in self._got for k in keys):
                    return self._take(keys)
                self._cond.wait(poll)
                if all(k in self._got for k in keys):
                    return self._take(keys)
                missing = [i for i, k in enumerate(keys) if k not in self._got]
            status = [futures[i].status for i in missing]
            if len(missing) < n_waiting or all(s == "finished" for s in status):
                n_waiting, stalled_since = len(missing), time.monotonic()
            elif time.monotonic() - stalled_since > STALL_S:
                warned = _stalled(client, warned)
                stalled_since = time.monotonic()
            if any(s in _BAD_STATUS for s in status):
                with self._cond:
                    for k in keys:
                        self._got.pop(k, None)
                # raises the task's error; a lost one is recomputed: watched as it waits
                gather_watching(client, futures)
                raise RuntimeError("a block task failed, but gathering it raised nothing")
            if all(s == "finished" for s in status):
                now = time.monotonic()
                finished_since = finished_since or now
                if now - finished_since > GRACE_S:
                    # no event came (should not happen): fetch those results the old way
                    got = client.gather([client.submit(second, futures[i], pure=False)
                                         for i in missing])
                    with self._cond:
                        for i, v in zip(missing, got, strict=True):
                            self._got[keys[i]] = pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
                        return self._take(keys)


def gather_watching(client, futures):
    """``client.gather(futures)``, watching for stuck tasks while it waits, as
    :meth:`Inbox.collect` does.

    A plain gather waits without end when every worker died while it waited (a
    checkpoint's save, a column fetch, a pass's sums): the tasks it waits on are
    recomputed, hinted at the dead workers, and distributed leaves them ``no-worker``
    after a new worker joins (see :func:`_unstick_task`); no error reaches the chain's
    recovery, and nothing was said. Every :data:`STALL_S` without a future finishing, the
    scheduler is asked to free them, and a cluster without workers is said once.
    """
    from distributed import wait

    futures = list(futures)
    warned, n_done, since = False, sum(f.done() for f in futures), time.monotonic()
    while n_done < len(futures):
        try:
            with client.as_current():  # wait() uses the default client: this one
                wait(futures, timeout=STALL_S)
            break
        except TimeoutError:
            pass
        done = sum(f.done() for f in futures)
        if done > n_done:
            n_done, since = done, time.monotonic()
        elif time.monotonic() - since >= STALL_S:
            warned = _stalled(client, warned)
            since = time.monotonic()
    return client.gather(futures)


def _stalled(client, warned) -> bool:
    """A collect waiting with no progress: free tasks stuck on departed workers (see
    :func:`_unstick_task`), and say once when the cluster has no worker at all (the fit
    waits for one to join). Returns whether that was said."""
    try:
        _, n_workers = client.run_on_scheduler(_unstick_task())
    except Exception:  # the scheduler is gone or busy: the gather reports it
        return warned
    if n_workers == 0 and not warned:
        from .._warn import warn

        warn("the Dask cluster has no worker left: the fit waits for one to join (it then "
             "goes on where it was); stop it with Ctrl-C and resume it later with "
             "resume=True.", RuntimeWarning)
        return True
    return warned


_INBOXES = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def inbox(client):
    """The :class:`Inbox` of ``client`` (subscribed once per client, shared by its fits
    and chains: a topic has one handler per client)."""
    with _LOCK:
        box = _INBOXES.get(client)
        if box is None:
            box = _INBOXES[client] = Inbox(client)
        return box
