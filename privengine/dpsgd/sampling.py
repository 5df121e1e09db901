"""The secret subsampling of the private examples: one law, drawn by the Opacus path's loader and the model batch.

Model k's logical batch at step t, from its sampling generator g_k (a noise stream keyed in
:func:`.training.private_sampler`), over its examples E_k (all n private examples, or a model batch's inclusion
row):

- Poisson (``sampling="poisson"``): B_kt = {i in E_k : u_kti < m}, u_kt uniform integers below 2^24, m =
  floor(q 2^24), one draw of g_k per step (:func:`privengine.poisson.poisson_mask`), on the generator's device:
  each example of E_k joins independently with probability m / 2^24 <= q (never above the rate the accountant is
  given), independently across steps and models (each model has its own stream); the draw covers all n examples
  whatever E_k, so restricting E_k removes examples from the batches and changes no other draw. Where g_k lives
  (:func:`poisson_on_device`): on the CPU for the Opacus path's loader and for a model batch on the CPU
  (``STREAM_SAMPLING``: the 24 bits of Opacus' ``UniformWithReplacementSampler`` draw, call for call, so the two
  paths draw the same masks there); on the run's device for a model batch on a GPU (CUDA, MPS:
  ``STREAM_SAMPLING_ON_DEVICE``, another stream, so the same law with other draws, on MPS as far as its uniform
  integers are uniform, :mod:`privengine.poisson`; nothing copied from the host per step);
- shuffle (``sampling="shuffle"``): the next B indices of E_k's successive random passes (``RandomSampler`` over
  E_k without replacement, ``steps * B`` samples, one ``randperm(|E_k|, g_k)`` per pass; ``BatchSampler`` with
  ``drop_last``), on the CPU on every device.

:class:`~privengine.poisson.PoissonSampler` and :class:`ShuffledBatches` are the batch samplers of the Opacus path's
``DataLoader`` (subclasses of the Opacus and torch classes, so ``BatchMemoryManager`` splits them as it splits those);
:class:`ModelBatchSampling` draws the K models' batches of a step as one padded index (:func:`padded_index`).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import torch
from torch.utils.data import BatchSampler, RandomSampler

from privengine.poisson import PoissonSampler


def poisson_on_device(device: torch.device | str) -> bool:
    """Whether a model batch on ``device`` draws its Poisson masks there (CUDA, MPS: no host-side draw and no
    per-step copy of the index) rather than on the CPU (the Opacus path's masks)."""
    return torch.device(device).type != "cpu"


def padded_index(masks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The K batches ``masks`` ``(K, n)`` bool as one padded index, built on the masks' device.

    Returns ``idx (K, b_max)`` int64 and ``valid (K, b_max)`` bool on that device, and ``counts (K,)`` int64 on the
    CPU (c_k = sum_i masks[k, i], b_max = max_k c_k): row k holds the i with masks[k, i] in increasing order in its
    first c_k slots (``valid``), then index 0 (``valid`` False). Example i of row k goes to slot
    r_ki - 1, r_ki = sum_{j <= i} masks[k, j] (its rank in the row); the others to a spare column b_max, dropped.
    One host sync: the counts, for b_max.
    """
    k, n = masks.shape
    counts_here = masks.sum(1)
    counts = counts_here.cpu()
    b_max = int(counts.max()) if k else 0
    slot = torch.where(masks, masks.cumsum(1) - 1, b_max)
    idx = torch.zeros(k, b_max + 1, dtype=torch.int64, device=masks.device)
    idx.scatter_(1, slot, torch.arange(n, device=masks.device).expand(k, n))
    valid = torch.arange(b_max, device=masks.device) < counts_here[:, None]
    return idx[:, :b_max], valid, counts


class ShuffledBatches(BatchSampler):
    """``steps`` batches of ``batch_size`` of ``examples``: successive random passes over them, from ``generator``
    (``RandomSampler`` draws the passes as positions in ``examples``; each batch maps them to the examples)."""

    def __init__(self, examples: Sequence[int], *, batch_size: int, steps: int, generator: torch.Generator):
        super().__init__(RandomSampler(examples, num_samples=steps * batch_size, generator=generator), batch_size,
                         drop_last=True)
        self.examples = examples

    def __iter__(self) -> Iterator[list[int]]:
        for positions in super().__iter__():
            yield [self.examples[i] for i in positions]


class ModelBatchSampling:
    """The logical batches of K models, each from its own sampler (:func:`.training.private_sampler`)."""

    def __init__(self, samplers: Sequence[PoissonSampler | ShuffledBatches]):
        self.samplers = list(samplers)
        self.batches = [iter(s) for s in self.samplers]  # shuffle: each model's pending batches

    def draw(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(idx (K, b_max) int64, valid (K, b_max) bool, counts (K,))``: the next logical batch of every model.

        Poisson: the K masks of :meth:`PoissonSampler.mask` as :func:`padded_index` (each model's selected indices
        in increasing order, padded to the longest batch: a padded slot has index 0, ``valid`` False), on the
        samplers' device; counts on the CPU. Shuffle: each model's next batch of B (no padding), on the CPU.
        """
        if self.samplers and isinstance(self.samplers[0], PoissonSampler):
            return padded_index(torch.stack([s.mask() for s in self.samplers]))
        idx = torch.tensor([next(batches) for batches in self.batches], dtype=torch.int64)
        return idx, torch.ones(idx.shape, dtype=torch.bool), torch.full((len(self.samplers),), idx.shape[1])

    def keep(self, keep: list[int]) -> None:
        """Only the models at positions ``keep`` go on (each keeps its stream where it is)."""
        self.samplers = [self.samplers[i] for i in keep]
        self.batches = [self.batches[i] for i in keep]
