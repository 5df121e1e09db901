r"""The exact privacy profile of the Gaussian mechanism (mu-GDP), for the mechanisms and the audits.

The Gaussian mechanism with L2 sensitivity ``Delta`` and noise N(0, sigma^2 I) is mu-GDP with
``mu = Delta / sigma`` (Dong, Roth & Su 2019), i.e. ``(epsilon, delta)``-DP exactly for

    delta(epsilon) = Phi(-epsilon / mu + mu / 2) - e^epsilon Phi(-epsilon / mu - mu / 2)

(the analytic Gaussian mechanism, Balle & Wang 2018, Theorem 8), decreasing in epsilon.
:func:`gaussian_epsilon` inverts it in epsilon and :func:`gaussian_mu` in mu; mechanisms composed
adaptively compose to ``sqrt(sum mu_i^2)``-GDP, exactly. Written here because the libraries at hand
give this curve only through numerical PLD or RDP conversions, not in closed form; it is computed
in log space so tiny deltas keep their digits.
"""

from __future__ import annotations

import math

from scipy.special import log_ndtr

from ..errors import ConfigError

MU_MAX = 1e3  # mu beyond which gaussian_mu gives up (epsilon ~ 1e6)


def _mu(mu: float) -> float:
    if not mu > 0:
        raise ConfigError("mu", f"must be > 0; got {mu!r}")
    return float(mu)


def _delta(delta: float) -> float:
    if not 0.0 <= delta < 1.0:
        raise ConfigError("delta", f"must be in [0, 1); got {delta!r}")
    return float(delta)


def log_gaussian_delta(epsilon: float, mu: float) -> float:
    """``log delta(epsilon)`` of the mu-GDP mechanism (``-inf`` where delta is 0).

    >>> round(math.exp(log_gaussian_delta(1.0, 1.0)), 4)
    0.1269
    """
    mu = _mu(mu)
    first = float(log_ndtr(-epsilon / mu + mu / 2.0))
    second = epsilon + float(log_ndtr(-epsilon / mu - mu / 2.0))
    return first + math.log(-math.expm1(second - first)) if second < first else -math.inf


def gaussian_delta(epsilon: float, mu: float) -> float:
    """``delta`` at which the mu-Gaussian mechanism is ``(epsilon, delta)``-DP (tight).

    >>> round(gaussian_delta(0.0, 1.0), 6)        # total variation: 2 Phi(mu/2) - 1
    0.382925
    """
    return math.exp(log_gaussian_delta(epsilon, mu))


def gaussian_epsilon(mu: float, delta: float) -> float:
    """Smallest ``epsilon >= 0`` with the mu-Gaussian mechanism ``(epsilon, delta)``-DP (tight); inf at delta 0.

    >>> round(gaussian_epsilon(1.0, 1e-5), 4)
    4.3772
    """
    mu, delta = _mu(mu), _delta(delta)
    if delta == 0.0:
        return math.inf
    log_target = math.log(delta)
    if log_gaussian_delta(0.0, mu) <= log_target:
        return 0.0
    hi = 1.0
    while log_gaussian_delta(hi, mu) > log_target:
        hi *= 2.0
    from scipy.optimize import brentq  # here, as below: scipy.optimize takes 0.6 s to import, which every process
    # that imports the accountants (the registry does) paid before any root was searched

    return float(brentq(lambda e: log_gaussian_delta(e, mu) - log_target, 0.0, hi, xtol=1e-13, rtol=1e-13))


def gaussian_mu(epsilon: float, delta: float) -> float:
    """The mu for which the Gaussian mechanism is exactly ``(epsilon, delta)``-DP (noise sd = Delta / mu).

    >>> mu = gaussian_mu(1.0, 1e-5)
    >>> round(mu, 4), abs(gaussian_delta(1.0, mu) - 1e-5) < 1e-12
    (0.2681, True)
    """
    if not (epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"need epsilon > 0 and 0 < delta < 1; got {epsilon}, {delta}")
    from scipy.optimize import brentq

    return float(brentq(lambda mu: log_gaussian_delta(epsilon, mu) - math.log(delta), 1e-6, MU_MAX,
                        xtol=1e-14, rtol=1e-14))
