"""Bad input is refused early, with a specific exception and a message naming the fix.

Every case of ``docs/errors.md`` is exercised through the public API (``BayesianID.fit``
or ``bayesian_id``), for numpy input in memory and for dask / Zarr input on the engine
(dask's synchronous scheduler, and a LocalCluster with a worker process where an error
has to travel back from a worker). Two guarantees are tested beyond the messages:

- validation reads no data: a bad parameter on a 10 GB Zarr array whose chunk files do
  not exist (and one of which is garbage) fails at once with the parameter's error;
- the input store is never written: every file of it is hashed before and after failing
  and succeeding runs.
"""

import hashlib
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import zarr

import dask_bid
from dask_bid import BayesianID, bayesian_id
from dask_bid._errors import (
    CorruptStoreError,
    DaskBidError,
    FitFailedError,
    IncompleteStoreError,
    InputChangedError,
    InputDTypeError,
    InputShapeError,
    NonFiniteInputError,
    NotAnArrayError,
    OutputExistsError,
    OutputLocationError,
    OutputLockedError,
    ParameterError,
    SchedulerUnreachableError,
    StoreNotFoundError,
)
from dask_bid.baselines import RandomizedID
from dask_bid.interface._params import validate_params
from dask_bid.interface.functional import DEFAULTS

FAST = dict(n_iter=6, burn_in=2, thin=1, random_state=0)
SYNC = dict(client="synchronous")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "errors.md"


@pytest.fixture(scope="module")
def A():
    rng = np.random.default_rng(0)
    return rng.standard_normal((30, 10)) @ np.diag(np.linspace(1, 2, 10))


def write_store(path, data, chunks=(10, 10)):
    if chunks is None or any(c < 1 for c in chunks) or len(chunks) != data.ndim:
        chunks = tuple(max(1, n) for n in data.shape)
    z = zarr.create_array(store=str(path), shape=data.shape, chunks=chunks, dtype=data.dtype,
                          zarr_format=3)
    z[...] = data
    return str(path)


@pytest.fixture
def store(tmp_path, A):
    return write_store(tmp_path / "A.zarr", A)


@pytest.fixture
def cluster_client(shared_client):
    """Worker processes (the suite's shared cluster, conftest): errors raised on them must
    reach the client with their type."""
    return shared_client


def corrupt_chunk(store_path, key="c/1/0"):
    chunk = Path(store_path) / key
    assert chunk.is_file()  # the chunk exists: we damage it, we do not remove it
    chunk.write_bytes(b"\x00garbage, not a zstd frame" * 3)
    return str(chunk)


def closed_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_every_error_subclasses_the_base_and_a_builtin():
    for name in dask_bid._errors.__all__:
        cls = getattr(dask_bid._errors, name)
        if issubclass(cls, Warning):  # a warning (ConvergenceWarning), not an error
            assert issubclass(cls, (UserWarning, RuntimeWarning)), name
            assert getattr(dask_bid, name) is cls  # importable from dask_bid, as docs say
            continue
        assert issubclass(cls, DaskBidError)
        if cls is not DaskBidError:
            builtin = [b for b in cls.__mro__ if b.__module__ == "builtins" and b is not object
                       and b is not Exception and b is not BaseException]
            assert builtin, f"{name} subclasses no builtin exception a user would catch"


def test_every_error_type_has_a_row_in_docs():
    text = DOCS.read_text()
    rows = [line for line in text.splitlines() if line.startswith("|")]
    for name in dask_bid._errors.__all__:
        if name == "DaskBidError":
            continue
        assert any(f"`{name}`" in r for r in rows), f"{name} has no row in docs/errors.md"


# --------------------------------------------------------------------------- shape
SHAPES = [
    (np.ones(12), "2-D matrix.*1-D shape"),
    (np.ones((2, 3, 4)), "2-D matrix.*3-D shape"),
    (np.ones((0, 5)), "empty"),
    (np.ones((5, 0)), "empty"),
    (np.ones((6, 1)), "1 column.*at least 2 columns"),
    (np.float64(3.0), "0-D"),
]


@pytest.mark.parametrize("x,match", SHAPES, ids=["1d", "3d", "no-rows", "no-cols", "1-col",
                                                  "scalar"])
@pytest.mark.parametrize("kind", ["numpy", "dask", "zarr"])
def test_input_shape(x, match, kind, tmp_path):
    if kind == "dask":
        x = da.from_array(x)
    elif kind == "zarr":
        x = write_store(tmp_path / "x.zarr", np.asarray(x), chunks=None)
    with pytest.raises(InputShapeError, match=match):
        BayesianID(1, **FAST).fit(x, **SYNC)


# --------------------------------------------------------------------------- K
@pytest.mark.parametrize("K,match", [
    (0, r"n_components must be between 1 and 9, got 0\..*1 <= K < N \(N = 10\)"),
    (-3, "between 1 and 9, got -3"),
    (10, "between 1 and 9, got 10"),
    (11, "between 1 and 9, got 11"),
    (3.0, "n_components must be an integer, got 3.0"),
    (2.5, "must be an integer, got 2.5"),
    ("3", "must be an integer, got '3'"),
    (None, "must be an integer, got None"),
    (True, "must be an integer, got True"),
])
def test_n_components(A, K, match):
    with pytest.raises(ParameterError, match=match):
        BayesianID(K, **FAST).fit(A)
    with pytest.raises(ParameterError, match=match):
        bayesian_id(A, K, **FAST)


@pytest.mark.parametrize("init", ["auto", "random", "sketch"])
def test_more_columns_than_rows_is_refused_for_every_start_before_any_output(A, init,
                                                                             tmp_path):
    # K > M: every basis is linearly dependent (init="random" used to fit it silently,
    # and a Zarr input got its output created before the start refused it)
    A4 = A[:4]
    match = r"n_components=6 exceeds the number of rows M=4.*choose n_components <= 4"
    with pytest.raises(ParameterError, match=match):
        BayesianID(6, **FAST, init=init).fit(A4)
    out = tmp_path / "out.zarr"
    with pytest.raises(ParameterError, match=match):
        BayesianID(6, **FAST, init=init).fit(write_store(tmp_path / "a.zarr", A4),
                                              out=str(out), **SYNC)
    assert not out.exists()
    assert BayesianID(4, **FAST, init=init).fit(A4).columns_.size == 4  # K = M: allowed


def test_numpy_integer_K_is_accepted(A):
    a = BayesianID(np.int64(3), **FAST).fit(A)
    b = BayesianID(3, **FAST).fit(A)
    np.testing.assert_array_equal(a.columns_, b.columns_)


# --------------------------------------------------------------------------- parameters
PARAMS = [
    (dict(bounds=(1.0, -1.0)), r"bounds must satisfy a < b, got a=1.0, b=-1.0"),
    (dict(bounds=(1.0, 1.0)), "a < b"),
    (dict(bounds=(-1.0, 0.5)), r"must contain 0 and 1.*W\[:, J\] to the identity"),
    (dict(bounds=(0.2, 1.0)), "must contain 0 and 1"),
    (dict(bounds=(-np.inf, np.inf)), "bounds must be finite"),
    (dict(bounds=(np.nan, 1.0)), "bounds must be finite"),
    (dict(bounds=(-1, 0, 1)), r"pair \(a, b\)"),
    (dict(bounds="ab"), r"pair \(a, b\)"),
    (dict(bounds=None), r"pair \(a, b\)"),
    (dict(tau=0.0), r"tau must be a positive finite number, got 0.0.*precision.*> 0"),
    (dict(tau=-1), "tau must be a positive"),
    (dict(alpha_sigma=0), "alpha_sigma must be a positive"),
    (dict(beta_sigma=-0.5), "beta_sigma must be a positive"),
    (dict(beta_sigma=np.inf), "beta_sigma must be a positive finite number, got inf"),
    (dict(tau_mu=0), "tau_mu must be a positive"),
    (dict(alpha_t=-2.0), "alpha_t must be a positive"),
    (dict(beta_t=np.nan), "beta_t must be a positive"),
    (dict(temperature=0), "temperature must be a positive"),
    (dict(tau="1"), "tau must be a positive finite number, got '1'"),
    (dict(mu=np.nan), "mu must be a finite number"),
    (dict(mu_mu=np.inf), "mu_mu must be a finite number"),
    (dict(n_iter=10, burn_in=10), r"burn_in \(10\) must be smaller than n_iter \(10\).*Lower"),
    (dict(n_iter=10, burn_in=25), r"burn_in \(25\) must be smaller than n_iter \(10\)"),
    # a whole fit for one retained draw (it ran, then warned)
    (dict(n_iter=10, burn_in=2, thin=9), r"thin=9 exceeds the 8 iterations after the "
                                         r"burn-in \(n_iter=10, burn_in=2\): it would keep "
                                         r"their first draw only\. Lower the thinning"),
    (dict(burn_in=-1), "burn_in must be >= 0"),
    (dict(n_iter=0, burn_in=0), "n_iter must be >= 1"),
    (dict(n_iter=5.5), "n_iter must be an integer"),
    (dict(thin=0), "thin must be >= 1, got 0.*thin=1"),
    (dict(thin=-2), "thin must be >= 1"),
    (dict(thin=1.5), "thin must be an integer"),
    (dict(model="gbtx"), r"unknown model 'gbtx'; choose one of 'gbt', 'gbtn'"),
    (dict(model=""), "unknown model ''"),
    (dict(model=None), "unknown model None"),
    (dict(point_estimate="mean"), "unknown point_estimate 'mean'; choose one of 'mode', 'best'"),
    (dict(init="kmeans"), "unknown init 'kmeans'.*or pass K column indices"),
    (dict(init=[0, 1]), "K=3 integer column indices"),
    (dict(init=[0, 1, 1]), r"3 distinct indices in \[0, 10\)"),
    (dict(init=[0, 1, 10]), r"3 distinct indices in \[0, 10\)"),
    (dict(init=[0.0, 1.0, 2.0]), "integer column indices"),
    (dict(proposal_init="zero"), "unknown proposal_init 'zero'"),
    (dict(missing="drop"), r"unknown missing 'drop'; choose one of 'zero', 'mask'"),
    (dict(missing=None), "unknown missing None"),
    (dict(sampler="yes"), "unknown sampler 'yes'"),
    (dict(n_tries=0), "n_tries must be >= 1"),
    (dict(n_tries="some"), "n_tries must be an integer"),
    (dict(n_anneal=-1), "n_anneal must be >= 0"),
    (dict(anneal_every=0), "anneal_every must be >= 1"),
    (dict(search_warmup=50, burn_in=10, n_iter=20), r"search_warmup \(50\) must not exceed"),
    (dict(tempered_warmup=50, burn_in=10, n_iter=20), r"tempered_warmup \(50\) must not exceed"),
    (dict(tempered_warmup=5, search_warmup=5, burn_in=10, n_iter=20),
     "search_warmup and tempered_warmup are two warm-ups"),
    (dict(tempered_warmup="some"), "tempered_warmup must be an integer"),
    (dict(warmup_temperature=0.5), "warmup_temperature must be >= 1"),
    (dict(warmup_temperature=-1.0), "warmup_temperature must be a positive finite number"),
    (dict(n_pivot=-1), "n_pivot must be >= 0"),
    (dict(n_redraw=-1), "n_redraw must be >= 0"),
    (dict(n_redraw="some"), "n_redraw must be an integer"),
    (dict(acceptance="mh"), "unknown acceptance 'mh'"),
    (dict(n_chains=0), "n_chains must be >= 1"),
    (dict(n_candidates=0), "n_candidates must be >= 1"),
    (dict(block_size=0), "block_size must be >= 1"),
    (dict(n_threads=0), "n_threads must be >= 1"),
    (dict(n_trace_columns=-1), "n_trace_columns must be >= 0"),
    (dict(random_state=-1), "random_state must be None, a non-negative integer"),
    (dict(random_state="seed"), "random_state must be None"),
    (dict(random_state="1927"), r"stored entropy .* is passed as random_state=int\('1927'\)"),
    (dict(refine_sweeps=-1), "refine_sweeps must be >= 0"),
    (dict(w_estimate="median"),
     "unknown w_estimate 'median'; choose one of 'mean', 'map', 'lstsq'"),
]


@pytest.mark.parametrize("kwargs,match", PARAMS,
                         ids=[f"{i:02d}-{list(kw)[-1]}" for i, (kw, _) in enumerate(PARAMS)])
def test_parameter_errors(A, kwargs, match):
    params = {**FAST, **kwargs}
    with pytest.raises(ParameterError, match=match):
        BayesianID(3, **params).fit(A)


@pytest.mark.parametrize("legacy,match", [
    (dict(aggressive=False), "aggressive= was replaced by sampler="),
    (dict(swap_score="lstsq"), "swap_score='lstsq' is sampler='search'"),
])
def test_options_of_earlier_versions_name_their_replacement(A, legacy, match):
    from dask_bid import bayesian_id

    with pytest.raises(ParameterError, match=match):
        bayesian_id(A, 3, **FAST, **legacy)


def test_parameter_error_is_a_value_error(A):
    with pytest.raises(ValueError):
        BayesianID(3, **{**FAST, "tau": 0}).fit(A)


@pytest.mark.parametrize("name", ["GBT", "Gbtn", "gbt", "GBTN"])
def test_model_names_are_case_insensitive(A, name):
    est = BayesianID(3, model=name, **FAST).fit(A)
    assert est.result_.params["model"] == name.lower()
    ref = BayesianID(3, model=name.lower(), **FAST).fit(A)
    np.testing.assert_array_equal(est.components_, ref.components_)


def test_validation_accepts_every_documented_choice():
    base = {**DEFAULTS, "n_components": 3}
    for missing in ("zero", "mask", "MASK"):
        assert validate_params({**base, "missing": missing}, 10)["missing"] == missing.lower()
    for init in ("auto", "random", "sketch", "cpqr", [0, 4, 9], np.array([1, 2, 3])):
        validate_params({**base, "init": init}, 10)
    p = validate_params({**base, "bounds": [-2, 2], "n_components": np.int32(9)}, 10)
    assert p["bounds"] == (-2.0, 2.0) and p["priors"].a == -2.0 and p["n_components"] == 9
    assert type(p["n_components"]) is int


def test_unknown_keyword_is_a_type_error(A):
    """Named with the nearest known keyword, from bayesian_id and from BayesianID.fit
    (whose message named bayesian_id() and no fix)."""
    with pytest.raises(TypeError, match=r"unexpected keyword argument \['n_iters'\] \(did "
                                        r"you mean 'n_iter'\?\)"):
        bayesian_id(A, 3, n_iters=10)
    with pytest.raises(TypeError, match=r"\['clinet'\] \(did you mean 'client'\?\): a fit "
                                        r"takes the model's parameters \(BayesianID's\) and "
                                        r"allow_missing_chunks, callback, "):
        BayesianID(3).fit(A, clinet="synchronous")


# --------------------------------------------------------------------------- dtypes
def _bad_dtypes(A):
    # each refusal names the dtype and the conversion that fits what was passed
    return [
        (A.astype(np.complex128), "complex128 is not supported.*A.real.astype"),
        (A.astype(object), "object is not supported.*A.astype\\(float\\)"),
        (A.astype(str), "<U.* is not supported.*holds text"),
        (A.astype(np.float64).view("datetime64[ns]"), "datetime64.*not supported.*Dates"),
        (np.zeros((4, 3), dtype="S2"), "S2 is not supported.*bytes"),
        ([[1.0, 2.0], [3.0]], "cannot convert input of type list"),
        (np.zeros((4, 3), dtype=[("a", "f8")]), "not supported.*structured_to_unstructured"),
    ]


@pytest.mark.parametrize("i", range(7), ids=["complex", "object", "str", "datetime", "bytes",
                                             "ragged", "structured"])
def test_refused_dtypes(A, i):
    x, match = _bad_dtypes(A)[i]
    with pytest.raises(InputDTypeError, match=match):
        BayesianID(1, **FAST).fit(x)
    with pytest.raises(TypeError):  # InputDTypeError is a TypeError
        bayesian_id(x, 1, **FAST)


def test_a_dataframe_with_a_label_column_names_it(A):
    import pandas as pd  # the [test] extra
    df = pd.DataFrame(A, columns=[f"c{j}" for j in range(A.shape[1])])
    df.insert(0, "cell_line", [f"cell{i}" for i in range(A.shape[0])])
    with pytest.raises(InputDTypeError, match=r"columns \['cell_line'\] do not hold numbers"
                       r".*df.set_index\('cell_line'\)"):
        BayesianID(1, **FAST).fit(df)
    # the fix the message gives fits the matrix itself
    fixed = BayesianID(1, **FAST).fit(df.set_index("cell_line"))
    np.testing.assert_array_equal(fixed.columns_, BayesianID(1, **FAST).fit(A).columns_)


def test_refused_dtypes_out_of_core(A, tmp_path):
    with pytest.raises(InputDTypeError, match="complex64 is not supported"):
        BayesianID(3, **FAST).fit(da.from_array(A.astype(np.complex64)), **SYNC)
    path = write_store(tmp_path / "c.zarr", A.astype(np.complex128))
    with pytest.raises(InputDTypeError, match="complex128 is not supported"):
        BayesianID(3, **FAST).fit(path, **SYNC)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16, np.bool_])
def test_integer_and_boolean_input_equals_the_float_fit(dtype):
    rng = np.random.default_rng(3)
    if dtype is np.bool_:
        X = rng.random((30, 10)) < 0.5
    else:
        X = rng.integers(0, 100, (30, 10)).astype(dtype)
    kw = dict(n_iter=20, burn_in=5, thin=1, random_state=4)
    a = BayesianID(3, **kw).fit(X)
    b = BayesianID(3, **kw).fit(X.astype(np.float64))
    np.testing.assert_array_equal(a.columns_, b.columns_)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.mse_ == b.mse_


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.bool_])
def test_integer_and_float32_stores_equal_the_float64_store(tmp_path, dtype):
    rng = np.random.default_rng(5)
    X = (rng.integers(-50, 50, (30, 10)) if dtype is not np.bool_
         else rng.random((30, 10)) < 0.5).astype(dtype)
    kw = dict(n_iter=12, burn_in=4, thin=1, random_state=6)
    a = bayesian_id(write_store(tmp_path / "x.zarr", X), 3, **kw, **SYNC)
    b = bayesian_id(write_store(tmp_path / "f.zarr", X.astype(np.float64)), 3, **kw, **SYNC)
    np.testing.assert_array_equal(a.columns, b.columns)
    np.testing.assert_array_equal(a.components, b.components)


# --------------------------------------------------------------------------- non-finite
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("missing", ["zero", None])
def test_non_finite_numpy_input_is_refused_at_once(A, bad, missing):
    X = A.copy()
    X[3, 4] = bad
    X[7, 1] = bad
    kw = {} if missing is None else {"missing": missing}
    # NaN: fill them or mask them; an infinity is not missing data, so the advice for
    # it is to replace it (missing='mask' would refuse it too)
    match = (r"2 NaN entries\. Fill them, or pass missing='mask'" if np.isnan(bad) else
             r"2 infinite entries: replace the infinities \(missing='mask' treats only NaN")
    with pytest.raises(NonFiniteInputError, match=match):
        BayesianID(3, **FAST, **kw).fit(X)
    X[5, 5] = np.nan
    if not np.isnan(bad):
        with pytest.raises(NonFiniteInputError, match=r"2 infinite entries \(and 1 NaN\)"):
            BayesianID(3, **FAST, **kw).fit(X)


def test_non_finite_numpy_input_is_refused_before_any_output(A, tmp_path):
    X = A.copy()
    X[0, 0] = np.nan
    out = tmp_path / "out.zarr"
    with pytest.raises(NonFiniteInputError, match="missing='mask'"):
        BayesianID(3, **FAST).fit(X, out=str(out), **SYNC)
    assert not out.exists()


@pytest.mark.parametrize("kind", ["dask", "zarr"])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_out_of_core_input_is_found_by_the_first_pass(A, tmp_path, kind, bad):
    X = A.copy()
    X[25, 9] = bad  # in the last row chunk: the whole matrix is scanned, not a sample
    x = da.from_array(X, chunks=(10, 10)) if kind == "dask" else \
        write_store(tmp_path / "nan.zarr", X)
    for init in ("random", "auto", "sketch"):  # the sampler's first pass, or the init's
        with pytest.raises(NonFiniteInputError, match=r"NaN or infinit.*missing='mask'"):
            BayesianID(3, missing="zero", init=init, **FAST).fit(x, **SYNC)


def test_masked_mode_refusals(A, store, tmp_path):
    X = A.copy()
    X[2, 3] = np.nan
    # the Dask engine takes it too (tests/test_engine_masked.py): its refusals are below
    assert BayesianID(3, missing="mask", **FAST).fit(X, **SYNC).mse_observed_ > 0
    Y = X.copy()
    Y[4, 4] = np.inf
    with pytest.raises(NonFiniteInputError, match="infinite entries; missing='mask' treats only"):
        BayesianID(3, missing="mask", **FAST).fit(Y)
    Z = X.copy()
    Z[:, 7] = np.nan
    with pytest.raises(InputShapeError, match=r"columns \[7\] have no observed entry"):
        BayesianID(3, missing="mask", **FAST).fit(Z)
    # on the engine, before its output exists (a failed output would block the retry);
    # an explicit mask with an empty column the same
    for bad, fit_kw, err in [(Y, {}, NonFiniteInputError), (Z, {}, InputShapeError),
                             (X, {"mask": ~np.isnan(Z)}, InputShapeError)]:
        out = tmp_path / "out.zarr"
        with pytest.raises(err):
            BayesianID(3, missing="mask", **FAST).fit(bad, out=str(out), **fit_kw, **SYNC)
        assert not out.exists()
    # NaN is accepted in this mode
    est = BayesianID(3, missing="MASK", **FAST).fit(X)
    assert np.abs(est.components_).max() <= 1.0


# --------------------------------------------------------------------------- stores
def test_missing_store(tmp_path):
    path = str(tmp_path / "nowhere.zarr")
    with pytest.raises(StoreNotFoundError, match=re.escape(repr(path)) + ".*does not exist"):
        BayesianID(3, **FAST).fit(path)
    with pytest.raises(FileNotFoundError):
        bayesian_id(Path(path), 3, **FAST)


@pytest.mark.parametrize("what, match", [
    ("empty-dir", "holds no Zarr metadata .*; pass the path of a Zarr array"),
    # a folder holding the matrix file: the refusal names it
    ("folder", r"holds no Zarr metadata .*; it holds '.*folder/data.csv', "
               r"'.*folder/old.zarr': pass one of them"),
    ("thing", "is a file, not a Zarr store: pass the path of a Zarr array"),
    # a file the command line reads: the refusal says how to fit it from Python
    ("A.npy", r"is a file, not a Zarr store: .*numpy.load\(path, mmap_mode='r'\)"),
    ("A.csv", r"is a file, not a Zarr store: .*pandas.read_csv\(path, index_col=0\).*"
              "convert_to_zarr"),
    # files nothing reads: what they are and what to do instead
    ("A.npz", r"numpy archive of named arrays: save the matrix alone, numpy.save\('A.npy'"),
    ("A.xlsx", "a spreadsheet: export the sheet as CSV"),
    ("A.h5", r"HDF5 file: .*to_zarr\(dask.array.from_array\(h5py.File\(path\)\['NAME'\]\)"),
    ("A.parquet", "Parquet file: a table of \\(row, column, value\\) triplets is fitted with "
                  "--format triplets"),
    ("A.csv.gz", "compressed: decompress it first"),
])
def test_path_without_zarr_metadata(tmp_path, what, match):
    path = tmp_path / what
    if what == "empty-dir":
        path.mkdir()
    elif what == "folder":
        path.mkdir()
        for name in ("data.csv", "notes.md", "old.zarr"):
            (path / name).write_text("x")
    else:
        path.write_text("not a store")
    with pytest.raises(StoreNotFoundError, match=match):
        BayesianID(3, **FAST).fit(str(path))


def test_group_where_an_array_is_expected(tmp_path, A):
    g = zarr.open_group(str(tmp_path / "g.zarr"), mode="w", zarr_format=3)
    g.create_array("matrix", shape=A.shape, dtype=A.dtype)[...] = A
    g.create_group("sub")
    with pytest.raises(NotAnArrayError, match=r"is a Zarr group, not an array.*"
                                              + re.escape(repr(str(tmp_path / "g.zarr/matrix")))):
        BayesianID(3, **FAST).fit(str(tmp_path / "g.zarr"))
    zarr.open_group(str(tmp_path / "empty.zarr"), mode="w", zarr_format=3)
    with pytest.raises(NotAnArrayError, match="contains no array"):
        BayesianID(3, **FAST).fit(str(tmp_path / "empty.zarr"))
    # an array deeper down is named too (it said "contains no array")
    deep = zarr.open_group(str(tmp_path / "deep.zarr"), mode="w", zarr_format=3)
    deep.create_group("sub").create_array("matrix", shape=A.shape, dtype=A.dtype)[...] = A
    with pytest.raises(NotAnArrayError, match=re.escape(
            repr(str(tmp_path / "deep.zarr/sub/matrix")))):
        BayesianID(3, **FAST).fit(str(tmp_path / "deep.zarr"))
    # a store object or an opened group (they read as "0-D shape ()")
    for obj in (zarr.storage.MemoryStore(), zarr.open_group(str(tmp_path / "g.zarr"))):
        with pytest.raises(NotAnArrayError, match="not an array: pass the array"):
            BayesianID(3, **FAST).fit(obj)
    # the array inside the group is accepted
    BayesianID(3, **FAST).fit(str(tmp_path / "g.zarr" / "matrix"), **SYNC)


def test_corrupt_metadata(store):
    Path(store, "zarr.json").write_text('{"zarr_format": 3, "node_type": ')
    with pytest.raises(CorruptStoreError, match=re.escape(repr(store)) + ".*metadata"):
        BayesianID(3, **FAST).fit(store)


def test_corrupt_chunk_is_reported_when_read(store):
    corrupt_chunk(store, "c/1/0")
    # opening reads metadata only: the damage is found when the engine reads the chunk
    with pytest.raises(CorruptStoreError,
                       match=re.escape(repr(store)) + ", chunk c/1/0: .*restore that chunk"):
        BayesianID(3, **FAST).fit(store, **SYNC)


def test_a_damaged_shard_is_named_by_its_file(tmp_path, A):
    """A sharded array's files are its shards: the error names the damaged shard (it
    named inner-chunk keys: an intact shard's file, or none at all)."""
    path = str(tmp_path / "sh.zarr")
    z = zarr.create_array(path, shape=A.shape, chunks=(10, 5), shards=(20, 10), dtype="f8")
    z[:] = A
    corrupt_chunk(path, "c/1/0")
    with pytest.raises(CorruptStoreError, match=re.escape(repr(path)) + ", shard c/1/0: "
                                                ".*restore that shard from a copy"):
        BayesianID(3, **FAST).fit(path, **SYNC)


def test_corrupt_chunk_error_comes_back_from_a_worker_process(store, cluster_client):
    corrupt_chunk(store, "c/2/0")
    with pytest.raises(CorruptStoreError, match=re.escape(repr(store)) + ", chunk c/2/0"):
        BayesianID(3, **FAST).fit(store, client=cluster_client)


def test_workers_in_another_folder_read_a_relative_path_or_say_they_cannot(
        store, cluster_client, tmp_path, monkeypatch):
    """Dask workers whose working folder is not the client's: a relative path reached
    them unchanged, every chunk was "missing" there, and the fit returned columns
    [0 1 2], MSE 0, from zeros. Now the client opens the store by its absolute path,
    and a store a worker cannot see (a zarr.Array opened relative here) is an error
    naming the worker, not a fit of zeros."""
    monkeypatch.chdir(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = cluster_client.run(os.getcwd)
    cluster_client.run(os.chdir, str(elsewhere))
    try:
        want = BayesianID(3, **FAST).fit(store, **SYNC)
        # (a relative output too: the workers wrote its checkpoints into their folder,
        # and the fit failed with "rel.zarr does not exist")
        got = BayesianID(3, **FAST).fit("A.zarr", client=cluster_client, out="rel.zarr")
        np.testing.assert_array_equal(got.columns_, want.columns_)
        assert got.mse_ == want.mse_ > 0
        assert (tmp_path / "rel.zarr" / "checkpoint").is_dir()
        assert not (elsewhere / "rel.zarr").exists()
        with pytest.raises(StoreNotFoundError, match="'A.zarr' is not visible from the "
                           r"process that reads it \(pid \d+ on .*, working folder "
                           r".*elsewhere'; a Dask worker on a cluster\): every Dask worker "
                           "must see the client's local paths"):
            BayesianID(3, **FAST).fit(zarr.open_array("A.zarr", mode="r"),
                                      client=cluster_client)
    finally:
        for addr, cwd in before.items():
            cluster_client.run(os.chdir, cwd, workers=[addr])


def test_corrupt_chunk_in_other_readers(store):
    corrupt_chunk(store, "c/0/0")
    # the sketch initialisation and the baselines read through the same guarded view
    with pytest.raises(CorruptStoreError, match="chunk c/0/0"):
        BayesianID(3, init="sketch", **FAST).fit(store, **SYNC)
    with pytest.raises(CorruptStoreError, match="chunk c/0/0"):
        RandomizedID(3, random_state=0).fit(store)


def test_truncated_chunk(store):
    chunk = Path(store, "c", "2", "0")
    chunk.write_bytes(chunk.read_bytes()[:20])
    with pytest.raises(CorruptStoreError, match="chunk c/2/0"):
        BayesianID(3, **FAST).fit(store, **SYNC)


# --------------------------------------------------------------------------- outputs
def test_an_output_inside_a_store_is_refused(tmp_path, capsys):
    """An output written among another store's files: inside a result (a later overwrite
    of it was refused as holding files "dask_bid did not write", and pruning its
    checkpoints would take along one written there), or inside a Zarr array. A Zarr
    group of the user's own may hold outputs."""
    from dask_bid.engine import to_zarr
    from dask_bid.interface.cli import main

    A = np.random.default_rng(0).standard_normal((20, 6))
    res_dir = tmp_path / "fit.zarr"
    bayesian_id(A, 2, out=str(res_dir), client="synchronous", **FAST)
    arr = tmp_path / "A.zarr"
    to_zarr(A, str(arr))
    before = sorted(p.name for p in tmp_path.iterdir())
    for out, kind, parent in [(res_dir / "inner.zarr", "the dask_bid result", res_dir),
                              (res_dir / "checkpoint" / "x.zarr", "the dask_bid result",
                               res_dir),
                              (arr / "sub" / "o.zarr", "the Zarr array", arr)]:
        msg = (f"lies inside {kind} {str(parent)!r}; dask_bid writes nothing among a "
               "store's own files: choose a path outside it, e.g. "
               f"{str(tmp_path / out.name)!r}.")
        with pytest.raises(OutputLocationError, match=re.escape(msg)):
            bayesian_id(A, 2, out=str(out), client="synchronous", **FAST)
        with pytest.raises(OutputLocationError, match=re.escape(msg)):
            to_zarr(A, str(out))
        np.save(tmp_path / "a.npy", A)
        for cmd in (["fit", str(tmp_path / "a.npy"), "--k", "2", "--out", str(out),
                     "--scheduler", "synchronous"], ["convert", str(tmp_path / "a.npy"),
                                                     "--out", str(out)]):
            assert main(cmd) == 2
            err = capsys.readouterr().err
            assert err.startswith("dask-bid: error: ") and msg in err, err
        (tmp_path / "a.npy").unlink()
        # plot --out: figures among the store's files (every later read of it warned of
        # them, and its --overwrite refused them)
        assert main(["plot", str(res_dir), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dask-bid: error: --out ") and msg in err, err
        assert not out.exists()
    # a stem ending in '/' wrote <store>/.trace.png (hidden, among the store's files); the
    # suggestion lies outside the outermost store (R/C/p was told R/p, refused too)
    for stem, suggested in ((f"{res_dir}/", tmp_path / "fit"),
                            (str(res_dir / "C" / "p"), tmp_path / "p")):
        assert main(["plot", str(res_dir), "--out", stem]) == 2
        err = capsys.readouterr().err
        assert (f"lies inside the dask_bid result {str(res_dir)!r}" in err
                and f"e.g. {str(suggested)!r}" in err), err
    (tmp_path / "pl").mkdir()
    assert main(["plot", str(res_dir), "--out", f"{tmp_path / 'pl'}/"]) == 2
    assert "ends with '/': --out is the figures' file stem" in capsys.readouterr().err
    # the files as written are checked: R.zarr/. named R.zarr/..trace.png, pl/.png hidden
    # pl/.trace.png files
    for stem in (f"{res_dir}/.", f"{res_dir}/C/..", f"{tmp_path / 'pl'}/.png"):
        assert main(["plot", str(res_dir), "--out", stem]) == 2
        assert "names hidden files" in capsys.readouterr().err
    (tmp_path / "pl").rmdir()
    # rid's .npz among a result's files (its --overwrite then refused it)
    np.save(tmp_path / "a.npy", A)
    assert main(["rid", str(tmp_path / "a.npy"), "--k", "2", "--out",
                 str(res_dir / "a.npz")]) == 2
    assert f"lies inside the dask_bid result {str(res_dir)!r}" in capsys.readouterr().err
    (tmp_path / "a.npy").unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert sorted(p.name for p in res_dir.iterdir()) == [
        "C", "W", "W_sd", "checkpoint", "columns", "draws", "inclusion_probability",
        "traces", "zarr.json"]
    # a group of the user's own holds outputs
    zarr.open_group(str(tmp_path / "project.zarr"), mode="w")
    bayesian_id(A, 2, out=str(tmp_path / "project.zarr" / "fit.zarr"), client="synchronous",
                **FAST)


def test_output_equal_to_the_input(store):
    with pytest.raises(OutputLocationError, match="is the input store.*never written"):
        BayesianID(3, **FAST).fit(store, out=store, overwrite=True, **SYNC)


@pytest.mark.parametrize("how", ["zarr-array-object", "file-url", "local-url",
                                 "file-localhost-url", "file-short-url", "relative",
                                 "nested"])
def test_output_overlapping_the_input_in_other_spellings(store, how, monkeypatch):
    # fsspec's local:// (and file://localhost/) name this machine's files too: compared as
    # URL text, local:// got past the check and overwrite=True deleted the input
    A_in, out = store, store
    if how == "zarr-array-object":
        A_in = zarr.open_array(store, mode="r")
    elif how == "file-url":
        out = "file://" + store
    elif how == "local-url":
        out = "local://" + store
    elif how == "file-localhost-url":
        out = "file://localhost" + store
    elif how == "file-short-url":  # RFC 8089's file:/p; once written to ./file:/p
        out = "file:" + store
    elif how == "relative":
        monkeypatch.chdir(Path(store).parent)
        A_in = os.path.basename(store)
    else:
        out = os.path.join(store, "result")
    with pytest.raises(OutputLocationError, match="is the input store"):
        BayesianID(3, **FAST).fit(A_in, out=out, overwrite=True, **SYNC)
    # the input is intact and still fits
    BayesianID(3, **FAST).fit(store, **SYNC)


def test_existing_output_without_overwrite(store, tmp_path):
    out = str(tmp_path / "res.zarr")
    first = BayesianID(3, **FAST).fit(store, out=out, **SYNC)
    with pytest.raises(OutputExistsError, match=re.escape(repr(out)) + ".*overwrite=True"):
        BayesianID(3, **FAST).fit(store, out=out, **SYNC)
    again = BayesianID(3, **FAST).fit(store, out=out, overwrite=True, **SYNC)
    np.testing.assert_array_equal(first.components_, again.components_)


def test_unwritable_output_location(store, tmp_path):
    # tests run as root, for whom chmod stops nothing: a path below a regular file is
    # unwritable for everyone
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    out = str(blocker / "res.zarr")
    with pytest.raises(OutputLocationError, match=re.escape(repr(out)) + ".*Not a directory"):
        BayesianID(3, **FAST).fit(store, out=out, **SYNC)
    with pytest.raises(OutputLocationError, match="is an existing file"):
        BayesianID(3, **FAST).fit(store, out=str(blocker), **SYNC)
    assert blocker.read_text() == "x"


def test_bad_engine_arguments(store):
    with pytest.raises(ParameterError, match=r"chunks must be None or \(rows, cols\)"):
        BayesianID(3, **FAST).fit(store, chunks=(0, 5), **SYNC)
    with pytest.raises(ParameterError, match="resume=True needs out="):
        BayesianID(3, **FAST).fit(store, resume=True, **SYNC)
    with pytest.raises(ParameterError, match="client must be"):
        BayesianID(3, **FAST).fit(store, client=42)


# --------------------------------------------------------------------------- scheduler
def test_scheduler_that_does_not_answer(store):
    address = f"tcp://127.0.0.1:{closed_port()}"
    t0 = time.perf_counter()
    # 1 s instead of the default 5 s (the suite's time; test_engine_io checks the default)
    with dask.config.set({"dask_bid.scheduler-timeout": 1}), pytest.raises(
            SchedulerUnreachableError,
            match=re.escape(repr(address)) + r" within 1 s.*dask scheduler"):
        BayesianID(3, **FAST).fit(store, client=address)
    assert time.perf_counter() - t0 < 15.0


@pytest.mark.parametrize("client, fragments", [
    ("processes", ["dask's single-machine schedulers", "client=None", "client='synchronous'"]),
    ("Threads", ["dask's single-machine schedulers", "tcp://host:8786"]),
    ("http://127.0.0.1:8787", ["is a web address", "starts with tcp://", "8786"]),
    ("tcp://127.0.0.1", ["is not a scheduler address", "missing port", "tcp://host:8786"]),
    ("udp://127.0.0.1:8786", ["is not a scheduler address", "unknown address scheme 'udp'"]),
])
def test_a_string_that_is_no_scheduler_address_is_refused_first(client, fragments, tmp_path):
    """Refused as a parameter before the input is read or anything written: distributed
    would fail on it only while connecting ("within 5 s", although nothing was tried)."""
    out = tmp_path / "out.zarr"
    with pytest.raises(ParameterError) as info:
        bayesian_id(str(tmp_path / "no-such-input.zarr"), 3, client=client, out=str(out),
                    **FAST)
    for f in fragments:
        assert f in str(info.value), (f, str(info.value))
    assert "\n" not in str(info.value) and not out.exists()


@pytest.mark.parametrize("closed", ["client", "cluster"])
def test_a_closed_client_is_refused_in_one_line(closed, tmp_path):
    """A notebook's "close" cell run again: every later fit failed with a bare
    ``KeyError: 'workers'`` (the version check's scheduler_info of a closed client)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                           dashboard_address=":0")
    client = Client(cluster, set_as_default=False)
    (client if closed == "client" else cluster).close()
    out = tmp_path / "out.zarr"
    try:
        for X in (np.ones((6, 4)), str(tmp_path / "no-such-input.zarr")):
            with pytest.raises(ParameterError, match=r"^client is a distributed\.Client that "
                               r"is closed \(it, or its cluster, was closed\): start a new "
                               "Client"):
                bayesian_id(X, 2, client=client, out=str(out), **FAST)
        assert not out.exists()
    finally:
        client.close()
        cluster.close()


def test_a_refused_address_leaves_no_hanging_client_behind():
    """distributed's half-made Client, left by a malformed address, printed a TimeoutError
    traceback from its __del__ when the interpreter exits (after waiting 10 s)."""
    code = ("import numpy as np, dask_bid\n"
            "try:\n"
            "    dask_bid.bayesian_id(np.ones((6, 4)), 2, client='threads', n_iter=4, "
            "burn_in=2)\n"
            "except dask_bid.ParameterError as e:\n"
            "    print(type(e).__name__)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == "ParameterError\n", r.stderr[-2000:]
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr, r.stderr


# --------------------------------------------------------------------------- no reads
@pytest.fixture
def huge_store(tmp_path):
    """A 10 GB float64 array: metadata only, no chunk written, one garbage chunk file."""
    path = str(tmp_path / "huge.zarr")
    zarr.create_array(store=path, shape=(100_000, 12_500), chunks=(10_000, 1_250),
                      dtype=np.float64, zarr_format=3)
    # any read of data would hit this chunk first and raise CorruptStoreError instead
    chunk = Path(path, "c", "0", "0")
    chunk.parent.mkdir(parents=True)
    chunk.write_bytes(b"garbage")
    return path


@pytest.mark.parametrize("kwargs,exc,match", [
    (dict(n_components=0), ParameterError, "n_components must be between 1 and 12499"),
    (dict(n_components=12_500), ParameterError, "n_components must be between"),
    (dict(tau=-1.0), ParameterError, "tau must be a positive"),
    (dict(bounds=(1, 0)), ParameterError, "a < b"),
    (dict(n_iter=10, burn_in=10), ParameterError, "burn_in"),
    (dict(thin=0), ParameterError, "thin"),
    (dict(model="GBX"), ParameterError, "unknown model"),
    (dict(fit_kw=dict(chunks=(-1, 3))), ParameterError, "chunks must be"),
    (dict(fit_kw=dict(out="SELF", overwrite=True)), OutputLocationError, "input store"),
], ids=["K=0", "K=N", "tau", "bounds", "burn_in", "thin", "model", "chunks", "out=input"])
def test_validation_reads_no_data(huge_store, kwargs, exc, match):
    kwargs = dict(kwargs)
    fit_kw = kwargs.pop("fit_kw", {})
    if fit_kw.get("out") == "SELF":
        fit_kw["out"] = huge_store
    K = kwargs.pop("n_components", 3)
    before = tree_digest(huge_store)
    t0 = time.perf_counter()
    with pytest.raises(exc, match=match):
        BayesianID(K, **{**FAST, **kwargs}).fit(huge_store, **SYNC, **fit_kw)
    elapsed = time.perf_counter() - t0
    assert elapsed < 5.0, f"validation took {elapsed:.1f} s: it must not read the data"
    assert tree_digest(huge_store) == before


# --------------------------------------------------------------------------- input intact
def tree_digest(root):
    """{relative path: sha256} of every file under ``root``."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _prep_nan(store):
    z = zarr.open_array(store, mode="r+")
    z[5, 5] = np.nan


def _prep_corrupt(store):
    corrupt_chunk(store, "c/1/0")


def _prep_missing(store):
    os.remove(os.path.join(store, "c", "1", "0"))


def _prep_outlier(store):
    z = zarr.open_array(store, mode="r+")
    z[4, 4] = 1e200


def _locked(store, tmp_path):
    """An output whose lease a live fit on another host holds (fresh heartbeat)."""
    import json
    import time

    from dask_bid.engine.lock import lock_path

    out = str(tmp_path / "held.zarr")
    Path(lock_path(out)).write_text(json.dumps(
        {"host": "elsewhere", "pid": 1, "start": time.time(), "heartbeat": time.time()}))
    return out


def _interrupted_other(store, tmp_path):
    """A fit of another matrix with the same shape, stopped after its first checkpoint."""
    other = write_store(tmp_path / "other.zarr", np.ones((30, 10)) + np.eye(30, 10))
    out = str(tmp_path / "stopped.zarr")

    def stop(st):
        if st.iteration == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bayesian_id(other, 3, out=out, checkpoint_every=3, callback=stop, **FAST, **SYNC)
    return out


def _existing(store, tmp_path):
    out = str(tmp_path / "res.zarr")
    zarr.open_group(out, mode="w").create_array("x", shape=(2,), dtype="f8")
    return out


INTACT = {
    # name: (prepare the store, fit keyword arguments (callable of store, tmp_path), error)
    "bad-K": (None, lambda s, t: dict(n_components=10), ParameterError),
    "out=input": (None, lambda s, t: dict(out=s), OutputLocationError),
    "out=input-overwrite": (None, lambda s, t: dict(out=s, overwrite=True), OutputLocationError),
    "out=zarr-object-overwrite": (None, lambda s, t: dict(A=zarr.open_array(s, mode="r"), out=s,
                                                          overwrite=True), OutputLocationError),
    "out-inside-input": (None, lambda s, t: dict(out=os.path.join(s, "c", "res"),
                                                 overwrite=True), OutputLocationError),
    "out-exists": (None, lambda s, t: dict(out=_existing(s, t)), OutputExistsError),
    "nan": (_prep_nan, lambda s, t: dict(out=str(t / "r.zarr")), NonFiniteInputError),
    "corrupt-chunk": (_prep_corrupt, lambda s, t: dict(out=str(t / "r.zarr")), CorruptStoreError),
    "resume-mismatch": (None, lambda s, t: dict(out=_finished(s, t), resume=True, n_iter=7,
                                                              burn_in=3),
                        ParameterError),
    "missing-chunk": (_prep_missing, lambda s, t: dict(out=str(t / "r.zarr")),
                      IncompleteStoreError),
    "outlier-1e200": (_prep_outlier, lambda s, t: dict(out=str(t / "r.zarr")), FitFailedError),
    "output-locked": (None, lambda s, t: dict(out=_locked(s, t), overwrite=True),
                      OutputLockedError),
    "resume-other-input": (None, lambda s, t: dict(out=_interrupted_other(s, t), resume=True),
                           InputChangedError),
    "success-out": (None, lambda s, t: dict(out=str(t / "r.zarr")), None),
    "success-overwrite": (None, lambda s, t: dict(out=_finished(s, t), overwrite=True), None),
    "success-resume": (None, lambda s, t: dict(out=_finished(s, t), resume=True), None),
    "success-cluster": (None, lambda s, t: dict(client="CLUSTER"), None),
}


def _finished(store, tmp_path):
    out = str(tmp_path / "done.zarr")
    bayesian_id(store, 3, out=out, **FAST, **SYNC)
    return out


# one huge entry makes every basis numerically rank deficient: the fit says so (a
# UserWarning), which is not what these tests check
@pytest.mark.filterwarnings("ignore:the selected columns of A are numerically rank deficient")
@pytest.mark.parametrize("case", list(INTACT))
def test_input_store_is_never_written(store, tmp_path, case, request):
    prep, make_kw, exc = INTACT[case]
    if prep is not None:
        prep(store)
    kw = {**FAST, **SYNC, "n_components": 3, "A": store, **make_kw(store, tmp_path)}
    if kw["client"] == "CLUSTER":
        kw["client"] = request.getfixturevalue("cluster_client")
    before = tree_digest(store)
    mtimes = {p: os.stat(os.path.join(store, p)).st_mtime_ns for p in before}
    A_in, K = kw.pop("A"), kw.pop("n_components")
    if exc is None:
        res = bayesian_id(A_in, K, **kw)
        assert np.abs(res.components).max() <= 1.0
    else:
        with pytest.raises(exc):
            bayesian_id(A_in, K, **kw)
    assert tree_digest(store) == before
    assert {p: os.stat(os.path.join(store, p)).st_mtime_ns for p in before} == mtimes


@pytest.mark.timeout(120)
def test_a_gbtn_hyperprior_with_no_mass_in_the_box_is_refused():
    """W drawn from the GBTN prior is a rejection sampler (a compiled loop Ctrl-C does not
    stop); a hyperprior with almost no mass in the bounds made it run for ever. Refused
    when the expected number of draws is beyond ~2 minutes' worth, from the acceptance
    rate (quadrature) and the entries drawn (K N per chain)."""
    from dask_bid.interface._params import validate_params
    from dask_bid.interface.functional import DEFAULTS
    from dask_bid.kernels.priors import Priors, gbtn_box_mass

    A = np.random.default_rng(0).standard_normal((30, 8))
    for vague in (dict(alpha_t=1e-300), dict(alpha_t=1e-12)):
        with pytest.raises(ParameterError, match="GBTN hyperprior .* of its mass in the "
                                                 "bounds .* entries of W drawn from it"):
            BayesianID(2, model="gbtn", **vague, **FAST).fit(A)
    # vague but finite: fine for 16 entries, refused for 2 x 10^5 (10^4 times the draws)
    BayesianID(2, model="gbtn", tau_mu=1e-10, **FAST).fit(A)
    with pytest.raises(ParameterError, match="200,000 entries of W .* about 5e\\+10 draws"):
        validate_params({**DEFAULTS, "n_components": 2, "model": "gbtn", "tau_mu": 1e-10},
                        n_cols=100_000)
    # the acceptance rate against a simulation of the sampler's own steps (z < 5)
    gen = np.random.default_rng(1)
    n = 400_000
    for kw in (dict(), dict(tau_mu=1e-3, mu_mu=3.0), dict(alpha_t=0.05, beta_t=4.0)):
        pr = Priors(hierarchical=True)._replace(**kw)
        m = pr.mu_mu + gen.standard_normal(n) / np.sqrt(pr.tau_mu)
        t = gen.standard_gamma(pr.alpha_t, n) / pr.beta_t
        with np.errstate(divide="ignore", invalid="ignore"):
            w = m + gen.standard_normal(n) / np.sqrt(t)
        sim = float(((t > 0) & (w >= pr.a) & (w <= pr.b)).mean())
        exact = gbtn_box_mass(pr)
        assert abs(sim - exact) < 5 * np.sqrt(exact * (1 - exact) / n), (kw, sim, exact)
