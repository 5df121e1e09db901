"""Tuning cost of the DP-SGD recipes published in docs/results/, and the ε of results of one recipe published together.

A run's headline covers the models it released. Publishing a recipe chosen by comparing candidates trained on the
same private split, judged on its test images, is covered only by composing every candidate (dpsgd.md, "Published
figures and every ε behind them"); results of one recipe on one split published side by side (the same sweep on the
GPU and on the CPU: the noise keys include the device, so they are independent releases) are covered only by
composing them too. This script lists, for each published recipe, the runs the documents record and composes them:

- each run's models are the Poisson-subsampled Gaussian histories ``(sigma, q, steps)`` it trained with, ``q`` =
  batch / 59 400 (the 60 000 training images of MNIST or Fashion-MNIST minus the 1 % declared public, as the runs
  had it) and ``steps = int(epochs / q)`` (Opacus' convention);
- ``sigma`` is calibrated to the run's per-model target as the runs calibrated it
  (:func:`privengine.accounting.subsampled_gaussian.calibrate_noise_multiplier`, PRV, δ = 1e-5; private
  normalisation first charges its Gaussian release of the channel statistics, noise multiplier 8);
- the composition is :func:`~privengine.accounting.subsampled_gaussian.merge` of every model's history, converted by
  :func:`~privengine.accounting.subsampled_gaussian.epsilon_of` with the runs' accountant (Opacus PRV, δ = 1e-5,
  add/remove one private example).

PATE's figures are composed a priori by ``pate_tuning_cost.py`` (its functions, imported here for the PATE preset
that docs/results/gpu.md publishes on the GPU and on the CPU).

Run from the repository root: PYTHONPATH=. python docs/results/tuning_cost.py
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pate_tuning_cost as pate
from privengine.accounting.subsampled_gaussian import History, calibrate_noise_multiplier, epsilon_of, merge

DELTA = 1e-5
ACCOUNTANT = "prv"
N_PRIVATE = 59_400  # 60 000 training images minus the 1 % declared public: the scattering runs' private split
N_LINREG = 9_500  # the embedded regression's private examples
PRIVATE_NORMALISATION = ((8.0, 1.0, 1),)  # one Gaussian release of the channel statistics, noise multiplier 8


@dataclass(frozen=True)
class Run:
    """Models trained on the private split with one recipe: ``models`` of them, each at ``target`` ε per model."""

    label: str
    where: str  # the document and section that record it
    batch: int
    epochs: int
    target: float = 3.0
    models: int = 1
    prefix: tuple[tuple[float, float, int], ...] = ()
    n_private: int = N_PRIVATE

    def history(self) -> History:
        """Every model's history: the prefix, then ``steps`` steps at ``(sigma, q)``, ``models`` times over."""
        q = self.batch / self.n_private
        steps = int(self.epochs / q)
        sigma = calibrate_noise_multiplier(target_epsilon=self.target, delta=DELTA, sample_rate=q, steps=steps,
                                           accountant=ACCOUNTANT, prefix=list(self.prefix))
        return merge([list(self.prefix) + [(sigma, q, steps)]] * self.models)


def composed(runs: list[Run]) -> float:
    """ε (PRV, δ = 1e-5) of releasing every model of ``runs`` together."""
    return epsilon_of(merge([run.history() for run in runs]), accountant=ACCOUNTANT, delta=DELTA)[0]


DPSGD = "dpsgd.md"
FMNIST_CANDIDATES = [
    Run("lr 2", f"{DPSGD}, ScatterNet + linear at ε = 3, first pass", 8192, 40),
    Run("lr 4", f"{DPSGD}, ScatterNet + linear at ε = 3, first pass", 8192, 40),
    Run("lr 8", f"{DPSGD}, ScatterNet + linear at ε = 3, first pass", 8192, 40),
    Run("lr 16, no EMA", f"{DPSGD}, second pass, how the recipes were chosen", 8192, 40),
    Run("lr 16, EMA 0.97", f"{DPSGD}, second pass, how the recipes were chosen", 8192, 40),
    Run("lr 16, EMA 0.9 (the preset)", f"{DPSGD}, second pass, how the recipes were chosen", 8192, 40),
    Run("scatter_mlp, 60 epochs, lr 4", f"{DPSGD}, fourth pass, scatter_mlp on Fashion-MNIST", 8192, 60),
    Run("scatter_mlp, 60 epochs, lr 8", f"{DPSGD}, fourth pass, scatter_mlp on Fashion-MNIST", 8192, 60),
    Run("scatter_mlp, 60 epochs, lr 16", f"{DPSGD}, fourth pass, scatter_mlp on Fashion-MNIST", 8192, 60),
]
# The ε 1 recipe (the earlier preset's lr 8, no EMA) was published after the six linear candidates, with its own run
FMNIST_EPS1 = Run("lr 8, no EMA, ε 1, seeds 0-2", f"{DPSGD}, second pass, the table of the issue", 8192, 40,
                  target=1.0, models=3)
MNIST_SECOND_PASS = [
    Run("batch 8192, lr 4 (the first preset)", f"{DPSGD}, second pass, how the recipes were chosen", 8192, 40),
    Run("batch 4096, lr 8 (T&B's recipe)", f"{DPSGD}, second pass, how the recipes were chosen", 4096, 40),
    Run("T&B's, private normalisation", f"{DPSGD}, second pass, how the recipes were chosen", 4096, 40,
        prefix=PRIVATE_NORMALISATION),
    Run("T&B's, EMA 0.9", f"{DPSGD}, second pass, how the recipes were chosen", 4096, 40),
]
MNIST_THIRD_PASS = [
    Run("ghost clipping, no change", f"{DPSGD}, third pass, six more candidates", 4096, 40),
    Run("public warm start, 5 epochs", f"{DPSGD}, third pass, six more candidates", 4096, 40),
    Run("60 epochs", f"{DPSGD}, third pass, six more candidates", 4096, 60),
    Run("batch 2048, lr 4", f"{DPSGD}, third pass, six more candidates", 2048, 40),
    Run("lr 4", f"{DPSGD}, third pass, six more candidates", 4096, 40),
    Run("lr 16", f"{DPSGD}, third pass, six more candidates", 4096, 40),
]
MNIST_FOURTH_PASS = [
    Run("cosine schedule", f"{DPSGD}, fourth pass", 4096, 40),
    Run("cosine schedule, lr 16", f"{DPSGD}, fourth pass", 4096, 40),
    Run("batch 8192, lr 16", f"{DPSGD}, fourth pass", 8192, 40),
    Run("public normalisation, seeds 0-2", f"{DPSGD}, fourth pass", 4096, 40, models=3),
    Run("scatter_cnn, lr 4 (stopped at step 58, counted in full)", f"{DPSGD}, fourth pass", 4096, 40),
    Run("public-PCA projection (scratch script)", f"{DPSGD}, fourth pass", 4096, 40),
    Run("public-PCA projection, batch 1024, lr 2", f"{DPSGD}, fourth pass", 1024, 40),
]
MNIST_FIFTH_PASS = [
    Run("scatter_mlp prototype, lr 4, seeds 0-2", f"{DPSGD}, scatter_mlp prototypes", 4096, 40, models=3),
    Run("scatter_mlp prototype, lr 8", f"{DPSGD}, scatter_mlp prototypes", 4096, 40),
    Run("scatter_mlp prototype, lr 4, 60 epochs", f"{DPSGD}, scatter_mlp prototypes", 4096, 60),
    Run("scatter_mlp, lr 4, 60 epochs, seeds 0-2 (the preset's recipe)", f"{DPSGD}, scatter_mlp, three seeds",
        4096, 60, models=3),
]
MNIST_CANDIDATES = MNIST_SECOND_PASS + MNIST_THIRD_PASS + MNIST_FOURTH_PASS + MNIST_FIFTH_PASS


def sweep(where: str) -> list[Run]:
    """The issue-26 sweep of ``fmnist-scatter-eps3``: target ε 0.5, 1, 2, 4, 8, seeds 0-2, one model per run."""
    return [Run(f"target ε {target:g}, seed {seed}", where, 8192, 40, target=target)
            for target in (0.5, 1.0, 2.0, 4.0, 8.0) for seed in range(3)]


GPU_SWEEP = sweep("gpu.md, the goals of issue 26 on an H200 (call 2)")
CPU_SWEEP = sweep("gpu.md, sweeps: compatible points in one model batch (2-core CPU)")
# Results of one preset published in gpu.md: the H200 run, the 2-core CPU run of bench_presets.py and the CPU
# `--n-seeds 3` run its last sections cite. On each device a repeat with the same configuration, seed and data
# drew the same noise (one release); runs on different devices, or with different configurations, drew their own.
FMNIST_PRESET_IN_GPU_MD = [Run("H200, seed 0", "gpu.md, first section", 8192, 40),
                           Run("2-core CPU, bench_presets.py, seed 0", "gpu.md, where a preset's time goes", 8192, 40),
                           Run("2-core CPU, --n-seeds 3 (run 8929596543)",
                               "gpu.md, the Fashion-MNIST preset end to end", 8192, 40, models=3)]
MNIST_MLP_PRESET_IN_GPU_MD = [Run("H200, seed 0", "gpu.md, first section", 4096, 60),
                              Run("2-core CPU, bench_presets.py, seed 0", "gpu.md, where a preset's time goes", 4096,
                                  60)]


# dpsgd.md, the Fashion-MNIST preset rerun (2026-11-27): the same recipe on the same split, published side by side
FMNIST_PRESET_IN_DPSGD_MD = [Run("before: seed 0", f"{DPSGD}, second pass, the table of the issue", 8192, 40),
                             Run("before: seeds 1-2", f"{DPSGD}, second pass, the table of the issue", 8192, 40,
                                 models=2),
                             Run("now: seeds 0-2 (run 8929596543)", f"{DPSGD}, preset rerun on the batch path", 8192,
                                 40, models=3),
                             Run("now: seed 0 alone (run eb3efad01f)", f"{DPSGD}, preset rerun on the batch path",
                                 8192, 40)]
# dpsgd.md, shaped noise on real data: each command is one run, its models released together (its headline)
SHAPED_NOISE_RUNS = [
    Run("linreg, elliptical α 0 and -0.9, 5 seeds", f"{DPSGD}, shaped noise on real data", 100, 5, models=10,
        n_private=N_LINREG),
    Run("linreg, projected α 0 and 1, 5 seeds", f"{DPSGD}, shaped noise on real data", 100, 5, models=10,
        n_private=N_LINREG),
    Run("Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 3", f"{DPSGD}, shaped noise on real data", 8192, 10, models=3),
    Run("Fashion-MNIST, k 128, α 0, -0.5, ε 3", f"{DPSGD}, shaped noise on real data", 8192, 10, models=2),
    Run("Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 1", f"{DPSGD}, shaped noise on real data", 8192, 10, target=1.0,
        models=3),
    Run("Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 0.5", f"{DPSGD}, shaped noise on real data", 8192, 10, target=0.5,
        models=3),
    Run("Fashion-MNIST, k 32, α 0, -0.5, ε 0.5, seeds 1-3", f"{DPSGD}, shaped noise on real data", 8192, 10,
        target=0.5, models=6),
]
PATE_PRESETS = {"mnist-confident-gnmax": (pate.cgn(1300), True), "mnist-lnmax": (pate.lnm(), False),
                "mnist-confident-gnmax-eps1": (pate.cgn(400), True)}


def pate_runs_together(preset: str, runs: int) -> float:
    """A-priori ε of ``runs`` independent runs of a PATE preset (its sanitized release included where it has one)."""
    config, release = PATE_PRESETS[preset]
    return pate.compose([(preset, "pate.md", preset, config, runs, release, "T")])[0]


def main() -> None:
    """Print every composition the documents cite, with the runs it counts."""
    warnings.filterwarnings("ignore", "Optimal order is the largest alpha")  # Opacus' RDP inside the PRV domain
    sections = [
        ("Fashion-MNIST: lr 2, 4 and 8, the first pass's candidates", FMNIST_CANDIDATES[:3]),
        ("Fashion-MNIST: the six linear candidates of the second pass", FMNIST_CANDIDATES[:6]),
        ("tuning cost of fmnist-scatter-eps3 (the nine Fashion-MNIST candidates)", FMNIST_CANDIDATES),
        ("tuning cost of the ε 1 Fashion-MNIST recipe (the six linear candidates, then its run)",
         FMNIST_CANDIDATES[:6] + [FMNIST_EPS1]),
        ("MNIST: the four candidates of the second pass", MNIST_SECOND_PASS),
        ("MNIST: ten candidates, to the third pass", MNIST_SECOND_PASS + MNIST_THIRD_PASS),
        ("MNIST: seventeen candidates, to the fourth pass", MNIST_SECOND_PASS + MNIST_THIRD_PASS + MNIST_FOURTH_PASS),
        ("tuning cost of mnist-scatter-mlp-eps3 (twenty MNIST candidates)", MNIST_CANDIDATES),
        ("the 15-run sweep on the H200", GPU_SWEEP),
        ("the 15-run sweep on the H200 and on the 2-core CPU, together", GPU_SWEEP + CPU_SWEEP),
        ("fmnist-scatter-eps3 results published in gpu.md, together", FMNIST_PRESET_IN_GPU_MD),
        ("mnist-scatter-mlp-eps3 results published in gpu.md, together", MNIST_MLP_PRESET_IN_GPU_MD),
        ("fmnist-scatter-eps3 results published in dpsgd.md's rerun table, together", FMNIST_PRESET_IN_DPSGD_MD),
    ] + [(f"headline of one run: {run.label}", [run]) for run in SHAPED_NOISE_RUNS]
    for title, runs in sections:
        print(f"{title}: {sum(run.models for run in runs)} models, ε = {composed(runs):.2f}")
        for run in runs:
            print(f"    {run.label} [{run.where}]: batch {run.batch}, {run.epochs} epochs, ε {run.target:g} per model"
                  f"{', x' + str(run.models) if run.models > 1 else ''}")
    for preset in PATE_PRESETS:
        print(f"{preset}, a priori: one run ε = {pate_runs_together(preset, 1):.2f}, three seeds together "
              f"ε = {pate_runs_together(preset, 3):.2f}")
    print(f"mnist-confident-gnmax results published in gpu.md (H200 and 2-core CPU), together, a priori: "
          f"ε = {pate_runs_together('mnist-confident-gnmax', 2):.2f}")


if __name__ == "__main__":
    main()
