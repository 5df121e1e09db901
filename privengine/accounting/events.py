"""Claims as data: privacy events in dp-accounting's vocabulary, their JSON form, and their composition.

A claim's ε is the composition of its *events*, dp-accounting ``DpEvent`` values (Gaussian, Laplace,
Poisson-sampled, self-composed, composed, zCDP, repeat-and-select), under a *neighbouring relation*
(:data:`RELATIONS`: dp-accounting's ``NeighboringRelation`` names). Their JSON form (:func:`to_json`)
uses the class names and attribute names of dp-accounting (a non-finite number, which JSON cannot hold,
is written as the string ``"inf"``), so anyone can rebuild the events with
dp-accounting alone (each type is ``dp_accounting.dp_event.<type>``, but for :class:`PureDpEvent`; or
:func:`from_json`) and recompute the ε:

    {"type": "SelfComposedDpEvent", "count": 950,
     "event": {"type": "PoissonSampledDpEvent", "sampling_probability": 0.0105,
               "event": {"type": "GaussianDpEvent", "noise_multiplier": 0.82}}}

Conventions: a Gaussian or Laplace event's ``noise_multiplier`` is the noise's standard deviation
(Laplace: its scale) divided by the mechanism's sensitivity *under the stated relation*: the largest
distance (L2 for Gaussian, L1 for Laplace) between the outputs' means on two neighbouring data sets
(PATE's GNMax under replace-one: moving one vote, sqrt(2)). dp-accounting's RDP accountant reads them so
under either relation; its PLD constructions under ``REPLACE_ONE`` double that distance (they read the
multiplier against an add/remove sensitivity), so to recompute a replace-one claim with dp-accounting
alone use ``RdpAccountant`` or the PLD at ``ADD_OR_REMOVE_ONE`` (equal for an additive mechanism without
sampling). A Poisson-sampled event is only recorded under add/remove (the noise multiplier is then
against one record's contribution, dp-accounting's reading); none is accounted under replace-one here.

dp-accounting 0.6 has no pure-ε event. :class:`PureDpEvent` is privengine's own (the exponential
mechanism, ε-DP for every δ); :func:`compose` composes it through dp-accounting's PLD built from
its privacy parameters (``from_privacy_parameters(ε, 0)``, the worst-case PLD of an ε-DP
mechanism), and its JSON is ``{"type": "PureDpEvent", "epsilon": ...}``.

Written by hand, because dp-accounting's accountants do not expose their composed PLD: the
event -> PLD walk below (:func:`pld_of`, :func:`pld_of_events`), which calls dp-accounting's own
PLD constructors for each event as its ``PLDAccountant`` does (with the conventions above), plus the
pure event. A test checks it equals ``PLDAccountant`` on event trees without a pure event. The
ledger composes these PLDs run by run, so every PLD in privengine is built here.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Iterable

import attr
import dp_accounting
import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant as rdp_accountant

NeighborRel = dp_accounting.NeighboringRelation

#: the neighbouring relations a claim may state, by their dp-accounting names
RELATIONS = {"add_or_remove_one": NeighborRel.ADD_OR_REMOVE_ONE, "replace_one": NeighborRel.REPLACE_ONE}
RELATION_TEXT = {"add_or_remove_one": "add or remove one record", "replace_one": "replace one record"}

#: accountant names: :func:`compose` states PLD or RDP (or NOT_PRIVATE); BASIC is what callers adding (ε, δ) state
PLD = "dp-accounting PLD (privacy loss distributions; pure-ε events as PLDs of their privacy parameters)"
RDP = "dp-accounting RDP (Rényi DP, its default orders 1.1-1024; pure-ε events added by basic composition)"
BASIC = "basic composition (ε and δ added)"
NOT_PRIVATE = "none: an event adds no noise (ε is infinite)"

#: PLD discretisation (dp-accounting's default); a pessimistic estimate, so ε is an upper bound
VALUE_DISCRETIZATION = 1e-4
#: The memory guard: events whose RDP bound at δ = 1e-6 is above this are composed by RDP, not PLD. A PLD's grid
#: spans its privacy losses at VALUE_DISCRETIZATION: a DP-SGD diagnostic at σ 0.05 (RDP ε 110 658) took 13 GB and
#: minutes before it was stopped, where RDP answers in milliseconds; at this ε, RDP's looseness is immaterial.
PLD_EPSILON_LIMIT = 100.0


@attr.s(frozen=True, slots=True, auto_attribs=True)
class PureDpEvent(dp_event.DpEvent):
    """An ε-DP release (privengine's event: dp-accounting 0.6 has none), e.g. one exponential-mechanism draw."""

    epsilon: float


#: every event class the JSON form may name
EVENT_TYPES = {cls.__name__: cls for cls in (
    dp_event.NoOpDpEvent, dp_event.NonPrivateDpEvent, dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent,
    dp_event.SelfComposedDpEvent, dp_event.ComposedDpEvent, dp_event.PoissonSampledDpEvent,
    dp_event.SampledWithoutReplacementDpEvent, dp_event.SampledWithReplacementDpEvent, dp_event.ZCDpEvent,
    dp_event.RepeatAndSelectDpEvent, PureDpEvent)}


def to_json(event: dp_event.DpEvent) -> dict[str, Any]:
    """The JSON form of an event: ``{"type": <class name>, <attribute>: <value>, ...}``, sub-events nested."""
    if type(event).__name__ not in EVENT_TYPES:
        raise ValueError(f"privengine does not record {type(event).__name__} events")
    data: dict[str, Any] = {"type": type(event).__name__}
    for field in attr.fields(type(event)):
        value = getattr(event, field.name)
        if isinstance(value, dp_event.DpEvent):
            value = to_json(value)
        elif isinstance(value, (list, tuple)) and value and isinstance(value[0], dp_event.DpEvent):
            value = [to_json(v) for v in value]
        elif isinstance(value, float) and not math.isfinite(value):
            value = str(value)  # JSON has no infinity: "inf" (e.g. a Poisson law's RepeatAndSelect shape)
        data[field.name] = value
    return data


def from_json(data: dict[str, Any]) -> dp_event.DpEvent:
    """The event a :func:`to_json` dict describes; a clear ``ValueError`` for an unknown type or field."""
    kind = data.get("type")
    if kind not in EVENT_TYPES:
        raise ValueError(f"unknown privacy event type {kind!r}; known: {', '.join(sorted(EVENT_TYPES))}")
    cls = EVENT_TYPES[kind]
    names = {f.name for f in attr.fields(cls)}
    unknown = set(data) - names - {"type"}
    if unknown:
        raise ValueError(f"{kind} has no field(s) {', '.join(sorted(unknown))}; fields: {', '.join(sorted(names))}")
    required = {f.name for f in attr.fields(cls) if f.default is attr.NOTHING}
    if missing := required - set(data):
        raise ValueError(f"{kind} lacks field(s) {', '.join(sorted(missing))}")
    args = {}
    for name in names & set(data):
        value = data[name]
        if name not in _EVENT_FIELDS and not isinstance(value, (int, float, str, list)):
            raise ValueError(f"{kind}.{name} must be a number; got {value!r}")
        if isinstance(value, dict):
            value = from_json(value)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            value = [from_json(v) for v in value]
        elif isinstance(value, str):
            if value not in ("inf", "-inf", "nan"):
                raise ValueError(f"{kind}.{name} must be a number; got {value!r}")
            value = float(value)
        if cls is dp_event.SelfComposedDpEvent and name == "count":  # dp-accounting self-composes 1, 2, ... times
            if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or value < 1 or value != int(value)):
                raise ValueError(f"{kind}.count must be a whole number >= 1; got {value!r}")
            value = int(value)
        args[name] = value
    return cls(**args)


_EVENT_FIELDS = ("event", "events")  # the fields that hold sub-events


def relation_of(name: str) -> NeighborRel:
    """The dp-accounting relation a claim's ``relation`` names; a clear error for any other name."""
    if name not in RELATIONS:
        raise ValueError(f"unknown neighbouring relation {name!r}; known: {', '.join(RELATIONS)}")
    return RELATIONS[name]


@dataclass(frozen=True)
class Composition:
    """The (ε, δ) of composed events and how it was computed.

    Attributes:
        epsilon: the bound (``inf`` if an event is not private).
        delta: the δ it holds at.
        accountant: which of :data:`PLD`, :data:`RDP`, :data:`BASIC` computed it.
        relation: the neighbouring relation (a key of :data:`RELATIONS`).
    """

    epsilon: float
    delta: float
    accountant: str
    relation: str


def _pure_parts(events: Iterable[dp_event.DpEvent], count: int = 1) -> tuple[float, list[tuple[dp_event.DpEvent, int]]]:
    """(sum of the pure events' ε, the other events with their multiplicities), flattening compositions."""
    pure, rest = 0.0, []
    for event in events:
        if isinstance(event, PureDpEvent):
            pure += count * event.epsilon
        elif isinstance(event, dp_event.ComposedDpEvent):
            p, r = _pure_parts(event.events, count)
            pure, rest = pure + p, rest + r
        elif isinstance(event, dp_event.SelfComposedDpEvent):
            p, r = _pure_parts([event.event], count * event.count)
            pure, rest = pure + p, rest + r
        else:
            rest.append((event, count))
    return pure, rest


def pld_of(event: dp_event.DpEvent, relation: NeighborRel) -> pld_lib.PrivacyLossDistribution | None:
    """The PLD of one event through dp-accounting's constructors (what its PLDAccountant builds), or None if PLD
    accounting does not cover the event under ``relation`` (or the event is not private: see :func:`compose`).

    Kept per process for a hashable event (the last :data:`PLDS_KEPT`): the ledger, a budget check and a claim's
    recomputation ask for the same events run after run, and building the PLD of a Poisson-subsampled Gaussian (a
    Python loop over its grid inside dp-accounting) was the largest part of their time. dp-accounting's PLDs are
    never changed once built (``compose`` and ``self_compose`` return new ones), so a kept PLD is the one a fresh
    construction gives. A ``ComposedDpEvent`` (it holds a list: not hashable) is composed afresh from its parts'
    kept PLDs."""
    try:
        hash(event)
    except TypeError:
        return _built_pld(event, relation, VALUE_DISCRETIZATION)
    return _kept_pld(event, relation, VALUE_DISCRETIZATION)


#: how many events' PLDs a process keeps (a DP-SGD run's self-composed PLD: 2-5 MB at ε ≈ 3, about 25 MB near
#: PLD_EPSILON_LIMIT; its one-step PLD, kept too, 0.2-3 MB)
PLDS_KEPT = 32


@functools.lru_cache(maxsize=PLDS_KEPT)
def _kept_pld(event: dp_event.DpEvent, relation: NeighborRel, d: float) -> pld_lib.PrivacyLossDistribution | None:
    return _built_pld(event, relation, d)


def _built_pld(event: dp_event.DpEvent, relation: NeighborRel, d: float) -> pld_lib.PrivacyLossDistribution | None:
    """:func:`pld_of`, built on the loss grid ``d`` (its parts through :func:`pld_of`)."""
    if isinstance(event, dp_event.NoOpDpEvent):
        return pld_lib.identity(value_discretization_interval=d)
    if isinstance(event, PureDpEvent):
        return pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(event.epsilon, 0.0),
                                               value_discretization_interval=d)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = pld_of(event.event, relation)
        return None if inner is None else inner.self_compose(event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        parts = [pld_of(e, relation) for e in event.events]
        if any(p is None for p in parts):
            return None
        total = pld_lib.identity(value_discretization_interval=d)
        for part in parts:
            total = total.compose(part)
        return total
    if isinstance(event, dp_event.PoissonSampledDpEvent):
        inner = event.event
        if relation is not NeighborRel.ADD_OR_REMOVE_ONE or getattr(inner, "noise_multiplier", 0) <= 0:
            return None
        if isinstance(inner, dp_event.GaussianDpEvent):
            return pld_lib.from_gaussian_mechanism(standard_deviation=inner.noise_multiplier,
                                                   value_discretization_interval=d,
                                                   sampling_prob=event.sampling_probability)
        if isinstance(inner, dp_event.LaplaceDpEvent):
            return pld_lib.from_laplace_mechanism(parameter=inner.noise_multiplier, value_discretization_interval=d,
                                                  sampling_prob=event.sampling_probability)
        return None
    # An additive mechanism without sampling: its PLD depends only on the shift between the neighbours' outputs, one
    # noise_multiplier under the claim's own relation (the convention above), which is dp-accounting's
    # ADD_OR_REMOVE_ONE construction. (Its REPLACE_ONE construction shifts by two units: it reads the noise
    # multiplier against the add/remove sensitivity, where its RDP accountant, like this module, does not.)
    if isinstance(event, dp_event.GaussianDpEvent) and event.noise_multiplier > 0:
        return pld_lib.from_gaussian_mechanism(standard_deviation=event.noise_multiplier,
                                               value_discretization_interval=d)
    if isinstance(event, dp_event.LaplaceDpEvent) and event.noise_multiplier > 0:
        return pld_lib.from_laplace_mechanism(parameter=event.noise_multiplier, value_discretization_interval=d)
    return None


def pld_of_events(events: Iterable[dp_event.DpEvent], relation: str) -> pld_lib.PrivacyLossDistribution | None:
    """The PLD of releasing every event (their :func:`pld_of` composed), or None if PLD does not cover one, or if
    their RDP bound at δ = 1e-6 (:class:`RdpBound`) exceeds :data:`PLD_EPSILON_LIMIT` (the memory guard: RDP
    then, see there)."""
    events = list(events)
    rel = relation_of(relation)
    if _rdp_epsilon_too_large(events, relation):
        return None
    total = pld_lib.identity(value_discretization_interval=VALUE_DISCRETIZATION)
    for event in events:
        part = pld_of(event, rel)
        if part is None:
            return None
        total = total.compose(part)
    return total


class RdpBound:
    """A running upper bound on the ε at δ = 1e-6 of events composed so far (RDP over the non-pure events plus the
    pure events' ε): what the memory guard reads. ``known`` is False once an event RDP does not cover was added (a
    Poisson-sampled Laplace, say), or one that adds no noise: the bound then says nothing, and PLD may try.

    It sums, per order α of dp-accounting's default orders, ``count * RDP_α(event)`` over the events (what
    ``RdpAccountant.compose`` adds), each event's RDP vector computed once per process (:func:`_event_rdp`: a
    DP-SGD step's takes about 50 ms, and the ledger adds the same events run after run)."""

    def __init__(self, relation: str):
        self._relation = relation_of(relation)
        self._rdp = np.zeros(len(rdp_accountant.DEFAULT_RDP_ORDERS))
        self._pure = 0.0
        self.known = True

    def add(self, events: Iterable[dp_event.DpEvent], times: int = 1) -> None:
        """Compose ``times`` releases of ``events``."""
        pure, rest = _pure_parts(list(events), times)
        self._pure += pure
        for event, count in rest:
            rdp = None if _not_private(event) or not self.known else _event_rdp(event, self._relation)
            if rdp is None:
                self.known = False
            else:
                self._rdp += count * rdp

    def too_large_for_pld(self) -> bool:
        """Whether the bound is known and above :data:`PLD_EPSILON_LIMIT`."""
        if not self.known:
            return False
        epsilon = rdp_accountant.compute_epsilon(rdp_accountant.DEFAULT_RDP_ORDERS, self._rdp, 1e-6)[0]
        return float(epsilon) + self._pure > PLD_EPSILON_LIMIT


def _event_rdp(event: dp_event.DpEvent, relation: NeighborRel) -> np.ndarray | None:
    """The RDP of one release of ``event`` at dp-accounting's default orders (None if its RDP accountant does not
    support it), kept per process for hashable events (leaves: ``_pure_parts`` flattens compositions)."""
    try:
        return _cached_event_rdp(event, relation)
    except TypeError:  # unhashable (an event holding a list): computed each time
        return _cached_event_rdp.__wrapped__(event, relation)


@functools.lru_cache(maxsize=1024)
def _cached_event_rdp(event: dp_event.DpEvent, relation: NeighborRel) -> np.ndarray | None:
    accountant = dp_accounting.rdp.RdpAccountant(neighboring_relation=relation)
    if not accountant.supports(event):
        return None
    accountant.compose(event)
    rdp = accountant._rdp.copy()  # noqa: SLF001 (dp-accounting has no public getter of the RDP vector)
    rdp.setflags(write=False)
    return rdp


def _rdp_epsilon_too_large(events: list[dp_event.DpEvent], relation: str) -> bool:
    bound = RdpBound(relation)
    bound.add(events)
    return bound.too_large_for_pld()


def _not_private(event: dp_event.DpEvent) -> bool:
    if isinstance(event, dp_event.NonPrivateDpEvent):
        return True
    if isinstance(event, PureDpEvent):
        return not math.isfinite(event.epsilon)
    if isinstance(event, (dp_event.GaussianDpEvent, dp_event.LaplaceDpEvent)):
        return event.noise_multiplier == 0
    children = ([event.event] if hasattr(event, "event") else []) + list(getattr(event, "events", []))
    return any(_not_private(c) for c in children)


def compose(events: Iterable[dp_event.DpEvent], *, delta: float, relation: str) -> Composition:
    """The (ε, δ) of releasing every event: by PLD when PLD covers every event under ``relation``, else by RDP over
    the other events plus the pure events' ε added (basic composition); ε is infinite (:data:`NOT_PRIVATE`) when an
    event adds no noise; a ``ValueError`` names an event neither accountant covers.

    Args:
        events: the events (dp-accounting values or :class:`PureDpEvent`).
        delta: the δ at which ε is computed, in (0, 1).
        relation: a key of :data:`RELATIONS`.
    """
    events = list(events)
    rel = relation_of(relation)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1); got {delta}")
    if any(_not_private(e) for e in events):
        return Composition(math.inf, delta, NOT_PRIVATE, relation)
    total = pld_of_events(events, relation)
    if total is not None:
        return Composition(float(total.get_epsilon_for_delta(delta)), delta, PLD, relation)
    pure, rest = _pure_parts(events)
    accountant = dp_accounting.rdp.RdpAccountant(neighboring_relation=rel)
    for event, count in rest:
        if not accountant.supports(event):
            raise ValueError(f"no accountant here covers {type(event).__name__} under {relation}: "
                             f"{to_json(event)}")
        accountant.compose(event, count)
    return Composition(float(accountant.get_epsilon(delta)) + pure, delta, RDP, relation)


def epsilon_of_json(events: Iterable[dict[str, Any]], *, delta: float, relation: str) -> Composition:
    """:func:`compose` of events in their JSON form (a stored claim's ``events``)."""
    return compose([from_json(e) for e in events], delta=delta, relation=relation)
