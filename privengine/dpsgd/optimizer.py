"""Opacus DPOptimizers whose noise step shapes the noise around a public subspace.

Opacus' ``DPOptimizer.pre_step`` clips per-example gradients and sums them into
``p.summed_grad``, then calls ``add_noise`` (which writes ``p.grad``), then
``scale_grad`` (divides by the expected batch size B) and the accountant's step
hook (which reads ``noise_multiplier``). Only ``add_noise`` is overridden here:
with all parameters flattened into one vector g (dimension d),

    anisotropic:  p.grad <- g + n,            n ~ N(0, (sigma C)^2 [I + alpha (I - U U^T)])
    projected:    p.grad <- U U^T (g + n)     (post-processing of the noisy sum)
    alpha = 0:    Opacus' own isotropic noise step, unchanged.

``noise_multiplier`` stays sigma, so the accountant composes exactly the
Gaussian mechanism of isotropic DP-SGD: the variance in every direction is at
least (sigma C)^2 and the extra noise does not depend on the data.

While it adds noise the optimizer also records the fraction of the summed
clipped private gradient's energy inside span(U) (:attr:`last_energy`), a
diagnostic that is NOT privatised.
"""

from __future__ import annotations

import math

import torch
from opacus.optimizers import DPOptimizer, DPOptimizerFastGradientClipping
from opacus.optimizers.optimizer import _check_processed_flag, _mark_as_processed

from .noise import sample_anisotropic
from .subspace import captured_energy


class _ShapedNoise:
    """Mixin over an Opacus DPOptimizer class: the flattened, subspace-shaped noise step."""

    def __init__(self, optimizer: torch.optim.Optimizer, *, alpha: float = 0.0, projected: bool = False, **kwargs):
        if alpha < 0:
            raise ValueError(f"alpha must be >= 0; got {alpha}")
        if kwargs.get("secure_mode"):
            raise ValueError("secure_mode is not supported by the shaped-noise optimizers")
        super().__init__(optimizer, **kwargs)
        self.alpha = float(alpha)
        self.projected = bool(projected)
        self.basis: torch.Tensor | None = None
        self.last_energy = math.nan

    @property
    def isotropic(self) -> bool:
        return self.alpha == 0 and not self.projected

    @property
    def dim(self) -> int:
        """d: the number of trainable parameters the optimizer updates."""
        return sum(p.numel() for p in self.params)

    def set_basis(self, basis: torch.Tensor) -> None:
        """Use ``basis`` (``(d, k)``, orthonormal columns, from public data only) from the next step on."""
        if basis.ndim != 2 or basis.shape[0] != self.dim:
            raise ValueError(f"basis must have shape (d={self.dim}, k); got {tuple(basis.shape)}")
        self.basis = basis

    def add_noise(self) -> None:
        params = self.params
        for p in params:
            _check_processed_flag(p.summed_grad)
        if self.basis is None:
            if self.isotropic:
                super().add_noise()  # exactly Opacus' isotropic DP-SGD
                return
            raise RuntimeError("set_basis() must be called before a step with alpha > 0 or projected")
        flat = torch.cat([p.summed_grad.reshape(-1) for p in params])
        self.last_energy = captured_energy(self.basis, flat)
        if self.isotropic:
            super().add_noise()  # exactly Opacus' isotropic DP-SGD (the energy above is a diagnostic)
            return
        std = self.noise_multiplier * self.max_grad_norm
        noisy = flat + sample_anisotropic(self.basis, self.alpha, std, 1, self.generator)[0]
        if self.projected:
            noisy = self.basis @ (self.basis.T @ noisy)
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = noisy[offset:offset + n].view_as(p).to(p.dtype)
            offset += n
            _mark_as_processed(p.summed_grad)


class AnisotropicDPOptimizer(_ShapedNoise, DPOptimizer):
    """DPOptimizer (per-example gradients from hooks) with the shaped noise step.

    >>> from torch import nn
    >>> model = nn.Linear(3, 1)
    >>> opt = AnisotropicDPOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), alpha=4.0,
    ...                              noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=8)
    >>> opt.noise_multiplier, opt.dim
    (1.0, 4)
    """


class AnisotropicDPOptimizerFastGradientClipping(_ShapedNoise, DPOptimizerFastGradientClipping):
    """DPOptimizerFastGradientClipping (Opacus' ghost clipping) with the shaped noise step."""


def make_optimizer(optimizer: torch.optim.Optimizer, *, grad_sample_mode: str, alpha: float, projected: bool,
                   noise_multiplier: float, max_grad_norm: float, expected_batch_size: int,
                   generator: torch.Generator | None) -> DPOptimizer:
    """Wrap a torch optimizer: an :class:`AnisotropicDPOptimizer` (``grad_sample_mode="hooks"``) or its
    ghost-clipping twin (``"ghost"``); both have :meth:`~_ShapedNoise.set_basis` and ``last_energy``."""
    cls = {"hooks": AnisotropicDPOptimizer, "ghost": AnisotropicDPOptimizerFastGradientClipping}[grad_sample_mode]
    return cls(optimizer, alpha=alpha, projected=projected, noise_multiplier=noise_multiplier,
               max_grad_norm=max_grad_norm, expected_batch_size=expected_batch_size, loss_reduction="mean",
               generator=generator)
