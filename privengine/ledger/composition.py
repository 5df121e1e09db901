"""The ledger's composition: every charged run's events, composed tightly and kept as runs are added.

A :class:`Part` holds the events of the runs charged under one neighbouring relation. While every event is one a
PLD covers, it keeps their composed PLD (each run's from :func:`privengine.accounting.events.pld_of_events`, the one
place privengine builds PLDs) and composes each new run into it (dp-accounting's ``compose``: one convolution per
batch of runs, never the whole ledger again); otherwise it keeps the runs'
events, grouped by identical events, and composes them with :func:`privengine.accounting.events.compose` (RDP, the
pure events added) when asked. Either way the accountant is the one ``events.compose`` would choose.

:func:`combine` states the ledger at its δ from its parts and the runs charged by basic composition:

- one relation: its part is stated at the ledger's δ;
- both relations: the ledger is stated under replace-one. δ is split in two halves, one per part.
  The add/remove part is converted by group privacy of size 2: an (ε, δ) bound for add/remove neighbours is a
  (2ε, (1 + e^ε) δ) bound for replace-one neighbours (a replacement is a removal then an addition), at the
  largest δ_a whose converted δ fits its half (:func:`group_of_two`);
  the converted part and the replace-one part then compose by basic composition;
- the runs whose claim has no events (or events no accountant here covers, or a figure that is not a proven bound)
  are added by basic composition: ε_total = ε_parts + Σ ε_i and δ_total = δ + Σ δ_i, each (ε_i, δ_i) as counted
  under the ledger's relation. So the total is stated at the ledger's δ *plus* their δ (``Total.delta_basis`` says
  so), never infinite because they take all of δ (PATE's sanitized headline has δ = 1e-5, the default δ).
  A claim with no ``relation`` counts as add/remove and is converted like that part; as it may hold for
  replace-one neighbours only (a replace-one bound says nothing of add/remove neighbours), the ledger is then
  stated under replace-one, the one relation every claim in it covers.

``combine(..., within=True)`` states the bound at exactly δ instead (what a budget of δ is checked against): the
runs charged by basic composition take their δ first, the parts share the rest (ε = inf if nothing is left).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import threading
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from ..accounting import events
from ..accounting.pld_epsilon import epsilon_for_delta

ADD_REMOVE, REPLACE = "add_or_remove_one", "replace_one"
GROUP_OF_TWO = ("group privacy of size 2: the add/remove part's (ε, δ) counts as (2ε, (1 + e^ε) δ) under "
                "replace-one, then basic composition with the replace-one part")
_HALVINGS, _BISECTIONS = 40, 16


def _identity() -> pld_lib.PrivacyLossDistribution:
    return pld_lib.identity(value_discretization_interval=events.VALUE_DISCRETIZATION)


def events_key(json_events: Iterable[dict[str, Any]]) -> str:
    """One string per set of events (their JSON, keys sorted): runs with the same key released the same."""
    return json.dumps(list(json_events), sort_keys=True)


_RUN_PLDS: OrderedDict[tuple[str, str], pld_lib.PrivacyLossDistribution | None] = OrderedDict()  # (events key, relation), newest last
_RUN_PLDS_KEPT = 16  # a DP-SGD run's PLD holds a few MB
_LOCK = threading.Lock()


def run_pld(json_events: tuple[dict[str, Any], ...], relation: str) -> pld_lib.PrivacyLossDistribution | None:
    """The PLD of one run's events under ``relation`` (None if a PLD does not cover one of them, or one is not
    private), from a per-process cache of the last :data:`_RUN_PLDS_KEPT` (runs of one recipe and another seed
    release the same)."""
    key = (events_key(json_events), relation)
    with _LOCK:
        if key in _RUN_PLDS:
            _RUN_PLDS.move_to_end(key)
            return _RUN_PLDS[key]
    pld = events.pld_of_events([events.from_json(e) for e in json_events], relation)
    with _LOCK:
        _RUN_PLDS[key] = pld
        while len(_RUN_PLDS) > _RUN_PLDS_KEPT:
            _RUN_PLDS.popitem(last=False)
    return pld


@functools.lru_cache(maxsize=4096)
def _alone(key: str, relation: str, delta: float) -> tuple[float, str]:
    json_events = tuple(json.loads(key))
    pld = run_pld(json_events, relation)
    if pld is not None:
        return epsilon_for_delta(pld, delta), events.PLD
    composition = events.epsilon_of_json(json_events, delta=delta, relation=relation)
    return composition.epsilon, composition.accountant


@functools.lru_cache(maxsize=4096)
def _covered(key: str, relation: str) -> bool:
    json_events = tuple(json.loads(key))
    if run_pld(json_events, relation) is not None:
        return True
    try:
        events.epsilon_of_json(json_events, delta=1e-5, relation=relation)  # RDP, at any delta
    except ValueError:  # it names the event no accountant covers
        return False
    return True


def covered(json_events: tuple[dict[str, Any], ...], relation: str) -> bool:
    """Whether an accountant here composes ``json_events`` under ``relation`` (PLD or RDP; e.g. not a Poisson-sampled
    event under replace-one): a claim whose events are not covered is charged by basic composition instead."""
    return _covered(events_key(json_events), relation)


def epsilon_alone(json_events: tuple[dict[str, Any], ...], relation: str, delta: float) -> tuple[float, str]:
    """``(ε, accountant)`` of one run's events alone at ``delta``: its PLD (:func:`run_pld`), else
    ``events.compose`` (RDP); cached per process (runs of one recipe share it)."""
    return _alone(events_key(json_events), relation, delta)


def covered_alone(json_events: tuple[dict[str, Any], ...], relation: str, delta: float) -> tuple[float, str] | None:
    """:func:`epsilon_alone` where :func:`covered`, else None: both from one key (a ledger asks it of every run)."""
    key = events_key(json_events)
    return _alone(key, relation, delta) if _covered(key, relation) else None


class Part:
    """The composition of the events charged under one relation (a key of ``events.RELATIONS``), grown run by run."""

    def __init__(self, relation: str):
        self.relation = relation
        self.runs: Counter[str] = Counter()  # events key -> runs charged with those events
        self._events: dict[str, tuple[dict[str, Any], ...]] = {}
        self._pld: pld_lib.PrivacyLossDistribution | None = _identity()
        self._bound = events.RdpBound(relation)  # the memory guard over the whole part, not only each run
        self._epsilons: dict[float, tuple[float, str]] = {}  # delta -> epsilon(delta) of what is charged so far

    def add(self, batch: Iterable[tuple[tuple[dict[str, Any], ...], int]]) -> None:
        """Charge a batch of runs, each item ``(events, times)``: ``times`` runs that each released ``events``. The
        batch is composed apart (each run's PLD once, :func:`run_pld`), then into the part: one convolution of the
        part's PLD per batch. Once the part's RDP bound passes ``events.PLD_EPSILON_LIMIT`` (the memory guard), the
        part is composed by ``events.compose`` (RDP) from then on."""
        together = _identity() if self._pld is not None else None
        for json_events, times in batch:
            key = events_key(json_events)
            self.runs[key] += times
            self._events[key] = json_events
            self._bound.add([events.from_json(e) for e in json_events], times)
            if self._bound.too_large_for_pld():  # the part's PLD would fill memory: RDP from now on
                together = None
            one = run_pld(json_events, self.relation) if together is not None else None
            if one is None:
                together = None
            else:
                together = together.compose(one if times == 1 else one.self_compose(times))
        self._pld = None if together is None else self._pld.compose(together)  # None: events.compose from now on
        self._epsilons.clear()

    def copy(self) -> "Part":
        return copy.deepcopy(self)

    def epsilon(self, delta: float) -> tuple[float, str]:
        """``(ε, accountant)`` of everything charged, at ``delta`` (kept until more is charged: a ledger's total and
        a launch check's ask it at the same δ)."""
        if delta not in self._epsilons:
            self._epsilons[delta] = self._epsilon(delta)
        return self._epsilons[delta]

    def _epsilon(self, delta: float) -> tuple[float, str]:
        if self._pld is not None:
            return epsilon_for_delta(self._pld, delta), events.PLD
        grouped = [dp_event.SelfComposedDpEvent(dp_event.ComposedDpEvent([events.from_json(e) for e in released]), n)
                   for released, n in ((self._events[k], n) for k, n in self.runs.items())]
        composition = events.compose(grouped, delta=delta, relation=self.relation)
        return composition.epsilon, composition.accountant


@dataclass(frozen=True)
class PartTotal:
    """One relation's part of a ledger: its (ε, δ) as composed, and as counted in the ledger (converted by group
    privacy under replace-one for an add/remove part, else the same)."""

    relation: str
    epsilon: float
    delta: float
    accountant: str
    counted_epsilon: float
    counted_delta: float


@dataclass(frozen=True)
class Total:
    """A ledger's (ε, δ) and how it was reached.

    Attributes:
        epsilon, delta: the bound on everything charged. ``delta`` is the ledger's δ plus the δ of the runs charged
            by basic composition, as counted (the ledger's δ alone when there are none; their δ alone when they
            are all it charges; with ``within``, the ledger's δ, of which they take theirs first, ``epsilon`` inf
            when they take all of it).
        relation: the neighbouring relation it holds for.
        accountants: every accountant used, ``events.PLD`` / ``events.RDP`` for the parts, ``events.BASIC`` for
            the runs without events.
        conversion: :data:`GROUP_OF_TWO` when it was applied, else None.
        parts: each relation's part.
        basic: ``(ε, δ)`` of the runs charged by basic composition, as counted.
        delta_basis: ``delta`` in words (what it adds up), None when nothing is charged.
        caveats: what the total does not cover or rests on, in sentences (the ledger adds them: runs whose figure
            is not a proven bound, public parts of the source, claims without a relation).
        unproven: the runs whose charged figure is not a proven bound, included by basic composition.
    """

    epsilon: float
    delta: float
    relation: str
    accountants: tuple[str, ...]
    conversion: str | None
    parts: tuple[PartTotal, ...]
    basic: tuple[float, float]
    delta_basis: str | None = None
    caveats: tuple[str, ...] = ()
    unproven: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"epsilon": self.epsilon, "delta": self.delta, "relation": self.relation,
                "accountants": list(self.accountants), "conversion": self.conversion,
                "parts": [vars(p) for p in self.parts], "basic_composition": list(self.basic),
                "delta_basis": self.delta_basis, "caveats": list(self.caveats), "unproven_runs": list(self.unproven)}


def group_of_two(epsilon_at: Callable[[float], float], target: float) -> tuple[float, float] | None:
    """``(ε_a, δ_a)``, an add/remove bound with ``(1 + e^ε_a) δ_a <= target``: halving δ_a from ``target / 2``
    until it fits (at most :data:`_HALVINGS` times), then bisecting (over log δ_a) between that and the last that did
    not, so δ_a is about the largest that fits; None if none fits."""
    def fits(log_d: float) -> tuple[float, float] | None:
        eps = epsilon_at(math.exp(log_d))
        return (eps, math.exp(log_d)) if group_bound(eps, math.exp(log_d))[1] <= target else None

    hi = math.log(target / 2)
    for _ in range(_HALVINGS):
        lo = hi - math.log(2)
        best = fits(lo)
        if best is not None:
            break
        hi = lo
    else:
        return None
    for _ in range(_BISECTIONS):
        mid = (lo + hi) / 2
        found = fits(mid)
        lo, hi, best = (mid, hi, found) if found is not None else (lo, mid, best)
    return best


def group_bound(epsilon: float, delta: float) -> tuple[float, float]:
    """Group privacy of size 2: an (ε, δ) bound for add/remove neighbours is ``(2ε, (1 + e^ε) δ)`` for replace-one
    neighbours (inf beyond what a float holds)."""
    return 2 * epsilon, ((1 + math.exp(epsilon)) * delta if epsilon < 700 else math.inf)


def delta_basis(delta: float, basic_delta: float, *, parts: bool, basic: int, within: bool) -> str | None:
    """A total's δ in words (see :class:`Total`): ``delta`` the ledger's, ``basic_delta`` that of the ``basic``
    claims charged by basic composition, ``parts`` whether events were composed."""
    claims = f"the {basic} claim{'s' if basic > 1 else ''} charged by basic composition"
    if not parts:
        return f"the sum of the δ of {claims}, as counted" if basic else None
    if not basic:
        return f"the ledger's δ = {delta:g}"
    if within:
        return f"the ledger's δ = {delta:g}, of which {claims} take δ = {basic_delta:.3g} first"
    return (f"the ledger's δ = {delta:g}, at which the composed events are stated, plus δ = {basic_delta:.3g} of "
            f"{claims} (their own δ, as counted)")


def combine(parts: dict[str, Part], basic: Iterable[tuple[float, float, str | None]], delta: float, *,
            within: bool = False) -> Total:
    """The ledger's bound at ``delta`` from its ``parts`` (relation -> :class:`Part`, empty parts ignored) and the
    ``basic`` runs' ``(ε, δ, relation)`` (relation None: the claim states none), as the module docstring says:
    stated at ``delta`` plus the basic runs' δ, or, ``within``, at ``delta``, the basic runs' δ taken from it."""
    live = {rel: part for rel, part in parts.items() if part.runs}
    basic = list(basic)
    relation = REPLACE if REPLACE in live or any(rel != ADD_REMOVE for _, _, rel in basic) else ADD_REMOVE
    converted = [group_bound(e, d) if (rel or ADD_REMOVE) != relation else (e, d) for e, d, rel in basic]
    basic_eps, basic_delta = sum(e for e, _ in converted), sum(d for _, d in converted)
    accountants = [events.BASIC] if basic else []
    basis = delta_basis(delta, basic_delta, parts=bool(live), basic=len(basic), within=within)
    rest = delta - basic_delta if within else delta
    if rest <= 0 and live:
        return Total(math.inf, delta, relation, tuple(accountants), None, (), (basic_eps, basic_delta), basis)
    totals = []
    for rel, part in sorted(live.items()):
        share = rest / len(live)
        if rel == relation:
            eps, accountant = part.epsilon(share)
            totals.append(PartTotal(rel, eps, share, accountant, eps, share))
            continue
        found = group_of_two(lambda d: part.epsilon(d)[0], share)
        eps_a, delta_a = found if found is not None else (math.inf, share / 2)
        totals.append(PartTotal(rel, eps_a, delta_a, part.epsilon(delta_a)[1], *group_bound(eps_a, delta_a)))
    converts = any(t.relation != relation for t in totals) or any((rel or ADD_REMOVE) != relation
                                                                   for _, _, rel in basic)
    stated = (delta if within else delta + basic_delta) if live else basic_delta
    return Total(basic_eps + sum(t.counted_epsilon for t in totals), stated, relation,
                 tuple(dict.fromkeys(accountants + [t.accountant for t in totals])),
                 GROUP_OF_TWO if converts else None, tuple(totals), (basic_eps, basic_delta), basis)
