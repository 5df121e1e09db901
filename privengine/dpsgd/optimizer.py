"""Opacus DPOptimizers whose clipping and noise steps are shaped by a public subspace.

Opacus' ``DPOptimizer.pre_step`` clips per-example gradients and sums them into
``p.summed_grad`` (``clip_and_accumulate``), then calls ``add_noise`` (which
writes ``p.grad``), then ``scale_grad`` (divides by the expected batch size B)
and the accountant's step hook (which reads ``noise_multiplier``). With all
parameters flattened into one vector (dimension d), U the ``(d, k)`` public
basis, P = U U^T and S = I + alpha (I - P):

    anisotropic (the seed's variant): flat clip ||g_i|| <= C, alpha >= 0,
                  p.grad <- sum_i g_i + n,      n ~ N(0, (sigma C)^2 S)
    projected:    flat clip, p.grad <- P (sum_i g_i + n)   (post-processing of the noisy sum)
    elliptical:   clip in the Mahalanobis norm ||g||_S = sqrt(g^T S^-1 g) <= C, alpha > -1,
                  p.grad <- sum_i g_i + n,      n ~ N(0, (sigma C)^2 S)
    alpha = 0:    Opacus' own isotropic clip and noise, unchanged.

``noise_multiplier`` stays sigma in every variant, and the accountant composes
the subsampled Gaussian mechanism of isotropic DP-SGD with that sigma. Why:

- anisotropic / projected: the variance in every direction is at least
  (sigma C)^2, so n = n_iso + n_extra with n_iso ~ N(0, (sigma C)^2 I) and
  n_extra independent of the data; the release is a post-processing of the
  isotropic mechanism on flat-clipped gradients (sensitivity C).
- elliptical, for every alpha > -1 (negative too): S is public (built from
  public data only) and positive definite. Let W = S^-1/2. The clipped
  gradients satisfy ||W g_i|| = ||g_i||_S <= C, so
  W (sum_i g_i + n) = sum_i W g_i + W n with W n ~ N(0, (sigma C)^2 I): the
  isotropic Gaussian mechanism on vectors of norm <= C, whose add/remove
  sensitivity is C. The released S^1/2 (that) is a post-processing by a fixed
  invertible map, so the privacy is exactly that of isotropic DP-SGD at sigma.
  With alpha < 0 the noise outside span(U) shrinks by sqrt(1 + alpha), paid for
  by a clip there that is tighter by the same factor; alpha -> -1 tends to the
  projected update. Since S^-1 = P + (I - P) / (1 + alpha),
  ||g||_S^2 = ||U^T g||^2 + ||(I - P) g||^2 / (1 + alpha).

GEP (Yu et al. 2021) is not a separate variant: it clips the embedding U^T g to C1 and the
residual to C2 and adds N(0, sigma^2 C1^2) and N(0, sigma^2 C2^2) to them; whitened, that is the
Gaussian mechanism with sensitivity sqrt(2) at noise sigma (noise multiplier sigma / sqrt(2)). The
elliptical variant with 1 + alpha = (C2 / C1)^2, C = sqrt(2) C1 and noise multiplier sigma / sqrt(2)
adds exactly the same noise at the same epsilon, and its clip region
||U^T g||^2 / C1^2 + ||(I - P) g||^2 / C2^2 <= 2 contains GEP's (||U^T g|| <= C1 and ||(I - P) g|| <= C2),
so it leaves every gradient GEP leaves unclipped untouched; the two differ only in how they shrink
the others (one factor for the whole gradient here, one per part in GEP).

While it adds noise the optimizer also records the fraction of the summed
clipped private gradient's energy inside span(U) (:attr:`last_energy`), a
diagnostic that is NOT privatised.

Audit hooks (used by :mod:`privengine.audit.dpsgd_one_run`; None in a normal run):
``pre_noise_hook(optimizer)`` is called once per logical step after clipping and
accumulation, before the noise (it may add canary gradients to ``p.summed_grad``, which
then go through exactly the mechanism's noise); ``post_noise_hook(optimizer)`` right
after the noise, before Opacus divides ``p.grad`` by the expected batch size (it may
read the noisy summed gradient the step releases).
"""

from __future__ import annotations


import torch
from opacus.optimizers import DPOptimizer, DPOptimizerFastGradientClipping
from opacus.optimizers.optimizer import _check_processed_flag, _mark_as_processed

from .noise import sample_anisotropic
from .subspace import captured_energy

CLIPPINGS = ("flat", "elliptical")


class _ShapedNoise:
    """Mixin over an Opacus DPOptimizer class: the flattened, subspace-shaped noise step."""

    def __init__(self, optimizer: torch.optim.Optimizer, *, alpha: float = 0.0, projected: bool = False,
                 clipping: str = "flat", **kwargs):
        if clipping not in CLIPPINGS:
            raise ValueError(f"clipping must be one of {CLIPPINGS}; got {clipping!r}")
        if clipping == "flat" and alpha < 0:
            raise ValueError(f"alpha must be >= 0 with flat clipping; got {alpha}")
        if not alpha > -1:
            raise ValueError(f"alpha must be > -1; got {alpha}")
        if clipping == "elliptical" and projected:
            raise ValueError("the projected update uses flat clipping")
        if kwargs.get("secure_mode"):
            raise ValueError("secure_mode is not supported by the shaped-noise optimizers")
        super().__init__(optimizer, **kwargs)
        self.alpha = float(alpha)
        self.projected = bool(projected)
        self.clipping = clipping
        self.basis: torch.Tensor | None = None
        self.last_energy: torch.Tensor | None = None
        self.pre_noise_hook = None   # audit hooks: see the module docstring
        self.post_noise_hook = None

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

    def clip_and_accumulate(self) -> None:
        """Opacus' flat clip, or (elliptical, alpha != 0) the clip to ||g_i||_S <= C of the module docstring.

        Needs materialised per-example gradients (``grad_sample_mode="hooks"``): for each parameter
        p, ``grad_sample`` is ``(B, *p.shape)``; the basis rows of p form a ``(p.numel(), k)`` block.
        """
        if self.clipping == "flat" or self.alpha == 0:
            super().clip_and_accumulate()
            return
        if self.basis is None:
            raise RuntimeError("set_basis() must be called before an elliptical step")
        samples = [self._get_flat_grad_sample(p).to(p.dtype) for p in self.params]
        factor = self._elliptical_clip_factor([g.flatten(1) for g in samples])  # (0, n_p) for an empty batch
        for p, grad_sample in zip(self.params, samples):
            _check_processed_flag(p.grad_sample)
            grad = torch.einsum("i,i...", factor.to(grad_sample.dtype), grad_sample)
            if p.summed_grad is not None:
                p.summed_grad += grad
            else:
                p.summed_grad = grad
            _mark_as_processed(p.grad_sample)

    def _elliptical_clip_factor(self, rows: list[torch.Tensor]) -> torch.Tensor:
        """``min(1, C / ||g_i||_S)`` for the per-example gradients split by parameter (``(B, n_p)`` each).

        With c_i = U^T g_i: ||g_i||_S^2 = ||c_i||^2 + (||g_i||^2 - ||c_i||^2) / (1 + alpha), one
        ``(B, d) x (d, k)`` product (the residual is never formed). The subtraction cancels; its
        rounding error, relative to ||g_i||_S^2, is about eps / min(1, 1 + alpha) (eps ~ 6e-8 in
        float32), so the norm is inflated by a margin well above that bound (1e-5 / min(1, 1 + alpha)):
        ||factor_i g_i||_S <= C then holds despite rounding, at a negligibly tighter clip.
        """
        basis = self.basis
        coords = torch.zeros(len(rows[0]), basis.shape[1], device=basis.device, dtype=basis.dtype)
        total_sq = torch.zeros(len(rows[0]), device=basis.device, dtype=basis.dtype)
        offset = 0
        for g in rows:  # U^T g_i and ||g_i||^2, accumulated over the parameter blocks
            g = g.to(basis.dtype)
            coords += g @ basis[offset:offset + g.shape[1]]
            total_sq += g.pow(2).sum(dim=1)
            offset += g.shape[1]
        inside_sq = coords.pow(2).sum(dim=1)
        residual_sq = (total_sq - inside_sq).clamp(min=0.0)
        norm_s = (inside_sq + residual_sq / (1.0 + self.alpha)).sqrt()
        margin = 1.0 + 1e-5 / min(1.0, 1.0 + self.alpha)
        return (self.max_grad_norm / (norm_s * margin + 1e-6)).clamp(max=1.0)

    def add_noise(self) -> None:
        if self.pre_noise_hook is not None:
            self.pre_noise_hook(self)
        self._add_shaped_noise()
        if self.post_noise_hook is not None:
            self.post_noise_hook(self)

    def _add_shaped_noise(self) -> None:
        params = self.params
        for p in params:
            _check_processed_flag(p.summed_grad)
        if self.basis is None:
            if self.isotropic:
                super().add_noise()  # exactly Opacus' isotropic DP-SGD
                return
            raise RuntimeError("set_basis() must be called before a step with alpha != 0 or projected")
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
                   generator: torch.Generator | None, clipping: str = "flat") -> DPOptimizer:
    """Wrap a torch optimizer: an :class:`AnisotropicDPOptimizer` (``grad_sample_mode="hooks"``) or its
    ghost-clipping twin (``"ghost"``, flat clipping only: it never materialises per-example
    gradients); both have :meth:`~_ShapedNoise.set_basis` and ``last_energy``."""
    if grad_sample_mode == "ghost" and clipping != "flat":
        raise ValueError("elliptical clipping needs per-example gradients (grad_sample_mode 'hooks')")
    cls = {"hooks": AnisotropicDPOptimizer, "ghost": AnisotropicDPOptimizerFastGradientClipping}[grad_sample_mode]
    return cls(optimizer, alpha=alpha, projected=projected, clipping=clipping, noise_multiplier=noise_multiplier,
               max_grad_norm=max_grad_norm, expected_batch_size=expected_batch_size, loss_reduction="mean",
               generator=generator)
