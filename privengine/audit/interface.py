"""One audit interface for every mechanism: the result every audit returns and the registry of auditors.

An *auditor* tests one stated guarantee of one mechanism empirically. It declares its
knobs as a :class:`~privengine.config.BaseConfig` (so the CLI flags, and later the
dashboard form, are generated from them) and a run function
``run(config, reporter=None) -> AuditResult``. The reporter, when given, is the mechanism
runs' reporter (or anything with ``progress(fraction, text)`` and ``should_stop()``).
Auditors are found by name (``"pate-gnmax"``) or by the mechanism they audit.

>>> get_auditor("pate-gnmax").mechanism
'pate'
"""

from __future__ import annotations

import importlib
import math
import threading
import types
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Callable, Mapping

from ..config import BaseConfig
from ..errors import ConfigError
from ..registry import load_callable

if TYPE_CHECKING:
    from ..reporter import Reporter

__all__ = ["AuditResult", "Auditor", "all_auditors", "auditors_for", "get_auditor", "register_auditor"]

#: Modules that register the shipped auditors when imported (loaded on first use of the registry).
BUILTIN_AUDITOR_MODULES = ("privengine.audit.pate_gnmax", "privengine.audit.dpsgd_one_run")


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
            mechanism as implemented is not (eps, delta)-DP for any eps below it.
        confidence: the confidence of ``epsilon_lower``.
        delta: the delta of both the claim and the lower bound.
        counts: the raw counts the bound was computed from (trials, false positives, ...).
        notes: what the audit assumed and how to read it, one sentence or paragraph each.
        details: further numbers (e.g. a Gaussian-DP bound, the exact epsilon of the audited pair).
    """

    audit: str
    mechanism: str
    method: str
    claim: str
    claimed_epsilon: float
    epsilon_lower: float
    confidence: float
    delta: float
    counts: Mapping[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "counts", _frozen_mapping(self.counts))
        object.__setattr__(self, "details", _frozen_mapping(self.details))
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def refutes_claim(self) -> bool:
        """Whether the audited lower bound exceeds the claim (the implementation leaks more than claimed)."""
        return self.epsilon_lower > self.claimed_epsilon * (1.0 + 1e-9)

    @property
    def tightness(self) -> float:
        """``epsilon_lower / claimed_epsilon``: how much of the claim the audit confirmed (nan for a claim of 0)."""
        return self.epsilon_lower / self.claimed_epsilon if self.claimed_epsilon > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict. The bound is under ``audited_epsilon_lower`` (the CLI's ``--json`` contract)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data |= {"counts": dict(self.counts), "details": dict(self.details), "notes": list(self.notes),
                 "audited_epsilon_lower": data.pop("epsilon_lower"), "refutes_claim": self.refutes_claim}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "AuditResult":
        values = {k: v for k, v in data.items() if k != "refutes_claim"}
        values["epsilon_lower"] = values.pop("audited_epsilon_lower")
        values["notes"] = tuple(values.get("notes", ()))
        return cls(**values)

    def summary_lines(self) -> list[str]:
        """The claim and the audited bound, one line each, then the method."""
        pct = f"{100 * self.confidence:g} %"
        verdict = "REFUTES the claim" if self.refutes_claim else "consistent with the claim"
        return [f"claimed:  ε = {self.claimed_epsilon:.4g}, δ = {self.delta:g}  [{self.claim}]",
                f"audited:  ε ≥ {self.epsilon_lower:.4g}, δ = {self.delta:g}  at {pct} confidence ({verdict})",
                f"method:   {self.method}"]


@dataclass(frozen=True)
class Auditor:
    """A registered audit.

    Attributes:
        name: identifier used by the CLI (``audit NAME``), e.g. ``"pate-gnmax"``.
        mechanism: the registry name of the audited mechanism.
        title: human-readable name.
        config_cls: the audit's knobs (a :class:`~privengine.config.BaseConfig` subclass).
        run: ``"module:function"`` (imported lazily) or the function itself:
            ``run(config, reporter=None) -> AuditResult``.
        claim: one sentence: the guarantee the audit tests.
        description: one paragraph: what the audit does.
    """

    name: str
    mechanism: str
    title: str
    config_cls: type[BaseConfig]
    run: str | Callable[..., AuditResult]
    claim: str
    description: str

    def load_run(self) -> Callable[..., AuditResult]:
        return load_callable(self.run)

    def default_config(self) -> BaseConfig:
        return self.config_cls().validate()

    def audit(self, config: BaseConfig | None = None, reporter: "Reporter | None" = None) -> AuditResult:
        """Run the audit on ``config`` (default: the default config)."""
        config = (config or self.default_config()).validate()
        return self.load_run()(config, reporter)


_lock = threading.Lock()
_auditors: dict[str, Auditor] = {}
_builtins_loaded = False


def _ensure_builtins() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for module_name in BUILTIN_AUDITOR_MODULES:
            importlib.import_module(module_name)


def register_auditor(auditor: Auditor, *, replace: bool = False) -> Auditor:
    """Add an auditor; re-registering a name needs ``replace=True``."""
    with _lock:
        if auditor.name in _auditors and not replace:
            raise ValueError(f"auditor {auditor.name!r} is already registered")
        _auditors[auditor.name] = auditor
    return auditor


def get_auditor(name: str) -> Auditor:
    """The auditor called ``name``, or a ConfigError naming the known ones."""
    _ensure_builtins()
    try:
        return _auditors[name]
    except KeyError:
        raise ConfigError("audit", f"must be one of {', '.join(sorted(_auditors)) or '(none)'}; got {name!r}") from None


def all_auditors() -> list[Auditor]:
    """Registered auditors in registration order."""
    _ensure_builtins()
    return list(_auditors.values())


def auditors_for(mechanism: str) -> list[Auditor]:
    """The auditors of one mechanism (empty if it has none yet)."""
    return [a for a in all_auditors() if a.mechanism == mechanism]
