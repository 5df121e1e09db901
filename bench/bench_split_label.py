"""Benchmark split_label: Marvell's solver vs a dense grid search, and training-step time with Marvell vs without.

1. Solver. 40 seeded problems shaped like Fashion-MNIST cut-layer batches
   (d = 32, 1-3% positives, class variances and ||Delta||^2 spanning two decades,
   power P = 1.5 ||Delta||^2 as in threshold mode). privengine's ``marvell.solve``
   is timed against a dense 4-D grid over (l1_pos, l2_pos, l1_neg, l2_neg) written
   here from the problem statement (0 and log-spaced values per axis; every
   feasible grid point evaluated, no structure assumed), and the sumKL each finds
   is compared. The grid's time grows
   as points^4 and its error shrinks slowly; the ratio is printed at three densities.
2. Training step. One split-learning step (passive forward, active update and
   protection, passive backward) on Fashion-MNIST-shaped data (784 features,
   batch 600, bottom 784-128-32, linear top, 1.8% positives), timed for each
   protection in interleaved rounds; then the same with the passive party's
   attacks (what a run also does per batch).

Run: python bench/bench_split_label.py   (CPU, one torch thread)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine.split_label import marvell  # noqa: E402
from privengine.split_label.attacks import attack_scores, leak_aucs, pick_reference  # noqa: E402
from privengine.split_label.parties import ActiveParty, PassiveParty  # noqa: E402
from privengine.split_label.protections import make_protection  # noqa: E402

SEED, N_PROBLEMS, DIM = 0, 40, 32
BATCH, FEATURES, WIDTHS, POSITIVE_RATE = 600, 784, (128, 32), 0.018
WARMUP, ROUNDS, STEPS_PER_ROUND = 20, 8, 25


def problems(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        g = float(10 ** rng.uniform(-6, -4))
        out.append(dict(p=float(rng.uniform(0.01, 0.03)), u=float(g * 10 ** rng.uniform(-3, -1)),
                        v=float(g * 10 ** rng.uniform(-3, -1)), g_norm_square=g, power=1.5 * g, dim=DIM))
    return out


def grid_search(p, u, v, g_norm_square, power, dim, *, points: int) -> float:
    """Smallest sumKL over a dense grid of the feasible box, evaluated in chunks (no structure assumed).

    Each axis is 0 plus ``points - 1`` log-spaced values from 1e-6 to 1 times the
    axis' largest feasible value (the optimal lambdas span several decades).
    """
    highs = (power / p, power / (p * (dim - 1)), power / (1 - p), power / ((1 - p) * (dim - 1)))
    axes = [np.concatenate([[0.0], np.geomspace(1e-6 * h, h, points - 1)]) for h in highs]
    l1p, l2p = np.meshgrid(axes[0], axes[1], indexing="ij")
    l1p, l2p = l1p.ravel(), l2p.ravel()
    best = np.inf
    for l1n in axes[2]:
        l1n_col = np.full_like(l1p, l1n)
        for l2n in axes[3]:
            spent = p * (l1p + (dim - 1) * l2p) + (1 - p) * (l1n + (dim - 1) * l2n)
            ok = (spent <= power) & (l2p <= l1p) & (l2n <= l1n)
            if not ok.any():
                continue
            a, b, big_a, big_b = l2n + u, l2p[ok] + v, l1n_col[ok] + u, l1p[ok] + v
            f = (dim - 1) * (a / b + b / a) + (big_a + g_norm_square) / big_b + (big_b + g_norm_square) / big_a
            best = min(best, float(f.min()) / 2 - dim)
    return best


def bench_solver() -> None:
    cases = problems(N_PROBLEMS, SEED)
    t0 = time.perf_counter()
    solved = [marvell.solve(**c)[1] for c in cases]
    solve_s = (time.perf_counter() - t0) / len(cases)
    t0 = time.perf_counter()
    thresholds = [marvell.solve_threshold(c["p"], c["u"], c["v"], c["g_norm_square"], DIM, threshold=0.64)
                  for c in cases]
    threshold_s = (time.perf_counter() - t0) / len(cases)
    rounds = np.mean([1 + round(np.log(t.power_scale) / np.log(marvell.THRESHOLD_GROWTH)) for t in thresholds])
    print(f"marvell.solve: {solve_s * 1e3:.3f} ms per problem; threshold mode (0.64): {threshold_s * 1e3:.3f} ms "
          f"per batch ({rounds:.1f} solves on average)")
    for points in (16, 32, 64):
        subset = cases[:6]
        t0 = time.perf_counter()
        grid = [grid_search(**c, points=points) for c in subset]
        grid_s = (time.perf_counter() - t0) / len(subset)
        gap = max((g - s) / s for g, s in zip(grid, solved))
        never_better = all(g >= s * (1 - 1e-9) for g, s in zip(grid, solved))
        print(f"dense grid {points}^4 = {points ** 4:,} points: {grid_s * 1e3:.1f} ms per problem -> "
              f"solver is {grid_s / solve_s:,.0f}x faster; grid's sumKL up to {gap:.1%} above the solver's "
              f"(grid never better: {never_better})")


def make_parties(protection: str, generator: torch.Generator):
    kind, args = {"none": ("none", {}), "max norm": ("max_norm", {}), "iso t=1": ("iso", dict(iso_scale=1.0)),
                  "Marvell sumKL<=0.64": ("marvell", dict(sumkl_threshold=0.64)),
                  "Marvell s=4": ("marvell", dict(power_scale=4.0))}[protection]
    cpu = torch.device("cpu")
    passive = PassiveParty(FEATURES, WIDTHS, lr=0.01, init_std=0.01, device=cpu, generator=generator)
    active = ActiveParty(WIDTHS[-1], 0, make_protection(kind, **args), lr=0.01, init_std=0.01, device=cpu,
                         generator=generator)
    return passive, active


def bench_steps() -> None:
    gen = torch.Generator().manual_seed(SEED)
    x = torch.rand(BATCH * 10, FEATURES, generator=gen)
    y = (torch.rand(BATCH * 10, generator=gen) < POSITIVE_RATE).float()
    y[::BATCH // 10] = 1.0  # at least a few positives per batch
    rng = np.random.default_rng(SEED)
    names = ["none", "max norm", "iso t=1", "Marvell sumKL<=0.64", "Marvell s=4"]
    for with_attacks in (False, True):
        parties = {name: make_parties(name, torch.Generator().manual_seed(SEED)) for name in names}
        times = {name: [] for name in names}

        def step(name: str, i: int) -> None:
            passive, active = parties[name]
            sl = slice((i % 10) * BATCH, (i % 10 + 1) * BATCH)
            result = active.train_step(passive.forward(x[sl]), y[sl], gen)
            if with_attacks:
                unprotected_first = passive.first_layer_gradient(result.true_grad)
            seen_first = passive.backward(result.message)
            if with_attacks:
                ref = pick_reference(y[sl], rng)
                leak_aucs(attack_scores({"cut": result.message.grad, "first": seen_first}, ref), y[sl])
                leak_aucs(attack_scores({"cut": result.true_grad, "first": unprotected_first}, ref), y[sl])

        for name in names:
            for i in range(WARMUP):
                step(name, i)
        for _ in range(ROUNDS):  # interleaved, so load changes on a shared machine hit every protection alike
            for name in names:
                t0 = time.perf_counter()
                for i in range(STEPS_PER_ROUND):
                    step(name, i)
                times[name].append((time.perf_counter() - t0) / STEPS_PER_ROUND)
        base = np.median(times["none"])
        label = "with the attacks of a run" if with_attacks else "training only"
        print(f"step time ({label}), median of {ROUNDS} rounds x {STEPS_PER_ROUND} steps, batch {BATCH}:")
        for name in names:
            t = np.median(times[name])
            print(f"  {name:22s} {t * 1e3:7.2f} ms  = {t / base:5.2f}x no protection")


if __name__ == "__main__":
    torch.set_num_threads(1)
    bench_solver()
    bench_steps()
