"""K models trained as one batched computation.

The K models share an architecture; their parameters are stacked along a new
leading dimension (``torch.func.stack_module_state``) and the forward pass is
``torch.func.vmap`` of ``functional_call`` over that dimension, so one kernel
call serves all teachers (convolutions become grouped convolutions). Each
teacher's loss is the mean over its own minibatch and the K losses are summed:
parameters are disjoint, so every teacher receives exactly the gradient of its
own loss, and Adam (elementwise) keeps them independent. With K = 1 the same code
trains the student and the non-private baseline.
"""

from __future__ import annotations

import copy
import math
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

ACTIVATION_BUDGET = 2.5e7  # floats of first-layer activations per prediction chunk (about 100 MB)


class Ensemble:
    """K models of one architecture, their parameters stacked on ``device``.

    Args:
        models: the K models, initialised (each by its caller, from the generator it chose).
        device: where the stacked parameters live.
    """

    def __init__(self, models: Sequence[nn.Module], device: torch.device):
        params, buffers = stack_module_state(list(models))
        self.k = len(models)
        self.params = {n: p.detach().to(device).requires_grad_() for n, p in params.items()}
        self.buffers = {n: b.to(device) for n, b in buffers.items()}
        self._base = copy.deepcopy(models[0]).to("meta")
        self._first_layer_width = next(p for p in models[0].parameters() if p.dim() > 1).shape[0]

    def member(self, k: int, model: nn.Module) -> nn.Module:
        """``model`` (of the ensemble's architecture) holding model ``k``'s parameters and buffers."""
        with torch.no_grad():
            model.load_state_dict({**{n: p[k] for n, p in self.params.items()},
                                   **{n: b[k] for n, b in self.buffers.items()}})
        return model

    def _call(self, params, buffers, x):
        return functional_call(self._base, (params, buffers), (x,))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """Per-model inputs ``x`` of shape ``(K, B, *input)`` -> logits ``(K, B, n_classes)``."""
        return vmap(self._call)(self.params, self.buffers, x)

    @torch.no_grad()
    def logits_in_chunks(self, x: torch.Tensor, *,
                         should_stop: Callable[[], bool] | None = None) -> torch.Tensor | None:
        """Every model's logits for shared inputs ``(N, *input)`` -> ``(K, N, n_classes)``.

        Works in chunks sized to keep the first layer's activations for all K models
        near :data:`ACTIVATION_BUDGET`; returns None if ``should_stop`` turns true between chunks.
        """
        device = next(iter(self.params.values())).device
        per_example = self._first_layer_width * max(math.prod(x.shape[2:]), 1)
        chunk = int(min(max(ACTIVATION_BUDGET // (self.k * per_example), 1), 4096))
        shared = vmap(self._call, in_dims=(0, 0, None))
        out = []
        for i in range(0, len(x), chunk):
            if should_stop is not None and should_stop():
                return None
            out.append(shared(self.params, self.buffers, x[i:i + chunk].to(device)))
        return torch.cat(out, dim=1) if out else shared(self.params, self.buffers, x.to(device))

    def predict(self, x: torch.Tensor, *, should_stop: Callable[[], bool] | None = None) -> torch.Tensor | None:
        """Every model's predicted class for shared inputs ``(N, *input)`` -> ``(K, N)`` int64 (None if stopped:
        see :meth:`logits_in_chunks`)."""
        logits = self.logits_in_chunks(x, should_stop=should_stop)
        return None if logits is None else logits.argmax(-1)


def train_ensemble(ensemble: Ensemble, x: torch.Tensor, y: torch.Tensor, *, epochs: int, lr: float, batch_size: int,
                   generator: torch.Generator, should_stop: Callable[[], bool] = lambda: False,
                   on_epoch: Callable[[int, torch.Tensor], None] | None = None,
                   weights: torch.Tensor | None = None) -> bool:
    """Train model k on ``(x[k], y[k])`` for every k at once with Adam and cross-entropy.

    Args:
        x: ``(K, n, *input)`` inputs, one partition per model, on the ensemble's device.
        y: ``(K, n)`` int64 labels.
        weights: ``(K, n)``, 1.0 on each model's rows and 0.0 on empty slots (partitions of unequal sizes padded to
            n); model k's loss on a batch is then ``sum_i w_ki CE_ki / max(1, sum_i w_ki)`` over the batch (zero on
            a batch of empty slots). None: every slot is a row, the loss the batch's mean.
        generator: drives the per-model shuffling (on the CPU).
        should_stop: polled after every batch; training returns early when it is true.
        on_epoch: called as ``on_epoch(epoch, mean_loss_per_model)`` (``(K,)`` tensor) after each epoch.

    Returns:
        False if stopped early, else True.
    """
    k, n = y.shape
    optimizer = torch.optim.Adam(ensemble.params.values(), lr=lr)
    rows = torch.arange(k, device=x.device)[:, None]
    for epoch in range(epochs):
        order = torch.argsort(torch.rand(k, n, generator=generator), dim=1).to(x.device)
        loss_sum = torch.zeros(k, device=x.device)
        batches = 0
        for start in range(0, n, batch_size):
            idx = order[:, start:start + batch_size]
            logits = ensemble.logits(x[rows, idx])
            per_model = F.cross_entropy(logits.flatten(0, 1), y[rows, idx].flatten(), reduction="none").view(k, -1)
            if weights is None:
                per_model = per_model.mean(1)
            else:
                w = weights[rows, idx]
                per_model = (per_model * w).sum(1) / w.sum(1).clamp_min(1.0)
            optimizer.zero_grad(set_to_none=True)
            per_model.sum().backward()
            optimizer.step()
            loss_sum += per_model.detach()
            batches += 1
            if should_stop():
                return False
        if on_epoch is not None:
            on_epoch(epoch, loss_sum / batches)
    return True


def partition_rows(n: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """Positions ``(k, n // k)`` of ``k`` disjoint equal parts of ``n`` examples, a random permutation from
    ``generator`` cut in ``k``; the ``n mod k`` left-over examples are not used (every teacher gets the same amount
    of data). The parts depend on ``n`` and the generator alone."""
    per = n // k
    return torch.randperm(n, generator=generator)[: per * k].view(k, per)
