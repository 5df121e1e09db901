"""A PATE run end to end: teachers, votes, noisy answers, privacy analysis, student."""

from __future__ import annotations

import time

import numpy as np
import torch

from ..claims import PrivacyClaim
from ..randomness import noise_caveat, noise_generator
from ..reporter import Reporter
from ..store import EPSILON_BASIS_ARTIFACT
from .config import PateConfig, is_user_dataset
from .data import PateData, load_pate_data
from .kept import keep_student
from .pipeline import (Pipeline, Stopped, answer, predict, recipe_of, report_epochs, train_baseline, train_student,
                       train_teachers)
from .privacy import PrivacyReport, analyse, epsilon_basis
from .user_data import load_user_pate_data
from .user_facts import UNCOVERED, basis, training_size

NOISE_STREAM = 1  # stream key of the aggregator's noise (privengine.randomness); the sanitized epsilon uses
# privacy.SANITIZE_STREAM
CURVE_POINTS = 300  # points of the eps-vs-answered curves sent to the store

# Share of the progress bar per stage.
_TEACHERS, _VOTES, _BASELINE, _STUDENT = 0.6, 0.05, 0.15, 0.2


def run(config: PateConfig, reporter: Reporter) -> dict:
    started = time.perf_counter()
    device = torch.device(reporter.device)
    pipeline = Pipeline.seeded(None, config.seed)  # every draw but the noise's (pipeline module docstring)
    summary: dict = {"stage": "loading data"}

    def checkpoint(stage: str) -> None:
        summary["stage"] = stage
        if reporter.should_stop():
            raise Stopped

    def progress(start: float, share: float):
        return lambda fraction, text: reporter.progress(start + share * fraction, text)

    try:
        reporter.progress(0.0, "loading data")
        data = load_user_pate_data(config) if is_user_dataset(config.dataset) else load_pate_data(
            config.dataset, root=config.data_root, download=config.download)
        # the aggregator's noise is keyed by the teachers' private data too (privengine.randomness)
        noise = noise_generator(config, NOISE_STREAM, data=data.private_fingerprint, device=device)
        recipe = recipe_of(config, data, reporter)

        # Stored before the first output (the teachers' losses): what the run is charged should its process die
        reporter.charge_plan(planned_charge(config, data, device))
        checkpoint("training teachers")

        def on_teachers_epoch(epoch: int, losses: torch.Tensor) -> None:
            reporter.metric(epoch + 1, teacher_loss_mean=losses.mean().item(), teacher_loss_max=losses.max().item())
            reporter.progress(_TEACHERS * (epoch + 1) / config.teacher_epochs,
                              f"training {config.teachers} teachers: epoch {epoch + 1}/{config.teacher_epochs}")
        teachers = train_teachers(recipe, [pipeline], device, should_stop=reporter.should_stop,
                                  on_epoch=on_teachers_epoch)

        checkpoint("voting")
        reporter.progress(_TEACHERS, "teachers vote on the queries")
        test_preds = predict(teachers, recipe.teachers_see.test_x, reporter.should_stop)
        teacher_acc = (test_preds == data.test_y.to(device)).double().mean(1).cpu().numpy()
        reporter.artifact("teacher_accuracy", {"accuracy": teacher_acc})
        queries_y = data.pool_y[recipe.queries].to(device)
        counts, answers = answer(recipe, predict(teachers, recipe.query_inputs, reporter.should_stop), noise)
        answered = answers.answered
        n_answered = int(answered.sum())
        top2 = counts.topk(min(2, data.n_classes), dim=1).values
        margins = (top2[:, 0] - top2[:, -1]) if data.n_classes > 1 else top2[:, 0]
        reporter.artifact("vote_margins", {"margin": margins.cpu().numpy(), "teachers": config.teachers})
        summary.update(
            architecture=recipe.teacher_architecture,
            student_architecture=recipe.student_architecture,
            teachers=config.teachers,
            examples_per_teacher=private_size(config, data) // config.teachers,
            teacher_accuracy_mean=float(teacher_acc.mean()),
            ensemble_accuracy=float((counts.argmax(1) == queries_y).double().mean()),
            queries_submitted=config.queries,
            queries_answered=n_answered,
            noisy_label_accuracy=(float((answers.labels[answered] == queries_y[answered]).double().mean())
                                  if n_answered else None),
        )

        report = analyse(counts.cpu().numpy(), answered.cpu().numpy(), config, n_private=private_size(config, data),
                         extra_caveats=run_caveats(config), device=device, data=data.private_fingerprint)
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
            _, accuracy = train_baseline(recipe, [pipeline], device, should_stop=reporter.should_stop,
                                         on_epoch=report_epochs(reporter, "baseline", config.baseline_epochs,
                                                                progress(_TEACHERS + _VOTES, _BASELINE)))
            summary["baseline_accuracy"] = float(accuracy[0])
        if n_answered == 0:
            summary["student_accuracy"] = None
            reporter.log("No query was answered: the student was not trained (lower the threshold or sigma1).")
        else:
            checkpoint("training the student")
            students: list = []  # the trained student, kept once its accuracy is known (keep_model)
            _, summary["student_accuracy"] = train_student(
                recipe, pipeline, recipe.queries[answered.cpu()], answers.labels[answered].cpu(), device, reporter,
                progress(_TEACHERS + _VOTES + _BASELINE, _STUDENT),
                keep=students.append if config.keep_model else None)
            if students:
                keep_student(reporter, students[0], recipe, summary["student_accuracy"])
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
    a priori: it reads no vote, so it is computed here, before any teacher is trained, from stand-in votes
    (:func:`a_priori_headline`), and is the headline the finished run states (with the sanitized release's cost
    where the run publishes one, whose order, beta and sigma come from the configuration), with the same privacy
    events (every one of ``config.queries`` queries; none with a sanitized release). It covers every answer
    and what is computed from them; the teachers' diagnostics are covered by no claim in any run
    (:data:`~.privacy.UNPROTECTED_CAVEAT`)."""
    headline = a_priori_headline(config, config.queries, n_classes=data.n_classes,
                                 n_private=private_size(config, data), extra_caveats=run_caveats(config),
                                 device=device, data=data.private_fingerprint)
    return {"stage": "planned", "privacy": [headline.to_dict()]}


def private_size(config: PateConfig, data: PateData) -> int:
    """The teachers' private training rows as the run states them: a user data set's declared N
    (:func:`.user_facts.training_size`; its rows are never counted), else the built-in split's size."""
    if is_user_dataset(config.dataset):
        return training_size(config.dataset, config.private_size)
    return len(data.private_y)


def run_caveats(config: PateConfig) -> tuple[str, ...]:
    """The caveats every claim of a run of ``config`` adds: where its noise comes from, then :func:`data_caveats`."""
    return (noise_caveat(secure=config.secure_noise),) + data_caveats(config)


def data_caveats(config: PateConfig) -> tuple[str, ...]:
    """On a user data set, where N and the teachers' partitions come from (:func:`.user_facts.basis`), and what
    else the run publishes that no claim covers (:data:`.user_facts.UNCOVERED`); else none."""
    if not is_user_dataset(config.dataset):
        return ()
    return (basis(config.dataset, config.private_size, config.teachers) + ".", UNCOVERED)


def a_priori_headline(config: PateConfig, queries: int, *, n_classes: int, n_private: int,
                      extra_caveats: tuple[str, ...] = (), device: torch.device | str = "cpu",
                      data: tuple[int, ...] = ()) -> PrivacyClaim:
    """The headline :func:`~.privacy.analyse` states for ``queries`` charged queries (LNMax and GNMax: answered;
    Confident-GNMax: submitted), from the configuration alone: it is a priori and reads no vote, so it is the
    analysis of stand-in votes (``(queries, n_classes)``, every teacher for the first class). ``data``: the
    fingerprint keying the sanitized release's noise, where the config publishes one."""
    votes = np.zeros((queries, n_classes))
    votes[:, 0] = config.teachers
    report = analyse(votes, np.ones(queries, dtype=bool), config, n_private=n_private, extra_caveats=extra_caveats,
                     device=device, data=data)
    return next(c for c in report.claims if c.headline)


def stored_claims(config: dict, summary: dict) -> list[PrivacyClaim]:
    """The a-priori headline of a stored run, from its stored config and the queries its summary says it charged
    (a planned charge: every planned query), epsilon and events recomputed by :func:`a_priori_headline`: how the
    store's one-time upgrade gives the headlines of runs stored before claims carried events theirs
    (:mod:`privengine.ledger.upgrade`, which keeps the stored caveats). None with a sanitized release (that
    headline carries no events, :data:`~.privacy.NO_EVENTS_CAVEAT`); data-dependent figures are never restated."""
    cfg = PateConfig.from_dict(config)
    if cfg.sanitize and cfg.aggregator != "lnmax":
        return []
    charged = summary.get("queries_submitted" if cfg.aggregator == "confident_gnmax" else "queries_answered",
                          cfg.queries)
    n_private = summary.get("examples_per_teacher", 0) * cfg.teachers  # for the delta caveat, which is not kept
    return [a_priori_headline(cfg, charged, n_classes=2, n_private=n_private)]


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
