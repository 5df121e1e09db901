"""Issue 38 in a real browser: a CSV uploaded on the Data page, its public facts declared through the page's fields,
stored; its "Train on" link opens the DP-SGD form with that data set chosen; the run launched there finishes with
its headline claim and offers its kept model as "Model (zip)". Uses the Streamlit server and browser tab fixtures of
tests/conftest.py (skips with its reason when Chromium or Playwright is missing)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from privengine import registry
from tests.test_browser import _errors, sync_api

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a real Chromium, a real (short) training run

NAME = "cohort-e2e"
RUN_PANEL = "[class*='st-key-run-panel-']"


def _csv(path) -> None:
    """300 rows: two numeric features and a label ``y`` of classes ``no`` / ``yes``, separable up to noise."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 2))
    y = np.where(x[:, 0] + 0.5 * x[:, 1] + 0.3 * rng.normal(size=300) > 0, "yes", "no")
    pd.DataFrame({"x1": x[:, 0], "x2": x[:, 1], "y": y}).to_csv(path, index=False)


def launch_until_finished(pg):
    """Click the form's "Launch run" once it is enabled, follow to the run's page, wait (5 minutes at most) for the
    run to end and assert that it finished; its run panel."""
    launch = pg.get_by_role("button", name="Launch run")
    sync_api.expect(launch).to_be_enabled(timeout=60_000)
    launch.click()
    pg.wait_for_url("**run=*", timeout=30_000)
    panel = pg.locator(RUN_PANEL)
    panel.get_by_text(re.compile(r"^(finished|failed|stopped)$")).first.wait_for(timeout=300_000)
    assert panel.get_by_text("finished", exact=True).count() == 1, panel.inner_text()[:400]
    return panel


def test_a_csv_goes_from_upload_to_a_run_and_its_model_download(app_url, page, tmp_path):  # noqa: F811
    csv = tmp_path / f"{NAME}.csv"
    _csv(csv)
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/data")
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(csv))
    add = page.get_by_role("button", name="Add data set")
    add.wait_for(timeout=60_000)  # the preview and the declaration form are drawn
    sync_api.expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
    sync_api.expect(page.get_by_role("textbox", name="Name", exact=True)).to_have_value(NAME)
    page.get_by_role("textbox", name="Label column").fill("y")
    page.get_by_role("textbox", name="Classes").fill("no,yes")
    page.get_by_role("spinbutton", name="Public rows").fill("50")
    page.get_by_role("spinbutton", name="Private size N").fill("250")
    add.click()
    page.get_by_text(f"Stored {NAME}: tabular, 300 rows (50 public), classes no, yes").wait_for(timeout=60_000)
    assert _errors(page) == []

    page.get_by_role("link", name=f"Train on {NAME}: {registry.get('dpsgd').title}").click()
    page.wait_for_url("**/dpsgd?config=*", timeout=30_000)
    sync_api.expect(page.get_by_role("combobox", name="Dataset")).to_match_aria_snapshot(
        f'- combobox "Dataset": "{NAME} (your data: tabular, 300 rows)"', timeout=60_000)  # the data set chosen
    alphas = page.get_by_role("textbox", name="Alphas")  # the isotropic baseline only: no public subspace
    alphas.fill("0")
    alphas.press("Enter")
    panel = launch_until_finished(page)
    sync_api.expect(panel).to_contain_text(re.compile(r"ε = [0-9.]+, δ = [0-9e.-]+ — .*headline"), timeout=30_000)
    sync_api.expect(panel.get_by_role("button", name="Model (zip)")).to_be_visible(timeout=30_000)
    assert _errors(page) == []
