"""A small stored table for the tests of mechanisms on user data sets: ``add_table`` writes a CSV of ``rows`` rows
(two numeric columns a, b ~ N(0, 1), a categorical colour, a label: the second class where a + b > 0, and for three
classes the third where also a > 1.5) and stores it with ``python -m privengine data add`` under ``name``, bounds
-3:3 and the colour's list declared, plus ``extra`` flags (public rows, private size)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tests.conftest import run_cli


def add_table(tmp_path, *extra: str, name: str = "tiny", labels=("neg", "pos"), rows: int = 120) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 2))
    label = np.array(labels)[(x[:, 0] + x[:, 1] > 0).astype(int) + (x[:, 0] > 1.5 if len(labels) > 2 else 0)]
    pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "colour": rng.choice(["red", "blue"], rows), "label": label}).to_csv(
        tmp_path / f"{name}.csv", index=False)
    added = run_cli("data", "add", name, str(tmp_path / f"{name}.csv"), "--label", "label", "--classes",
                    ",".join(labels), "--categorical", "colour=red,blue", "--bounds", "*=-3:3", *extra)
    assert added.returncode == 0, added.stderr
