"""``BayesianID``: the scikit-learn style estimator."""

from __future__ import annotations

import numpy as np

from .._errors import NotFittedError, ParameterError, sklearn_flavoured
from ._sklearn import (
    check_features,
    estimator_tags,
    feature_names,
    feature_names_out,
    is_scipy_sparse,
    reconstruct,
    reconstruction_mse,
    refuse_non_finite,
    refuse_sparse,
    result_names,
    set_feature_names,
    set_output,
    sparse_reconstruction_mse,
    sparse_selected_columns,
    wrap_output,
)
from .functional import DEFAULTS, bayesian_id

__all__ = ["BayesianID"]


class BayesianID:
    """Bayesian interpolative decomposition A ~ A[:, J] W, every |W| <= 1 (Lu, 2022).

    Markov chain Monte Carlo for the GBT or GBTN model: W has a truncated-normal (GTN)
    prior on ``bounds``, sigma^2 an inverse-gamma prior, J is uniform over the sets of K
    columns, and A = A[:, J] W + Gaussian noise of variance sigma^2. W and sigma^2 are
    drawn from their exact full conditionals (Gibbs sampling); the basis J moves by
    column swaps. A GTN(mu, 1/tau, a, b) is a normal with mean mu and precision tau
    restricted to [a, b]; GTNSNG is the paper's hyperprior on (mu, tau) (a normal for mu,
    a gamma for tau). Barker's rule accepts a move with probability o / (1 + o), o the
    odds of the move under the target.

    Parameters
    ----------
    n_components : int
        K, the number of columns of A kept in the basis (1 <= K < N).
    model : {"gbt", "gbtn"}, default="gbt"
        GBT fixes the GTN parent mean and precision of every entry (``mu``, ``tau``);
        GBTN gives them the GTNSNG hyperprior (``mu_mu``, ``tau_mu``, ``alpha_t``, ``beta_t``).
    sampler : {"collapsed", "plain", "aggressive", "search"}, default="collapsed"
        How the basis J moves; what each chain targets:

        - ``"collapsed"``: exact. Each iteration makes ``n_pivot`` pivot swaps (a slot
          moves to a random column while the other rows of W follow it) and
          ``n_redraw`` redraw swaps (a slot moves and all of W is redrawn), then picks a
          slot k of J and a random set of ``n_tries`` columns outside J and chooses
          among them and the slot's current column by their marginal likelihood with
          row k of W integrated out (closed form); row k is then drawn from its exact
          conditional, W swept, sigma^2 drawn; every ``anneal_every`` iterations an
          annealed swap. Every move is a Metropolis-Hastings or Gibbs move for the
          posterior p(J, W, sigma^2 | A) of the paper's model, which is what the
          retained chain targets (the tempered warm-up, within burn-in, is discarded).
        - ``"plain"``: the paper's Algorithm 1, exact for the same posterior, but the
          incoming column's row of W is a prior draw, so swaps are rarely accepted: the
          chain barely moves on real data.
        - ``"aggressive"``: the paper's Algorithm 2, reproduced bit for bit
          (``PAPER_SETTINGS``). Barker's rule on the SSE of two independent W draws is not
          a Metropolis-Hastings ratio: the chain has no known stationary distribution.
        - ``"search"``: an optimisation, not a sampler: Algorithm 2 comparing bases by the
          SSE S(J) of their clipped least-squares W. At fixed sigma^2 the basis chain is
          reversible for exp(-S(J) / 2 sigma^2), a profile likelihood, not p(J | A).

        ``inclusion_probability_``, R-hat and ESS are posterior quantities for
        ``"collapsed"`` and ``"plain"`` only; for the others they describe the search.
    n_tries : int or "all", default=8
        ``sampler="collapsed"``: candidate columns per slot update (capped at N - K). One
        candidate with ``acceptance="barker"`` is the single-proposal move of MODEL_NOTES
        section 8; more candidates move further per iteration at O(K N) each; "all"
        draws the slot from its full conditional (needs every row of A^T A: 8 N^2 bytes).
    acceptance : {"metropolis", "barker"}, default="metropolis"
        ``sampler="collapsed"``: "barker" draws the slot among {current} + candidates in
        proportion to their weights (Gibbs over the set; Barker's rule for one candidate);
        "metropolis" proposes a candidate in proportion to its weight and accepts with
        min(1, (Z - w_current) / (Z - w_candidate)) (Metropolised Gibbs, which moves more
        often). Both leave the posterior invariant.
    n_pivot : int, default=8
        ``sampler="collapsed"``: pivot swaps per iteration. Slot k (uniform) moves to a
        uniform column u outside J; the other columns' rows of W other than k follow an
        affine map (what the outgoing column explained is re-expressed in the new basis),
        their row k is integrated out and redrawn, and the two swapped columns of W get
        fresh proposals (a sequence of truncated conditionals, GHK); the exact
        Metropolis-Hastings ratio, Jacobian included, accepts or rejects (docs/model.md,
        "The pivot swap"). The collapsed swap alone, at fixed W_{-k}, accepts only
        near-copies of the outgoing column; this move crosses between genuinely
        different bases. Each costs O(K^2 N), about one sweep; 0 turns it off. With
        ``missing="mask"`` every column gets its own map and Jacobian from its observed
        rows (O(K^3 N) an attempt, and on the Dask engine one more pass over A per
        iteration to get the incoming columns' products).
    n_redraw : int or "auto", default="auto"
        ``sampler="collapsed"``: redraw swaps per iteration. Slot k (uniform) moves to a
        uniform column u outside J and every column of W is drawn afresh from its GHK
        proposal under the new basis (each column's Gaussian full conditional, its
        coordinates drawn in order and truncated to the box); the exact
        Metropolis-Hastings ratio of this independence proposal (the columns' GHK
        weights, new under J' against current under J) accepts or rejects, so the chain
        still targets p(J, W, sigma^2 | A) (docs/model.md, "The redraw swap"). It reaches
        bases where W_{-k} must change in a way the pivot's map does not give; each costs
        two K x K factorisations per column (per block for dense GBT); with
        ``missing="mask"`` the products it needs come with the pivot swap's pass over A.
        "auto": 4 for ``missing="mask"`` with K <= 16 (where masked chains got stuck
        without it, docs/performance.md "Masked fits"), else 0.
    n_anneal : int, default=10
        ``sampler="collapsed"``: steps of the annealed swap (a slot moves to a random
        column while W follows through ``n_anneal`` intermediate distributions; accepted
        by its exact nonequilibrium Metropolis-Hastings rule); 0 turns it off. It costs
        ``n_anneal`` sweeps of W.
    anneal_every : int, default=5
        ``sampler="collapsed"``: iterations between annealed swaps.
    search_warmup : int or "auto", default=0
        ``sampler="collapsed"``: the first ``search_warmup`` iterations (at most
        ``burn_in``, so always discarded; "auto": half the burn-in) run the least-squares search of
        ``sampler="search"``, which leaves a poor start faster; the chain is the exact
        sampler from the state it reaches. It changes where the chain starts, not what it
        targets. 0 (default) turns it off. It finds better modes (a lower reported
        error) and leaves a random start, but it also takes chains from a common start
        into different local modes (see docs/performance.md, "Mixing").
    tempered_warmup : int or "auto", default="auto"
        ``sampler="collapsed"``: during the first ``tempered_warmup`` iterations (at most
        ``burn_in``, so always discarded; "auto": three quarters of the burn-in) the
        swaps' log-odds are divided by a temperature that falls geometrically from
        ``warmup_temperature`` to 1 (simulated annealing of the basis; W and sigma^2 are
        drawn from their exact conditionals throughout). The retained chain is the exact
        sampler, targeting p(J, W, sigma^2 | A), from the state the warm-up reached: it
        changes where the chain starts, not what it targets. During it, no swap brings
        in a column in the span of the other basis columns (a copy of one of them).
        With the pivot swaps it brings chains from dispersed starts to the same bases
        (docs/performance.md, "Mixing"). 0 turns it off; "auto" is 0 when
        ``search_warmup`` is given (the two are not combined).
    warmup_temperature : float, default=100.0
        The first temperature of ``tempered_warmup`` (>= 1).
    n_iter : int, default=1000
        Iterations of each chain (each: the sampler's swap moves, with the default
        ``"collapsed"`` the pivot, redraw, collapsed and annealed swaps; one sweep of W;
        one sigma^2 draw); the first ``burn_in`` are discarded. Time grows linearly with
        it.
    burn_in : int, default=200
        Iterations discarded first.
    thin : int, default=1
        Draws ``burn_in, burn_in + thin, ...`` are retained.
    bounds : (float, float), default=(-1.0, 1.0)
        (a, b) bounds of every W entry; (-2, 2) gives the paper's weak ID.
    alpha_sigma, beta_sigma : float, default=0.1, 1.0
        Inverse-gamma prior of sigma^2.
    mu, tau : float, default=0.0, 1.0
        GBT: GTN parent mean and precision of each W entry.
    mu_mu, tau_mu, alpha_t, beta_t : float, default=0.0, 0.1, 1.0, 1.0
        GBTN hyperprior.
    init : {"auto", "random", "sketch", "cpqr"} or array of K ints, default="auto"
        Starting basis: uniformly random (the paper; with ``sampler="collapsed"`` a
        uniformly random basis of full rank, redrawn up to 20 times, one pass over A
        each, while a column lies in the span of the others), the randomized ID of a Gaussian
        sketch, a deterministic pivoted-QR ID, or given columns. "auto" is "cpqr" while
        its triangular factor is cheap (N <= 10,000 and 2 M N^2 <= 2e11 flops) and
        "sketch" (one pass over A) beyond. Except with "random", W starts at the
        least-squares fit for the starting basis clipped to ``bounds`` (else its prior).
    point_estimate : {"mode", "best"}, default="best"
        How the basis J is reported; see Notes.
    temperature : float, default=1.0
        Swap acceptance uses log-odds / temperature (1 = the paper). Any other value
        changes the target: the chain then samples no posterior, and its convergence is
        not judged (no ``ConvergenceWarning``; the repr says "not judged").
    n_chains : int, default=1
        Independent chains, each from its own starting basis (with ``init="random"``) and
        random stream; several are needed for split R-hat, and chains that disagree show
        that the sampler has not mixed. They run side by side in threads in memory and
        concurrently on a cluster.
    proposal_init : {"copy", "lstsq"}, default="copy"
        Aggressive sampler: the proposal's W starts as a copy of the current W (the
        paper) or as the least-squares fit for the proposed basis clipped to ``bounds``;
        either way it then gets one Gibbs sweep given the proposed columns.
    n_candidates : int or "auto", default="auto"
        Swap candidates whose rows of A^T A are computed per streaming pass. Every
        proposal needs its own row however they are batched, so a larger batch costs
        memory (8 N bytes a row), not arithmetic, and saves passes over A; the chain
        is the same for every batch size. "auto": as many as half the smallest worker
        memory limit holds (512 MiB without a known limit), at most every row of A^T A
        (docs/engine.md, "Candidate batches"). Not used with a candidate pool (then
        each draw of the pool computes its rows in one pass).
    candidate_pool : int, "auto" or None, default="auto"
        Where the swap candidates come from. None: every column outside J. An integer
        m: a pool S of m columns, J and m - K others drawn uniformly, redrawn given the
        current J every ``pool_every`` iterations; every move's candidates are the
        columns of S outside J, whose rows of A^T A one pass computes per draw of S
        (instead of one row per proposal: ~17 per default iteration). The chain still
        targets the same posterior p(J, W, sigma^2 | A) (S is an auxiliary variable,
        uniform given J; docs/model.md, "The candidate pool"), but a column outside the
        current pool cannot enter J until S is redrawn, so the chain explores the
        columns more slowly. "auto": no pool for N <= 16,384 columns; above, a pool of
        512 columns for ``sampler="collapsed"``. The pool never depends on the cluster's
        memory (the same seed gives the same chain anywhere); a pool whose rows do not
        fit half the smallest worker memory limit is refused before any pass.
    pool_every : int or "auto", default="auto"
        Iterations between draws of the candidate pool ("auto": ``ceil(n_iter / 3)``,
        three draws per chain, the first with the pass that computes H).
    block_size : int or None
        Columns per block of W. None: in memory, ``n_threads`` equal blocks; on the Dask
        engine, blocks that follow the input's column chunks (docs/engine.md, "Layout").
        Each block draws from its own random stream, so the layout is part of what a
        seed reproduces: give ``block_size`` for the same chain in memory and on a
        cluster, or with another ``n_threads``.
    n_threads : int, default=2
        Threads sweeping blocks in memory; with ``block_size=None`` also the number of
        blocks, so another ``n_threads`` gives another chain (see ``block_size``). Not
        used on the Dask engine (its workers' threads run the blocks).
    missing : {"zero", "mask"}, default="zero"
        "zero": A must be finite; NaN or infinity is refused (the paper fills missing
        entries with 0 after standardising). "mask": a NaN is a missing entry, left out of
        the likelihood, in memory and on the Dask engine (docs/engine.md, "Missing
        entries"; or pass ``mask=``, a boolean array of A's shape, to ``fit``); a basis
        column's own missing entries count as 0 in C W (docs/model.md, "The masked
        likelihood"); infinity is still refused.
    n_trace_columns : int, default=10
        Number of evenly spaced columns whose W draws are kept for diagnostics.
    trace_columns : sequence of int or str, optional
        The columns whose W draws are kept, instead of ``n_trace_columns`` evenly spaced
        ones (at most 1000), by index or by name (where A's columns are named: a
        DataFrame, ``feature_names=``, a Zarr input's recorded names): their credible
        intervals come from ``result_.w_intervals(prob)``, their draws from
        ``to_inference_data()``. Does not change the chain.
    refine_sweeps : int, default=20
        After the chain, Gibbs sweeps of W with the reported basis fixed (started from its
        clipped least-squares fit); the sd of W (and W with ``w_estimate="mean"``) is then
        that of those sweeps. 0 (the paper) summarises the chain's own retained draws with
        the basis instead, where the blocks kept the sums of all of them (else, or when
        none had it, 20 such sweeps are made all the same).
    w_estimate : {"mean", "map", "lstsq"}, default="lstsq"
        The reported W for the reported basis: the posterior mean, the posterior mode
        given the basis and sigma^2 (iterated conditional modes, converged; sigma^2 the
        mean of the ``refine_sweeps`` draws with the basis fixed, else ``sigma2_``), or
        the exact box-constrained least squares, the W with |W| <= 1 that minimises
        ||A - C W||^2 (the posterior mode under a flat prior on the box; the lowest
        error any W with the bounds can reach with this basis).
    random_state : None, int, SeedSequence, Generator or RandomState
        The same seed and block layout (``block_size``) give the same chains bit for bit,
        whatever runs them (any number of threads, the synchronous scheduler, any
        cluster, a resumed run). The children of ``SeedSequence.spawn`` give independent
        chains (the spawn key counts, not only the shared entropy). The default layouts
        of a fit in memory and of one on the Dask engine differ (see ``block_size``):
        with the same seed they give different chains, alike in distribution, unless
        ``block_size`` is given. A Generator or a
        legacy RandomState is drawn from once for the seed. With None, the entropy used
        is stored in ``result_.params["entropy"]`` (and in ``out``), so any fit can be
        reproduced: it is a decimal string (JSON holds no 128-bit integer), so pass
        ``random_state=int(result_.params["entropy"])``.

    Attributes
    ----------
    columns_ : (K,) ndarray of int64
        Sorted indices J of the selected columns.
    components_ : (K, N) ndarray
        W, with W[:, columns_] = I and max |W| <= bound.
    components_sd_ : (K, N) ndarray
        Posterior standard deviation of W for the reported basis: a Monte Carlo
        estimate from the ``refine_sweeps`` sweeps (of the chain's retained draws in that
        basis when 0). From n draws an sd is estimated to about 1/sqrt(2 n) relative
        error at best (16 % for the default 20; more, as successive sweeps are
        correlated): a rough scale, not an interval. Raise ``refine_sweeps`` for a closer
        one; ``w_intervals`` gives quantiles from the chain's draws for the traced columns.
    sigma2_ : float
        Posterior mean of the noise variance.
    inclusion_probability_ : (N,) ndarray
        Share of retained draws in which each column is in J: an estimate of
        P(column in J | A) with the exact samplers ("collapsed", "plain"); a visit
        frequency of the search otherwise. Its Monte Carlo standard error, per column:
        ``result_.inclusion_mcse()``.
    trace_ : structured ndarray (n_chains, n_iter)
        Fields ``mse``, ``sigma2``, ``accepted``, ``accept_prob`` per iteration.
    convergence_ : Convergence
        Split R-hat and bulk ESS of the retained sigma^2 and SSE draws and the verdict
        (``converged``: R-hat <= 1.01 with 2+ chains, bulk ESS >= 100 per chain;
        ``problems``). A fit of an exact sampler that fails it warns
        (``ConvergenceWarning``); docs/diagnostics.md, "Convergence". For the
        ``"aggressive"`` and ``"search"`` samplers the numbers are computed but judge
        nothing: those chains target no known posterior, so ``converged`` only says that
        the thresholds were met (the repr and ``dask-bid info`` say "not judged").
    mse_ : float
        ||A - A[:, J] W||^2 / (M N) of the point estimate, computed directly. With
        ``missing="mask"`` a missing entry counts as 0 here (as in the paper's fill).
    mse_observed_ : float or None
        With ``missing="mask"``: the same error over the observed entries only (divided
        by their count), the one the masked model fits; None otherwise.
    max_abs_w_ : float
        max |W|, at most the bound.
    n_features_in_ : int
        N, the number of columns of the matrix fitted.
    n_samples_ : int
        M, its number of rows.
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        The column names of A: defined only when A had names that are all strings (a
        DataFrame's, or those a Zarr input records; see ``BIDResult.feature_names``).
    result_ : BIDResult
        Everything the fit produced, including the retained draws.

    Notes
    -----
    The sampler is described in ``docs/model.md``. The reported basis J is the visited
    basis (any chain, burn-in included) with the lowest exact box-constrained
    least-squares SSE (``"best"``; never lost, however many bases are visited), or the
    one of the most retained draws (``"mode"``: the posterior mode of J estimated by the
    chain, with the exact samplers). W is then the box-constrained least-squares fit given J
    (``w_estimate="lstsq"``), the posterior mode given J and sigma^2 (``"map"``) or the
    posterior mean (``"mean"``: of ``refine_sweeps`` sweeps with J fixed, or of the
    chain's retained draws with that basis when ``refine_sweeps=0``).

    The defaults of ``sampler``, ``init``, ``point_estimate``, ``w_estimate`` and
    ``refine_sweeps`` replace the paper's sampler by an exact one and improve its
    summary (see ``docs/results.md``);
    ``dask_bid.PAPER_SETTINGS`` holds the paper's exact choices:
    ``BayesianID(K, **PAPER_SETTINGS)``.

    Examples
    --------
    >>> import numpy as np
    >>> from dask_bid import BayesianID
    >>> rng = np.random.default_rng(0)
    >>> C = rng.standard_normal((50, 3))
    >>> A = C @ rng.uniform(-1, 1, (3, 12)) + 0.01 * rng.standard_normal((50, 12))
    >>> est = BayesianID(3, n_iter=60, burn_in=20, thin=2, random_state=0).fit(A)
    >>> est.components_.shape
    (3, 12)
    """

    def __init__(self, n_components, *, model="gbt", sampler="collapsed", n_tries=8,
                 acceptance="metropolis", n_pivot=8, n_redraw="auto", n_anneal=10,
                 anneal_every=5,
                 search_warmup=0, tempered_warmup="auto", warmup_temperature=100.0,
                 n_iter=1000,
                 burn_in=200, thin=1,
                 bounds=(-1.0, 1.0), alpha_sigma=0.1, beta_sigma=1.0, mu=0.0, tau=1.0,
                 mu_mu=0.0, tau_mu=0.1, alpha_t=1.0, beta_t=1.0, init="auto",
                 point_estimate="best", temperature=1.0, n_chains=1, proposal_init="copy",
                 n_candidates="auto", candidate_pool="auto", pool_every="auto",
                 block_size=None, n_threads=2, missing="zero", n_trace_columns=10,
                 trace_columns=None, refine_sweeps=20, w_estimate="lstsq", random_state=None):
        self.n_components = n_components
        self.model = model
        self.sampler = sampler
        self.n_tries = n_tries
        self.acceptance = acceptance
        self.n_pivot = n_pivot
        self.n_redraw = n_redraw
        self.n_anneal = n_anneal
        self.anneal_every = anneal_every
        self.search_warmup = search_warmup
        self.tempered_warmup = tempered_warmup
        self.warmup_temperature = warmup_temperature
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.bounds = bounds
        self.alpha_sigma = alpha_sigma
        self.beta_sigma = beta_sigma
        self.mu = mu
        self.tau = tau
        self.mu_mu = mu_mu
        self.tau_mu = tau_mu
        self.alpha_t = alpha_t
        self.beta_t = beta_t
        self.init = init
        self.point_estimate = point_estimate
        self.temperature = temperature
        self.n_chains = n_chains
        self.proposal_init = proposal_init
        self.n_candidates = n_candidates
        self.candidate_pool = candidate_pool
        self.pool_every = pool_every
        self.block_size = block_size
        self.n_threads = n_threads
        self.missing = missing
        self.n_trace_columns = n_trace_columns
        self.trace_columns = trace_columns
        self.refine_sweeps = refine_sweeps
        self.w_estimate = w_estimate
        self.random_state = random_state

    def get_params(self, deep=True):
        return {k: getattr(self, k) for k in ("n_components", *DEFAULTS)}

    def set_params(self, **params):
        """Set constructor parameters (validated at the next ``fit``); an unknown name is
        refused with the nearest known one and the list (``ParameterError``, a
        ``ValueError`` as scikit-learn's)."""
        known = self.get_params()
        for k, v in params.items():
            if k not in known:
                import difflib

                near = difflib.get_close_matches(k, list(known), 1)
                raise ParameterError(
                    f"unknown parameter {k!r} for BayesianID"
                    + (f" (did you mean {near[0]!r}?)" if near else "")
                    + f"; valid: {', '.join(known)}")
            setattr(self, k, v)
        return self

    def __repr__(self):
        changed = {k: v for k, v in self.get_params().items()
                   if k == "n_components" or not _same(v, DEFAULTS.get(k))}
        args = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        return f"BayesianID({args})"

    def fit(self, A, y=None, **fit_kwargs):
        """Run the sampler on A (M x N) and store the point estimate.

        Parameters
        ----------
        A : array-like (M, N)
            A numpy array (fitted in memory), or a dask array, ``zarr.Array``, or the
            path or fsspec URL of a Zarr array ("A.zarr", "s3://bucket/A.zarr", with
            ``storage_options`` for credentials), fitted out of core by streaming row
            tiles through the Dask engine. A Zarr group is refused, naming its arrays.
            With ``missing="mask"`` also sparse input: a ``scipy.sparse`` matrix or the
            path of a sparse store, whose stored entries are the observed ones
            (docs/sparse.md).
        y : ignored
        **fit_kwargs
            Engine options: ``client``, ``out``, ``overwrite``, ``resume``,
            ``checkpoint_every``, ``chunks``, ``storage_options``, ``callback``,
            ``allow_missing_chunks``, ``keep_final_state``, and with
            ``missing="mask"`` ``mask`` (True: observed) (see
            :func:`dask_bid.engine.fit_dask`); ``progress=True``, a
            progress bar over the chains' iterations (a notebook widget or text on
            stderr); ``feature_names``, the N
            column names of a Zarr or numpy input (set as ``feature_names_in_``; see
            :func:`dask_bid.bayesian_id`).

        Returns
        -------
        self
        """
        # missing="mask" (any case, as validated) fits sparse input (docs/sparse.md)
        if str(self.missing).lower() != "mask":
            refuse_sparse(A, mask_hint=True)
        names = feature_names(A)
        params = self.get_params()
        K = params.pop("n_components")
        res = bayesian_id(A, K, **params, **fit_kwargs)
        self._set_result(res)
        # a DataFrame's names, else those recorded on a Zarr input (a converted text file)
        set_feature_names(self, names if names is not None else result_names(res),
                          from_frame=names is not None)
        return self

    def _set_result(self, res):
        # what open_result set beside the fitted attributes describes the store it read:
        # a refit (of other data) keeps none of it (C_ stayed the old store's columns)
        for name in ("C_", "store_path_"):
            self.__dict__.pop(name, None)
        self.result_ = res
        self.columns_ = res.columns
        self.components_ = res.components
        self.components_sd_ = res.components_sd
        self.sigma2_ = res.sigma2
        self.inclusion_probability_ = res.inclusion_probability
        self.trace_ = res.trace
        self.convergence_ = res.convergence()
        self.mse_ = res.mse
        self.mse_observed_ = res.mse_observed
        self.max_abs_w_ = res.max_abs_w
        self.n_features_in_ = res.n_features
        self.n_samples_ = res.n_samples

    def _check_fitted(self):
        if not hasattr(self, "components_"):
            raise sklearn_flavoured(NotFittedError)(
                "this BayesianID is not fitted yet: call fit(A) first.")

    def transform(self, A):
        """C = A[:, columns_]: numpy (the input's dtype) for numpy input, a lazy float64
        dask array for dask, Zarr or path input; a DataFrame after
        ``set_output(transform="pandas")``. With ``missing="mask"``, a scipy.sparse A
        (as ``fit`` takes it) gives a dense float64 C with NaN at its unstored entries."""
        self._check_fitted()
        if self._sparse_in_mask(A):
            return wrap_output(self, A, sparse_selected_columns(A, self.columns_))
        src = self._checked_source(A)
        if src.kind == "numpy":
            return wrap_output(self, A, np.asarray(src.array)[:, self.columns_])
        return wrap_output(self, A, src.to_dask()[:, self.columns_])

    def set_output(self, *, transform=None):
        """What ``transform`` and ``fit_transform`` return: ``"default"`` (numpy, or a
        lazy dask array for out-of-core input), ``"pandas"`` (a DataFrame with the
        input's index and the selected columns' names; computed for out-of-core input);
        None leaves it as it is, and ``"polars"`` is refused. scikit-learn's
        ``set_output`` API (``Pipeline.set_output`` uses it); without it, scikit-learn's
        global ``transform_output`` applies. Returns self."""
        return set_output(self, transform)

    def inverse_transform(self, C):
        """C @ W: the reconstruction of A (M x N) from its selected columns.

        ``C`` (M x K, what ``transform`` returns) may be numpy (numpy result) or dask /
        Zarr / path (a lazy dask result); another shape is refused (``InputShapeError``).
        With ``missing="mask"``, NaN in ``C`` (a missing entry of a basis column) counts
        as 0, as in the fit and in ``score``: every entry of the result is then a
        reconstruction, the missing ones of A included (an imputation).
        """
        self._check_fitted()
        return reconstruct(C, self.components_, masked=self._masked)

    def fit_transform(self, A, y=None, **fit_kwargs):
        """``fit(A)`` then ``transform(A)``."""
        return self.fit(A, **fit_kwargs).transform(A)

    def to_inference_data(self):
        """The retained draws of the fit as an ``arviz.InferenceData`` (``arviz`` extra).

        See :func:`dask_bid.interface.diagnostics.to_inference_data`.
        """
        self._check_fitted()
        return self.result_.to_inference_data()

    # -- scikit-learn protocol (see docs/sklearn.md) ----------------------------------------
    @property
    def _masked(self) -> bool:
        """``missing="mask"`` (any case): NaN marks a missing entry."""
        return str(self.missing).lower() == "mask"

    def _sparse_in_mask(self, A):
        """A scipy.sparse ``A`` for a ``missing="mask"`` model (the input its fit takes:
        the stored entries are the observed ones), its column count checked."""
        if not (is_scipy_sparse(A) and self._masked):
            return False
        check_features(self, A)
        return True

    def _checked_source(self, A, mask=None):
        """``A`` as a MatrixSource, refused unless it has the fitted columns (and is
        finite, for numpy input, unless ``missing="mask"``); read with NaN where ``mask``
        is False when one is given (as ``fit`` reads it)."""
        from ..engine.inputs import as_matrix_source, with_mask

        refuse_sparse(A)
        check_features(self, A)
        src = as_matrix_source(A)
        check_features(self, A, src.shape[1])
        if mask is not None:
            if not self._masked:
                raise ParameterError("mask= marks the observed entries, which only "
                                     "missing='mask' uses: this model was fitted with "
                                     f"missing={self.missing!r}.")
            src = with_mask(src, mask)
        if src.kind == "numpy":
            refuse_non_finite(src.array, self._masked)
        return src

    def score(self, A, y=None, mask=None):
        """Negative mean squared reconstruction error, ``-||A - A[:, J] W||^2 / (M N)``.

        Greater is better, as scikit-learn's model selection (``GridSearchCV``,
        ``cross_val_score``) expects; ``-score(A_train)`` equals ``mse_`` (up to rounding). With
        ``missing="mask"`` the mean is over the observed (non-NaN) entries, and NaN counts
        as 0 where it enters ``C = A[:, J]``: ``-score(A_train)`` then equals
        ``mse_observed_``; a scipy.sparse A (as ``fit`` takes it) is scored over its
        stored entries, the observed ones.

        Parameters
        ----------
        A : array-like, dask array, Zarr array or path (M, N)
            A matrix with the N columns the model was fitted on (rows may differ).
        y : ignored
        mask : array-like of bool (M, N), optional
            With ``missing="mask"``: True marks the observed entries, as ``fit(A,
            mask=...)`` takes it (a model fitted with a mask is scored with the same
            mask; without one every non-NaN entry counts as observed). In
            cross-validation, marking the missing entries with NaN instead needs no
            mask to be routed to ``score``.

        Returns
        -------
        float
        """
        self._check_fitted()
        if self._sparse_in_mask(A):
            if mask is not None:
                raise ParameterError("mask= does not apply to a scipy.sparse X: its stored "
                                     "entries are the observed ones; drop mask=.")
            return -sparse_reconstruction_mse(A, self.columns_, self.components_)
        src = self._checked_source(A, mask)
        return -reconstruction_mse(src, self.columns_, self.components_,
                                   masked=self._masked)

    def get_feature_names_out(self, input_features=None):
        """Names of the columns ``transform`` returns: the input names at ``columns_``.

        Parameters
        ----------
        input_features : array-like of str, optional
            Names of the N input columns; default ``feature_names_in_`` (fitted on a
            DataFrame with string column names), else ``x0 ... x{N-1}``.

        Returns
        -------
        ndarray of object, shape (K,)
        """
        return feature_names_out(self, input_features)

    def __sklearn_tags__(self):
        masked = self._masked
        # missing="mask" fits sparse input too (its stored entries observed, docs/sparse.md)
        return estimator_tags(allow_nan=masked, sparse=masked)


def _same(a, b):
    try:
        return bool(np.all(a == b)) and type(a) is type(b)
    except Exception:
        return False
