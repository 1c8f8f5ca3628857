"""Writing plots of stored fits as PNG files (``fit --plot`` and ``plot``)."""

from __future__ import annotations

import os

import numpy as np

from ._core import CLIError

__all__ = ["PLOT_KINDS", "parse_plot_kinds", "plot_stem", "write_plots"]

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
    return list(dict.fromkeys(kinds))


def plot_stem(out):
    out = str(out).rstrip("/")
    root, ext = os.path.splitext(out)
    return root if ext.lower() == ".zarr" else out


def write_plots(res, kinds, stem, *, dpi=110):
    """Write one PNG per kind as ``<stem>.<kind>.png``; returns the paths written."""
    from .. import plots

    funcs = {"trace": plots.plot_trace, "autocorr": plots.plot_autocorrelation,
             "inclusion": plots.plot_inclusion}
    from ..._errors import ParameterError

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
