"""Stochastic maximisation of an :class:`~privengine.dp_bayes.objective.Objective` over a batch of z.

Adam (torch.optim) runs in scaled coordinates u, z = z0 + scale * u, so that one unit of u is about
one posterior sd for the means and one unit for the log-sds: Adam's steps are roughly ``lr`` in each
coordinate whatever its gradient's size, so without the scaling a parameter with a tiny posterior
sd would never settle. The learning rate decays geometrically from ``lr`` to ``final_lr``, and the
returned z averages the iterates over the last ``average_fraction`` of the steps (Polyak-Ruppert),
which removes most of the Monte Carlo jitter of single iterates.

Used for the non-private VI baseline (raw ELBO, started at the Laplace approximation) and to move
the private chains to the sanitized utility's maximum before SGLD burn-in.
"""

from __future__ import annotations

from typing import Callable

import torch

from .laplace import Laplace
from .objective import Objective

# on_report(step, mean utility per chain over the last report interval (C,)) -> True to stop early
OnReport = Callable[[int, torch.Tensor], bool]


def laplace_start(laplace: Laplace, chains: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Start (C, 2P) at the Laplace mode with the mean-field sds, and the scale (2P,) of the coordinates.

    For a Gaussian posterior this start is exactly the mean-field VI optimum.
    """
    sd = laplace.mean_field_sd
    z0 = torch.cat([laplace.mode, sd.log()])
    scale = torch.cat([sd, torch.ones_like(sd)])
    return z0.expand(chains, -1).clone(), scale


def maximise(objective: Objective, z0: torch.Tensor, *, scale: torch.Tensor, steps: int,
             generator: torch.Generator, lr: float = 0.05, final_lr: float = 1e-3,
             average_fraction: float = 0.25, report_every: int = 100,
             on_report: OnReport | None = None) -> torch.Tensor:
    """Maximise U from z0 (C, 2P) with ``steps`` Adam steps in units of ``scale`` (2P,) or (C, 2P).

    Returns the average of the last iterates (C, 2P); when ``on_report`` asks to stop, the
    average so far (or the last iterate if averaging had not begun).
    """
    u = torch.zeros_like(z0)
    if steps <= 0:
        return z0.clone()
    opt = torch.optim.Adam([u], lr=lr)
    sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=(final_lr / lr) ** (1 / steps))
    avg_from = int(steps * (1 - average_fraction))
    total, n_avg = torch.zeros_like(u), 0
    values = torch.zeros(z0.shape[0], device=z0.device, dtype=z0.dtype)
    for step in range(1, steps + 1):
        value, grad = objective.value_and_grad(z0 + scale * u, generator=generator)
        u.grad = -grad * scale
        opt.step()
        sched.step()
        values += value
        if step > avg_from:
            total += u
            n_avg += 1
        if on_report is not None and step % report_every == 0:
            if on_report(step, values / report_every):
                break
            values.zero_()
    return z0 + scale * (total / n_avg if n_avg else u)
