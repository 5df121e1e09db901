"""Scores of a mean-field Gaussian q(theta | z) against a reference posterior.

For z = (m, s) and a reference with mean mu, covariance Sigma and marginal sds sd:

- mean error in posterior sds: |m_j - mu_j| / sd_j (reported per parameter, and their RMS);
- sd ratio: e^{s_j} / sd_j (per parameter; the geometric mean over parameters);
- KL(q || N(mu, Sigma)), against the Gaussian with the reference's moments (the reference itself is
  not Gaussian, but at these sample sizes it is close to one; the direction is the one VI minimises);
- W2(q, N(mu, Sigma)), the 2-Wasserstein distance in standardised units (every coordinate divided by
  its reference sd), so that it reads in posterior sds like the mean error.

Everything is computed from (m, s) in float64 without exponentiating s where it can be avoided, so a
private draw with e^s far below the smallest float still scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .reference import ReferencePosterior


@dataclass(frozen=True)
class Scores:
    """Scores of one approximation: per-parameter arrays (P,) and scalar summaries."""

    mean_error_sd: np.ndarray
    log_sd_ratio: np.ndarray
    kl: float
    w2: float

    @property
    def sd_ratio(self) -> np.ndarray:
        return np.exp(self.log_sd_ratio)

    def summary(self) -> dict[str, float]:
        """Plain floats: RMS and max mean error (sds), geometric-mean sd ratio, its log10, KL, W2 (sds)."""
        return {
            "mean_error_sd_rms": float(np.sqrt(np.mean(self.mean_error_sd**2))),
            "mean_error_sd_max": float(np.max(self.mean_error_sd)),
            "sd_ratio_geomean": float(np.exp(np.mean(self.log_sd_ratio))),
            "log10_sd_ratio_mean": float(np.mean(self.log_sd_ratio) / np.log(10)),
            "kl": self.kl,
            "w2_sd_units": self.w2,
        }


def score(z: np.ndarray, reference: ReferencePosterior) -> Scores:
    """Scores of q(theta | z) for one z (2P,) against ``reference``."""
    z = np.asarray(z, dtype=float)
    p = len(reference.mean)
    m, s = z[:p], z[p:]
    sd = reference.sd
    diff = m - reference.mean
    prec = np.linalg.inv(reference.cov)
    _, logdet = np.linalg.slogdet(reference.cov)
    var_q = np.exp(2 * s)  # may underflow to 0 for an overconfident draw: the terms below stay finite
    kl = 0.5 * (prec.diagonal() @ var_q - p + diff @ prec @ diff + logdet - 2 * s.sum())
    return Scores(np.abs(diff) / sd, s - np.log(sd), float(kl), _w2_standardised(diff / sd, var_q / sd**2, reference))


def _w2_standardised(diff: np.ndarray, var_q: np.ndarray, reference: ReferencePosterior) -> float:
    """W2 between N(m, diag var_q) and N(mu, R), R the reference correlation matrix, all in sd units."""
    corr = reference.cov / np.outer(reference.sd, reference.sd)
    vals, vecs = np.linalg.eigh(corr)
    root = (vecs * np.sqrt(np.clip(vals, 0, None))) @ vecs.T
    cross = np.linalg.eigvalsh(root @ np.diag(var_q) @ root)
    w2sq = diff @ diff + var_q.sum() + np.trace(corr) - 2 * np.sqrt(np.clip(cross, 0, None)).sum()
    return float(np.sqrt(max(w2sq, 0.0)))
