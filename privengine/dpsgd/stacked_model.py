"""K models of one architecture as one stacked model, and the clipped gradient sums of their logical batches.

A model is parsed from the ``nn.Sequential`` :func:`.training.build_network` returns into

- a **prefix** of parameter-free modules (flatten, the fixed normalisation, GroupNorm's standardisation
  (x - mean_g) / sd_g, scatter_mlp's public projection when no trainable layer precedes it): identical for the K
  models (checked), so it is applied once to the private set (cached when it fits :data:`PREFIX_CACHE_BYTES`) and
  once per evaluation chunk for all K models;
- then **ops** (:mod:`.stacked_ops`): ``Linear`` (trainable), GroupNorm's per-channel affine ``w_c x + b_c``
  (trainable), and fixed modules (Tanh, ReLU, Flatten, a projection after a trainable layer) applied to
  ``(K b, ...)`` reshaped inputs; an affine, a full flatten and a Linear at the start fuse into one
  :class:`~.stacked_ops.AffineLinear` (scatter_linear).

Parameters are stacked on a leading K axis, in the models' ``nn.Module`` order; they are the caller's (the
optimizer updates them), passed to every pass. :class:`ClippedGradients` computes, for the logical batches B_k of
the K models (padded to ``(K, b_max)``), S_k = sum_{i in B_k} f_ki g_ki with Opacus' flat clip factor
f_ki = min(1, C_k / (||g_ki|| + 1e-6)), in chunks of examples (each example whole in one chunk) so the memory stays
bounded: per chunk, one forward with a tape, one ``autograd.grad`` of the summed per-example losses for dl/dz at
every trainable op, then the ops' ghost norms and clipped sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .stacked_ops import (Affine, AffineLinear, ChannelFeatures, Fixed, Linear, Op, Taped, add_clipped_sums,
                          channel_stats, forward, per_example_norms)
from .training import EVAL_CHUNK

PREFIX_CACHE_BYTES = 2 * 2**30       # the private set's prefix features are cached when they fit this
CPU_CHUNK_BYTES = 64 * 2**20          # K x b x (widest per-example activation) x 4 bytes per chunk, CPU
GPU_CHUNK_BYTES = 2 * 2**30           # the same on a GPU


class _GroupStandardise(nn.Module):
    """GroupNorm without its affine: (x - mean_g) / sqrt(var_g + eps) per example and group (parameter-free)."""

    def __init__(self, groups: int, eps: float):
        super().__init__()
        self.groups, self.eps = groups, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.groups, None, None, self.eps)


@dataclass(frozen=True)
class StackedModel:
    """The K models' shared prefix and their ops (the parameters are passed to each pass)."""

    prefix: nn.Sequential
    ops: list[Op]

    def features(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """What the first op takes for examples ``x`` ``(n, ...)``: ``(features,)``, or ``(features, m, V)``
        (:func:`~.stacked_ops.channel_stats`) when it is an :class:`~.stacked_ops.AffineLinear`."""
        out = self.prefix(x)
        return (out, *channel_stats(out)) if isinstance(self.ops[0], AffineLinear) else (out,)

    @staticmethod
    def as_input(parts: tuple[torch.Tensor, ...]) -> torch.Tensor | ChannelFeatures:
        """The first op's input from the parts of :meth:`features` (gathered to ``(K, b, ...)``)."""
        return ChannelFeatures(*parts) if len(parts) > 1 else parts[0]

    def outputs(self, params: Sequence[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        """``(K, n, outputs)``: every model's output on the same examples ``x`` ``(n, *input_shape)``."""
        return forward(self.ops, params, self.prefix(x), shared=True)


def stack_models(models: Sequence[nn.Module]) -> tuple[StackedModel, list[torch.Tensor]]:
    """The K models as one :class:`StackedModel` (its prefix in eval mode) and their parameters stacked
    ``(K, *p.shape)`` (copies) in model order.

    ValueError unless the K models have the same architecture and identical parameter-free parts.
    """
    parsed = [_parse(m) for m in models]
    prefix, ops, _ = parsed[0]
    for other_prefix, other_ops, _ in parsed[1:]:
        if len(other_prefix) != len(prefix) or len(other_ops) != len(ops):
            raise ValueError("the models of a batch must share their architecture")
        for a, b in zip(prefix, other_prefix):
            if not _same_fixed(a, b):
                raise ValueError(f"the models of a batch must share their fixed modules ({type(a).__name__})")
        for a, b in zip(ops, other_ops):
            if type(a) is not type(b) or (isinstance(a, Fixed) and not _same_fixed(a.module, b.module)):
                raise ValueError("the models of a batch must share their architecture")
    params = [torch.stack(ps).clone() for ps in zip(*(p for _, _, p in parsed))]
    stacked = StackedModel(nn.Sequential(*prefix), _fuse(ops))
    stacked.prefix.eval()
    return stacked, params


def _parse(model: nn.Module) -> tuple[list[nn.Module], list[Op], list[torch.Tensor]]:
    """``(prefix modules, ops, parameters in model order)`` of one model (see the module docstring)."""
    if not isinstance(model, nn.Sequential):
        raise ValueError(f"a model batch takes nn.Sequential models; got {type(model).__name__}")
    prefix: list[nn.Module] = []
    ops: list[Op] = []
    params: list[torch.Tensor] = []
    for m in model:
        if isinstance(m, nn.Linear):
            if m.bias is None:
                raise ValueError("a model batch takes Linear layers with a bias")
            ops.append(Linear())
            params += [m.weight.detach(), m.bias.detach()]
        elif isinstance(m, nn.GroupNorm):
            if not m.affine:
                raise ValueError("a model batch takes affine GroupNorm layers")
            standardise = _GroupStandardise(m.num_groups, m.eps)
            (prefix if not ops else ops).append(standardise if not ops else Fixed(standardise))
            ops.append(Affine())
            params += [m.weight.detach(), m.bias.detach()]
        elif any(True for _ in m.parameters()):
            raise ValueError(f"a model batch cannot train {type(m).__name__} layers")
        elif not ops:
            prefix.append(m)
        else:
            ops.append(Fixed(m))
    if len(params) != sum(1 for p in model.parameters() if p.requires_grad):
        raise ValueError("a model batch needs every parameter trainable and in a Linear or GroupNorm layer")
    return prefix, ops, params


def _fuse(ops: list[Op]) -> list[Op]:
    """``[Affine, Flatten, Linear, ...]`` at the start of the ops becomes ``[AffineLinear, ...]``."""
    if (len(ops) >= 3 and isinstance(ops[0], Affine) and isinstance(ops[1], Fixed)
            and type(ops[1].module) is nn.Flatten and ops[1].module.start_dim == 1 and ops[1].module.end_dim == -1
            and isinstance(ops[2], Linear)):
        return [AffineLinear(), *ops[3:]]
    return ops


def _same_fixed(a: nn.Module, b: nn.Module) -> bool:
    """Whether two parameter-free modules compute the same map (same type, settings and buffers)."""
    if type(a) is not type(b):
        return False
    sa, sb = a.state_dict(), b.state_dict()
    if sa.keys() != sb.keys() or not all(torch.equal(sa[k], sb[k]) for k in sa):
        return False
    skip = {"_parameters", "_buffers", "_modules", "training"}
    va = {k: v for k, v in vars(a).items() if k not in skip and not k.startswith("_")}
    vb = {k: v for k, v in vars(b).items() if k not in skip and not k.startswith("_")}
    return va == vb


class ClippedGradients:
    """The clipped gradient sums of the K models' logical batches on the private examples ``x``, ``y``.

    ``params``: the stacked parameters, read for shapes only (the widest per-example activation sets the chunk: b
    examples per model with K x b x width x 4 bytes within :data:`CPU_CHUNK_BYTES` or :data:`GPU_CHUNK_BYTES`).
    """

    def __init__(self, model: StackedModel, params: Sequence[torch.Tensor], x: torch.Tensor, y: torch.Tensor, *,
                 regression: bool, device: torch.device):
        self.model, self.x, self.y, self.device = model, x, y, device
        self.criterion = "mse" if regression else "ce"
        with torch.no_grad():
            self.private_features = self._private_features()
            prefix_width = model.prefix(x[:1])[0].numel()
        width = max([prefix_width] + [max(p.shape[1:]) for p in params if p.dim() == 3])  # or a Linear's in/out
        budget = CPU_CHUNK_BYTES if torch.device(device).type == "cpu" else GPU_CHUNK_BYTES
        self.chunk = max(1, budget // (4 * params[0].shape[0] * width))

    def _private_features(self) -> tuple[torch.Tensor, ...] | None:
        """:meth:`StackedModel.features` of the whole private set when they fit the cache, else None (computed
        per batch)."""
        probe = self.model.prefix(self.x[:1])
        if self.x.shape[0] * probe[0].numel() * probe.element_size() > PREFIX_CACHE_BYTES:
            return None
        return tuple(torch.cat(parts) for parts in zip(*(self.model.features(self.x[s:s + EVAL_CHUNK])
                                                        for s in range(0, len(self.x), EVAL_CHUNK))))

    def inputs(self, idx: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor | ChannelFeatures:
        """``(K, b, *s)``: the first op's input for the private examples ``idx`` (``(K, b)`` on the device).

        ``padding``: ``(K, b)`` bool, the padded slots (None: there are none). Their index is 0, but their features
        are set to zeros (a select on the freshly gathered tensors, never a product: example 0's features or its
        outputs may be infinite, and its zero weight times inf would be NaN). Each output element of the ops depends
        on its own slot only, and a padded slot's terms in the sums are zero either way, so the real slots' results
        are those of the unmasked inputs, to the bit, whenever those are finite."""
        if self.private_features is not None:
            parts = tuple(t[idx] for t in self.private_features)
        else:
            with torch.no_grad():
                parts = tuple(t.reshape(*idx.shape, *t.shape[1:])
                              for t in self.model.features(self.x[idx.reshape(-1)]))
        if padding is not None:
            parts = tuple(t.masked_fill_(padding.reshape(*padding.shape, *([1] * (t.dim() - 2))), 0) for t in parts)
        return self.model.as_input(parts)

    def _per_example_loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(K, b)``: the loss of each example under its model (cross-entropy, or the squared error)."""
        if self.criterion == "mse":
            return (out - y).pow(2)
        k, b = out.shape[:2]
        return F.cross_entropy(out.reshape(k * b, -1), y.reshape(k * b), reduction="none").reshape(k, b)

    def __call__(self, params: Sequence[torch.Tensor], idx: torch.Tensor, valid: torch.Tensor, *, padded: bool,
                 clips: torch.Tensor | None) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``(S, loss_sum)`` of the batches ``idx`` ``(K, b_max)`` (``valid``: the real slots; ``padded``: whether
        some slot is not, read from the counts on the CPU: no device sync): S_k per parameter (``(K, *p.shape)``)
        and the sum of each model's per-example losses over its batch (``(K,)``).

        ``clips``: each model's clip norm C_k ``(K,)``; None (the non-private twin of an attack): no clipping, every
        factor 1 (plain summed gradients).
        """
        sums = [torch.zeros_like(p) for p in params]
        loss_sum = torch.zeros(idx.shape[0], device=self.device)
        for start in range(0, idx.shape[1], self.chunk):
            i = idx[:, start:start + self.chunk]
            mask = valid[:, start:start + self.chunk]
            weight = mask.to(sums[0].dtype)
            tape: list[Taped] = []
            out = forward(self.model.ops, params, self.inputs(i, ~mask if padded else None), shared=False, tape=tape)
            losses = self._per_example_loss(out, self.y[i]) * weight
            deltas = torch.autograd.grad(losses.sum(), [t.output for t in tape])
            with torch.no_grad():
                loss_sum += losses.detach().sum(1)
                if clips is None:
                    factor = weight
                else:  # Opacus' flat clip factor
                    factor = (clips.unsqueeze(1) / (per_example_norms(tape, deltas) + 1e-6)).clamp(max=1.0) * weight
                add_clipped_sums(sums, tape, deltas, factor)
        return sums, loss_sum
