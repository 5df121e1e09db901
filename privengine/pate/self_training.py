"""The self-training PATE student: pseudo-labels on the public pool, mixup and sharpening, in rounds.

A student on the teachers' inputs (on MNIST: ScatterNet features, with the teachers' linear model)
learns from the answered queries and from the rest of the public pool without augmenting images,
which makes it cheap where FixMatch must run a ConvNet on two augmented copies of every image:

    round 0:   fit f_0 on the answered queries (one-hot noisy labels)
    round r:   p = softmax f_{r-1}(pool);   with distribution alignment p_ik <- (p_ik / mean_i p_ik) / (row sum);
               q = sharpen(p) = p^(1/T) / sum_k p_k^(1/T)
               targets: the answered queries keep their noisy labels, every other pool image with
               max_k p_k >= tau gets q, the rest are left out;  fit f_r from scratch on those targets

Every fit minimises the soft-target cross-entropy -sum_k t_k log softmax f(x)_k under mixup
(Zhang et al. 2018) as MixMatch applies it (Berthelot et al. 2019): x~ = lam x_i + (1 - lam) x_j,
t~ = lam t_i + (1 - lam) t_j within a batch, lam ~ Beta(alpha, alpha) folded to lam >= 1/2.
Pseudo-labelling is Lee (2013); the sharpening temperature T = 1/2 is MixMatch's. Distribution
alignment (ReMixMatch, Berthelot et al. 2020) pulls the pool's mean prediction to the uniform class
distribution, which stops a class the first fits favour from absorbing its neighbours round after round
(with 100 answered MNIST labels it lifted five label sets from 95.6 % to 98.2 % on average); it assumes
the pool's classes are about balanced, so it is a knob.

Privacy: the pool and the test images are public and the pseudo-labels are a function of the public
pool and of the answered labels, so, as for FixMatch, only the answered queries are charged (by the
aggregator's accountant); the rounds cost nothing more (post-processing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from scipy.special import betaincinv
from torch import nn

from privengine.cuda_graphs import GraphedSteps, step_index
from privengine.schedules import cosine_learning_rates

from .student import accuracy, logits_in_chunks

SHARPEN_TEMPERATURE = 0.5  # MixMatch's T


@dataclass(frozen=True)
class SelfTrainingSettings:
    """``rounds`` pseudo-labelling rounds after the first fit; every fit takes ``epochs`` x
    ceil(pool size / ``batch_size``) Adam steps (learning rate ``lr``, cosine-annealed to zero), so
    the first fit, on the answered queries alone, runs as many steps as the later ones; ``confidence``
    is tau; ``mixup_alpha`` the Beta parameter (0: no mixup); ``align_distribution`` turns on
    distribution alignment to the uniform class distribution."""

    rounds: int
    epochs: int
    lr: float
    batch_size: int
    confidence: float
    mixup_alpha: float
    align_distribution: bool = True


def sharpen(p: torch.Tensor, temperature: float = SHARPEN_TEMPERATURE) -> torch.Tensor:
    """``p`` ``(n, K)`` probabilities -> ``p^(1/T)`` renormalised per row, ``(n, K)``."""
    powered = p.pow(1.0 / temperature)
    return powered / powered.sum(1, keepdim=True)


def align_to_uniform(p: torch.Tensor) -> torch.Tensor:
    """Distribution alignment: ``p`` ``(n, K)`` -> ``p_ik / mean_i p_ik``, renormalised per row, ``(n, K)``;
    the mean prediction over the ``n`` rows moves towards ``1 / K`` per class."""
    aligned = p / p.mean(0, keepdim=True).clamp_min(torch.finfo(p.dtype).tiny)
    return aligned / aligned.sum(1, keepdim=True)


def round_targets(probabilities: torch.Tensor, labelled_rows: torch.Tensor, labelled_targets: torch.Tensor,
                  settings: SelfTrainingSettings) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The next round's training set from the last model's pool predictions.

    Args:
        probabilities: ``(n_pool, K)`` the last model's softmax on the pool.
        labelled_rows: ``(n_l,)`` the answered rows, each once, in any order; ``labelled_targets`` ``(n_l, K)``
            their one-hot noisy labels, in the same order.

    Returns:
        ``targets`` ``(n_pool, K)``: the answered rows' labels, elsewhere the sharpened (after alignment, if on)
        predictions; ``keep`` ``(n_pool,)`` bool: the answered rows and the rows whose (aligned) top probability
        is at least ``confidence``; the fraction of the unanswered pool that got a pseudo-label.
    """
    if settings.align_distribution:
        probabilities = align_to_uniform(probabilities)
    targets = sharpen(probabilities)
    confident = probabilities.max(1).values >= settings.confidence
    answered = torch.zeros_like(confident)
    answered[labelled_rows] = True
    targets[labelled_rows] = labelled_targets  # the answers override the pseudo-labels of their images
    unanswered = int((~answered).sum())
    pseudo_fraction = float((confident & ~answered).sum()) / unanswered if unanswered else 0.0
    return targets, confident | answered, pseudo_fraction


DRAW_BLOCK = 1024  # steps whose batches and mixup weights are drawn at once (bounds the buffers: S x b indices)


def mixup_weights(uniforms: torch.Tensor, alpha: float) -> torch.Tensor:
    """Mixup weights ``max(l, 1 - l)``, ``l ~ Beta(alpha, alpha)``, from ``uniforms`` in ``[0, 1)`` (float64, any
    shape): ``l`` is Beta's inverse distribution function at the uniform (scipy's ``betaincinv``), so the weights come
    from whichever generator drew the uniforms (torch's Beta samples from the global generator only). Same shape,
    in torch's default dtype."""
    lam = torch.from_numpy(betaincinv(alpha, alpha, uniforms.numpy()))
    return torch.maximum(lam, 1 - lam).to(torch.get_default_dtype())


def _draw_blocks(n: int, batch: int, steps: int, settings: SelfTrainingSettings, generator: torch.Generator,
                 device: torch.device):
    """A fit's randomness, all from ``generator``, yielded in blocks of at most :data:`DRAW_BLOCK` steps as ``(rows,
    lam, partner, lr)`` on ``device``, drawn in the order a step-by-step loop draws it, so the values do not depend on
    the block size:

    - ``rows`` ``(S, b)`` int64: each step's next ``b`` rows of the current shuffle of the ``n`` rows (a new
      ``randperm(n, generator)`` when fewer than ``b`` are left);
    - ``lam`` ``(S, b)``: each step's mixup weights, :func:`mixup_weights` of ``rand(b, generator)`` (float64);
      ``partner`` ``(S, b)`` int64: each step's ``randperm(b, generator)``, drawn after its weights; both None
      without mixup;
    - ``lr`` ``(S,)`` float64: each step's learning rate (:func:`cosine_learning_rates`: the scheduler's floats).
    """
    alpha = settings.mixup_alpha
    rates = cosine_learning_rates(settings.lr, steps)
    order, position = torch.randperm(n, generator=generator), 0
    for first in range(0, steps, DRAW_BLOCK):
        size = min(DRAW_BLOCK, steps - first)
        rows, uniforms, partners = [], [], []
        for _ in range(size):
            if position + batch > n:
                order, position = torch.randperm(n, generator=generator), 0
            rows.append(order[position:position + batch])
            position += batch
            if alpha > 0:
                uniforms.append(torch.rand(batch, generator=generator, dtype=torch.float64))
                partners.append(torch.randperm(batch, generator=generator))
        yield (torch.stack(rows).to(device),
               mixup_weights(torch.stack(uniforms), alpha).to(device) if uniforms else None,
               torch.stack(partners).to(device) if partners else None,
               torch.tensor(rates[first:first + size], dtype=torch.float64).to(device))


def fit_soft(model: nn.Module, x: torch.Tensor, targets: torch.Tensor, *, steps: int, settings: SelfTrainingSettings,
             generator: torch.Generator, should_stop: Callable[[], bool]) -> bool:
    """Train ``model`` for ``steps`` minibatch steps (Adam, cosine-annealed learning rate) on ``x`` ``(n, *input)``
    and soft ``targets`` ``(n, K)`` with mixup; False if stopped.

    The batches, mixup weights and partners are drawn ahead in blocks (:func:`_draw_blocks`, the same draws a
    step-by-step loop makes) into buffers the steps index, so that on a GPU the steps after the first few replay
    one CUDA graph (:class:`~privengine.cuda_graphs.GraphedSteps`: the step is a few dozen tiny kernels, and
    launching them one by one kept the device idle); there the optimizer keeps its state and learning rate on the
    device (``capturable``). One step: ``x~ = lam x_i + (1 - lam) x_partner(i)``, the same mix of the targets, loss
    ``-mean_i sum_k t~_ik log softmax f(x~_i)_k``."""
    batch = min(settings.batch_size, len(x))
    on_gpu = x.device.type == "cuda"
    lr = torch.tensor(settings.lr, device=x.device) if on_gpu else settings.lr
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, capturable=on_gpu)
    buffers: dict[str, torch.Tensor | None] = {}
    shape = (batch,) + (1,) * (x.ndim - 1)

    def step(t: int | torch.Tensor) -> None:
        rows = step_index(buffers["rows"], t)
        inputs, soft = x[rows], targets[rows]
        if buffers["lam"] is not None:
            lam, partner = step_index(buffers["lam"], t), step_index(buffers["partner"], t)
            inputs = lam.view(shape) * inputs + (1 - lam.view(shape)) * inputs[partner]
            soft = lam[:, None] * soft + (1 - lam[:, None]) * soft[partner]
        rate = step_index(buffers["lr"], t)
        if on_gpu:
            optimizer.param_groups[0]["lr"].copy_(rate)
        else:
            optimizer.param_groups[0]["lr"] = float(rate)
        loss = -(soft * model(inputs).log_softmax(1)).sum(1).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    runner = GraphedSteps(step, x.device)
    model.train()
    for block in _draw_blocks(len(x), batch, steps, settings, generator, x.device):
        for name, values in zip(("rows", "lam", "partner", "lr"), block):
            if name in buffers and values is not None:  # the graph reads the buffers at their addresses
                buffers[name][:len(values)].copy_(values)
            else:
                buffers[name] = values
        runner.block_loaded()
        for t in range(len(block[0])):
            if should_stop():
                return False
            runner.run(t)
    model.eval()
    return True


def train_self_training(make_model: Callable[[], nn.Module], pool_x: torch.Tensor, labelled_rows: torch.Tensor,
                        labelled_y: torch.Tensor, n_classes: int, test_x: torch.Tensor, test_y: torch.Tensor,
                        settings: SelfTrainingSettings, *, generator: torch.Generator,
                        should_stop: Callable[[], bool] = lambda: False,
                        on_round: Callable[[int, float, float], None] | None = None) -> nn.Module | None:
    """Self-train a student; return the last round's model, or None if stopped.

    Args:
        make_model: a fresh model (on the device of the tensors) mapping ``(n, *input)`` to logits ``(n, K)``, called
            once per fit (``rounds + 1`` times), its initial weights drawn from the caller's generator.
        pool_x: ``(n_pool, *input)`` the public pool.
        labelled_rows: ``(n_l,)`` rows of ``pool_x`` that were answered; ``labelled_y`` ``(n_l,)`` their noisy labels.
        test_x, test_y: held-out public inputs and true labels, for the per-round accuracy.
        generator: CPU generator of the batches, mixup weights and mixup partners.
        on_round: ``on_round(round, test_accuracy, pseudo_labelled_fraction)`` after every fit (round 0: the
            fit on the answered queries; the fraction is that of the unanswered pool images given a pseudo-label).
    """
    s = settings
    steps = s.epochs * math.ceil(len(pool_x) / s.batch_size)
    labelled_targets = F.one_hot(labelled_y, n_classes).to(pool_x.dtype)
    model = make_model()
    if not fit_soft(model, pool_x[labelled_rows], labelled_targets, steps=steps, settings=s, generator=generator,
                    should_stop=should_stop):
        return None
    if on_round is not None:
        on_round(0, accuracy(model, test_x, test_y), 0.0)
    for round_ in range(1, s.rounds + 1):
        targets, keep, pseudo_fraction = round_targets(logits_in_chunks(model, pool_x).softmax(1), labelled_rows,
                                                       labelled_targets, s)
        model = make_model()
        if not fit_soft(model, pool_x[keep], targets[keep], steps=steps, settings=s, generator=generator,
                        should_stop=should_stop):
            return None
        if on_round is not None:
            on_round(round_, accuracy(model, test_x, test_y), pseudo_fraction)
    return model
