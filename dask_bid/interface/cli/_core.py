"""What every command shares: the parser class, argument types, error lines, formatting.

Only the standard library is imported here, so that ``dask-bid --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import sys
import warnings

PROG = "dask-bid"


class CLIError(Exception):
    """A user error detected by the command line itself."""


class Parser(argparse.ArgumentParser):
    """Errors on one line (plus the usual exit status 2)."""

    def error(self, message):
        self.exit(2, f"{PROG}: error: {' '.join(str(message).split())} "
                     f"(see `{self.prog} --help`)\n")


def positive_int(text):
    """argparse type: an integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def nonneg_int(text):
    """argparse type: an integer >= 0."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {v}")
    return v


def user_cache_dir(*parts) -> str:
    """``~/.cache/dask_bid/<parts>`` (``$XDG_CACHE_HOME`` if set; ``%LOCALAPPDATA%`` on
    Windows), where the command writes what is not the user's own output."""
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~\\AppData\\Local")
    else:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.path.join(base, "dask_bid", *parts)


def is_url(path) -> bool:
    return "://" in str(path)


def file_suffix(path) -> str:
    return os.path.splitext(str(path).rstrip("/"))[1].lower()


def one_line(exc) -> str:
    """An exception's message on one line."""
    msg = " ".join(str(exc).split())
    if isinstance(exc, FileNotFoundError) and exc.filename and str(exc.filename) not in msg:
        msg = f"{msg}: {exc.filename}"
    return msg or type(exc).__name__


#: options read by the collapsed sampler only (``chain_config`` zeroes them otherwise):
#: ``fit`` refuses them with another sampler, ``info`` does not show them there
COLLAPSED_ONLY = ("n_tries", "n_pivot", "n_redraw", "tempered_warmup", "n_anneal",
                  "anneal_every", "acceptance", "warmup_temperature")

#: Python parameter -> command-line flag, for messages written for the Python API
_FLAGS = {"n_components": "--k", "n_iter": "--n-iter", "burn_in": "--burn-in",
          "thin": "--thin", "n_chains": "--n-chains", "random_state": "--seed",
          "point_estimate": "--point-estimate", "w_estimate": "--w-estimate",
          "refine_sweeps": "--refine-sweeps", "checkpoint_every": "--checkpoint-every",
          "bounds": "--bounds", "init": "--init", "trace_columns": "--trace-columns",
          "model": "--model", "out": "--out",
          "overwrite": "--overwrite", "resume": "--resume", "client": "--scheduler",
          "allow_missing_chunks": "--allow-missing-chunks", "missing": "--missing",
          "sampler": "--sampler", "n_tries": "--n-tries", "acceptance": "--acceptance",
          "n_pivot": "--n-pivot", "n_redraw": "--n-redraw",
          "tempered_warmup": "--tempered-warmup", "n_anneal": "--n-anneal",
          "anneal_every": "--anneal-every", "candidate_pool": "--candidate-pool",
          "pool_every": "--pool-every", "feature_names": "--column-names",
          "sample_names": "--row-names", "keep_final_state": "--no-final-state",
          "alpha_sigma": "--alpha-sigma", "beta_sigma": "--beta-sigma"}
#: names that are also English words: translated only as ``name=...`` or ``name (``
_WORDS = {"thin", "bounds", "init", "model", "out", "overwrite", "resume", "client",
          "missing", "sampler", "acceptance"}
#: one of those words leading a message about itself ("init as an array must ...")
_LEAD = re.compile(r"^(" + "|".join(sorted(_WORDS)) + r")(?= (?:must|as|is|has) )")
#: one of those words naming a parameter in a resume's differences
_STORED = re.compile(r"\b(" + "|".join(sorted(_WORDS)) + r")(?=: stored )")
#: name=value, the value quoted (any text: client='http://...' lost its space) or a word
_ASSIGN = re.compile(r"\b(" + "|".join(_FLAGS) + r")=(?:'([^'\s]*)'|([\w+-]*(?:\.\d+)?))")
_BARE = re.compile(r"\b(" + "|".join(k for k in _FLAGS if k not in _WORDS) + r")\b")
#: code the user may copy (backticks, a call) keeps its Python spelling
_CODE = re.compile(r"(`[^`]*`|\b[\w.]+\([^()]*\))")


def _flag_words(text: str) -> str:
    def assign(m):
        flag = _FLAGS[m.group(1)]
        value = m.group(2) if m.group(2) is not None else m.group(3)
        if m.group(1) == "client" and value == "None":
            return "--scheduler local"
        if m.group(1) == "keep_final_state":
            return "--no-final-state" if value == "False" else "without --no-final-state"
        if value in ("True", ""):
            return flag
        if value in ("False", "None"):
            return f"no {flag}"
        return f"{flag} {value}"

    text = re.sub(r"\(?resume=False, overwrite=True\)?", "--overwrite without --resume", text)
    # the bounds as the flag takes them
    text = text.replace("e.g. (-1, 1)", "e.g. --bounds -1 1").replace(
        "the weak-ID (-2, 2)", "the weak-ID --bounds -2 2")
    # a message naming both spellings of the triplet options keeps the flags only
    text = text.replace("(sep=, columns=; --sep, --columns)", "(--sep, --columns)")
    text = re.sub(r"index_base=([01]) \(--index-base \1\)", r"--index-base \1", text)
    # spellings of the Python API that have a command-line word
    text = text.replace("or None (every column)", "or none (every column)")
    text = re.sub(r"\b(unknown )?init (columns|')", r"\1--init \2", text)
    text = re.sub(r"\binit as an array must hold K=(\d+) integer column indices",
                  r"--init must hold \1 column indices (--k \1)", text)
    # a warm-up length the command line leaves out (its flag takes no 'auto')
    text = text.replace(" when 'auto')", " when not given)")
    text = text.replace("(a DataFrame, feature_names=, a text file's header; command line: "
                        "--column-names)", "(--column-names FILE, or a text file's header)")
    # where the Python keyword goes: the command line has the flag itself
    text = text.replace("; a keyword of BayesianID.fit and bayesian_id, a parameter of "
                        "RandomizedID)", ")")
    # the command line has no storage_options: credentials come from the environment
    text = text.replace("pass them in storage_options ({'key': ..., 'secret': ..., "
                        "'client_kwargs': {'endpoint_url': ...}} for s3://) or set ", "set ")
    # the command line replaces a failed fit of its own without --overwrite
    text = text.replace("Fix the cause and fit again (overwrite=True)",
                        "Fix the cause and run the same dask-bid fit again (it replaces a "
                        "failed fit)")
    text = _LEAD.sub(lambda m: _FLAGS[m.group(1)], text)
    # a resume's list of differences ("sampler: stored 'collapsed', now 'aggressive'")
    text = _STORED.sub(lambda m: _FLAGS[m.group(1)], text)
    text = _ASSIGN.sub(assign, text)
    return _BARE.sub(lambda m: _FLAGS[m.group(1)], text)


def cli_words(message: str) -> str:
    """A library message with its Python parameter names spelled as command-line flags
    (``random_state=`` -> ``--seed``, ``overwrite=True`` -> ``--overwrite``, ...)."""
    parts = _CODE.split(message)
    return "".join(p if i % 2 else _flag_words(p) for i, p in enumerate(parts))


@contextlib.contextmanager
def warning_lines(quiet=False, file=None):
    """Show every warning as one line ``dask-bid: warning: ...`` on stderr (none with
    ``--quiet``); library chatter (Dask, ArviZ) is dropped by :func:`quiet_libraries`."""
    def show(message, category, filename, lineno, file_=None, line=None):
        if not quiet:
            text = f"{PROG}: warning: {cli_words(one_line(message))}"
            if file is not None:
                print(text, file=file)
                return
            # through tqdm, which lifts an open progress bar off the line first
            from tqdm import tqdm

            tqdm.write(text, file=sys.stderr)

    # the engine's log (dask_bid.engine: a lost worker replayed, a rescaled matrix, a
    # cluster without workers) the same way: Python's last-resort handler printed its
    # records raw, without the prefix and under --quiet too
    class _Lines(logging.Handler):
        def emit(self, record):
            if not quiet:
                show(record.getMessage(), None, None, None)

    logger = logging.getLogger("dask_bid")
    handler = _Lines(logging.WARNING)
    old_propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    old = warnings.showwarning
    warnings.showwarning = show
    try:
        yield
    finally:
        warnings.showwarning = old
        logger.removeHandler(handler)
        logger.propagate = old_propagate


def say(*lines, quiet=False):
    """Phase lines of a command (what it chose, what it is doing) on stderr, beside the
    progress bars; the results go to stdout."""
    if not quiet:
        for ln in lines:
            print(ln, file=sys.stderr, flush=True)


@contextlib.contextmanager
def quiet_libraries():
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


# ----------------------------------------------------------------------------- formatting

def human_bytes(n) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def short_list(values, limit=12) -> str:
    values = [int(v) for v in values]
    if len(values) <= limit:
        return "[" + ", ".join(map(str, values)) + "]"
    head = ", ".join(map(str, values[:limit]))
    return f"[{head}, ... ({len(values)} in all)]"


def sampler_label(params) -> str:
    """The sampler of stored parameters (:func:`dask_bid.engine.result.stored_sampler`)."""
    from ...engine.result import stored_sampler

    return stored_sampler(params)


def fmt_g(x) -> str:
    """A number in 6 significant digits; "n/a" for None, anything else as stored."""
    if x is None:
        return "n/a"
    try:
        return f"{float(x):.6g}"
    except (TypeError, ValueError):
        return str(x)


def print_lines(lines, quiet=False):
    if not quiet:
        for ln in lines:
            print(ln)
