"""After a Launch, in a real browser: the run's live charts are on screen while it trains, whether the Launch was a
button (three viewports) or a link (normal and presentation mode, every mechanism with presets), and a small run of
every mechanism launches from its form and finishes without an error element. Uses the server and browser tab
fixtures of tests/conftest.py (skips with its reason when Chromium or Playwright is missing); split from
tests/test_browser.py so that pytest-xdist's two workers share the browser tests' time."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from privengine import registry
from tests.test_browser import (CHART_WITH_DATA, RUN_PANEL, SHOTS, _assert_title_clear_of_ticks_and_toolbar, _errors,
                                _settle, stop_the_run, sync_api)

pytestmark = pytest.mark.browser  # a real Chromium against a served app


ON_SCREEN_WHILE_TRAINING = """([panelSelector, dataSelector]) => {
  const seen = (el) => {  // the share of el's box inside the viewport
    const r = el.getBoundingClientRect();
    const w = Math.min(r.right, innerWidth) - Math.max(r.left, 0);
    const h = Math.min(r.bottom, innerHeight) - Math.max(r.top, 0);
    return r.width > 0 && r.height > 0 && w > 0 && h > 0 ? (w * h) / (r.width * r.height) : 0;
  };
  const panel = document.querySelector(panelSelector);
  if (!panel) return false;
  const stop = [...panel.querySelectorAll("button")].find((b) => b.innerText.includes("Stop run"));
  // a run can end before its first live point is drawn (a quick demo on a warm cache: 4 s); then its state line
  const finished = [...panel.querySelectorAll("*")]
    .find((el) => el.children.length === 0 && (el.textContent ?? "").trim().startsWith("finished"));
  const state = stop ?? finished;
  const charts = [...panel.querySelectorAll("[data-testid='stPlotlyChart']")]
    .filter((c) => c.querySelector(dataSelector));
  return state !== undefined && seen(state) === 1 && charts.some((c) => seen(c) >= 0.5);
}"""


def _assert_a_live_chart_on_screen_while_training(pg) -> None:
    """After a Launch: at one moment, a chart of the run's panel with data in it is at least half inside the
    viewport, and so is the panel's Stop button, whole (the panel draws Stop only while the run is queued or
    running, so the run still trains), or, for a run that ended before its first point was drawn, the panel's
    "finished" state line. Checked in one evaluation in the page, so a run ending between two
    checks cannot pass or fail it by chance."""
    pg.locator(RUN_PANEL).wait_for(timeout=60_000)
    try:
        pg.wait_for_function(ON_SCREEN_WHILE_TRAINING, arg=[RUN_PANEL, CHART_WITH_DATA], timeout=120_000,
                             polling=200)
    except sync_api.TimeoutError:
        pytest.fail("no chart with data was half on screen while the run trained, beside its Stop button "
                    f"(state now: {pg.locator(RUN_PANEL).inner_text()[:80]!r})")


@pytest.mark.parametrize("size", [(1024, 768), (1280, 720), (1920, 1080)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_after_pressing_launch_the_run_and_its_charts_are_on_screen(app_url, page, size):
    """The form is taller than the screen and Launch sits at its bottom, the run's panel at the top beside it: the
    page scrolls to the panel, so its state, Stop and live charts are on screen while the run trains."""
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(f"{app_url}/pate?preset=quick-demo")
    _settle(page)
    launch = page.get_by_role("button", name="Launch run")
    launch.evaluate("el => el.scrollIntoView({block: 'end'})")  # as a click scrolls it: just at the screen's edge
    launch.click()
    page.wait_for_url("**run=*", timeout=20_000)
    _assert_a_live_chart_on_screen_while_training(page)
    stop_the_run(page)  # a Launch pressed and trained to its end: test_launch_a_small_run_of_every_mechanism


@pytest.mark.parametrize("name", [m.name for m in registry.all_mechanisms() if m.presets])
def test_a_launch_link_shows_a_live_chart_on_screen_while_the_run_trains(app_url, page, name):
    """Normal mode (no ``present=1``): ``?preset=quick-demo&launch=1`` lands on the run's live charts at
    1280x720, not on the form's bottom, where the Launch button is."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/{name}?preset=quick-demo&launch=1")
    page.wait_for_url("**run=*", timeout=30_000)
    _assert_a_live_chart_on_screen_while_training(page)
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"launch-link-{name}.png"))
    stop_the_run(page)  # a link's quick demo trained to its end: the presentation-mode test below


@pytest.mark.parametrize("name", [m.name for m in registry.all_mechanisms() if m.presets])
def test_a_launch_link_in_presentation_mode_shows_a_live_chart_without_scrolling(app_url, page, name):
    """A talk is a list of links: ``?preset=quick-demo&launch=1&present=1`` starts the demo on arrival and, at
    1280x720, a chart with data is on screen without a scroll."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/{name}?preset=quick-demo&launch=1&present=1")
    page.wait_for_url("**run=*", timeout=30_000)
    assert "launch=1" not in page.url  # a reload shows the run instead of starting another
    drawn = page.locator("[data-testid='stPlotlyChart']").filter(has=page.locator(CHART_WITH_DATA)).first
    drawn.wait_for(timeout=120_000)
    sync_api.expect(drawn).to_be_in_viewport(ratio=0.5, timeout=10_000)
    # and once the run has ended, with its claim and result tiles above the charts (the tallest header)
    page.get_by_text("finished").first.wait_for(timeout=300_000)
    _settle(page)
    sync_api.expect(drawn).to_be_in_viewport(ratio=0.5, timeout=10_000)
    _assert_title_clear_of_ticks_and_toolbar(page, drawn.locator(".js-plotly-plot"))
    SHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SHOTS / f"present-{name}.png"))
    assert _errors(page) == []


@pytest.mark.parametrize("name", [m.name for m in registry.all_mechanisms()])
def test_launch_a_small_run_of_every_mechanism(app_url, page, name):
    smoke = json.dumps(dict(registry.get(name).smoke))
    page.goto(f"{app_url}/{name}?config={urllib.parse.quote(smoke)}")
    _settle(page)
    assert _errors(page) == []
    page.get_by_role("button", name="Launch run").click()
    page.wait_for_url("**run=*", timeout=20_000)
    page.get_by_text("finished").first.wait_for(timeout=300_000)
    _settle(page)
    assert _errors(page) == []
