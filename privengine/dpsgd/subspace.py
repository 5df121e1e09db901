"""The public gradient subspace: per-example gradients of PUBLIC examples -> top-k basis U.

Let G be the ``(m, d)`` matrix of (clipped) per-example gradients of m public
examples at the current model, all parameters flattened. U (``(d, k)``) holds its
top-k right singular vectors, i.e. the top-k eigenvectors of the public gradient
second moment G^T G / m (PDP-SGD, Zhou et al. 2021; GEP, Yu et al. 2021). U never
depends on private data, so noise shaped by U costs no privacy.

When k is small against min(m, d) the basis comes from a randomized range finder
with power iterations (Halko, Martinsson & Tropp 2011), warm-started from the
previous basis as GEP does; otherwise from the eigenvectors of the smaller Gram
matrix (exact). The randomized SVD is written here because ``torch.svd_lowrank``
draws from torch's global generator (not seedable per run, and shared across
the job threads).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def per_example_gradients(model: nn.Module, loss_fn: LossFn, x: torch.Tensor, y: torch.Tensor, *,
                          params: dict[str, torch.Tensor] | None = None, clip: float | None = None,
                          chunk: int = 128) -> torch.Tensor:
    """Flattened per-example gradients of ``loss_fn(model(x_i), y_i)`` (torch.func: vmap of grad).

    Args:
        model: a module without backward hooks (functorch cannot trace Opacus' hooks:
            pass a copy taken before Opacus wrapped the model, with ``params``).
        loss_fn: ``loss_fn(output, target)`` with mean reduction over the batch.
        x, y: ``(m, ...)`` inputs and ``(m, ...)`` targets on the model's device.
        params: parameter tensors by name to evaluate at (default: the model's own).
        clip: clip each row to this L2 norm (None: no clipping).
        chunk: examples per vectorised pass (bounds memory).

    Returns:
        ``(m, d)`` with d the number of trainable parameters, in ``params`` order.
    """
    if params is None:
        params = {k: p for k, p in model.named_parameters() if p.requires_grad}
    params = {k: p.detach() for k, p in params.items()}

    def loss_one(p, xi, yi):
        return loss_fn(functional_call(model, p, (xi.unsqueeze(0),)), yi.unsqueeze(0))

    grad_one = vmap(grad(loss_one), in_dims=(None, 0, 0))
    rows = []
    for start in range(0, len(x), chunk):
        g = grad_one(params, x[start:start + chunk], y[start:start + chunk])
        rows.append(torch.cat([g[k].reshape(g[k].shape[0], -1) for k in params], dim=1))
    out = torch.cat(rows)
    if clip is not None:
        out = out * (clip / (out.norm(dim=1, keepdim=True) + 1e-12)).clamp(max=1.0)
    return out


def top_right_singular_vectors(g: torch.Tensor, k: int, *, generator: torch.Generator | None = None,
                               init: torch.Tensor | None = None, oversample: int = 10,
                               power_iters: int = 2) -> torch.Tensor:
    """Orthonormal ``(d, k)`` basis of the top-k right singular vectors of ``g`` (``(m, d)``).

    Uses the randomized range finder when its cost, about ``m d (k + oversample)
    (2 power_iters + 2)`` flops, is below half that of the exact route (``m^2 d``,
    see :func:`_exact_top_right_singular_vectors`); ``init`` (``(d, j)``, e.g. the
    previous basis) seeds its start and ``generator`` draws the rest.
    """
    m, d = g.shape
    if not 1 <= k <= min(m, d):
        raise ValueError(f"k must be in [1, min(m, d) = {min(m, d)}]; got {k}")
    width = k + oversample
    if width * (2 * power_iters + 2) >= min(m, d) / 2:
        return _exact_top_right_singular_vectors(g, k)
    omega = torch.randn(d, width, generator=generator, device=g.device, dtype=g.dtype)
    if init is not None:
        j = min(init.shape[1], width)
        omega[:, :j] = init[:, :j]
    # Range finder on g^T g (d x d): q spans the top right-singular directions.
    q, _ = torch.linalg.qr(g.T @ (g @ omega))
    for _ in range(power_iters - 1):
        q, _ = torch.linalg.qr(g.T @ (g @ q))
    # Rayleigh-Ritz: exact SVD of the small (m x width) projection g q.
    _, _, vh = torch.linalg.svd(g @ q, full_matrices=False)
    return (q @ vh[:k].T).contiguous()


def _exact_top_right_singular_vectors(g: torch.Tensor, k: int) -> torch.Tensor:
    """Through the eigenvectors of the smaller Gram matrix, in float64 (float32 on MPS, which has no float64).

    With m <= d: g g^T = W S^2 W^T and the right singular vectors are g^T W S^-1; a
    QR orthonormalises them (and completes directions of zero singular value).
    Several times faster than a thin SVD of a wide matrix on a CPU.
    """
    m, d = g.shape
    g64 = g.to(torch.float32 if g.device.type == "mps" else torch.float64)
    if m <= d:
        _, w = torch.linalg.eigh(g64 @ g64.T)  # ascending eigenvalues
        v = g64.T @ w[:, -k:]
    else:
        _, v = torch.linalg.eigh(g64.T @ g64)
        v = v[:, -k:]
    q, _ = torch.linalg.qr(v)
    return q.flip(1).to(g.dtype).contiguous()  # largest singular value first


def captured_energy(basis: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``||U^T g||^2 / ||g||^2`` for a flat vector g (``(d,)``), as a 0-dim tensor on g's device; NaN when
    g = 0. A tensor, not a float: reading it would make the device wait (a host sync) at every step."""
    total = g.pow(2).sum()
    return (basis.T @ g).pow(2).sum() / total  # 0 / 0 = NaN for a zero gradient
