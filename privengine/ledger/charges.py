"""What each run that read a data source is charged, or why no claim covers it.

- A mechanism's ended run (finished, stopped, failed or interrupted) is charged its headline claim: the one covering
  everything it released (a failed run's is the charge it declared, an interrupted run's its planned charge:
  :mod:`privengine.reporter`, ``RunStore.death_charge``). A sweep's runs are runs like any other, each attempt
  charged once.
- An active run is charged its planned charge (``reporter.charge_plan``: its whole planned release), once stored.
  Without one, it is an uncovered use if it stored outputs (a mechanism that plans no claim, like split learning's
  label protection), else *pending*: released nothing yet.
- Uncovered uses, listed and never hidden, each with its state and kind, never a run's error text (it may depend
  on private data):

  - every audit that reads the source and stored outputs or a summary (it trains on the private split, and no
    claim covers an audit's outputs); an active audit that stored nothing yet is pending, an ended one released
    nothing;
  - every run that stored outputs without a headline claim (a mechanism that states none, or a run stored before
    failures were charged);
  - the public and held-out parts of the source a charged or uncovered run used (:data:`PUBLIC`: DP-SGD's public
    fraction and digits' held-out fifth, PATE's public part of an embedded data set), from the config's documented
    sizes (the mechanism's ``public_rows``), never from the data: those people are not protected by any claim.
- An ended run without a claim that stored nothing released nothing: only counted.

A claim's neighbouring relation is its ``relation`` field, never read from its words. A claim without one (no
events) counts as add/remove, the relation the ledger converts to replace-one by group privacy; since it could be a
bound for replace-one neighbours only, which says nothing of add/remove neighbours, the ledger is then stated under
replace-one (:func:`.composition.combine`).

A headline claim that is not a proven bound (:func:`not_proven`: a caveat saying its ε is "an estimate, not a
proven bound", as DP-SGD's with fixed-size shuffled batches says) is charged its own (ε, δ) by basic composition,
never composed from events, and the ledger's total names its runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import registry
from ..claims import PrivacyClaim, headline_of
from ..errors import UnknownMechanismError
from ..store import RunRecord, RunStore
from .composition import ADD_REMOVE


AUDIT, UNCLAIMED, PUBLIC, PENDING = "audit", "no claim", "public", "pending"  # the kinds of Use
NOT_PROVEN = "not a proven bound"  # how a claim's caveat says its figure is an estimate


def not_proven(claim: PrivacyClaim) -> bool:
    """Whether ``claim``'s figure is not a proven bound: a caveat says it is "an estimate, not a proven bound"
    (:data:`NOT_PROVEN`, in any case), as the claims of DP-SGD's fixed-size shuffled batches do."""
    return any(NOT_PROVEN in caveat.lower() for caveat in claim.caveats)


@dataclass(frozen=True)
class Charge:
    """The claim a run is charged, ``planned`` for an active run's planned charge."""

    run: RunRecord
    claim: PrivacyClaim
    planned: bool = False

    @property
    def relation(self) -> str:
        """The claim's ``relation``; add/remove for a claim without one (see the module docstring)."""
        return self.claim.relation or ADD_REMOVE

    @property
    def at(self) -> float:
        """When it was charged: the run's end, else its start (an active run), else its creation."""
        return self.run.finished_at or self.run.started_at or self.run.created_at


@dataclass(frozen=True)
class Use:
    """A run on the source that no charge covers, or a pending run: ``why`` says which in words (the run's state
    and kind, never its error), ``kind`` is :data:`AUDIT`, :data:`UNCLAIMED` or :data:`PUBLIC` for an uncovered use
    (a run with public or held-out rows has one :data:`PUBLIC` use per part), :data:`PENDING` for a pending run."""

    run: RunRecord
    why: str
    kind: str = UNCLAIMED


@dataclass(frozen=True)
class Classified:
    """A source's runs sorted out: charged (ended, then active runs' planned charges), uncovered, pending, and how
    many released nothing."""

    charged: tuple[Charge, ...]
    planned: tuple[Charge, ...]
    uncovered: tuple[Use, ...]
    pending: tuple[Use, ...]
    released_nothing: int


def _audit_title(mechanism: str) -> str | None:
    """The title of the audit called ``mechanism``; None for a mechanism (or a name the registry does not know)."""
    try:
        entry = registry.get(mechanism)
    except UnknownMechanismError:
        return None
    return entry.title if entry.audits is not None else None


_PARTS: dict[tuple[str, float], tuple[tuple[int, str], ...]] = {}  # (run id, created) -> its public parts
_PARTS_KEPT = 100_000


def public_uses(run: RunRecord) -> list[Use]:
    """One :data:`PUBLIC` use per public or held-out part of its source that ``run``'s config declares (its
    entry's ``public_rows``; none for a mechanism the registry does not know), in one plain sentence. Kept per
    process for each run (its mechanism and config are fixed when it is created)."""
    key = (run.id, run.created_at)
    parts = _PARTS.get(key)
    if parts is None:
        try:
            parts = registry.get(run.mechanism).public_parts_of(run.config)
        except UnknownMechanismError:
            parts = ()
        if len(_PARTS) >= _PARTS_KEPT:
            _PARTS.clear()
        _PARTS[key] = parts
    return [Use(run, f"{rows} rows of this source {how} by run {run.id}: those people are not protected by any "
                     "claim", PUBLIC) for rows, how in parts]


def classify(store: RunStore, runs: list[RunRecord]) -> Classified:
    """Sort ``runs`` (a source's, in the order they were charged) as the module docstring says."""
    charged, planned, uncovered, pending, nothing = [], [], [], [], 0
    for run in runs:
        audit = _audit_title(run.mechanism)
        if audit is not None:
            if run.summary or store.has_outputs(run.id):
                uncovered.append(Use(run, f"{run.state} audit ({audit}) that trains on the private split and stored "
                                          "outputs: no claim covers it", AUDIT))
            elif run.active:
                pending.append(Use(run, f"{run.state}: nothing released yet", PENDING))
            else:
                nothing += 1
            continue
        if run.active:
            plan = headline_of(store.planned_charge(run.id))
            if plan is not None:
                planned.append(Charge(run, plan, planned=True))
            elif store.has_outputs(run.id):
                uncovered.append(Use(run, f"{run.state} run that stored outputs and has no planned charge: no claim "
                                          "covers them", UNCLAIMED))
            else:
                pending.append(Use(run, f"{run.state}: nothing released yet", PENDING))
                continue
        elif (claim := headline_of(run.summary)) is not None:
            charged.append(Charge(run, claim))
        elif store.has_outputs(run.id):
            uncovered.append(Use(run, f"{run.state} run that stored outputs and states no privacy claim",
                                 UNCLAIMED))
        else:
            nothing += 1
            continue
        uncovered.extend(public_uses(run))
    return Classified(tuple(charged), tuple(planned), tuple(uncovered), tuple(pending), nothing)
