"""Benchmark: what a sweep's own local Ray cluster costs to start, with and without a ``runtime_env`` for its
workers (``privengine.explore.ray_executor.worker_runtime_env``).

Each round starts, in a fresh interpreter for each variant (alternating, so load changes hit both), a
``RayExecutor`` of ``--workers`` workers, runs a toy sweep of ``--workers`` short runs on it and shuts it down.
With a runtime_env Ray starts new workers for it while the ones it prestarted (one per CPU) sit idle; without
one the runs take the prestarted workers. The time is the child's wall time and the CPU time of its whole process
tree (the cluster's daemons and workers included: this process is their subreaper, so every one of them is reaped
here and counted, even those its raylet leaves behind). Prints the medians of ``--repeats`` rounds and the ratios
(below 1: cheaper without a runtime_env). Linux only (``prctl``).

    python bench/bench_ray_start.py [--workers 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PR_SET_CHILD_SUBREAPER = 36
CHILD = """
import sys
from privengine.explore import SweepSpec, runner, ray_executor
from privengine.store import RunStore
if sys.argv[1] == "runtime_env":  # the variant with a runtime_env, as every cluster had one before
    plain = ray_executor.worker_runtime_env
    ray_executor.worker_runtime_env = lambda address: plain(address or "a-cluster-of-its-own:1")
store = RunStore()
executor = ray_executor.RayExecutor(store, workers=int(sys.argv[2]))
try:
    sweep = runner.launch(store, executor, SweepSpec("toy", base={"steps": 2}, seeds=int(sys.argv[2])))
    for run in store.sweep_runs(sweep):
        assert executor.wait(run.id, timeout=300).state == "finished"
finally:
    executor.shutdown()
"""


def _reap_all() -> None:
    """Wait for every child left (the cluster's processes, reparented here), so their CPU time is counted."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            return


def one(variant: str, workers: int) -> tuple[float, float]:
    """Wall seconds of one child, and the CPU seconds of its whole process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, PRIVENGINE_HOME=home, PRIVENGINE_PLUGINS="tests.toy_mechanism", PYTHONPATH=str(ROOT))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", CHILD, variant, str(workers)], cwd=ROOT, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - t0
        _reap_all()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    times: dict[str, list[tuple[float, float]]] = {"runtime_env": [], "inherited": []}
    for _ in range(args.repeats):
        for variant in times:
            times[variant].append(one(variant, args.workers))
    median = {v: (statistics.median(w for w, _ in t), statistics.median(c for _, c in t)) for v, t in times.items()}
    for variant, (wall, cpu) in median.items():
        print(f"{variant:12s} wall {wall:6.2f} s   process-tree CPU {cpu:6.2f} s")
    (w0, c0), (w1, c1) = median["runtime_env"], median["inherited"]
    print(f"ratio inherited / runtime_env: wall {w1 / w0:.2f}, CPU {c1 / c0:.2f} "
          f"({args.workers} workers, median of {args.repeats} rounds)")


if __name__ == "__main__":
    main()
