"""Benchmark: uncached PRV epsilons, the safe domain computed once (epsilon_of) against twice (before), in one process.

The histories are the Fashion-MNIST DP-SGD preset's live epsilons: sigma = 3.4, q = 8192 / 59400 and steps
10, 24, ..., 290 (21 evaluation points), at delta = 1e-5. "Before" is what epsilon_of did until the safe domain
was shared: ``check_prv_tractable`` (Gopi et al.'s safe domain size L from Opacus' ``compute_safe_domain_size``),
then Opacus' plain ``PRVAccountant.get_epsilon``, which computes L again. "Now" is epsilon_of's uncached body.
Prints the best of ``--repeats`` rounds of each (the two alternate within a round), the ratio now / before (below
1: faster) and whether every epsilon is equal to the bit.

    python bench/bench_prv.py
    python bench/bench_prv.py --sigma 1.1 --sample-rate 0.004 --steps 100 10000 500 --repeats 3
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from opacus.accountants import PRVAccountant  # noqa: E402

import privengine.accounting.subsampled_gaussian as accounting  # noqa: E402
from privengine.accounting.opacus_names import PRV_EPS_ERROR  # noqa: E402


def before(history: accounting.History, delta: float) -> float:
    """The check, then Opacus' plain accountant: L computed twice."""
    accounting.check_prv_tractable(history, delta)
    acc = PRVAccountant()
    acc.history = list(history)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "divide by zero encountered in log", RuntimeWarning)
        return float(acc.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR))


def now(history: accounting.History, delta: float) -> float:
    """epsilon_of without its cache: L computed once."""
    return accounting._epsilon.__wrapped__(tuple(history), "prv", delta)[0]


def timed(fn, histories: list[accounting.History], delta: float) -> tuple[float, list[float]]:
    start = time.perf_counter()
    epsilons = [fn(history, delta) for history in histories]
    return time.perf_counter() - start, epsilons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigma", type=float, default=3.4)
    parser.add_argument("--sample-rate", type=float, default=8192 / 59400)
    parser.add_argument("--steps", type=int, nargs=3, default=(10, 291, 14), metavar=("START", "STOP", "STEP"))
    parser.add_argument("--delta", type=float, default=1e-5)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    histories = [[(args.sigma, args.sample_rate, steps)] for steps in range(*args.steps)]
    best = {"before": float("inf"), "now": float("inf")}
    equal = True
    for _ in range(args.repeats):
        t_before, eps_before = timed(before, histories, args.delta)
        t_now, eps_now = timed(now, histories, args.delta)
        best["before"], best["now"] = min(best["before"], t_before), min(best["now"], t_now)
        equal = equal and eps_before == eps_now
    print(f"{len(histories)} uncached PRV epsilons (sigma = {args.sigma:g}, q = {args.sample_rate:.4g}, steps "
          f"{histories[0][0][2]}..{histories[-1][0][2]}, delta = {args.delta:g}), best of {args.repeats}:")
    print(f"  before (check + Opacus, L twice): {best['before']:.3f} s")
    print(f"  now (epsilon_of, L once):         {best['now']:.3f} s")
    print(f"  ratio now / before: {best['now'] / best['before']:.3f}; epsilons equal to the bit: {equal}")


if __name__ == "__main__":
    main()
