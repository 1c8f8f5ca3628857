"""Continuing a finished fit: ``resume=True`` with a larger ``n_iter`` runs its chains on
from the final state it kept (dask_bid/engine/fit.py, docs/engine.md "Continuing a
finished fit")."""

import os
import warnings

import numpy as np
import pytest
import zarr
from _support import assert_same_chain

from dask_bid import ParameterError, bayesian_id, open_result
from dask_bid.engine.fit import check_resume
from dask_bid.interface._params import validate_params
from dask_bid.interface.cli import main
from dask_bid.interface.functional import DEFAULTS

K = 4
KW = dict(burn_in=10, thin=2, n_chains=2, random_state=5, checkpoint_every=10,
          client="synchronous")


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
    """40 iterations, then 40 more, then 30 more: bitwise the chains of one fit of 110
    iterations (same retained draws, summaries and point estimate)."""
    out = str(tmp_path / "fit.zarr")
    first = _fit(A, 40, out)
    assert first.continued_from is None
    # a finished fit keeps each chain's final state, and only that
    assert _checkpoints(out) == ["c0-it00000040", "c1-it00000040"]
    seen = []
    more = _fit(A, 80, out, resume=True, callback=lambda st: seen.append(st.iteration))
    assert seen[0] == 41, "the continuation replayed iterations"
    assert more.continued_from == 40
    assert_same_chain(_fit(A, 80), more)
    again = _fit(A, 110, out, resume=True)
    assert again.continued_from == 80
    assert _checkpoints(out) == ["c0-it00000110", "c1-it00000110"]
    once = _fit(A, 110)
    assert_same_chain(once, again)
    _same_traced_draws(once, again)
    stored = open_result(out)
    assert stored.result_.continued_from == 80
    assert_same_chain(once, stored.result_)
    # resuming it with the same n_iter returns it as it is, without sampling
    seen.clear()
    same = _fit(A, 110, out, resume=True, callback=seen.append)
    assert seen == [] and same.continued_from == 80
    assert_same_chain(once, same)


def test_a_continuation_on_a_cluster_is_the_same_chain(A, tmp_path, shared_client):
    """The final state written by an in-process fit continues on a cluster's workers
    (the blocks are read back by the workers) to the same chain."""
    out = str(tmp_path / "fit.zarr")
    _fit(A, 30, out)
    more = _fit(A, 60, out, resume=True, client=shared_client)
    assert_same_chain(_fit(A, 60), more)


def test_a_continued_chain_keeps_the_automatic_settings_it_started_with(A, tmp_path):
    """With a candidate pool redrawn every ``ceil(n_iter / 3)`` iterations
    (``pool_every="auto"``), the continued chain keeps the redraws of the 30 iterations
    it started with (every 10), not those of 90 (every 30): it is the fit of 90 iterations
    with pool_every=10, and not the fresh fit of 90 with its own."""
    out = str(tmp_path / "fit.zarr")
    pool = dict(candidate_pool=12)
    _fit(A, 30, out, **pool)
    more = _fit(A, 90, out, resume=True, **pool)
    assert_same_chain(_fit(A, 90, pool_every=10, **pool), more)
    fresh = _fit(A, 90, **pool)
    assert not np.array_equal(fresh.trace["mse"], more.trace["mse"])
    # the setting stays when the continuation is itself interrupted and resumed
    meta = zarr.open_group(out, mode="r").attrs["dask_bid"]
    assert meta["settings_n_iter"] == 30 and meta["continued_from"] == 30


class _Stop:
    def __init__(self, at):
        self.at = at

    def __call__(self, state):
        if state.iteration == self.at:
            raise KeyboardInterrupt


def test_an_interrupted_continuation_resumes_to_the_same_chain(A, tmp_path):
    """Stopped at iteration 57 of a continuation 40 -> 80, the output is no longer a
    finished fit (its result would be that of 40 iterations, its parameters say 80);
    resuming with n_iter=80 ends on the chain of one 80-iteration fit."""
    out = str(tmp_path / "fit.zarr")
    _fit(A, 40, out)
    with pytest.raises(KeyboardInterrupt):
        _fit(A, 80, out, resume=True, callback=_Stop(57))
    meta = zarr.open_group(out, mode="r").attrs["dask_bid"]
    assert meta["status"] == "interrupted" and meta["params"]["n_iter"] == 80
    with pytest.raises(Exception, match="not a complete|interrupted|resume"):
        open_result(out)
    seen = []
    res = _fit(A, 80, out, resume=True, callback=lambda st: seen.append(st.iteration))
    assert seen[0] == 58, seen[:3]
    assert res.continued_from == 40
    assert_same_chain(_fit(A, 80), res)


def _unchanged(out, before):
    """The refused call left the stored fit as it was: complete, same attributes and
    checkpoints, and readable."""
    g = zarr.open_group(out, mode="r")
    assert g.attrs["dask_bid"] == before
    assert open_result(out).result_.trace.shape[1] == before["params"]["n_iter"]


@pytest.mark.parametrize("change, message", [
    (dict(n_iter=30), r"ran 40 iterations: a fit is continued, never shortened\. Pass "
                      r"n_iter > 40"),
    (dict(n_iter=60, burn_in=20), r"differs from this one in params \(burn_in: stored 10, "
                                  r"now 20"),
    (dict(n_iter=60, thin=1), r"thin: stored 2, now 1"),
    (dict(n_iter=60, random_state=6), r"another seed than the stored fit's"),
])
def test_a_continuation_that_is_not_one_chain_is_refused(A, tmp_path, change, message):
    """Fewer iterations, another burn-in, thinning or seed: refused before any work,
    by the engine and by the early check the command line makes, and the finished fit
    is left as it was."""
    out = str(tmp_path / "fit.zarr")
    _fit(A, 40, out)
    before = zarr.open_group(out, mode="r").attrs["dask_bid"]
    p = validate_params({**DEFAULTS, **{k: v for k, v in KW.items()
                                        if k not in ("client", "checkpoint_every")},
                         "n_components": K, **change}, n_cols=A.shape[1])
    with pytest.raises(ParameterError, match=message):
        check_resume(out, p)
    with pytest.raises(ParameterError, match=message):
        _fit(A, **{"n_iter": 40, **change}, out=out, resume=True,
             callback=lambda st: pytest.fail("sampled"))
    _unchanged(out, before)


def test_a_finished_fit_without_its_final_state_is_refused(A, tmp_path):
    """A fit written before the final state was kept (or whose checkpoint/ was removed)
    cannot be continued: refused, naming the fix; resuming it as it is still works."""
    out = str(tmp_path / "fit.zarr")
    _fit(A, 40, out)
    before = zarr.open_group(out, mode="r").attrs["dask_bid"]
    zarr.open_group(out, mode="r+")["checkpoint"].__delitem__("c1-it00000040")
    with pytest.raises(ParameterError, match=r"kept no final state of chain 1 .* Fit again "
                                             r"with n_iter=60 and overwrite=True"):
        _fit(A, 60, out, resume=True)
    _unchanged(out, before)
    assert _fit(A, 40, out, resume=True).trace.shape[1] == 40


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
            "fit of 40 iterations)") in text
    assert "s sampling, summed over 2 chains, all runs of the continued fit\n" in text
    assert main(["info", out]) == 0
    assert "continued from a finished fit of 40 iterations" in capsys.readouterr().out
    assert main(base + ["--n-iter", "50", "--resume"]) == 2
    err = capsys.readouterr().err
    assert "kernels" not in err and "reusing" not in err, err
    assert err.strip().splitlines() == [
        f"dask-bid: error: --resume with --n-iter 50, but the finished fit at {out!r} ran 60 "
        "iterations: a fit is continued, never shortened. Pass --n-iter > 60 to continue "
        "it, or --overwrite without --resume to fit again."]
