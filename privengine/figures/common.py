"""Figure building blocks shared by every mechanism: metric curves of one run, tables, and the finishing every
chart gets before it is drawn (:func:`finish`: titles wrapped, log axes ticked in full, the published figure of
the run's preset drawn on the chart of its metric). Charts of several runs side by side are in :mod:`.compare`."""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass
from typing import Iterable

import pandas as pd
import plotly.graph_objects as go

from privengine.presets import Published

# the legend sits at the bottom of the figure (container coordinates), below the x-axis title: placed relative to
# the plot area it overlapped the title whenever the plot was short
LEGEND = dict(orientation="h", yref="container", y=0, yanchor="bottom")
LAYOUT = dict(margin=dict(l=10, r=10, t=40, b=10), height=300, legend=LEGEND)
TITLE_WIDTH = 40  # characters per title line: a half-width chart on a 1280-1400 px screen fits about this many
# characters per line of a title's smaller detail part: at 1280 px a half-width chart cut "(δ = 1e-05, Rényi DP
# accountant of Papernot et al" (48 characters) at its edge; 60 (1.5 x TITLE_WIDTH) was too many
DETAIL_WIDTH = 45
REFERENCE_COLOUR = "#7f7f7f"


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


def is_epsilon(name: str) -> bool:
    """Whether metric ``name`` is a privacy loss ε (its charts must name the accountant)."""
    return name.startswith("eps") or "epsilon" in name


def measures(fig: go.Figure, metric: str) -> go.Figure:
    """Mark ``fig`` as the chart of ``metric``, named as presets name their published figure
    (:attr:`privengine.presets.Published.metric`, e.g. ``"test accuracy"``): :func:`with_published` draws the
    figure there."""
    meta = dict(fig.layout.meta) if isinstance(fig.layout.meta, dict) else {}
    fig.update_layout(meta={**meta, "measures": metric})
    return fig


def measured(fig: go.Figure) -> str | None:
    """The metric ``fig`` was marked with by :func:`measures`, or None."""
    meta = fig.layout.meta
    return meta.get("measures") if isinstance(meta, dict) else None


def with_published(fig: go.Figure, published: Published | None) -> go.Figure:
    """Draw ``published`` as a labelled horizontal reference line if ``fig`` is the chart of its metric."""
    if published is None or measured(fig) != published.metric or not fig.data:
        return fig
    if any(getattr(shape, "name", None) == "published" for shape in fig.layout.shapes):
        return fig  # already drawn
    values = [float(v) for trace in fig.data for v in (trace.y if trace.y is not None else ())
              if v is not None and math.isfinite(float(v))]
    # The label goes on the side of the line away from most of the data, with room made for it on a linear
    # axis: a run that ends just under the published value would otherwise draw its curve through the label.
    # Below the line it goes right, where a training curve that ends above the line has left it.
    data_below = bool(values) and sorted(values)[len(values) // 2] <= published.value
    fig.add_hline(y=published.value, name="published", line=dict(color=REFERENCE_COLOUR, dash="longdash", width=2),
                  annotation=dict(text=published.label().replace(" (", "<br>(", 1),
                                  hovertext=f"{published.metric}: {published.source}",
                                  font=dict(size=12, color="#404040"), bgcolor="rgba(255,255,255,0.8)"),
                  annotation_position="top left" if data_below else "bottom right")
    if values and fig.layout.yaxis.type != "log":
        low, high = min(values + [published.value]), max(values + [published.value])
        room = 0.3 * ((high - low) or abs(published.value) or 1.0)  # two lines of label text
        pad = 0.25 * room  # on the data's far side: markers at the extreme stay whole
        fig.update_yaxes(range=[low - pad, high + room] if data_below else [low - room, high + pad])
    return fig


def wrap_title(fig: go.Figure, width: int = TITLE_WIDTH) -> go.Figure:
    """Wrap a title longer than ``width`` characters and raise the top margin to fit (plotly never wraps a title;
    it cuts it off at the chart's edge): before a parenthesis or after a colon that falls in the first ``width``
    characters, the rest smaller (it is detail); else in two lines of about equal length."""
    title = fig.layout.title.text
    if not title or "<br>" in title or len(title) <= width:
        return fig
    first, rest, detail = _split_title(title, width)
    if detail:
        more = [f"<span style='font-size:12px'>{line}</span>"
                for line in textwrap.wrap(rest, round(width * DETAIL_WIDTH / TITLE_WIDTH))]
    else:
        more = textwrap.wrap(rest, width)
    top = fig.layout.margin.t if fig.layout.margin.t is not None else 40
    fig.update_layout(title=dict(text="<br>".join([first, *more])),
                      margin=dict(t=top + (23 if detail else 26) * len(more)))
    return fig


def _split_title(title: str, width: int) -> tuple[str, str, bool]:
    """The title's first line, the rest, and whether the rest is detail (cut at the last " (", ": " or " — "
    within ``width``), else a cut at the space nearest the middle."""
    cuts = [i for sep in (" (", ": ", " — ") for i in _find_all(title, sep) if 10 <= i <= width]
    if cuts:
        cut = max(cuts)
        head = title[:cut + 1] if title[cut] == ":" else title[:cut]
        return head.strip(), title[cut + 1:].strip(), True
    spaces = [i for i, c in enumerate(title) if c == " " and i <= width]
    if not spaces:
        return title, "", False
    cut = min(spaces, key=lambda i: abs(i - len(title) / 2))  # two lines of about equal length
    return title[:cut], title[cut + 1:], False


def _find_all(text: str, sep: str) -> list[int]:
    out, i = [], text.find(sep)
    while i >= 0:
        out.append(i)
        i = text.find(sep, i + 1)
    return out


def readable_log_axes(fig: go.Figure) -> go.Figure:
    """Tick every log axis at values read in full and say "log scale" in its title.

    Left alone, plotly ticks a log axis spanning one to three decades at every digit and labels the ticks
    between decades with their digit only, in small type ("2, 0.1, 5, 2, 0.01"). Here such an axis is ticked at
    1, 2 and 5 times each power of ten, a longer one at the powers of ten only, and every label is the full
    number. Axes given ticks of their own keep them.
    """
    layout = fig.layout.to_plotly_json()
    for name in [k for k in layout if re.fullmatch(r"[xy]axis\d*", k)]:
        axis = fig.layout[name]
        if axis.type != "log" or axis.tickvals is not None or axis.dtick is not None:
            continue
        axis.tickformat = axis.tickformat or "~g"
        span = _positive_span(fig, name)
        if span is not None:
            ticks = log_ticks(*span)
            if ticks is None:
                axis.dtick = 1
            elif len(ticks) >= 3:
                axis.tickvals = ticks
        title = axis.title.text or ""
        if "log" not in title:
            axis.title.text = f"{title} (log scale)" if title else "log scale"
    return fig


MANTISSAS = ((1, 2, 5), (1, 2, 3, 5), tuple(range(1, 10)))  # tick sets, sparsest first
LOG_PAD = 1.06  # a log axis's autorange reaches about this factor beyond the data: ticks there are shown


def log_ticks(low: float, high: float) -> list[float] | None:
    """Ticks for a log axis over ``[low, high]`` (both > 0): the sparsest of 1-2-5, 1-2-3-5 or every digit per
    decade that puts at least three ticks on it; None when it spans more than three decades (ticks at the powers
    of ten then), and fewer than three ticks when none does (the axis keeps plotly's own).

    >>> log_ticks(0.008, 0.25), log_ticks(0.24, 1.98), log_ticks(0.3, 0.45)
    ([0.01, 0.02, 0.05, 0.1, 0.2], [0.5, 1.0, 2.0], [0.3, 0.4])
    >>> log_ticks(1e-4, 10) is None
    True
    """
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    if last - first > 3:
        return None
    ticks: list[float] = []
    for mantissas in MANTISSAS:
        ticks = [t for e in range(first, last + 1) for m in mantissas
                 if low / LOG_PAD <= (t := float(f"{m}e{e}")) <= high * LOG_PAD]
        if len(ticks) >= 3:
            break
    return ticks


def _positive_span(fig: go.Figure, axis_name: str) -> tuple[float, float] | None:
    """The smallest and largest positive finite value drawn against layout axis ``axis_name`` (e.g. ``yaxis2``)."""
    letter, ref = axis_name[0], axis_name[0] + axis_name[5:]  # "yaxis2" -> "y", "y2"
    values = []
    for trace in fig.data:
        if (getattr(trace, f"{letter}axis", None) or letter) == ref and getattr(trace, letter, None) is not None:
            values += [float(v) for v in trace[letter] if _is_number(v) and 0 < float(v) < math.inf]
    return (min(values), max(values)) if values else None


def _is_number(value) -> bool:
    """A plain or numpy number (not a bool, None or text)."""
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) or hasattr(value, "dtype")


def finish(fig: go.Figure, published: Published | None = None) -> go.Figure:
    """What every chart gets before it is drawn, on a page or in a report: the title wrapped to fit, log axes
    labelled in full, and the published figure of the run's preset on the chart of its metric."""
    return with_published(readable_log_axes(wrap_title(fig)), published)


def _mode(n_points: int) -> str:
    """Markers where points are few enough to see (a single point has no line)."""
    return "lines+markers" if n_points < 40 else "lines"
