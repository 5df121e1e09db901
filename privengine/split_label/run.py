"""A split-learning label-protection job: train once per protection setting, attack every batch, report live.

Per batch: the passive party embeds the features, the active party updates its top
model and sends protected cut gradients, the passive party updates its bottom
model. The passive party's view (the gradients received at the cut layer and the
ones they induce at its first layer) is scored by the norm and direction attacks
of :mod:`.attacks`; the same attacks on the *unprotected* gradients give the
baseline (what the passive party would learn without protection; computed by this
evaluator, never sent).

Per epoch (step = epoch number) the run reports, with the prefix ``<setting key>/``
in trade-off mode and none in single mode:

- ``test_auc``, ``train_loss``;
- ``leak.<norm|cos>.<cut|first>.<mean|q95>``: mean and 95% quantile of the per-batch leak AUC;
- ``unprotected.<...>``: the same attacks on the unprotected gradients;
- ``sumkl.mean``, ``sumkl.max``, ``auc_bound`` (the leak AUC bound at the epoch's largest sumKL: every
  batch's AUC), ``auc_bound.mean`` (the mean of the per-batch bounds: the mean leak AUC), where the
  protection has a sumKL (:func:`.attacks.sumkl_summary`);
  ``power_scale.mean`` (Marvell), ``single_class_batches``;

and the artifact ``grad_norms`` (``grad_norms/<key>`` in trade-off mode): histograms
of log10 ||g|| at the cut layer for positives and negatives, before and after
protection. After each setting the artifact ``tradeoff`` lists one point per
finished setting (its final test AUC and leak AUCs; ``leak_run.*`` are quantiles
over every batch of the run).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.metrics import roc_auc_score

from privengine.randomness import noise_caveat, noise_generator

from . import data as datasets
from .attacks import NAMES, LeakLog, attack_scores, leak_aucs, pick_reference, sumkl_summary
from .config import SplitLabelConfig
from .kept import keep_setting
from .parties import ActiveParty, PassiveParty
from .protections import Marvell, MaxNormAlignment, NoProtection, Protection, make_protection

HIST_BINS = 40
NOISE_STREAM = 1  # stream key of the protections' noise (privengine.randomness)
EVAL_CHUNK = 8192
CUT_NORMS = NAMES.index("norm.cut")  # the row of attack_scores holding the cut-layer gradient norms

BOUND_CAVEATS = (
    "Not differential privacy: there is no (ε, δ). sumKL is the symmetrised KL divergence between the "
    "distributions of one batch's protected cut gradients for positives and for negatives.",
    "The bound assumes Marvell's Gaussian model (each class's gradients Gaussian with isotropic covariance, "
    "statistics estimated from the batch). Real gradients are not Gaussian, so the bound is a model-based guide, "
    "not a guarantee about these gradients. With a linear top model every unprotected cut gradient lies on one "
    "line; the class with the larger variance gets no noise across Δ, so its gradients stay on that line and an "
    "attacker scoring |cos| with a known positive can beat the bound (see docs/results/split_label.md).",
    "It holds batch by batch for any scorer of that batch's cut gradients alone. It does not cover the "
    "first-layer attacks: dL/dh_1 = J(x)^T g backpropagates through the passive party's own ReLU layers, so it "
    "depends on the example's features x as well as on its cut gradient g, and features that predict the "
    "label can lift a scorer of (g, x) above a bound on the laws of g (with a single bottom block, dL/dh_1 = g "
    "and the bound does apply). It says nothing about combining batches: an example seen in many epochs gets "
    "fresh noise each time, and averaging its gradients over epochs leaks more.",
    "Batches with only one class get no Marvell noise (their count is reported as single_class_batches).",
    "The measured leak AUC of a batch is estimated from its few positives: compare the mean over batches with the "
    "bound on the mean (the mean of the per-batch bounds); a 95% quantile above the bound can be sampling noise.",
)


@dataclass(frozen=True)
class Setting:
    """One protection to train with; ``prefix`` starts its metric names ('' in single mode)."""

    protection: Protection
    prefix: str


def settings_of(config: SplitLabelConfig) -> list[Setting]:
    """The protections a job trains with: the chosen one (single mode), or every trade-off setting."""
    if config.mode == "single":
        marvell_threshold = config.marvell_mode == "threshold"
        return [Setting(make_protection(
            config.protection, iso_scale=config.iso_scale,
            sumkl_threshold=config.sumkl_threshold if marvell_threshold else None,
            power_scale=None if marvell_threshold else config.power_scale), "")]
    protections: list[Protection] = [NoProtection(), MaxNormAlignment()]
    protections += [Marvell(threshold=t) for t in config.tradeoff_thresholds]
    protections += [Marvell(power_scale=s) for s in config.tradeoff_power_scales]
    protections += [make_protection("iso", iso_scale=t) for t in config.tradeoff_iso_scales]
    unique = {p.key: p for p in protections}  # repeated values give one point
    return [Setting(p, f"{p.key}/") for p in unique.values()]


def run(config: SplitLabelConfig, reporter) -> dict:
    # No planned charge (reporter.charge_plan), nor any charge: the protections state no (ε, δ) claim, only a
    # heuristic bound (BOUND_CAVEATS), so a run whose process dies has nothing to be charged.
    device = torch.device(reporter.device)
    data_cpu = datasets.load(config)
    if not config.is_user_dataset:  # a stored data set's batch is checked against its declared size, not its rows
        datasets.check_batch_size(data_cpu, config.batch_size)
    elif (note := datasets.short_batch_note(data_cpu, config.batch_size)) is not None:
        reporter.log(note)
    data = data_cpu.to(device)
    settings = settings_of(config)
    reporter.log(f"{data.name}: {len(data.y_train)} train / {len(data.y_test)} test examples, "
                 f"{float(data_cpu.y_train.mean()):.2%} positives; settings: "
                 + ", ".join(s.protection.label for s in settings))
    points: list[dict] = []
    jobs: list[_Training] = []
    stopped = False
    for index, setting in enumerate(settings):
        job = _Training(setting, data, data_cpu, config, device, index=index)
        jobs.append(job)
        stopped = not job.train(reporter, stage=(index, len(settings)))
        if job.epochs_done:
            points.append(job.point())
            reporter.artifact("tradeoff", {"points": points})
        if stopped:
            break
    if config.keep_model and not stopped:  # a finished run keeps every setting's two parts (.kept)
        for index, (job, point) in enumerate(zip(jobs, points)):
            keep_setting(reporter, index, job.setting.protection.label, job.passive, job.active, data_cpu, point)
    return {
        "mode": config.mode, "dataset": data.name, "n_train": len(data.y_train), "n_test": len(data.y_test),
        "positive_rate_train": float(data_cpu.y_train.mean()), "positive_rate_test": float(data_cpu.y_test.mean()),
        "cut_dim": config.bottom_widths[-1], "stopped": stopped, "settings": points,
        "label_leakage_bound": _leakage_bound(points, noise=noise_caveat(secure=config.secure_noise)),
        **(_single_setting_values(points[0]) if len(points) == 1 else {}),
    }


def _single_setting_values(point: dict) -> dict[str, float]:
    """The sweeps' axes of a one-setting run: final test AUC, and the strongest attack's mean leak AUC."""
    leaks = [v for k, v in point.items() if k.startswith("leak_run.") and k.endswith(".mean") and v is not None]
    values = {"test_auc": point.get("test_auc")}
    if leaks:
        values["leak_auc"] = max(leaks)
    return {k: v for k, v in values.items() if v is not None}


def _leakage_bound(points: list[dict], *, noise: str) -> dict:
    """The sumKL guarantee per setting that has one: the run's largest per-batch sumKL and the AUC bound."""
    bounded = [{"setting": p["setting"], "label": p["label"], "sumkl_max": p["sumkl.max"],
                "sumkl_mean": p["sumkl.mean"], "leak_auc_bound": p["auc_bound"],
                "leak_auc_bound_mean": p["auc_bound.mean"],
                "observed_leak_mean_max": _strongest(p, ".mean"), "observed_leak_q95_max": _strongest(p, ".q95")}
               for p in points if p["sumkl.max"] is not None]
    return {
        "measure": "sumKL between the positive and negative class distributions of one batch's protected "
                   "cut-layer gradients (Marvell's Gaussian model); no (ε, δ) exists for this mechanism",
        "formula": "leak AUC of any scorer of one batch <= 1/2 + sqrt(sumKL)/2 - sumKL/8 (1 when sumKL >= 4); "
                   "the mean over batches <= the mean of the per-batch bounds",
        "settings": bounded,
        "caveats": [*BOUND_CAVEATS, noise],
    }


def _strongest(point: dict, statistic: str) -> float | None:
    """The largest run-wide leak AUC ``statistic`` (".mean" or ".q95") of any attack and layer of a setting."""
    return max((v for k, v in point.items() if k.startswith("leak_run.") and k.endswith(statistic) and v is not None),
               default=None)


@dataclass
class _EpochLog:
    """What one epoch's batches produced, for its metrics and histograms."""

    leak: LeakLog = field(default_factory=LeakLog)
    unprotected: LeakLog = field(default_factory=LeakLog)
    sumkl: list[float] = field(default_factory=list)
    power_scale: list[float] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    single_class_batches: int = 0
    norms: dict[str, list[torch.Tensor]] = field(default_factory=lambda: {"before": [], "after": [], "labels": []})

    def metrics(self) -> dict[str, float | None]:
        scales = [s for s in self.power_scale if not math.isnan(s)]
        return {"train_loss": float(np.mean(self.loss)), **self.leak.summary("leak"),
                **self.unprotected.summary("unprotected"), **sumkl_summary(self.sumkl),
                "power_scale.mean": float(np.mean(scales)) if scales else None,
                "single_class_batches": float(self.single_class_batches)}

    def histograms(self, epoch: int) -> dict:
        """log10 ||g|| histograms at the cut layer, positives vs negatives, before and after protection."""
        labels = torch.cat(self.norms["labels"]).numpy() > 0.5
        logs = {when: np.log10(torch.cat(self.norms[when]).clamp_min(1e-30).numpy()) for when in ("before", "after")}
        everything = np.concatenate(list(logs.values()))
        edges = np.histogram_bin_edges(everything, bins=HIST_BINS)
        return {"epoch": epoch, "edges": edges.tolist(), **{
            when: {"positive": np.histogram(v[labels], edges)[0].tolist(),
                   "negative": np.histogram(v[~labels], edges)[0].tolist()} for when, v in logs.items()}}


class _Training:
    """One setting's training: both parties, their generators, and the run-wide logs."""

    def __init__(self, setting: Setting, data: datasets.BinaryData, data_cpu: datasets.BinaryData,
                 config: SplitLabelConfig, device: torch.device, *, index: int):
        """``index``: the setting's position in the run; its protection noise has its own stream, keyed by the
        training split's fingerprint too (``data_cpu.private_fingerprint``)."""
        self.setting, self.data, self.config = setting, data, config
        self.y_train_cpu, self.y_test_cpu = data_cpu.y_train, data_cpu.y_test
        self.order = torch.Generator().manual_seed(config.seed)  # model init, then batch order
        self.noise = noise_generator(config, NOISE_STREAM, index, data=data_cpu.private_fingerprint, device=device)
        self.references = np.random.default_rng([config.seed, 2])
        self.passive = PassiveParty(data.n_features, config.bottom_widths, lr=config.lr, init_std=config.init_std,
                                    device=device, generator=self.order)
        self.active = ActiveParty(config.bottom_widths[-1], config.top_hidden, setting.protection, lr=config.lr,
                                  init_std=config.init_std, device=device, generator=self.order)
        self.run_leak, self.run_unprotected = LeakLog(), LeakLog()
        self.run_sumkl: list[float] = []
        self.epochs_done, self.single_class_batches = 0, 0
        self.last: dict[str, float | None] = {}

    def train(self, reporter, *, stage: tuple[int, int]) -> bool:
        """Train for ``config.epochs``; False when stopped early."""
        index, count = stage
        key, n = self.setting.protection.key, len(self.y_train_cpu)
        for epoch in range(1, self.config.epochs + 1):
            log = _EpochLog()
            for batch in torch.randperm(n, generator=self.order).split(self.config.batch_size):
                if reporter.should_stop():
                    return False
                self._batch(batch, log)
            self.last = {"test_auc": self.test_auc(), **log.metrics()}
            reporter.metric(epoch, **{self.setting.prefix + k: v for k, v in self.last.items()})
            reporter.artifact(f"grad_norms/{key}" if self.setting.prefix else "grad_norms", log.histograms(epoch))
            self.run_leak.extend(log.leak)
            self.run_unprotected.extend(log.unprotected)
            self.run_sumkl += log.sumkl
            self.single_class_batches += log.single_class_batches
            self.epochs_done = epoch
            reporter.progress((index + epoch / self.config.epochs) / count,
                              f"{self.setting.protection.label}: epoch {epoch}/{self.config.epochs}")
        return True

    def _batch(self, batch: torch.Tensor, log: _EpochLog) -> None:
        device_batch = batch.to(self.data.x_train.device)
        y, y_cpu = self.data.y_train[device_batch], self.y_train_cpu[batch]
        step = self.active.train_step(self.passive.forward(self.data.x_train[device_batch]), y, self.noise)
        unprotected_first = self.passive.first_layer_gradient(step.true_grad)
        seen_first = self.passive.backward(step.message)
        reference = pick_reference(y_cpu, self.references)
        seen = attack_scores({"cut": step.message.grad, "first": seen_first}, reference)
        unprotected = attack_scores({"cut": step.true_grad, "first": unprotected_first}, reference)
        log.leak.add(leak_aucs(seen, y_cpu))
        log.unprotected.add(leak_aucs(unprotected, y_cpu))
        log.sumkl.append(step.protected.sumkl)
        log.power_scale.append(step.protected.power_scale)
        log.loss.append(step.loss)
        positives = int(y_cpu.sum())
        log.single_class_batches += positives in (0, len(y_cpu))
        # the histograms' cut-layer norms are the norm attack's scores, computed once per batch
        log.norms["before"].append(unprotected[CUT_NORMS].cpu())
        log.norms["after"].append(seen[CUT_NORMS].cpu())
        log.norms["labels"].append(y_cpu)

    @torch.no_grad()
    def test_auc(self) -> float | None:
        """ROC AUC of the joint model's logits on the test split (None if it is empty or lacks a class)."""
        logits = torch.cat([self.active.logits(self.passive.embed(chunk)[-1])
                            for chunk in self.data.x_test.split(EVAL_CHUNK)]).cpu().numpy()
        labels = self.y_test_cpu.numpy()
        if len(labels) == 0 or labels.min() == labels.max():
            return None
        return float(roc_auc_score(labels, logits))

    def point(self) -> dict:
        """This setting's trade-off point: final-epoch metrics plus run-wide leak quantiles and sumKL."""
        run_sumkl = sumkl_summary(self.run_sumkl)
        return {"setting": self.setting.protection.key, "label": self.setting.protection.label,
                "epochs_done": self.epochs_done, **self.last,
                **self.run_leak.summary("leak_run"), **self.run_unprotected.summary("unprotected_run"),
                **run_sumkl, "single_class_batches": self.single_class_batches}
