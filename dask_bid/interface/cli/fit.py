"""``dask-bid fit``: a Bayesian ID of a matrix, written to a Zarr group."""

from __future__ import annotations

import os
import time

import numpy as np

from ._core import CLIError, file_suffix, is_url, nonneg_int, positive_int, print_lines
from .convert import CONVERTIBLE_SUFFIXES, convert_to_zarr, converted_path, input_shape
from .plotting import parse_plot_kinds, plot_stem, write_plots
from .progress import ChainProgress, InterruptLatch
from .report import result_lines

#: CLI option -> sampler parameter, for the options left to the library's default when
#: not given
_SAMPLER_OPTIONS = {"model": "model", "n_iter": "n_iter", "burn_in": "burn_in",
                    "thin": "thin", "n_chains": "n_chains", "seed": "random_state",
                    "point_estimate": "point_estimate", "w_estimate": "w_estimate",
                    "refine_sweeps": "refine_sweeps", "missing": "missing"}


def _params_from_args(args):
    from ..functional import PAPER_SETTINGS

    params = dict(PAPER_SETTINGS) if args.paper else {}
    for opt, name in _SAMPLER_OPTIONS.items():
        v = getattr(args, opt)
        if v is not None:
            params[name] = v
    if args.plain:
        params["aggressive"] = False
    if args.bounds is not None:
        params["bounds"] = tuple(args.bounds)
    if args.init is not None:
        if "," in args.init or args.init.strip().isdigit():
            try:
                params["init"] = np.array([int(x) for x in args.init.split(",") if x.strip()])
            except ValueError as exc:
                raise CLIError(f"--init {args.init!r}: expected auto, random, sketch, cpqr or a "
                               "comma separated list of K column indices.") from exc
        else:
            params["init"] = args.init
    return params


def _full_params(params):
    from ..functional import DEFAULTS

    return {**DEFAULTS, **params}


def _check_out_free(out, args):
    """Fail before converting anything when OUT exists and neither flag allows it."""
    if args.resume or args.overwrite or is_url(out):
        return
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        from ..._errors import OutputExistsError

        raise OutputExistsError(f"the output {out!r} already exists. Pass --overwrite to "
                                "replace it, --resume to continue an interrupted fit there, "
                                "or choose another --out.")


def _validate_early(src, k, params):
    from .._params import validate_params
    from ..functional import DEFAULTS

    shape = input_shape(src)
    if len(shape) != 2:
        from ..._errors import InputShapeError

        raise InputShapeError(f"{src!r} holds an array of shape {shape}; a matrix (2-D) is "
                              "needed.")
    validate_params({**DEFAULTS, **params, "n_components": k}, n_cols=shape[1])


def run(args):
    from ..functional import bayesian_id

    out = args.out
    _check_out_free(out, args)
    kinds = parse_plot_kinds(args.plot) if args.plot else []
    params = _params_from_args(args)
    src = args.input
    # everything checkable from metadata is checked before converting or sampling
    _validate_early(src, args.k, params)
    if not is_url(src) and file_suffix(src) in CONVERTIBLE_SUFFIXES:
        dst = converted_path(src, out)
        src = convert_to_zarr(src, dst, quiet=args.quiet, overwrite=args.overwrite)
    t0 = time.perf_counter()
    full = _full_params(params)
    with ChainProgress(full["n_chains"] * full["n_iter"], disable=args.quiet) as bar, \
            InterruptLatch() as latch:
        def callback(state):
            latch.check()
            bar(state)

        res = bayesian_id(src, args.k, **params, client=args.scheduler, out=out,
                          overwrite=args.overwrite, resume=args.resume,
                          checkpoint_every=args.checkpoint_every, callback=callback)
    wall = time.perf_counter() - t0
    lines = result_lines(res) + [f"wall time    {wall:.1f} s", f"result       {out}"]
    if kinds:
        for path in write_plots(res, kinds, plot_stem(out)):
            lines.append(f"plot         {path}")
    print_lines(lines, args.quiet)
    return 0




def add_parser(sub):
    """Add the ``fit`` command to the subparsers ``sub``."""
    fit = sub.add_parser("fit", help="fit a Bayesian ID to a matrix",
                         description="Run the GBT/GBTN sampler on INPUT and write the result "
                         "to the Zarr group OUT.")
    fit.add_argument("input", metavar="INPUT", help="Zarr array path or URL; or a .npy, .csv, "
                     ".txt or .tsv file (converted to <folder of OUT>/<file name>.zarr, "
                     "e.g. data.npy.zarr)")
    fit.add_argument("--k", type=positive_int, required=True, metavar="K",
                     help="number of columns to select")
    fit.add_argument("--out", required=True, metavar="OUT", help="output Zarr group")
    fit.add_argument("--model", choices=("gbt", "gbtn"), default=None,
                     help="GBT (default) or GBTN (hierarchical prior on W's mean/precision)")
    fit.add_argument("--plain", action="store_true",
                     help="the plain sampler (Algorithm 1) instead of the aggressive one")
    fit.add_argument("--n-iter", type=positive_int, default=None, metavar="N",
                     help="iterations per chain (default 500)")
    fit.add_argument("--burn-in", type=nonneg_int, default=None, metavar="N",
                     help="default 100")
    fit.add_argument("--thin", type=positive_int, default=None, metavar="N", help="default 5")
    fit.add_argument("--n-chains", type=positive_int, default=None, metavar="N",
                     help="default 1")
    fit.add_argument("--seed", type=nonneg_int, default=None, metavar="S")
    fit.add_argument("--init", default=None, metavar="INIT",
                     help="auto (default), random (the paper), sketch, cpqr, or K comma "
                     "separated column indices")
    fit.add_argument("--bounds", type=float, nargs=2, default=None, metavar=("A", "B"),
                     help="bounds of W (default: -1 1; -2 2 is the weak ID)")
    fit.add_argument("--point-estimate", choices=("mode", "best"), default=None,
                     help="reported basis: the lowest-SSE draw's (best, default) or the most "
                     "visited (mode)")
    fit.add_argument("--w-estimate", choices=("mean", "map", "lstsq"), default=None,
                     help="reported W: box-constrained least squares (lstsq, default), "
                     "posterior mode (map) or mean")
    fit.add_argument("--refine-sweeps", type=nonneg_int, default=None, metavar="N",
                     help="W sweeps with the reported basis fixed after the chain")
    fit.add_argument("--missing", choices=("zero", "mask"), default=None,
                     help="zero (default): A has no NaN, missing entries are filled in; mask: "
                     "NaN entries are missing values, left out of the likelihood")
    fit.add_argument("--paper", action="store_true",
                     help="the paper's exact choices (dask_bid.PAPER_SETTINGS: random init, "
                     "mode basis, mean W, no refinement); other options override them")
    fit.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help="Dask scheduler address (tcp://host:8786) or 'synchronous'; "
                     "default: a local cluster of 2 workers")
    fit.add_argument("--checkpoint-every", type=positive_int, default=25, metavar="N")
    fit.add_argument("--resume", action="store_true",
                     help="continue an interrupted fit stored at OUT")
    fit.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    fit.add_argument("--plot", default=None, metavar="KINDS",
                     help="write plots next to OUT: comma separated among trace, autocorr, "
                     "inclusion, or all")
    fit.add_argument("-q", "--quiet", action="store_true", help="no progress bars, no summary")
    fit.set_defaults(func=run)
