"""The ``dask-bid`` parser and entry point: one subcommand per module of this package."""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import sys

from ._core import (
    PROG,
    CLIError,
    Parser,
    cli_words,
    is_url,
    one_line,
    quiet_libraries,
    user_cache_dir,
    warning_lines,
)

__all__ = ["main", "build_parser", "log_dir"]

_DEBUG_HELP = ("on an error, print the full Python traceback (also: environment variable "
               "DASK_BID_DEBUG=1)")


def build_parser() -> Parser:
    """The ``dask-bid`` argument parser, every subcommand included."""
    from ... import __version__
    from . import convert_command, demo, fit, info, plot, rid

    parser = Parser(prog=PROG, description="Bayesian interpolative decomposition (GBT/GBTN "
                    "Gibbs samplers) of matrices larger than memory, on Dask and Zarr.")
    parser.add_argument("-V", "--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--debug", action="store_true", help=_DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for module in (demo, fit, rid, info, plot, convert_command):
        p = module.add_parser(sub)
        # also after the command (`dask-bid fit ... --debug`); SUPPRESS keeps a --debug
        # given before the command
        p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                       help=_DEBUG_HELP)
    return parser


def log_dir() -> str:
    """Where tracebacks of unexpected errors go (``~/.cache/dask_bid/logs``)."""
    return user_cache_dir("logs")


def _write_log(argv) -> str | None:
    """The current exception's traceback in a new log file; its path (None if unwritable)."""
    import time
    import traceback

    try:
        d = log_dir()
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, f"{PROG}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(f"{PROG} {' '.join(map(str, argv))}\n\n")
            traceback.print_exc(file=fh)
        return path
    except OSError:
        return None


def _stdout_gone() -> bool:
    """Whether standard output's reader has gone (and not a socket of the cluster)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if hasattr(select, "poll"):
        # the write end of a pipe whose reader closed it reports an error; asking does
        # not depend on whether stdout is buffered (PYTHONUNBUFFERED)
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        gone = any(ev & select.POLLERR for _, ev in poller.poll(0))
    else:  # Windows: a second flush of what is left fails the same way
        try:
            sys.stdout.flush()
            gone = False
        except BrokenPipeError:
            gone = True
        except (OSError, ValueError):
            gone = False
    if gone:
        # Python flushes stdout again at exit: /dev/null takes what is left
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)  # fd is the copy that stays open
    return gone


@contextlib.contextmanager
def _held_inputs():
    """The converted stores a fit holds for reading, let go when the command ends."""
    try:
        yield
    finally:
        from .convert import release_held

        release_held()


def _disk_hint(exc, args) -> str:
    """What a full disk or a file-size limit said ("[Errno 28] No space left on device"
    alone named neither where nor what to do)."""
    import errno

    if getattr(exc, "errno", None) not in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
        return ""
    where = getattr(exc, "filename", None)  # (a conversion beside OUT fails so too)
    return (f" (writing {where}: a full disk or a file-size limit" if where else
            " (a full disk or a file-size limit") + ": free space, or raise the limit)"


def _failure_hint(args, argv) -> str:
    """A failed fit's checkpoints and how to continue it (fit.failure_hint); "" if not
    known."""
    try:
        from .fit import failure_hint

        return failure_hint(args, list(argv or ()))
    except Exception:  # the hint never replaces the error it follows
        return ""


def main(argv=None) -> int:
    """Run the ``dask-bid`` command line; returns the exit status.

    0: success; 2: a user error (one line ``dask-bid: error: ...`` on stderr); 1: an
    unexpected error (one line naming the log file that holds the traceback); 130:
    interrupted. ``--debug`` prints the traceback of any error.
    """
    from ..._errors import DaskBidError

    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors
        return int(exc.code or 0)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    debug = bool(args.debug or os.environ.get("DASK_BID_DEBUG"))
    args.argv = argv  # what was typed: fit prints the command that continues it
    from ..._files import local_path

    # file:// and local:// name this machine's files: every command (and every check of
    # what it may write or delete) sees the plain path (convert deleted a folder named
    # file:///abs/e --overwrite, then failed to write it)
    for name in ("input", "out", "path"):
        value = getattr(args, name, None)
        if isinstance(value, str):
            setattr(args, name, local_path(value))
    try:
        with quiet_libraries(), warning_lines(quiet=getattr(args, "quiet", False)), \
                _held_inputs():
            code = int(args.func(args) or 0)
            sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
            return code
    except KeyboardInterrupt:
        import signal

        # a further Ctrl-C while the hint is written (a second press a few ms after the
        # first) is the same request: it printed a second traceback and no hint
        # (the handler is restored after: main() may run inside a longer process)
        try:
            old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        except ValueError:  # not the main thread: no handler to set
            old = None
        try:
            hint = ""
            out = str(getattr(args, "out", None) or "")
            if getattr(args, "command", "") == "fit" and out and not is_url(out) \
                    and not os.path.exists(out):
                # stopped before the fit wrote anything (converting, compiling, starting
                # the cluster): there is nothing to continue
                hint = " (before the fit started: nothing to continue)"
            elif getattr(args, "command", "") == "fit":
                from .fit import continue_command

                hint = f" (continue it: {continue_command(argv)})"
            print(f"{PROG}: interrupted{hint}", file=sys.stderr)
        finally:
            if old is not None:
                signal.signal(signal.SIGINT, old)
        return 130
    except (DaskBidError, CLIError) as exc:
        if debug:
            raise
        print(f"{PROG}: error: {cli_words(one_line(exc))}", file=sys.stderr)
        return 2
    except PermissionError as exc:
        if debug:
            raise
        where = exc.filename
        out = getattr(args, "out", None)
        if where is None and isinstance(out, str) and "://" in out:
            # object storage refused a write mid-fit (a bucket policy): named, not "a file"
            print(f"{PROG}: error: access denied while writing {out} ({one_line(exc)}): "
                  "check the bucket's policy and the credentials, then run the same "
                  "command with --resume.", file=sys.stderr)
            return 2
        print(f"{PROG}: error: permission denied on {where or 'a file'}: check its "
              "permissions (and its folder's), or choose another path.", file=sys.stderr)
        return 2
    except ImportError as exc:
        # an optional extra: our messages say which one to install
        if debug:
            raise
        print(f"{PROG}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:
        # a text file in another encoding (Latin-1's µ), or a binary file named .csv: the
        # codec's words named neither the file nor what to do
        if debug:
            raise
        what = getattr(args, "input", None) or getattr(args, "path", None)
        print(f"{PROG}: error: {what!r} is not UTF-8 text (byte "
              f"0x{exc.object[exc.start]:02x}: {exc.reason}): save it as UTF-8 (a "
              "spreadsheet's \"CSV UTF-8\"; iconv -f latin1 -t utf-8 IN > OUT); if it is "
              "compressed (.gz) or binary, decompress it or save the matrix as .npy.",
              file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_gone():
            # the reader of our output has gone (``dask-bid info ... | head``): stop
            # quietly, as Unix tools do (128 + SIGPIPE)
            return 141
        # from a library: the message is usually enough, the traceback goes to a log
        if debug:
            raise
        log = _write_log(argv)
        tail = f" (traceback: {log})" if log else ""
        print(f"{PROG}: error: {cli_words(one_line(exc))}{_disk_hint(exc, args)}"
              f"{_failure_hint(args, argv)}{tail}", file=sys.stderr)
        return 2
    except Exception as exc:
        if debug:
            raise
        log = _write_log(argv)
        where = (f"the traceback is in {log}" if log else "rerun with --debug for the "
                 "traceback")
        print(f"{PROG}: error: internal error ({type(exc).__name__}: {one_line(exc)}); "
              f"{where}. Please report it{_failure_hint(args, argv)}.", file=sys.stderr)
        return 1
