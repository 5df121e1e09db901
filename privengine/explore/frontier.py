"""Privacy-utility frontiers: which numbers of a run are its privacy and its utility, and the Pareto set.

A mechanism declares a :class:`Frontier` in its registration: the privacy axis (the headline
epsilon of its claims, or a leakage measure where no epsilon exists) and its utility metrics,
each with the direction in which it is better. Values are read from a run's summary by
:func:`run_values`: every finite top-level number, plus ``headline_epsilon``.

>>> pareto([(1.0, 0.8), (2.0, 0.9), (2.0, 0.85), (3.0, 0.7)], privacy_better="lower", utility_better="higher")
[0, 1]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from privengine.claims import headline_of
from privengine.errors import ConfigError

HEADLINE_EPSILON = "headline_epsilon"
DIRECTIONS = ("higher", "lower")


@dataclass(frozen=True)
class Axis:
    """One metric of a frontier: its key in :func:`run_values`, a label with units, and which way is better.

    ``kind`` says what is measured, so sweeps of different mechanisms can share a chart: PATE's
    ``student_accuracy`` and DP-SGD's ``best_test_acc`` are both of kind ``"test_accuracy"``
    (default: the name itself). ``covered``: whether the value is computed from the released
    outputs and public data only, so that choosing a run by it is covered by the sweep's claim
    (False for errors measured against a posterior computed from the private data).
    ``select_by``: the summary number runs are *chosen* by wherever this axis decides (the Pareto set, the best
    run of a random-repetition sweep), when it is not the reported number itself: DP-SGD reports
    ``best_test_acc`` (test part of its held-out split) and chooses by ``best_val_acc`` (the validation part), so
    the number shown was not used to pick the run it belongs to. Empty: the axis itself (:attr:`selector`).
    """

    name: str
    label: str
    better: str
    kind: str = ""
    covered: bool = True
    select_by: str = ""

    def __post_init__(self) -> None:
        if self.better not in DIRECTIONS:
            raise ValueError(f"better must be one of {DIRECTIONS}; got {self.better!r}")
        if not self.kind:
            object.__setattr__(self, "kind", self.name)

    @property
    def selector(self) -> str:
        """The run-summary number runs are chosen by on this axis (``select_by``, else the axis' own)."""
        return self.select_by or self.name

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "label": self.label, "better": self.better, "kind": self.kind,
                "covered": self.covered} | ({"select_by": self.select_by} if self.select_by else {})

    def comparable(self, other: "Axis") -> bool:
        """Whether two axes measure the same thing the same way (so their sweeps may share a chart)."""
        return self.kind == other.kind and self.better == other.better


EPSILON_AXIS = Axis(HEADLINE_EPSILON, "ε per run (its headline claim)", "lower")
TEST_ACCURACY = "test_accuracy"  # the kind of every accuracy of a released model on held-out data


@dataclass(frozen=True)
class Frontier:
    """What a mechanism's sweeps plot: ``privacy`` on x, ``utility[0]`` (by default) on y.

    ``compose``: ``"module:function"`` composing the privacy of several runs into one claim
    (``function(runs) -> PrivacyClaim``, ``runs`` a list of store records) with the mechanism's
    own accountant; without it, sweeps compose the runs' headline claims by basic composition.
    ``repeat_and_select``: ``"module:function"`` for the Papernot & Steinke random-repetition
    bound (``function(runs, varied, shape, mean) -> PrivacyClaim | str``), where the mechanism
    reports RDP; ``repeat_neutral``: the knobs such a sweep may vary (they leave every run's RDP unchanged).
    ``fixed``: knobs a sweep may not vary, each with the reason (e.g. what the private data is, or the
    neighbouring relation: runs that differ in them do not compose).
    """

    privacy: Axis
    utility: tuple[Axis, ...]
    compose: str | None = None
    repeat_and_select: str | None = None
    repeat_neutral: frozenset[str] = frozenset()
    fixed: tuple[tuple[str, str], ...] = ()

    def utility_axis(self, name: str) -> Axis:
        """The declared utility axis called ``name`` (ConfigError naming the declared ones otherwise)."""
        for axis in self.utility:
            if axis.name == name:
                return axis
        raise ConfigError("utility", f"must be one of {', '.join(a.name for a in self.utility)}; got {name!r}")


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
