"""The layers of K models with stacked parameters, and each layer's per-example gradient norms and clipped sums.

What Opacus' ``GradSampleModule`` and its grad samplers (with ghost clipping) do for one model, for the K models
of a model batch (:mod:`.model_batch`) at once. Shapes: K models, b examples per model, each model its own
examples; parameters stacked on a leading K axis (a Linear(i, o) weight is ``(K, o, i)``).

A trainable layer is a :class:`StackedOp`. With z = op(a; theta) its output ``(K, b, *z)``, l_i the loss of
example i (of its model) and delta = dl/dz for l = sum_i l_i (slot i's output enters l_i only, so
delta_i = dl_i/dz_i), an op gives, without materialising a per-example gradient where it can:

    norms_sq:      N_ki = sum over the op's parameters p of ||dl_ki/dp||^2          (K, b)
    clipped_sums:  S_k(p) = sum_i f_ki dl_ki/dp, for each parameter p, factors f (K, b)     [(K, *p.shape)]

A parameter-free module (the same in the K models) is :class:`Fixed`. :func:`forward` runs the ops, recording
the trainable ones on a tape; :func:`per_example_norms` and :func:`add_clipped_sums` then give Opacus' flat
clipping over all the parameters of a model: ||g_ki||^2 = sum over the ops of N_ki, and S_k of every parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, Sequence, TypeVar

import torch
from torch import nn

Ctx = TypeVar("Ctx")


class StackedOp(Protocol[Ctx]):
    """A trainable layer of K models; ``Ctx``: what its forward keeps for its norms and sums (e.g. its input)."""

    n_params: int  # its parameters, in the model's order

    def forward(self, a: Any, params: Sequence[torch.Tensor]) -> tuple[torch.Tensor, Ctx]:
        """``(z, ctx)``: the output ``(K, b, *z)`` of each model on its own inputs ``a`` (``(K, b, *a)``)."""
        ...

    def forward_shared(self, x: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """``(K, n, *z)``: the output of each model on the same inputs ``x`` ``(n, *a)`` (evaluation)."""
        ...

    def norms_sq(self, ctx: Ctx, delta: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """``(K, b)``: N_ki, the squared norm of example i's gradient over this op's parameters."""
        ...

    def clipped_sums(self, ctx: Ctx, delta: torch.Tensor, factor: torch.Tensor,
                     params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Per parameter ``(K, *p.shape)``: sum_i f_ki dl_ki/dp, with ``factor`` f ``(K, b)``."""
        ...


class Fixed:
    """A parameter-free module, the same in the K models: ``(K, b, *s) -> (K, b, *s')`` through ``(K b, *s)``."""

    def __init__(self, module: nn.Module):
        self.module = module

    def apply(self, a: torch.Tensor) -> torch.Tensor:
        k, b = a.shape[:2]
        out = self.module(a.reshape(k * b, *a.shape[2:]))
        return out.reshape(k, b, *out.shape[1:])


class Linear:
    """``z = a W^T + c`` for each model: weight W ``(K, o, i)``, bias c ``(K, o)``; ``a`` is ``(K, b, i)``.

    Ghost norm: example i's weight gradient delta_i a_i^T is rank one, so ||dl_i/dW||^2 = ||a_i||^2 ||delta_i||^2,
    and dl_i/dc = delta_i.
    """

    n_params = 2

    def forward(self, a: torch.Tensor, params: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ctx: the input ``a``."""
        w, c = params
        return torch.baddbmm(c.unsqueeze(1), a, w.transpose(1, 2)), a.detach()

    def forward_shared(self, x: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        w, c = params
        return torch.matmul(x, w.transpose(1, 2)) + c.unsqueeze(1)

    def norms_sq(self, a: torch.Tensor, delta: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """(||a_i||^2 + 1) ||delta_i||^2."""
        return (a.pow(2).sum(-1) + 1.0) * delta.pow(2).sum(-1)

    def clipped_sums(self, a: torch.Tensor, delta: torch.Tensor, factor: torch.Tensor,
                     params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """``[(K, o, i), (K, o)]``: sum_i f_i delta_i a_i^T (one batched matmul) and sum_i f_i delta_i."""
        scaled = delta * factor.unsqueeze(-1)
        return [torch.bmm(scaled.transpose(1, 2), a), scaled.sum(1)]


class Affine:
    """GroupNorm's per-channel affine ``y_cs = w_c x_cs + beta_c``: w, beta ``(K, C)``; ``x`` is ``(K, b, C, *s)``
    (at least one position axis).

    Per example (as Opacus' GroupNorm grad sampler computes it): dl/dw_c = sum_s x_cs delta_cs and
    dl/dbeta_c = sum_s delta_cs, each ``(K, b, C)``, materialised (C numbers per example).
    """

    n_params = 2

    @staticmethod
    def _view(v: torch.Tensor, a_dim: int) -> torch.Tensor:
        """A ``(K, C)`` parameter viewed ``(K, 1, C, 1, ...)`` against a ``(K, b, C, *s)`` input."""
        return v.reshape(v.shape[0], 1, v.shape[1], *([1] * (a_dim - 3)))

    def forward(self, a: torch.Tensor, params: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ctx: the input ``a``."""
        w, c = params
        return a * self._view(w, a.dim()) + self._view(c, a.dim()), a.detach()

    def forward_shared(self, x: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        return self.forward(x.unsqueeze(0), params)[0]

    @staticmethod
    def _per_example(a: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(dl/dw, dl/dbeta)``, each ``(K, b, C)``."""
        return (a * delta).flatten(3).sum(-1), delta.flatten(3).sum(-1)

    def norms_sq(self, a: torch.Tensor, delta: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        gw, gb = self._per_example(a, delta)
        return gw.pow(2).sum(-1) + gb.pow(2).sum(-1)

    def clipped_sums(self, a: torch.Tensor, delta: torch.Tensor, factor: torch.Tensor,
                     params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        gw, gb = self._per_example(a, delta)
        f = factor.unsqueeze(-1)
        return [(gw * f).sum(1), (gb * f).sum(1)]


class ChannelFeatures(NamedTuple):
    """Standardised features with their fixed per-example channel statistics: what :class:`AffineLinear` takes.

    ``x`` ``(..., C, *s)``; ``mean`` m and ``centred`` V ``(..., C)``: per channel, the mean over the S positions
    and the centred sum of squares sum_s (x_s - m)^2 (:func:`channel_stats`).
    """

    x: torch.Tensor
    mean: torch.Tensor
    centred: torch.Tensor


def channel_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(m, V)`` of :class:`ChannelFeatures` for features ``(n, C, *s)``, each ``(n, C)``."""
    x = x.flatten(2)
    mean = x.mean(-1)
    return mean, (x - mean.unsqueeze(-1)).pow(2).sum(-1)


class _AffineLinearContext(NamedTuple):
    """What :class:`AffineLinear`'s norms and sums read: x ``(K, b, C, S)``, m and V ``(K, b, C)``, the forward's
    product P ``(K, b, O, C)`` and Wsum ``(K, O, C)``."""

    x: torch.Tensor
    mean: torch.Tensor
    centred: torch.Tensor
    p: torch.Tensor
    wsum: torch.Tensor


class AffineLinear:
    """scatter_linear's GroupNorm affine, flatten and Linear as one op, written so that nothing of the size of the
    input is formed but the two batched products below (the per-example work of a step is then two passes over
    the gathered features, where the op by op computation makes about ten).

    Input: :class:`ChannelFeatures` of the standardised features x ``(K, b, C, S)`` (S positions per channel; the
    GroupNorm's standardisation is in the prefix). Parameters: the affine's w, beta ``(K, C)``, the Linear's W
    ``(K, O, C S)`` (viewed ``(K, O, C, S)``) and c ``(K, O)``.

        y_cs = w_c x_cs + beta_c,   z_o = sum_cs W_ocs y_cs + c_o
        P_oc = sum_s W_ocs x_cs                                   (K, b, O, C): the one product of the forward
        z_o  = sum_c w_c P_oc + sum_c beta_c Wsum_oc + c_o,        Wsum_oc = sum_s W_ocs

    Per-example gradients, delta = dl/dz ``(K, b, O)``:

        dl/dW = delta y^T:  ||.||^2 = ||delta||^2 ||y||^2,  ||y||^2 = sum_c [w_c^2 V_c + S (beta_c + w_c m_c)^2]
                            (a sum of non-negative terms: no cancellation, so the norm is accurate to rounding)
        dl/dc = delta;   dl/dw_c = sum_o delta_o P_oc;   dl/dbeta_c = sum_o delta_o Wsum_oc

    and the clipped sums (f the clip factors): A = sum_i f_i delta_i x_i^T ``(K, O, C S)``, the other product, then
    dW_ocs = w_c A_ocs + beta_c e_o with e = sum_i f_i delta_i (= dc); dw, dbeta: sums over i of the above.
    """

    n_params = 4

    @staticmethod
    def _folded(params: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(W viewed (K, O, C, S), Wsum (K, O, C), the constant c + Wsum beta (K, O))``."""
        w, beta, weight, c = params
        k, o = c.shape
        wr = weight.reshape(k, o, w.shape[1], -1)
        wsum = wr.sum(-1)
        return wr, wsum, c + torch.bmm(wsum, beta.unsqueeze(-1)).squeeze(-1)

    def forward(self, a: ChannelFeatures, params: Sequence[torch.Tensor]
                ) -> tuple[torch.Tensor, _AffineLinearContext]:
        w = params[0]
        wr, wsum, const = self._folded(params)
        x = a.x.flatten(3)
        p = torch.einsum("kbcs,kocs->kboc", x, wr)
        z = torch.einsum("kboc,kc->kbo", p, w) + const.unsqueeze(1)
        return z, _AffineLinearContext(x, a.mean, a.centred, p.detach(), wsum)

    def forward_shared(self, x: torch.Tensor, params: Sequence[torch.Tensor]) -> torch.Tensor:
        """The same standardised input ``(n, C, *s)`` for every model: one ``(n, C S) x (K, C S, O)`` product with
        the affine folded into the weight (W_ocs w_c)."""
        w = params[0]
        wr, _, const = self._folded(params)
        folded = (wr * w[:, None, :, None]).flatten(2)
        return torch.matmul(x.flatten(1), folded.transpose(1, 2)) + const.unsqueeze(1)

    @staticmethod
    def _affine_grads(ctx: _AffineLinearContext, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(dl/dw, dl/dbeta)``, each ``(K, b, C)``."""
        return torch.einsum("kbo,kboc->kbc", delta, ctx.p), torch.bmm(delta, ctx.wsum)

    def norms_sq(self, ctx: _AffineLinearContext, delta: torch.Tensor,
                 params: Sequence[torch.Tensor]) -> torch.Tensor:
        w, beta = params[0].unsqueeze(1), params[1].unsqueeze(1)
        y_sq = (w.pow(2) * ctx.centred + ctx.x.shape[-1] * (beta + w * ctx.mean).pow(2)).sum(-1)
        gw, gb = self._affine_grads(ctx, delta)
        return (y_sq + 1.0) * delta.pow(2).sum(-1) + gw.pow(2).sum(-1) + gb.pow(2).sum(-1)

    def clipped_sums(self, ctx: _AffineLinearContext, delta: torch.Tensor, factor: torch.Tensor,
                     params: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        w, beta = params[0], params[1]
        scaled = delta * factor.unsqueeze(-1)
        k, b, o = delta.shape
        a = torch.bmm(scaled.transpose(1, 2), ctx.x.reshape(k, b, -1)).reshape(k, o, w.shape[1], -1)
        e = scaled.sum(1)
        dweight = (a * w[:, None, :, None] + e[:, :, None, None] * beta[:, None, :, None]).flatten(2)
        gw, gb = self._affine_grads(ctx, delta)
        f = factor.unsqueeze(-1)
        return [(gw * f).sum(1), (gb * f).sum(1), dweight, e]


Op = Fixed | StackedOp


@dataclass(frozen=True)
class Taped:
    """One trainable op's pass: the op, its ctx, its output z (in the graph that gives dl/dz) and its parameters."""

    op: StackedOp
    ctx: Any
    output: torch.Tensor
    params: Sequence[torch.Tensor]


def forward(ops: Sequence[Op], params: Sequence[torch.Tensor], a: Any, *, shared: bool,
            tape: list[Taped] | None = None) -> torch.Tensor:
    """The ops on ``a``, the trainable ones taking their parameters from ``params`` in order (stacked on K).

    ``a``: ``(K, b, *s)`` (each model its own inputs, or :class:`ChannelFeatures` of them) or, with ``shared``,
    ``(n, *s)`` (the same inputs for every model: evaluation); the output is ``(K, b or n, *out)``. With ``tape``,
    the output of the first trainable op becomes a leaf that requires a gradient and every trainable op's
    :class:`Taped` is appended: the graph that gives dl/dz at each of them, through the later ops, without any
    parameter gradient.
    """
    offset = 0
    for op in ops:
        if isinstance(op, Fixed):
            a = op.module(a) if shared else op.apply(a)
            continue
        p = params[offset:offset + op.n_params]
        offset += op.n_params
        if shared:
            z, ctx = op.forward_shared(a, p), None
        else:
            z, ctx = op.forward(a, p)
        shared = False
        if tape is not None:
            if not tape:
                z = z.detach().requires_grad_()
            tape.append(Taped(op, ctx, z, p))
        a = z
    if shared:  # no trainable op (cannot happen for the batched models): the same output for every model
        raise ValueError("a model batch needs a trainable layer")
    return a


def per_example_norms(tape: Sequence[Taped], deltas: Sequence[torch.Tensor]) -> torch.Tensor:
    """``(K, b)``: ||g_ki||, the norm of example i's gradient over every parameter of model k (Opacus' flat
    clipping norm): sqrt(sum over the taped ops of N_ki), ``deltas`` the dl/dz of the tape's outputs."""
    return sum(t.op.norms_sq(t.ctx, d, t.params) for t, d in zip(tape, deltas)).sqrt()


def add_clipped_sums(sums: Sequence[torch.Tensor], tape: Sequence[Taped], deltas: Sequence[torch.Tensor],
                     factor: torch.Tensor) -> None:
    """``sums[j] += S_k(p_j)``: sum_i f_ki dl_ki/dp_j for every parameter p_j in model order (``(K, *p.shape)``
    each), with ``factor`` f ``(K, b)``."""
    offset = 0
    for t, d in zip(tape, deltas):
        for j, s in enumerate(t.op.clipped_sums(t.ctx, d, factor, t.params)):
            sums[offset + j] += s
        offset += t.op.n_params
