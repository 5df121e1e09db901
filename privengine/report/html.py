"""A self-contained HTML document: headings, definition lists, tables, code, privacy claims and plotly charts.

Every piece of text goes through :func:`html.escape`; the style sheet is inline and plotly's JavaScript is
inlined once, with the first chart, so the file opens offline and fetches nothing.

>>> doc = Document("Run <1>")
>>> doc.heading("Config")
>>> "<h2>Config</h2>" in doc.html() and "Run &lt;1&gt;" in doc.html()
True
"""

from __future__ import annotations

import html
import json
import math
from typing import Any, Iterable

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.json import to_json_plotly

from privengine.claims import PrivacyClaim
from privengine.figures.common import chart_config, finish, for_dark_background
from privengine.figures.theme import template
from privengine.figures.text import claim_label

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 2rem auto; max-width: 1100px;
       padding: 0 1rem; color: #222; line-height: 1.45; }
h1 { font-size: 1.7rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
h3 { margin-top: 1.6rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ddd; padding: .25rem .55rem; text-align: left; vertical-align: top; }
th { background: #f4f4f4; } .table { overflow-x: auto; } tr.changed td { font-weight: 600; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; } dt { color: #666; } dd { margin: 0; }
pre { background: #f6f8fa; border: 1px solid #ddd; padding: .7rem; overflow-x: auto; white-space: pre-wrap; }
.claim { border: 1px solid #ccc; border-radius: 6px; padding: .5rem .9rem; margin: .6rem 0; }
.claim.headline { border: 2px solid #2e7d32; background: #f3faf3; }
.claim .statement { font-size: 1.1rem; font-weight: 600; }
.headline-line { border-left: 4px solid #2e7d32; background: #f3faf3; padding: .4rem .8rem; font-weight: 600; } .mark { color: #2e7d32; font-weight: 600; }
.note { color: #555; font-size: .9rem; } .chart { margin: 1rem 0; border: 1px solid #eee; }
.chart .export { text-align: right; font-size: .8rem; margin: 0 .4rem .2rem; }
@media (prefers-color-scheme: dark) {  /* a projector's dark theme: charts redrawn in the dark template (DARK_SCRIPT) */
  body { background: #0e1117; color: #e6e6e6; } th { background: #262730; } pre { background: #262730; }
  .note, dt, footer { color: #aaa; } .headline-line, .claim.headline { background: #12261a; }
  .chart { border-color: #333; } a { color: #8ab4f8; } }
footer { margin-top: 3rem; color: #777; font-size: .8rem; }
"""


REPORT_DETAIL_WIDTH = 130  # characters of a title's 12 px detail line across a report's 1 060 px chart
# On a dark page (the reader's system asks for it) each chart is redrawn, right after plotly first draws it, with
# its dark layout (the dark template, defined once) and its traces recoloured for a dark background; the light
# drawing is never painted (plotly resolves newPlot's promise before the browser paints).
DARK_SCRIPT = """<script>
const PRIVENGINE_DARK_TEMPLATE = %s;
function privengineDarkChart(id, layout, traces) {
  if (!window.matchMedia("(prefers-color-scheme: dark)").matches) return;
  const chart = document.getElementById(id);
  return Plotly.react(chart, chart.data.map((trace, i) => traces[i] ?? trace),
                      {...layout, template: PRIVENGINE_DARK_TEMPLATE});
}
</script>"""


def escape(text: Any) -> str:
    """``text`` as HTML text (quotes too, so it is safe inside attributes)."""
    return html.escape(str(text), quote=True)


def cell(value: Any) -> str:
    """A table cell's text: numbers to 4 significant digits, a dash for a missing value."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


class Document:
    """An HTML page built section by section; :meth:`html` gives the whole file."""

    def __init__(self, title: str):
        self.title = title
        self._parts: list[str] = [f"<h1>{escape(title)}</h1>"]
        self._plotly_inlined = False
        self._charts = 0

    def heading(self, text: str, level: int = 2) -> None:
        self._parts.append(f"<h{level}>{escape(text)}</h{level}>")

    def paragraph(self, text: str, *, note: bool = False) -> None:
        self._parts.append(('<p class="note">' if note else "<p>") + f"{escape(text)}</p>")

    def facts(self, rows: Iterable[tuple[str, Any]]) -> None:
        """A definition list of (name, value); rows whose value is None are left out."""
        items = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows if v is not None)
        self._parts.append(f"<dl>{items}</dl>")

    def table(self, frame: pd.DataFrame, *, highlight: Iterable[int] = ()) -> None:
        """``frame`` as a table (its index is dropped; rows at positions ``highlight`` are set in bold)."""
        bold = set(highlight)
        head = "".join(f"<th>{escape(c)}</th>" for c in frame.columns)
        rows = "".join(
            ('<tr class="changed">' if i in bold else "<tr>") + "".join(f"<td>{escape(cell(v))}</td>" for v in row)
            + "</tr>" for i, row in enumerate(frame.itertuples(index=False)))
        self._parts.append(f'<div class="table"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>')

    def code(self, text: str) -> None:
        self._parts.append(f"<pre><code>{escape(text)}</code></pre>")

    def details(self, summary: str, text: str) -> None:
        """Text hidden under a summary line (opened by a click)."""
        self._parts.append(f"<details><summary>{escape(summary)}</summary><pre>{escape(text)}</pre></details>")

    def headline_line(self, claim: PrivacyClaim) -> None:
        """The headline claim in one framed line (its full statement, with what it rests on, follows later)."""
        self._parts.append(f'<p class="headline-line">Privacy: {escape(claim.statement())} '
                           '<span class="note">(the accountant and caveats it rests on: in full below)</span></p>')

    def claim(self, claim: PrivacyClaim) -> None:
        """A privacy claim with everything it rests on; the headline is marked and framed."""
        mark = ' <span class="mark">· headline</span>' if claim.headline else ""
        rows = [("label", claim_label(claim.label)), ("accountant", claim.accountant),
                ("optimal order", None if claim.order is None else f"{claim.order:g}"),
                ("neighbouring datasets", claim.neighbouring), ("δ", f"{claim.delta:g}"),
                ("holds for", claim.condition)]
        facts = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in rows if v is not None)
        caveats = "".join(f"<li>{escape(c)}</li>" for c in claim.caveats)
        self._parts.append(
            f'<div class="claim{" headline" if claim.headline else ""}">'
            f'<div class="statement">{escape(claim.statement())}{mark}</div><dl>{facts}</dl>'
            + (f"<div>Caveats:</div><ul>{caveats}</ul>" if caveats else "") + "</div>")

    def figure(self, fig: go.Figure) -> None:
        """A plotly chart, finished in place as the page's charts are (:func:`~privengine.figures.common.finish`:
        the title's head over its detail, the toolbar's strip, log axes ticked in full; the detail wrapped across
        the report's width), in the light template of :mod:`privengine.figures.theme` and, on a dark page, redrawn
        in the dark one with its near-black lines turned light (:func:`dark_redraw`), downloaded as a 2x PNG by its
        toolbar's camera button and as SVG by the link under it (:func:`~privengine.figures.common.chart_config`);
        the first one carries plotly's JavaScript, inlined."""
        self._charts += 1
        div_id = f"chart-{self._charts}"
        finish(fig, detail_width=REPORT_DETAIL_WIDTH)
        fig.update_layout(template=template(dark=False))
        div = pio.to_html(fig, include_plotlyjs=not self._plotly_inlined, full_html=False, div_id=div_id,
                          config={**chart_config(fig), "responsive": True}, post_script=dark_redraw(fig))
        self._plotly_inlined = True
        svg = escape(json.dumps(chart_config(fig, "svg")["toImageButtonOptions"]))
        link = (f'<div class="export"><a href="#" onclick="Plotly.downloadImage(\'{div_id}\', {svg}); '
                f'return false;">Download SVG</a></div>')
        self._parts.append(f'<div class="chart">{div}{link}</div>')

    def html(self, *, footer: str = "") -> str:
        """The whole document."""
        end = f"<footer>{escape(footer)}</footer>" if footer else ""
        dark = DARK_SCRIPT % to_json_plotly(template(dark=True)) if self._charts else ""
        return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
                f'<meta name="viewport" content="width=device-width, initial-scale=1">'
                f"<title>{escape(self.title)}</title><style>{STYLE}</style>{dark}</head>"
                f"<body>{''.join(self._parts)}{end}</body></html>\n")


def dark_redraw(fig: go.Figure) -> str:
    """The script (plotly's ``post_script``, ``{plot_id}`` standing for the chart's div) that redraws ``fig`` on a
    dark page: its layout without a template (the page's dark one is added) and, by index, every trace whose colours
    :func:`~privengine.figures.common.for_dark_background` changes (the others are kept as drawn)."""
    dark = for_dark_background(go.Figure(fig))
    dark.layout.template = None
    light_traces = [to_json_plotly(trace) for trace in fig.data]
    changed = {i: trace for i, trace in enumerate(to_json_plotly(t) for t in dark.data) if trace != light_traces[i]}
    traces = "{" + ", ".join(f'"{i}": {trace}' for i, trace in changed.items()) + "}"
    return f"return privengineDarkChart('{{plot_id}}', {to_json_plotly(dark.layout)}, {traces});"
