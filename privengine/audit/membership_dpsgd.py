"""Membership inference against a DP-SGD recipe: a target and its reference models trained by the model batch, on
random halves of the run's private split, attacked by :mod:`.membership` under the target's own claim.

:func:`attack_dpsgd` takes a run's :class:`~privengine.dpsgd.config.DPSGDConfig` (its isotropic setting, alpha 0,
of a model the batch path trains: linear, mlp, scatter_linear, scatter_mlp) and:

1. loads the run's splits; the **pool** is its private split, ``n`` examples (``x`` ``(n, *input_shape)``);
2. draws the target's members, each pool example in independently with probability 1/2 (about ``h = floor(n / 2)``;
   the others are the non-members), and R reference halves, drawn independently of the target's, in complementary
   pairs (a uniform half of ``h`` examples and the rest), so each example is in exactly R / 2 of them (Carlini et
   al.'s balanced design, every example has IN and OUT references) and so is it for every even prefix of them;
   ``inclusion`` ``(R + 1, n)`` bool, row 0 the target;
3. trains the R + 1 models in model batches (:func:`~privengine.dpsgd.model_batch.train_and_predict`; all at once, or
   the target and the first references, then the next references, ``models_per_pass`` at a time, so that a job
   redraws the ROC after each pass; a model's streams do not depend on its pass) with the run's recipe
   on a private set of ``h`` examples: sigma (given, or calibrated to the target epsilon), ``q = B / h`` and
   ``steps = int(epochs / q)`` exactly as a run of that config whose declared private size is ``h``
   (:func:`~privengine.dpsgd.planning.make_plan`; ``h = floor(N / 2)`` with N the recipe's declared private size, public,
   so the plan does not depend on the data's count or on the coins); a reference model's half is about ``h``
   examples, sampled at the same q. The claim covering the attacked model is its accountant history's epsilon at
   the run's delta (the run's accountant), and its trade-off bound the PLD one of that history;
4. scores the pool with the chosen attack from the models' logits ``(R + 1, n + m, C)`` (``m`` held-out test
   examples, RMIA's population, never trained on) and summarises the ROC (:func:`.membership.roc_summary`);
5. repeats 3-4 with the **non-private twin**: the same halves, seeds and schedule, without clipping or noise.

Beside the ROC, the attack's guesses give an epsilon lower bound that needs no independence between the examples'
outcomes: the target's members are independent fair coins and everything else the scores use (the reference
models, the population) is independent of them, so "in" for the ``r / 2`` highest scores and "out" for the ``r / 2``
lowest, ``v`` of them right, is the one-run audit of Steinke, Nasr & Jagielski 2023 with the whole pool as canaries
(:func:`.bounds.one_run_epsilon_lower`, m = n).

Streams: model ``k``'s seed is ``seed + k`` and its index ``ATTACK_INDEX + k``: a run numbers its models from 0
(fewer than a million), so even when the attack's seed and recipe equal the run's own (an isotropic one-seed run
attacked with its own seed), no noise or sampling stream of the attack's models is one of the run's.

Privacy of the attack itself: it reads the private split and reports statistics of models trained on it (members,
scores, accuracies), so its figures are an operator's diagnostic covered by no privacy claim
(:data:`.membership.NOT_COVERED`, in the result): keep them with the data, not with what is published.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from ..accounting.subsampled_gaussian import epsilon_of
from ..dpsgd import metrics as M
from ..dpsgd.config import DPSGDConfig, declared_private_size
from ..dpsgd.model_batch import Member, train_and_predict, unbatchable
from ..dpsgd.planning import make_plan
from ..dpsgd.run import load
from ..device import detect_device
from ..errors import ConfigError
from .interface import NullReporter
from .bounds import one_run_epsilon_lower
from .membership import (ATTACK_INDEX, attack_scores, check_attack, exceeds, one_run_guesses, passes, pld_tpr_bound,
                         roc_summary, tradeoff_fields)
from .membership_result import MembershipResult

__all__ = ["attack_dpsgd", "attack_logits", "check_target", "draw_halves"]


def check_target(config: DPSGDConfig) -> None:
    """ConfigError (field ``run``) unless the run's isotropic setting can be retrained by the model batch."""
    if 0.0 not in config.alphas:
        raise ConfigError("run", f"has no isotropic setting (alphas {list(config.alphas)}); the attack retrains "
                                 "alpha 0 only")
    if config.dataset == "linreg":
        raise ConfigError("run", "is a regression (linreg): the attacks score the confidence of a true class label")
    if config.sampling != "poisson":
        raise ConfigError("run", "trained on fixed-size batches of a shuffled pass, not Poisson samples: its "
                                 "accountant's ε is an estimate, not a proven bound, so an attack above it would prove "
                                 "nothing; attack a Poisson-sampled run")
    why = unbatchable(config, 0.0)
    if why is not None:
        raise ConfigError("run", f"cannot be attacked here: its models cannot be trained in a model batch ({why})")


def draw_halves(n: int, reference_models: int, generator: torch.Generator) -> torch.Tensor:
    """``(R + 1, n)`` bool: row 0 the target's members, each example in independently with probability 1/2 (the
    one-run audit's coins; about ``n / 2`` members), rows 1..R the references', drawn independently of row 0 in
    complementary pairs (rows 2j + 1 and 2j + 2: a uniform half of ``floor(n / 2)`` examples and the rest), so that
    every even number of reference models, taken in order, has each example IN exactly half of them."""
    if reference_models < 2 or reference_models % 2:
        raise ConfigError("reference_models", f"must be an even number >= 2; got {reference_models}")
    target = torch.rand(n, generator=generator) < 0.5
    rows = [target]
    for _ in range(reference_models // 2):
        half = torch.zeros(n, dtype=torch.bool)
        half[torch.randperm(n, generator=generator)[:n // 2]] = True
        rows += [half, ~half]
    return torch.stack(rows)


class _Attack:
    """One attack's state: the pool, the halves, the plan, and the logits ``(k, n + m, C)`` of the models trained so
    far (row 0 the target), private and twin; :meth:`train` adds one pass of models, :meth:`summary` scores what
    is there."""

    def __init__(self, config: DPSGDConfig, task, *, attack: str, refs: int, seed: int, offline: bool, guesses: int,
                 confidence: float, device: torch.device, reporter):
        self.task, self.attack, self.offline, self.guesses, self.confidence = task, attack, offline, guesses, confidence
        self.device, self.reporter = device, reporter
        self.n = task.n_private
        self.recipe = config.replace(alphas=(0.0,), n_seeds=1, seed=seed)
        self.inclusion = draw_halves(self.n, refs, torch.Generator().manual_seed(seed))
        self.trained = 1 if attack == "loss" else refs + 1  # the loss attack needs no reference model
        self.x = torch.cat([task.x_private, task.x_test])
        self.labels = torch.cat([task.y_private, task.y_test]).cpu().numpy()
        self.is_member = self.inclusion[0].numpy()
        self.seed = seed
        self.plan = None
        self.logits: dict[bool, list[np.ndarray]] = {True: [], False: []}
        self.results: dict[bool, list] = {True: [], False: []}
        self.stopped = False

    def done(self, private: bool) -> int:
        return sum(len(part) for part in self.logits[private])

    def train(self, private: bool, lo: int, hi: int, progress: Callable[[float], None]) -> None:
        """Train models ``lo..hi-1`` (model ``k``: seed ``seed + k``, index ``ATTACK_INDEX + k``, members
        ``inclusion[k]``) in one model batch; ``progress(fraction of this pass)`` at each evaluation."""
        def on_eval(step, values, history):
            progress(step / max(self.plan.steps, 1))

        members = [Member(alpha=0.0, seed=self.seed + k, index=ATTACK_INDEX + k,
                          on_eval=on_eval if k == lo else (lambda step, values, history: None))
                   for k in range(lo, hi)]
        results, logits = train_and_predict(self.task, self.recipe, self.plan, members, self.x, device=self.device,
                                            should_stop=self.reporter.should_stop, inclusion=self.inclusion[lo:hi],
                                            private=private)
        if any(r.stopped for r in results):
            self.stopped = True
            return
        self.results[private] += results
        self.logits[private].append(logits.double().cpu().numpy())

    def summary(self, private: bool, *, attack: str | None = None, epsilon: float, delta: float,
                pld_history: list | None = None) -> dict:
        """ROC summary (:func:`.membership.roc_summary`) and the one-run guesses of ``attack`` (default: the
        chosen one) on the models trained so far: the target and an even number of reference models. With
        ``pld_history`` (the target's ``[(sigma, q, steps)]``), also ``exceeds_pld_bound``: the summary checked against
        the tighter PLD trade-off bound of that history (at ε ≈ 8 the (ε, δ) bound is near 1 and can flag nothing)."""
        logits = np.concatenate(self.logits[private])
        refs = (len(logits) - 1) // 2 * 2
        logits = logits[:refs + 1]
        scores = attack_scores(attack or self.attack, logits, self.labels, self.n,
                               self.inclusion[1:refs + 1].numpy(), offline=self.offline)
        out = roc_summary(scores, self.is_member, epsilon=epsilon, delta=delta, confidence=self.confidence)
        if pld_history is not None:
            out["exceeds_pld_bound"] = exceeds(out, lambda fpr: pld_tpr_bound(fpr, pld_history))
        r, v = one_run_guesses(scores, self.is_member, self.guesses)
        out["one_run"] = {"guesses": r, "correct": v, "confidence": self.confidence,
                          "epsilon_lower": one_run_epsilon_lower(m=self.n, r=r, v=v, delta=delta,
                                                                 confidence=self.confidence) if r else 0.0}
        out["reference_models_so_far"] = refs
        return out


def game_plan(recipe: DPSGDConfig, reporter):
    """The plan of every model of the game: the recipe's (:func:`~privengine.dpsgd.planning.make_plan`) on a private set
    of ``h = floor(N / 2)`` examples, N the recipe's declared private size (the recipe itself keeps its declaration,
    so its noise keys are the run's recipe's). None if a stop came during the calibration; ConfigError naming the
    field, and the halving, when the recipe does not fit half its data."""
    size = declared_private_size(recipe)
    try:
        return make_plan(recipe.replace(private_size=size // 2), reporter)
    except ConfigError as exc:
        raise ConfigError(exc.field, f"{exc.reason} (the attack trains each model on about half of the recipe's "
                                     f"{size} private examples, {size // 2})") from None


def _load(config: DPSGDConfig, device: torch.device):
    """The recipe's task, loaded as its run loads it (:func:`~privengine.dpsgd.run.load`), without a stop."""
    return load(config, device, should_stop=lambda: False, progress=lambda *args: None)


def attack_logits(config: DPSGDConfig, *, reference_models: int = 16, seed: int = 0, private: bool = True,
                  device: str | torch.device | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The models :func:`attack_dpsgd` attacks, for comparing other attacks on them (bench/bench_membership_art.py):
    ``(logits (R + 1, n + m, C), labels (n + m,), inclusion (R + 1, n), n)``, row 0 the target, the pool first and
    the ``m`` held-out examples after it; ``private`` False: the non-private twin's."""
    check_target(config)
    dev = torch.device(device or detect_device().id)
    state = _Attack(config, _load(config, dev), attack="lira", refs=reference_models, seed=seed, offline=False,
                    guesses=0, confidence=0.95, device=dev, reporter=NullReporter())
    state.plan = game_plan(state.recipe, NullReporter())
    state.train(private, 0, state.trained, lambda fraction: None)
    return state.logits[private][0], state.labels, state.inclusion.numpy(), state.n


def attack_dpsgd(config: DPSGDConfig, *, attack: str = "lira", reference_models: int = 16, seed: int = 0,
                 offline: bool = False, twin: bool = True, device: str | torch.device | None = None,
                 log: Callable[[str], None] = lambda text: None, pld: bool = True, guesses: int = 100,
                 confidence: float = 0.95, models_per_pass: int = 0, reporter=None,
                 on_partial: Callable[[dict], None] = lambda out: None) -> MembershipResult:
    """Run the attack (see the module docstring); its :class:`~.membership_result.MembershipResult`.

    Keys of its ``to_dict()``: ``attack`` (with ``offline``), ``epsilon``, ``delta``, ``accountant``, ``members``,
    ``non_members``, ``reference_models``, ``auc``, ``tpr_at_fpr``, ``bound_at_fpr`` (the (eps, delta) bound),
    ``pld_bound_at_fpr`` (the tighter trade-off of the history; with ``pld``, also ``pld_bound_curve``: ``fpr`` and
    ``tpr`` lists on :data:`.membership.CURVE_FPR`), ``exceeds_bound`` (against the (eps, delta) bound) and, with
    ``pld``, ``exceeds_pld_bound`` (against the PLD one; :func:`.membership.above_a_bound` reads both), the intervals
    and counts of :func:`.membership.roc_summary`, ``roc``, ``one_run`` (``guesses``, ``correct`` and the epsilon
    lower bound of :func:`.bounds.one_run_epsilon_lower` at ``confidence``: the target's members are independent fair
    coins and the reference models independent of them, Steinke, Nasr & Jagielski 2023's setting), ``all_attacks``
    (AUC, TPRs and ``exceeds_bound`` / ``exceeds_pld_bound`` of every attack on the same models; not for ``loss``,
    which trains the target alone), ``target`` (sigma, q, steps, history, test accuracy) and ``non_private_twin``
    (its ``auc``, ``tpr_at_fpr``, intervals, ``exceeds_bound``, ``one_run`` and test accuracy).

    ``models_per_pass``: models trained together in one model batch (0: all at once); after each private pass with
    at least two reference models (and after each twin pass) ``on_partial(out)`` gets the result so far (its
    ``to_dict()``), so a job draws the ROC as it fills in. ``reporter`` (progress, should_stop; default none): a stop
    ends the attack after the current step, with ``stopped`` set and the figures of the passes done (none before the
    first; ``planned_epsilon``, the claim of the planned history, is there from the start).
    """
    check_attack(attack, reference_models)
    check_target(config)
    reporter = reporter or NullReporter()
    dev = torch.device(device or detect_device().id)
    t0 = time.perf_counter()
    reporter.progress(0.0, "loading the data")
    task = _load(config, dev)
    state = _Attack(config, task, attack=attack, refs=max(reference_models, 2), seed=seed, offline=offline,
                    guesses=guesses, confidence=confidence, device=dev, reporter=reporter)
    result = MembershipResult(attack=attack, offline=offline, delta=config.delta, seed=seed,
                              reference_models=state.trained - 1, pool=state.n, accountant=config.accountant)
    state.plan = game_plan(state.recipe, reporter)
    if state.plan is None:  # stopped while calibrating sigma
        result.stopped = True
        return result.clock(t0)
    plan = state.plan
    result.planned_epsilon = epsilon_of([(plan.noise_multiplier, plan.sample_rate, plan.steps)],
                                        accountant=config.accountant, delta=config.delta)[0]
    log(f"{task.name}: pool of {state.n} private examples, target on {int(state.is_member.sum())}, "
        f"{result.reference_models} reference models; sigma = {plan.noise_multiplier:.4g}, "
        f"q = {plan.sample_rate:.4g}, {plan.steps} steps")
    model_ranges = passes(state.trained, models_per_pass)

    def pld_history(private: bool) -> list | None:
        """The attacked model's history for the PLD check (None: the twin, or ``pld`` off)."""
        return result.target["history"] if private and pld and result.target is not None else None
    phases = (True, False) if twin else (True,)
    total = state.trained * len(phases)

    for phase, private in enumerate(phases):
        for lo, hi in model_ranges:
            base = phase * state.trained + lo
            word = "private" if private else "non-private twin"
            reporter.progress(base / total, f"{word}: models {lo + 1}-{hi} of {state.trained}")
            started = time.perf_counter()
            state.train(private, lo, hi, lambda f, base=base, k=hi - lo, word=word, lo=lo, hi=hi: reporter.progress(
                (base + k * f) / total, f"{word}: models {lo + 1}-{hi} of {state.trained}, {100 * f:.0f} %"))
            if state.stopped:
                result.stopped = True
                break
            log(f"{word}: models {lo + 1}-{hi} trained in {time.perf_counter() - started:.1f} s")
            if private and lo == 0:
                target = state.results[True][0]
                history = list(target.history)
                result.epsilon = epsilon_of(history, accountant=config.accountant, delta=config.delta)[0]
                result.target = {"dataset": task.name, "model": config.model,
                                 "noise_multiplier": plan.noise_multiplier, "sample_rate": plan.sample_rate,
                                 "steps": plan.steps, "history": history,
                                 "test_accuracy": target.final.get(M.TEST_ACC)}
                if pld:  # at the grid's levels, and on a log grid for the ROC chart
                    result.bounds = tradeoff_fields("pld", lambda fpr: pld_tpr_bound(fpr, history))
            if state.done(private) < 3 and attack != "loss":
                continue  # no reference model on each side yet
            summary = state.summary(private, epsilon=result.epsilon, delta=config.delta,
                                    pld_history=pld_history(private))
            if private:
                result.summary = summary
            else:
                result.measure_twin(summary, state.results[False][0].final.get(M.TEST_ACC))
            on_partial(result.clock(t0).to_dict())
        if state.stopped:
            break
    if attack != "loss" and result.measured and not (result.stopped and state.done(True) < state.trained):
        result.compare_attacks(lambda name: state.summary(  # the same models: for comparison
            True, attack=name, epsilon=result.epsilon, delta=config.delta, pld_history=pld_history(True)))
    return result.finish(t0, reporter, log, "private model")
