"""Models Opacus can compute per-example gradients for: linear, a one-hidden-layer MLP, small GroupNorm CNNs,
and heads on scattering features.

Parameters are (re)initialised from an explicit torch generator (PyTorch's
default schemes), so a run is reproducible from its seed without touching
torch's global generator, which other job threads share.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from privengine.features.scattering import GROUPNORM_GROUPS_PER_IMAGE_CHANNEL
from privengine.randomness import init_parameters

from .projection import PublicProjection


def build_model(kind: str, *, input_shape: tuple[int, ...], n_outputs: int, generator: torch.Generator,
                regression: bool = False, norm: nn.Module | None = None,
                projection: PublicProjection | None = None) -> nn.Module:
    """``kind`` in ``linear``, ``mlp``, ``cnn`` or a scattering model; ``input_shape`` excludes the batch dimension.

    With ``regression`` the single output is flattened to shape ``(batch,)`` (Opacus'
    ghost clipping needs a per-example loss of shape ``(batch,)``).

    The CNN is chosen by image size: 8x8 (digits), 28x28 (MNIST-like, after
    Papernot et al. 2021 / Tramer & Boneh 2021 with GroupNorm), 32x32 RGB (CIFAR-10).
    """
    if norm is not None and kind not in SCATTER_MODELS:
        raise ValueError(f"a fixed normalisation opens only the scattering models; got {kind!r}")
    if (projection is not None) != (kind == "scatter_mlp"):
        raise ValueError(f"scatter_mlp and only it takes a public projection; got {kind!r} "
                         f"{'with' if projection is not None else 'without'} one")
    if kind in SCATTER_MODELS:
        model = _scatter(kind, input_shape, n_outputs, norm, projection)
    elif kind == "linear":
        model = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), n_outputs))
    elif kind == "mlp":
        model = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 128), nn.ReLU(),
                              nn.Linear(128, n_outputs))
    elif kind == "cnn":
        model = _cnn(input_shape, n_outputs)
    else:
        raise ValueError(f"unknown model {kind!r}; known: linear, mlp, cnn, {', '.join(SCATTER_MODELS)}")
    if regression:
        if n_outputs != 1:
            raise ValueError(f"a regression model has one output; got n_outputs={n_outputs}")
        model.append(nn.Flatten(0))
    init_parameters(model, generator)
    return model


SCATTER_MODELS = ("scatter_linear", "scatter_cnn", "scatter_mlp")
MLP_HIDDEN = 256  # scatter_mlp's hidden units (on the r projected coordinates)


def scatter_groupnorm(channels: int) -> nn.GroupNorm:
    """The per-example GroupNorm that opens a scattering model unless a fixed normalisation is given."""
    return nn.GroupNorm(GROUPNORM_GROUPS_PER_IMAGE_CHANNEL * channels // 81, channels)


def _scatter(kind: str, input_shape: tuple[int, ...], n_outputs: int, norm: nn.Module | None,
             projection: PublicProjection | None) -> nn.Module:
    """Models on scattering features ``(81 C, h, w)`` (Tramer & Boneh 2021), each opened by ``norm`` (a fixed
    per-channel map, see :mod:`.normalization`) or, when None, by a GroupNorm: a per-example
    normalisation, which costs no privacy (no statistic of other examples is used).

    ``scatter_linear``: GroupNorm, then one linear layer. ``scatter_cnn``: GroupNorm, two 3x3
    convolutions of 32 channels (the second with stride 2) with tanh, then a linear layer.
    ``scatter_mlp``: GroupNorm, flatten, the fixed ``projection`` onto r public principal directions
    (:mod:`.projection`), then r -> 256 -> outputs with tanh.
    """
    channels, h, w = input_shape
    if norm is None:
        norm = scatter_groupnorm(channels)
    if kind == "scatter_linear":
        return nn.Sequential(norm, nn.Flatten(), nn.Linear(channels * h * w, n_outputs))
    if kind == "scatter_mlp":
        rank = projection.basis.shape[1]
        return nn.Sequential(norm, nn.Flatten(), projection, nn.Linear(rank, MLP_HIDDEN), nn.Tanh(),
                             nn.Linear(MLP_HIDDEN, n_outputs))
    out_h, out_w = (h + 1) // 2, (w + 1) // 2
    return nn.Sequential(norm, nn.Conv2d(channels, 32, 3, padding=1), nn.Tanh(),
                         nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.Tanh(),
                         nn.Flatten(), nn.Linear(32 * out_h * out_w, n_outputs))


def _cnn(input_shape: tuple[int, ...], n_outputs: int) -> nn.Module:
    if len(input_shape) != 3:
        raise ValueError(f"the CNN needs (channels, height, width) inputs; got {input_shape}")
    c, h, w = input_shape
    if (h, w) == (8, 8):
        return nn.Sequential(
            nn.Conv2d(c, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.Tanh(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.GroupNorm(4, 32), nn.Tanh(),  # 4x4
            nn.Flatten(), nn.Linear(32 * 4 * 4, n_outputs))
    if (h, w) == (28, 28):  # strided convolutions instead of the max-pools (3x cheaper on a CPU)
        return nn.Sequential(
            nn.Conv2d(c, 16, 8, stride=2, padding=3), nn.GroupNorm(4, 16), nn.Tanh(),  # 14x14
            nn.Conv2d(16, 32, 4, stride=2), nn.GroupNorm(4, 32), nn.Tanh(),             # 6x6
            nn.Flatten(), nn.Linear(32 * 6 * 6, 32), nn.Tanh(), nn.Linear(32, n_outputs))
    if (h, w) == (32, 32):
        return nn.Sequential(
            nn.Conv2d(c, 32, 3, padding=1), nn.GroupNorm(8, 32), nn.Tanh(), nn.AvgPool2d(2),   # 16x16
            nn.Conv2d(32, 64, 3, padding=1), nn.GroupNorm(8, 64), nn.Tanh(), nn.AvgPool2d(2),  # 8x8
            nn.Conv2d(64, 64, 3, padding=1), nn.GroupNorm(8, 64), nn.Tanh(), nn.AvgPool2d(2),  # 4x4
            nn.Flatten(), nn.Linear(64 * 4 * 4, n_outputs))
    raise ValueError(f"no CNN for {h}x{w} images; use model 'linear' or 'mlp'")


def num_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
