"""The secret subsampling of the private examples: one law, drawn by the Opacus path's loader and the model batch.

Model k's logical batch at step t, from its sampling generator g_k (a noise stream, on the CPU; keyed in
:func:`.training.private_sampler`), over its examples E_k (all n private examples, or a model batch's inclusion
row):

- Poisson (``sampling="poisson"``): B_kt = {i in E_k : u_ki < q}, u_k ~ U[0, 1)^n, one ``torch.rand(n, g_k)`` per
  step: Opacus' ``UniformWithReplacementSampler``, call for call (the draw covers all n examples whatever E_k,
  so restricting E_k removes examples from the batches and changes no other draw);
- shuffle (``sampling="shuffle"``): the next B indices of E_k's successive random passes (``RandomSampler`` over
  E_k without replacement, ``steps * B`` samples, one ``randperm(|E_k|, g_k)`` per pass; ``BatchSampler`` with
  ``drop_last``).

:class:`PoissonSampler` and :class:`ShuffledBatches` are the batch samplers of the Opacus path's ``DataLoader``
(subclasses of the Opacus and torch classes, so ``BatchMemoryManager`` splits them as it splits those);
:class:`ModelBatchSampling` draws the K models' batches of a step as one padded index.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import torch
from opacus.utils.uniform_sampler import UniformWithReplacementSampler
from torch.utils.data import BatchSampler, RandomSampler


class PoissonSampler(UniformWithReplacementSampler):
    """``steps`` Poisson batches of ``num_samples`` examples at rate ``sample_rate``, drawn from ``generator``.

    ``among``: optional ``(num_samples,)`` bool, the examples that may be drawn (None: all).
    """

    def __init__(self, *, num_samples: int, sample_rate: float, generator: torch.Generator, steps: int,
                 among: torch.Tensor | None = None):
        super().__init__(num_samples=num_samples, sample_rate=sample_rate, generator=generator, steps=steps)
        self.among = among

    def mask(self) -> torch.Tensor:
        """The next step's batch as a ``(num_samples,)`` bool mask: ``torch.rand(n, generator) < q`` (and
        ``among``)."""
        drawn = torch.rand(self.num_samples, generator=self.generator) < self.sample_rate
        return drawn if self.among is None else drawn & self.among

    def __iter__(self) -> Iterator[list[int]]:
        """Each step's batch: the indices of :meth:`mask`, increasing."""
        for _ in range(self.steps):
            yield self.mask().nonzero().reshape(-1).tolist()


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

        Poisson: the K masks of :meth:`PoissonSampler.mask`, then each model's selected indices in increasing order,
        padded to the longest batch (a padded slot: index 0, ``valid`` False). Shuffle: each model's next batch of
        B (no padding).
        """
        k = len(self.samplers)
        if self.samplers and isinstance(self.samplers[0], PoissonSampler):
            masks = torch.stack([s.mask() for s in self.samplers])
            counts = masks.sum(1)
            rows, cols = masks.nonzero(as_tuple=True)  # row-major: each model's indices in increasing order
            slot = torch.arange(len(rows)) - (counts.cumsum(0) - counts)[rows]
            b_max = int(counts.max()) if k else 0
            idx = torch.zeros(k, b_max, dtype=torch.int64)
            valid = torch.zeros(k, b_max, dtype=torch.bool)
            idx[rows, slot] = cols
            valid[rows, slot] = True
            return idx, valid, counts
        idx = torch.tensor([next(batches) for batches in self.batches], dtype=torch.int64)
        return idx, torch.ones(idx.shape, dtype=torch.bool), torch.full((k,), idx.shape[1])

    def keep(self, keep: list[int]) -> None:
        """Only the models at positions ``keep`` go on (each keeps its stream where it is)."""
        self.samplers = [self.samplers[i] for i in keep]
        self.batches = [self.batches[i] for i in keep]
