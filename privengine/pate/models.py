"""Teacher and student architectures.

``ConvNet``: the seed's design (``depth`` blocks of 3x3 conv with ``width``
channels, instance normalisation, ReLU, 2x2 average pooling; then a linear
classifier). Instance norm is ``GroupNorm(width, width)`` (one group per channel),
which has no running statistics, so the model is a pure function of its
parameters and batches cleanly under ``torch.func.vmap``.
``MLP``: ``depth`` hidden layers of ``width`` units with ReLU, for tabular data.
``ScatterLinear``: on ScatterNet features ``(81 C, H/4, W/4)``, a GroupNorm in 27 groups per image
channel (Tramer & Boneh's normalisation) and one linear layer (their ScatterNet+linear model).
All return logits of shape ``(batch, n_classes)``. :func:`build_model` initialises every parameter from the generator
it is given (:func:`privengine.randomness.init_parameters`), never from torch's global generator, which the threads
of a sweep share.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..features.scattering import GROUPNORM_GROUPS_PER_IMAGE_CHANNEL
from ..randomness import init_parameters


class ConvNet(nn.Module):
    def __init__(self, in_shape: tuple[int, int, int], n_classes: int, *, width: int = 128, depth: int = 3):
        super().__init__()
        channels, height, width_px = in_shape
        layers: list[nn.Module] = []
        for _ in range(depth):
            layers += [nn.Conv2d(channels, width, kernel_size=3, padding=1), nn.GroupNorm(width, width), nn.ReLU(),
                       nn.AvgPool2d(2)]
            channels, height, width_px = width, height // 2, width_px // 2
        if height < 1 or width_px < 1:
            raise ValueError(f"depth {depth} pools a {in_shape[1]}x{in_shape[2]} image below 1 pixel")
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels * height * width_px, n_classes)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


class MLP(nn.Module):
    def __init__(self, in_features: int, n_classes: int, *, width: int = 128, depth: int = 2):
        super().__init__()
        layers: list[nn.Module] = []
        size = in_features
        for _ in range(depth):
            layers += [nn.Linear(size, width), nn.ReLU()]
            size = width
        layers.append(nn.Linear(size, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x.flatten(1))


class ScatterLinear(nn.Module):
    def __init__(self, in_shape: tuple[int, int, int], n_classes: int):
        super().__init__()
        channels = in_shape[0]
        self.norm = nn.GroupNorm(GROUPNORM_GROUPS_PER_IMAGE_CHANNEL * channels // 81, channels)
        self.classifier = nn.Linear(math.prod(in_shape), n_classes)

    def forward(self, x):
        return self.classifier(self.norm(x).flatten(1))


def build_model(architecture: str, input_shape: tuple[int, ...], n_classes: int, *, width: int, depth: int,
                generator: torch.Generator) -> nn.Module:
    """The model for ``architecture`` (``"convnet"``, ``"mlp"`` or ``"scatter_linear"``) with ``n_classes`` outputs, on
    the CPU, its parameters drawn from ``generator`` (a CPU generator); ``input_shape`` is that of the model's inputs
    (pixels, or scattering features for ``scatter_linear``)."""
    if architecture == "convnet":
        if len(input_shape) != 3:
            raise ValueError(f"the ConvNet needs (channels, height, width) inputs; got shape {input_shape}")
        model = ConvNet(input_shape, n_classes, width=width, depth=depth)
    elif architecture == "mlp":
        model = MLP(math.prod(input_shape), n_classes, width=width, depth=depth)
    elif architecture == "scatter_linear":
        if len(input_shape) != 3 or input_shape[0] % 81:
            raise ValueError(f"scatter_linear needs (81 C, h, w) scattering features; got shape {input_shape}")
        model = ScatterLinear(input_shape, n_classes)
    else:
        raise ValueError(f"unknown architecture {architecture!r}")
    init_parameters(model, generator)
    return model
