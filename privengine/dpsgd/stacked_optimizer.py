"""The update of K DP-SGD models with stacked parameters, each with its own noise, learning rate, clip norm and EMA.

Opacus' ``DPOptimizer`` (noise, scaling), torch's ``SGD`` (no weight decay, dampening 0, not Nesterov) with its
``CosineAnnealingLR`` and ``AveragedModel``'s EMA, written by hand for the K models of a model batch
(:mod:`.model_batch`). Given the clipped sums S_k of step t (:class:`~.stacked_model.ClippedGradients`), per
parameter, for model k with noise multiplier sigma_k, clip norm C_k, learning rate lr_kt and EMA decay d_k:

    G_k      = (S_k + N(0, (sigma_k C_k)^2 I)) / B    (noise per parameter, in the model's parameter order, from
                                                       model k's noise generator; none drawn when sigma_k C_k = 0,
                                                       as Opacus draws none; B the expected batch size)
    v_k     <- m v_k + G_k  (v_k = G_k at the first step);  theta_k <- theta_k - lr_kt v_k
    ema_k   <- theta_k at the first step, then lerp(ema_k, theta_k, 1 - d_k)     (only when some d_k > 0)

Parameters, momentum buffers and averages are stacked ``(K, *p.shape)``; the per-model scalars broadcast on K.
"""

from __future__ import annotations

from typing import Sequence

import torch

from privengine.schedules import cosine_learning_rates

from .config import DPSGDConfig


class StackedOptimizer:
    """The K models' parameters ``params`` and their update; ``configs[k]`` / ``sigmas[k]`` / ``noise_gens[k]``:
    model k's config (its lr, schedule, clip norm, EMA decay), noise multiplier and noise generator. ``momentum``
    and ``steps`` are shared. ``private=False``: no noise."""

    def __init__(self, params: list[torch.Tensor], configs: Sequence[DPSGDConfig], sigmas: Sequence[float],
                 noise_gens: Sequence[torch.Generator], *, steps: int, expected_batch_size: int, momentum: float,
                 private: bool, device: torch.device):
        self.params, self.steps, self.batch_size, self.momentum = params, steps, expected_batch_size, momentum
        self.configs, self.sigmas, self.noise_gens = list(configs), list(sigmas), list(noise_gens)
        self.private, self.device = private, device
        self.momentum_buffers: list[torch.Tensor] | None = None
        self.ema: list[torch.Tensor] | None = None
        self._set_scalars()

    def _set_scalars(self) -> None:
        """The per-model scalars, broadcast on the K axis: learning rates ``(steps, K)``, clip norms ``(K,)``, EMA
        weights ``(K,)``, and the noise std sigma_k C_k of each (a float, drawn per model)."""
        configs, device = self.configs, self.device
        self.lrs = torch.tensor([_learning_rates(c, self.steps) for c in configs], dtype=torch.float64).T
        self.uniform_lr = all(c.lr == configs[0].lr for c in configs)
        dtype = self.params[0].dtype
        self.lrs_on_device = None if self.uniform_lr else self.lrs.to(device=device, dtype=dtype)  # one copy, not one
        self.clips = torch.tensor([c.max_grad_norm for c in configs], device=device)  # per step
        self.decays = [c.ema_decay for c in configs]
        self.ema_weights = 1 - torch.tensor(self.decays, device=device, dtype=dtype)
        # Opacus: std = noise_multiplier * max_grad_norm, per model
        self.stds = [sigma * c.max_grad_norm for sigma, c in zip(self.sigmas, configs)]

    def step(self, sums: list[torch.Tensor], t: int) -> None:
        """Step ``t`` (from 0) with the clipped sums ``sums`` (noised in place)."""
        with torch.no_grad():
            if self.private:
                for k, (g, std) in enumerate(zip(self.noise_gens, self.stds)):  # its own stream and std
                    if std == 0:  # Opacus draws nothing when the std is 0
                        continue
                    for s in sums:  # parameters in model order
                        s[k] += torch.normal(mean=0, std=std, size=s.shape[1:], device=s.device,
                                             generator=g, dtype=s.dtype)
            grads = [s / self.batch_size for s in sums]  # Opacus' scale_grad (loss_reduction "mean")
            self._sgd(grads, t)
            self._update_ema()

    def _sgd(self, grads: list[torch.Tensor], t: int) -> None:
        """torch.optim.SGD's update on the stacked parameters, each model at its own learning rate of step ``t`` (a
        Python scalar when the K are equal, else ``(K,)`` on the device)."""
        if self.momentum == 0:
            directions = grads
        else:
            if self.momentum_buffers is None:
                self.momentum_buffers = [g.clone() for g in grads]
            else:
                for buf, g in zip(self.momentum_buffers, grads):
                    buf.mul_(self.momentum).add_(g)
            directions = self.momentum_buffers
        if self.uniform_lr:
            for p, d in zip(self.params, directions):
                p.add_(d, alpha=-float(self.lrs[t, 0]))
            return
        per_model = self.lrs_on_device[t]
        for p, d in zip(self.params, directions):
            p.sub_(d * per_model.reshape(-1, *([1] * (d.dim() - 1))))

    def _update_ema(self) -> None:
        """AveragedModel with get_ema_multi_avg_fn: a copy at the first update, then lerp by 1 - d_k (per model; a
        model with decay 0 has no EMA: its average is never evaluated, see :meth:`evaluated`)."""
        if all(d <= 0 for d in self.decays):
            return
        if self.ema is None:
            self.ema = [p.clone() for p in self.params]
        elif all(d == self.decays[0] for d in self.decays):
            torch._foreach_lerp_(self.ema, self.params, 1 - self.decays[0])
        else:
            for e, p in zip(self.ema, self.params):
                e.lerp_(p, self.ema_weights.reshape(-1, *([1] * (p.dim() - 1))))

    def evaluated(self) -> list[torch.Tensor]:
        """Per model, its EMA when its decay is > 0, else its last iterate (stacked on K)."""
        if self.ema is None:
            return self.params
        if all(d > 0 for d in self.decays):
            return self.ema
        averaged = torch.tensor([d > 0 for d in self.decays], device=self.device)
        return [torch.where(averaged.reshape(-1, *([1] * (p.dim() - 1))), e, p) for e, p in zip(self.ema, self.params)]

    def keep(self, keep: list[int]) -> None:
        """Only the models at positions ``keep`` (of the current K) go on: every per-model state sliced on K."""
        rows = torch.tensor(keep, dtype=torch.int64, device=self.device)
        self.params = [p[rows] for p in self.params]
        if self.momentum_buffers is not None:
            self.momentum_buffers = [b[rows] for b in self.momentum_buffers]
        if self.ema is not None:
            self.ema = [e[rows] for e in self.ema]
        self.configs, self.sigmas, self.noise_gens = ([xs[i] for i in keep]
                                                      for xs in (self.configs, self.sigmas, self.noise_gens))
        self._set_scalars()


def _learning_rates(config: DPSGDConfig, steps: int) -> list[float]:
    """The learning rate of each logical step: ``config.lr``, or torch's own CosineAnnealingLR (T_max = steps)
    stepped after every step as :mod:`.training` steps it, so the values are the Opacus path's to the bit."""
    return cosine_learning_rates(config.lr, steps) if config.lr_schedule == "cosine" else [config.lr] * steps
