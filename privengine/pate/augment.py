"""Random image augmentations for the semi-supervised student, drawn per example in one batched call.

Written here because torchvision's transforms draw one set of random parameters per call, so a
batch ``(B, C, H, W)`` would get the same shift for every image; FixMatch needs independent draws
per example. Both functions resample through ``torch.nn.functional.affine_grid`` / ``grid_sample``
(bilinear) or a mask, so a batch costs one kernel call.

The background of every image is its own minimum (black on MNIST after standardisation):
pixels that move in from outside the frame and the cut-out square take that value.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

# Weak: a small translation (the FixMatch paper's flip-and-shift, without flips: digits are not symmetric).
WEAK_SHIFT = 0.08           # fraction of the image side (2.2 pixels on 28 x 28)
# Strong: a larger affine distortion and a cut-out square (FixMatch's RandAugment + Cutout, reduced to
# the geometric part that keeps a digit a digit).
STRONG_SHIFT = 0.12
STRONG_ROTATION = math.radians(20.0)
STRONG_SCALE = 0.15         # zoom factor in [1 - s, 1 + s]
STRONG_CUTOUT = 0.4         # side of the cut-out square, fraction of the image side


def random_affine(x: torch.Tensor, *, shift: float, rotation: float, scale: float,
                  generator: torch.Generator) -> torch.Tensor:
    """Per-example random affine maps of ``x`` ``(B, C, H, W)`` -> same shape.

    Each image is rotated by an angle uniform in ``[-rotation, rotation]`` (radians), zoomed by a
    factor uniform in ``[1 - scale, 1 + scale]`` and translated by up to ``shift`` times its side
    along each axis (uniform). ``generator`` lives on the CPU; the draws move to ``x``'s device.
    """
    b = len(x)
    u = (torch.rand(b, 4, generator=generator) * 2 - 1).to(x.device, x.dtype)  # (B, 4) in [-1, 1]
    angle, zoom = u[:, 0] * rotation, 1 + u[:, 1] * scale
    cos, sin = torch.cos(angle) / zoom, torch.sin(angle) / zoom
    # affine_grid works in normalised coordinates [-1, 1]: a shift of s * side is 2 s there.
    theta = torch.stack([torch.stack([cos, -sin, 2 * shift * u[:, 2]], 1),
                         torch.stack([sin, cos, 2 * shift * u[:, 3]], 1)], 1)  # (B, 2, 3)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    background = x.amin(dim=(1, 2, 3), keepdim=True)
    return F.grid_sample(x - background, grid, align_corners=False, padding_mode="zeros") + background


def cutout(x: torch.Tensor, *, size: float, generator: torch.Generator) -> torch.Tensor:
    """Set one square of side ``size`` x image side, centred uniformly at random, to the background."""
    b, _, h, w = x.shape
    half_h, half_w = max(1, round(size * h)) / 2, max(1, round(size * w)) / 2
    centre = torch.rand(b, 2, generator=generator).to(x.device) * torch.tensor([h, w], device=x.device)
    rows = torch.arange(h, device=x.device)[None, :, None] + 0.5
    cols = torch.arange(w, device=x.device)[None, None, :] + 0.5
    inside = (((rows - centre[:, 0, None, None]).abs() < half_h)
              & ((cols - centre[:, 1, None, None]).abs() < half_w))  # (B, H, W)
    background = x.amin(dim=(1, 2, 3), keepdim=True).expand_as(x)
    return torch.where(inside[:, None], background, x)


def weak(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """FixMatch's weak augmentation: a random translation."""
    return random_affine(x, shift=WEAK_SHIFT, rotation=0.0, scale=0.0, generator=generator)


def strong(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """FixMatch's strong augmentation: rotation, zoom and translation, then a cut-out square."""
    distorted = random_affine(x, shift=STRONG_SHIFT, rotation=STRONG_ROTATION, scale=STRONG_SCALE,
                              generator=generator)
    return cutout(distorted, size=STRONG_CUTOUT, generator=generator)
