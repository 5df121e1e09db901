"""Figure building blocks shared by every mechanism: metric curves of one run, tables, and the finishing every
chart gets before it is drawn (:func:`finish`: a one-line title over a smaller detail line, clear of the ticks and of
plotly's toolbar; log axes ticked in full; the published figure of the run's preset drawn on the chart of its metric),
how charts are exported (:func:`chart_config`: 2x PNG or SVG at a slide's width) and drawn on a dark background
(:func:`for_dark_background`), and a run's line on a chart of several runs (:func:`run_line`; the charts
themselves are in :mod:`.compare`)."""

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
# Titles are not wrapped by plotly (it cuts them at the chart's edge), and a title broken into fixed lines stays
# broken in a wide or fullscreen chart: a title is one head line short enough for the narrowest chart, a half-width
# column beside the run form at 1280 px (about 270 px, 34 characters of 16 px type), and its detail (accountant, δ,
# what is publishable) a smaller subtitle, wrapped at DETAIL_WIDTH characters of 12 px type.
TITLE_WIDTH = 34
DETAIL_WIDTH = 45
# plotly's toolbar (shown while the pointer is over a chart, at its top right) gets this strip above the title: it
# covered short titles; the title pushes the plot area down (automargin) instead of overlapping its top tick
TOOLBAR_STRIP = 26
REFERENCE_COLOUR = "#7f7f7f"  # a published or reference line: mid grey reads on a light and a dark background
INK = "#303030"  # near-black lines and text (bounds, references, labels) on a light background
LABEL_BACKGROUND = "rgba(255,255,255,0.8)"  # behind a label drawn over the data
# what those become on a dark background (a projector's dark theme): every other colour reads on both
DARK_COLOURS = {INK: "#e0e0e0", "black": "#e0e0e0", LABEL_BACKGROUND: "rgba(14,17,23,0.8)"}
EXPORT_WIDTH = 1000  # px of a downloaded chart (a slide's width; PNG at twice that): the layout's height fits it
IMAGE_FORMATS = ("png", "svg")
# plotly's toolbar keeps zoom, pan, reset and download: fewer buttons cover less of a narrow chart
TOOLBAR_REMOVED = ("zoomIn2d", "zoomOut2d", "autoScale2d", "select2d", "lasso2d")
MAX_MARKERS = 30  # markers drawn on a run's line of many points on a chart of several runs (plotly spaces them out)


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
    # the value on the first line, the attribution (with what the source says of its ε) wrapped under it
    head, _, attribution = published.label().partition(" (")
    lines = [head] + textwrap.wrap(f"({attribution}", DETAIL_WIDTH, break_on_hyphens=False)
    fig.add_hline(y=published.value, name="published", line=dict(color=REFERENCE_COLOUR, dash="longdash", width=2),
                  annotation=dict(text="<br>".join(lines),
                                  hovertext=f"{published.metric}: {published.source}",
                                  font=dict(size=12, color=INK), bgcolor=LABEL_BACKGROUND),
                  annotation_position="top left" if data_below else "bottom right")
    if values and fig.layout.yaxis.type != "log":
        low, high = min(values + [published.value]), max(values + [published.value])
        room = 0.15 * len(lines) * ((high - low) or abs(published.value) or 1.0)  # the label's lines of text
        pad = 0.25 * room  # on the data's far side: markers at the extreme stay whole
        fig.update_yaxes(range=[low - pad, high + room] if data_below else [low - room, high + pad])
    return fig


def wrap_title(fig: go.Figure, width: int = TITLE_WIDTH, detail_width: int = DETAIL_WIDTH) -> go.Figure:
    """Give ``fig``, if its title is longer than ``width`` characters, a title read at any chart width: the head
    (up to its first " (", ": " or " — ") on one line, wrapped at ``width`` only if longer (titles here are written
    to fit); the detail (the rest, its enclosing parentheses dropped) as a 12 px subtitle wrapped at
    ``detail_width`` characters (:data:`DETAIL_WIDTH` fits a half-width column on a page; a report's charts span
    its page); the figure taller by the lines added. Every title sits under the toolbar's strip and pushes the plot
    down as far as it needs (plotly's title automargin), so neither overlaps a tick. Idempotent: a title already
    split (a subtitle set) keeps its head and has its detail rewrapped at ``detail_width``, the height changed by
    the lines gained or saved, so finishing twice at one width changes nothing."""
    title, detail = fig.layout.title.text, fig.layout.title.subtitle.text
    if title and detail:
        before = detail.split("<br>")
        after = textwrap.wrap(" ".join(before), detail_width)
        if after != before:
            fig.update_layout(title_subtitle_text="<br>".join(after),
                              height=(fig.layout.height or 450) + 16 * (len(after) - len(before)))
    elif title and len(title) > width and "<br>" not in title:
        head, detail = _split_title(title)
        heads = textwrap.wrap(head, width) if len(head) > width else [head]
        lines = textwrap.wrap(detail, detail_width)
        fig.update_layout(title=dict(text="<br>".join(heads)))
        if lines:
            fig.update_layout(title_subtitle=dict(text="<br>".join(lines), font=dict(size=12)))
        # the plot area keeps its height: the figure grows by the lines the title gained
        fig.update_layout(height=(fig.layout.height or 450) + 22 * (len(heads) - 1) + 16 * len(lines))
    if title:
        fig.update_layout(title=dict(yref="container", y=1, yanchor="top", pad=dict(t=TOOLBAR_STRIP),
                                     automargin=True))
    return fig


def _split_title(title: str) -> tuple[str, str]:
    """The title's head and its detail, cut at its first " (", ": " or " — " after 10 characters (a parenthesis
    that closes the title is dropped from the detail); no detail when there is no such cut."""
    cuts = [i for sep in (" (", ": ", " — ") for i in _find_all(title, sep) if i >= 10]
    if not cuts:
        return title, ""
    cut = min(cuts)
    head = title[:cut + 1] if title[cut] == ":" else title[:cut]
    detail = title[cut + 1:].strip().removeprefix("— ")
    if detail.startswith("(") and detail.endswith(")") and detail.count("(") == 1:
        detail = detail[1:-1]
    return head.strip(), detail


def _find_all(text: str, sep: str) -> list[int]:
    out, i = [], text.find(sep)
    while i >= 0:
        out.append(i)
        i = text.find(sep, i + 1)
    return out


def readable_log_axes(fig: go.Figure) -> go.Figure:
    """Tick every log axis at values read in full, at least three of them, and say "log scale" in its title.

    Left alone, plotly ticks a log axis spanning one to three decades at every digit and labels the ticks
    between decades with their digit only, in small type ("2, 0.1, 5, 2, 0.01"), and an axis within one decade
    with one or two labels. Here such an axis gets :func:`log_ticks` with every label the full number; a longer
    one is ticked at powers of ten (every second or third decade over many), written 10 with a superscript
    exponent. Axes given ticks of their own keep them.
    """
    layout = fig.layout.to_plotly_json()
    for name in [k for k in layout if re.fullmatch(r"[xy]axis\d*", k)]:
        axis = fig.layout[name]
        if axis.type != "log" or axis.tickvals is not None or axis.dtick is not None:
            continue
        span = _positive_span(fig, name)
        ticks = log_ticks(*span) if span is not None else []
        if ticks is None:
            decades = math.log10(span[1] / span[0])
            axis.update(dtick=max(1, math.ceil(decades / MAX_DECADE_TICKS)), exponentformat="power")
        else:
            axis.tickformat = axis.tickformat or "~g"
            if ticks:
                axis.tickvals = ticks
        title = axis.title.text or ""
        if "log" not in title:
            axis.title.text = f"{title} (log scale)" if title else "log scale"
    return fig


MANTISSAS = ((1, 2, 5), (1, 2, 3, 5), tuple(range(1, 10)))  # tick sets, sparsest first
LOG_PAD = 1.06  # a log axis's autorange reaches about this factor beyond the data: ticks there are shown
MAX_DECADE_TICKS = 7  # an axis over more decades is ticked every second (third, ...) power of ten
STEPS = (1, 2, 2.5, 5)  # steps (times a power of ten) of the evenly spaced ticks of an axis within a decade


def log_ticks(low: float, high: float) -> list[float] | None:
    """Ticks for a log axis over ``[low, high]`` (both > 0), at least three (four under one and a half decades,
    where three 1-2-5 ticks left the ends of the axis bare, e.g. 0.3 to 3): the sparsest of 1-2-5, 1-2-3-5 or
    every digit per decade that puts that many on it, else (a range within a decade) evenly spaced ones at a
    round step inside it; None when it spans more than three decades (ticks at the powers of ten then).

    >>> log_ticks(0.008, 0.25), log_ticks(0.24, 1.98), log_ticks(0.3, 0.45)
    ([0.01, 0.02, 0.05, 0.1, 0.2], [0.3, 0.5, 1.0, 2.0], [0.3, 0.35, 0.4, 0.45])
    >>> log_ticks(1e-4, 10) is None
    True
    """
    first, last = math.floor(math.log10(low)), math.ceil(math.log10(high))
    if last - first > 3:
        return None
    needed = 3 if high >= 30 * low else 4
    for mantissas in MANTISSAS:
        ticks = [t for e in range(first, last + 1) for m in mantissas
                 if low / LOG_PAD <= (t := float(f"{m}e{e}")) <= high * LOG_PAD]
        if len(ticks) >= needed:
            return ticks
    return even_ticks(low, high)  # inside the data's own range: plotly pads a narrow range by less than LOG_PAD


def even_ticks(low: float, high: float) -> list[float]:
    """At least three evenly spaced ticks inside ``[low, high]`` at the largest round step (1, 2, 2.5 or 5 times
    a power of ten) that gives three, written without float noise (a single value for a point)."""
    if high <= low:
        return [low]
    power = 10.0 ** math.floor(math.log10(high - low))
    for step in sorted((m * power * scale for m in STEPS for scale in (1, 0.1, 0.01)), reverse=True):
        first, last = math.ceil(low / step - 1e-9), math.floor(high / step + 1e-9)  # 2.3 / 0.05 is 45.99...
        ticks = [float(f"{k * step:.12g}") for k in range(first, last + 1)]
        if len(ticks) >= 3:
            return ticks
    return [low, (low + high) / 2, high]


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


def finish(fig: go.Figure, published: Published | None = None, *, detail_width: int = DETAIL_WIDTH) -> go.Figure:
    """What every chart gets before it is drawn, on a page or in a report, in place: the title fitted
    (:func:`wrap_title`, its detail wrapped at ``detail_width`` characters), log axes labelled in full, every x and
    y axis pushing the margin its tick labels and title need (automargin: whatever template draws it, the
    :data:`LAYOUT` margins are a minimum, never a cut), and the published figure of the run's preset on the chart of
    its metric. Idempotent: a finished chart finished again (a report finishes every chart it is given) changes
    only where ``detail_width`` differs."""
    fig.update_xaxes(automargin=True).update_yaxes(automargin=True)
    return with_published(readable_log_axes(wrap_title(fig, detail_width=detail_width)), published)


def chart_config(fig: go.Figure, image_format: str = "png", *, selectable: bool = False) -> dict:
    """The plotly config a chart is drawn with, on a page and in a report: its toolbar's download button saves
    ``image_format`` ("png": twice the pixels, "svg": vector) at :data:`EXPORT_WIDTH` x the layout's height (left
    to plotly it saved the on-screen size, 480 x 300 px with the legend cut), named after the title; the toolbar
    keeps box and lasso selection only where ``selectable``."""
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"image_format must be one of {IMAGE_FORMATS}; got {image_format!r}")
    head = (fig.layout.title.text or "chart").split("<br>")[0]
    name = re.sub(r"[^\w]+", "-", re.sub(r"<[^>]+>", "", head)).strip("-").lower()[:60] or "chart"
    removed = [b for b in TOOLBAR_REMOVED if not (selectable and b in ("select2d", "lasso2d"))]
    return {"displaylogo": False, "modeBarButtonsToRemove": removed,
            "toImageButtonOptions": {"format": image_format, "filename": f"privengine-{name}",
                                     "width": EXPORT_WIDTH, "height": int(fig.layout.height or 450),
                                     "scale": 2 if image_format == "png" else 1}}


def for_dark_background(fig: go.Figure) -> go.Figure:
    """``fig``, edited in place and returned, with its near-black lines and labels (:data:`INK`, "black") light and
    its label backgrounds dark (:data:`DARK_COLOURS`); the background and fonts come from the dark theme's template.

    Every string equal to a key of :data:`DARK_COLOURS` is swapped wherever it sits in the layout (its template,
    shapes and annotations included) and in the traces' properties, as a swap over the whole of
    ``fig.to_plotly_json()`` would (numpy arrays, where plotly keeps most data, are not looked into, nor were they
    by that swap). In place, like :func:`finish`: the pages build each chart for the one call that draws it, and a
    copy would cost what this saves (plotly's Figure constructor deep-copies and re-validates every data array)."""
    # plotly has no public view of the properties set on an object that does not deep-copy them (to_plotly_json
    # copies every data array): _props is the dict plotly keeps them in, written here only where a colour swaps
    for node in (fig.layout._props, *(trace._props for trace in fig.data)):
        _swap_dark(node)
    return fig


def _swap_dark(node: dict | list) -> None:
    """Swap the :data:`DARK_COLOURS` strings in a property tree of dicts and lists, in place."""
    for key, value in (node.items() if isinstance(node, dict) else enumerate(node)):
        if isinstance(value, str):
            if value in DARK_COLOURS:
                node[key] = DARK_COLOURS[value]
        elif isinstance(value, (dict, list)):
            _swap_dark(value)


def run_line(run_id: str, label: str, style: dict, x, y, *, series: str | None = None, dash: str = "solid",
             width: float | None = None, markers: bool = True) -> go.Scatter:
    """A line of run ``run_id`` on a chart of several runs (:mod:`.compare`, a mechanism's ``overlays``): in the
    run's colour (``style``: :func:`~.compare.run_styles`), at its width unless ``width`` is given, with its markers
    (at most :data:`MAX_MARKERS`) where ``markers``; named by the run's ``label``, or, for one of the run's
    ``series``, by the series under the label (the legend groups a run's lines)."""
    trace = go.Scatter(x=x, y=y, legendgroup=run_id, legendgrouptitle_text=label if series else None,
                       name=series or label,
                       line=dict(color=style["color"], dash=dash, width=style["width"] if width is None else width))
    if markers:
        trace.update(mode="lines+markers",
                     marker=dict(symbol=style["symbol"], size=style["size"], maxdisplayed=MAX_MARKERS))
    return trace


def _mode(n_points: int) -> str:
    """Markers where points are few enough to see (a single point has no line)."""
    return "lines+markers" if n_points < 40 else "lines"
