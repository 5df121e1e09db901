"""Presentation mode (``?present=1`` on a mechanism page), for a room reading a projector (issue 40, item 7): the
sidebar starts collapsed, the page's type grows with the screen (16 px up to 1 600 px wide, then 1 vw, at most
20 px), every chart's text is set at 16-24 px (:func:`for_room`) and every chart is as tall as the screen allows
(:data:`CHART_HEIGHT` of the viewport's height, within bounds) instead of its own 300-460 px.

Streamlit gives a chart a pixel height (its figure's, or its container's for ``height="stretch"``): :func:`chart_box`
puts each chart in a container of its own, and :data:`STYLE` sizes that container's wrapper in viewport units.
"""

from __future__ import annotations

import contextlib
import re
from typing import Iterator

import plotly.graph_objects as go
import streamlit as st

QUERY_KEY = "present"
CHART_KEY = "present-chart"  # containers of charts: CSS class st-key-present-chart-...
CHART_HEIGHT = "clamp(300px, 58vh, 900px)"  # 626 px at 1080, 418 px at 720
# plotly font sizes (px) of a chart in a room: text read from the back rows, titles a step larger
TEXT, AXIS_TITLE, TITLE, SUBTITLE = 16, 18, 24, 16

# The page's type grows with the screen; less empty space above the title, and a smaller title, so a finished run's
# charts start within a 720 px screen under its state, claim and result tiles; each chart's wrapper as tall as
# CHART_HEIGHT (Streamlit sets the wrapper's height in its own style sheet: min and max too, each !important). The
# progress bar's text stays on one line (cut with an ellipsis): a long step ("calibrating sigma ...: probe 8 ... · 11
# s on this step, still working") wrapped at room sizes and pushed a 720 px screen's first chart half out of view.
STYLE = f"""<style>
html {{ font-size: clamp(16px, 1vw, 20px) !important; }}
[data-testid="stProgress"] p {{ white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }}
[data-testid="stMainBlockContainer"] {{ padding-top: 1.5rem; }}
[data-testid="stMainBlockContainer"] h1 {{ font-size: 2rem; padding-top: 0; }}
div:has(> [class*="st-key-{CHART_KEY}-"]) {{
  height: {CHART_HEIGHT} !important; min-height: {CHART_HEIGHT} !important; max-height: {CHART_HEIGHT} !important; }}
</style>"""


def presenting() -> bool:
    """Whether the page is in presentation mode (``?present=1``)."""
    return st.query_params.get(QUERY_KEY) == "1"


def for_room(fig: go.Figure) -> go.Figure:
    """``fig`` in place with its text at room sizes: ticks, legend and annotations at :data:`TEXT` px (larger
    annotations kept), axis titles at :data:`AXIS_TITLE`, the title at :data:`TITLE` and its detail line at
    :data:`SUBTITLE` (Streamlit's theme sets the axes' fonts itself, so each is set here, not only the layout's)."""
    fig.update_layout(font_size=TEXT, legend_font_size=TEXT, legend_grouptitlefont_size=TEXT,
                      title_font_size=TITLE, title_subtitle_font_size=SUBTITLE)
    fig.update_xaxes(tickfont_size=TEXT, title_font_size=AXIS_TITLE)
    fig.update_yaxes(tickfont_size=TEXT, title_font_size=AXIS_TITLE)
    for note in fig.layout.annotations:
        note.font.size = max(note.font.size or 0, TEXT)
    return fig


@contextlib.contextmanager
def chart_box(key: str, height: int) -> Iterator[None]:
    """A container for one chart drawn with ``height="stretch"``: ``height`` px where :data:`STYLE` is not on the
    page, :data:`CHART_HEIGHT` where it is."""
    with st.container(key=f"{CHART_KEY}-{re.sub(r'[^A-Za-z0-9_-]+', '-', key)}", height=height, border=False):
        yield
