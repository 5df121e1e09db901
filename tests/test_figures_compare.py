"""Runs side by side: charts named as the runs' pages name them, values reported once in a table, runs told apart
by the settings that differ, and a privacy cell for a mechanism that states no epsilon."""

from __future__ import annotations

import pytest

from privengine.claims import PrivacyClaim
from privengine.figures.compare import comparison_figures, run_labels, run_styles, single_values
from privengine.figures.metric_names import describe
from privengine.figures.text import privacy_text, result_text


def _pate_run(store, teachers: int, eps_slope: float) -> str:
    run_id = store.create_run("pate", {"teachers": teachers, "queries": 300, "seed": 0})
    store.add_metrics(run_id, [(0, "fraction_answered", teachers / 100)]
                      + [(q, "eps_data_independent", eps_slope * q) for q in range(1, 6)])
    claim = PrivacyClaim("data-independent", 5 * eps_slope, 1e-5, "Rényi DP of GNMax (Papernot et al. 2018)",
                         "replace one", headline=True)
    store.mark_ended(run_id, "finished", summary={"privacy": [claim.to_dict()]})
    return run_id


def test_runs_are_compared_chart_by_chart_with_the_pages_names_and_single_values_in_a_table(store):
    ids = [_pate_run(store, 50, 1.0), _pate_run(store, 80, 2.0)]
    runs = [store.get_run(i) for i in ids]
    metrics = {i: store.metrics(i) for i in ids}

    assert run_labels(runs) == {ids[0]: f"{ids[0]} · teachers = 50", ids[1]: f"{ids[1]} · teachers = 80"}
    (fig,) = comparison_figures(runs, metrics)  # the fraction answered is a single value: no chart of lone dots
    assert fig.layout.title.text == "ε against queries charged (Rényi DP of GNMax)"  # the accountant named
    assert fig.layout.xaxis.title.text == "queries answered (Confident-GNMax: submitted)"
    assert [t.legendgrouptitle.text for t in fig.data] == list(run_labels(runs).values())
    assert {t.name for t in fig.data} == {"data-independent (a priori)"}
    assert fig.data[0].line.color != fig.data[1].line.color  # one colour per run

    table = single_values(runs, metrics)
    assert table.frame.to_dict("list") == {"run": list(run_labels(runs).values()),
                                          "Queries answered (fraction)": ["0.5", "0.8"]}


def test_runs_of_several_mechanisms_are_named_with_their_mechanism(store):
    pate = store.get_run(_pate_run(store, 50, 1.0))
    split = store.create_run("split_label", {"protection": "marvell"})
    store.add_metrics(split, [(1, "test_auc", 0.8), (2, "test_auc", 0.9)])
    runs = [pate, store.get_run(split)]
    labels = run_labels(runs)
    assert labels[pate.id] == f"{pate.id} · PATE" and labels[split] == f"{split} · Split learning"
    titles = [f.layout.title.text for f in comparison_figures(runs, {r.id: store.metrics(r.id) for r in runs})]
    assert "Split learning: Test AUC" in titles and any(t.startswith("PATE: ε against queries charged") for t in titles)


def test_stored_metric_keys_are_named_like_the_page_charts():
    leak = describe("split_label", "marvell/leak.cos.first.mean")
    assert (leak.chart, leak.series, leak.x_title) == ("Leak AUC at the first layer",
                                                       "marvell · cosine attack, mean", "epoch")
    loss = describe("dpsgd", "train_loss|isotropic|seed=2")
    assert loss.series == "isotropic · seed 2" and loss.x_title == "optimizer step" and loss.log_y
    assert describe("toy", "some_metric.q95").chart == "Some metric q95"  # unknown: the key in words


def test_a_run_without_an_epsilon_says_it_is_not_dp_and_what_it_leaks(store):
    run_id = store.create_run("split_label", {"protection": "none"})
    assert privacy_text(store.get_run(run_id)) == ""  # nothing known yet
    store.mark_ended(run_id, "finished", summary={"leak_auc": 0.6234, "test_auc": 0.9})
    assert privacy_text(store.get_run(run_id)) == "not DP: leak AUC 0.623"


def test_a_run_shows_its_mechanisms_main_utility_with_accuracies_in_percent(store):
    pate = store.create_run("pate", {})
    assert result_text(store.get_run(pate)) == ""  # nothing known yet
    store.mark_ended(pate, "finished", summary={"student_accuracy": 0.9837, "queries_answered": 731})
    assert result_text(store.get_run(pate)) == "98.37 % student test accuracy"
    split = store.create_run("split_label", {"protection": "none"})
    store.mark_ended(split, "finished", summary={"leak_auc": 0.6234, "test_auc": 0.9012})
    assert result_text(store.get_run(split)) == "0.901 test AUC"  # not an accuracy: three digits


def test_runs_with_equal_curves_stay_visible_one_inside_the_other(store):
    ids = [_pate_run(store, 50, 1.0), _pate_run(store, 80, 1.0), _pate_run(store, 90, 1.0)]  # three equal curves
    runs = [store.get_run(i) for i in ids]
    (fig,) = comparison_figures(runs, {i: store.metrics(i) for i in ids})
    first, second, third = fig.data
    assert list(first.y) == list(second.y) == list(third.y)
    # drawn in run order, each later run narrower with smaller markers, so it sits inside the earlier ones
    assert first.line.width > second.line.width > third.line.width > 0
    assert first.marker.size > second.marker.size > third.marker.size
    assert len({t.marker.symbol for t in fig.data}) == 3 and len({t.line.color for t in fig.data}) == 3
    assert {t.mode for t in fig.data} == {"lines+markers"}


def test_every_series_of_a_comparison_has_a_colour_of_its_own(store):
    """Issue 40, item 7: on a chart where each run has several lines (PATE's ε figures), every line gets its own
    colour, not one per run told apart by dash alone; a chart of one line per run keeps each run's colour."""
    ids = [_pate_run(store, 50, 1.0), _pate_run(store, 80, 2.0)]
    for run_id in ids:
        store.add_metrics(run_id, [(q, "eps_data_dependent", 0.5 * q) for q in range(1, 6)])
    runs = [store.get_run(i) for i in ids]
    (fig,) = comparison_figures(runs, {i: store.metrics(i) for i in ids})
    assert len(fig.data) == 4 and len({t.line.color for t in fig.data}) == 4
    assert [t.legendgroup for t in fig.data].count(ids[0]) == 2  # two series of one run on the chart

    alone = [_pate_run(store, 50, 1.0), _pate_run(store, 80, 2.0)]
    (one_each,) = comparison_figures([store.get_run(i) for i in alone], {i: store.metrics(i) for i in alone})
    assert [t.line.color for t in one_each.data] == [run_styles(runs)[i]["color"] for i in ids]


def test_a_long_curve_keeps_a_few_markers_to_tell_runs_apart(store):
    ids = []
    for teachers in (50, 80):
        run_id = store.create_run("pate", {"teachers": teachers})
        store.add_metrics(run_id, [(q, "eps_data_independent", 0.01 * q) for q in range(200)])
        ids.append(run_id)
    (fig,) = comparison_figures([store.get_run(i) for i in ids], {i: store.metrics(i) for i in ids})
    assert all(t.mode == "lines+markers" and 0 < t.marker.maxdisplayed < 200 for t in fig.data)


def test_pate_epsilon_chart_names_each_curve_for_what_it_is(store):
    """Issue 24, items 1 and 6: Confident-GNMax's curves are the bound, the a-priori figure and the paper-style
    realised one against queries submitted; a run migrated from before keeps its realised and odometer curves
    against queries answered."""
    import pandas as pd

    from privengine.figures import pate as figures
    from privengine.store import RunSnapshot

    def chart(names):
        run_id = store.create_run("pate", {"aggregator": "confident_gnmax", "delta": 1e-5})
        rows = [(step, name, 0.1 * step) for name in names for step in (1, 2)]
        store.add_metrics(run_id, rows)
        fig = figures.epsilon(RunSnapshot(store.get_run(run_id), pd.DataFrame(rows, columns=["step", "name", "value"])))
        return fig.layout.xaxis.title.text, [t.name for t in fig.data]

    unit, names = chart(["eps_data_dependent", "eps_data_independent", "eps_realised"])
    assert unit == "queries submitted"
    assert names == ["data-dependent (not publishable)", "data-independent (a priori)",
                     "realised, paper-style (not a bound)"]
    unit, names = chart(["eps_realised", "eps_odometer"])
    assert unit == "queries answered" and names[1] == "realised data-independent (odometer)"


def test_dp_bayes_runs_are_compared_by_their_posterior_densities_first(store):
    """Issue 29, item 6: a DP-Bayes comparison overlays each run's private draw on its reference posterior, one chart
    per parameter, before the metric curves (the SGLD traces)."""
    from privengine.figures import overlay_figures

    ids = []
    for epsilon, spread in ((1.0, 2.0), (10.0, 1.2)):
        run_id = store.create_run("dp_bayes", {"epsilon": epsilon})
        x = [-1.0, 0.0, 1.0]
        store.put_artifact(run_id, "densities", {"beta1": {"x": x, "reference": [0.2, 0.6, 0.2], "y_max": spread,
                                                           "private": [0.3 * spread, 0.4, 0.3 * spread]}})
        ids.append(run_id)
    ids.append(store.create_run("dp_bayes", {"epsilon": 3.0}))  # no densities yet: left out, no error
    runs = [store.get_run(i) for i in ids]
    (fig,) = overlay_figures(runs, {i: store.artifacts(i) for i in ids})
    assert fig.layout.title.text.startswith("beta1: posterior densities")
    labels = run_labels(runs)
    assert [(t.legendgrouptitle.text, t.name) for t in fig.data] == [
        (labels[ids[0]], "private draw"), (labels[ids[0]], "reference posterior"),
        (labels[ids[1]], "private draw"), (labels[ids[1]], "reference posterior")]
    # issue 40, item 7: each line its own colour (a run's two series told apart by their dash alone did not read
    # from a room's back rows); each run's private draw in its own width
    assert len({t.line.color for t in fig.data}) == 4
    assert fig.data[0].line.width != fig.data[2].line.width
    assert list(fig.data[2].y) == [0.36, 0.4, 0.36]
    assert list(fig.layout.yaxis.range) == [0, 2.0]  # the highest of the runs' clips: a spike does not flatten all
    assert overlay_figures([store.get_run(_pate_run(store, 50, 1.0))], {}) == []  # PATE draws none


def test_compared_runs_show_the_differing_knobs_before_the_long_privacy_text(store):
    """Issue 29, item 6: at 1280 px the only differing setting was hidden right of the wide privacy column; each
    row also links to its run's page."""
    pytest.importorskip("streamlit", reason="ui.runs_table imports streamlit, which this machine lacks (the GPU "
                                            "machine leaves the page tests out)")
    from ui.runs_table import config_differences, identical_configs

    ids = [_pate_run(store, 50, 1.0), _pate_run(store, 80, 2.0)]
    table = config_differences([store.get_run(i) for i in ids])
    assert list(table.columns) == ["open", "run", "mechanism", "teachers", "result", "privacy"]
    assert list(table["open"]) == [f"pate?run={i}" for i in ids]
    assert not identical_configs(table)
    assert identical_configs(config_differences([store.get_run(ids[0])]))


def test_an_audit_run_is_listed_as_an_audit_with_its_bound_against_the_claim(store):
    """Issue 29, item 8: audits were listed as "PATE · not DP"."""
    from privengine.audit.interface import AuditResult
    from privengine.figures.compare import mechanism_name

    result = AuditResult("pate-gnmax", "pate", "threshold test", "GNMax, one query", claimed_epsilon=0.342,
                         epsilon_lower=0.0612, confidence=0.95, delta=1e-5)
    run_id = store.create_run("pate-gnmax", {})
    store.mark_ended(run_id, "finished", summary=result.to_dict())
    assert mechanism_name("pate-gnmax") == "PATE audit" and mechanism_name("pate") == "PATE"
    assert mechanism_name("pate-membership") == "PATE membership attack"
    assert privacy_text(store.get_run(run_id)) == "audited ε ≥ 0.0612 (95 %) against claimed ε = 0.342, δ = 1e-05"
