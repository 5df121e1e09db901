r"""What the active party does to the per-example cut-layer gradients before sending them.

Every protection maps a batch ``grad`` (``(n, d)``, row ``i`` = dL/d(cut activation
of example i)) and its labels ``y`` (``(n,)``, {0, 1}) to the gradients sent,
drawing noise from ``generator`` (on the gradients' device):

- :class:`NoProtection`: ``g~_i = g_i``.
- :class:`IsotropicNoise` (scale ``t``): ``g~_i = g_i + N(0, (t max_j ||g_j||)^2 / d I)``.
- :class:`MaxNormAlignment`: ``g~_i = g_i (1 + xi_i s_i)``, ``xi_i ~ N(0, 1)``,
  ``s_i = sqrt(max(max_j ||g_j||^2 / ||g_i||^2 - 1, 0))``, so that
  ``E ||g~_i||^2 = max_j ||g_j||^2`` for every example (a zero gradient stays zero).
- :class:`Marvell`: ``g~_i = g_i + xi_i sqrt(l1_y - l2_y) Delta/||Delta|| + sqrt(l2_y) eta_i``
  with the lambdas of :mod:`.marvell` solved per batch, either for a sumKL threshold
  or for a fixed power scale.

Batches with one class only: Marvell's class statistics (``Delta``, the class
variances) do not exist, so such a batch is sent **without noise** and flagged
(``Protected.noised = False``); within the batch every label is the same, so the
passive party's per-batch leak AUC is undefined, but it can still compare such a
batch with others, which is why the run reports how many there were. Larger
batches make them rarer (``(1 - rate)^n``: about 2e-5 at 1.8% positives and n = 600).
The other protections need no labels and treat such batches like any other.

``sumkl`` is reported where the noise is Gaussian and additive (Marvell; isotropic
noise, evaluated with the same Gaussian class model) and the batch has both classes;
it is NaN otherwise.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import torch

from . import marvell


@dataclass(frozen=True)
class Protected:
    """The gradients sent and what the protection achieved on this batch.

    Attributes:
        grad: ``(n, d)`` the gradients sent to the passive party.
        noised: False when the protection left the batch as it was (none; Marvell on a single-class batch).
        sumkl: sumKL between the noisy class distributions (Gaussian model), NaN where undefined.
        power_scale: Marvell's ``s`` (noise power / ||Delta||^2), NaN for the other protections.
    """

    grad: torch.Tensor
    noised: bool
    sumkl: float = math.nan
    power_scale: float = math.nan


@dataclass(frozen=True)
class ClassStats:
    """Marvell's statistics of one batch: ``p`` positive fraction, ``u``/``v`` mean per-coordinate variance of
    negatives/positives, ``g_norm_square = ||Delta||^2``, ``direction = Delta/||Delta||`` (``(d,)``), ``dim = d``."""

    p: float
    u: float
    v: float
    g_norm_square: float
    direction: torch.Tensor
    dim: int


def class_stats(grad: torch.Tensor, y: torch.Tensor) -> ClassStats | None:
    """The batch's class statistics, or None when one class is absent.

    ``Delta = mean(g | y=1) - mean(g | y=0)``; variances are population variances
    (divided by the class count). When ``Delta = 0`` the direction is the first
    coordinate axis (any unit vector gives the same sumKL then).
    """
    pos = y > 0.5
    n_pos = int(pos.sum())
    if n_pos == 0 or n_pos == y.shape[0]:
        return None
    g = grad.double()
    g_pos, g_neg = g[pos], g[~pos]
    delta = g_pos.mean(0) - g_neg.mean(0)
    numbers = torch.stack([g_neg.var(0, unbiased=False).mean(), g_pos.var(0, unbiased=False).mean(),
                           delta.square().sum()]).tolist()  # one device -> host transfer
    u, v, g_norm_square = numbers
    if g_norm_square > 0:
        direction = delta / math.sqrt(g_norm_square)
    else:
        direction = torch.zeros_like(delta)
        direction[0] = 1.0
    return ClassStats(n_pos / y.shape[0], u, v, g_norm_square, direction.to(grad.dtype), grad.shape[1])


class Protection(ABC):
    """A gradient perturbation applied by the active party; ``key`` identifies it in metric names,
    ``label`` names it in charts."""

    key: str
    label: str

    @abstractmethod
    def __call__(self, grad: torch.Tensor, y: torch.Tensor, generator: torch.Generator) -> Protected:
        """Protect one batch: ``grad`` ``(n, d)``, ``y`` ``(n,)`` in {0, 1}."""


class NoProtection(Protection):
    key = "none"
    label = "no protection"

    def __call__(self, grad, y, generator):
        return Protected(grad, noised=False)


@dataclass(frozen=True)
class IsotropicNoise(Protection):
    """``g~_i = g_i + N(0, (t max_j ||g_j||)^2 / d I)``."""

    scale: float

    @property
    def key(self) -> str:
        return f"iso_t{self.scale:g}"

    @property
    def label(self) -> str:
        return f"iso t={self.scale:g}"

    def __call__(self, grad, y, generator):
        d = grad.shape[1]
        variance = (self.scale * grad.norm(dim=1).max()) ** 2 / d
        noise = torch.randn(grad.shape, generator=generator, device=grad.device, dtype=grad.dtype)
        stats = class_stats(grad, y)
        sumkl = math.nan
        if stats is not None:
            lam = float(variance)
            sumkl = marvell.sum_kl((lam, lam, lam, lam), u=stats.u, v=stats.v,
                                   g_norm_square=stats.g_norm_square, dim=d)
        return Protected(grad + noise * variance.sqrt(), noised=True, sumkl=sumkl)


class MaxNormAlignment(Protection):
    """``g~_i = g_i (1 + xi_i s_i)``: every example's expected squared norm becomes the batch maximum."""

    key = "max_norm"
    label = "max norm"

    def __call__(self, grad, y, generator):
        sq = grad.square().sum(dim=1)
        ratio = torch.where(sq > 0, sq.max() / sq.clamp_min(torch.finfo(grad.dtype).tiny), torch.ones_like(sq))
        s = (ratio - 1.0).clamp_min(0.0).sqrt()
        xi = torch.randn(sq.shape, generator=generator, device=grad.device, dtype=grad.dtype)
        return Protected(grad * (1.0 + xi * s).unsqueeze(1), noised=True)


@dataclass(frozen=True)
class Marvell(Protection):
    """Marvell's per-batch optimal noise, for a sumKL ``threshold`` or a fixed ``power_scale`` (exactly one set)."""

    threshold: float | None = None
    power_scale: float | None = None

    def __post_init__(self):
        if (self.threshold is None) == (self.power_scale is None):
            raise ValueError("Marvell needs exactly one of threshold and power_scale")

    @property
    def key(self) -> str:
        if self.threshold is not None:
            return f"marvell_sumkl{self.threshold:g}"
        return f"marvell_s{self.power_scale:g}"

    @property
    def label(self) -> str:
        if self.threshold is not None:
            return f"Marvell sumKL≤{self.threshold:g}"
        return f"Marvell s={self.power_scale:g}"

    def solve(self, stats: ClassStats) -> marvell.Solution:
        args = (stats.p, stats.u, stats.v, stats.g_norm_square, stats.dim)
        if self.threshold is not None:
            return marvell.solve_threshold(*args, threshold=self.threshold)
        return marvell.solve_power_scale(*args, power_scale=self.power_scale)

    def __call__(self, grad, y, generator):
        stats = class_stats(grad, y)
        if stats is None:
            return Protected(grad, noised=False)
        solution = self.solve(stats)
        l1_pos, l2_pos, l1_neg, l2_neg = solution.lambdas
        sds = torch.tensor([[math.sqrt(l1_neg - l2_neg), math.sqrt(l2_neg)],   # row = label: (along, across)
                            [math.sqrt(l1_pos - l2_pos), math.sqrt(l2_pos)]], device=grad.device, dtype=grad.dtype)
        along_sd, across_sd = sds[(y > 0.5).long()].unbind(1)
        xi = torch.randn(y.shape, generator=generator, device=grad.device, dtype=grad.dtype)
        eta = torch.randn(grad.shape, generator=generator, device=grad.device, dtype=grad.dtype)
        noise = (xi * along_sd).unsqueeze(1) * stats.direction + eta * across_sd.unsqueeze(1)
        return Protected(grad + noise, noised=True, sumkl=solution.sumkl, power_scale=solution.power_scale)


def make_protection(kind: str, *, iso_scale: float = 1.0, sumkl_threshold: float | None = None,
                    power_scale: float | None = None) -> Protection:
    """A protection by name: ``none``, ``iso`` (uses ``iso_scale``), ``max_norm``, or ``marvell``
    (uses ``sumkl_threshold`` or ``power_scale``, exactly one)."""
    if kind == "none":
        return NoProtection()
    if kind == "iso":
        return IsotropicNoise(iso_scale)
    if kind == "max_norm":
        return MaxNormAlignment()
    if kind == "marvell":
        return Marvell(threshold=sumkl_threshold, power_scale=power_scale)
    raise ValueError(f"unknown protection {kind!r}; known: none, iso, max_norm, marvell")
