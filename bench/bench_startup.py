"""Benchmark: how long a new process takes to start the CLI (``python -m privengine --help``, and the imports of
the CLI and the registry), against another checkout of the engine (the baseline) timed in the same loop.

A terminal user pays this at every command, and so does every test that runs the CLI in a subprocess. Each
round runs both checkouts once (alternating, so load changes hit both), in fresh interpreters with ``PYTHONPATH``
set to the checkout; prints the median of ``--repeats`` rounds, the ratio (below 1: faster) and which heavy
libraries the imports loaded.

    git worktree add /tmp/base <baseline commit>         # or: git archive <commit> | tar -x -C /tmp/base
    python bench/bench_startup.py --baseline /tmp/base [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "pandas", "plotly", "sklearn", "scipy.stats", "scipy.optimize", "opacus")
IMPORTS = ("import sys, privengine.cli, privengine.mechanisms; "
           f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")


def timed(root: Path, args: list[str]) -> tuple[float, str]:
    """Seconds for ``python ARGS`` with the engine of ``root``, and its last line of output."""
    env = dict(os.environ, PYTHONPATH=str(root))
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, (done.stdout.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="another checkout of the project (its root folder)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    roots = {"this checkout": HERE, "baseline": Path(args.baseline).resolve()}
    commands = {"imports of the CLI and the registry": ["-c", IMPORTS],
                "python -m privengine --help": ["-m", "privengine", "--help"]}
    for label, command in commands.items():
        times: dict[str, list[float]] = {name: [] for name in roots}
        loaded: dict[str, str] = {}
        for _ in range(args.repeats):
            for name, root in roots.items():
                seconds, last = timed(root, command)
                times[name].append(seconds)
                loaded[name] = last
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(f"{label} (median of {args.repeats}):")
        for name in roots:
            extra = f"  loads: {loaded[name] or 'none of ' + ', '.join(HEAVY)}" if command[0] == "-c" else ""
            print(f"  {name:<14} {medians[name]:6.2f} s{extra}")
        print(f"  ratio this / baseline: {medians['this checkout'] / medians['baseline']:.2f}")


if __name__ == "__main__":
    main()
