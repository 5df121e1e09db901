"""Plain-JSON tables for the live page: marginal densities per parameter."""

from __future__ import annotations

import math

import numpy as np

from .reference import ReferencePosterior

GRID = 241
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def gaussian_density(x: np.ndarray, mean: float, log_sd: float, *, cap: float) -> np.ndarray:
    """N(mean, e^{2 log_sd}) density at x, computed in log space and capped at ``cap``.

    A private draw's sd can be far below the smallest float (e^s underflows); its density is then a
    spike at the mean, drawn up to ``cap``.
    """
    log_sd = max(log_sd, -700.0)  # below this e^{-log_sd} overflows; the spike is capped anyway
    with np.errstate(over="ignore"):
        z2 = ((x - mean) * math.exp(-log_sd)) ** 2
    return np.exp(np.minimum(-0.5 * z2 - log_sd - HALF_LOG_2PI, math.log(cap)))


def density_table(reference: ReferencePosterior, z_vi: np.ndarray, z_private: np.ndarray) -> dict:
    """Per parameter: x grid, reference, non-private VI and private-draw densities, and the y range to show.

    The grid spans the reference and both approximations (at most +-4 sds of each around its mean)
    and includes points around the private mean, so a narrow private density is not missed.
    """
    p = len(reference.mean)
    out = {}
    for j, name in enumerate(reference.names):
        mu, sd = reference.mean[j], reference.sd[j]
        centres = [(mu, sd), (z_vi[j], math.exp(z_vi[p + j])), (z_private[j], min(math.exp(z_private[p + j]), 50 * sd))]
        lo = min(c - 4 * s for c, s in centres)
        hi = max(c + 4 * s for c, s in centres)
        priv_sd = math.exp(max(z_private[p + j], -700.0))
        x = np.unique(np.concatenate([np.linspace(lo, hi, GRID),
                                      z_private[j] + priv_sd * np.linspace(-4, 4, 41), [z_private[j]]]))
        x = x[(x >= lo) & (x <= hi)]
        ref = reference.density(j, x)
        vi = gaussian_density(x, z_vi[j], z_vi[p + j], cap=1e300)
        y_max = 1.3 * float(max(ref.max(), vi.max()))
        out[name] = {
            "x": x.tolist(), "reference": ref.tolist(), "vi": vi.tolist(),
            "private": gaussian_density(x, z_private[j], z_private[p + j], cap=10 * y_max).tolist(),
            "y_max": y_max, "private_log_sd_ratio": float(z_private[p + j] - math.log(sd)),
        }
    return out
