"""End to end in a real browser: `streamlit run app.py`, headless Chromium driven by Playwright.

Visits every page and asserts no error element; launches a small run and
watches it finish live; after a Launch (button or link) finds the run's live charts on screen while it trains;
launches a quick demo from the Home gallery; opens the
first request after a server start (Home and deep links to a run, a sweep and a
preset) and checks it gets the app's menu, the wide layout and its target; opens a report offline. A
screenshot is saved under test-artifacts/ on failure.
Skips (with the reason) when Chromium or Playwright is missing.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

import pytest

from privengine import registry
from privengine.store import RunStore
from tests.chart_boxes import chart_problems
from tests.conftest import ROOT, run_from_published_preset, subprocess_env

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def app_home(tmp_path_factory) -> Path:
    """The PRIVENGINE_HOME of the app under test (tests may add runs to it through the CLI)."""
    return tmp_path_factory.mktemp("browser-home")


@contextlib.contextmanager
def _server(home: Path):
    """``streamlit run app.py`` on a free port with PRIVENGINE_HOME=home; yields its URL once it is healthy
    (the health check starts no session: the first page a test opens is the server's first request)."""
    port = _free_port()
    log = open(home / "streamlit.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env=subprocess_env(PRIVENGINE_HOME=str(home)), stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start: {(home / 'streamlit.log').read_text()}")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


@pytest.fixture(scope="module")
def app_url(app_home):
    with _server(app_home) as url:
        yield url


@pytest.fixture(scope="module")
def chromium():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def browser(chromium, app_url):
    # The first session of the shared server opens at Home. Deep links as the very first request are tested
    # below, each on a server of its own; the toy's page is generated (no file in pages/), and as the very first
    # request Streamlit would still show its "Page not found" dialog over it (streamlit issue 9992).
    warm = chromium.new_page()
    warm.goto(app_url)
    _settle(warm)
    warm.close()
    return chromium


@pytest.fixture
def page(browser, request):
    pg = browser.new_page(viewport={"width": 1400, "height": 1000})
    yield pg
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        SHOTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(SHOTS / f"{request.node.name}.png"), full_page=True)
    pg.close()


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
    page.locator(RUN_PANEL).get_by_text("finished").first.wait_for(timeout=120_000)  # a quick demo: 10-40 s
    assert _errors(page) == []


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
    assert _errors(page) == []


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
    page.get_by_text("finished").first.wait_for(timeout=180_000)
    assert _errors(page) == []


MECHANISM_TITLES = sorted(m.title for m in registry.all_mechanisms())  # the toy registers first here, last there


def _menu(pg) -> list[str]:
    """The labels of the app's sidebar menu, in order."""
    links = pg.locator("[data-testid='stSidebar'] [data-testid='stPageLink-NavLink']")
    links.first.wait_for(timeout=10_000)
    return [a.locator("[data-testid='stMarkdownContainer']").inner_text().strip() for a in links.all()]


def _content_width(pg) -> float:
    return pg.evaluate(
        "() => document.querySelector(\"[data-testid='stMainBlockContainer']\").getBoundingClientRect().width")


def _home_target(home: Path) -> tuple[str, Callable]:
    def expect(pg):
        pg.locator("h1", has_text="privengine").wait_for(timeout=60_000)
        pg.locator(".st-key-gallery-launch-pate button").wait_for(timeout=10_000)
    return "/", expect


def _run_target(home: Path) -> tuple[str, Callable]:
    store = RunStore(home / "runs.sqlite")
    run_id = run_from_published_preset(store)
    store.close()

    def expect(pg):
        pg.locator("h1", has_text="Anisotropic DP-SGD").wait_for(timeout=60_000)
        pg.get_by_text(f"Run {run_id}").first.wait_for(timeout=20_000)
        pg.get_by_text("Preset fmnist-scatter-eps3 · published test accuracy", exact=False).wait_for(timeout=20_000)
        # the published figure as a labelled line on the test-accuracy chart (plotly draws it as svg text)
        pg.locator(".annotation-text", has_text="published: 89.7 % at ε = 3").wait_for(timeout=60_000)
    return f"/dpsgd?run={run_id}", expect


def _sweep_target(home: Path) -> tuple[str, Callable]:
    done = subprocess.run([sys.executable, "-m", "privengine", "sweep", "toy", "--vary", "rate=0.1,0.5", "--steps", "2",
                           "--json"], cwd=ROOT, env=subprocess_env(PRIVENGINE_HOME=str(home)), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    sweep_id = json.loads(done.stdout)["sweep_id"]

    def expect(pg):
        pg.locator("h1", has_text="Explore").wait_for(timeout=60_000)
        pg.get_by_text("Privacy-utility frontier").first.wait_for(timeout=30_000)
        pg.get_by_text("ε = 6, δ = 2e-05", exact=False).first.wait_for(timeout=10_000)  # 1 + 5: composed
    return f"/explore?sweep={sweep_id}", expect


def _preset_target(home: Path) -> tuple[str, Callable]:
    def expect(pg):
        pg.locator("h1", has_text="DP Bayesian inference").wait_for(timeout=60_000)
        _settle(pg)
        # the preset's value (Playwright's wait: under load the first request's page can still be filling in)
        sync_api.expect(pg.get_by_role("spinbutton", name="N records")).to_have_value("1000", timeout=30_000)
        # a click in that first session is not lost (its widgets keep their ids into the next run)
        pg.get_by_role("button", name="Launch run").click()
        pg.wait_for_url("**run=*", timeout=30_000)
        pg.get_by_text("from dashboard (preset quick-demo)", exact=False).first.wait_for(timeout=20_000)
    return "/dp_bayes?preset=quick-demo", expect


FIRST_REQUESTS = {"home": _home_target, "run": _run_target, "sweep": _sweep_target, "preset": _preset_target}


@pytest.mark.parametrize("target", list(FIRST_REQUESTS))
def test_the_first_request_after_a_start_gets_the_app_shell_and_its_target(tmp_path_factory, chromium, target):
    """Streamlit runs the first request after a start through its automatic pages/ list (raw file names in the
    sidebar, narrow layout, deep links to the bare page script): the app must look right from that request on."""
    home = tmp_path_factory.mktemp(f"first-{target}")
    path, expect = FIRST_REQUESTS[target](home)
    with _server(home) as url:
        pg = chromium.new_page(viewport={"width": 1400, "height": 1000})
        try:
            pg.goto(url + path)  # the server's very first request
            expect(pg)
            _settle(pg)
            menu = _menu(pg)  # the app's menu, not Streamlit's list of files ("app, dp bayes, dpsgd, home, ...")
            assert (menu[:2], menu[-3:], sorted(menu[2:-3])) == (["Home", "Data"], ["Runs", "Explore", "Ledger"],
                                                                 MECHANISM_TITLES)
            assert _content_width(pg) > 1000  # the wide layout (the narrow one is 736 px at this viewport)
            assert pg.get_by_text("Page not found").count() == 0
            assert _errors_but_missing_data(pg) == []  # the run target is a stored Fashion-MNIST run
        except BaseException:
            SHOTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(SHOTS / f"first-request-{target}.png"), full_page=True)
            raise
        finally:
            pg.close()


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
