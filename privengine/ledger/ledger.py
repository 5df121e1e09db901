"""The ledger of one private data source: every release charged to it, composed tightly, over time.

:func:`ledger_of` composes the charged runs of a source (:mod:`.charges`: ended runs' headline claims, active runs'
planned charges) at the ledger's δ (the budget's, else :data:`DEFAULT_DELTA`) by :func:`.composition.combine`:
their events by PLD where every event allows it, else RDP; claims without events by basic composition; add/remove
and replace-one parts joined by group privacy. It says which. Each run's *share* is its own ε alone at the ledger's
δ (from its events; without events, its claim's own ε at its own δ): shares do not add up to the total, which is
tighter than their sum. The ledger over time is the cumulative ε after each charged run, in the order they were
charged (a step chart).

The total is stated at the ledger's δ plus the δ of the claims charged by basic composition
(:func:`.composition.combine`; ``Total.delta_basis`` says what it adds up). Its ``caveats`` say what it does not
cover or rests on: runs whose figure is not a proven bound (:func:`.charges.not_proven`, charged their own (ε, δ)
and named in ``Total.unproven``), runs whose headline holds under a condition only (``PrivacyClaim.condition``),
claims without a relation (which state the ledger under replace-one), and, when runs used part of the source as
public or held-out data (listed among the uncovered uses), that the guarantees hold for the private part as each
run split it, and when runs published outputs without privacy or runs of other sources released on this data set
(both listed among the uncovered uses: :mod:`.charges`), that the total covers neither.

Speed: a per-process cache, per (store, source, δ), keeps the composed parts and the runs composed, so a query
composes only the runs charged since the last one (one PLD convolution per batch of new runs; ε read from the PLD
over arrays, :mod:`privengine.accounting.pld_epsilon`; the runs' shares kept with the state), and answers an
unchanged ledger from the cache (bench/bench_ledger.py times both). The cache is keyed by every run's id, state, end
time and the digests of its stored summary and planned charge (``RunStore.source_run_states``), and by the runs of
other sources that released on it (:func:`.charges.evaluation_uses`, with their states), so a planned charge
stored again (wider) or a summary another process rewrote (``ledger upgrade``) is seen. A run composed once and
then changed (its state, end or summary) or deleted rebuilds the ledger. When many runs are composed at once (the
first query of a store), they are composed in at most :data:`SERIES_STEPS` batches of consecutive runs, and the chart
then has one step per batch.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from ..claims import PrivacyClaim
from ..errors import ConfigError
from ..store import BudgetRecord, RunStore
from .charges import EVALUATION, PUBLIC, UNPROTECTED, Charge, Use, classify, evaluation_uses, not_proven
from .composition import ADD_REMOVE, REPLACE, Part, Total, combine, covered, covered_alone, events_key
from . import upgrade
from .sources import backfill

DEFAULT_DELTA = 1e-5
SERIES_STEPS = 32
BASIC = "basic composition"  # how a share without events is computed
EVENTS = "events"


@dataclass(frozen=True)
class Share:
    """One charged run: its own ε alone at the ledger's δ (``composed``: from its ``events``, or its claim's
    (ε, δ) by ``basic composition``), and what it is (``planned``: an active run's planned charge)."""

    run_id: str
    mechanism: str
    state: str
    at: float
    sweep_id: str | None
    epsilon: float
    delta: float
    relation: str
    composed: str
    accountant: str
    label: str
    planned: bool


@dataclass(frozen=True)
class Point:
    """The ledger's ε after its first ``runs`` charged runs, the last of them charged at ``at``."""

    at: float
    epsilon: float
    runs: int


@dataclass(frozen=True)
class Ledger:
    """A data source's ledger (see the module docstring) at ``delta``; ``total`` composes every share, ``planned``
    ones included (its δ is ``delta`` plus the δ of the claims charged by basic composition, as counted:
    ``total.delta_basis``), and ``over_time`` the ended ones (then a last point with the planned ones, if any)."""

    source: str
    delta: float
    total: Total
    shares: tuple[Share, ...]
    uncovered: tuple[Use, ...]
    pending: tuple[Use, ...]
    released_nothing: int
    over_time: tuple[Point, ...]
    budget: BudgetRecord | None
    budget_history: tuple[BudgetRecord, ...]

    @property
    def epsilon(self) -> float:
        return self.total.epsilon

    def to_dict(self) -> dict[str, Any]:
        """The ledger as JSON-able data (``ledger SOURCE --json``)."""
        def use(u: Use) -> dict[str, Any]:
            return {"run_id": u.run.id, "mechanism": u.run.mechanism, "state": u.run.state, "kind": u.kind,
                    "why": u.why, "created_at": u.run.created_at}

        return {"source": self.source, "ledger_delta": self.delta, **self.total.to_dict(), "shares_note": SHARES_NOTE,
                "runs": [vars(s) for s in self.shares], "uncovered_uses": [use(u) for u in self.uncovered],
                "pending": [use(u) for u in self.pending], "released_nothing": self.released_nothing,
                "over_time": [vars(p) for p in self.over_time],
                "budget": None if self.budget is None else vars(self.budget),
                "budget_history": [vars(b) for b in self.budget_history]}


SHARES_NOTE = ("each run's epsilon is its own, alone, at the ledger's delta: the shares do not add up to the total, "
               "which composes them tightly")


Release = tuple[tuple[dict[str, Any], ...], float, float, str | None]  # (events, ε, δ, relation) of a claim


def release_of(claim: PrivacyClaim) -> Release:
    """What the ledger composes of a claim: its events, (ε, δ) and its ``relation`` field (None: it states none,
    see :mod:`.charges`; never read from its words). No events for a claim without a relation, or whose figure is
    not a proven bound (:func:`.charges.not_proven`): its (ε, δ) are charged by basic composition."""
    composable = claim.relation is not None and not not_proven(claim)
    return claim.events if composable else (), claim.epsilon, claim.delta, claim.relation


def _release(charge: Charge) -> Release:
    return release_of(charge.claim)


@dataclass
class _State:
    """What the cache keeps per (store, source, δ): the composed parts and basic charges, the runs in them (id ->
    (state, end, digest of the stored summary)) and their shares at δ, the chart so far and the total at its last
    point."""

    parts: dict[str, Part] = field(default_factory=lambda: {ADD_REMOVE: Part(ADD_REMOVE), REPLACE: Part(REPLACE)})
    basic: list[tuple[float, float, str | None]] = field(default_factory=list)
    composed: dict[str, tuple[str, float | None, str | None]] = field(default_factory=dict)
    series: list[Point] = field(default_factory=list)
    last: Total | None = None
    shares: dict[str, Share] = field(default_factory=dict)

    def share(self, charge: Charge, delta: float) -> Share:
        """The share of a composed run (:func:`_share`), kept while this state lives: a run that changes rebuilds it."""
        found = self.shares.get(charge.run.id)
        if found is None:
            found = self.shares[charge.run.id] = _share(charge, delta)
        return found

    def add(self, releases: Iterable[Release]) -> None:
        """Compose a batch of releases: those with events an accountant covers into their relation's part (runs with
        the same events together), the others by basic composition of their claims' (ε, δ)."""
        batches: dict[str, dict[str, list]] = {ADD_REMOVE: {}, REPLACE: {}}
        for json_events, epsilon, delta, relation in releases:
            if json_events and relation is not None and covered(json_events, relation):
                batches[relation].setdefault(events_key(json_events), [json_events, 0])[1] += 1
            else:
                self.basic.append((epsilon, delta, relation))
        for relation, batch in batches.items():
            if batch:
                self.parts[relation].add((tuple(e), n) for e, n in batch.values())

    def charge(self, charges: list[Charge], digests: dict[str, str | None]) -> None:
        """Compose a batch of ended runs' charges and remember the runs (``digests``: run id -> its summary's)."""
        self.add(_release(c) for c in charges)
        self.composed.update((c.run.id, _mark(c, digests)) for c in charges)

    def total(self, delta: float, *, within: bool = False) -> Total:
        """The composition of every charge so far at ``delta`` (``within``: see :func:`.composition.combine`)."""
        return combine(self.parts, self.basic, delta, within=within)

    def total_with(self, releases: list[Release], delta: float) -> Total:
        """The total at ``delta`` had ``releases`` been composed too (this state is left as it is)."""
        if not releases:
            return self.last or self.total(delta)
        copied = self.copy()
        copied.add(releases)
        return copied.total(delta)

    def copy(self) -> "_State":
        """A copy of the composition (parts and basic charges) that composing more into leaves this one as it is."""
        return _State({r: p.copy() for r, p in self.parts.items()}, list(self.basic))


def _mark(charge: Charge, digests: dict[str, str | None]) -> tuple[str, float | None, str | None]:
    """What tells a composed run changed: its state, end and the digest of its stored summary (from ``digests``)."""
    return charge.run.state, charge.run.finished_at, digests.get(charge.run.id)


_STATES: dict[tuple[str, str, float], _State] = {}
_ANSWERS: dict[tuple[str, str, float], tuple[Any, Ledger, list[Release]]] = {}  # with the planned releases
_LOCK = threading.Lock()


def ledger_delta(budget: BudgetRecord | None, delta: float | None) -> float:
    """The δ a ledger is stated at: ``delta`` if given, else the budget's, else :data:`DEFAULT_DELTA`; ConfigError
    (field ``delta``) outside (0, 1)."""
    delta = delta if delta is not None else budget.delta if budget is not None else DEFAULT_DELTA
    if not (isinstance(delta, (int, float)) and 0 < delta < 1):
        raise ConfigError("delta", f"must be in (0, 1); got {delta}")
    return delta


def ledger_of(store: RunStore, source: str, *, delta: float | None = None) -> Ledger:
    """The ledger of ``source`` at ``delta`` (default: its budget's δ, else :data:`DEFAULT_DELTA`)."""
    return _ledger_and_state(store, source, delta)[0]


def _ledger_and_state(store: RunStore, source: str, delta: float | None, *, snapshot: bool = False
                      ) -> tuple[Ledger, _State | None, list[Release]]:
    """:func:`ledger_of`, with ``snapshot`` a copy of the state its total composes (else None), and the planned
    releases of its active runs, all from one hold of the cache's lock."""
    backfill(store)
    upgrade.ensure(store)  # the events of claims stored before they had any (once per store)
    history = tuple(store.budget_history(source))
    budget = history[-1] if history else None
    delta = ledger_delta(budget, delta)
    key = (str(store.path), source, delta)
    states = tuple(store.source_run_states(source))
    evaluations = tuple(evaluation_uses(store, source))  # other sources' runs that released on this one
    fingerprint = (states, history, tuple((u.run.id, u.why) for u in evaluations))
    with _LOCK:
        answer = _ANSWERS.get(key)
        if answer is not None and answer[0] == fingerprint:
            _, ledger, planned = answer
            return ledger, _STATES[key].copy() if snapshot else None, planned
        runs = classify(store, store.source_runs(source))
        runs = replace(runs, uncovered=runs.uncovered + evaluations)
        state = _updated(key, runs.charged, delta, {run_id: summary for run_id, *_, summary in states})
        planned = [_release(c) for c in runs.planned]
        total = state.total_with(planned, delta)
        over_time = state.series + ([Point(runs.planned[-1].at, total.epsilon, len(state.composed) + len(planned))]
                                    if planned else [])
        shares = tuple(state.share(c, delta) for c in runs.charged) + tuple(_share(c, delta) for c in runs.planned)
        unproven = tuple(c.run.id for c in runs.charged + runs.planned if not_proven(c.claim))
        total = replace(total, caveats=_caveats(runs.charged + runs.planned, runs.uncovered, unproven),
                        unproven=unproven)
        ledger = Ledger(source, delta, total, shares, runs.uncovered, runs.pending, runs.released_nothing,
                        tuple(over_time), budget, history)
        _ANSWERS[key] = (fingerprint, ledger, planned)
        return ledger, state.copy() if snapshot else None, planned


@dataclass(frozen=True)
class Outlook:
    """A ledger and what a launch would make of it, both stated at exactly the ledger's δ (as a budget of that δ is
    checked: the claims charged by basic composition take their δ from it first, ``combine(within=True)``; the
    ledger's own total adds their δ to it instead): ``spent`` with the ``reserved`` releases (the runs queued or
    starting, at their planned releases), ``after`` with the launch's too."""

    ledger: Ledger
    reserved: int
    spent: Total
    after: Total


def outlook(store: RunStore, source: str, delta: float | None, launch: Iterable[Release],
            reserve: Callable[[Ledger], list[Release]]) -> Outlook:
    """The ledger of ``source`` at ``delta`` and its totals with ``reserve(ledger)`` (what its pending runs will
    release), then with ``launch`` too (see :class:`Outlook`), all from one state of the ledger, taken in one hold of
    the cache's lock (a second query in between, another thread's from run states it read earlier, could otherwise
    replace the cached state by an older one: review helper-54); ``reserve`` and the compositions run after it, on a
    copy. Nothing is stored."""
    ledger, state, planned = _ledger_and_state(store, source, delta, snapshot=True)
    reserved = reserve(ledger)
    pending, launch = planned + reserved, list(launch)
    after = state.copy() if pending else state  # without pending releases, spent is read before the launch is added
    state.add(pending)
    spent = state.total(ledger.delta, within=True)
    after.add(pending + launch)
    return Outlook(ledger, len(reserved), spent, after.total(ledger.delta, within=True))


def total_of(releases: Iterable[Release], delta: float) -> Total:
    """``releases`` composed alone at exactly ``delta``, as :func:`outlook` states a ledger holding only them."""
    state = _State()
    state.add(releases)
    return state.total(delta, within=True)


def _caveats(charges: tuple[Charge, ...], uncovered: tuple[Use, ...], unproven: tuple[str, ...]) -> tuple[str, ...]:
    """What the total of ``charges`` does not cover or rests on, in sentences (see the module docstring)."""
    caveats = []
    if unproven:
        caveats.append(f"The total includes figures that are not proven bounds (estimates, charged by their own "
                       f"(ε, δ)): run{'s' if len(unproven) > 1 else ''} {', '.join(unproven)}.")
    conditional = [f"{c.run.id} ({c.claim.condition})" for c in charges if c.claim.condition]
    if conditional:
        caveats.append("The total includes figures that hold only under a condition: run"
                       f"{'s' if len(conditional) > 1 else ''} {', '.join(conditional)}.")
    bare = [c.run.id for c in charges if c.claim.relation is None]
    if bare:
        caveats.append(f"Run{'s' if len(bare) > 1 else ''} {', '.join(bare)} state{'' if len(bare) > 1 else 's'} no "
                       "neighbouring relation: each counts as add/remove, converted by group privacy, and the total "
                       "holds for replace-one neighbours.")
    if any(u.kind == UNPROTECTED for u in uncovered):
        caveats.append("Runs published outputs computed from this source without privacy (listed among the uncovered "
                       "uses): no claim, and so no total, covers them.")
    if any(u.kind == EVALUATION for u in uncovered):
        caveats.append("Runs of other sources released on this data set while evaluating coverage (listed among the "
                       "uncovered uses): the total does not include those releases.")
    if any(u.kind == PUBLIC for u in uncovered):
        caveats.append("The guarantees hold for the private part as each run split it: the rows a run used as public "
                       "or held-out data (listed among the uncovered uses) are not protected by any claim, and each "
                       "claim's neighbouring data sets differ in that run's private part, not in the source as a "
                       "whole.")
    return tuple(caveats)


def _updated(key: tuple[str, str, float], charged: tuple[Charge, ...], delta: float,
             digests: dict[str, str | None]) -> _State:
    """The cached state of ``key`` with the charges not composed yet composed in order (a rebuild when a composed
    run changed: its state, end or stored summary, whose digest ``digests`` maps its id to; was deleted; or a new
    charge predates the last composed one)."""
    state = _STATES.get(key) or _State()
    marks = {c.run.id: _mark(c, digests) for c in charged}
    new = [c for c in charged if c.run.id not in state.composed]
    stale = any(marks.get(run_id) != mark for run_id, mark in state.composed.items())
    if stale or (new and state.series and new[0].at < state.series[-1].at):
        state, new = _State(), list(charged)
    size = max(1, math.ceil(len(new) / SERIES_STEPS)) if not state.composed else 1
    for start in range(0, len(new), size):
        batch = new[start:start + size]
        state.charge(batch, digests)
        state.last = state.total(delta)
        state.series.append(Point(batch[-1].at, state.last.epsilon, len(state.composed)))
    _STATES[key] = state
    return state


def _share(charge: Charge, delta: float) -> Share:
    """A charged run's share: its events alone at ``delta``, or its claim's own (ε, δ) (no events, or none an
    accountant here covers)."""
    claim, run = charge.claim, charge.run
    json_events, _, _, relation = _release(charge)
    alone = covered_alone(json_events, relation, delta) if json_events else None
    if alone is not None:
        (epsilon, accountant), at_delta, composed = alone, delta, EVENTS
    else:
        epsilon, accountant, at_delta, composed = claim.epsilon, claim.accountant, claim.delta, BASIC
    return Share(run.id, run.mechanism, run.state, charge.at, run.sweep_id, epsilon, at_delta, charge.relation,
                 composed, accountant, claim.label, charge.planned)
