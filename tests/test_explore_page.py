"""The Explore page (Streamlit AppTest): empty store, a finished sweep by URL, inline value errors, launching,
Ray missing, overlaying sweeps whose axes differ, and the pre-filled values of every sweepable mechanism."""

from __future__ import annotations

import json
import time

import pytest
from streamlit.testing.v1 import AppTest

from privengine import registry
from privengine.claims import PrivacyClaim
from privengine.explore import SweepSpec, run_configs, runner
from privengine.registry import EPSILON_AXIS
from privengine.jobs import JobManager
from tests.conftest import app_page


def _page(**query) -> AppTest:
    return app_page("pages/explore.py", **query)


def _assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


def _wait_ended(store, sweep_id: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while any(r.active for r in store.sweep_runs(sweep_id)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(r.active for r in store.sweep_runs(sweep_id))


def _toy_sweep_form(at: AppTest, values: str) -> AppTest:
    at.selectbox(key="explore.mechanism").set_value("toy").run()
    at.multiselect(key="explore.toy.knobs").set_value(["rate"]).run()
    at.text_input(key="explore.toy.values.rate").set_value(values)
    return at.run()


def test_renders_clean_with_no_sweeps(store):
    at = _page()
    _assert_clean(at)
    assert at.title[0].value == "Explore"
    assert any("Launch sweep" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_finished_sweep_by_url_shows_points_frontier_and_claim(store):
    executor = JobManager(store, max_concurrent=2)
    sweep_id = runner.launch(store, executor, SweepSpec("toy", axes={"steps": [1, 2, 3]}, seeds=2))
    _wait_ended(store, sweep_id)
    at = _page(sweep=sweep_id)
    _assert_clean(at)
    table = at.dataframe[0].value
    assert table["steps"].tolist() == ["1", "2", "3"]
    assert table["seeds finished"].tolist() == ["2 of 2"] * 3
    assert table[EPSILON_AXIS.label].tolist() == ["1 ± 0"] * 3
    assert table["runs"].tolist() == ["2 finished"] * 3
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert chart["layout"]["xaxis"]["title"]["text"] == f"{EPSILON_AXIS.label} (lower is better)"
    assert chart["layout"]["yaxis"]["title"]["text"] == "score (higher is better)"
    points = chart["data"][0]
    assert sorted(c[0] for c in points["customdata"]) == [0, 1, 2]
    assert "seeds 0, 1 (2 finished)" in points["hovertext"][0]
    assert any("ε = 6, δ = 6e-05" in m.value and "selecting among the 6 runs of the sweep that state a claim" in m.value for m in at.markdown)
    assert any("6 of 6 runs ended" in p.proto.text for p in at.get("progress"))

    at = _page()
    at.selectbox(key="explore.mechanism").set_value("pate").run()
    at.query_params["sweep"] = sweep_id
    at.run()
    assert at.selectbox(key="explore.mechanism").value == "toy"  # the New sweep form follows the shown sweep
    at.selectbox(key="explore.mechanism").set_value("pate").run()
    assert at.selectbox(key="explore.mechanism").value == "pate"  # once: the user may pick another afterwards


def test_bad_value_shows_inline_error_and_launches_nothing(store):
    at = _toy_sweep_form(_page(), "0.1, 5")
    _assert_clean(at)
    assert [e.value for e in at.error] == ["**Rate** must be in (0, 1]; got 5.0"]  # the field by its form label
    assert at.button(key="explore.launch").disabled
    at.text_input(key="explore.toy.values.rate").set_value("0.1, zero").run()
    assert [e.value for e in at.error] == ["**Rate** must be a number; got 'zero'"]
    assert store.list_sweeps() == []


def test_errors_about_the_pages_own_fields_name_them_by_their_labels(store):
    at = _toy_sweep_form(_page(), "0.1, 0.3")
    at.number_input(key="explore.seeds").set_value(0).run()
    _assert_clean(at)
    assert [e.value for e in at.error] == ["**Seeds per point** must be an integer >= 1; got 0"]
    assert not any("`" in e.value for e in at.error)
    assert at.button(key="explore.launch").disabled


def test_launch_from_the_page_creates_the_runs(store):
    at = _toy_sweep_form(_page(), "0.1, 0.3")
    at.number_input(key="explore.seeds").set_value(2)
    at.number_input(key="explore.toy.base.steps").set_value(2).run()
    _assert_clean(at)
    assert any("**4 runs**: 2 point(s) × 2 seed(s)" in m.value for m in at.markdown)
    at.button(key="explore.launch").click().run()
    _assert_clean(at)
    sweep_id = at.query_params["sweep"]
    sweep_id = sweep_id[0] if isinstance(sweep_id, list) else sweep_id
    runs = store.sweep_runs(sweep_id)
    assert len(runs) == 4
    assert sorted((r.config["rate"], r.config["seed"], r.config["steps"]) for r in runs) == [
        (0.1, 0, 2), (0.1, 1, 2), (0.3, 0, 2), (0.3, 1, 2)]
    assert store.get_sweep(sweep_id).source == "dashboard"
    _wait_ended(store, sweep_id)
    assert {r.state for r in store.sweep_runs(sweep_id)} == {"finished"}


def test_a_preset_fills_the_shared_values_and_another_replaces_them(store):
    at = _page()
    at.selectbox(key="explore.mechanism").set_value("pate").run()
    assert at.number_input(key="explore.pate.base.teachers").value == 100  # the defaults
    at.selectbox(key="explore.pate.preset").set_value("mnist-lnmax").run()
    _assert_clean(at)
    assert at.number_input(key="explore.pate.base.mnist-lnmax.teachers").value == 250
    assert at.number_input(key="explore.pate.base.mnist-lnmax.queries").value == 100
    at.selectbox(key="explore.pate.preset").set_value("quick-demo").run()
    assert at.number_input(key="explore.pate.base.quick-demo.teachers").value == 50
    assert at.number_input(key="explore.pate.base.quick-demo.queries").value == 300


def test_ray_missing_disables_ray_and_says_how_to_install(monkeypatch):
    from ui import services

    monkeypatch.setattr(services, "ray_missing", lambda: "Ray is not installed; install it with "
                                                         f"`{services.RAY_INSTALL}`.")
    at = _page()
    _assert_clean(at)
    assert at.radio(key="explore.executor").disabled
    assert any('pip install "ray>=2.50"' in c.value for c in at.caption)


def test_overlay_warns_when_axes_differ(store):
    claim = PrivacyClaim("toy", 1.0, 1e-5, "none (test only)", "add/remove one example", headline=True)
    ids = []
    for mechanism, summary in (("toy", {"score": 0.9, "privacy": [claim.to_dict()]}),
                               ("split_label", {"leak_auc": 0.6, "test_auc": 0.8})):
        sweep_id = store.create_sweep(mechanism, SweepSpec(mechanism).to_dict())
        run_id = store.create_run(mechanism, {}, sweep_id=sweep_id, sweep_point=0)
        store.mark_ended(run_id, "finished", summary=summary)
        ids.append(sweep_id)
    at = _page()
    at.multiselect(key="explore.overlay").set_value(ids).run()
    _assert_clean(at)
    [warning] = [w.value for w in at.warning]
    assert warning.startswith(f"Not drawn: **Split learning: label leakage · {ids[1]}** plots leak AUC")
    assert f"while **Toy (tests only) · {ids[0]}** plots {EPSILON_AXIS.label}" in warning
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert [(t["name"], t["x"], t["y"]) for t in chart["data"]] == [(f"Toy (tests only) · {ids[0]}", [1.0], [0.9])]


@pytest.mark.parametrize("name", [m.name for m in registry.all_mechanisms() if m.frontier is not None])
def test_suggested_values_of_every_knob_parse(name):
    at = _page()
    at.selectbox(key="explore.mechanism").set_value(name).run()
    mech = registry.get(name)
    knobs = [s.name for s in mech.config_cls.specs()
             if s.name not in ("device", "seed", "replica") and s.name not in dict(mech.frontier.fixed)]
    at.multiselect(key=f"explore.{name}.knobs").set_value(knobs).run()
    _assert_clean(at)
    # every pre-filled value is accepted; only the size of the whole grid, or a knob that the base config
    # switches off (named with its switch), may be refused
    assert all(e.value.startswith("**Seeds per point** times the") or "has no effect unless" in e.value
               for e in at.error), \
        [e.value for e in at.error]


def test_two_knobs_launched_from_the_page_keep_their_settings(store):
    """Each point's numbers come from runs with its own settings, whatever order the knobs were picked in."""
    at = _page()
    at.selectbox(key="explore.mechanism").set_value("toy").run()
    at.multiselect(key="explore.toy.knobs").set_value(["rate", "mode"]).run()
    at.text_input(key="explore.toy.values.rate").set_value("0.1, 1")
    at.number_input(key="explore.toy.base.steps").set_value(1).run()
    at.button(key="explore.launch").click().run()
    _assert_clean(at)
    sweep_id = at.query_params["sweep"]
    sweep_id = sweep_id[0] if isinstance(sweep_id, list) else sweep_id
    _wait_ended(store, sweep_id)
    res = runner.result(store, sweep_id)
    assert sorted((p.settings["rate"], p.settings["mode"], p.privacy) for p in res.points) == [
        (0.1, "a", 1.0), (0.1, "b", 1.0), (1.0, "a", 10.0), (1.0, "b", 10.0)]


def test_the_knobs_to_vary_list_the_mechanisms_own_main_knobs_first():
    at = _page()
    at.selectbox(key="explore.mechanism").set_value("dpsgd").run()
    options = at.multiselect(key="explore.dpsgd.knobs").options
    assert options[0] == "model" and options[-1] == "secure noise (OS entropy)"  # not secure noise first


def test_the_choice_to_train_runs_together_reaches_the_launch(store, monkeypatch):
    """A mechanism that trains compatible runs together (DP-SGD) offers automatic / always / never, and the choice is
    the ``group`` of the launch; one that cannot (toy) offers nothing. (The launch is recorded, not trained.)"""
    seen = []

    def launch(store, executor, spec, *, source, group=None):
        seen.append(group)
        return store.create_sweep(spec.mechanism, spec.to_dict(), source=source, executor=executor.name)

    monkeypatch.setattr(runner, "launch", launch)
    at = _toy_sweep_form(_page(), "0.1, 0.3")
    assert "explore.group" not in [r.key for r in at.radio]
    at.button(key="explore.launch").click().run()
    at.selectbox(key="explore.mechanism").set_value("dpsgd").run()
    assert at.radio(key="explore.group").value is None  # automatic by default
    at.radio(key="explore.group").set_value(False).run()
    at.button(key="explore.launch").click().run()
    _assert_clean(at)
    assert seen == [None, False]


def _regression_sweep(store) -> tuple[str, list[str]]:
    """A stored DP-SGD sweep of the quick demo (a regression: its runs report an excess risk, no test accuracy)
    over two learning rates and three seeds, its six runs queued: nothing is trained."""
    mech = registry.get("dpsgd")
    spec = SweepSpec("dpsgd", base=dict(mech.preset("quick-demo").overrides), axes={"lr": [0.1, 0.5]}, seeds=3)
    sweep_id = store.create_sweep("dpsgd", spec.to_dict())
    runs = [store.create_run("dpsgd", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index)
            for point, config in run_configs(spec)]
    return sweep_id, runs


def _finish_regression_runs(store, runs: list[str]) -> None:
    claim = PrivacyClaim("all models of this run", 3.0, 1e-5, "none (test only)", "add/remove one", headline=True)
    for i, run_id in enumerate(runs):
        store.mark_ended(run_id, "finished", summary={"metric": "excess_risk", "best_excess_risk": 0.001 * (i + 1),
                                                      "privacy": [claim.to_dict()]})


def _chart_notes(at: AppTest) -> list[str]:
    return [a["text"] for a in json.loads(at.get("plotly_chart")[0].proto.spec)["layout"].get("annotations", [])]


def test_a_regression_sweep_that_finishes_while_shown_plots_a_utility_its_runs_report(store):
    sweep_id, runs = _regression_sweep(store)
    at = _page(sweep=sweep_id)  # launched: the page first draws it with no run finished
    _assert_clean(at)
    assert _chart_notes(at) == ["no finished run yet"]
    _finish_regression_runs(store, runs)
    at.run()
    _assert_clean(at)
    assert any("6 of 6 runs ended" in p.proto.text for p in at.get("progress"))
    assert at.selectbox(key=f"explore.utility.{sweep_id}").value is None  # the runs pick it
    assert any(c.value.startswith("Utility: **excess risk**, the first of Anisotropic DP-SGD's utility metrics")
               for c in at.caption)
    chart = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert not any("no finished run" in note for note in _chart_notes(at))
    assert sorted(c[0] for t in chart["data"] if t.get("customdata") for c in t["customdata"]) == [0, 1]


def test_a_utility_the_finished_runs_lack_is_named_and_the_ones_they_have_offered(store):
    sweep_id, runs = _regression_sweep(store)
    _finish_regression_runs(store, runs)
    at = _page(sweep=sweep_id)
    at.selectbox(key=f"explore.utility.{sweep_id}").set_value("best_test_acc").run()
    _assert_clean(at)
    [note] = _chart_notes(at)
    assert note == "the finished runs report no test accuracy"
    assert any(w.value.startswith("None of the 6 finished runs reports test accuracy; they report excess risk. "
                                  "Choose it under Utility metric.") for w in at.warning)


def _toy_runs(store, rates: list[float], *, seeds: int = 2, finished: int | None = None) -> tuple[str, list[str]]:
    """A stored toy sweep over ``rates`` (nothing runs): the first ``finished`` runs (all by default) finish with
    ε = 10 x rate and a score; the others stay queued."""
    spec = SweepSpec("toy", axes={"rate": rates}, seeds=seeds)
    sweep_id = store.create_sweep("toy", spec.to_dict())
    runs = []
    for i, (point, config) in enumerate(run_configs(spec)):
        run_id = store.create_run("toy", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index)
        if finished is None or i < finished:
            claim = PrivacyClaim("toy", 10 * config.rate, 1e-5, "none (test only)", "add/remove one", headline=True)
            store.mark_ended(run_id, "finished", summary={"score": 0.5 + i / 100, "privacy": [claim.to_dict()]})
        runs.append(run_id)
    return sweep_id, runs


def _draw_box(at: AppTest, sweep_id: str, box: dict) -> AppTest:
    """What the browser sends when a box is drawn on the parallel coordinates: the chart's interval selection as its
    widget state (AppTest has no way to drag on a Vega-Lite chart; tests/test_explore_browser.py drags a real one)."""
    from privengine.figures.parcoords import BRUSH

    [chart] = [c for c in at.get("vega_lite_chart") if f"explore.parcoords.{sweep_id}" in c.proto.id]
    states = at._tree.get_widget_states()
    state = states.widgets.add()
    state.id, state.string_value = chart.proto.id, json.dumps({"selection": {BRUSH: box}})
    return at._run(states)


def test_parallel_coordinates_are_drawn_and_a_box_on_them_filters_the_points_table(store):
    sweep_id, runs = _toy_runs(store, [0.01, 0.1, 1.0])
    at = _page(sweep=sweep_id)
    _assert_clean(at)
    [chart] = [c for c in at.get("vega_lite_chart") if f"explore.parcoords.{sweep_id}" in c.proto.id]
    titles = json.loads(chart.proto.spec)["layer"][1]["encoding"]["x"]["sort"]
    assert titles == ["rate (log scale)", "score (higher is better)", "ε per run (lower is better, log scale)"]
    assert any(c.value.startswith("All 6 finished runs, one line each") for c in at.caption)
    assert at.dataframe[0].value["point"].tolist() == [0, 1, 2]

    at = _draw_box(at, sweep_id, {"axis": [titles[-1]], "position": [0.75, 1.0]})  # the top of the ε axis: ε = 10
    _assert_clean(at)
    assert any(c.value.startswith("**2 of 6 runs** pass through the box on ε per run") for c in at.caption)
    assert at.dataframe[0].value["point"].tolist() == [2]
    links = [link.proto.label for link in at.get("page_link") if link.proto.label.startswith("Run ")]
    assert sorted(label.split(" ")[1] for label in links) == sorted(runs[4:])  # the two seeds of rate 1

    # over rate and score: rate 0.1 (the middle of its log axis) and the lower half of the scores (0.5 to 0.55)
    at = _draw_box(at, sweep_id, {"axis": titles[:2], "position": [0.35, 0.5]})
    assert any(c.value.startswith("**1 of 6 runs** pass through the box on rate (log scale), score")
               for c in at.caption)
    assert at.dataframe[0].value["point"].tolist() == [1]
    links = [link.proto.label for link in at.get("page_link") if link.proto.label.startswith("Run ")]
    assert [label.split(" ")[1] for label in links] == [runs[2]]  # the first seed of rate 0.1: score 0.52


@pytest.mark.parametrize("finished, note", [(0, "no finished run yet"), (1, "1 finished run so far, they need 2.")])
def test_parallel_coordinates_wait_for_two_finished_runs(store, finished, note):
    sweep_id, _ = _toy_runs(store, [0.01, 1.0], finished=finished)
    at = _page(sweep=sweep_id)
    _assert_clean(at)
    assert not [c for c in at.get("vega_lite_chart") if "explore.parcoords" in c.proto.id]
    assert f"Parallel coordinates of the runs: {note}" in [c.value for c in at.caption]
