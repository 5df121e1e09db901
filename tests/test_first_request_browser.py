"""The first request after a server start, in a real browser: Streamlit runs it through its automatic pages/ list
(raw file names in the sidebar, narrow layout, deep links to the bare page script); the app must show its own menu,
the wide layout and the request's target (Home, a run, a sweep, a preset) from that request on. Each case starts a
server of its own (tests/test_browser.py's ``_server``); split from that file so that pytest-xdist's two workers
share the browser tests' time. Skips with its reason when Chromium or Playwright is missing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

from privengine import registry
from privengine.store import RunStore
from tests.conftest import ROOT, run_from_published_preset, subprocess_env
from tests.test_browser import SHOTS, _errors_but_missing_data, _server, _settle, sync_api

pytestmark = pytest.mark.browser  # a real Chromium against a served app


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
def test_the_first_request_after_a_start_gets_the_app_shell_and_its_target(tmp_path_factory, page, target):
    """Streamlit runs the first request after a start through its automatic pages/ list (raw file names in the
    sidebar, narrow layout, deep links to the bare page script): the app must look right from that request on."""
    home = tmp_path_factory.mktemp(f"first-{target}")
    path, expect = FIRST_REQUESTS[target](home)
    with _server(home) as url:
        try:  # shot while the server runs (the page fixture's, after the test, would show it gone)
            page.goto(url + path)  # the server's very first request
            expect(page)
            _settle(page)
            menu = _menu(page)  # the app's menu, not Streamlit's list of files ("app, dp bayes, dpsgd, home, ...")
            assert (menu[:2], menu[-3:], sorted(menu[2:-3])) == (["Home", "Data"], ["Runs", "Explore", "Ledger"],
                                                                 MECHANISM_TITLES)
            assert _content_width(page) > 1000  # the wide layout (the narrow one is 736 px at this viewport)
            assert page.get_by_text("Page not found").count() == 0
            assert _errors_but_missing_data(page) == []  # the run target is a stored Fashion-MNIST run
        except BaseException:
            SHOTS.mkdir(exist_ok=True)
            page.screenshot(path=str(SHOTS / f"first-request-{target}.png"), full_page=True)
            raise
