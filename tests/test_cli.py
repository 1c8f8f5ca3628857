"""The ``dask-bid`` command line: in process through ``main([...])`` and as a subprocess."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import dask
import numpy as np
import pytest
import zarr
from _support import assert_same_chain, complete_checkpoints

from dask_bid import open_result
from dask_bid.baselines import RandomizedID
from dask_bid.interface.cli import InterruptLatch, convert_to_zarr, main
from dask_bid.interface.demo import make_demo_matrix

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FAST = ["--n-iter", "40", "--burn-in", "10", "--thin", "2", "--seed", "3",
        "--scheduler", "synchronous"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    A, planted, _ = make_demo_matrix(120, 30, 3, seed=1)
    np.save(d / "a.npy", A)
    header = ",".join(f"c{i}" for i in range(A.shape[1]))
    np.savetxt(d / "a.csv", A, delimiter=",", header=header, comments="", fmt="%.17g")
    np.savetxt(d / "a.txt", A, fmt="%.17g")
    return d, A, planted


def run_cli(*args, cwd=None):
    """The command as a user runs it: a new process, the console script's module."""
    return subprocess.run([sys.executable, "-m", "dask_bid.interface.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def assert_same_trace(a, b):
    for f in a.dtype.names:  # field by field: NaN (no proposal yet) equals NaN
        np.testing.assert_array_equal(a[f], b[f])


#: the phase lines of ``fit`` on stderr (what it chose, what it does), beside the bars
PHASES = ("scheduler    ", "kernels      ", "filled       ", "replacing    ", "reusing ",
          "resume       ", "converted    ")


def assert_one_line_error(stderr, *fragments, progress_allowed=False):
    """Exactly one error line, the last; before it at most progress bar and phase lines."""
    lines = [ln for ln in stderr.replace("\r", "\n").splitlines() if ln.strip()]
    assert lines, "nothing on stderr"
    assert lines[-1].startswith("dask-bid: error: "), stderr
    assert "Traceback" not in stderr, stderr
    others = lines[:-1]
    if progress_allowed:
        others = [ln for ln in others if "%|" not in ln and not ln.startswith(PHASES)]
    assert not others, stderr
    for f in fragments:
        assert f in lines[-1], (f, lines[-1])


# ----------------------------------------------------------------------------- basics

def test_version_and_help(capsys):
    assert main(["--version"]) == 0
    assert "dask-bid 0." in capsys.readouterr().out
    assert main(["fit", "--help"]) == 0
    out = capsys.readouterr().out
    for opt in ("--k", "--out", "--model", "--plain", "--n-iter", "--seed", "--scheduler",
                "--resume", "--overwrite", "--quiet", "--plot"):
        assert opt in out
    assert main([]) == 2  # no command: the help, and a failure status


def test_usage_error_is_one_line(capsys):
    assert main(["fit", "x.npy", "--k", "three", "--out", "o"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--k", "integer")
    assert main(["fit", "x.npy", "--out", "o"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--k")
    assert main(["fit", "x.npy", "--k", "2", "--out", "o", "--model", "nmf"]) == 2
    assert_one_line_error(capsys.readouterr().err, "nmf")


# ----------------------------------------------------------------------------- fit

def test_fit_npy_writes_result_store_and_plots(data, tmp_path, capsys):
    d, A, _ = data
    out = tmp_path / "fit.zarr"
    rc = main(["fit", str(d / "a.npy"), "--k", "3", "--out", str(out), "--n-chains", "2",
               *FAST, "--plot", "all"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    # the conversion lies next to OUT and holds A exactly
    conv = tmp_path / "a.npy.zarr"
    np.testing.assert_array_equal(zarr.open_array(str(conv), mode="r")[...], A)
    # progress bars on stderr, the summary on stdout
    assert "converting a.npy" in cap.err and "sampling" in cap.err and "80/80" in cap.err
    # the first conversion says so, as a reuse says "reusing" (it said nothing)
    assert f"converted    {d / 'a.npy'} -> {conv} (120 x 30 float64, chunks" in cap.err
    assert "columns " in cap.out and "MSE " in cap.out and str(out) in cap.out
    est = open_result(out)
    assert est.columns_.shape == (3,) and est.components_.shape == (3, 30)
    assert est.trace_.shape == (2, 40)
    assert f"{est.mse_:.6g}" in cap.out
    np.testing.assert_allclose(est.transform(A), A[:, est.columns_])
    for kind in ("trace", "autocorr", "inclusion"):
        png = tmp_path / f"fit.{kind}.png"
        assert png.read_bytes()[:8] == PNG_MAGIC
        assert f"plot         {png}" in cap.out


def test_fit_text_files_convert_identically(data, tmp_path, capsys):
    d, A, _ = data
    for name in ("a.csv", "a.txt"):
        out = tmp_path / f"{name}.fit.zarr"
        assert main(["fit", str(d / name), "--k", "2", "--out", str(out), *FAST, "-q"]) == 0
        cap = capsys.readouterr()
        assert cap.out == "" and cap.err == ""  # --quiet: nothing at all
        z = zarr.open_array(str(tmp_path / f"{name}.zarr"), mode="r")
        np.testing.assert_array_equal(z[...], A)
        assert open_result(out).columns_.shape == (2,)


def test_same_seed_same_fit_from_cli_and_python(data, tmp_path):
    d, A, _ = data
    out = tmp_path / "r.zarr"
    assert main(["fit", str(d / "a.npy"), "--k", "3", "--out", str(out), *FAST, "-q"]) == 0
    from dask_bid import bayesian_id

    res = bayesian_id(str(tmp_path / "a.npy.zarr"), 3, n_iter=40, burn_in=10, thin=2,
                      random_state=3, client="synchronous")
    stored = open_result(out)
    np.testing.assert_array_equal(stored.columns_, res.columns)
    assert_same_trace(stored.trace_, res.trace)


@pytest.mark.parametrize("flags,kw", [
    (["--sampler", "search"], dict(sampler="search")),
    (["--plain"], dict(sampler="plain")),
    (["--n-tries", "all", "--acceptance", "barker", "--n-anneal", "0"],
     dict(n_tries="all", acceptance="barker", n_anneal=0)),
    (["--n-pivot", "2", "--tempered-warmup", "3", "--n-redraw", "1"],
     dict(n_pivot=2, tempered_warmup=3, n_redraw=1)),
    (["--candidate-pool", "8", "--pool-every", "5"], dict(candidate_pool=8, pool_every=5)),
    (["--paper"], dict(sampler="aggressive", init="random", proposal_init="copy",
                       point_estimate="mode", w_estimate="mean", refine_sweeps=0)),
], ids=["search", "plain", "all-tries", "pivot-warmup", "pool", "paper"])
def test_sampler_flags_give_the_python_fit(data, tmp_path, flags, kw):
    """Each sampler flag is the keyword of the same name: the CLI's chain is the one
    ``bayesian_id`` runs with it, and the stored parameters name the sampler."""
    d, A, _ = data
    out = tmp_path / "r.zarr"
    assert main(["fit", str(d / "a.npy"), "--k", "3", "--out", str(out), *FAST, "-q",
                 *flags]) == 0
    from dask_bid import bayesian_id

    res = bayesian_id(str(tmp_path / "a.npy.zarr"), 3, n_iter=40, burn_in=10, thin=2,
                      random_state=3, client="synchronous", **kw)
    stored = open_result(out)
    assert_same_trace(stored.trace_, res.trace)
    assert stored.result_.params["sampler"] == kw.get("sampler", "collapsed")
    for name in ("candidate_pool", "pool_every", "n_redraw"):
        if name in kw:
            assert stored.result_.params[name] == kw[name]


def test_plain_and_another_sampler_is_refused(data, tmp_path, capsys):
    d, _, _ = data
    rc = main(["fit", str(d / "a.npy"), "--k", "3", "--out", str(tmp_path / "r.zarr"),
               "--plain", "--sampler", "search"])
    assert rc == 2
    assert_one_line_error(capsys.readouterr().err, "--plain and --sampler search disagree")


def test_existing_output_resume_and_overwrite(data, tmp_path, capsys):
    d, _, _ = data
    out = tmp_path / "r.zarr"
    args = ["fit", str(d / "a.npy"), "--k", "3", "--out", str(out), *FAST, "-q"]
    assert main(args) == 0
    first = open_result(out)
    capsys.readouterr()
    assert main(args) == 2
    assert_one_line_error(capsys.readouterr().err, "already exists", "--overwrite")
    # a finished fit resumed is the stored fit
    assert main([*args, "--resume"]) == 0
    assert_same_trace(open_result(out).trace_, first.trace_)
    # resuming with other parameters is refused, naming the difference (a larger
    # --n-iter alone continues it: tests/test_engine_continue.py)
    assert main([*args[:-1], "--burn-in", "3", "--resume", "-q"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--burn-in")
    # options that are also words are named as flags too (they read "sampler: stored")
    assert main([*args[:-1], "--sampler", "aggressive", "--resume", "-q"]) == 2
    assert_one_line_error(capsys.readouterr().err,
                          "--sampler: stored 'collapsed', now 'aggressive'")
    # the default traced columns given explicitly are the same setting (it was refused:
    # "stored None, now [0, 3, ...]"); other columns are not
    traced = ",".join(str(c) for c in first.result_.draws_w["columns"])
    assert main([*args, "--trace-columns", traced, "--resume"]) == 0
    assert_same_trace(open_result(out).trace_, first.trace_)
    assert main([*args[:-1], "--trace-columns", "1,2", "--resume", "-q"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--trace-columns")
    assert main([*args, "--overwrite", "--model", "gbtn"]) == 0
    assert open_result(out).model == "gbtn"


def test_out_where_the_conversion_goes_is_refused(data, tmp_path, capsys):
    """--out naming the conversion's own store (<folder of OUT>/<file name>.zarr) is
    refused with a name to use, before anything is converted."""
    d, _, _ = data
    src = tmp_path / "a.npy"
    src.write_bytes((d / "a.npy").read_bytes())
    out = tmp_path / "a.npy.zarr"
    assert main(["fit", str(src), "--k", "2", "--out", str(out), *FAST]) == 2
    assert_one_line_error(capsys.readouterr().err, "is where", "is converted to",
                          "a-fit.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]


def test_resume_after_the_text_input_changed(data, tmp_path, capsys):
    """--resume with a file that changed since its conversion is refused before anything
    is converted again; with --overwrite it is converted again and the fit's checksum
    decides: other content refused, the same content (a copy: only its time changed)
    resumed."""
    d, _, _ = data
    src = tmp_path / "m.csv"
    original = (d / "a.csv").read_bytes()
    src.write_bytes(original)
    out = tmp_path / "r.zarr"
    args = ["fit", str(src), "--k", "3", "--out", str(out), *FAST, "-q"]
    assert main(args) == 0
    first = open_result(out)
    store = tmp_path / "m.csv.zarr"
    stamp = (store / "zarr.json").stat().st_mtime_ns
    capsys.readouterr()
    lines = original.decode().splitlines()
    lines[1] = lines[1].replace(lines[1].split(",")[0], "7.5", 1)  # one entry changed
    src.write_text("\n".join(lines) + "\n")
    assert main([*args, "--resume"]) == 2
    assert_one_line_error(capsys.readouterr().err, "changed (size or time) since",
                          "restore the file", "add --overwrite")
    assert (store / "zarr.json").stat().st_mtime_ns == stamp  # not converted again
    assert main([*args, "--resume", "--overwrite"]) == 2
    assert_one_line_error(capsys.readouterr().err, "the input's content differs",
                          progress_allowed=True)
    assert_same_trace(open_result(out).trace_, first.trace_)  # the fit is untouched
    src.write_bytes(original)  # the same content again, a new time
    assert main([*args, "--resume"]) == 2
    assert "changed (size or time)" in capsys.readouterr().err
    assert main([*args, "--resume", "--overwrite"]) == 0
    assert_same_trace(open_result(out).trace_, first.trace_)


def test_an_empty_out_and_a_folder_of_the_users_are_named_for_what_they_are(data, tmp_path,
                                                                           capsys):
    """--out '' was refused as "the input, contains it or lies inside it"; a folder of the
    user's was answered "Pass --overwrite to replace it", which was then refused."""
    d, _, _ = data
    for cmd, words in ((["fit", str(d / "a.npy"), "--k", "2"], "--out is empty: name the "
                        "folder the fit writes"),
                       (["convert", str(d / "a.npy")], "--out is empty: name the store")):
        assert main([*cmd, "--out", ""]) == 2
        assert_one_line_error(capsys.readouterr().err, words)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert main(["fit", str(d / "a.npy"), "--k", "2", "--out", str(mine), *FAST]) == 2
    err = capsys.readouterr().err
    assert_one_line_error(err, "already exists and is not a dask_bid result", "dask_bid never "
                          "replaces it. Choose another output path")
    assert "Pass --overwrite" not in err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("argv, fragments", [
    (["fit", "{d}/missing.npy", "--k", "2", "--out", "{t}/o.zarr"], ["no such file"]),
    (["fit", "{d}/a.npy", "--k", "30", "--out", "{t}/o.zarr", "--scheduler", "synchronous"],
     ["--k", "1 <= K < N"]),
    (["fit", "{t}/nostore.zarr", "--k", "2", "--out", "{t}/o.zarr"], ["no Zarr store"]),
    (["info", "{t}/nothing"], ["no such file"]),
    (["fit", "{d}/a.npy", "--k", "2", "--out", "{t}/o.zarr", "--init", "1,x"], ["--init"]),
    (["plot", "{t}/nothing.zarr"], ["no dask_bid result"]),
])
def test_errors_exit_2_with_one_line(data, tmp_path, capsys, argv, fragments):
    d, _, _ = data
    argv = [a.format(d=d, t=tmp_path) for a in argv]
    assert main(argv) == 2
    cap = capsys.readouterr()
    assert_one_line_error(cap.err, *fragments)
    assert cap.out == ""


def test_nan_in_input_is_reported(tmp_path, capsys):
    A = np.random.default_rng(0).standard_normal((20, 6))
    A[3, 2] = np.nan
    np.save(tmp_path / "nan.npy", A)
    rc = main(["fit", str(tmp_path / "nan.npy"), "--k", "2", "--out", str(tmp_path / "o.zarr"),
               *FAST, "-q"])
    assert rc == 2
    assert_one_line_error(capsys.readouterr().err, "NaN", "row 3, column 2",
                          "--fill-missing zero", progress_allowed=True)
    # refused before anything was written: the retry is not blocked
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nan.npy"]


def test_unreachable_scheduler(data, tmp_path, capsys):
    d, _, _ = data
    # a 1 s wait instead of the default 5 s (the suite's time): the config key is the one
    # a user sets for a slow scheduler
    with dask.config.set({"dask_bid.scheduler-timeout": 1}):
        rc = main(["fit", str(d / "a.npy"), "--k", "2", "--out", str(tmp_path / "o.zarr"),
                   "--scheduler", "tcp://127.0.0.1:9", "-q"])
    assert rc == 2
    assert_one_line_error(capsys.readouterr().err, "tcp://127.0.0.1:9")


# ----------------------------------------------------------------------------- conversion

def test_convert_text_with_missing_fields_and_reuse(tmp_path, capsys):
    src = tmp_path / "m.csv"
    src.write_text("x,y,z\n1,2,3\n\n4,,6\nnan,8,9\n")
    dst = str(tmp_path / "m.zarr")
    # empty fields and 'nan' are missing values: refused, naming the first one and the flag
    from dask_bid.interface.cli import CLIError

    with pytest.raises(CLIError, match=r"line 4, column 2.*--fill-missing zero"):
        convert_to_zarr(src, dst, quiet=True)
    assert not os.path.exists(dst)  # nothing half-written left behind
    convert_to_zarr(src, dst, quiet=True, fill_missing="zero")
    z = zarr.open_array(dst, mode="r")
    np.testing.assert_array_equal(z[...], [[1, 2, 3], [4, 0, 6], [0, 8, 9]])
    assert z.attrs["dask_bid_missing"] == {"fill": "zero", "n_filled": 2}
    convert_to_zarr(src, dst, fill_missing="zero")  # unchanged source: reused
    assert "reusing" in capsys.readouterr().err
    # a filled conversion is not reused silently by a run that did not ask for the fill
    with pytest.raises(CLIError, match="2 missing values.*--fill-missing zero"):
        convert_to_zarr(src, dst, quiet=True)
    src.write_text("1,2\n3,4\n")
    from dask_bid import OutputExistsError

    with pytest.raises(OutputExistsError, match="overwrite"):
        convert_to_zarr(src, dst, quiet=True)
    convert_to_zarr(src, dst, quiet=True, overwrite=True)
    np.testing.assert_array_equal(zarr.open_array(dst, mode="r")[...], [[1, 2], [3, 4]])


def test_convert_ragged_text_names_the_row(tmp_path):
    src = tmp_path / "bad.txt"
    src.write_text("1 2 3\n4 5 6\n7 8\n")
    from dask_bid.interface.cli import CLIError

    with pytest.raises(CLIError, match="row"):
        convert_to_zarr(src, str(tmp_path / "bad.zarr"), quiet=True)


# ----------------------------------------------------------------------------- rid, info

def test_rid_matches_the_estimator(data, tmp_path, capsys):
    d, A, _ = data
    out = tmp_path / "rid.npz"
    assert main(["rid", str(d / "a.csv"), "--k", "3", "--seed", "5", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    ref = RandomizedID(3, random_state=5).fit(A)
    with np.load(out) as z:
        np.testing.assert_array_equal(z["columns"], ref.columns_)
        np.testing.assert_allclose(z["components"], ref.components_, rtol=1e-10, atol=1e-12)
        assert float(z["mse"]) == pytest.approx(ref.mse_, rel=1e-10)
    assert f"{ref.mse_:.6g}" in cap.out
    assert main(["rid", str(d / "a.npy"), "--k", "3", "--method", "cpqr", "-q"]) == 0
    assert capsys.readouterr().out == ""


def test_rid_names_the_columns_and_replaces_only_its_own_file(tmp_path, capsys):
    """A header's names in the summary and the .npz; --overwrite replaces a .npz that rid
    wrote, never another file (and no temporary file is left)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 2)) @ rng.standard_normal((2, 8))
    names = [f"drug{j}" for j in range(8)]
    src = tmp_path / "m.csv"
    rows = (",".join(map(str, r.tolist())) for r in A)
    src.write_text(",".join(names) + "\n" + "\n".join(rows) + "\n")
    out = tmp_path / "r.npz"
    assert main(["rid", str(src), "--k", "2", "--seed", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    with np.load(out) as z:
        picked = [names[j] for j in z["columns"]]
        assert list(z["names"]) == picked
    assert f"names        {', '.join(picked)}\n" in text
    assert main(["rid", str(src), "--k", "2", "--out", str(out), "--overwrite", "-q"]) == 0
    mine = tmp_path / "mine.npz"
    np.savez(mine, something=np.ones(3))
    before = mine.read_bytes()
    assert main(["rid", str(src), "--k", "2", "--out", str(mine), "--overwrite"]) == 2
    assert "refusing to replace" in capsys.readouterr().err
    assert mine.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.csv", "mine.npz", "r.npz"]


def test_rid_refuses_what_it_would_ignore_or_fail_late_on(tmp_path, capsys, monkeypatch):
    """--seed with --method cpqr was ignored without a word (--oversampling was refused);
    --out '' wrote nothing and exited 0; an --out that cannot be written failed after the
    fit with a raw errno line; a Zarr INPUT with lost chunks was read as zeros."""
    monkeypatch.chdir(tmp_path)  # where a URL --out was written as a local file
    A = np.random.default_rng(0).standard_normal((40, 6))
    np.save(tmp_path / "a.npy", A)
    src = str(tmp_path / "a.npy")
    for argv, words in ((["--method", "cpqr", "--seed", "3"], "--seed applies to --method "
                         "randomized"),
                        (["--out", ""], "--out is empty"),
                        (["--out", "/proc/x.npz"], "--out '/proc/x.npz' cannot be written"),
                        # it wrote ./s3:/bucket/a.npz, a local file named like the URL
                        (["--out", "s3://bucket/a.npz"], "is a URL, and rid writes a local "
                         ".npz file")):
        assert main(["rid", src, "--k", "2", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dask-bid: error: ") and words in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy"]
    z = zarr.create_array(str(tmp_path / "lost.zarr"), shape=(40, 6), chunks=(10, 6),
                          dtype="f8", fill_value=0.0)
    z[:10] = A[:10]
    assert main(["rid", str(tmp_path / "lost.zarr"), "--k", "2", "--seed", "0"]) == 2
    err = capsys.readouterr().err
    assert "3 of 4 chunks missing" in err and "--allow-missing-chunks" in err, err
    assert main(["rid", str(tmp_path / "lost.zarr"), "--k", "2", "--seed", "0", "-q",
                 "--allow-missing-chunks", "--out", str(tmp_path / "new" / "r.npz")]) == 0
    assert (tmp_path / "new" / "r.npz").is_file()


def test_rid_out_names_a_npz_file_and_is_checked_before_the_input_is_read(tmp_path, capsys):
    """``--out x.zarr`` (or .csv) is refused, not written as x.zarr.npz; a folder is
    refused; a name without a suffix gets .npz; an existing --out is refused before INPUT
    is even read (here INPUT does not exist, and the error is about --out)."""
    A = np.random.default_rng(0).standard_normal((20, 6))
    np.save(tmp_path / "a.npy", A)
    src = str(tmp_path / "a.npy")
    for bad, words in (("x.zarr", "not .zarr"), ("x.csv", "not .csv"),
                       (str(tmp_path) + "/", "is a folder")):
        assert main(["rid", src, "--k", "2", "--out", bad]) == 2
        err = capsys.readouterr().err
        assert words in err and "--out" in err and err.count("\n") == 1
    assert main(["rid", src, "--k", "2", "--seed", "0", "-q",
                 "--out", str(tmp_path / "r")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy", "r.npz"]
    missing = str(tmp_path / "nothing.npy")
    assert main(["rid", missing, "--k", "2", "--out", str(tmp_path / "r.npz")]) == 2
    assert "already exists; pass --overwrite" in capsys.readouterr().err


def test_column_names_from_a_file_name_the_selected_columns(tmp_path, capsys):
    """--column-names FILE: one name per line (of a tab-separated line the second field,
    as in the paper's drugs.txt), shown by fit, info and rid and kept in OUT and the
    .npz; a file of another length or with a blank line is refused before INPUT is
    converted, and a file with as many names as INPUT has rows says so."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((30, 2)) @ rng.standard_normal((2, 8))
    src = tmp_path / "m.csv"
    src.write_text("\n".join(",".join(map(str, r.tolist())) for r in A) + "\n")
    names = [f"Drug-{j}" for j in range(8)]
    lines = [f"drug{j}\t{n}" for j, n in enumerate(names)]
    lines[3] = "drug3\t"  # no display name: the first field
    names[3] = "drug3"
    nfile = tmp_path / "drugs.txt"
    nfile.write_text("\n".join(lines) + "\n\n")
    out = tmp_path / "r.zarr"
    assert main(["fit", str(src), "--k", "2", "--out", str(out), "--column-names",
                 str(nfile), *FAST, "--n-chains", "1"]) == 0
    text = capsys.readouterr().out
    res = open_result(out)
    picked = [names[j] for j in res.columns_]
    assert f"names        {', '.join(picked)}\n" in text
    assert list(res.feature_names_in_) == names
    assert main(["info", str(out)]) == 0
    assert f"  names      {', '.join(picked)}\n" in capsys.readouterr().out
    assert main(["rid", str(src), "--k", "2", "--seed", "1", "--column-names", str(nfile),
                 "--out", str(tmp_path / "r.npz")]) == 0
    capsys.readouterr()
    with np.load(tmp_path / "r.npz") as z:
        assert list(z["names"]) == [names[j] for j in z["columns"]]
    before = sorted(p.name for p in tmp_path.iterdir())
    rows = tmp_path / "rows.txt"
    rows.write_text("\n".join(f"cell{i}" for i in range(30)) + "\n")
    gap = tmp_path / "gap.txt"
    gap.write_text("a\nb\n\nd\ne\nf\ng\nh\n")
    for cmd, bad, fragment in [
            ("fit", rows, "has 30 names, but {src!r} has 8 columns (30 is the number of "
                          "its rows: {bad!r} may name the rows)"),
            ("rid", rows, "has 30 names, but {src!r} has 8 columns"),
            ("fit", gap, "line 3 of {bad!r} is empty"),
            ("fit", tmp_path / "nope.txt", "no such file {bad!r}")]:
        argv = [cmd, str(src), "--k", "2", "--column-names", str(bad),
                "--out", str(tmp_path / ("x.zarr" if cmd == "fit" else "x.npz"))]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert_one_line_error(err, fragment.format(src=str(src), bad=str(bad)))
    # nothing converted or written by the refused runs
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before + ["rows.txt",
                                                                          "gap.txt"])


def test_the_papers_drug_names_name_the_selected_drugs(shared_data_dir, tmp_path, capsys):
    """The paper's IC50 file with its drugs.txt and cell_lines.txt: the names are those
    the dataset loader gives the columns and rows, and basis_frame() is the selected
    drugs' columns of the file, NaN where unobserved, named."""
    from dask_bid.datasets import load_ccle_ic50

    d = shared_data_dir / "ccle_ic50"
    out = tmp_path / "k3.zarr"
    assert main(["fit", str(d / "ic50.txt"), "--k", "3", "--out", str(out), "--missing",
                 "mask", "--column-names", str(d / "drugs.txt"), "--row-names",
                 str(d / "cell_lines.txt"), *FAST, "-q"]) == 0
    res = open_result(out)
    ds = load_ccle_ic50(shared_data_dir, n_copies=1)
    assert list(res.feature_names_in_) == ds.col_labels
    assert "17-AAG" in res.feature_names_in_  # the display name, not "17aag"
    frame = res.result_.basis_frame()
    assert list(frame.index) == ds.row_labels
    assert list(frame.columns) == [ds.col_labels[j] for j in res.columns_]
    raw = np.loadtxt(d / "ic50.txt", delimiter="\t")
    np.testing.assert_array_equal(frame.to_numpy(), raw[:, res.columns_])  # NaN included


def test_row_names_from_a_text_files_labels_or_a_file(tmp_path, capsys):
    """A text file's row labels are kept by its conversion and the fit (info shows them,
    basis_frame() names C's rows); --row-names FILE names the rows of a file without
    labels; a file of another length is refused before the conversion, naming a file of
    column names when its length is the column count."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((12, 2)) @ rng.standard_normal((2, 5))
    labels = [f"r{i}" for i in range(12)]
    lab = tmp_path / "lab.csv"
    lab.write_text(",a,b,c,d,e\n" + "".join(
        f"{name}," + ",".join(map(str, row.tolist())) + "\n" for name, row in zip(
            labels, A, strict=True)))
    out = tmp_path / "lab.zarr"
    assert main(["fit", str(lab), "--k", "2", "--out", str(out), *FAST, "-q"]) == 0
    assert zarr.open_array(tmp_path / "lab.csv.zarr").attrs["dask_bid_row_names"] == labels
    res = open_result(out).result_
    assert res.sample_names == labels
    frame = res.basis_frame()
    assert list(frame.index) == labels and list(frame.columns) == [
        "abcde"[j] for j in res.columns]
    np.testing.assert_array_equal(frame.to_numpy(), A[:, res.columns])
    assert main(["info", str(out)]) == 0
    assert "  rows named r0, r1, r2, r3, r4, r5, r6, r7, ..., r11 (12 rows)\n" in \
        capsys.readouterr().out
    assert main(["info", str(tmp_path / "lab.csv.zarr")]) == 0
    assert "  rows named r0, r1" in capsys.readouterr().out
    np.save(tmp_path / "a.npy", A)
    names = tmp_path / "rows.txt"
    names.write_text("\n".join(f"cell\tCell-{i}" for i in range(12)) + "\n")
    out2 = tmp_path / "npy.zarr"
    assert main(["fit", str(tmp_path / "a.npy"), "--k", "2", "--out", str(out2), "--row-names",
                 str(names), *FAST, "-q"]) == 0
    assert open_result(out2).result_.sample_names == [f"Cell-{i}" for i in range(12)]
    five = tmp_path / "five.txt"
    five.write_text("\n".join("abcde") + "\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    capsys.readouterr()
    assert main(["fit", str(tmp_path / "a.npy"), "--k", "2", "--out", str(tmp_path / "x.zarr"),
                 "--row-names", str(five)]) == 2
    assert_one_line_error(capsys.readouterr().err,
                          f"--row-names: {str(five)!r} has 5 names, but "
                          f"{str(tmp_path / 'a.npy')!r} has 12 rows (5 is the number of its "
                          "columns")
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("name, advice", [
    ("m.xlsx", "it is a spreadsheet: export the sheet as CSV and fit the .csv"),
    ("m.csv.gz", "it is compressed: decompress it first (gunzip)"),
    ("m.h5", "it is an HDF5 file: write its dataset to Zarr once")])
def test_files_of_other_formats_are_named_with_what_to_do(tmp_path, capsys, name, advice):
    """fit, rid and info say what such a file is and how to fit its matrix (one line,
    before anything is read)."""
    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04 not read")
    for argv in (["fit", str(path), "--k", "2", "--out", str(tmp_path / "o.zarr")],
                 ["rid", str(path), "--k", "2"], ["info", str(path)]):
        assert main(argv) == 2
        assert_one_line_error(capsys.readouterr().err, advice)
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_the_seed_of_a_fit_without_one_is_shown_and_repeats_it(data, tmp_path, capsys):
    """Without --seed the fit draws one: the summary and info show it, and --seed with it
    gives the same fit bit for bit."""
    d, _, _ = data
    assert main(["fit", str(d / "a.npy"), "--k", "3", "--out", str(tmp_path / "a.zarr"),
                 "--n-iter", "20", "--burn-in", "5"]) == 0
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("seed ")]
    assert len(line) == 1 and line[0].endswith("(--seed repeats this fit with it)")
    seed = line[0].split()[1]
    assert main(["info", str(tmp_path / "a.zarr")]) == 0
    assert f"  seed       {seed} (--seed" in capsys.readouterr().out
    assert main(["fit", str(d / "a.npy"), "--k", "3", "--out", str(tmp_path / "b.zarr"),
                 "--n-iter", "20", "--burn-in", "5", "--seed", seed, "-q"]) == 0
    a, b = open_result(tmp_path / "a.zarr"), open_result(tmp_path / "b.zarr")
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.trace_["sigma2"], b.trace_["sigma2"])


def test_fits_started_side_by_side_share_one_conversion(data, tmp_path):
    """Fits of one file into one folder, started together (K = 5, 10, 20 ...), converted
    it at the same time: one of them was refused ("was not converted from this version")
    and two writers could interleave. A fit now waits while another process converts,
    then reuses its store. Here the test holds the conversion's lock and converts."""
    from dask_bid.engine.lock import OutputLock
    from dask_bid.interface.cli.convert import _convert

    d, A, _ = data
    dst = tmp_path / "a.npy.zarr"
    lock = OutputLock(str(dst)).acquire()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dask_bid.interface.cli", "fit", str(d / "a.npy"), "--k", "3",
         "--out", str(tmp_path / "k3.zarr"), *FAST, "--scheduler", "synchronous"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()  # the fit says it waits, and waits
        assert first.startswith("waiting      for another dask-bid converting to"), first
        _convert(str(d / "a.npy"), str(dst), quiet=True, overwrite=False, chunks=None,
                 fill_missing=None, row_labels="auto", header="auto")
    finally:
        lock.release()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    assert f"reusing {dst} (already converted" in err and "converted    " not in err
    np.testing.assert_array_equal(open_result(tmp_path / "k3.zarr").C_[...].compute(),
                                  A[:, open_result(tmp_path / "k3.zarr").columns_])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.npy.zarr", "k3.zarr"]


def test_a_store_a_running_fit_reads_is_not_converted_again_under_it(data, tmp_path, capsys):
    """Two fits of one text file into one folder, the second with another treatment of
    NaN and --overwrite: it converted the store again under the first, which then failed
    ("the input changed while the fit read it"), its run lost. Refused while the first
    runs; done once it has ended."""
    d, A, _ = data
    src = tmp_path / "n.csv"
    An = A.copy()
    An[0, 0] = np.nan
    np.savetxt(src, An, delimiter=",", fmt="%.17g")
    store = tmp_path / "n.csv.zarr"
    first = subprocess.Popen(
        [sys.executable, "-m", "dask_bid.interface.cli", "fit", str(src), "--k", "3",
         "--missing", "mask", "--out", str(tmp_path / "a.zarr"), "--n-iter", "100000",
         "--burn-in", "5", "--scheduler", "synchronous"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        for line in first.stderr:  # converted and fitting: it holds the store
            if line.startswith("kernels"):
                break
        assert first.poll() is None
        rc = main(["fit", str(src), "--k", "3", "--fill-missing", "zero", "--out",
                   str(tmp_path / "b.zarr"), "--overwrite", *FAST])
        assert rc == 2
        assert_one_line_error(capsys.readouterr().err, "is the input of a dask-bid fit still "
                              "running in another process", "fit into another folder",
                              progress_allowed=True)
        assert first.poll() is None  # undisturbed
    finally:
        first.kill()
        first.communicate()
    assert main(["fit", str(src), "--k", "3", "--fill-missing", "zero", "--out",
                 str(tmp_path / "b.zarr"), "--overwrite", *FAST, "-q"]) == 0
    assert zarr.open_array(str(store))[0, 0] == 0  # converted again, once free


def test_a_store_a_fit_reads_directly_is_not_converted_again_under_it(data, tmp_path,
                                                                     capsys):
    """`dask-bid convert`, then a fit of the store itself (the CLI's documented workflow,
    or the Python API): a `convert --overwrite` with other options meanwhile rewrote the
    store under the fit. The engine holds the store while it reads it."""
    from dask_bid import bayesian_id

    d, A, _ = data
    src = tmp_path / "n.csv"
    An = A.copy()
    An[0, 0] = np.nan
    np.savetxt(src, An, delimiter=",", fmt="%.17g")
    store = tmp_path / "s" / "n.zarr"
    conv = ["convert", str(src), "--format", "dense", "--out", str(store), "-q"]
    assert main([*conv, "--missing", "mask"]) == 0
    codes, refused = [], []

    def convert_meanwhile(st):
        if st.iteration == 3:
            codes.append(main([*conv, "--fill-missing", "zero", "--overwrite"]))
            # the Python API's writer too (it went ahead, and the fit failed as changed)
            from dask_bid import OutputLockedError
            from dask_bid.engine import to_zarr

            with pytest.raises(OutputLockedError, match="is the input of a dask-bid fit "
                               "still running in another process: to replace it"):
                to_zarr(np.zeros((4, 4)), str(store), overwrite=True)
            refused.append(True)

    bayesian_id(str(store), 3, missing="mask", client="synchronous", n_iter=12, burn_in=4,
                callback=convert_meanwhile)
    assert codes == [2] and refused == [True]
    assert_one_line_error(capsys.readouterr().err, "is the input of a dask-bid fit still "
                          "running", "would change that fit's input under it")
    assert main([*conv, "--fill-missing", "zero", "--overwrite"]) == 0  # once it has ended
    # an array inside a result (its C) fitted directly: an --overwrite of the result
    # removed it under the fit, which then failed as "removed while the fit read it"
    res = tmp_path / "r.zarr"
    assert main(["fit", str(store), "--k", "3", "--out", str(res), *FAST, "--scheduler",
                 "synchronous", "-q"]) == 0
    codes.clear()
    bayesian_id(str(res / "C"), 2, client="synchronous", n_iter=12, burn_in=4,
                callback=lambda st: codes.append(main([
                    "fit", str(store), "--k", "3", "--out", str(res), *FAST, "--overwrite",
                    "--scheduler", "synchronous", "-q"])) if st.iteration == 3 else None)
    assert codes == [2]
    assert_one_line_error(capsys.readouterr().err, f"{str(res / 'C')!r} is the input of a "
                          f"dask-bid fit still running", f"to replace {str(res)!r}, which "
                          "holds it, would change", "or choose another output path")


def test_a_ctrl_c_after_the_last_iteration_says_what_it_still_does(data, tmp_path):
    """The fit's real callback on a real chain: once every chain has done its last
    iteration, the first Ctrl-C no longer promises "stopping after this iteration and
    saving a checkpoint" (the fit then wrote its complete result and exited 0)."""
    from dask_bid import bayesian_id
    from dask_bid._interrupt import InterruptLatch
    from dask_bid.interface.cli.fit import ENDED_MESSAGE, chain_callback

    d, A, _ = data
    seen = []
    latch = InterruptLatch()
    cb = chain_callback(latch, lambda st: seen.append(latch.message), 12, 2)
    bayesian_id(A, 3, client="synchronous", n_iter=12, burn_in=4, n_chains=2, callback=cb)
    assert len(seen) == 24 and set(seen) == {InterruptLatch.MESSAGE}  # while sampling
    assert latch.message == ENDED_MESSAGE  # once both chains have ended
    latch.hit = True  # a Ctrl-C before then stops the chain at its next iteration
    with pytest.raises(KeyboardInterrupt):
        cb(None)


def test_an_unfinished_conversion_is_replaced_without_overwrite(data, tmp_path, capsys):
    """A conversion stopped half way (Ctrl-C) left a store that blocked every later fit
    until --overwrite (which also replaces OUT). It is ours and of no use: replaced."""
    from dask_bid.engine.zarr_io import create_matrix_array

    d, A, _ = data
    create_matrix_array(str(tmp_path / "a.npy.zarr"), A.shape, A.dtype, (20, A.shape[1]))
    assert main(["fit", str(d / "a.npy"), "--k", "3", "--out", str(tmp_path / "o.zarr"),
                 *FAST, "--scheduler", "synchronous"]) == 0
    assert "replacing    " in capsys.readouterr().err
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "a.npy.zarr"))[...], A)


def test_info_on_inputs_and_results(data, tmp_path, capsys):
    d, A, _ = data
    out = tmp_path / "r.zarr"
    assert main(["fit", str(d / "a.npy"), "--k", "3", "--out", str(out), "--n-chains", "2",
                 *FAST, "-q"]) == 0
    assert main(["info", str(tmp_path / "a.npy.zarr")]) == 0
    text = capsys.readouterr().out
    assert "zarr array" in text and "120 x 30" in text and "float64" in text and "chunks" in text
    assert main(["info", str(d / "a.csv")]) == 0
    text = capsys.readouterr().out
    assert "120 x 30" in text and "comma, one header line" in text
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    est = open_result(out)
    assert "dask_bid result" in text and "complete" in text and "K = 3" in text
    assert f"{est.mse_:.6g}" in text and f"{est.sigma2_:.6g}" in text
    assert ", ".join(map(str, est.columns_)) in text
    assert main(["info", "--json", str(out)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["columns"] == est.columns_.tolist()
    assert info["params"]["n_iter"] == 40 and info["summary"]["mse"] == pytest.approx(est.mse_)
    assert main(["info", "--diagnostics", str(out)]) == 0
    text = capsys.readouterr().out
    assert "r_hat" in text and "ess_bulk" in text
    # numpy's statistics, printed: the same as ArviZ's (through dask_bid.summary)
    from dask_bid import summary

    table = summary(est, var_names=["sigma2", "mse"])
    for name in ("sigma2", "mse"):
        row = table.loc[name]
        assert (f"    {name:<7} r_hat {row['r_hat']:.3f}  ess_bulk {row['ess_bulk']:.0f}"
                f"  ess_tail {row['ess_tail']:.0f}") in text, text
    # the most probable columns with the MCSE of their inclusion probabilities
    res = est.result_
    p, se = res.inclusion_probability, res.inclusion_mcse()
    top = np.argsort(-p, kind="stable")[:10]
    top = top[p[top] > 0]
    w = max(len(str(j)) for j in top)
    shown = [ln for ln in text.splitlines() if ln.startswith("    ") and "+-" in ln]
    assert shown == [f"    {'*' if j in est.columns_ else ' '} {j:>{w}}  {p[j]:.3f} +- "
                     f"{se[j]:.3f}" for j in top], text


def test_info_says_which_file_a_result_was_fitted_on(data, tmp_path, capsys):
    """A result recorded only the converted store it read: after a fit of another file of
    that name replaced the store (--overwrite), `info` of the first result named the store
    as its input without a word. It names the file, and says the store now holds another."""
    d, A, _ = data
    for sub, M in (("one", A), ("two", A[::-1].copy())):
        (tmp_path / sub).mkdir()
        np.save(tmp_path / sub / "M.npy", M)
    args = ["--k", "2", *FAST, "--scheduler", "synchronous", "-q"]
    runs = tmp_path / "runs"
    assert main(["fit", str(tmp_path / "one" / "M.npy"), *args, "--out", str(runs / "a.zarr")]) == 0
    assert main(["info", str(runs / "a.zarr")]) == 0
    out = capsys.readouterr().out
    assert f"from {runs / 'M.npy.zarr'} (converted from {tmp_path / 'one' / 'M.npy'})" in out
    assert "note       " not in out
    assert main(["fit", str(tmp_path / "two" / "M.npy"), *args, "--out", str(runs / "b.zarr"),
                 "--overwrite"]) == 0
    assert main(["info", str(runs / "a.zarr")]) == 0
    out = capsys.readouterr().out
    assert (f"note       {runs / 'M.npy.zarr'} now holds another conversion (of "
            f"{tmp_path / 'two' / 'M.npy'}): this result was fitted on the earlier one") in out
    # moved since: the recorded path names nothing now, and says so
    runs.rename(tmp_path / "moved")
    assert main(["info", str(tmp_path / "moved" / "a.zarr")]) == 0
    assert "; not there any more (moved or deleted since the fit)" in capsys.readouterr().out


def test_error_k_of_masked_fits_is_the_mse_over_observed_entries(data, tmp_path):
    """As info headlines it: the MSE over all entries counted the unobserved ones as 0,
    under an axis labelled only "MSE"."""
    pytest.importorskip("matplotlib")
    from dask_bid.engine import read_result
    from dask_bid.interface.cli.plot import error_k_axes

    d, A, _ = data
    An = A.copy()
    An[::7, 3] = np.nan
    np.save(tmp_path / "n.npy", An)
    res = []
    for k in (1, 2):
        out = tmp_path / f"k{k}.zarr"
        assert main(["fit", str(tmp_path / "n.npy"), "--k", str(k), "--missing", "mask",
                     "--out", str(out), *FAST, "-q"]) == 0
        res.append(read_result(str(out)))
    ax = error_k_axes(res)
    assert ax.get_ylabel() == "MSE (observed entries)"
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [r.mse_observed for r in res])
    assert all(r.mse_observed != r.mse for r in res)
    import matplotlib.pyplot as plt

    plt.close(ax.figure)


def test_plot_command_error_vs_k(data, tmp_path, capsys):
    d, _, _ = data
    outs = []
    for k in (1, 2, 4):
        out = tmp_path / f"k{k}.zarr"
        assert main(["fit", str(d / "a.npy"), "--k", str(k), "--out", str(out), *FAST,
                     "-q"]) == 0
        outs.append(str(out))
    assert main(["plot", *outs, "--kind", "error-k", "--out", str(tmp_path / "ek.png")]) == 0
    assert (tmp_path / "ek.png").read_bytes()[:8] == PNG_MAGIC
    # per-result plots go where --out says: STEM.<result name>.<kind>.png for several
    # (they went next to each result, silently), STEM.<kind>.png for one, a .png dropped
    figs = tmp_path / "figs"
    assert main(["plot", *outs[:2], "--kind", "trace", "--out", str(figs / "both"), "-q"]) == 0
    assert main(["plot", outs[2], "--kind", "trace", "--out", str(figs / "one.png"), "-q"]) == 0
    assert sorted(p.name for p in figs.iterdir()) == [
        "both.k1.trace.png", "both.k2.trace.png", "one.trace.png"]
    assert not list(tmp_path.glob("k*.trace.png"))
    capsys.readouterr()
    twin = tmp_path / "other" / "k1.zarr"
    twin.parent.mkdir()
    assert main(["fit", str(d / "a.npy"), "--k", "1", "--out", str(twin), *FAST, "-q"]) == 0
    assert main(["plot", outs[0], str(twin), "--kind", "trace", "--out",
                 str(figs / "x")]) == 2
    assert_one_line_error(capsys.readouterr().err, "two RESULTs here share a name")


def test_an_autocorrelation_of_sigma2_instead_of_w_is_said(data, tmp_path, capsys):
    """With no W draws kept (``n_trace_columns=0``) the autocorrelation figure falls back
    to sigma²: the figure's title said so, the line naming the file did not."""
    from dask_bid import bayesian_id

    _, A, _ = data
    out = tmp_path / "nw.zarr"
    bayesian_id(A, 3, out=str(out), n_iter=40, burn_in=10, n_trace_columns=0,
                random_state=3, client="synchronous")
    assert main(["plot", str(out), "--kind", "autocorr,trace"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"plot         {tmp_path / 'nw.autocorr.png'}  (of sigma², not W: the "
                     "fit kept no column's W draws (n_trace_columns=0 and no --trace-columns))",
                     f"plot         {tmp_path / 'nw.trace.png'}"], lines


# ----------------------------------------------------------------------------- processes

def test_console_script_is_installed():
    script = Path(sys.executable).with_name("dask-bid")
    assert script.exists(), "pip install . installs the dask-bid console script"
    r = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("dask-bid ")


def test_subprocess_error_exit_status(tmp_path):
    r = run_cli("fit", tmp_path / "missing.csv", "--k", "2", "--out", tmp_path / "o.zarr")
    assert r.returncode == 2
    assert_one_line_error(r.stderr, "no such file")
    assert r.stdout == ""


def test_a_closed_pipe_stops_quietly(data):
    """``dask-bid info FILE | head -0``: the reader has gone before the first line. The
    command stops as Unix tools do (status 141 = 128 + SIGPIPE), with nothing on stderr
    and no log (it printed "error: [Errno 32] Broken pipe" and wrote a traceback log)."""
    d, _, _ = data
    p = subprocess.Popen([sys.executable, "-m", "dask_bid.interface.cli", "info",
                          str(d / "a.npy")], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()  # before the process has imported anything, let alone printed
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and err == "", (p.returncode, err)


def test_demo_runs_end_to_end(tmp_path):
    """The README's main job on a LocalCluster, shortened (the default is 200 iterations;
    12 keep the planted columns the sketch start finds, and each costs ~0.4 s: the
    suite's time, README)."""
    out = tmp_path / "demo"
    r = run_cli("demo", "--out", out, "--n-iter", "12")
    assert r.returncode == 0, r.stderr[-3000:]
    for line in ("input ", "cluster      LocalCluster with 2 workers", "planted ", "MSE ",
                 "sigma2 ", "max|W| ", "wall time"):
        assert line in r.stdout, (line, r.stdout)
    assert (out / "result.png").read_bytes()[:8] == PNG_MAGIC
    est = open_result(out / "result.zarr")
    assert est.trace_.shape == (2, 12) and est.max_abs_w_ <= 1.0
    # the planted basis fits with MSE ~ noise^2 (N - K) / N = 0.01 * 290 / 300; a basis
    # missing one planted column costs far more (~0.014, see the demo module)
    assert est.mse_ < 1.2 * 0.01 * 290 / 300
    assert re.search(r": 10 of 10 found", r.stdout), r.stdout
    # quiet means quiet (3 iterations, in this process: the fit's and its end's output;
    # the cluster's start is the first run's); a second demo replaces the first one's
    # files (its figure is marked as its own)
    r = run_cli("demo", "--out", out, "--n-iter", "3", "--quiet", "--scheduler", "synchronous")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == "", r.stderr[-2000:]


def test_demo_writes_to_a_named_cache_folder_by_default(tmp_path):
    """Without --out the demo writes to ~/.cache/dask_bid/demo (here under
    $XDG_CACHE_HOME), says so first, and leaves the current folder alone."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "dask_bid.interface.cli", "demo", "--n-iter",
                        "6", "--scheduler", "synchronous"], capture_output=True, text=True,
                       cwd=cwd, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    where = tmp_path / "cache" / "dask_bid" / "demo"
    assert r.stdout.splitlines()[0] == f"output       {where}"
    assert (where / "result.zarr").is_dir() and (where / "A.zarr").is_dir()
    assert list(cwd.iterdir()) == []


def test_scheduler_address_is_used(tmp_path, data):
    """--scheduler tcp://...: the fit runs on that cluster (a LocalCluster started here)."""
    from distributed import Client, LocalCluster

    d, _, _ = data
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client:
        def transitions(dask_scheduler):
            return dask_scheduler.transition_counter

        before = client.run_on_scheduler(transitions)
        rc = main(["fit", str(d / "a.npy"), "--k", "2", "--out", str(tmp_path / "o.zarr"),
                   "--n-iter", "20", "--burn-in", "5", "--seed", "1",
                   "--scheduler", cluster.scheduler_address, "-q"])
        assert rc == 0
        # the fit's tasks went through this scheduler
        assert client.run_on_scheduler(transitions) > before + 100
    assert open_result(tmp_path / "o.zarr").trace_.shape == (1, 20)


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_resume_without_n_iter_takes_the_stored_fits(data, tmp_path, capsys):
    """--resume without --n-iter ran a finished 40-iteration fit on to the default 1000
    and replaced it; a left-out --seed takes the stored one, and so does --n-iter now:
    the finished fit is only loaded."""
    from dask_bid.engine import read_result

    d, _, _ = data
    out = tmp_path / "o.zarr"
    args = ["fit", str(d / "a.npy"), "--k", "3", "--out", str(out), *FAST, "--init",
            "0,1,2"]
    assert main(args) == 0
    before = read_result(str(out))
    capsys.readouterr()
    # FAST: --n-iter 40 --burn-in 10 --thin 2, all left out (a default --burn-in 200 was
    # refused against the stored --n-iter 40 in numbers never typed)
    # (--init of given columns left out too: refused as "stored [0, 1, 2], now 'auto'")
    left_out = ("--n-iter", "--burn-in", "--thin", "--init")
    again = [a for i, a in enumerate(args) if a not in left_out
             and args[i - 1] not in left_out] + ["--resume"]
    assert main(again) == 0
    err = capsys.readouterr().err
    assert "resume       --n-iter 40, --burn-in 10, --thin 2: the stored fit's (not given" in err
    after = read_result(str(out))
    assert after.trace.shape[1] == 40 and after.continued_from is None
    np.testing.assert_array_equal(after.draws_sigma2, before.draws_sigma2)
    # --missing left out: a fit stored with --missing mask resumes with it (it was
    # refused as "stored 'mask', now 'zero'", a zero never typed)
    d2 = tmp_path / "n.npy"
    An = np.load(d / "a.npy")
    An[3, 4] = np.nan
    np.save(d2, An)
    masked = ["fit", str(d2), "--k", "3", "--out", str(tmp_path / "m.zarr"), *FAST]
    assert main([*masked, "--missing", "mask", "--n-chains", "2"]) == 0
    capsys.readouterr()
    # (and --n-chains left out: the stored 2, where the default 1 was refused)
    assert main([*masked, "--resume"]) == 0, capsys.readouterr().err
    res = read_result(str(tmp_path / "m.zarr"))
    assert res.params["missing"] == "mask" and res.trace.shape == (2, 40)
    capsys.readouterr()
    # with --fill-missing zero it is refused for what it is (it said "--missing mask and
    # --fill-missing zero disagree", of a --missing mask never typed)
    assert main([*masked, "--resume", "--fill-missing", "zero"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--resume, but the fit at", "was fitted "
                          "with --missing mask (NaN left out), and --fill-missing zero would "
                          "make every NaN a 0 that counts: drop --fill-missing",
                          progress_allowed=True)
    # another file: refused before its conversion is written (the fit's checksum refused
    # it after, leaving the conversion behind)
    other = tmp_path / "other.npy"
    np.save(other, An + 1.0)
    assert main(["fit", str(other), *masked[2:], "--resume"]) == 2
    assert_one_line_error(capsys.readouterr().err, "was fitted on", f"not on {str(other)!r}",
                          "a fit resumes only on the matrix it started on",
                          progress_allowed=True)
    assert not (tmp_path / "other.npy.zarr").exists()
    # a Python fit's traced columns (n_trace_columns=0: no flag for it) are kept: it was
    # refused as "--trace-columns: stored [], now [0, 1, ...]"
    from dask_bid import bayesian_id

    bayesian_id(An, 3, out=str(tmp_path / "t.zarr"), n_iter=40, burn_in=10, thin=2,
                random_state=3, missing="mask", n_trace_columns=0, client="synchronous")
    assert main(["fit", str(d2), "--k", "3", "--out", str(tmp_path / "t.zarr"), "--resume",
                 "--n-iter", "50", "--scheduler", "synchronous", "-q"]) == 0, \
        capsys.readouterr().err
    assert read_result(str(tmp_path / "t.zarr")).trace.shape == (1, 50)


def test_a_moved_result_resumes_and_an_edited_conversion_is_made_again(data, tmp_path,
                                                                        capsys):
    """A result moved (or copied) elsewhere could not be resumed from its own .npy ("was
    fitted on '.../runs/a.npy.zarr', not on 'a.npy'"): its conversion now goes beside it
    and the checksum decides. A converted store whose chunks were rewritten after its
    conversion (a value edited in place) was reused without a word and fitted: it is
    converted again from the unchanged file, which resumes the fit too."""
    import shutil

    from dask_bid.engine import read_result

    d, A, _ = data
    src = tmp_path / "a.npy"
    shutil.copy(d / "a.npy", src)
    args = ["--k", "3", *FAST, "--scheduler", "synchronous"]
    assert main(["fit", str(src), *args, "--out", str(tmp_path / "runs" / "r.zarr")]) == 0
    (tmp_path / "moved").mkdir()
    shutil.move(tmp_path / "runs" / "r.zarr", tmp_path / "moved" / "r.zarr")
    moved = ["fit", str(src), *args, "--out", str(tmp_path / "moved" / "r.zarr"), "--resume"]
    assert main([*moved, "--n-iter", "50"]) == 0, capsys.readouterr().err
    assert read_result(str(tmp_path / "moved" / "r.zarr")).trace.shape == (1, 50)
    conv = tmp_path / "moved" / "a.npy.zarr"
    zarr.open_array(str(conv), mode="r+")[0, 0] = 123.0
    capsys.readouterr()
    assert main([*moved, "--n-iter", "60"]) == 0
    err = capsys.readouterr().err
    assert f"replacing    {conv} (its chunks changed since it was converted from" in err, err
    np.testing.assert_array_equal(zarr.open_array(str(conv), mode="r")[...], A)
    assert read_result(str(tmp_path / "moved" / "r.zarr")).trace.shape == (1, 60)
    # unchanged since: reused, as before
    assert main(["fit", str(src), *args, "--out", str(tmp_path / "moved" / "k.zarr")]) == 0
    assert f"reusing {conv} (already converted" in capsys.readouterr().err
    # a project moved whole (file, conversion and result): it was refused as "now holds
    # the conversion of another file of that name (... --overwrite)", the same file moved
    proj = tmp_path / "proj"
    proj.mkdir()
    shutil.copy(src, proj / "b.npy")
    first = ["fit", str(proj / "b.npy"), *args, "--out", str(proj / "r.zarr")]
    assert main(first) == 0
    shutil.move(proj, tmp_path / "proj2")
    assert main(["fit", str(tmp_path / "proj2" / "b.npy"), *args, "--out",
                 str(tmp_path / "proj2" / "r.zarr"), "--resume", "--n-iter", "50"]) == 0, \
        capsys.readouterr().err
    assert f"reusing {tmp_path / 'proj2' / 'b.npy.zarr'}" in capsys.readouterr().err
    # a copy of the file elsewhere is not the file the store was converted from
    shutil.copy(tmp_path / "proj2" / "b.npy", tmp_path / "proj2" / "c.npy")
    (tmp_path / "proj2" / "b.npy").unlink()
    (tmp_path / "proj2" / "c.npy").rename(tmp_path / "proj2" / "b.npy")
    assert main(["fit", str(tmp_path / "proj2" / "b.npy"), *args, "--out",
                 str(tmp_path / "proj2" / "r.zarr"), "--resume", "--n-iter", "60"]) == 2
    assert "changed (size or time) since" in capsys.readouterr().err


def test_a_fit_that_failed_after_checkpoints_names_its_resume_and_is_not_replaced(tmp_path,
                                                                                   capsys):
    """A full disk (here: a file-size limit) after the fit had saved checkpoints: the error
    line was the bare "[Errno 27] File too large", and the same command run again replaced
    the failed fit, its saved iterations lost. The line now names the command that
    continues it, the retry without --resume is refused, and --resume finishes the fit."""
    import resource

    from dask_bid.engine import read_result

    rng = np.random.default_rng(0)
    np.save(tmp_path / "big.npy", rng.standard_normal((120, 20)))
    argv = ["fit", str(tmp_path / "big.npy"), "--k", "3", "--n-iter", "60", "--burn-in",
            "10", "--scheduler", "synchronous", "--seed", "1", "--checkpoint-every", "10",
            "-q", "--out"]
    # the same fit without a limit: its largest file is its last checkpoint's (a block's
    # traced draws grow with the iterations), written at iteration 60; one byte less as the
    # limit fails the fit there, after the checkpoint of iteration 50 (the conversion is
    # made here first, without the limit)
    assert main([*argv, str(tmp_path / "ref.zarr")]) == 0
    sizes = {p: p.stat().st_size for p in (tmp_path / "ref.zarr").rglob("*") if p.is_file()}
    biggest = max(sizes, key=sizes.get)
    assert "checkpoint" in biggest.parts, biggest
    limit = sizes[biggest] - 1
    out = tmp_path / "u.zarr"
    # the log of the library's error goes to $XDG_CACHE_HOME/dask_bid/logs (the numba
    # cache stays where it is: NUMBA_CACHE_DIR, set by import dask_bid)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "dask_bid.interface.cli", *argv, str(out)],
                       capture_output=True, text=True, timeout=300, env=env,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                             (limit, limit)))
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    m = re.search(r"File too large \((writing \S+: )?a full disk or a file-size limit: free "
                  r"space, or raise the limit\); the fit at \S+ saved iteration (\d+): fix "
                  r"the cause, "
                  r"then continue it with `dask-bid fit .* --resume` \(traceback: (\S+)\)\n$",
                  r.stderr)
    assert m and 0 < int(m.group(2)) < 60, r.stderr
    assert_one_line_error(r.stderr, "File too large")
    log = Path(m.group(3))
    assert log.parent == tmp_path / "cache" / "dask_bid" / "logs"
    assert "Traceback (most recent call last)" in log.read_text()
    assert main([*argv, str(out)]) == 2
    assert_one_line_error(capsys.readouterr().err, f"holds a fit that failed (OSError: "
                          f"[Errno 27] File too large) after saving iteration {m.group(2)}: "
                          "add --resume to continue it")
    assert main([*argv, str(out), "--resume"]) == 0, capsys.readouterr().err
    assert_same_chain(read_result(str(tmp_path / "ref.zarr")), read_result(str(out)))


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupt_then_resume_gives_the_uninterrupted_fit(data, tmp_path, capsys, sig):
    """Ctrl-C during a fit: exit 130 with a hint; --resume finishes it, same draws. A
    SIGTERM (what SLURM or docker stop send before killing) does the same: it killed the
    process at once, with no message, redoing up to --checkpoint-every iterations."""
    import signal
    import time

    d, _, _ = data
    out = tmp_path / "r.zarr"
    # long enough (200 iterations, interrupted at the first checkpoint, iteration 5) that
    # the interrupt lands mid-fit; short enough that the three fits stay quick. The subject is
    # the interrupt, not the sampler: collapsed swaps only (the pivot swaps and the warm-up
    # resume bitwise in test_engine_faults.py)
    base = ["fit", d / "a.npy", "--k", "3", "--out", out, "--n-iter", "200", "--burn-in",
            "10", "--seed", "3", "--scheduler", "synchronous", "--checkpoint-every", "5",
            "--n-pivot", "0", "--tempered-warmup", "0"]
    p = subprocess.Popen([sys.executable, "-m", "dask_bid.interface.cli", *map(str, base)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # wait until the fit has completed its first checkpoint, then interrupt it once: the
    # CLI's InterruptLatch stops the fit at the end of the iteration, and the engine saves
    # that iteration first
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not complete_checkpoints(out):
        time.sleep(0.05)
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=120)
    if p.returncode == 0:
        pytest.fail("the fit finished before the interrupt; make it longer")
    assert p.returncode == 130, err[-2000:]
    # (zarr's event loop may add a note of its own at interpreter exit)
    ours = [ln for ln in err.splitlines() if ln.startswith("dask-bid:")]
    # the hint is the command that continues it (the typed options, with --resume)
    again = shlex.join(["dask-bid", *map(str, base), "--resume"])
    first = InterruptLatch.MESSAGE if sig == "SIGINT" else (
        "dask-bid: terminated (SIGTERM): stopping after this iteration and saving a "
        "checkpoint (a second signal to stop at once)")
    assert ours == [first, f"dask-bid: interrupted (continue it: {again})"], err[-2000:]
    # the newest checkpoint is the interrupted iteration's (at or after the first, at 5;
    # test_engine_masked and test_s3 check the iteration exactly)
    saved = complete_checkpoints(out)
    assert saved and saved[-1] >= 5, saved
    # the rest in this process (a new interpreter costs seconds: the suite's time), where
    # a resume that found no checkpoint and restarted would fail on its warning
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "continue it: dask-bid fit ... --resume" in shown
    # and how far it got: the iteration the resume continues from
    assert f"  saved      {saved[-1]} of 200 iterations (its last checkpoint" in shown, shown
    # the checkpoint cadence does not change the draws: the resumed and the reference
    # runs checkpoint rarely (a checkpoint costs more than five iterations here)
    rare = ["--checkpoint-every", "200"]
    capsys.readouterr()
    assert main([*shlex.split(again)[1:], *rare]) == 0
    # its chain time covers both runs (kept in the checkpoint), and says so
    assert re.search(r"\nchain time   [\d.]+ s sampling, all runs of the fit\n",
                     capsys.readouterr().out)
    ref_out = tmp_path / "ref.zarr"
    assert main([str(a) if a != out else str(ref_out) for a in base] + ["-q", *rare]) == 0
    assert_same_trace(open_result(out).trace_, open_result(ref_out).trace_)


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_a_second_ctrl_c_while_the_hint_is_written_changes_nothing(monkeypatch, capsys,
                                                                   tmp_path):
    """Two Ctrl-C a few ms apart: the second landed while the "continue it" hint was
    being made and printed a second traceback instead of it. Now it is ignored there, and
    the handler is given back after."""
    import signal

    from dask_bid.interface.cli import fit as fit_cli

    def interrupted(args):
        raise KeyboardInterrupt

    def second_press(argv):
        os.kill(os.getpid(), signal.SIGINT)  # the second Ctrl-C, while the hint is made
        return "dask-bid fit ... --resume"

    monkeypatch.setattr(fit_cli, "run", interrupted)
    monkeypatch.setattr(fit_cli, "continue_command", second_press)
    before = signal.getsignal(signal.SIGINT)
    out = tmp_path / "o.zarr"
    out.mkdir()  # as the interrupted fit left it
    assert main(["fit", "x.npy", "--k", "2", "--out", str(out)]) == 130
    assert capsys.readouterr().err == ("dask-bid: interrupted (continue it: dask-bid fit ... "
                                       "--resume)\n")
    assert signal.getsignal(signal.SIGINT) is before
    # stopped before the fit wrote anything (while compiling): no --resume to suggest
    out.rmdir()
    assert main(["fit", "x.npy", "--k", "2", "--out", str(out)]) == 130
    assert capsys.readouterr().err == ("dask-bid: interrupted (before the fit started: "
                                       "nothing to continue)\n")


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_ctrl_c_while_the_kernels_compile_says_what_it_does(data, monkeypatch, capsys,
                                                            tmp_path):
    """A Ctrl-C while the kernels compile said it would stop "after this iteration and
    save a checkpoint", then, when compiled, "continue it: ... --resume" with nothing to
    continue. Now it says it stops when they are compiled, and that nothing was saved."""
    import signal

    from dask_bid.interface.cli import runtime

    def compile_with_a_press(params):
        os.kill(os.getpid(), signal.SIGINT)  # taken by the latch: compilation goes on
        return 0.1

    monkeypatch.setattr(runtime, "compile_kernels", compile_with_a_press)
    d, _, _ = data
    out = tmp_path / "o.zarr"
    rc = main(["fit", str(d / "a.npy"), "--k", "2", "--out", str(out), "--scheduler",
               "synchronous", "--n-iter", "10", "--burn-in", "2"])
    err = capsys.readouterr().err
    assert rc == 130, err
    assert ("dask-bid: stopping when the kernels are compiled, before the fit starts "
            "(Ctrl-C again to stop at once)") in err
    assert err.rstrip().endswith("dask-bid: interrupted (before the fit started: nothing "
                                 "to continue)"), err
    assert not out.exists()


@pytest.mark.parametrize("engine", [False, True])
def test_progress_counts_every_iteration_of_every_chain(data, engine):
    """The callback path through bayesian_id, in memory and on the engine."""
    import io

    from dask_bid import bayesian_id
    from dask_bid.interface.cli import ChainProgress

    _, A, _ = data
    sink = io.StringIO()
    with ChainProgress(3 * 25, file=sink) as bar:
        bayesian_id(A, 2, n_iter=25, burn_in=5, thin=1, n_chains=3, random_state=0,
                    callback=bar, **({"client": "synchronous"} if engine else {}))
        assert bar.bar.n == 75
    assert "75/75" in sink.getvalue()


def test_progress_of_a_resumed_chain_starts_where_it_stopped():
    import io

    from dask_bid.engine.chain import ClientState
    from dask_bid.interface.cli import ChainProgress

    def state(it):
        return ClientState(iteration=it, J=np.arange(2), G=np.eye(2), sse=1.0, sigma2=0.1,
                           trace_mse=[0.5])

    with ChainProgress(2 * 200, file=io.StringIO()) as bar:
        resumed, fresh = state(101), state(1)
        bar(resumed)  # restored from a checkpoint at iteration 100, then one more
        assert bar.bar.n == 101
        bar(fresh)
        resumed.iteration = 102
        bar(resumed)
        assert bar.bar.n == 103
        resumed.iteration = 400  # never past the total
        bar(resumed)
        assert bar.bar.n == 400


def test_interrupt_latch_stops_at_the_next_check_and_at_once_on_a_second_ctrl_c(capsys):
    """The first Ctrl-C is remembered and raised by the next check (after the iteration);
    a second one raises where it lands; outside the latch SIGINT is back to its previous
    handler."""
    import signal
    import time

    from dask_bid.interface.cli import InterruptLatch

    before = signal.getsignal(signal.SIGINT)
    with InterruptLatch() as latch:
        latch.check()  # nothing yet
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs at the next bytecode boundary: no exception
        assert latch.hit
        assert InterruptLatch.MESSAGE in capsys.readouterr().err
        with pytest.raises(KeyboardInterrupt):
            latch.check()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
    assert signal.getsignal(signal.SIGINT) is before
