"""PATE from teachers to student: the one pipeline a run (:mod:`.run`) and the membership attack on its recipe
(:mod:`privengine.audit.membership_pate`) both follow, stage by stage.

1. :func:`recipe_of`: what the teachers and the student see of the loaded splits (pixels, or ScatterNet features),
   their architectures and the public queries submitted (:func:`.selection.select_queries`);
2. :func:`train_teachers`: the ``teachers`` teachers of each :class:`Pipeline`, on the parts of its private set
   (:func:`.ensemble.partition_rows`); the teachers of several pipelines train together in one vmapped ensemble;
3. :func:`predict` on :attr:`Recipe.query_inputs`, then :func:`answer`: the votes counted and answered by the
   configured aggregator, its noise drawn from the caller's generator (the privacy-relevant stream, keyed by the
   pipeline's private data: :func:`privengine.randomness.noise_generator`);
4. :func:`train_student` on the answered queries; beside it, :func:`train_baseline`: PATE's non-private baseline
   (the student's architecture on the private set itself).

Every stage raises :class:`Stopped` when the caller's ``should_stop`` (a reporter's) turns true.

**Randomness.** Apart from the aggregator's noise, every draw of a pipeline comes from its own generators
(:class:`Pipeline`), never from torch's global generator, which the threads of a sweep share: the partition, the
batches, augmentations and mixup from ``shuffle`` (seeded with the seed), the initial weights of the teachers, of the
baseline and of the student each from a stream of :func:`privengine.randomness.derived_generator` of the seed
(:data:`TEACHER_INIT`, :data:`BASELINE_INIT`, :data:`STUDENT_INIT`). Two pipelines of one seed draw the same, whatever
else runs in the process meanwhile. On a user data set the baseline's batches come from a stream of their own,
``baseline_shuffle`` (:data:`BASELINE_SHUFFLE`): the baseline draws ``(1, n)`` numbers an epoch, n the private row
count, public on a built-in data set only; drawn from ``shuffle``, they would make the student's batches, and so its
published accuracy and kept model, depend on n.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from ..randomness import derived_generator
from ..reporter import Reporter
from .aggregate import Answers, aggregate, vote_counts
from .config import PateConfig
from .data import PateData, TeacherInputs, load_scattering_inputs
from .ensemble import Ensemble, partition_rows, train_ensemble
from .models import build_model
from .selection import select_queries
from .self_training import SelfTrainingSettings, train_self_training
from .student import FixMatchSettings, logits_in_chunks, train_fixmatch
from .user_data import hashed_partition
from .user_facts import teacher_rows, training_size

Progress = Callable[[float, str], None]  # (fraction of the stage done, text)

# Streams of derived_generator(seed, ...): the initial weights of the teachers, of the baseline and of the student;
# the baseline's batches on a user data set
TEACHER_INIT, BASELINE_INIT, STUDENT_INIT, BASELINE_SHUFFLE = range(4)


class Stopped(Exception):
    """Raised by every stage (and the run) when the reporter asks to stop; the run returns a partial summary."""


def _no_progress(fraction: float, text: str) -> None:
    """A stage's progress, shown nowhere."""


def _architectures(config: PateConfig, is_image: bool) -> tuple[str, str]:
    """``(teachers' architecture, student's)``: ``auto`` is the ConvNet for images, the MLP for tabular data. The
    self-training student has the teachers' model and inputs; FixMatch augments pixels, so with ScatterNet teachers it
    trains a ConvNet on the images (and so does the supervised student); the baseline follows the student."""
    teacher = config.architecture if config.architecture != "auto" else ("convnet" if is_image else "mlp")
    student = "convnet" if teacher == "scatter_linear" and config.student != "self_training" else teacher
    return teacher, student


def _teacher_inputs(config: PateConfig, data: PateData, architecture: str, reporter: Reporter) -> TeacherInputs:
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


@dataclass(frozen=True)
class Recipe:
    """A configuration's PATE recipe on its loaded data: what the teachers and the student see of the splits (row
    for row the examples of ``data``), their architectures, and ``queries`` ``(Q,)``, the rows of the public pool
    submitted, in order."""

    config: PateConfig
    data: PateData
    teacher_architecture: str
    student_architecture: str
    teachers_see: TeacherInputs
    students_see: PateData | TeacherInputs
    queries: torch.Tensor

    @property
    def query_inputs(self) -> torch.Tensor:
        """The submitted queries as the teachers see them, ``(Q, *input)``."""
        return self.teachers_see.pool_x[self.queries]

    def make_teacher(self, generator: torch.Generator) -> nn.Module:
        """A teacher on the CPU, its initial weights drawn from ``generator``."""
        return self._model(self.teacher_architecture, self.teachers_see, generator)

    def make_student(self, generator: torch.Generator) -> nn.Module:
        """A model of the student's architecture (the student's, or the baseline's) on the CPU, its initial weights
        drawn from ``generator``."""
        return self._model(self.student_architecture, self.students_see, generator)

    def _model(self, architecture: str, inputs: PateData | TeacherInputs, generator: torch.Generator) -> nn.Module:
        return build_model(architecture, tuple(inputs.pool_x.shape[1:]), self.data.n_classes,
                           width=self.config.width, depth=self.config.depth, generator=generator)


def recipe_of(config: PateConfig, data: PateData, reporter: Reporter) -> Recipe:
    """``config``'s recipe on ``data`` (:func:`_teacher_inputs` may compute ScatterNet features, with the reporter's
    progress, and raise :class:`Stopped`); the queries depend on the public pool and the seed alone."""
    teacher, student = _architectures(config, data.is_image)
    teachers_see = _teacher_inputs(config, data, teacher, reporter)
    students_see = teachers_see if config.student == "self_training" else data
    queries = select_queries(teachers_see.pool_x, config.queries, rule=config.query_selection,
                             clusters=config.selection_clusters, seed=config.seed)
    return Recipe(config, data, teacher, student, teachers_see, students_see, queries)


@dataclass(frozen=True)
class Pipeline:
    """One teachers-to-student pipeline: its private set, ``rows`` ``(n,)`` of the private split (None: all of it),
    and the CPU generators of its draws: ``shuffle`` draws its partition, then its batches, augmentations and mixup
    in the order the stages draw them; ``teacher_init``, ``baseline_init`` and ``student_init`` the initial weights
    of its teachers, its baseline and its student (every student model of the self-training rounds);
    ``baseline_shuffle`` the baseline's batches on a user data set (:func:`train_baseline`)."""

    rows: torch.Tensor | None
    shuffle: torch.Generator
    teacher_init: torch.Generator
    baseline_init: torch.Generator
    student_init: torch.Generator
    baseline_shuffle: torch.Generator

    @classmethod
    def seeded(cls, rows: torch.Tensor | None, seed: int) -> Pipeline:
        """The pipeline of private set ``rows`` whose draws are keyed by ``seed``: ``shuffle`` seeded with it, the
        others from :func:`~privengine.randomness.derived_generator` of it, streams :data:`TEACHER_INIT`,
        :data:`BASELINE_INIT`, :data:`STUDENT_INIT` and :data:`BASELINE_SHUFFLE`."""
        streams = (TEACHER_INIT, BASELINE_INIT, STUDENT_INIT, BASELINE_SHUFFLE)
        return cls(rows, torch.Generator().manual_seed(seed), *(derived_generator(seed, s) for s in streams))

    def size(self, split: int) -> int:
        """Examples in the private set, of a split of ``split``."""
        return split if self.rows is None else len(self.rows)

    def split_rows(self, positions: torch.Tensor) -> torch.Tensor:
        """Rows of the private split at ``positions`` of the private set."""
        return positions if self.rows is None else self.rows[positions]


def _private(x: torch.Tensor, pipelines: Sequence[Pipeline]) -> torch.Tensor:
    """Each pipeline's private set of ``x`` (rows of the private split): ``(K, n, *input)``, a view of ``x`` where
    every set is the whole split."""
    if all(p.rows is None for p in pipelines):
        return x.expand(len(pipelines), *x.shape)
    return x[torch.stack([p.rows for p in pipelines])]


def predict(models: Ensemble, x: torch.Tensor, should_stop: Callable[[], bool]) -> torch.Tensor:
    """Every model's predicted class of ``x`` ``(N, *input)``: ``(K, N)``; raises :class:`Stopped`."""
    out = models.predict(x, should_stop=should_stop)
    if out is None:
        raise Stopped
    return out


def train_teachers(recipe: Recipe, pipelines: Sequence[Pipeline], device: torch.device, *,
                   should_stop: Callable[[], bool],
                   on_epoch: Callable[[int, torch.Tensor], None] | None = None) -> Ensemble:
    """The teachers of every pipeline, trained together: pipeline ``j``'s private set is cut into ``teachers``
    parts by :func:`.ensemble.partition_rows` from its ``shuffle`` (a user data set's, one pipeline only, by
    :func:`.user_data.hashed_partition` from its rows' draws), and its teachers, initialised one after the other
    from its ``teacher_init``, are models ``j t .. (j + 1) t - 1`` of one ensemble, each on its part (the first
    pipeline's ``shuffle`` draws every batch); ``on_epoch(epoch, losses)`` with ``losses`` ``(len(pipelines) t,)``.
    Raises :class:`Stopped`."""
    config, split = recipe.config, len(recipe.data.private_y)
    x, y = recipe.teachers_see.private_x, recipe.data.private_y
    if recipe.data.partition_draws is None:
        rows = torch.cat([p.split_rows(partition_rows(p.size(split), config.teachers, p.shuffle)) for p in pipelines])
        weights = None
    else:  # a user data set: each row's teacher from its own draw (.user_data), a public cap of rows per teacher
        if len(pipelines) != 1 or pipelines[0].rows is not None:
            raise ValueError("a user data set's teachers train in one pipeline, on the whole private split")
        cap = teacher_rows(training_size(config.dataset, config.private_size), config.teachers)
        rows, weights = hashed_partition(recipe.data.partition_draws, config.teachers, cap)
        weights = weights.to(device)
        # the empty slots read row ``split``: a stand-in of zeros that is no teacher's row (and weighs nothing)
        x, y = torch.cat([x, x.new_zeros(1, *x.shape[1:])]), torch.cat([y, y.new_zeros(1)])
    teachers = Ensemble([recipe.make_teacher(p.teacher_init) for p in pipelines for _ in range(config.teachers)],
                        device)
    if not train_ensemble(teachers, x[rows].to(device), y[rows].to(device), epochs=config.teacher_epochs,
                          lr=config.teacher_lr,
                          batch_size=config.batch_size, generator=pipelines[0].shuffle, should_stop=should_stop,
                          on_epoch=on_epoch, weights=weights):
        raise Stopped
    return teachers


def answer(recipe: Recipe, votes: torch.Tensor, noise: torch.Generator) -> tuple[torch.Tensor, Answers]:
    """One pipeline's teachers' ``votes`` ``(t, Q)`` on the queries -> their counts ``(Q, C)`` and the configured
    aggregator's noisy answers, its noise drawn from ``noise`` (on the votes' device)."""
    config = recipe.config
    counts = vote_counts(votes, recipe.data.n_classes)
    return counts, aggregate(counts, aggregator=config.aggregator, generator=noise, gamma=config.gamma,
                             sigma=config.sigma, threshold=config.threshold, sigma1=config.sigma1,
                             sigma2=config.sigma2)


EpochReport = Callable[[int, torch.Tensor, torch.Tensor], None]  # (epoch, losses (K,), test accuracies (K,))


def report_epochs(reporter: Reporter, name: str, epochs: int, progress: Progress) -> EpochReport:
    """The ``on_epoch`` of a fit of one model (:func:`train_baseline`, the supervised student): its test accuracy and
    loss as metrics ``{name}_accuracy`` and ``{name}_loss`` at step ``epoch + 1``, and the progress."""
    def on_epoch(epoch: int, losses: torch.Tensor, accuracy: torch.Tensor) -> None:
        reporter.metric(epoch + 1, **{f"{name}_accuracy": float(accuracy[0]), f"{name}_loss": losses[0].item()})
        progress((epoch + 1) / epochs, f"{name}: epoch {epoch + 1}/{epochs}")
    return on_epoch


def _fit_on_labels(recipe: Recipe, inits: Sequence[torch.Generator], x: torch.Tensor, y: torch.Tensor, *, epochs: int,
                   shuffle: torch.Generator, device: torch.device, should_stop: Callable[[], bool],
                   on_epoch: EpochReport | None) -> tuple[Ensemble, torch.Tensor]:
    """``K`` models of the student's architecture, model ``k`` initialised from ``inits[k]``, trained on ``(x[k],
    y[k])`` (``x`` ``(K, n, *input)``, ``y`` ``(K, n)``) together, the student's learning rate and batch size, batches
    from ``shuffle``; after every epoch their accuracies ``(K,)`` on the public test set go to ``on_epoch``. The models
    and their last accuracies; raises :class:`Stopped`."""
    config = recipe.config
    models = Ensemble([recipe.make_student(init) for init in inits], device)
    test_y = recipe.data.test_y.to(device)
    accuracy = torch.full((len(x),), float("nan"), dtype=torch.float64)

    def after_epoch(epoch: int, losses: torch.Tensor) -> None:
        nonlocal accuracy
        accuracy = (models.predict(recipe.students_see.test_x) == test_y).double().mean(1)
        if on_epoch is not None:
            on_epoch(epoch, losses, accuracy)

    if not train_ensemble(models, x.to(device), y.to(device), epochs=epochs, lr=config.student_lr,
                          batch_size=config.student_batch_size, generator=shuffle, should_stop=should_stop,
                          on_epoch=after_epoch):
        raise Stopped
    return models, accuracy


def train_baseline(recipe: Recipe, pipelines: Sequence[Pipeline], device: torch.device, *,
                   should_stop: Callable[[], bool],
                   on_epoch: EpochReport | None = None) -> tuple[Ensemble, torch.Tensor]:
    """PATE's non-private baseline of every pipeline, trained together: the student's architecture (initialised from
    the pipeline's ``baseline_init``) on the private set itself, as the student sees it, with its true labels, for
    ``baseline_epochs``. Its batches come from the first pipeline's ``shuffle`` on a built-in data set (whose private
    size is public), from its ``baseline_shuffle`` on a user data set: the private row count sets how many numbers
    they draw, and ``shuffle`` goes on to draw the student's batches. The models and their test accuracies ``(K,)``;
    raises :class:`Stopped`."""
    students_see, data = recipe.students_see, recipe.data
    shuffle = pipelines[0].shuffle if data.partition_draws is None else pipelines[0].baseline_shuffle
    return _fit_on_labels(recipe, [p.baseline_init for p in pipelines], _private(students_see.private_x, pipelines),
                          _private(data.private_y, pipelines), epochs=recipe.config.baseline_epochs,
                          shuffle=shuffle, device=device, should_stop=should_stop, on_epoch=on_epoch)


def train_student(recipe: Recipe, pipeline: Pipeline, labelled_rows: torch.Tensor, labelled_y: torch.Tensor,
                  device: torch.device, reporter: Reporter, progress: Progress = _no_progress, *,
                  keep: Callable[[nn.Module], None] | None = None
                  ) -> tuple[Callable[[torch.Tensor], torch.Tensor], float]:
    """The pipeline's student on its answered queries (rows ``labelled_rows`` of the pool, noisy labels
    ``labelled_y``) and, semi-supervised or self-training, on the whole unlabelled pool: ``(logits, accuracy)``, its
    logits ``(n, C)`` on inputs ``(n, *input)`` of what it sees (``recipe.students_see``) and its accuracy on the
    public test set. Its initial weights come from the pipeline's ``student_init``, its batches, augmentations and
    mixup from its ``shuffle``. Its metrics go to ``reporter``, its progress to ``progress``; raises
    :class:`Stopped`. ``keep``: called once with the trained student as one ``nn.Module``, the network whose accuracy
    is reported (FixMatch: its weight average), to keep it."""
    config, data, inputs = recipe.config, recipe.data, recipe.students_see
    if config.student == "supervised":
        model, accuracy = _fit_on_labels(
            recipe, [pipeline.student_init], inputs.pool_x[labelled_rows][None], labelled_y[None],
            epochs=config.student_epochs,
            shuffle=pipeline.shuffle, device=device, should_stop=reporter.should_stop,
            on_epoch=report_epochs(reporter, "student", config.student_epochs, progress))
        if keep is not None:  # a fresh generator: the shapes only, every value is the trained member's
            keep(model.member(0, recipe.make_student(torch.Generator())))
        return (lambda x: model.logits_in_chunks(x)[0]), float(accuracy[0])
    if config.student == "self_training":
        model, accuracy = _self_train_student(recipe, pipeline, labelled_rows, labelled_y, device, reporter,
                                              progress)
        if keep is not None:
            keep(model)
        return (lambda x: logits_in_chunks(model, x)), accuracy
    settings = fixmatch_settings(config)
    accuracy = float("nan")

    def on_epoch(epoch: int, test_accuracy: float, loss: float, mask_rate: float) -> None:
        nonlocal accuracy
        accuracy = test_accuracy
        reporter.metric(epoch + 1, student_accuracy=test_accuracy, student_loss=loss, student_mask_rate=mask_rate)
        progress((epoch + 1) / config.student_epochs, f"student (FixMatch): epoch {epoch + 1}/{config.student_epochs}")

    # FixMatch augments images: it reads the pixels (data), never features
    model = recipe.make_student(pipeline.student_init).to(device)
    average = train_fixmatch(model, data.pool_x[labelled_rows].to(device), labelled_y.to(device),
                             data.pool_x.to(device), data.test_x.to(device), data.test_y.to(device), settings,
                             generator=pipeline.shuffle, should_stop=reporter.should_stop, on_epoch=on_epoch)
    if average is None:
        raise Stopped
    if keep is not None:
        keep(average.module)
    return (lambda x: logits_in_chunks(model, x)), accuracy


def _self_train_student(recipe: Recipe, pipeline: Pipeline, labelled_rows: torch.Tensor, labelled_y: torch.Tensor,
                        device: torch.device, reporter: Reporter, progress: Progress) -> tuple[nn.Module, float]:
    """The self-training student (:mod:`.self_training`) and its last accuracy; its test accuracy is reported after
    every round at the number of passes over the pool so far."""
    config, data, inputs = recipe.config, recipe.data, recipe.students_see
    settings = self_training_settings(config)
    accuracy = float("nan")

    def on_round(round_: int, test_accuracy: float, pseudo_fraction: float) -> None:
        nonlocal accuracy
        accuracy = test_accuracy
        reporter.metric((round_ + 1) * settings.epochs, student_accuracy=test_accuracy,
                        student_pseudo_labelled=pseudo_fraction)
        progress((round_ + 1) / (settings.rounds + 1), f"student (self-training): round {round_}/{settings.rounds}")

    model = train_self_training(lambda: recipe.make_student(pipeline.student_init).to(device),
                                inputs.pool_x.to(device), labelled_rows.to(device), labelled_y.to(device), data.n_classes,
                                inputs.test_x.to(device), data.test_y.to(device), settings,
                                generator=pipeline.shuffle, should_stop=reporter.should_stop, on_round=on_round)
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
