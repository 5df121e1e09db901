"""A trained ``nn.Sequential`` as a JSON architecture spec that :mod:`.loader` rebuilds in plain PyTorch.

The spec of a network is ``{"format", "kind": "network", "layers", "input", "preprocessing", "classes", "task",
...}``; ``layers`` lists one dict per module of the ``nn.Sequential``, in order, so the rebuilt network's
``state_dict`` keys (``"0.weight"``, ``"3.bias"``, ...) are the trained one's and its safetensors file loads
strictly. The vocabulary (shapes are per example, the batch dimension first at run time):

- ``linear`` ``in``, ``out``: ``(n, in) -> (n, out)``;
- ``conv2d`` ``in``, ``out``, ``kernel``, ``stride``, ``padding``; ``avg_pool2d`` ``kernel``;
- ``group_norm`` ``groups``, ``channels``, ``eps`` (affine);
- ``flatten`` ``start_dim``, ``end_dim``; ``relu``; ``tanh``;
- ``standardise``: ``(x - mean) / sd`` with fixed buffers ``mean`` and ``sd`` (a fixed channel normalisation);
- ``project``: ``(x - mean) @ basis`` with fixed buffers ``mean (d,)`` and ``basis (d, r)``.

A fixed layer is recognised by its buffers and no parameters (``mean`` and ``sd``; ``mean`` and ``basis``), so this
module needs no mechanism's classes. Anything else is a ValueError: a network this cannot describe is not kept.

A spec's ``data`` names the data set, never the private data's fingerprint: in reproducible mode that fingerprint is
the key of the run's noise and Poisson batches, so with the config a card already holds it would let anyone
regenerate the noise without the data; and in any mode it is a deterministic hash of the private data, against which
whoever holds every record but one can test guesses of the last (review helper-33).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .loader import FORMAT

__all__ = ["FORMAT", "describe_layers"]


def describe_layers(model: nn.Sequential) -> list[dict[str, Any]]:
    """One layer dict per module of ``model`` (see the module docstring); ValueError for a module outside the
    vocabulary."""
    if not isinstance(model, nn.Sequential):
        raise ValueError(f"a kept network must be an nn.Sequential; got {type(model).__name__}")
    return [_layer(module) for module in model]


def _layer(m: nn.Module) -> dict[str, Any]:
    if isinstance(m, nn.Linear):
        return {"type": "linear", "in": m.in_features, "out": m.out_features}
    if isinstance(m, nn.Conv2d):
        if m.groups != 1 or m.dilation != (1, 1) or not isinstance(m.padding, tuple):
            raise ValueError("a kept conv2d has groups 1, dilation 1 and a numeric padding")
        return {"type": "conv2d", "in": m.in_channels, "out": m.out_channels, "kernel": list(m.kernel_size),
                "stride": list(m.stride), "padding": list(m.padding)}
    if isinstance(m, nn.GroupNorm):
        return {"type": "group_norm", "groups": m.num_groups, "channels": m.num_channels, "eps": m.eps}
    if isinstance(m, nn.AvgPool2d):
        return {"type": "avg_pool2d", "kernel": m.kernel_size}
    if isinstance(m, nn.Flatten):
        return {"type": "flatten", "start_dim": m.start_dim, "end_dim": m.end_dim}
    if isinstance(m, nn.ReLU):
        return {"type": "relu"}
    if isinstance(m, nn.Tanh):
        return {"type": "tanh"}
    buffers = {name for name, _ in m.named_buffers(recurse=False)}
    if not any(True for _ in m.parameters()):
        if buffers == {"mean", "sd"}:
            return {"type": "standardise"}
        if buffers == {"mean", "basis"}:
            return {"type": "project"}
    raise ValueError(f"cannot describe a {type(m).__name__} layer for a kept model")
