"""Benchmark: a run's uncached PRV epsilons against Opacus' plain accountant, in one process.

The histories are the Fashion-MNIST DP-SGD preset's live epsilons: sigma = 3.4, q = 8192 / 59400 and steps
10, 24, ..., 290 (21 evaluation points), at delta = 1e-5, asked in that order as a run asks them. Three arms:

- "Opacus": Opacus' plain ``PRVAccountant.get_epsilon`` (no memory check), which computes Gopi et al.'s safe domain
  size L inside, from the RDP of (sigma, q) at its orders, twice per history (the history's and one step's);
- "RDP afresh": epsilon_of's uncached body (the memory check and the discretisation share one L) with the one-step
  RDP of (sigma, q) computed anew for each history (what epsilon_of did before opacus_rdp kept it);
- "now": the same with the one-step RDP kept per process (cleared once per round, so the round's first history
  computes it, as a run's first evaluation does).

Prints the best of ``--repeats`` rounds of each (the arms alternate within a round), the ratios against Opacus (below
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
from privengine.accounting.opacus_rdp import one_step_rdp  # noqa: E402


def opacus(history: accounting.History, delta: float) -> float:
    """Opacus' plain PRV accountant."""
    acc = PRVAccountant()
    acc.history = list(history)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "divide by zero encountered in log", RuntimeWarning)
        return float(acc.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR))


def now(history: accounting.History, delta: float) -> float:
    """epsilon_of without its cache: L computed once, from the kept one-step RDP."""
    return accounting._epsilon.__wrapped__(tuple(history), "prv", delta)[0]


def rdp_afresh(history: accounting.History, delta: float) -> float:
    """:func:`now` with the one-step RDP computed anew."""
    one_step_rdp.cache_clear()
    return now(history, delta)


def timed(fn, histories: list[accounting.History], delta: float) -> tuple[float, list[float]]:
    one_step_rdp.cache_clear()
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
    arms = {"Opacus": opacus, "RDP afresh": rdp_afresh, "now": now}
    best = dict.fromkeys(arms, float("inf"))
    equal = True
    for _ in range(args.repeats):
        epsilons = []
        for name, fn in arms.items():
            elapsed, eps = timed(fn, histories, args.delta)
            best[name] = min(best[name], elapsed)
            epsilons.append(eps)
        equal = equal and all(eps == epsilons[0] for eps in epsilons)
    print(f"{len(histories)} uncached PRV epsilons (sigma = {args.sigma:g}, q = {args.sample_rate:.4g}, steps "
          f"{histories[0][0][2]}..{histories[-1][0][2]}, delta = {args.delta:g}), best of {args.repeats}:")
    for name in arms:
        print(f"  {name:<11} {best[name]:.3f} s   ratio to Opacus {best[name] / best['Opacus']:.3f}")
    print(f"  epsilons equal to the bit: {equal}")


if __name__ == "__main__":
    main()
