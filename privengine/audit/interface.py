"""One audit interface for every mechanism: the result every audit returns, and audits as registry entries.

An *audit* tests one stated guarantee of one mechanism empirically. Its knobs are a
:class:`~privengine.config.BaseConfig` (the CLI flags and the dashboard form are generated
from them) and its function is ``audit(config, reporter=None) -> AuditResult``, where the
reporter is a run's :class:`~privengine.reporter.Reporter` (``progress``, ``metric``, ``log``,
``should_stop``) or None for a direct call.

:func:`audit_entry` makes it an entry of the mechanism registry (:mod:`privengine.registry`, listed by the
catalogue :mod:`privengine.mechanisms`; ``audits=`` the mechanism it tests) whose job function returns :meth:`AuditResult.to_dict` as
the run summary: an audit is launched by the job manager, stored, reloaded and compared like
any run, and ``registry.audits_for("pate")`` lists the audits a mechanism page offers. Every audit declares
:data:`AUDIT_FRONTIER`, so the Explore page sweeps it like a mechanism and charts the audited bound against
the claim across the sweep.

>>> from privengine import registry
>>> registry.get("pate-gnmax").audits
'pate'
"""

from __future__ import annotations

import functools
import math
import types
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..config import BaseConfig
from ..entries import Axis, Frontier, Mechanism

if TYPE_CHECKING:
    from ..reporter import Reporter

__all__ = ["AUDIT_FRONTIER", "AuditResult", "NO_BOUND", "NullReporter", "audit_entry", "result_of"]

NO_BOUND = "ROC only, no audited ε"  # what an audit without a lower bound on epsilon says in its place

# What a sweep of an audit plots (the Explore page's frontier chart): the claim on x, the audited bound on y.
# Both are top-level numbers of the summary (AuditResult.to_dict); a sweep over, e.g., epsilon then charts how
# much of each claim the audit confirms. A higher bound is a stronger audit, so "higher" is better on y.
AUDIT_FRONTIER = Frontier(
    privacy=Axis("claimed_epsilon", "claimed ε (the guarantee under test)", "lower"),
    utility=(Axis("audited_epsilon_lower", "audited ε ≥ (lower bound at the audit's confidence)", "higher"),))

AuditFunction = Callable[[Any, Any], "AuditResult"]


def _frozen_mapping(data: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(data or {}))


@dataclass(frozen=True)
class AuditResult:
    """What an audit found: a lower bound on epsilon beside the claim it tests.

    Attributes:
        audit: the auditor's name, e.g. ``"pate-gnmax"``.
        mechanism: the audited mechanism's registry name, e.g. ``"pate"``.
        method: how the bound was obtained (test, confidence intervals, event selection).
        claim: the guarantee under test, in words (what ``claimed_epsilon`` is).
        claimed_epsilon: the claimed epsilon at ``delta``.
        epsilon_lower: the audited lower bound: with probability at least ``confidence`` the
            mechanism as implemented is not (eps, delta)-DP for any eps below it; None for an audit whose game
            gives no such bound (a membership attack on a stored model: its ROC only), never shown as 0.
        confidence: the confidence of ``epsilon_lower``.
        delta: the delta of both the claim and the lower bound.
        counts: the raw counts the bound was computed from (trials, false positives, ...).
        notes: what the audit assumed and how to read it, one sentence or paragraph each.
        details: further numbers (e.g. a Gaussian-DP bound, the exact epsilon of the audited pair).
        values: further top-level numbers of the run summary, the axes of an audit's own frontier (e.g. the
            membership attack's AUC); :meth:`to_dict` puts them beside the fields.
    """

    audit: str
    mechanism: str
    method: str
    claim: str
    claimed_epsilon: float
    epsilon_lower: float | None
    confidence: float
    delta: float
    counts: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)
    values: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", _frozen_mapping(self.counts))
        object.__setattr__(self, "details", _frozen_mapping(self.details))
        object.__setattr__(self, "values", _frozen_mapping(self.values))
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def refutes_claim(self) -> bool:
        """Whether the audited lower bound exceeds the claim (the implementation leaks more than claimed); False
        without a bound."""
        return self.epsilon_lower is not None and self.epsilon_lower > self.claimed_epsilon * (1.0 + 1e-9)

    @property
    def tightness(self) -> float:
        """``epsilon_lower / claimed_epsilon``: how much of the claim the audit confirmed (nan for a claim of 0 or
        without a bound)."""
        if self.epsilon_lower is None or self.claimed_epsilon <= 0:
            return math.nan
        return self.epsilon_lower / self.claimed_epsilon

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict. The bound is under ``audited_epsilon_lower`` (the CLI's ``--json`` contract)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data |= {"counts": dict(self.counts), "details": dict(self.details), "notes": list(self.notes),
                 "values": dict(self.values), "audited_epsilon_lower": data.pop("epsilon_lower"),
                 "refutes_claim": self.refutes_claim}
        return dict(self.values) | data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "AuditResult":
        names = {f.name for f in fields(cls)} | {"audited_epsilon_lower"}
        values = {k: v for k, v in data.items() if k in names}
        values["epsilon_lower"] = values.pop("audited_epsilon_lower")
        values["notes"] = tuple(values.get("notes", ()))
        return cls(**values)

    def headline(self) -> str:
        """One line for lists of runs: ``audited ε ≥ 0.0612 (95 %) against claimed ε = 0.342, δ = 1e-05``; without
        a bound ``ROC only, no audited ε; claimed ε = 0.342, δ = 1e-05``."""
        claimed = f"claimed ε = {self.claimed_epsilon:.3g}, δ = {self.delta:g}"
        if self.epsilon_lower is None:
            return f"{NO_BOUND}; {claimed}"
        return f"audited ε ≥ {self.epsilon_lower:.3g} ({100 * self.confidence:g} %) against {claimed}"

    def summary_lines(self) -> list[str]:
        """The claim and the audited bound, one line each, then the method."""
        pct = f"{100 * self.confidence:g} %"
        verdict = "REFUTES the claim" if self.refutes_claim else "consistent with the claim"
        audited = (f"audited:  {NO_BOUND}" if self.epsilon_lower is None else
                   f"audited:  ε ≥ {self.epsilon_lower:.4g}, δ = {self.delta:g}  at {pct} confidence ({verdict})")
        return [f"claimed:  ε = {self.claimed_epsilon:.4g}, δ = {self.delta:g}  [{self.claim}]", audited,
                f"method:   {self.method}"]


class NullReporter:
    """The reporter of an audit called directly (no job): progress, metrics, artifacts and logs go nowhere, never
    stops."""

    def progress(self, fraction: float, text: str = "") -> None:
        pass

    def artifact(self, name: str, data: Any) -> None:
        pass

    def metric(self, step: int, **values: float) -> None:
        pass

    def log(self, text: str) -> None:
        pass

    def should_stop(self) -> bool:
        return False


def _run_as_job(audit: AuditFunction, config: BaseConfig, reporter: "Reporter") -> dict[str, Any]:
    """The job form of an audit: its result as the run summary (``AuditResult.to_dict``). An audit tests a claim and
    states none over what it stores (its summary has no ``"privacy"`` claims: an operator's diagnostic), so it
    declares no planned charge (``reporter.charge_plan``): nothing is charged if its process dies."""
    return audit(config, reporter).to_dict()


def result_of(summary: Mapping[str, Any] | None) -> AuditResult | None:
    """The :class:`AuditResult` stored as a run's summary (None for a run that has none yet)."""
    return AuditResult.from_dict(summary) if summary and "audited_epsilon_lower" in summary else None


def audit_entry(*, name: str, mechanism: str, title: str, config_cls: type[BaseConfig], audit: AuditFunction,
                claim: str, description: str, smoke: Mapping[str, Any],
                frontier: Frontier = AUDIT_FRONTIER) -> Mechanism:
    """The registry entry called ``name`` (e.g. ``"pate-gnmax"``) of an audit of ``mechanism``, which the catalogue
    (:mod:`privengine.mechanisms`) lists.

    Args:
        title: human-readable name.
        config_cls: the audit's knobs.
        audit: ``audit(config, reporter=None) -> AuditResult``.
        claim: one sentence: the guarantee the audit tests.
        description: one paragraph: what the audit does.
        smoke: config overrides for an audit of a few seconds (the shared audit tests launch it).
        frontier: what its sweeps plot (default :data:`AUDIT_FRONTIER`, claimed against audited epsilon); other axes
            name numbers of :attr:`AuditResult.values`.
    """
    return Mechanism(
        name=name, title=title, config_cls=config_cls, run=functools.partial(_run_as_job, audit),
        protects=f"Tests this guarantee of {mechanism}: {claim}", description=description, smoke=dict(smoke),
        frontier=frontier, audits=mechanism)
