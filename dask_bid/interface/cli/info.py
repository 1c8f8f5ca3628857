"""``dask-bid info``: what an input file, a Zarr array or a result store holds."""

from __future__ import annotations

import contextlib
import json
import os

import numpy as np

from ..._attrs import CONVERTED_FROM_ATTR
from ..._errors import CorruptStoreError
from ._core import (
    COLLAPSED_ONLY,
    CLIError,
    cli_words,
    file_suffix,
    fmt_g,
    human_bytes,
    is_url,
    print_lines,
    sampler_label,
    short_list,
)
from .convert import (
    CONVERTIBLE_SUFFIXES,
    MISSING_ATTR,
    SUBNORMAL_ATTR,
    TEXT_SUFFIXES,
    count_rows,
    detect_text_layout,
)
from .reading import (
    KEEP_NAN,
    RowIndexCheck,
    add_text_options,
    check_text_columns,
    header_names,
    npy_header,
    numeric_npy_dtype,
    scan_non_finite,
    text_options,
)

#: ``info`` counts the NaN of a local Zarr array (one read of it) up to this size; a
#: larger or remote one converted by dask-bid reports the count its conversion recorded
INFO_SCAN_BYTES = 2**30


def _first_names(names, what="columns") -> str:
    """A header's column names (or the row names), the first 8 and the last."""
    if len(names) <= 9:
        return ", ".join(names)
    return f"{', '.join(names[:8])}, ..., {names[-1]} ({len(names)} {what})"


def _missing_lines(info) -> list[str]:
    """NaN and infinity counts of a file, the observed entries, and what ``fit`` does
    with them."""
    n_nan, n_inf = info.get("n_nan"), info.get("n_inf")
    if n_nan is None:
        why = info.get("nan_not_counted")
        if why == "incomplete":
            return ["  missing    not counted: the array was not completely written"]
        if why == "undecodable":
            return ["  missing    not counted: a chunk cannot be read (status above)"]
        if why == "remote":
            return ["  missing    not counted: a store on object storage is not read "
                    "whole for a quick look"]
        if why:
            return [f"  missing    not counted: reading all {human_bytes(info['size'])} "
                    f"takes a while (counted for local stores up to "
                    f"{human_bytes(INFO_SCAN_BYTES)})"]
        return []
    M, N = info["shape"][:2] if len(info["shape"]) >= 2 else (info["shape"][0], 1)
    total = max(1, int(M) * int(N))
    lines = [f"  missing    {n_nan} NaN entries ({_share(n_nan, total)})"
             + (f", {n_inf} infinite" if n_inf else ""),
             f"  observed   {total - n_nan} of {total} entries "
             f"({_share(total - n_nan, total)})"]
    kept = (info.get("filled") or {}).get("fill") == KEEP_NAN
    if n_nan and kept:
        lines.append("  note       converted with --missing mask: `dask-bid fit` fits it with "
                     "--missing mask by itself (the observed entries only)")
    elif n_nan and info.get("kind") == "zarr array":
        lines.append("  note       `dask-bid fit` refuses NaN unless --missing mask (the fit "
                     "uses the observed entries only); for the paper's zero fill, fill them "
                     "in the store (or fit the .npy or text file it came from with "
                     "--fill-missing zero)")
    elif n_nan:
        lines.append("  note       `dask-bid fit` refuses NaN unless --missing mask (the fit "
                     "uses the observed entries only) or --fill-missing zero (NaN replaced "
                     "by 0, the paper's fill)")
    if n_inf:
        lines.append("  note       infinite entries are refused: replace them first")
    if info.get("n_subnormal"):
        lines.append(f"  subnormal  {info['n_subnormal']} entries with 0 < |x| < 2.2e-308: "
                     "no measurement is that small, uninitialised memory is (the CCLE EC50 "
                     "file has 426); a fit takes them for observed values of about 0")
    return lines


def describe_path(path, row_labels="auto", header="auto") -> dict:
    """What ``dask-bid info`` reports about ``path``, as a dict (``kind`` says which);
    ``row_labels`` and ``header``: how a text file is read (``--row-labels``,
    ``--header``)."""
    import zarr

    from ..._errors import StoreNotFoundError

    spath = os.fspath(path)
    if not is_url(spath) and not os.path.exists(spath):
        raise StoreNotFoundError(f"no such file or store: {spath!r}")
    suffix = file_suffix(spath)
    if not is_url(spath) and os.path.isfile(spath):
        size = os.path.getsize(spath)
        if suffix == ".npy":
            shape, dtype = npy_header(spath, numbers=False)
            # the dtype is described; NaN is counted where fit would read the numbers
            numbers = numeric_npy_dtype(dtype)
            counts = scan_non_finite(spath)._asdict() if numbers else {}
            return {"kind": "npy file", "path": spath, "shape": list(shape), "numbers": numbers,
                    "dtype": str(dtype), "size": int(np.prod(shape)) * dtype.itemsize,
                    "file_size": size, **counts}
        if suffix in TEXT_SUFFIXES:
            layout = detect_text_layout(spath, row_labels, header)
            check_text_columns(spath, layout)  # as fit: not "pass --row-labels first"
            index = RowIndexCheck(layout, row_labels)
            counts = scan_non_finite(spath, row_labels=row_labels, header=header,
                                     index=index)._asdict()
            return {"kind": "text file", "path": spath,
                    "shape": [count_rows(spath, layout.header), layout.n_cols],
                    "delimiter": layout.delimiter_name, "header": layout.header,
                    "decimal": layout.decimal, "trailing_delimiter": layout.trailing,
                    "row_labels": layout.row_labels, "row_labels_why": layout.why,
                    "row_numbers_in_column_1": index.numbers() if index.found else None,
                    "column_names": header_names(spath, layout),
                    "file_size": size, **counts}
        if suffix == ".npz":
            try:
                with np.load(spath, allow_pickle=False) as z:
                    arrays = {k: (z[k].item() if z[k].ndim == 0 else list(z[k].shape))
                              for k in z.files}
            except (ValueError, OSError, EOFError) as exc:
                # never the advice numpy gives (allow_pickle): a pickle runs its author's code
                raise CLIError(f"{spath!r} is not a readable .npz of numeric arrays "
                               f"({type(exc).__name__}); dask-bid reads numbers only, never "
                               "pickled objects.") from exc
            return {"kind": "npz file", "path": spath, "arrays": arrays, "file_size": size}
        from ..._files import other_file_advice

        advice = other_file_advice(spath)
        if advice:
            raise CLIError(f"{spath!r} is a file dask-bid does not read: {advice}.")
        raise CLIError(f"{spath!r} is a file dask-bid does not read; expected a Zarr store, "
                       f"or one of {', '.join(CONVERTIBLE_SUFFIXES)}; a file of (row, column, "
                       "value) triplets is read with --format triplets (docs/sparse.md)")
    if is_url(spath):  # a missing bucket or credentials: said as such, not "not Zarr"
        from ...engine.remote import check_bucket

        check_bucket(spath, what="the store")
        from ...engine.zarr_io import _exists

        if not _exists(spath):  # said as for a local path (it quoted zarr's internals)
            raise StoreNotFoundError(f"no such file or store: {spath!r}")
    try:
        node = zarr.open(spath, mode="r")
    except Exception as exc:
        if os.path.isdir(spath) and not any(os.path.exists(os.path.join(spath, m)) for m in (
                "zarr.json", ".zarray", ".zgroup")):
            from ...engine.inputs import folder_hint

            raise CLIError(f"{spath!r} is a directory without Zarr metadata (zarr.json or "
                           f".zarray){folder_hint(spath)}.") from exc
        raise CorruptStoreError(f"cannot read Zarr metadata at {spath!r} "
                                f"({type(exc).__name__}: {exc}); is it a Zarr store?") from exc
    if isinstance(node, zarr.Array):
        info = {"kind": "zarr array", "path": spath, "shape": list(node.shape),
                "dtype": str(node.dtype), "chunks": list(node.chunks),
                "n_chunks": int(node.nchunks), "size": int(node.nbytes),
                "zarr_format": int(node.metadata.zarr_format)}
        done = node.attrs.get("dask_bid_array")
        if isinstance(done, dict) and done.get("complete") is False:
            info["incomplete"] = True
        elif not is_url(spath):  # a listing of the store's keys (no chunk is read)
            from ...engine.inputs import missing_chunks

            lost = missing_chunks(node)
            if lost:
                fill = node.fill_value
                info["missing_chunks"] = lost
                info["fill_value"] = fill.item() if hasattr(fill, "item") else fill
        with contextlib.suppress(Exception):
            info["stored_size"] = int(node.nbytes_stored())
        with contextlib.suppress(Exception):
            info["compressors"] = [type(c).__name__ for c in node.compressors]
        with contextlib.suppress(Exception):  # Zarr v3 sharding: chunks stored per shard
            if node.shards is not None:
                info["shards"] = [int(x) for x in node.shards]
        conv = node.attrs.get(CONVERTED_FROM_ATTR)
        if len(node.shape) == 2:  # names a conversion kept from a text header
            from ...engine.zarr_io import stored_column_names

            info["column_names"] = stored_column_names(node)
            info["row_names"] = stored_column_names(node, axis=0)
        recorded = None
        if isinstance(conv, dict):
            info["converted_from"] = conv.get("path")
            # the subnormal entries the conversion met (the file's info said them, the
            # store's did not)
            with contextlib.suppress(Exception):
                info["n_subnormal"] = int(node.attrs.get(SUBNORMAL_ATTR) or 0)
            missing = node.attrs.get(MISSING_ATTR)
            if isinstance(missing, dict):
                info["filled"] = {"fill": missing.get("fill"),
                                  "n_filled": missing.get("n_filled")}
                # the conversion refuses infinity, and kept (or filled) every NaN
                recorded = int((missing.get("n_kept") if missing.get("fill") == KEEP_NAN
                                else 0) or 0)
        if len(node.shape) == 2 and node.dtype.kind == "f":
            # a local store only: over a network a read of up to 1 GiB is no quick look
            if (int(node.nbytes) <= INFO_SCAN_BYTES and not info.get("incomplete")
                    and not is_url(spath)):
                try:
                    info["n_nan"], info["n_inf"] = _count_non_finite(node, spath)
                except CorruptStoreError as exc:
                    # a chunk file whose bytes do not decode: described, then exit 2
                    # (it was an "internal error" with the codec's traceback in a log)
                    info["undecodable"] = str(exc)
                    info["nan_not_counted"] = "undecodable"
            elif recorded is not None:
                info["n_nan"], info["n_inf"] = recorded, 0
            else:
                info["nan_not_counted"] = ("incomplete" if info.get("incomplete")
                                           else "remote" if is_url(spath) else "size")
        return info
    meta = node.attrs.get("dask_bid")
    if meta is None:
        return {"kind": "zarr group", "path": spath,
                "arrays": sorted(node.array_keys()), "groups": sorted(node.group_keys())}
    # whatever the attributes hold (a damaged or foreign file), info describes, never crashes
    meta = dict(meta) if isinstance(meta, dict) else {}
    for k in ("params", "input", "summary"):
        if k in meta and not isinstance(meta[k], dict):
            del meta[k]
    if not (isinstance(meta.get("input_shape"), list) and len(meta["input_shape"]) == 2):
        meta.pop("input_shape", None)
    info = {"kind": "dask_bid result", "path": spath, "status": meta.get("status"),
            "params": meta.get("params", {}), "input": meta.get("input"),
            "input_shape": meta.get("input_shape"), "summary": meta.get("summary", {}),
            "versions": meta.get("versions"), "error": meta.get("error"),
            "seed": meta.get("entropy"), "continued_from": meta.get("continued_from"),
            "continued_from_chains": meta.get("continued_from_chains")}
    from ...engine.zarr_io import output_status

    # "running" only while a live fit holds the output's lock, else interrupted or failed
    info["status"], info["status_detail"] = output_status(spath, meta)
    from ...engine.zarr_io import ALL_CHUNKS, RESULT_ARRAYS

    if info["status"] == "complete" and meta.get(ALL_CHUNKS):
        from ...engine.zarr_io import missing_result_chunks

        missing = missing_result_chunks(node, meta.get(RESULT_ARRAYS))
        if missing:  # Zarr would read them as zeros: no number of it is shown
            info["status"], info["missing_chunks"] = "damaged", missing
            return info
    src = meta.get("input") or {}
    if src.get("kind") == "zarr" and src.get("path") and not is_url(str(src["path"])):
        from .convert import converted_fill_count

        info["input_filled"] = converted_fill_count(str(src["path"]))
        info["input_reconverted"] = _reconverted(str(src["path"]), src.get("converted_from"))
        # a project moved or the store deleted since: the recorded path names nothing now
        info["input_gone"] = not os.path.exists(str(src["path"]))
    from ...engine.zarr_io import valid_column_names

    columns = _result_array(node, "columns", info)
    if columns is not None:
        info["columns"] = [int(c) for c in columns]
        names = valid_column_names(meta.get("feature_names"), int(node["W"].shape[1])) \
            if "W" in node else None
        if names is not None:
            info["names"] = [names[c] for c in info["columns"]]
    if "C" in node:
        rows = valid_column_names(meta.get("sample_names"), int(node["C"].shape[0]))
        if rows is not None:
            info["row_names"] = rows
    traced = _result_array(node, "draws/w_columns", info)
    if traced is not None:  # the columns whose W draws were kept
        info["traced"] = [int(c) for c in traced]
    W = _result_array(node, "W", info)
    with contextlib.suppress(Exception):  # as fit's summary: max |W| off the basis
        W = np.asarray(W)
        rest = np.setdiff1d(np.arange(W.shape[1]), info["columns"])
        if rest.size:
            info["max_abs_w_off_basis"] = float(np.abs(W[:, rest]).max())
    accepted = _result_array(node, "traces/accepted", info)
    with contextlib.suppress(Exception):  # and the share of accepted swaps
        info["accepted"] = float(np.mean(accepted))
    sigma2 = _result_array(node, "draws/sigma2", info)
    with contextlib.suppress(Exception):  # from the retained draws (n_chains x n_keep)
        from ...engine.summary import judged_sampler
        from .report import sigma2_interval90

        interval = sigma2_interval90(sigma2, judged_sampler(meta.get("params") or {}))
        if interval is not None:
            info["sigma2_interval_90"] = interval
    if (meta.get("summary") or {}).get("n_draws_point") == 0:
        from .report import unvisited_basis_line

        drawn = _result_array(node, "draws/columns", info)
        with contextlib.suppress(Exception):  # a result without its draws says nothing
            info["unvisited"] = unvisited_basis_line(drawn, 0)
    if info["status"] == "complete" and not is_url(spath):
        _check_other_arrays(node, info)
    if info.get("unreadable") and info["status"] == "complete":
        info["status"] = "damaged"  # as the text and the exit status say (JSON: complete)
    else:
        # a fit still running, interrupted or failed may be writing or have half written
        # its arrays: described by its status (a resume rewrites them), not as damaged
        info.pop("unreadable", None)
    if meta.get("status") != "complete" and "checkpoint" in node:
        from ...engine.checkpoint import quiet_listing

        with quiet_listing():  # a checkpoint the running fit writes or prunes meanwhile
            info["checkpoints"] = sorted(node["checkpoint"].group_keys()) + sorted(
                node["checkpoint"].array_keys())
    if info["status"] in ("running", "interrupted", "failed"):
        from ...engine.checkpoint import saved_iterations

        # how far each chain got: what a resume continues from (0: from its start)
        with contextlib.suppress(Exception):
            saved = saved_iterations(node)
            n_chains = int((meta.get("params") or {}).get("n_chains") or 1)
            info["saved_iterations"] = [saved.get(c, 0) for c in range(n_chains)]
    return info


def _check_other_arrays(node, info):
    """Decode the result's arrays that ``info`` did not read (the traces, the draws, W_sd,
    ...), so that a damaged one is said as for W (it was "complete": open_result, plot and
    --diagnostics then refused it); a local result of up to INFO_SCAN_BYTES only."""
    from ...engine.zarr_io import undecodable_arrays

    read = {"columns", "W", "draws/w_columns", "traces/accepted", "draws/sigma2",
            "draws/columns", "C"}
    for key, exc in undecodable_arrays(node, read, max_bytes=INFO_SCAN_BYTES):
        _unreadable(info, key, exc)


def _unreadable(info, key, exc):
    info.setdefault("unreadable", []).append(
        f"{key} ({type(exc).__name__}: {' '.join(str(exc).split())[:120]})")


def _result_array(node, key, info):
    """``node[key][...]`` of a result (``key`` such as "draws/sigma2"), or None where it is
    absent; a chunk that does not decode is recorded in ``info["unreadable"]`` (then
    described as damaged, exit 2: it was an internal error, or left out without a word)."""
    try:
        arr = node[key]
    except Exception:  # absent (an older or unfinished result)
        return None
    try:
        return arr[...]
    except Exception as exc:
        _unreadable(info, key, exc)
        return None


def _count_non_finite(array, path):
    """(NaN, infinite) entries of a 2-D Zarr array, read one row chunk at a time (an
    undecodable chunk raises CorruptStoreError naming it, as in a fit)."""
    from ...engine.inputs import GuardedZarrArray

    array = GuardedZarrArray(array, path)
    n_nan = n_inf = 0
    rows = int(array.chunks[0])
    for r0 in range(0, int(array.shape[0]), rows):
        block = np.asarray(array[r0:r0 + rows])
        n_nan += int(np.isnan(block).sum())
        n_inf += int(np.isinf(block).sum())
    return n_nan, n_inf


def _saved_words(saved, n_iter) -> str:
    """How far an unfinished fit's chains got, by their last checkpoints."""
    of = f" of {n_iter}" if n_iter else ""
    if len(saved) == 1 and not saved[0]:
        return "nothing yet (no checkpoint: a resume starts the chain again)"
    if len(saved) == 1:
        return f"{saved[0]}{of} iterations (its last checkpoint: a resume continues from there)"
    return (", ".join(f"chain {c}: {t}" for c, t in enumerate(saved)) + f"{of} iterations "
            "(their last checkpoints: a resume continues each from there, a chain at 0 from "
            "its start)")


def info_lines(info) -> list[str]:
    kind = info["kind"]
    lines = [f"{info['path']}: {kind}"]
    if kind in ("zarr array", "npy file"):
        M, N = (info["shape"] + [None, None])[:2]
        lines.append(f"  shape      {' x '.join(map(str, info['shape']))}")
        lines.append(f"  dtype      {info['dtype']}")
        if info.get("incomplete"):
            lines.append("  status     INCOMPLETE: its writing was interrupted or failed; the "
                         "unwritten chunks read as zeros (write it again)")
        if info.get("undecodable"):
            lines.append(f"  status     DAMAGED: {info['undecodable']}")
        if "chunks" in info:
            lines.append(f"  chunks     {' x '.join(map(str, info['chunks']))} "
                         f"({info['n_chunks']} chunks)")
        if info.get("shards"):
            n_shards = int(np.prod([-(-n // s) for n, s in zip(info["shape"], info["shards"],
                                                                strict=True)]))
            lines.append(f"  shards     {' x '.join(map(str, info['shards']))} ({n_shards} "
                         "shard files, the chunks stored inside them)")
        if info.get("missing_chunks"):
            lost = info["missing_chunks"]
            lines.append(f"  absent     {len(lost)} chunk file(s) ({', '.join(lost[:3])}"
                         f"{', ...' if len(lost) > 3 else ''}): read as the fill value "
                         f"{info['fill_value']!r}; fit and rid refuse it unless "
                         "--allow-missing-chunks (meant to be all fill value)")
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
        if info.get("column_names"):
            lines.append(f"  names      {_first_names(info['column_names'])}")
        if info.get("row_names"):
            lines.append(f"  rows named {_first_names(info['row_names'], 'rows')}")
        filled = info.get("filled") or {}
        if filled.get("fill") == "zero":
            lines.append(f"  filled     {filled.get('n_filled')} NaN entries replaced by 0 "
                         f"(--fill-missing {filled['fill']})")
        lines += _missing_lines(info)
        if len(info["shape"]) != 2:
            lines.append("  note       not a matrix: dask-bid needs a 2-D array")
        if info.get("numbers") is False:
            lines.append("  note       not real numbers: dask-bid fits float, integer or "
                         "boolean values")
    elif kind == "text file":
        lines += [f"  shape      {info['shape'][0]} x {info['shape'][1]}",
                  f"  delimiter  {info['delimiter']}"
                  + (" (decimal comma)" if info.get("decimal") == "," else "")
                  + (", at the end of every line too (not a column)"
                     if info.get("trailing_delimiter") else "")
                  + (", one header line" if info["header"] else ""),
                  *(["  rows       labelled: column 1 holds row labels, left out"
                     + (f" ({info['row_labels_why']}; --row-labels none reads it as data)"
                        if info.get("row_labels_why") else "")]
                    if info.get("row_labels") else []),
                  *([f"  note       column 1 holds the row numbers "
                     f"{info['row_numbers_in_column_1']}, like pandas' index: `dask-bid fit` "
                     "refuses it unless --row-labels first (leave it out) or none (data)"]
                    if info.get("row_numbers_in_column_1") else []),
                  *([f"  names      {_first_names(info['column_names'])}"]
                    if info.get("column_names") else []),
                  f"  size       {human_bytes(info['file_size'])} on disk",
                  *_missing_lines(info),
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
        if info.get("unreadable"):
            # above the numbers the attributes still give
            bad = info["unreadable"]
            lines.append(f"  status     DAMAGED: cannot read {'; '.join(bad[:3])}"
                         f"{'; ...' if len(bad) > 3 else ''}: restore the result from a copy, "
                         "or fit again with --overwrite")
        elif status == "complete":
            lines.append(f"  status     {status}")
        elif status == "damaged":
            miss = info["missing_chunks"]
            lines.append(f"  status     DAMAGED: {len(miss)} chunk file(s) missing "
                         f"({', '.join(miss[:3])}{', ...' if len(miss) > 3 else ''}), which "
                         "would read as zeros: restore them, or fit again with --overwrite")
            return lines
        elif status == "failed":
            reason = cli_words(str(info.get("error") or "no reason recorded").split(". ")[0])
            saved = any(info.get("saved_iterations") or ())
            lines.append(f"  status     failed: {reason}  "
                         + ("(fix the cause, then the same dask-bid fit with --resume "
                            "continues from its last checkpoint, or with --overwrite starts "
                            "afresh; without either it is refused, keeping the iterations "
                            "saved)" if saved else
                            "(fix the cause and run the same dask-bid fit again: it replaces "
                            "a failed fit)"))
        elif status == "running":
            lines.append(f"  status     running  ({info.get('status_detail')})")
        else:
            lines.append(f"  status     {status}  (continue it: dask-bid fit ... --resume)")
        if "saved_iterations" in info:
            lines.append(f"  saved      {_saved_words(info['saved_iterations'], p.get('n_iter'))}")
        shape = info.get("input_shape") or [s.get("n_samples"), s.get("n_features")]
        src = info.get("input") or {}
        conv = src.get("converted_from")
        lines.append(f"  input      {shape[0]} x {shape[1]}"
                     + (f" from {src.get('path')}" if src.get("path") else "")
                     + (f" (converted from {conv['path']})"
                        if isinstance(conv, dict) and conv.get("path") else "")
                     + ("; not there any more (moved or deleted since the fit)"
                        if info.get("input_gone") else ""))
        if info.get("input_reconverted"):
            lines.append(f"  note       {src.get('path')} now holds another conversion "
                         f"({info['input_reconverted']}): this result was fitted on the "
                         "earlier one")
        if info.get("input_filled"):
            lines.append(f"  filled     {info['input_filled']} NaN entries of the input "
                         "replaced by 0 (--fill-missing zero)")
        lines.append(f"  model      {str(p.get('model', '?')).upper()} "
                     f"({sampler_label(p)} sampler), "
                     f"K = {p.get('n_components')}, bounds {p.get('bounds')}")
        from .report import continued_words

        lines.append(f"  sampling   {p.get('n_chains')} chain(s) x {p.get('n_iter')} iterations, "
                     f"burn-in {p.get('burn_in')}, thin {p.get('thin')}, init {p.get('init')}"
                     + continued_words(info.get("continued_from"),
                                       info.get("continued_from_chains"), sep=", "))
        if info.get("seed") is not None:
            lines.append(f"  seed       {info['seed']} (--seed repeats this fit with it)")
        if status != "complete" and info.get("continued_from") and (s or "columns" in info):
            # the arrays and summary are still those of the finished fit being continued
            # (they were shown as this run's, beside its own 3000 iterations)
            lines.append(f"  note       the numbers below are the finished fit's of "
                         f"{info['continued_from']} iterations that this run continues; "
                         "this run's come once it completes")
        if "columns" in info:
            lines.append(f"  columns    {short_list(info['columns'])}")
        if info.get("names"):
            from .report import shown_names

            lines.append(f"  names      {shown_names(info['names'])}")
        if info.get("row_names"):
            lines.append(f"  rows named {_first_names(info['row_names'], 'rows')}")
        if info.get("traced"):
            lines.append(f"  traced     {short_list(info['traced'])} (their W draws are kept: "
                         "open_result(PATH).result_.w_intervals(0.9))")
        if s:
            from .report import mse_words, sigma2_words

            lines.append(f"  MSE        {mse_words(s.get('mse'), s.get('mse_observed'))}")
            conv = s.get("convergence") or {}
            lines.append("  sigma2     " + sigma2_words(
                s.get("sigma2"), info.get("sigma2_interval_90"), conv.get("converged", True)))
            off = info.get("max_abs_w_off_basis")
            lines.append(f"  max|W|     {fmt_g(s.get('max_abs_w'))}"
                         + (f"  (off the basis: {fmt_g(off)})" if off is not None else ""))
            if info.get("accepted") is not None:  # fit's words, under info's indent
                from .report import accepted_line

                lines.append("  " + accepted_line(info["accepted"]).replace(
                    "accepted     ", "accepted   ", 1))
            lines.append(f"  draws      {s.get('n_draws_point')} retained draws with the "
                         "reported basis")
            if info.get("unvisited"):
                lines.append(info["unvisited"])
            if s.get("convergence"):  # results written before it have none
                from ...engine.convergence import Convergence
                from ...engine.summary import judged_sampler
                from .report import convergence_line

                lines.append(convergence_line(Convergence.from_dict(s["convergence"]),
                                              judged_sampler(p), label="  check      "))
            lines.append(f"  time       {_seconds(s.get('elapsed'))} s sampling, summed over the "
                         "chains")
        # the collapsed sampler's own options are not shown for another sampler, which
        # never read them (fit refuses them there: "that chain would ignore them")
        ignored = () if p.get("sampler", "collapsed") == "collapsed" else COLLAPSED_ONLY
        other = {k: v for k, v in p.items() if k not in (
            "model", "aggressive", "sampler", "n_components", "bounds", "n_chains", "n_iter",
            "burn_in", "thin", "init", "versions", "entropy", *ignored)}
        if other:
            lines.append("  params     " + ", ".join(f"{k}={v}" for k, v in sorted(other.items())))
    return lines


def run(args):
    from .sparse import describe_sparse, sparse_info_lines

    info = describe_sparse(args)  # a triplet file (--format triplets) or a sparse store
    if info is not None:  # --row-labels / --header describe a dense text matrix (as fit)
        text_options(args, args.path, triplets=info["kind"] == "triplet file")
    if info is not None and not args.json:
        print_lines(sparse_info_lines(info))
        return 0
    if info is None:
        info = describe_path(args.path, **text_options(args, args.path))
    res = None
    if args.diagnostics:
        if info["kind"] != "dask_bid result":
            raise CLIError(f"--diagnostics describes the chains of a result of dask-bid fit; "
                           f"{args.path!r} is a {info['kind']}.")
        from ...engine import read_result

        # a fit that did not finish is refused, saying why (read_result's message)
        res = read_result(args.path)
        info["diagnostics"] = _diagnostics(res)
    if args.json:
        # NaN (R-hat of one chain, an unknown statistic) as null: strict JSON has no NaN
        # (the stored summary holds them as the strings "nan" / "inf": null too)
        shown = dict(info, summary=_stored_numbers(info["summary"])) if "summary" in info \
            else info
        conv = (shown.get("summary") or {}).get("convergence")
        if isinstance(conv, dict):
            from ...engine.summary import EXACT_SAMPLERS, judged_sampler

            # "converged" of a search sampler (or a tempered chain) is thresholds met,
            # not a verdict (the text says "not judged"): a reader of the JSON is told
            shown["summary"] = dict(shown["summary"], convergence=dict(
                conv, judged=judged_sampler(info.get("params") or {}) in EXACT_SAMPLERS))
        print(json.dumps(_json_safe(shown), indent=2, default=str, allow_nan=False))
        _refuse_damaged(info)
        return 0
    lines = info_lines(info)
    if res is not None:
        lines.append("  diagnostics (split R-hat, bulk/tail ESS over the retained draws):")
        for name, d in info["diagnostics"]["chains"].items():
            lines.append(f"    {name:<7} r_hat {d['r_hat']:.3f}  ess_bulk {d['ess_bulk']:.0f}"
                         f"  ess_tail {d['ess_tail']:.0f}")
        lines.extend(inclusion_lines(res))
    print_lines(lines)
    _refuse_damaged(info)
    return 0


def _reconverted(store, recorded) -> str | None:
    """What the converted store a result read holds now, when it is another conversion
    than the one the fit recorded (another file of that name, or the file changed since);
    None when the same, or not known (a fit of an older version recorded nothing)."""
    if not isinstance(recorded, dict):
        return None
    try:
        import zarr

        now = zarr.open_array(store, mode="r").attrs.get(CONVERTED_FROM_ATTR)
    except Exception:
        return None
    if not isinstance(now, dict):
        return None
    if now.get("path") != recorded.get("path"):
        return f"of {now.get('path')}"
    if any(now.get(k) != recorded.get(k) for k in ("size", "mtime_ns")):
        return f"of {now.get('path')} as it is now, changed since the fit"
    return None


def _refuse_damaged(info):
    """A damaged result (or an array whose writing did not finish), once described: exit
    status 2 with the error line, so that a script's ``dask-bid info OUT && ...`` does not
    go on with it (it exited 0)."""
    if info.get("incomplete"):
        raise CLIError(f"{info['path']!r} is a Zarr array whose writing was interrupted or "
                       "failed (its unwritten chunks read as zeros): convert or write it "
                       "again (dask-bid convert ... --overwrite).")
    if info.get("undecodable"):
        raise CLIError(info["undecodable"])
    if info.get("unreadable"):
        bad = info["unreadable"]
        raise CLIError(f"{info['path']!r} is a damaged dask_bid result: cannot read "
                       f"{bad[0]}{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''}: "
                       "restore it from a copy, or fit again with --overwrite.")
    if info.get("status") == "damaged":
        miss = info["missing_chunks"]
        raise CLIError(f"{info['path']!r} is a damaged dask_bid result ({len(miss)} chunk "
                       "file(s) or arrays missing, which would read as zeros): restore them, "
                       "or fit again with --overwrite.")


def _share(n, total) -> str:
    """``n / total`` as a percentage that is never rounded to 0 % or 100 % unless it is
    (1 NaN in 6000 showed "0.0%", and its observed share "100.0%")."""
    f = n / total
    text = f"{f:.1%}"
    if 0 < n < total and text in ("0.0%", "100.0%"):
        text = f"{f * 100:.2g}%" if 2 * n < total else f"{f * 100:.4f}%"
    return text


def _stored_numbers(x):
    """A stored summary with its non-finite numbers (kept as the strings "nan", "inf",
    "-inf": the attributes are JSON) as floats again."""
    if isinstance(x, dict):
        return {k: _stored_numbers(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_stored_numbers(v) for v in x]
    if isinstance(x, str) and x.lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
        return float(x)
    return x


def _json_safe(x):
    """``x`` with every non-finite float as None (and numpy scalars as Python ones)."""
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    if isinstance(x, (float, np.floating)):
        return float(x) if np.isfinite(x) else None
    if isinstance(x, np.integer):
        return int(x)
    return x


def _diagnostics(res) -> dict:
    """Split R-hat and bulk/tail ESS of sigma2 and the MSE, numpy only (the statistics
    ArviZ computes, dask_bid/engine/convergence.py: no optional extra needed), and the
    inclusion probabilities with their Monte Carlo standard errors."""
    from ...engine.convergence import ess_bulk, ess_tail, rhat_rank

    chains = {}
    for name, x in (("sigma2", res.draws_sigma2),
                    ("mse", res.draws_sse / (res.n_samples * res.n_features))):
        chains[name] = {"r_hat": float(rhat_rank(x)), "ess_bulk": float(ess_bulk(x)),
                        "ess_tail": float(ess_tail(x))}
    return {"chains": chains,
            "inclusion_probability": np.asarray(res.inclusion_probability).tolist(),
            "inclusion_mcse": np.asarray(res.inclusion_mcse()).tolist()}




def _seconds(x) -> str:
    """A stored time to a tenth of a second (anything else as it is)."""
    try:
        return f"{float(x):.1f}"
    except (TypeError, ValueError):
        return fmt_g(x)


def inclusion_lines(res, top=10) -> list[str]:
    """The ``top`` most probable columns: inclusion probability +- its Monte Carlo
    standard error (``BIDResult.inclusion_mcse``), with their names when the fit kept
    them; a column of the reported basis is marked."""
    p = np.asarray(res.inclusion_probability)
    order = np.argsort(-p, kind="stable")[:top]
    order = order[p[order] > 0]
    se = res.inclusion_mcse()
    names = res.feature_names
    basis = set(np.asarray(res.columns).tolist())
    width = max(len(str(int(j))) for j in order) if order.size else 1
    out = [f"  inclusion (the {order.size} most probable columns; probability +- Monte Carlo "
           "standard error; * in the reported basis):"]
    for j in order:
        name = f" {names[j]}" if names else ""
        out.append(f"    {'*' if j in basis else ' '} {int(j):>{width}}{name}  {p[j]:.3f} +- "
                   f"{se[j]:.3f}")
    return out


def add_parser(sub):
    """Add the ``info`` command to the subparsers ``sub``."""
    info = sub.add_parser("info", help="describe an input matrix or a result store",
                          description="Describe PATH: a .npy or text matrix (shape, dtype, "
                          "delimiter, NaN count), a Zarr array (shape, chunks, size, where "
                          "it was converted from) or a result store of `dask-bid fit` "
                          "(status, K, columns, MSE, sigma2, settings).")
    info.add_argument("path", metavar="PATH", help="a file (.npy, .csv, .txt, .tsv, .npz), "
                      "a Zarr array or a result store (path or URL)")
    info.add_argument("--json", action="store_true",
                      help="print the same information as JSON")
    from .sparse import add_sparse_options

    add_sparse_options(info)
    add_text_options(info)
    info.add_argument("--diagnostics", action="store_true",
                      help="for a finished result: split R-hat and bulk/tail ESS of sigma2 "
                      "and MSE (as ArviZ computes them; ArviZ is not needed), and the most "
                      "probable columns' inclusion probabilities with their Monte Carlo "
                      "standard errors (with --json: every column's); a fit that did not "
                      "finish is refused, saying why")
    info.set_defaults(func=run)
    return info
