"""Issue 36, item 2: each stacked op of the model batch (privengine.dpsgd.stacked_ops) against brute force.

For K = 3 tiny models with different weights, each on its own examples, every trainable op's per-example gradient
norms (``norms_sq``) and clipped sums (``clipped_sums``), and the flat clipping over all of a model's parameters,
equal what ``torch.func`` gives: per-example gradients ``vmap(grad(loss))`` of each model written as a plain
function, squared and summed, or weighted by the clip factors and summed. In float64, to rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import grad, vmap

from privengine.dpsgd.stacked_ops import (Affine, AffineLinear, ChannelFeatures, Fixed, Linear, Taped,
                                          add_clipped_sums, channel_stats, forward, per_example_norms)

K, B, CLASSES = 3, 6, 4  # models, examples per model, outputs
DTYPE = torch.float64


@dataclass(frozen=True)
class Case:
    """A tiny stacked network: its ops, stacked parameters ``(K, *p.shape)``, each model's examples ``x``
    ``(K, B, *s)`` and labels, and ``reference(params of one model, x (n, *s)) -> (n, CLASSES)``: the same network
    in plain torch; ``groups``: the parameter indices of each trainable op, in order."""

    ops: list
    params: list[torch.Tensor]
    x: torch.Tensor
    y: torch.Tensor
    reference: Callable
    groups: list[range]

    def inputs(self, x: torch.Tensor):
        """The first op's input for ``x`` ``(K, B, C, *s)``: channel statistics when it is an AffineLinear."""
        if not isinstance(self.ops[0], AffineLinear):
            return x
        stats = channel_stats(x.reshape(-1, *x.shape[2:]))
        return ChannelFeatures(x, *(s.reshape(*x.shape[:3]) for s in stats))


def _stacked(gen: torch.Generator, *shapes: tuple[int, ...]) -> list[torch.Tensor]:
    """Parameters of K models, each drawn on its own (different weights)."""
    return [torch.randn(K, *shape, generator=gen, dtype=DTYPE) for shape in shapes]


def _linear_case(gen: torch.Generator) -> Case:
    """Linear(5, 7), Tanh, Linear(7, CLASSES)."""
    params = _stacked(gen, (7, 5), (7,), (CLASSES, 7), (CLASSES,))

    def reference(p, x):
        return F.linear(torch.tanh(F.linear(x, p[0], p[1])), p[2], p[3])

    return Case([Linear(), Fixed(nn.Tanh()), Linear()], params, torch.randn(K, B, 5, generator=gen, dtype=DTYPE),
                torch.randint(CLASSES, (K, B), generator=gen), reference, [range(0, 2), range(2, 4)])


def _affine_case(gen: torch.Generator) -> Case:
    """GroupNorm's affine on (3, 2, 2) features, Flatten, Linear(12, CLASSES)."""
    params = _stacked(gen, (3,), (3,), (CLASSES, 12), (CLASSES,))

    def reference(p, x):
        y = x * p[0][:, None, None] + p[1][:, None, None]
        return F.linear(y.flatten(1), p[2], p[3])

    return Case([Affine(), Fixed(nn.Flatten()), Linear()], params,
                torch.randn(K, B, 3, 2, 2, generator=gen, dtype=DTYPE), torch.randint(CLASSES, (K, B), generator=gen),
                reference, [range(0, 2), range(2, 4)])


def _affine_linear_case(gen: torch.Generator) -> Case:
    """The fused affine-flatten-Linear(12, 5) on (3, 2, 2) features, ReLU, Linear(5, CLASSES)."""
    params = _stacked(gen, (3,), (3,), (5, 12), (5,), (CLASSES, 5), (CLASSES,))

    def reference(p, x):
        y = x * p[0][:, None, None] + p[1][:, None, None]
        return F.linear(torch.relu(F.linear(y.flatten(1), p[2], p[3])), p[4], p[5])

    return Case([AffineLinear(), Fixed(nn.ReLU()), Linear()], params,
                torch.randn(K, B, 3, 2, 2, generator=gen, dtype=DTYPE), torch.randint(CLASSES, (K, B), generator=gen),
                reference, [range(0, 4), range(4, 6)])


CASES = {"linear": _linear_case, "affine": _affine_case, "affine_linear": _affine_linear_case}


@pytest.fixture(params=list(CASES))
def case(request) -> Case:
    return CASES[request.param](torch.Generator().manual_seed(7))


def _taped(case: Case) -> tuple[list[Taped], tuple[torch.Tensor, ...]]:
    """The stacked pass: each trainable op's tape entry and dl/dz at its output, l the summed per-example losses."""
    tape: list[Taped] = []
    out = forward(case.ops, case.params, case.inputs(case.x), shared=False, tape=tape)
    losses = F.cross_entropy(out.reshape(K * B, CLASSES), case.y.reshape(-1), reduction="none")
    return tape, torch.autograd.grad(losses.sum(), [t.output for t in tape])


def _per_example_gradients(case: Case) -> list[torch.Tensor]:
    """Brute force: per parameter ``(K, B, *p.shape)``, dl_ki/dp of model k on its example i, by torch.func."""
    def loss(params, x, y):
        return F.cross_entropy(case.reference(params, x.unsqueeze(0)), y.unsqueeze(0))

    per_model = [vmap(grad(loss), in_dims=(None, 0, 0))(tuple(p[k] for p in case.params), case.x[k], case.y[k])
                 for k in range(K)]
    return [torch.stack(gs) for gs in zip(*per_model)]


def _squared_norms(grads: list[torch.Tensor]) -> torch.Tensor:
    """``(K, B)``: sum over the parameters of ||dl_ki/dp||^2."""
    return sum(g.flatten(2).pow(2).sum(-1) for g in grads)


def _weighted_sums(grads: list[torch.Tensor], factor: torch.Tensor) -> list[torch.Tensor]:
    """Per parameter ``(K, *p.shape)``: sum_i f_ki dl_ki/dp."""
    return [(g * factor.reshape(K, B, *([1] * (g.dim() - 2)))).sum(1) for g in grads]


def test_the_stacked_forward_is_each_model_on_its_own_and_on_shared_inputs(case):
    own = forward(case.ops, case.params, case.inputs(case.x), shared=False)
    shared = forward(case.ops, case.params, case.x[0], shared=True)  # model 0's examples, through every model
    for k in range(K):
        model = [p[k] for p in case.params]
        torch.testing.assert_close(own[k], case.reference(model, case.x[k]))
        torch.testing.assert_close(shared[k], case.reference(model, case.x[0]))


def test_each_op_s_norms_and_clipped_sums_equal_torch_func_per_example_gradients(case):
    """Every trainable op, first in the net or behind another: N_ki and sum_i f_ki dl_ki/dp (f arbitrary)."""
    tape, deltas = _taped(case)
    grads = _per_example_gradients(case)
    factor = torch.rand(K, B, generator=torch.Generator().manual_seed(3), dtype=DTYPE)
    assert [type(t.op) for t in tape] == [type(op) for op in case.ops if not isinstance(op, Fixed)]
    for t, delta, group in zip(tape, deltas, case.groups, strict=True):
        mine = [grads[j] for j in group]
        torch.testing.assert_close(t.op.norms_sq(t.ctx, delta, t.params), _squared_norms(mine))
        for ours, theirs in zip(t.op.clipped_sums(t.ctx, delta, factor, t.params), _weighted_sums(mine, factor),
                                strict=True):
            torch.testing.assert_close(ours, theirs)


def test_flat_clipping_over_every_op_equals_opacus_clip_of_torch_func_gradients(case):
    """||g_ki|| over all of model k's parameters, and S_k = sum_i min(1, C_k / (||g_ki|| + 1e-6)) g_ki with a clip
    norm per model (one that clips every example, one that clips some, one that clips none)."""
    tape, deltas = _taped(case)
    grads = _per_example_gradients(case)
    norms = _squared_norms(grads).sqrt()
    torch.testing.assert_close(per_example_norms(tape, deltas), norms)
    clips = torch.stack([norms[0].min() / 2, norms[1].median(), norms[2].max() * 2]).unsqueeze(1)
    factor = (clips / (norms + 1e-6)).clamp(max=1.0)
    assert (factor[0] < 1).all() and (factor[1] < 1).any() and (factor[1] == 1).any() and (factor[2] == 1).all()
    sums = [torch.zeros_like(p) for p in case.params]
    add_clipped_sums(sums, tape, deltas, factor)
    for ours, theirs in zip(sums, _weighted_sums(grads, factor), strict=True):
        torch.testing.assert_close(ours, theirs)
