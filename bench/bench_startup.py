"""Benchmark: how long a new process takes to start the CLI (``python -m privengine --help``, and the imports of
the CLI and the registry) and to draw the dashboard's Home page (Streamlit's AppTest, an empty store), against
another checkout of the engine (the baseline) timed in the same loop.

A terminal user pays the CLI's at every command, and so does every test that runs the CLI in a subprocess; a new
Streamlit server pays the Home page's before its first answer. Each round runs both checkouts once (alternating, so
load changes hit both), in fresh interpreters with ``PYTHONPATH`` set to the checkout; prints the median wall and
CPU time (user + system, the child's) of ``--repeats`` rounds, their ratios (below 1: faster) and which heavy
libraries the imports and the page loaded.

    git worktree add /tmp/base <baseline commit>         # or: git archive <commit> | tar -x -C /tmp/base
    python bench/bench_startup.py --baseline /tmp/base [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "pandas", "plotly", "sklearn", "scipy.stats", "scipy.optimize", "opacus")
LOADED = f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
IMPORTS = f"import sys, privengine.cli, privengine.mechanisms; {LOADED}"
HOME_PAGE = ("import os, sys, tempfile; os.environ['PRIVENGINE_HOME'] = tempfile.mkdtemp(); "
             "from streamlit.testing.v1 import AppTest; "
             "at = AppTest.from_file(os.path.abspath('app.py'), default_timeout=300).run(); "
             f"assert not at.exception, at.exception; {LOADED}")


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's ended children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(root: Path, args: list[str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of ``python ARGS`` with the engine of ``root``, and its last line of output."""
    env = dict(os.environ, PYTHONPATH=str(root))
    t0, cpu0 = time.perf_counter(), children_cpu()
    done = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, children_cpu() - cpu0, (done.stdout.strip().splitlines() or [""])[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="another checkout of the project (its root folder)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    roots = {"this checkout": HERE, "baseline": Path(args.baseline).resolve()}
    commands = {"imports of the CLI and the registry": ["-c", IMPORTS],
                "python -m privengine --help": ["-m", "privengine", "--help"],
                "the Home page drawn by AppTest": ["-c", HOME_PAGE]}
    for label, command in commands.items():
        walls: dict[str, list[float]] = {name: [] for name in roots}
        cpus: dict[str, list[float]] = {name: [] for name in roots}
        loaded: dict[str, str] = {}
        for _ in range(args.repeats):
            for name, root in roots.items():
                wall, cpu, last = timed(root, command)
                walls[name].append(wall)
                cpus[name].append(cpu)
                loaded[name] = last
        wall = {name: statistics.median(values) for name, values in walls.items()}
        cpu = {name: statistics.median(values) for name, values in cpus.items()}
        print(f"{label} (median of {args.repeats}):")
        for name in roots:
            extra = f"  loads: {loaded[name] or 'none of ' + ', '.join(HEAVY)}" if command[0] == "-c" else ""
            print(f"  {name:<14} wall {wall[name]:6.2f} s, CPU {cpu[name]:6.2f} s{extra}")
        print(f"  ratio this / baseline: wall {wall['this checkout'] / wall['baseline']:.2f}, "
              f"CPU {cpu['this checkout'] / cpu['baseline']:.2f}")


if __name__ == "__main__":
    main()
