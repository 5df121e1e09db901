"""Plotly figures shared by the pages: metric curves of one run and overlays across runs."""

from __future__ import annotations

from typing import Iterable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=10), height=300, legend=dict(orientation="h", y=-0.25))


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


def _mode(n_points: int) -> str:
    """Markers where points are few enough to see (a single point has no line)."""
    return "lines+markers" if n_points < 40 else "lines"


def show(fig: go.Figure, *, key: str) -> None:
    """Draw a figure with a stable key, so live refreshes update it in place."""
    st.plotly_chart(fig, key=key, config={"displaylogo": False})


def default_draw(snapshot) -> None:
    """Fallback live view: one chart per reported metric, two per row."""
    names = sorted(snapshot.metrics["name"].unique())
    if not names:
        st.caption("No metric reported yet.")
        return
    columns = st.columns(2)
    for i, name in enumerate(names):
        with columns[i % 2]:
            show(curves(snapshot.metrics, [name], title=name), key=f"{snapshot.run.id}.{name}")
