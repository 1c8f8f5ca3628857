"""Loaders for the four real-world datasets of the paper (CCLE EC50/IC50, CTRP EC50, MovieLens).

The files are read from a data directory outside the repository (see the shared data
README); nothing here copies them. Every loader returns a :class:`Dataset` after the
paper's preprocessing (Brouwer & Lio 2017 filters, standardisation of the observed
entries, missing entries filled, columns copied), each step being an option.

None of the loaders applies ``exp`` or ``10**x``: the drug files are already on a linear
µM scale (the README explains that "undo the log" in the paper's text concerns GDSC).
"""

from __future__ import annotations

import inspect
import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._errors import CorruptStoreError, ParameterError, StoreNotFoundError
from ._dataset import (
    Dataset,
    _check_bool,
    _check_cap,
    _check_fill_value,
    _check_int,
    _check_standardize,
    _finish,
)
from ._paper import DATASETS

__all__ = [
    "GARBAGE_THRESHOLD",
    "available_datasets",
    "load_ccle_ec50",
    "load_ccle_ic50",
    "load_ctrp_ec50",
    "load_dataset",
    "load_movielens_100k",
]

#: ``clean=True`` treats observed values with ``|x| <`` this as missing. The CCLE EC50 file
#: holds 426 uninitialised-memory denormals (about 2e-314 to 2e-310) where ``nan`` was
#: meant; every genuine value in these files is far above it.
GARBAGE_THRESHOLD = 1e-300

_README_HINT = "see README.md of the shared data directory"


class _Layout(NamedTuple):
    folder: str
    matrix: str
    row_file: str | None
    col_file: str | None


_LAYOUTS: dict[str, _Layout] = {
    "ccle_ec50": _Layout("ccle_ec50", "ec50.txt", "cell_lines.txt", "drugs.txt"),
    "ccle_ic50": _Layout("ccle_ic50", "ic50.txt", "cell_lines.txt", "drugs.txt"),
    "ctrp_ec50": _Layout("ctrp_ec50", "ec50.txt", "cell_lines.txt", "drugs.txt"),
    "movielens_100k": _Layout("movielens_100k", "u.data", None, None),
}

_MISSING_HINTS = {
    "ctrp_ec50": (
        " The CTRP EC50 matrix is not distributed with the shared data (only its label "
        "files are); section 3 of the shared data README says how to rebuild it from the "
        "raw CTRPv2 release and where to put it."
    ),
}


# --------------------------------------------------------------------------- file access


def _as_path(directory: Any, name: str) -> Path:
    if not isinstance(directory, str | os.PathLike):
        raise ParameterError(
            f"{name}: directory must be a str or os.PathLike naming the data folder, "
            f"got {type(directory).__name__}"
        )
    d = Path(directory).expanduser()
    if not d.exists():
        layout = _LAYOUTS[name]
        raise StoreNotFoundError(
            f"{name}: directory {str(d)!r} does not exist; pass the shared data folder "
            f"(the one containing '{layout.folder}/') or the '{layout.folder}' folder itself"
        )
    if not d.is_dir():
        raise ParameterError(
            f"{name}: {str(d)!r} is a file, not a folder; pass the folder that contains "
            f"'{_LAYOUTS[name].folder}/' (or that folder itself)"
        )
    return d


def _dataset_dir(name: str, d: Path, *, allow_renamed: bool) -> Path | None:
    """The folder holding ``name``'s files, given the data root or the dataset folder."""
    layout = _LAYOUTS[name]
    if (d / layout.folder).is_dir():
        return d / layout.folder
    if d.name == layout.folder:
        return d
    # A renamed dataset folder is accepted when it holds the matrix file, but never the
    # folder of another dataset: ccle_ec50/ and ctrp_ec50/ both hold an "ec50.txt".
    other_folders = {lay.folder for lay in _LAYOUTS.values()} - {layout.folder}
    if allow_renamed and d.name not in other_folders and (d / layout.matrix).is_file() \
            and _renamed_dataset(d, layout.matrix) in (None, name):
        return d
    return None


#: Fields of a line of cell_lines.txt: Brouwer's CCLE files hold 2 (normalised and
#: published name), the CTRP release 5 (with its ids, histology and site)
_LABEL_FIELDS = {"ccle_ec50": 2, "ccle_ic50": 2, "ctrp_ec50": 5}


def _renamed_dataset(d: Path, matrix: str) -> str | None:
    """Which of the datasets whose matrix file is named ``matrix`` (ccle_ec50 and
    ctrp_ec50 both hold an "ec50.txt") a renamed folder ``d`` holds, by its cell-line
    labels' fields; None when its name alone decides or the labels do not tell (a copy of
    the CCLE folder under another name loaded as CTRP, and the reverse)."""
    names = [n for n, lay in _LAYOUTS.items() if lay.matrix == matrix]
    if len(names) < 2:
        return None
    try:
        with open(d / "cell_lines.txt", encoding="utf-8") as fh:
            first = next((ln for ln in fh if ln.strip()), "")
    except OSError:
        return None
    n = len(first.rstrip("\r\n").split("\t"))
    fits = [m for m in names if (n <= 2) == (_LABEL_FIELDS.get(m, 2) <= 2)]
    return fits[0] if len(fits) == 1 else None


def _resolve(name: str, directory: Any) -> Path:
    d = _as_path(directory, name)
    found = _dataset_dir(name, d, allow_renamed=True)
    if found is None:
        layout = _LAYOUTS[name]
        other = next((n for n, lay in _LAYOUTS.items() if lay.folder == d.name), None)
        if other is not None:  # the folder of another dataset, passed by mistake
            mine = (d / layout.matrix).is_file()
            # (it said "its 'u.data' is ccle_ec50's" of a folder with no u.data)
            held = (f" (its {layout.matrix!r} is {other}'s)" if mine else
                    f", which holds no {layout.matrix!r}")
            raise StoreNotFoundError(
                f"{name}: {str(d)!r} is the folder of {other}{held}: pass the "
                f"'{layout.folder}' folder, or the shared data folder that holds it "
                f"({_README_HINT}).")
        held = _renamed_dataset(d, layout.matrix) if (d / layout.matrix).is_file() else None
        if held is not None and held != name:
            raise StoreNotFoundError(
                f"{name}: {str(d)!r} holds {held}'s files (its cell_lines.txt has "
                f"{_LABEL_FIELDS[held]} fields a line, {name}'s {_LABEL_FIELDS[name]}): "
                f"load it as {held} (load_{held}), or pass the '{layout.folder}' folder "
                f"({_README_HINT}).")
        raise StoreNotFoundError(
            f"{name}: no dataset folder found; looked for {str(d / layout.folder)!r} and "
            f"for {str(d / layout.matrix)!r}. Pass the shared data folder or the "
            f"'{layout.folder}' folder itself ({_README_HINT})." + _MISSING_HINTS.get(name, "")
        )
    return found


def _require_file(name: str, path: Path) -> Path:
    if not path.is_file():
        raise StoreNotFoundError(
            f"{name}: expected file {str(path)!r} was not found "
            f"(looked for {path.name!r} in {str(path.parent)!r})." + _MISSING_HINTS.get(name, "")
        )
    return path


def _read_matrix(name: str, path: Path) -> np.ndarray:
    """Read a tab-delimited ``%.18e`` matrix with literal ``nan`` for missing entries."""
    try:
        with warnings.catch_warnings():
            # An empty file is reported below with the file name; numpy's own warning
            # would only say "input contained no data".
            warnings.simplefilter("ignore", UserWarning)
            R = np.loadtxt(path, delimiter="\t", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise CorruptStoreError(
            f"{name}: {str(path)!r} is not a tab-delimited numeric matrix "
            f"with 'nan' for missing values ({exc})"
        ) from exc
    if R.size == 0:
        raise CorruptStoreError(f"{name}: {str(path)!r} holds no values")
    if np.isinf(R).any():
        raise CorruptStoreError(
            f"{name}: {str(path)!r} contains infinite values; missing entries must be 'nan'"
        )
    return R


def _read_labels(name: str, path: Path, expected: int, what: str) -> list[str]:
    """One label per line: the second tab-separated field (display name), else the first.

    The first field is Brouwer's normalised name (lower case, punctuation removed); the
    second is the name as published (``22Rv1``, ``17-AAG``, a CTRP ``ccl_name`` or
    ``cpd_name``). Further fields (ids, histology, SMILES) are ignored.
    """
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    labels = []
    for i, line in enumerate(lines, start=1):
        fields = line.split("\t")
        label = fields[1].strip() if len(fields) > 1 else ""
        label = label if label else fields[0].strip()
        if not label:
            # a blank line within the file: an empty label, which shifted every later
            # name by one against the matrix when the count still matched
            raise CorruptStoreError(
                f"{name}: {str(path)!r}, line {i}, is blank: every {what} needs its label "
                "(one per line, in the matrix's order); remove the blank line or name it")
        labels.append(label)
    if len(labels) != expected:
        raise CorruptStoreError(
            f"{name}: {str(path)!r} has {len(labels)} {what} labels but the matrix has "
            f"{expected} {what}s; the label file and the matrix do not belong together"
        )
    return labels


# --------------------------------------------------------------------------- loaders


def _load_drug(
    name: str,
    directory: Any,
    *,
    clean: bool,
    min_obs: int,
    cap: float | None,
    standardize: str | None,
    fill_value: float,
    n_copies: int,
) -> Dataset:
    clean = _check_bool("clean", clean)
    min_obs = _check_int("min_obs", min_obs, 0)
    cap = _check_cap(cap)
    standardize = _check_standardize(standardize)
    fill_value = _check_fill_value(fill_value)
    n_copies = _check_int("n_copies", n_copies, 1)

    layout = _LAYOUTS[name]
    folder = _resolve(name, directory)
    matrix_path = _require_file(name, folder / layout.matrix)
    row_path = _require_file(name, folder / layout.row_file)
    col_path = _require_file(name, folder / layout.col_file)

    R = _read_matrix(name, matrix_path)
    raw_shape = R.shape
    rows = _read_labels(name, row_path, R.shape[0], "row")
    cols = _read_labels(name, col_path, R.shape[1], "column")

    mask = ~np.isnan(R)
    if clean:
        mask &= ~(np.abs(R) < GARBAGE_THRESHOLD)
    if cap is not None:
        R = np.where(mask, np.minimum(R, cap), R)
    keep = mask.sum(axis=1) >= min_obs
    if not keep.any():
        # an empty matrix (0 x N, mean 0, sd 1) was returned without a word
        raise ParameterError(f"min_obs={min_obs}: no row of {name} has that many observed "
                             f"entries (the most is {int(mask.sum(axis=1).max())}); lower it.")
    R, mask = R[keep], mask[keep]
    rows = [lab for lab, k in zip(rows, keep, strict=True) if k]

    options: dict[str, Any] = {"clean": clean, "min_obs": min_obs}
    if name == "ctrp_ec50":
        options["cap"] = cap
    return _finish(
        name=name,
        values=R,
        mask=mask,
        row_labels=rows,
        col_labels=cols,
        raw_shape=raw_shape,
        standardize=standardize,
        fill_value=fill_value,
        n_copies=n_copies,
        preprocessing=options,
        source=str(matrix_path),
    )


_COMMON_PARAMS_DOC = """
    standardize : {"global", "column", None}, default "global"
        "global": subtract the mean and divide by the standard deviation (ddof=0) of all
        observed entries, as the paper. "column": the same per column (a column whose
        spread is 0 is only centred). None: keep the values of the file.
    fill_value : float, default 0.0
        Value written at the missing entries after standardisation (NaN is allowed, for
        code that masks missing entries itself).
    n_copies : int, default 2
        Number of times the matrix is repeated side by side: ``[A, A]`` for 2, the
        paper's "copy every column twice" (block order: the first N columns are the
        original ones, the copies are labelled ``"<label>#copy2"`` ...). 1 keeps N columns.

    Returns
    -------
    Dataset

    Raises
    ------
    StoreNotFoundError
        The directory or one of the expected files does not exist; the message names
        the path that was looked for.
    ParameterError
        An option is out of its domain, or ``directory`` is not a folder.
    CorruptStoreError
        A file cannot be parsed, or its label files do not match the matrix.
"""


def load_ccle_ec50(
    directory: str | os.PathLike,
    *,
    clean: bool = False,
    min_obs: int = 3,
    standardize: str | None = "global",
    fill_value: float = 0.0,
    n_copies: int = 2,
) -> Dataset:
    """Load the CCLE EC50 drug-sensitivity matrix (cell lines x drugs, µM).

    With the defaults this reproduces the paper: 502 x 24 before copying (502 x 48
    after), observed fraction 0.632636.

    Parameters
    ----------
    directory : str or os.PathLike
        The shared data folder (containing ``ccle_ec50/``) or the ``ccle_ec50`` folder
        itself, holding ``ec50.txt``, ``cell_lines.txt`` and ``drugs.txt``.
    clean : bool, default False
        Treat the 426 garbage denormals of ``ec50.txt`` (``|x| < 1e-300``, left by a bug
        in Brouwer's processing script where ``nan`` was meant) as missing; gives
        501 x 24 with fraction 0.598387 under ``min_obs=3``. The default keeps them as
        observed values of about 0, as Brouwer's loader and so the paper did.
    min_obs : int, default 3
        Drop cell lines with fewer observed entries (Brouwer's ``MIN = 3``; drops
        NCI-H2172 and T84). 0 keeps all 504 rows.
    """
    return _load_drug(
        "ccle_ec50",
        directory,
        clean=clean,
        min_obs=min_obs,
        cap=None,
        standardize=standardize,
        fill_value=fill_value,
        n_copies=n_copies,
    )


def load_ccle_ic50(
    directory: str | os.PathLike,
    *,
    clean: bool = False,
    min_obs: int = 0,
    standardize: str | None = "global",
    fill_value: float = 0.0,
    n_copies: int = 2,
) -> Dataset:
    """Load the CCLE IC50 drug-sensitivity matrix (cell lines x drugs, µM).

    With the defaults this reproduces the paper: 504 x 24 before copying (504 x 48
    after), observed fraction 0.964782. Values lie in [0.0025, 8]; many sit at 8, the top
    tested concentration (already a cap, left as it is).

    Parameters
    ----------
    directory : str or os.PathLike
        The shared data folder (containing ``ccle_ic50/``) or the ``ccle_ic50`` folder
        itself, holding ``ic50.txt``, ``cell_lines.txt`` and ``drugs.txt``.
    clean : bool, default False
        Treat ``|x| < 1e-300`` as missing. A no-op on this file (it has no garbage
        entries); accepted so that all drug loaders take the same options.
    min_obs : int, default 0
        Drop cell lines with fewer observed entries. Brouwer's loader, and so the paper,
        applies no filter here.
    """
    return _load_drug(
        "ccle_ic50",
        directory,
        clean=clean,
        min_obs=min_obs,
        cap=None,
        standardize=standardize,
        fill_value=fill_value,
        n_copies=n_copies,
    )


def load_ctrp_ec50(
    directory: str | os.PathLike,
    *,
    clean: bool = False,
    min_obs: int = 0,
    cap: float | None = 100.0,
    standardize: str | None = "global",
    fill_value: float = 0.0,
    n_copies: int = 2,
) -> Dataset:
    """Load the CTRP EC50 drug-sensitivity matrix (cell lines x compounds, µM).

    The paper's matrix is 887 x 545 (887 x 1090 after copying) with fraction 0.801.
    **Its file is not in the shared data** (only the label files are); this loader reads
    Brouwer's format if the file is rebuilt and placed as ``ctrp_ec50/ec50.txt``
    (section 3 of the shared data README), and otherwise raises
    :class:`~dask_bid.StoreNotFoundError` naming ``ec50.txt``.

    Expected files: ``ec50.txt`` (tab-delimited, no header, ``%.18e``, ``nan`` for
    missing values, linear µM), ``cell_lines.txt`` (tab-separated: normalised name,
    ``ccl_name``, ``master_ccl_id``, histology, site; some fields empty) and
    ``drugs.txt`` (normalised name, ``cpd_name``, ``master_cpd_id``, SMILES). Row labels
    are the ``ccl_name`` field and column labels the ``cpd_name`` field (the normalised
    name where that field is empty).

    Parameters
    ----------
    directory : str or os.PathLike
        The shared data folder (containing ``ctrp_ec50/``) or the ``ctrp_ec50`` folder
        itself.
    clean : bool, default False
        Treat ``|x| < 1e-300`` as missing (uninitialised-memory values).
    min_obs : int, default 0
        Drop cell lines with fewer observed entries. The paper applies no filter
        (all-missing cell lines were already removed when the file was made).
    cap : float or None, default 100.0
        Replace observed values above ``cap`` by ``cap`` (the paper's "cap high values
        to 100"). Brouwer's file is already capped, so the default changes nothing on
        it; None disables the cap.
    """
    return _load_drug(
        "ctrp_ec50",
        directory,
        clean=clean,
        min_obs=min_obs,
        cap=cap,
        standardize=standardize,
        fill_value=fill_value,
        n_copies=n_copies,
    )


def load_movielens_100k(
    directory: str | os.PathLike,
    *,
    min_obs: int = 3,
    standardize: str | None = "global",
    fill_value: float = 0.0,
    n_copies: int = 2,
) -> Dataset:
    """Load MovieLens 100K as a users x movies rating matrix (unrated = missing).

    With the defaults this reproduces the paper: 943 x 1473 before copying
    (943 x 2946 after), 99723 observed ratings, fraction 0.0717928.

    Rows are the distinct user ids and columns the distinct item ids of ``u.data``, both
    in increasing numeric order and labelled by the id as a string (``"1"``, ``"2"``
    ...). Ratings (integers 1 to 5) become float64.

    Parameters
    ----------
    directory : str or os.PathLike
        The shared data folder (containing ``movielens_100k/``) or the
        ``movielens_100k`` folder itself, holding the GroupLens ``u.data``.
    min_obs : int, default 3
        Brouwer's ``MIN_NO_ENTRIES``: remove users with fewer ratings, then movies with
        fewer ratings, then users again (one pass each, in that order; on ``u.data``
        only the movie filter removes anything).
    """
    min_obs = _check_int("min_obs", min_obs, 0)
    standardize = _check_standardize(standardize)
    fill_value = _check_fill_value(fill_value)
    n_copies = _check_int("n_copies", n_copies, 1)

    name = "movielens_100k"
    folder = _resolve(name, directory)
    path = _require_file(name, folder / _LAYOUTS[name].matrix)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            d = np.loadtxt(path, dtype=np.int64, ndmin=2)
    except ValueError as exc:
        raise CorruptStoreError(
            f"{name}: {str(path)!r} is not a whitespace-separated table of integers "
            f"'user_id item_id rating timestamp' ({exc})"
        ) from exc
    if d.shape[0] == 0 or d.shape[1] < 3:
        raise CorruptStoreError(
            f"{name}: {str(path)!r} must have lines 'user_id<TAB>item_id<TAB>rating"
            f"<TAB>timestamp'; found {d.shape[1] if d.size else 0} columns"
        )
    users, u_idx = np.unique(d[:, 0], return_inverse=True)
    items, i_idx = np.unique(d[:, 1], return_inverse=True)
    raw_shape = (users.size, items.size)
    flat = u_idx * items.size + i_idx
    order = np.argsort(flat, kind="stable")
    again = np.flatnonzero(flat[order][1:] == flat[order][:-1])
    if again.size:
        line = int(order[again[0] + 1]) + 1  # the later of the first repeated pair's lines
        first = int(order[again[0]]) + 1
        raise CorruptStoreError(
            f"{name}: {str(path)!r} rates user {d[line - 1, 0]}, item {d[line - 1, 1]} more "
            f"than once (lines {first} and {line}; {again.size} repeated pairs in all); "
            f"u.data has one line per pair"
        )
    R = np.full(raw_shape, np.nan)
    R[u_idx, i_idx] = d[:, 2].astype(np.float64)
    mask = np.zeros(raw_shape, dtype=bool)
    mask[u_idx, i_idx] = True

    # Brouwer's order: users, movies, users (one pass each; not iterated to a fixed point).
    rows = np.ones(raw_shape[0], dtype=bool)
    cols = np.ones(raw_shape[1], dtype=bool)
    rows &= mask.sum(axis=1) >= min_obs
    cols &= mask[rows].sum(axis=0) >= min_obs
    rows &= mask[:, cols].sum(axis=1) >= min_obs
    if not rows.any():
        # an empty 0 x 0 dataset was returned without a word (docs/datasets.md: refused)
        which = "movie" if (mask.sum(axis=1) >= min_obs).any() and not cols.any() else "user"
        raise ParameterError(f"min_obs={min_obs}: no {which} of {name} keeps that many "
                             "ratings after the filter (users, movies, users); lower it.")
    R = R[np.ix_(rows, cols)]
    mask = mask[np.ix_(rows, cols)]

    return _finish(
        name=name,
        values=R,
        mask=mask,
        row_labels=[str(u) for u in users[rows]],
        col_labels=[str(i) for i in items[cols]],
        raw_shape=raw_shape,
        standardize=standardize,
        fill_value=fill_value,
        n_copies=n_copies,
        preprocessing={"min_obs": min_obs},
        source=str(path),
    )


for _f in (load_ccle_ec50, load_ccle_ic50, load_ctrp_ec50, load_movielens_100k):
    if _f.__doc__:  # None under python -OO
        _f.__doc__ = _f.__doc__.rstrip() + "\n" + _COMMON_PARAMS_DOC.lstrip("\n")
del _f

_LOADERS = {
    "ccle_ec50": load_ccle_ec50,
    "ccle_ic50": load_ccle_ic50,
    "ctrp_ec50": load_ctrp_ec50,
    "movielens_100k": load_movielens_100k,
}


def load_dataset(name: str, directory: str | os.PathLike, **options: Any) -> Dataset:
    """Load one of the paper's datasets by name.

    Parameters
    ----------
    name : {"ccle_ec50", "ccle_ic50", "ctrp_ec50", "movielens_100k"}
        Dataset name (see :data:`DATASETS`).
    directory : str or os.PathLike
        The shared data folder, or the dataset's own folder.
    **options
        Keyword options of the dataset's loader (:func:`load_ccle_ec50`,
        :func:`load_ccle_ic50`, :func:`load_ctrp_ec50`, :func:`load_movielens_100k`).

    Returns
    -------
    Dataset

    Raises
    ------
    ParameterError
        Unknown dataset name, or an option the loader does not take.
    """
    if not isinstance(name, str) or name not in _LOADERS:
        raise ParameterError(
            f"unknown dataset {name!r}; choose one of {', '.join(map(repr, DATASETS))}"
        )
    loader = _LOADERS[name]
    accepted = [p for p in inspect.signature(loader).parameters if p != "directory"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ParameterError(
            f"{name}: unknown option(s) {', '.join(unknown)}; "
            f"{loader.__name__} accepts {', '.join(accepted)}"
        )
    return loader(directory, **options)


def available_datasets(directory: str | os.PathLike) -> tuple[str, ...]:
    """Names of the datasets whose files are all present under ``directory``.

    Parameters
    ----------
    directory : str or os.PathLike
        The shared data folder (holding ``ccle_ec50/``, ``ccle_ic50/`` ...), or one
        dataset's folder.

    Returns
    -------
    tuple of str
        In the order of :data:`DATASETS`. A dataset counts as present when its matrix
        file and its label files exist; the shared CTRP folder, which has labels but no
        ``ec50.txt``, is therefore not listed.

    Raises
    ------
    StoreNotFoundError
        ``directory`` does not exist.
    ParameterError
        ``directory`` is not a folder.
    """
    if not isinstance(directory, str | os.PathLike):
        raise ParameterError(
            f"directory must be a str or os.PathLike naming the data folder, "
            f"got {type(directory).__name__}"
        )
    d = Path(directory).expanduser()
    if not d.exists():
        raise StoreNotFoundError(f"data directory {str(d)!r} does not exist")
    if not d.is_dir():
        raise ParameterError(f"{str(d)!r} is a file, not a data folder")
    present = []
    for name in DATASETS:
        layout = _LAYOUTS[name]
        # Only the dataset's own folder name counts here: listing a renamed folder
        # would be a guess about which dataset it holds.
        folder = _dataset_dir(name, d, allow_renamed=False)
        if folder is None:
            continue
        files = [layout.matrix, layout.row_file, layout.col_file]
        if all((folder / f).is_file() for f in files if f is not None):
            present.append(name)
    return tuple(present)
