"""End to end in a real browser: `streamlit run app.py`, headless Chromium driven by Playwright.

Visits every page and asserts no error element; types into a form, launches and reloads; opens a sweep link and a
launched sweep's frontier; loads a preset; launches a quick demo from the Home gallery; opens a report offline. A
screenshot is saved under test-artifacts/ on failure. The helpers here (server, Chromium launch, settle, errors)
serve the other browser files too, and so do the fixtures of tests/conftest.py, one per test process: Chromium, one
tab that every test drives in turn (``page``) and the served app: tests/test_launch_browser.py (live charts on
screen after a Launch), tests/test_first_request_browser.py (the first request after a start) and the others, split
from this one so that pytest-xdist's workers share the browser tests' time. Skips (with the reason) when Chromium or
Playwright is missing."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.served_app import served_app
from privengine import registry
from privengine.store import RunStore
from tests.chart_boxes import chart_problems
from tests.conftest import BROWSER_VIEWPORT, ROOT, run_from_published_preset, subprocess_env

pytestmark = pytest.mark.browser  # a real Chromium against a served app

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
CHROMIUM = os.environ.get("PRIVENGINE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
if not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (install Debian's chromium or set PRIVENGINE_CHROMIUM)",
                allow_module_level=True)

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / "test-artifacts"
ERROR_SELECTORS = "[data-testid='stException'], [data-testid='stAlertContentError']"


@contextlib.contextmanager
def _server(home: Path):
    """The app served with PRIVENGINE_HOME=home (:func:`bench.served_app.served_app`); yields its URL."""
    with served_app(home, subprocess_env(PRIVENGINE_HOME=str(home))) as (url, _):
        yield url


@contextlib.contextmanager
def launched_chromium():
    """Headless Chromium (Playwright's sync API), closed on exit."""
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class ReusedTab:
    """One tab of ``browser`` that test after test borrows (the ``tab`` and ``page`` fixtures of tests/conftest.py):
    a navigation in an open tab keeps its renderer process and the scripts V8 compiled there, where each new tab
    started a renderer that parsed and compiled Streamlit's bundle and plotly's 4.7 MB chunk anew (nine pages of the
    app opened each in a new tab: 41 CPU-s of Chromium; one after the other in one tab: 15; this 2-core machine)."""

    def __init__(self, browser, viewport: dict[str, int]):
        self._browser, self._viewport, self._page = browser, viewport, None

    def borrow(self):
        """The tab at its first size, on about:blank (a new one if the last borrower left it closed)."""
        if self._page is None or self._page.is_closed():
            self._page = self._browser.new_page(viewport=self._viewport)
        self._page.set_viewport_size(self._viewport)
        return self._page

    def hand_back(self) -> None:
        """Clear the site's storage (Streamlit keeps the sidebar's state there) and go to about:blank, which ends the
        borrower's Streamlit session (a page left on a training run would go on redrawing it every second); a tab
        that cannot is closed, so that the next borrower gets a new one instead of a broken one."""
        try:
            if self._page.url.startswith("http"):
                self._page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
            self._page.goto("about:blank")
        except sync_api.Error:
            self._page.close()

    def close(self) -> None:
        if self._page is not None and not self._page.is_closed():
            self._page.close()


@contextlib.contextmanager
def served_and_warm(home: Path, tab: ReusedTab):
    """:func:`_server`, whose first browser session has opened at Home in ``tab``; yields its URL. (Deep links as the
    very first request are tested in tests/test_first_request_browser.py, each on a server of its own; the toy's page
    is generated (no file in pages/), and as the very first request Streamlit would still show its "Page not found"
    dialog over it: streamlit issue 9992.)"""
    with _server(home) as url:
        warm = tab.borrow()
        warm.goto(url)
        _settle(warm)
        tab.hand_back()
        yield url


def _settle(pg, timeout_s: float = 60) -> None:
    """Wait until the script has finished running and the page is quiet."""
    pg.wait_for_selector("[data-testid='stApp']", timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pg.get_attribute("[data-testid='stApp']", "data-test-script-state") in (None, "notRunning"):
            break
        time.sleep(0.2)
    time.sleep(0.5)


def _errors(pg) -> list[str]:
    return [el.inner_text()[:300] for el in pg.query_selector_all(ERROR_SELECTORS)]


MISSING_DATA = "is not in the data root"  # the form's error for a real dataset absent from the test app's data root


def _errors_but_missing_data(pg) -> list[str]:
    """The page's errors other than the form's missing-dataset one (the test apps have an empty data root, so a
    form seeded with a real-data preset or run says so and keeps Launch disabled)."""
    return [e for e in _errors(pg) if MISSING_DATA not in e]


PAGES = ["", "runs", "explore", "ledger"] + [m.name for m in registry.all_mechanisms()]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p or "home")
def test_every_page_renders_without_error(app_url, page, path):
    page.goto(f"{app_url}/{path}")
    _settle(page)
    assert page.locator("h1").count() >= 1
    assert _errors(page) == []


def test_the_reused_tab_comes_back_blank_with_its_storage_cleared_and_a_closed_one_is_replaced(app_url, tab):
    first = tab.borrow()
    first.goto(app_url)
    _settle(first)
    first.evaluate("() => localStorage.setItem('sidebarWidth', '400')")
    first.set_viewport_size({"width": 800, "height": 600})
    tab.hand_back()
    again = tab.borrow()
    assert again is first and again.url == "about:blank" and again.viewport_size == BROWSER_VIEWPORT
    again.goto(app_url)
    assert again.evaluate("() => localStorage.getItem('sidebarWidth')") is None
    again.close()  # as a test that broke it would leave it
    tab.hand_back()
    fresh = tab.borrow()
    assert fresh is not first and not fresh.is_closed() and fresh.url == "about:blank"
    tab.hand_back()


def test_toy_form_typing_launch_and_reload(app_url, page):
    page.goto(f"{app_url}/toy")
    _settle(page)
    page.get_by_role("spinbutton", name="Delay").fill("9")
    page.get_by_role("spinbutton", name="Delay").press("Enter")
    _settle(page)
    errors = _errors(page)
    assert len(errors) == 1 and "Delay must be in [0, 5]; got 9.0" in errors[0]
    assert page.get_by_role("button", name="Launch run").is_disabled()
    page.get_by_role("spinbutton", name="Steps").fill("20")
    page.get_by_role("spinbutton", name="Delay").fill("0.05")
    page.get_by_role("spinbutton", name="Delay").press("Enter")
    _settle(page)
    page.get_by_role("button", name="Launch run").click()
    page.wait_for_url("**run=*", timeout=20_000)
    page.get_by_text("finished").first.wait_for(timeout=30_000)
    page.get_by_text("ε = 1, δ = 1e-05", exact=False).first.wait_for(timeout=10_000)
    assert _errors(page) == []
    page.reload()  # a reload reattaches to the same run through the URL
    _settle(page)
    page.get_by_text("finished").first.wait_for(timeout=10_000)


RUN_PANEL = "[class*='st-key-run-panel-']"  # a mechanism page's live view of its run (ui.mechanism_page)
CHART_WITH_DATA = ".scatterlayer .js-line, .scatterlayer .point, .barlayer .point"


def stop_the_run(pg) -> None:
    """Press the run panel's Stop button and wait until the run has ended: its panel's state badge reads stopped
    (or finished, for a run that ended before the press took). A test whose check is done while the run trains
    stops it this way, so that the served app does not go on training a run nobody looks at (it took the cores
    from the tests after it), and the press itself is checked: the run ends and the page shows no error."""
    ended = pg.locator(RUN_PANEL).get_by_text(re.compile(r"^(stopped|finished)$"))
    stop = pg.locator(f"{RUN_PANEL} button:visible", has_text="Stop run")  # the panel redraws it every second
    deadline = time.monotonic() + 60
    while not ended.count():
        assert time.monotonic() < deadline, f"the run did not end after Stop: {pg.locator(RUN_PANEL).inner_text()}"
        if stop.count():
            with contextlib.suppress(sync_api.TimeoutError):  # the run may end (and Stop go) before the press
                stop.first.click(timeout=2_000)
        time.sleep(0.2)
    assert _errors(pg) == []


def test_a_sweep_link_opens_its_frontier_and_composed_claim(app_url, app_home, page):
    done = subprocess.run([sys.executable, "-m", "privengine", "sweep", "toy", "--vary", "rate=0.1,0.5", "--seeds", "2",
                           "--steps", "2", "--json"], cwd=ROOT, env=subprocess_env(PRIVENGINE_HOME=str(app_home)),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    sweep_id = json.loads(done.stdout)["sweep_id"]
    page.goto(f"{app_url}/explore?sweep={sweep_id}")
    _settle(page)
    page.get_by_text("Privacy-utility frontier").first.wait_for(timeout=20_000)
    page.get_by_text("ε = 12, δ = 4e-05", exact=False).first.wait_for(timeout=10_000)  # 2 x (1 + 5): composed
    page.locator("[data-testid='stPlotlyChart']").first.wait_for(timeout=10_000)
    assert _errors(page) == []


def test_after_launching_a_sweep_its_frontier_is_on_screen(app_url, page):
    """Launch sits at the bottom of a long form; the frontier builds at the top right: the page goes there."""
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/explore")
    _settle(page)
    launch = page.get_by_role("button", name="Launch sweep")
    launch.evaluate("el => el.scrollIntoView({block: 'end'})")
    launch.click()
    page.wait_for_url("**sweep=*", timeout=30_000)
    sync_api.expect(page.get_by_text("Privacy-utility frontier").first).to_be_in_viewport(timeout=20_000)
    stop = page.get_by_role("button", name="Stop sweep")
    if stop.count():
        stop.first.click()
    assert _errors(page) == []


def test_a_preset_loads_into_the_form_in_the_browser(app_url, page):
    """The browser keeps widget values across reruns, so loading a preset must create fresh widgets."""
    page.goto(f"{app_url}/dpsgd")
    _settle(page)
    page.get_by_label("Start from a preset").click()
    page.get_by_text("fmnist-scatter-eps3").first.click()
    _settle(page)
    page.get_by_role("button", name="Load", exact=True).click()
    page.wait_for_url("**preset=fmnist-scatter-eps3*", timeout=20_000)
    _settle(page)
    # the URL changes before the rerun that draws the fresh widgets may have started: wait for the values
    sync_api.expect(page.get_by_role("spinbutton", name="Batch size")).to_have_value("8192", timeout=30_000)
    sync_api.expect(page.get_by_role("spinbutton", name="Epochs")).to_have_value("40", timeout=10_000)
    # without Fashion-MNIST in the app's data root (the test app's own, empty one) the form says so and keeps
    # Launch disabled; no other error
    assert _errors_but_missing_data(page) == []
    if _errors(page):
        sync_api.expect(page.get_by_role("button", name="Launch run")).to_be_disabled()


def test_the_gallery_launches_a_quick_demo_and_opens_its_run(app_url, page):
    page.goto(app_url)
    _settle(page)
    page.locator(".st-key-gallery-launch-split_label button").click()  # scrolled down to its card
    page.wait_for_url("**/split_label?run=*", timeout=30_000)  # the mechanism's page, showing the new run
    sync_api.expect(page.locator("h1").first).to_be_in_viewport(timeout=10_000)  # at its top, not Home's scroll
    page.get_by_text("from dashboard (preset quick-demo)", exact=False).first.wait_for(timeout=20_000)
    stop_the_run(page)  # a quick demo trained to its end from a link: tests/test_launch_browser.py (presentation)



def test_a_report_opens_offline_with_its_charts(chromium, tmp_path):
    """``report ID`` writes one HTML file that renders its claims and charts with the network cut off."""
    home = tmp_path / "home"
    store = RunStore(home / "runs.sqlite")
    run_id = run_from_published_preset(store)
    out = tmp_path / "report.html"
    done = subprocess.run([sys.executable, "-m", "privengine", "report", run_id, "--output", str(out)], cwd=ROOT,
                          env=subprocess_env(PRIVENGINE_HOME=str(home)), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    context = chromium.new_context(offline=True)
    pg = context.new_page()
    requested = []
    pg.on("request", lambda request: requested.append(request.url))
    pg.goto(out.as_uri())
    pg.locator(".js-plotly-plot").first.wait_for(timeout=20_000)  # plotly (inlined) drew the charts
    assert pg.locator(".js-plotly-plot").count() >= 2
    assert "headline" in pg.inner_text("body") and "89.7 %" in pg.inner_text("body")
    assert [url for url in requested if not url.startswith("file:")] == []
    # charts first (the claims in full follow them); tick labels, axis titles and legends apart, whole inside
    # their chart (tests/test_report_charts_browser.py measures every report kind, light and dark)
    first_chart = pg.locator(".js-plotly-plot").first.bounding_box()
    assert first_chart["y"] < pg.locator(".claim").first.bounding_box()["y"]
    assert pg.locator(".headline-line").first.bounding_box()["y"] < first_chart["y"] < 720
    assert chart_problems(pg) == {}
    for chart in pg.locator(".js-plotly-plot").all():
        _assert_title_clear_of_ticks_and_toolbar(pg, chart)
    # every chart downloads as SVG from its link, and its camera button saves a 2x PNG at a slide's size
    assert pg.locator(".chart .export a", has_text="Download SVG").count() == pg.locator(".js-plotly-plot").count()
    size = pg.locator(".js-plotly-plot").first.evaluate(
        """async div => { const o = div._context.toImageButtonOptions;
                          const url = await Plotly.toImage(div, o);
                          const img = new Image(); img.src = url; await img.decode();
                          return [img.naturalWidth, img.naturalHeight, o.width, o.height]; }""")
    assert size == [2 * size[2], 2 * size[3], 1000, size[3]] and size[3] >= 300
    context.close()


def _assert_title_clear_of_ticks_and_toolbar(pg, chart) -> None:
    """A chart's title (head and detail lines) sits below plotly's toolbar, shown while the pointer is over the
    chart, and above its highest tick label (item 7 of issue 29: the toolbar covered short titles, and titles
    broken into lines ran into the top tick)."""
    title = chart.locator(".g-gtitle").bounding_box()
    subtitle = chart.locator(".g-gtitle-subtitle, .gtitle-subtitle")
    bottom = max([title["y"] + title["height"]] + [b["y"] + b["height"] for b in
                                                    (s.bounding_box() for s in subtitle.all()) if b])
    ticks = [b for b in (t.bounding_box() for t in chart.locator(".ytick text").all()) if b]
    assert not ticks or bottom <= min(b["y"] for b in ticks), chart.locator(".g-gtitle").inner_text()
    chart.hover()
    toolbar = chart.locator(".modebar").bounding_box()
    assert toolbar is not None and toolbar["y"] + toolbar["height"] <= title["y"] + 2
    pg.mouse.move(0, 0)
