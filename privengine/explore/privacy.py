"""The privacy claim of a sweep: selecting among its runs is covered only by composing all of them.

Choosing the best of N trained models by their results releases information from all N,
so a sweep states, beside each run's own claim, the composition of every run that stated
one: with the mechanism's own accountant where it composes (``Frontier.compose``, e.g.
Opacus over every DP-SGD step of every model), otherwise by :func:`composition`: the tight
composition of the privacy events the headline claims record (dp-accounting's PLD or RDP,
:func:`privengine.accounting.events.compose`) where every one records events under one neighbouring
relation, else basic composition of the headline claims (eps = sum eps_i, delta = sum delta_i;
Dwork et al. 2006), saying why.

Every run that stated a claim is composed, whatever its state: finished, stopped (its claim
covers the steps it took), failed (a run that fails after storing outputs stores the claim it
was charged with, ``reporter.charge``) or interrupted, or failed on a dead Ray worker (a run whose
process died after storing outputs is stored with its planned charge, ``reporter.charge_plan``:
its whole planned release): its curves were seen too. Every attempt the sweep stored counts,
resumed ones included (a resumed run trains again with fresh noise: a second release). The claim
says how many of each it composed out of how many stored, and which runs it could not (no claim:
nothing released, or stored before runs declared a planned charge and lost with its process).
"""

from __future__ import annotations

import functools
import json

from privengine import registry
from privengine.accounting.events import compose, from_json
from privengine.claims import PrivacyClaim, headline_of, union_caveats
from privengine.store import STATES, RunRecord

SELECTION_CAVEAT = ("Choosing the best of several trained models by their results releases information from all "
                    "of them: picking a point of this sweep's frontier is covered only by this composed claim, "
                    "not by the per-run claims.")


def claimed_runs(runs: list[RunRecord]) -> list[RunRecord]:
    """The runs that stated a headline claim: finished, stopped with a partial claim, failed with the claim
    it was charged with, or ended by the death of its process with its planned charge."""
    return [r for r in runs if headline_of(r.summary) is not None]


def _by_state(runs: list[RunRecord]) -> str:
    """``"2 finished, 1 failed"``: how many of ``runs`` are in each state, in the store's order of states."""
    counts = {state: sum(r.state == state for r in runs) for state in STATES}
    return ", ".join(f"{n} {state}" for state, n in counts.items() if n)


def sweep_claim(mechanism: str, runs: list[RunRecord], utility=None) -> PrivacyClaim | None:
    """The composed claim of every run (every attempt) of a sweep that stated one, whatever its state; None if
    none did.

    Its caveats say how many of the runs the sweep stored it composes, of each state, and how many it leaves out:
    runs still queued or running (not yet), and ended runs that stated no claim (a run states none when it
    released nothing; one whose process died before runs stored a planned charge, or a failed run stored before
    failures were charged, may have stored curves that no claim covers). When it leaves some out, its label says
    how many of the stored runs it composes, so "all N runs" never reads as the whole sweep. ``utility``: the axis
    points are chosen by; if it is computed from the private data the claim says that choosing by it is not
    covered.
    """
    claimed = claimed_runs(runs)
    if not claimed:
        return None
    frontier = registry.get(mechanism).frontier
    if frontier is not None and frontier.compose:
        claim = registry.load_callable(frontier.compose)(claimed)
    else:
        claim = composition(claimed)
    composed = {r.id for r in claimed}
    unclaimed = [r for r in runs if r.id not in composed]
    active = [r for r in unclaimed if r.active]
    ended = [r for r in unclaimed if not r.active]
    caveats = (SELECTION_CAVEAT,
               f"Composes the claims of {len(claimed)} run(s): {_by_state(claimed)}"
               + ("" if all(r.state == "finished" for r in claimed) else
                  " (a stopped or failed run is charged for what it released before it ended; one whose process "
                  "died, its whole planned release)")
               + (", every run" if not unclaimed else f", of the {len(runs)} runs")
               + " the sweep stored (each attempt, a resumed run's earlier ones included).")
    if utility is not None and not utility.covered:
        caveats += (f"The utility axis ({utility.label}) is computed from the private data, not only from the "
                    "released outputs: choosing a run by it is NOT covered by this or any claim here.",)
    if ended:
        caveats += (f"{len(ended)} run(s) of the sweep stated no claim ({_by_state(ended)}): they are not in this "
                    "composition. A run states none when it released nothing (cancelled, never started, stopped "
                    "before its first step, failed before training, or its process died before it stored any "
                    "output); one whose process died before runs stored a planned charge, or that failed before "
                    "failures were charged, may have stored curves that no claim covers (its error says so).",)
    if active:
        caveats += (f"{len(active)} run(s) are still queued or running: not in this composition yet.",)
    label = claim.label if not unclaimed else (f"{claim.label}, composing {len(claimed)} of the {len(runs)} runs "
                                               "the sweep stored (the caveats say why not the others)")
    return PrivacyClaim(**{**claim.to_dict(), "label": label, "caveats": caveats + claim.caveats, "headline": True})


def selection_claim(spec, finished: list[RunRecord], utility=None, *,
                    attempts: list[RunRecord] | None = None) -> PrivacyClaim | str:
    """Random-repetition sweeps: what covers publishing only the best run, or why nothing does (a string).

    ``finished``: the finished runs among the latest attempts; ``attempts``: every run the sweep stored,
    resumed attempts included (default: ``finished``). The sweep's spec was checked at launch (the mechanism
    reports RDP, only neutral knobs vary).

    The Papernot & Steinke bound covers exactly this: K ~ the declared law runs were drawn, each ran to the end,
    and only the best is published. So it is stated only when every one of the K drawn runs finished and the
    sweep stored no other attempt. A stopped, failed or still running run breaks the first (the bound's K would
    be the number that happened to complete, which depends on the runs; and a run that ended early has released
    curves too); an earlier attempt of a resumed run breaks the second (it released outputs the bound does not
    count). Otherwise publishing the best run is covered by what covers every run that ran: the sweep's composed
    claim (:func:`sweep_claim`), restated here with a caveat saying why.
    """
    frontier = registry.get(spec.mechanism).frontier
    if utility is not None and not utility.covered:
        return (f"the best run is chosen by {utility.label}, computed from the private data: the random-repetition "
                "bound does not cover that choice")
    attempts = list(finished) if attempts is None else list(attempts)
    drawn = len(spec.plan or ())
    claimed = claimed_runs(finished)
    complete = len(claimed) == len(finished) == drawn and len(attempts) == drawn
    if not complete:
        return _composed_instead(spec, finished, attempts, drawn, utility)
    if not claimed:
        return "no run has finished yet"
    outcome = registry.load_callable(frontier.repeat_and_select)(claimed, spec.repeat["shape"],
                                                                 float(spec.repeat["mean"]))
    if isinstance(outcome, str):
        return outcome
    # K itself stays out of the claim's text: the bound holds for an adversary who does not know K, and a
    # claim is published with the run (the sweep page shows K to its operator).
    caveat = (f"Covers publishing only the single best run (by the utility axis) of this randomly repeated sweep "
              f"(K ~ {spec.repeat['shape']} with mean {spec.repeat['mean']:g}; every drawn run finished), not the "
              "whole frontier shown (the composed claim covers that). Do not publish K. K and each run's setting "
              "were drawn at launch and are recorded with the sweep (needed to resume it): the bound assumes the "
              "adversary does not know them, so keep the sweep's record private (without secure noise they are a "
              "function of the recorded draw seed).")
    return PrivacyClaim(**{**outcome.to_dict(), "caveats": (caveat,) + outcome.caveats, "headline": False})


def _composed_instead(spec, finished: list[RunRecord], attempts: list[RunRecord], drawn: int,
                      utility) -> PrivacyClaim | str:
    """:func:`selection_claim` when the random-repetition bound does not apply: the composition of every run
    that ran, with the reason first among its caveats (or, if no run states a claim, the reason alone)."""
    done = {r.id for r in finished}
    others = [r for r in attempts if r.id not in done]
    earlier = len(attempts) - len({(r.sweep_point, r.config.get("seed")) for r in attempts})  # resumed attempts
    reason = f"{len(finished)} of {drawn} drawn runs finished"
    if others:
        reason += f" (the sweep's other stored runs: {_by_state(others)})"
    if earlier:
        reason += f"; {earlier} earlier attempt(s) of resumed runs are stored too"
    composed = sweep_claim(spec.mechanism, attempts, utility)
    if composed is None:
        return f"{reason}, and no run that ran states a claim"
    caveat = (f"{reason}: the random-repetition (best-only) bound needs every drawn run to complete, with no other "
              "attempt, so publishing only the best run is covered here by composing every run that ran (the "
              "sweep's composed claim).")
    return PrivacyClaim(**{**composed.to_dict(), "label": f"publishing only the best run: {composed.label}",
                           "caveats": (caveat,) + composed.caveats, "headline": False})


def composition(runs: list[RunRecord]) -> PrivacyClaim:
    """The claim of releasing every run's output: the tight composition of the events of the runs' headline
    claims, or, where that cannot be computed, :func:`basic_composition` with the reason among its caveats.

    Composed tightly when every headline claim records events and all state them under one relation: all their
    events compose by :func:`~privengine.accounting.events.compose` (PLD where it covers every event, else RDP; the
    claim names which), at delta = the largest delta of the claims (the delta of every claim when they share one).
    Any delta is valid there: the epsilon is computed from the events, not from the claims' (eps_i, delta_i), so
    (eps(delta), delta) holds for the whole release at every delta. Basic composition states (sum eps_i,
    sum delta_i), whose delta is at least the largest; so when the tight epsilon is not above the sum of the
    epsilons, the tight claim is the stronger statement and is the one made, otherwise basic composition is (with
    that reason). Claims that are all pure (delta = 0) are added: basic composition is then exact at delta = 0.
    The tight composition of one set of events is computed once per process (:func:`_composed`): a live sweep's
    page asks again every second.
    """
    headlines = [headline_of(r.summary) for r in runs]
    relations = {h.relation for h in headlines}
    deltas = [h.delta for h in headlines if h.delta > 0]
    if missing := sum(not h.events for h in headlines):
        return basic_composition(runs, f"the headline claims of {missing} of the {len(runs)} runs record no privacy "
                                       "events (a figure that is not a composition of events, or a run stored "
                                       "before claims recorded them)")
    if len(relations) > 1:
        return basic_composition(runs, "the headline claims state their events under different neighbouring "
                                       f"relations ({', '.join(sorted(map(str, relations)))})")
    if not deltas:
        return basic_composition(runs, "every headline claim is pure (delta = 0), where adding the epsilons is "
                                       "exact")
    (relation,) = relations
    events = tuple(e for h in headlines for e in h.events)
    try:
        composed = _composed(json.dumps(events, sort_keys=True), max(deltas), relation)
    except ValueError as exc:  # an event no accountant here covers under the relation, or a malformed event
        return basic_composition(runs, str(exc))
    if composed.epsilon > sum(h.epsilon for h in headlines):
        return basic_composition(runs, f"the events composed at delta = {composed.delta:g} give epsilon = "
                                       f"{composed.epsilon:.3g}, above the sum of the claims' epsilons")
    return PrivacyClaim(
        label=f"selecting among the {len(runs)} runs of the sweep that state a claim (their privacy events "
              "composed)",
        epsilon=composed.epsilon, delta=composed.delta,
        accountant=f"{composed.accountant}, composing the privacy events of the {len(runs)} runs' headline claims",
        neighbouring=_neighbouring(headlines), caveats=union_caveats(headlines), headline=True,
        condition=_condition(headlines), events=events, relation=relation)


@functools.lru_cache(maxsize=256)
def _composed(events_json: str, delta: float, relation: str):
    """:func:`~privengine.accounting.events.compose` of events given as one JSON text (a cache key)."""
    return compose([from_json(e) for e in json.loads(events_json)], delta=delta, relation=relation)


def basic_composition(runs: list[RunRecord], why: str) -> PrivacyClaim:
    """Basic composition of the runs' headline claims: (sum eps_i, sum delta_i); ``why``: why not tighter, stated
    as its last caveat."""
    headlines = [headline_of(r.summary) for r in runs]
    accountants = sorted({h.accountant for h in headlines})
    return PrivacyClaim(
        label=f"selecting among the {len(runs)} runs of the sweep that state a claim (basic composition)",
        epsilon=sum(h.epsilon for h in headlines), delta=sum(h.delta for h in headlines),
        accountant="basic composition (Dwork et al. 2006) of the runs' headline claims, each from: "
                   + "; ".join(accountants),
        neighbouring=_neighbouring(headlines),
        caveats=union_caveats(headlines) + (f"Composed by adding the claims' epsilons and deltas: {why}.",),
        headline=True, condition=_condition(headlines))


def _neighbouring(headlines: list[PrivacyClaim]) -> str:
    """The claims' neighbouring relation, or every one they state."""
    relations = sorted({h.neighbouring for h in headlines})
    return relations[0] if len(relations) == 1 else "the strictest of: " + " | ".join(relations)


def _condition(headlines: list[PrivacyClaim]) -> str | None:
    """Every condition the claims state, each once (None if none does)."""
    return "; ".join(dict.fromkeys(h.condition for h in headlines if h.condition)) or None
