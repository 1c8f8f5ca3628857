"""``dask-bid fit``: a Bayesian ID of a matrix, written to a Zarr group."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import warnings

import numpy as np

from ._core import (
    COLLAPSED_ONLY,
    PROG,
    CLIError,
    cli_words,
    file_suffix,
    is_url,
    nonneg_int,
    positive_int,
    print_lines,
    say,
)
from .convert import (
    CONVERTIBLE_SUFFIXES,
    convert_to_zarr,
    converted_fill_count,
    converted_from,
    converted_path,
    input_column_names,
    input_shape,
    source_changed,
    warn_subnormal,
)
from .plotting import (
    check_png_replaceable,
    parse_plot_kinds,
    plot_paths,
    plot_stem,
    write_plots,
)
from .progress import ChainProgress, InterruptLatch
from .reading import (
    FILL_CHOICES,
    MISSING_CHOICES,
    add_names_option,
    add_row_names_option,
    add_text_options,
    detect_text_layout,
    fill_treatment,
    labels_line,
    read_names_file,
    text_options,
)
from .report import result_lines
from .sparse import add_sparse_options, check_sparse_options, sparse_input, sparse_kind

#: CLI option -> sampler parameter, for the options left to the library's default when
#: not given
_SAMPLER_OPTIONS = {"model": "model", "sampler": "sampler", "n_tries": "n_tries",
                    "acceptance": "acceptance", "n_anneal": "n_anneal",
                    "n_pivot": "n_pivot", "n_redraw": "n_redraw",
                    "tempered_warmup": "tempered_warmup",
                    "anneal_every": "anneal_every", "n_iter": "n_iter", "burn_in": "burn_in",
                    "thin": "thin", "n_chains": "n_chains", "seed": "random_state",
                    "point_estimate": "point_estimate", "w_estimate": "w_estimate",
                    "refine_sweeps": "refine_sweeps", "missing": "missing",
                    "candidate_pool": "candidate_pool", "pool_every": "pool_every",
                    "alpha_sigma": "alpha_sigma", "beta_sigma": "beta_sigma"}


def _no_empty_entry(flag, value):
    """A list with an empty entry (``3,,4``) is a typo, most likely of a missing column:
    refused, rather than read as the entries that are there."""
    if any(not x.strip() for x in value.split(",")):
        raise CLIError(f"{flag} {value!r} has an empty entry: separate the entries with "
                       "single commas, nothing before the first or after the last.")


def params_from_args(args) -> dict:
    """The sampler's keyword arguments from the command line: the one place where the
    options of ``fit`` become parameters of :func:`dask_bid.bayesian_id`."""
    from ..functional import PAPER_SETTINGS

    params = dict(PAPER_SETTINGS) if args.paper else {}
    for opt, name in _SAMPLER_OPTIONS.items():
        v = getattr(args, opt)
        if v is not None:
            params[name] = v
    if args.plain:
        if args.sampler not in (None, "plain"):
            raise CLIError(f"--plain and --sampler {args.sampler} disagree: pass one of them "
                           "(--plain is --sampler plain).")
        params["sampler"] = "plain"
    if isinstance(params.get("n_tries"), str) and params["n_tries"] != "all":
        try:
            params["n_tries"] = int(params["n_tries"])
        except ValueError as exc:
            raise CLIError(f"--n-tries {params['n_tries']!r}: expected a positive integer or "
                           "all.") from exc
    redraw = params.get("n_redraw")
    if isinstance(redraw, str) and redraw.lower() != "auto":
        try:
            params["n_redraw"] = int(redraw)
        except ValueError as exc:
            raise CLIError(f"--n-redraw {redraw!r}: expected an integer >= 0 or auto.") \
                from exc
    pool = params.get("candidate_pool")
    if isinstance(pool, str):
        if pool.lower() == "none":
            params["candidate_pool"] = None
        elif pool.lower() != "auto":
            try:
                params["candidate_pool"] = int(pool)
            except ValueError as exc:
                raise CLIError(f"--candidate-pool {pool!r}: expected a positive integer, auto "
                               "or none.") from exc
    if args.bounds is not None:
        params["bounds"] = tuple(args.bounds)
    if args.init is not None:
        if "," in args.init or args.init.strip().isdigit():
            _no_empty_entry("--init", args.init)
            try:
                params["init"] = np.array([int(x) for x in args.init.split(",") if x.strip()])
            except ValueError as exc:
                raise CLIError(f"--init {args.init!r}: expected auto, random, sketch, cpqr or a "
                               "comma separated list of K column indices.") from exc
        else:
            params["init"] = args.init
    if args.trace_columns is not None:
        # an index, or a column's name (a header's, --column-names'): names are resolved
        # once INPUT's names are known (run)
        # "-1" is an index out of range (said so), not a column's name
        _no_empty_entry("--trace-columns", args.trace_columns)
        params["trace_columns"] = [int(x) if x.strip().lstrip("-").isdigit() else x.strip()
                                   for x in args.trace_columns.split(",") if x.strip()]
    sampler = str(params.get("sampler", "collapsed")).lower()
    unused = [flag for opt, flag in _COLLAPSED_ONLY if getattr(args, opt, None) is not None]
    if sampler != "collapsed" and unused:
        # they would be ignored without a word: the user meant another chain
        raise CLIError(f"{', '.join(unused)} appl{'ies' if len(unused) == 1 else 'y'} to the "
                       f"collapsed sampler, and this fit runs the {sampler} one"
                       f"{' (--paper)' if args.paper and not args.sampler else ''}: drop "
                       f"{'it' if len(unused) == 1 else 'them'}, or pass --sampler collapsed.")
    return params


#: options read by the collapsed sampler only (``chain_config`` zeroes them otherwise)
_COLLAPSED_ONLY = tuple((name, "--" + name.replace("_", "-")) for name in COLLAPSED_ONLY)


def _full_params(params):
    from ..functional import DEFAULTS

    return {**DEFAULTS, **params}


def _failed_fit_at(out) -> tuple[str, int] | None:
    """(the reason stored, the most iterations a chain's checkpoint saved) of a failed fit
    of ours at ``out``; None if it is not one."""
    if is_url(out) or not os.path.isdir(out):
        return None
    try:
        import zarr

        g = zarr.open_group(out, mode="r")
        meta = g.attrs.get("dask_bid")
    except Exception:
        return None
    if isinstance(meta, dict) and meta.get("status") == "failed":
        from ...engine.checkpoint import saved_iterations

        try:
            saved = max(saved_iterations(g).values(), default=0)
        except Exception:  # an unreadable checkpoint/: nothing to continue from
            saved = 0
        return str(meta.get("reason") or meta.get("error") or "unknown reason"), saved
    return None


def failure_hint(args, argv) -> str:
    """What the error line of a ``fit`` that failed says beyond the error: where its
    checkpoints are and the command that continues it ("" when nothing was saved)."""
    out = getattr(args, "out", None)
    if getattr(args, "command", "") != "fit" or not out:
        return ""
    failed = _failed_fit_at(out)
    if failed is None or not failed[1]:
        return ""
    return (f"; the fit at {out} saved iteration {failed[1]}: fix the cause, then continue "
            f"it with `{continue_command(argv)}`")


def _check_out_free(out, args):
    """Fail before converting anything when OUT may not be written: it exists and neither
    flag allows it, or (even with --overwrite) it is not a dask_bid result or an empty
    directory, or the input file / its converted store lies inside it (never deleted)."""
    from ...engine.zarr_io import check_output

    src = args.input
    if (not is_url(src) and os.path.isdir(src) and not any(
            os.path.exists(os.path.join(src, m)) for m in ("zarr.json", ".zarray", ".zgroup"))):
        # a folder that is no store: said as such, not as "--out lies inside the input"
        from ...engine.inputs import no_store_in_folder

        raise no_store_in_folder(src)
    inputs = [args.input]
    if not is_url(args.input) and file_suffix(args.input) in CONVERTIBLE_SUFFIXES:
        dst = converted_path(args.input, out)
        if not is_url(out) and os.path.abspath(out) == os.path.abspath(dst):
            stem = os.path.splitext(os.path.basename(args.input))[0]
            raise CLIError(
                f"--out {out!r} is where {args.input!r} is converted to (the conversion goes "
                "to <folder of OUT>/<file name>.zarr): choose another --out, e.g. "
                f"{os.path.join(os.path.dirname(out), stem + '-fit.zarr')!r}.")
        inputs.append(dst)
    check_output(out, inputs=inputs, overwrite=args.overwrite, resume=args.resume,
                 flags={"overwrite": "--overwrite", "resume": "--resume", "out": "--out"})


def _checked_shape(src, text=None):
    """INPUT's shape from its metadata (a text file's rows counted once), refused unless
    it is a matrix of at least 2 columns."""
    shape = input_shape(src, **(text or {}))
    if len(shape) != 2:
        from ..._errors import InputShapeError

        raise InputShapeError(f"{src!r} holds an array of shape {shape}; a matrix (2-D) is "
                              "needed.")
    if shape[1] < 2:
        from ..._errors import InputShapeError

        raise InputShapeError(f"{src!r} has {shape[1]} column; dask-bid needs a matrix with "
                              "at least 2 columns.")
    return shape


def _refuse_k_above_rows(k, n_rows):
    """K > M, from the metadata (a text file's rows counted, a triplet file's --shape):
    said before the conversion and the kernels, as the library says it before any
    output (M = 0 is refused as an empty matrix)."""
    if isinstance(k, int) and 0 < n_rows < k:
        raise CLIError(f"--k {k} exceeds the number of rows M={n_rows}: more than M "
                       f"columns are always linearly dependent; choose --k <= {n_rows}.")


#: the signals that stop a fit after its current iteration, saved (a second one: at once)
_STOP_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None),
                                  getattr(signal, "SIGTERM", None)) if s is not None)


def _stored_settings(stored, out, params, args):
    """--resume without --n-iter continues to the stored fit's own n_iter (a finished
    fit is then only loaded): the default 1000 ran a finished 300-iteration fit on to
    1000 and replaced it, as a seed left out takes the stored one; --burn-in, --thin and
    --n-chains likewise. Without --missing, a fit stored with --missing mask resumes with
    it (it was refused as "stored 'mask', now 'zero'", a zero never typed), without
    --init one started from given columns resumes from them, and without --trace-columns
    the stored traced columns are kept. ``stored``: the stored fit's attributes
    (``engine.fit.stored_fit``; None: nothing stored)."""
    from ..functional import DEFAULTS

    stored = (stored or {}).get("params", {})
    taken = []
    # the chain's length with it: a left-out --burn-in (default 200) beside a stored
    # --n-iter 200 was refused as "--burn-in (200) must be smaller than --n-iter (200)";
    # and the chains (a left-out --n-chains 1 was refused: "chains are never dropped")
    for name in ("n_iter", "burn_in", "thin", "n_chains"):
        v = stored.get(name)
        if (getattr(args, name) is None and isinstance(v, int) and v >= 0
                and v != params.get(name, DEFAULTS[name])):
            params[name] = v
            taken.append(f"--{name.replace('_', '-')} {v}")
    if taken:
        say(f"resume       {', '.join(taken)}: the stored fit's (not given; a larger --n-iter "
            "continues a finished fit)", quiet=args.quiet)
    if args.missing is None and stored.get("missing") == "mask":
        if getattr(args, "fill_missing", None):
            # (it said "--missing mask and --fill-missing zero disagree", of a --missing
            # mask never typed: --resume had taken it from the stored fit)
            raise CLIError(f"--resume, but the fit at {out!r} was fitted with --missing mask "
                           "(NaN left out), and --fill-missing zero would make every NaN a 0 "
                           "that counts: drop --fill-missing, or start afresh with --overwrite "
                           "instead of --resume.")
        params["missing"] = "mask"
    if args.trace_columns is None:
        # the traced columns it was started with: a Python fit's n_trace_columns=0 (or
        # other) has no flag, and resuming it was refused as "stored [], now [0, 1, ...]"
        if isinstance(stored.get("trace_columns"), list):
            params["trace_columns"] = stored["trace_columns"]
        if isinstance(stored.get("n_trace_columns"), int):
            params["n_trace_columns"] = stored["n_trace_columns"]
    if args.init is None and isinstance(stored.get("init"), list):
        # the columns it started from (refused as "stored [0, 1, 2], now 'auto'")
        params["init"] = [int(j) for j in stored["init"]]


def _refuse_another_input(stored, out, given, dst):
    """--resume with a file whose conversion would be another store than the one the
    stored fit read: refused before converting it (the conversion was written, then the
    fit's checksum refused the resume, leaving it behind)."""
    src = (stored or {}).get("input") or {}
    path = src.get("path")
    if (src.get("kind") != "zarr" or not isinstance(path, str) or is_url(path)
            or os.path.abspath(path) == os.path.abspath(dst)):
        return
    if not os.path.exists(path) or converted_from(path) == os.path.abspath(given):
        # a result moved or copied elsewhere (its conversion now goes beside it), or the
        # store it read is gone: this very file is converted there and the fit's checksum
        # decides (a copy of the input resumes, engine.md)
        return
    raise CLIError(f"--resume, but the fit at {out!r} was fitted on {path!r}, not on "
                   f"{given!r} (which converts to {dst!r}), and a fit resumes only on the "
                   "matrix it started on: pass that input, or fit this one from the start "
                   "(--overwrite without --resume).")


def _validate_early(k, params, n_cols, resume_at=None):
    """The parameters against INPUT's column count (None before a triplet file is
    converted: its shape is not known yet, and nothing checked then depends on it); with
    ``resume_at``, the output a resume continues: its stored parameters too. Before any
    work."""
    from .._params import validate_params
    from ..functional import DEFAULTS

    p = validate_params({**DEFAULTS, **params, "n_components": k}, n_cols=n_cols)
    if resume_at is not None:
        from ...engine.fit import check_resume

        check_resume(resume_at, p)  # a resume the stored fit refuses: before any work


def _n_observed(store) -> int:
    from ...engine.sparse_store import open_sparse

    return open_sparse(store).nnz


def _missing_of_a_converted_store(args, params, src):
    """A store converted with --missing mask (NaN kept as missing entries, recorded in
    it) is fitted with --missing mask when --missing is not given, and refused at once
    with --missing zero: before, the fit failed on its first NaN after sampling began."""
    n = converted_fill_count(src, kept=True)
    if not n:
        return
    if args.missing is None:
        params["missing"] = "mask"
        say(f"missing      {src} keeps {n} NaN as missing entries (it was converted with "
            "--missing mask): --missing mask", quiet=args.quiet)
    elif args.missing == "zero":
        raise CLIError(f"{src!r} keeps {n} NaN as missing entries (converted with --missing "
                       "mask): drop --missing zero to fit its observed entries, or convert "
                       "the file again with --fill-missing zero for the paper's zero fill.")


def _is_infinite_at(src, message) -> bool:
    """Whether the entry a refusal names ("at row R, column C") of the Zarr input is
    infinite (one element read); False when it cannot tell."""
    import re

    m = re.search(r"at row (\d+), column (\d+)", message)
    if m is None:
        return False
    try:
        import zarr

        v = zarr.open_array(src, mode="r")[int(m.group(1)), int(m.group(2))]
        return bool(np.isinf(v))
    except Exception:
        return False


def _nan_message(exc, src, masked=False) -> str:
    """The engine's NaN refusal, in command-line terms (it speaks of missing='mask')."""
    if masked:  # only infinity is refused then: the engine's words fit as they are
        return cli_words(str(exc))
    where = str(exc).split(". ")[0].rstrip(".")
    if _is_infinite_at(src, str(exc)):
        # "NaN or infinity" of an infinity sent it to --missing mask, then refused there
        return (f"{where.replace('NaN or infinity', 'infinity', 1)}: replace the infinities "
                f"of {src!r} (--missing mask treats only NaN as missing) and run again.")
    return (f"{where}. Pass --missing mask to fit the observed entries only (NaN marks a "
            f"missing entry), or fill the NaN of {src!r} (0 is the paper's fill; a .npy or "
            "text input is filled on conversion with --fill-missing zero) and run again.")


def run(args):
    from ..functional import bayesian_id
    from .runtime import choose_scheduler, compile_kernels, kernels_compiled, local_cluster

    out = args.out
    if not out.strip():  # '' was taken for the current folder (it "held the input")
        raise CLIError("--out is empty: name the folder the fit writes, e.g. --out fit.zarr.")
    overwrite = args.overwrite
    failed = None if (args.overwrite or args.resume) else _failed_fit_at(out)
    if failed is not None and failed[1]:
        # its checkpoints hold the iterations run before the failure (a full disk, a lost
        # cluster): a retry of the same command replaced them without a word
        raise CLIError(f"--out {out!r} holds a fit that failed ({failed[0]}) after saving "
                       f"iteration {failed[1]}: add --resume to continue it from there, or "
                       "--overwrite to start afresh.")
    if failed is not None:
        # a failed fit of ours that saved nothing holds nothing worth keeping: the retry
        # replaces it
        failed = failed[0]
        overwrite = True
    else:
        _check_out_free(out, args)
    if args.resume and not is_url(out) and not os.path.exists(out):
        # a misspelt --out would otherwise start over without a word
        say(f"resume       nothing at {out} yet: a new fit (--resume continues one stored "
            "there)", quiet=args.quiet)
    if args.scheduler is not None and args.scheduler.lower() != "local":
        from ...engine.cluster import check_client_arg

        check_client_arg(args.scheduler)  # 'processes' and the like: before any work
    kinds = parse_plot_kinds(args.plot) if args.plot is not None else []
    check_png_replaceable(plot_paths(kinds, plot_stem(out)))  # before any work
    params = params_from_args(args)
    stored = None  # the stored fit's attributes, read once for a resume's checks
    if args.resume:
        from ...engine.fit import stored_fit

        stored = stored_fit(out)
        _stored_settings(stored, out, params, args)
    src = args.input
    check_sparse_options(args)  # triplet options without a triplet file: before any line
    kind = sparse_kind(args)
    if args.missing is None and kind is not None:
        # the absent entries of a triplet file or sparse store are unobserved: the one
        # reading of them (--missing zero is refused, cli/sparse.py)
        params["missing"] = "mask"
        say(f"missing      the absent entries of {kind} are unobserved: --missing mask",
            quiet=args.quiet)
    elif kind is None and not is_url(src) and file_suffix(src) not in CONVERTIBLE_SUFFIXES:
        _missing_of_a_converted_store(args, params, src)
    masked = params.get("missing") == "mask"
    if args.format == "triplets":  # parameters first: the conversion reads the file twice
        given = args.shape  # --shape gives M and N: K checked before the conversion
        _validate_early(args.k, params, None if given is None else given[1],
                        resume_at=out if args.resume else None)
        if given is not None:
            _refuse_k_above_rows(args.k, given[0])
    if args.format == "triplets":  # before the conversion
        text_options(args, args.input, triplets=True)
    # a triplet file (converted once) or a sparse store: cli/sparse.py
    sparse_src = sparse_input(args, out, masked, args.quiet)
    if sparse_src is not None:
        src = sparse_src
    convertible = (sparse_src is None and not is_url(src)
                   and file_suffix(src) in CONVERTIBLE_SUFFIXES)
    if args.fill_missing and not convertible:
        # before the check against --missing mask, which a store that keeps its NaN chose
        # without the user passing it
        raise CLIError(f"--fill-missing applies to .npy and text files, which dask-bid "
                       f"converts; the Zarr array {src!r} is read as is: pass --missing mask "
                       "to fit its observed entries only, fill its NaN first, or fit the "
                       ".npy / text file it came from.")
    fill = fill_treatment(args.fill_missing, masked)
    text = text_options(args, src)
    # everything checkable from metadata is checked before converting or sampling
    shape = _checked_shape(src, text)
    names = None
    if any(isinstance(c, str) for c in params.get("trace_columns") or ()):
        from .._params import columns_by_name

        names = (read_names_file(args.column_names, shape, args.input)
                 if args.column_names else None)
        known = names if names is not None else input_column_names(src, text, shape[1])
        params["trace_columns"] = columns_by_name(params["trace_columns"], known)
    _validate_early(args.k, params, shape[1], resume_at=out if args.resume else None)
    _refuse_k_above_rows(args.k, shape[0])
    if args.column_names and names is None:
        names = read_names_file(args.column_names, shape, args.input)
    rows = (read_names_file(args.row_names, shape, args.input, axis=0)
            if args.row_names else None)
    if failed is not None:
        say(f"replacing    {out} (a failed fit: {failed})", quiet=args.quiet)
    if convertible:
        dst = converted_path(src, out)
        if args.resume and not args.overwrite:
            _refuse_another_input(stored, out, args.input, dst)
        if args.resume and not args.overwrite and source_changed(src, dst):
            # with --overwrite it is converted again, and the fit's checksum decides
            other = converted_from(dst)
            # (a recorded file that is gone was moved here, and has changed since)
            if other and other != os.path.abspath(src) and os.path.lexists(other):
                raise CLIError(
                    f"--resume, but {dst!r} now holds the conversion of another file of that "
                    f"name, {other!r} (a fit of it replaced the store with --overwrite), "
                    "and a fit resumes only on the matrix it started on: add --overwrite to "
                    f"convert {args.input!r} again (the fit then resumes if it is unchanged).")
            raise CLIError(
                f"--resume, but {args.input!r} changed (size or time) since {dst!r} was "
                f"converted from it for the fit at {out!r}, and a fit resumes only on the "
                "matrix it started on: restore the file; or, if only its time changed (a "
                "copy, a touch), add --overwrite to convert it again (the fit then resumes "
                "if the content is the same); or fit the new file from the start: "
                "--overwrite without --resume.")
        if file_suffix(src) != ".npy":
            line = labels_line(detect_text_layout(src, **text), src)
            if line:
                say(line, quiet=args.quiet)
        src = convert_to_zarr(src, dst, quiet=args.quiet, overwrite=args.overwrite,
                              fill_missing=fill, hold=True, **text)
        n_filled = converted_fill_count(src)
        if n_filled:
            say(f"filled       {n_filled} NaN entries of {args.input} by 0 (--fill-missing "
                f"zero; recorded in {src})", quiet=args.quiet)
        warn_subnormal(src, args.input, masked)
        n_kept = converted_fill_count(src, kept=True)
        if n_kept:
            say(f"missing      {n_kept} NaN entries of {args.input} left out of the "
                f"likelihood (--missing mask; kept in {src})", quiet=args.quiet)
    elif sparse_src is None and not is_url(src):
        # a store converted before (`dask-bid convert`) recorded its subnormal entries:
        # said as for the file (only a fit of the file said it)
        warn_subnormal(src, src, masked)
    # a sparse input's size is that of its observed entries (row, value: 16 bytes each)
    client, where = choose_scheduler(
        args.scheduler, shape if sparse_src is None else (_n_observed(src), 2))
    say(f"scheduler    {where}", quiet=args.quiet)
    full = _full_params(params)
    cluster = local_cluster() if client is None else contextlib.nullcontext(client)
    # the latch also covers the compilation, where numba may swallow a Ctrl-C
    # SIGTERM as a first Ctrl-C: a batch system's stop (SLURM, docker) saves the fit too
    with InterruptLatch(signals=_STOP_SIGNALS) as latch:
        if client is None or client == "synchronous":  # the kernels compile here
            say("kernels      loading (numba; compiled on the first run only) ...",
                quiet=args.quiet)
            # no iteration and no checkpoint yet: the first Ctrl-C says what it does here
            latch.message = ("dask-bid: stopping when the kernels are compiled, before the "
                             "fit starts (Ctrl-C again to stop at once)")
            dt = compile_kernels(params)
            latch.check()
            latch.message = InterruptLatch.MESSAGE
            if dt is not None:
                how = "compiled, cached" if kernels_compiled() else "loaded from the cache"
                say(f"kernels      ready in {dt:.1f} s ({how} in "
                    f"{os.environ.get('NUMBA_CACHE_DIR', 'numba cache')})", quiet=args.quiet)
        t0 = time.perf_counter()
        res = _sample(bayesian_id, src, args, params, full, cluster, out, overwrite, latch,
                      names, rows)
        if latch.hit:  # a Ctrl-C after the last iteration: nothing was left to stop
            say("interrupted  after the sampling had ended: the result below is complete",
                quiet=args.quiet)
    wall = time.perf_counter() - t0
    # a converted text file's header names the selected columns (res.feature_names)
    lines = result_lines(res, seed=True, resumed=bool(args.resume)) + [
        f"wall time    {wall:.1f} s (sampling, summary and output)",
                                 f"result       {out}"]
    more = _continue_line(res, getattr(args, "argv", None), full["n_iter"])
    if more:
        lines.append(more)
    if kinds:
        written, skipped = write_plots(res, kinds, plot_stem(out))
        lines += [f"plot         {path}" for path in written]
        for kind, why in skipped:  # the fit is done and saved: a figure it cannot have
            warnings.warn(f"--plot {kind}: not drawn: {why}", stacklevel=1)
    print_lines(lines, args.quiet)
    return 0


def _is_flag(token, flag, shortest) -> bool:
    """Whether ``token`` is ``flag`` or an abbreviation argparse accepts (from
    ``shortest`` on)."""
    return token.startswith(shortest) and flag.startswith(token)


def _dropped(token, n_iter=True) -> int:
    """How many tokens a continuation leaves out at ``token``: 2 for ``--n-iter N``, 1 for
    ``--n-iter=N`` (only when ``n_iter``: it gets a new one), ``--overwrite`` and
    ``--resume`` (argparse's abbreviations included: ``--n-i``, ``--ov``, ``--res`` are the
    shortest it accepts), else 0."""
    name, eq, _ = token.partition("=")
    if n_iter and _is_flag(name, "--n-iter", "--n-i"):
        return 1 if eq else 2
    if _is_flag(name, "--overwrite", "--ov") or _is_flag(name, "--resume", "--res"):
        return 1
    return 0


def continue_command(argv, n_iter=None) -> str:
    """The command that continues the fit typed as ``argv`` (``fit ...``): the same
    options, without --overwrite (which would start afresh), with --resume and, given
    ``n_iter``, that --n-iter (run on to it) instead of the typed one."""
    import shlex

    more = [] if n_iter is None else ["--n-iter", str(int(n_iter))]
    return shlex.join([PROG, *_kept(argv, n_iter is not None), "--resume", *more])


def _kept(argv, n_iter) -> list[str]:
    """``argv`` without what :func:`_dropped` leaves out."""
    kept, i = [], 0
    while i < len(argv):
        n = _dropped(argv[i], n_iter)
        if n:
            i += n
            continue
        kept.append(argv[i])
        i += 1
    return kept


def rerun_command(argv, n_iter) -> str:
    """The fit typed as ``argv`` again from the start with ``n_iter`` iterations,
    replacing its output (for a fit that kept no final state to continue)."""
    import shlex

    return shlex.join([PROG, *_kept(argv, True), "--n-iter", str(int(n_iter)),
                       "--overwrite"])


def _continue_line(res, argv, n_iter):
    """For an exact sampler's fit that failed the convergence check: the command that
    runs its chains on to twice the iterations (docs/cli.md, "Resume")."""
    from ...engine.summary import EXACT_SAMPLERS, judged_sampler

    if (not argv or judged_sampler(res.params) not in EXACT_SAMPLERS
            or res.convergence().converged):
        return None
    if any(_is_flag(a, "--no-final-state", "--no") for a in argv):
        # its chains cannot be continued: the same fit, twice as long, from the start
        return f"run longer   {rerun_command(list(argv), 2 * int(n_iter))}"
    return f"run longer   {continue_command(list(argv), 2 * int(n_iter))}"


#: what the first Ctrl-C says once every chain has done its last iteration
ENDED_MESSAGE = ("dask-bid: the sampling has ended; stopping once the result is written "
                 "(Ctrl-C again to stop at once)")


def chain_callback(latch, bar, n_iter, n_chains):
    """The fit's callback: the Ctrl-C latch's check, the progress bar, and, once every
    chain has done its last iteration, the latch's message for what a Ctrl-C still does
    (it said "stopping after this iteration and saving a checkpoint", then the fit wrote
    its complete result and exited 0)."""
    ended = set()

    def callback(state):
        latch.check()
        bar(state)
        if state.iteration >= n_iter:
            ended.add(id(state))
            if len(ended) == n_chains:
                latch.message = ENDED_MESSAGE

    return callback


def _sample(bayesian_id, src, args, params, full, cluster, out, overwrite, latch, names=None,
            rows=None):
    """The fit itself on ``cluster`` (a context yielding the client), with its progress
    bar; NaN found by the engine is reported in command-line words."""
    from ..._errors import NonFiniteInputError

    try:
        with cluster as client, \
                ChainProgress(full["n_chains"] * full["n_iter"], disable=args.quiet) as bar:
            callback = chain_callback(latch, bar, full["n_iter"], full["n_chains"])

            res = bayesian_id(src, args.k, **params, client=client, out=out,
                              overwrite=overwrite, resume=args.resume,
                              checkpoint_every=args.checkpoint_every, callback=callback,
                              allow_missing_chunks=args.allow_missing_chunks,
                              keep_final_state=not args.no_final_state,
                              **({} if names is None else {"feature_names": names}),
                              **({} if rows is None else {"sample_names": rows}))
    except NonFiniteInputError as exc:
        raise CLIError(_nan_message(exc, src, params.get("missing") == "mask")) from exc
    return res


def add_parser(sub):
    """Add the ``fit`` command to the subparsers ``sub``."""
    fit = sub.add_parser("fit", help="fit a Bayesian ID to a matrix",
                         description="Run the GBT/GBTN sampler on INPUT and write the result "
                         "to the Zarr group OUT.")
    fit.add_argument("input", metavar="INPUT", help="Zarr array path or URL; or a .npy, .csv, "
                     ".txt or .tsv file (converted to <folder of OUT>/<file name>.zarr, "
                     "e.g. data.npy.zarr); or a sparse store, or a triplet file with "
                     "--format triplets (docs/sparse.md)")
    fit.add_argument("--k", type=positive_int, required=True, metavar="K",
                     help="number of columns to select")
    fit.add_argument("--out", required=True, metavar="OUT",
                     help="output Zarr group (a local path or an fsspec URL)")
    fit.add_argument("--model", choices=("gbt", "gbtn"), default=None,
                     help="GBT (default) or GBTN (hierarchical prior on W's mean/precision)")
    fit.add_argument("--sampler", choices=("collapsed", "plain", "aggressive", "search"),
                     default=None,
                     help="collapsed (default): exact, pivot and collapsed swaps (the swapped "
                     "row of W integrated out); "
                     "plain: the paper's Algorithm 1, exact but rarely moves; aggressive: "
                     "the paper's Algorithm 2 (no known target distribution); search: a "
                     "least-squares optimisation, not a posterior sampler")
    fit.add_argument("--plain", action="store_true",
                     help="the plain sampler (Algorithm 1): the same as --sampler plain")
    fit.add_argument("--n-tries", default=None, metavar="N",
                     help="collapsed sampler: candidate columns per slot update, or 'all' "
                     "(default 8)")
    fit.add_argument("--acceptance", choices=("metropolis", "barker"), default=None,
                     help="collapsed sampler: Metropolised Gibbs (default) or Barker/Gibbs "
                     "choice among the candidates")
    fit.add_argument("--n-pivot", type=nonneg_int, default=None, metavar="N",
                     help="collapsed sampler: pivot swaps per iteration, the other rows of W "
                     "following the swapped column (default 8; 0: none)")
    fit.add_argument("--n-redraw", default=None, metavar="N",
                     help="collapsed sampler: redraw swaps per iteration, every column of W "
                     "drawn afresh under the new basis (default auto: 4 for --missing mask "
                     "with --k <= 16, else 0)")
    fit.add_argument("--tempered-warmup", type=nonneg_int, default=None, metavar="N",
                     help="collapsed sampler: burn-in iterations whose swaps run at a "
                     "temperature falling from 100 to 1 (default: 3/4 of the burn-in; 0: "
                     "none)")
    fit.add_argument("--n-anneal", type=nonneg_int, default=None, metavar="N",
                     help="collapsed sampler: steps of the annealed swap (default 10; 0: none)")
    fit.add_argument("--anneal-every", type=positive_int, default=None, metavar="N",
                     help="collapsed sampler: iterations between annealed swaps (default 5)")
    fit.add_argument("--candidate-pool", default=None, metavar="M",
                     help="draw the swap candidates from a pool of M columns (the basis "
                     "included), redrawn every --pool-every iterations, its rows computed in "
                     "one pass each: the same posterior, fewer passes; 'none': every column; "
                     "default 'auto': none up to 16,384 columns, 512 above")
    fit.add_argument("--pool-every", type=positive_int, default=None, metavar="N",
                     help="iterations between draws of the candidate pool (default: a third "
                     "of --n-iter; of the first --n-iter for a fit continued with --resume)")
    fit.add_argument("--n-iter", type=positive_int, default=None, metavar="N",
                     help="iterations per chain (default 1000)")
    fit.add_argument("--burn-in", type=nonneg_int, default=None, metavar="N",
                     help="iterations discarded at the start of each chain (default 200)")
    fit.add_argument("--thin", type=positive_int, default=None, metavar="N",
                     help="keep every N-th draw after the burn-in (default 1)")
    fit.add_argument("--n-chains", type=positive_int, default=None, metavar="N",
                     help="independent chains, each with its own random stream (and its own "
                     "random start with --init random) (default 1)")
    fit.add_argument("--seed", type=nonneg_int, default=None, metavar="S",
                     help="random seed: the same seed gives the same fit (default: random)")
    fit.add_argument("--init", default=None, metavar="INIT",
                     help="auto (default), random (the paper), sketch, cpqr, or K comma "
                     "separated column indices")
    fit.add_argument("--trace-columns", default=None, metavar="J1,J2,...",
                     help="columns whose W draws are kept, for their credible intervals: "
                     "indices, or names (of the header or --column-names) (default: 10 "
                     "evenly spaced ones)")
    fit.add_argument("--bounds", type=float, nargs=2, default=None, metavar=("A", "B"),
                     help="bounds of W (default: -1 1; -2 2 is the weak ID)")
    fit.add_argument("--alpha-sigma", type=float, default=None, metavar="A",
                     help="shape of sigma^2's inverse-gamma prior (default 0.1)")
    fit.add_argument("--beta-sigma", type=float, default=None, metavar="B",
                     help="scale of sigma^2's inverse-gamma prior, in INPUT's units squared "
                     "(default 1, meant for standardised data: for data in other units, "
                     "about the mean of A^2; docs/errors.md, 'Scale')")
    fit.add_argument("--point-estimate", choices=("mode", "best"), default=None,
                     help="reported basis: the visited basis with the lowest box-constrained "
                     "least-squares error (best, default) or the most visited (mode)")
    fit.add_argument("--w-estimate", choices=("mean", "map", "lstsq"), default=None,
                     help="reported W: box-constrained least squares (lstsq, default), "
                     "posterior mode (map) or mean")
    fit.add_argument("--refine-sweeps", type=nonneg_int, default=None, metavar="N",
                     help="W sweeps with the reported basis fixed after the chain "
                     "(default 20)")
    fit.add_argument("--missing", choices=MISSING_CHOICES, default=None,
                     help="mask: NaN marks a missing entry, left out of the likelihood (the "
                     "fit uses the observed entries only; a .npy or text INPUT keeps its NaN "
                     "when converted; the default for a triplet file or sparse store, whose "
                     "absent entries are unobserved, and for a store converted with --missing "
                     "mask that kept NaN); zero (default otherwise): every entry "
                     "counts, and a NaN is refused unless --fill-missing zero fills it")
    fit.add_argument("--fill-missing", choices=FILL_CHOICES, default=None,
                     help="zero: replace every NaN (missing value) of a .npy or text INPUT "
                     "by 0 when converting it, the paper's fill (recorded in the converted "
                     "store); default: a NaN is refused, naming its line (see --missing)")
    add_text_options(fit)
    fit.add_argument("--paper", action="store_true",
                     help="the paper's exact choices (dask_bid.PAPER_SETTINGS: aggressive "
                     "sampler, 500 iterations, random init, mode basis, mean W, no "
                     "refinement); other options override them")
    fit.add_argument("--scheduler", default=None, metavar="ADDRESS",
                     help="where the fit runs: a Dask scheduler address (tcp://host:8786), "
                     "'local' (a local cluster of 2 workers) or 'synchronous' (this "
                     "process); default: this process when INPUT takes at most 1 GiB (or "
                     "an eighth of the memory), else a local cluster")
    fit.add_argument("--checkpoint-every", type=positive_int, default=25, metavar="N",
                     help="iterations between checkpoints in OUT (default 25)")
    fit.add_argument("--resume", action="store_true",
                     help="continue the fit stored at OUT: an interrupted one from its last "
                     "checkpoint; a finished one to a larger --n-iter or --n-chains (else it "
                     "is only loaded). Left-out --n-iter, --burn-in, --thin, --n-chains, "
                     "--seed and given --init columns are the stored fit's")
    fit.add_argument("--overwrite", action="store_true",
                     help="replace an existing OUT (a failed fit is replaced without it)")
    fit.add_argument("--no-final-state", action="store_true",
                     help="delete OUT/checkpoint/ when the fit is complete (each chain's final "
                     "state, about 4-5 x the size of W per chain): saves the disk space, but "
                     "the fit can no longer be continued with --resume")
    fit.add_argument("--allow-missing-chunks", action="store_true",
                     help="accept a Zarr INPUT with chunk files missing (read as its fill "
                     "value); refused by default, as a lost chunk would read as zeros")
    add_names_option(fit, "kept in OUT")
    add_row_names_option(fit)
    fit.add_argument("--plot", default=None, metavar="KINDS",
                     help="write plots next to OUT (in the current folder for an OUT on "
                     "object storage): comma separated among trace, autocorr, inclusion, "
                     "or all")
    add_sparse_options(fit)
    fit.add_argument("-q", "--quiet", action="store_true", help="no progress bars, no summary")
    fit.set_defaults(func=run)
    return fit
