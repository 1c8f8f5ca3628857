"""The ``dask-bid`` command: demo, fit, rid, info and plot.

Every command exits with status 0 on success. A user error (bad argument, missing
file, existing output, unreachable scheduler, missing optional package ...) prints one
line ``dask-bid: error: <message>`` on stderr and exits with status 2 (set the
environment variable ``DASK_BID_DEBUG=1`` to get the traceback instead); an interrupted
run exits with 130.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import posixpath
import signal
import sys
import threading
import time
import warnings

import numpy as np

__all__ = ["main", "build_parser", "ChainProgress", "InterruptLatch", "convert_to_zarr",
           "TEXT_SUFFIXES", "CONVERTIBLE_SUFFIXES"]

PROG = "dask-bid"
#: Files converted to a Zarr store before a fit.
TEXT_SUFFIXES = (".csv", ".txt", ".tsv")
CONVERTIBLE_SUFFIXES = (".npy", *TEXT_SUFFIXES)
#: Plot kinds ``--plot`` accepts (``all`` = the first three).
PLOT_KINDS = ("trace", "autocorr", "inclusion", "error-k")


class CLIError(Exception):
    """A user error detected by the command line itself."""


# ----------------------------------------------------------------------------- progress

class ChainProgress:
    """A tqdm progress bar over the iterations of every chain of a fit.

    Pass the instance as ``callback=`` to :func:`dask_bid.bayesian_id` (the chain driver
    calls it with the chain state after every iteration). A resumed chain's first call
    accounts for the iterations it had already done.

    Parameters
    ----------
    total : int
        ``n_chains * n_iter``.
    desc : str
    disable : bool
        No output at all (``--quiet``).
    """

    def __init__(self, total, desc="sampling", disable=False, file=None):
        from tqdm.auto import tqdm

        file = file if file is not None else sys.stderr
        # a log file (no terminal) gets a line every 10 s rather than a stream of updates
        tty = bool(getattr(file, "isatty", lambda: False)())
        self.bar = tqdm(total=total, desc=desc, unit="it", disable=disable, leave=True,
                        dynamic_ncols=True, file=file, mininterval=0.2 if tty else 10.0)
        self._seen = {}
        # chains may run side by side in threads, each calling back
        self._lock = threading.Lock()

    def __call__(self, state):
        with self._lock:
            key = id(state)
            last = self._seen.get(key)
            # a chain's first call counts every iteration it has done (a resumed chain
            # starts past 0); never beyond the total (a replay after a lost worker)
            step = state.iteration - (last if last is not None else 0)
            step = min(step, self.bar.total - self.bar.n) if self.bar.total else step
            self._seen[key] = state.iteration
            if not self.bar.disable and state.trace_mse:
                self.bar.set_postfix(mse=f"{state.trace_mse[-1]:.4g}",
                                     sigma2=f"{state.sigma2:.4g}", refresh=False)
            self.bar.update(max(step, 0))

    def close(self):
        self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class InterruptLatch:
    """Ctrl-C raises KeyboardInterrupt as usual and is also remembered; :meth:`check`
    (called after every iteration) raises it again.

    A KeyboardInterrupt that lands while numba loads a kernel is raised inside an
    llvmlite ctypes callback, where Python prints and drops it, and the fit would run on;
    the latch makes the next iteration stop instead. Installed from the main thread only
    (elsewhere it is inert).
    """

    def __init__(self):
        self.hit = False
        self._old = None

    def _handler(self, signum, frame):
        self.hit = True
        raise KeyboardInterrupt

    def check(self):
        if self.hit:
            raise KeyboardInterrupt

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc):
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None


# ----------------------------------------------------------------------------- conversion

def _is_url(path) -> bool:
    return "://" in str(path)


def _suffix(path) -> str:
    return os.path.splitext(str(path).rstrip("/"))[1].lower()


def _source_stamp(path):
    st = os.stat(path)
    return {"path": os.path.abspath(path), "size": int(st.st_size),
            "mtime_ns": int(st.st_mtime_ns)}


def _detect_text_layout(path):
    """(delimiter, has_header, n_cols) from the first non-empty line of a text matrix."""
    with open(path, encoding="utf-8-sig") as fh:
        first = ""
        for line in fh:
            if line.strip():
                first = line.rstrip("\r\n")
                break
    if not first:
        raise CLIError(f"{path!r} holds no data rows.")
    if _suffix(path) == ".csv" or ("," in first and "\t" not in first):
        delim = ","
    elif "\t" in first:
        delim = "\t"
    else:
        delim = None
    fields = first.split(delim) if delim else first.split()
    try:
        [float(f) if f.strip() else np.nan for f in fields]
        header = False
    except ValueError:
        header = True
    return delim, header, len(fields)


def _count_rows(path, header):
    n = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                n += 1
    return n - int(header)


def _parse_block(lines, delim, n_cols, first_row, path):
    import io

    text = "".join(lines)
    try:
        block = np.loadtxt(io.StringIO(text), delimiter=delim, dtype=np.float64, ndmin=2)
    except ValueError:
        # empty fields ("1,,3") are missing values: the slower parser fills them with NaN
        try:
            block = np.genfromtxt(io.StringIO(text), delimiter=delim, dtype=np.float64,
                                  filling_values=np.nan, invalid_raise=True)
            block = np.atleast_2d(block)
        except ValueError as exc:
            raise CLIError(f"cannot parse {path!r} near data row {first_row + 1}: "
                           f"{' '.join(str(exc).split())}") from exc
    if block.shape[1] != n_cols:
        raise CLIError(f"{path!r}: data row {first_row + 1} onwards has {block.shape[1]} "
                       f"columns, the first row has {n_cols}; every row needs the same number.")
    return block


def convert_to_zarr(src, dst, *, quiet=False, overwrite=False, chunks=None):
    """Convert a ``.npy``, ``.csv``, ``.txt`` or ``.tsv`` matrix to a Zarr v3 array.

    The file is streamed in row blocks (a ``.npy`` is memory-mapped), so a matrix larger
    than memory converts too. Text files may have one header line; empty fields and
    ``nan`` become NaN. The store records where it came from: a later call with the same,
    unchanged source reuses it instead of converting again.

    Parameters
    ----------
    src : str or PathLike
        The file to convert.
    dst : str
        The Zarr array to write (a local directory or fsspec URL).
    quiet : bool
        No progress bar.
    overwrite : bool
        Replace an existing ``dst`` that was not converted from this very file.
    chunks : (int, int), optional
        Default: :func:`dask_bid.engine.default_chunks`.

    Returns
    -------
    str
        ``dst``.
    """
    import zarr
    from tqdm.auto import tqdm

    from .._errors import OutputExistsError, StoreNotFoundError
    from ..engine.zarr_io import default_chunks

    src = os.fspath(src)
    if not os.path.isfile(src):
        raise StoreNotFoundError(f"no such file: {src!r}")
    stamp = _source_stamp(src)
    existing = _open_existing(dst)
    if existing is not None:
        if existing.attrs.get("dask_bid_converted_from") == stamp:
            if not quiet:
                print(f"reusing {dst} (already converted from {src})", file=sys.stderr)
            return dst
        if not overwrite:
            raise OutputExistsError(
                f"{dst!r} exists and was not converted from this version of {src!r}; pass "
                "--overwrite to replace it.")
    suffix = _suffix(src)
    if suffix == ".npy":
        arr = np.load(src, mmap_mode="r", allow_pickle=False)
        if arr.ndim != 2:
            from .._errors import InputShapeError

            raise InputShapeError(f"{src!r} holds a {arr.ndim}-D array of shape {arr.shape}; "
                                  "a matrix (2-D) is needed.")
        from ..engine.inputs import check_float_dtype

        dtype = check_float_dtype(arr.dtype)
        shape = arr.shape
    elif suffix in TEXT_SUFFIXES:
        delim, header, n_cols = _detect_text_layout(src)
        shape = (_count_rows(src, header), n_cols)
        dtype = np.dtype(np.float64)
    else:
        raise CLIError(f"cannot convert {src!r}: expected one of {', '.join(CONVERTIBLE_SUFFIXES)}")
    if shape[0] < 1 or shape[1] < 2:
        from .._errors import InputShapeError

        raise InputShapeError(f"{src!r} has shape {shape}; a matrix with at least 1 row and "
                              "2 columns is needed.")
    chunks = tuple(chunks) if chunks is not None else default_chunks(shape, dtype.itemsize)
    z = zarr.create_array(store=dst, shape=shape, chunks=chunks, dtype=dtype, overwrite=True,
                          zarr_format=3)
    rows_per_write = chunks[0] * max(1, (64 * 2**20) // max(1, chunks[0] * shape[1] * 8))
    with tqdm(total=shape[0], desc=f"converting {os.path.basename(src)}", unit="row",
              disable=quiet, file=sys.stderr, dynamic_ncols=True) as bar:
        if suffix == ".npy":
            for r0 in range(0, shape[0], rows_per_write):
                r1 = min(shape[0], r0 + rows_per_write)
                z[r0:r1] = np.asarray(arr[r0:r1], dtype=dtype)
                bar.update(r1 - r0)
        else:
            r0 = 0
            buf = []
            with open(src, encoding="utf-8-sig") as fh:
                skip = header
                for line in fh:
                    if not line.strip():
                        continue
                    if skip:
                        skip = False
                        continue
                    buf.append(line)
                    if len(buf) == rows_per_write:
                        z[r0:r0 + len(buf)] = _parse_block(buf, delim, shape[1], r0, src)
                        bar.update(len(buf))
                        r0 += len(buf)
                        buf = []
            if buf:
                z[r0:r0 + len(buf)] = _parse_block(buf, delim, shape[1], r0, src)
                bar.update(len(buf))
    z.attrs["dask_bid_converted_from"] = stamp
    return dst


def _open_existing(path):
    import zarr

    if not _is_url(path) and not os.path.exists(path):
        return None
    try:
        return zarr.open_array(path, mode="r")
    except Exception:
        if _is_url(path):
            return None
        from .._errors import OutputExistsError

        raise OutputExistsError(f"{path!r} exists and is not a Zarr array; remove it or choose "
                                "another --out.") from None


def _converted_path(input_path, out):
    """Where a converted input goes: ``<folder of OUT>/<input file name>.zarr``."""
    name = os.path.basename(os.fspath(input_path))
    out = str(out).rstrip("/")
    join = posixpath.join if _is_url(out) else os.path.join
    parent = posixpath.dirname(out) if _is_url(out) else os.path.dirname(os.path.abspath(out))
    return join(parent, f"{name}.zarr")


def _load_in_memory(path):
    """A .npy / text matrix as a numpy array, for the baselines."""
    suffix = _suffix(path)
    if not os.path.isfile(path):
        from .._errors import StoreNotFoundError

        raise StoreNotFoundError(f"no such file: {path!r}")
    if suffix == ".npy":
        return np.load(path, mmap_mode="r", allow_pickle=False)
    delim, header, n_cols = _detect_text_layout(path)
    with open(path, encoding="utf-8-sig") as fh:
        lines = [ln for ln in fh if ln.strip()][int(header):]
    return _parse_block(lines, delim, n_cols, 0, path)


# ----------------------------------------------------------------------------- formatting

def human_bytes(n) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _short_list(values, limit=12) -> str:
    values = [int(v) for v in values]
    if len(values) <= limit:
        return "[" + ", ".join(map(str, values)) + "]"
    head = ", ".join(map(str, values[:limit]))
    return f"[{head}, ... ({len(values)} in all)]"


def _g(x) -> str:
    return "n/a" if x is None else f"{x:.6g}"


def result_lines(res, *, planted=None) -> list[str]:
    """A few human-readable lines about a BIDResult."""
    p = res.params
    K = len(res.columns)
    n_chains, n_iter = res.trace.shape
    rest = np.setdiff1d(np.arange(res.components.shape[1]), res.columns)
    off = float(np.abs(res.components[:, rest]).max()) if rest.size else None
    lines = [
        f"model        {str(p.get('model', '?')).upper()} "
        f"({'aggressive' if p.get('aggressive', True) else 'plain'}), K = {K}, "
        f"A is {res.n_samples} x {res.n_features}",
        f"chains       {n_chains} x {n_iter} iterations (burn-in {p.get('burn_in')}, "
        f"thin {p.get('thin')}), {res.draws_sigma2.size} retained draws, "
        f"{res.n_draws_point} with the reported basis",
        f"columns      {_short_list(res.columns)}",
        f"MSE          {_g(res.mse)}"
        + (f"  (observed entries: {_g(res.mse_observed)})" if res.mse_observed is not None
           else ""),
        f"sigma2       {_g(res.sigma2)}",
        f"max|W|       {_g(res.max_abs_w)}" + (f"  (off the basis: {_g(off)})" if off is not None
                                               else ""),
        f"accepted     {float(np.mean(res.trace['accepted'])):.1%} of the swap proposals",
        f"time         {res.elapsed:.1f} s sampling",
    ]
    if planted is not None:
        found = np.intersect1d(res.columns, planted).size
        lines.insert(3, f"planted      {_short_list(np.sort(planted))}: {found} of "
                        f"{len(planted)} found")
    return lines


def _print_lines(lines, quiet=False):
    if not quiet:
        for ln in lines:
            print(ln)


# ----------------------------------------------------------------------------- plotting

def _parse_plot_kinds(text, *, allow_error_k=False):
    kinds = []
    for part in str(text).split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part == "all":
            kinds += ["trace", "autocorr", "inclusion"]
        elif part in PLOT_KINDS and (part != "error-k" or allow_error_k):
            kinds.append(part)
        else:
            choices = [k for k in PLOT_KINDS if k != "error-k" or allow_error_k]
            raise CLIError(f"unknown plot kind {part!r}; choose among {', '.join(choices)}, all.")
    return list(dict.fromkeys(kinds))


def _plot_stem(out):
    out = str(out).rstrip("/")
    root, ext = os.path.splitext(out)
    return root if ext.lower() == ".zarr" else out


def write_plots(res, kinds, stem, *, dpi=110):
    """Write one PNG per kind as ``<stem>.<kind>.png``; returns the paths written."""
    from . import plots

    funcs = {"trace": plots.plot_trace, "autocorr": plots.plot_autocorrelation,
             "inclusion": plots.plot_inclusion}
    from .._errors import ParameterError

    written = []
    for kind in kinds:
        try:
            ax = funcs[kind](res)
        except ParameterError:
            if kind != "autocorr":
                raise
            # too few W draws of the reported basis: sigma^2 is defined for every draw
            ax = plots.plot_autocorrelation(res, quantity="sigma2")
        fig = np.ravel(ax)[0].figure
        path = f"{stem}.{kind}.png"
        d = os.path.dirname(os.path.abspath(path))
        os.makedirs(d, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        plots.close(fig)
        written.append(path)
    return written


# ----------------------------------------------------------------------------- commands

#: CLI option -> sampler parameter, for the options left to the library's default when
#: not given
_SAMPLER_OPTIONS = {"model": "model", "n_iter": "n_iter", "burn_in": "burn_in",
                    "thin": "thin", "n_chains": "n_chains", "seed": "random_state",
                    "point_estimate": "point_estimate", "w_estimate": "w_estimate",
                    "refine_sweeps": "refine_sweeps", "missing": "missing"}


def _params_from_args(args):
    from .functional import PAPER_SETTINGS

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
    from .functional import DEFAULTS

    return {**DEFAULTS, **params}


def _check_out_free(out, args):
    """Fail before converting anything when OUT exists and neither flag allows it."""
    if args.resume or args.overwrite or _is_url(out):
        return
    if os.path.exists(out) and (not os.path.isdir(out) or os.listdir(out)):
        from .._errors import OutputExistsError

        raise OutputExistsError(f"the output {out!r} already exists. Pass --overwrite to "
                                "replace it, --resume to continue an interrupted fit there, "
                                "or choose another --out.")


def _input_shape(src):
    """Shape of INPUT from metadata (a .npy header, a text file's rows, Zarr metadata)."""
    from ..engine.inputs import as_matrix_source

    if not _is_url(src) and _suffix(src) in CONVERTIBLE_SUFFIXES:
        if not os.path.isfile(src):
            from .._errors import StoreNotFoundError

            raise StoreNotFoundError(f"no such file: {src!r}")
        if _suffix(src) == ".npy":
            return tuple(np.load(src, mmap_mode="r", allow_pickle=False).shape)
        delim, header, n_cols = _detect_text_layout(src)
        return (_count_rows(src, header), n_cols)
    return as_matrix_source(src).shape


def _validate_early(src, k, params):
    from ._params import validate_params
    from .functional import DEFAULTS

    shape = _input_shape(src)
    if len(shape) != 2:
        from .._errors import InputShapeError

        raise InputShapeError(f"{src!r} holds an array of shape {shape}; a matrix (2-D) is "
                              "needed.")
    validate_params({**DEFAULTS, **params, "n_components": k}, n_cols=shape[1])


def cmd_fit(args):
    from .functional import bayesian_id

    out = args.out
    _check_out_free(out, args)
    kinds = _parse_plot_kinds(args.plot) if args.plot else []
    params = _params_from_args(args)
    src = args.input
    # everything checkable from metadata is checked before converting or sampling
    _validate_early(src, args.k, params)
    if not _is_url(src) and _suffix(src) in CONVERTIBLE_SUFFIXES:
        dst = _converted_path(src, out)
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
        for path in write_plots(res, kinds, _plot_stem(out)):
            lines.append(f"plot         {path}")
    _print_lines(lines, args.quiet)
    return 0


def cmd_rid(args):
    from ..baselines import RandomizedID

    src = args.input
    if not _is_url(src) and _suffix(src) in CONVERTIBLE_SUFFIXES:
        A = _load_in_memory(src)
    else:
        A = src
    est = RandomizedID(args.k, method=args.method, oversampling=args.oversampling,
                       n_power_iter=args.power_iter, random_state=args.seed)
    est.fit(A)
    lines = [
        f"method       {args.method}, K = {args.k}, A is {est.n_samples_} x {est.n_features_in_}",
        f"columns      {_short_list(est.columns_)}",
        f"MSE          {_g(est.mse_)}",
        f"max|W|       {_g(est.max_abs_w_)}"
        + ("  (exceeds 1: not a strict ID)" if est.max_abs_w_ > 1 + 1e-9 else ""),
        f"time         {est.fit_time_:.2f} s",
    ]
    if args.out:
        out = args.out if args.out.endswith(".npz") else args.out + ".npz"
        if os.path.exists(out) and not args.overwrite:
            from .._errors import OutputExistsError

            raise OutputExistsError(f"{out!r} already exists; pass --overwrite to replace it.")
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        np.savez(out, columns=est.columns_, components=est.components_, mse=est.mse_,
                 max_abs_w=est.max_abs_w_, method=args.method, n_components=args.k)
        lines.append(f"written      {out} (numpy .npz: columns, components, mse, max_abs_w)")
    _print_lines(lines, args.quiet)
    return 0


def describe_path(path) -> dict:
    """What ``dask-bid info`` reports about ``path``, as a dict (``kind`` says which)."""
    import zarr

    from .._errors import StoreNotFoundError

    spath = os.fspath(path)
    if not _is_url(spath) and not os.path.exists(spath):
        raise StoreNotFoundError(f"no such file or store: {spath!r}")
    suffix = _suffix(spath)
    if not _is_url(spath) and os.path.isfile(spath):
        size = os.path.getsize(spath)
        if suffix == ".npy":
            a = np.load(spath, mmap_mode="r", allow_pickle=False)
            return {"kind": "npy file", "path": spath, "shape": list(a.shape),
                    "dtype": str(a.dtype), "size": int(a.nbytes), "file_size": size}
        if suffix in TEXT_SUFFIXES:
            delim, header, n_cols = _detect_text_layout(spath)
            return {"kind": "text file", "path": spath,
                    "shape": [_count_rows(spath, header), n_cols],
                    "delimiter": {None: "whitespace", ",": "comma", "\t": "tab"}[delim],
                    "header": header, "file_size": size}
        if suffix == ".npz":
            with np.load(spath, allow_pickle=False) as z:
                arrays = {k: (z[k].item() if z[k].ndim == 0 else list(z[k].shape))
                          for k in z.files}
            return {"kind": "npz file", "path": spath, "arrays": arrays, "file_size": size}
        raise CLIError(f"{spath!r} is a file dask-bid does not read; expected a Zarr store, "
                       f"or one of {', '.join(CONVERTIBLE_SUFFIXES)}")
    try:
        node = zarr.open(spath, mode="r")
    except Exception as exc:
        from .._errors import CorruptStoreError

        raise CorruptStoreError(f"cannot read Zarr metadata at {spath!r} "
                                f"({type(exc).__name__}: {exc}); is it a Zarr store?") from exc
    if isinstance(node, zarr.Array):
        info = {"kind": "zarr array", "path": spath, "shape": list(node.shape),
                "dtype": str(node.dtype), "chunks": list(node.chunks),
                "n_chunks": int(node.nchunks), "size": int(node.nbytes),
                "zarr_format": int(node.metadata.zarr_format)}
        with contextlib.suppress(Exception):
            info["stored_size"] = int(node.nbytes_stored())
        with contextlib.suppress(Exception):
            info["compressors"] = [type(c).__name__ for c in node.compressors]
        conv = node.attrs.get("dask_bid_converted_from")
        if conv:
            info["converted_from"] = conv.get("path")
        return info
    meta = node.attrs.get("dask_bid")
    if meta is None:
        return {"kind": "zarr group", "path": spath,
                "arrays": sorted(node.array_keys()), "groups": sorted(node.group_keys())}
    info = {"kind": "dask_bid result", "path": spath, "status": meta.get("status"),
            "params": meta.get("params", {}), "input": meta.get("input"),
            "input_shape": meta.get("input_shape"), "summary": meta.get("summary", {}),
            "versions": meta.get("versions")}
    if "columns" in node:
        info["columns"] = [int(c) for c in node["columns"][...]]
    if meta.get("status") != "complete" and "checkpoint" in node:
        info["checkpoints"] = sorted(node["checkpoint"].group_keys()) + sorted(
            node["checkpoint"].array_keys())
    return info


def info_lines(info) -> list[str]:
    kind = info["kind"]
    lines = [f"{info['path']}: {kind}"]
    if kind in ("zarr array", "npy file"):
        M, N = (info["shape"] + [None, None])[:2]
        lines.append(f"  shape      {' x '.join(map(str, info['shape']))}")
        lines.append(f"  dtype      {info['dtype']}")
        if "chunks" in info:
            lines.append(f"  chunks     {' x '.join(map(str, info['chunks']))} "
                         f"({info['n_chunks']} chunks)")
        size = f"  size       {human_bytes(info['size'])}"
        if "stored_size" in info:
            size += f" ({human_bytes(info['stored_size'])} stored)"
        if "file_size" in info:
            size += f" ({human_bytes(info['file_size'])} on disk)"
        lines.append(size)
        if info.get("compressors"):
            lines.append(f"  compressor {', '.join(info['compressors'])}")
        if info.get("converted_from"):
            lines.append(f"  converted  from {info['converted_from']}")
        if len(info["shape"]) != 2:
            lines.append("  note       not a matrix: dask-bid needs a 2-D array")
    elif kind == "text file":
        lines += [f"  shape      {info['shape'][0]} x {info['shape'][1]}",
                  f"  delimiter  {info['delimiter']}" + (", one header line" if info["header"]
                                                        else ""),
                  f"  size       {human_bytes(info['file_size'])} on disk",
                  "  note       `dask-bid fit` converts it to a Zarr store next to --out"]
    elif kind == "npz file":
        for k, v in info["arrays"].items():
            lines.append(f"  {k:<12} " + (" x ".join(map(str, v)) + " array"
                                           if isinstance(v, list) else str(v)))
    elif kind == "zarr group":
        lines.append(f"  arrays     {', '.join(info['arrays']) or '(none)'}")
        if info["groups"]:
            lines.append(f"  groups     {', '.join(info['groups'])}")
        if info["arrays"]:
            lines.append(f"  note       a group, not an array: pass e.g. "
                         f"{info['path'].rstrip('/')}/{info['arrays'][0]}")
    else:
        p, s = info["params"], info["summary"]
        status = info["status"]
        lines.append(f"  status     {status}" + ("" if status == "complete" else
                                                  "  (continue it: dask-bid fit ... --resume)"))
        shape = info.get("input_shape") or [s.get("n_samples"), s.get("n_features")]
        src = info.get("input") or {}
        lines.append(f"  input      {shape[0]} x {shape[1]}"
                     + (f" from {src.get('path')}" if src.get("path") else ""))
        lines.append(f"  model      {str(p.get('model', '?')).upper()} "
                     f"({'aggressive' if p.get('aggressive', True) else 'plain'}), "
                     f"K = {p.get('n_components')}, bounds {p.get('bounds')}")
        lines.append(f"  sampling   {p.get('n_chains')} chain(s) x {p.get('n_iter')} iterations, "
                     f"burn-in {p.get('burn_in')}, thin {p.get('thin')}, init {p.get('init')}")
        if "columns" in info:
            lines.append(f"  columns    {_short_list(info['columns'])}")
        if s:
            lines.append(f"  MSE        {_g(s.get('mse'))}"
                         + (f"  (observed: {_g(s.get('mse_observed'))})"
                            if s.get("mse_observed") is not None else ""))
            lines.append(f"  sigma2     {_g(s.get('sigma2'))}")
            lines.append(f"  max|W|     {_g(s.get('max_abs_w'))}")
            lines.append(f"  draws      {s.get('n_draws_point')} retained draws with the "
                         "reported basis")
            lines.append(f"  time       {s.get('elapsed', 0.0):.1f} s sampling")
        other = {k: v for k, v in p.items() if k not in (
            "model", "aggressive", "n_components", "bounds", "n_chains", "n_iter", "burn_in",
            "thin", "init", "versions", "entropy")}
        if other:
            lines.append("  params     " + ", ".join(f"{k}={v}" for k, v in sorted(other.items())))
    return lines


def cmd_info(args):
    info = describe_path(args.path)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    lines = info_lines(info)
    if args.diagnostics and info["kind"] == "dask_bid result" and info["status"] == "complete":
        from ..engine import read_result
        from .diagnostics import summary

        table = summary(read_result(args.path), var_names=["sigma2", "mse"])
        lines.append("  diagnostics (split R-hat, bulk/tail ESS over the retained draws):")
        for name, row in table.iterrows():
            lines.append(f"    {name:<7} r_hat {row['r_hat']:.3f}  ess_bulk {row['ess_bulk']:.0f}"
                         f"  ess_tail {row['ess_tail']:.0f}")
    _print_lines(lines)
    return 0


def cmd_plot(args):
    from ..engine import read_result
    from . import plots

    kinds = _parse_plot_kinds(args.kind, allow_error_k=True)
    results = [read_result(p) for p in args.results]
    written = []
    single = [k for k in kinds if k != "error-k"]
    for path, res in zip(args.results, results, strict=True):
        stem = _plot_stem(args.out if args.out and len(results) == 1 else path)
        written += write_plots(res, single, stem)
    if "error-k" in kinds:
        ax = plots.plot_error_vs_k(results)
        target = (args.out or _plot_stem(args.results[0])) + ".error-k.png" \
            if not (args.out or "").endswith(".png") else args.out
        ax.figure.savefig(target, dpi=110, bbox_inches="tight")
        plots.close(ax.figure)
        written.append(target)
    _print_lines([f"plot         {w}" for w in written], args.quiet)
    return 0


def cmd_demo(args):
    from .demo import run_demo

    run_demo(out=args.out, quiet=args.quiet, n_iter=args.n_iter, n_workers=args.workers,
             scheduler=args.scheduler)
    return 0


# ----------------------------------------------------------------------------- parser

class _Parser(argparse.ArgumentParser):
    """Errors on one line (plus the usual exit status 2)."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {' '.join(str(message).split())} "
                     f"(see `{self.prog} --help`)\n")


def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def _nonneg_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    parser = _Parser(prog=PROG, description="Bayesian interpolative decomposition (GBT/GBTN "
                     "Gibbs samplers) of matrices larger than memory, on Dask and Zarr.")
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    demo = sub.add_parser("demo", help="run the built-in example end to end",
                          description="Write a synthetic low-rank matrix with planted "
                          "columns to a Zarr store, start a local Dask cluster, fit, print a "
                          "summary and write a plot next to the result.")
    demo.add_argument("--out", default="dask-bid-demo", metavar="DIR",
                      help="folder for the input store, the result and the plot "
                      "(default: ./dask-bid-demo)")
    demo.add_argument("--n-iter", type=_positive_int, default=None, metavar="N",
                      help="iterations per chain (default: the demo's setting)")
    demo.add_argument("--workers", type=_positive_int, default=2, metavar="N",
                      help="workers of the local cluster (default: 2)")
    demo.add_argument("--scheduler", default=None, metavar="ADDRESS",
                      help="use this Dask scheduler instead of starting a local cluster")
    demo.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    demo.set_defaults(func=cmd_demo)

    fit = sub.add_parser("fit", help="fit a Bayesian ID to a matrix",
                         description="Run the GBT/GBTN sampler on INPUT and write the result "
                         "to the Zarr group OUT.")
    fit.add_argument("input", metavar="INPUT", help="Zarr array path or URL; or a .npy, .csv, "
                     ".txt or .tsv file (converted to <folder of OUT>/<file name>.zarr, "
                     "e.g. data.npy.zarr)")
    fit.add_argument("--k", type=_positive_int, required=True, metavar="K",
                     help="number of columns to select")
    fit.add_argument("--out", required=True, metavar="OUT", help="output Zarr group")
    fit.add_argument("--model", choices=("gbt", "gbtn"), default=None,
                     help="GBT (default) or GBTN (hierarchical prior on W's mean/precision)")
    fit.add_argument("--plain", action="store_true",
                     help="the plain sampler (Algorithm 1) instead of the aggressive one")
    fit.add_argument("--n-iter", type=_positive_int, default=None, metavar="N",
                     help="iterations per chain (default 500)")
    fit.add_argument("--burn-in", type=_nonneg_int, default=None, metavar="N",
                     help="default 100")
    fit.add_argument("--thin", type=_positive_int, default=None, metavar="N", help="default 5")
    fit.add_argument("--n-chains", type=_positive_int, default=None, metavar="N",
                     help="default 1")
    fit.add_argument("--seed", type=_nonneg_int, default=None, metavar="S")
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
    fit.add_argument("--refine-sweeps", type=_nonneg_int, default=None, metavar="N",
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
    fit.add_argument("--checkpoint-every", type=_positive_int, default=25, metavar="N")
    fit.add_argument("--resume", action="store_true",
                     help="continue an interrupted fit stored at OUT")
    fit.add_argument("--overwrite", action="store_true", help="replace an existing OUT")
    fit.add_argument("--plot", default=None, metavar="KINDS",
                     help="write plots next to OUT: comma separated among trace, autocorr, "
                     "inclusion, or all")
    fit.add_argument("-q", "--quiet", action="store_true", help="no progress bars, no summary")
    fit.set_defaults(func=cmd_fit)

    rid = sub.add_parser("rid", help="the randomized / pivoted-QR ID baselines",
                         description="Interpolative decomposition by a randomized sketch "
                         "(Liberty et al. 2007) or by column-pivoted QR.")
    rid.add_argument("input", metavar="INPUT", help="Zarr array path or URL, .npy, .csv or .txt")
    rid.add_argument("--k", type=_positive_int, required=True, metavar="K")
    rid.add_argument("--method", choices=("randomized", "cpqr"), default="randomized")
    rid.add_argument("--oversampling", type=_nonneg_int, default=10, metavar="P")
    rid.add_argument("--power-iter", type=_nonneg_int, default=0, metavar="Q")
    rid.add_argument("--seed", type=_nonneg_int, default=None, metavar="S")
    rid.add_argument("--out", default=None, metavar="OUT.npz",
                     help="write columns and W to this .npz file")
    rid.add_argument("--overwrite", action="store_true")
    rid.add_argument("-q", "--quiet", action="store_true")
    rid.set_defaults(func=cmd_rid)

    info = sub.add_parser("info", help="describe an input matrix or a result store")
    info.add_argument("path", metavar="PATH")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.add_argument("--diagnostics", action="store_true",
                      help="for a result: split R-hat and ESS of sigma2 and MSE (needs arviz)")
    info.set_defaults(func=cmd_info)

    plot = sub.add_parser("plot", help="plot one or more result stores")
    plot.add_argument("results", nargs="+", metavar="RESULT")
    plot.add_argument("--kind", default="all", metavar="KINDS",
                      help="comma separated among trace, autocorr, inclusion, error-k "
                      "(reconstruction error against K over all RESULTs), or all")
    plot.add_argument("--out", default=None, metavar="STEM",
                      help="file name stem (default: next to each result)")
    plot.add_argument("-q", "--quiet", action="store_true")
    plot.set_defaults(func=cmd_plot)
    return parser


# ----------------------------------------------------------------------------- entry point

def _one_line(exc) -> str:
    msg = " ".join(str(exc).split())
    if isinstance(exc, FileNotFoundError) and exc.filename and str(exc.filename) not in msg:
        msg = f"{msg}: {exc.filename}"
    return msg or type(exc).__name__


@contextlib.contextmanager
def _quiet_libraries():
    """Keep Dask's log lines and warnings (dashboard port, ...) off the terminal."""
    names = ("distributed", "distributed.nanny", "distributed.scheduler", "distributed.worker",
             "distributed.core", "distributed.http.proxy", "tornado")
    old = {n: logging.getLogger(n).level for n in names}
    for n in names:
        logging.getLogger(n).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module="distributed")
        warnings.filterwarnings("ignore", category=FutureWarning, module="arviz")
        try:
            yield
        finally:
            for n, lvl in old.items():
                logging.getLogger(n).setLevel(lvl)


def main(argv=None) -> int:
    """Run the ``dask-bid`` command line; returns the exit status."""
    from .._errors import DaskBidError

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return int(exc.code or 0)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        with _quiet_libraries():
            return int(args.func(args) or 0)
    except KeyboardInterrupt:
        hint = " (continue with --resume)" if getattr(args, "command", "") == "fit" else ""
        print(f"{PROG}: interrupted{hint}", file=sys.stderr)
        return 130
    except (DaskBidError, CLIError, OSError, ValueError, ImportError) as exc:
        if os.environ.get("DASK_BID_DEBUG"):
            raise
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
