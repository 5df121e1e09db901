"""Benchmark: LiRA and RMIA against adversarial-robustness-toolbox's black-box membership attack, on the same target.

Issue 27's goal: at FPR 0.1 %, LiRA / RMIA reach at least 2x the TPR of ART's ``MembershipInferenceBlackBox`` on
the same target. The targets are the models :func:`privengine.audit.membership_dpsgd.attack_logits` trains for the
attack (the recipe on a random half of the private split, R reference models on other halves): the non-private twin
(where an attack is visible) and the DP-SGD model.

ART's attack is supervised: it learns a classifier (``--art-model``: nn, its default, or rf / gb) from the target's
predicted probabilities and the labels of examples whose membership the attacker knows. So the pool is split in two
at random: ART trains on one half (its members and non-members), and every attack is scored on the other half
(LiRA and RMIA need no labelled members: they use the reference models; they are scored on the same examples).
Printed: AUC and TPR at FPR 0.001 and 0.01 of each attack on the evaluation half (a level under 1 / its non-members
is below resolution, and says so), and LiRA's and RMIA's TPR at the lowest level resolved divided by ART's.

Optional: it needs ``adversarial-robustness-toolbox`` (``pip install adversarial-robustness-toolbox``; not in
requirements.txt) and says so and exits 0 when it is absent.

Run: python bench/bench_membership_art.py [--preset fmnist-membership] [--reference-models 16] [--seed 0]
                                          [--art-model nn] [--data-root ../shared/data] [--device cpu]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine import registry  # noqa: E402
from privengine.audit.membership import attack_scores, below_resolution, roc_summary  # noqa: E402
from privengine.audit.membership_dpsgd import attack_logits  # noqa: E402


def art_scores(probs: np.ndarray, labels: np.ndarray, train: np.ndarray, is_member: np.ndarray,
               model: str) -> np.ndarray:
    """ART's black-box attack fitted on the examples ``train`` (known membership) from the target's probabilities
    ``probs`` ``(n, C)``; its membership probability for every example ``(n,)``."""
    from art.attacks.inference.membership_inference import MembershipInferenceBlackBox
    from art.estimators.classification import BlackBoxClassifier

    # the target as ART sees it: a prediction function of an example (here its index into probs)
    target = BlackBoxClassifier(lambda x: probs[x[:, 0].astype(int)], input_shape=(1,), nb_classes=probs.shape[1])
    index = np.arange(len(probs))[:, None].astype(np.float32)
    onehot = np.eye(probs.shape[1])[labels]
    attack = MembershipInferenceBlackBox(target, attack_model_type=model)
    members, non_members = train & is_member, train & ~is_member
    attack.fit(x=index[members], y=onehot[members], test_x=index[non_members], test_y=onehot[non_members],
               pred=probs[members], test_pred=probs[non_members])
    return attack.infer(index, onehot, pred=probs, probabilities=True)[:, -1].astype(np.float64)


def compare(logits: np.ndarray, labels: np.ndarray, inclusion: np.ndarray, n: int, *, seed: int,
            art_model: str) -> dict[str, dict]:
    """Every attack's ROC summary on the evaluation half of the pool."""
    is_member = inclusion[0]
    train = np.random.default_rng(seed).random(n) < 0.5  # ART's labelled half; the rest is scored
    z = logits[0, :n]
    probs = np.exp(z - z.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    scores = {name: attack_scores(name, logits, labels, n, inclusion[1:], offline=False)
              for name in ("lira", "rmia", "loss")}
    started = time.perf_counter()
    scores[f"ART black-box ({art_model})"] = art_scores(probs, labels[:n], train, is_member, art_model)
    print(f"  ART attack fitted and scored in {time.perf_counter() - started:.1f} s")
    return {name: roc_summary(s[~train], is_member[~train]) for name, s in scores.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="fmnist-membership")
    parser.add_argument("--reference-models", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--art-model", default="nn", choices=("nn", "rf", "gb"))
    parser.add_argument("--data-root", default="")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    try:
        import art  # noqa: F401
    except ImportError:
        print("adversarial-robustness-toolbox is not installed (pip install adversarial-robustness-toolbox): "
              "nothing to compare; skipped.")
        return 0
    warnings.filterwarnings("ignore")
    config = registry.get("dpsgd").preset_config(args.preset)
    if args.data_root:
        config = config.replace(data_root=args.data_root)
    for private, name in ((False, "non-private twin"), (True, "DP-SGD model")):
        started = time.perf_counter()
        logits, labels, inclusion, n = attack_logits(config, reference_models=args.reference_models, seed=args.seed,
                                                     private=private, device=args.device)
        print(f"{name}: {args.reference_models + 1} models trained in {time.perf_counter() - started:.1f} s "
              f"(pool {n})")
        results = compare(logits, labels, inclusion, n, seed=args.seed, art_model=args.art_model)
        art_tpr = results[f"ART black-box ({args.art_model})"]["tpr_at_fpr"]
        level = next(iter(art_tpr), None)  # the lowest level resolved: every attack scores the same examples
        for attack, summary in results.items():
            tpr = summary["tpr_at_fpr"]
            ratio = "" if attack.startswith("ART") or level is None else \
                f"  x{tpr[level] / art_tpr[level]:.1f} ART's at {level}" if art_tpr[level] > 0 else "  (ART's TPR is 0)"
            rates = "  ".join(f"TPR@{k} {tpr[k]:.4f}" if k in tpr else
                              f"TPR@{k} {below_resolution(k, summary['non_members'])}" for k in ("0.001", "0.01"))
            print(f"  {attack:24s} AUC {summary['auc']:.3f}  {rates}"
                  f"  ({summary['members']} members, {summary['non_members']} non-members){ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
