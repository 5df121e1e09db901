"""Presentation mode read by a room (issue 40, item 7), in a real browser: at 1920x1080 the sidebar is collapsed,
every chart's text (tick labels, axis titles, legend, title) is at least 16 px, and the charts are as tall as the
screen allows, their height following the viewport's (1280x720 against 1920x1080).

Uses the server and browser tab fixtures of tests/conftest.py (skips with its reason when Chromium or Playwright
is missing); the run is written straight into the store (nothing is trained).
"""

from __future__ import annotations

import pytest

from privengine.store import RunStore
from tests.conftest import run_from_published_preset
from tests.test_browser import RUN_PANEL

pytestmark = pytest.mark.browser

CHARTS = f"{RUN_PANEL} [data-testid='stPlotlyChart']"
TEXT = ".xtick text, .ytick text, .g-xtitle text, .g-ytitle text, .legendtext, .g-gtitle text"
MEASURE = """([charts, text]) => [...document.querySelectorAll(charts)].map((chart) => [
  chart.getBoundingClientRect().height,
  Math.min(...[...chart.querySelectorAll(text)].map((t) => parseFloat(getComputedStyle(t).fontSize)))])"""
SIDEBAR_SHOWN = """() => { const r = document.querySelector("[data-testid='stSidebar']").getBoundingClientRect();
                           return Math.max(0, Math.min(r.right, innerWidth) - Math.max(r.left, 0)); }"""


def _measure(pg, url: str, width: int, height: int) -> tuple[list[list[float]], float]:
    """Per chart of the run panel at ``url``, opened in page ``pg`` sized ``width`` x ``height``: its height and its
    smallest text's font size (px); the sidebar's width on screen."""
    pg.goto("about:blank")  # a fresh load at the new size, as a new window would have it
    pg.set_viewport_size({"width": width, "height": height})
    pg.goto(url)
    pg.locator(f"{CHARTS} .main-svg").first.wait_for(timeout=60_000)
    pg.wait_for_function("([charts]) => [...document.querySelectorAll(charts)].every((c) => c.querySelector("
                         "'.xtick text'))", arg=[CHARTS], timeout=30_000)
    return pg.evaluate(MEASURE, [CHARTS, TEXT]), pg.evaluate(SIDEBAR_SHOWN)


def test_presentation_mode_sizes_text_and_charts_for_a_room(app_url, app_home, page):
    run_id = run_from_published_preset(RunStore(app_home / "runs.sqlite"))
    url = f"{app_url}/dpsgd?run={run_id}&present=1"
    room, sidebar = _measure(page, url, 1920, 1080)
    assert sidebar == 0, sidebar  # collapsed
    assert len(room) >= 2
    assert all(smallest >= 16 for _, smallest in room), room  # was 12 px
    assert all(h >= 0.55 * 1080 for h, _ in room), room  # was 300-460 px
    laptop, _ = _measure(page, url, 1280, 720)
    ratios = [big / small for (big, _), (small, _) in zip(room, laptop)]
    assert all(abs(r - 1080 / 720) < 0.05 for r in ratios), (room, laptop)  # the height follows the viewport's
    normal, sidebar = _measure(page, f"{app_url}/dpsgd?run={run_id}", 1920, 1080)
    assert sidebar > 200 and all(h < 0.5 * 1080 for h, _ in normal)  # normal mode keeps its own sizes
