"""A fixed projection onto the public split's principal directions: dimension reduction that costs no privacy.

DP-SGD's noise on the averaged clipped gradient has norm about sigma C / B sqrt(d) for a model of d parameters,
while the clipped signal is at most C: every parameter pays noise. The scattering features of a 28x28 image have
d_in = 81 x 7 x 7 = 3 969 coordinates; a hidden layer of 256 units on all of them would hold a million
parameters (5 times the linear model's noise norm). Mapped first onto r = 256 public principal directions, the
same hidden layer holds 68 000 parameters, so a non-linear head costs about the noise of the linear model
(39 700 parameters). The flattened (normalised) features x (shape ``(n, d_in)``) become

    z = (x - mu) V,       mu: (d_in,) mean of the public features,  V: (d_in, r),

V the top-r right singular vectors of the centred public feature matrix (torch.linalg.svd), i.e. the public
split's first r principal directions; z has shape ``(n, r)``. mu and V are functions of the public examples
only, which are disjoint from the private ones, so using them costs nothing (the same argument as the public
normalisation statistics in :mod:`.normalization`). They are fixed buffers: DP-SGD trains only what follows.
"""

from __future__ import annotations

import torch
from torch import nn


class PublicProjection(nn.Module):
    """``(n, d_in) -> (n, r)``: z = (x - mean) @ basis, with fixed ``mean (d_in,)`` and orthonormal ``basis (d_in, r)``.

    ``captured`` is the fraction of the public features' variance that the r directions hold.
    """

    def __init__(self, mean: torch.Tensor, basis: torch.Tensor, captured: float):
        super().__init__()
        self.register_buffer("mean", mean.clone())
        self.register_buffer("basis", basis.clone())
        self.captured = captured

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) @ self.basis


def public_projection(features: torch.Tensor, rank: int) -> PublicProjection:
    """The projection on the top ``rank`` principal directions of ``features`` (public, shape ``(n, d_in)``).

    ValueError if ``rank`` exceeds n - 1 (centred, n examples span at most n - 1 directions) or d_in.
    """
    n, d_in = features.shape
    if not 1 <= rank <= min(n - 1, d_in):
        raise ValueError(f"rank must be in [1, min(n_public - 1, d_in)] = [1, {min(n - 1, d_in)}]; got {rank}")
    x = features.double()
    mean = x.mean(dim=0)
    _, singular, vh = torch.linalg.svd(x - mean, full_matrices=False)
    energy = singular.pow(2)
    captured = float(energy[:rank].sum() / energy.sum()) if energy.sum() > 0 else 1.0
    return PublicProjection(mean.to(features.dtype), vh[:rank].T.to(features.dtype), captured)
