"""Seeded synthetic records for the two models (the seed's regression and a logistic twin).

Features are X ~ U(-0.5, 0.5)^d for both models; the linear model's response is
y = X beta + b + noise_sd * N(0, 1), the logistic model's label is
y ~ Bernoulli(sigmoid(X beta + b)). Data are drawn on the CPU from their own
generator and then moved, so a data seed gives the same records on every device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

from privengine.randomness import data_fingerprint


@dataclass(frozen=True)
class Records:
    """A data set: features ``x`` (N, d) and responses or 0/1 labels ``y`` (N,)."""

    x: torch.Tensor
    y: torch.Tensor

    @property
    def n(self) -> int:
        return self.x.shape[0]

    @cached_property
    def fingerprint(self) -> tuple[int, ...]:
        """:func:`~privengine.randomness.data_fingerprint` of ``(x, y)``: the data key of the noise of a release
        of these records (computed once per data set)."""
        return data_fingerprint(self.x, self.y)

    def replace_record(self, i: int, x_new: torch.Tensor, y_new: float) -> "Records":
        """A neighbouring data set (replace-one relation): record ``i`` replaced by (x_new, y_new)."""
        x, y = self.x.clone(), self.y.clone()
        x[i], y[i] = x_new, y_new
        return Records(x, y)


def synthetic_records(model: str, *, n: int, coefficients: tuple[float, ...], intercept: float,
                      noise_sd: float = 0.1, seed: int = 0, device: torch.device | str = "cpu",
                      dtype: torch.dtype = torch.float64) -> Records:
    """Draw ``n`` records of ``model`` (``"linear"`` or ``"logistic"``) with the given true parameters.

    >>> r = synthetic_records("linear", n=5, coefficients=(2.0, -3.5), intercept=-5.0)
    >>> tuple(r.x.shape), tuple(r.y.shape)
    ((5, 2), (5,))
    """
    gen = torch.Generator().manual_seed(seed)
    beta = torch.tensor(coefficients, dtype=torch.float64)
    x = torch.rand(n, len(coefficients), generator=gen, dtype=torch.float64) - 0.5
    eta = x @ beta + intercept
    if model == "linear":
        y = eta + noise_sd * torch.randn(n, generator=gen, dtype=torch.float64)
    elif model == "logistic":
        y = torch.bernoulli(torch.sigmoid(eta), generator=gen)
    else:
        raise ValueError(f"unknown model {model!r}")
    return Records(x.to(device=device, dtype=dtype), y.to(device=device, dtype=dtype))


def true_parameters(model: str, *, coefficients: tuple[float, ...], intercept: float,
                    noise_sd: float = 0.1) -> tuple[float, ...]:
    """The generating parameters in the models' parameterisation: (beta, b, log sigma) or (beta, b).

    >>> true_parameters("logistic", coefficients=(2.0, -3.5), intercept=0.5)
    (2.0, -3.5, 0.5)
    """
    base = tuple(float(c) for c in coefficients) + (float(intercept),)
    return base + (math.log(noise_sd),) if model == "linear" else base
