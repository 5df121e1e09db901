"""The (sanitized) ELBO of a mean-field Gaussian and its reparameterised gradient, for a batch of z.

For z = (m, s) in R^{2P} (mean and log sd per parameter), q(theta | z) = N(m, diag(e^{2s})) and

    U(z; x) = E_q[ sum_i gamma(theta; x_i) + log p(theta) ] + w * H(q),   H(q) = sum_j s_j + P/2 log(2 pi e),

with gamma = tau * tanh(loglik / tau) (the sanitized utility of the exponential mechanism) or
gamma = loglik (``tau=None``: the plain ELBO of non-private VI, w = 1). The expectation is
estimated with L reparameterised draws theta = m + e^s * eps; when L is even the draws come in
antithetic pairs (eps, -eps), which cancels most of the gradient noise of near-quadratic
log-densities. The estimate and its gradient are unbiased:

    dU/dm = E[g'(theta)],   dU/ds = E[g'(theta) * eps] * e^s + w,   g = sum_i gamma_i + log p.
"""

from __future__ import annotations

import math

import torch

from .models import GLM
from .sanitizer import sanitized_sum

HALF_LOG_2PI_E = 0.5 * math.log(2 * math.pi * math.e)


class Objective:
    """U(z; x) for a batch of variational parameters z (C, 2P).

    Args:
        model: the Bayesian model (its records and priors).
        tau: sanitizer bound, or None for the raw log-likelihood.
        entropy_weight: w, the weight of H(q) (1 for the ELBO).
        mc_samples: L, reparameterised draws per estimate.
    """

    def __init__(self, model: GLM, *, tau: float | None, entropy_weight: float = 1.0, mc_samples: int = 2):
        if mc_samples < 1:
            raise ValueError(f"mc_samples must be >= 1; got {mc_samples}")
        self.model = model
        self.tau = tau
        self.entropy_weight = float(entropy_weight)
        self.mc_samples = int(mc_samples)

    @property
    def dim(self) -> int:
        """Length 2P of z."""
        return 2 * self.model.n_params

    def draw_noise(self, chains: int, generator: torch.Generator) -> torch.Tensor:
        """Standard normal draws (C, L, P), antithetic in pairs when L is even."""
        x = self.model.records.x
        p, l = self.model.n_params, self.mc_samples
        half = l // 2 if l % 2 == 0 else l
        eps = torch.randn(chains, half, p, generator=generator, device=x.device, dtype=x.dtype)
        return torch.cat([eps, -eps], dim=1) if half != l else eps

    def entropy(self, z: torch.Tensor) -> torch.Tensor:
        """H(q) (C,) of the mean-field Gaussian."""
        p = self.model.n_params
        return z[:, p:].sum(1) + p * HALF_LOG_2PI_E

    def value_and_grad(self, z: torch.Tensor, *, generator: torch.Generator | None = None,
                       noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Estimates of U(z) (C,) and dU/dz (C, 2P), from ``noise`` (C, L, P) or fresh draws of ``generator``."""
        c, p = z.shape[0], self.model.n_params
        eps = self.draw_noise(c, generator) if noise is None else noise
        mean, log_sd = z[:, :p], z[:, p:]
        sd = torch.exp(log_sd)
        theta = (mean[:, None, :] + sd[:, None, :] * eps).reshape(-1, p)
        ll = self.model.loglik(theta)
        if self.tau is None:
            gamma_sum, coef = ll.values.sum(1), None
        else:
            gamma_sum, coef = sanitized_sum(ll.values, self.tau)
        prior, prior_grad = self.model.log_prior(theta)
        g = (gamma_sum + prior).reshape(c, -1)
        g_grad = (ll.pullback(coef) + prior_grad).reshape(c, -1, p)
        value = g.mean(1) + self.entropy_weight * self.entropy(z)
        grad_mean = g_grad.mean(1)
        grad_log_sd = (g_grad * eps).mean(1) * sd + self.entropy_weight
        return value, torch.cat([grad_mean, grad_log_sd], dim=1)
