"""Issue 38 from the CLI, for an image folder: ``data add`` of a folder of class folders, ``run dpsgd`` on it, ``export
--format model``, and ``predict`` on the stored pixels of the run's test rows, whose accuracy is the run's own test
accuracy (the kept model is the one the run evaluated, and predict applies the same preprocessing)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from privengine.datasets import load_dataset
from privengine.datasets.held_out import split_rows
from tests.conftest import run_cli

CLASSES = {"dark": 0, "bright": 156}  # class folder -> lowest pixel value: pixels in [low, low + 100)


def write_pictures(root: Path, per_class: int = 40, size: int = 8) -> None:
    """A folder of class folders (``dark``, ``bright``) of ``per_class`` grayscale PNGs of ``size`` x ``size``
    random pixels each, told apart by their brightness but for every fifth, drawn as the other class (label noise,
    so that a test accuracy tells models apart)."""
    rng = np.random.default_rng(0)
    for name, low in CLASSES.items():
        (root / name).mkdir(parents=True)
        other = next(value for key, value in CLASSES.items() if key != name)
        for i in range(per_class):
            pixels = rng.integers(other if i % 5 == 4 else low, (other if i % 5 == 4 else low) + 100, (size, size),
                                  dtype=np.uint8)
            Image.fromarray(pixels, "L").save(root / name / f"{i:03d}.png")


@pytest.mark.slow
def test_an_image_folder_goes_from_data_add_to_a_run_an_exported_model_and_its_predictions(store, tmp_path):
    write_pictures(tmp_path / "pics")
    added = run_cli("data", "add", "pics", str(tmp_path / "pics"), "--public-rows", "10", "--private-size", "70")
    assert added.returncode == 0, added.stderr
    ran = run_cli("run", "dpsgd", "--dataset", "pics", "--alphas", "0", "--n-seeds", "1", "--noise-mode", "sigma",
                  "--noise-multiplier", "1", "--batch-size", "8", "--epochs", "1", "--lr", "1", "--data-seed", "3",
                  "--device", "cpu", "--json")
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    exported = run_cli("export", run["id"], "--format", "model", "--output", str(tmp_path / "model"))
    assert exported.returncode == 0, exported.stderr

    data = load_dataset("pics")
    test_rows = split_rows(data.private(), data_seed=3)[1]
    np.save(tmp_path / "test.npy", data.private()["x"][test_rows])  # the stored pixels, 0-255, (n, 1, 8, 8)
    predicted = run_cli("predict", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "test.npy"), "--json")
    assert predicted.returncode == 0, predicted.stderr
    classes = [p["class"] for p in json.loads(predicted.stdout)["predictions"]]
    assert len(classes) == len(test_rows) > 0
    truth = [data.classes[code] for code in data.private()["y"][test_rows]]
    accuracy = sum(c == t for c, t in zip(classes, truth)) / len(classes)
    assert accuracy == run["summary"]["best_test_acc"]
