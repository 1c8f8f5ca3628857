"""``bayesian_id``: the functional form of :class:`dask_bid.BayesianID`."""

from __future__ import annotations

import numpy as np

from .._errors import InputShapeError, NonFiniteInputError, ParameterError
from ..engine.chain import ChainConfig, map_estimate, refine, run_chain
from ..engine.fit import ENGINE_DEFAULTS
from ..engine.inputs import as_matrix_source
from ..engine.memory import MaskedMemoryBackend, MemoryBackend
from ..kernels.rng import root_entropy
from ._params import validate_params
from .result import TRACE_DTYPE, BIDResult

__all__ = ["bayesian_id", "DEFAULTS", "PAPER_SETTINGS"]

DEFAULTS = dict(
    model="gbt", aggressive=True, n_iter=500, burn_in=100, thin=5, bounds=(-1.0, 1.0),
    alpha_sigma=0.1, beta_sigma=1.0, mu=0.0, tau=1.0, mu_mu=0.0, tau_mu=0.1, alpha_t=1.0,
    beta_t=1.0, init="auto", point_estimate="best", temperature=1.0, n_chains=1,
    proposal_init="copy", n_candidates=8, block_size=None, n_threads=2, missing="zero",
    n_trace_columns=10, refine_sweeps=20, w_estimate="map", swap_score="lstsq",
    random_state=None,
)


def _versions():
    import importlib.metadata as md

    out = {}
    for pkg in ("dask_bid", "numpy", "scipy", "numba", "dask", "distributed", "zarr"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = None
    return out


AUTO_CPQR_MAX_COLUMNS = 10_000

#: The paper's exact sampler and summary (Lu 2022): pass as ``BayesianID(K, **PAPER_SETTINGS)``.
PAPER_SETTINGS = dict(init="random", proposal_init="copy", point_estimate="mode",
                      w_estimate="mean", refine_sweeps=0, swap_score="draw")


def A_n_cols(A):
    return int(A.shape[1]) if hasattr(A, "shape") else int(as_matrix_source(A).shape[1])


def _initial_columns(A, p, entropy, chain):
    init = p["init"]
    K = p["n_components"]
    if not isinstance(init, str):
        return np.sort(np.asarray(init, dtype=np.int64))
    if init == "random":
        return None
    if init == "auto":
        # the deterministic pivoted QR needs an N x N triangular factor: fine up to
        # AUTO_CPQR_MAX_COLUMNS columns, beyond that the sketch
        init = "cpqr" if A_n_cols(A) <= AUTO_CPQR_MAX_COLUMNS else "sketch"
    from ..baselines import RandomizedID

    method = "cpqr" if init == "cpqr" else "randomized"
    seed = np.random.SeedSequence(entropy, spawn_key=(chain, 0, 0, 99))
    try:
        rid = RandomizedID(K, method=method, random_state=np.random.default_rng(seed)).fit(A)
    except NonFiniteInputError as exc:
        # out-of-core input meets its first full read here: say what the sampler accepts
        where = str(exc).split(". ")[0].rstrip(".")
        raise NonFiniteInputError(
            f"{where} (found while computing the initial basis, init={p['init']!r}). Fill "
            "them (e.g. with 0, as the paper does for missing values), or pass "
            "missing='mask' to treat NaN as missing.") from exc
    return np.asarray(rid.columns_, dtype=np.int64)


def _point_estimate(p, counts, best):
    if p["point_estimate"] == "best":
        return min(best, key=lambda k: (best[k], -counts[k]))
    return max(counts, key=lambda k: (counts[k], -best[k]))


def bayesian_id(A, n_components, **kwargs) -> BIDResult:
    """Bayesian interpolative decomposition A ~ A[:, J] W with |W| <= 1 (Lu, 2022).

    Runs the GBT or GBTN Gibbs sampler (aggressive or plain) and summarises the
    retained draws. See :class:`dask_bid.BayesianID` for every parameter.

    Parameters
    ----------
    A : array-like (M, N)
        A numpy array (in memory), or a dask array, Zarr array or path / URL of a Zarr
        array: those, and numpy input with ``client=`` or ``out=``, go through the Dask
        engine (:func:`dask_bid.engine.fit_dask`).
    n_components : int
        K, the number of columns kept.
    **kwargs
        The parameters of :class:`dask_bid.BayesianID`, and the engine's ``client``,
        ``out``, ``overwrite``, ``resume``, ``checkpoint_every``, ``chunks``,
        ``storage_options`` and ``callback`` (see :func:`dask_bid.engine.fit_dask`).

    Returns
    -------
    BIDResult

    Notes
    -----
    The point estimate: ``point_estimate="mode"`` reports the basis J visited by the
    most retained draws (ties broken by the lower SSE), ``"best"`` the basis of the
    retained draw with the lowest SSE. W is the posterior mean of the retained draws
    that had that basis, with W[:, J] set to the identity; it lies within ``bounds``
    because every draw does.
    """
    engine_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in ENGINE_DEFAULTS}
    unknown = set(kwargs) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"bayesian_id() got unexpected keyword arguments {sorted(unknown)}")
    p = {**DEFAULTS, **kwargs, "n_components": n_components}
    src = as_matrix_source(A, storage_options=engine_kw.get("storage_options"))
    p = validate_params(p, n_cols=src.shape[1])
    masked = p["missing"] == "mask"
    if masked:
        if src.kind != "numpy" or any(engine_kw.get(k) for k in ("client", "out", "resume")):
            raise ParameterError(
                "missing='mask' runs in memory only for now (each column keeps its own K x K "
                "Gram matrix): pass a numpy array with NaN marking missing entries, or fill "
                "them and use missing='zero' for out-of-core input.")
        X = np.asarray(src.array, dtype=np.float64)
        if np.isinf(X).any():
            raise NonFiniteInputError("A contains infinite entries; missing='mask' treats only "
                                      "NaN as missing. Replace the infinities.")
        mask = ~np.isnan(X)
        if not mask.any(axis=0).all():
            bad = np.flatnonzero(~mask.any(axis=0))[:5].tolist()
            raise InputShapeError(f"columns {bad} have no observed entry; drop them first.")
        return _fit_memory(np.where(mask, X, 0.0), p, mask=mask,
                           callback=engine_kw.get("callback"))
    # numpy input is checked at once, before an engine run creates any output;
    # dask and Zarr input are checked in the engine's first streaming pass
    if src.kind == "numpy" and not np.isfinite(src.array).all():
        bad = int(np.size(src.array) - np.count_nonzero(np.isfinite(src.array)))
        raise NonFiniteInputError(
            f"A contains {bad} NaN or infinite entries. Fill them, or pass missing='mask' "
            "to treat NaN as missing.")
    if (src.kind != "numpy" or engine_kw.get("client") is not None
            or engine_kw.get("out") is not None or engine_kw.get("resume")):
        from ..engine.fit import fit_dask

        return fit_dask(src, p, **engine_kw)
    X = np.asarray(src.array, dtype=np.float64)
    return _fit_memory(X, p, callback=engine_kw.get("callback"))


def _chain_config(p) -> ChainConfig:
    return ChainConfig(n_components=p["n_components"], priors=p["priors"],
                       aggressive=bool(p["aggressive"]), n_iter=p["n_iter"],
                       burn_in=p["burn_in"], thin=p["thin"], temperature=p["temperature"],
                       n_candidates=p["n_candidates"],
                       max_cached_rows=max(4 * p["n_candidates"], 16),
                       point_estimate=p["point_estimate"], proposal_init=p["proposal_init"],
                       w_init="prior" if isinstance(p["init"], str) and p["init"] == "random"
                       else "lstsq", swap_score=p["swap_score"])


def _fit_memory(X, p, mask=None, callback=None) -> BIDResult:
    M, N = X.shape
    entropy = root_entropy(p["random_state"])
    cfg = _chain_config(p)
    n_trace = min(int(p["n_trace_columns"]), N)
    trace_cols = np.unique(np.linspace(0, N - 1, n_trace).astype(np.int64)) if n_trace else ()
    opts = dict(block_size=p["block_size"], n_threads=p["n_threads"], trace_cols=trace_cols)
    backends = [MemoryBackend(X, **opts) if mask is None else MaskedMemoryBackend(X, mask, **opts)
                for _ in range(p["n_chains"])]

    def chain(c):
        return run_chain(backends[c], cfg, entropy, chain=c,
                         J0=_initial_columns(X, p, entropy, c), callback=callback)

    # chains are independent streams: run them side by side (the kernels release the GIL)
    if p["n_chains"] > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(p["n_chains"]) as pool:
            outputs = list(pool.map(chain, range(p["n_chains"])))
    else:
        outputs = [chain(0)]
    try:
        return _summarise(p, outputs, backends, entropy, (M, N), trace_cols,
                          lambda cols, W: backends[0].sse(cols, W), mask=mask)
    finally:
        for be in backends:
            be.close()


def _traced_draws(backends, key, n_keep, K, trace_cols):
    vals = np.full((len(backends), n_keep, K, len(trace_cols)), np.nan)
    for c, be in enumerate(backends):
        col_pos = 0
        for blk in be.traces():
            if not blk:
                continue
            width = blk[0][1].shape[1]
            for d, (k, w) in enumerate(blk):
                if k == key:
                    vals[c, d, :, col_pos:col_pos + width] = w
            col_pos += width
    return {"columns": np.asarray(trace_cols, dtype=np.int64), "values": vals}


def _summarise(p, outputs, backends, entropy, shape, trace_cols, sse_fn, mask=None):
    """Point estimate and summaries of finished chains (see ``bayesian_id``'s Notes).

    With ``refine_sweeps > 0`` the first backend's blocks are re-initialised for the
    reported basis and swept with it fixed; everything else is read from the blocks
    before that.
    """
    M, N = shape
    K = p["n_components"]
    counts, best = {}, {}
    for o in outputs:
        for k, v in o.state.set_counts.items():
            counts[k] = counts.get(k, 0) + v
            best[k] = min(best.get(k, np.inf), o.state.set_best[k])
    key = _point_estimate(p, counts, best)
    cols = np.asarray(key, dtype=np.int64)
    dJ = np.stack([np.asarray(o.state.draws_J, dtype=np.int64).reshape(-1, K) for o in outputs])
    draws_w = _traced_draws(backends, key, dJ.shape[1], K, trace_cols) if len(trace_cols) \
        else None
    n_tot, s, s2 = 0, np.zeros((K, N)), np.zeros((K, N))
    for be in backends:
        n, mean, sd = be.posterior(key)
        if n:
            s += n * mean
            s2 += (n - 1) * sd**2 + n * mean**2
            n_tot += n
    n_refine = int(p.get("refine_sweeps", 0))
    cfg = _chain_config(p)
    sigma2_hat = float(np.mean([np.mean(o.state.draws_sigma2) for o in outputs]))
    if n_refine:
        _, W, sd, s2_ref = refine(backends[0], cfg, entropy, key, n_refine)
        sigma2_hat = float(np.mean(s2_ref))
    else:
        W = s / n_tot
        var = np.maximum(s2 / n_tot - W * W, 0.0) * (n_tot / max(n_tot - 1, 1))
        sd = np.sqrt(var)
    if p.get("w_estimate", "mean") == "map":
        W, _ = map_estimate(backends[0], cfg, entropy, key, sigma2_hat,
                            started=bool(n_refine))
    a, b = p["priors"].a, p["priors"].b
    np.clip(W, a, b, out=W)
    W[:, cols] = np.eye(K)
    sd[:, cols] = 0.0
    sse_all, sse_obs = sse_fn(cols, W)
    trace = np.empty((len(outputs), p["n_iter"]), dtype=TRACE_DTYPE)
    for c, o in enumerate(outputs):
        trace["mse"][c] = o.state.trace_mse
        trace["sigma2"][c] = o.state.trace_sigma2
        trace["accepted"][c] = o.state.trace_accepted
        trace["accept_prob"][c] = o.state.trace_accept_prob
    ds2 = np.stack([np.asarray(o.state.draws_sigma2) for o in outputs])
    dsse = np.stack([np.asarray(o.state.draws_sse) for o in outputs])
    incl = np.zeros(N)
    np.add.at(incl, dJ.reshape(-1), 1.0)
    incl /= dJ.shape[0] * dJ.shape[1]
    n_entries = M * N
    params = {k: v for k, v in p.items() if k not in ("priors", "random_state")}
    params["bounds"] = [a, b]
    params["entropy"] = str(entropy)
    params["versions"] = _versions()
    return BIDResult(
        columns=cols, components=W, components_sd=sd, sigma2=float(ds2.mean()),
        inclusion_probability=incl, trace=trace, draws_columns=dJ, draws_sigma2=ds2,
        draws_sse=dsse, n_draws_point=int(n_tot), mse=sse_all / n_entries,
        mse_observed=None if sse_obs is None or mask is None else sse_obs / int(mask.sum()),
        max_abs_w=float(np.abs(W).max()),
        n_passes=sum(o.state.n_passes for o in outputs),
        elapsed=sum(o.state.elapsed for o in outputs), n_samples=M, n_features=N,
        params=params, draws_w=draws_w)
