"""A sweep's runs in parallel coordinates (privengine.figures.parcoords): which runs are drawn, the axes and their
order, how each axis places its values, the ε axis' log scale, the colour, and the rule a brushed box filters by."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from privengine.claims import PrivacyClaim
from privengine.explore import SweepSpec, run_configs, runner
from privengine.figures.parcoords import (BRUSH, PRIVACY, UTILITY, ParallelAxis, parallel_coordinates, positions,
                                          runs_frame, runs_in_box, sweep_axes, ticks)


def _stored_sweep(store, axes: dict, *, seeds: int = 2, epsilon=lambda c: 10 * c.rate, skip=()) -> str:
    """A toy sweep written straight into the store (nothing runs): run i finishes with score i / 100 and the
    ε ``epsilon(config)``, except the runs numbered in ``skip``, which fail."""
    spec = SweepSpec("toy", axes=axes, seeds=seeds)
    sweep_id = store.create_sweep("toy", spec.to_dict())
    for i, (point, config) in enumerate(run_configs(spec)):
        run_id = store.create_run("toy", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index)
        if i in skip:
            store.mark_ended(run_id, "failed", error="boom")
            continue
        claim = PrivacyClaim("toy", epsilon(config), 1e-5, "none (test only)", "add/remove one", headline=True)
        store.mark_ended(run_id, "finished", summary={"score": i / 100, "privacy": [claim.to_dict()]})
    return sweep_id


def _drawn(store, sweep_id):
    res = runner.result(store, sweep_id)
    runs = runs_frame(store, res)
    return res, runs, sweep_axes(res, runs)


def test_one_row_per_finished_run_with_its_knobs_utility_and_epsilon(store):
    sweep_id = _stored_sweep(store, {"rate": [0.01, 1.0], "mode": ["a", "b"]}, skip={3})
    _, runs, _ = _drawn(store, sweep_id)
    stored = {r.id: r for r in store.sweep_runs(sweep_id)}
    assert len(runs) == 7  # 4 points x 2 seeds, one failed
    for row in runs.itertuples():
        config = stored[row.run].config
        assert (row.rate, row.mode, row.seed) == (config["rate"], config["mode"], config["seed"])
        assert getattr(row, PRIVACY) == pytest.approx(10 * config["rate"])
        assert getattr(row, UTILITY) == stored[row.run].summary["score"]


def test_axes_are_the_varied_knobs_then_utility_then_epsilon_and_never_the_seed(store):
    sweep_id = _stored_sweep(store, {"rate": [0.01, 0.1, 1.0], "mode": ["b", "a"]}, seeds=3)
    _, _, axes = _drawn(store, sweep_id)
    assert [a.column for a in axes] == ["mode", "rate", UTILITY, PRIVACY]
    assert [a.title for a in axes] == ["mode", "rate (log scale)", "score (higher is better)",
                                       "ε per run (lower is better, log scale)"]
    assert axes[0].categories == ("b", "a")  # the sweep's order, not sorted


def test_an_ordinal_knob_spreads_its_values_evenly_in_the_sweeps_order_and_labels_each(store):
    sweep_id = _stored_sweep(store, {"mode": ["b", "a"]}, seeds=1, epsilon=lambda c: 1.0)
    _, runs, axes = _drawn(store, sweep_id)
    place = positions(runs, axes)["mode"]
    assert {m: place[r] for r, m in zip(runs["run"], runs["mode"])} == {"b": 0.0, "a": 1.0}
    labels = ticks(runs, axes)
    assert labels[labels["axis"] == "mode"][["position", "label"]].values.tolist() == [[0.0, "b"], [1.0, "a"]]


def test_three_categories_sit_at_the_ends_and_the_middle():
    axis = ParallelAxis("model", "model", categories=("linear", "mlp", "cnn"))
    runs = pd.DataFrame({"run": ["r1", "r2", "r3"], "model": ["cnn", "linear", "mlp"]})
    assert positions(runs, [axis])["model"].to_dict() == {"r1": 1.0, "r2": 0.0, "r3": 0.5}


def test_a_log_knob_and_an_epsilon_spanning_decades_are_placed_by_their_logarithms(store):
    sweep_id = _stored_sweep(store, {"rate": [0.01, 0.03, 1.0]}, seeds=1)
    _, runs, axes = _drawn(store, sweep_id)
    place = positions(runs, axes)
    for row in runs.itertuples():
        expected = (math.log10(row.rate) + 2) / 2  # log10 from -2 to 0
        assert place.loc[row.run, "rate (log scale)"] == pytest.approx(expected)
        assert place.loc[row.run, "ε per run (lower is better, log scale)"] == pytest.approx(expected)
    labels = ticks(runs, axes)
    assert labels[labels["axis"] == "rate (log scale)"]["label"].tolist() == ["0.01", "0.03", "1"]


def test_an_epsilon_within_a_decade_keeps_a_linear_axis(store):
    sweep_id = _stored_sweep(store, {"mode": ["a", "b"]}, seeds=2, epsilon=lambda c: 2.0 + c.seed)
    _, runs, axes = _drawn(store, sweep_id)
    assert (axes[-1].title, axes[-1].log) == ("ε per run (lower is better)", False)
    place = positions(runs, axes)[axes[-1].title]
    assert sorted(place.round(6).unique()) == [0.0, 1.0]


def test_equal_values_sit_in_the_middle():
    runs = pd.DataFrame({"run": ["r1", "r2"], UTILITY: [0.7, 0.7]})
    assert positions(runs, [ParallelAxis(UTILITY, "u")])["u"].tolist() == [0.5, 0.5]


def test_lines_one_per_run_coloured_by_utility_with_a_box_selection(store):
    sweep_id = _stored_sweep(store, {"rate": [0.01, 1.0], "mode": ["a", "b"]})
    _, runs, axes = _drawn(store, sweep_id)
    spec = parallel_coordinates(runs, axes, colour_title="score (higher is better)").to_dict()
    [lines] = [layer for layer in spec["layer"] if layer["mark"]["type"] == "line"]
    assert lines["encoding"]["detail"]["field"] == "run"
    assert lines["encoding"]["x"]["sort"] == [a.title for a in axes]
    colour = lines["encoding"]["color"]
    assert (colour["field"], colour["type"], colour["title"]) == ("colour", "quantitative", "score (higher is better)")
    data = pd.DataFrame(spec["datasets"][lines["data"]["name"]])
    assert len(data) == len(runs) * len(axes)  # every run crosses every axis
    utility = dict(zip(runs["run"], runs[UTILITY]))
    assert all(row.colour == utility[row.run] for row in data.itertuples())
    [brush] = spec["params"]
    assert (brush["name"], brush["select"]["type"], brush["select"]["encodings"]) == (BRUSH, "interval", ["x", "y"])


def test_a_box_keeps_the_runs_inside_its_range_on_every_axis_it_covers():
    place = pd.DataFrame({"a": [0.0, 0.5, 1.0, 0.5], "b": [0.2, 0.9, 0.5, 0.4], "c": [1.0, 0.0, 0.0, 0.0]},
                         index=pd.Index(["r1", "r2", "r3", "r4"], name="run"))
    assert runs_in_box(place, {}) == ["r1", "r2", "r3", "r4"]  # no box: every run
    assert runs_in_box(place, {"axis": ["a"], "position": [0.4, 1.0]}) == ["r2", "r3", "r4"]
    assert runs_in_box(place, {"axis": ["a", "b"], "position": [0.4, 1.0]}) == ["r2", "r3", "r4"]
    assert runs_in_box(place, {"axis": ["a", "b"], "position": [0.35, 0.6]}) == ["r4"]
    assert runs_in_box(place, {"axis": ["c"], "position": [0.9, 0.1]}) == []  # either corner first
    assert runs_in_box(place, {"axis": ["c"], "position": [0.5, 1.0]}) == ["r1"]
