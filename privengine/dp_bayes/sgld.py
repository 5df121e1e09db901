"""Preconditioned stochastic-gradient Langevin dynamics, vectorised over chains.

The chains move in sampler coordinates y (C, D), mapped to the target's z by an elementwise
transform z = T(y) (:class:`ElementwiseTransform`: an affine map, i.e. a diagonal preconditioner,
or a map whose slope differs on the two sides of a centre, see below). With g an unbiased
estimate of grad_z log f(z) and the transform's Jacobian J, one step of every chain is

    y' = y + clip((h/2) (J g + grad_y log|J|), -r, r) + sqrt(h) xi,   xi ~ N(0, I),

the Euler-Maruyama step of the Langevin diffusion dy = (1/2) grad_y log f_Y dt + dW, whose
stationary law f_Y is f carried to y, so the chains' z = T(y) target f. The drift is clipped
to ``r`` units per step (a tamed Langevin step, cf. Brosse et al. 2019): it changes nothing where
the drift is moderate and keeps a chain that strays onto a steep wall of log f from being thrown
arbitrarily far. SGLD is approximate: its samples carry an O(h) discretisation bias and no finite
run is exactly distributed as f. Written by hand: no library offers a batched, preconditioned SGLD
over user-supplied gradient estimates.

Why a two-sided map: under the exponential mechanism f(z) ∝ exp(c U(z)) each log-sd s_j has a long
exponential left tail of scale ~1 / (c w) (overconfident sds) and a doubly exponential wall on its
right. A constant preconditioner fitted to the tail makes steps that jump the wall (and land where
the sanitized likelihood is flat); one fitted to the wall cannot cross the tail. The map
s = s* + phi(y), phi' going from the tail's scale (y < 0) to the wall's (y > 0), gives both sides
unit scale. :func:`exponential_mechanism_transform` builds it from a locally quadratic model of U.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

# grad_log_f(z (C, D)) -> (estimate of log f (C,), estimate of grad_z log f (C, D))
GradLogF = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
# on_report(steps done, current z (C, D), mean log f per chain over the interval (C,)) -> True to stop
OnReport = Callable[[int, torch.Tensor, torch.Tensor], bool]

WALL_SCALE = 0.5  # largest slope of the log-sd map on the wall side (units of log sd per unit of y)


class SGLDDivergedError(RuntimeError):
    """A chain left the finite numbers: the step size is too large for this target."""


class ElementwiseTransform:
    """z = center + phi(y) per coordinate: slope ``tail_scale`` A for y << 0, ``wall_scale`` B from y = 0 up.

    phi(y) = B y + (A - B) (softplus(-k) - softplus(-(y + k))),   phi'(y) = B + (A - B) sigmoid(-(y + k)),

    with phi(0) = 0 and the kink at y = -k, k = log(A / B) + 2, so that phi'(y) is within 14 % of B
    for every y >= 0. All arguments are (C, D) or broadcastable, with A >= B > 0. A = B is the affine
    map z = center + A y: a diagonal preconditioner with variances A^2.
    """

    def __init__(self, center: torch.Tensor, tail_scale: torch.Tensor, wall_scale: torch.Tensor | None = None):
        self.center = center
        self.a = tail_scale
        self.b = tail_scale if wall_scale is None else wall_scale
        self.k = torch.log(self.a / self.b) + 2

    def forward(self, y: torch.Tensor) -> torch.Tensor:
        return self.center + self.b * y + (self.a - self.b) * (F.softplus(-self.k) - F.softplus(-(y + self.k)))

    def pullback(self, y: torch.Tensor, grad_z: torch.Tensor) -> torch.Tensor:
        """grad_y log f_Y = phi'(y) grad_z log f + d/dy log phi'(y)."""
        sig = torch.sigmoid(-(y + self.k))
        slope = self.b + (self.a - self.b) * sig
        return slope * grad_z - (self.a - self.b) * sig * (1 - sig) / slope


def exponential_mechanism_transform(z_star: torch.Tensor, c: torch.Tensor, entropy_weight: float
                                    ) -> ElementwiseTransform:
    """Sampler coordinates for f(z) ∝ exp(c U(z)) over mean-field z = (m, s), centred at U's maximiser z*.

    If the (sanitized) log-likelihood plus prior is locally quadratic with curvature K_j in theta_j,
    then E_q[...] = const - sum_j K_j ((m_j - m*_j)^2 + e^{2 s_j}) / 2, the optimum has
    K_j = w e^{-2 s*_j}, and under f:

    - m_j ~ N(m*_j, 1 / (c K_j)) = N(m*_j, e^{2 s*_j} / (c w))  (the sqrt(4 tau / eps) posterior-sd spread);
    - e^{2 (s_j - s*_j)} ~ Gamma(shape c w / 2, rate c w / 2), so sd(s_j) = sqrt(trigamma(c w / 2)) / 2,
      about 1 / (c w) when c w is small: a long left (overconfident) tail and a sharp wall on the right.

    The means get the affine map with those sds; the log-sds the two-sided map with the tail's sd on
    the left and at most :data:`WALL_SCALE` on the right.

    Args:
        z_star: (C, 2P) or (2P,) maximiser of U; c: (C,) or scalar inverse temperature; entropy_weight: w.
    """
    z_star = torch.atleast_2d(z_star)
    p = z_star.shape[1] // 2
    cw = (torch.as_tensor(c, dtype=z_star.dtype, device=z_star.device) * entropy_weight).reshape(-1, 1)
    sd_mean = torch.exp(z_star[:, p:]) / cw.sqrt()
    sd_log_sd = (torch.special.polygamma(1, cw / 2).sqrt() / 2).expand(-1, p)
    tail = torch.cat([sd_mean, sd_log_sd], dim=1)
    wall = torch.cat([sd_mean, sd_log_sd.clamp(max=WALL_SCALE)], dim=1)
    return ElementwiseTransform(z_star.expand_as(tail).clone(), tail, wall)


class PreconditionedSGLD:
    """The SGLD transition above for C chains at once.

    Args:
        grad_log_f: stochastic estimate of (log f, grad_z log f) for a batch of z.
        transform: z = transform.forward(y); y = 0 is the transform's centre.
        step_size: h, in sampler units (the target's sds are about 1 there).
        generator: torch generator of the injected noise (on the chains' device).
        max_drift: r, the largest drift of one step in sampler units.
    """

    def __init__(self, grad_log_f: GradLogF, *, transform: ElementwiseTransform, step_size: float,
                 generator: torch.Generator, max_drift: float = 1.0):
        if step_size <= 0:
            raise ValueError(f"step_size must be > 0; got {step_size}")
        self.grad_log_f = grad_log_f
        self.transform = transform
        self.step_size = float(step_size)
        self.generator = generator
        self.max_drift = float(max_drift)

    def step(self, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One transition of every chain: (new y (C, D), estimate of log f at the old point (C,))."""
        log_f, grad_z = self.grad_log_f(self.transform.forward(y))
        drift = (0.5 * self.step_size * self.transform.pullback(y, grad_z)).clamp_(-self.max_drift, self.max_drift)
        noise = torch.randn(y.shape, generator=self.generator, device=y.device, dtype=y.dtype)
        return y + drift + self.step_size**0.5 * noise, log_f

    def run(self, y: torch.Tensor, steps: int, *, report_every: int = 100,
            on_report: OnReport | None = None) -> tuple[torch.Tensor, int]:
        """Run ``steps`` transitions from y; return (final y, steps done), stopping when ``on_report`` says so.

        ``on_report`` sees z = transform(y). Raises :class:`SGLDDivergedError` if a chain becomes
        non-finite (checked at each report).
        """
        log_f_sum = torch.zeros(y.shape[0], device=y.device, dtype=y.dtype)
        since = 0
        for done in range(1, steps + 1):
            y, log_f = self.step(y)
            log_f_sum += log_f
            since += 1
            if done % report_every == 0 or done == steps:
                z = self.transform.forward(y)
                if not bool(torch.isfinite(z).all()):
                    raise SGLDDivergedError(f"SGLD diverged after {done} steps: lower the step size "
                                            f"(now {self.step_size:g})")
                if on_report is not None and on_report(done, z, log_f_sum / since):
                    return y, done
                log_f_sum.zero_()
                since = 0
        return y, steps
