"""Issue 38 in a real browser, for images: a zip of a folder of class folders (8x8 grayscale PNGs) uploaded on the Data
page, its public rows and private size declared there, stored; its DP-SGD "Train on" link opens a form that fits the
small data set (seeded from its public facts) with the data set chosen; a tiny run launched there finishes; its
"Model (zip)" download, unzipped, predicts with ``python -m privengine predict`` on the stored pixels of the run's
test rows with exactly the run's stored test accuracy. Screenshots at 1280x720 go to
test-artifacts/issue38-images-*. Uses the Streamlit server and browser tab fixtures of tests/conftest.py (skips with
its reason when Chromium or Playwright is missing)."""

from __future__ import annotations

import json
import re
import zipfile
from urllib.parse import parse_qs, urlparse

import numpy as np
import pytest

from privengine import registry
from privengine.datasets import load_dataset
from privengine.datasets.held_out import split_rows
from tests.conftest import run_cli
from tests.test_browser import SHOTS, _errors, _settle, sync_api
from tests.test_datasets_browser import launch_until_finished
from tests.test_datasets_images_cli import write_pictures

pytestmark = [pytest.mark.browser, pytest.mark.slow]  # a real Chromium, a real (short) training run

NAME = "glyphs"


def _shot(pg, step: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"issue38-images-{step}.png"))


def _cli(*args: str) -> str:
    """``python -m privengine ARGS`` run in this process (:func:`tests.conftest.run_cli`: one import of torch and
    Opacus for the four commands, not one per child process); its output. The store is the one PRIVENGINE_HOME
    names: the test points it at the app's home."""
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_image_zip_goes_from_upload_to_a_run_and_its_downloaded_model_predicts(app_url, app_home, page,  # noqa: F811
                                                                                  tmp_path, monkeypatch):
    write_pictures(tmp_path / NAME)  # 40 dark and 40 bright 8x8 images
    archive = tmp_path / f"{NAME}.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for item in sorted((tmp_path / NAME).rglob("*.png")):
            zipped.write(item, item.relative_to(tmp_path).as_posix())
    page.set_viewport_size({"width": 1280, "height": 720})
    page.goto(f"{app_url}/data")
    page.locator("[data-testid='stFileUploaderDropzoneInput']").set_input_files(str(archive))
    add = page.get_by_role("button", name="Add data set")
    add.wait_for(timeout=60_000)  # the preview and the declaration form are drawn
    sync_api.expect(page.get_by_text("class bright")).to_be_visible()
    _settle(page)  # the class previews' images drawn
    _shot(page, "1-preview")
    page.get_by_role("spinbutton", name="Public rows").fill("10")
    page.get_by_role("spinbutton", name="Private size N").fill("70")
    add.click()
    page.get_by_text(re.compile(rf"^Stored {NAME}: images, 80 rows \(10 public\)")).wait_for(timeout=60_000)
    assert _errors(page) == []
    link = page.get_by_role("link", name=f"Train on {NAME}: {registry.get('dpsgd').title}")
    link.scroll_into_view_if_needed()
    _shot(page, "2-stored")

    link.click()
    page.wait_for_url("**/dpsgd?config=*", timeout=30_000)
    sync_api.expect(page.get_by_role("combobox", name="Dataset")).to_match_aria_snapshot(
        f'- combobox "Dataset": "{NAME} (your data: images, 80 rows)"', timeout=60_000)  # the data set chosen
    # seeded from the public facts: N = 70 - 14 = 56 training rows, batch floor(56 / 10); the link was used
    batch = page.get_by_role("spinbutton", name="Batch size")
    sync_api.expect(batch).to_have_value("5", timeout=30_000)
    assert not page.get_by_text("was not used").count() and _errors(page) == []
    batch.evaluate("e => e.scrollIntoView({block: 'center'})")
    _shot(page, "3-form")
    for label, value in (("Epochs", "1"), ("Seeds", "1")):
        page.get_by_role("spinbutton", name=label).fill(value)
    alphas = page.get_by_role("textbox", name="Alphas")  # the isotropic setting only: one short training
    alphas.fill("0")
    alphas.press("Enter")
    panel = launch_until_finished(page)
    button = panel.get_by_role("button", name="Model (zip)")
    sync_api.expect(button).to_be_visible(timeout=30_000)
    button.scroll_into_view_if_needed()
    _settle(page)  # the run's charts drawn
    _shot(page, "4-finished")
    with page.expect_download(timeout=60_000) as download:
        button.click()
    download.value.save_as(tmp_path / "model.zip")
    with zipfile.ZipFile(tmp_path / "model.zip") as zipped:
        zipped.extractall(tmp_path / "download")
    assert _errors(page) == []

    run_id = parse_qs(urlparse(page.url).query)["run"][0]
    monkeypatch.setenv("PRIVENGINE_HOME", str(app_home))  # the CLI below reads the app's store
    run = json.loads(_cli("show", run_id, "--json"))
    data = load_dataset(NAME, home=app_home / "datasets")
    private = data.private()
    test_rows = split_rows(private, data_seed=run["config"]["data_seed"])[1]
    np.save(tmp_path / "test.npy", private["x"][test_rows])  # the stored pixels, 0-255, (n, 1, 8, 8)
    predicted = json.loads(_cli("predict", "--model", str(tmp_path / "download"), "--data",
                                str(tmp_path / "test.npy"), "--json"))
    classes = [p["class"] for p in predicted["predictions"]]
    assert len(classes) == len(test_rows) > 0
    truth = [data.classes[code] for code in private["y"][test_rows]]
    assert sum(c == t for c, t in zip(classes, truth)) / len(classes) == run["summary"]["best_test_acc"]
    _cli("export", run_id, "--format", "model", "--output", str(tmp_path / "kept"))  # the store's own
    kept = json.loads(_cli("predict", "--model", str(tmp_path / "kept"), "--data", str(tmp_path / "test.npy"),
                           "--json"))
    assert predicted["predictions"] == kept["predictions"]  # classes and probabilities alike
