r"""Marvell: the optimal Gaussian gradient noise for a sumKL budget (Li et al., ICLR 2022).

Model of one batch of cut-layer gradients ``g_i`` (dimension ``d``): positives
``~ N(mu_1, v I)``, negatives ``~ N(mu_0, u I)``, with ``Delta = mu_1 - mu_0`` and
``G = ||Delta||^2``. The active party adds to an example of class ``y`` the noise

    xi * sqrt(l1_y - l2_y) * Delta / ||Delta||  +  sqrt(l2_y) * eta,     xi ~ N(0, 1), eta ~ N(0, I_d),

of covariance ``(l1_y - l2_y) Delta Delta^T / G + l2_y I``: variance ``l1_y`` along
``Delta`` and ``l2_y`` across it. With ``A = l1_0 + u``, ``B = l1_1 + v`` (total
variances along ``Delta``) and ``a = l2_0 + u``, ``b = l2_1 + v`` (across), the
symmetrised KL divergence between the two noisy class distributions is

    sumKL = KL(N_1 || N_0) + KL(N_0 || N_1)
          = ((A - B)^2 + G (A + B)) / (2 A B)  +  (d - 1) (a - b)^2 / (2 a b)
          = F / 2 - d,   F = (d-1)(a/b + b/a) + (A+G)/B + (B+G)/A,

and by the paper's theorem every scorer's leak AUC is at most
``1/2 + sqrt(sumKL)/2 - sumKL/8`` (:func:`auc_bound`, with its proof). Marvell minimises sumKL
over ``l >= 0`` with ``l2_y <= l1_y`` under the expected noise power budget

    p (l1_1 + (d-1) l2_1) + (1-p) (l1_0 + (d-1) l2_0) <= P,      p = fraction of positives.

How :func:`solve` finds the optimum (derivation in the docstrings below):

1. The budget is tight: scaling ``A`` and ``B`` up together lowers the along term.
2. The class with the larger variance gets ``l2 = 0``, and the other class gets
   ``l2 = w`` in ``[0, |u - v|]``: adding across-variance to the larger class, or
   past equality, only increases ``(a-b)^2/(ab)`` and spends power.
3. For a fixed ``w`` the along term restricted to the budget line
   ``p B + (1-p) A = C`` (``C`` = power left + ``p v + (1-p) u``) is convex, and its
   stationary point satisfies ``B = E A`` with ``E = sqrt((C + (1-p) G) / (C + p G))``;
   clipping it to ``l1_y >= l2_y >= 0`` gives the best ``l1`` pair in closed form.
4. The remaining 1-D problem in ``w`` is solved with a 17-point scan followed by
   scipy's bounded Brent search around the best scan point.

Everything is homogeneous of degree 0 in ``(l, u, v, G, P)``, so :func:`solve`
works in units of ``G + u + v`` and scales back.

>>> (l1_pos, l2_pos, l1_neg, l2_neg), kl = solve(0.02, 1e-3, 2e-3, 1.0, 4.0, 32)
>>> kl < sum_kl(NO_NOISE, u=1e-3, v=2e-3, g_norm_square=1.0, dim=32)
True
>>> l2_pos  # the positives have the larger variance (v > u): no noise across Delta
0.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.optimize import minimize_scalar

Lambdas = tuple[float, float, float, float]
"""Noise parameters ``(l1_pos, l2_pos, l1_neg, l2_neg)``: variance along Delta / across it, per class."""

NO_NOISE: Lambdas = (0.0, 0.0, 0.0, 0.0)
SCAN_POINTS = 17        # coarse scan of the across-noise w before the Brent refinement
THRESHOLD_GROWTH = 1.5  # threshold mode multiplies the power scale s by this until sumKL <= threshold
MAX_THRESHOLD_ROUNDS = 200


def sum_kl(lambdas: Lambdas, *, u: float, v: float, g_norm_square: float, dim: int) -> float:
    """sumKL of the two noisy class distributions for noise ``lambdas = (l1_pos, l2_pos, l1_neg, l2_neg)``.

    ``u`` / ``v``: mean per-coordinate variance of the negatives / positives;
    ``g_norm_square``: ``||Delta||^2``; ``dim``: gradient dimension ``d``. Returns
    ``inf`` when one class is degenerate in a direction where the other is not.
    """
    l1_pos, l2_pos, l1_neg, l2_neg = lambdas
    return _sum_kl(l1_neg + u, l1_pos + v, l2_neg + u, l2_pos + v, g_norm_square, dim)


def _sum_kl(big_a: float, big_b: float, a: float, b: float, g: float, dim: int) -> float:
    """sumKL from the total variances: ``A, B`` along Delta (neg, pos), ``a, b`` across it (neg, pos)."""
    return _ratio_term((big_a - big_b) ** 2 + g * (big_a + big_b), big_a * big_b) + \
        (dim - 1) * _ratio_term((a - b) ** 2, a * b)


def _ratio_term(numerator: float, product: float) -> float:
    """``numerator / (2 product)``, with 0/0 = 0 (identical degenerate directions) and x/0 = inf."""
    if numerator == 0.0:
        return 0.0
    return numerator / (2.0 * product) if product > 0.0 else math.inf


def auc_bound(sumkl: float) -> float:
    r"""The leak AUC bound of Marvell's theorem: ``1/2 + sqrt(sumKL)/2 - sumKL/8``, and 1 for sumKL >= 4.

    Statement. Let ``P1`` and ``P0`` be the laws of what the passive party sees of one positive
    and of one negative example (here: one batch's protected cut gradient in the Gaussian class
    model of this module) and ``sumKL = KL(P1 || P0) + KL(P0 || P1)``. Every scorer ``r``
    (any measurable function of the gradient, possibly randomised) has

        AUC(r) = P[r(X1) > r(X0)] + P[r(X1) = r(X0)] / 2   (X1 ~ P1, X0 ~ P0 independent)
               <= 1/2 + sqrt(sumKL)/2 - sumKL/8              for sumKL <= 4.

    Proof sketch.

    1. ROC under the TV line. The ROC curve of ``r`` is made of the points
       ``(FPR, TPR) = (P0(E), P1(E))`` of the events ``E = {r > t}`` (ties: randomised
       thresholds, whose points are mixtures of these), and the AUC is the area under it.
       ``P1(E) - P0(E) <= TV(P1, P0) =: T`` for every event, so the curve lies under
       ``TPR = min(1, FPR + T)`` and
       ``AUC <= int_0^1 min(1, x + T) dx = 1/2 + T - T^2/2``
       (an equality for the ROC that rises by ``T`` at 0 and then follows the diagonal).
    2. Pinsker on the smaller direction. ``T <= sqrt(KL(P || Q) / 2)`` in either order, and the
       smaller of the two KLs is at most ``sumKL / 2``: ``T <= sqrt(sumKL) / 2``.
    3. ``h(T) = 1/2 + T - T^2/2`` increases on ``[0, 1]``, so
       ``AUC <= h(sqrt(sumKL)/2) = 1/2 + sqrt(sumKL)/2 - sumKL/8`` while ``sqrt(sumKL)/2 <= 1``;
       beyond ``sumKL = 4`` the bound is the trivial 1.

    The bound is concave in sumKL (second derivative ``-sumKL^{-3/2}/8``), so the *mean* AUC of
    a scorer over batches is at most the mean of the per-batch bounds, itself at most the bound
    at the mean sumKL; the largest per-batch sumKL bounds every batch's AUC.

    What it covers. ``P1`` and ``P0`` are the model's laws (Gaussian, isotropic per class, moments
    estimated from the batch), so the bound is exact for the model and a guide for real
    gradients. The leak AUC measured per batch is an estimate from the batch's few positives:
    its average over batches estimates the mean AUC, while a high quantile of it can exceed the
    bound by sampling noise alone.

    >>> round(auc_bound(0.64), 4), round(auc_bound(0.16), 4)
    (0.82, 0.68)
    """
    if sumkl < 0:
        raise ValueError(f"sumkl must be >= 0; got {sumkl}")
    return 1.0 if sumkl >= 4.0 else 0.5 + math.sqrt(sumkl) / 2.0 - sumkl / 8.0


def solve(p: float, u: float, v: float, g_norm_square: float, power: float, dim: int) -> tuple[Lambdas, float]:
    """The noise minimising sumKL within the power budget, and that minimal sumKL.

    Args:
        p: fraction of positives in the batch, in (0, 1).
        u: mean per-coordinate variance of the negatives' gradients (>= 0).
        v: mean per-coordinate variance of the positives' gradients (>= 0).
        g_norm_square: ``G = ||mean_pos - mean_neg||^2`` (>= 0).
        power: the budget ``P`` on the expected squared norm of the noise (>= 0).
        dim: the gradient dimension ``d`` (>= 1).

    Returns:
        ``(lambdas, sumkl)`` with ``lambdas = (l1_pos, l2_pos, l1_neg, l2_neg)``:
        ``l1_pos`` / ``l1_neg`` the noise variance of positives / negatives along
        ``Delta``, ``l2_pos`` / ``l2_neg`` their noise variance in each direction
        orthogonal to ``Delta``. At the optimum the budget is spent exactly
        (``p (l1_pos + (d-1) l2_pos) + (1-p) (l1_neg + (d-1) l2_neg) = P``),
        ``l2 <= l1`` per class, and the class with the larger variance has ``l2 = 0``.
        All-zero statistics (identical gradients) need no noise: ``(NO_NOISE, 0.0)``.
    """
    _check_inputs(p, u, v, g_norm_square, power, dim)
    scale = g_norm_square + u + v
    if scale == 0.0:
        return NO_NOISE, 0.0
    problem = _Problem(p, u / scale, v / scale, g_norm_square / scale, power / scale, dim)
    w = problem.best_w()
    lambdas, kl = problem.at(w)
    return tuple(x * scale for x in lambdas), kl  # type: ignore[return-value]


@dataclass(frozen=True)
class Solution:
    """Marvell's noise for one batch.

    Attributes:
        lambdas: ``(l1_pos, l2_pos, l1_neg, l2_neg)`` (see :func:`solve`).
        sumkl: the sumKL these lambdas achieve.
        power: the noise power budget ``P`` used.
        power_scale: ``s`` with ``P = s * power_unit(...)``.
    """

    lambdas: Lambdas
    sumkl: float
    power: float
    power_scale: float


def power_unit(u: float, v: float, g_norm_square: float, dim: int) -> float:
    """The unit of the power budget: ``G``, or ``d * max(u, v)`` when the class means coincide (G = 0)."""
    return g_norm_square if g_norm_square > 0 else dim * max(u, v)


def solve_power_scale(p: float, u: float, v: float, g_norm_square: float, dim: int, *,
                      power_scale: float) -> Solution:
    """Fixed power-scale mode: ``P = s * G`` (see :func:`power_unit`)."""
    power = power_scale * power_unit(u, v, g_norm_square, dim)
    lambdas, kl = solve(p, u, v, g_norm_square, power, dim)
    return Solution(lambdas, kl, power, power_scale)


def solve_threshold(p: float, u: float, v: float, g_norm_square: float, dim: int, *,
                    threshold: float) -> Solution:
    """Threshold mode: ``P = s * G`` with ``s = 1, 1.5, 1.5^2, ...`` until sumKL <= ``threshold``.

    sumKL tends to 0 as the power grows, so this ends; it raises ``RuntimeError``
    after :data:`MAX_THRESHOLD_ROUNDS` rounds (``s`` about 1e35) all the same.
    """
    if not threshold > 0:
        raise ValueError(f"threshold must be > 0; got {threshold}")
    scale = 1.0
    for _ in range(MAX_THRESHOLD_ROUNDS):
        solution = solve_power_scale(p, u, v, g_norm_square, dim, power_scale=scale)
        if solution.sumkl <= threshold:
            return solution
        scale *= THRESHOLD_GROWTH
    raise RuntimeError(f"sumKL stayed above {threshold} up to power scale {scale:.3g}")


def _check_inputs(p: float, u: float, v: float, g: float, power: float, dim: int) -> None:
    if not 0.0 < p < 1.0:
        raise ValueError(f"p (fraction of positives) must be in (0, 1): a batch needs both classes; got {p}")
    for name, value in (("u", u), ("v", v), ("g_norm_square", g), ("power", power)):
        if not (value >= 0.0 and math.isfinite(value)):
            raise ValueError(f"{name} must be finite and >= 0; got {value}")
    if not (isinstance(dim, int) and dim >= 1):
        raise ValueError(f"dim must be an integer >= 1; got {dim!r}")


@dataclass(frozen=True)
class _Problem:
    """One normalised instance; ``w`` is the across-noise ``l2`` of the smaller-variance class."""

    p: float
    u: float
    v: float
    g: float
    power: float
    dim: int

    @property
    def noisy_class_is_positive(self) -> bool:
        """The positives get the across-noise when their variance is the smaller one."""
        return self.v < self.u

    @property
    def weight(self) -> float:
        """Probability mass of the class that gets the across-noise."""
        return self.p if self.noisy_class_is_positive else 1.0 - self.p

    @property
    def w_max(self) -> float:
        """Largest useful ``w``: equal variances across Delta, or the whole budget (``l1 >= l2 = w``)."""
        if self.dim == 1:
            return 0.0
        return min(abs(self.u - self.v), self.power / (self.weight * self.dim))

    def best_w(self) -> float:
        w_max = self.w_max
        if w_max <= 0.0:
            return 0.0
        grid = [w_max * k / (SCAN_POINTS - 1) for k in range(SCAN_POINTS)]
        values = [self.at(w)[1] for w in grid]
        k = min(range(SCAN_POINTS), key=values.__getitem__)
        lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, SCAN_POINTS - 1)]
        refined = minimize_scalar(lambda w: self.at(w)[1], bounds=(lo, hi), method="bounded",
                                  options={"xatol": 1e-12 * w_max})
        return float(refined.x) if refined.fun < values[k] else grid[k]

    def at(self, w: float) -> tuple[Lambdas, float]:
        """The best ``l1`` pair for across-noise ``w`` (closed form), and the sumKL reached."""
        p, u, v, g = self.p, self.u, self.v, self.g
        w_pos, w_neg = (w, 0.0) if self.noisy_class_is_positive else (0.0, w)
        c = self.power - self.weight * (self.dim - 1) * w + p * v + (1.0 - p) * u
        a_low, b_low = u + w_neg, v + w_pos  # l1_y >= l2_y
        ratio = math.sqrt((c + (1.0 - p) * g) / (c + p * g))
        b_star = ratio * c / (p * ratio + 1.0 - p)
        b_high = (c - (1.0 - p) * a_low) / p
        big_b = min(max(b_star, b_low), b_high)
        big_a = (c - p * big_b) / (1.0 - p)
        lambdas = (max(big_b - v, w_pos), w_pos, max(big_a - u, w_neg), w_neg)  # l1 >= l2 despite rounding
        return lambdas, _sum_kl(big_a, big_b, u + w_neg, v + w_pos, g, self.dim)
