"""``bayesian_id``: the functional form of :class:`dask_bid.BayesianID`."""

from __future__ import annotations

import numpy as np

from .._errors import InputShapeError, NonFiniteInputError, ParameterError
from ..engine.chain import run_chain
from ..engine.cluster import check_client_arg
from ..engine.fit import ENGINE_DEFAULTS, check_callback
from ..engine.inputs import as_matrix_source, with_mask
from ..engine.memory import MaskedMemoryBackend, MemoryBackend
from ..engine.scaling import fit_scaled_in_memory
from ..engine.summary import PriorCheck, chain_config, summarise, traced_columns
from ..kernels.rng import root_entropy
from ._params import columns_by_name, validate_params
from ._sklearn import checked_names, feature_names, sample_names
from .result import BIDResult

__all__ = ["bayesian_id", "DEFAULTS", "PAPER_SETTINGS"]

DEFAULTS = dict(
    model="gbt", sampler="collapsed", n_tries=8, acceptance="metropolis", n_pivot=8,
    n_redraw="auto", n_anneal=10, anneal_every=5, search_warmup=0, tempered_warmup="auto",
    warmup_temperature=100.0, n_iter=1000,
    burn_in=200, thin=1, bounds=(-1.0, 1.0),
    alpha_sigma=0.1, beta_sigma=1.0, mu=0.0, tau=1.0, mu_mu=0.0, tau_mu=0.1, alpha_t=1.0,
    beta_t=1.0, init="auto", point_estimate="best", temperature=1.0, n_chains=1,
    proposal_init="copy", n_candidates="auto", candidate_pool="auto", pool_every="auto",
    block_size=None, n_threads=2, missing="zero",
    n_trace_columns=10, trace_columns=None, refine_sweeps=20, w_estimate="lstsq",
    random_state=None,
)


AUTO_CPQR_MAX_COLUMNS = 10_000
#: and up to this many flops (2 M N^2, its triangular factor): a few seconds on a laptop,
#: where the sketch costs one pass over A whatever N is
AUTO_CPQR_MAX_FLOPS = 2e11

#: The paper's exact sampler and summary (Lu 2022): pass as ``BayesianID(K, **PAPER_SETTINGS)``.
PAPER_SETTINGS = dict(sampler="aggressive", n_iter=500, burn_in=100, thin=5, init="random",
                      proposal_init="copy", point_estimate="mode", w_estimate="mean",
                      refine_sweeps=0)


def A_shape(A):
    return tuple(int(s) for s in (A.shape if hasattr(A, "shape") else
                                  as_matrix_source(A).shape))


def _initial_columns(A, p, entropy, chain):
    init = p["init"]
    K = p["n_components"]
    if not isinstance(init, str):
        return np.sort(np.asarray(init, dtype=np.int64))
    if init == "random":
        return None
    if getattr(A, "kind", None) == "sparse":  # a sketch of the observed entries only
        from ..baselines._sparse import sparse_select_columns

        seed = np.random.SeedSequence(entropy, spawn_key=(chain, 0, 0, 99))
        return sparse_select_columns(A, K, init, np.random.default_rng(seed))
    if init == "auto":
        # the deterministic pivoted QR needs an N x N triangular factor (2 M N^2 flops):
        # worth it while that is cheap, beyond it the sketch (one pass over A)
        M, N = A_shape(A)
        cheap = N <= AUTO_CPQR_MAX_COLUMNS and 2.0 * M * N * N <= AUTO_CPQR_MAX_FLOPS
        init = "cpqr" if cheap else "sketch"
    from ..baselines import select_columns

    method = "cpqr" if init == "cpqr" else "randomized"
    seed = np.random.SeedSequence(entropy, spawn_key=(chain, 0, 0, 99))
    try:
        # only J: RandomizedID.fit would spend two more passes on W and its MSE
        # the engine checked A's chunks first (allow_missing_chunks, fit_dask): not again
        return select_columns(A, K, method=method, random_state=np.random.default_rng(seed),
                              allow_missing_chunks=True)
    except NonFiniteInputError as exc:
        # out-of-core input meets its first full read here: say what the sampler accepts
        where = str(exc).split(". ")[0].rstrip(".")
        if p["missing"] == "mask":
            # the masked engine hands over A with NaN as 0: what is left is infinite
            raise NonFiniteInputError(
                f"{where.replace('NaN or infinity', 'infinity')} (found while computing the "
                f"initial basis, init={p['init']!r}); missing='mask' treats only NaN as "
                "missing. Replace the infinities.") from exc
        raise NonFiniteInputError(
            f"{where} (found while computing the initial basis, init={p['init']!r}). Fill "
            "them (e.g. with 0, as the paper does for missing values), or pass "
            "missing='mask' to treat NaN as missing.") from exc


def _check_masked_array(A, missing):
    """A numpy masked array's masked entries are read as NaN (engine/inputs.py), which only
    ``missing="mask"`` accepts: say so in the array's own terms, not as NaN it never held."""
    if not isinstance(A, np.ma.MaskedArray) or str(missing).lower() == "mask":
        return
    n = int(np.ma.count_masked(A))
    if n:
        raise NonFiniteInputError(
            f"A is a masked array with {n} masked entries, which are missing values: pass "
            "missing='mask' to leave them out of the likelihood, or fill them first, e.g. "
            "A.filled(0) (the paper's fill).")


def _unknown_keywords(unknown) -> str:
    """The refusal of misspelt keywords (of ``bayesian_id`` or ``BayesianID.fit``): the
    nearest known name of each, and the keywords a fit takes besides the model's."""
    import difflib

    known = sorted({*DEFAULTS, *ENGINE_DEFAULTS, "progress", "feature_names", "sample_names"})
    near = [m[0] for u in sorted(unknown) for m in [difflib.get_close_matches(u, known, 1)] if m]
    engine = ", ".join(sorted({*ENGINE_DEFAULTS, "progress", "feature_names", "sample_names"}))
    return (f"unexpected keyword argument{'s' if len(unknown) > 1 else ''} {sorted(unknown)}"
            + (f" (did you mean {', '.join(map(repr, near))}?)" if near else "")
            + f": a fit takes the model's parameters (BayesianID's) and {engine}.")


def bayesian_id(A, n_components, **kwargs) -> BIDResult:
    """Bayesian interpolative decomposition A ~ A[:, J] W with |W| <= 1 (Lu, 2022).

    Runs the GBT or GBTN sampler chosen by ``sampler`` (``"collapsed"``, the exact
    default; the paper's ``"plain"`` and ``"aggressive"``; the least-squares ``"search"``)
    and summarises the retained draws. See :class:`dask_bid.BayesianID` for every
    parameter.

    Parameters
    ----------
    A : array-like (M, N)
        A numpy array (in memory), or a dask array, Zarr array or path / URL of a Zarr
        array: those, and numpy input with ``client=`` or ``out=``, go through the Dask
        engine (:func:`dask_bid.engine.fit_dask`). Sparse input, with
        ``missing="mask"`` (its unstored entries are unobserved): a ``scipy.sparse``
        matrix (any format; in this process unless ``client=`` is given or a client is
        current) or the path of a sparse store (docs/sparse.md).
    n_components : int
        K, the number of columns kept.
    **kwargs
        The parameters of :class:`dask_bid.BayesianID`, and the engine's ``client``,
        ``out``, ``overwrite``, ``resume``, ``checkpoint_every``, ``chunks``,
        ``storage_options``, ``callback``, ``keep_final_state``, ``mask`` and
        ``allow_missing_chunks`` (see :func:`dask_bid.engine.fit_dask` and
        :meth:`dask_bid.BayesianID.fit`).
        ``progress=True`` shows a progress bar over every chain's iterations (tqdm: a
        widget in a notebook with ipywidgets, else text on stderr), with the MSE and
        sigma^2 of the latest iteration; ``callback`` is still called.
        ``feature_names``: the names of A's N columns (strings), kept in the result
        (``BIDResult.feature_names``, ``out``) and shown for the selected columns by the
        command line; by default a DataFrame's column names, or those recorded on a Zarr
        input (``attrs["dask_bid_column_names"]``). For a DataFrame they must be its own.
        ``sample_names``: the names of A's M rows, the same way (a DataFrame's index of
        strings, or ``attrs["dask_bid_row_names"]``; up to 100,000 rows): they name the
        rows of ``BIDResult.basis_frame()``.

    Returns
    -------
    BIDResult

    Notes
    -----
    The point estimate (see :class:`dask_bid.BayesianID`, Notes): ``point_estimate=
    "best"`` (default) reports the visited basis J (burn-in included) with the lowest
    box-constrained least-squares SSE, ``"mode"`` the basis of the most retained draws
    (ties broken by the lower SSE). W is the box-constrained least-squares fit for J
    (``w_estimate="lstsq"``, default), the posterior mode (``"map"``) or the posterior
    mean of the draws with J (``"mean"``), with W[:, J] set to the identity; it lies
    within ``bounds``.
    """
    engine_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in ENGINE_DEFAULTS}
    progress = kwargs.pop("progress", False)
    if not isinstance(progress, (bool, np.bool_)):
        raise ParameterError(f"progress must be True or False, got {progress!r}.")
    given_names = kwargs.pop("feature_names", None)
    given_rows = kwargs.pop("sample_names", None)
    unknown = set(kwargs) - set(DEFAULTS)
    if unknown & {"aggressive", "swap_score"}:
        # the options of earlier versions: say what replaced them
        validate_params({**DEFAULTS, **kwargs, "n_components": n_components})
    if unknown:
        raise TypeError(_unknown_keywords(unknown))
    p = {**DEFAULTS, **kwargs, "n_components": n_components}
    check_client_arg(engine_kw.get("client"))  # a misspelt address: before A is read
    _check_masked_array(A, p["missing"])
    names = feature_names(A)  # a DataFrame's column names, kept in the result
    src = as_matrix_source(A, storage_options=engine_kw.get("storage_options"))
    if given_names is not None:
        names = checked_names(given_names, names, src.shape[1])
    if p.get("trace_columns") is not None:
        # columns named by their names: a DataFrame's, feature_names=, or a Zarr input's
        known = names
        if known is None and src.kind in ("zarr", "sparse"):
            from ..engine.zarr_io import stored_column_names

            known = stored_column_names(src.array)
        p["trace_columns"] = columns_by_name(p["trace_columns"], known)
    rows = sample_names(A)  # a DataFrame's index of strings
    if given_rows is not None:
        rows = checked_names(given_rows, rows, src.shape[0], what="sample_names",
                            axis="rows", frame="index")
    p = validate_params(p, n_cols=src.shape[1])
    if p["n_components"] > src.shape[0]:
        # whatever the start (init="auto" refused it, "random" fitted it without a word):
        # before any output exists
        raise ParameterError(
            f"n_components={p['n_components']} exceeds the number of rows M={src.shape[0]}: "
            "more than M columns are always linearly dependent; choose n_components <= "
            f"{src.shape[0]}.")
    from ..engine.blas import single_blas_thread

    # the same floats whatever process runs the blocks (engine/blas.py)
    with single_blas_thread():
        if not progress:
            return _fit(src, p, names, rows, engine_kw)
        from ._progress import ChainProgress

        user = engine_kw.get("callback")
        check_callback(user)
        with ChainProgress(p["n_chains"] * p["n_iter"]) as bar:
            engine_kw["callback"] = bar if user is None else _both(bar, user)
            return _fit(src, p, names, rows, engine_kw)


def _both(first, then):
    """A callback calling two: the progress bar, then the user's."""
    def callback(state):
        first(state)
        then(state)
    return callback


def _fit(src, p, names, rows, engine_kw) -> BIDResult:
    """The fit of a checked input with validated parameters: in memory or on the Dask
    engine (see :func:`bayesian_id`)."""
    masked = p["missing"] == "mask"
    mask = engine_kw.pop("mask", None)
    if src.kind == "sparse":
        _sparse_engine_kw(src, p, mask, engine_kw)
    if mask is not None:
        if not masked:
            raise ParameterError("mask= marks the observed entries, which only "
                                 "missing='mask' uses: pass missing='mask' too.")
        # from here on A reads with NaN at every unobserved entry, whatever its kind
        src = with_mask(src, mask, storage_options=engine_kw.get("storage_options"),
                        allow_missing_chunks=bool(engine_kw.get("allow_missing_chunks")))
    on_engine = (src.kind != "numpy" or engine_kw.get("client") is not None
                 or engine_kw.get("out") is not None or engine_kw.get("resume"))
    if masked and src.kind == "numpy":
        # checked at once, before an engine run creates any output (the engine would
        # find the same in its first pass, with the output already there)
        _check_masked(src.array)
    if masked and on_engine:
        # the Dask engine reads the mask from the NaN of each tile in its passes, and
        # refuses infinities and columns with nothing observed in its first one
        from ..engine.fit import fit_dask

        return fit_dask(src, p, initial_columns=_initial_columns, feature_names=names,
                        sample_names=rows, **engine_kw)
    if masked:
        # C order whatever the input's (a DataFrame's values are Fortran-ordered): the
        # products' rounding follows the layout, and the same matrix gives the same chain
        X = np.ascontiguousarray(src.array, dtype=np.float64)
        mask = ~np.isnan(X)
        return _named(fit_scaled_in_memory(np.where(mask, X, 0.0), p, lambda X, p: _fit_memory(
            X, p, mask=mask, callback=engine_kw.get("callback"))), names, rows, X)
    # numpy input is checked at once, before an engine run creates any output;
    # dask and Zarr input are checked in the engine's first streaming pass, but a store
    # converted with --missing mask says in its metadata that it holds NaN
    if src.kind == "zarr":
        from ..engine.zarr_io import stored_kept_nan

        n_kept = stored_kept_nan(src.array.attrs)
        if n_kept:
            raise NonFiniteInputError(
                f"the Zarr input keeps {n_kept} NaN as missing entries (it was converted "
                "with --missing mask): pass missing='mask' to fit its observed entries.")
    if src.kind == "numpy" and not np.isfinite(src.array).all():
        n_inf = int(np.count_nonzero(np.isinf(src.array)))
        n_nan = int(np.count_nonzero(np.isnan(src.array)))
        if n_inf:
            raise NonFiniteInputError(
                f"A contains {n_inf} infinite entries" + (f" (and {n_nan} NaN)" if n_nan else "")
                + ": replace the infinities (missing='mask' treats only NaN as missing).")
        raise NonFiniteInputError(
            f"A contains {n_nan} NaN entries. Fill them, or pass missing='mask' "
            "to treat NaN as missing.")
    if on_engine:
        from ..engine.fit import fit_dask

        return fit_dask(src, p, initial_columns=_initial_columns, feature_names=names,
                        sample_names=rows, **engine_kw)
    X = np.ascontiguousarray(src.array, dtype=np.float64)  # C order: as above
    # values near 1e200 or 1e-200 are fitted as X / 2^e (engine/scaling.py)
    return _named(fit_scaled_in_memory(X, p, lambda X, p: _fit_memory(
        X, p, callback=engine_kw.get("callback"))), names, rows, X)


def _named(res, names, rows, X):
    """The names of an in-memory fit, and its C = X[:, columns] (M x K, a copy; NaN
    kept where unobserved, as the engine's C), so that it reads like an engine fit."""
    res.feature_names = None if names is None else [str(n) for n in names]
    res.sample_names = None if rows is None else [str(n) for n in rows]
    res.C = X[:, res.columns]
    return res


def _check_masked(X):
    """The refusals of a masked numpy input: infinities (only NaN is missing) and
    columns with no observed entry."""
    X = np.asarray(X)
    if np.isinf(X).any():
        raise NonFiniteInputError("A contains infinite entries; missing='mask' treats only "
                                  "NaN as missing. Replace the infinities.")
    seen = (~np.isnan(X)).any(axis=0)
    if not seen.all():
        bad = np.flatnonzero(~seen)[:5].tolist()
        raise InputShapeError(f"columns {bad} have no observed entry; drop them first.")


def _sparse_engine_kw(src, p, mask, engine_kw):
    """Checks of a sparse input (docs/sparse.md); an in-memory ``scipy.sparse`` matrix
    without ``client=`` runs in this process (the current client if there is one)."""
    # missing="zero" is refused by the engine (fit_dask), which every sparse fit reaches
    if mask is not None:
        raise ParameterError("mask= does not apply to a sparse input: its stored entries are "
                             "the observed ones. Drop mask=.")
    if isinstance(p["init"], str) and p["init"] == "cpqr":
        raise ParameterError("init='cpqr' needs the dense matrix; a sparse input starts from "
                             "init='sketch' (what init='auto' picks for it) or 'random'.")
    # the column counts are metadata: empty columns are refused before any pass
    empty = np.flatnonzero(src.array.column_counts() == 0)
    if empty.size:
        source = (getattr(src.array, "meta", None) or {}).get("source") or {}
        hint = ("; if the triplet file counts from 1, convert it with index_base=1"
                if empty[0] == 0 and source.get("index_base") == 0 else "")
        raise InputShapeError(
            f"columns {empty[:5].tolist()} have no observed entry in the sparse input "
            f"({empty.size} in all); drop them first (e.g. X[:, X.getnnz(axis=0) > 0])"
            f"{hint}.")
    if src.path is None and engine_kw.get("client") is None:
        try:
            from distributed import Client

            Client.current()
        except ValueError:
            engine_kw["client"] = "synchronous"


def _fit_memory(X, p, mask=None, callback=None) -> BIDResult:
    M, N = X.shape
    entropy = root_entropy(p["random_state"])
    cfg = chain_config(p, N)
    trace_cols = traced_columns(p, N)
    opts = dict(block_size=p["block_size"], n_threads=p["n_threads"], trace_cols=trace_cols)
    backends = [MemoryBackend(X, **opts) if mask is None else MaskedMemoryBackend(X, mask, **opts)
                for _ in range(p["n_chains"])]

    said = PriorCheck(p)

    def chain(c):
        return run_chain(backends[c], cfg, entropy, chain=c,
                         J0=_initial_columns(X, p, entropy, c),
                         callback=said.watching(backends[c], callback))

    # chains are independent streams: run them side by side (the kernels release the GIL)
    if p["n_chains"] > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(p["n_chains"]) as pool:
            outputs = list(pool.map(chain, range(p["n_chains"])))
    else:
        outputs = [chain(0)]
    try:
        return summarise(p, outputs, backends, entropy, (M, N), trace_cols,
                          lambda cols, W, held: backends[0].sse(cols, W), mask=mask,
                          prior_check=said)
    finally:
        for be in backends:
            be.close()
