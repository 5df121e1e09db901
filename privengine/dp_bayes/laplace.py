"""Laplace approximation: the posterior mode (L-BFGS, torch.optim) and the Hessian there (autograd).

Used to start non-private VI next to its optimum (for a Gaussian posterior the mean-field optimum is
the mode with sds 1 / sqrt(diag(precision))), to scale the optimisers, and as the proposal of the
logistic model's importance-sampling reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .models import GLM


class StopRequested(Exception):
    """Raised by the optimisers and samplers of references and releases when their ``should_stop`` says so."""


@dataclass(frozen=True)
class Laplace:
    """Mode (P,) and precision matrix (P, P) = -Hessian of log p(theta | x) at the mode."""

    mode: torch.Tensor
    precision: torch.Tensor

    @property
    def covariance(self) -> torch.Tensor:
        return torch.linalg.inv(self.precision)

    @property
    def mean_field_sd(self) -> torch.Tensor:
        """1 / sqrt(diag(precision)): the mean-field VI sds of the Gaussian approximation (P,)."""
        return self.precision.diagonal().rsqrt()


def log_posterior(model: GLM, theta: torch.Tensor) -> torch.Tensor:
    """Unnormalised log p(theta | x) (B,) for theta (B, P)."""
    return model.loglik(theta).values.sum(1) + model.log_prior(theta)[0]


def laplace_approximation(model: GLM, *, max_iter: int = 500,
                          should_stop: Callable[[], bool] | None = None) -> Laplace:
    """Find the mode with L-BFGS (strong Wolfe line search) from theta = 0 and take the Hessian there.

    ``should_stop`` is polled at every evaluation of the objective (L-BFGS's iterations and line searches take up
    to 5 x 1.25 x ``max_iter`` of them, each one pass over the records); :class:`StopRequested` is raised when it
    says so."""
    x = model.records.x
    theta = torch.zeros(model.n_params, device=x.device, dtype=x.dtype, requires_grad=True)
    opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=max_iter, tolerance_grad=1e-10, tolerance_change=1e-14,
                            history_size=20, line_search_fn="strong_wolfe")
    scale = 1.0 / model.records.n  # keeps the line search's numbers O(1)

    def closure() -> torch.Tensor:
        if should_stop is not None and should_stop():
            raise StopRequested
        opt.zero_grad()
        loss = -log_posterior(model, theta[None])[0] * scale
        loss.backward()
        return loss

    for _ in range(5):  # L-BFGS stops at max_iter or a tolerance; a restart or two polishes hard cases
        opt.step(closure)
    mode = theta.detach()
    hess = torch.autograd.functional.hessian(lambda t: log_posterior(model, t[None])[0], mode)
    return Laplace(mode, -hess)
