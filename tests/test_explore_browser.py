"""Explore's parallel coordinates in a real browser: a box dragged over the top of the ε axis reaches the page
(Streamlit sends Altair's interval selection back), which keeps only the runs inside it.

Uses the server and browser tab fixtures of tests/conftest.py (skips with its reason when Chromium or Playwright
is missing); the sweep is written straight into the store (nothing is trained).
"""

from __future__ import annotations

import re

import pytest

from privengine.claims import PrivacyClaim
from privengine.explore import SweepSpec, run_configs
from privengine.store import RunStore

pytestmark = pytest.mark.browser
RUN_LINK = re.compile(r"Run \w+ · seed (\d+)")  # a run's link under the table: "Run ID · seed S · state"


def _toy_sweep(store: RunStore) -> str:
    """Rates 0.01, 0.1 and 1 (ε 0.1, 1 and 10: 0, 0.5 and 1 on the log ε axis) x 2 seeds, all finished."""
    spec = SweepSpec("toy", axes={"rate": [0.01, 0.1, 1.0]}, seeds=2)
    sweep_id = store.create_sweep("toy", spec.to_dict())
    for i, (point, config) in enumerate(run_configs(spec)):
        run_id = store.create_run("toy", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index)
        claim = PrivacyClaim("toy", 10 * config.rate, 1e-5, "none (test only)", "add/remove one", headline=True)
        store.mark_ended(run_id, "finished", summary={"score": 0.5 + i / 100, "privacy": [claim.to_dict()]})
    return sweep_id


def test_a_box_dragged_on_the_epsilon_axis_filters_the_runs(app_url, app_home, page):
    sweep_id = _toy_sweep(RunStore(app_home / "runs.sqlite"))
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/explore?sweep={sweep_id}")
    chart = page.locator("[data-testid='stVegaLiteChart']").first  # the page's only Altair chart
    chart.locator("canvas, svg").first.wait_for(timeout=60_000)
    page.get_by_text("All 6 finished runs, one line each").wait_for(timeout=30_000)
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    # the last axis (ε) sits at the right, its top (ε = 10) at the top of the plot: drag from inside the plot
    # to above it (a drag must start inside; the box stops at the plot's edge)
    left, right = box["x"] + 0.82 * box["width"], box["x"] + 0.99 * box["width"]
    page.mouse.move(left, box["y"] + 60)
    page.mouse.down()
    page.mouse.move(right, box["y"] - 10, steps=8)
    page.mouse.up()
    kept = page.locator("[data-testid='stCaptionContainer']", has_text="pass through the box")
    kept.wait_for(timeout=30_000)
    said = kept.inner_text()
    links = page.locator("a").filter(has_text=RUN_LINK)
    links.first.wait_for(timeout=30_000)
    seeds = sorted(RUN_LINK.search(text).group(1) for text in links.all_inner_texts())
    assert said.startswith("2 of 6 runs pass through the box on ε per run")
    assert seeds == ["0", "1"]  # the two runs of rate 1 (ε = 10), nothing else
