"""``fit_dask``: a Bayesian ID fit on a Dask cluster, with the matrix read out of core.

``dask_bid.bayesian_id`` (and ``BayesianID.fit``) call this for dask, Zarr and path input,
and for numpy input with ``client=`` or ``out=``. The chain is driven by the same client-side
code as the in-memory path (:func:`dask_bid.engine.chain.run_chain`); only the backend
differs (:class:`~dask_bid.engine.dask_backend.DaskBackend`).
"""

from __future__ import annotations

import contextlib
import logging
import numbers
import os
import uuid

import numpy as np

from .._attrs import CONVERTED_FROM_ATTR
from .._errors import CheckpointError, DaskBidError, InputChangedError, ParameterError
from .._interrupt import fit_latch
from .chain import run_chain
from .checkpoint import Checkpointer, StoreSpec, warn_fallback
from .cluster import (
    RECOVERABLE_ERRORS,
    check_client_arg,
    check_cluster_versions,
    cluster_executor,
    current_client,
    fit_scheduler,
)
from .dask_backend import DaskBackend, MaskedDaskBackend, TileSource, plan_layout
from .fingerprint import StoreWatch, compare_checksum, compare_metadata, metadata_fingerprint
from .inputs import check_chunks, with_mask
from .lock import OutputLock, hold_for_reading
from .scaling import (
    NeedsRescale,
    check_finite_result,
    check_range,
    min_nonzero_abs,
    needs_rescale,
    scale_array,
    scale_exponent,
    scale_params,
    unscale_result,
)
from .scratch import scratch_checkpoints
from .zarr_io import (
    FORMAT_VERSION,
    RUN_ATTR,
    check_output_location,
    default_chunks,
    is_url,
    jsonable,
    local_path,
    mark_failed,
    prepare_output,
    remove_zarr_partials,
    result_columns,
    stored_column_names,
    url_options,
    valid_column_names,
    write_result,
    zarr_sources_of,
)

__all__ = ["fit_dask", "check_resume", "check_callback", "ENGINE_DEFAULTS",
           "MAX_RECOVERIES"]

log = logging.getLogger("dask_bid.engine")

#: Engine keyword arguments of ``bayesian_id`` / ``BayesianID.fit`` and their defaults.
ENGINE_DEFAULTS = dict(client=None, out=None, overwrite=False, resume=False,
                       checkpoint_every=25, chunks=None, storage_options=None, callback=None,
                       allow_missing_chunks=False, mask=None, keep_final_state=True)

#: Worker losses a chain survives before the error is raised.
MAX_RECOVERIES = 5

# parameters that do not change the chain of the Dask engine (not compared on resume)
_NOT_COMPARED = ("random_state", "priors", "n_threads")


def _check_engine_kwargs(out, overwrite, resume, checkpoint_every, chunks, callback,
                         keep_final_state=True):
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise ParameterError(f"out must be a path or URL string, got {type(out).__name__}.")
    for name, v in (("overwrite", overwrite), ("resume", resume),
                    ("keep_final_state", keep_final_state)):
        if not isinstance(v, (bool, np.bool_)):
            raise ParameterError(f"{name} must be True or False, got {v!r}.")
    if (not isinstance(checkpoint_every, numbers.Integral) or isinstance(checkpoint_every, bool)
            or checkpoint_every < 1):
        raise ParameterError(
            f"checkpoint_every must be a positive integer (iterations between checkpoints), "
            f"got {checkpoint_every!r}.")
    if chunks is not None:
        ok = (isinstance(chunks, (tuple, list)) and len(chunks) == 2
              and all(isinstance(c, numbers.Integral) and c >= 1 for c in chunks))
        if not ok:
            raise ParameterError(
                f"chunks must be None or (rows, cols), two positive integers giving the tile "
                f"each streaming task reads, got {chunks!r}.")
    check_callback(callback)


def check_callback(callback):
    """Refuse a ``callback=`` that cannot be called (None is no callback)."""
    if callback is not None and not callable(callback):
        raise ParameterError("callback must be callable (it receives the chain state).")


def _input_chunks(src):
    M, N = src.shape
    if src.kind == "sparse":  # rows: C's chunks (M x K, dense); columns: the store's blocks
        return src.in_chunks
    if src.kind == "zarr":
        rc, cc = src.array.chunks
    elif src.kind == "dask":
        return tuple(tuple(int(c) for c in x) for x in src.array.chunks)
    else:
        rc, cc = default_chunks((M, N), 8)
    return (tuple([rc] * (M // rc) + ([M % rc] if M % rc else [])),
            tuple([cc] * (N // cc) + ([N % cc] if N % cc else [])))


#: what a call may change to continue a finished fit: run its chains longer, add chains
_GROWS = ("n_iter", "n_chains")

#: stored parameters that 'auto' derives from another one: a resume that changes the
#: other names them too, and says where they come from (a user who left them 'auto' saw
#: a parameter named that they never set)
_DERIVED = {"tempered_warmup": "burn_in", "search_warmup": "burn_in"}


def _extends(stored, meta) -> bool:
    """Whether ``meta`` asks for more iterations or more chains of the complete fit
    ``stored`` and for nothing else that changes a chain (then the fit is continued,
    not compared)."""
    a, b = dict(stored.get("params") or {}), dict(meta["params"])
    if stored.get("status") != "complete" or any(k not in a or k not in b for k in _GROWS):
        return False
    if [a.pop(k) for k in _GROWS] == [b.pop(k) for k in _GROWS]:
        return False
    return all(jsonable(stored.get(k)) == jsonable(meta.get(k))
               for k in ("input_shape", "layout")) and a == b


def _short(v, limit=60) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 4] + " ..."


def _compare_meta(stored, meta, entropy_given):
    diffs = []
    for k in ("params", "input_shape", "layout", "n_chains"):
        if jsonable(stored.get(k)) != jsonable(meta.get(k)):
            diffs.append(k)
    if diffs:
        # a finished fit continues with a larger n_iter or n_chains: those are not named
        # as differences (they pointed at the allowed change, not at the refused one)
        grows = stored.get("status") == "complete"

        def allowed(k, a, b):
            try:
                return grows and k in _GROWS and int(b) >= int(a)
            except (TypeError, ValueError):
                return False

        detail = []
        if "params" in diffs:
            a, b = stored.get("params", {}), meta["params"]
            changed = {k for k in set(a) | set(b) if a.get(k) != b.get(k)}
            detail = [f"{k}: stored {_short(a.get(k))}, now {_short(b.get(k))}"
                      + (f" (from {_DERIVED[k]} when 'auto')" if _DERIVED.get(k) in changed
                         else "")
                      for k in sorted(changed) if not allowed(k, a.get(k), b.get(k))]
            if not detail:
                diffs.remove("params")
        if "n_chains" in diffs and (allowed("n_chains", stored.get("n_chains"),
                                            meta.get("n_chains"))
                                    or any(d.startswith("n_chains:") for d in detail)):
            diffs.remove("n_chains")  # (said once, among the params)
        # an unfinished fit grows neither: it is resumed as started, then continued
        grow = [k for k in _GROWS if any(d.startswith(f"{k}:") for d in detail)]
        if grow and not grows:
            verb = "grows" if len(grow) == 1 else "grow"
            detail.append(f"{' and '.join(grow)} {verb} only once the fit has finished: "
                          "resume it as it was started first, then continue it")
        for k in ("layout", "input_shape"):
            if k in diffs:  # the layout: which of its parts (the chunks give the tiles)
                a, b = stored.get(k), meta.get(k)
                if isinstance(a, dict) and isinstance(b, dict):
                    detail += [f"{k} {part}: stored {_short(a.get(part))}, now "
                               f"{_short(b.get(part))}" for part in sorted(set(a) | set(b))
                               if jsonable(a.get(part)) != jsonable(b.get(part))]
                else:
                    detail.append(f"{k}: stored {_short(a)}, now {_short(b)}")
        raise ParameterError(
            "resume=True, but the stored fit differs from this one in "
            f"{', '.join(diffs)}{' (' + '; '.join(detail) + ')' if detail else ''}. Resume with "
            "the same parameters, input and chunks (a finished fit also continues with a "
            "larger n_iter), or pass resume=False, overwrite=True.")
    _compare_seed(stored, entropy_given)


def _compare_seed(stored, entropy_given):
    if entropy_given is not None and str(entropy_given) != stored.get("entropy"):
        raise ParameterError(
            "resume=True, but random_state gives another seed than the stored fit's. Pass "
            "random_state=None (the stored seed is used) or the original seed.")


def _check_extendable(stored, meta, ckpt, where):
    """Refuse, before any work, to continue a complete fit that cannot be: fewer
    iterations than it ran, or no final state kept (a fit written before dask_bid kept
    it, or whose ``checkpoint/`` was removed)."""
    done, want = int(stored["params"]["n_iter"]), int(meta["params"]["n_iter"])
    if want < done:
        raise ParameterError(
            f"resume=True with n_iter={want}, but the finished fit at {where!r} ran {done} "
            f"iterations: a fit is continued, never shortened. Pass n_iter > {done} to "
            "continue it, or resume=False, overwrite=True to fit again.")
    had, now = int(stored["n_chains"]), int(meta["params"]["n_chains"])
    if now < had:
        raise ParameterError(
            f"resume=True with n_chains={now}, but the finished fit at {where!r} ran {had} "
            f"chains: chains are added, never dropped. Pass n_chains >= {had} (more "
            "chains start afresh beside them), or resume=False, overwrite=True.")
    for c in range(had):
        latest = ckpt.latest(c)
        if latest is None or getattr(latest[1]["state"], "iteration", None) != done:
            raise ParameterError(
                f"the finished fit at {where!r} kept no final state of chain {c} (it was "
                "fitted with keep_final_state=False, or written before dask_bid kept one, "
                "or its checkpoint/ folder was removed): it cannot be continued. Fit again "
                f"with n_iter={want}{f', n_chains={now}' if now != 1 else ''} and "
                "overwrite=True.")


#: parameters added since fits were first saved, with the value that gives the chain a
#: fit saved before them ran (a stored fit without them resumes with that value)
_ADDED_PARAMS = {"n_redraw": 0}


def _with_added_params(stored):
    params = stored.get("params")
    if not isinstance(params, dict):
        return stored
    return {**stored, "params": {**_ADDED_PARAMS, **params}}


def _traced_as_columns(meta):
    """``meta`` with its params naming the traced columns themselves: the default
    (``trace_columns=None``, ``n_trace_columns`` evenly spaced) and the same columns
    given explicitly are one setting (an explicit list of the defaults was refused)."""
    from .summary import traced_columns

    p, shape = meta.get("params"), meta.get("input_shape")
    if not isinstance(p, dict) or not isinstance(shape, (list, tuple)) or len(shape) != 2:
        return meta
    try:
        cols = [int(c) for c in traced_columns(p, int(shape[1]))]
    except (KeyError, TypeError, ValueError):
        return meta
    p = {k: v for k, v in p.items() if k != "n_trace_columns"}
    return {**meta, "params": {**p, "trace_columns": cols}}


def _check_stored(stored, meta, entropy_given, out, storage_options) -> bool:
    """Compare this call with the fit ``stored`` at ``out`` (refusing what cannot be
    resumed or continued); returns whether it continues that finished fit."""
    stored = _traced_as_columns(_with_added_params(stored))
    meta = _traced_as_columns(meta)
    if not _extends(stored, meta):
        _compare_meta(stored, meta, entropy_given)
        return False
    _compare_seed(stored, entropy_given)
    _check_extendable(stored, meta, Checkpointer(StoreSpec(local_path(out), storage_options),
                                                 create=False, run_id=stored.get("run_id")),
                      local_path(out))
    return True


def stored_fit(out, *, storage_options=None) -> dict | None:
    """The ``dask_bid`` attributes of the fit stored at ``out`` (with its ``params``), or
    None where there is none (nothing there, not a dask_bid fit, unreadable)."""
    try:
        import zarr

        stored = zarr.open_group(local_path(out), mode="r",
                                 storage_options=url_options(out, storage_options)
                                 ).attrs.get("dask_bid")
    except Exception:
        return None
    if not isinstance(stored, dict) or not isinstance(stored.get("params"), dict):
        return None
    return stored


def check_resume(out, p, *, storage_options=None):
    """Refuse at once a ``resume=True`` that the fit stored at ``out`` would refuse
    once the input is read: other parameters or seed, fewer iterations than a finished
    fit ran, or a finished fit that kept no final state. ``p``: validated parameters.
    Silent where ``out`` holds no dask_bid fit (the engine decides then); the input's
    shape, layout and content are compared by the fit itself.

    The command line calls it before converting the input and compiling the kernels.
    """
    from ..kernels.rng import root_entropy

    stored = stored_fit(out, storage_options=storage_options)
    if stored is None:
        return
    meta = {k: stored.get(k) for k in ("input_shape", "layout")}
    meta["n_chains"] = p["n_chains"]
    meta["params"] = jsonable({k: v for k, v in p.items() if k not in _NOT_COMPARED})
    given = p.get("random_state")
    _check_stored(stored, meta, None if given is None else root_entropy(given), out,
                  storage_options)


def in_user_units(callback, exponent):
    """``callback`` seeing the chain's sigma2 and MSE in A's units. A matrix fitted as
    A / 2^e (engine/scaling.py) has its chain's in the scaled units: the progress bar
    showed mse=8.3e+96 for a fit whose MSE is reported as inf, sigma2 2.6e+297 for one
    reported as 2.5e-4. One view per chain state (the bar tells chains apart by it)."""
    if callback is None or not exponent:
        return callback
    views = {}

    def cb(state):
        view = views.get(id(state))
        if view is None or view._state is not state:
            view = views[id(state)] = _UserUnits(state, exponent)
        return callback(view)

    return cb


class _UserUnits:
    """A chain state with sigma2 and the MSE (and their traces) in A's units; every
    other attribute is the state's own."""

    def __init__(self, state, exponent):
        self._state = state
        self._e = 2 * int(exponent)

    def _up(self, x):
        with np.errstate(over="ignore"):
            return float(np.ldexp(float(x), self._e))

    @property
    def sigma2(self):
        return self._up(self._state.sigma2)

    @property
    def trace_mse(self):
        return [self._up(m) for m in self._state.trace_mse]

    @property
    def trace_sigma2(self):
        return [self._up(v) for v in self._state.trace_sigma2]

    def __getattr__(self, name):
        return getattr(self._state, name)


class _ChainRunner:
    """Runs one chain with periodic checkpoints and recovery from lost workers."""

    def __init__(self, backend, cfg, entropy, chain, ckpt, every, callback, stop=None):
        self.be = backend
        # raises KeyboardInterrupt after a Ctrl-C (dask_bid/_interrupt.py), between
        # iterations
        self.stop = stop
        self.cfg = cfg
        self.entropy = entropy
        self.chain = chain
        self.ckpt = ckpt
        self.every = every
        self.callback = callback
        self.n_recoveries = 0
        self.saved_at = None

    def checkpoint(self, state):
        be = self.be
        name = self.ckpt.save(be, state, self.chain, be.norm_a2, be.n_obs)
        self.saved_at = state.iteration
        # restart the futures from the files just written: bounds the lineage the
        # scheduler keeps, which is all it needs to replay a lost worker's blocks
        be.load_blocks(self.ckpt.spec, f"checkpoint/{name}")
        self.ckpt.prune(self.chain)

    def _cb(self, state):
        if state.iteration % self.every == 0 and state.iteration < self.cfg.n_iter:
            self.checkpoint(state)
        try:
            if self.callback is not None:
                self.callback(state)
            if self.stop is not None:
                self.stop()
        except KeyboardInterrupt:
            # the caller stops the fit here (a Ctrl-C, or a callback's own stop): save
            # this iteration first, so that a resume continues right after it instead
            # of replaying up to checkpoint_every iterations
            if self.saved_at != state.iteration:
                self.checkpoint(state)
            raise

    def restore(self):
        """The newest checkpoint whose every part reads back, or None (start afresh).

        A damaged one is skipped with a warning (``CheckpointFallbackWarning``); the
        chain being deterministic, an older checkpoint (or the start) gives the same
        result, only later.
        """
        skipped = False
        for name, payload in self.ckpt.candidates(self.chain):
            try:
                self.be.load_blocks(self.ckpt.spec, f"checkpoint/{name}", payload["norm_a2"],
                                    payload["n_obs"], force=True)
                self.be.check_blocks()
            except CheckpointError as exc:
                skipped = True
                warn_fallback(f"checkpoint {name} of {self.ckpt.spec.root!r} cannot be read "
                              f"back ({exc}); trying an older one")
                continue
            self.saved_at = payload["state"].iteration
            # the blocks come back without cached rows (DaskBackend.load_blocks)
            payload["state"].cached = []
            return payload["state"]
        if skipped or self.ckpt.has_any(self.chain):
            warn_fallback(f"no readable checkpoint of chain {self.chain} in "
                          f"{self.ckpt.spec.root!r}: the chain starts again from its first "
                          "iteration (it gives the same result)")
        self.be._held = None
        return None

    def run(self, state=None, J0=None):
        while True:
            try:
                out = run_chain(self.be, self.cfg, self.entropy, chain=self.chain, J0=J0,
                                state=state, callback=self._cb)
                break
            except RECOVERABLE_ERRORS as exc:
                if not self.be.ex.is_distributed or self.n_recoveries >= MAX_RECOVERIES:
                    raise
                self.n_recoveries += 1
                log.warning("chain %d: lost work on the cluster (%s: %s); restoring the last "
                            "checkpoint and replaying", self.chain, type(exc).__name__, exc)
                state = self.restore()
        if self.saved_at != out.state.iteration:
            self.checkpoint(out.state)
        return out


def _run_chains(ex, ckpt, runners, starts):
    """Run the chains; on a cluster side by side, one client thread per chain.

    Each chain has its own futures, keys and checkpoint names, so the threads share
    nothing but the (thread-safe) client; the checkpoint group is created up front so
    that the chains' first checkpoints do not race to create it.
    """
    if not ex.is_distributed or len(runners) == 1:
        return [r.run(state=s, J0=j) for r, (s, j) in zip(runners, starts, strict=True)]
    from concurrent.futures import ThreadPoolExecutor

    ckpt.spec.group().require_group("checkpoint")
    with ThreadPoolExecutor(len(runners)) as pool:
        futs = [pool.submit(r.run, state=s, J0=j)
                for r, (s, j) in zip(runners, starts, strict=True)]
        return [f.result() for f in futs]


def fit_dask(src, p, *, client=None, out=None, overwrite=False, resume=False,
             checkpoint_every=25, chunks=None, storage_options=None, callback=None,
             initial_columns=None, allow_missing_chunks=False, mask=None,
             feature_names=None, sample_names=None, keep_final_state=True):
    """Run the Bayesian ID sampler on the Dask engine.

    Parameters
    ----------
    src : MatrixSource
        From :func:`dask_bid.engine.inputs.as_matrix_source`.
    p : dict
        Validated parameters (:func:`dask_bid.interface._params.validate_params`).
    client : distributed.Client, str, "synchronous" or None
        See :func:`dask_bid.engine.cluster.cluster_executor`.
    out : str or PathLike, optional
        Output Zarr group (local directory or fsspec URL). Without it nothing is written
        (checkpoints go to a temporary directory removed at the end). A local output is
        locked while the fit runs (:mod:`dask_bid.engine.lock`): a second fit writing it
        is refused.
    overwrite : bool
        Replace an existing ``out``, if it is a dask_bid result (or an empty directory);
        anything else is refused, and the input is never deleted.
    resume : bool
        Continue the fit stored at ``out`` from its last checkpoint (a fresh fit when
        there is none). The result is bitwise that of an uninterrupted fit. The input must
        be the one the fit started on: shape, dtype, chunks and a checksum of its content
        (recorded by the first pass of the original run) are compared, and a mismatch is
        refused (:class:`~dask_bid.InputChangedError`); a complete fit's stored result is
        returned after the same check (one read of A), unless ``n_iter`` or ``n_chains``
        is larger than it ran: then it is continued to them (the parameters describe the
        fit wanted, so the default ``n_iter=1000`` continues a shorter fit; pass its own
        ``n_iter`` to read it back, or :func:`~dask_bid.engine.read_result`).
    checkpoint_every : int
        Iterations between checkpoints.
    chunks : (rows, cols), optional
        Tile shape of the streaming passes (default: the input's chunks, merged or split
        into tiles of at most ~16 MiB, ``dask_backend.TILE_BYTES``).
    storage_options : dict, optional
        fsspec options (credentials, endpoint; docs/engine.md, "Object storage") for URL
        input, output and checkpoints; local paths ignore them, so one dict serves a URL
        input and a local output.
    keep_final_state : bool, default True
        With ``out``: keep each chain's final state in ``out/checkpoint/`` (about 4-5 times
        the size of W per chain), so that ``resume=True`` with a larger ``n_iter`` or
        ``n_chains`` can continue the finished fit; False deletes ``out/checkpoint/`` when
        the fit is complete (such a fit can only be fitted again).
    callback : callable, optional
        ``callback(state)`` after every iteration, with the chain's ``ClientState``
        (its ``sigma2``, ``trace_mse`` and ``trace_sigma2`` in A's units, also for a
        matrix fitted as A / 2^e). A ``KeyboardInterrupt`` it raises stops the fit after
        a checkpoint of that iteration is written: ``resume=True`` continues right after
        it.
    initial_columns : callable, optional
        ``initial_columns(A, p, entropy, chain)`` -> K starting columns or None (random);
        the interface passes the one that runs the baselines for ``init="sketch"``, ...
    allow_missing_chunks : bool, default=False
        Accept a Zarr input with chunk files missing (read as the fill value). By default
        such an input is refused (:class:`~dask_bid.IncompleteStoreError`), since a lost
        chunk file would silently become zeros; so is a dask array reading such a Zarr
        array (``da.from_zarr``; one inlined in the tasks, ``inline_array=True`` or after
        ``dask.optimize``, is found in graphs of up to 20,000 tasks).
    mask : array-like of bool, zarr.Array or path / URL, optional
        With ``missing="mask"``: True marks an observed entry, False a missing one (as
        NaN in A does; an entry that is NaN is missing either way). Same shape as A; a
        Zarr mask of a Zarr input is read tile by tile beside it
        (:func:`dask_bid.engine.inputs.with_mask`).
    feature_names : sequence of str, optional
        The names of A's N columns (a DataFrame's), kept in the result
        (``BIDResult.feature_names``, and in ``out``); default: the names recorded on a
        Zarr input (``attrs["dask_bid_column_names"]``), else none.
    sample_names : sequence of str, optional
        The names of A's M rows, kept the same way (``BIDResult.sample_names``; up to
        100,000 rows); default: a DataFrame's index of strings, or the names recorded on
        a Zarr input (``attrs["dask_bid_row_names"]``, the row labels of a converted text
        file), else none.

    Returns
    -------
    BIDResult
        With an extra attribute ``C``: the selected columns (lazy dask array over ``out/C``
        or over the input; numpy for numpy input without ``out``).

    Notes
    -----
    A matrix whose largest absolute value lies outside [2^-300, 2^300] is fitted as
    A / 2^e (see :mod:`dask_bid.engine.scaling`); results are reported in A's units. A fit
    that fails after creating ``out`` marks it ``failed`` with the reason.
    """
    from ..kernels.rng import root_entropy

    _check_engine_kwargs(out, overwrite, resume, checkpoint_every, chunks, callback,
                         keep_final_state)
    check_client_arg(client)
    if out is not None:  # file:// and local:// name this machine's files: checked as such
        out = local_path(out)
    if not isinstance(allow_missing_chunks, (bool, np.bool_)):
        raise ParameterError(
            f"allow_missing_chunks must be True or False, got {allow_missing_chunks!r}.")
    if mask is not None:
        if not _masked(p):
            raise ParameterError("mask= marks the observed entries, which only "
                                 "missing='mask' uses: pass missing='mask' too.")
        src = with_mask(src, mask, storage_options=storage_options,
                        allow_missing_chunks=bool(allow_missing_chunks))
    M, N = src.shape
    K = p["n_components"]
    if src.kind == "sparse" and not _masked(p):
        raise ParameterError("a sparse input's entries that are not stored are unobserved, "
                             "not zero: pass missing='mask' (to fit zeros, densify it "
                             "first: X.toarray()).")
    in_path = src.path if src.kind in ("zarr", "sparse") else None
    # a dask array may read Zarr stores (from_zarr): those are inputs too, never replaced
    dask_inputs = zarr_sources_of(src.array) if src.kind == "dask" else ()
    if resume and out is None:
        raise ParameterError("resume=True needs out=, the output group holding the checkpoints.")
    if out is not None:  # refusals of the output location first: they read nothing
        check_output_location(out, input_path=in_path, inputs=dask_inputs,
                              overwrite=overwrite, resume=resume,
                              storage_options=storage_options)
    # listing the store is cheap next to a pass, and nothing is created before it
    check_chunks(src, allow_missing=bool(allow_missing_chunks))
    given = p["random_state"]
    entropy_given = None if given is None else root_entropy(given)
    in_chunks = _input_chunks(src)
    if src.kind == "sparse":
        from .sparse_backend import plan_sparse_layout

        layout = plan_sparse_layout(src.array.column_counts(), (M, N), K,
                                    block_size=p["block_size"], chunks=chunks)
    else:
        layout = plan_layout((M, N), in_chunks, K, block_size=p["block_size"], chunks=chunks,
                             masked=_masked(p))
    params_cmp = {k: v for k, v in p.items() if k not in _NOT_COMPARED}
    meta = {"params": jsonable(params_cmp), "input_shape": [M, N],
            "layout": layout.describe(), "n_chains": p["n_chains"],
            "input": {"kind": src.kind, "path": src.path, "dtype": str(src.dtype),
                      "fingerprint": metadata_fingerprint(src, in_chunks)},
            "engine": {"checkpoint_every": int(checkpoint_every),
                       "chunks": None if chunks is None else list(chunks)},
            "format_version": FORMAT_VERSION}
    if src.kind == "zarr":
        # the file a converted store came from: the result says what it was fitted on
        # even after the store is converted again from another file of that name
        with contextlib.suppress(Exception):
            conv = src.array.attrs.get(CONVERTED_FROM_ATTR)
            if isinstance(conv, dict):
                meta["input"]["converted_from"] = jsonable(conv)
    names = valid_column_names(feature_names, N)
    if names is None and src.kind in ("zarr", "sparse"):
        names = stored_column_names(src.array)
    if names is not None:
        meta["feature_names"] = names
    rows = valid_column_names(sample_names, M)
    if rows is None and src.kind in ("zarr", "sparse"):
        rows = stored_column_names(src.array, axis=0)
    if rows is not None:
        meta["sample_names"] = rows
    check_cluster_versions(client)  # before an output is created or replaced
    lock = OutputLock(local_path(out)) if out is not None else contextlib.nullcontext()
    with lock:
        group, existing = (None, False)
        if out is not None:
            group, existing = prepare_output(
                out, input_path=in_path, inputs=dask_inputs, overwrite=overwrite,
                resume=resume,
                storage_options=storage_options)
        run = _Fit(src, p, meta, layout, group, existing, entropy_given, client=client,
                   out=out, storage_options=storage_options,
                   checkpoint_every=int(checkpoint_every), callback=callback,
                   keep_final_state=bool(keep_final_state),
                   initial_columns=initial_columns)
        from .blas import single_blas_thread

        with single_blas_thread():  # as Dask's worker processes (engine/blas.py)
            try:
                return run.run()
            finally:
                if run.reading is not None:  # the input, let go
                    with contextlib.suppress(OSError):
                        os.close(run.reading)


def _masked(p) -> bool:
    """``missing="mask"``: NaN marks a missing entry (the MaskedDaskBackend)."""
    return p.get("missing") == "mask"


def _zero_filled(A):
    """The starting basis of a masked fit is computed on A with NaN as 0, as in memory."""
    if isinstance(A, np.ndarray):
        return np.where(np.isnan(A), 0.0, A)
    import dask.array as da

    x = A if hasattr(A, "dask") else da.from_array(A, chunks=A.chunks, lock=False,
                                                   asarray=True)
    x = x.astype(np.float64)
    return da.where(da.isnan(x), 0.0, x)


def _one_line(exc) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if not isinstance(exc, DaskBidError) else text


class _Fit:
    """One call of :func:`fit_dask` once the output is prepared and locked."""

    def __init__(self, src, p, meta, layout, group, existing, entropy_given, *, client, out,
                 storage_options, checkpoint_every, callback, initial_columns,
                 keep_final_state=True):
        self.src, self.p, self.meta, self.layout = src, p, meta, layout
        self.keep_final_state = keep_final_state
        self.group, self.existing = group, existing
        self.entropy_given = entropy_given
        self.run_id = None
        self.client, self.out, self.storage_options = client, out, storage_options
        self.every, self.callback, self.initial_columns = (checkpoint_every, callback,
                                                           initial_columns)
        self.stored_checksum = None
        # the descriptor holding the input store for reading while run() runs (lock.py)
        self.reading = None
        self.restart_chains = False
        # n_iter that sizes the automatic settings (that of the first run of the chains)
        self.settings_n_iter = None
        # n_iter and n_chains of the finished fit that this call continues, if it does
        self.continued_from = self.continued_chains = None

    def _set_attrs(self, **kw):
        if self.group is not None:
            meta = dict(self.group.attrs.get("dask_bid", {}))
            meta.update(jsonable(kw))
            self.group.attrs["dask_bid"] = meta

    def run(self):
        from ..kernels.rng import root_entropy
        from .summary import versions

        group, src, out = self.group, self.src, self.out
        scale = 0
        # the input store's files, watched from here to the end (engine/fingerprint.py)
        self.watch = StoreWatch(src.path if src.kind in ("zarr", "sparse") else None,
                                self.storage_options).start()
        # held for reading while the fit runs: no conversion replaces it under the fit
        self.reading = (hold_for_reading(local_path(str(src.path)))
                        if src.kind in ("zarr", "sparse") and src.path is not None else None)
        if self.existing:
            stored = dict(group.attrs["dask_bid"])
            extending = _check_stored(stored, self.meta, self.entropy_given, out,
                                      self.storage_options)
            compare_metadata((stored.get("input") or {}).get("fingerprint"),
                             self.meta["input"]["fingerprint"], local_path(out))
            self.entropy = int(stored["entropy"])
            self.run_id = stored.get("run_id")  # None: a fit saved before runs had ids
            for key in ("feature_names", "sample_names"):
                if self.meta.get(key) is None and stored.get(key):
                    # a resume that names no columns (rows) keeps the names it started with
                    self.meta[key] = stored[key]
            if stored.get("status") == "complete" and not extending:
                from .zarr_io import read_result

                # the stored result is returned only for the input it was fitted to: one
                # read of A for its checksum, as a resume of an unfinished fit pays
                self.stored_checksum = (stored.get("input") or {}).get("checksum")
                if self.stored_checksum is not None:
                    self._attempt(int(stored.get("scale_log2", 0) or 0), check_only=True)
                return read_result(local_path(out), storage_options=self.storage_options)
            # the automatic settings (pool redraws, candidate batches) stay those of the
            # n_iter the chains started with, so that a continued chain is one chain
            self.settings_n_iter = int(stored.get("settings_n_iter")
                                       or stored["params"]["n_iter"])
            if extending:
                self.continued_from = int(stored["params"]["n_iter"])
                self.continued_chains = int(stored["n_chains"])
            scale = int(stored.get("scale_log2", 0) or 0)
            self.stored_checksum = (stored.get("input") or {}).get("checksum")
            # without a recorded checksum the checkpoints cannot be tied to this input
            self.restart_chains = self.stored_checksum is None
        else:
            self.entropy = (self.entropy_given if self.entropy_given is not None
                            else root_entropy(None))
            if src.kind == "numpy":
                # max|A| in memory is cheap: numpy input never needs the second attempt
                with np.errstate(invalid="ignore"):
                    # masked: NaN marks a missing entry, not a value
                    amax = float((np.nanmax if _masked(self.p) else np.max)(
                        np.abs(src.array)))
                scale = scale_exponent(amax, self.p["priors"].beta_sigma)
                if scale:
                    check_range(amax, min_nonzero_abs(src.array), scale)
            # this fit's id, carried by each of its checkpoints (engine/checkpoint.py)
            self.run_id = uuid.uuid4().hex
            if group is not None:
                group.attrs["dask_bid"] = {**self.meta, "entropy": str(self.entropy),
                                           "status": "running", "scale_log2": scale,
                                           "versions": versions(), "run_id": self.run_id}
        # from here on this process owns the output's state: a failure is recorded
        self.marking = not self.existing
        try:
            try:
                return self._attempt(scale)
            except NeedsRescale as exc:
                scale = scale_exponent(exc.amax, self.p["priors"].beta_sigma)
                # only for such extreme input: one more reduction over A
                check_range(exc.amax, min_nonzero_abs(src.to_dask()), scale)
                log.warning("max|A| = %g is outside the range computed on as is; fitting "
                            "A %s 2^%d and reporting in A's units", exc.amax,
                            "/" if scale > 0 else "*", abs(scale))
                self._set_attrs(scale_log2=scale)
                return self._attempt(scale)
        except KeyboardInterrupt:
            if self.marking:
                self._set_attrs(status="interrupted")
            raise
        except BaseException as exc:
            # an input store changed under the fit explains what failed reading it (a
            # sparse store of another size: an IndexError deep in a task)
            try:
                if not isinstance(exc, InputChangedError):
                    self.watch.check()
            except InputChangedError as changed:
                if self.marking and group is not None:
                    mark_failed(group, _one_line(changed))
                raise changed from exc
            if self.marking and group is not None:
                mark_failed(group, _one_line(exc))
            raise

    def _start(self, ex, source, backends, scale):
        """Checks before any chain state is touched: on resume the input's checksum."""
        if not self.existing:
            return
        self._check_checksum(backends[0])
        self.marking = True
        # names given to a resumed fit replace the stored ones (else they are those)
        named = {k: self.meta[k] for k in ("feature_names", "sample_names")
                 if self.meta.get(k) is not None}
        # where this run read A (a copy of the same content is accepted) and how it
        # checkpoints: the stored ones described the first run
        # (the content's checksum kept: this run's A was just compared with it)
        inp = dict(self.meta["input"])
        stored = (self.group.attrs["dask_bid"].get("input") or {}) if self.group is not None \
            else {}
        if stored.get("checksum") is not None:
            inp["checksum"] = stored["checksum"]
        named.update(input=inp, engine=self.meta["engine"])
        if self.continued_from is not None:
            # one write: the stored result stops being complete when its parameters change
            self._set_attrs(status="running", error=None, params=self.meta["params"],
                            n_chains=self.meta["n_chains"],
                            settings_n_iter=self.settings_n_iter,
                            continued_from=self.continued_from,
                            continued_from_chains=self.continued_chains, **named)
        else:
            self._set_attrs(status="running", error=None, **named)

    def _check_checksum(self, backend):
        """One read of A by ``backend``, compared with the checksum the stored fit
        recorded (InputChangedError on a mismatch); nothing without one."""
        if self.stored_checksum is not None:
            compare_checksum(self.stored_checksum, backend.checksum_pass(),
                             local_path(self.out))

    def _continued(self):
        """(n_iter, n_chains) of the finished fit this one continued (this call's, or as
        the start of a resumed continuation recorded it), else (None, None)."""
        if self.continued_from is not None:
            return self.continued_from, self.continued_chains
        meta = self.group.attrs.get("dask_bid", {}) if self.group is not None else {}
        n, c = meta.get("continued_from"), meta.get("continued_from_chains")
        return (None if n is None else int(n)), (None if c is None else int(c))

    def _hook(self, chain, scale):
        def on_first_pass(be):
            if scale == 0 and be.amax is not None and needs_rescale(be.amax):
                raise NeedsRescale(be.amax)
            if chain == 0 and be.checksum is not None and self.group is not None:
                inp = dict(self.group.attrs["dask_bid"].get("input") or {})
                inp["checksum"] = be.checksum
                self._set_attrs(input=inp)
        return on_first_pass

    def _initial(self, A, p, c, scale):
        if self.initial_columns is None:
            return None
        try:
            return self.initial_columns(A, p, self.entropy, c)
        except (np.linalg.LinAlgError, FloatingPointError, ValueError) as exc:
            if scale or isinstance(exc, DaskBidError):
                raise
            # an overflow in the starting basis: rescale if A's range is the cause
            import dask.array as da

            x = self.src.to_dask()
            amax = float(da.nanmax(da.fabs(x)).compute(scheduler=fit_scheduler()))
            if needs_rescale(amax):
                raise NeedsRescale(amax) from exc
            raise

    def _attempt(self, scale, check_only=False):
        """Run the chains (a first or a resumed attempt) and summarise them; with
        ``check_only``, only compare the input's checksum with the stored one (a complete
        fit asked again) and return None."""
        import dask.array as da

        from .summary import (
            PriorCheck,
            candidate_memory,
            chain_config,
            summarise,
            traced_columns,
        )

        src, p, group, layout = self.src, scale_params(self.p, scale), self.group, self.layout
        M, N = src.shape
        # without out=, the checkpoints go to a leased temporary folder (engine/scratch.py),
        # released in the finally below whatever fails after it is taken
        scratch = contextlib.ExitStack()
        backends = []
        source = None
        try:
            if self.out is None:
                tmpdir = scratch.enter_context(scratch_checkpoints())
                spec = StoreSpec(tmpdir)
                spec.group(mode="w")
            else:
                spec = StoreSpec(local_path(self.out), self.storage_options)
            trace_cols = traced_columns(p, N)
            masked = _masked(p)
            # a Zarr input read with an explicit mask: its view (NaN where unobserved)
            base = src.to_dask() if masked and src.kind == "zarr" else src.array
            A0 = base if not scale or src.kind == "sparse" else scale_array(base, scale)
            if src.kind == "sparse":
                # the interface's initial_columns reads a sparse input itself (a sketch of
                # its observed entries); nothing dense is built
                from .sparse_backend import SparseDaskBackend, SparseTileSource

                A0, Backend, Source = src, SparseDaskBackend, SparseTileSource
            else:
                if masked:
                    A0 = _zero_filled(A0)
                Backend = MaskedDaskBackend if masked else DaskBackend
                Source = TileSource
            # a Ctrl-C stops the chains between iterations, after a checkpoint, when the
            # fit has an output to resume from and nobody else handles SIGINT
            latch = fit_latch(self.out)
            with cluster_executor(self.client) as ex:
                current = (current_client(ex.client) if ex.is_distributed
                           else contextlib.nullcontext())
                with current:
                    source = Source(src, layout, ex, scale_log2=scale)
                    if check_only:
                        # one backend's read of A: no chain, checkpoint or candidate budget
                        backends.append(Backend(source, ex, trace_cols=trace_cols, chain=0))
                        try:
                            self._check_checksum(backends[0])
                        finally:
                            source.close()
                        return None
                    # n_candidates="auto" from the workers' memory (never changes the chain)
                    cfg = chain_config(p, N, **candidate_memory(ex, layout, p["n_chains"]),
                                       settings_n_iter=self.settings_n_iter)
                    ckpt = Checkpointer(spec, run_id=self.run_id)
                    if not self.existing:
                        ckpt.remove_all()  # a first attempt's, when rescaled
                        ckpt = Checkpointer(spec, run_id=self.run_id)
                    # no checkpoint of a chain that read a changed input: a resume (after
                    # the input is restored) would carry the other matrix's draws on
                    ckpt.before_save = self.watch.check
                    said = PriorCheck(p)
                    runners, starts = [], []
                    for c in range(p["n_chains"]):
                        be = Backend(source, ex, trace_cols=trace_cols, chain=c)
                        be.want_checksum = c == 0 and group is not None
                        be.on_first_pass = self._hook(c, scale)
                        backends.append(be)
                        runners.append(_ChainRunner(be, cfg, self.entropy, c, ckpt,
                                                    self.every,
                                                    said.watching(be, in_user_units(
                                                        self.callback, scale)),
                                                    stop=latch.check))
                    self._start(ex, source, backends, scale)
                    for c, runner in enumerate(runners):
                        state = None
                        if self.existing and not self.restart_chains:
                            state = runner.restore()
                        elif self.existing and ckpt.has_any(c):
                            warn_fallback(
                                f"the fit at {spec.root!r} recorded no checksum of its "
                                f"input: chain {c} starts again from its first iteration "
                                "instead of trusting its checkpoints")
                        J0 = None if state is not None else self._initial(A0, p, c, scale)
                        starts.append((state, J0))
                    with latch:
                        outputs = _run_chains(ex, ckpt, runners, starts)
                    # summarise divides the observed SSE by ``mask.sum()``: the count is
                    # all it needs of the mask, which the engine never holds whole
                    n_obs = np.asarray(outputs[0].n_obs) if masked else None
                    res = summarise(p, outputs, backends, self.entropy, (M, N), trace_cols,
                                    backends[0].final_sse, mask=n_obs, prior_check=said)
                    res.n_recoveries = sum(r.n_recoveries for r in runners)
                    res.feature_names = self.meta.get("feature_names")
                    res.sample_names = self.meta.get("sample_names")
                    res.continued_from, res.continued_from_chains = self._continued()
                    unscale_result(check_finite_result(res), scale)
                    if group is not None:
                        if scale and src.kind != "sparse":
                            _write_C_direct(group, src, res.columns, layout)
                        else:
                            _write_C(group, backends[0], res.columns, layout, src)
                    # all the fit read of the input, the copy of C included, is of one
                    # matrix (else it fails: a failed output, no result)
                    self.watch.check()
                    if group is not None:
                        write_result(group, res,
                                     w_chunk_cols=max(b - a for a, b in layout.blocks),
                                     extra_attrs={"status": "complete"})
                        # each chain's final state stays: a later call with a larger
                        # n_iter continues the chains from it (resume=True); unless asked
                        # not to, for the disk space
                        if self.keep_final_state:
                            for c in range(p["n_chains"]):
                                ckpt.prune(c, keep=1)
                        else:
                            ckpt.remove_all()
                        if not is_url(self.out):  # what a kill before the resume left
                            remove_zarr_partials(local_path(self.out))
                        res.C = result_columns(self.out, self.storage_options, group["C"])
                    elif src.kind == "sparse":  # dense, NaN where unobserved
                        from .sparse_backend import dense_columns

                        res.C = dense_columns(src.array, res.columns)
                    elif src.kind == "zarr" and getattr(src, "mask", None) is not None:
                        res.C = src.to_dask()[:, res.columns]  # NaN where unobserved
                    elif src.kind == "zarr":
                        res.C = da.from_array(src.array, chunks=src.array.chunks, lock=False,
                                              asarray=True)[:, res.columns]
                    elif src.kind == "dask":
                        res.C = src.array[:, res.columns]
                    else:
                        res.C = np.asarray(src.array)[:, res.columns]
                for be in backends:
                    be.close()
                backends = []
                source.close()
        finally:
            for be in backends:
                be.close()
            scratch.close()
        return res


def _create_C(group, layout, K, rows):
    """The empty ``group/C`` (M x K, chunks of ``rows`` rows), marked with an id of this
    run: a result read from the group before refuses to read a C of another run."""
    return group.create_array("C", shape=(layout.shape[0], K), dtype=np.float64,
                              chunks=(rows, K), overwrite=True,
                              attributes={RUN_ATTR: uuid.uuid4().hex},
                              # every chunk stored (a missing one is then damage; the
                              # config travels with the array to the workers)
                              config={"write_empty_chunks": True})


def _write_C_direct(group, src, columns, layout):
    """``group/C`` = A[:, columns] read from the input itself (the fit ran on A / s)."""
    import dask.array as da

    rows = layout.row_tiles[0][1] - layout.row_tiles[0][0]
    C = _create_C(group, layout, len(columns), rows)
    x = src.to_dask()[:, np.asarray(columns, dtype=np.int64)].rechunk((rows, len(columns)))
    da.store(x.astype(np.float64), C, lock=False, scheduler=fit_scheduler())


def _write_C(group, backend, columns, layout, src):
    """Materialise C = A[:, columns] as ``group/C`` by a streaming copy on the workers."""
    in_rows = _input_chunks(src)[0][0]
    if all(r0 % in_rows == 0 for r0, _ in layout.row_tiles):
        rows = in_rows
    else:
        rows = layout.row_tiles[0][1] - layout.row_tiles[0][0]
    backend.write_columns(columns, _create_C(group, layout, len(columns), rows))
