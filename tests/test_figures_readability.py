"""Every page chart reads on a projector (issue 29, item 7): a one-line head title over a smaller detail line,
clear of plotly's toolbar and the top tick; log axes with at least three labelled ticks; the download button at a
slide's size; split learning's trade-off in the units its text speaks of; the frontier's ε axis logarithmic over
decades.

Runs are written straight into the store with the metric and artifact names each mechanism reports (nothing is
trained); the charts are finished as pages and reports draw them (:func:`privengine.figures.run_figures`).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest

from privengine.figures import dp_bayes, run_figures, split_label
from privengine.figures.common import DETAIL_WIDTH, EXPORT_WIDTH, TITLE_WIDTH, TOOLBAR_STRIP, chart_config, finish
from privengine.figures.sweep import with_axes
from privengine.registry import Axis


def _run(store, mechanism: str, config: dict, metrics: list[tuple[int, str, float]], artifacts: dict) -> str:
    run_id = store.create_run(mechanism, config, source="cli")
    store.add_metrics(run_id, metrics)
    for name, data in artifacts.items():
        store.put_artifact(run_id, name, data)
    store.mark_ended(run_id, "finished", summary={})
    return run_id


def _pate(store) -> str:
    eps = [(q, name, q * rate) for q in range(10, 310, 10)
           for name, rate in (("eps_data_dependent", 0.02), ("eps_data_independent", 0.05), ("eps_realised", 0.01))]
    per_epoch = {"teacher_loss_mean": lambda e: 1 / e, "teacher_loss_max": lambda e: 2 / e,
                 "student_accuracy": lambda e: 0.5 + e / 20}
    other = [(e, name, value(e)) for e in range(1, 6) for name, value in per_epoch.items()]
    return _run(store, "pate", {"aggregator": "confident_gnmax", "delta": 1e-5}, eps + other,
                {"teacher_accuracy": {"accuracy": [0.86, 0.88, 0.9]}, "vote_margins": {"margin": [3, 40, 50]}})


POINT = {"setting": "marvell", "label": "Marvell sumKL≤0.64", "test_auc": 0.83, "leak_run.norm.cut.mean": 0.60,
         "leak_run.norm.cut.q95": 0.74, "leak_run.cos.cut.mean": 0.61, "leak_run.cos.cut.q95": 0.92,
         "unprotected_run.norm.cut.mean": 1.0, "unprotected_run.cos.cut.mean": 1.0}


def _split_label(store) -> str:
    names = ["test_auc", "auc_bound", "auc_bound.mean"] + [
        f"{kind}.{a}.{layer}.{stat}" for kind in ("leak", "unprotected") for a in ("norm", "cos")
        for layer in ("cut", "first") for stat in ("mean", "q95")]
    hist = {"epoch": 2, "edges": [-4, -3, -2], "before": {"positive": [0, 3], "negative": [5, 1]},
            "after": {"positive": [2, 1], "negative": [3, 3]}}
    return _run(store, "split_label", {}, [(e, n, 0.5 + e / 10) for e in (1, 2) for n in names],
                {"tradeoff": {"points": [POINT]}, "grad_norms": hist})


def _dpsgd(store) -> str:
    keys = ["excess_risk|isotropic|seed=0", "train_loss|isotropic|seed=0", "captured_energy|isotropic|seed=0"]
    metrics = [(s, k, 10 ** (-s / 100)) for s in range(10, 400, 20) for k in keys] + \
        [(s, "epsilon_each_model", s / 100) for s in range(10, 400, 20)]
    comparison = [{"metric": "excess_risk", "setting": "isotropic", "alpha": 0, "n_seeds": 1, "mean": 0.002,
                   "std": 0.0, "values": [0.002], "epsilon": 3.0, "captured_energy": 0.6}]
    return _run(store, "dpsgd", {"accountant": "prv", "delta": 1e-5}, metrics, {"comparison": comparison})


def _dp_bayes(store) -> str:
    density = {"x": [0.0, 1.0], "reference": [1.0, 1.0], "vi": [1.0, 1.0], "private": [1.0, 1.0], "y_max": 2.0,
               "private_log_sd_ratio": -14.3}
    metrics = [(s, n, 1.0 + s) for s in range(5) for n in ("utility", "vi_elbo", "mean_sd.beta1", "log_sd_ratio.beta1")]
    rows = [{"method": m, "epsilon": e, "median_truth_error_sd_rms": 1 / e, "coverage_90": 0.9}
            for m in ("exponential", "ssp", "reference") for e in (0.1, 1.0, 10.0)]
    return _run(store, "dp_bayes", {"delta": 1e-5}, metrics,
                {"densities": {"beta1": density, "intercept": density}, "phases": {"warmup_end": 1, "burn_in_end": 2},
                 "comparison": {"coverage": rows, "reference_method": "reference"}})


RUNS = {"pate": _pate, "split_label": _split_label, "dpsgd": _dpsgd, "dp_bayes": _dp_bayes}


def _plain(text: str) -> str:
    """Text as drawn: tags dropped (a superscript's digits are a character or two wide)."""
    import re

    return re.sub(r"<[^>]+>", "", text)


@pytest.mark.parametrize("mechanism", list(RUNS))
def test_every_page_chart_has_a_one_line_head_and_detail_lines_a_half_width_chart_fits(store, mechanism):
    figures = run_figures(store.snapshot(RUNS[mechanism](store)))
    assert len(figures) >= 4
    for fig in figures:
        title = fig.layout.title
        assert "<br>" not in title.text and len(_plain(title.text)) <= TITLE_WIDTH, title.text
        for line in (title.subtitle.text or "").split("<br>"):
            assert len(_plain(line)) <= DETAIL_WIDTH, line
        # under the toolbar's strip, pushing the plot down rather than overlapping the top tick
        assert (title.yref, title.y, title.yanchor, title.pad.t, title.automargin) == \
            ("container", 1, "top", TOOLBAR_STRIP, True)
        assert chart_config(fig)["toImageButtonOptions"]["height"] == fig.layout.height


@pytest.mark.parametrize("mechanism", list(RUNS))
def test_every_log_axis_of_a_page_chart_labels_at_least_three_ticks(store, mechanism):
    for fig in run_figures(store.snapshot(RUNS[mechanism](store))):
        for name in [k for k in fig.layout.to_plotly_json() if k[1:5] == "axis"]:
            axis = fig.layout[name]
            if axis.type != "log":
                continue
            assert "log" in axis.title.text
            if axis.tickvals is not None:
                assert len(axis.tickvals) >= 3, (fig.layout.title.text, name)
            else:  # ticked every dtick decades: a long axis, so at least three of them
                assert isinstance(axis.dtick, int) and axis.exponentformat == "power", (fig.layout.title.text, name)


def test_the_density_title_writes_a_power_of_ten_as_a_superscript_not_a_caret(store):
    figures = run_figures(store.snapshot(_dp_bayes(store)))
    texts = [f"{f.layout.title.text} {f.layout.title.subtitle.text or ''}" for f in figures]
    assert any("10<sup>−6.2</sup> × posterior sd" in t for t in texts)  # -14.3 / ln 10
    assert not any("^" in t for t in texts)


def test_the_trade_off_plots_each_setting_once_at_its_stronger_attack_mean_on_auc_axes():
    """Two attacks of one setting were two points with one label, at 95 % quantiles, on a 0-1.5 axis; the demo's
    text speaks of the mean leak AUC (about 0.60)."""
    second = {**POINT, "setting": "iso", "label": "isotropic σ=1", "test_auc": 0.95,
              "leak_run.norm.cut.mean": 0.97, "leak_run.cos.cut.mean": 0.9}
    fig = split_label.tradeoff([POINT, second])
    (trace,) = fig.data
    assert list(trace.x) == [0.61, 0.97] and list(trace.y) == [0.83, 0.95]
    assert list(trace.text) == ["Marvell sumKL≤0.64", "isotropic σ=1"]  # one label per setting
    hover = trace.hovertext[0].split("<br>")  # each attack's numbers, in lines a half-width chart shows whole
    assert "norm attack: mean 0.600, q95 0.740" in hover and "unprotected means: norm 1.000, cosine 1.000" in hover
    assert all(len(line) <= DETAIL_WIDTH for line in hover)
    assert "mean" in fig.layout.title.text + split_label.tradeoff([POINT]).layout.title.text
    for axis in (fig.layout.xaxis, fig.layout.yaxis):
        low, high = axis.range
        assert 0.45 <= low < 0.5 and 1.0 < high <= 1.05  # AUC from chance to 1
    worse = split_label.tradeoff([{**POINT, "test_auc": 0.42}])
    assert worse.layout.yaxis.range[0] < 0.42  # a model worse than chance stays on the chart


@pytest.mark.parametrize("xs, kind", [([0.3, 1.0, 3.0], "log"), ([0.5, 8.0], "log"), ([1.0, 2.0, 4.0], None)])
def test_the_frontier_epsilon_axis_is_logarithmic_from_one_decade(xs, kind):
    fig = go.Figure(go.Scatter(x=xs, y=[0.9] * len(xs)))
    fig = finish(with_axes(fig, [Axis("eps", "ε", "lower")], [Axis("acc", "accuracy", "higher")], xs, "Frontier",
                           empty="no finished run yet"))
    assert fig.layout.xaxis.type == kind
    if kind == "log":
        assert len(fig.layout.xaxis.tickvals) >= 3


def test_a_figure_exports_at_a_slide_width_in_two_formats():
    fig = dp_bayes.densities({"beta1": {"x": [0.0, 1.0], "reference": [1.0, 1.0], "vi": [1.0, 1.0],
                                        "private": [1.0, 1.0], "y_max": 2.0, "private_log_sd_ratio": math.log(0.5)}})[0]
    png = chart_config(finish(fig))
    assert png["displaylogo"] is False and "lasso2d" in png["modeBarButtonsToRemove"]
    options = png["toImageButtonOptions"]
    assert (options["format"], options["scale"], options["width"]) == ("png", 2, EXPORT_WIDTH)
    assert options["filename"] == "privengine-beta1-private-vs-posterior"
    assert chart_config(fig, "svg")["toImageButtonOptions"]["format"] == "svg"
    assert "lasso2d" not in chart_config(fig, selectable=True)["modeBarButtonsToRemove"]
    with pytest.raises(ValueError, match="png"):
        chart_config(fig, "gif")
