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
    sizes (the mechanism's ``public_rows``), never from the data: those people are not protected by any claim;
  - one :data:`UNPROTECTED` use per charged run that publishes outputs computed from the private data without
    privacy (the mechanism's ``unprotected_outputs``, from the config: PATE's non-private baseline and vote
    histogram, DP-Bayes' reference posterior, DP-SGD's training-loss curves), naming them: its claim does not
    cover them. A run without a claim is listed once, as above: none of its outputs is covered;
  - every run of *another* source that builds this data set and releases on it (:func:`evaluation_uses`: the
    mechanism's ``other_sources``, DP-Bayes' coverage data sets ``data_seed + k``), active or having stored
    anything: those releases are charged to no source (its claim covers its own data set). Never pending here,
    since a budget reserves a pending run's planned claim, which is charged to its own source.
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
from typing import Any

from .. import registry
from ..claims import PrivacyClaim, headline_of
from ..errors import UnknownMechanismError
from ..store import RunRecord, RunStore
from .composition import ADD_REMOVE


AUDIT, UNCLAIMED, PUBLIC, PENDING = "audit", "no claim", "public", "pending"  # the kinds of Use
UNPROTECTED, EVALUATION = "non-private outputs", "evaluation data set"  # ... and the last two
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
    and kind, never its error), ``kind`` is :data:`AUDIT`, :data:`UNCLAIMED`, :data:`PUBLIC`, :data:`UNPROTECTED`
    or :data:`EVALUATION` for an uncovered use (a run with public or held-out rows has one :data:`PUBLIC` use per
    part), :data:`PENDING` for a pending run."""

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


_DECLARED: dict[tuple[str, float], tuple[tuple[tuple[int, str], ...], tuple[str, ...]]] = {}  # see _declared
_OTHERS: dict[tuple[str, float], tuple[str, ...]] = {}  # (run id, created) -> the other sources it releases on
_KEPT = 100_000


def _keep(cache: dict, key: tuple[str, float], value: Any) -> Any:
    """Store ``value`` under ``key`` in a per-process cache of at most :data:`_KEPT` runs (emptied when full)."""
    if len(cache) >= _KEPT:
        cache.clear()
    cache[key] = value
    return value


def _declared(run: RunRecord) -> tuple[tuple[tuple[int, str], ...], tuple[str, ...]]:
    """The public parts (``public_rows``) and unprotected outputs (``unprotected_outputs``) ``run``'s entry
    declares for its config; none for a mechanism the registry does not know. Kept per process for each run (its
    mechanism and config are fixed when it is created)."""
    key = (run.id, run.created_at)
    found = _DECLARED.get(key)
    if found is None:
        try:
            entry = registry.get(run.mechanism)
            found = (entry.public_parts_of(run.config), entry.unprotected_of(run.config))
        except UnknownMechanismError:
            found = ((), ())
        _keep(_DECLARED, key, found)
    return found


def public_uses(run: RunRecord) -> list[Use]:
    """One :data:`PUBLIC` use per public or held-out part of its source that ``run``'s config declares (its
    entry's ``public_rows``), in one plain sentence."""
    return [Use(run, f"{rows} rows of this source {how} by run {run.id}: those people are not protected by any "
                     "claim", PUBLIC) for rows, how in _declared(run)[0]]


def unprotected_uses(run: RunRecord) -> list[Use]:
    """One :data:`UNPROTECTED` use naming every output ``run`` publishes from the private data without privacy
    (its entry's ``unprotected_outputs``, from its config), in one plain sentence; none if it declares none."""
    outputs = _declared(run)[1]
    if not outputs:
        return []
    verb = "publishes" if run.active else "published"
    return [Use(run, f"run {run.id} {verb}, without privacy: {'; '.join(outputs)} (no claim covers them)",
                UNPROTECTED)]


def evaluation_uses(store: RunStore, source: str) -> list[Use]:
    """One :data:`EVALUATION` use per run of another source that releases on ``source`` too (its entry's
    ``other_sources``), active or having stored a summary or outputs (an ended run that stored nothing released
    nothing), oldest first. The store knows no mechanism, so the runs of the mechanisms that declare
    ``other_sources`` are read (:meth:`~privengine.store.RunStore.mechanism_runs`) and each one's other sources
    computed from its config once per process: no schema change, and runs stored before this existed are seen."""
    names = [entry.name for entry in registry.all_mechanisms() if entry.other_sources is not None]
    keys = store.mechanism_runs(names)
    unseen = [(run_id, created, mechanism) for run_id, created, mechanism in keys if (run_id, created) not in _OTHERS]
    configs = store.run_configs([run_id for run_id, *_ in unseen]) if unseen else {}
    for run_id, created, mechanism in unseen:
        if run_id in configs:
            _keep(_OTHERS, (run_id, created), registry.get(mechanism).other_sources_of(configs[run_id]))
    uses = []
    for run_id, created, mechanism in keys:
        if source not in _OTHERS.get((run_id, created), ()):
            continue
        try:
            run = store.get_run(run_id)
        except LookupError:  # deleted since
            continue
        if not (run.active or run.summary or store.has_outputs(run_id)):
            continue
        own = run.data_source or registry.get(mechanism).source_of(run.config)
        verb = "releases (or will release)" if run.active else "released"
        uses.append(Use(run, f"{run.state} run {run_id} {verb} on this data set while evaluating coverage for "
                             f"{own}: not charged here (its claim covers {own} only)", EVALUATION))
    return uses


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
        unclaimed = bool(uncovered) and uncovered[-1].run is run  # listed as UNCLAIMED just above
        uncovered.extend(public_uses(run))
        if not unclaimed:  # a run without a claim is listed once (none of its outputs is covered)
            uncovered.extend(unprotected_uses(run))
    return Classified(tuple(charged), tuple(planned), tuple(uncovered), tuple(pending), nothing)
