"""The likelihood sanitizer gamma(l) = tau * tanh(l / tau) and the utility's sensitivity.

Each record's sanitized log-likelihood lies in (-tau, tau), so replacing one record moves
sum_i gamma_i by less than 2 tau, adding or removing one by less than tau. The prior and the
(weighted) entropy of the utility do not depend on the records, so these are the sensitivities
Delta_U of the whole utility U(z; x) = E_q[sum_i gamma_i + log p(theta)] + w H(q).
"""

from __future__ import annotations

import torch

SENSITIVITY_FACTOR = {"replace-one": 2.0, "add-remove": 1.0}
NEIGHBOURING_TEXT = {
    "replace-one": "replace one record (Delta_U = 2 tau)",
    "add-remove": "add or remove one record (Delta_U = tau)",
}


def _tanh_and_slope(loglik: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    th = (loglik / tau).tanh_()
    return th, torch.addcmul(th.new_ones(()), th, th, value=-1.0)


def sanitize(loglik: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """gamma = tau * tanh(loglik / tau) and d gamma / d loglik = 1 - tanh^2 (any shape).

    >>> g, dg = sanitize(torch.tensor([0.0, 1e6, -1e6]), 4.0)
    >>> g.tolist(), dg.tolist()
    ([0.0, 4.0, -4.0], [1.0, 0.0, 0.0])
    """
    th, slope = _tanh_and_slope(loglik, tau)
    return tau * th, slope


def sanitized_sum(loglik: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """sum_i gamma_i over the last axis and the slopes d gamma_i / d loglik_i (same shape as loglik).

    The same numbers as :func:`sanitize`, with one pass less over the records (the sampler's hot loop).
    """
    th, slope = _tanh_and_slope(loglik, tau)
    return tau * th.sum(-1), slope


def sensitivity(tau: float, neighbouring: str) -> float:
    """Delta_U: 2 tau for replace-one neighbours, tau for add/remove."""
    try:
        return SENSITIVITY_FACTOR[neighbouring] * tau
    except KeyError:
        raise ValueError(f"unknown neighbouring relation {neighbouring!r}") from None
