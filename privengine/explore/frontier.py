"""Privacy-utility frontiers: reading a run's numbers on a mechanism's declared axes, and the Pareto set.

A mechanism declares a :class:`~privengine.registry.Frontier` in its registration (the mechanism
contract): the privacy axis (the headline epsilon of its claims, or a leakage measure where no
epsilon exists) and its utility metrics, each with the direction in which it is better. Values are
read from a run's summary by :func:`run_values`: every finite top-level number, plus
``headline_epsilon``; :func:`pareto` keeps the runs no other run beats on both axes.

>>> pareto([(1.0, 0.8), (2.0, 0.9), (2.0, 0.85), (3.0, 0.7)], privacy_better="lower", utility_better="higher")
[0, 1]
"""

from __future__ import annotations

import math
from typing import Any

from privengine.claims import headline_of
from privengine.registry import HEADLINE_EPSILON


def run_values(summary: dict[str, Any] | None) -> dict[str, float]:
    """Every finite top-level number of a run summary, plus its headline epsilon (if it states one)."""
    values = {k: float(v) for k, v in (summary or {}).items()
              if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}
    headline = headline_of(summary)
    if headline is not None:
        values[HEADLINE_EPSILON] = float(headline.epsilon)
    return values


def pareto(points: list[tuple[float, float]], *, privacy_better: str, utility_better: str) -> list[int]:
    """Indices of the points no other point dominates, ordered along the privacy axis.

    ``points``: ``(privacy, utility)`` pairs (NaN: skipped). A point is dominated when another
    is at least as good on both axes and better on one; of equal points the first is kept.
    """
    sign_p = 1.0 if privacy_better == "lower" else -1.0
    sign_u = -1.0 if utility_better == "higher" else 1.0
    keyed = [(sign_p * p, sign_u * u, i) for i, (p, u) in enumerate(points) if not (math.isnan(p) or math.isnan(u))]
    keyed.sort()
    front, best = [], math.inf
    for p, u, i in keyed:  # by privacy (best first), then utility (best first): keep strict improvements
        if u < best:
            front.append(i)
            best = u
    return front
