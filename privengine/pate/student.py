"""The semi-supervised PATE student: FixMatch (Sohn et al., NeurIPS 2020) on the public pool.

Why FixMatch: the PATE papers' student used a GAN (improved-GAN semi-supervised learning,
Salimans et al. 2016), which is slow and fragile to tune on a CPU. FixMatch is the simplest
well-tested method that reaches near-supervised accuracy on digit images from a few hundred
labels, and it fits two CPU cores with a small ConvNet. Per step, with ``B`` labelled and
``mu B`` unlabelled images::

    loss = CE(f(weak(x_l)), y_l)                                                  (labelled: the answered queries)
         + lambda_u * mean_u [ max p_u >= tau ] * CE(f(strong(x_u)), argmax p_u),  p_u = softmax f(weak(x_u))

the pseudo-label ``argmax p_u`` is taken without gradient. The unlabelled images are the whole
public query pool: public data, so using them costs no privacy; only the answered labels come from
the private teachers and are charged by the aggregator's accountant. The model evaluated and
returned is an exponential moving average of the weights (as in FixMatch), which removes most of
the epoch-to-epoch jitter of the noisy-label training.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

from . import augment

EMA_DECAY = 0.99  # an average over about the last 100 steps (runs here take a few hundred to a few thousand)


@dataclass(frozen=True)
class FixMatchSettings:
    """``epochs`` passes over the unlabelled pool; ``batch_size`` labelled images per step with
    ``unlabelled_ratio`` (mu) times as many unlabelled; ``confidence`` is tau; ``unlabelled_weight``
    is lambda_u; Adam with learning rate ``lr``, cosine-annealed to zero."""

    epochs: int
    lr: float
    batch_size: int
    unlabelled_ratio: int
    confidence: float
    unlabelled_weight: float


@torch.no_grad()
def logits_in_chunks(model: nn.Module, x: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """``model(x)`` in evaluation mode, ``(n, K)`` for ``x`` ``(n, *input)``, ``chunk`` rows at a time; the model
    is left in evaluation mode (training code calls ``model.train()`` again)."""
    model.eval()
    return torch.cat([model(x[i:i + chunk]) for i in range(0, len(x), chunk)]) if len(x) else model(x)


def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of ``x`` ``(n, *input)`` that ``model`` classifies as ``y`` ``(n,)``."""
    return float((logits_in_chunks(model, x).argmax(1) == y).double().mean()) if len(x) else 0.0


def train_fixmatch(model: nn.Module, labelled_x: torch.Tensor, labelled_y: torch.Tensor, unlabelled_x: torch.Tensor,
                   test_x: torch.Tensor, test_y: torch.Tensor, settings: FixMatchSettings, *,
                   generator: torch.Generator, should_stop: Callable[[], bool] = lambda: False,
                   on_epoch: Callable[[int, float, float, float], None] | None = None) -> nn.Module | None:
    """Train ``model`` (on the device of the tensors) with FixMatch; return its weight average.

    Args:
        labelled_x, labelled_y: ``(n_l, C, H, W)`` answered queries and their noisy labels ``(n_l,)``.
        unlabelled_x: ``(n_u, C, H, W)`` the public pool (it may contain the labelled images).
        test_x, test_y: held-out public images and true labels, for the per-epoch accuracy.
        generator: CPU generator of the batches and augmentations.
        on_epoch: ``on_epoch(epoch, test_accuracy, loss, mask_rate)`` after every epoch, where
            ``mask_rate`` is the fraction of unlabelled images above the confidence threshold.

    Returns:
        The exponential moving average of the weights (an ``AveragedModel``), or None if stopped.
    """
    s = settings
    n_unlabelled_batch = s.batch_size * s.unlabelled_ratio
    steps_per_epoch = math.ceil(len(unlabelled_x) / n_unlabelled_batch)
    optimizer = torch.optim.Adam(model.parameters(), lr=s.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=s.epochs * steps_per_epoch)
    average = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(EMA_DECAY), use_buffers=True)
    device = labelled_x.device
    for epoch in range(s.epochs):
        model.train()
        order = torch.randperm(len(unlabelled_x), generator=generator).to(device)
        loss_sum = mask_sum = torch.zeros((), device=device)
        for step in range(steps_per_epoch):
            if should_stop():
                return None
            li = torch.randint(0, len(labelled_y), (s.batch_size,), generator=generator).to(device)
            ui = order[step * n_unlabelled_batch:(step + 1) * n_unlabelled_batch]
            unlabelled = unlabelled_x[ui]
            logits = model(torch.cat([augment.weak(labelled_x[li], generator), augment.weak(unlabelled, generator),
                                      augment.strong(unlabelled, generator)]))
            labelled_logits = logits[:s.batch_size]
            weak_logits, strong_logits = logits[s.batch_size:].chunk(2)
            probability, pseudo_label = weak_logits.detach().softmax(1).max(1)
            mask = (probability >= s.confidence).to(logits.dtype)
            unlabelled_loss = (F.cross_entropy(strong_logits, pseudo_label, reduction="none") * mask).mean()
            loss = F.cross_entropy(labelled_logits, labelled_y[li]) + s.unlabelled_weight * unlabelled_loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            average.update_parameters(model)
            loss_sum = loss_sum + loss.detach()
            mask_sum = mask_sum + mask.mean()
        if on_epoch is not None:
            on_epoch(epoch, accuracy(average, test_x, test_y), float(loss_sum) / steps_per_epoch,
                     float(mask_sum) / steps_per_epoch)
    return average
