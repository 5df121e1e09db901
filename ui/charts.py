"""Drawing plotly figures and tables in the dashboard; the figures themselves are built by :mod:`privengine.figures`
(Streamlit-free, so reports draw the same ones).

Every chart goes through :func:`show`, which finishes it as reports do (:func:`privengine.figures.common.finish`):
titles fitted, and, while a run's charts are drawn inside :func:`published_reference`, the published figure
of the preset the run was started from as a labelled reference line on the chart of its metric. So every mechanism
page gets the reference line without drawing it itself. It also draws the chart for the app's theme (Streamlit's
follows the system's light or dark setting; on a dark one the charts' near-black lines turn light) and with the
download format chosen in the sidebar (:func:`download_format_choice`: 2x PNG or SVG), and in presentation mode
with room-sized text, as tall as the screen allows (:mod:`ui.presentation`).
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Iterator

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from privengine.figures import published_of
from privengine.figures.common import chart_config, curves, finish, for_dark_background
from privengine.presets import Published
from privengine.store import RunRecord

from . import presentation

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


DOWNLOAD_FORMAT_KEY = "charts.download_format"
DOWNLOAD_FORMATS = {"png": "PNG (2x)", "svg": "SVG"}


def show(fig: go.Figure, *, key: str, selectable: bool = False, **kwargs) -> object:
    """Draw a figure with a stable key, so live refreshes update it in place; ``selectable`` keeps the toolbar's
    box and lasso selection, ``kwargs`` go to ``st.plotly_chart`` (its selection event is returned). ``fig`` is
    finished and coloured for the theme in place: every caller builds the figure for this one call (on each
    rerun), so no copy of its data is made."""
    fig = finish(fig, _published.get())
    if _dark_theme():
        fig = for_dark_background(fig)
    config = chart_config(fig, st.session_state.get(DOWNLOAD_FORMAT_KEY, "png"), selectable=selectable)
    if not presentation.presenting():
        return st.plotly_chart(fig, key=key, config=config, **kwargs)
    with presentation.chart_box(key, int(fig.layout.height or 450)):  # as tall as the room's screen allows
        return st.plotly_chart(presentation.for_room(fig), key=key, config=config, height="stretch", **kwargs)


def _dark_theme() -> bool:
    """Whether the browser shows the app's dark theme (unknown before its first report: light)."""
    theme = getattr(st.context, "theme", None)
    return getattr(theme, "type", None) == "dark"


def download_format_choice() -> None:
    """The sidebar's choice of the format the charts' download button saves (every chart of every page)."""
    st.radio("Chart download", list(DOWNLOAD_FORMATS), format_func=DOWNLOAD_FORMATS.get, key=DOWNLOAD_FORMAT_KEY,
             horizontal=True, help="What the camera button at the top right of a chart saves: a PNG at twice "
                                   "the pixels of a 1000 px wide slide, or an SVG (vector, for print).")


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
