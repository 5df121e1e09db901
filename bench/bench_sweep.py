"""Benchmark: sweep throughput on the executors, in one process.

1. Runs per minute for a sweep of small DP-Bayes runs (the smoke configuration over several
   epsilons and seeds): the local executor with 1 worker (the baseline), with N workers, and
   the Ray executor on a local cluster of N workers.
2. Ray's overhead per run: the same sweep of near-empty toy runs (the test mechanism, one
   step) on the local executor and on Ray; the difference per run is what Ray adds
   (task scheduling, the event hub, the driver's drain loop), on top of the cluster's start-up,
   which is reported separately.

    python bench/bench_sweep.py                 # N = the cores, 8 DP-Bayes runs, 16 toy runs
    python bench/bench_sweep.py --workers 4 --runs 16
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("PRIVENGINE_PLUGINS", "tests.toy_mechanism")

from privengine import registry  # noqa: E402
from privengine.explore import SweepSpec  # noqa: E402
from privengine.explore import runner  # noqa: E402
from privengine.jobs import JobManager  # noqa: E402
from privengine.store import RunStore  # noqa: E402


def timed_sweep(store: RunStore, executor, spec: SweepSpec) -> float:
    start = time.perf_counter()
    sweep_id = runner.launch(store, executor, spec)
    for run in store.sweep_runs(sweep_id):
        executor.wait(run.id)
    result = runner.result(store, sweep_id)
    if result.runs_by_state != {"finished": result.runs_total}:
        raise SystemExit(f"sweep {sweep_id} did not finish cleanly: {result.runs_by_state}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--runs", type=int, default=8, help="DP-Bayes runs (even: 2 seeds per epsilon)")
    parser.add_argument("--toy-runs", type=int, default=16)
    args = parser.parse_args()
    n = args.workers
    store = RunStore(Path(tempfile.mkdtemp(prefix="bench_sweep_")) / "runs.sqlite")
    smoke = dict(registry.get("dp_bayes").smoke)
    epsilons = [0.25 * 2 ** i for i in range(args.runs // 2)]
    small = SweepSpec("dp_bayes", base=smoke, axes={"epsilon": epsilons}, seeds=2)
    toy = SweepSpec("toy", base={"steps": 1}, axes={"rate": [round(0.05 * (i + 1), 3) for i in range(args.toy_runs)]})

    times: dict[str, float] = {}
    for label, workers in (("local, 1 worker", 1), (f"local, {n} workers", n)):
        manager = JobManager(store, max_concurrent=workers)
        times[label] = timed_sweep(store, manager, small)
        if workers == 1:
            toy_local = timed_sweep(store, manager, toy)
        manager.shutdown()
    try:
        from privengine.explore.ray_executor import RayExecutor
    except ImportError:
        RayExecutor = None
    ray_start = toy_ray = None
    if RayExecutor is not None:
        t0 = time.perf_counter()
        ray = RayExecutor(store, workers=n)
        ray_start = time.perf_counter() - t0
        times[f"Ray, {n} workers"] = timed_sweep(store, ray, small)
        toy_ray = timed_sweep(store, ray, toy)
        ray.shutdown()

    runs = len(epsilons) * 2
    base = times["local, 1 worker"]
    print(f"{runs} DP-Bayes smoke runs ({', '.join(f'eps {e:g}' for e in epsilons)}; 2 seeds each), {n} workers")
    for label, seconds in times.items():
        print(f"  {label:22s} {seconds:7.2f} s   {60 * runs / seconds:6.1f} runs/min   "
              f"speed-up vs local 1 worker x{base / seconds:.2f}")
    print(f"{args.toy_runs} toy runs of one step (overhead only):")
    print(f"  local, 1 worker        {toy_local:7.2f} s   {1000 * toy_local / args.toy_runs:6.1f} ms/run")
    if toy_ray is None:
        print("  Ray: not installed (pip install \"ray>=2.50\")")
    else:
        print(f"  Ray, {n} workers         {toy_ray:7.2f} s   {1000 * toy_ray / args.toy_runs:6.1f} ms/run   "
              f"Ray overhead per run {1000 * (toy_ray - toy_local) / args.toy_runs:+.1f} ms "
              f"(ratio x{toy_ray / toy_local:.2f}); cluster start-up {ray_start:.1f} s, once")


if __name__ == "__main__":
    main()
