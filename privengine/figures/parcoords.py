"""A sweep's runs in parallel coordinates (Altair, Streamlit-free), and which runs a box drawn on it keeps.

One line per finished run crosses one vertical axis per knob the sweep varied, then its utility, then its privacy
measure (the headline ε). Every axis maps its values to a position in [0, 1]:

* an ordinal axis (a knob whose values are not numbers: choices, yes/no, lists) puts its k-th of n values at
  k / (n - 1), in the order the sweep lists them, its values as tick labels;
* a numeric axis puts v at (t(v) - min t) / (max t - min t) over the runs drawn, with t(v) = log10 v on a log axis
  (a log-scale knob, or a privacy measure spanning a decade or more, its title saying "log scale") and t(v) = v
  otherwise; every value at 0.5 when all are equal.

The chart draws the folded table (run, axis, position) as lines, coloured by utility, with an interval selection
``brush`` over (axis, position): a box on one axis' range, or one spanning several neighbouring axes. The page gets
it back as ``{"axis": [titles covered], "position": [low, high]}``; :func:`runs_in_box` keeps the runs whose line
passes through the box on every axis it covers. Seeds are never an axis: runs of one point differ only in their
utility and privacy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd

from privengine import registry
from privengine.explore import runner
from privengine.explore.frontier import run_values
from privengine.store import RunStore

from .sweep import short_label
from .text import knob_label, number, value_text

BRUSH = "brush"  # the name of the chart's interval selection: the page reads the box under it
UTILITY, PRIVACY = "utility", "privacy"  # the runs frame's columns of the two measures
HEIGHT = 360  # px: the whole chart (axes, their titles, the colour legend), room for six tick labels an axis
MAX_TICKS = 6  # distinct values a numeric axis labels one by one; above it, five evenly spaced values
# viridis without its ends (near-black, pale yellow), which vanish on a dark or a light page
COLOURS = alt.Scale(scheme=alt.SchemeParams(name="viridis", extent=[0.15, 0.9]))
TICK_COLOUR = "#8a8f98"  # the axes' lines and tick labels: mid grey, read on a light and on a dark page


@dataclass(frozen=True)
class ParallelAxis:
    """One vertical axis: the runs frame's ``column``, its ``title`` (unique: the chart's x value), the values of
    an ordinal axis in order (``categories``, as texts; None for a numeric one) and whether a numeric one is log."""

    column: str
    title: str
    categories: tuple[str, ...] | None = None
    log: bool = False


def runs_frame(store: RunStore, res: runner.SweepResult) -> pd.DataFrame:
    """One row per finished run (the latest attempt of each point and seed) with both measures: ``run``, ``point``,
    ``seed``, each varied knob (by name; texts for ordinal knobs, numbers otherwise), :data:`UTILITY` and
    :data:`PRIVACY` (the values of ``res``' axes)."""
    settings = {p.index: p.settings for p in res.points}
    numeric = {k: _numeric(p.settings.get(k) for p in res.points) for k in res.spec.varied}
    rows = []
    for run in runner.latest_attempts(store.sweep_runs(res.sweep_id)):
        values = run_values(run.summary) if run.state == "finished" else {}
        utility = values.get(res.utility_axis.name, math.nan) if res.utility_axis else math.nan
        privacy = values.get(res.privacy_axis.name, math.nan)
        if math.isnan(utility) or math.isnan(privacy):
            continue
        knobs = settings[run.sweep_point]
        rows.append({"run": run.id, "point": run.sweep_point, "seed": run.config.get("seed"),
                     **{k: knobs.get(k) if numeric[k] else value_text(res.mechanism, k, knobs.get(k))
                        for k in res.spec.varied},
                     UTILITY: utility, PRIVACY: privacy})
    return pd.DataFrame(rows, columns=["run", "point", "seed", *res.spec.varied, UTILITY, PRIVACY])


def sweep_axes(res: runner.SweepResult, runs: pd.DataFrame) -> list[ParallelAxis]:
    """The axes of ``res``' chart: each varied knob (in the sweep's order; an ordinal one lists its values in the
    order of the sweep's points, a numeric one is log when its knob is log-scale and its values are positive), the
    utility, then the privacy measure (log when its values are positive and span a decade or more)."""
    config_cls = registry.get(res.mechanism).config_cls
    axes = []
    for knob in res.spec.varied:
        values = [p.settings.get(knob) for p in res.points]
        title = knob_label(res.mechanism, knob)
        if _numeric(values):
            log = config_cls.spec(knob).knob.log and min(values) > 0 and max(values) > min(values)
            axes.append(ParallelAxis(knob, f"{title} (log scale)" if log else title, log=log))
        else:
            texts = dict.fromkeys(value_text(res.mechanism, knob, v) for v in values)
            axes.append(ParallelAxis(knob, title, categories=tuple(texts)))
    utility = short_label(res.utility_axis) if res.utility_axis else UTILITY
    axes.append(ParallelAxis(UTILITY, f"{utility} ({res.utility_axis.better if res.utility_axis else '?'} is better)"))
    privacy = runs[PRIVACY]
    log = bool(len(privacy) and privacy.min() > 0 and privacy.max() / privacy.min() >= 10)
    scale = ", log scale" if log else ""
    axes.append(ParallelAxis(PRIVACY, f"{short_label(res.privacy_axis)} ({res.privacy_axis.better} is better{scale})",
                             log=log))
    return axes


def positions(runs: pd.DataFrame, axes: list[ParallelAxis]) -> pd.DataFrame:
    """Each run's position on each axis: a (runs x axes) frame in [0, 1], indexed by run id, columns the axes'
    titles (the mapping is in the module's docstring)."""
    out = {}
    for axis in axes:
        column = runs[axis.column]
        if axis.categories is not None:
            out[axis.title] = column.map(_ordinal_places(axis.categories)).astype(float)
        else:
            t = column.astype(float).map(math.log10) if axis.log else column.astype(float)
            low, high = t.min(), t.max()
            out[axis.title] = (t - low) / (high - low) if high > low else pd.Series(0.5, index=t.index)
    return pd.DataFrame(out).set_index(runs["run"]) if len(runs) else pd.DataFrame(columns=[a.title for a in axes])


def ticks(runs: pd.DataFrame, axes: list[ParallelAxis]) -> pd.DataFrame:
    """The tick labels of every axis: ``axis`` (title), ``position`` and ``label``. An ordinal axis labels each
    value; a numeric one its distinct values when there are at most :data:`MAX_TICKS`, else five evenly spaced
    positions, each with the value it stands for (a power of ten between on a log axis)."""
    rows = []
    for axis in axes:
        if axis.categories is not None:
            rows += [(axis.title, p, c) for c, p in _ordinal_places(axis.categories).items()]
            continue
        values = sorted(set(runs[axis.column].astype(float)))
        t = [math.log10(v) if axis.log else v for v in values]
        low, high = min(t), max(t)
        if high == low:
            rows.append((axis.title, 0.5, number(values[0], 3)))
            continue
        if len(values) <= MAX_TICKS:
            rows += [(axis.title, (x - low) / (high - low), number(v, 3)) for x, v in zip(t, values)]
        else:
            steps = [low + k * (high - low) / 4 for k in range(5)]
            rows += [(axis.title, k / 4, number(10 ** x if axis.log else x, 3)) for k, x in enumerate(steps)]
    return pd.DataFrame(rows, columns=["axis", "position", "label"])


def parallel_coordinates(runs: pd.DataFrame, axes: list[ParallelAxis], *, colour_title: str) -> alt.LayerChart:
    """The chart: a grey rule and tick labels per axis, one line per run (coloured by :data:`UTILITY`, titled
    ``colour_title``; hover names the run, its point and the axis' value) and the :data:`BRUSH` selection."""
    place = positions(runs, axes)
    long = place.reset_index().melt(id_vars="run", var_name="axis", value_name="position")
    info = runs.set_index("run")
    long["point"] = long["run"].map(info["point"])
    long["colour"] = long["run"].map(info[UTILITY])
    values = {a.title: info[a.column] for a in axes}
    long["value"] = [_text(values[a][r]) for a, r in zip(long["axis"], long["run"])]
    order = [a.title for a in axes]
    x = alt.X("axis:N", sort=order, scale=alt.Scale(type="point", padding=0.3), title=None,
              axis=alt.Axis(labelAngle=0, labelLimit=150, labelOverlap=False, domain=False, ticks=False,
                            grid=False, labelPadding=8, labelFontSize=12,
                            # a title's parenthesis on a line of its own
                            labelExpr="split(replace(datum.label, regexp(' \\\\(', 'g'), '\\n('), '\\n')"))
    # a hidden axis, not none: Streamlit's front end failed to draw a brushable layer whose y axis was None
    y = alt.Y("position:Q", scale=alt.Scale(domain=[0, 1]), title=None,
              axis=alt.Axis(labels=False, ticks=False, domain=False, grid=False))
    frame = alt.Chart(pd.DataFrame({"axis": order})).mark_rule(color=TICK_COLOUR).encode(
        x=x, y=alt.datum(0), y2=alt.datum(1))
    lines = alt.Chart(long).mark_line(strokeWidth=2, opacity=0.85).encode(
        x=x, y=y, detail="run:N",
        color=alt.Color("colour:Q", scale=COLOURS, title=colour_title,
                        legend=alt.Legend(orient="bottom", gradientLength=240)),
        tooltip=[alt.Tooltip("run:N"), alt.Tooltip("point:Q"), alt.Tooltip("axis:N"), alt.Tooltip("value:N")],
    ).add_params(alt.selection_interval(name=BRUSH, encodings=["x", "y"]))
    labels = alt.Chart(ticks(runs, axes)).mark_text(align="right", dx=-5, fontSize=11, color=TICK_COLOUR).encode(
        x=x, y=y, text="label:N")
    return alt.layer(frame, lines, labels).properties(height=HEIGHT)


def runs_in_box(place: pd.DataFrame, box: dict[str, Any] | None) -> list[str]:
    """The runs (``place``: :func:`positions`) whose line passes through ``box``, the :data:`BRUSH` selection
    ``{"axis": [titles], "position": [low, high]}``: low <= position <= high on every axis the box covers. An
    empty box (nothing selected) keeps every run."""
    if not box or not box.get("axis"):
        return list(place.index)
    low, high = sorted(box["position"])
    covered = place[[a for a in box["axis"] if a in place.columns]]
    inside = ((covered >= low) & (covered <= high)).all(axis=1)
    return list(place.index[inside])


def _ordinal_places(categories: tuple[str, ...]) -> dict[str, float]:
    """The k-th of n values at k / (n - 1); a single value at 0.5."""
    n = len(categories)
    return {c: k / (n - 1) if n > 1 else 0.5 for k, c in enumerate(categories)}


def _numeric(values) -> bool:
    """Whether every value is a number (not a bool): such a knob gets a numeric axis, any other an ordinal one."""
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _text(value: Any) -> str:
    return number(value) if isinstance(value, float) else str(value)
