"""Writing plots of stored fits as PNG files (``fit --plot`` and ``plot``)."""

from __future__ import annotations

import os

import numpy as np

from ._core import CLIError, cli_words

__all__ = ["PLOT_KINDS", "parse_plot_kinds", "plot_stem", "write_plots", "plot_paths",
           "check_png_replaceable", "save_png", "PNG_MARK"]

#: Written into every PNG the command line makes (its "Software" text), so that a later
#: command knows which files it may replace: its own, never a figure of the user's.
PNG_MARK = "dask_bid"

#: Plot kinds ``--plot`` accepts (``all`` = the first three).
PLOT_KINDS = ("trace", "autocorr", "inclusion", "error-k")


def parse_plot_kinds(text, *, allow_error_k=False):
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
    if not kinds:  # "" or ",": nothing drawn and nothing said, exit 0
        choices = [k for k in PLOT_KINDS if k != "error-k" or allow_error_k]
        raise CLIError(f"no plot kind in {str(text)!r}; choose among {', '.join(choices)}, "
                       "all.")
    return list(dict.fromkeys(kinds))


def check_png_replaceable(paths):
    """Refuse, before any work, to replace a file that dask-bid did not write."""
    for path in paths:
        if not os.path.lexists(path):
            continue
        ours = False
        if os.path.isfile(path):
            with open(path, "rb") as fh:
                head = fh.read(4096)  # the text chunks come before the image data
            ours = head.startswith(b"\x89PNG") and PNG_MARK.encode() in head
        if not ours:
            raise CLIError(f"refusing to replace {path!r}: dask-bid did not write it (the "
                           "figures it writes carry its mark). Move it, or choose another "
                           "--out.")


def save_png(fig, path, **kwargs):
    """``fig.savefig`` with the mark :func:`check_png_replaceable` looks for."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fig.savefig(path, metadata={"Software": PNG_MARK}, **kwargs)


def plot_paths(kinds, stem):
    """The files :func:`write_plots` writes for ``kinds``."""
    return [f"{stem}.{kind}.png" for kind in kinds]


def plot_stem(out):
    """The figures' file stem of the result ``out``: next to it, without ``.zarr``; for a
    result on object storage, in the current folder (figures are local files: a URL
    stem wrote into a folder named ``s3:``)."""
    out = str(out).rstrip("/")
    if "://" in out:
        out = out.rsplit("/", 1)[-1]
    root, ext = os.path.splitext(out)
    return root if ext.lower() == ".zarr" else out


def write_plots(res, kinds, stem, *, dpi=110):
    """Write one PNG per kind as ``<stem>.<kind>.png``; returns the paths written (the
    autocorrelation's with a note when it fell back to sigma²) and,
    for each kind that cannot be drawn from this result (too few draws), ``(kind,
    reason)``: the others are written all the same. A file there that dask-bid did not
    write is refused before anything is drawn."""
    from .. import plots

    check_png_replaceable(plot_paths(kinds, stem))
    funcs = {"trace": plots.plot_trace, "autocorr": plots.plot_autocorrelation,
             "inclusion": plots.plot_inclusion}
    from ..._errors import ParameterError

    written, skipped = [], []
    for kind in kinds:
        note = ""
        try:
            try:
                ax = funcs[kind](res)
            except ParameterError as exc:
                if kind != "autocorr":
                    raise
                # too few W draws of the reported basis: sigma^2 is defined for every
                # draw. The figure's title says sigma^2; the line written says why.
                ax = plots.plot_autocorrelation(res, quantity="sigma2")
                why = cli_words(str(exc).split(": ", 1)[-1].split(". ")[0])
                note = f"  (of sigma², not W: {why})"
        except ParameterError as exc:
            skipped.append((kind, str(exc)))
            plots.close("all")
            continue
        fig = np.ravel(ax)[0].figure
        path = f"{stem}.{kind}.png"
        save_png(fig, path, dpi=dpi, bbox_inches="tight")
        plots.close(fig)
        written.append(path + note)
    return written, skipped
