"""Sufficient-statistics perturbation (SSP) for Bayesian linear regression: the release.

Each record becomes a vector in [-1, 1]^{d+2} by clipping to the public domain and dividing by its
bounds b = (B_x, ..., B_x, 1, B_y):

    u = (clip(x, -B_x, B_x) / B_x,  1,  (clip(y, y_low, y_high) - c) / B_y),
    c = (y_low + y_high) / 2,  B_y = (y_high - y_low) / 2.

The linear model's sufficient statistics are the entries of S = sum_i u_i u_i^T ((d+2, d+2): X~^T X~,
X~^T y', y'^T y' of the rescaled records), and the mechanism releases the E unique entries (j <= k)
plus i.i.d. Gaussian noise N(0, s^2) each. The constant entry S_{d,d} = N is left out under
replace-one (it is public there: it never changes). In the data's own units entry (j, k) is
b_j b_k S_jk with noise sd b_j b_k s (:func:`entry_scales`): the rescaling spends the budget evenly
over the entries' ranges instead of letting y'^T y' (range B_y^2) drown X~^T X~ (range B_x^2).

Sensitivity of the released vector (a record adds u_j u_k to entry (j, k), |u_j| <= 1):

- add/remove: one record adds or removes u u^T, so Delta_2 = sqrt(E) and Delta_1 = E, attained by
  u = (1, ..., 1): exact.
- replace-one: u u^T - u' u'^T. A diagonal entry u_j^2 - u'_j^2 lies in [-1, 1] (0 for the constant),
  an off-diagonal one u_j u_k - u'_j u'_k in [-2, 2], so Delta_2 <= sqrt(D + 4 O) and Delta_1 <= D + 2 O,
  D = d + 1 non-constant diagonal entries, O = (d+2)(d+1)/2 off-diagonal ones. An upper bound: the
  off-diagonal extremes need sign patterns of u' that no single vector has.

Noise: the Gaussian mechanism with sensitivity Delta_2 and noise sd s is mu-GDP with mu = Delta_2 / s
(Dong, Roth & Su 2019), i.e. (epsilon, delta)-DP exactly for

    delta(epsilon) = Phi(-epsilon / mu + mu / 2) - e^epsilon Phi(-epsilon / mu - mu / 2)

(the analytic Gaussian mechanism, Balle & Wang 2018, Theorem 8; :mod:`privengine.accounting.gaussian`).
Releases of several Gaussian mechanisms compose to sqrt(sum mu_i^2)-GDP, exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from privengine.accounting.gaussian import gaussian_mu
from privengine.errors import ConfigError



@dataclass(frozen=True)
class Domain:
    """The public data domain: features in [-x_bound, x_bound], responses in [y_low, y_high]."""

    x_bound: float
    y_low: float
    y_high: float

    def __post_init__(self):
        if not (math.isfinite(self.x_bound) and self.x_bound > 0):
            raise ConfigError("x_bound", f"must be a finite number > 0; got {self.x_bound!r}")
        if not (math.isfinite(self.y_low) and math.isfinite(self.y_high)):
            raise ConfigError("y_low", f"and y_high must be finite; got [{self.y_low!r}, {self.y_high!r}]")
        if not self.y_high > self.y_low:
            raise ConfigError("y_high", f"must be > y_low = {self.y_low:g}; got {self.y_high:g}")

    @property
    def centre(self) -> float:
        """c = (y_low + y_high) / 2, subtracted from every response."""
        return 0.5 * (self.y_low + self.y_high)

    @property
    def half_width(self) -> float:
        """B_y = (y_high - y_low) / 2, the bound of |y - c|."""
        return 0.5 * (self.y_high - self.y_low)

    def bounds(self, d: int) -> np.ndarray:
        """b (d+2,): the bound of |v_j| for each coordinate of a record vector."""
        return np.array([self.x_bound] * d + [1.0, self.half_width])

    def record_vectors(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        """u (N, d+2) in [-1, 1] from features x (N, d) and responses y (N,), and the fraction of records clipped.

        The fraction is a diagnostic of the raw data (not private).
        """
        xc = np.clip(x, -self.x_bound, self.x_bound)
        yc = np.clip(y, self.y_low, self.y_high)
        clipped = float(np.mean((xc != x).any(axis=1) | (yc != y)))
        return np.hstack([xc / self.x_bound, np.ones((len(y), 1)),
                          ((yc - self.centre) / self.half_width)[:, None]]), clipped

    def entry_scales(self, pairs: np.ndarray, d: int) -> np.ndarray:
        """b_j b_k (E,) for released pairs (E, 2): entry (j, k) of S in the data's units (y centred at c)."""
        b = self.bounds(d)
        return b[pairs[:, 0]] * b[pairs[:, 1]]


def released_entries(d: int, neighbouring: str) -> np.ndarray:
    """Index pairs (E, 2) of the released entries (j <= k) of S, row-major; (d, d) = N left out under replace-one."""
    pairs = [(j, k) for j in range(d + 2) for k in range(j, d + 2)]
    if neighbouring == "replace-one":
        pairs.remove((d, d))
    return np.array(pairs)


def sensitivity(d: int, neighbouring: str) -> tuple[float, float]:
    """(Delta_1, Delta_2) of the released entries of rescaled records (see the module docstring).

    >>> sensitivity(2, "add-remove"), sensitivity(2, "replace-one")
    ((10.0, 3.1622776601683795), (15.0, 5.196152422706632))
    """
    pairs = released_entries(d, neighbouring)
    diagonal = pairs[:, 0] == pairs[:, 1]
    if neighbouring == "add-remove":
        change = np.ones(len(pairs))
    elif neighbouring == "replace-one":
        change = np.where(diagonal, 1.0, 2.0)
    else:
        raise ValueError(f"unknown neighbouring relation {neighbouring!r}")
    return float(change.sum()), float(math.sqrt((change**2).sum()))


def calibration(d: int, neighbouring: str, epsilon: float, delta: float) -> tuple[float, float, float]:
    """``(Delta_2, mu, noise sd)`` of the Gaussian mechanism releasing the statistics of ``d`` features at exactly
    ``(epsilon, delta)`` under ``neighbouring``: ``mu`` from the analytic Gaussian mechanism, ``sd = Delta_2 / mu``.
    The release and its audit both take the noise from here."""
    _, delta_2 = sensitivity(d, neighbouring)
    mu = gaussian_mu(epsilon, delta)
    return delta_2, mu, delta_2 / mu


def statistics(v: np.ndarray) -> np.ndarray:
    """S = sum_i v_i v_i^T (d+2, d+2) of record vectors v (N, d+2)."""
    return v.T @ v


def release(stats: np.ndarray, pairs: np.ndarray, noise_sd: np.ndarray, generator: torch.Generator) -> np.ndarray:
    """Noisy released entries Z (R, E) of R statistics matrices (R, d+2, d+2) of rescaled records, noise sd (R,).

    The noise is drawn from ``generator`` (the run's noise stream) in float64.
    """
    exact = stats[:, pairs[:, 0], pairs[:, 1]]
    noise = torch.randn(exact.shape, generator=generator, dtype=torch.float64).numpy()
    return exact + noise * np.asarray(noise_sd, dtype=float)[:, None]
