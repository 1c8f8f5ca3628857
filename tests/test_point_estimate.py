"""The reported basis: the best visited basis by exact box-constrained least squares.

Every basis a chain visits (burn-in included) is scored by its box-constrained
least-squares SSE, unless its unconstrained least-squares SSE (a lower bound) already
shows it cannot beat the best so far. Checked against scipy's bounded least squares on
every visited basis of real chains.
"""

import numpy as np
import pytest
from scipy.optimize import lsq_linear

from dask_bid import BayesianID
from dask_bid.engine.chain import run_chain
from dask_bid.engine.memory import MemoryBackend
from dask_bid.engine.summary import chain_config
from dask_bid.interface._params import validate_params
from dask_bid.interface.functional import DEFAULTS


def _problem(seed=3, M=40, N=14, K=3, noise=0.4):
    rng = np.random.default_rng(seed)
    C = rng.standard_normal((M, K))
    return C @ rng.uniform(-1, 1, (K, N)) + noise * rng.standard_normal((M, N))


def box_sse(A, J):
    C = A[:, list(J)]
    return sum(lsq_linear(C, A[:, n], bounds=(-1, 1), method="bvls", tol=1e-12).cost * 2
               for n in range(A.shape[1]))


@pytest.mark.parametrize("sampler,diffuse", [("collapsed", False), ("search", False),
                                             ("plain", False), ("collapsed", True)])
def test_best_visited_basis_by_exact_box_constrained_sse(sampler, diffuse):
    # diffuse: no structure, so the chain visits many bases and most are ruled out by
    # their least-squares bound (the pruning path)
    A = np.random.default_rng(5).standard_normal((6, 14)) if diffuse else _problem()
    extra = dict(n_tries="all", acceptance="barker") if diffuse else {}
    p = validate_params({**DEFAULTS, "n_components": 3, "n_iter": 150, "burn_in": 50,
                         "init": "random", "sampler": sampler, "random_state": 0, **extra},
                        n_cols=A.shape[1])
    cfg = chain_config(p, A.shape[1])
    assert cfg.score_visited
    out = run_chain(MemoryBackend(A, n_threads=1), cfg, 5, 0)
    st = out.state
    assert len(st.scored) < cfg.max_scored  # every visited basis is in the memo
    exact = {k: box_sse(A, k) for k in st.scored}
    best = min(exact, key=exact.get)
    assert st.best_key == best
    assert st.best_score == pytest.approx(exact[best], rel=1e-9)
    pruned = 0
    for k, v in st.scored.items():
        # an exact score, or a lower bound that was already no better than the best
        if v != pytest.approx(exact[k], rel=1e-9):
            assert v <= exact[k] * (1 + 1e-12) and v >= st.best_score, (k, v, exact[k])
            pruned += 1
    if diffuse:
        assert pruned > 0, "the bound never ruled a basis out"
    # visited in burn-in counts too: the memo holds more than the retained bases
    retained = {tuple(J) for J in np.asarray(st.draws_J)}
    assert retained <= set(st.scored)


def test_estimator_reports_the_best_basis_and_its_error():
    A = _problem(seed=4)
    est = BayesianID(3, n_iter=120, burn_in=40, init="random", random_state=1).fit(A)
    sse = box_sse(A, est.columns_)
    assert est.mse_ == pytest.approx(sse / A.size, rel=1e-6)
    for J in est.result_.draws_columns.reshape(-1, 3):
        assert box_sse(A, J) >= sse * (1 - 1e-9)


def test_mode_counts_every_visit_beyond_the_tracked_bases():
    """point_estimate="mode" counts retained visits without eviction (the blocks keep
    posterior sums for at most 16 bases, the client counts all of them)."""
    A = np.random.default_rng(5).standard_normal((6, 14))  # no structure: a diffuse posterior
    est = BayesianID(3, n_iter=400, burn_in=0, init="random", point_estimate="mode",
                     random_state=2, n_tries="all", acceptance="barker").fit(A)
    draws = [tuple(J) for J in est.result_.draws_columns.reshape(-1, 3)]
    keys, counts = np.unique(np.array(draws), axis=0, return_counts=True)
    assert len(keys) > 16  # more bases than the blocks track
    np.testing.assert_array_equal(est.columns_, keys[np.argmax(counts)])


def test_a_copy_swap_inherits_the_score_without_a_new_fit(monkeypatch):
    """Data whose columns come in exact copies (as the paper's datasets): a swap of a
    column for its copy leaves C unchanged, so the new basis takes the old score and no
    box-constrained fit runs for it."""
    import dask_bid.engine.chain as chain_mod

    base = _problem(seed=6, N=10)
    A = np.concatenate([base, base], axis=1)  # column j and j + 10 are equal
    calls = []
    real = chain_mod.block_box_score

    def counted(state, ctx):
        calls.append(1)
        return real(state, ctx)

    monkeypatch.setattr(chain_mod, "block_box_score", counted)
    p = validate_params({**DEFAULTS, "n_components": 3, "n_iter": 200, "burn_in": 0,
                         "random_state": 0}, n_cols=A.shape[1])
    cfg = chain_config(p, A.shape[1])
    be = MemoryBackend(A, n_threads=1)
    out = run_chain(be, cfg, 7, 0, J0=np.array([0, 1, 2]))
    st = out.state
    folded = {tuple(sorted(int(j) % 10 for j in k)) for k in st.scored}
    copies = [k for k in st.scored if tuple(sorted(int(j) % 10 for j in k)) != k]
    assert copies, "the chain never swapped a column for its copy"
    n_blocks = len(be.blocks)
    assert len(calls) // n_blocks <= len(folded)
    for k in copies:  # the same C: the same score
        twin = tuple(sorted(int(j) % 10 for j in k))
        if twin in st.scored:
            assert st.scored[k] == st.scored[twin]


def test_a_reported_basis_seen_in_burn_in_only_is_said_so(tmp_path, capsys):
    """When no retained draw has the reported basis (the best SSE was visited in burn-in
    only), the fit's summary and ``info`` say so and name the draws' most frequent
    basis, the one ``point_estimate="mode"`` reports (a real chain where this happens)."""
    import warnings

    from dask_bid import bayesian_id
    from dask_bid.interface.cli import main
    from dask_bid.interface.cli.report import result_lines

    rng = np.random.default_rng(25)
    A = rng.standard_normal((30, 3)) @ rng.standard_normal((3, 12)) + 1.5 * (
        rng.standard_normal((30, 12)))
    # the draws visit 3 bases; block_size: the same chain in memory and on the engine.
    # (Seed 25 was found by a search over seeds; if the sampler changes, any seed whose
    # chain has n_draws_point == 0 and 2+ retained bases serves.)
    kw = dict(n_iter=120, burn_in=60, random_state=25, block_size=6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short chain: the convergence warning
        res = bayesian_id(A, 3, **kw, client="synchronous", out=tmp_path / "r.zarr")
        mode = bayesian_id(A, 3, **kw, point_estimate="mode").columns
    assert res.n_draws_point == 0 and not np.array_equal(res.columns, mode)
    bases, counts = np.unique(res.draws_columns.reshape(-1, 3), axis=0, return_counts=True)
    assert len(bases) == 3
    want = (f"no retained draw has it; the draws' most frequent basis is "
            f"[{', '.join(map(str, mode))}], {counts.max() / counts.sum():.0%} of them: "
            "--point-estimate mode")
    lines = result_lines(res)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("columns "))
    assert want in lines[at + 1]
    assert main(["info", str(tmp_path / "r.zarr")]) == 0
    assert want in capsys.readouterr().out
    # a basis the retained draws have: no such line
    best = bayesian_id(_problem(noise=0.05), 3, **kw)
    assert best.n_draws_point > 0
    assert not any("no retained draw" in ln for ln in result_lines(best))


def _masked_problem(seed=8, M=30, N=14, K=3):
    A = _problem(seed=seed, M=M, N=N, K=K, noise=0.6)
    mask = np.random.default_rng(seed + 1).random(A.shape) > 0.3
    return A, mask


def box_sse_observed(A, mask, J):
    """The box-constrained least-squares SSE over the observed entries, C's unobserved
    entries read as 0 (the masked likelihood's, docs/model.md)."""
    X = np.where(mask, A, 0.0)
    C = X[:, list(J)]
    return sum(2 * lsq_linear(C[mask[:, n]], X[mask[:, n], n], bounds=(-1, 1), method="bvls",
                              tol=1e-12).cost for n in range(A.shape[1]))


def test_masked_best_visited_basis_by_the_observed_entries_sse():
    """missing="mask": the reported basis is the visited one with the lowest
    box-constrained SSE over the observed entries. There is no shared Gram for the
    cheap bound, so every visited basis is scored exactly (before, every basis after the
    first was ruled out, and the start was reported)."""
    from dask_bid.engine.memory import MaskedMemoryBackend

    A, mask = _masked_problem()
    p = validate_params({**DEFAULTS, "n_components": 3, "n_iter": 150, "burn_in": 50,
                         "init": "random", "missing": "mask", "random_state": 0},
                        n_cols=A.shape[1])
    cfg = chain_config(p, A.shape[1])
    out = run_chain(MaskedMemoryBackend(np.where(mask, A, 0.0), mask, n_threads=1), cfg, 5, 0)
    st = out.state
    assert len(st.scored) > 3, "the chain visited too few bases to test"
    exact = {k: box_sse_observed(A, mask, k) for k in st.scored}
    for k, v in st.scored.items():
        assert v == pytest.approx(exact[k], rel=1e-9), k
    assert st.best_key == min(exact, key=exact.get)


@pytest.mark.parametrize("where", ["memory", "engine"])
def test_a_masked_fit_reports_its_best_basis_on_the_observed_entries(where):
    """End to end, in memory and on the Dask engine: no retained draw's basis fits the
    observed entries better than the reported one, whose error is ``mse_observed``."""
    A, mask = _masked_problem(seed=9)
    An = np.where(mask, A, np.nan)
    engine = {"client": "synchronous"} if where == "engine" else {}
    est = BayesianID(3, missing="mask", n_iter=150, burn_in=50, init="random",
                     random_state=3).fit(An, **engine)
    sse = box_sse_observed(A, mask, est.columns_)
    assert est.mse_observed_ == pytest.approx(sse / mask.sum(), rel=1e-6)
    others = {tuple(J) for J in est.result_.draws_columns.reshape(-1, 3)}
    assert len(others) > 1
    for J in others:
        assert box_sse_observed(A, mask, J) >= sse * (1 - 1e-9), J


def test_the_draws_with_the_reported_basis_are_counted_from_the_draws():
    """The blocks keep W sums for at most ``max_tracked_sets`` bases and drop the least
    visited when another arrives: the count of retained draws with the reported basis was
    read from those sums, so a basis dropped and taken up again counted only its later
    draws (seed 9: 0 of its 3, said "no retained draw has it"), and with
    ``refine_sweeps=0, w_estimate="mean"`` W was the mean of a subset of them. The count
    now comes from the draws; W's mean, from the sums when they cover every such draw (it
    then equals the mean of the traced draws), else from sweeps with the basis fixed."""
    from dask_bid.interface.cli.report import unvisited_basis_line

    for seed in (9, 12, 11):  # the sums dropped (9, 12: before, 0 of 3 and 0 of 4); kept
        A = np.random.default_rng(seed).standard_normal((6, 14))
        r = BayesianID(2, n_iter=300, burn_in=20, random_state=seed, refine_sweeps=0,
                       w_estimate="mean", n_trace_columns=14).fit(A).result_
        inb = np.all(np.sort(r.draws_columns, axis=2) == np.sort(r.columns), axis=2)
        assert r.n_draws_point == int(inb.sum()) > 0, (seed, r.n_draws_point, inb.sum())
        assert unvisited_basis_line(r.draws_columns, r.n_draws_point) is None
        if seed == 11:  # the sums cover all 23 draws: W is their mean, as documented
            vals = r.draws_w["values"][inb]  # (draws, K, traced columns), traced = all
            off = ~np.isin(r.draws_w["columns"], r.columns)  # W[:, J] = I is set after
            np.testing.assert_allclose(r.components[:, r.draws_w["columns"][off]],
                                       vals.mean(axis=0)[:, off], rtol=1e-12, atol=1e-12)
