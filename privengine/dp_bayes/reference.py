"""Reference posteriors p(theta | x) against which the private and non-private approximations are scored.

- Linear model: exact. Given sigma the coefficients (beta, b) are Gaussian (conjugate closed form);
  the marginal posterior of l = log sigma is proportional to p(y | sigma) * halfCauchy(sigma) * sigma,
  evaluated on a fine 1-D grid (zoomed onto its mass), so moments and marginal densities are
  exact up to the grid's quadrature error (negligible with 2001 points over the mass).
- Any model (used for the logistic one): the Laplace approximation corrected by self-normalised
  importance sampling with a Student-t proposal. Consistent, but an approximation at finite sample
  size: its Monte Carlo error is about sd / sqrt(ESS), and the result is labelled as such.

Computed in float64 on the records' device, returned as numpy arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
from scipy import stats
from scipy.special import logsumexp

from .laplace import Laplace, StopRequested, laplace_approximation, log_posterior
from .models import GLM, LinearRegression

GRID_POINTS = 2001
ZOOM_ROUNDS = 4
KEEP_NATS = 40.0  # grid cells whose log density is this far below the peak carry no mass in float64
IS_WORK = 400_000_000  # draws x records of the importance-sampling reference, at most (but >= 2000 draws)
IS_CHUNK = 10_000_000  # draws x records per batch


@dataclass(frozen=True)
class ReferencePosterior:
    """Mean (P,) and covariance (P, P) of p(theta | x) in the models' parameterisation, with marginal densities.

    Attributes:
        method: how it was computed, in words (shown with every figure built on it).
        exact: True when the moments are exact up to quadrature error.
        ess: effective sample size of an importance-sampling reference (None when exact).
    """

    names: tuple[str, ...]
    mean: np.ndarray
    cov: np.ndarray
    method: str
    exact: bool
    ess: float | None = None
    _density: object = field(default=None, repr=False)

    @property
    def sd(self) -> np.ndarray:
        return np.sqrt(np.diag(self.cov))

    def density(self, j: int, x: np.ndarray) -> np.ndarray:
        """Marginal posterior density of parameter ``j`` at the points ``x``."""
        return self._density(j, np.asarray(x, dtype=float))


def conditional_coefficients(model: LinearRegression, sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The conjugate posterior of (beta, b) given sigma: means (G, d+1) and covariances (G, d+1, d+1).

    Precision = A^T A / sigma^2 + I / prior_sd^2 and mean = Precision^{-1} A^T y / sigma^2, A = [x, 1].
    """
    stats_ = _SufficientStats.of(model)
    return stats_.conditional(np.log(np.atleast_1d(sigma)))[:2]


@dataclass(frozen=True)
class _SufficientStats:
    ata: np.ndarray
    aty: np.ndarray
    yty: float
    n: int
    prior_sd: float
    sigma_scale: float

    @classmethod
    def of(cls, model: LinearRegression) -> "_SufficientStats":
        x = model.records.x.detach().cpu().double().numpy()
        y = model.records.y.detach().cpu().double().numpy()
        a = np.hstack([x, np.ones((len(y), 1))])
        return cls(a.T @ a, a.T @ y, float(y @ y), len(y), model.prior_sd, model.sigma_prior_scale)

    def conditional(self, log_sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(means (G, p), covariances (G, p, p), log marginal posterior of log sigma up to a constant (G,))."""
        p = self.ata.shape[0]
        inv_s2 = np.exp(-2 * log_sigma)[:, None, None]
        prec = self.ata[None] * inv_s2 + np.eye(p)[None] / self.prior_sd**2
        chol = np.linalg.cholesky(prec)
        cov = np.linalg.inv(prec)
        rhs = self.aty[None, :] * inv_s2[:, :, 0]
        mean = np.einsum("gij,gj->gi", cov, rhs)
        logdet = 2 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(1)
        quad = self.yty * inv_s2[:, 0, 0] - np.einsum("gi,gi->g", rhs, mean)
        log_evidence = -self.n * log_sigma - 0.5 * logdet - 0.5 * quad  # + constants
        log_prior = -np.log1p(np.exp(2 * (log_sigma - math.log(self.sigma_scale)))) + log_sigma
        return mean, cov, log_evidence + log_prior


def linear_reference(model: LinearRegression) -> ReferencePosterior:
    """The exact posterior of the linear model (closed form given sigma, grid over log sigma)."""
    st = _SufficientStats.of(model)
    p = st.ata.shape[0]
    resid = st.yty - st.aty @ np.linalg.lstsq(st.ata, st.aty, rcond=None)[0]
    centre = 0.5 * math.log(max(resid, 1e-300) / st.n)
    lo, hi = centre - 30.0, centre + 30.0
    for _ in range(ZOOM_ROUNDS):
        grid = np.linspace(lo, hi, GRID_POINTS)
        mean, cov, lp = st.conditional(grid)
        keep = np.nonzero(lp > lp.max() - KEEP_NATS)[0]
        step = grid[1] - grid[0]
        lo, hi = grid[max(keep[0] - 1, 0)] - step, grid[min(keep[-1] + 1, GRID_POINTS - 1)] + step
    w = np.exp(lp - logsumexp(lp))
    theta_mean = np.concatenate([w @ mean, [w @ grid]])
    second = np.zeros((p + 1, p + 1))
    second[:p, :p] = np.einsum("g,gij->ij", w, cov + mean[:, :, None] * mean[:, None, :])
    second[:p, p] = second[p, :p] = w @ (mean * grid[:, None])
    second[p, p] = w @ grid**2
    full_cov = second - np.outer(theta_mean, theta_mean)
    step = grid[1] - grid[0]

    def density(j: int, x: np.ndarray) -> np.ndarray:
        if j < p:
            sd = np.sqrt(cov[:, j, j])
            return w @ stats.norm.pdf(x[None, :], loc=mean[:, j: j + 1], scale=sd[:, None])
        return np.interp(x, grid, w / step, left=0.0, right=0.0)

    return ReferencePosterior(model.names, theta_mean, full_cov,
                              "exact: conjugate closed form given sigma, 1-D grid over log sigma", True,
                              None, density)


def importance_reference(model: GLM, *, draws: int | None = None, df: float = 7.0, seed: int = 0,
                         laplace: Laplace | None = None,
                         should_stop: Callable[[], bool] | None = None) -> ReferencePosterior:
    """Laplace approximation corrected by self-normalised importance sampling (any model).

    Proposal: multivariate Student-t (``df`` degrees of freedom) at the posterior mode with the
    Laplace covariance; weights p(theta | x) / proposal(theta). ``draws`` defaults to 20000, fewer
    (at least 2000) for large data sets. Marginal densities are weighted Gaussian kernel density estimates.
    """
    n = model.records.n
    draws = draws or min(20_000, max(2000, IS_WORK // n))
    chunk = max(1, IS_CHUNK // n)
    lap = laplace or laplace_approximation(model, should_stop=should_stop)
    mode = lap.mode.double().cpu().numpy()
    cov = lap.covariance.double().cpu().numpy()
    proposal = stats.multivariate_t(loc=mode, shape=cov, df=df, seed=np.random.default_rng(seed))
    theta = proposal.rvs(size=draws).reshape(draws, -1)
    log_q = proposal.logpdf(theta)
    x = model.records.x
    parts = []
    for part in np.array_split(theta, max(1, math.ceil(draws / chunk))):
        if should_stop is not None and should_stop():
            raise StopRequested
        parts.append(log_posterior(model, torch.as_tensor(part, device=x.device, dtype=x.dtype)).double().cpu().numpy())
    log_p = np.concatenate(parts)
    log_w = log_p - log_q
    w = np.exp(log_w - logsumexp(log_w))
    mean = w @ theta
    centred = theta - mean
    full_cov = (centred * w[:, None]).T @ centred
    ess = float(1.0 / np.sum(w**2))

    def density(j: int, pts: np.ndarray) -> np.ndarray:
        return stats.gaussian_kde(theta[:, j], weights=w)(pts)

    return ReferencePosterior(model.names, mean, full_cov,
                              f"approximation: Laplace + importance sampling (Student-t proposal, "
                              f"{draws} draws, ESS {ess:.0f})", False, ess, density)


def reference_posterior(model: GLM, *, seed: int = 0, laplace: Laplace | None = None,
                        should_stop: Callable[[], bool] | None = None) -> ReferencePosterior:
    """Exact reference for the linear model, importance-sampled one otherwise (reusing ``laplace`` if given)."""
    if isinstance(model, LinearRegression):
        return linear_reference(model)
    return importance_reference(model, seed=seed, laplace=laplace, should_stop=should_stop)
