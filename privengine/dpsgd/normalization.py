"""Per-channel normalisation of scattering features, from public statistics or privately estimated ones.

Tramer & Boneh (2021) open their ScatterNet models with a normalisation. Three kinds here:

- ``group``: GroupNorm inside the model, per example (no statistic of other examples: free);
- ``public``: a fixed affine map (x - mu_c) / sd_c per channel c, with mu and sd measured on the
  public split (free: the public examples are not protected);
- ``private``: the same map with mu and sd estimated from the private split by the Gaussian
  mechanism, charged in the run's claim (T&B's MNIST recipe, noise multiplier 8).

The private estimate. For example i with features x_i of shape ``(C, h, w)`` let
s_i = (spatial mean of x_i per channel, spatial mean of x_i^2 per channel), a 2C-vector. Each s_i
is clipped to L2 norm ``clip`` (the 90 % quantile of the public examples' ||s||, so the clip costs
nothing), and the release is

    S = sum_i clip(s_i) + N(0, sigma_norm^2 clip^2 I_2C),

the Gaussian mechanism with add/remove sensitivity ``clip``: RDP lam / (2 sigma_norm^2), the entry
``(sigma_norm, 1.0, 1)`` of an Opacus history (sampling rate 1, one step), composed with the
DP-SGD steps. mu = S[:C] / N and E[x^2] = S[C:] / N, with N the declared private size (public, from the
config: :func:`~.config.declared_private_size`, as Opacus divides by the expected batch size, never by the
data's own count, which would be a data-dependent divisor); sd^2 = E[x^2] - mu^2, floored at a quarter of
the public variance (the noisy difference can come out tiny or negative). All of it is
post-processing of S and public data.
"""

from __future__ import annotations

import torch
from torch import nn

PUBLIC_CLIP_QUANTILE = 0.9
VARIANCE_FLOOR = 0.25  # of the public variance


class ChannelNorm(nn.Module):
    """(x - mean[c]) / sd[c] for ``(n, C, h, w)`` inputs; ``mean`` and ``sd`` are fixed ``(C,)`` buffers."""

    def __init__(self, mean: torch.Tensor, sd: torch.Tensor):
        super().__init__()
        self.register_buffer("mean", mean.reshape(1, -1, 1, 1).clone())
        self.register_buffer("sd", sd.reshape(1, -1, 1, 1).clone())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.sd


def channel_moments(x: torch.Tensor) -> torch.Tensor:
    """``(n, 2C)``: per example, the spatial mean of each channel, then the spatial mean of its square."""
    return torch.cat([x.mean(dim=(2, 3)), x.pow(2).mean(dim=(2, 3))], dim=1)


def public_norm(x_public: torch.Tensor) -> ChannelNorm:
    """The per-channel mean and sd of the public split (pooled over examples and positions)."""
    mean, second = channel_moments(x_public).mean(dim=0).chunk(2)
    return ChannelNorm(mean, (second - mean.pow(2)).clamp(min=1e-12).sqrt())


def public_clip(x_public: torch.Tensor) -> float:
    """The clip of the private estimate: the 90 % quantile of the public examples' ||s_i||."""
    return float(torch.quantile(channel_moments(x_public).norm(dim=1), PUBLIC_CLIP_QUANTILE))


def private_norm(x_private: torch.Tensor, x_public: torch.Tensor, *, private_size: int, noise_multiplier: float,
                 generator: torch.Generator, chunk: int = 8192) -> tuple[ChannelNorm, float]:
    """The Gaussian-mechanism estimate of the module docstring; returns the norm and the clip used.

    ``x_private`` ``(n, C, h, w)``, ``x_public`` ``(m, C, h, w)``; ``private_size``: the declared N that divides
    the noisy sums (never ``n``).

    ``generator`` (on the data's device) draws the noise: a privacy noise stream.
    """
    clip = public_clip(x_public)
    total = torch.zeros(2 * x_private.shape[1], dtype=x_private.dtype, device=x_private.device)
    for start in range(0, len(x_private), chunk):
        s = channel_moments(x_private[start:start + chunk])
        total += (s * (clip / (s.norm(dim=1, keepdim=True) + 1e-12)).clamp(max=1.0)).sum(dim=0)
    noise = torch.randn(total.shape, generator=generator, device=total.device, dtype=total.dtype)
    mean, second = ((total + noise_multiplier * clip * noise) / private_size).chunk(2)
    floor = VARIANCE_FLOOR * public_norm(x_public).sd.reshape(-1).pow(2)
    return ChannelNorm(mean, torch.maximum(second - mean.pow(2), floor).sqrt()), clip
