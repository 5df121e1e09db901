"""Membership inference against a PATE recipe: its student (and PATE's non-private baseline, the twin) retrained on
random halves of the run's private split, with reference pipelines on other halves, attacked by :mod:`.membership`
under the student's own claim.

**The neighbouring relation decides the game.** PATE's claims cover private sets of one size that differ in one
example (replace one, :data:`privengine.pate.privacy.NEIGHBOURING`): the teachers' partition depends on the size and
the seed only. An example in or out with a fair coin of its own (the DP-SGD attack's design) changes the size, which
that claim does not cover. So the halves here come in **pairs**: the pool (the run's private split, ``n`` examples)
is paired at random, ``P = floor(n / 2)`` pairs, the pair ``i`` being pool rows ``2i`` and ``2i + 1`` after the
pairing; a model's private set holds one example of every pair, at the pair's position. Every model trains on ``P``
examples, and two choices that differ in one pair give neighbouring sets (the swapped example sits at the same
position, hence in the same teacher's part). The target's choices ``S`` ``(P,)`` are independent fair coins; the
reference models' are drawn independently of them, in complementary pairs (a uniform choice and its opposite), so
every example is IN exactly half of every even prefix of them (:func:`draw_pair_halves`).

**The bound.** For the example ``x = a_i`` of pair ``i``, the target's set with ``a_i`` and the one with ``b_i``
instead are neighbours, whatever the other coins; so the target's (eps, delta) claim bounds every test of ``x``'s
membership, ``TPR <= min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))`` (:func:`.membership.dp_tpr_bound`), and
by concavity the ROC's averages over the examples too. The claim is the run's own accounting of the student's queries
(:func:`privengine.pate.privacy.analyse`), its headline: the **data-independent (a priori)** bound of every
submitted query, valid for every data set. The sanitized data-dependent figure is not used: the student never sees
it, and a data-dependent figure holds for one data set against its neighbours, not across the halves of the game.
Beside it, GNMax and Confident-GNMax get the tighter **RDP trade-off bound** of the same a-priori RDP curve: every
``delta'`` gives ``(eps(delta'), delta')``-DP by the claim's own conversion, and the least of their bounds holds
(:func:`.membership.rdp_tpr_bound`).

**The audited epsilon** is Steinke, Nasr & Jagielski 2023's one-run bound with the ``P`` pairs as canaries: coin
``S_i`` says which of the pair is in, a coordinate flip is a replace-one neighbour, and the guess for pair ``i``
ranks ``s(a_i) - s(b_i)`` (:func:`pair_guesses`).

**A model** ``k`` (row 0 the target; streams at ``ATTACK_INDEX + k``) is the run's recipe on its set of ``P``
examples, through the run's own pipeline (:mod:`privengine.pate.pipeline`), its draws but the noise's keyed by
``seed + k`` (:meth:`~privengine.pate.pipeline.Pipeline.seeded`: the partition, the batches and the initial weights):
``teachers`` teachers on its parts, trained together with the other models' teachers of the same pass in one vmapped
ensemble; their votes on the run's public queries; the aggregator's noise from the stream ``(NOISE_STREAM,
ATTACK_INDEX + k)`` keyed by the model's private set (:func:`privengine.randomness.noise_generator`, never one of the
run's streams); the run's student on the answered queries. Its logits on the pool and on the public test set (RMIA's
population, never trained on by any model) are scored. The **twin** is PATE's non-private baseline
(:func:`privengine.pate.pipeline.train_baseline`): the student's architecture trained on the same ``P`` examples, no
teachers, no noise (``baseline_epochs``); all twins of a pass train together.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from ..device import detect_device
from ..errors import ConfigError
from ..pate.config import MIN_EXAMPLES_PER_TEACHER, SPLIT_SIZES, PateConfig, is_user_dataset
from ..pate.data import load_pate_data
from ..accounting.pate import GNMAX_ORDERS
from ..pate.privacy import NEIGHBOURING, a_priori_rdp, analyse
from ..pate.pipeline import (Pipeline, Recipe, Stopped, answer, predict, recipe_of, train_baseline, train_student,
                             train_teachers)
from ..pate.run import NOISE_STREAM
from ..randomness import data_fingerprint, noise_generator
from .bounds import one_run_epsilon_lower
from .interface import NullReporter
from .membership import (ATTACK_INDEX, attack_scores, check_attack, exceeds, one_run_guesses, passes, rdp_tpr_bound,
                         roc_summary, tradeoff_fields)
from .membership_result import MembershipResult

__all__ = ["attack_pate", "check_target", "draw_pair_halves", "pair_guesses"]

ATTACKED = "PATE student"  # what the attack attacks, as its result and its warnings name it


def check_target(config: PateConfig) -> None:
    """ConfigError (field ``run``) unless the run trained on a built-in data set and every teacher keeps at least the
    minimum examples on half the data."""
    if is_user_dataset(config.dataset):
        raise ConfigError("run", f"trained on user data set {config.dataset!r}: the PATE membership attack retrains "
                                 "on pairs of a built-in data set's private split; attack a run on a built-in one")
    pairs = SPLIT_SIZES[config.dataset][0] // 2
    if pairs // config.teachers < MIN_EXAMPLES_PER_TEACHER:
        raise ConfigError("run", f"has {config.teachers} teachers: the attack trains on half its private split "
                                 f"({pairs} examples), under {MIN_EXAMPLES_PER_TEACHER} per teacher; attack a run "
                                 f"with at most {pairs // MIN_EXAMPLES_PER_TEACHER} teachers")


def draw_pair_halves(n: int, reference_models: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``(pool_rows, inclusion)``: ``pool_rows`` ``(2P,)`` the private rows of the ``P = floor(n / 2)`` random pairs
    (pair ``i``: ``pool_rows[2i]`` and ``pool_rows[2i + 1]``), and ``inclusion`` ``(R + 1, 2P)`` bool over those
    pool positions: row 0 the target's members, one of each pair by an independent fair coin, rows 1..R the
    references', drawn independently of row 0 in complementary pairs (rows 2j + 1 and 2j + 2: fair coins and their
    opposites), so every example is IN exactly half of every even prefix of them."""
    if reference_models < 2 or reference_models % 2:
        raise ConfigError("reference_models", f"must be an even number >= 2; got {reference_models}")
    pairs = n // 2
    pool_rows = torch.randperm(n, generator=generator)[:2 * pairs]
    coins = [torch.rand(pairs, generator=generator) < 0.5]
    for _ in range(reference_models // 2):
        coin = torch.rand(pairs, generator=generator) < 0.5
        coins += [coin, ~coin]
    second = torch.stack(coins)  # (R + 1, P): True when the pair's second example is the one in
    return pool_rows, torch.stack([~second, second], dim=2).flatten(1)


def pair_guesses(scores: np.ndarray, is_member: np.ndarray, guesses: int) -> tuple[int, int]:
    """``(r, v)`` of the one-run audit over the pairs: pair ``i``'s score is ``s(a_i) - s(b_i)`` (``scores`` ``(2P,)``
    over the pool positions, ``a_i`` at ``2i``), "a in" for the ``r / 2`` highest and "b in" for the ``r / 2`` lowest,
    ``v`` of them right (:func:`.membership.one_run_guesses` on the pairs)."""
    scores = np.asarray(scores, dtype=np.float64)
    return one_run_guesses(scores[0::2] - scores[1::2], np.asarray(is_member)[0::2], guesses)


@dataclass
class _Pool:
    """The loaded recipe and the pairing: ``pool_rows`` ``(2P,)`` and ``inclusion`` ``(R + 1, 2P)`` bool
    (:func:`draw_pair_halves`)."""

    recipe: Recipe
    pool_rows: torch.Tensor
    inclusion: torch.Tensor

    @property
    def pairs(self) -> int:
        return len(self.pool_rows) // 2

    def members(self, k: int) -> torch.Tensor:
        """Model ``k``'s private rows ``(P,)``, the chosen example of each pair, in pair order."""
        return self.pool_rows.view(-1, 2)[self.inclusion[k].view(-1, 2)]

    def pipelines(self, lo: int, hi: int, seed: int) -> list[Pipeline]:
        """The pipelines of models ``lo..hi-1``: model ``k``'s private set is its members, its draws (all but the
        noise's) keyed by ``seed + k`` (:meth:`~privengine.pate.pipeline.Pipeline.seeded`)."""
        return [Pipeline.seeded(self.members(k), seed + k) for k in range(lo, hi)]

    def scored(self) -> torch.Tensor:
        """What the student sees of the pool, then of the public test set: ``(2P + m, *input)``."""
        students_see = self.recipe.students_see
        return torch.cat([students_see.private_x[self.pool_rows], students_see.test_x])


class _Quiet(NullReporter):
    """The job's stop for the run's training functions, without their metrics and progress (the attack reports its
    own)."""

    def __init__(self, reporter, device: torch.device):
        self.should_stop = reporter.should_stop
        self.device = str(device)


def _load(config: PateConfig, refs: int, seed: int, device: torch.device, reporter) -> _Pool:
    data = load_pate_data(config.dataset, root=config.data_root, download=config.download)
    recipe = recipe_of(config, data, _Quiet(reporter, device))
    return _Pool(recipe, *draw_pair_halves(len(data.private_y), refs, torch.Generator().manual_seed(seed)))


def _headline(config: PateConfig, pool: _Pool):
    """The headline claim of every student of ``config`` on the pool's pairs: the a-priori bound of every submitted
    query, which reads no vote, so it is computed once, before any teacher is trained, from zero votes (and no
    private data to key a release with); the sanitized figure is off (the student never sees it, see the module
    docstring)."""
    votes = np.zeros((len(pool.recipe.queries), pool.recipe.data.n_classes))
    report = analyse(votes, np.ones(len(votes), dtype=bool), config.replace(sanitize=False), n_private=pool.pairs,
                     data=data_fingerprint())
    return next(c for c in report.claims if c.headline)


@dataclass
class _Trained:
    """Models ``lo..hi-1`` of a pass: logits ``(k, 2P + m, C)`` and, per model, test accuracy; for the target,
    its PATE figures."""

    logits: np.ndarray
    accuracy: list[float]
    target: dict | None = None


def _pate_pass(pool: _Pool, lo: int, hi: int, seed: int, device: torch.device, reporter,
               progress: Callable[[float, str], None]) -> _Trained:
    """Train the PATE pipelines of models ``lo..hi-1`` (see the module docstring); raises Stopped."""
    recipe = pool.recipe
    config, data, t = recipe.config, recipe.data, recipe.config.teachers
    pipelines = pool.pipelines(lo, hi, seed)

    def on_epoch(epoch: int, losses) -> None:
        progress(0.6 * (epoch + 1) / config.teacher_epochs, f"{len(losses)} teachers: epoch {epoch + 1}")
    teachers = train_teachers(recipe, pipelines, device, should_stop=reporter.should_stop, on_epoch=on_epoch)
    votes = predict(teachers, recipe.query_inputs, reporter.should_stop)
    logits, accuracy, target = [], [], None
    scored = pool.scored().to(device)
    for j, (k, pipeline) in enumerate(zip(range(lo, hi), pipelines)):
        progress(0.6 + 0.4 * j / (hi - lo), f"student {k + 1}")
        members = pool.members(k)
        fingerprint = data_fingerprint(data.private_x[members], data.private_y[members])
        noise = noise_generator(config, NOISE_STREAM, ATTACK_INDEX + k, data=fingerprint, device=device)
        _, answers = answer(recipe, votes[j * t:(j + 1) * t], noise)
        answered = answers.answered
        if k == 0:
            target = {"queries_submitted": len(recipe.queries), "queries_answered": int(answered.sum()),
                      "teachers": t, "examples_per_teacher": pool.pairs // t}
        if not bool(answered.any()):  # nothing to learn from: a student of chance (uniform logits)
            logits.append(np.zeros((len(scored), data.n_classes)))
            accuracy.append(float("nan"))
            continue
        student, acc = train_student(recipe, pipeline, recipe.queries[answered.cpu()], answers.labels[answered].cpu(),
                                     device, _Quiet(reporter, device))
        with torch.no_grad():
            logits.append(student(scored).double().cpu().numpy())
        accuracy.append(acc)
    return _Trained(np.stack(logits), accuracy, target)


def _baseline_pass(pool: _Pool, lo: int, hi: int, seed: int, device: torch.device, reporter,
                   progress: Callable[[float, str], None]) -> _Trained:
    """The twins of models ``lo..hi-1``: PATE's non-private baseline on each model's ``P`` examples, trained
    together; raises Stopped."""
    epochs = pool.recipe.config.baseline_epochs

    def on_epoch(epoch: int, losses, test_accuracy) -> None:
        progress((epoch + 1) / epochs, f"baselines: epoch {epoch + 1}")
    models, test_accuracy = train_baseline(pool.recipe, pool.pipelines(lo, hi, seed), device,
                                           should_stop=reporter.should_stop, on_epoch=on_epoch)
    logits = models.logits_in_chunks(pool.scored())
    return _Trained(logits.double().cpu().numpy(), test_accuracy.tolist())


def _rdp_bound(config: PateConfig, queries: int) -> Callable | None:
    """The RDP trade-off bound (:func:`.membership.rdp_tpr_bound`) of the student's a-priori claim: the RDP of
    every submitted query at the claim's orders (:func:`privengine.pate.privacy.a_priori_rdp`, the curve the
    headline converts, with no sanitized release); None for LNMax, whose claim is the moments accountant's."""
    if config.aggregator == "lnmax":
        return None
    rdp = a_priori_rdp(config, queries, GNMAX_ORDERS)
    return lambda fpr: rdp_tpr_bound(fpr, GNMAX_ORDERS, rdp, config.delta)


def _summary(pool: _Pool, logits: np.ndarray, attack: str, *, offline: bool, epsilon: float, delta: float,
             guesses: int, confidence: float, tradeoff: Callable | None = None) -> dict:
    """ROC summary and the one-run guesses of ``attack`` on the models so far (``logits`` ``(1 + R', 2P + m, C)``,
    an even number R' of references used); with ``tradeoff`` (the private models' RDP bound) also
    ``exceeds_rdp_bound``."""
    refs = (len(logits) - 1) // 2 * 2
    n = 2 * pool.pairs
    data = pool.recipe.data
    labels = torch.cat([data.private_y[pool.pool_rows], data.test_y]).numpy()
    is_member = pool.inclusion[0].numpy()
    scores = attack_scores(attack, logits[:refs + 1], labels, n, pool.inclusion[1:refs + 1].numpy(), offline=offline)
    out = roc_summary(scores, is_member, epsilon=epsilon, delta=delta, confidence=confidence)
    if tradeoff is not None:
        out["exceeds_rdp_bound"] = exceeds(out, tradeoff)
    r, v = pair_guesses(scores, is_member, guesses)
    out["one_run"] = {"guesses": r, "correct": v, "confidence": confidence, "canaries": pool.pairs,
                      "epsilon_lower": one_run_epsilon_lower(m=pool.pairs, r=r, v=v, delta=delta,
                                                             confidence=confidence) if r else 0.0}
    out["reference_models_so_far"] = refs
    return out


def attack_pate(config: PateConfig, *, attack: str = "lira", reference_models: int = 16, seed: int = 0,
                offline: bool = False, twin: bool = True, device: str | torch.device | None = None,
                log: Callable[[str], None] = lambda text: None, guesses: int = 100, confidence: float = 0.95,
                models_per_pass: int = 0, reporter=None,
                on_partial: Callable[[dict], None] = lambda out: None) -> MembershipResult:
    """Run the attack (see the module docstring); its :class:`~.membership_result.MembershipResult`, whose
    ``to_dict()`` has the keys of :func:`.membership_dpsgd.attack_dpsgd`'s, its tighter bound the RDP trade-off of the
    a-priori claim (``rdp_bound_at_fpr``, ``rdp_bound_curve``, ``exceeds_rdp_bound``; none for LNMax) instead of the
    PLD one, plus ``attacked`` ("PATE student"), ``twin_name``, ``neighbouring`` and ``pairs``; ``target`` holds the
    claim's label, epsilon and accountant, the queries submitted and answered, the teachers and the student's test
    accuracy, and ``one_run`` counts the pairs as canaries. ``models_per_pass``, ``reporter`` and ``on_partial`` as
    there."""
    check_attack(attack, reference_models)
    check_target(config)
    reporter = reporter or NullReporter()
    dev = torch.device(device or detect_device().id)
    t0 = time.perf_counter()
    result = MembershipResult(attack=attack, offline=offline, delta=config.delta, seed=seed, attacked=ATTACKED,
                              twin_name="PATE's non-private baseline", neighbouring=NEIGHBOURING)
    reporter.progress(0.0, "loading the data")
    try:
        pool = _load(config, max(reference_models, 2), seed, dev, reporter)
    except Stopped:
        result.stopped = True
        return result.clock(t0)
    trained = 1 if attack == "loss" else max(reference_models, 2) + 1
    claim = _headline(config, pool)
    result.reference_models, result.pool, result.pairs = trained - 1, 2 * pool.pairs, pool.pairs
    result.planned_epsilon = claim.epsilon
    tradeoff = _rdp_bound(config, len(pool.recipe.queries))
    if tradeoff is not None:
        result.bounds = tradeoff_fields("rdp", tradeoff)
    log(f"{config.dataset}: {pool.pairs} pairs of private examples, one of each in every model; {config.teachers} "
        f"teachers of {pool.pairs // config.teachers} examples, {len(pool.recipe.queries)} queries; "
        f"{trained - 1} reference models")
    phases = (True, False) if twin else (True,)
    total = trained * len(phases)
    logits: dict[bool, list[np.ndarray]] = {True: [], False: []}
    first_accuracy: dict[bool, float] = {}  # test accuracy of the target (True) and of its twin (False)
    for phase, private in enumerate(phases):
        for lo, hi in passes(trained, models_per_pass):
            word = "PATE" if private else "non-private baseline"
            base = phase * trained + lo

            def progress(fraction: float, text: str, base=base, k=hi - lo, word=word, lo=lo, hi=hi) -> None:
                reporter.progress((base + k * fraction) / total, f"{word}: models {lo + 1}-{hi} of {trained}, {text}")
            started = time.perf_counter()
            try:
                done = (_pate_pass if private else _baseline_pass)(pool, lo, hi, seed, dev, reporter, progress)
            except Stopped:
                result.stopped = True
                break
            log(f"{word}: models {lo + 1}-{hi} trained in {time.perf_counter() - started:.1f} s")
            logits[private].append(done.logits)
            if lo == 0:
                first_accuracy[private] = done.accuracy[0]
            if done.target is not None:  # the target is trained: its claim is the one computed before
                result.epsilon, result.accountant = claim.epsilon, claim.accountant
                result.target = done.target | {"claim": claim.label, "epsilon": claim.epsilon,
                                               "accountant": claim.accountant, "dataset": config.dataset,
                                               "test_accuracy": done.accuracy[0]}
            if sum(len(x) for x in logits[private]) < 3 and attack != "loss":
                continue  # no reference model on each side yet
            summary = _summary(pool, np.concatenate(logits[private]), attack, offline=offline,
                               epsilon=result.epsilon, delta=config.delta, guesses=guesses, confidence=confidence,
                               tradeoff=tradeoff if private else None)
            if private:
                result.summary = summary
            else:
                result.measure_twin(summary, first_accuracy[False])
            on_partial(result.clock(t0).to_dict())
        if result.stopped:
            break
    if attack != "loss" and result.measured and not result.stopped:
        every = np.concatenate(logits[True])
        result.compare_attacks(lambda name: _summary(  # the same models: for comparison
            pool, every, name, offline=offline, epsilon=result.epsilon, delta=config.delta, guesses=guesses,
            confidence=confidence, tradeoff=tradeoff))
    return result.finish(t0, reporter, log, ATTACKED)
