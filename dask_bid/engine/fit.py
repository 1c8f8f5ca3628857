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
import shutil
import tempfile

import numpy as np

from .._errors import ParameterError
from .chain import run_chain
from .checkpoint import Checkpointer, StoreSpec
from .cluster import RECOVERABLE_ERRORS, check_cluster_versions, cluster_executor
from .dask_backend import DaskBackend, TileSource, plan_layout
from .zarr_io import (
    FORMAT_VERSION,
    default_chunks,
    jsonable,
    local_path,
    prepare_output,
    write_result,
)

__all__ = ["fit_dask", "ENGINE_DEFAULTS", "MAX_RECOVERIES"]

log = logging.getLogger("dask_bid.engine")

#: Engine keyword arguments of ``bayesian_id`` / ``BayesianID.fit`` and their defaults.
ENGINE_DEFAULTS = dict(client=None, out=None, overwrite=False, resume=False,
                       checkpoint_every=25, chunks=None, storage_options=None, callback=None)

#: Worker losses a chain survives before the error is raised.
MAX_RECOVERIES = 5

# parameters that do not change the chain of the Dask engine (not compared on resume)
_NOT_COMPARED = ("random_state", "priors", "n_threads")


def _check_engine_kwargs(out, overwrite, resume, checkpoint_every, chunks, callback):
    if out is not None and not isinstance(out, (str, os.PathLike)):
        raise ParameterError(f"out must be a path or URL string, got {type(out).__name__}.")
    for name, v in (("overwrite", overwrite), ("resume", resume)):
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
    if callback is not None and not callable(callback):
        raise ParameterError("callback must be callable (it receives the chain state).")


def _input_chunks(src):
    M, N = src.shape
    if src.kind == "zarr":
        rc, cc = src.array.chunks
    elif src.kind == "dask":
        return tuple(tuple(int(c) for c in x) for x in src.array.chunks)
    else:
        rc, cc = default_chunks((M, N), 8)
    return (tuple([rc] * (M // rc) + ([M % rc] if M % rc else [])),
            tuple([cc] * (N // cc) + ([N % cc] if N % cc else [])))


def _compare_meta(stored, meta, entropy_given):
    diffs = []
    for k in ("params", "input_shape", "layout", "n_chains"):
        if jsonable(stored.get(k)) != jsonable(meta.get(k)):
            diffs.append(k)
    if diffs:
        detail = []
        if "params" in diffs:
            a, b = stored.get("params", {}), meta["params"]
            detail = [f"{k}: stored {a.get(k)!r}, now {b.get(k)!r}"
                      for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        raise ParameterError(
            "resume=True, but the stored fit differs from this one in "
            f"{', '.join(diffs)}{' (' + '; '.join(detail) + ')' if detail else ''}. Resume with "
            "the same parameters, input and chunks, or pass resume=False, overwrite=True.")
    if entropy_given is not None and str(entropy_given) != stored.get("entropy"):
        raise ParameterError(
            "resume=True, but random_state gives another seed than the stored fit's. Pass "
            "random_state=None (the stored seed is used) or the original seed.")


class _ChainRunner:
    """Runs one chain with periodic checkpoints and recovery from lost workers."""

    def __init__(self, backend, cfg, entropy, chain, ckpt, every, callback):
        self.be = backend
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
        if self.callback is not None:
            self.callback(state)

    def restore(self):
        found = self.ckpt.latest(self.chain)
        if found is None:
            return None
        name, payload = found
        self.saved_at = payload["state"].iteration
        self.be.load_blocks(self.ckpt.spec, f"checkpoint/{name}", payload["norm_a2"],
                            payload["n_obs"])
        return payload["state"]

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
             initial_columns=None):
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
        (checkpoints go to a temporary directory removed at the end).
    overwrite : bool
        Replace an existing ``out``.
    resume : bool
        Continue the fit stored at ``out`` from its last checkpoint (a fresh fit when
        there is none). The result is bitwise that of an uninterrupted fit.
    checkpoint_every : int
        Iterations between checkpoints.
    chunks : (rows, cols), optional
        Tile shape of the streaming passes (default: whole input chunks, ~64 MiB tiles).
    storage_options : dict, optional
        fsspec options for URL input and output.
    callback : callable, optional
        ``callback(state)`` after every iteration, with the chain's ``ClientState``.
    initial_columns : callable, optional
        ``initial_columns(A, p, entropy, chain)`` -> K starting columns or None (random);
        the interface passes the one that runs the baselines for ``init="sketch"``, ...

    Returns
    -------
    BIDResult
        With an extra attribute ``C``: the selected columns (lazy dask array over ``out/C``
        or over the input; numpy for numpy input without ``out``).
    """
    import dask.array as da

    from ..kernels.rng import root_entropy
    from .summary import chain_config, summarise, versions

    _check_engine_kwargs(out, overwrite, resume, checkpoint_every, chunks, callback)
    M, N = src.shape
    K = p["n_components"]
    if resume and out is None:
        raise ParameterError("resume=True needs out=, the output group holding the checkpoints.")
    given = p["random_state"]
    entropy_given = None if given is None else root_entropy(given)
    layout = plan_layout((M, N), _input_chunks(src), K, block_size=p["block_size"],
                         chunks=chunks)
    params_cmp = {k: v for k, v in p.items() if k not in _NOT_COMPARED}
    meta = {"params": jsonable(params_cmp), "input_shape": [M, N],
            "layout": layout.describe(), "n_chains": p["n_chains"],
            "input": {"kind": src.kind, "path": src.path, "dtype": str(src.dtype)},
            "engine": {"checkpoint_every": int(checkpoint_every),
                       "chunks": None if chunks is None else list(chunks)},
            "format_version": FORMAT_VERSION}

    check_cluster_versions(client)  # before an output is created or replaced
    group, existing = (None, False)
    if out is not None:
        group, existing = prepare_output(out, input_path=src.path if src.kind == "zarr" else None,
                                         overwrite=overwrite, resume=resume,
                                         storage_options=storage_options)
    if existing:
        stored = dict(group.attrs["dask_bid"])
        _compare_meta(stored, meta, entropy_given)
        entropy = int(stored["entropy"])
        if stored.get("status") == "complete":
            from .zarr_io import read_result

            return read_result(local_path(out), storage_options=storage_options)
    else:
        entropy = entropy_given if entropy_given is not None else root_entropy(None)
        if group is not None:
            group.attrs["dask_bid"] = {**meta, "entropy": str(entropy), "status": "running",
                                       "versions": versions()}

    tmpdir = None
    if out is None:
        tmpdir = tempfile.mkdtemp(prefix="dask_bid-ckpt-")
        spec = StoreSpec(tmpdir)
        spec.group(mode="w")
    else:
        spec = StoreSpec(local_path(out), storage_options)

    cfg = chain_config(p, N)
    n_trace = min(int(p["n_trace_columns"]), N)
    trace_cols = np.unique(np.linspace(0, N - 1, n_trace).astype(np.int64)) if n_trace else ()

    backends = []
    source = None
    try:
        with cluster_executor(client) as ex:
            current = ex.client.as_current() if ex.is_distributed else contextlib.nullcontext()
            with current:
                source = TileSource(src, layout, ex)
                ckpt = Checkpointer(spec)
                runners, starts = [], []
                for c in range(p["n_chains"]):
                    be = DaskBackend(source, ex, trace_cols=trace_cols, chain=c)
                    backends.append(be)
                    runner = _ChainRunner(be, cfg, entropy, c, ckpt, int(checkpoint_every),
                                          callback)
                    runners.append(runner)
                    state = runner.restore() if existing else None
                    J0 = None
                    if state is None:
                        J0 = None if initial_columns is None else initial_columns(
                            src.array, p, entropy, c)
                    starts.append((state, J0))
                outputs = _run_chains(ex, ckpt, runners, starts)
                res = summarise(p, outputs, backends, entropy, (M, N), trace_cols,
                                 backends[0].final_sse)
                res.n_recoveries = sum(r.n_recoveries for r in runners)
                if group is not None:
                    _write_C(group, backends[0], res.columns, layout, src)
                    write_result(group, res, w_chunk_cols=max(b - a for a, b in layout.blocks),
                                 extra_attrs={"status": "complete"})
                    ckpt.remove_all()
                    res.C = da.from_zarr(group["C"])
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
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return res


def _write_C(group, backend, columns, layout, src):
    """Materialise C = A[:, columns] as ``group/C`` by a streaming copy on the workers."""
    in_rows = _input_chunks(src)[0][0]
    if all(r0 % in_rows == 0 for r0, _ in layout.row_tiles):
        rows = in_rows
    else:
        rows = layout.row_tiles[0][1] - layout.row_tiles[0][0]
    K = len(columns)
    C = group.create_array("C", shape=(layout.shape[0], K), dtype=np.float64,
                           chunks=(rows, K), overwrite=True)
    backend.write_columns(columns, C)
