"""Privacy claims: every epsilon privengine shows travels with its accountant and assumptions.

A run's summary carries a list of claims under the key ``"privacy"`` (see
:func:`claims_of`). Exactly one of them is the run's *headline* (``"headline":
true``), chosen by the mechanism: the guarantee that covers everything the run
publishes. Every view that shows a single number per run (runs tables, compare,
exports, the CLI) shows that one, through :func:`headline_of`; the run's page shows
all claims with :meth:`PrivacyClaim.text`. A bare epsilon is never shown.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any


def claim_label(label: str) -> str:
    """A claim's label with its counts read as words: "all 2 models" -> "both models", "all 1 queries" ->
    "the one query" (labels are stored by the mechanisms as they wrote them; every view reads them through this).

    >>> claim_label("all 2 models of this run released together"), claim_label("all 1 queries answered")
    ('both models of this run released together', 'the one query answered')
    """
    label = re.sub(r"\ball 2 ", "both ", label)
    return re.sub(r"\ball 1 (\w+)", lambda m: f"the one {_singular(m.group(1))}", label)


def _singular(word: str) -> str:
    if word.endswith("ies"):
        return word[:-3] + "y"
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


@dataclass(frozen=True)
class PrivacyClaim:
    """One (epsilon, delta) statement and what it rests on.

    Attributes:
        label: which guarantee this is, e.g. ``"data-independent (a priori)"``.
        epsilon: the privacy loss bound.
        delta: the failure probability (0 for an epsilon-only statement).
        accountant: the analysis that produced epsilon, with its reference.
        neighbouring: the neighbouring relation, e.g. "add or remove one training example".
        order: the moment / Renyi order that achieved the bound, where one was optimised.
        caveats: conditions the reader must know (sampler assumptions, unreleased data-dependent values, ...).
        headline: whether this is the run's headline claim (exactly one per run).
        condition: what the (epsilon, delta) holds for when it does not hold for the release as made, printed
            with it, e.g. "exact draw only" for a sampler that only approximates the mechanism.
        events: the releases the claim covers, as privacy events in their JSON form
            (:func:`privengine.accounting.events.to_json`: dp-accounting's class and attribute names), from which
            ``accounting.events.epsilon_of_json(events, delta=delta, relation=relation)`` recomputes epsilon;
            empty for a figure that is not a composition of events (a data-dependent PATE bound, a group-privacy
            conversion), which is then never composed by a ledger or a sweep from events.
        relation: the neighbouring relation the claim holds under (its events are stated under it), a key of
            ``accounting.events.RELATIONS`` (``"add_or_remove_one"`` or ``"replace_one"``): set by every shipped
            mechanism, with or without events; None for a claim stored before claims carried it, which a ledger
            reads as add/remove converted to replace-one (the conservative reading).
    """

    label: str
    epsilon: float
    delta: float
    accountant: str
    neighbouring: str
    order: float | None = None
    caveats: tuple[str, ...] = ()
    headline: bool = False
    condition: str | None = None
    events: tuple[dict[str, Any], ...] = ()
    relation: str | None = None

    def statement(self) -> str:
        """``ε = 2.04, δ = 1e-05`` (epsilon to 3 significant digits), then the condition if there is one."""
        text = f"ε = {self.epsilon:.3g}, δ = {self.delta:g}"
        return f"{text} ({self.condition})" if self.condition else text

    def text(self) -> str:
        """One paragraph: statement, label, accountant, order, neighbouring relation, caveats."""
        parts = [f"{self.statement()} [{claim_label(self.label)}]", f"accountant: {self.accountant}"]
        if self.order is not None:
            parts.append(f"optimal order {self.order:g}")
        parts.append(f"neighbouring datasets: {self.neighbouring}")
        text = "; ".join(parts) + "."
        if self.caveats:
            text += " Caveats: " + " ".join(self.caveats)
        return text

    def to_dict(self) -> dict[str, Any]:
        """Its fields, ``events`` as a list (the JSON form a stored summary reads back)."""
        return {**asdict(self), "events": list(self.events)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PrivacyClaim":
        return cls(**{**data, "caveats": tuple(data.get("caveats", ())), "events": tuple(data.get("events", ()))})


def claims_of(summary: dict[str, Any] | None) -> list[PrivacyClaim]:
    """The privacy claims stored in a run summary (empty if it has none)."""
    if not summary:
        return []
    return [PrivacyClaim.from_dict(c) for c in summary.get("privacy", [])]


def headline_of(summary: dict[str, Any] | None) -> PrivacyClaim | None:
    """The run's headline claim: the one marked ``headline`` (None if the run states no claim, or was
    stored before claims were marked: no unmarked claim is ever promoted to a headline)."""
    marked = [c for c in claims_of(summary) if c.headline]
    if len(marked) > 1:
        raise ValueError(f"a run must mark exactly one headline claim; found {len(marked)}")
    return marked[0] if marked else None


def union_caveats(claims: list[PrivacyClaim]) -> tuple[str, ...]:
    """Every caveat of ``claims``, each once, in first-seen order (what a claim composing them must repeat)."""
    return tuple(dict.fromkeys(c for claim in claims for c in claim.caveats))


def delta_caveat(delta: float, n: int) -> tuple[str, ...]:
    """A warning when delta is not small against 1/n (n: the number of protected records), else nothing."""
    if delta < 1.0 / max(n, 1):
        return ()
    return (f"delta = {delta:g} is not small against 1/n = {1.0 / max(n, 1):.2g}: an (ε, δ) guarantee with such a "
            "delta can allow releasing a whole record.",)


def with_caveat(summary: dict[str, Any], caveat: str, **marks: Any) -> dict[str, Any]:
    """A copy of a run summary whose every claim also states ``caveat``, with ``marks`` set beside its fields (e.g.
    ``failed=True``): how a summary charged for a run that did not end normally says so wherever it is read."""
    claims = [{**c, "caveats": [*c.get("caveats", ()), caveat]} for c in summary.get("privacy", ())]
    return {**summary, **({"privacy": claims} if claims else {}), **marks}
