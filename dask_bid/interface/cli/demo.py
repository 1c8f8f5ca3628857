"""``dask-bid demo``: the whole pipeline on the planted problem of ``interface/demo.py``."""

from __future__ import annotations

import logging
import os
import re
import sys
import time

from ..demo import DEMO_SETTINGS, make_demo_matrix
from ._core import positive_int, user_cache_dir
from .plotting import check_png_replaceable, save_png
from .progress import ChainProgress
from .report import result_lines
from .runtime import compile_kernels

__all__ = ["run_demo", "default_demo_dir"]


#: the attribute marking the matrix a demo wrote (a converted store or another fit's
#: input in the same folder is the user's: never replaced by a demo)
DEMO_ATTR = "dask_bid_demo"


def default_demo_dir() -> str:
    """Where ``dask-bid demo`` writes without ``--out``: ``~/.cache/dask_bid/demo`` (a
    cache folder, never the current one)."""
    return user_cache_dir("demo")


def _say(quiet, *lines):
    if not quiet:
        for ln in lines:
            print(ln, flush=True)


def run_demo(out=None, *, quiet=False, n_iter=None, n_workers=2, scheduler=None,
             plot=True):
    """Run the demo; see the module docstring.

    Parameters
    ----------
    out : str, optional
        Folder for ``A.zarr``, ``result.zarr`` and ``result.png`` (replaced if present);
        default :func:`default_demo_dir`.
    quiet : bool
        Print nothing, no progress bar.
    n_iter : int, optional
        Iterations per chain (default ``DEMO_SETTINGS["n_iter"]``; burn-in is a third).
    n_workers : int
        Workers of the local cluster.
    scheduler : str, optional
        Address of a running Dask scheduler to use instead of a local cluster,
        ``"synchronous"`` (this process) or ``"local"`` (the default, a local cluster).
        Anything else is refused before any work.
    plot : bool
        Write ``result.png`` (skipped, with a note, when matplotlib is not installed).

    Returns
    -------
    dict
        ``result`` (BIDResult), ``planted``, ``rid_mse``, ``paths`` and ``timings``.
    """
    from distributed import Client, LocalCluster

    from ...baselines import RandomizedID
    from ...engine import to_zarr
    from ..functional import bayesian_id

    if scheduler is not None and scheduler.lower() == "local":  # as for fit: the default
        scheduler = None
    if scheduler is not None:  # a misspelt address: refused before the matrix is made
        from ...engine.cluster import check_client_arg

        check_client_arg(scheduler)
    s = dict(DEMO_SETTINGS)
    if n_iter is not None:
        s["n_iter"] = int(n_iter)
        s["burn_in"] = min(s["burn_in"], int(n_iter) // 3)
    own = out is None  # ~/.cache/dask_bid/demo: the demo's own folder
    out = os.fspath(out) if out is not None else default_demo_dir()
    if os.path.exists(out) and not os.path.isdir(out):
        from ..._errors import OutputLocationError

        raise OutputLocationError(f"--out {out!r} is an existing file: the demo writes a folder "
                                  "(A.zarr, result.zarr, result.png); choose another --out.")
    os.makedirs(out, exist_ok=True)
    _say(quiet, f"output       {out}")
    paths = {"input": os.path.join(out, "A.zarr"), "result": os.path.join(out, "result.zarr"),
             "plot": os.path.join(out, "result.png")}
    _check_replaceable(paths, own_folder=own)
    timings = {}
    t_all = time.perf_counter()

    A, planted, _ = make_demo_matrix(s["n_rows"], s["n_cols"], s["n_components"],
                                     w_scale=s["w_scale"], noise=s["noise"], seed=s["seed"])
    t = time.perf_counter()
    z = to_zarr(A, paths["input"], overwrite=True)
    _mark(paths["input"])
    timings["write_input"] = time.perf_counter() - t
    _say(quiet, f"input        {A.shape[0]} x {A.shape[1]} float64, K = {s['n_components']} "
                f"planted columns, written to {paths['input']} (chunks {z.chunks})")
    rid = RandomizedID(s["n_components"], random_state=s["seed"]).fit(A)
    del A

    # compiled here first, the kernels are on disk when the workers load them
    dt = compile_kernels({})
    if dt is not None:
        timings["compile"] = dt
        _say(quiet, f"kernels      ready in {dt:.1f} s (numba: compiled on the first run, "
                    f"then loaded from {os.environ.get('NUMBA_CACHE_DIR', 'its cache')})")
    t = time.perf_counter()
    cluster = client = None
    if scheduler is None:
        cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.CRITICAL)
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
        _mark(paths["result"], group=True)
        timings["fit"] = time.perf_counter() - t
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()

    plot_note = None
    if plot:
        from .. import plots

        try:
            fig = plots.plot_overview(res, planted=planted)
        except ImportError:
            # matplotlib is an optional extra: the demo still runs without it
            plot_note = 'skipped: matplotlib is not installed (pip install "dask_bid[plot]")'
        else:
            save_png(fig, paths["plot"], dpi=110)
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


def _mark(path, group=False):
    import zarr

    node = zarr.open_group(path, mode="r+") if group else zarr.open_array(path, mode="r+")
    node.attrs[DEMO_ATTR] = True


def _is_demo_matrix(path) -> bool:
    import zarr

    try:
        return bool(zarr.open_array(path, mode="r").attrs.get(DEMO_ATTR))
    except Exception:  # not a Zarr array: the check below names it
        return False


def _is_demo_result(result_path, matrix_path) -> bool:
    """A finished demo fit (marked when it ended), or one that did not finish (failed,
    stopped) of the demo's matrix in this folder."""
    import zarr

    try:
        attrs = zarr.open_group(result_path, mode="r").attrs
    except Exception:
        return False
    if attrs.get(DEMO_ATTR):
        return True
    meta = attrs.get("dask_bid") or {}
    fitted = (meta.get("input") or {}).get("path")
    # a relative path was relative to that run's folder: a mismatch refuses (safe side)
    return (meta.get("status") != "complete" and isinstance(fitted, str)
            and os.path.realpath(fitted) == os.path.realpath(matrix_path))


def _held(exc):
    """The files of the user's that a refusal to replace a store of ours names, or None
    (the refusal is of a store that is not ours at all)."""
    m = re.search(r"it holds (.*), which dask_bid did not write", str(exc))
    return m.group(1) if m else None


def _check_replaceable(paths, own_folder=False):
    """The demo replaces what an earlier demo wrote in its folder, nothing else: a Zarr
    array, a result or a figure of the user's own under those names is refused before
    any work. Its matrix carries ``DEMO_ATTR``; its result is the fit of that matrix
    (a store the user converted, or a fit of it, is also dask_bid's, but not the
    demo's). In the demo's own cache folder whatever dask_bid wrote is the demo's,
    whatever version made it."""
    from ..._errors import OutputExistsError
    from ...engine.zarr_io import check_output, check_replaceable_array

    def refuse(path, why):
        raise OutputExistsError(
            f"refusing to replace {path!r}: {why}, and the demo replaces only what an earlier "
            "demo wrote. Choose another --out folder (or an empty one).")

    matrix = os.path.exists(paths["input"])
    if matrix:
        try:
            check_replaceable_array(paths["input"])
        except OutputExistsError as exc:
            # its words are those of overwrite=True, which the demo has no flag for
            held = _held(exc)
            refuse(paths["input"], f"it is a Zarr array dask_bid wrote, but it holds {held}, "
                                   "which dask_bid did not write" if held
                   else "it is not a Zarr array dask_bid wrote")
        if not own_folder and not _is_demo_matrix(paths["input"]):
            refuse(paths["input"], "it is a Zarr array dask_bid wrote, not the demo's matrix")
    try:
        check_output(paths["result"], overwrite=True)
    except OutputExistsError as exc:
        # a result holding files of the user's is named so (it was "not a result")
        held = _held(exc)
        refuse(paths["result"], f"it is a result, but it holds {held}, which dask_bid did "
                                "not write" if held else "it is not a result dask_bid wrote")
    if os.path.exists(paths["result"]) and not own_folder and not (
            matrix and _is_demo_result(paths["result"], paths["input"])):
        refuse(paths["result"], "it is a fit dask_bid wrote, not the demo's")
    if not own_folder:
        check_png_replaceable([paths["plot"]])


def run(args):
    run_demo(out=args.out, quiet=args.quiet, n_iter=args.n_iter, n_workers=args.workers,
             scheduler=args.scheduler)
    return 0


def add_parser(sub):
    """Add the ``demo`` command to the subparsers ``sub``."""
    demo = sub.add_parser("demo", help="run the built-in example end to end",
                          description="Write a synthetic low-rank matrix with planted "
                          "columns to a Zarr store, start a local Dask cluster, fit, print a "
                          "summary and write a plot next to the result.")
    demo.add_argument("--out", default=None, metavar="DIR",
                      help="folder for the input store A.zarr, the result result.zarr and "
                      "the plot result.png, replaced if present (default: "
                      "~/.cache/dask_bid/demo, printed at the start)")
    demo.add_argument("--n-iter", type=positive_int, default=None, metavar="N",
                      help="iterations per chain (default: the demo's setting)")
    demo.add_argument("--workers", type=positive_int, default=2, metavar="N",
                      help="workers of the local cluster (default: 2)")
    demo.add_argument("--scheduler", default=None, metavar="ADDRESS",
                      help="use this Dask scheduler (tcp://host:8786, or 'synchronous' for "
                      "this process) instead of starting a local cluster ('local', the "
                      "default)")
    demo.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    demo.set_defaults(func=run)
    return demo

