"""``dask-bid rid``: the randomized and pivoted-QR ID baselines."""

from __future__ import annotations

import os

import numpy as np

from ._core import file_suffix, fmt_g, is_url, nonneg_int, positive_int, print_lines, short_list
from .convert import CONVERTIBLE_SUFFIXES, load_in_memory


def run(args):
    from ...baselines import RandomizedID

    src = args.input
    if not is_url(src) and file_suffix(src) in CONVERTIBLE_SUFFIXES:
        A = load_in_memory(src)
    else:
        A = src
    est = RandomizedID(args.k, method=args.method, oversampling=args.oversampling,
                       n_power_iter=args.power_iter, random_state=args.seed)
    est.fit(A)
    lines = [
        f"method       {args.method}, K = {args.k}, A is {est.n_samples_} x {est.n_features_in_}",
        f"columns      {short_list(est.columns_)}",
        f"MSE          {fmt_g(est.mse_)}",
        f"max|W|       {fmt_g(est.max_abs_w_)}"
        + ("  (exceeds 1: not a strict ID)" if est.max_abs_w_ > 1 + 1e-9 else ""),
        f"time         {est.fit_time_:.2f} s",
    ]
    if args.out:
        out = args.out if args.out.endswith(".npz") else args.out + ".npz"
        if os.path.exists(out) and not args.overwrite:
            from ..._errors import OutputExistsError

            raise OutputExistsError(f"{out!r} already exists; pass --overwrite to replace it.")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        np.savez(out, columns=est.columns_, components=est.components_, mse=est.mse_,
                 max_abs_w=est.max_abs_w_, method=args.method, n_components=args.k)
        lines.append(f"written      {out} (numpy .npz: columns, components, mse, max_abs_w)")
    print_lines(lines, args.quiet)
    return 0




def add_parser(sub):
    """Add the ``rid`` command to the subparsers ``sub``."""
    rid = sub.add_parser("rid", help="the randomized / pivoted-QR ID baselines",
                         description="Interpolative decomposition by a randomized sketch "
                         "(Liberty et al. 2007) or by column-pivoted QR.")
    rid.add_argument("input", metavar="INPUT", help="Zarr array path or URL, .npy, .csv or .txt")
    rid.add_argument("--k", type=positive_int, required=True, metavar="K")
    rid.add_argument("--method", choices=("randomized", "cpqr"), default="randomized")
    rid.add_argument("--oversampling", type=nonneg_int, default=10, metavar="P")
    rid.add_argument("--power-iter", type=nonneg_int, default=0, metavar="Q")
    rid.add_argument("--seed", type=nonneg_int, default=None, metavar="S")
    rid.add_argument("--out", default=None, metavar="OUT.npz",
                     help="write columns and W to this .npz file")
    rid.add_argument("--overwrite", action="store_true")
    rid.add_argument("-q", "--quiet", action="store_true")
    rid.set_defaults(func=run)
