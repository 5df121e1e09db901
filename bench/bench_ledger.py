"""Benchmark: how fast the privacy ledger answers for a source with many runs (issue 37: 1 000 runs in under 200 ms,
in the process that built it).

Builds a fresh store (a temporary PRIVENGINE_HOME) with ``--runs`` DP-SGD-like runs on ``mnist/train``: hand-made
finished runs whose headline claims carry the events of a DP-SGD history (``steps`` Poisson-sampled Gaussian steps at
rate ``q``), ``--recipes`` settings of sigma, each run ``--runs / --recipes`` times in a row (its seeds, as a sweep
stores them). Then, in this process:

  build      the first query: every run composed (PLD, in at most ledger.SERIES_STEPS batches)
  unchanged  a second query, nothing new: answered from the per-process cache
  new run    a query after one more run of the last setting (another seed): that run composed into the cached PLD,
             ``--repeats`` times (one more run each time): the median and the slowest
  check      a launch of one more such run checked against the ledger (``check_launch``: the ledger composed with
             the launch's planned events, as the Launch button and ``run`` do), ``--repeats`` times

and prints each in ms, the ratios, and the ledger's epsilon against the sum of the runs' own epsilons. Before each
timed query the garbage the build left is collected (``gc.collect()``), and the time Python's cyclic garbage
collector took inside the query is printed beside it: a full collection walks every object of the process (about
0.2 s with torch and 1 000 runs loaded), whichever call triggers it, so it is shown apart, not hidden. So is this
process's CPU time, which says how much of the wall time was its own work when other processes share the cores.

Run: python bench/bench_ledger.py [--runs 1000] [--recipes 10] [--steps 500] [--q 0.01] [--repeats 5]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dp_accounting import dp_event  # noqa: E402

from privengine.accounting import events  # noqa: E402
from privengine.claims import PrivacyClaim  # noqa: E402
from privengine.ledger import check_launch, ledger_of  # noqa: E402
from privengine.store import RunStore  # noqa: E402

SOURCE = "mnist/train"


def recipe_claim(sigma: float, q: float, steps: int) -> PrivacyClaim:
    """The headline claim of a run of ``steps`` Poisson-sampled Gaussian steps: its events and their epsilon."""
    event = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)
    json_events = (events.to_json(event),)
    epsilon = events.epsilon_of_json(json_events, delta=1e-5, relation="add_or_remove_one").epsilon
    return PrivacyClaim("all 1 models of this run released together", epsilon, 1e-5, events.PLD, "add or remove one",
                        headline=True, events=json_events, relation="add_or_remove_one")


def store_run(store: RunStore, claim: PrivacyClaim, seed: int) -> str:
    """A finished DP-SGD-like run on ``SOURCE`` whose headline claim is ``claim``."""
    run_id = store.create_run("dpsgd", {"dataset": "mnist", "seed": seed}, data_source=SOURCE)
    store.mark_ended(run_id, "finished", summary={"privacy": [claim.to_dict()]})
    return run_id


class Collector:
    """Milliseconds Python's cyclic garbage collector spent since :meth:`reset` (``gc.callbacks``)."""

    def __init__(self):
        self.ms, self._start = 0.0, 0.0
        gc.callbacks.append(self._note)

    def _note(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.ms += 1000 * (time.perf_counter() - self._start)

    def reset(self) -> None:
        gc.collect()
        self.ms = 0.0


def timed(collector: Collector, query):
    """``(query(), ms, of which garbage collection ms, CPU ms of this process)``, after collecting what came
    before. The CPU time says how much of the wall time was this process's own work when other processes share the
    cores."""
    collector.reset()
    start, cpu = time.perf_counter(), time.process_time()
    answer = query()
    return answer, 1000 * (time.perf_counter() - start), collector.ms, 1000 * (time.process_time() - cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--recipes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--q", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    os.environ["PRIVENGINE_HOME"] = tempfile.mkdtemp(prefix="bench-ledger-")
    store = RunStore()
    sigmas = [1.2 + 0.1 * i for i in range(args.recipes)]
    claims = [recipe_claim(sigma, args.q, args.steps) for sigma in sigmas]
    per_recipe = args.runs // args.recipes
    for claim in claims:
        for seed in range(per_recipe):
            store_run(store, claim, seed)
    print(f"{per_recipe * len(sigmas)} runs stored ({len(sigmas)} settings, sigma {sigmas[0]:.1f}-{sigmas[-1]:.1f}, "
          f"q = {args.q}, {args.steps} steps each)")
    collector = Collector()
    query = lambda: ledger_of(store, SOURCE)  # noqa: E731
    ledger, build_ms, build_gc, build_cpu = timed(collector, query)
    _, unchanged_ms, unchanged_gc, unchanged_cpu = timed(collector, query)
    new, checks = [], []
    for seed in range(per_recipe, per_recipe + args.repeats):
        store_run(store, claims[-1], seed)
        grown, *timing = timed(collector, query)
        new.append(tuple(timing))
    for _ in range(args.repeats):
        check, *timing = timed(collector, lambda: check_launch(store, SOURCE, claims[-1].events, claims[-1].relation))
        checks.append(tuple(timing))
    shares = sum(s.epsilon for s in grown.shares)
    print(f"build (first query):       {build_ms:10.0f} ms   (gc {build_gc:.0f} ms, cpu {build_cpu:.0f} ms)   "
          f"ledger ε = {ledger.epsilon:.4g} at δ = {ledger.delta:g}, {len(ledger.over_time)} chart steps")
    print(f"unchanged (second query):  {unchanged_ms:10.1f} ms   (gc {unchanged_gc:.0f} ms, cpu {unchanged_cpu:.0f} "
          f"ms)   ({build_ms / unchanged_ms:.0f}x faster than the build)")
    print(f"one new run composed:      {_median(new, 0):10.0f} ms   median of {len(new)} (cpu {_median(new, 2):.0f} "
          f"ms), slowest {max(new)[0]:.0f} ms (gc {max(new)[1]:.0f} ms)   ledger ε = {grown.epsilon:.4g} over "
          f"{len(grown.shares)} runs, against {shares:.4g} summed alone")
    print(f"launch check (one run):    {_median(checks, 0):10.0f} ms   median of {len(checks)} (cpu "
          f"{_median(checks, 2):.0f} ms), slowest {max(checks)[0]:.0f} ms (gc {max(checks)[1]:.0f} ms)   adds ε "
          f"{check.adds:.3g} (alone {check.alone:.3g})")


def _median(timings: list[tuple[float, float, float]], column: int) -> float:
    return statistics.median(t[column] for t in timings)


if __name__ == "__main__":
    main()
