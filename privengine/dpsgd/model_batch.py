"""The K isotropic DP-SGD models of one run trained together: stacked parameters, one vectorised pass per step.

:func:`train_models` trains K models that share the task, the architecture, sigma, q, the step count, the
learning rate and schedule, the clip norm and the EMA (the models of one run: its seeds, and its settings
where batching is exact, see :func:`unbatchable`) and differ in their seed and index. Each model keeps what
:func:`~.training.train_model` gives it: its initialisation (``STREAM_INIT`` of its seed) and optional public
warm start, its Poisson batches and its noise (``STREAM_SAMPLING`` / ``STREAM_NOISE`` of its index, keyed by the
config and the private data exactly as in :mod:`.training`), its accountant history and its evaluations; only
the arithmetic is shared. For the same keys the two paths agree to float tolerance
(tests/test_dpsgd_model_batch.py). On a GPU (CUDA, MPS) the Poisson masks are drawn on the device instead, from
``STREAM_SAMPLING_ON_DEVICE`` of the model's index: the same law and history, other batches than the Opacus path's
(tests/test_dpsgd_device_masks.py).

One step of model k (the math of Opacus' DPOptimizer, written by hand because Opacus handles one model), in the
modules that follow Opacus' seams:

    B_k   = {i : u_ki < floor(q 2^24)},  u_ki uniform integers below 2^24 from model k's sampling generator, one
            draw per private example (:func:`privengine.poisson.poisson_mask`: rate at most q; on the CPU the same
            generator as the Opacus path's; on a GPU a generator on the device, of its own key), or
            fixed-size batches of its shuffled passes (``sampling="shuffle"``, ``RandomSampler``'s randperms):
            :mod:`.sampling`, through :func:`.training.private_sampler`, which the Opacus path's loader draws from;
    g_ki  = grad of the per-example loss l(theta_k; x_i, y_i), never materialised for Linear layers:
            for z = a W^T + c,  ||dl/dW||^2 = ||a||^2 ||dl/dz||^2  and  ||dl/dc||^2 = ||dl/dz||^2
            (ghost norms, Li et al. 2021 / Opacus' fast gradient clipping); the affine's per-example gradients
            are ``(K, b, C)`` and are materialised: :mod:`.stacked_ops`;
    f_ki  = min(1, C / (||g_ki|| + 1e-6))                      (Opacus' flat clip, all parameters flattened)
    S_k   = sum_{i in B_k} f_ki g_ki                            (for a Linear: (f delta)^T a, one batched matmul):
            :mod:`.stacked_model` (K models parsed into a shared prefix and stacked ops; S_k in chunks);
    G_k   = (S_k + N(0, (sigma C)^2 I)) / B                     (noise per parameter, in the model's parameter
                                                                 order, from model k's noise generator)
    v_k   <- m v_k + G_k;  theta_k <- theta_k - lr_t v_k        (torch's SGD; lr_t from torch's CosineAnnealingLR)
    ema_k <- theta_k at the first step, then lerp(ema_k, theta_k, 1 - decay)   (AveragedModel's EMA):
            :mod:`.stacked_optimizer`;

and the evaluations of the K models are :mod:`.batch_evaluation`'s. This module holds which models may be
batched and the batch's lifecycle: its set-up (each model's network, keys and accountant), its steps, its
evaluations and their reports, the models that leave it when their stop comes, and the results.

The per-example losses are summed over the valid slots of a padded ``(K, b_max)`` index (a model whose batch is
shorter than b_max has zero-weight slots, whose gradients are exactly zero; their index is 0 but their input is zeros,
not example 0's features, so an example 0 whose outputs overflow cannot make 0 x inf = NaN in the sums of a model
that did not sample it). Each model's accountant takes one ``(sigma, q)`` step per logical step (Opacus' history
format), after the normalisation entry if any, as in :mod:`.training`; steps with an empty Poisson batch still add
noise and are accounted, as there.

Differences from the Opacus path, none of them in the mechanism's law or what is accounted: floating-point rounding
(summation order, the affine applied after GroupNorm's standardisation rather than fused), the ``train_loss``
diagnostic, which here is the mean per-example loss of each logical batch (the Opacus path averages its physical
batches' means; the two coincide when a logical batch fits one physical batch), and on a GPU the Poisson draws
themselves (another stream of the same law, above: other batches, so other models).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from privengine.accounting.subsampled_gaussian import History, make_accountant
from privengine.randomness import derived_generator, noise_generator

from . import metrics as M
from .batch_evaluation import evaluate, outputs
from .config import DPSGDConfig, resolved_model
from .data import Task
from .projection import PublicProjection
from .sampling import ModelBatchSampling, poisson_on_device
from .stacked_model import ClippedGradients, stack_models
from .stacked_optimizer import StackedOptimizer
from .training import (STREAM_NOISE, STREAM_WARM_START, ModelResult, Plan, build_network, fixed_normalizer,
                       normalization_history, private_sampler, warm_start)

BATCH_MODELS = ("linear", "mlp", "scatter_linear", "scatter_mlp")


def unbatchable(config: DPSGDConfig, alpha: float) -> str | None:
    """None if the model of setting ``alpha`` can train in a model batch; otherwise why it takes the Opacus path.

    Batched exactly: isotropic DP-SGD (alpha = 0: every variant is then Opacus' flat clip and isotropic noise) of a
    linear, mlp, scatter_linear or scatter_mlp model, with Poisson or shuffled batches, either grad_sample_mode
    (hooks and ghost clipping compute the same clipped sum), any normalisation but the private one, warm start,
    EMA and schedule included.
    """
    kind = resolved_model(config)
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
# path's batch splitting and clipping route, the GDP display, whether the run keeps its models).
PER_MODEL_FIELDS = frozenset({
    "seed", "replica", "n_seeds", "noise_mode", "noise_multiplier", "target_epsilon", "delta", "accountant",
    "secure_noise", "show_gdp", "lr", "max_grad_norm", "ema_decay", "alphas", "variant", "subspace_rank",
    "refresh_every", "public_batch", "grad_sample_mode", "physical_batch_size", "keep_model"})


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
    Poisson, ``poisson_mask(n, q, g_k) & inclusion[k]`` (:mod:`privengine.poisson`; the same draws as without it,
    so each included example joins a step with probability ``floor(q 2^24) / 2^24 <= q``, q = ``plan.sample_rate``,
    and an excluded one never: the (sigma, q, steps) history holds for its subset); shuffle, passes over row k's
    examples. None (the runs): unchanged, bit for bit.
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


class _Batch:
    """One model batch from set-up to results: :meth:`run` steps and evaluates the members until each has finished
    or stopped (see :func:`train_models` for the arguments)."""

    def __init__(self, task: Task, config: DPSGDConfig, plan: Plan, members: list[Member], device: torch.device, *,
                 inclusion: torch.Tensor | None = None, private: bool = True):
        self.task, self.plan, self.members, self.device = task, plan, members, device
        if inclusion is not None:
            inclusion = torch.as_tensor(inclusion, dtype=torch.bool, device="cpu")
            if inclusion.shape != (len(members), task.n_private):
                raise ValueError(f"inclusion must be (K, n_private) = ({len(members)}, {task.n_private}); got "
                                 f"{tuple(inclusion.shape)}")
            if not bool(inclusion.any(1).all()):
                raise ValueError("inclusion leaves a model without training examples")
        self.private = private
        self.configs = [m.config or config for m in members]
        models = []
        for m, own in zip(members, self.configs):  # each model's own initialisation and warm start, as training.py's
            model = build_network(task, own, m.seed, device, fixed_normalizer(task, own, m.seed, m.index, device))
            if own.warm_start_epochs > 0:
                warm_start(model, task, own, derived_generator(m.seed, STREAM_WARM_START))
            models.append(model)
        self.projection_captured = next((x.captured for x in models[0].modules() if isinstance(x, PublicProjection)),
                                        None)
        self.model, params = stack_models(models)
        self.networks = models  # each member's own nn.Module (its initial parameters): its result's network
        self.k = len(members)
        # every key from the model's own config, seed and index, as in training.py (its run alone gives the same)
        noise_gens = [noise_generator(own, m.seed, m.index, STREAM_NOISE, data=task.private_fingerprint,
                                      device=device) for m, own in zip(members, self.configs)]
        self.optimizer = StackedOptimizer(params, self.configs, [(m.plan or plan).noise_multiplier for m in members],
                                          noise_gens, steps=plan.steps, expected_batch_size=plan.expected_batch_size,
                                          momentum=config.momentum, private=private, device=device)
        on_device = poisson_on_device(device)
        self.sampling = ModelBatchSampling([
            private_sampler(task, own, plan, m.seed, m.index, among=None if inclusion is None else inclusion[k],
                            on_device=on_device)
            for k, (m, own) in enumerate(zip(members, self.configs))])
        self.accountants = []
        for own in self.configs:
            accountant = make_accountant(own.accountant)
            accountant.history.extend(normalization_history(own))  # charged before the first step
            self.accountants.append(accountant)
        self.gradients = ClippedGradients(self.model, params, task.x_private, task.y_private,
                                          regression=task.regression, device=device)
        self.steps_done = 0
        self.losses: list[torch.Tensor] = []   # (K,) mean per-example loss of each step since the last evaluation
        self.final: list[dict[str, float]] = [{} for _ in members]
        self.alive = list(range(self.k))       # the members still training, by their position in ``members``
        self.results: list[ModelResult | None] = [None] * self.k

    def _step(self) -> None:
        """One logical step of every model: its batch, its clipped sum, its noisy update, one accountant step."""
        idx, valid, counts = self.sampling.draw()  # on a GPU, Poisson's idx and valid are already there
        padded = bool((counts < idx.shape[1]).any())  # counts on the CPU: no device sync
        idx, valid = idx.to(self.device, non_blocking=True), valid.to(self.device, non_blocking=True)
        sums, loss_sum = self.gradients(self.optimizer.params, idx, valid, padded=padded,
                                        clips=self.optimizer.clips if self.private else None)
        self.optimizer.step(sums, self.steps_done)
        for accountant, sigma in zip(self.accountants, self.optimizer.sigmas) if self.private else ():
            accountant.step(noise_multiplier=sigma, sample_rate=self.plan.sample_rate)  # Opacus' step hook
        self.steps_done += 1
        self.losses.append(loss_sum / counts.to(loss_sum.device))  # NaN for an empty batch, left out of the mean

    def _evaluate(self, should_stop: Callable[[], bool]) -> bool:
        """Evaluate the K models, report each through its ``on_eval``; False if every model's stop came meanwhile
        (the same values, names and parts as :meth:`.training.Training._evaluate`)."""
        evaluation = evaluate(self.model, self.optimizer.evaluated(), self.task,
                              full=self.steps_done == self.plan.steps,
                              stopped=lambda: len(self._stopping(should_stop)) == self.k)
        if evaluation is None:
            return False
        losses = torch.stack(self.losses).nanmean(0).tolist() if self.losses else None
        self.losses.clear()
        for k, position in enumerate(self.alive):
            member = self.members[position]
            reported = {evaluation.name: evaluation.values[k]}
            if losses is not None and not math.isnan(losses[k]):
                reported[M.TRAIN_LOSS] = losses[k]
            selecting = {} if evaluation.validation is None else {M.VAL_ACC: evaluation.validation[k]}
            self.final[position] = {**self.final[position], **reported, **selecting}
            member.on_eval(self.steps_done, reported, list(self.accountants[k].history))
        return True

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
                                 projection_captured=self.projection_captured,
                                 network=self._network(k, position) if self.configs[k].keep_model else None)
            self.results[position] = result
            if m.on_done is not None:
                m.on_done(result)
        if len(ks) < self.k:  # the rest go on
            gone = set(ks)
            self._keep([k for k in range(self.k) if k not in gone])

    def _network(self, k: int, position: int) -> torch.nn.Module:
        """Member ``position``'s network (at ``k`` in the current K) holding its evaluated parameters (the EMA when
        its decay is > 0, else the last iterate), in its ``nn.Module`` order (the order :func:`stack_models`
        stacked)."""
        network = self.networks[position]
        trainable = [p for p in network.parameters() if p.requires_grad]
        with torch.no_grad():
            for target, stacked in zip(trainable, self.optimizer.evaluated()):
                target.copy_(stacked[k])
        return network

    def _keep(self, keep: list[int]) -> None:
        """Only the models at positions ``keep`` (of the current K) go on: every per-model state sliced on K."""
        self.optimizer.keep(keep)
        self.sampling.keep(keep)
        rows = torch.tensor(keep, dtype=torch.int64, device=self.device)
        self.losses = [loss[rows] for loss in self.losses]
        self.accountants, self.configs, self.alive = ([xs[i] for i in keep]
                                                      for xs in (self.accountants, self.configs, self.alive))
        self.k = len(keep)

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

    def outputs(self, x: torch.Tensor) -> torch.Tensor:
        """``(K, n, outputs)``: every model's output on the examples ``x`` ``(n, *input_shape)`` (evaluated
        parameters)."""
        return outputs(self.model, self.optimizer.evaluated(), x)

    def parameters_of(self, k: int) -> list[torch.Tensor]:
        """The trained parameters (the last iterate) of member k (its position in ``members``; it must have
        finished with the batch's last models), in its ``nn.Module`` order (for tests)."""
        return [p[self.alive.index(k)] for p in self.optimizer.params]
