"""Released posteriors as intervals, and how they are scored: errors, sd ratio, KL and 90 % coverage.

Every method's release is reduced to a :class:`Released`: per parameter (P,) a mean, an sd and the
central 90 % credible interval [lower, upper]. For a mean-field Gaussian N(m, e^{2s}) the interval is
m -+ z_0.95 e^s; for posterior samples it is their 5 % and 95 % quantiles.

Calibration: over repeated releases (fresh noise, and fresh data where the method makes that cheap),
``coverage_90`` is the fraction of (release, parameter) pairs whose interval contains the true
generating value. A calibrated posterior averaged over data drawn from its prior covers 90 %; with
weak priors and the data drawn at fixed true values it stays close to that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .metrics import score
from .reference import ReferencePosterior

Z_95 = 1.6448536269514722  # standard normal 95 % quantile
LOG_SD_FLOOR = -700.0      # e^s below this underflows; the interval is then a point


@dataclass(frozen=True)
class Released:
    """One released posterior summary: ``mean``, ``sd``, ``lower``, ``upper`` (P,) and ``log_sd`` (P,)."""

    mean: np.ndarray
    log_sd: np.ndarray
    lower: np.ndarray
    upper: np.ndarray

    @property
    def sd(self) -> np.ndarray:
        return np.exp(np.maximum(self.log_sd, LOG_SD_FLOOR))

    @property
    def z(self) -> np.ndarray:
        """(mean, log sd) (2P,): the mean-field Gaussian with the released moments, for :func:`~.metrics.score`."""
        return np.concatenate([self.mean, self.log_sd])

    @classmethod
    def mean_field(cls, z: np.ndarray) -> "Released":
        """From z = (m, s) (2P,) of a mean-field Gaussian."""
        z = np.asarray(z, dtype=float)
        p = len(z) // 2
        m, s = z[:p], z[p:]
        half = Z_95 * np.exp(np.maximum(s, LOG_SD_FLOOR))
        return cls(m, s, m - half, m + half)

    @classmethod
    def samples(cls, theta: np.ndarray) -> "Released":
        """From posterior samples theta (S, P): their mean, sd and 5 % / 95 % quantiles."""
        lower, upper = np.quantile(theta, [0.05, 0.95], axis=0)
        return cls(theta.mean(0), np.log(np.maximum(theta.std(0), 1e-300)), lower, upper)

    def covers(self, truth: np.ndarray) -> np.ndarray:
        """Whether each central 90 % interval contains the true value (P,) bool."""
        return (self.lower <= truth) & (truth <= self.upper)


def reference_release(reference: ReferencePosterior) -> Released:
    """The non-private reference posterior as a release: its mean and sd, interval mean -+ z_0.95 sd.

    The Gaussian interval is exact for the linear model's coefficients given sigma, and close to the
    exact marginal quantiles at the sample sizes used here.
    """
    return Released.mean_field(np.concatenate([reference.mean, np.log(reference.sd)]))


def evaluate(released: Released, reference: ReferencePosterior, truth: np.ndarray | None, *,
             coefficient_count: int | None = None) -> dict[str, float]:
    """One row of scores: errors against the truth and the reference, sd ratio, KL, and the covered fraction
    (``truth`` None, a stored data set's records, whose generating parameters are unknown: the reference's only).

    - ``truth_error_rms``: RMS over parameters of |mean - truth| in the parameters' own units;
    - ``truth_coef_error_rms``: the same over the first ``coefficient_count`` parameters only (the regression
      function's beta and b, without log sigma; default all);
    - ``truth_error_sd_rms``: RMS of |mean - truth| in reference posterior sds;
    - ``mean_error_sd_rms``, ``sd_ratio_geomean``, ``log10_sd_ratio_mean``, ``kl``, ``w2_sd_units``: against the
      reference (:func:`~.metrics.score`; the KL of the mean-field Gaussian with the released moments);
    - ``covered``: fraction of parameters whose 90 % interval contains the truth.
    """
    if truth is None:
        return score(released.z, reference).summary()
    diff = released.mean - truth
    coef = diff[: coefficient_count]
    return {
        "truth_error_rms": float(math.sqrt(np.mean(diff**2))),
        "truth_coef_error_rms": float(math.sqrt(np.mean(coef**2))),
        "truth_error_sd_rms": float(math.sqrt(np.mean((diff / reference.sd) ** 2))),
        **score(released.z, reference).summary(),
        "covered": float(np.mean(released.covers(truth))),
    }


def coverage_90(rows: list[dict]) -> float:
    """Fraction of true values inside the released 90 % intervals over ``rows`` (each with P parameters)."""
    return float(np.mean([r["covered"] for r in rows])) if rows else float("nan")
