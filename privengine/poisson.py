"""Poisson subsampling whose inclusion probability never exceeds the rate the accountant is given.

Every accountant here (Opacus' RDP and PRV, dp-accounting's PLD) bounds the privacy loss of steps that include
each record independently with probability q; a sampler whose rate r is at most q keeps the stated ε valid, and
one whose rate is above q understates it. Why: the neighbouring output laws of a step at rate r are linear in r
(``(1 - r) A + r B`` against ``A``, either way round, or against ``(1 - r) A + r C`` for a replacement), and
every f-divergence (the hockey-stick divergence at each e^ε, and the one behind Rényi's) is jointly convex, so
it is convex in r and 0 at r = 0, hence nondecreasing: the pair at rate r is dominated by the pair at rate q at
every e^ε, and dominance survives composition. (A, B and C are fixed given the rest of the step's batch, whose
records are also sampled at rate r; the argument is made on the dominating pair the accountants bound, e.g.
``(1 - r) N(0, σ²) + r N(C, σ²)`` against ``N(0, σ²)`` for the subsampled Gaussian, where they are fixed.)

Opacus' ``UniformWithReplacementSampler`` includes record i when ``torch.rand(n)[i] < q``: on the CPU the uniform
is ``k 2^-24`` with k uniform on ``{0, ..., 2^24 - 1}`` and q is rounded to the nearest float32 ``q32`` for the
comparison, so the rate is ``ceil(q32 2^24) / 2^24``, up to 2^-24 above q (on CUDA the uniform has another grid and
a little mass moved from 1 to 0). Here a record is included when ``u_i < m``, with

    u ~ torch.randint(0, 2^24, (n,))  (int32),   m = floor(q 2^24)   (:func:`inclusion_threshold`),

so its rate is ``m / 2^24`` exactly (:func:`inclusion_rate`), in ``(q - 2^-24, q]``: never above q, and less than
6e-8 below it. The law holds on every device whose ``randint`` reduces a uniform 32-bit draw modulo the range:
torch's CPU kernel and its CUDA kernel (``random_from_to_kernel``, one Philox word per value for ranges below 2^28;
2^24 divides 2^32, so no value is favoured). On Apple's MPS torch hands the range to MPSGraph's uniform integers,
whose law is not published: assumed uniform there. On the CPU the draw is bit for bit the
24 bits ``torch.rand`` scales by 2^-24, with the same use of the generator, so a mask here differs from Opacus'
only for a record whose ``u_i`` lies in ``[m, ceil(q32 2^24))``: one value of the 2^24 at most.

Written here: neither torch nor Opacus offers a Bernoulli mask whose rate is bounded by q.
"""

from __future__ import annotations

import math
from typing import Iterator

import torch
from opacus.utils.uniform_sampler import UniformWithReplacementSampler

from privengine.config import MIN_SAMPLE_RATE

#: the uniforms are integers below 2^24 = 1 / MIN_SAMPLE_RATE (the float32 mantissa's width, as in ``torch.rand``)
_LEVELS = round(1 / MIN_SAMPLE_RATE)


def inclusion_threshold(q: float) -> int:
    """``m = floor(q 2^24)``: a record is included when its uniform integer is below m. ValueError when q is outside
    [0, 1] or positive but below 2^-24 (no rate in (0, q] is on the grid: the sampler would never include anyone)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"sampling rate q must be in [0, 1]; got {q!r}")
    m = math.floor(q * _LEVELS)  # q * 2^24 is exact in double precision (a power of two), floor then exact too
    if q > 0 and m == 0:
        raise ValueError(f"sampling rate q = {q:g} is below 2^-24 = {1 / _LEVELS:.3g}, the Poisson sampler's "
                         "resolution: no record would ever be sampled")
    return m


def inclusion_rate(q: float) -> float:
    """Each record's exact inclusion probability for a requested rate q: ``floor(q 2^24) / 2^24 <= q``."""
    return inclusion_threshold(q) / _LEVELS


def poisson_mask(n: int, q: float, generator: torch.Generator) -> torch.Tensor:
    """``(n,)`` bool on the generator's device: each entry True independently with probability
    :func:`inclusion_rate` ``(q) <= q`` (module docstring), from one ``randint`` draw of ``generator``."""
    uniforms = torch.randint(0, _LEVELS, (n,), generator=generator, device=generator.device, dtype=torch.int32)
    return uniforms < inclusion_threshold(q)


class PoissonSampler(UniformWithReplacementSampler):
    """``steps`` Poisson batches of ``num_samples`` examples at rate at most ``sample_rate`` (:func:`poisson_mask`),
    drawn from ``generator`` on its device; Opacus' batch sampler otherwise (its length, and ``BatchMemoryManager``
    splits it as it splits Opacus' own).

    ``among``: optional ``(num_samples,)`` bool, the examples that may be drawn (None: all).
    """

    def __init__(self, *, num_samples: int, sample_rate: float, generator: torch.Generator, steps: int,
                 among: torch.Tensor | None = None):
        super().__init__(num_samples=num_samples, sample_rate=sample_rate, generator=generator, steps=steps)
        inclusion_threshold(sample_rate)  # a rate the sampler cannot draw fails here, before any step
        self.among = None if among is None else among.to(generator.device)

    def mask(self) -> torch.Tensor:
        """The next step's batch as a ``(num_samples,)`` bool mask on the generator's device (and ``among``)."""
        drawn = poisson_mask(self.num_samples, self.sample_rate, self.generator)
        return drawn if self.among is None else drawn & self.among

    def __iter__(self) -> Iterator[list[int]]:
        """Each step's batch: the indices of :meth:`mask`, increasing."""
        for _ in range(self.steps):
            yield self.mask().nonzero().reshape(-1).tolist()
