"""Anisotropic Gaussian noise around a public subspace (written here: no library provides it).

For an orthonormal basis U (d x k) and alpha > -1 the covariance is

    Sigma = std^2 [ I + alpha (I - U U^T) ]:

variance std^2 inside span(U), std^2 (1 + alpha) in its orthogonal complement.
With alpha >= 0 the smallest directional variance is std^2, that of isotropic
noise, which is why DP-SGD with this noise and flat clipping has the privacy of
isotropic DP-SGD with the same std (the extra noise is independent of the data:
post-processing). Alpha < 0 is private only with the matching elliptical clip
(see :mod:`.optimizer`).

Sampler: z ~ N(0, I_d), c = sqrt(1 + alpha),

    x = std * (c z - (c - 1) U U^T z),

so Cov(x) = std^2 [c^2 I - (c^2 - 1) U U^T] = Sigma. At alpha = 0, x = std * z exactly.
"""

from __future__ import annotations

import math

import torch


def sample_anisotropic(basis: torch.Tensor, alpha: float, std: float, n: int,
                       generator: torch.Generator | None = None) -> torch.Tensor:
    """Draw ``n`` vectors from N(0, std^2 [I + alpha (I - basis basis^T)]).

    Args:
        basis: ``(d, k)`` matrix with orthonormal columns (k may be 0).
        alpha: extra relative variance outside span(basis), > -1.
        std: standard deviation inside span(basis), >= 0.
        n: number of draws.
        generator: torch generator on ``basis.device`` (None: torch's default).

    Returns:
        ``(n, d)`` tensor on ``basis.device`` with ``basis.dtype``.

    >>> U = torch.eye(3)[:, :1]
    >>> sample_anisotropic(U, 3.0, 2.0, 5, torch.Generator().manual_seed(0)).shape
    torch.Size([5, 3])
    """
    if not alpha > -1 or std < 0:
        raise ValueError(f"alpha must be > -1 and std >= 0; got alpha={alpha}, std={std}")
    d = basis.shape[0]
    z = torch.randn(n, d, generator=generator, device=basis.device, dtype=basis.dtype)
    return shape_noise(z, basis, alpha=alpha, std=std)


def shape_noise(z: torch.Tensor, basis: torch.Tensor, *, alpha: float, std: float) -> torch.Tensor:
    """Turn standard normal rows ``z`` (``(n, d)``) into draws of the anisotropic law above."""
    if alpha == 0:
        return std * z
    c = math.sqrt(1.0 + alpha)
    return std * (c * z - (c - 1.0) * (z @ basis) @ basis.T)
