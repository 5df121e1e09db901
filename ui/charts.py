"""Drawing plotly figures and tables in the dashboard; the figures themselves are built by :mod:`privengine.figures`
(Streamlit-free, so reports draw the same ones).

Every chart goes through :func:`show`, which finishes it as reports do (:func:`privengine.figures.common.finish`):
titles wrapped to fit, and, while a run's charts are drawn inside :func:`published_reference`, the published figure
of the preset the run was started from as a labelled reference line on the chart of its metric. So every mechanism
page gets the reference line without drawing it itself.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from privengine.figures import published_of
from privengine.figures.common import curves, finish
from privengine.presets import Published
from privengine.store import RunRecord

MISSING = "—"  # how a missing value reads in every table

_published: contextvars.ContextVar[Published | None] = contextvars.ContextVar("published", default=None)


@contextlib.contextmanager
def published_reference(run: RunRecord) -> Iterator[Published | None]:
    """While open, :func:`show` draws the published figure of ``run``'s preset (if any) on the chart of its metric."""
    published = published_of(run)
    token = _published.set(published)
    try:
        yield published
    finally:
        _published.reset(token)


def show(fig: go.Figure, *, key: str) -> None:
    """Draw a figure with a stable key, so live refreshes update it in place."""
    st.plotly_chart(finish(fig, _published.get()), key=key, config={"displaylogo": False})


def table(frame: pd.DataFrame | dict, **kwargs) -> object:
    """``st.dataframe`` as every page shows tables: full width, no index, a dash for missing values."""
    kwargs.setdefault("hide_index", True)
    kwargs.setdefault("width", "stretch")
    return st.dataframe(frame, placeholder=MISSING, **kwargs)


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
