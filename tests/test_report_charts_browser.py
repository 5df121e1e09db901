"""Report charts read in a real browser, light and dark (issue 40, item 4): run, comparison and sweep reports, built
as the dashboard's Report button builds them (in a process that imported Streamlit, whose template is then plotly's
default), opened offline at 1280x720 and measured chart by chart (:mod:`tests.chart_boxes`): every tick label inside
the figure, axis titles off the tick labels, the legend clear of the x ticks, no series near black or white.

Runs are written straight into the store (nothing is trained). Uses the Chromium fixture of tests/conftest.py
(skips with its reason when Chromium or Playwright is missing).
"""

from __future__ import annotations

import plotly.colors
import plotly.io as pio
import pytest

from privengine.explore import SweepSpec
from privengine.figures.theme import DARK_PAPER
from privengine.report import build
from privengine.store import RunStore
from tests.chart_boxes import chart_problems
from tests.conftest import run_sweep
from tests.test_browser import sync_api
from tests.test_figures_readability import _dpsgd, _pate, _run, _split_label

pytestmark = pytest.mark.browser

# each chart's paper, as the browser computes it: white, or the dark template's
BACKGROUND = {"light": "rgb(255, 255, 255)", "dark": "rgb({}, {}, {})".format(*plotly.colors.hex_to_rgb(DARK_PAPER))}
DRAWN = """() => { const charts = [...document.querySelectorAll(".chart")];
                   return charts.length > 0 && charts.every((c) => c.querySelector(".js-plotly-plot .main-svg")); }"""
ON_PAPER = """([background]) => [...document.querySelectorAll(".chart .js-plotly-plot")]
  .every((c) => getComputedStyle(c.querySelector(".main-svg")).backgroundColor === background)"""


def _dp_bayes(store) -> str:
    """A DP-Bayes run with the densities of two parameters (its reference posterior is the series once drawn black)."""
    density = {"x": [1.9, 2.0, 2.1], "reference": [1.0, 30.0, 1.0], "vi": [2.0, 25.0, 0.5],
               "private": [0.5, 10.0, 3.0], "y_max": 32.0, "private_log_sd_ratio": -0.4}
    return _run(store, "dp_bayes", {"delta": 1e-5}, [(s, "utility", 300.0 + 7 * s) for s in range(40)],
                {"densities": {"beta1": density, "intercept": density}})


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, str]:
    """Report name -> file URL: a run of each mechanism with a page, a comparison of two runs of each, a sweep.
    Built once for the module (both colour schemes read the same files), in a store of its own."""
    import streamlit.elements.plotly_chart  # noqa: F401  (registers Streamlit's template, as the dashboard does)

    home = tmp_path_factory.mktemp("report-charts")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PRIVENGINE_HOME", str(home / "home"))  # the sweep's jobs open the store it names
        patch.setattr(pio.templates, "default", "streamlit")
        store = RunStore()
        try:
            refs = {}
            for name, make in (("pate", _pate), ("split_label", _split_label), ("dpsgd", _dpsgd),
                               ("dp_bayes", _dp_bayes)):
                first, second = make(store), make(store)
                refs[f"run-{name}"], refs[f"comparison-{name}"] = first, f"{first},{second}"
            refs["sweep"] = run_sweep(store, SweepSpec("toy", base={"steps": 2}, axes={"rate": [0.1, 0.5]}),
                                      timeout=30, max_concurrent=1)
            return {name: build(store, ref).write(home / f"{name}.html").as_uri() for name, ref in refs.items()}
        finally:
            store.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_report_charts_keep_tick_labels_titles_and_legends_apart(chromium, reports, scheme):
    context = chromium.new_context(viewport={"width": 1280, "height": 720}, color_scheme=scheme, offline=True)
    pg = context.new_page()
    found = {}
    try:
        for name, url in reports.items():
            pg.goto(url)
            pg.wait_for_function(DRAWN, timeout=30_000)
            try:  # a dark page redraws each chart on the dark template right after plotly first draws it
                pg.wait_for_function(ON_PAPER, arg=[BACKGROUND[scheme]], timeout=5_000)
                paper = {}
            except sync_api.TimeoutError:
                paper = {"every chart": [f"not drawn on the {scheme} paper, {BACKGROUND[scheme]}"]}
            problems = paper | chart_problems(pg)
            if problems:
                found[name] = problems
    finally:
        context.close()
    assert found == {}
