"""Plotly figures and result tables of stored runs and sweeps, without Streamlit: the dashboard's pages draw
them and reports (:mod:`privengine.report`) embed the same ones.

A mechanism with a page of its own has a module here (``pate``, ``dpsgd``, ``dp_bayes``, ``split_label``) with
``figures(snapshot)``, every chart of its page in order, and ``tables(snapshot)``, its result tables; every audit
(a registry entry with ``audits`` set) is drawn by ``audit``; any other mechanism gets one chart per reported
metric, as on the generic page. A module may also define
``published_values(snapshot)``: the run's own value of each metric its presets publish (by the preset's
metric name), shown beside the published figure, and ``overlays(runs, artifacts, labels, styles)``: charts of
several of its runs drawn from their artifacts (DP-Bayes: the posterior densities), which a comparison shows before
the overlaid metric curves (:func:`overlay_figures`).

A run started from a preset with a published figure gets it drawn on the chart of that metric (charts mark the
metric they show with :func:`~privengine.figures.common.measures`), here for reports and by the dashboard's
chart helper for pages, through the same :func:`~privengine.figures.common.finish`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import plotly.graph_objects as go

from privengine import registry
from privengine.errors import PrivengineError
from privengine.presets import Preset, Published, changed_fields, preset_name_of
from privengine.store import RunRecord, RunSnapshot

from .common import Table, finish, metric_curves

__all__ = ["Table", "overlay_figures", "preset_of", "published_of", "published_value", "run_figures", "run_tables"]

_VIEWS = {name: f"{__name__}.{name}" for name in ("pate", "dpsgd", "dp_bayes", "split_label")}
# the membership audits have a chart of their own (the ROC), then the audit's
_VIEWS["dpsgd-membership"] = _VIEWS["pate-membership"] = f"{__name__}.membership"


def _view(mechanism: str) -> ModuleType | None:
    if mechanism in _VIEWS:
        return importlib.import_module(_VIEWS[mechanism])
    if mechanism in {a.name for a in registry.all_audits()}:
        return importlib.import_module(f"{__name__}.audit")
    return None


def run_figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart the run's page draws, in its order (per-setting charts for every setting), finished as the
    page draws them (the published figure of the run's preset included)."""
    view = _view(snapshot.run.mechanism)
    published = published_of(snapshot.run)
    return [finish(fig, published) for fig in (view.figures(snapshot) if view else metric_curves(snapshot.metrics))]


def overlay_figures(runs: list[RunRecord], artifacts: dict[str, dict]) -> list[go.Figure]:
    """The charts that overlay ``runs`` (one mechanism at a time) from their stored artifacts (run id -> name ->
    data), by their mechanism's ``overlays``; none for a mechanism without them. Runs are told apart as on the
    metric overlays (:func:`~.compare.run_labels`, :func:`~.compare.run_styles`), a run's several lines each in a
    colour of its own (:func:`~.compare.colour_each_series`)."""
    from .compare import colour_each_series, run_labels, run_styles  # compare imports modules, not the package

    labels, styles, out = run_labels(runs), run_styles(runs), []
    for mechanism in dict.fromkeys(r.mechanism for r in runs):
        view = _view(mechanism)
        if view is not None and hasattr(view, "overlays"):
            group = [r for r in runs if r.mechanism == mechanism]
            out += [colour_each_series(fig) for fig in
                    view.overlays(group, {r.id: artifacts.get(r.id, {}) for r in group}, labels, styles)]
    return out


def preset_of(run: RunRecord) -> Preset | None:
    """The preset run ``run`` was started from (recorded in its source), or None (also for a preset its
    mechanism no longer declares)."""
    name = preset_name_of(run.source)
    if name is None:
        return None
    try:
        return registry.get(run.mechanism).preset(name)
    except PrivengineError:  # unknown mechanism or preset: nothing to compare with
        return None


def changed_from_preset(run: RunRecord, preset: Preset) -> list[str]:
    """The knobs (by name) in which ``run``'s config differs from ``preset``'s, privacy-neutral or not
    (:func:`~privengine.presets.changed_fields`: seeds, device, data root and noise source left out)."""
    return changed_fields(registry.get(run.mechanism).preset_config(preset.name).to_dict(), run.config)


def published_of(run: RunRecord) -> Published | None:
    """The published figure of the preset ``run`` was started from, or None."""
    preset = preset_of(run)
    return None if preset is None else preset.published


def published_value(snapshot: RunSnapshot) -> float | None:
    """The run's own value of the metric its preset's published figure measures (None while unknown, or when
    the run has no published figure)."""
    published = published_of(snapshot.run)
    view = _view(snapshot.run.mechanism)
    if published is None or view is None or not hasattr(view, "published_values"):
        return None
    return view.published_values(snapshot).get(published.metric)


def run_tables(snapshot: RunSnapshot) -> list[Table]:
    """The result tables the run's page shows (none for a mechanism without a page of its own)."""
    view = _view(snapshot.run.mechanism)
    return view.tables(snapshot) if view else []
