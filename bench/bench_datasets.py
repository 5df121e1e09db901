"""Benchmark: a user data set from file to store (issue 38: a 50 000-row, 50-column CSV validated and stored in
under 10 s on a 2-core machine).

Writes a CSV of ``--rows`` rows: ``--columns`` - 2 normal numeric columns, one categorical column of 5 names and a
binary label, into a temporary PRIVENGINE_HOME; then times, in this process, ``data add`` through the CLI's
function (read, validate, normalise, fingerprint, store atomically), split into its stages, and prints seconds.

Run: python bench/bench_datasets.py [--rows 50000] [--columns 50]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from privengine.datasets import Declaration, add_dataset, datasets_home  # noqa: E402
from privengine.datasets.tabular import parse_frame, read_table  # noqa: E402

CATEGORIES = ("a", "b", "c", "d", "e")


def write_csv(path: Path, rows: int, columns: int) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(rows, columns - 2)), columns=[f"x{i}" for i in range(columns - 2)])
    frame["kind"] = rng.choice(CATEGORIES, rows)
    frame["label"] = rng.integers(0, 2, rows)
    frame.to_csv(path, index=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--columns", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["PRIVENGINE_HOME"] = home
        path = Path(home) / "table.csv"
        write_csv(path, args.rows, args.columns)
        csv_bytes = path.stat().st_size
        declaration = Declaration("bench", label="label", classes=("0", "1"), public_rows=1000,
                                  categorical={"kind": CATEGORIES})
        start = time.perf_counter()
        frame = read_table(path, declaration)
        read = time.perf_counter()
        parsed = parse_frame(frame, declaration)
        validated = time.perf_counter()
        parsed.fingerprint()
        hashed = time.perf_counter()
        add_dataset(Declaration("bench-whole", label="label", classes=("0", "1"), public_rows=1000,
                                categorical={"kind": CATEGORIES}), path)
        whole = time.perf_counter() - hashed
        stored = sum(p.stat().st_size for p in datasets_home().rglob("*") if p.is_file())
    print(f"{args.rows} rows x {args.columns} columns, CSV of {csv_bytes} bytes, {stored} bytes stored "
          "(two names, one object)")
    print(f"read {read - start:.2f} s  validate + normalise {validated - read:.2f} s  fingerprint "
          f"{hashed - validated:.2f} s")
    print(f"data add, whole (read, validate, fingerprint, store): {whole:.2f} s (goal < 10 s)")


if __name__ == "__main__":
    main()
