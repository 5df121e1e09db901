"""The privacy claim of a sweep: selecting among its runs is covered only by composing all of them.

Choosing the best of N trained models by their results releases information from all N,
so a sweep states, beside each run's own claim, the composition of every run that stated
one: with the mechanism's own accountant where it composes (``Frontier.compose``, e.g.
Opacus over every DP-SGD step of every model), basic composition of the headline claims
otherwise (eps = sum eps_i, delta = sum delta_i; Dwork et al. 2006).
"""

from __future__ import annotations

from privengine import registry
from privengine.claims import PrivacyClaim, headline_of, union_caveats
from privengine.store import RunRecord

SELECTION_CAVEAT = ("Choosing the best of several trained models by their results releases information from all "
                    "of them: picking a point of this sweep's frontier is covered only by this composed claim, "
                    "not by the per-run claims.")


def claimed_runs(runs: list[RunRecord]) -> list[RunRecord]:
    """The runs that stated a headline claim (finished, or stopped with a partial claim)."""
    return [r for r in runs if headline_of(r.summary) is not None]


def sweep_claim(mechanism: str, runs: list[RunRecord], utility=None) -> PrivacyClaim | None:
    """The composed claim of every run (every attempt) of a sweep that stated one; None if none did.

    ``utility``: the axis points are chosen by; if it is computed from the private data the claim says
    that choosing by it is not covered.
    """
    claimed = claimed_runs(runs)
    if not claimed:
        return None
    frontier = registry.get(mechanism).frontier
    if frontier is not None and frontier.compose:
        claim = registry.load_callable(frontier.compose)(claimed)
    else:
        claim = basic_composition(claimed)
    left_out = len(runs) - len(claimed)
    caveats = (SELECTION_CAVEAT,)
    if utility is not None and not utility.covered:
        caveats += (f"The utility axis ({utility.label}) is computed from the private data, not only from the "
                    "released outputs: choosing a run by it is NOT covered by this or any claim here.",)
    if left_out:
        caveats += (f"{left_out} run(s) of the sweep stated no claim (failed, or stopped before any step): they "
                    "are not in this composition, and the curves they stored are not covered.",)
    return PrivacyClaim(**{**claim.to_dict(), "caveats": caveats + claim.caveats, "headline": True})


def selection_claim(spec, finished: list[RunRecord], utility=None) -> PrivacyClaim | str:
    """Random-repetition sweeps: the Papernot & Steinke claim of publishing only the best finished run, or why
    there is none (the sweep's spec was checked at launch: the mechanism reports RDP, only neutral knobs vary)."""
    frontier = registry.get(spec.mechanism).frontier
    if utility is not None and not utility.covered:
        return (f"the best run is chosen by {utility.label}, computed from the private data: the random-repetition "
                "bound does not cover that choice")
    claimed = claimed_runs(finished)
    if not claimed:
        return "no run has finished yet"
    outcome = registry.load_callable(frontier.repeat_and_select)(claimed, spec.repeat["shape"],
                                                                 float(spec.repeat["mean"]))
    if isinstance(outcome, str):
        return outcome
    caveat = (f"Covers publishing only the single best run (by the utility axis) of this randomly repeated sweep "
              f"(K ~ {spec.repeat['shape']} with mean {spec.repeat['mean']:g}; K = {len(spec.plan)} drawn), not the "
              "whole frontier shown (the composed claim covers that). K and each run's setting were drawn at launch "
              "and are recorded with the sweep (needed to resume it): the bound assumes the adversary does not know "
              "them, so keep the sweep's record private (without secure noise they are a function of the recorded "
              "draw seed).")
    return PrivacyClaim(**{**outcome.to_dict(), "caveats": (caveat,) + outcome.caveats, "headline": False})


def basic_composition(runs: list[RunRecord]) -> PrivacyClaim:
    """Basic composition of the runs' headline claims: (sum eps_i, sum delta_i)."""
    headlines = [headline_of(r.summary) for r in runs]
    relations = sorted({h.neighbouring for h in headlines})
    accountants = sorted({h.accountant for h in headlines})
    conditions = list(dict.fromkeys(h.condition for h in headlines if h.condition))
    return PrivacyClaim(
        label=f"selecting among all {len(runs)} runs of the sweep (basic composition)",
        epsilon=sum(h.epsilon for h in headlines), delta=sum(h.delta for h in headlines),
        accountant="basic composition (Dwork et al. 2006) of the runs' headline claims, each from: "
                   + "; ".join(accountants),
        neighbouring=relations[0] if len(relations) == 1 else "the strictest of: " + " | ".join(relations),
        caveats=union_caveats(headlines), headline=True, condition="; ".join(conditions) or None)
