"""Numbers and knob values written for people, the way the dashboard's forms and tables show them."""

from __future__ import annotations

import math
import re
from typing import Any

from privengine import registry
from privengine.audit.interface import result_of
from privengine.claims import PrivacyClaim, claim_label, headline_of
from privengine.errors import PrivengineError
from privengine.explore.frontier import run_values
from privengine.registry import HEADLINE_EPSILON, TEST_ACCURACY, Axis, Frontier
from privengine.store import RunRecord


def number(x: float | None, digits: int = 4) -> str:
    """A number for people: ``digits`` significant digits, a dash when there is none."""
    return "—" if x is None or math.isnan(x) else f"{x:.{digits}g}"


def mean_sd(mean: float, sd: float, seeds: int) -> str:
    """``mean ± sd`` over the seeds that finished (the mean alone for one seed)."""
    return number(mean) if seeds < 2 or math.isnan(mean) else f"{number(mean)} ± {number(sd, 2)}"


def value_text(mechanism: str, name: str, value: Any) -> str:
    """A knob's value as the form shows it: choice labels, yes/no, short numbers, a dash for none."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(number(v) if isinstance(v, float) else str(v) for v in value)
    if isinstance(value, str):
        return registry.get(mechanism).config_cls.spec(name).knob.choice_label(value)
    return str(value)


def knob_label(mechanism: str, name: str) -> str:
    return registry.get(mechanism).config_cls.spec(name).label


def settings_text(mechanism: str, settings: dict[str, Any], sep: str = ", ") -> str:
    return sep.join(f"{knob_label(mechanism, k)} = {value_text(mechanism, k, v)}" for k, v in settings.items()) \
        or "the base config"


def summary_values(summary: dict | None) -> dict[str, str]:
    """A run summary's plain values, by readable name (privacy claims and tables are shown elsewhere)."""
    return {k.replace("_", " "): _readable(v) for k, v in (summary or {}).items()
            if k != "privacy" and not isinstance(v, (dict, list))}


def _readable(value: Any) -> str:
    if isinstance(value, float):
        return number(value)
    return "—" if value is None else str(value)


def headline_text(claim: PrivacyClaim | None) -> str:
    """``ε = 3, δ = 1e-05 [label]`` of a run's headline claim (label as :func:`claim_label` reads it); empty
    when it has none."""
    return f"{claim.statement()} [{claim_label(claim.label)}]" if claim else ""


def privacy_text(run: RunRecord) -> str:
    """What a run's privacy column says: its headline claim (:func:`headline_text`); for an audit, the audited
    bound against the claim it tests (``audited ε ≥ 0.06 (95 %) against claimed ε = 0.34, δ = 1e-05``, or ``ROC only,
    no audited ε; claimed ...`` for an audit without one); for a
    mechanism that states no (ε, δ), the leakage its frontier measures instead (``not DP: leak AUC 0.62``); empty
    while unknown."""
    headline = headline_of(run.summary)
    if headline is not None:
        return headline_text(headline)
    audit = result_of(run.summary)
    if audit is not None:
        return audit.headline()
    frontier = _frontier_of(run)
    if frontier is None or frontier.privacy.name == HEADLINE_EPSILON:
        return ""
    value = run_values(run.summary).get(frontier.privacy.name)
    return "" if value is None else f"not DP: {_short_label(frontier.privacy)} {number(value, 3)}"


def result_text(run: RunRecord) -> str:
    """What a run's result column says: the first utility of its mechanism's frontier, value first, then that
    axis' label (``98.37 % student test accuracy``; accuracies in percent); empty while unknown or for a mechanism
    without a frontier."""
    frontier = _frontier_of(run)
    if frontier is None:
        return ""
    axis = frontier.utility[0]
    value = run_values(run.summary).get(axis.name)
    if value is None:
        return ""
    shown = f"{value * 100:.4g} %" if axis.kind == TEST_ACCURACY else number(value, 3)
    return f"{shown} {_short_label(axis)}"


def _frontier_of(run: RunRecord) -> Frontier | None:
    """The frontier of ``run``'s mechanism; None for a mechanism without one or no longer registered."""
    try:
        return registry.get(run.mechanism).frontier
    except PrivengineError:
        return None


def _short_label(axis: Axis) -> str:
    """An axis label without its parenthesis: ``leak AUC (…)`` -> ``leak AUC``."""
    return axis.label.split(" (")[0]


def accountant_name(accountant: str) -> str:
    """An accountant's name without its parameters and reference: ``Opacus PRV accountant (Gopi et al.)``
    -> ``Opacus PRV accountant``."""
    return re.split(r"[,(:;]", accountant, maxsplit=1)[0].strip()
