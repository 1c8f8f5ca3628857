"""The ``dask-bid`` parser and entry point: one subcommand per module of this package."""

from __future__ import annotations

import os
import sys

from ._core import PROG, CLIError, Parser, one_line, quiet_libraries

__all__ = ["main", "build_parser"]


def build_parser() -> Parser:
    """The ``dask-bid`` argument parser, every subcommand included."""
    from ... import __version__
    from . import demo, fit, info, plot, rid

    parser = Parser(prog=PROG, description="Bayesian interpolative decomposition (GBT/GBTN "
                    "Gibbs samplers) of matrices larger than memory, on Dask and Zarr.")
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in (demo, fit, rid, info, plot):
        module.add_parser(sub)
    return parser


def main(argv=None) -> int:
    """Run the ``dask-bid`` command line; returns the exit status."""
    from ..._errors import DaskBidError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return int(exc.code or 0)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        with quiet_libraries():
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        hint = " (continue with --resume)" if getattr(args, "command", "") == "fit" else ""
        print(f"{PROG}: interrupted{hint}", file=sys.stderr)
        return 130
    except (DaskBidError, CLIError, OSError, ValueError, ImportError) as exc:
        if os.environ.get("DASK_BID_DEBUG"):
            raise
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 2
