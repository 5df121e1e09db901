"""Benchmark: what the admission lock across processes (the store's ``admission_lock``) adds to admitting a launch
(issue 37, item 3: a launch is checked against its source's budget and its run stored as one step).

Builds a fresh store (a temporary PRIVENGINE_HOME) with ``--runs`` finished DP-SGD-like runs on ``mnist/train``
(bench_ledger's runs) and a budget on it, then, in this process, ``--launches`` times each, alternating:

  with lock     ``ledger.budget.admitted`` around ``create_run``, as every launch path does
  without lock  the same with the store's admission lock replaced by nothing (the lock per process alone)
  lock alone    the admission lock taken and released, nothing else

and prints the median of each in ms, and the median difference of the pairs (one with, the next without). Each
launch's run is ended and deleted after it, so every launch meets the same ledger.

Run: python bench/bench_admission.py [--runs 100] [--launches 20]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_ledger import SOURCE, recipe_claim, store_run  # noqa: E402
from privengine.dpsgd.config import DPSGDConfig  # noqa: E402
from privengine.ledger import budget, set_budget  # noqa: E402
from privengine.store import RunStore, admission_lock  # noqa: E402

CONFIG = {"dataset": "mnist", "noise_mode": "sigma", "epochs": 1.0, "n_seeds": 1}  # planned without calibration


def admit(store: RunStore, config: DPSGDConfig) -> float:
    """ms to admit one launch of ``config`` and store its run; the run is then ended and deleted."""
    start = time.perf_counter()
    with budget.admitted(store, "dpsgd", [config]):
        run_id = store.create_run("dpsgd", config.to_dict(), data_source=SOURCE)
    elapsed = 1000 * (time.perf_counter() - start)
    store.mark_ended(run_id, "failed", error="bench")
    store.delete_run(run_id)
    return elapsed


def lock_alone(store: RunStore) -> float:
    """ms to take and release the store's admission lock."""
    start = time.perf_counter()
    with admission_lock(store.path, budget.ADMISSION_WAIT_S):
        pass
    return 1000 * (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--launches", type=int, default=20)
    args = parser.parse_args()
    os.environ["PRIVENGINE_HOME"] = tempfile.mkdtemp(prefix="bench-admission-")
    store = RunStore()
    claim = recipe_claim(1.2, 0.01, 500)
    for seed in range(args.runs):
        store_run(store, claim, seed)
    set_budget(store, SOURCE, 1e6, 1e-5)
    config = DPSGDConfig.from_dict(CONFIG)
    admit(store, config)  # the first admission plans the config and builds the ledger: not timed
    with_lock, without_lock, alone = [], [], []
    locked = budget.admission_lock
    for _ in range(args.launches):
        with_lock.append(admit(store, config))
        budget.admission_lock = lambda path, wait_s: contextlib.nullcontext()
        try:
            without_lock.append(admit(store, config))
        finally:
            budget.admission_lock = locked
        alone.append(lock_alone(store))
    med = {name: statistics.median(times) for name, times in
           (("with", with_lock), ("without", without_lock), ("alone", alone))}
    print(f"{args.launches} launches on {SOURCE}, a ledger of {args.runs} runs (medians)")
    print(f"with lock:     {med['with']:8.2f} ms")
    print(f"without lock:  {med['without']:8.2f} ms")
    paired = statistics.median(a - b for a, b in zip(with_lock, without_lock))
    print(f"difference:    {paired:8.2f} ms  (median of the pairs; medians' ratio {med['with'] / med['without']:.3f})")
    print(f"lock alone:    {med['alone']:8.2f} ms")


if __name__ == "__main__":
    main()
