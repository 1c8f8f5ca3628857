"""``dask-bid plot``: PNG plots of stored fits."""

from __future__ import annotations

import os

from ..._files import local_path
from ._core import CLIError, print_lines
from .plotting import (
    check_png_replaceable,
    parse_plot_kinds,
    plot_paths,
    plot_stem,
    save_png,
    write_plots,
)


def _input_identity(path) -> dict:
    """What a result store records of its input: shape, path, checksum (if any)."""
    import zarr

    try:
        meta = zarr.open_group(path, mode="r").attrs.get("dask_bid") or {}
    except Exception:
        return {}
    src = meta.get("input") or {}
    where = src.get("path")
    if where and "://" not in str(where):
        where = os.path.abspath(str(where))
    return {"shape": [int(s) for s in (meta.get("input_shape") or [])],
            "path": where, "checksum": src.get("checksum")}


def check_same_input(paths):
    """Refuse an error-against-K plot over fits of different matrices.

    Fits of one matrix agree on its shape and, when both recorded one, on its content
    checksum; without checksums they must name the same input path.
    """
    ids = [_input_identity(p) for p in paths]
    ref, ref_path = ids[0], paths[0]
    for other, path in zip(ids[1:], paths[1:], strict=True):
        if ref.get("shape") != other.get("shape"):
            a = " x ".join(map(str, ref.get("shape") or ["?"]))
            b = " x ".join(map(str, other.get("shape") or ["?"]))
            raise CLIError(f"--kind error-k compares fits of one matrix: {ref_path!r} fitted a "
                           f"{a} input, {path!r} a {b} one. Plot them separately.")
        if ref.get("checksum") and other.get("checksum"):
            if ref["checksum"] != other["checksum"]:
                raise CLIError(f"--kind error-k compares fits of one matrix: {ref_path!r} and "
                               f"{path!r} fitted inputs of the same shape but different "
                               "content (their checksums differ). Plot them separately.")
        elif ref.get("path") != other.get("path"):
            raise CLIError(f"--kind error-k compares fits of one matrix: {ref_path!r} fitted "
                           f"{ref.get('path')!r}, {path!r} fitted {other.get('path')!r}. "
                           "Plot them separately, or fit the same input.")


def _local_out(out):
    """Figures are local files: an ``--out`` URL is refused (it wrote into ``./s3:/``)."""
    if out and "://" in str(out):
        raise CLIError(f"--out {out!r} is a URL, and the figures are written as local files: "
                       "give a local path (without --out they go to the current folder "
                       "for a result on object storage).")


def _stems(out, results):
    """The file stem of each result's per-result plots: ``OUT`` for one result (a
    trailing .png dropped: ``--out fig.png`` gives fig.trace.png), ``OUT.<result name>``
    for several, else next to each result."""
    if not out:
        return [plot_stem(path) for path in results]
    stem = out[:-4] if out.lower().endswith(".png") else out
    if len(results) == 1:
        return [stem]
    names = [os.path.basename(plot_stem(path)) for path in results]
    if len(set(names)) < len(names):
        raise CLIError("--out with several RESULTs names their plots STEM.<result name>."
                       "<kind>.png, and two RESULTs here share a name: plot them one by one "
                       "with their own --out, or without --out (next to each result).")
    return [f"{stem}.{name}" for name in names]


def run(args):
    from ...engine import read_result
    from .. import plots

    kinds = parse_plot_kinds(args.kind, allow_error_k=True)
    _local_out(args.out)
    if args.out:
        from ...engine.zarr_io import refuse_inside_store

        # figures among a store's own files: every later read of it warned of them, and
        # its --overwrite refused them as not dask_bid's (every figure lies in the
        # stem's folder: the stem is checked for them all)
        into = args.out.endswith(("/", os.sep))
        refuse_inside_store(args.out, "--out", into=into)
        if into:
            # a stem ending in '/' named the files '<folder>/.trace.png', hidden
            folder = args.out.rstrip("/" + os.sep) or "."
            raise CLIError(f"--out {args.out!r} ends with '/': --out is the figures' file "
                           f"stem, e.g. --out {folder}/fit writes {folder}/fit.trace.png.")
    seen = {}
    for p in args.results:  # one fit twice drew a point twice (and wrote over its plots)
        lp = local_path(str(p))  # file:// and local:// name the same files
        key = os.path.realpath(lp) if "://" not in lp else lp.rstrip("/")
        if key in seen:
            raise CLIError(f"{p!r} is given twice (as {seen[key]!r}): name each result once.")
        seen[key] = p
    single = [k for k in kinds if k != "error-k"]
    stems = _stems(args.out, args.results) if single else []
    target = None
    if "error-k" in kinds:
        # a name ending in .png (any case, as _stems reads it) is used as is
        target = (args.out or plot_stem(args.results[0])) + ".error-k.png" \
            if not (args.out or "").lower().endswith(".png") else args.out
    # every file this command would write, checked before anything is read or drawn
    files = [p for s in stems for p in plot_paths(single, s)] + ([target] if target else [])
    hidden = [os.path.basename(f) for f in files if os.path.basename(f).startswith(".")]
    if args.out and hidden:  # as written (--out R.zarr/. names R.zarr/..trace.png)
        raise CLIError(f"--out {args.out!r} names hidden files ({hidden[0]}): --out is the "
                       "figures' file stem, e.g. --out fit writes fit.trace.png.")
    check_png_replaceable(files)
    if "error-k" in kinds:
        # before any figure is drawn: refused after them, the per-result figures were
        # written and the refusal did not say so
        check_same_input([str(p) for p in args.results])
    results = [read_result(p) for p in args.results]
    written, skipped = [], []
    for stem, res in zip(stems, results, strict=True) if single else ():
        done, missed = write_plots(res, single, stem)
        written += done
        skipped += [(f"{stem}.{kind}.png", why) for kind, why in missed]
    if "error-k" in kinds:
        ax = error_k_axes(results)
        save_png(ax.figure, target, dpi=110, bbox_inches="tight")
        plots.close(ax.figure)
        written.append(target)
    print_lines([f"plot         {w}" for w in written], args.quiet)
    if skipped:  # asked for and not drawn: an error, after the figures that could be
        path, why = skipped[0]
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        raise CLIError(f"{path} not drawn{more}: {why}"
                       + (" The other figures were written." if written else ""))
    return 0


def error_k_axes(results):
    """The error-against-K figure of stored fits: a masked fit's MSE over its observed
    entries, as ``info`` headlines it (the MSE over all entries counts the unobserved
    ones as 0, and the axis said only "MSE")."""
    from .. import plots

    observed = any(getattr(r, "mse_observed", None) is not None for r in results)
    return plots.plot_error_vs_k(results, observed=observed)


def add_parser(sub):
    """Add the ``plot`` command to the subparsers ``sub``."""
    plot = sub.add_parser("plot", help="plot one or more result stores",
                          description="Write PNG plots of stored fits: traces, "
                          "autocorrelation, inclusion probabilities (one file per result and "
                          "kind), or the reconstruction error against K over several fits "
                          "of one matrix. Needs matplotlib: pip install \"dask_bid[plot]\".")
    plot.add_argument("results", nargs="+", metavar="RESULT",
                      help="result stores written by `dask-bid fit --out`")
    plot.add_argument("--kind", default="all", metavar="KINDS",
                      help="comma separated among trace, autocorr, inclusion, error-k "
                      "(reconstruction error against K over all RESULTs, which must be fits "
                      "of the same input), or all (= trace, autocorr, inclusion; default)")
    plot.add_argument("--out", default=None, metavar="STEM",
                      help="file name stem: STEM.<kind>.png for one RESULT, "
                      "STEM.<RESULT name>.<kind>.png for several (default: next to each "
                      "result, <RESULT without .zarr>.<kind>.png); STEM.error-k.png, or a "
                      "name ending in .png as is, for error-k")
    plot.add_argument("-q", "--quiet", action="store_true",
                      help="do not print the files written")
    plot.set_defaults(func=run)
    return plot
