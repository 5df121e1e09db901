"""A run's page read at 1024x768 in normal mode (issue 40, item 10), in a real browser: the run panel beside the form
is about 360 px wide there; its result tiles showed "91…" for 91.8 % and their labels cut, and its charts, two a
row, cut their titles. Every tile's label and value and every chart's title must be whole.

Uses the server and browser tab fixtures of tests/conftest.py (skips with its reason when Chromium or Playwright
is missing); the run is written straight into the store (nothing is trained).
"""

from __future__ import annotations

import pytest

from privengine.store import RunStore

pytestmark = pytest.mark.browser

# per tile (its label and value) and per chart title: the text, and whether it is cut (wider than its box, or
# outside its chart's figure)
CUT = """([panel]) => {
  const p = document.querySelector(panel);
  const cut = (el) => el.scrollWidth > el.clientWidth + 1;
  const tiles = [...p.querySelectorAll("[data-testid='stMetricLabel'], [data-testid='stMetricValue']")]
    .map((el) => [el.innerText, cut(el) || [...el.querySelectorAll("*")].some(cut)]);
  const titles = [...p.querySelectorAll(".js-plotly-plot")].map((chart) => {
    const svg = chart.querySelector(".main-svg").getBoundingClientRect();
    const title = chart.querySelector(".g-gtitle").getBoundingClientRect();
    return [chart.querySelector(".g-gtitle").textContent, title.left < svg.left - 0.5 || title.right > svg.right + 0.5];
  });
  return [tiles, titles];
}"""


def _pate_run(store: RunStore) -> str:
    """A finished PATE run with its four result tiles and charts."""
    run_id = store.create_run("pate", {"aggregator": "confident_gnmax", "delta": 1e-5}, source="cli")
    per_epoch = [(e, name, value) for e in (1, 2) for name, value in
                 (("teacher_loss_mean", 1 / e), ("teacher_loss_max", 1.2 / e), ("student_accuracy", 0.4 * e))]
    store.add_metrics(run_id, per_epoch + [(q, "eps_data_independent", 0.05 * q) for q in range(10, 110, 10)]
                      + [(100, "ensemble_accuracy", 0.94), (100, "fraction_answered", 0.881)])
    store.put_artifact(run_id, "teacher_accuracy", {"accuracy": [0.91, 0.92, 0.93]})
    store.put_artifact(run_id, "vote_margins", {"margin": [3, 8, 10, 10]})
    store.mark_ended(run_id, "finished", summary={"teacher_accuracy_mean": 0.918, "noisy_label_accuracy": 0.333})
    return run_id


def test_result_tiles_and_chart_titles_are_whole_at_1024(app_url, app_home, page):
    run_id = _pate_run(RunStore(app_home / "runs.sqlite"))
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"{app_url}/pate?run={run_id}")
    panel = f".st-key-run-panel-{run_id}"
    page.locator(f"{panel} [data-testid='stMetricValue']").first.wait_for(timeout=60_000)
    page.wait_for_function("([panel]) => document.querySelectorAll(`${panel} .js-plotly-plot .g-gtitle`).length >= 4",
                         arg=[panel], timeout=30_000)
    tiles, titles = page.evaluate(CUT, [panel])
    assert [text for text, _ in tiles if "%" in text] == ["91.8%", "94.0%", "33.3%", "88.1%"]
    assert [text for text, cut in tiles if cut] == []
    assert len(titles) >= 4 and [text for text, cut in titles if cut] == []
