"""Benchmark: how fast the privacy ledger answers for a source with many runs (issue 37: 1 000 runs in under 200 ms,
in the process that built it).

Builds a fresh store (a temporary PRIVENGINE_HOME) with ``--runs`` DP-SGD-like runs on ``mnist/train``: hand-made
finished runs whose headline claims carry the events of a DP-SGD history (``steps`` Poisson-sampled Gaussian steps at
rate ``q``), ``--recipes`` settings of sigma, each run ``--runs / --recipes`` times in a row (its seeds, as a sweep
stores them). Then, in this process:

  build      the first query: every run composed (PLD, in at most ledger.SERIES_STEPS batches)
  unchanged  a second query, nothing new: answered from the per-process cache
  new run    a query after one more run of the last setting (another seed): that run composed into the cached PLD

and prints each in ms, the ratios, and the ledger's epsilon against the sum of the runs' own epsilons.

Run: python bench/bench_ledger.py [--runs 1000] [--recipes 10] [--steps 500] [--q 0.01]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dp_accounting import dp_event  # noqa: E402

from privengine.accounting import events  # noqa: E402
from privengine.claims import PrivacyClaim  # noqa: E402
from privengine.ledger import ledger_of  # noqa: E402
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


def timed(store: RunStore):
    start = time.perf_counter()
    ledger = ledger_of(store, SOURCE)
    return ledger, 1000 * (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--recipes", type=int, default=10)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--q", type=float, default=0.01)
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
    ledger, build_ms = timed(store)
    _, unchanged_ms = timed(store)
    store_run(store, claims[-1], per_recipe)
    grown, new_ms = timed(store)
    shares = sum(s.epsilon for s in grown.shares)
    print(f"build (first query):       {build_ms:10.0f} ms   ledger ε = {ledger.epsilon:.4g} at δ = "
          f"{ledger.delta:g}, {len(ledger.over_time)} chart steps")
    print(f"unchanged (second query):  {unchanged_ms:10.1f} ms   ({build_ms / unchanged_ms:.0f}x faster than the "
          "build)")
    print(f"one new run composed:      {new_ms:10.0f} ms   ({build_ms / new_ms:.1f}x faster than the build); ledger "
          f"ε = {grown.epsilon:.4g} over {len(grown.shares)} runs, against {shares:.4g} summed alone")


if __name__ == "__main__":
    main()
