"""Plots: what they draw, that they write PNG files, and lazy / optional matplotlib."""

import re
import subprocess
import sys
import warnings

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from _support import planted  # noqa: E402

from dask_bid import (  # noqa: E402
    BayesianID,
    ConvergenceWarning,
    ParameterError,
    RandomizedID,
    bayesian_id,
    plot_autocorrelation,
    plot_error_vs_k,
    plot_inclusion,
    plot_overview,
    plot_trace,
)
from dask_bid.interface.plots import autocorrelation, fit_k_grid  # noqa: E402

# one pytest-xdist process runs this module: its module-scoped fixtures are then
# computed once, not once per process (the suite's time, README)
pytestmark = pytest.mark.xdist_group("plots")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def fit():
    A, J = planted(60, 40, 3, 0.2, seed=0)
    res = bayesian_id(A, 3, n_iter=120, burn_in=20, thin=1, n_chains=2, init="sketch",
                      random_state=0)
    return A, J, res


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def save(ax, path):
    fig = np.ravel(ax)[0].figure
    fig.savefig(path)
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000
    return data


def test_trace_draws_every_chain(fit, tmp_path):
    _, _, res = fit
    axes = plot_trace(res)
    assert len(axes) == 2
    for ax, field in zip(axes, ("mse", "sigma2"), strict=True):
        lines = ax.get_lines()
        assert len(lines) == res.n_chains
        for c, line in enumerate(lines):
            np.testing.assert_array_equal(line.get_ydata(), res.trace[field][c])
            # numbered from 0 as the retained draws (ArviZ's "draw"): the first one,
            # iteration burn_in = 20, on the burn-in band's right edge
            np.testing.assert_array_equal(line.get_xdata(), np.arange(120))
        y = res.trace[field]
        assert ax.get_yscale() == ("log" if y.max() > 10 * y.min() else "linear")
    save(axes, tmp_path / "trace.png")
    assert axes[0].get_ylabel() == "MSE"
    # a masked fit's MSE is per observed entry, and the label says so
    A, _, _ = fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a short chain: the convergence warning
        masked = bayesian_id(np.where(A > 1.0, np.nan, A), 3, missing="mask", n_iter=30,
                             burn_in=10, random_state=0)
    assert plot_trace(masked)[0].get_ylabel() == "MSE (observed entries)"
    # and the overview's title headlines that one, labelled (it showed the MSE over all
    # entries, the unobserved counted as 0, beside the observed trace)
    title = plot_overview(masked)._suptitle.get_text()
    assert f"MSE {masked.mse_observed:.4g} (observed entries)" in title, title
    assert f"{masked.mse:.4g}" not in title
    # into given Axes, one panel
    fig, ax = plt.subplots()
    assert plot_trace(res, ax=ax, which="sigma2") is ax
    with pytest.raises(ParameterError, match="Axes"):
        plot_trace(res, ax=ax)
    with pytest.raises(ParameterError, match="which"):
        plot_trace(res, which=("tau",))


def test_autocorrelation_estimator():
    """r_lag of an AR(1) series is phi**lag; sd of the estimate ~ 1/sqrt(n) = 0.005."""
    rng = np.random.default_rng(0)
    phi, n = 0.8, 40000
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0] / np.sqrt(1 - phi**2)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    r = autocorrelation(x, 5)
    assert r[0] == 1.0
    np.testing.assert_allclose(r, phi ** np.arange(6), atol=0.03)
    assert np.isnan(autocorrelation(np.ones(10), 3)).all()


def test_autocorrelation_plot_averages_w_entries(fit, tmp_path):
    _, _, res = fit
    ax = plot_autocorrelation(res, max_lag=10)
    mean_line = [ln for ln in ax.get_lines() if ln.get_label() == "mean"][0]
    y = mean_line.get_ydata()
    assert y[0] == pytest.approx(1.0)
    # the same average computed here from the stored draws
    from dask_bid.interface.diagnostics import w_draws

    W, _ = w_draws(res)
    rows = []
    for c in range(W.shape[0]):
        flat = W[c].reshape(W.shape[1], -1)
        rows += [autocorrelation(flat[:, j], 10) for j in range(flat.shape[1])]
    np.testing.assert_allclose(y, np.nanmean(rows, axis=0))
    # W draws given the basis mix fast: the paper's criterion (under 0.1 past lag 10)
    assert abs(y[10]) < 0.1
    save(ax, tmp_path / "acf.png")
    ax = plot_autocorrelation(res, quantity="sigma2")
    with pytest.raises(ParameterError, match="quantity"):
        plot_autocorrelation(res, quantity="tau")


def test_autocorrelation_without_usable_w_draws(fit):
    A, _, _ = fit
    res = bayesian_id(A, 3, n_iter=30, burn_in=10, thin=1, random_state=0,
                      n_trace_columns=0)
    # the cause named: no column traced (it said no chain kept enough draws with the
    # reported basis, when every draw had it)
    with pytest.raises(ParameterError, match=r"the fit kept no column's W draws "
                       r"\(n_trace_columns=0 and no trace_columns\)\. Use quantity='sigma2'"):
        plot_autocorrelation(res)
    plot_autocorrelation(res, quantity="mse")  # every draw has these
    # a reported basis no retained draw has (visited in the burn-in only): said so (it
    # said no chain kept more than 16 consecutive draws with it)
    import dataclasses

    traced = bayesian_id(A, 3, n_iter=30, burn_in=10, thin=1, random_state=0)
    dw = traced.draws_w  # as stored for such a fit: NaN where a draw had another basis
    unseen = dataclasses.replace(traced, n_draws_point=0, draws_w=dict(
        dw, values=np.full_like(np.asarray(dw["values"], dtype=float), np.nan)))
    with pytest.raises(ParameterError, match=r"no retained draw has the reported basis \(the "
                       r"lowest SSE the chains visited, in the burn-in only\)"):
        plot_autocorrelation(unseen)
    # every traced column in the basis, where W is the identity: said so (it said no
    # chain kept more than 17 consecutive draws with the basis, of 20 that all had it)
    basis = bayesian_id(A, 3, n_iter=30, burn_in=10, thin=1, random_state=0,
                        trace_columns=list(traced.columns))
    assert sorted(basis.draws_w["columns"]) == sorted(basis.columns)
    with pytest.raises(ParameterError, match="every traced column is in the reported basis"):
        plot_autocorrelation(basis)


def test_too_few_draws_for_an_autocorrelation_say_so_and_the_cli_draws_the_rest(
        fit, tmp_path, capsys):
    """One retained draw a chain: the message says the chains are too short (it told to
    use quantity='sigma2', which failed the same way); fit --plot all warns and writes the
    other figures (it exited 2 after the fit, the inclusion plot never written); plot
    writes them and then fails naming the one it could not draw."""
    from dask_bid.interface.cli import main

    A, _, _ = fit
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = bayesian_id(A, 3, n_iter=30, burn_in=29, thin=1, random_state=0)
    for quantity in ("W", "sigma2", "mse"):
        with pytest.raises(ParameterError, match="the chains kept 1 draw each, and an "
                           "autocorrelation up to lag 1 needs at least 3"):
            plot_autocorrelation(res, quantity=quantity)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        two = bayesian_id(A, 3, n_iter=30, burn_in=28, thin=1, random_state=0)
    # two draws, one pair: no autocorrelation either (sigma^2's was drawn from it)
    with pytest.raises(ParameterError, match="the chains kept 2 draws each"):
        plot_autocorrelation(two, quantity="sigma2")
    fig = plot_overview(res)  # the panel says so instead
    assert "the chains kept 1 draw each" in fig.axes[-1].texts[0].get_text().replace("\n", " ")
    np.save(tmp_path / "a.npy", A)
    out = tmp_path / "r.zarr"
    assert main(["fit", str(tmp_path / "a.npy"), "--k", "3", "--out", str(out), "--n-iter",
                 "30", "--burn-in", "29", "--scheduler", "synchronous", "--plot", "all"]) == 0
    cap = capsys.readouterr()
    assert "dask-bid: warning: --plot autocorr: not drawn: the chains kept 1 draw" in cap.err
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["r.inclusion.png", "r.trace.png"]
    for p in tmp_path.glob("*.png"):
        p.unlink()
    assert main(["plot", str(out)]) == 2
    cap = capsys.readouterr()
    assert f"plot         {tmp_path / 'r.trace.png'}" in cap.out
    assert cap.err.startswith(f"dask-bid: error: {tmp_path / 'r.autocorr.png'} not drawn: the "
                              "chains kept 1 draw each"), cap.err
    assert cap.err.rstrip().endswith("The other figures were written."), cap.err
    assert sorted(p.name for p in tmp_path.glob("*.png")) == ["r.inclusion.png", "r.trace.png"]


def test_inclusion_heights_are_the_probabilities(fit, tmp_path):
    _, J, res = fit
    ax = plot_inclusion(res, planted=J)
    segs = ax.collections[0].get_segments()
    heights = np.array([s[1][1] for s in segs])
    np.testing.assert_array_equal(heights, res.inclusion_probability)
    marked = [ln for ln in ax.get_lines() if ln.get_label() == "reported columns"][0]
    np.testing.assert_array_equal(marked.get_xdata(), res.columns)
    # +- 2 MCSE on every visited column
    bars = [c for c in ax.containers if c.get_label() == "± 2 MCSE"][0]
    seen = np.flatnonzero(res.inclusion_probability > 0)
    spans = np.array([[s[0][1], s[1][1]] for s in bars.lines[2][0].get_segments()])
    se = res.inclusion_mcse()
    # clipped to [0, 1]: a probability's bar does not reach below 0 or above 1
    p = res.inclusion_probability[seen]
    np.testing.assert_allclose(spans[:, 0], np.maximum(p - 2 * se[seen], 0.0))
    np.testing.assert_allclose(spans[:, 1], np.minimum(p + 2 * se[seen], 1.0))
    save(ax, tmp_path / "incl.png")
    # a matrix without structure: many bases visited, rare columns with wide bars
    res = bayesian_id(np.random.default_rng(1).standard_normal((30, 8)), 2, n_iter=200,
                      burn_in=10, init="random", random_state=2)
    ax = plot_inclusion(res)
    bars = [c for c in ax.containers if c.get_label() == "± 2 MCSE"][0]
    spans = np.array([[s[0][1], s[1][1]] for s in bars.lines[2][0].get_segments()])
    p, se = res.inclusion_probability, res.inclusion_mcse()
    p, se = p[p > 0], se[p > 0]
    assert ((p - 2 * se < 0) | (p + 2 * se > 1)).any()  # some would cross a bound
    np.testing.assert_allclose(spans, np.c_[np.maximum(p - 2 * se, 0), np.minimum(p + 2 * se, 1)])


def test_inclusion_names_the_columns_with_the_names_the_fit_kept(fit):
    """A fit's feature_names (a DataFrame's, a text header's) label the x axis, or, for
    more than 60 columns, the reported columns' points."""
    import dataclasses

    _, _, res = fit
    names = [f"drug{j}" for j in range(res.n_features)]
    named = dataclasses.replace(res, feature_names=names)
    ax = plot_inclusion(named)
    assert [t.get_text() for t in ax.get_xticklabels()] == names
    assert [t.get_text() for t in plot_inclusion(res).get_xticklabels()] != names
    with pytest.raises(ParameterError, match="labels has 2 names for the 40 columns"):
        plot_inclusion(res, labels=["a", "b"])
    wide = dataclasses.replace(res, feature_names=names, inclusion_probability=np.r_[
        res.inclusion_probability, np.zeros(40)])
    wide.feature_names = names + [f"x{j}" for j in range(40)]
    ax = plot_inclusion(wide)
    assert sorted(t.get_text() for t in ax.texts) == sorted(names[c] for c in res.columns)


def test_inclusion_checks_planted_first_and_takes_names(fit):
    """planted=[40] of 40 columns raised a raw IndexError, [-1] marked the last column,
    a name raised int()'s ValueError, each leaving an empty figure open; names of a
    fit with names are read as trace_columns reads them."""
    A, J, res = fit
    for bad, words in ([40], "40 is not a column of A (integers 0 to 39"), \
            ([-1], "-1 is not a column of A"), (["f08"], "planted names columns ('f08')"):
        n_figs = len(plt.get_fignums())
        with pytest.raises(ParameterError, match=re.escape(words)):
            plot_inclusion(res, planted=bad)
        assert len(plt.get_fignums()) == n_figs  # no figure left behind
    ax = plot_inclusion(res, planted=np.asarray(J))
    marked = [ln for ln in ax.get_lines() if ln.get_label() == "planted"][0]
    np.testing.assert_array_equal(marked.get_xdata(), J)
    named = bayesian_id(A, 3, n_iter=20, burn_in=5, random_state=0,
                        feature_names=[f"f{j:02d}" for j in range(40)])
    ax = plot_inclusion(named, planted=["f08", "f03"])
    marked = [ln for ln in ax.get_lines() if ln.get_label() == "planted"][0]
    np.testing.assert_array_equal(marked.get_xdata(), [8, 3])


def test_error_vs_k_takes_one_fit_or_any_collection_and_labels_mixed_measures(fit):
    """A single result, an object array or a generator of fits were called "a matrix";
    with observed=True a fit without an observed-entries MSE (a baseline of the filled
    matrix) is labelled as the MSE over all entries, not passed off as the axis's."""
    A, _, res = fit
    rid = RandomizedID(3, random_state=0).fit(A)
    for given in (res, np.array([res, rid], dtype=object), (f for f in [res, rid]),
                  {res, rid}):
        ax = plot_error_vs_k(given)
        assert {ln.get_label() for ln in ax.get_lines()} <= {"GBT", "RID"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        masked = bayesian_id(np.where(A > 1.0, np.nan, A), 3, missing="mask", n_iter=30,
                             burn_in=10, random_state=0)
    ax = plot_error_vs_k([masked, rid], observed=True)
    labels = {ln.get_label(): ln.get_ydata()[0] for ln in ax.get_lines()}
    assert labels == {"GBT": pytest.approx(masked.mse_observed),
                      "RID (all entries)": pytest.approx(rid.mse_)}
    assert ax.get_ylabel() == "MSE (observed entries)"
    # no fit with an observed-entries MSE: the axis does not claim one
    assert plot_error_vs_k([rid], observed=True).get_ylabel() == "MSE"


def test_a_grid_with_a_k_out_of_range_is_refused_before_any_fit(fit):
    A, _, _ = fit  # 60 x 40
    calls = []
    with pytest.raises(ParameterError, match=r"k_values \[40, 0\] are out of range for A "
                       r"\(60 x 40\).*between 1 and 39"):
        fit_k_grid(A, [2, 40, 0], n_iter=10, burn_in=2, callback=calls.append)
    assert calls == []  # K = 2 was not fitted first


def test_error_vs_k_from_results_and_from_a_grid(fit, tmp_path):
    A, _, _ = fit
    ks = [1, 2, 3, 4]
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fits = fit_k_grid(A, ks, n_iter=40, burn_in=10, thin=2, init="sketch")
    assert len(fits) == 2 * len(ks)
    # 15 draws a chain cannot pass the check (ESS >= 100): one warning names every K
    conv = [str(w.message) for w in seen if issubclass(w.category, ConvergenceWarning)]
    assert conv == ["4 of the 4 fits of the grid did not pass the convergence check "
                    "(K = 1, 2, 3, 4): their error is that of the best basis visited, but "
                    "their posterior summaries are not to be trusted (longer chains: n_iter)"]
    ax = plot_error_vs_k(fits)
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    assert set(lines) == {"GBT", "RID"}
    np.testing.assert_array_equal(lines["GBT"].get_xdata(), ks)
    np.testing.assert_allclose(lines["GBT"].get_ydata(), [f.mse for f in fits[:4]])
    np.testing.assert_allclose(lines["RID"].get_ydata(), [f.mse_ for f in fits[4:]])
    # more columns never fit worse by much on this planted rank-3 matrix
    assert lines["GBT"].get_ydata()[2] < lines["GBT"].get_ydata()[0]
    save(ax, tmp_path / "ek.png")
    # the matrix form fits the grid itself; estimators are accepted too
    ax = plot_error_vs_k(A, k_values=[1, 2], baseline=None, n_iter=30, burn_in=10)
    assert [ln.get_label() for ln in ax.get_lines()] == ["GBT"]
    est = BayesianID(2, n_iter=30, burn_in=10, random_state=0).fit(A)
    rid = RandomizedID(2, random_state=0).fit(A)
    ax = plot_error_vs_k([est, rid])
    assert {ln.get_label() for ln in ax.get_lines()} == {"GBT", "RID"}
    # another sampler's fits are a line of their own (they were merged into "GBT"), and
    # the K axis has whole numbers only
    agg = BayesianID(3, n_iter=30, burn_in=10, random_state=0, sampler="aggressive").fit(A)
    ax = plot_error_vs_k([est, agg, fits[2]])
    assert {ln.get_label() for ln in ax.get_lines()} == {"GBT", "GBT aggressive"}
    ax.figure.canvas.draw()
    assert all(float(t).is_integer() for t in ax.get_xticks())
    ax = plot_error_vs_k([est])  # one K: its tick alone (4.74, 4.80 ... before)
    ax.figure.canvas.draw()
    assert list(ax.get_xticks()) == [2]
    with pytest.raises(ParameterError, match="k_values"):
        plot_error_vs_k(A)


def test_overview_figure(fit, tmp_path):
    _, J, res = fit
    fig = plot_overview(res, planted=J)
    assert len(fig.axes) == 4
    fig.savefig(tmp_path / "o.png")
    assert (tmp_path / "o.png").read_bytes()[:8] == PNG_MAGIC


def test_plots_accept_a_fitted_estimator(fit):
    A, _, _ = fit
    est = BayesianID(3, n_iter=40, burn_in=10, thin=1, init="sketch", random_state=0).fit(A)
    plot_trace(est)
    plot_inclusion(est)
    from dask_bid import NotFittedError

    with pytest.raises(NotFittedError):
        plot_trace(BayesianID(3))


def test_matplotlib_is_imported_lazily_and_optional(fit, monkeypatch):
    code = ("import sys, dask_bid; import dask_bid.interface.cli; "
            "print('matplotlib' in sys.modules, 'arviz' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.stdout.split() == ["False", "False"], r.stderr
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match=r'pip install "dask_bid\[plot\]"'):
        plot_trace(fit[2])
