r"""Membership inference against the model a finished DP-SGD run kept (``audit membership --target-run ID``, the
``stored_model`` knob of :class:`~.membership_job.MembershipAuditConfig`), not a retrained copy of its recipe.

The game. The run split its data set once, from its stored config: the **members** are its private training rows
(``n``, every one of them trained on), the **non-members** the held-out rows it never trained on (its validation and
test parts, ``m``). The split is reloaded exactly as the run loaded it (:func:`~privengine.dpsgd.run.load`), which is
only the run's split where it is drawn from the config: the bundled digits (a permutation seeded by ``data_seed``)
and user data sets (each row held out by a keyed hash of the row and ``data_seed``,
:mod:`privengine.datasets.held_out`). The data sets of the data root are refused: their held-out rows are the data
set's own test split, fixed by its authors, so members and non-members are not exchangeable and no DP bound holds for
the ROC. The run must be one the recipe attack could retrain (:func:`.membership_dpsgd.check_target`: Poisson
batches, so that its ε is a proven bound, and the isotropic setting of a batchable model). As a check that the
reloaded rows are the run's, the kept model's accuracies on the reloaded validation and test parts must be the ones
the run stored (each to one example: a borderline arg-max may round otherwise on another device).

Duplicates. On a user data set, rows of identical content share one coin (:mod:`privengine.datasets.held_out`):
content held ``k`` times is in or out ``k`` rows at a time, a group of ``k``. Every pool row whose network input and
label occur more than once among the private and held-out rows is dropped from the pool (identical content gives
identical inputs, so this drops every such group, and perhaps more), the count stated in the result; the choice
reads the rows' contents only, never which of them trained, so it is independent of the members.

Scores. The target's logits ``(P, C)`` on the pool of ``P = n + m`` rows are the kept network's
(:func:`privengine.kept_models.loader.load`, the loader ``predict`` uses) on the run's network inputs. LiRA's
reference models retrain the run's recipe with the run's plan (sigma, ``q = B / N``, steps, read from the run's stored
summary, never recomputed by today's code) on halves of the pool
(:func:`.membership_dpsgd.draw_halves`: each row in exactly half of them), as the recipe attack trains its own; the
loss attack needs none. RMIA is not offered: its population must be rows no model trained on, and every row of the
pool is in half the reference models.

The bound. The attacked model alone is (eps, delta)-DP for adding or removing one example, eps from its accountant
history as the run stored it (:func:`privengine.dpsgd.privacy.run_histories`: the private-normalisation step if any,
then ``(sigma, q, steps)``; :func:`~privengine.accounting.subsampled_gaussian.epsilon_of`). A user data set
holds each row out by its own coin, so "x in" and "x out" are add/remove neighbours: ``TPR <= B(FPR)``, ``B`` the
(eps, delta) bound and the tighter PLD trade-off of :mod:`.membership`. The digits split has fixed sizes, so "x out"
puts another row in x's place: replace-one, a remove then an add, and ``TPR <= B(B(FPR))`` (``B`` non-decreasing
and concave, so is ``B o B``, and the average over the examples stays under it). Both splits are seeded, and taken as
random: no score reads ``data_seed`` (which would tell members from non-members outright). Either way the members are
not independent fair coins, so no one-run lower bound on eps is computed (Steinke, Nasr & Jagielski's needs them):
the result has no audited ε (None), its ROC only. The bound holds for rates expected over the split's draw and the
training noise, averaged over the rows, at a threshold fixed in advance; one split and one model are one draw.

Privacy of the attack itself: it reads the private split and the held-out rows and reports statistics of them: an
operator's diagnostic covered by no claim, charged to the run's source like the recipe attack
(:mod:`.sources`: ``run:ID``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np
import torch

from ..accounting.subsampled_gaussian import epsilon_of
from ..device import detect_device
from ..dpsgd import metrics as M
from ..dpsgd.config import DPSGDConfig, is_user_dataset
from ..dpsgd.model_batch import Member, train_and_predict
from ..dpsgd.privacy import run_histories
from ..dpsgd.run import load
from ..dpsgd.training import Plan
from ..errors import ConfigError
from ..kept_models import loader
from .interface import NullReporter
from .membership import (ATTACK_INDEX, attack_scores, check_attack, dp_tpr_bound, exceeds, pld_tpr_bound,
                         roc_summary, tradeoff_fields)
from .membership_dpsgd import check_target, draw_halves
from .membership_result import MembershipResult

__all__ = ["ADD_REMOVE", "MEANING", "REPLACE_ONE", "StoredTarget", "attack_stored", "distinct_rows", "kept_target",
           "pool_of", "redrawable", "stored_target"]

ADD_REMOVE = ("add or remove one: each row of a user data set is held out by its own keyed coin, so the bound is "
              "the attacked model's own (rows whose content occurs more than once are left out of the pool)")
REPLACE_ONE = ("replace one: the attacked model's (ε, δ) bound applied twice (group of 2): the digits split has "
               "fixed sizes, so a non-member's place is another row's, a remove, then an add")
MEANING = ("What the bound bounds: the true- and false-positive rates expected over the draw of the run's split "
           "(data_seed, or the keyed hash, taken as random) and over its training noise, averaged over the run's "
           "rows, at a threshold fixed in advance; this attack sees one split and one model, a single draw of "
           "them.")


@dataclass(frozen=True)
class StoredTarget:
    """The attacked model of a stored run: the run's ``recipe`` (its config), the folder its models are kept in,
    the kept model's ``name`` and its ``spec`` (:mod:`privengine.kept_models.spec`), its accountant ``history`` and
    the run's ``plan`` (sigma, q, steps), both read from the run's stored summary."""

    run_id: str
    recipe: DPSGDConfig
    folder: str
    name: str
    spec: dict[str, Any]
    history: list
    plan: Plan


def redrawable(dataset: str) -> bool:
    """Whether a run on ``dataset`` drew its split from its config (the bundled digits, a user data set), so that
    its members and non-members can be drawn again and its stored model attacked."""
    return dataset == "digits" or is_user_dataset(dataset)


def stored_target(run_id: str, recipe: DPSGDConfig, store) -> StoredTarget:
    """The model of run ``run_id`` (of config ``recipe``, ended) the attack scores: its first kept model of the
    isotropic setting, in the run's model order (fixed by the config: the run's default model is chosen on the
    validation rows, which are non-members here). ConfigError (field ``run``) for a run the recipe attack could not
    retrain (:func:`.membership_dpsgd.check_target`), that kept no model, none of the isotropic setting, whose
    members and non-members cannot be drawn again from its config, or whose summary does not state its model's
    history (:func:`_stored_history`)."""
    check_target(recipe)
    if not redrawable(recipe.dataset):
        raise ConfigError("run", f"trained on {recipe.dataset}, whose held-out rows are its own test split, fixed by "
                                 "its authors, not drawn by data_seed: members and non-members would not be "
                                 "exchangeable and no bound would hold; attack its recipe instead (--run), or a run "
                                 "on digits or on a user data set")
    names = store.kept_models(run_id)
    if not names:
        why = ("its keep_model knob was off" if recipe.keep_model is False else
               "it stopped or failed before the end, or ran before runs kept models")
        raise ConfigError("run", f"kept no model ({why}): attack its recipe instead, or rerun it with keep_model on")
    folder = store.models_dir(run_id)
    specs = {name: json.loads((folder / f"{name}.json").read_text(encoding="utf-8")) for name in names}
    isotropic = [n for n in names if specs[n].get("model", {}).get("alpha") == 0.0]
    if not isotropic:
        raise ConfigError("run", "kept no model of the isotropic setting (alpha 0): the reference models retrain "
                                 "alpha 0 only")
    name = min(isotropic, key=lambda n: specs[n]["model"]["index"])
    history, plan = _stored_history(store.get_run(run_id).summary or {}, specs[name]["model"], recipe)
    return StoredTarget(run_id, recipe, str(folder), name, specs[name], history, plan)


def _stored_history(summary: dict, model: dict, recipe: DPSGDConfig) -> tuple[list, Plan]:
    """``(history, plan)`` of the kept model ``model`` (its spec's ``model`` part) as run summary ``summary`` states
    them: its accountant history (:func:`~privengine.dpsgd.privacy.run_histories`) and the run's plan (its stored
    noise_multiplier, sample_rate and steps_per_model, batch size the recipe's). ConfigError (field ``run``) when the
    summary lacks them or lists another model (seed, alpha or steps) at the model's index."""
    keys = ("noise_multiplier", "sample_rate", "steps_per_model", "models")
    missing = [k for k in keys if k not in summary]
    if missing:
        raise ConfigError("run", f"has no stored {', '.join(missing)} in its summary: the attacked model's sigma, q "
                                 "and steps must be the run's own, not recomputed by today's code")
    index, models = model["index"], summary["models"]
    listed = models[index] if index < len(models) else {}
    if any(listed.get(k) != model.get(k) for k in ("seed", "alpha", "steps")):
        raise ConfigError("run", f"lists no model {index} of seed {model.get('seed')}, alpha {model.get('alpha')} "
                                 f"and {model.get('steps')} steps in its summary, as its kept model states: its "
                                 "stored history cannot be told")
    plan = Plan(noise_multiplier=summary["noise_multiplier"], sample_rate=summary["sample_rate"],
                steps=summary["steps_per_model"], expected_batch_size=recipe.batch_size)
    return run_histories(summary)[index], plan


def distinct_rows(x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """``(P,)`` bool: True for row i of ``x`` ``(P, *shape)`` and labels ``y`` ``(P,)`` when no other row has the same
    bytes of input and label (the rows a user data set's keyed coins hold out one by one)."""
    inputs = np.ascontiguousarray(x.detach().cpu().numpy()).reshape(len(x), -1).view(np.uint8)
    labels = np.ascontiguousarray(y.detach().cpu().numpy().astype("<i8")).reshape(len(y), 1).view(np.uint8)
    rows = np.ascontiguousarray(np.hstack([inputs, labels]))
    _, inverse, counts = np.unique(rows.view(np.dtype((np.void, rows.shape[1]))).ravel(), return_inverse=True,
                                   return_counts=True)
    return counts[inverse.ravel()] == 1


def pool_of(task) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """The attacked rows: ``x`` ``(n + m, *input_shape)`` and labels ``(n + m,)``, the private split first, then the
    held-out rows (validation part, test part), and ``is_member`` ``(n + m,)`` bool (True for the first n)."""
    x = torch.cat([task.x_private, task.x_val, task.x_test])
    y = torch.cat([task.y_private, task.y_val, task.y_test])
    is_member = np.arange(len(x)) < task.n_private
    return x, y, is_member


def kept_target(target: StoredTarget, x: torch.Tensor) -> np.ndarray:
    """The kept network's logits ``(len(x), C)`` float64 on network inputs ``x``, on the CPU (as ``predict`` runs)."""
    model = loader.load(target.folder, target.name)
    with torch.no_grad():
        return model.network(x.detach().to("cpu")).double().numpy()


def _check_reproduced(target: StoredTarget, logits: np.ndarray, task) -> float:
    """The kept model's accuracy on the reloaded test part (``logits`` ``(n + m, C)`` over :func:`pool_of`'s rows);
    ConfigError (field ``run``) unless its accuracies on the reloaded validation and test parts are the run's stored
    ones, each to within one example (the rows are then the run's own)."""
    parts = {M.VAL_ACC: ("validation", task.n_private, task.y_val), M.TEST_ACC: ("test", len(logits) - task.n_test,
                                                                                task.y_test)}
    accuracy = {}
    for key, (part, start, y) in parts.items():
        if not len(y):  # no such part: nothing stored to compare
            continue
        accuracy[key] = float((logits[start:start + len(y)].argmax(1) == y.cpu().numpy()).mean())
        stored = target.spec.get("metrics", {}).get(key)
        if stored is None or abs(accuracy[key] - stored) * len(y) > 1 + 1e-9:
            raise ConfigError("run", f"cannot be attacked as stored: its data set no longer gives the rows it "
                                     f"trained on (its kept model scores {accuracy[key]:.4f} on the reloaded {part} "
                                     f"part, the run stored {stored}); was the data set changed since?")
    return accuracy[M.TEST_ACC]


def _bounds(history: list, epsilon: float, delta: float, twice: bool) -> tuple[Callable, Callable]:
    """The (eps, delta) bound and the PLD trade-off bound of the game, each ``fpr -> tpr`` (applied twice for a
    replace-one game)."""
    def ed(fpr):
        return dp_tpr_bound(fpr, epsilon, delta)

    def pld(fpr):
        return pld_tpr_bound(fpr, history)
    if not twice:
        return ed, pld
    return (lambda fpr: ed(ed(fpr))), (lambda fpr: pld(pld(fpr)))


def attack_stored(target: StoredTarget, *, attack: str = "lira", reference_models: int = 16, seed: int = 0,
                  offline: bool = False, device: str | torch.device | None = None,
                  log: Callable[[str], None] = lambda text: None, confidence: float = 0.95, models_per_pass: int = 0,
                  reporter=None, on_partial: Callable[[dict], None] = lambda out: None, **ignored) -> MembershipResult:
    """Attack the kept model of ``target`` (see the module docstring); its
    :class:`~.membership_result.MembershipResult`, ``to_dict()`` keyed as :func:`.membership_dpsgd.attack_dpsgd`'s
    without ``one_run``, ``non_private_twin`` and ``all_attacks``, with ``attacked`` (the kept model) and
    ``neighbouring`` (the game's relation); ``target`` has ``duplicates_dropped``, the pool rows left out for sharing
    their content (user data sets). ``models_per_pass``: reference models per model batch (0: all at once);
    ``on_partial(out)`` after each pass. ``ignored``: knobs of the recipe attack this game has no use for (guesses,
    twin)."""
    check_attack(attack, reference_models)
    recipe = target.recipe.replace(alphas=(0.0,), n_seeds=1, seed=seed)
    reporter = reporter or NullReporter()
    dev = torch.device(device or detect_device().id)
    t0 = time.perf_counter()
    reporter.progress(0.0, "loading the data")
    task = load(target.recipe, dev, should_stop=lambda: False, progress=lambda *args: None)
    x, y, is_member = pool_of(task)
    logits = kept_target(target, x)
    accuracy = _check_reproduced(target, logits, task)
    user = is_user_dataset(recipe.dataset)
    keep = distinct_rows(x, y) if user else np.ones(len(x), dtype=bool)
    kept_rows = torch.from_numpy(keep).to(x.device)
    x, y, is_member, logits = x[kept_rows], y[kept_rows], is_member[keep], logits[keep]
    labels = y.cpu().numpy()
    plan, history = target.plan, target.history
    result = MembershipResult(attack=attack, offline=offline, delta=recipe.delta, seed=seed, pool=len(x),
                              attacked=f"stored model {target.name} of run {target.run_id}",
                              neighbouring=ADD_REMOVE if user else REPLACE_ONE,
                              reference_models=0 if attack == "loss" else reference_models,
                              accountant=recipe.accountant)
    result.epsilon = result.planned_epsilon = epsilon_of(history, accountant=recipe.accountant,
                                                         delta=recipe.delta)[0]
    members = int(is_member.sum())
    result.target = {"dataset": task.name, "model": recipe.model, "kept_model": target.name,
                     "noise_multiplier": plan.noise_multiplier, "sample_rate": plan.sample_rate,
                     "steps": plan.steps, "history": history, "test_accuracy": accuracy,
                     "members": members, "non_members": len(x) - members,
                     "duplicates_dropped": int((~keep).sum())}
    bound, pld = _bounds(history, result.epsilon, recipe.delta, twice=not user)
    result.bounds = tradeoff_fields("pld", pld)
    log(f"{task.name}: the stored model {target.name} of run {target.run_id} on its {members} private rows "
        f"(members) and {len(x) - members} held-out rows (non-members), {int((~keep).sum())} rows of repeated "
        f"content left out; ε = {result.epsilon:.4g}")
    refs = 0 if attack == "loss" else reference_models
    inclusion = draw_halves(len(x), max(refs, 2), torch.Generator().manual_seed(seed))[1:refs + 1]
    pool_task = replace(task, x_private=x, y_private=y)
    step = refs if models_per_pass <= 0 else max(models_per_pass // 2 * 2, 2)
    ref_logits: list[np.ndarray] = []

    def measure(done: int) -> None:
        stacked = np.concatenate([logits[None], *ref_logits]) if ref_logits else logits[None]
        summary = roc_summary(attack_scores(attack, stacked, labels, len(x), inclusion[:done].numpy(),
                                            offline=offline), is_member, bound=bound, confidence=confidence)
        summary["exceeds_pld_bound"] = exceeds(summary, pld)
        summary["reference_models_so_far"] = done
        result.summary = summary
        on_partial(result.clock(t0).to_dict())

    if refs == 0:
        measure(0)
    for lo in range(0, refs, step):
        hi = min(lo + step, refs)
        reporter.progress(lo / refs, f"reference models {lo + 1}-{hi} of {refs}")
        batch = [Member(alpha=0.0, seed=seed + 1 + k, index=ATTACK_INDEX + 1 + k, on_eval=lambda *args: None)
                 for k in range(lo, hi)]
        results, out = train_and_predict(pool_task, recipe, plan, batch, x, device=dev,
                                         should_stop=reporter.should_stop, inclusion=inclusion[lo:hi])
        if any(r.stopped for r in results):
            result.stopped = True
            break
        ref_logits.append(out.double().cpu().numpy())
        measure(hi)
    return result.finish(t0, reporter, log, "stored model")
