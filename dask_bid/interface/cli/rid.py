"""``dask-bid rid``: the randomized and pivoted-QR ID baselines."""

from __future__ import annotations

import os

import numpy as np

from ._core import (
    CLIError,
    file_suffix,
    fmt_g,
    is_url,
    nonneg_int,
    positive_int,
    print_lines,
    short_list,
)
from .convert import CONVERTIBLE_SUFFIXES, input_column_names, load_in_memory
from .reading import FILL_CHOICES, add_names_option, add_text_options, text_options
from .report import shown_names


def _refuse_kept_nan(src):
    """A store converted with --missing mask keeps NaN as missing entries: the pivoted-QR
    ID needs them all (its refusal at the first NaN suggested dask code)."""
    import zarr

    from ...engine.zarr_io import stored_kept_nan

    try:
        attrs = zarr.open_array(src, mode="r").attrs
    except Exception:  # not a readable array: the fit's own reading says why
        return
    n = stored_kept_nan(attrs)
    if n:
        raise CLIError(f"{src!r} keeps {n} NaN as missing entries (it was converted with "
                       "--missing mask), and rid needs every entry: run rid on the file it "
                       "came from with --fill-missing zero, or fit the store with dask-bid "
                       "fit.")


def run(args):
    from ...baselines import RandomizedID

    src = args.input
    unused = [flag for flag, v in (("--oversampling", args.oversampling),
                                   ("--power-iter", args.power_iter),
                                   ("--seed", args.seed)) if v is not None]
    if args.method == "cpqr" and unused:
        # the sketch's options, which the exact pivoted QR would ignore without a word
        raise CLIError(f"{', '.join(unused)} appl{'ies' if len(unused) == 1 else 'y'} to "
                       "--method randomized (the sketch); --method cpqr factorises A itself: "
                       f"drop {'it' if len(unused) == 1 else 'them'}.")
    # the output is checked before INPUT is read: a refusal must not cost a fit
    if args.out is not None and not args.out.strip():
        raise CLIError("--out is empty: give the .npz file to write, e.g. --out rid.npz, or "
                       "leave --out out to print the result only.")
    out = _npz_out(args.out) if args.out else None
    if out is not None:
        _check_npz_out(out, args.overwrite)
        _check_writable(out)
    if args.fill_missing and (is_url(src) or file_suffix(src) not in CONVERTIBLE_SUFFIXES):
        raise CLIError(f"--fill-missing applies to .npy and text files; the Zarr array "
                       f"{src!r} is read as is: fill its NaN first.")
    from ...engine.sparse_store import is_sparse_store

    if is_sparse_store(src):
        raise CLIError(f"{src!r} is a sparse store, whose absent entries are unobserved, and "
                       f"rid (--method {args.method}) needs every entry of a dense matrix: "
                       "fit the store with dask-bid fit, or run rid on a dense matrix with "
                       "its missing entries filled (the paper fills 0: "
                       "dask_bid.datasets.load_movielens_100k, docs/baselines.md).")
    convertible = not is_url(src) and file_suffix(src) in CONVERTIBLE_SUFFIXES
    if not convertible:
        _refuse_kept_nan(src)
    text = text_options(args, src)
    given = None
    if args.column_names:  # checked against INPUT's shape before anything is read
        from .convert import input_shape
        from .reading import read_names_file

        given = read_names_file(args.column_names, input_shape(src, **text), src)
    if convertible:
        A = load_in_memory(src, fill_missing=args.fill_missing, **text)
    else:
        A = src
    est = RandomizedID(args.k, method=args.method,
                       oversampling=10 if args.oversampling is None else args.oversampling,
                       n_power_iter=0 if args.power_iter is None else args.power_iter,
                       random_state=args.seed, allow_missing_chunks=args.allow_missing_chunks)
    from ..._errors import NonFiniteInputError

    try:
        est.fit(A)
    except NonFiniteInputError as exc:
        if convertible:
            raise
        # a store's NaN: the Python advice (`A = da.where(...)`) in command-line words
        where = str(exc).split("). ", 1)[0] + ")" if "). " in str(exc) else str(exc)
        raise CLIError(f"{src!r}: {where.replace('A contains', 'it contains', 1)}. rid needs "
                       "every entry: fill its NaN first (0 is the paper's fill), or run rid on "
                       "the .npy / text file it came from with --fill-missing zero; `dask-bid "
                       "fit --missing mask` fits the observed entries only.") from exc
    names = given if given is not None else input_column_names(src, text,
                                                               est.n_features_in_)
    picked = None if names is None else [names[int(j)] for j in est.columns_]
    lines = [
        f"method       {args.method}, K = {args.k}, A is {est.n_samples_} x {est.n_features_in_}",
        f"columns      {short_list(est.columns_)}",
        *([] if picked is None else [f"names        {shown_names(picked)}"]),
        f"MSE          {fmt_g(est.mse_)}",
        f"max|W|       {fmt_g(est.max_abs_w_)}"
        + ("  (exceeds 1: not a strict ID)" if est.max_abs_w_ > 1 + 1e-9 else ""),
        f"time         {est.fit_time_:.2f} s",
    ]
    if out is not None:
        _check_npz_out(out, args.overwrite)  # again: it may have appeared during the fit
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        more = {} if picked is None else {"names": np.asarray(picked)}
        # written next to it, then moved: an interrupted write leaves no half file at out
        tmp = f"{out}.partial-{os.getpid()}.npz"
        try:
            np.savez(tmp, columns=est.columns_, components=est.components_, mse=est.mse_,
                     max_abs_w=est.max_abs_w_, method=args.method, n_components=args.k,
                     **more)
            os.replace(tmp, out)
        except OSError as exc:  # the disk filled, the folder went away: named, in one line
            raise CLIError(f"could not write --out {out!r} ({exc.strerror or exc}); the result "
                           "is not saved: free space or choose another --out.") from exc
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        lines.append(f"written      {out} (numpy .npz: columns, components, mse, max_abs_w"
                     f"{', names' if more else ''})")
    print_lines(lines, args.quiet)
    return 0




#: what ``rid --out`` writes: a file holding these is ours, and --overwrite may replace it
_NPZ_KEYS = {"columns", "components", "mse", "max_abs_w", "method", "n_components"}


def _npz_out(out):
    """The file ``--out`` names: OUT itself when it ends in .npz, OUT.npz when it has no
    suffix (numpy's rule); any other suffix is refused, since ``x.zarr`` or ``x.csv``
    would promise a format rid does not write."""
    from ..._files import local_path

    out = local_path(out)  # file:// names a local file
    if "://" in out:  # it wrote ./s3:/bucket/a.npz, a local file named like the URL
        raise CLIError(f"--out {out!r} is a URL, and rid writes a local .npz file: give a "
                       "local path (and copy the file to object storage afterwards).")
    if out.endswith(("/", os.sep)) or os.path.isdir(out):
        raise CLIError(f"--out {out!r} is a folder; rid writes one .npz file: give a "
                       "file name, e.g. --out rid.npz.")
    suffix = file_suffix(out)
    if suffix == ".npz":
        return out
    if suffix == "":
        return out + ".npz"
    raise CLIError(f"--out {out!r}: rid writes a numpy .npz file, not {suffix}; give a "
                   f"name ending in .npz (e.g. --out {os.path.splitext(out)[0]}.npz).")


def _check_writable(out):
    """Refuse, before INPUT is read, an --out that cannot be written: a file is made and
    removed in its folder (the folder's permissions alone miss /proc, a read-only mount
    seen by root, a full disk's inodes); or that lies among a store's own files."""
    from ...engine.zarr_io import refuse_inside_store

    refuse_inside_store(out, "--out")  # a later --overwrite of that result refused it
    folder = os.path.dirname(os.path.abspath(out))
    probe_in = folder
    while not os.path.isdir(probe_in):  # the folders rid would make: their first parent
        parent = os.path.dirname(probe_in)
        if parent == probe_in or os.path.exists(probe_in):
            raise CLIError(f"--out {out!r}: {probe_in!r} is not a folder; choose another "
                           "--out.")
        probe_in = parent
    probe = os.path.join(probe_in, f".dask-bid-probe-{os.getpid()}")
    try:
        with open(probe, "xb"):
            pass
        os.remove(probe)
    except OSError as exc:
        raise CLIError(f"--out {out!r} cannot be written ({exc.strerror or exc} in "
                       f"{probe_in!r}): choose a writable place.") from exc


def _check_npz_out(out, overwrite):
    """Refuse an existing --out unless --overwrite is given and the file is a .npz that
    ``rid`` wrote (anything else is the user's: never replaced)."""
    if not os.path.exists(out):
        return
    from ..._errors import OutputExistsError

    if not overwrite:
        raise OutputExistsError(f"{out!r} already exists; pass --overwrite to replace it.")
    try:
        with np.load(out, allow_pickle=False) as z:
            ours = os.path.isfile(out) and _NPZ_KEYS <= set(z.files)
    except Exception:
        ours = False
    if not ours:
        raise OutputExistsError(
            f"refusing to replace {out!r}: it is not a result of dask-bid rid (a .npz "
            f"holding `{', '.join(sorted(_NPZ_KEYS))}`). Remove it yourself or choose "
            "another --out.")


def add_parser(sub):
    """Add the ``rid`` command to the subparsers ``sub``."""
    rid = sub.add_parser("rid", help="the randomized / pivoted-QR ID baselines",
                         description="Interpolative decomposition by a randomized sketch "
                         "(Liberty et al. 2007, the paper's RID) or by column-pivoted QR. "
                         ".npy and text files are read into memory; a Zarr array is "
                         "streamed.")
    rid.add_argument("input", metavar="INPUT", help="Zarr array path or URL, .npy, .csv, "
                     ".txt or .tsv file")
    rid.add_argument("--k", type=positive_int, required=True, metavar="K",
                     help="number of columns to select")
    add_names_option(rid, "written to the --out file")
    rid.add_argument("--method", choices=("randomized", "cpqr"), default="randomized",
                     help="randomized: a Gaussian sketch of A, then pivoted QR of the sketch "
                     "(default); cpqr: pivoted QR of A itself (exact, slower for wide A)")
    rid.add_argument("--oversampling", type=nonneg_int, default=None, metavar="P",
                     help="randomized: extra sketch rows beyond K (default 10)")
    rid.add_argument("--power-iter", type=nonneg_int, default=None, metavar="Q",
                     help="randomized: power iterations, for a slowly decaying spectrum "
                     "(default 0)")
    rid.add_argument("--seed", type=nonneg_int, default=None, metavar="S",
                     help="randomized: random seed of the sketch (default: random)")
    rid.add_argument("--fill-missing", choices=FILL_CHOICES, default=None,
                     help="zero: replace every NaN of a .npy or text INPUT by 0 (the "
                     "paper's fill); default: a NaN is refused, naming its line")
    add_text_options(rid)
    rid.add_argument("--out", default=None, metavar="OUT.npz",
                     help="write columns, W (components), mse and max_abs_w to this .npz "
                     "file (a name without a suffix gets .npz; another suffix is refused); "
                     "checked before INPUT is read")
    rid.add_argument("--overwrite", action="store_true",
                     help="replace an existing --out file")
    rid.add_argument("--allow-missing-chunks", action="store_true",
                     help="accept a Zarr INPUT with chunk files missing (read as its fill "
                     "value); refused by default, as a lost chunk would read as zeros")
    rid.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    rid.set_defaults(func=run)
    return rid
