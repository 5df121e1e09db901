"""Privacy claims: every epsilon privengine shows travels with its accountant and assumptions.

A run's summary carries a list of claims under the key ``"privacy"`` (see
:func:`claims_of`); the dashboard and the CLI print them with :meth:`PrivacyClaim.text`.
A bare epsilon is never shown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class PrivacyClaim:
    """One (epsilon, delta) statement and what it rests on.

    Attributes:
        label: which guarantee this is, e.g. ``"data-dependent"`` or ``"data-independent"``.
        epsilon: the privacy loss bound.
        delta: the failure probability (0 for pure DP).
        accountant: the analysis that produced epsilon, with its reference.
        neighbouring: the neighbouring relation, e.g. "add or remove one training example".
        order: the moment / Renyi order that achieved the bound, where one was optimised.
        caveats: conditions the reader must know (sampler assumptions, unreleased data-dependent values, ...).
    """

    label: str
    epsilon: float
    delta: float
    accountant: str
    neighbouring: str
    order: float | None = None
    caveats: tuple[str, ...] = ()

    def headline(self) -> str:
        """``ε = 2.04, δ = 1e-05`` (epsilon to 3 significant digits)."""
        delta = "0 (pure DP)" if self.delta == 0 else f"{self.delta:g}"
        return f"ε = {self.epsilon:.3g}, δ = {delta}"

    def text(self) -> str:
        """One paragraph: headline, label, accountant, order, neighbouring relation, caveats."""
        parts = [f"{self.headline()} [{self.label}]", f"accountant: {self.accountant}"]
        if self.order is not None:
            parts.append(f"optimal order {self.order:g}")
        parts.append(f"neighbouring datasets: {self.neighbouring}")
        text = "; ".join(parts) + "."
        if self.caveats:
            text += " Caveats: " + " ".join(self.caveats)
        return text

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PrivacyClaim":
        return cls(**{**data, "caveats": tuple(data.get("caveats", ()))})


def claims_of(summary: dict[str, Any] | None) -> list[PrivacyClaim]:
    """The privacy claims stored in a run summary (empty if it has none)."""
    if not summary:
        return []
    return [PrivacyClaim.from_dict(c) for c in summary.get("privacy", [])]
