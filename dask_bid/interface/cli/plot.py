"""``dask-bid plot``: PNG plots of stored fits."""

from __future__ import annotations

from ._core import print_lines
from .plotting import parse_plot_kinds, plot_stem, write_plots


def run(args):
    from ...engine import read_result
    from .. import plots

    kinds = parse_plot_kinds(args.kind, allow_error_k=True)
    results = [read_result(p) for p in args.results]
    written = []
    single = [k for k in kinds if k != "error-k"]
    for path, res in zip(args.results, results, strict=True):
        stem = plot_stem(args.out if args.out and len(results) == 1 else path)
        written += write_plots(res, single, stem)
    if "error-k" in kinds:
        ax = plots.plot_error_vs_k(results)
        target = (args.out or plot_stem(args.results[0])) + ".error-k.png" \
            if not (args.out or "").endswith(".png") else args.out
        ax.figure.savefig(target, dpi=110, bbox_inches="tight")
        plots.close(ax.figure)
        written.append(target)
    print_lines([f"plot         {w}" for w in written], args.quiet)
    return 0




def add_parser(sub):
    """Add the ``plot`` command to the subparsers ``sub``."""
    plot = sub.add_parser("plot", help="plot one or more result stores")
    plot.add_argument("results", nargs="+", metavar="RESULT")
    plot.add_argument("--kind", default="all", metavar="KINDS",
                      help="comma separated among trace, autocorr, inclusion, error-k "
                      "(reconstruction error against K over all RESULTs), or all")
    plot.add_argument("--out", default=None, metavar="STEM",
                      help="file name stem (default: next to each result)")
    plot.add_argument("-q", "--quiet", action="store_true")
    plot.set_defaults(func=run)
