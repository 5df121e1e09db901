"""Benchmark: where a real-data preset's time goes, phase by phase, on the device given (issue 26, item 6).

For each preset (``--presets``, default the issue's three: ``dpsgd:fmnist-scatter-eps3``,
``dpsgd:mnist-scatter-mlp-eps3``, ``pate:mnist-confident-gnmax``) this runs the mechanism's own ``run(config,
reporter)`` in this process and prints the wall time of each phase:

  load         reading the dataset files and splitting them (scattering excluded)
  scattering   the scattering transform of the dataset (0 when the cache already holds it: see ``--cold``)
  calibration  DP-SGD's sigma calibration to the target epsilon: the wait for it once the data is read (it starts
               with the load, in a helper thread; the audits' calibrations are waited for at once)
  training     the private training (DP-SGD's models; PATE's teachers), evaluations excluded
  student      PATE's student (and its non-private baseline), evaluations excluded
  evaluation   held-out evaluations (DP-SGD's evaluation points, PATE's teacher predictions)
  accounting   epsilon curves and claims (DP-SGD's PRV / RDP evaluations; PATE's data-dependent analysis)
  other        the rest of the run (logs, artifacts, model set-up)

Each phase is the time inside the engine functions listed in :data:`PHASES`, wrapped here for the bench only (the
engine is unchanged); a phase nested inside another (an evaluation inside training, the live epsilon inside an
evaluation) is counted once, in the inner phase. Ratios between phases come from one process.

``--quick`` shrinks each preset so it finishes on two CPU cores in about a minute once the scattering is cached
(DP-SGD: ``--train-limit`` training examples, the preset's epochs at a batch of at most a quarter of them, so
about 4 x epochs steps; scatter_mlp's projection rank at most the public examples - 1; PATE: 200 queries, 2
teacher and 2 student epochs, no baseline): the phase split, not the preset's numbers. ``--cold`` uses a fresh,
empty ``PRIVENGINE_HOME`` (so the scattering is computed, as on a new machine); otherwise the current one's cache.

A fresh process's one-time costs (the device's start: context, cuBLAS, cuFFT; torch's import of ``torch._dynamo``,
which the first ``torch.optim`` step triggers) are timed once before the first preset and printed on their own line,
so no preset's phases carry them: a preset run alone in a new process takes its total plus that line. ``--profile N`` also prints each preset's
N host functions with the most own time (cProfile, main thread): a host-bound loop shows its Python and launch
costs, and a device wait shows in the call that waits (``.item()``, ``float()``, a copy to the CPU); then the engine's
N functions with the most cumulative time (where inside a phase the time goes).

Run: python bench/bench_presets.py --device cpu --data-root ../shared/data [--presets dpsgd:fmnist-scatter-eps3,...]
                                   [--quick] [--train-limit 4000] [--cold] [--profile 25]
"""

from __future__ import annotations

import argparse
import cProfile
import contextlib
import functools
import importlib
import math
import os
import pstats
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine.reporter import ReleaseCharge  # noqa: E402

warnings.filterwarnings("ignore", message="Full backward hook is firing")
warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")

DEFAULT_PRESETS = "dpsgd:fmnist-scatter-eps3,dpsgd:mnist-scatter-mlp-eps3,pate:mnist-confident-gnmax"
ORDER = ("load", "scattering", "calibration", "training", "student", "evaluation", "accounting")

# (module, attribute, phase): the engine functions (or methods, "Class.method") whose time is the phase
PHASES = {
    "dpsgd": [
        ("privengine.dpsgd.run", "load_task", "load"),
        ("privengine.dpsgd.data", "dataset_scattering", "scattering"),
        ("privengine.dpsgd.planning", "PlanSearch.plan", "calibration"),
        ("privengine.dpsgd.run", "train_models", "training"),
        ("privengine.dpsgd.run", "train_model", "training"),
        ("privengine.dpsgd.model_batch", "_Batch._evaluate", "evaluation"),
        ("privengine.dpsgd.training", "Training._evaluate", "evaluation"),
        ("privengine.dpsgd.run", "epsilon_of", "accounting"),
        ("privengine.dpsgd.run", "summarise", "accounting"),
    ],
    "pate": [
        ("privengine.pate.run", "load_pate_data", "load"),
        ("privengine.pate.pipeline", "load_scattering_inputs", "load"),
        ("privengine.pate.data", "dataset_scattering", "scattering"),
        ("privengine.pate.run", "train_teachers", "training"),
        ("privengine.pate.run", "train_baseline", "student"),
        ("privengine.pate.run", "train_student", "student"),
        ("privengine.pate.run", "predict", "evaluation"),
        ("privengine.pate.run", "analyse", "accounting"),
    ],
}


class PhaseClock:
    """Exclusive wall time per phase: a call inside another wrapped call is charged to the inner phase only (a stack
    per thread; calls from helper threads, e.g. a calibration thread, are charged to their own phase)."""

    def __init__(self):
        self.totals: dict[str, float] = {}
        self._local = threading.local()
        self._lock = threading.Lock()

    def wrap(self, fn, phase: str):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            stack = self._local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # time spent in wrapped calls nested in this one
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                nested = stack.pop()
                if stack:
                    stack[-1] += elapsed
                with self._lock:
                    self.totals[phase] = self.totals.get(phase, 0.0) + elapsed - nested
        return timed


@contextlib.contextmanager
def instrumented(mechanism: str, clock: PhaseClock):
    """The mechanism's :data:`PHASES` functions wrapped by ``clock`` while the block runs."""
    undo = []
    for module_name, attr, phase in PHASES[mechanism]:
        owner = importlib.import_module(module_name)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        original = getattr(owner, name)
        setattr(owner, name, clock.wrap(original, phase))
        undo.append((owner, name, original))
    try:
        yield
    finally:
        for owner, name, original in reversed(undo):
            setattr(owner, name, original)


class _Reporter(ReleaseCharge):
    """The reporter contract kept in memory (nothing stored): the run's device, no stop."""

    def __init__(self, device: str):
        self.device = device

    def metric(self, step, **values):
        pass

    def artifact(self, name, data):
        pass

    def log(self, text):
        pass

    def progress(self, fraction, text=""):
        pass

    def should_stop(self):
        return False


def quick_overrides(mechanism: str, config, train_limit: int) -> dict:
    """The ``--quick`` changes of a preset (see the module docstring)."""
    if mechanism == "dpsgd":
        n_private = round(train_limit * (1 - config.public_fraction))
        n_public = train_limit - n_private
        return {"train_limit": train_limit, "batch_size": min(config.batch_size, max(1, n_private // 4))} | (
            {"projection_rank": min(config.projection_rank, n_public - 1)} if config.model == "scatter_mlp" else {})
    if mechanism == "pate":
        return {"queries": min(config.queries, 200), "teacher_epochs": min(config.teacher_epochs, 2),
                "student_epochs": min(config.student_epochs, 2), "baseline": False}
    return {}


def headline(summary: dict) -> str:
    """The run's main utility number, for the line under its phases."""
    for key in ("best_test_acc", "student_accuracy", "test_acc"):
        if isinstance(summary.get(key), (int, float)) and math.isfinite(summary[key]):
            return f"{key} {summary[key]:.4f}"
    return "no utility number in the summary"


def bench(spec: str, args) -> None:
    from privengine import registry
    from privengine.device import resolve_device

    mechanism, _, preset = spec.partition(":")
    mech = registry.get(mechanism)
    if mechanism not in PHASES:
        raise SystemExit(f"no phases declared for {mechanism} (bench_presets knows {', '.join(PHASES)})")
    config = mech.preset_config(preset)
    device = resolve_device(args.device)
    changes = {"device": args.device, "data_root": args.data_root}
    if args.quick:
        changes |= quick_overrides(mechanism, config, args.train_limit)
    config = config.replace(**changes).validate()
    clock = PhaseClock()
    profiler = cProfile.Profile() if args.profile else None
    t0 = time.perf_counter()
    with instrumented(mechanism, clock), (profiler or contextlib.nullcontext()):
        summary = mech.load_run()(config, _Reporter(device.id))
    total = time.perf_counter() - t0
    other = total - sum(clock.totals.values())
    phases = [(p, clock.totals.get(p, 0.0)) for p in ORDER] + [("other", other)]
    shrunk = ", ".join(f"{k}={v}" for k, v in changes.items() if k not in ("device", "data_root"))
    print(f"{spec}{f' (quick: {shrunk})' if shrunk else ''} on {device.name}: {total:.1f} s; {headline(summary)}")
    for name, seconds in phases:
        print(f"  {name:<12} {seconds:8.2f} s  {100 * seconds / total:5.1f} %")
    if profiler is not None:
        print(f"  host functions by own time (cProfile; a device wait shows in the call that waits), top {args.profile}:")
        stats = pstats.Stats(profiler, stream=sys.stdout)
        stats.sort_stats("tottime").print_stats(args.profile)
        print(f"  the engine's functions by cumulative time, top {args.profile}:")
        stats.sort_stats("cumtime").print_stats("privengine", args.profile)


def process_start(device_id: str) -> list[tuple[str, float]]:
    """Seconds of the one-time costs of a fresh process, paid by whichever preset runs first, timed here so that no
    preset's phases carry them: the device's start (context, allocator, the cuBLAS and cuFFT libraries' first
    calls; nothing on a CPU), and torch's lazy import of ``torch._dynamo``, which the first step of any
    ``torch.optim`` optimizer triggers (measured at 5-6 s on an H200 machine, 1.3 s on two CPU cores)."""
    import torch

    costs = []
    t0 = time.perf_counter()
    if device_id.startswith("cuda"):
        a = torch.ones(64, 64, device=device_id)
        float((a @ a).sum() + torch.fft.rfft2(a).abs().sum())
    costs.append(("device start", time.perf_counter() - t0))
    t0 = time.perf_counter()
    import torch._dynamo  # noqa: F401  (what torch.optim's first step imports)
    costs.append(("torch._dynamo import", time.perf_counter() - t0))
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--data-root", default=os.environ.get("PRIVENGINE_DATA", ""))
    parser.add_argument("--presets", default=DEFAULT_PRESETS, help="mechanism:preset, comma-separated")
    parser.add_argument("--quick", action="store_true", help="shrink each preset to finish on a CPU")
    parser.add_argument("--train-limit", type=int, default=4000, help="DP-SGD's private+public examples in --quick")
    parser.add_argument("--cold", action="store_true", help="a fresh PRIVENGINE_HOME: the scattering is computed")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: the engine's default)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also print each preset's N host functions with the most own time (cProfile)")
    args = parser.parse_args()
    if not args.data_root:
        raise SystemExit("--data-root (or $PRIVENGINE_DATA) must name the folder holding MNIST / FashionMNIST")
    with tempfile.TemporaryDirectory(prefix="bench-presets-") as fresh:
        if args.cold:
            os.environ["PRIVENGINE_HOME"] = fresh
        import torch

        from privengine.device import configure_torch_threads

        configure_torch_threads()
        if args.threads:
            torch.set_num_threads(args.threads)
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, PRIVENGINE_HOME "
              f"{os.environ.get('PRIVENGINE_HOME', '~/.privengine')}{' (fresh: cold cache)' if args.cold else ''}")
        costs = process_start(args.device)
        print("once per process, before the first preset: " + ", ".join(f"{name} {t:.2f} s" for name, t in costs))
        for spec in args.presets.split(","):
            bench(spec.strip(), args)


if __name__ == "__main__":
    main()
