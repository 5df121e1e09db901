"""The exponential mechanism's stages from a data set to its SGLD sampler, shared by the run and its audit.

1. :func:`models_of`: the model on the records, in float64 (reference, Laplace) and in the sampler's dtype;
2. :func:`fit_vi`: non-private VI (Adam on the plain ELBO from the Laplace approximation) to z_vi, then
   :func:`warm_up` (Adam on the sanitized utility U, entropy weight w) from z_vi to U's maximiser z*;
3. :func:`sgld_sampler`: preconditioned SGLD on f(z) ∝ exp(c U(z)), one chain per entry of ``epsilons``
   with c = eps / (2 Delta_U), every chain centred at z*; the final states of its chains are the draws.

z* is computed from the private records (the claim's caveat): an exact draw of f does not depend on it,
a finite chain does. :mod:`privengine.audit.dp_bayes_release` runs these stages on neighbouring data sets
to measure what that costs.
"""

from __future__ import annotations

from typing import Callable

import torch

from .config import DpBayesConfig
from .data import Records
from .laplace import Laplace
from .models import GLM, build_model
from .objective import Objective
from .sanitizer import sensitivity
from .sgld import PreconditionedSGLD, exponential_mechanism_transform
from .vi import laplace_start, maximise

SAMPLER_DTYPE = torch.float32
CHECK_EVERY = 10  # steps between stop checks of the optimisers and of small samplers

OnReport = Callable[[int, torch.Tensor], bool]


def models_of(config: DpBayesConfig, records: Records, device: torch.device) -> tuple[GLM, GLM]:
    """The model on ``records`` in float64 on the CPU (reference, Laplace) and in SAMPLER_DTYPE on ``device``."""
    priors = dict(prior_sd=config.prior_sd, sigma_prior_scale=config.sigma_prior_scale)
    exact = build_model(config.model, records, **priors)
    sampled = build_model(config.model, Records(records.x.to(device, SAMPLER_DTYPE),
                                                records.y.to(device, SAMPLER_DTYPE)), **priors)
    return exact, sampled


def fit_vi(config: DpBayesConfig, model: GLM, laplace: Laplace, *, generator: torch.Generator,
           on_report: OnReport | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Non-private VI: ``vi_steps`` of Adam on the plain ELBO from the Laplace start (its optimum for a Gaussian
    posterior). Returns z_vi (1, 2P) and the optimisers' coordinate scale (2P,)."""
    device, dtype = model.records.x.device, model.records.x.dtype
    z0, scale = laplace_start(laplace, 1)
    z0, scale = z0.to(device, dtype), scale.to(device, dtype)
    vi = Objective(model, tau=None, entropy_weight=1.0, mc_samples=config.mc_samples)
    return maximise(vi, z0, scale=scale, steps=config.vi_steps, generator=generator, report_every=CHECK_EVERY,
                    on_report=on_report), scale


def warm_up(config: DpBayesConfig, model: GLM, z_vi: torch.Tensor, scale: torch.Tensor, *,
            generator: torch.Generator, on_report: OnReport | None = None) -> tuple[torch.Tensor, Objective]:
    """``warmup_steps`` of Adam on the sanitized utility U from z_vi: z* (1, 2P), where every chain starts, and U.

    ``on_report`` (of both stages) sees every CHECK_EVERY steps' mean objective and returns True to stop.
    """
    utility = Objective(model, tau=config.tau, entropy_weight=config.entropy_weight, mc_samples=config.mc_samples)
    z_star = maximise(utility, z_vi, scale=scale, steps=config.warmup_steps, generator=generator,
                      report_every=CHECK_EVERY, on_report=on_report)
    return z_star, utility


def sgld_sampler(config: DpBayesConfig, utility: Objective, z_star: torch.Tensor, epsilons: list[float], *,
                 noise: torch.Generator) -> tuple[PreconditionedSGLD, torch.Tensor]:
    """SGLD on exp(c U) with one chain per epsilon, and c (C,) = eps / (2 Delta_U); its injected noise and Monte
    Carlo samples come from ``noise`` (the mechanism's randomness). Chains start at ``y = 0``, i.e. z = z*."""
    x = utility.model.records.x
    c = torch.tensor([e / (2 * sensitivity(config.tau, config.neighbouring)) for e in epsilons], device=x.device,
                     dtype=x.dtype)
    transform = exponential_mechanism_transform(z_star.expand(len(epsilons), -1), c, config.entropy_weight)

    def grad_log_f(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        value, grad = utility.value_and_grad(z, generator=noise)
        return c * value, c[:, None] * grad

    return PreconditionedSGLD(grad_log_f, transform=transform, step_size=config.step_size, generator=noise), c
