r"""Label-leakage attacks of the passive party, and their per-batch and per-epoch leak AUC.

The passive party sees, per batch, the gradients it receives at the cut layer
(``(n, d)``) and the gradients they induce at the output of its first layer
(``(n, h)``, computed by backpropagating through its own bottom model). Two scores:

- norm attack: ``score_i = ||g_i||`` (positives are rare, so they are badly fit and
  get the larger gradients);
- direction attack: ``score_i = cos(g_i, g_ref)`` where ``g_ref`` is the gradient of
  one example the attacker knows to be positive (drawn at random among the batch's
  positives and left out of the scored examples).

Leak AUC = ROC AUC of the scores against the true labels, per batch (:func:`roc_auc_rows`).
It is undefined (NaN, skipped in the epoch summary) when the scored examples lack a
class: a batch without positives or negatives, or a direction attack on a batch
with fewer than two positives. An AUC below 1/2 is reported as it is (the attack's
orientation is fixed); Marvell's bound applies to any scorer, flipped ones included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy.stats import rankdata

from .marvell import auc_bound

ATTACKS = ("norm", "cos")
LAYERS = ("cut", "first")
NAMES = tuple(f"{attack}.{layer}" for layer in LAYERS for attack in ATTACKS)
"""Attack names, ``"<attack>.<layer>"``: norm.cut, cos.cut, norm.first, cos.first."""


def pick_reference(y: torch.Tensor, rng: np.random.Generator) -> int | None:
    """Index of the positive whose gradient the direction attack knows, or None without positives."""
    positives = torch.nonzero(y > 0.5).flatten().tolist()
    return int(rng.choice(positives)) if positives else None


def attack_scores(layers: dict[str, torch.Tensor], reference: int | None) -> torch.Tensor:
    """Scores of every attack (rows, in :data:`NAMES` order) for every example (columns): ``(4, n)``.

    ``layers`` maps ``"cut"`` and ``"first"`` to ``(n, dim)`` gradients. The
    direction attack's reference example gets NaN (it is not scored); so does
    every example when there is no reference.
    """
    rows = []
    for layer in LAYERS:
        grad = layers[layer]
        norms = grad.norm(dim=1)
        if reference is None:
            cos = torch.full_like(norms, math.nan)
        else:
            cos = torch.nn.functional.cosine_similarity(grad, grad[reference].unsqueeze(0), dim=1)
            cos[reference] = math.nan
        rows += [norms, cos]
    return torch.stack(rows)


def leak_aucs(scores: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    """Leak AUC per attack (NaN where the scored examples lack a class), from :func:`attack_scores`' table."""
    table = scores.detach().float().cpu().numpy()  # one device -> host transfer
    labels = y.detach().cpu().numpy() > 0.5
    out = np.full(len(NAMES), math.nan)
    scored = np.isfinite(table)
    for pattern in np.unique(scored, axis=0):  # rows scoring the same examples are ranked together
        rows = (scored == pattern).all(axis=1)
        out[rows] = roc_auc_rows(table[rows][:, pattern], labels[pattern])
    return dict(zip(NAMES, out.tolist()))


def roc_auc_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """ROC AUC of each row of ``scores`` ``(k, n)`` against boolean ``labels`` ``(n,)``; NaN if a class is absent.

    Mann-Whitney form ``AUC = (R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg)`` with
    ``R_pos`` the sum of the positives' ranks, ties given their average rank (so a
    tie counts 1/2), which equals ``sklearn.metrics.roc_auc_score`` row by row (the
    tests check it). Written here because scikit-learn scores one row per call with
    about a millisecond of input validation each, which dominated the training step.
    """
    n_pos = int(labels.sum())
    n_neg = labels.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return np.full(scores.shape[0], math.nan)
    ranks = rankdata(scores, axis=1)
    return (ranks[:, labels].sum(axis=1) - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


@dataclass
class LeakLog:
    """Per-batch leak AUCs of one epoch (or of a whole run), summarised as mean and 95% quantile."""

    values: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in NAMES})

    def add(self, aucs: dict[str, float]) -> None:
        for name, value in aucs.items():
            self.values[name].append(value)

    def extend(self, other: "LeakLog") -> None:
        for name, vals in other.values.items():
            self.values[name].extend(vals)

    def summary(self, prefix: str) -> dict[str, float | None]:
        """``{<prefix>.<name>.mean, <prefix>.<name>.q95}`` over the defined batches; None where none was."""
        out: dict[str, float | None] = {}
        for name, vals in self.values.items():
            defined = np.asarray([v for v in vals if not math.isnan(v)])
            out[f"{prefix}.{name}.mean"] = float(defined.mean()) if defined.size else None
            out[f"{prefix}.{name}.q95"] = float(np.quantile(defined, 0.95)) if defined.size else None
        return out


def sumkl_summary(values: list[float]) -> dict[str, float | None]:
    """Mean and max of the per-batch sumKL achieved, and the leak AUC bounds they imply.

    The bound ``h(sumKL) = 1/2 + sqrt(sumKL)/2 - sumKL/8`` (:func:`.marvell.auc_bound`) holds
    batch by batch, so

    - ``auc_bound``, the bound at the largest sumKL, covers every batch's leak AUC (their 95%
      quantile included, up to the sampling noise of a batch's measured AUC);
    - ``auc_bound.mean``, the mean of the per-batch bounds, covers the mean over batches of the
      leak AUC, the quantity the measured mean estimates (at most ``h`` at the mean sumKL, as
      ``h`` is concave).

    All None when no batch had a sumKL (protections without one, or only single-class batches).

    >>> {k: round(v, 4) for k, v in sumkl_summary([0.16, 0.64, math.nan]).items()}
    {'sumkl.mean': 0.4, 'sumkl.max': 0.64, 'auc_bound': 0.82, 'auc_bound.mean': 0.75}
    """
    defined = [v for v in values if not math.isnan(v)]
    if not defined:
        return {"sumkl.mean": None, "sumkl.max": None, "auc_bound": None, "auc_bound.mean": None}
    return {"sumkl.mean": float(np.mean(defined)), "sumkl.max": max(defined), "auc_bound": auc_bound(max(defined)),
            "auc_bound.mean": float(np.mean([auc_bound(v) for v in defined]))}
