r"""The worst-case neighbouring data sets of the DP-Bayes audit, one construction per release method.

The linear model throughout (the DP-Bayes default, and the only model of ssp): theta = (beta, b, log sigma).

Every pair starts from the same seeded synthetic data set ``base`` (N records) and changes one record in
the way that, within what the method's guarantee allows, moves its release the most along one public
direction ``v``; the audit's statistic is the release projected on ``v`` (higher = evidence for ``D1``).
Soundness does not depend on these choices (any neighbouring pair gives a valid lower bound); they only
decide how much of the claim the audit can see.

exponential (replace one record)
    U(z) = E_q[sum_i gamma_i] + ..., gamma = tau tanh(loglik / tau) in (-tau, tau), and the density of the
    released z is f(z) ∝ exp(c U(z)), c = eps / (2 Delta_U). An outlier is harmless: its gamma is -tau
    for every z, so it does not move f. A record moves f only where its gamma varies over the region
    where f has mass, and it moves it most when gamma goes from its top to -tau across that region.
    The records sit at leverage ``x = L e_1`` with response ``y = yhat(x) +- r`` (``yhat`` the base
    data's posterior mode, ``+r`` in D1, ``-r`` in D0): their residual at coefficient ``beta_1 = m + t``
    is ``+-r - L t``, so D1's record pulls the released mean ``m_1`` up and D0's pulls it down. Under
    the exact mechanism (Laplace approximation of the base posterior, sd ``S = sd_1 / sqrt(c w)`` of
    ``m_1`` under f, noise sd ``sigma``) the law of ``t`` is ``phi(t / S) exp(c gamma(+-r - L t))``
    up to normalisation; ``(L, r)`` maximise the standardised shift ``(E_1[t] - E_0[t]) / S`` of that
    law over a grid (L S / sigma in [1/4, 8], r / sigma in [1/4, 4]). Statistic: released ``m_1``.

ssp (replace one record)
    Records are clipped to the domain and rescaled to ``u`` in [-1, 1]^{d+2} (constant coordinate 1);
    the release is the entries ``(u u^T)_{jk}``, j <= k, summed over records, plus N(0, s^2) each. The
    record ``u = (1, ..., 1)`` is replaced by ``u'``, the same with the first ``k = floor((d+2)/2)``
    non-constant coordinates negated (features first, then y): entry (j, k) changes by
    ``u_j u_k - u'_j u'_k``, which is 2 where exactly one of j, k is negated and 0 otherwise, so the
    change has L2 norm ``2 sqrt(k (d + 2 - k))``, the largest over sign patterns (4 for d = 2; a grid
    search over u, u' in {-1, -1/2, 0, 1/2, 1}^{d+1} finds no larger change for d <= 3). It is below
    the claim's Delta_2 = sqrt(D + 4 O), an upper bound that no single pair of records attains.
    Statistic: the release projected on that change (the likelihood-ratio test of the Gaussian noise).

dpvi (add one record: Opacus' relation)
    DP-SGD clips each record's gradient to norm C; a record can add at most C, along its gradient, each
    step it is sampled. D1 = base plus the record ``x = L e_1``, ``y = yhat(x) + R`` with L = 100 and
    R = 20: its gradient in the mean of beta_1 (about R L / sigma^2) exceeds C by orders of magnitude and
    the other components (intercept R / sigma^2, log sigma about (R^2 + L^2 sd_1^2) / sigma^2) are at
    most a third of it, so at every step it is sampled it adds about C along the same released
    coordinate and its pushes add up. Statistic: released ``m_1``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ..dp_bayes import ssp
from ..dp_bayes.config import DpBayesConfig
from ..dp_bayes.data import Records, synthetic_records
from ..dp_bayes.laplace import laplace_approximation
from ..dp_bayes.models import build_model
from ..dp_bayes.releases import domain_of
from ..dp_bayes.sanitizer import sensitivity

_LEVERAGE_GRID = np.geomspace(0.25, 8.0, 16)   # L S / sigma
_RESIDUAL_GRID = np.linspace(0.25, 4.0, 16)    # r / sigma
_QUADRATURE = np.linspace(-6.0, 6.0, 1201)     # t / S
DPVI_LEVERAGE, DPVI_RESIDUAL = 100.0, 20.0


@dataclass(frozen=True)
class Neighbours:
    """Two neighbouring data sets, what differs, and the released statistic the test thresholds."""

    null: Records
    alt: Records
    record_null: str
    record_alt: str
    statistic: str
    direction: np.ndarray | None = None  # ssp: the released entries' change (rescaled units)


def base_records(config: DpBayesConfig) -> Records:
    return synthetic_records(config.model, n=config.n_records, coefficients=config.coefficients,
                             intercept=config.intercept, noise_sd=config.noise_sd, seed=config.data_seed)


def _describe(x: torch.Tensor, y: float) -> str:
    return f"x = ({', '.join(f'{v:.4g}' for v in x.tolist())}), y = {y:.4g}"


def _fit(config: DpBayesConfig, base: Records) -> tuple[np.ndarray, np.ndarray]:
    """Posterior mode and mean-field sds of the base data (Laplace approximation): the auditor's view of it."""
    model = build_model(config.model, base, prior_sd=config.prior_sd, sigma_prior_scale=config.sigma_prior_scale)
    laplace = laplace_approximation(model)
    return laplace.mode.numpy(), laplace.mean_field_sd.numpy()


def _leverage_record(base: Records, mode: np.ndarray, leverage: float, residual: float) -> tuple[torch.Tensor, float]:
    """The record ``x = leverage e_1``, ``y = yhat(x) + residual`` (yhat from the posterior mode)."""
    d = base.x.shape[1]
    x = torch.zeros(d, dtype=base.x.dtype)
    x[0] = leverage
    return x, float(mode[0] * leverage + mode[d]) + residual


def exponential_leverage(*, tau: float, c: float, entropy_weight: float, sd: float, sigma: float
                         ) -> tuple[float, float]:
    """``(L, r)`` maximising the standardised shift of ``m_1`` between the two records (module docstring)."""
    spread = sd / math.sqrt(c * entropy_weight)
    t = _QUADRATURE[None, None, :] * spread
    lev = (_LEVERAGE_GRID * sigma / spread)[:, None, None]
    res = (_RESIDUAL_GRID * sigma)[None, :, None]

    def mean_of_t(sign: float) -> np.ndarray:
        r = sign * res - lev * t
        loglik = -math.log(sigma) - 0.5 * math.log(2 * math.pi) - 0.5 * (r / sigma) ** 2
        log_w = -0.5 * (t / spread) ** 2 + c * tau * np.tanh(loglik / tau)
        w = np.exp(log_w - log_w.max(axis=-1, keepdims=True))
        return (w * t).sum(-1) / w.sum(-1)

    shift = (mean_of_t(1.0) - mean_of_t(-1.0)) / spread
    i, j = np.unravel_index(int(np.argmax(shift)), shift.shape)
    return float(lev[i, 0, 0]), float(res[0, j, 0])


def exponential_pair(config: DpBayesConfig) -> Neighbours:
    """Record 0 of the base data replaced by the record pulling m_1 down (D0) or up (D1)."""
    base = base_records(config)
    mode, sd = _fit(config, base)
    sigma = math.exp(mode[-1])
    c = config.epsilon / (2 * sensitivity(config.tau, config.neighbouring))
    leverage, residual = exponential_leverage(tau=config.tau, c=c, entropy_weight=config.entropy_weight,
                                              sd=float(sd[0]), sigma=sigma)
    x0, y0 = _leverage_record(base, mode, leverage, -residual)
    x1, y1 = _leverage_record(base, mode, leverage, residual)
    return Neighbours(base.replace_record(0, x0, y0), base.replace_record(0, x1, y1), _describe(x0, y0),
                      _describe(x1, y1), "released mean of the first coefficient")


def ssp_pair(config: DpBayesConfig) -> Neighbours:
    """Record 0 at the domain's corner u = (1, ..., 1) (D0) or with k coordinates negated (D1)."""
    base = base_records(config)
    domain = domain_of(config)
    d = base.x.shape[1]
    signs = np.ones(d + 1)  # the non-constant coordinates: d features, then y
    signs[: (d + 2) // 2] = -1.0
    vectors = []
    for s in (np.ones(d + 1), signs):
        x = torch.as_tensor(s[:d] * domain.x_bound, dtype=base.x.dtype)
        y = domain.centre + s[d] * domain.half_width
        vectors.append((x, float(y), np.concatenate([s[:d], [1.0], s[d:]])))
    pairs = ssp.released_entries(d, config.neighbouring)
    (x0, y0, u0), (x1, y1, u1) = vectors
    change = (np.outer(u1, u1) - np.outer(u0, u0))[pairs[:, 0], pairs[:, 1]]
    return Neighbours(base.replace_record(0, x0, y0), base.replace_record(0, x1, y1), _describe(x0, y0),
                      _describe(x1, y1), "released statistics projected on their change between the records",
                      direction=change)


def dpvi_pair(config: DpBayesConfig) -> Neighbours:
    """The base data (D0) and the base data plus the always-clipped record (D1)."""
    base = base_records(config)
    mode, _ = _fit(config, base)
    x, y = _leverage_record(base, mode, DPVI_LEVERAGE, DPVI_RESIDUAL)
    alt = Records(torch.cat([base.x, x[None, :]]), torch.cat([base.y, base.y.new_tensor([y])]))
    return Neighbours(base, alt, "none (D0 lacks the record)", _describe(x, y), "released mean of the first coefficient")


PAIRS = {"exponential": exponential_pair, "ssp": ssp_pair, "dpvi": dpvi_pair}
