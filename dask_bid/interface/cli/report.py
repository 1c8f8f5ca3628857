"""The summary lines a fit prints (``fit`` and ``demo``)."""

from __future__ import annotations

import numpy as np

from ._core import fmt_g, sampler_label, short_list

__all__ = ["result_lines", "accepted_line", "chain_time_line", "convergence_line",
           "unvisited_basis_line", "mse_words", "sigma2_words",
           "sigma2_interval90"]


def accepted_line(share) -> str:
    """The share of accepted swaps, and what it means."""
    return (f"accepted     {share:.1%} of the swap proposals (iterations whose proposed "
            "change of one basis column was taken, burn-in included; a low share means the "
            "basis has settled, or that a chain is stuck: compare chains)")


def chain_time_line(seconds, n_chains, continued=False, resumed=False) -> str:
    """Sampling time summed over the chains (they may run side by side: compare the wall
    time for what the run took), and over the runs of a continued or resumed fit (the
    chain's time is kept in its checkpoints)."""
    per = "" if n_chains == 1 else f", summed over {n_chains} chains"
    runs = (", all runs of the continued fit" if continued else
            ", all runs of the fit" if resumed else "")
    return f"chain time   {seconds:.1f} s sampling{per}{runs}"


def convergence_line(conv, sampler, label="convergence  ") -> str:
    """Split R-hat and bulk ESS of sigma2 and the SSE (a ``Convergence``), and the verdict
    of the check (not judged for the search samplers)."""
    from ...engine.convergence import ESS_PER_CHAIN_MIN, RHAT_MAX
    from ...engine.summary import EXACT_SAMPLERS

    c = conv
    if c.n_draws < 4 and sampler in EXACT_SAMPLERS:
        # no statistic to show (R-hat and ESS need 4 draws a chain): the warning's words
        return (f"{label}{c.n_draws} retained draws per chain, too few to judge: FAILED: not "
                "yet posterior summaries")
    r = ("" if c.n_chains < 2 else
         f"split R-hat {c.r_hat_sigma2:.3f} (sigma2), {c.r_hat_sse:.3f} (SSE); ")
    verdict = ("passed" if c.converged else "FAILED: not yet posterior summaries")
    if c.converged and c.n_chains < 2:
        # one chain cannot show that chains from other starts would end elsewhere
        verdict = "passed (ESS only: --resume --n-chains 4 adds chains to compare)"
    if sampler == "tempered":
        verdict = ("not judged: a chain whose swaps run at a temperature other than 1 "
                   "targets no posterior")
    elif sampler not in EXACT_SAMPLERS:
        verdict = ("not judged: this sampler targets no known posterior (aggressive: the "
                   "paper's Algorithm 2; search: an optimisation)")
    # one chain has no R-hat: the wanted part names only what was checked
    wanted = (f"R-hat <= {RHAT_MAX}, " if c.n_chains >= 2 else "") + \
        f"ESS >= {ESS_PER_CHAIN_MIN * max(c.n_chains, 1)}"
    return (f"{label}{r}bulk ESS {c.ess_bulk_sigma2:.0f} (sigma2), {c.ess_bulk_sse:.0f} (SSE) "
            f"(wanted: {wanted}): {verdict}")


def unvisited_basis_line(draws_columns, n_draws_point, label="             ") -> str | None:
    """When no retained draw has the reported basis (the lowest least-squares SSE the
    chains visited, in burn-in only), say so and name the retained draws' most frequent
    basis, which ``--point-estimate mode`` reports; None otherwise."""
    if n_draws_point or draws_columns is None:
        return None
    d = np.asarray(draws_columns)
    if d.size == 0:
        return None
    bases, counts = np.unique(d.reshape(-1, d.shape[-1]), axis=0, return_counts=True)
    top = int(np.argmax(counts))
    return (f"{label}(the lowest SSE the chains visited, in burn-in only: no retained draw "
            f"has it; the draws' most frequent basis is {short_list(bases[top])}, "
            f"{counts[top] / counts.sum():.0%} of them: --point-estimate mode reports that "
            "one)")


def sigma2_interval90(draws, sampler) -> list[float] | None:
    """The 90 % credible interval of sigma^2 over retained draws (as
    ``BIDResult.sigma2_interval``), for an exact sampler only; None otherwise."""
    from ...engine.result import draws_interval
    from ...engine.summary import EXACT_SAMPLERS

    if sampler not in EXACT_SAMPLERS or draws is None or np.size(draws) < 2:
        return None
    return list(draws_interval(draws, 0.9))


def sigma2_words(sigma2, interval, converged=True) -> str:
    """sigma^2's posterior mean, and its 90 % credible interval when there is one; for
    chains that failed the convergence check, the same quantiles, said not to be one."""
    if interval is None:
        return fmt_g(sigma2)
    lo, hi = fmt_g(interval[0]), fmt_g(interval[1])
    if not converged:
        return (f"{fmt_g(sigma2)}  (90% of the draws in {lo} to {hi}: not yet a credible "
                "interval)")
    return f"{fmt_g(sigma2)}  (90% credible interval {lo} to {hi})"


def mse_words(mse, mse_observed) -> str:
    """The MSE of a fit; with missing entries, the one over the observed entries first
    (what the model fits), then the one over all entries with the unobserved as 0 (the
    paper's measure, ``BIDResult.mse``)."""
    if mse_observed is None:
        return fmt_g(mse)
    return (f"{fmt_g(mse_observed)} over the observed entries ({fmt_g(mse)} over all, the "
            "unobserved as 0)")


def continued_words(continued_from, chains=None, sep="; ") -> str:
    """``sep`` + ``continued from a finished fit of C chains x N iterations`` for chains
    run past a finished fit (or added to it); empty for chains run in one go."""
    try:
        n = int(continued_from)
    except (TypeError, ValueError):
        return ""
    try:
        c = int(chains)
        of = f"{c} chain{'s' if c != 1 else ''} x {n} iterations"
    except (TypeError, ValueError):
        of = f"{n} iterations"  # recorded before the chains were
    return f"{sep}continued from a finished fit of {of}"


def shown_names(picked) -> str:
    """The names of the selected columns, the first 20 of them."""
    return ", ".join(picked[:20]) + (f", ... ({len(picked)} in all)" if len(picked) > 20
                                     else "")


def result_lines(res, *, planted=None, names=None, seed=False, resumed=False) -> list[str]:
    """A few human-readable lines about a BIDResult; ``names``: the input's column names
    (default: the fit's ``feature_names``), printed for the selected columns; ``seed``:
    a line with the seed, for ``fit`` (whose --seed repeats the fit with it); ``resumed``:
    the fit was asked to resume (its chain time may cover several runs)."""
    from ...engine.summary import judged_sampler

    p = res.params
    K = len(res.columns)
    n_chains, n_iter = res.trace.shape
    rest = np.setdiff1d(np.arange(res.components.shape[1]), res.columns)
    off = float(np.abs(res.components[:, rest]).max()) if rest.size else None
    more = continued_words(getattr(res, "continued_from", None),
                           getattr(res, "continued_from_chains", None))
    conv = res.convergence()
    lines = [
        f"model        {str(p.get('model', '?')).upper()} "
        f"({sampler_label(p)} sampler), K = {K}, "
        f"A is {res.n_samples} x {res.n_features}",
        f"chains       {n_chains} x {n_iter} iterations (burn-in {p.get('burn_in')}, "
        f"thin {p.get('thin')}{more}), "
        f"{res.draws_sigma2.size} retained draws, "
        f"{res.n_draws_point} with the reported basis",
        *([f"seed         {p['entropy']} (--seed repeats this fit with it)"]
          if seed and p.get("entropy") is not None else []),
        f"columns      {short_list(res.columns)}",
        f"MSE          {mse_words(res.mse, res.mse_observed)}",
        "sigma2       " + sigma2_words(res.sigma2,
                                       sigma2_interval90(res.draws_sigma2, judged_sampler(p)),
                                       conv.converged),
        f"max|W|       {fmt_g(res.max_abs_w)}"
        + (f"  (off the basis: {fmt_g(off)})" if off is not None else ""),
        accepted_line(float(np.mean(res.trace["accepted"]))),
        convergence_line(conv, judged_sampler(p)),
        chain_time_line(res.elapsed, n_chains,
                        getattr(res, "continued_from", None) is not None, resumed),
    ]
    note = unvisited_basis_line(res.draws_columns, res.n_draws_point)
    if note is not None:
        at = next(i for i, ln in enumerate(lines) if ln.startswith("columns ")) + 1
        lines.insert(at, note)
    if names is None:
        names = getattr(res, "feature_names", None)
    if names is not None and len(names) == res.n_features:
        at = next(i for i, ln in enumerate(lines) if ln.startswith("columns ")) + 1
        lines.insert(at, f"names        {shown_names([names[int(j)] for j in res.columns])}")
    if planted is not None:
        found = np.intersect1d(res.columns, planted).size
        lines.insert(3, f"planted      {short_list(np.sort(planted))}: {found} of "
                        f"{len(planted)} found")
    return lines
