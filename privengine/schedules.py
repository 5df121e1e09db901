"""Learning-rate schedules as lists of numbers, read off torch's own schedulers.

Loops that do not step a ``torch.optim`` scheduler themselves (the DP-SGD model batch, which updates K stacked
models by hand; the PATE student's CUDA-graphed steps, which read their rate from a device buffer) still use the
scheduler's values to the bit by stepping it on a scratch optimizer.
"""

from __future__ import annotations

import torch


def cosine_learning_rates(lr: float, steps: int) -> list[float]:
    """The rate of each of ``steps`` steps under ``CosineAnnealingLR(T_max=steps)`` from ``lr`` to zero, stepped
    after every optimizer step: ``lr_t`` = lr (1 + cos(pi t / steps)) / 2 up to the scheduler's rounding (it
    updates recursively), the scheduler's own floats."""
    scratch = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(scratch, T_max=steps)
    rates = []
    for _ in range(steps):
        rates.append(scratch.param_groups[0]["lr"])
        scratch.step()
        schedule.step()
    return rates
