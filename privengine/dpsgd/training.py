"""One private training run: one setting (alpha, variant), one seed, on Opacus.

The pieces ``PrivacyEngine.make_private`` would assemble, built here from Opacus'
public parts so the shaped-noise optimizer can be used and the sample rate is
exactly q = B / N (N: the declared private size, :func:`~.config.declared_private_size`):

- model: ``GradSampleModule`` (hooks) or ``GradSampleModuleFastGradientClipping``
  (ghost clipping, with ``DPLossFastGradientClipping`` as the loss);
- data: :func:`private_sampler` (:mod:`.sampling`: Opacus' Poisson sampling,
  ``steps`` batches, or fixed-size shuffled batches; the model batch draws the
  same), split into physical batches by ``BatchMemoryManager``;
- optimizer: :func:`~.optimizer.make_optimizer` over SGD, with the accountant's
  step hook (noise multiplier sigma, sample rate q) attached.

Every ``refresh_every`` steps the basis U is re-estimated from public examples
at the current model (:mod:`.subspace`); the isotropic setting skips it.
"""

from __future__ import annotations

import copy
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Callable

import torch
from opacus.grad_sample import GradSampleModule, GradSampleModuleFastGradientClipping
from opacus.utils.batch_memory_manager import BatchMemoryManager
from opacus.utils.fast_gradient_clipping_utils import DPLossFastGradientClipping
from opacus.validators import ModuleValidator
from torch import nn
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, Dataset

from privengine.accounting.subsampled_gaussian import History, make_accountant
from privengine.errors import ConfigError
from privengine.poisson import PoissonSampler
from privengine.randomness import derived_generator, noise_generator

from . import metrics as M
from .config import DPSGDConfig, declared_private_size, resolved_model
from .data import Task
from .models import build_model, num_parameters, scatter_groupnorm
from .normalization import private_norm, public_norm
from .optimizer import make_optimizer
from .projection import PublicProjection, public_projection
from .sampling import ShuffledBatches
from .subspace import per_example_gradients, top_right_singular_vectors

# Opacus' full backward hooks on the first layer warn on every batch because inputs need no gradient.
warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed",
                        category=UserWarning)

EVAL_POINTS = 20      # evaluations per trained model
EVAL_SUBSET = 2000    # test examples of the intermediate evaluations (the last one uses the whole test part)
EVAL_CHUNK = 2048     # test examples per forward pass


@dataclass(frozen=True)
class Plan:
    """What every model of a run shares: sigma, q, the number of steps, when to evaluate."""

    noise_multiplier: float
    sample_rate: float
    steps: int
    expected_batch_size: int

    @property
    def eval_every(self) -> int:
        return max(1, self.steps // EVAL_POINTS)


@dataclass(frozen=True)
class ModelResult:
    """Outcome of one trained model (``final`` holds the last evaluation's values; ``network``: the evaluated network,
    the EMA when ``ema_decay`` > 0 else the last iterate, for the run to keep; None where none was built)."""

    setting: str
    alpha: float
    seed: int
    steps_done: int
    history: History
    final: dict[str, float]
    energy_mean: float
    seconds: float
    stopped: bool
    projection_captured: float | None = None  # scatter_mlp: share of the public features' variance it keeps
    network: nn.Module | None = field(default=None, repr=False, compare=False)


class _TensorBatches(Dataset):
    """Tensors already on the device; ``__getitems__`` fetches a whole batch with one indexing op."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor):
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]

    def __getitems__(self, indices: list[int]):
        idx = torch.as_tensor(indices, dtype=torch.int64, device=self.x.device)
        return self.x[idx], self.y[idx]


def _as_is(batch):
    return batch


# Stream keys of a model's generators (see privengine.randomness). Initialisation and the public
# subspace are shared by the settings of one seed (a paired comparison; neither depends on private
# data); the Poisson batches and the noise are keyed by the model, so no two models share them, and by
# the private split's fingerprint, so no run on other private data shares them.
STREAM_INIT, STREAM_SAMPLING, STREAM_NOISE, STREAM_PUBLIC, STREAM_SVD, STREAM_WARM_START, STREAM_NORM = range(7)
# A model batch on a GPU draws its Poisson masks on the device (:func:`.sampling.poisson_on_device`), from a stream of
# its own: another generator (the device's), never seeded with the key of the CPU draws of STREAM_SAMPLING.
STREAM_SAMPLING_ON_DEVICE = 7


def train_model(task: Task, config: DPSGDConfig, plan: Plan, *, alpha: float, seed: int, index: int,
                device: torch.device, should_stop: Callable[[], bool],
                on_eval: Callable[[int, dict[str, float], History], None]) -> ModelResult:
    """Train one model privately; call ``on_eval(step, values, history)`` at each evaluation.

    ``index`` numbers the model within its run: its Poisson batches and its noise come from
    streams keyed by the run's config, the private split's fingerprint (``task.private_fingerprint``),
    ``seed`` and ``index`` (from OS entropy with ``config.secure_noise``), so the models of a run, and
    the runs of different configurations or on different private data (a neighbouring data set), are
    independent mechanisms and releasing them together composes.

    ``should_stop()`` is asked before every physical batch and evaluation chunk;
    when it says yes the model's partial result is returned with ``stopped=True``.
    """
    training = Training(task, config, plan, alpha=alpha, seed=seed, index=index, device=device)
    return training.run(should_stop, on_eval)


class Training:
    """The Opacus objects of one model and its loop.

    ``estimate_basis``: whether the public basis U is estimated (and refreshed every ``refresh_every`` steps) and
    the captured energy recorded; default: only when the setting shapes the noise (``alpha != 0``). The one-run
    audit asks for it in the isotropic setting too, to place its canaries: U is then read by nothing else, and the
    noise stays isotropic DP-SGD's.
    """

    def __init__(self, task: Task, config: DPSGDConfig, plan: Plan, *, alpha: float, seed: int, index: int,
                 device: torch.device, estimate_basis: bool | None = None):
        self.task, self.config, self.plan, self.alpha, self.seed = task, config, plan, alpha, seed
        self.index = index
        norm = fixed_normalizer(task, config, seed, index, device)
        self.model = build_network(task, config, seed, device, norm)
        self.projection_captured = next((m.captured for m in self.model.modules() if isinstance(m, PublicProjection)),
                                        None)
        if config.warm_start_epochs > 0:
            warm_start(self.model, task, config, derived_generator(seed, STREAM_WARM_START))
        self.uses_basis = alpha != 0 if estimate_basis is None else estimate_basis
        d = num_parameters(self.model)
        if self.uses_basis and config.subspace_rank > min(d, task.n_public):
            raise ConfigError("subspace_rank", f"must be at most min(d, n_public) = min({d}, {task.n_public}); "
                                               f"got {config.subspace_rank}")
        self.shadow = copy.deepcopy(self.model)  # hook-free twin for the public per-example gradients
        # Exponential moving average of the noisy iterates (post-processing: DP-SGD's guarantee covers every
        # iterate, so any function of them is covered too); evaluated instead of the last iterate.
        self.ema = AveragedModel(self.shadow, multi_avg_fn=get_ema_multi_avg_fn(config.ema_decay)) \
            if config.ema_decay > 0 else None
        self.criterion = nn.MSELoss() if task.regression else nn.CrossEntropyLoss()
        ghost = config.grad_sample_mode == "ghost"
        if ghost:
            self.gsm = GradSampleModuleFastGradientClipping(self.model, batch_first=True, loss_reduction="mean",
                                                            max_grad_norm=config.max_grad_norm)
        else:
            self.gsm = GradSampleModule(self.model, batch_first=True, loss_reduction="mean")
        sgd = torch.optim.SGD(self.gsm.parameters(), lr=config.lr, momentum=config.momentum)
        # Stepped once per logical step, after its update: the first step uses lr, step t + 1 uses lr_t.
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(sgd, T_max=plan.steps) \
            if config.lr_schedule == "cosine" else None
        self.optimizer = make_optimizer(sgd, grad_sample_mode=config.grad_sample_mode, alpha=alpha,
                                        projected=alpha != 0 and config.variant == "projected",
                                        clipping="elliptical" if config.variant == "elliptical" else "flat",
                                        noise_multiplier=plan.noise_multiplier, max_grad_norm=config.max_grad_norm,
                                        expected_batch_size=plan.expected_batch_size,
                                        generator=noise_generator(config, seed, index, STREAM_NOISE,
                                                                  data=task.private_fingerprint, device=device))
        self.accountant = make_accountant(config.accountant)
        self.accountant.history.extend(normalization_history(config))  # charged before the first step
        self._account = self.accountant.get_optimizer_hook_fn(sample_rate=plan.sample_rate)
        self.optimizer.attach_step_hook(self._on_step)
        self.loss_fn = DPLossFastGradientClipping(self.gsm, self.optimizer, self.criterion, "mean") if ghost \
            else self.criterion
        self.public_gen = derived_generator(seed, STREAM_PUBLIC)
        self.svd_gen = derived_generator(seed, STREAM_SVD, device=device)
        self.steps_done = 0
        # Per-step diagnostics stay 0-dim tensors until an evaluation reads them: no host sync per step.
        self.losses: list[torch.Tensor] = []      # private batch losses since the last evaluation
        self.energies: list[torch.Tensor] = []    # captured energies since the last evaluation
        self.all_energies: list[torch.Tensor] = []
        self.final: dict[str, float] = {}

    def _on_step(self, optimizer) -> None:
        """Opacus' step hook: runs once per logical step, after the noise."""
        self._account(optimizer)
        self.steps_done += 1
        if self.uses_basis and optimizer.last_energy is not None:
            self.energies.append(optimizer.last_energy)
            self.all_energies.append(optimizer.last_energy)

    def run(self, should_stop: Callable[[], bool], on_eval) -> ModelResult:
        t0 = time.perf_counter()
        stopped, evaluated_at, refreshed_at = False, -1, None
        self.gsm.train()
        with BatchMemoryManager(data_loader=_loader(self.task, self.config, self.plan, self.seed, self.index),
                                max_physical_batch_size=physical_batch_size(self.config, self.model),
                                optimizer=self.optimizer) as batches:
            for xb, yb in batches:
                if should_stop():
                    stopped = True
                    break
                if self.uses_basis and (refreshed_at is None
                                        or self.steps_done - refreshed_at >= self.config.refresh_every):
                    self.optimizer.set_basis(self._public_basis())
                    refreshed_at = self.steps_done
                before = self.steps_done
                loss = self.loss_fn(self.gsm(xb), yb)
                loss.backward()
                self.optimizer.step()  # a logical step only after the last physical batch of a logical one
                self.optimizer.zero_grad()
                if self.steps_done > before:
                    if self.ema is not None:
                        self.ema.update_parameters(self.model)
                    if self.scheduler is not None:
                        self.scheduler.step()
                if len(xb):
                    self.losses.append(loss.detach())
                at = self.steps_done
                if at > before and (at % self.plan.eval_every == 0 or at == self.plan.steps):
                    if not self._evaluate(should_stop, on_eval):
                        stopped = True
                        break
                    evaluated_at = at
        if not stopped and evaluated_at != self.steps_done:
            stopped = not self._evaluate(should_stop, on_eval)
        self.gsm.cleanup()
        energy = _mean(self.all_energies)
        return ModelResult(setting=M.setting_label(self.alpha, self.config.variant), alpha=self.alpha,
                           seed=self.seed, steps_done=self.steps_done, history=list(self.accountant.history),
                           final=self.final, energy_mean=energy, seconds=time.perf_counter() - t0,
                           stopped=stopped, projection_captured=self.projection_captured,
                           network=None if not self.config.keep_model
                           else self.model if self.ema is None else self.ema.module)

    def _evaluate(self, should_stop, on_eval) -> bool:
        """Evaluate, report, and reset the windows; False if a stop came meanwhile.

        The curves are on the test part (reporting only: nothing selects on them). The last evaluation also
        measures the validation part, into ``final`` only (not a curve): the run selects its best setting by it.
        """
        full = self.steps_done == self.plan.steps
        evaluated = self.model if self.ema is None else self.ema.module
        value = _evaluate(evaluated, self.task, should_stop, limit=None if full else EVAL_SUBSET)
        if value is None:
            return False
        selecting = {}
        if full and not self.task.regression and self.task.x_val is not None:
            validation = _evaluate(evaluated, self.task, should_stop, limit=None, part="validation")
            if validation is None:
                return False
            selecting[M.VAL_ACC] = validation
        values = {M.EXCESS_RISK if self.task.regression else M.TEST_ACC: value}
        if self.losses:
            values[M.TRAIN_LOSS] = _mean(self.losses)
        if not math.isnan(energy := _mean(self.energies)):
            values[M.ENERGY] = energy
        self.losses.clear()
        self.energies.clear()
        self.final = {**self.final, **values, **selecting}
        on_eval(self.steps_done, values, list(self.accountant.history))
        return True

    def _public_basis(self) -> torch.Tensor:
        """U from clipped per-example gradients of a fresh draw of public examples at the current model.

        The hook-free ``shadow`` is evaluated at the trained model's parameters.
        """
        task, config = self.task, self.config
        m = min(config.public_batch, task.n_public)
        idx = torch.randperm(task.n_public, generator=self.public_gen)[:m].to(task.x_public.device)
        params = {k: p for k, p in self.model.named_parameters() if p.requires_grad}
        g = per_example_gradients(self.shadow, self.criterion, task.x_public[idx], task.y_public[idx],
                                  params=params, clip=config.max_grad_norm)
        return top_right_singular_vectors(g, config.subspace_rank, generator=self.svd_gen, init=self.optimizer.basis)


def _mean(values: list[torch.Tensor]) -> float:
    """The mean of 0-dim tensors, NaN entries (steps with a zero gradient) left out; NaN if none is left."""
    if not values:
        return math.nan
    return float(torch.stack(values).nanmean())


AUTO_BLOCK_BYTES = 24 * 2**20   # per-example gradient block of the largest parameter, CPU auto sizing
AUTO_GPU_BLOCK_BYTES = 2 * 2**30  # per-example gradients of every trainable parameter, GPU auto sizing
AUTO_GPU_MAX_PHYSICAL = 1024  # GPU auto sizing: 4x the fixed 256 it replaced, for the activations' memory


def physical_batch_size(config: DPSGDConfig, model: nn.Module) -> int:
    """``config.physical_batch_size``, or for 0 (auto): on a CPU the largest power of two B (16 <= B <= the
    logical batch) with B x (largest parameter's size) x 4 bytes <= 24 MiB (under glibc's 32 MiB mmap
    ceiling); on a GPU :func:`gpu_physical_batch`.

    Why on a CPU: glibc serves allocations above its mmap ceiling (32 MiB at most) with fresh mappings
    that the kernel zeroes page by page at every batch; below it, freed blocks are reused. Measured on
    the Fashion-MNIST scatter preset (39 700 weights): 1.8 s per step at 2048, 0.9 s at 128.
    """
    if config.physical_batch_size:
        return config.physical_batch_size
    device = next(model.parameters()).device
    trainable = [p.numel() for p in model.parameters() if p.requires_grad]
    if device.type != "cpu":
        return gpu_physical_batch(config.batch_size, sum(trainable))
    largest = max(trainable)
    size = 16
    while size * 2 <= config.batch_size and size * 2 * largest * 4 <= AUTO_BLOCK_BYTES:
        size *= 2
    return size


def gpu_physical_batch(batch_size: int, n_params: int) -> int:
    """The physical batch on a GPU: one pass for almost every Poisson batch of a logical batch up to about 900. A
    batch of expected size B is Binomial(N, q) with standard deviation sqrt(B (1 - q)) <= sqrt(B), so B + 4 sqrt(B),
    rounded up to a multiple of 64, leaves fewer than 1e-4 of them to a second pass (about 5e-5 at B = 256: nearly
    Poisson tails for small q); a larger batch is split, as the splitting loader does, and the sum of the clipped
    gradients is the same. Capped at :data:`AUTO_GPU_MAX_PHYSICAL` (activations grow with it too, which the next cap
    does not count) and so that the per-example gradients (physical x n_params x 4 bytes) fit
    :data:`AUTO_GPU_BLOCK_BYTES`; at least 64. A fixed 256 split about half the batches of B = 256 in two passes:
    1.42x the time of Opacus' one pass per batch on a small CNN (H200, bench/bench_cnn_shaped_noise.py)."""
    cover = math.ceil((batch_size + 4 * math.sqrt(batch_size)) / 64) * 64
    fits = AUTO_GPU_BLOCK_BYTES // (4 * max(n_params, 1)) // 64 * 64
    return max(64, min(cover, fits, AUTO_GPU_MAX_PHYSICAL))


def warm_start(model: nn.Module, task: Task, config: DPSGDConfig, generator: torch.Generator) -> None:
    """Train ``model`` in place, without noise, on the PUBLIC split only: ``config.warm_start_epochs``
    shuffled passes of plain SGD (momentum 0.9). No private example is read, so it costs no privacy."""
    criterion = nn.MSELoss() if task.regression else nn.CrossEntropyLoss()
    sgd = torch.optim.SGD(model.parameters(), lr=config.warm_start_lr, momentum=0.9)
    n, batch = task.n_public, min(config.warm_start_batch, task.n_public)
    steps = max(1, round(config.warm_start_epochs * n / batch))
    model.train()
    order = torch.empty(0, dtype=torch.int64)
    for _ in range(steps):
        if len(order) < batch:
            order = torch.cat([order, torch.randperm(n, generator=generator)])
        idx, order = order[:batch].to(task.x_public.device), order[batch:]
        sgd.zero_grad()
        criterion(model(task.x_public[idx]), task.y_public[idx]).backward()
        sgd.step()
    sgd.zero_grad(set_to_none=True)


def normalization_history(config: DPSGDConfig) -> History:
    """The Opacus history entry of a model's private channel statistics (none unless ``private``):
    one Gaussian mechanism, sampling rate 1 (see :mod:`.normalization`)."""
    return [(config.norm_noise_multiplier, 1.0, 1)] if config.normalization == "private" else []


def fixed_normalizer(task: Task, config: DPSGDConfig, seed: int, index: int, device: torch.device) -> nn.Module | None:
    """The fixed channel normalisation of model ``index`` (None: GroupNorm inside the model).

    The private estimate draws its noise from the model's own stream, like its DP-SGD noise.
    """
    if config.normalization == "public":
        return public_norm(task.x_public)
    if config.normalization == "private":
        norm, _ = private_norm(task.x_private, task.x_public, private_size=declared_private_size(config),
                               noise_multiplier=config.norm_noise_multiplier,
                               generator=noise_generator(config, seed, index, STREAM_NORM,
                                                         data=task.private_fingerprint, device=device))
        return norm
    return None


def build_network(task: Task, config: DPSGDConfig, seed: int, device: torch.device, norm: nn.Module | None = None, *,
           stand_in_projection: bool = False) -> nn.Module:
    """The run's network for ``seed`` (initialised from its ``STREAM_INIT``), checked by Opacus' validator (strict:
    ValueError for a layer it cannot train), on ``device``; ``norm``: the fixed normalisation (None: GroupNorm).

    ``stand_in_projection``: scatter_mlp's projection is :func:`_stand_in_projection` instead of the public split's
    principal directions: a buffer, so the parameters and every check are the same without the public pass
    (:func:`.run.model_dimension` counts parameters with it)."""
    kind = resolved_model(config)
    projection = None
    if kind == "scatter_mlp":
        norm = (norm if norm is not None else scatter_groupnorm(task.input_shape[0])).to(device)
        projection = (_stand_in_projection(task, config) if stand_in_projection
                      else _public_projection(task, config, norm))
    model = build_model(kind, input_shape=task.input_shape, n_outputs=task.n_outputs,
                        regression=task.regression, generator=derived_generator(seed, STREAM_INIT), norm=norm,
                        projection=projection)
    if task.regression:  # least squares from the zero predictor, whose excess risk is the 'chance' level
        with torch.no_grad():
            for p in model.parameters():
                p.zero_()
    ModuleValidator.validate(model, strict=True)
    return model.to(device)


def _projection_width(task: Task, config: DPSGDConfig) -> int:
    """F, the features per example that scatter_mlp projects (its normalisation keeps the input's shape);
    ConfigError unless ``projection_rank`` is at most min(n_public - 1, F)."""
    width = math.prod(task.input_shape)
    most = min(task.n_public - 1, width)
    if config.projection_rank > most:
        raise ConfigError("projection_rank", f"must be at most min(n_public - 1, features) = {most} (the public "
                                             f"examples span no more directions); got {config.projection_rank}")
    return width


def _public_projection(task: Task, config: DPSGDConfig, norm: nn.Module) -> PublicProjection:
    """scatter_mlp's projection: the top principal directions of the public split's normalised features."""
    _projection_width(task, config)  # checked before the public pass
    with torch.no_grad():
        features = norm(task.x_public).flatten(1)
    return public_projection(features, config.projection_rank)


def _stand_in_projection(task: Task, config: DPSGDConfig) -> PublicProjection:
    """A projection of the same shapes (mean ``(F,)``, basis ``(F, rank)``), zeros: no public pass."""
    width = _projection_width(task, config)
    return PublicProjection(torch.zeros(width), torch.zeros(width, config.projection_rank), 1.0)


def private_sampler(task: Task, config: DPSGDConfig, plan: Plan, seed: int, index: int, *,
                    among: torch.Tensor | None = None, on_device: bool = False) -> PoissonSampler | ShuffledBatches:
    """The logical batches of model ``index`` (``plan.steps`` of them, at rate ``plan.sample_rate`` or of
    ``plan.expected_batch_size``), as :mod:`.sampling` draws them, for this path's loader and the model batch alike.

    Secret subsampling: its generator is a noise stream of the model, keyed like its noise: ``STREAM_SAMPLING`` on the
    CPU, or, with ``on_device`` (a model batch on a GPU, :func:`.sampling.poisson_on_device`) and Poisson sampling,
    ``STREAM_SAMPLING_ON_DEVICE`` on the task's device (the same law, other draws). Shuffled batches are drawn on the
    CPU either way. ``among``: optional ``(n_private,)`` bool, the examples the model trains on (None: all).
    """
    device = task.x_private.device
    there = on_device and config.sampling == "poisson"
    gen = noise_generator(config, seed, index, STREAM_SAMPLING_ON_DEVICE if there else STREAM_SAMPLING,
                          data=task.private_fingerprint, device=device, on=device if there else "cpu")
    if config.sampling == "poisson":
        return PoissonSampler(num_samples=task.n_private, sample_rate=plan.sample_rate, generator=gen,
                              steps=plan.steps, among=among)
    examples = range(task.n_private) if among is None else among.nonzero().reshape(-1).tolist()
    return ShuffledBatches(examples, batch_size=plan.expected_batch_size, steps=plan.steps, generator=gen)


def _loader(task: Task, config: DPSGDConfig, plan: Plan, seed: int, index: int) -> DataLoader:
    """The private batches of model ``index`` (:func:`private_sampler`), fetched from the tensors."""
    data = _TensorBatches(task.x_private, task.y_private)
    return DataLoader(data, batch_sampler=private_sampler(task, config, plan, seed, index), collate_fn=_as_is)


def _evaluate(model: nn.Module, task: Task, should_stop: Callable[[], bool], *, limit: int | None,
              part: str = "test") -> float | None:
    """Accuracy on the first ``limit`` examples (None: all) of the held-out split's ``part`` (``"test"``: what is
    reported, ``"validation"``: what selects), or the linreg excess risk.

    None if a stop was requested meanwhile.
    """
    if task.regression:
        linear = next(m for m in model.modules() if isinstance(m, nn.Linear))
        return task.population.excess_risk(linear.weight.detach().reshape(-1), linear.bias.detach())
    x, y = {"test": (task.x_test, task.y_test), "validation": (task.x_val, task.y_val)}[part]
    n = len(x) if limit is None else min(limit, len(x))
    correct = 0
    with torch.no_grad():
        for start in range(0, n, EVAL_CHUNK):
            if should_stop():
                return None
            stop = min(start + EVAL_CHUNK, n)
            out = model(x[start:stop])
            correct += int((out.argmax(dim=1) == y[start:stop]).sum())
    return correct / n
