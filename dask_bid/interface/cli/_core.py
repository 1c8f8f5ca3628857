"""What every command shares: the parser class, argument types, error lines, formatting.

Only the standard library is imported here, so that ``dask-bid --help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
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


def fmt_g(x) -> str:
    return "n/a" if x is None else f"{x:.6g}"


def print_lines(lines, quiet=False):
    if not quiet:
        for ln in lines:
            print(ln)
