"""Drawing plotly figures in the dashboard; the figures themselves are built by :mod:`privengine.figures`
(Streamlit-free, so reports draw the same ones)."""

from __future__ import annotations

import plotly.graph_objects as go
import streamlit as st

from privengine.figures.common import curves


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
