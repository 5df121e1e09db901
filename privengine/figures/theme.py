"""The look of a chart drawn outside the dashboard (a report opened in any browser), light or dark: plotly
templates set on the figure itself, never left to plotly's process-wide default.

That default is whatever was imported last: Streamlit's import makes its own template the default, with placeholder
colours (``#000001``, ``#000002``, ...) that only Streamlit's front end turns into its palette and axes without
automargin. A report built by the dashboard's Report button therefore drew every series near-black (white under the
old dark-mode colour inversion), cut its y tick labels at the left (".8", "00") and put the axis titles on the ticks
(issue 40, item 4). Both templates here start from plotly's own ("plotly", "plotly_dark"), name their series colours
(:data:`COLORWAY`, plotly's qualitative palette) and let every axis push the margins its tick labels and title need.
"""

from __future__ import annotations

import plotly.colors
import plotly.graph_objects as go
import plotly.io as pio

COLORWAY = tuple(plotly.colors.qualitative.Plotly)  # ten hues that read on white and on near-black
DARK_PAPER = "#0e1117"  # a report's dark page (its style sheet's background)
DARK_PLOT = "#1a1d26"  # the plot area, a step lighter, so the axes' extent shows
LIGHT_NAME, DARK_NAME = "plotly", "plotly_dark"  # plotly's templates the two start from


def template(*, dark: bool) -> go.layout.Template:
    """A copy of plotly's light or dark template with :data:`COLORWAY` as its series colours and automargin on
    every x and y axis (a dark one on :data:`DARK_PAPER` / :data:`DARK_PLOT`)."""
    out = go.layout.Template(pio.templates[DARK_NAME if dark else LIGHT_NAME])
    out.layout.colorway = COLORWAY
    out.layout.xaxis.automargin = out.layout.yaxis.automargin = True
    if dark:
        out.layout.update(paper_bgcolor=DARK_PAPER, plot_bgcolor=DARK_PLOT)
    return out
