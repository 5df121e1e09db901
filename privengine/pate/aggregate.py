"""Noisy aggregation of teacher votes: LNMax, GNMax and Confident-GNMax.

Noise is added to float copies of the counts (the seed added Laplace noise to an
integer array, which truncated it: the mechanism that ran was not the one analysed).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F


def vote_counts(predictions: torch.Tensor, n_classes: int) -> torch.Tensor:
    """Teacher predictions ``(K, N)`` -> vote counts ``(N, n_classes)`` float.

    ``n_classes`` is the dataset's number of classes, not the number of classes that
    happen to be predicted (a seed bug made the count matrix too narrow).
    """
    return F.one_hot(predictions, n_classes).sum(0).to(torch.float64)


@dataclass(frozen=True)
class Answers:
    """``labels``: ``(N,)`` int64 noisy labels (-1 where not answered); ``answered``: ``(N,)`` bool."""

    labels: torch.Tensor
    answered: torch.Tensor


def laplace(shape: torch.Size, scale: float, generator: torch.Generator, device) -> torch.Tensor:
    """Lap(0, scale) draws by inverting the CDF (torch's Laplace distribution takes no generator)."""
    u = torch.rand(shape, generator=generator, device=device, dtype=torch.float64) - 0.5
    return -scale * torch.sign(u) * torch.log1p(-2.0 * u.abs())


def gaussian(shape: torch.Size, std: float, generator: torch.Generator, device) -> torch.Tensor:
    return std * torch.randn(shape, generator=generator, device=device, dtype=torch.float64)


def aggregate(counts: torch.Tensor, *, aggregator: str, generator: torch.Generator, gamma: float = 0.0,
              sigma: float = 0.0, threshold: float = 0.0, sigma1: float = 0.0, sigma2: float = 0.0) -> Answers:
    """Answer every query (row of ``counts``, ``(N, C)`` float) with the chosen noisy argmax.

    - ``lnmax``: ``argmax_j n_j + Lap(1/gamma)``;
    - ``gnmax``: ``argmax_j n_j + N(0, sigma^2)``;
    - ``confident_gnmax``: answered iff ``max_j n_j + N(0, sigma1^2) >= threshold``, then
      ``argmax_j n_j + N(0, sigma2^2)``.
    ``generator`` must live on ``counts.device``.
    """
    shape, device = counts.shape, counts.device
    everyone = torch.ones(shape[0], dtype=torch.bool, device=device)
    if aggregator == "lnmax":
        return Answers((counts + laplace(shape, 1.0 / gamma, generator, device)).argmax(1), everyone)
    if aggregator == "gnmax":
        return Answers((counts + gaussian(shape, sigma, generator, device)).argmax(1), everyone)
    if aggregator == "confident_gnmax":
        noisy_max = counts.max(1).values + gaussian(shape[:1], sigma1, generator, device)
        answered = noisy_max >= threshold
        labels = (counts + gaussian(shape, sigma2, generator, device)).argmax(1)
        return Answers(torch.where(answered, labels, torch.full_like(labels, -1)), answered)
    raise ValueError(f"unknown aggregator {aggregator!r}")
