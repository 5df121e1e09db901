"""Small user data sets for the tests of mechanisms on them:

- ``add_table`` writes a CSV of ``rows`` rows drawn with ``seed`` (two numeric columns a, b ~ N(0, 1), a categorical colour, a label: the
  second class where a + b > 0, and for three classes the third where also a > 1.5) and stores it with
  ``python -m privengine data add`` under ``name``, bounds -3:3 and the colour's list declared, plus ``extra`` flags
  (public rows, private size);
- ``add_images`` writes a folder ``pics`` of two class folders (left, right) of 12 random 8x8 grayscale PNGs each and
  stores it under that name with the ``extra`` flags;
- ``random_rows`` draws a data set's arrays in memory (x (n, 3) ~ N(0, 1), y (n,) in {0, 1}, categories (n, 2) in
  {0..3}), for the row-by-row splits and partitions."""

from __future__ import annotations

import numpy as np
import pandas as pd
from PIL import Image

from tests.conftest import run_cli


def add_table(tmp_path, *extra: str, name: str = "tiny", labels=("neg", "pos"), rows: int = 120,
              seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 2))
    label = np.array(labels)[(x[:, 0] + x[:, 1] > 0).astype(int) + (x[:, 0] > 1.5 if len(labels) > 2 else 0)]
    pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "colour": rng.choice(["red", "blue"], rows), "label": label}).to_csv(
        tmp_path / f"{name}.csv", index=False)
    added = run_cli("data", "add", name, str(tmp_path / f"{name}.csv"), "--label", "label", "--classes",
                    ",".join(labels), "--categorical", "colour=red,blue", "--bounds", "*=-3:3", *extra)
    assert added.returncode == 0, added.stderr


def add_images(tmp_path, *extra: str) -> None:
    rng = np.random.default_rng(0)
    for label in ("left", "right"):
        (tmp_path / "pics" / label).mkdir(parents=True)
        for i in range(12):
            Image.fromarray(rng.integers(0, 256, (8, 8), dtype=np.uint8), "L").save(
                tmp_path / "pics" / label / f"{i}.png")
    added = run_cli("data", "add", "pics", str(tmp_path / "pics"), *extra)
    assert added.returncode == 0, added.stderr


def random_rows(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"x": rng.normal(size=(n, 3)), "y": rng.integers(0, 2, n), "categories": rng.integers(0, 4, (n, 2))}
