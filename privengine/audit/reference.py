r"""Exact privacy curves of reference mechanisms: the truth that audits are tested against.

Gaussian mechanism, L2 sensitivity ``Delta``, noise N(0, sigma^2 I), ``mu = Delta / sigma``
(Balle & Wang 2018, Thm 8; it is exactly mu-GDP)::

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)

decreasing in eps; :func:`gaussian_epsilon` inverts it. Laplace mechanism, scale ``b``,
sensitivity ``Delta``, ``eps0 = Delta / b``: eps0-DP, and its exact profile is
``delta(eps) = 1 - e^{(eps - eps0)/2}`` for ``0 <= eps <= eps0`` (the eps = 0 value is the total
variation ``1 - e^{-eps0/2}`` between the two shifted Laplace laws), so
``eps(delta) = max(0, eps0 + 2 log(1 - delta))``. Randomized response (report the bit with
probability ``p = e^eps0/(1+e^eps0)``): the only non-trivial event is one output, so
``eps(delta) = max(0, log((p - delta)/(1 - p)))``. Any pair of discrete output laws ``P, Q``:
``delta(eps) = max(sum_j (P_j - e^eps Q_j)^+, sum_j (Q_j - e^eps P_j)^+)``
(:func:`discrete_epsilon`), the best that any event test on these two inputs can reach.
"""

from __future__ import annotations

import math

import numpy as np

from ..accounting.gaussian import gaussian_delta, gaussian_epsilon
from ..errors import ConfigError

__all__ = ["discrete_epsilon", "gaussian_delta", "gaussian_epsilon", "laplace_epsilon",
           "randomized_response_epsilon"]

_ROUNDING = 1e-14
_BISECTIONS = 60


def _delta(delta: float) -> float:
    if not 0.0 <= delta < 1.0:
        raise ConfigError("delta", f"must be in [0, 1); got {delta!r}")
    return float(delta)


def laplace_epsilon(eps0: float, delta: float = 0.0) -> float:
    """Exact eps at ``delta`` of the Laplace mechanism with ``Delta / b = eps0``: ``max(0, eps0 + 2 log(1-delta))``."""
    return max(0.0, eps0 + 2.0 * math.log1p(-_delta(delta)))


def randomized_response_epsilon(eps0: float, delta: float = 0.0) -> float:
    """Exact eps at ``delta`` of eps0 randomized response on one bit: ``max(0, log((p - delta)/(1 - p)))``."""
    p = 1.0 / (1.0 + math.exp(-eps0))
    delta = _delta(delta)
    return max(0.0, math.log((p - delta) / (1.0 - p))) if p > delta else 0.0


def discrete_epsilon(p, q, delta: float) -> float:
    """Exact eps at ``delta`` between two discrete output laws ``p`` and ``q`` (probability vectors over the
    same outcomes), both directions: no event test on these two inputs can show more.

    >>> round(discrete_epsilon([0.75, 0.25], [0.25, 0.75], 0.0), 6)   # randomized response at log 3
    1.098612
    """
    delta = _delta(delta)
    p, q = (np.clip(np.asarray(x, dtype=float), 0.0, None) for x in (p, q))
    if p.shape != q.shape or p.ndim != 1:
        raise ConfigError("q", f"must have the shape of p {p.shape}; got {q.shape}")

    def delta_at(eps: float) -> float:  # the tight delta at eps, decreasing in eps
        return max(float(np.clip(a - math.exp(eps) * b, 0.0, None).sum()) for a, b in ((p, q), (q, p)))

    def excess(eps: float) -> float:  # rounding of e^eps q against p can leave ~1e-16 where the truth is 0
        return delta_at(eps) - delta - _ROUNDING

    if excess(0.0) <= 0:
        return 0.0
    both = (p > 0) & (q > 0)
    hi = float(np.max(np.abs(np.log(p[both]) - np.log(q[both])))) if both.any() else 0.0
    if excess(hi) > 0:  # what is left is mass where one law is 0: no finite eps covers it
        return math.inf
    lo = 0.0  # excess(lo) > 0 >= excess(hi): bisect for the smallest eps with excess <= 0
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return hi
