"""``dask-bid info``: what an input file, a Zarr array or a result store holds."""

from __future__ import annotations

import contextlib
import json
import os

import numpy as np

from ._core import CLIError, file_suffix, fmt_g, human_bytes, is_url, print_lines, short_list
from .convert import CONVERTIBLE_SUFFIXES, TEXT_SUFFIXES, count_rows, detect_text_layout


def describe_path(path) -> dict:
    """What ``dask-bid info`` reports about ``path``, as a dict (``kind`` says which)."""
    import zarr

    from ..._errors import StoreNotFoundError

    spath = os.fspath(path)
    if not is_url(spath) and not os.path.exists(spath):
        raise StoreNotFoundError(f"no such file or store: {spath!r}")
    suffix = file_suffix(spath)
    if not is_url(spath) and os.path.isfile(spath):
        size = os.path.getsize(spath)
        if suffix == ".npy":
            a = np.load(spath, mmap_mode="r", allow_pickle=False)
            return {"kind": "npy file", "path": spath, "shape": list(a.shape),
                    "dtype": str(a.dtype), "size": int(a.nbytes), "file_size": size}
        if suffix in TEXT_SUFFIXES:
            delim, header, n_cols = detect_text_layout(spath)
            return {"kind": "text file", "path": spath,
                    "shape": [count_rows(spath, header), n_cols],
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
        from ..._errors import CorruptStoreError

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
            lines.append(f"  columns    {short_list(info['columns'])}")
        if s:
            lines.append(f"  MSE        {fmt_g(s.get('mse'))}"
                         + (f"  (observed: {fmt_g(s.get('mse_observed'))})"
                            if s.get("mse_observed") is not None else ""))
            lines.append(f"  sigma2     {fmt_g(s.get('sigma2'))}")
            lines.append(f"  max|W|     {fmt_g(s.get('max_abs_w'))}")
            lines.append(f"  draws      {s.get('n_draws_point')} retained draws with the "
                         "reported basis")
            lines.append(f"  time       {s.get('elapsed', 0.0):.1f} s sampling")
        other = {k: v for k, v in p.items() if k not in (
            "model", "aggressive", "n_components", "bounds", "n_chains", "n_iter", "burn_in",
            "thin", "init", "versions", "entropy")}
        if other:
            lines.append("  params     " + ", ".join(f"{k}={v}" for k, v in sorted(other.items())))
    return lines


def run(args):
    info = describe_path(args.path)
    if args.json:
        print(json.dumps(info, indent=2, default=str))
        return 0
    lines = info_lines(info)
    if args.diagnostics and info["kind"] == "dask_bid result" and info["status"] == "complete":
        from ...engine import read_result
        from ..diagnostics import summary

        table = summary(read_result(args.path), var_names=["sigma2", "mse"])
        lines.append("  diagnostics (split R-hat, bulk/tail ESS over the retained draws):")
        for name, row in table.iterrows():
            lines.append(f"    {name:<7} r_hat {row['r_hat']:.3f}  ess_bulk {row['ess_bulk']:.0f}"
                         f"  ess_tail {row['ess_tail']:.0f}")
    print_lines(lines)
    return 0




def add_parser(sub):
    """Add the ``info`` command to the subparsers ``sub``."""
    info = sub.add_parser("info", help="describe an input matrix or a result store")
    info.add_argument("path", metavar="PATH")
    info.add_argument("--json", action="store_true", help="machine-readable output")
    info.add_argument("--diagnostics", action="store_true",
                      help="for a result: split R-hat and ESS of sigma2 and MSE (needs arviz)")
    info.set_defaults(func=run)
