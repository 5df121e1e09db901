"""Tuning cost of the DP-SGD recipes published in docs/results/, and what covers everything published on each split.

A run's headline covers the models it released. Publishing a recipe chosen by comparing runs trained on the same
private split, judged on its test images, is covered only by composing every run seen while choosing it
(dpsgd.md, "Published figures and every ε behind them"); and everything these documents publish about one private
split (every run whose results they show, the candidates included, on any device: the noise keys include the
device, so the same sweep on the GPU and on the CPU is two releases) is covered only by composing all of it, the
split's **covered by** figure. This script lists, per private split, every release the documents record, in their
order, and composes:

- the **tuning cost** of a recipe: every run on its split recorded before the recipe was last chosen. Where the
  documents do not say whether a run came before a choice or informed it (the order of runs within one pass, a run
  that compared another knob, a diagnostic that the next section builds on), it is counted, as
  ``pate_tuning_cost.py`` counts ambiguous runs high; each such run says so in its label;
- the **covered by** figure of a split: every release on it.

The private splits are the scattering presets' (``fmnist-scatter-*``, ``mnist-scatter-*``): the 60 000 training
images of Fashion-MNIST or MNIST minus the 1 % declared public, 59 400 private, data seed 0. Runs on other draws
of the same images (dpsgd.md's small CNNs and explore.md's runs on 19 000 of Fashion-MNIST's, membership.md's
targets, PATE's teachers on all 60 000 of MNIST's) are not in these figures; the documents say so where they state
them. PATE's runs on MNIST's training images are composed a priori at the end.

Each release is a :class:`Run`, composed as the privacy ledger composes the runs charged to a data source:

- its models are the Poisson-subsampled Gaussian histories ``(sigma, q, steps)`` they trained with, ``q`` =
  batch / 59 400 (as the runs had it) and ``steps = int(epochs / q)`` (Opacus' convention);
- ``sigma`` is calibrated to the run's per-model target as the runs calibrated it
  (:func:`privengine.accounting.subsampled_gaussian.calibrate_noise_multiplier`, PRV, δ = 1e-5; private
  normalisation first charges its Gaussian release of the channel statistics, noise multiplier 8), or is the
  run's own where it fixed one (the σ 0.05 diagnostic);
- a run releases the privacy events its claim records (:func:`privengine.dpsgd.privacy.released_events` of its
  models' histories, add/remove one private example), and a composition is the ledger's
  (:func:`privengine.ledger.ledger.total_of`, what a ledger holding only those runs states: dp-accounting's PLD of
  every run's events, δ = 1e-5). It is tighter than the Opacus PRV figure of the same histories these documents
  quoted before the ledger (PRV returns the upper end of an interval of width 2 eps_error = 0.02 around its
  estimate; the PLD, a pessimistic discretisation at 1e-4, about 0.01 below it here).
- The σ 0.05 diagnostic is no meaningful release to compose (ε over ten thousand by any accountant); its PLD is also
  beyond a machine here (alone, 221 s to build; composed with the other runs of its split, the ledger's PLD passed
  13 GB of memory before it was stopped), so the compositions that include it are Opacus' RDP of every model's
  history, as before the ledger, and say so.

A repeat of one configuration on one device in reproducible mode drew the same noise (noise keyed by the whole
configuration since commit 0941f84, 2026-11-23 13:50, before every run below; by the private data and the device
since 27801ee) and is one release; runs of different configurations, seeds or devices are independent ones.

PATE's runs are composed by ``pate_tuning_cost.py`` (the a-priori RDP of every query, order by order, with each
run's sanitized release): that release is no dp-accounting event, so the ledger would compose those runs by their
(ε, δ), basic composition, which is looser.

Run from the repository root: PYTHONPATH=. python docs/results/tuning_cost.py (it also writes what it prints to
``tuning_cost.txt``, with a digest of its sources: ``tests/test_results_docs.py`` checks the figures the documents
cite against it, and that it is the output of these sources).
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pate_tuning_cost as pate
from privengine.accounting.events import PLD, RDP
from privengine.accounting.subsampled_gaussian import History, calibrate_noise_multiplier, epsilon_of, merge
from privengine.dpsgd.privacy import RELATION, released_events
from privengine.ledger.ledger import Release, total_of

DELTA = 1e-5
ACCOUNTANT = "prv"  # the accountant the runs calibrated sigma with
N_PRIVATE = 59_400  # 60 000 training images minus the 1 % declared public: the scattering runs' private split
N_LINREG = 9_500  # the embedded regression's private examples
PRIVATE_NORMALISATION = ((8.0, 1.0, 1),)  # one Gaussian release of the channel statistics, noise multiplier 8
SHORT = {PLD: "the ledger: dp-accounting PLD", RDP: "the ledger: dp-accounting RDP"}
RECORD = Path(__file__).with_name("tuning_cost.txt")  # what main() printed, which the documents cite
RECORD_HEADER = "# printed by PYTHONPATH=. python docs/results/tuning_cost.py; sources' sha256:"


@dataclass(frozen=True)
class Run:
    """Models trained on the private split with one recipe: ``models`` of them, each at ``target`` ε per model
    (or, where the run fixed it, at noise multiplier ``sigma``); ``pld``: whether its PLD is within a machine here
    (see the module docstring)."""

    label: str
    where: str  # the document and section that record it
    batch: int
    epochs: int
    target: float = 3.0
    models: int = 1
    prefix: tuple[tuple[float, float, int], ...] = ()
    n_private: int = N_PRIVATE
    sigma: float | None = None
    pld: bool = True

    def histories(self) -> list[History]:
        """Each model's history: the prefix, then ``steps`` steps at ``(sigma, q)``."""
        q = self.batch / self.n_private
        steps = int(self.epochs / q)
        sigma = self.sigma if self.sigma is not None else calibrate_noise_multiplier(
            target_epsilon=self.target, delta=DELTA, sample_rate=q, steps=steps, accountant=ACCOUNTANT,
            prefix=list(self.prefix))
        return [list(self.prefix) + [(sigma, q, steps)]] * self.models

    def release(self) -> Release:
        """What the ledger composes of this run: its models' events under add/remove (its ε, unused: the ledger
        composes the events)."""
        return released_events(self.histories()), math.nan, DELTA, RELATION

    def per_model(self) -> str:
        return f"σ {self.sigma:g} (fixed)" if self.sigma is not None else f"ε {self.target:g} per model"


def composition(runs: list[Run]) -> tuple[float, str]:
    """``(ε, accountant)`` of releasing every model of ``runs`` together (δ = 1e-5): the ledger's composition of
    their events, or Opacus' RDP where a run's PLD is beyond a machine here (the σ 0.05 diagnostic)."""
    if all(run.pld for run in runs):
        total = total_of([run.release() for run in runs], DELTA)
        return total.epsilon, "; ".join(SHORT[a] for a in total.accountants)
    history = merge([h for run in runs for h in run.histories()])
    return epsilon_of(history, accountant="rdp", delta=DELTA)[0], "Opacus RDP: the σ 0.05 diagnostic's PLD is " \
        "beyond this machine"


DPSGD = "dpsgd.md"
GPU = "gpu.md"
SHAPED = f"{DPSGD}, second pass, shaped noise on real data"
# dpsgd.md, shaped noise on real data: each command is one run, its models released together (its headline)
SHAPED_NOISE_RUNS = [
    Run("linreg, elliptical α 0 and -0.9, 5 seeds", SHAPED, 100, 5, models=10, n_private=N_LINREG),
    Run("linreg, projected α 0 and 1, 5 seeds", SHAPED, 100, 5, models=10, n_private=N_LINREG),
    Run("Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 3", SHAPED, 8192, 10, models=3),
    Run("Fashion-MNIST, k 128, α 0, -0.5, ε 3", SHAPED, 8192, 10, models=2),
    Run("Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 1", SHAPED, 8192, 10, target=1.0, models=3),
    Run("Fashion-MNIST, k 32, α 0, -0.5, -0.8, ε 0.5", SHAPED, 8192, 10, target=0.5, models=3),
    Run("Fashion-MNIST, k 32, α 0, -0.5, ε 0.5, seeds 1-3", SHAPED, 8192, 10, target=0.5, models=6),
]

# ---- Fashion-MNIST's scattering split, every release in the documents' order ----
FIRST = f"{DPSGD}, ScatterNet + linear at ε = 3 (first pass)"
SECOND = f"{DPSGD}, second pass"
FMNIST_FIRST_PASS = [Run("lr 4, seed 0", FIRST, 8192, 40),
                     Run("lr 2, seed 0", FIRST, 8192, 40),
                     Run("lr 8, seed 0 (the first pass's choice)", FIRST, 8192, 40)]
FMNIST_FIRST_PASS_SEEDS = [Run("lr 8, seeds 1-2 (run after lr 8 was chosen; seen before the second pass)", FIRST,
                               8192, 40, models=2)]
FMNIST_SECOND_PASS_CANDIDATES = [
    Run("physical batch 2048, 2 epochs ('same accuracy'; its timing repeat drew the same noise)",
        f"{SECOND}, physical batch size", 8192, 2),
    Run("physical batch 128, 2 epochs (the same; counted: the pass's order is not recorded)",
        f"{SECOND}, physical batch size", 8192, 2),
    Run("lr 16, no EMA", f"{SECOND}, how the recipes were chosen", 8192, 40),
    Run("lr 16, EMA 0.97", f"{SECOND}, how the recipes were chosen", 8192, 40),
    Run("lr 16, EMA 0.9 (the preset), seed 0", f"{SECOND}, how the recipes were chosen", 8192, 40),
]
FMNIST_SECOND_PASS_AFTER = [
    Run("the preset, seeds 1-2", f"{SECOND}, the table of the issue", 8192, 40, models=2),
    Run("lr 8, no EMA, ε 1, seeds 0-2 (the ε 1 recipe)", f"{SECOND}, the table of the issue", 8192, 40,
        target=1.0, models=3),
] + SHAPED_NOISE_RUNS[2:]
FMNIST_THIRD_PASS = [
    Run("ghost clipping, seed 0 (89.76 %)", f"{DPSGD}, third pass, speed at the presets' batch sizes", 8192, 40),
    Run("fmnist-scatter-shaped from the page, seeds 1-3 (run 831bf63fe2)", f"{DPSGD}, shaped noise on the dashboard",
        8192, 10, target=0.5, models=6),
]
FMNIST_FOURTH_PASS = [Run(f"scatter_mlp, 60 epochs, lr {lr} (the linear head kept: the last choice)",
                          f"{DPSGD}, fourth pass, scatter_mlp on Fashion-MNIST", 8192, 60) for lr in (4, 8, 16)]


def sweep(where: str) -> list[Run]:
    """The issue-26 sweep of ``fmnist-scatter-eps3``: target ε 0.5, 1, 2, 4, 8, seeds 0-2, one model per run."""
    return [Run(f"target ε {target:g}, seed {seed}", where, 8192, 40, target=target)
            for target in (0.5, 1.0, 2.0, 4.0, 8.0) for seed in range(3)]


GPU_SWEEP = sweep(f"{GPU}, the goals of issue 26 on an H200 (call 2)")
# Issue 39's frontier on the H200 (2026-11-28): seeds 0-19 at each target. Seeds 0-2 may repeat call 2's runs (same
# configuration and device: the same noise), but the runs' own results were not compared, so all 100 are counted.
GPU_FRONTIER = [Run(f"target ε {target:g}, seeds 0-19", f"{GPU}, issue 39 on an H200", 8192, 40, target=target,
                    models=20) for target in (0.5, 1.0, 2.0, 4.0, 8.0)]
CPU_SWEEP = sweep(f"{GPU}, sweeps: compatible points in one model batch (2-core CPU; its --no-group reruns drew "
                  "the same noise and are not published)")
FMNIST_AFTER_CHOICE = [
    Run("the preset, --n-seeds 3, batch path (run 8929596543; also in gpu.md)",
        f"{DPSGD}, preset rerun on the batch path", 8192, 40, models=3),
    Run("the preset, seed 0 alone (run eb3efad01f)", f"{DPSGD}, preset rerun on the batch path", 8192, 40),
    Run("the preset on the H200, seed 0 (12 runs of one configuration over two sessions: one release)",
        f"{GPU}, first section and issue 39", 8192, 40),
    Run("the preset with 120 epochs, launched from the page on the H200 (tests/test_dashboard_device.py)",
        f"{GPU}, issue 39 on an H200", 8192, 120),
    Run("the preset on the 2-core CPU, bench_presets.py, seed 0 (90.08 %)", f"{GPU}, where a preset's time goes",
        8192, 40),
] + GPU_SWEEP + CPU_SWEEP + GPU_FRONTIER
FMNIST_SPLIT = (FMNIST_FIRST_PASS + FMNIST_FIRST_PASS_SEEDS + FMNIST_SECOND_PASS_CANDIDATES
                + FMNIST_SECOND_PASS_AFTER + FMNIST_THIRD_PASS + FMNIST_FOURTH_PASS + FMNIST_AFTER_CHOICE)

# ---- MNIST's scattering split, every release in the documents' order ----
MNIST_FIRST_PASS = [Run("batch 8192, lr 4 (the first preset), seed 0", FIRST, 8192, 40)]
MNIST_SECOND_PASS = [
    Run("the first preset, seeds 1-2 (98.48 / 98.49 %)", f"{SECOND}, the table of the issue", 8192, 40, models=2),
    Run("batch 4096, lr 8 (T&B's recipe), seed 0", f"{SECOND}, how the recipes were chosen", 4096, 40),
    Run("T&B's recipe, seeds 1-2 (the three-seed mean later passes compare with)", f"{SECOND}, the table of the issue",
        4096, 40, models=2),
    Run("T&B's, private normalisation", f"{SECOND}, how the recipes were chosen", 4096, 40,
        prefix=PRIVATE_NORMALISATION),
    Run("T&B's, EMA 0.9", f"{SECOND}, how the recipes were chosen", 4096, 40),
]
THIRD = f"{DPSGD}, third pass, six more candidates"
MNIST_THIRD_PASS = [
    Run("ghost clipping, no change", THIRD, 4096, 40),
    Run("public warm start, 5 epochs", THIRD, 4096, 40),
    Run("60 epochs", THIRD, 4096, 60),
    Run("batch 2048, lr 4", THIRD, 2048, 40),
    Run("lr 4", THIRD, 4096, 40),
    Run("lr 16", THIRD, 4096, 40),
]
FOURTH = f"{DPSGD}, fourth pass"
MNIST_FOURTH_PASS = [
    Run("cosine schedule", FOURTH, 4096, 40),
    Run("cosine schedule, lr 16", FOURTH, 4096, 40),
    Run("batch 8192, lr 16", FOURTH, 8192, 40),
    Run("public normalisation, seeds 0-2", FOURTH, 4096, 40, models=3),
    Run("scatter_cnn, lr 4 (stopped at step 58, counted in full)", FOURTH, 4096, 40),
    Run("public-PCA projection (scratch script)", FOURTH, 4096, 40),
    Run("public-PCA projection, batch 1024, lr 2", FOURTH, 1024, 40),
]
# Not a candidate of the fourth pass's comparison (no private recipe can have its σ); the scatter_mlp section
# opens with it
MNIST_DIAGNOSTIC = [Run("diagnostic, σ 0.05 (98.89 %; the scatter_mlp section builds on it)", FOURTH, 4096, 40,
                        sigma=0.05, pld=False)]
MNIST_FIFTH_PASS = [
    Run("scatter_mlp prototype, lr 4, seeds 0-2", f"{DPSGD}, scatter_mlp prototypes", 4096, 40, models=3),
    Run("scatter_mlp prototype, lr 8", f"{DPSGD}, scatter_mlp prototypes", 4096, 40),
    Run("scatter_mlp prototype, lr 4, 60 epochs", f"{DPSGD}, scatter_mlp prototypes", 4096, 60),
    Run("scatter_mlp, lr 4, 60 epochs, seeds 0-2 (the preset's recipe)", f"{DPSGD}, scatter_mlp, three seeds",
        4096, 60, models=3),
]
MNIST_AFTER_CHOICE = [
    Run("mnist-scatter-mlp-eps3, seed 0 (run bffe94cb72)", f"{DPSGD}, scatter_mlp, three seeds", 4096, 60),
    Run("mnist-scatter-mlp-eps3 on the H200, seed 0 (6 runs of one configuration: one release)",
        f"{GPU}, first section", 4096, 60),
    Run("mnist-scatter-mlp-eps3 on the 2-core CPU, bench_presets.py, seed 0 (98.66 %)",
        f"{GPU}, where a preset's time goes", 4096, 60),
]
MNIST_TO_FOURTH_PASS = MNIST_FIRST_PASS + MNIST_SECOND_PASS + MNIST_THIRD_PASS + MNIST_FOURTH_PASS
MNIST_SPLIT = MNIST_TO_FOURTH_PASS + MNIST_DIAGNOSTIC + MNIST_FIFTH_PASS + MNIST_AFTER_CHOICE


def without(runs: list[Run], left_out: list[Run]) -> list[Run]:
    return [run for run in runs if run not in left_out]


PATE_PRESETS = {"mnist-confident-gnmax": (pate.cgn(1300), True), "mnist-lnmax": (pate.lnm(), False),
                "mnist-confident-gnmax-eps1": (pate.cgn(400), True)}
# PATE's runs on MNIST's 60 000 training images published outside pate.md (pate_tuning_cost.RUNS lists pate.md's)
PATE_ELSEWHERE = [("gpu.md: mnist-confident-gnmax on the H200 and on the 2-core CPU", "gpu.md", "cgn", pate.cgn(1300),
                   2, True, "T"),
                  ("membership.md: mnist-confident-gnmax-eps1, run 0e0bcc9fb6", "membership.md", "eps1",
                   pate.cgn(400), 1, True, "T")]


def pate_runs_together(preset: str, runs: int) -> float:
    """A-priori ε of ``runs`` independent runs of a PATE preset (its sanitized release included where it has one)."""
    config, release = PATE_PRESETS[preset]
    return pate.compose([(preset, "pate.md", preset, config, runs, release, "T")])[0]


def source_digest() -> str:
    """SHA-256 of this script and ``pate_tuning_cost.py``: the sources whose output :data:`RECORD` holds."""
    digest = hashlib.sha256()
    for path in (Path(__file__), Path(pate.__file__)):
        digest.update(path.read_bytes())
    return digest.hexdigest()


def main() -> None:
    """Print every composition the documents cite, with the runs it counts, and keep what it printed in
    :data:`RECORD` (which ``tests/test_results_docs.py`` checks the documents against)."""
    warnings.filterwarnings("ignore", "Optimal order is the largest alpha")  # Opacus' RDP inside PRV's calibration
    warnings.filterwarnings("ignore", "Optimal order is the smallest alpha")  # RDP of the σ 0.05 diagnostic
    started = time.perf_counter()
    fmnist_to_second = FMNIST_FIRST_PASS + FMNIST_FIRST_PASS_SEEDS + FMNIST_SECOND_PASS_CANDIDATES
    fmnist_to_fourth = FMNIST_SPLIT[:len(FMNIST_SPLIT) - len(FMNIST_AFTER_CHOICE)]
    mnist_to_fifth = MNIST_SPLIT[:len(MNIST_SPLIT) - len(MNIST_AFTER_CHOICE)]
    sections = [
        ("Fashion-MNIST, first pass: tuning cost of lr 8 (lr 2, 4 and 8 on seed 0)", FMNIST_FIRST_PASS),
        ("Fashion-MNIST, second pass: tuning cost of lr 16 and EMA 0.9 (every run on the split to that choice)",
         fmnist_to_second),
        ("Fashion-MNIST: tuning cost of the ε 1 recipe (the runs above, then the table of the issue's, its own "
         "included)", fmnist_to_second + FMNIST_SECOND_PASS_AFTER[:2]),
        ("Fashion-MNIST: tuning cost of fmnist-scatter-eps3 (every run on the split to the fourth pass, where the "
         "linear head was kept)", fmnist_to_fourth),
        ("COVERED BY, Fashion-MNIST's scattering split: everything published on it", FMNIST_SPLIT),
        ("MNIST, second pass: every run on the split to it", MNIST_FIRST_PASS + MNIST_SECOND_PASS),
        ("MNIST, third pass: every run on the split to it", MNIST_FIRST_PASS + MNIST_SECOND_PASS + MNIST_THIRD_PASS),
        ("MNIST, fourth pass: every run on the split to its comparison (nothing beat T&B's recipe; the tuning cost "
         "of mnist-scatter-eps3 if published as our choice)", MNIST_TO_FOURTH_PASS),
        ("MNIST: tuning cost of mnist-scatter-mlp-eps3 (every run on the split to its three seeds)", mnist_to_fifth),
        ("MNIST: the same without the σ 0.05 diagnostic (the private candidates alone)",
         without(mnist_to_fifth, MNIST_DIAGNOSTIC)),
        ("the diagnostic alone", MNIST_DIAGNOSTIC),
        ("COVERED BY, MNIST's scattering split: everything published on it", MNIST_SPLIT),
        ("MNIST's scattering split: everything published on it but the σ 0.05 diagnostic",
         without(MNIST_SPLIT, MNIST_DIAGNOSTIC)),
        ("the 15-run sweep on the H200", GPU_SWEEP),
        ("the 15-run sweep on the H200 and on the 2-core CPU, together", GPU_SWEEP + CPU_SWEEP),
    ] + [(f"headline of one run: {run.label}", [run]) for run in SHAPED_NOISE_RUNS]
    lines: list[str] = []

    def say(text: str) -> None:
        print(text)
        lines.append(text)

    for title, runs in sections:
        epsilon, accountant = composition(runs)
        say(f"{title}: {sum(run.models for run in runs)} models, ε = {epsilon:.2f} ({accountant})")
        for run in runs:
            say(f"    {run.label} [{run.where}]: batch {run.batch}, {run.epochs} epochs, {run.per_model()}"
                  f"{', x' + str(run.models) if run.models > 1 else ''}")
    for preset in PATE_PRESETS:
        say(f"{preset}, a priori: one run ε = {pate_runs_together(preset, 1):.2f}, three seeds together "
              f"ε = {pate_runs_together(preset, 3):.2f}")
    say(f"mnist-confident-gnmax results published in gpu.md (H200 and 2-core CPU), together, a priori: "
          f"ε = {pate_runs_together('mnist-confident-gnmax', 2):.2f}")
    everywhere = pate.RUNS + PATE_ELSEWHERE
    say(f"PATE's runs on MNIST's training images published across docs/results, a priori (pate.md's "
          f"{sum(run[4] for run in pate.RUNS)} as pate_tuning_cost.py counts them, and "
          f"{', '.join(run[0] for run in PATE_ELSEWHERE)}): {sum(run[4] for run in everywhere)} runs, "
          f"ε = {pate.compose(everywhere)[0]:.2f}")
    RECORD.write_text(f"{RECORD_HEADER} {source_digest()}\n" + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"wall time: {time.perf_counter() - started:.0f} s; written to {RECORD}")


if __name__ == "__main__":
    main()
