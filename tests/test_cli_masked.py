"""`dask-bid fit INPUT --missing mask`: NaN marks a missing entry, on the command line.

Text and .npy input keep their NaN when converted to Zarr; a Zarr input is read as is.
The fit is the Python API's masked fit of the same store, and `info` shows the observed
entries.
"""

from __future__ import annotations

import numpy as np
import pytest
import zarr
from _support import assert_same_chain
from test_cli import FAST, assert_one_line_error

from dask_bid import open_result
from dask_bid.engine import read_result, to_zarr
from dask_bid.interface import bayesian_id
from dask_bid.interface.cli import main

pytestmark = pytest.mark.timeout(240)

K = 2


def _matrix(seed=0, M=40, N=10):
    from dask_bid.interface.demo import make_demo_matrix

    A, _, _ = make_demo_matrix(M, N, K, seed=seed)
    A = A.copy()
    A[np.random.default_rng(seed).random(A.shape) < 0.2] = np.nan
    return A


def _write_text(path, A):
    path.write_text("\n".join(" ".join("nan" if np.isnan(v) else repr(float(v)) for v in row)
                              for row in A) + "\n")
    return path


def _api_fit(store):
    """The Python API's fit matching FAST (synchronous engine, seed 3)."""
    return bayesian_id(str(store), K, n_iter=40, burn_in=10, thin=2, random_state=3,
                       missing="mask", client="synchronous")


@pytest.mark.parametrize("fmt", ["txt", "npy"])
def test_text_and_npy_keep_their_nan_and_fit_masked(tmp_path, capsys, fmt):
    A = _matrix()
    n_nan = int(np.isnan(A).sum())
    src = tmp_path / f"in.{fmt}"
    if fmt == "npy":
        np.save(src, A)
    else:
        _write_text(src, A)
    out = tmp_path / "o.zarr"
    assert main(["fit", str(src), "--k", str(K), "--out", str(out), *FAST,
                 "--missing", "mask"]) == 0, capsys.readouterr().err
    assert f"missing      {n_nan} NaN entries of {src} left out of the likelihood" \
        in capsys.readouterr().err
    conv = zarr.open_array(str(tmp_path / f"in.{fmt}.zarr"), mode="r")
    np.testing.assert_array_equal(conv[...], A)  # NaN kept where it was, nothing filled
    assert conv.attrs["dask_bid_missing"] == {"fill": "keep", "n_filled": 0, "n_kept": n_nan}
    res = read_result(str(out))
    assert res.params["missing"] == "mask" and res.mse_observed is not None
    # the command line's fit is the Python API's on the same store, bitwise
    assert_same_chain(_api_fit(tmp_path / f"in.{fmt}.zarr"), res)
    assert open_result(str(out)).missing == "mask"
    # info: the observed entries of the file, of the converted store, and the fit's MSEs
    total = A.size
    for path in (src, tmp_path / f"in.{fmt}.zarr"):
        assert main(["info", str(path)]) == 0
        text = capsys.readouterr().out
        assert f"observed   {total - n_nan} of {total} entries ({(total - n_nan) / total:.1%})" \
            in text, text
        assert "--missing mask" in text
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    from dask_bid.interface.cli._core import fmt_g

    assert "missing=mask" in text
    # the observed entries' MSE first (what the model fits), then the paper's
    assert (f"MSE        {fmt_g(res.mse_observed)} over the observed entries "
            f"({fmt_g(res.mse)} over all, the unobserved as 0)") in text, text
    # the same command again reuses the conversion
    assert main(["fit", str(src), "--k", str(K), "--out", str(out), *FAST, "--missing", "mask",
                 "--overwrite"]) == 0
    assert "reusing" in capsys.readouterr().err


def test_zarr_input_with_nan_fits_masked(tmp_path, capsys):
    A = _matrix(1)
    store = tmp_path / "in.zarr"
    to_zarr(A, store, chunks=(16, 5))
    out = tmp_path / "o.zarr"
    assert main(["fit", str(store), "--k", str(K), "--out", str(out), *FAST, "-q",
                 "--missing", "mask"]) == 0, capsys.readouterr().err
    assert_same_chain(_api_fit(store), read_result(str(out)))
    assert main(["info", str(store)]) == 0
    n_obs = int((~np.isnan(A)).sum())
    assert f"observed   {n_obs} of {A.size} entries" in capsys.readouterr().out


def test_a_conversion_made_for_the_other_treatment_of_nan_is_not_reused(tmp_path, capsys):
    src = _write_text(tmp_path / "in.txt", _matrix(2))
    args = ["fit", str(src), "--k", str(K), *FAST, "-q"]
    assert main([*args, "--out", str(tmp_path / "z.zarr"), "--fill-missing", "zero"]) == 0
    before = zarr.open_array(str(tmp_path / "in.txt.zarr"), mode="r")[...]
    assert main([*args, "--out", str(tmp_path / "m.zarr"), "--missing", "mask"]) == 2
    assert_one_line_error(capsys.readouterr().err, "--fill-missing zero (NaN replaced by 0)",
                          "--missing mask (NaN kept)", "--overwrite")
    # refused before anything was written: the zero-filled conversion is intact
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "in.txt.zarr"))[...], before)
    assert not (tmp_path / "m.zarr").exists()
    # without a flag: the NaN advice names both ways
    assert main([*args, "--out", str(tmp_path / "n.zarr")]) == 2
    assert_one_line_error(capsys.readouterr().err, "--missing mask", "--fill-missing zero")
    # --overwrite converts again, keeping the NaN
    assert main([*args, "--out", str(tmp_path / "m.zarr"), "--missing", "mask",
                 "--overwrite"]) == 0
    assert np.isnan(zarr.open_array(str(tmp_path / "in.txt.zarr"))[...]).any()


def test_paper_file_with_missing_mask(shared_data_dir, tmp_path, capsys):
    """The README's command on the paper's CCLE IC50 file (426 NaN of 12096)."""
    src = shared_data_dir / "ccle_ic50" / "ic50.txt"
    out = tmp_path / "ic50-k5.zarr"
    assert main(["fit", str(src), "--k", "5", "--out", str(out), "--missing", "mask",
                 "--n-iter", "30", "--burn-in", "10", "--seed", "0", "-q"]) == 0
    res = read_result(str(out))
    assert res.params["missing"] == "mask" and res.mse_observed > 0
    z = zarr.open_array(str(tmp_path / "ic50.txt.zarr"), mode="r")
    assert int(np.isnan(z[...]).sum()) == 426
    assert main(["info", str(src)]) == 0
    assert "observed   11670 of 12096 entries (96.5%)" in capsys.readouterr().out
