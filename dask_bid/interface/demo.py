"""The built-in example behind ``dask-bid demo``: the whole pipeline on a planted problem.

1. A synthetic matrix ``A = C W + E`` (2000 x 300) whose columns ``J`` (K = 10 of them)
   are ``C`` itself (``W[:, J] = I``, no noise there); every other column mixes them
   with weights drawn uniformly in [-0.4, 0.4] (so |W| <= 1) plus Gaussian noise of
   standard deviation 0.1.
2. ``A`` is written to a local Zarr store, ``<out>/A.zarr``.
3. A ``LocalCluster`` (2 worker processes) is started, or an existing scheduler used.
4. Two chains of the GBT sampler, with the library's default settings, run on the store
   through the Dask engine; the result goes to ``<out>/result.zarr``.
5. A summary is printed (columns found against the planted ones, MSE, sigma^2, max |W|,
   times) and a four-panel figure is written to ``<out>/result.png``.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import numpy as np

__all__ = ["DEMO_SETTINGS", "make_demo_matrix", "run_demo"]

#: What the demo runs (the fit's keyword arguments and the matrix's shape).
DEMO_SETTINGS = dict(n_rows=2000, n_cols=300, n_components=10, w_scale=0.4, noise=0.1,
                     n_iter=200, burn_in=50, thin=2, n_chains=2, seed=0)


def make_demo_matrix(n_rows=2000, n_cols=300, n_components=10, *, w_scale=0.4, noise=0.1,
                     seed=0):
    """A low-rank matrix with planted interpolative columns.

    Parameters
    ----------
    n_rows, n_cols, n_components : int
        M, N and K.
    w_scale : float
        Off-basis weights are uniform on [-w_scale, w_scale] (at most 1 for an ID).
    noise : float
        Standard deviation of the Gaussian noise added to the non-planted columns.
    seed : int

    Returns
    -------
    A : ndarray (n_rows, n_cols)
    planted : ndarray (n_components,)
        Sorted indices of the planted columns (``A[:, planted]`` is noise-free).
    W : ndarray (n_components, n_cols)
        The generating weights, ``W[:, planted] = I``.
    """
    rng = np.random.default_rng(seed)
    planted = np.sort(rng.choice(n_cols, n_components, replace=False))
    C = rng.standard_normal((n_rows, n_components))
    W = rng.uniform(-w_scale, w_scale, (n_components, n_cols))
    W[:, planted] = np.eye(n_components)
    E = noise * rng.standard_normal((n_rows, n_cols))
    E[:, planted] = 0.0
    return C @ W + E, planted, W


def _say(quiet, *lines):
    if not quiet:
        for ln in lines:
            print(ln, flush=True)


def run_demo(out="dask-bid-demo", *, quiet=False, n_iter=None, n_workers=2, scheduler=None,
             plot=True):
    """Run the demo; see the module docstring.

    Parameters
    ----------
    out : str
        Folder for ``A.zarr``, ``result.zarr`` and ``result.png`` (replaced if present).
    quiet : bool
        Print nothing, no progress bar.
    n_iter : int, optional
        Iterations per chain (default ``DEMO_SETTINGS["n_iter"]``; burn-in is a third).
    n_workers : int
        Workers of the local cluster.
    scheduler : str, optional
        Address of a running Dask scheduler to use instead of a local cluster.
    plot : bool
        Write ``result.png`` (skipped, with a note, when matplotlib is not installed).

    Returns
    -------
    dict
        ``result`` (BIDResult), ``planted``, ``rid_mse``, ``paths`` and ``timings``.
    """
    from distributed import Client, LocalCluster

    from ..baselines import RandomizedID
    from ..engine import to_zarr
    from .cli import ChainProgress, result_lines
    from .functional import bayesian_id

    s = dict(DEMO_SETTINGS)
    if n_iter is not None:
        s["n_iter"] = int(n_iter)
        s["burn_in"] = min(s["burn_in"], int(n_iter) // 3)
    out = os.fspath(out)
    os.makedirs(out, exist_ok=True)
    paths = {"input": os.path.join(out, "A.zarr"), "result": os.path.join(out, "result.zarr"),
             "plot": os.path.join(out, "result.png")}
    timings = {}
    t_all = time.perf_counter()

    A, planted, _ = make_demo_matrix(s["n_rows"], s["n_cols"], s["n_components"],
                                     w_scale=s["w_scale"], noise=s["noise"], seed=s["seed"])
    t = time.perf_counter()
    z = to_zarr(A, paths["input"], overwrite=True)
    timings["write_input"] = time.perf_counter() - t
    _say(quiet, f"input        {A.shape[0]} x {A.shape[1]} float64, K = {s['n_components']} "
                f"planted columns, written to {paths['input']} (chunks {z.chunks})")
    rid = RandomizedID(s["n_components"], random_state=s["seed"]).fit(A)
    del A

    t = time.perf_counter()
    cluster = client = None
    if scheduler is None:
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.ERROR)
        client = Client(cluster)
        where = f"LocalCluster with {n_workers} workers"
        timings["cluster"] = time.perf_counter() - t
        _say(quiet, f"cluster      {where} ({timings['cluster']:.1f} s to start)")
    else:
        _say(quiet, f"cluster      scheduler at {scheduler}")
    try:
        t = time.perf_counter()
        with ChainProgress(s["n_chains"] * s["n_iter"], disable=quiet) as bar:
            res = bayesian_id(paths["input"], s["n_components"], n_iter=s["n_iter"],
                              burn_in=s["burn_in"], thin=s["thin"], n_chains=s["n_chains"],
                              random_state=s["seed"],
                              client=client if client is not None else scheduler,
                              out=paths["result"], overwrite=True, callback=bar)
        timings["fit"] = time.perf_counter() - t
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    plot_note = None
    if plot:
        from . import plots

        try:
            fig = plots.plot_overview(res, planted=planted)
        except ImportError:
            # matplotlib is an optional extra: the demo still runs without it
            plot_note = 'skipped: matplotlib is not installed (pip install "dask_bid[plot]")'
        else:
            fig.savefig(paths["plot"], dpi=110)
            plots.close(fig)
    timings["total"] = time.perf_counter() - t_all
    lines = result_lines(res, planted=planted)
    lines += [
        f"baseline     randomized ID: MSE {rid.mse_:.6g}, max|W| {rid.max_abs_w_:.4g}",
        f"wall time    {timings['fit']:.1f} s fit, {timings['total']:.1f} s in all",
        f"result       {paths['result']}  (dask-bid info {paths['result']})",
    ]
    if plot:
        lines.append(f"plot         {plot_note or paths['plot']}")
    _say(quiet, *lines)
    sys.stdout.flush()
    if plot_note is not None:
        paths["plot"] = None
    return {"result": res, "planted": planted, "rid_mse": float(rid.mse_), "paths": paths,
            "timings": timings, "settings": s}
