"""Several runs side by side, for the Runs page and comparison reports: each run named by its mechanism and the
settings that tell it apart, one chart per chart of the runs' pages with every run's lines on it (one colour per
run where each run has one line, else one per line: :func:`colour_each_series`), and the metrics a run reports once
(e.g. PATE's fraction of queries answered) as a table, not as lone dots.
"""

from __future__ import annotations

import pandas as pd
import plotly.colors
import plotly.graph_objects as go

from privengine import registry
from privengine.audit.membership_job import AUDIT_OF_MECHANISM
from privengine.claims import headline_of
from privengine.errors import PrivengineError
from privengine.store import RunRecord

from .common import LAYOUT, Table, is_epsilon, run_line
from .metric_names import MetricName, describe
from .text import accountant_name, knob_label, number, value_text

PALETTE = plotly.colors.qualitative.Plotly
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "star", "cross", "triangle-down")
WIDEST, NARROWEST = 6.0, 2.0  # line widths of the first run and of the last (the others in between)
MAX_SETTINGS = 2  # settings named in a run's label (legends stay short); the comparison table has them all


def mechanism_name(mechanism: str) -> str:
    """A mechanism's short name: its title before any colon (``PATE``; ``PATE audit`` for an audit of it, ``PATE
    membership attack`` for its membership attack), its key when it is not registered."""
    try:
        entry = registry.get(mechanism)
    except PrivengineError:
        return mechanism
    short = entry.title.split(":")[0]
    if mechanism in AUDIT_OF_MECHANISM.values():
        return f"{short} membership attack"
    return f"{short} audit" if entry.audits else short


def differing_fields(runs: list[RunRecord]) -> list[str]:
    """The config fields, in their declaration order, whose values differ among ``runs`` of one mechanism (fields
    their mechanism no longer declares are left out)."""
    if not runs:
        return []
    try:
        names = [s.name for s in registry.get(runs[0].mechanism).config_cls.specs()]
    except PrivengineError:
        return []
    return [k for k in names if len({repr(r.config.get(k)) for r in runs}) > 1]


def run_labels(runs: list[RunRecord]) -> dict[str, str]:
    """Run id -> ``"37397c477b · teachers = 100, threshold = 80 (+6 more)"`` (``"name (37397c477b) · ..."`` for a
    named run): the settings in which the run differs from the other runs of its mechanism among ``runs`` (at most
    :data:`MAX_SETTINGS`), after the mechanism's name when ``runs`` are of several mechanisms."""
    several = len({r.mechanism for r in runs}) > 1
    labels = {}
    for mechanism in dict.fromkeys(r.mechanism for r in runs):
        group = [r for r in runs if r.mechanism == mechanism]
        fields = differing_fields(group)
        for run in group:
            shown = [f"{knob_label(mechanism, k)} = {value_text(mechanism, k, run.config.get(k))}"
                     for k in fields[:MAX_SETTINGS]]
            more = f" (+{len(fields) - MAX_SETTINGS} more)" if len(fields) > MAX_SETTINGS else ""
            parts = [run.title, mechanism_name(mechanism)] if several else [run.title]
            if shown:
                parts.append(", ".join(shown) + more)
            labels[run.id] = " · ".join(parts)
    return labels


def run_styles(runs: list[RunRecord]) -> dict[str, dict]:
    """Run id -> how its lines look on every chart: its colour, a line width falling from the first run to the last
    and a marker symbol of its own, so that runs with equal curves stay visible: each later run is drawn narrower,
    inside the earlier ones, with smaller markers of another shape, instead of hiding them."""
    styles, last = {}, max(len(runs) - 1, 1)
    for i, run in enumerate(runs):
        width = WIDEST - (WIDEST - NARROWEST) * i / last
        styles[run.id] = {"color": PALETTE[i % len(PALETTE)], "width": width, "symbol": SYMBOLS[i % len(SYMBOLS)],
                          "size": 3 + 1.5 * width}
    return styles


Line = tuple[RunRecord, str, MetricName, pd.DataFrame]  # a run, the metric's key, its name, its points


def _charts(runs: list[RunRecord], metrics: dict[str, pd.DataFrame]) -> dict[str, list[Line]]:
    """Chart title -> the lines drawn on it, in run order; charts of several mechanisms start with its name."""
    several = len({r.mechanism for r in runs}) > 1
    charts: dict[str, list[Line]] = {}
    for run in runs:
        frame = metrics.get(run.id)
        if frame is None or frame.empty:
            continue
        for key, part in frame.groupby("name", sort=True):
            name = describe(run.mechanism, key)
            chart = f"{mechanism_name(run.mechanism)}: {name.chart}" if several else name.chart
            charts.setdefault(chart, []).append((run, key, name, part))
    return charts


def _once(lines: list[Line]) -> bool:
    """Whether every line of a chart has a single point: a value reported once, for the table."""
    return all(len(part) <= 1 for *_, part in lines)


def comparison_figures(runs: list[RunRecord], metrics: dict[str, pd.DataFrame]) -> list[go.Figure]:
    """One chart per chart title of the runs' pages, every run's lines on it (colour, width and marker: run, see
    :func:`run_styles`; dash: the line of the page's chart); ``metrics`` maps a run id to its long (step, name,
    value) table. Values reported once are left to :func:`single_values`."""
    labels, styles = run_labels(runs), run_styles(runs)
    figures = []
    for chart, lines in _charts(runs, metrics).items():
        if _once(lines):
            continue
        dashes = list(dict.fromkeys(name.series for _, _, name, _ in lines))
        fig = go.Figure()
        for run, _, name, part in lines:
            fig.add_trace(run_line(run.id, labels[run.id], styles[run.id], part["step"], part["value"],
                                   series=name.series, dash=DASHES[dashes.index(name.series) % len(DASHES)]))
        first, runs_drawn = lines[0][2], len({run.id for run, *_ in lines})
        legend_rows = len(lines) + (runs_drawn if any(name.series for _, _, name, _ in lines) else 0)
        fig.update_layout(title=chart + _accountants(lines), xaxis_title=first.x_title, yaxis_title=first.y_title,
                          **{**LAYOUT, "height": 300 + 22 * legend_rows})  # the legend lists every line below
        if first.log_y:
            fig.update_yaxes(type="log")
        figures.append(colour_each_series(fig))
    return figures


def colour_each_series(fig: go.Figure) -> go.Figure:
    """``fig`` (a chart of several runs' lines, each run's in its legend group: :func:`~.common.run_line`) in place,
    with every line in a colour of its own (:data:`PALETTE`, in the order drawn) when some run has several lines on
    it: told apart by their dash alone, a run's series could not be read from the back of a room (issue 40, item 7).
    Runs stay told apart by their width and markers. A chart with one line per run keeps each run's colour
    (:func:`run_styles`), the same on every chart."""
    groups = [trace.legendgroup for trace in fig.data]
    if len(set(groups)) < len(groups):
        for i, trace in enumerate(fig.data):
            trace.line.color = PALETTE[i % len(PALETTE)]
    return fig


def _accountants(lines) -> str:
    """`` (accountant)`` for a chart of ε, from the runs' headline claims (names joined when they differ)."""
    if not any(is_epsilon(key) for _, key, _, _ in lines):
        return ""
    names = dict.fromkeys(accountant_name(c.accountant) for run, *_ in lines
                          if (c := headline_of(run.summary)) is not None)
    return f" ({'; '.join(names)})" if names else ""


def single_values(runs: list[RunRecord], metrics: dict[str, pd.DataFrame]) -> Table | None:
    """The values the runs report once, as a table (rows: runs; columns: metrics), or None when there are none."""
    labels, rows = run_labels(runs), {}
    for chart, lines in _charts(runs, metrics).items():
        if not _once(lines):
            continue
        for run, _, name, part in lines:
            column = f"{chart} ({name.series})" if name.series else chart
            rows.setdefault(labels[run.id], {})[column] = number(float(part["value"].iloc[0]))
    if not rows:
        return None
    return Table("Values reported once", pd.DataFrame.from_dict(rows, orient="index").rename_axis("run").reset_index())
