"""Bayesian regression models with proper priors, batched over parameter vectors.

Parameters are unconstrained vectors theta of length P, in rows of a (B, P) batch:

- linear:   theta = (beta_1..beta_d, b, log sigma),  y_i ~ N(x_i beta + b, sigma^2)
- logistic: theta = (beta_1..beta_d, b),             y_i ~ Bernoulli(sigmoid(x_i beta + b))

Priors: beta_j, b ~ N(0, prior_sd^2); sigma ~ half-Cauchy(0, sigma_prior_scale), written as a
density on log sigma (Jacobian included). Flat (improper) priors are refused: the exponential
mechanism's density exp(c U(z)) is only normalisable when the prior is proper.

Gradients are analytic (a hand-written vector-Jacobian product, since no library gives it for a
batch of parameter vectors without autograd overhead): :meth:`RecordLogLik.pullback` returns
sum_i coef_i * d loglik_i / d theta for any per-record weights coef, which is what both the raw
ELBO (coef = 1) and the sanitized one (coef = sech^2(loglik / tau)) need.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from privengine.errors import ConfigError

from .data import Records

HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
MAX_LOG_SIGMA = 30.0
MAX_STD_RESIDUAL = 1e6


def _check_proper(field: str, value: float) -> float:
    if not (math.isfinite(value) and value > 0):
        raise ConfigError(field, "must be a finite number > 0: a flat (improper) prior makes the exponential "
                                 f"mechanism's density unnormalisable, so it is refused; got {value!r}")
    return float(value)


def coefficient_log_prior(coef: torch.Tensor, prior_sd: float) -> tuple[torch.Tensor, torch.Tensor]:
    """log N(coef | 0, prior_sd^2 I) (B,) of coefficient rows coef (B, K), and its gradient (B, K)."""
    s2 = prior_sd**2
    value = (-0.5 * coef.square() / s2).sum(1) - coef.shape[1] * (math.log(prior_sd) + HALF_LOG_2PI)
    return value, -coef / s2


def log_sigma_log_prior(log_sigma: torch.Tensor, scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """half-Cauchy(0, scale) on sigma = e^l as a density on l (Jacobian included), and d/dl; any shape.

    log p(l) = log(2 / (pi scale)) - log(1 + e^{2 (l - log scale)}) + l.
    """
    u = 2 * (log_sigma - math.log(scale))
    value = math.log(2 / (math.pi * scale)) - F.softplus(u) + log_sigma
    return value, 1 - 2 * torch.sigmoid(u)


def gaussian_loglik(t: torch.Tensor, log_sigma: torch.Tensor) -> torch.Tensor:
    """log N(y | eta, sigma^2) from the standardised residual t = (y - eta) / sigma and log sigma (broadcast)."""
    return torch.addcmul(-(log_sigma + HALF_LOG_2PI), t, t, value=-0.5)


def bernoulli_loglik(y: torch.Tensor, eta: torch.Tensor) -> torch.Tensor:
    """log Bernoulli(y | sigmoid(eta)) for labels y in {0, 1} (broadcast)."""
    return y * eta - F.softplus(eta)


@dataclass(frozen=True)
class RecordLogLik:
    """Per-record log-likelihoods ``values`` (B, N) of a batch of parameters, with their pullback.

    ``pullback(coef)`` maps per-record weights (B, N) to sum_i coef[:, i] * grad_theta loglik_i, shape (B, P);
    ``coef=None`` means all weights 1.
    """

    values: torch.Tensor
    pullback: Callable[[torch.Tensor | None], torch.Tensor]


class GLM:
    """Shared part of the two models: the linear predictor eta = x beta + b and the Gaussian priors.

    Args:
        records: the data set (tensors on the run's device).
        prior_sd: sd of the N(0, prior_sd^2) prior on every coefficient and the intercept.
    """

    def __init__(self, records: Records, *, prior_sd: float):
        self.records = records
        self.prior_sd = _check_proper("prior_sd", prior_sd)
        self.d = records.x.shape[1]
        self.names = tuple(f"beta{j + 1}" for j in range(self.d)) + ("intercept",)
        self.design = torch.cat([records.x, torch.ones_like(records.x[:, :1])], dim=1)  # (N, d + 1): [x, 1]

    @property
    def n_params(self) -> int:
        return len(self.names)

    def eta(self, theta: torch.Tensor) -> torch.Tensor:
        """Linear predictor (B, N) for theta (B, P)."""
        return theta[:, : self.d + 1] @ self.design.T

    def log_prior(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """log p(theta) (B,) and its gradient (B, P)."""
        return coefficient_log_prior(theta[:, : self.d + 1], self.prior_sd)

    def loglik(self, theta: torch.Tensor) -> RecordLogLik:
        raise NotImplementedError


class LinearRegression(GLM):
    """y_i ~ N(x_i beta + b, sigma^2); half-Cauchy(0, sigma_prior_scale) prior on sigma (on log sigma here).

    Written for few passes over the (B, N) arrays (the sampler's hot loop): the standardised residual
    t = (y - x beta - b) / sigma comes out of one matrix product with [x, 1, y].
    """

    def __init__(self, records: Records, *, prior_sd: float, sigma_prior_scale: float):
        super().__init__(records, prior_sd=prior_sd)
        self.sigma_prior_scale = _check_proper("sigma_prior_scale", sigma_prior_scale)
        self.names = self.names + ("log_sigma",)
        self._design_y = torch.cat([self.design, records.y[:, None]], dim=1)  # (N, d + 2)

    def loglik(self, theta: torch.Tensor) -> RecordLogLik:
        # Clamps keep draws of a very wide q (far in the tails of every distribution used here) finite:
        # they only act where loglik < -5e11, where every sanitized term is saturated (zero gradient).
        log_sigma = theta[:, -1:].clamp(-MAX_LOG_SIGMA, MAX_LOG_SIGMA)
        inv_sigma = torch.exp(-log_sigma)
        t = torch.cat([-theta[:, : self.d + 1] * inv_sigma, inv_sigma], dim=1) @ self._design_y.T
        t.clamp_(-MAX_STD_RESIDUAL, MAX_STD_RESIDUAL)
        values = gaussian_loglik(t, log_sigma)

        def pullback(coef: torch.Tensor | None) -> torch.Tensor:
            # d ll / d eta = t / sigma;  d ll / d log sigma = t^2 - 1
            ct = t if coef is None else coef * t
            total = t.shape[1] if coef is None else coef.sum(1)
            return torch.cat([(ct @ self.design) * inv_sigma, ((ct * t).sum(1) - total)[:, None]], dim=1)

        return RecordLogLik(values, pullback)

    def log_prior(self, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        value, grad = super().log_prior(theta)
        value_l, grad_l = log_sigma_log_prior(theta[:, -1], self.sigma_prior_scale)
        return value + value_l, torch.cat([grad, grad_l[:, None]], dim=1)


class LogisticRegression(GLM):
    """y_i ~ Bernoulli(sigmoid(x_i beta + b)), labels in {0, 1}."""

    def loglik(self, theta: torch.Tensor) -> RecordLogLik:
        eta = self.eta(theta)
        values = bernoulli_loglik(self.records.y, eta)

        def pullback(coef: torch.Tensor | None) -> torch.Tensor:
            resid = self.records.y - torch.sigmoid(eta)  # d ll / d eta
            return (resid if coef is None else coef * resid) @ self.design

        return RecordLogLik(values, pullback)


def build_model(name: str, records: Records, *, prior_sd: float, sigma_prior_scale: float = 1.0) -> GLM:
    """The model called ``name`` (``"linear"`` or ``"logistic"``) on ``records``."""
    if name == "linear":
        return LinearRegression(records, prior_sd=prior_sd, sigma_prior_scale=sigma_prior_scale)
    if name == "logistic":
        return LogisticRegression(records, prior_sd=prior_sd)
    raise ConfigError("model", f"must be one of linear, logistic; got {name!r}")
