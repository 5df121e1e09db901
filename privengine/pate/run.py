"""A PATE run end to end: teachers, votes, noisy answers, privacy analysis, student."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from ..randomness import noise_caveat, noise_generator
from ..reporter import Reporter
from ..store import EPSILON_BASIS_ARTIFACT
from .aggregate import aggregate, vote_counts
from .config import PateConfig
from .data import PateData, TeacherInputs, load_pate_data, load_scattering_inputs
from .ensemble import Ensemble, partition, train_ensemble
from .models import build_model
from .privacy import PrivacyReport, analyse, epsilon_basis
from .selection import select_queries
from .self_training import SelfTrainingSettings, train_self_training
from .student import FixMatchSettings, logits_in_chunks, train_fixmatch

NOISE_STREAM = 1  # stream key of the aggregator's noise (privengine.randomness); the sanitized epsilon uses
# privacy.SANITIZE_STREAM
CURVE_POINTS = 300  # points of the eps-vs-answered curves sent to the store

# Share of the progress bar per stage.
_TEACHERS, _VOTES, _BASELINE, _STUDENT = 0.6, 0.05, 0.15, 0.2


class Stopped(Exception):
    """Raised inside the run (and :func:`train_student`) when the reporter asks to stop; run() returns a partial
    summary."""


def run(config: PateConfig, reporter: Reporter) -> dict:
    started = time.perf_counter()
    device = torch.device(reporter.device)
    torch.manual_seed(config.seed)
    shuffle = torch.Generator().manual_seed(config.seed)
    summary: dict = {"stage": "loading data"}

    def checkpoint(stage: str) -> None:
        summary["stage"] = stage
        if reporter.should_stop():
            raise Stopped

    try:
        reporter.progress(0.0, "loading data")
        data = load_pate_data(config.dataset, root=config.data_root, download=config.download)
        # the aggregator's noise is keyed by the teachers' private data too (privengine.randomness)
        noise = noise_generator(config, NOISE_STREAM, data=data.private_fingerprint, device=device)
        teacher_architecture, student_architecture = architectures(config, data.is_image)
        seen_by_teachers = teacher_inputs(config, data, teacher_architecture, reporter)
        student_inputs = seen_by_teachers if config.student == "self_training" else data

        def make_teacher():
            return build_model(teacher_architecture, tuple(seen_by_teachers.private_x.shape[1:]), data.n_classes,
                               width=config.width, depth=config.depth)

        def make_student():
            return build_model(student_architecture, tuple(student_inputs.pool_x.shape[1:]), data.n_classes,
                               width=config.width, depth=config.depth)

        # Stored before the first output (the teachers' losses): what the run is charged should its process die
        reporter.charge_plan(planned_charge(config, data, device))
        checkpoint("training teachers")
        teachers = _train_teachers(config, seen_by_teachers.private_x, data.private_y, make_teacher, device, shuffle,
                                   reporter)

        checkpoint("voting")
        reporter.progress(_TEACHERS, "teachers vote on the queries")
        test_preds = _predict(teachers, seen_by_teachers.test_x, reporter.should_stop)
        teacher_acc = (test_preds == data.test_y.to(device)).double().mean(1).cpu().numpy()
        reporter.artifact("teacher_accuracy", {"accuracy": teacher_acc})
        submitted = select_queries(seen_by_teachers.pool_x, config.queries, rule=config.query_selection,
                                   clusters=config.selection_clusters, seed=config.seed)
        queries_y = data.pool_y[submitted].to(device)
        counts = vote_counts(_predict(teachers, seen_by_teachers.pool_x[submitted], reporter.should_stop),
                             data.n_classes)
        answers = aggregate(counts, aggregator=config.aggregator, generator=noise, gamma=config.gamma,
                            sigma=config.sigma, threshold=config.threshold, sigma1=config.sigma1, sigma2=config.sigma2)
        answered = answers.answered
        n_answered = int(answered.sum())
        top2 = counts.topk(min(2, data.n_classes), dim=1).values
        margins = (top2[:, 0] - top2[:, -1]) if data.n_classes > 1 else top2[:, 0]
        reporter.artifact("vote_margins", {"margin": margins.cpu().numpy(), "teachers": config.teachers})
        summary.update(
            architecture=teacher_architecture,
            student_architecture=student_architecture,
            teachers=config.teachers,
            examples_per_teacher=len(data.private_y) // config.teachers,
            teacher_accuracy_mean=float(teacher_acc.mean()),
            ensemble_accuracy=float((counts.argmax(1) == queries_y).double().mean()),
            queries_submitted=config.queries,
            queries_answered=n_answered,
            noisy_label_accuracy=(float((answers.labels[answered] == queries_y[answered]).double().mean())
                                  if n_answered else None),
        )

        report = analyse(counts.cpu().numpy(), answered.cpu().numpy(), config, n_private=len(data.private_y),
                         extra_caveats=(noise_caveat(secure=config.secure_noise),), device=device,
                         data=data.private_fingerprint)
        # The noisy answers are released from here on (the eps curves against the queries answered, then the
        # student trained on them): a failure from now on stores the summary with these claims, which cover every
        # answer (reporter.charge). What came before (teacher losses and accuracies, vote margins) is no part of
        # any claim (privacy.UNPROTECTED_CAVEAT).
        claims = [c.to_dict() for c in report.claims]
        reporter.charge(lambda: {**summary, "privacy": claims, "failed_during": summary["stage"]})
        _report_eps_curves(report, reporter)
        reporter.artifact(EPSILON_BASIS_ARTIFACT, epsilon_basis(report))
        summary["privacy"] = [c.to_dict() for c in report.claims]
        summary["data_dependent_order"] = report.analysis.order
        if report.analysis.smooth_sensitivity is not None:
            summary["smooth_sensitivity"] = report.analysis.smooth_sensitivity
        if report.sanitized is not None:  # published figures; its smooth sensitivity is a private diagnostic
            summary["sanitized_epsilon"] = report.sanitized.public()
            summary["smooth_sensitivity"] = report.sanitized.smooth_sensitivity
        reporter.metric(0, fraction_answered=n_answered / config.queries,
                        ensemble_accuracy=summary["ensemble_accuracy"])

        if config.baseline:
            checkpoint("training the non-private baseline")
            _, summary["baseline_accuracy"] = _train_single(
                make_student, student_inputs.private_x, data.private_y, student_inputs.test_x, data.test_y,
                config.baseline_epochs, config.student_lr, config, device, shuffle, reporter, "baseline_accuracy",
                _TEACHERS + _VOTES, _BASELINE)
        if n_answered == 0:
            summary["student_accuracy"] = None
            reporter.log("No query was answered: the student was not trained (lower the threshold or sigma1).")
        else:
            checkpoint("training the student")
            _, summary["student_accuracy"] = train_student(
                config, make_student, submitted[answered.cpu()], answers.labels[answered].cpu(), data, student_inputs,
                device, shuffle, reporter)
        summary["student"] = _student_description(config, len(data.pool_x))
        summary["stage"] = "done"
        reporter.progress(1.0, "done")
    except Stopped:
        summary["stopped_during"] = summary["stage"]
    summary["seconds"] = time.perf_counter() - started
    return summary


def planned_charge(config: PateConfig, data: PateData, device: torch.device) -> dict:
    """The summary charging the run's whole planned release (``reporter.charge_plan``): the headline claim of
    :func:`~.privacy.analyse` over every one of the ``config.queries`` queries the run will submit. That claim is
    a priori: it reads no vote, so it is computed here, before any teacher is trained, from stand-in votes (every
    teacher for the first class), and is the headline the finished run states (with the sanitized release's cost
    where the run publishes one, whose order, beta and sigma come from the configuration). It covers every answer
    and what is computed from them; the teachers' diagnostics are covered by no claim in any run
    (:data:`~.privacy.UNPROTECTED_CAVEAT`)."""
    votes = np.zeros((config.queries, data.n_classes))
    votes[:, 0] = config.teachers
    report = analyse(votes, np.ones(config.queries, dtype=bool), config, n_private=len(data.private_y),
                     extra_caveats=(noise_caveat(secure=config.secure_noise),), device=device,
                     data=data.private_fingerprint)
    return {"stage": "planned", "privacy": [c.to_dict() for c in report.claims if c.headline]}


def _predict(ensemble: Ensemble, x: torch.Tensor, stop_check) -> torch.Tensor:
    out = ensemble.predict(x, should_stop=stop_check)
    if out is None:
        raise Stopped
    return out


def architectures(config: PateConfig, is_image: bool) -> tuple[str, str]:
    """``(teachers' architecture, student's)``: ``auto`` is the ConvNet for images, the MLP for tabular data. The
    self-training student has the teachers' model and inputs; FixMatch augments pixels, so with ScatterNet teachers it
    trains a ConvNet on the images (and so does the supervised student); the baseline follows the student."""
    teacher = config.architecture if config.architecture != "auto" else ("convnet" if is_image else "mlp")
    student = "convnet" if teacher == "scatter_linear" and config.student != "self_training" else teacher
    return teacher, student


def teacher_inputs(config: PateConfig, data: PateData, architecture: str, reporter: Reporter) -> TeacherInputs:
    """The pixels of the splits, or their ScatterNet features (cached; computed with progress on first use);
    raises :class:`Stopped` when the reporter asks to stop meanwhile."""
    if architecture != "scatter_linear":
        return TeacherInputs(data.private_x, data.pool_x, data.test_x)
    inputs = load_scattering_inputs(config.dataset, root=config.data_root, download=config.download,
                                    device=reporter.device, should_stop=reporter.should_stop,
                                    progress=reporter.progress)
    if inputs is None:
        raise Stopped
    return inputs


def _train_teachers(config: PateConfig, private_x: torch.Tensor, private_y: torch.Tensor, make_model, device, shuffle,
                    reporter: Reporter) -> Ensemble:
    xs, ys = partition(private_x, private_y, config.teachers, shuffle)
    xs, ys = xs.to(device), ys.to(device)
    teachers = Ensemble(make_model, config.teachers, device)

    def on_epoch(epoch: int, losses: torch.Tensor) -> None:
        reporter.metric(epoch + 1, teacher_loss_mean=losses.mean().item(), teacher_loss_max=losses.max().item())
        reporter.progress(_TEACHERS * (epoch + 1) / config.teacher_epochs,
                          f"training {config.teachers} teachers: epoch {epoch + 1}/{config.teacher_epochs}")

    if not train_ensemble(teachers, xs, ys, epochs=config.teacher_epochs, lr=config.teacher_lr,
                          batch_size=config.batch_size, generator=shuffle, should_stop=reporter.should_stop,
                          on_epoch=on_epoch):
        raise Stopped
    return teachers


def _train_single(make_model, x, y, test_x, test_y, epochs: int, lr: float, config: PateConfig, device, shuffle,
                  reporter: Reporter, metric: str, progress_start: float,
                  progress_share: float) -> tuple[Ensemble, float]:
    """Train one model (an ensemble of one) on ``(x, y)``; report test accuracy per epoch as ``metric``; the model
    and its last accuracy."""
    model = Ensemble(make_model, 1, device)
    test_y = test_y.to(device)
    accuracy = float("nan")

    def on_epoch(epoch: int, losses: torch.Tensor) -> None:
        nonlocal accuracy
        accuracy = float((model.predict(test_x)[0] == test_y).double().mean())
        reporter.metric(epoch + 1, **{metric: accuracy, metric.replace("accuracy", "loss"): losses.item()})
        reporter.progress(progress_start + progress_share * (epoch + 1) / epochs, f"{metric.split('_')[0]}: "
                          f"epoch {epoch + 1}/{epochs}")

    if not train_ensemble(model, x[None].to(device), y[None].to(device), epochs=epochs, lr=lr,
                          batch_size=config.student_batch_size, generator=shuffle, should_stop=reporter.should_stop,
                          on_epoch=on_epoch):
        raise Stopped
    return model, accuracy


def train_student(config: PateConfig, make_model, labelled_rows: torch.Tensor, labelled_y: torch.Tensor,
                  data: PateData, inputs: PateData | TeacherInputs, device, shuffle,
                  reporter: Reporter) -> tuple[Callable[[torch.Tensor], torch.Tensor], float]:
    """Train the student on the answered queries (rows ``labelled_rows`` of the pool, noisy labels ``labelled_y``)
    and, semi-supervised or self-training, on the whole unlabelled pool: ``(logits, accuracy)``, its logits
    ``(n, C)`` on inputs ``(n, *input)`` of what it sees (pixels or the teachers' features: ``inputs``, which holds
    the pool and the test set) and its accuracy on the held-out public test set. Raises :class:`Stopped` when the
    reporter asks to stop."""
    start = _TEACHERS + _VOTES + _BASELINE
    if config.student == "supervised":
        model, accuracy = _train_single(make_model, inputs.pool_x[labelled_rows], labelled_y, inputs.test_x,
                                        data.test_y, config.student_epochs, config.student_lr, config, device,
                                        shuffle, reporter, "student_accuracy", start, _STUDENT)
        return (lambda x: model.logits_in_chunks(x)[0]), accuracy
    if config.student == "self_training":
        model, accuracy = _self_train_student(config, make_model, labelled_rows, labelled_y, data, inputs, device,
                                              shuffle, reporter, start)
        return (lambda x: logits_in_chunks(model, x)), accuracy
    settings = fixmatch_settings(config)
    accuracy = float("nan")

    def on_epoch(epoch: int, test_accuracy: float, loss: float, mask_rate: float) -> None:
        nonlocal accuracy
        accuracy = test_accuracy
        reporter.metric(epoch + 1, student_accuracy=test_accuracy, student_loss=loss, student_mask_rate=mask_rate)
        reporter.progress(start + _STUDENT * (epoch + 1) / config.student_epochs,
                          f"student (FixMatch): epoch {epoch + 1}/{config.student_epochs}")

    model = make_model().to(device)  # FixMatch augments images: it reads the pixels (data), never features
    if train_fixmatch(model, data.pool_x[labelled_rows].to(device), labelled_y.to(device), data.pool_x.to(device),
                      data.test_x.to(device), data.test_y.to(device), settings, generator=shuffle,
                      should_stop=reporter.should_stop, on_epoch=on_epoch) is None:
        raise Stopped
    return (lambda x: logits_in_chunks(model, x)), accuracy


def _self_train_student(config: PateConfig, make_model, labelled_rows: torch.Tensor, labelled_y: torch.Tensor,
                        data: PateData, inputs: TeacherInputs, device, shuffle, reporter: Reporter,
                        start: float) -> tuple[torch.nn.Module, float]:
    """The self-training student (:mod:`.self_training`) and its last accuracy; its test accuracy is reported after
    every round at the number of passes over the pool so far."""
    settings = self_training_settings(config)
    accuracy = float("nan")

    def on_round(round_: int, test_accuracy: float, pseudo_fraction: float) -> None:
        nonlocal accuracy
        accuracy = test_accuracy
        reporter.metric((round_ + 1) * settings.epochs, student_accuracy=test_accuracy,
                        student_pseudo_labelled=pseudo_fraction)
        reporter.progress(start + _STUDENT * (round_ + 1) / (settings.rounds + 1),
                          f"student (self-training): round {round_}/{settings.rounds}")

    model = train_self_training(lambda: make_model().to(device), inputs.pool_x.to(device), labelled_rows.to(device),
                                labelled_y.to(device), data.n_classes, inputs.test_x.to(device),
                                data.test_y.to(device), settings, generator=shuffle, should_stop=reporter.should_stop,
                                on_round=on_round)
    if model is None:
        raise Stopped
    return model, accuracy


def self_training_settings(config: PateConfig) -> SelfTrainingSettings:
    """The self-training student's settings from a run's configuration."""
    return SelfTrainingSettings(rounds=config.self_training_rounds, epochs=config.student_epochs, lr=config.student_lr,
                                batch_size=config.student_batch_size, confidence=config.confidence,
                                mixup_alpha=config.mixup_alpha, align_distribution=config.align_distribution)


def fixmatch_settings(config: PateConfig) -> FixMatchSettings:
    """The semi-supervised student's FixMatch settings from a run's configuration."""
    return FixMatchSettings(epochs=config.student_epochs, lr=config.student_lr, batch_size=config.student_batch_size,
                            unlabelled_ratio=config.unlabelled_ratio, confidence=config.confidence,
                            unlabelled_weight=config.unlabelled_weight)


def _student_description(config: PateConfig, pool_size: int) -> str:
    if config.student == "supervised":
        return "supervised on the answered queries only"
    if config.student == "self_training":
        return (f"self-training: the answered queries with their noisy labels, then {config.self_training_rounds} "
                f"rounds of sharpened pseudo-labels on the confident images of the {pool_size}-image public pool, with "
                "mixup (public: no privacy cost)")
    return (f"semi-supervised (FixMatch): the answered queries with their noisy labels and all {pool_size} unlabelled "
            "images of the public pool (public: no privacy cost)")


def _report_eps_curves(report: PrivacyReport, reporter: Reporter) -> None:
    """eps against the number of queries charged, thinned to about :data:`CURVE_POINTS` points.

    Metrics ``eps_data_dependent`` and ``eps_data_independent`` (the a-priori bound) at step = queries
    answered (LNMax, GNMax: every charged query is answered) or queries submitted (Confident-GNMax, whose
    every submitted query is charged both steps); Confident-GNMax adds ``eps_realised``, the paper-style
    figure that leaves out unanswered queries' GNMax step (not a bound), at the same steps.
    """
    analysis, realised = report.analysis, report.realised
    n = len(analysis.eps_curve)
    if n == 0:
        return
    charged = np.rint(analysis.answered_curve).astype(int)
    # the last row of each charged count, thinned to about CURVE_POINTS points
    last_of_count = np.flatnonzero(np.r_[charged[1:] != charged[:-1], True])
    keep = last_of_count[np.unique(np.linspace(0, len(last_of_count) - 1, CURVE_POINTS).astype(int))]
    for i in keep:
        extra = {} if realised is None else {"eps_realised": float(realised.eps_curve[i])}
        reporter.metric(int(charged[i]), eps_data_dependent=float(analysis.eps_curve[i]),
                        eps_data_independent=float(analysis.data_independent_curve[i]), **extra)
