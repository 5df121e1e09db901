"""Membership inference against a DP-SGD recipe: a target and its reference models trained by the model batch, on
random halves of the run's private split, attacked by :mod:`.membership` under the target's own claim.

:func:`attack_dpsgd` takes a run's :class:`~privengine.dpsgd.config.DPSGDConfig` (its isotropic setting, alpha 0,
of a model the batch path trains: linear, mlp, scatter_linear, scatter_mlp) and:

1. loads the run's splits; the **pool** is its private split, ``n`` examples (``x`` ``(n, *input_shape)``);
2. draws ``R + 1`` halves from the attack's seed: the target's, a uniform subset of ``h = floor(n / 2)`` examples
   (its members; the other ``n - h`` are the non-members), and the R reference models', drawn independently of the
   target's and balanced (each example is in exactly ``R / 2`` of them, Carlini et al.'s design, so every example
   has IN and OUT references); ``inclusion`` ``(R + 1, n)`` bool, row 0 the target;
3. trains the R + 1 models together (:func:`~privengine.dpsgd.model_batch.train_and_predict`) with the run's recipe
   on a private set of ``h`` examples: sigma (given, or calibrated to the target epsilon), ``q = B / h`` and
   ``steps = int(epochs / q)`` exactly as a run of that config on ``h`` private examples
   (:func:`~privengine.dpsgd.run.make_plan`); a reference model's half is about ``h`` examples, sampled at the same
   q. The claim covering the attacked model is its accountant history's epsilon at the run's delta (the run's
   accountant), and its trade-off bound the PLD one of that history;
4. scores the pool with the chosen attack from the models' logits ``(R + 1, n + m, C)`` (``m`` held-out test
   examples, RMIA's population, never trained on) and summarises the ROC (:func:`.membership.roc_summary`);
5. repeats 3-4 with the **non-private twin**: the same halves, seeds and schedule, without clipping or noise.

Streams: model ``k``'s seed is ``seed + k`` and its index ``ATTACK_INDEX + k``: a run numbers its models from 0
(fewer than a million), so even when the attack's seed and recipe equal the run's own (an isotropic one-seed run
attacked with its own seed), no noise or sampling stream of the attack's models is one of the run's.

Privacy of the attack itself: it reads the private split and reports statistics of models trained on it (members,
scores, accuracies), so its figures are an operator's diagnostic covered by no privacy claim
(:data:`NOT_COVERED`, in the result): keep them with the data, not with what is published.
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np
import torch

from ..accounting.subsampled_gaussian import epsilon_of
from ..dpsgd import metrics as M
from ..dpsgd.config import DPSGDConfig
from ..dpsgd.data import load_task
from ..dpsgd.model_batch import Member, train_and_predict, unbatchable
from ..dpsgd.run import make_plan
from ..errors import ConfigError
from .interface import NullReporter
from .membership import (ATTACKS, FPR_GRID, lira_scores, logit_confidence, loss_scores, pld_tpr_bound, rmia_scores,
                         roc_summary, true_label_log_prob)

__all__ = ["attack_dpsgd", "check_target", "draw_halves"]


def check_target(config: DPSGDConfig) -> None:
    """ConfigError (field ``run``) unless the run's isotropic setting can be retrained by the model batch."""
    if 0.0 not in config.alphas:
        raise ConfigError("run", f"has no isotropic setting (alphas {list(config.alphas)}); the attack retrains "
                                 "alpha 0 only")
    if config.dataset == "linreg":
        raise ConfigError("run", "is a regression (linreg): the attacks score the confidence of a true class label")
    why = unbatchable(config, 0.0)
    if why is not None:
        raise ConfigError("run", f"cannot be attacked here: its models cannot be trained in a model batch ({why})")


def draw_halves(n: int, reference_models: int, generator: torch.Generator) -> torch.Tensor:
    """``(R + 1, n)`` bool: row 0 the target's half (exactly ``floor(n / 2)`` examples), rows 1..R the references',
    balanced (each example in exactly R / 2 of them: a random ranking of the R models per example) and drawn
    independently of row 0."""
    if reference_models < 2 or reference_models % 2:
        raise ConfigError("reference_models", f"must be an even number >= 2; got {reference_models}")
    target = torch.zeros(n, dtype=torch.bool)
    target[torch.randperm(n, generator=generator)[:n // 2]] = True
    ranks = torch.rand(reference_models, n, generator=generator).argsort(0).argsort(0)
    return torch.cat([target[None], ranks < reference_models // 2])


def _scores(attack: str, logits: np.ndarray, labels: np.ndarray, n: int, ref_in: np.ndarray, *,
            offline: bool) -> np.ndarray:
    """``(n,)`` scores of the target (row 0 of ``logits`` ``(R + 1, n + m, C)``) on the pool (its first n columns)."""
    if attack == "loss":
        return loss_scores(true_label_log_prob(logits[0, :n], labels[:n]))
    if attack == "lira":
        phi = logit_confidence(logits[:, :n], labels[:n])
        return lira_scores(phi[0], phi[1:], ref_in, online=not offline)
    p = np.exp(true_label_log_prob(logits, labels))
    return rmia_scores(p[0, :n], p[1:, :n], ref_in, p[0, n:], p[1:, n:], online=not offline)


ATTACK_INDEX = 1_000_000  # first model index of the attack's streams: above any run's own model indices
NOT_COVERED = ("Not covered by any privacy claim: the attack trains models on the private split and reports their "
               "statistics (an operator's diagnostic; keep it with the data, do not publish it).")


def attack_dpsgd(config: DPSGDConfig, *, attack: str = "lira", reference_models: int = 16, seed: int = 0,
                 offline: bool = False, twin: bool = True, device: str | torch.device | None = None,
                 log: Callable[[str], None] = lambda text: None, pld: bool = True) -> dict:
    """Run the attack (see the module docstring); a JSON-ready dict.

    Keys: ``attack`` (with ``offline``), ``epsilon``, ``delta``, ``accountant``, ``members``, ``non_members``,
    ``reference_models``, ``auc``, ``tpr_at_fpr``, ``bound_at_fpr`` (the (eps, delta) bound), ``pld_bound_at_fpr``
    (the tighter trade-off of the history; with ``pld``), ``exceeds_bound``, the intervals and counts of
    :func:`.membership.roc_summary`, ``roc``, ``all_attacks`` (AUC, TPRs and ``exceeds_bound`` of every attack on
    the same models; not for ``loss``, which trains the target alone), ``target`` (sigma, q, steps, history, test
    accuracy) and ``non_private_twin`` (its ``auc``, ``tpr_at_fpr``, intervals, ``exceeds_bound`` and test accuracy).
    """
    if attack not in ATTACKS:
        raise ConfigError("attack", f"must be one of {', '.join(ATTACKS)}; got {attack!r}")
    if reference_models < 2 and attack != "loss":
        raise ConfigError("reference_models", f"must be at least 2 for {attack}; got {reference_models}")
    check_target(config)
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    t0 = time.perf_counter()
    features = "scattering" if config.model.startswith("scatter") else "pixels"
    task = load_task(dataset=config.dataset, seed=config.data_seed, public_fraction=config.public_fraction,
                     train_limit=config.train_limit, data_root=config.data_root, device=dev, features=features)
    n = task.n_private
    recipe = config.replace(alphas=(0.0,), n_seeds=1, seed=seed)
    plan = make_plan(recipe, n // 2, NullReporter())
    gen = torch.Generator().manual_seed(seed)
    refs = max(reference_models, 2)
    inclusion = draw_halves(n, refs, gen)
    trained = 1 if attack == "loss" else refs + 1  # the loss attack needs no reference model
    members = [Member(alpha=0.0, seed=seed + k, index=ATTACK_INDEX + k, on_eval=lambda step, values, history: None)
               for k in range(trained)]
    x = torch.cat([task.x_private, task.x_test])
    labels = torch.cat([task.y_private, task.y_test]).cpu().numpy()
    is_member = inclusion[0].numpy()
    ref_in = inclusion[1:].numpy()
    log(f"{task.name}: pool of {n} private examples, target on {int(is_member.sum())}, {refs} reference models; "
        f"sigma = {plan.noise_multiplier:.4g}, q = {plan.sample_rate:.4g}, {plan.steps} steps")

    def one(private: bool) -> tuple[dict, float]:
        started = time.perf_counter()
        results, logits = train_and_predict(task, recipe, plan, members, x, device=dev, should_stop=lambda: False,
                                            inclusion=inclusion[:trained], private=private)
        log(f"{'private' if private else 'non-private twin'}: {trained} models trained in "
            f"{time.perf_counter() - started:.1f} s; target test accuracy {results[0].final.get(M.TEST_ACC)}")
        return results[0], logits.double().cpu().numpy()

    target, logits = one(True)
    history = list(target.history)
    epsilon = epsilon_of(history, accountant=config.accountant, delta=config.delta)[0]
    scores = _scores(attack, logits, labels, n, ref_in, offline=offline)
    summary = roc_summary(scores, is_member, epsilon=epsilon, delta=config.delta)
    out = {"attack": attack, "offline": offline, "epsilon": epsilon, "delta": config.delta, "privacy": NOT_COVERED,
           "accountant": config.accountant, "reference_models": refs if attack != "loss" else 0,
           "pool": n, "seed": seed, **summary,
           "target": {"dataset": task.name, "model": config.model, "noise_multiplier": plan.noise_multiplier,
                      "sample_rate": plan.sample_rate, "steps": plan.steps, "history": history,
                      "test_accuracy": target.final.get(M.TEST_ACC)}}
    if attack != "loss":  # the other attacks on the same models: AUC and TPRs, for comparison
        out["all_attacks"] = {}
        for name in ATTACKS:
            other = summary if name == attack else roc_summary(
                _scores(name, logits, labels, n, ref_in, offline=offline), is_member, epsilon=epsilon,
                delta=config.delta)
            out["all_attacks"][name] = {k: other[k] for k in ("auc", "tpr_at_fpr", "exceeds_bound")}
    if pld:
        bound = pld_tpr_bound(list(FPR_GRID), history)
        out["pld_bound_at_fpr"] = {f"{a:g}": float(b) for a, b in zip(FPR_GRID, bound)}
    if twin:
        twin_target, twin_logits = one(False)
        twin_summary = roc_summary(_scores(attack, twin_logits, labels, n, ref_in, offline=offline), is_member,
                                   epsilon=epsilon, delta=config.delta)
        out["non_private_twin"] = {k: twin_summary[k] for k in ("auc", "tpr_at_fpr", "tpr_interval_at_fpr",
                                                                "fpr_at_fpr", "exceeds_bound", "roc")}
        out["non_private_twin"]["test_accuracy"] = twin_target.final.get(M.TEST_ACC)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    if any(out["exceeds_bound"].values()):
        log("WARNING: the attack on the private model is above the DP bound of its claim at some FPR (beyond the "
            "confidence intervals): a bug to report in the mechanism or its accounting")
    return out
