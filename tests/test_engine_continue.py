"""Continuing a finished fit: ``resume=True`` with a larger ``n_iter`` runs its chains on
from the final state it kept (dask_bid/engine/fit.py, docs/engine.md "Continuing a
finished fit")."""

import os
import shlex
import warnings

import numpy as np
import pytest
import zarr
from _support import assert_same_chain

from dask_bid import ParameterError, bayesian_id, open_result
from dask_bid.engine.fit import check_resume
from dask_bid.interface._params import validate_params
from dask_bid.interface.cli import main
from dask_bid.interface.cli.fit import continue_command
from dask_bid.interface.functional import DEFAULTS

K = 4
# every move of the default sampler (pivot, collapsed, annealed swaps, the tempered
# warm-up), fewer of each per iteration: the continuation is what is tested
KW = dict(burn_in=10, thin=2, n_chains=2, random_state=5, checkpoint_every=10,
          client="synchronous", n_pivot=2, n_anneal=2, anneal_every=3)


@pytest.fixture(scope="module")
def A():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((50, K)) @ rng.uniform(-1, 1, (K, 30))
    return X + 0.2 * rng.standard_normal(X.shape)


def _fit(A, n_iter, out=None, **kw):
    with warnings.catch_warnings():
        # these short chains have not converged, and say so; not what is tested here
        warnings.simplefilter("ignore")
        return bayesian_id(A, K, n_iter=n_iter, out=out, **{**KW, **kw})


def _same_traced_draws(a, b):
    np.testing.assert_array_equal(a.draws_w["columns"], b.draws_w["columns"])
    np.testing.assert_array_equal(a.draws_w["values"], b.draws_w["values"])


def _checkpoints(out):
    return sorted(p for p in os.listdir(os.path.join(out, "checkpoint")) if p[0] == "c")


def test_a_finished_fit_continues_to_the_fit_of_more_iterations(A, tmp_path):
    """20 iterations, then 20 more, then 15 more: bitwise the chains of one fit of 55
    iterations (same retained draws, summaries and point estimate)."""
    out = str(tmp_path / "fit.zarr")
    first = _fit(A, 20, out)
    assert first.continued_from is None
    # a finished fit keeps each chain's final state, and only that
    assert _checkpoints(out) == ["c0-it00000020", "c1-it00000020"]
    seen = []
    more = _fit(A, 40, out, resume=True, callback=lambda st: seen.append(st.iteration))
    assert seen[0] == 21, "the continuation replayed iterations"
    assert more.continued_from == 20
    assert_same_chain(_fit(A, 40), more)
    again = _fit(A, 55, out, resume=True)
    assert again.continued_from == 40
    assert _checkpoints(out) == ["c0-it00000055", "c1-it00000055"]
    once = _fit(A, 55)
    assert_same_chain(once, again)
    _same_traced_draws(once, again)
    stored = open_result(out)
    assert stored.result_.continued_from == 40
    assert_same_chain(once, stored.result_)
    # resuming it with the same n_iter returns it as it is, without sampling
    seen.clear()
    same = _fit(A, 55, out, resume=True, callback=seen.append)
    assert seen == [] and same.continued_from == 40
    assert_same_chain(once, same)


def test_chains_added_to_a_finished_fit_give_the_fit_with_more_chains(A, tmp_path):
    """1 chain, then 3 (the two added start from their own beginning), then 4 chains run
    longer: bitwise the fits of 3 chains and of 4 chains x 30 iterations, since chain c's
    draws depend on the seed and c only. Fewer chains are refused."""
    out = str(tmp_path / "fit.zarr")
    _fit(A, 20, out, n_chains=1)
    three = _fit(A, 20, out, resume=True, n_chains=3)
    assert (three.continued_from, three.continued_from_chains) == (20, 1)
    assert_same_chain(_fit(A, 20, n_chains=3), three)
    four = _fit(A, 30, out, resume=True, n_chains=4)
    assert (four.continued_from, four.continued_from_chains) == (20, 3)
    assert_same_chain(_fit(A, 30, n_chains=4), four)
    assert _checkpoints(out) == [f"c{c}-it00000030" for c in range(4)]
    before = zarr.open_group(out, mode="r").attrs["dask_bid"]
    with pytest.raises(ParameterError, match=r"n_chains=2, but the finished fit at .* ran 4 "
                                             r"chains: chains are added, never dropped"):
        _fit(A, 30, out, resume=True, n_chains=2)
    _unchanged(out, before)


def test_a_continuation_on_a_cluster_is_the_same_chain(A, tmp_path):
    """The final state written by an in-process fit continues on a cluster's workers
    (the blocks are read back by the workers) to the same chain."""
    from distributed import Client, LocalCluster

    out = str(tmp_path / "fit.zarr")
    _fit(A, 20, out)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        more = _fit(A, 40, out, resume=True, client=client)
    assert_same_chain(_fit(A, 40), more)


class _Stop:
    def __init__(self, at):
        self.at = at

    def __call__(self, state):
        if state.iteration == self.at:
            raise KeyboardInterrupt


def test_an_interrupted_continuation_keeps_its_settings_and_resumes_to_one_chain(A, tmp_path):
    """With a candidate pool redrawn every ``ceil(n_iter / 3)`` iterations
    (``pool_every="auto"``), a fit of 15 iterations continued to 45 keeps the redraws of
    its 15 (every 5), not those of 45 (every 15). Stopped at iteration 27, the output is
    no longer a finished fit (its result would be that of 15 iterations, its parameters
    say 45); resumed, it ends on the chain of one fit of 45 iterations with
    pool_every=5, and not on the fresh fit of 45 with its own."""
    out = str(tmp_path / "fit.zarr")
    pool = dict(candidate_pool=12)
    _fit(A, 15, out, **pool)
    with pytest.raises(KeyboardInterrupt):
        _fit(A, 45, out, resume=True, callback=_Stop(27), **pool)
    meta = zarr.open_group(out, mode="r").attrs["dask_bid"]
    assert meta["status"] == "interrupted" and meta["params"]["n_iter"] == 45
    assert meta["settings_n_iter"] == 15 and meta["continued_from"] == 15
    # the hint names the n_iter the resume needs (the default would be refused)
    with pytest.raises(Exception, match="stopped before the end; continue it with "
                       r"resume=True and the parameters it was started with \(n_iter=45, "):
        open_result(out)
    # info: the summary still held is the finished fit's (it was shown as this run's)
    from dask_bid.interface.cli.info import describe_path, info_lines

    text = "\n".join(info_lines(describe_path(out)))
    assert ("  note       the numbers below are the finished fit's of 15 iterations that "
            "this run continues") in text, text
    assert text.index("note       the numbers below") < text.index("  MSE        ")
    seen = []
    res = _fit(A, 45, out, resume=True, callback=lambda st: seen.append(st.iteration), **pool)
    assert seen[0] == 28, seen[:3]
    assert res.continued_from == 15
    assert_same_chain(_fit(A, 45, pool_every=5, **pool), res)
    fresh = _fit(A, 45, **pool)
    assert not np.array_equal(fresh.trace["mse"], res.trace["mse"])


def _unchanged(out, before):
    """The refused call left the stored fit as it was: complete, same attributes and
    checkpoints, and readable."""
    g = zarr.open_group(out, mode="r")
    assert g.attrs["dask_bid"] == before
    assert open_result(out).result_.trace.shape[1] == before["params"]["n_iter"]


@pytest.mark.parametrize("change, message", [
    (dict(n_iter=15), r"ran 20 iterations: a fit is continued, never shortened\. Pass "
                      r"n_iter > 20"),
    # the warm-up 'auto' derives from the burn-in is said to follow it
    (dict(n_iter=30, burn_in=12), r"differs from this one in params \(burn_in: stored 10, "
                                  r"now 12; tempered_warmup: stored 7, now 9 \(from burn_in "
                                  r"when 'auto'\)\)\."),
    # the larger n_iter (allowed) is not named beside the refused change
    (dict(n_iter=30, thin=1), r"in params \(thin: stored 2, now 1\)\."),
    (dict(n_iter=30, random_state=6), r"another seed than the stored fit's"),
])
def test_a_continuation_that_is_not_one_chain_is_refused(A, tmp_path, change, message):
    """Fewer iterations, another burn-in, thinning or seed: refused before any work,
    by the engine and by the early check the command line makes, and the finished fit
    is left as it was."""
    out = str(tmp_path / "fit.zarr")
    _fit(A, 20, out)
    before = zarr.open_group(out, mode="r").attrs["dask_bid"]
    p = validate_params({**DEFAULTS, **{k: v for k, v in KW.items()
                                        if k not in ("client", "checkpoint_every")},
                         "n_components": K, **change}, n_cols=A.shape[1])
    with pytest.raises(ParameterError, match=message):
        check_resume(out, p)
    with pytest.raises(ParameterError, match=message):
        _fit(A, **{"n_iter": 20, **change}, out=out, resume=True,
             callback=lambda st: pytest.fail("sampled"))
    _unchanged(out, before)


def test_a_resume_with_other_chunks_names_what_differs(A, tmp_path):
    # it said "differs from this one in layout." and, with a larger n_iter, named only
    # n_iter (the allowed change)
    out = str(tmp_path / "fit.zarr")
    _fit(A, 20, out, chunks=(25, 30))
    with pytest.raises(ParameterError, match=r"in layout \(layout row_tiles: stored "
                                             r"\[\[0, 25\], \[25, 50\]\], now \[\[0, 50\]\]\)\."):
        _fit(A, 30, out, resume=True, chunks=(50, 30))


def test_a_finished_fit_without_its_final_state_is_refused(A, tmp_path):
    """A fit written before the final state was kept (or whose checkpoint/ was removed)
    cannot be continued: refused, naming the fix; resuming it as it is still works."""
    out = str(tmp_path / "fit.zarr")
    _fit(A, 20, out)
    before = zarr.open_group(out, mode="r").attrs["dask_bid"]
    zarr.open_group(out, mode="r+")["checkpoint"].__delitem__("c1-it00000020")
    with pytest.raises(ParameterError, match=r"kept no final state of chain 1 .* Fit again "
                                             r"with n_iter=30, n_chains=2 and overwrite=True"):
        _fit(A, 30, out, resume=True)
    _unchanged(out, before)
    assert _fit(A, 20, out, resume=True).trace.shape[1] == 20


def test_keep_final_state_false_deletes_the_checkpoints_and_the_fit_says_so(A, tmp_path):
    """keep_final_state=False: the complete fit keeps no checkpoint/ (the disk space),
    reads back whole, and a continuation is refused naming why; the result is the
    same chain as the fit that keeps its state."""
    out = str(tmp_path / "fit.zarr")
    kept = _fit(A, 20, str(tmp_path / "kept.zarr"))
    res = _fit(A, 20, out, keep_final_state=False)
    assert not os.path.exists(os.path.join(out, "checkpoint"))
    assert_same_chain(kept, res)
    assert_same_chain(open_result(out).result_, res)
    with pytest.raises(ParameterError, match=r"kept no final state of chain 0 \(it was "
                                             r"fitted with keep_final_state=False"):
        _fit(A, 30, out, resume=True)
    with pytest.raises(ParameterError, match="keep_final_state must be True or False"):
        _fit(A, 20, out, overwrite=True, keep_final_state="no")


def test_no_final_state_on_the_command_line_offers_a_fresh_longer_fit(A, tmp_path, capsys):
    """``--no-final-state``: OUT keeps no checkpoint/, and a fit that failed the check
    offers the same command from the start with twice the iterations (--resume would be
    refused); that command runs."""
    src = str(tmp_path / "A.npy")
    np.save(src, A)
    out = str(tmp_path / "fit.zarr")
    argv = ["fit", src, "--k", str(K), "--out", out, "--n-iter", "30", "--burn-in", "10",
            "--seed", "5", "--no-final"]
    assert main(argv) == 0
    assert not os.path.exists(os.path.join(out, "checkpoint"))
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("run longer")]
    assert line == [f"run longer   dask-bid fit {shlex.quote(src)} --k {K} --out "
                    f"{shlex.quote(out)} --burn-in 10 --seed 5 --no-final --n-iter 60 "
                    "--overwrite"]
    assert main(shlex.split(line[0])[3:] + ["-q"]) == 0
    assert open_result(out).result_.trace.shape == (1, 60)


def test_the_command_line_continues_a_fit_and_refuses_a_shorter_one_at_once(A, tmp_path,
                                                                            capsys):
    """``dask-bid fit ... --resume --n-iter`` continues a finished fit and says so; a
    shorter --n-iter is refused in one line before the input is converted or the
    kernels compile."""
    src = str(tmp_path / "A.npy")
    np.save(src, A)
    out = str(tmp_path / "fit.zarr")
    base = ["fit", src, "--k", str(K), "--out", out, "--burn-in", "10", "--n-chains", "2",
            "--seed", "5"]
    assert main(base + ["--n-iter", "40", "-q"]) == 0
    capsys.readouterr()
    assert main(base + ["--n-iter", "60", "--resume"]) == 0
    text = capsys.readouterr().out
    assert ("chains       2 x 60 iterations (burn-in 10, thin 1; continued from a finished "
            "fit of 2 chains x 40 iterations)") in text
    assert "s sampling, summed over 2 chains, all runs of the continued fit\n" in text
    # not converged: the summary gives the command that runs it on, and it does
    line = [ln for ln in text.splitlines() if ln.startswith("run longer   ")]
    assert line == [f"run longer   dask-bid fit {shlex.quote(src)} --k {K} --out "
                    f"{shlex.quote(out)} --burn-in 10 --n-chains 2 --seed 5 --resume "
                    "--n-iter 120"]
    assert main(shlex.split(line[0])[3:] + ["-q"]) == 0
    assert open_result(out).result_.trace.shape == (2, 120)
    assert main(["info", out]) == 0
    assert "continued from a finished fit of 2 chains x 60 iterations" in \
        capsys.readouterr().out
    capsys.readouterr()
    assert main(base + ["--n-iter", "50", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "kernels" not in err and "reusing" not in err, err
    assert err.strip().splitlines() == [
        f"dask-bid: error: --resume with --n-iter 50, but the finished fit at {out!r} ran "
        "120 iterations: a fit is continued, never shortened. Pass --n-iter > 120 to "
        "continue it, or --overwrite without --resume to fit again."]


@pytest.mark.parametrize("argv, kept", [
    (["fit", "a b.npy", "--k", "3", "--out", "o.zarr", "--n-iter", "40", "--seed", "1"],
     "fit 'a b.npy' --k 3 --out o.zarr --seed 1"),
    # argparse's abbreviations and the --name=value form; --overwrite would start afresh
    (["fit", "a.npy", "--k", "3", "--n-it", "40", "--overw", "--out", "o.zarr"],
     "fit a.npy --k 3 --out o.zarr"),
    (["fit", "a.npy", "--n-iter=40", "--k=3", "--res", "--out=o.zarr", "--n-chains", "4"],
     "fit a.npy --k=3 --out=o.zarr --n-chains 4"),
])
def test_the_continue_command_keeps_every_option_but_the_iterations(argv, kept):
    assert continue_command(argv, 80) == f"dask-bid {kept} --resume --n-iter 80"


def test_the_command_that_resumes_an_interrupted_fit_keeps_its_iterations():
    """Ctrl-C's hint: the typed --n-iter stays, --overwrite goes (it would start afresh)."""
    argv = ["fit", "a.npy", "--k", "3", "--out", "o.zarr", "--n-iter", "40", "--overwrite"]
    assert continue_command(argv) == "dask-bid fit a.npy --k 3 --out o.zarr --n-iter 40 --resume"


@pytest.mark.parametrize("sampler, converged, shown", [
    ("collapsed", False, True), ("plain", False, True), ("collapsed", True, False),
    ("aggressive", False, False), ("search", False, False)])
def test_run_longer_is_offered_only_where_an_exact_chain_failed_the_check(
        sampler, converged, shown):
    """A converged fit needs no more iterations, and the search samplers are not judged
    by the check (their chains target no posterior)."""
    from types import SimpleNamespace

    from dask_bid.interface.cli.fit import _continue_line

    res = SimpleNamespace(params={"sampler": sampler},
                          convergence=lambda: SimpleNamespace(converged=converged))
    line = _continue_line(res, ["fit", "a.npy", "--k", "2", "--out", "o"], 100)
    assert (line == "run longer   dask-bid fit a.npy --k 2 --out o --resume --n-iter 200"
            if shown else line is None)


def test_a_triplet_files_resume_is_checked_before_the_file_is_converted(tmp_path, capsys):
    """--format triplets: the stored parameters are compared before the triplet file is
    converted again (its conversion deleted here), so a refused resume converts nothing."""
    import shutil

    rng = np.random.default_rng(0)
    lines = [f"{i}\t{j}\t{rng.standard_normal():.4f}" for i in range(40) for j in range(12)
             if rng.random() < 0.8]
    src = tmp_path / "t.tsv"
    src.write_text("\n".join(lines) + "\n")
    out = str(tmp_path / "t.zarr")
    base = ["fit", str(src), "--format", "triplets", "--k", "2", "--out", out, "--missing",
            "mask", "--burn-in", "5", "--seed", "1"]
    assert main(base + ["--n-iter", "20", "-q"]) == 0
    converted = [p for p in tmp_path.iterdir() if p.name.startswith("t.tsv.")]
    assert converted
    for p in converted:
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    capsys.readouterr()
    assert main(base + ["--n-iter", "10", "--resume"]) == 2
    assert "a fit is continued, never shortened" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.tsv", "t.zarr"]


def _drop_param(out, name):
    # the output as a version of dask_bid before ``name`` existed wrote it
    g = zarr.open_group(out, mode="r+")
    meta = dict(g.attrs["dask_bid"])
    meta["params"] = {k: v for k, v in meta["params"].items() if k != name}
    g.attrs["dask_bid"] = meta


def test_a_fit_saved_before_the_redraw_swap_continues_as_it_ran(A, tmp_path):
    """A fit saved before ``n_redraw`` existed ran without redraw swaps: it continues
    where the parameter's value is 0 (the default of a dense fit, the same chain), and a
    fit that now gets redraw swaps (masked, K <= 16) is refused with the parameter named."""
    out = str(tmp_path / "fit.zarr")
    _fit(A, 20, out)
    _drop_param(out, "n_redraw")
    assert_same_chain(_fit(A, 30), _fit(A, 30, out, resume=True))
    B = A.copy()
    B[np.random.default_rng(0).random(B.shape) < 0.2] = np.nan
    out2 = str(tmp_path / "masked.zarr")
    _fit(B, 12, out2, missing="mask")
    _drop_param(out2, "n_redraw")
    with pytest.raises(ParameterError, match="n_redraw: stored 0, now 4"):
        _fit(B, 20, out2, missing="mask", resume=True)


def test_chains_added_to_an_unfinished_fit_say_it_must_finish_first(A, tmp_path):
    """It said "differs from this one in params, n_chains (n_chains: stored 2, now 3)",
    naming the difference twice and not why a finished fit takes it."""
    out = str(tmp_path / "fit.zarr")
    with pytest.raises(KeyboardInterrupt):
        _fit(A, 15, out, callback=_Stop(6))
    with pytest.raises(ParameterError, match=r"differs from this one in params \(n_chains: "
                       r"stored 2, now 3; n_chains grows only once the fit has finished: "
                       r"resume it as it was started first, then continue it\)\. "):
        _fit(A, 15, out, resume=True, n_chains=3)
