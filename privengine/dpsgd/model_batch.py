"""The K isotropic DP-SGD models of one run trained together: stacked parameters, one vectorised pass per step.

:func:`train_models` trains K models that share the task, the architecture, sigma, q, the step count, the
learning rate and schedule, the clip norm and the EMA (the models of one run: its seeds, and its settings
where batching is exact, see :func:`unbatchable`) and differ in their seed and index. Each model keeps what
:func:`~.training.train_model` gives it: its initialisation (``STREAM_INIT`` of its seed) and optional public
warm start, its Poisson batches and its noise (``STREAM_SAMPLING`` / ``STREAM_NOISE`` of its index, keyed by the
config and the private data exactly as in :mod:`.training`), its accountant history and its evaluations; only
the arithmetic is shared. For the same keys the two paths agree to float tolerance
(tests/test_dpsgd_model_batch.py).

Shapes. K models, b examples per model in a chunk, parameters stacked along a leading K axis (a Linear(i, o)
weight is ``(K, o, i)``). A model is parsed from the ``nn.Sequential`` :func:`.models.build_model` returns into

- a **prefix** of parameter-free modules (flatten, the fixed normalisation, GroupNorm's standardisation
  (x - mean_g) / sd_g, scatter_mlp's public projection when no trainable layer precedes it): identical for the K
  models (checked), so it is applied once to the private set (cached when it fits :data:`PREFIX_CACHE_BYTES`) and
  once per evaluation chunk for all K models;
- then **ops**: ``Linear`` (trainable), GroupNorm's per-channel affine ``w_c x + b_c`` (trainable), and fixed
  modules (Tanh, ReLU, Flatten, a projection after a trainable layer) applied to ``(K b, ...)`` reshaped inputs.

One step of model k (the math of Opacus' DPOptimizer, written by hand here because Opacus handles one model):

    B_k   = {i : u_ki < q},  u_ki ~ U[0, 1) from model k's sampling generator, one draw per private example
            (``UniformWithReplacementSampler``: the same ``torch.rand(n, generator) < q`` call, on the CPU), or
            fixed-size batches of its shuffled passes (``sampling="shuffle"``, ``RandomSampler``'s randperms);
    g_ki  = grad of the per-example loss l(theta_k; x_i, y_i), never materialised for Linear layers:
            for z = a W^T + c,  ||dl/dW||^2 = ||a||^2 ||dl/dz||^2  and  ||dl/dc||^2 = ||dl/dz||^2
            (ghost norms, Li et al. 2021 / Opacus' fast gradient clipping); the affine's per-example gradients
            are ``(K, b, C)`` and are materialised;
    f_ki  = min(1, C / (||g_ki|| + 1e-6))                      (Opacus' flat clip, all parameters flattened)
    S_k   = sum_{i in B_k} f_ki g_ki                            (for a Linear: (f delta)^T a, one batched matmul)
    G_k   = (S_k + N(0, (sigma C)^2 I)) / B                     (noise per parameter, in the model's parameter
                                                                 order, from model k's noise generator)
    v_k   <- m v_k + G_k;  theta_k <- theta_k - lr_t v_k        (torch's SGD; lr_t from torch's CosineAnnealingLR)
    ema_k <- theta_k at the first step, then lerp(ema_k, theta_k, 1 - decay)   (AveragedModel's EMA)

The per-example losses are summed over the valid slots of a padded ``(K, b_max)`` index (a model whose batch is
shorter than b_max has zero-weight slots, whose gradients are exactly zero; their index is 0 but their input is zeros,
not example 0's features, so an example 0 whose outputs overflow cannot make 0 x inf = NaN in the sums of a model
that did not sample it), and one ``autograd.grad`` gives
dl/dz at every trainable op's output for all K models at once; the logical batch is processed in chunks of
examples (each example whole in one chunk) so the memory stays bounded. Each model's accountant takes one
``(sigma, q)`` step per logical step (Opacus' history format), after the normalisation entry if any, as in
:mod:`.training`; steps with an empty Poisson batch still add noise and are accounted, as there.

Differences from the Opacus path, none of them in what is released or accounted: floating-point rounding
(summation order, the affine applied after GroupNorm's standardisation rather than fused), and the ``train_loss``
diagnostic, which here is the mean per-example loss of each logical batch (the Opacus path averages its physical
batches' means; the two coincide when a logical batch fits one physical batch).

Longer than 500 lines because the stacked layers, their per-example norms and clipped sums, the sampling, noise,
update and evaluation of K models are one mechanism whose pieces are checked against each other and against
Opacus as a whole; split, each part would be meaningless without the others.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from privengine.accounting.subsampled_gaussian import History, make_accountant
from privengine.randomness import derived_generator, noise_generator
from privengine.schedules import cosine_learning_rates

from . import metrics as M
from .config import DPSGDConfig
from .data import Task
from .projection import PublicProjection
from .training import (EVAL_CHUNK, EVAL_SUBSET, STREAM_NOISE, STREAM_SAMPLING, STREAM_WARM_START, ModelResult, Plan,
                       build_network, fixed_normalizer, normalization_history, warm_start)

BATCH_MODELS = ("linear", "mlp", "scatter_linear", "scatter_mlp")
PREFIX_CACHE_BYTES = 2 * 2**30       # the private set's prefix features are cached when they fit this
CPU_CHUNK_BYTES = 64 * 2**20          # K x b x (widest per-example activation) x 4 bytes per chunk, CPU
GPU_CHUNK_BYTES = 2 * 2**30           # the same on a GPU


def unbatchable(config: DPSGDConfig, alpha: float) -> str | None:
    """None if the model of setting ``alpha`` can train in a model batch; otherwise why it takes the Opacus path.

    Batched exactly: isotropic DP-SGD (alpha = 0: every variant is then Opacus' flat clip and isotropic noise) of a
    linear, mlp, scatter_linear or scatter_mlp model, with Poisson or shuffled batches, either grad_sample_mode
    (hooks and ghost clipping compute the same clipped sum), any normalisation but the private one, warm start,
    EMA and schedule included.
    """
    kind = config.model if config.model != "auto" else ("linear" if config.dataset == "linreg" else "cnn")
    if alpha != 0:
        return ("alpha != 0: its noise is shaped by a public subspace that each model re-estimates at its own "
                "parameters")
    if kind not in BATCH_MODELS:
        return f"model {kind}: convolutions are not vectorised across models here"
    if config.normalization == "private":
        return "private normalisation: each model has its own noisy channel statistics"
    return None


# The config fields the models of one batch may differ in (each model reads its own); every other field is shared.
# Per model: the seed and attempt; the noise (sigma or its target and the accountant and delta it is calibrated
# with, its secure source); the learning rate, clip norm and EMA decay (per-model scalars broadcast on the K axis);
# the run's model count (n_seeds); and fields the batched models do not read (alpha's subspace knobs, the Opacus
# path's batch splitting and clipping route, the GDP display).
PER_MODEL_FIELDS = frozenset({
    "seed", "replica", "n_seeds", "noise_mode", "noise_multiplier", "target_epsilon", "delta", "accountant",
    "secure_noise", "show_gdp", "lr", "max_grad_norm", "ema_decay", "alphas", "variant", "subspace_rank",
    "refresh_every", "public_batch", "grad_sample_mode", "physical_batch_size"})


def shared_settings(config: DPSGDConfig) -> dict:
    """The fields of ``config`` every model of a batch must share (all but :data:`PER_MODEL_FIELDS`)."""
    return {k: v for k, v in config.to_dict().items() if k not in PER_MODEL_FIELDS}


@dataclass(frozen=True)
class Member:
    """One model of a batch: its setting, its seed (initialisation, warm start) and its index in its run (the key
    of its Poisson batches and noise); ``on_eval(step, values, history)`` reports its evaluations.

    ``config`` / ``plan``: the model's own run config and plan when the batch holds models of several runs (a
    sweep's compatible points); None: the batch's. They may differ from the batch's only in
    :data:`PER_MODEL_FIELDS` and sigma. Every key of the model (initialisation, Poisson batches, noise) and its
    accountant come from its own config, exactly as when its run trains alone.
    ``should_stop``: its run's stop (None: the batch's); a model whose stop comes leaves the batch with its partial
    result while the others go on. ``on_done(result)``: called once, when the model's result is final (it
    finished, or it stopped).
    """

    alpha: float
    seed: int
    index: int
    on_eval: Callable[[int, dict[str, float], History], None]
    config: DPSGDConfig | None = None
    plan: Plan | None = None
    should_stop: Callable[[], bool] | None = None
    on_done: Callable[[ModelResult], None] | None = None


def train_models(task: Task, config: DPSGDConfig, plan: Plan, members: Sequence[Member], *, device: torch.device,
                 should_stop: Callable[[], bool], inclusion: torch.Tensor | None = None,
                 private: bool = True) -> list[ModelResult]:
    """Train the ``members`` together; one :class:`~.training.ModelResult` per member, in their order.

    Every member must be batchable (:func:`unbatchable`) and share the batch's settings but its
    :data:`PER_MODEL_FIELDS` (models of several runs: each member's own ``config`` and ``plan``). Each member's stop
    (its ``should_stop``, else ``should_stop``) is asked before every step and every evaluation chunk; when it says
    yes the member returns its partial result with ``stopped=True`` and leaves the batch (the others go on; when
    all share one stop, all stop at the same step). Each result's ``seconds`` is its share of the batch's wall
    time (the time divided by K).

    ``inclusion``: optional ``(K, n_private)`` bool, model k's training subset (the reference models of a
    membership attack, :mod:`privengine.audit.membership_dpsgd`). Model k then samples only the examples of row k:
    Poisson, ``(torch.rand(n, generator=g_k) < q) & inclusion[k]`` (the same draws as without it, so each included
    example joins a step with probability ``plan.sample_rate`` and an excluded one never: the (sigma, q, steps)
    history is exact for its subset); shuffle, passes over row k's examples. None (the runs): unchanged, bit for bit.
    ``private=False`` (the non-private twin of an attack, never a run): no clipping (every factor 1), no noise, and
    nothing accounted (each history holds only what precedes the first step).
    """
    _check_batchable(config, plan, members)
    return _Batch(task, config, plan, list(members), device, inclusion=inclusion, private=private).run(should_stop)


def train_and_predict(task: Task, config: DPSGDConfig, plan: Plan, members: Sequence[Member], x: torch.Tensor, *,
                      device: torch.device, should_stop: Callable[[], bool], inclusion: torch.Tensor | None = None,
                      private: bool = True) -> tuple[list[ModelResult], torch.Tensor]:
    """:func:`train_models`, then the K trained models' outputs on ``x`` ``(n, *input_shape)``: ``(K, n, outputs)``
    logits (of the evaluated parameters: the EMA when ``config.ema_decay`` > 0, else the last iterate), on the
    device."""
    _check_batchable(config, plan, members)
    batch = _Batch(task, config, plan, list(members), device, inclusion=inclusion, private=private)
    results = batch.run(should_stop)
    return results, batch.outputs(x)


def _check_batchable(config: DPSGDConfig, plan: Plan, members: Sequence[Member]) -> None:
    """ValueError unless every member is batchable under its own config and shares what the batch shares."""
    shared = shared_settings(config)
    for m in members:
        own = m.config or config
        if (why := unbatchable(own, m.alpha)) is not None:
            raise ValueError(f"model {m.index} cannot be batched: {why}")
        differ = sorted(k for k, v in shared_settings(own).items() if shared.get(k) != v)
        if differ:
            raise ValueError(f"model {m.index} cannot join this batch: its config differs in {', '.join(differ)}")
        own_plan = m.plan or plan
        if (own_plan.sample_rate, own_plan.steps, own_plan.expected_batch_size) != \
                (plan.sample_rate, plan.steps, plan.expected_batch_size):
            raise ValueError(f"model {m.index} cannot join this batch: its q, steps or batch size differ")


# ----------------------------------------------------------------------------------------------------------------
# The stacked model


class _GroupStandardise(nn.Module):
    """GroupNorm without its affine: (x - mean_g) / sqrt(var_g + eps) per example and group (parameter-free)."""

    def __init__(self, groups: int, eps: float):
        super().__init__()
        self.groups, self.eps = groups, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.group_norm(x, self.groups, None, None, self.eps)


class _Fixed:
    """A parameter-free module, the same in the K models: ``(K, b, *s) -> (K, b, *s')`` through ``(K b, *s)``."""

    trainable = False

    def __init__(self, module: nn.Module):
        self.module = module

    def __call__(self, a: torch.Tensor, params=None) -> torch.Tensor:
        k, b = a.shape[:2]
        out = self.module(a.reshape(k * b, *a.shape[2:]))
        return out.reshape(k, b, *out.shape[1:])


class _Linear:
    """``z = a W^T + c`` for each model: weight ``(K, o, i)``, bias ``(K, o)``; ``a`` is ``(K, b, i)``."""

    trainable = True
    n_params = 2

    @staticmethod
    def forward(a: torch.Tensor, params) -> tuple[torch.Tensor, torch.Tensor]:
        """``(z, ctx)``: the output ``(K, b, o)`` and what the norms and sums need (the input)."""
        w, c = params
        return torch.baddbmm(c.unsqueeze(1), a, w.transpose(1, 2)), a.detach()

    @staticmethod
    def forward_shared(x: torch.Tensor, params) -> torch.Tensor:
        """The same input ``(n, i)`` for every model: ``(K, n, o)``."""
        w, c = params
        return torch.matmul(x, w.transpose(1, 2)) + c.unsqueeze(1)

    @staticmethod
    def norms_sq(a: torch.Tensor, delta: torch.Tensor, params) -> torch.Tensor:
        """``(K, b)``: ||dl/dW||^2 + ||dl/dc||^2 per example, = (||a||^2 + 1) ||delta||^2 (ghost norm: the
        per-example gradient delta a^T of a 2-D input is rank one, so its Frobenius norm factorises)."""
        return (a.pow(2).sum(-1) + 1.0) * delta.pow(2).sum(-1)

    @staticmethod
    def clipped_sums(a: torch.Tensor, delta: torch.Tensor, factor: torch.Tensor, params) -> list[torch.Tensor]:
        """``[(K, o, i), (K, o)]``: sum_i f_i delta_i a_i^T and sum_i f_i delta_i (one batched matmul)."""
        scaled = delta * factor.unsqueeze(-1)
        return [torch.bmm(scaled.transpose(1, 2), a), scaled.sum(1)]


class _Affine:
    """GroupNorm's per-channel affine ``y = w_c x + b_c``: weight and bias ``(K, C)``; ``x`` is ``(K, b, C, *s)``."""

    trainable = True
    n_params = 2

    @staticmethod
    def _view(v: torch.Tensor, a_dim: int) -> torch.Tensor:
        return v.reshape(v.shape[0], 1, v.shape[1], *([1] * (a_dim - 3)))

    @classmethod
    def forward(cls, a: torch.Tensor, params) -> tuple[torch.Tensor, torch.Tensor]:
        w, c = params
        return a * cls._view(w, a.dim()) + cls._view(c, a.dim()), a.detach()

    @classmethod
    def forward_shared(cls, x: torch.Tensor, params) -> torch.Tensor:
        return cls.forward(x.unsqueeze(0), params)[0]

    @staticmethod
    def _per_example(a: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(K, b, C)`` twice: dl/dw_c = sum over positions of x * delta, dl/db_c = sum of delta (as Opacus'
        GroupNorm grad sampler computes them)."""
        return (a * delta).flatten(3).sum(-1), delta.flatten(3).sum(-1)

    @classmethod
    def norms_sq(cls, a: torch.Tensor, delta: torch.Tensor, params) -> torch.Tensor:
        gw, gb = cls._per_example(a, delta)
        return gw.pow(2).sum(-1) + gb.pow(2).sum(-1)

    @classmethod
    def clipped_sums(cls, a: torch.Tensor, delta: torch.Tensor, factor: torch.Tensor, params) -> list[torch.Tensor]:
        gw, gb = cls._per_example(a, delta)
        f = factor.unsqueeze(-1)
        return [(gw * f).sum(1), (gb * f).sum(1)]


class _AffineLinear:
    """scatter_linear's GroupNorm affine, flatten and Linear as one op, written so that nothing of the size of the
    input is formed but the two batched products below (the per-example work of a step is then two passes over
    the gathered features, where the op by op computation makes about ten).

    Input: the standardised features x ``(K, b, C, S)`` (S positions per channel; the GroupNorm's standardisation is
    in the prefix) with their per-example, per-channel mean m ``(K, b, C)`` and centred sum of squares
    V = sum_s (x_s - m)^2 ``(K, b, C)`` (fixed functions of the example, cached with the features). Parameters:
    the affine's w, beta ``(K, C)``, the Linear's W ``(K, O, C S)`` (viewed ``(K, O, C, S)``) and c ``(K, O)``.

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

    trainable = True
    n_params = 4

    @staticmethod
    def _folded(params) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(W viewed (K, O, C, S), Wsum (K, O, C), the constant c + Wsum beta (K, O))``."""
        w, beta, weight, c = params
        k, o = c.shape
        wr = weight.reshape(k, o, w.shape[1], -1)
        wsum = wr.sum(-1)
        return wr, wsum, c + torch.bmm(wsum, beta.unsqueeze(-1)).squeeze(-1)

    @classmethod
    def forward(cls, a, params):
        x, mean, centred = a
        w = params[0]
        wr, wsum, const = cls._folded(params)
        x = x.flatten(3)
        p = torch.einsum("kbcs,kocs->kboc", x, wr)
        z = torch.einsum("kboc,kc->kbo", p, w) + const.unsqueeze(1)
        return z, (x, mean, centred, p.detach(), wsum)

    @classmethod
    def forward_shared(cls, x: torch.Tensor, params) -> torch.Tensor:
        """The same standardised input ``(n, C, *s)`` for every model: one ``(n, C S) x (K, C S, O)`` product with
        the affine folded into the weight (W_ocs w_c)."""
        w = params[0]
        wr, _, const = cls._folded(params)
        folded = (wr * w[:, None, :, None]).flatten(2)
        return torch.matmul(x.flatten(1), folded.transpose(1, 2)) + const.unsqueeze(1)

    @staticmethod
    def _affine_grads(ctx, delta):
        _, _, _, p, wsum = ctx
        return torch.einsum("kbo,kboc->kbc", delta, p), torch.bmm(delta, wsum)

    @classmethod
    def norms_sq(cls, ctx, delta: torch.Tensor, params) -> torch.Tensor:
        x, mean, centred, _, _ = ctx
        w, beta = params[0].unsqueeze(1), params[1].unsqueeze(1)
        y_sq = (w.pow(2) * centred + x.shape[-1] * (beta + w * mean).pow(2)).sum(-1)
        gw, gb = cls._affine_grads(ctx, delta)
        return (y_sq + 1.0) * delta.pow(2).sum(-1) + gw.pow(2).sum(-1) + gb.pow(2).sum(-1)

    @classmethod
    def clipped_sums(cls, ctx, delta: torch.Tensor, factor: torch.Tensor, params) -> list[torch.Tensor]:
        x, _, _, _, _ = ctx
        w, beta = params[0], params[1]
        scaled = delta * factor.unsqueeze(-1)
        k, b, o = delta.shape
        a = torch.bmm(scaled.transpose(1, 2), x.reshape(k, b, -1)).reshape(k, o, w.shape[1], -1)
        e = scaled.sum(1)
        dweight = (a * w[:, None, :, None] + e[:, :, None, None] * beta[:, None, :, None]).flatten(2)
        gw, gb = cls._affine_grads(ctx, delta)
        f = factor.unsqueeze(-1)
        return [(gw * f).sum(1), (gb * f).sum(1), dweight, e]


def _fuse(ops: list[object]) -> list[object]:
    """``[_Affine, Flatten, _Linear, ...]`` at the start of the ops becomes ``[_AffineLinear, ...]``."""
    if (len(ops) >= 3 and ops[0] is _Affine and isinstance(ops[1], _Fixed) and type(ops[1].module) is nn.Flatten
            and ops[1].module.start_dim == 1 and ops[1].module.end_dim == -1 and ops[2] is _Linear):
        return [_AffineLinear] + ops[3:]
    return ops


def channel_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(m, V)`` of :class:`_AffineLinear` for features ``(n, C, *s)``: per example and channel, the mean over the
    positions and the centred sum of squares, each ``(n, C)``."""
    x = x.flatten(2)
    mean = x.mean(-1)
    return mean, (x - mean.unsqueeze(-1)).pow(2).sum(-1)


def _parse(model: nn.Module) -> tuple[list[nn.Module], list[object], list[torch.Tensor]]:
    """``(prefix modules, ops, parameters in model order)`` of one model (see the module docstring)."""
    if not isinstance(model, nn.Sequential):
        raise ValueError(f"a model batch takes nn.Sequential models; got {type(model).__name__}")
    prefix: list[nn.Module] = []
    ops: list[object] = []
    params: list[torch.Tensor] = []
    for m in model:
        if isinstance(m, nn.Linear):
            if m.bias is None:
                raise ValueError("a model batch takes Linear layers with a bias")
            ops.append(_Linear)
            params += [m.weight.detach(), m.bias.detach()]
        elif isinstance(m, nn.GroupNorm):
            if not m.affine:
                raise ValueError("a model batch takes affine GroupNorm layers")
            standardise = _GroupStandardise(m.num_groups, m.eps)
            (prefix if not ops else ops).append(standardise if not ops else _Fixed(standardise))
            ops.append(_Affine)
            params += [m.weight.detach(), m.bias.detach()]
        elif any(True for _ in m.parameters()):
            raise ValueError(f"a model batch cannot train {type(m).__name__} layers")
        elif not ops:
            prefix.append(m)
        else:
            ops.append(_Fixed(m))
    if len(params) != sum(1 for p in model.parameters() if p.requires_grad):
        raise ValueError("a model batch needs every parameter trainable and in a Linear or GroupNorm layer")
    return prefix, ops, params


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


def _stack(models: list[nn.Module]) -> tuple[nn.Sequential, list[object], list[torch.Tensor]]:
    """The K models as one prefix, one op list and stacked parameters ``(K, *p.shape)`` in model order.

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
            if isinstance(a, _Fixed) != isinstance(b, _Fixed) or (
                    isinstance(a, _Fixed) and not _same_fixed(a.module, b.module)) or (
                    not isinstance(a, _Fixed) and a is not b):
                raise ValueError("the models of a batch must share their architecture")
    params = [torch.stack(ps).clone() for ps in zip(*(p for _, _, p in parsed))]
    return nn.Sequential(*prefix), _fuse(ops), params


def _widest(params: list[torch.Tensor], prefix_width: int) -> int:
    """The largest per-example activation (elements): the prefix's output or a Linear layer's input or output."""
    return max([prefix_width] + [max(p.shape[1:]) for p in params if p.dim() == 3])


def _forward(ops: list[object], params: list[torch.Tensor], a: torch.Tensor, *, shared: bool,
             tape: list | None = None) -> torch.Tensor:
    """The ops on ``a``: ``(K, b, *s)`` (each model its own inputs) or, with ``shared``, ``(n, *s)`` (the same
    inputs for every model: evaluation). With ``tape``, the output of the first trainable op becomes a leaf that
    requires a gradient and ``(op, ctx, its output, its parameters)`` of every trainable op is appended (ctx: what
    its norms and sums read, e.g. its input): the graph that
    gives dl/dz at each of them, through the later ops, without any parameter gradient."""
    offset = 0
    for op in ops:
        if not op.trainable:
            a = op.module(a) if shared else op(a)
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
            tape.append((op, ctx, z, p))
        a = z
    if shared:  # no trainable op (cannot happen for the batched models): the same output for every model
        raise ValueError("a model batch needs a trainable layer")
    return a


# ----------------------------------------------------------------------------------------------------------------
# Training


class _Batch:
    def __init__(self, task: Task, config: DPSGDConfig, plan: Plan, members: list[Member], device: torch.device, *,
                 inclusion: torch.Tensor | None = None, private: bool = True):
        self.task, self.config, self.plan, self.members, self.device = task, config, plan, members, device
        if inclusion is not None:
            inclusion = torch.as_tensor(inclusion, dtype=torch.bool, device="cpu")
            if inclusion.shape != (len(members), task.n_private):
                raise ValueError(f"inclusion must be (K, n_private) = ({len(members)}, {task.n_private}); got "
                                 f"{tuple(inclusion.shape)}")
            if not bool(inclusion.any(1).all()):
                raise ValueError("inclusion leaves a model without training examples")
        self.inclusion, self.private = inclusion, private
        self.configs = [m.config or config for m in members]
        self.sigmas = [(m.plan or plan).noise_multiplier for m in members]
        models = []
        for m, own in zip(members, self.configs):  # each model's own initialisation and warm start, as training.py's
            model = build_network(task, own, m.seed, device, fixed_normalizer(task, own, m.seed, m.index, device))
            if own.warm_start_epochs > 0:
                warm_start(model, task, own, derived_generator(m.seed, STREAM_WARM_START))
            models.append(model)
        self.projection_captured = next((x.captured for x in models[0].modules() if isinstance(x, PublicProjection)),
                                        None)
        self.prefix, self.ops, self.params = _stack(models)
        self.prefix.eval()
        k = len(members)
        self.k = k
        self.momentum_buffers: list[torch.Tensor] | None = None
        self.ema: list[torch.Tensor] | None = None
        # every key from the model's own config, seed and index, as in training.py (its run alone gives the same)
        self.noise_gens = [noise_generator(own, m.seed, m.index, STREAM_NOISE, data=task.private_fingerprint,
                                           device=device) for m, own in zip(members, self.configs)]
        self.sampling_gens = [noise_generator(own, m.seed, m.index, STREAM_SAMPLING, data=task.private_fingerprint,
                                              device=task.x_private.device, on="cpu")
                              for m, own in zip(members, self.configs)]
        self.queues = [torch.empty(0, dtype=torch.int64) for _ in members]  # shuffle sampling: the pending indices
        self.accountants = []
        for own in self.configs:
            accountant = make_accountant(own.accountant)
            accountant.history.extend(normalization_history(own))  # charged before the first step
            self.accountants.append(accountant)
        self._set_scalars()
        self.criterion = "mse" if task.regression else "ce"
        with torch.no_grad():
            self.private_features = self._private_features()
        with torch.no_grad():
            width = _widest(self.params, self.prefix(task.x_private[:1])[0].numel())
        budget = CPU_CHUNK_BYTES if torch.device(device).type == "cpu" else GPU_CHUNK_BYTES
        self.chunk = max(1, budget // (4 * k * width))  # b: examples per model in one chunk
        self.steps_done = 0
        self.losses: list[torch.Tensor] = []   # (K,) mean per-example loss of each step since the last evaluation
        self.final: list[dict[str, float]] = [{} for _ in members]
        self.alive = list(range(k))            # the members still training, by their position in ``members``
        self.results: list[ModelResult | None] = [None] * k

    def _set_scalars(self) -> None:
        """The per-model scalars of the models in the batch, broadcast on the K axis: learning rates ``(steps, K)``,
        clip norms ``(K,)``, EMA weights ``(K,)``, and the noise std sigma_k C_k of each (a float, drawn per model).
        """
        configs, device = self.configs, self.device
        self.lrs = torch.tensor([_learning_rates(c, self.plan.steps) for c in configs], dtype=torch.float64).T
        self.uniform_lr = all(c.lr == configs[0].lr for c in configs)
        dtype = self.params[0].dtype
        self.lrs_on_device = None if self.uniform_lr else self.lrs.to(device=device, dtype=dtype)  # one copy, not one
        self.clips = torch.tensor([c.max_grad_norm for c in configs], device=device)  # per step
        self.decays = [c.ema_decay for c in configs]
        self.ema_weights = 1 - torch.tensor(self.decays, device=device, dtype=dtype)
        # Opacus: std = noise_multiplier * max_grad_norm, per model
        self.stds = [sigma * c.max_grad_norm for sigma, c in zip(self.sigmas, configs)]

    def _keep(self, keep: list[int]) -> None:
        """Only the models at positions ``keep`` (of the current K) go on: every per-model state sliced on K."""
        rows = torch.tensor(keep, dtype=torch.int64)
        on_device = rows.to(self.device)
        self.params = [p[on_device] for p in self.params]
        if self.momentum_buffers is not None:
            self.momentum_buffers = [b[on_device] for b in self.momentum_buffers]
        if self.ema is not None:
            self.ema = [e[on_device] for e in self.ema]
        self.losses = [loss[on_device] for loss in self.losses]
        if self.inclusion is not None:
            self.inclusion = self.inclusion[rows]
        for name in ("noise_gens", "sampling_gens", "queues", "accountants", "configs", "sigmas", "alive"):
            setattr(self, name, [getattr(self, name)[i] for i in keep])
        self.k = len(keep)
        self._set_scalars()

    # -- data ---------------------------------------------------------------------------------------------------

    def _private_features(self) -> tuple[torch.Tensor, ...] | None:
        """The prefix applied to the whole private set (with :func:`channel_stats` when the first op is
        :class:`_AffineLinear`) when it fits the cache, else None (applied per batch)."""
        x = self.task.x_private
        probe = self.prefix(x[:1])
        if x.shape[0] * probe[0].numel() * probe.element_size() > PREFIX_CACHE_BYTES:
            return None
        return tuple(torch.cat(parts) for parts in zip(*(self._prefixed(x[s:s + EVAL_CHUNK])
                                                        for s in range(0, len(x), EVAL_CHUNK))))

    def _prefixed(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """``(features,)`` or ``(features, m, V)``: what the first op takes, for examples ``x`` ``(n, ...)``."""
        out = self.prefix(x)
        return (out, *channel_stats(out)) if self.ops[0] is _AffineLinear else (out,)

    def _sample(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(idx (K, b_max) int64, valid (K, b_max) bool, counts (K,))`` of the next logical batch of every model.

        Poisson: model k's ``torch.rand(n, generator=g_k) < q`` on the CPU, Opacus' UniformWithReplacementSampler
        call for call (the same draws, the same comparison), then the selected indices in increasing order, padded
        to the longest batch. Shuffle: the next B indices of model k's concatenated ``randperm(n, generator=g_k)``,
        as RandomSampler (without replacement, num_samples = steps x B) and BatchSampler produce them.
        """
        n, k = self.task.n_private, self.k
        if self.config.sampling == "poisson":
            masks = torch.stack([torch.rand(n, generator=g) < self.plan.sample_rate for g in self.sampling_gens])
            if self.inclusion is not None:
                masks &= self.inclusion
            counts = masks.sum(1)
            rows, cols = masks.nonzero(as_tuple=True)  # row-major: each model's indices in increasing order
            slot = torch.arange(len(rows)) - (counts.cumsum(0) - counts)[rows]
            b_max = int(counts.max()) if k else 0
            idx = torch.zeros(k, b_max, dtype=torch.int64)
            valid = torch.zeros(k, b_max, dtype=torch.bool)
            idx[rows, slot] = cols
            valid[rows, slot] = True
            return idx, valid, counts
        b = self.plan.expected_batch_size
        batch = []
        for i, g in enumerate(self.sampling_gens):
            while len(self.queues[i]) < b:
                if self.inclusion is None:
                    self.queues[i] = torch.cat([self.queues[i], torch.randperm(n, generator=g)])
                else:
                    mine = self.inclusion[i].nonzero().squeeze(1)
                    self.queues[i] = torch.cat([self.queues[i], mine[torch.randperm(len(mine), generator=g)]])
            batch.append(self.queues[i][:b])
            self.queues[i] = self.queues[i][b:]
        return torch.stack(batch), torch.ones(k, b, dtype=torch.bool), torch.full((k,), b)

    def _inputs(self, idx: torch.Tensor, padding: torch.Tensor | None) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """``(K, b, *s)``: the prefix features of the private examples ``idx`` (``(K, b)`` on the device), with
        their channel statistics for :class:`_AffineLinear`.

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
                              for t in self._prefixed(self.task.x_private[idx.reshape(-1)]))
        if padding is not None:
            parts = tuple(t.masked_fill_(padding.reshape(*padding.shape, *([1] * (t.dim() - 2))), 0) for t in parts)
        return parts if len(parts) > 1 else parts[0]

    # -- one step -----------------------------------------------------------------------------------------------

    def _per_example_loss(self, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """``(K, b)``: the loss of each example under its model (cross-entropy, or the squared error)."""
        if self.criterion == "mse":
            return (out - y).pow(2)
        k, b = out.shape[:2]
        return F.cross_entropy(out.reshape(k * b, -1), y.reshape(k * b), reduction="none").reshape(k, b)

    def _clipped_sums(self, idx: torch.Tensor, valid: torch.Tensor, *, padded: bool
                      ) -> tuple[list[torch.Tensor], torch.Tensor]:
        """``(S, loss_sum)``: S_k = sum_i f_ki g_ki per parameter (``(K, *p.shape)``), in chunks of examples, and
        the sum of each model's per-example losses over its batch (``(K,)``). ``padded``: whether some slot of
        ``valid`` is False (read from the counts on the CPU: no device sync)."""
        sums = [torch.zeros_like(p) for p in self.params]
        loss_sum = torch.zeros(self.k, device=self.device)
        clip = self.clips.unsqueeze(1)  # (K, 1): each model's clip norm
        for start in range(0, idx.shape[1], self.chunk):
            i = idx[:, start:start + self.chunk]
            mask = valid[:, start:start + self.chunk]
            weight = mask.to(sums[0].dtype)
            tape: list = []
            out = _forward(self.ops, self.params, self._inputs(i, ~mask if padded else None), shared=False, tape=tape)
            losses = self._per_example_loss(out, self.task.y_private[i]) * weight
            deltas = torch.autograd.grad(losses.sum(), [z for _, _, z, _ in tape])
            with torch.no_grad():
                loss_sum += losses.detach().sum(1)
                if self.private:
                    norms = sum(op.norms_sq(ctx, d, p) for (op, ctx, _, p), d in zip(tape, deltas)).sqrt()
                    factor = (clip / (norms + 1e-6)).clamp(max=1.0) * weight  # Opacus' flat clip factor
                else:  # the non-private twin: plain summed gradients
                    factor = weight
                offset = 0
                for (op, ctx, _, p), d in zip(tape, deltas):
                    for j, s in enumerate(op.clipped_sums(ctx, d, factor, p)):
                        sums[offset + j] += s
                    offset += op.n_params
        return sums, loss_sum

    def _step(self) -> None:
        idx, valid, counts = self._sample()
        padded = bool((counts < idx.shape[1]).any())
        idx, valid = idx.to(self.device, non_blocking=True), valid.to(self.device, non_blocking=True)
        sums, loss_sum = self._clipped_sums(idx, valid, padded=padded)
        with torch.no_grad():
            if self.private:
                for k, (g, std) in enumerate(zip(self.noise_gens, self.stds)):  # its own stream and std
                    if std == 0:  # Opacus draws nothing when the std is 0
                        continue
                    for s in sums:  # parameters in model order
                        s[k] += torch.normal(mean=0, std=std, size=s.shape[1:], device=s.device,
                                             generator=g, dtype=s.dtype)
            b = self.plan.expected_batch_size
            grads = [s / b for s in sums]  # Opacus' scale_grad (loss_reduction "mean")
            self._sgd(grads, self.steps_done)
            self._update_ema()
        for accountant, sigma in zip(self.accountants, self.sigmas) if self.private else ():
            accountant.step(noise_multiplier=sigma, sample_rate=self.plan.sample_rate)  # Opacus' step hook
        self.steps_done += 1
        self.losses.append(loss_sum / counts.to(loss_sum.device))  # NaN for an empty batch, left out of the mean

    def _sgd(self, grads: list[torch.Tensor], step: int) -> None:
        """torch.optim.SGD's update (no weight decay, dampening 0, not Nesterov) on the stacked parameters, each
        model at its own learning rate of ``step`` (a Python scalar when the K are equal, else ``(K,)`` on the
        device)."""
        momentum = self.config.momentum
        if momentum == 0:
            directions = grads
        else:
            if self.momentum_buffers is None:
                self.momentum_buffers = [g.clone() for g in grads]
            else:
                for buf, g in zip(self.momentum_buffers, grads):
                    buf.mul_(momentum).add_(g)
            directions = self.momentum_buffers
        if self.uniform_lr:
            for p, d in zip(self.params, directions):
                p.add_(d, alpha=-float(self.lrs[step, 0]))
            return
        per_model = self.lrs_on_device[step]
        for p, d in zip(self.params, directions):
            p.sub_(d * per_model.reshape(-1, *([1] * (d.dim() - 1))))

    def _update_ema(self) -> None:
        """AveragedModel with get_ema_multi_avg_fn: a copy at the first update, then lerp by 1 - decay_k (per model;
        a model with decay 0 has no EMA: its average is never evaluated, see :meth:`_evaluated`)."""
        if all(d <= 0 for d in self.decays):
            return
        if self.ema is None:
            self.ema = [p.clone() for p in self.params]
        elif all(d == self.decays[0] for d in self.decays):
            torch._foreach_lerp_(self.ema, self.params, 1 - self.decays[0])
        else:
            for e, p in zip(self.ema, self.params):
                e.lerp_(p, self.ema_weights.reshape(-1, *([1] * (p.dim() - 1))))

    # -- evaluation ---------------------------------------------------------------------------------------------

    def _evaluated(self) -> list[torch.Tensor]:
        """Per model, its EMA when its decay is > 0, else its last iterate (stacked on K)."""
        if self.ema is None:
            return self.params
        if all(d > 0 for d in self.decays):
            return self.ema
        averaged = torch.tensor([d > 0 for d in self.decays], device=self.device)
        return [torch.where(averaged.reshape(-1, *([1] * (p.dim() - 1))), e, p) for e, p in zip(self.ema, self.params)]

    def _accuracies(self, part: str, limit: int | None, should_stop) -> list[float] | None:
        """Per model: accuracy on the first ``limit`` examples (None: all) of ``part``; None if every model's stop
        came (a model whose stop alone came is evaluated with the others and leaves at the next step)."""
        x, y = {"test": (self.task.x_test, self.task.y_test), "validation": (self.task.x_val, self.task.y_val)}[part]
        n = len(x) if limit is None else min(limit, len(x))
        params = self._evaluated()
        correct = torch.zeros(self.k, dtype=torch.int64, device=self.device)
        chunk = max(64, EVAL_CHUNK // self.k)
        with torch.no_grad():
            for start in range(0, n, chunk):
                if len(self._stopping(should_stop)) == self.k:
                    return None
                stop = min(start + chunk, n)
                out = _forward(self.ops, params, self.prefix(x[start:stop]), shared=True)
                correct += (out.argmax(dim=-1) == y[start:stop]).sum(1)
        return [c / n for c in correct.tolist()]  # one host copy per evaluation, none per chunk

    def outputs(self, x: torch.Tensor) -> torch.Tensor:
        """``(K, n, outputs)``: every model's output on the examples ``x`` ``(n, *input_shape)`` (evaluated
        parameters), in chunks of :data:`~.training.EVAL_CHUNK` // K examples."""
        params = self._evaluated()
        chunk = max(64, EVAL_CHUNK // self.k)
        with torch.no_grad():
            return torch.cat([_forward(self.ops, params, self.prefix(x[s:s + chunk]), shared=True)
                              for s in range(0, len(x), chunk)], dim=1)

    def _excess_risks(self) -> list[float]:
        """linreg: each model's exact population excess risk (its Linear weight and bias)."""
        w, c = self._evaluated()[:2]
        return [self.task.population.excess_risk(w[k].reshape(-1), c[k]) for k in range(self.k)]

    def _evaluate(self, should_stop) -> bool:
        """Evaluate the K models, report each through its ``on_eval``; False if a stop came meanwhile
        (the same values, names and parts as :meth:`.training.Training._evaluate`)."""
        full = self.steps_done == self.plan.steps
        if self.task.regression:
            values = self._excess_risks()
            name = M.EXCESS_RISK
        else:
            values = self._accuracies("test", None if full else EVAL_SUBSET, should_stop)
            name = M.TEST_ACC
            if values is None:
                return False
        validation = None
        if full and not self.task.regression and self.task.x_val is not None:
            validation = self._accuracies("validation", None, should_stop)
            if validation is None:
                return False
        losses = torch.stack(self.losses).nanmean(0).tolist() if self.losses else None
        self.losses.clear()
        for k, position in enumerate(self.alive):
            member = self.members[position]
            reported = {name: values[k]}
            if losses is not None and not math.isnan(losses[k]):
                reported[M.TRAIN_LOSS] = losses[k]
            selecting = {} if validation is None else {M.VAL_ACC: validation[k]}
            self.final[position] = {**self.final[position], **reported, **selecting}
            member.on_eval(self.steps_done, reported, list(self.accountants[k].history))
        return True

    # -- the loop -----------------------------------------------------------------------------------------------

    def _stopping(self, should_stop: Callable[[], bool]) -> list[int]:
        """The positions (in the current K) of the models whose stop has come: each run's ``should_stop`` is asked
        once (the models of one run share it)."""
        asked: dict[int, bool] = {}
        out = []
        for k, position in enumerate(self.alive):
            fn = self.members[position].should_stop or should_stop
            if id(fn) not in asked:
                asked[id(fn)] = bool(fn())
            if asked[id(fn)]:
                out.append(k)
        return out

    def _conclude(self, ks: list[int], *, stopped: bool, t0: float) -> None:
        """The models at positions ``ks`` (of the current K) are done: their results are final (``on_done``), and
        they leave the batch."""
        share = (time.perf_counter() - t0) / len(self.members)
        for k in ks:
            position = self.alive[k]
            m = self.members[position]
            result = ModelResult(setting=M.setting_label(m.alpha, self.configs[k].variant), alpha=m.alpha,
                                 seed=m.seed, steps_done=self.steps_done, history=list(self.accountants[k].history),
                                 final=self.final[position], energy_mean=math.nan, seconds=share, stopped=stopped,
                                 projection_captured=self.projection_captured)
            self.results[position] = result
            if m.on_done is not None:
                m.on_done(result)
        if len(ks) < self.k:  # the rest go on
            gone = set(ks)
            self._keep([k for k in range(self.k) if k not in gone])

    def run(self, should_stop: Callable[[], bool]) -> list[ModelResult]:
        """Train until every model has finished or stopped; the results in the members' order.

        A model whose stop comes (its ``should_stop``, else the batch's) before a step leaves the batch with its
        partial result; the others go on with the same keys (each model's streams are its own). When every model's
        stop comes during an evaluation, all stop without reporting it (as one model on Opacus does)."""
        t0 = time.perf_counter()
        evaluated_at = -1
        for _ in range(self.plan.steps):
            if stopping := self._stopping(should_stop):
                self._conclude(stopping, stopped=True, t0=t0)
                if not self.results.count(None):
                    break
            self._step()
            at = self.steps_done
            if at % self.plan.eval_every == 0 or at == self.plan.steps:
                if not self._evaluate(should_stop):
                    self._conclude(list(range(self.k)), stopped=True, t0=t0)
                    break
                evaluated_at = at
        if self.results.count(None) and evaluated_at != self.steps_done and not self._evaluate(should_stop):
            self._conclude(list(range(self.k)), stopped=True, t0=t0)
        if self.results.count(None):
            self._conclude(list(range(self.k)), stopped=False, t0=t0)
        return list(self.results)

    def parameters_of(self, k: int) -> list[torch.Tensor]:
        """The trained parameters (the last iterate) of member k (its position in ``members``; it must have
        finished with the batch's last models), in its ``nn.Module`` order (for tests)."""
        return [p[self.alive.index(k)] for p in self.params]


def _learning_rates(config: DPSGDConfig, steps: int) -> list[float]:
    """The learning rate of each logical step: ``config.lr``, or torch's own CosineAnnealingLR (T_max = steps)
    stepped after every step as :mod:`.training` steps it, so the values are the Opacus path's to the bit."""
    return cosine_learning_rates(config.lr, steps) if config.lr_schedule == "cosine" else [config.lr] * steps
