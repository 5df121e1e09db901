"""Metric names of a DP-SGD run, shared by the engine and its page (no torch import).

Curves of one trained model are stored as ``"<metric>|<setting>|seed=<seed>"``
(e.g. ``"test_acc|alpha=4|seed=1"``), so one run's store holds the curves of every
(setting, seed) of its sweep. The epsilon curve is the same for every model of a
run (same sigma, sample rate and steps) and is stored once as ``"epsilon_each_model"``
(each model alone: the run's headline composes all of them).

>>> key = metric_key("test_acc", "alpha=4", 1)
>>> key
'test_acc|alpha=4|seed=1'
>>> split_metric_key(key)
('test_acc', 'alpha=4', 1)
>>> split_metric_key("epsilon_each_model")
('epsilon_each_model', None, None)
"""

from __future__ import annotations

TRAIN_LOSS = "train_loss"        # mean loss of the private physical batches since the last report
TEST_ACC = "test_acc"            # classification: accuracy on the test part of the held-out split (reported)
VAL_ACC = "val_acc"              # classification: accuracy on its validation part (final step only; selects)
EXCESS_RISK = "excess_risk"      # linreg: population excess risk (w - w*)^T Sigma (w - w*)
ENERGY = "captured_energy"       # ||U^T g||^2 / ||g||^2 for the summed clipped private gradient g
EPSILON = "epsilon_each_model"   # epsilon spent so far by one model alone (the same for every model of a run)

ISOTROPIC = "isotropic"
PROJECTED = "projected"


def setting_label(alpha: float, variant: str) -> str:
    """The name of a compared setting: ``isotropic``, ``alpha=4``, ``projected`` or ``elliptical alpha=-0.5``."""
    if alpha == 0:
        return ISOTROPIC
    if variant == "projected":
        return PROJECTED
    return f"elliptical alpha={alpha:g}" if variant == "elliptical" else f"alpha={alpha:g}"


def metric_key(metric: str, setting: str, seed: int) -> str:
    return f"{metric}|{setting}|seed={seed}"


def split_metric_key(key: str) -> tuple[str, str | None, int | None]:
    """``(metric, setting, seed)``; setting and seed are None for run-wide curves."""
    parts = key.split("|")
    if len(parts) != 3 or not parts[2].startswith("seed="):
        return key, None, None
    return parts[0], parts[1], int(parts[2].removeprefix("seed="))
