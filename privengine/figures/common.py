"""Figure building blocks shared by every mechanism: metric curves of one run, overlays across runs, tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import pandas as pd
import plotly.graph_objects as go

LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=10), height=300, legend=dict(orientation="h", y=-0.25))


@dataclass(frozen=True)
class Table:
    """A result table of a run or sweep: a title and its rows."""

    title: str
    frame: pd.DataFrame


def curves(metrics: pd.DataFrame, names: Iterable[str], *, title: str, x_title: str = "step",
           y_title: str = "", labels: dict[str, str] | None = None) -> go.Figure:
    """One line per metric name, from a long (step, name, value) table."""
    fig = go.Figure()
    for name in names:
        part = metrics[metrics["name"] == name]
        if not part.empty:
            fig.add_trace(go.Scatter(x=part["step"], y=part["value"], mode=_mode(len(part)),
                                     name=(labels or {}).get(name, name)))
    fig.update_layout(title=title, xaxis_title=x_title, yaxis_title=y_title, **LAYOUT)
    return waiting_if_empty(fig)


def metric_curves(metrics: pd.DataFrame) -> list[go.Figure]:
    """One chart per reported metric, by name: the view of a mechanism that declares no charts of its own."""
    return [curves(metrics, [name], title=name) for name in sorted(metrics["name"].unique())]


def waiting_if_empty(fig: go.Figure, text: str = "no data yet") -> go.Figure:
    """Replace the empty axes of a figure without traces by a short note."""
    if not fig.data:
        fig.update_xaxes(visible=False)
        fig.update_yaxes(visible=False)
        fig.add_annotation(text=text, showarrow=False, font=dict(size=14, color="gray"), xref="paper",
                           yref="paper", x=0.5, y=0.5)
    return fig


def overlay(per_run: dict[str, pd.DataFrame], name: str, *, title: str | None = None) -> go.Figure:
    """The metric ``name`` of several runs on one chart; ``per_run`` maps a legend label to its long table."""
    fig = go.Figure()
    for label, metrics in per_run.items():
        part = metrics[metrics["name"] == name]
        if not part.empty:
            fig.add_trace(go.Scatter(x=part["step"], y=part["value"], mode=_mode(len(part)), name=label))
    fig.update_layout(title=title or name, xaxis_title="step", **LAYOUT)
    return waiting_if_empty(fig)


def overlays(per_run: dict[str, pd.DataFrame]) -> list[go.Figure]:
    """One overlay per metric any of the runs reported, by name."""
    names = sorted({n for frame in per_run.values() for n in frame["name"].unique()})
    return [overlay(per_run, name) for name in names]


def _mode(n_points: int) -> str:
    """Markers where points are few enough to see (a single point has no line)."""
    return "lines+markers" if n_points < 40 else "lines"
