"""The one-time upgrade giving the claims of runs stored before claims carried privacy events their events, rebuilt
from each run's stored config and summary by the functions that state new claims (issue 37, item 1).

A store that held runs when it reached schema version 10 asks for it (``store.upgrades.CLAIM_EVENTS``); the store
imports no mechanism, so the ledger does it: the first time the ledger or ``show`` opens such a store
(:func:`ensure`), or on ``python -m privengine ledger upgrade`` (:func:`upgrade`). It is done once: the store records
it with its report, which later calls return.

For every run created before the request, each claim without events in its summary (and in its planned charge) is
matched with the claim of the same label that its mechanism's ``stored_claims(config, summary)`` restates (DP-SGD:
the run's (σ, q, steps) histories; PATE: the queries it charged; DP-Bayes: each method's noise and steps). It gets
that claim's ``events`` and ``relation`` when:

- the restated claim carries events: it is a composition of releases. Figures (data-dependent bounds, the GDP
  approximation, group-privacy conversions, a PATE headline with a sanitized release) carry none and get none;
- it states the stored (ε, δ): ε to :data:`RELATIVE` (the same accountant on the same inputs), or within the PRV
  accountant's own error (2 eps_error) for a claim the PRV accountant computed: so the events describe the inputs
  the stored ε was computed from;
- the ledger's composition of the events alone (``composition.epsilon_alone``: PLD, else RDP) at the claim's δ is
  not above its ε by more than :data:`LEDGER_TOLERANCE` (1 %, and PRV's 2 eps_error: PLD against PRV). It may be
  below: PLD is tighter than the RDP conversions some claims state. A claim at δ = 0 (exact draws of the exponential
  mechanism, whose events are pure) is checked by the second condition alone.

Any other claim keeps no events and is counted in the report, with why: the ledger composes a headline without
events by its (ε, δ) (basic composition). Only a claim's structured fields change, never its text; its caveats
stay the stored ones.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

from ..accounting.opacus_names import ACCOUNTANT_NAMES, PRV_EPS_ERROR
from ..claims import PrivacyClaim
from ..store import RunStore
from ..store.upgrades import CLAIM_EVENTS, StoredSummaries
from .composition import epsilon_alone

RELATIVE = 1e-6  # the restated ε against the stored one (one accountant, the same inputs: floating point only)
LEDGER_TOLERANCE = 0.01  # how far above the stated ε the ledger's composition of the events may be (PLD's estimate)


def _restaters() -> dict[str, Callable[[dict, dict], list[PrivacyClaim]]]:
    """Each shipped mechanism that states claims -> its ``stored_claims(config, summary)`` (imported on use: they
    import torch)."""
    from ..dp_bayes.comparison import stored_claims as dp_bayes
    from ..dpsgd.privacy import stored_claims as dpsgd
    from ..pate.run import stored_claims as pate

    return {"dpsgd": dpsgd, "pate": pate, "dp_bayes": dp_bayes}


def ensure(store: RunStore) -> None:
    """Do the upgrade if the store asks for it and it is not done (otherwise one query)."""
    record = store.upgrade_record(CLAIM_EVENTS)
    if record is not None and record.done_at is None:
        upgrade(store)


def upgrade(store: RunStore) -> dict[str, Any] | None:
    """Do the pending upgrade and return its report; the recorded report if it was done before; None if the store
    never asked for it (it held no run when it reached schema version 10).

    The report (claims counted over summaries and planned charges) counts ``runs`` (runs with a claim without events)
    and ``given_events`` (claims that got events), and
    lists ``not_reproduced`` (claims whose restated events did not reproduce them: run id, ``in`` summary or
    planned charge, label, why), ``not_restated`` (summaries that could not be restated: run id, in, why),
    ``headlines_without_events`` (runs whose headline the ledger composes by basic composition); ``figures``
    counts the claims the current code states without events, or does not state; ``changed_since_read`` the
    summaries another process rewrote meanwhile (kept as they are)."""
    record = store.upgrade_record(CLAIM_EVENTS)
    if record is None or record.done_at is not None:
        return None if record is None else record.report
    tally: dict[str, Any] = {"runs": 0, "given_events": 0, "not_reproduced": [], "not_restated": [], "figures": 0,
                             "headlines_without_events": []}
    rewrites = []
    restaters = _restaters()
    for run in store.runs_created_before(record.requested_at):
        lacking = False
        for column, text in (("summary", run.summary), ("planned_charge", run.planned_charge)):
            summary = json.loads(text) if text else {}
            claims = summary.get("privacy") or []
            if all(c.get("events") for c in claims):
                continue
            lacking = True
            new = _upgraded(run, column, summary, restaters.get(run.mechanism), tally)
            if new != claims:
                rewrites.append((run.id, column, text, {**summary, "privacy": new}))
            if column == "summary" and any(c.get("headline") and not c.get("events") for c in new):
                tally["headlines_without_events"].append(run.id)
        tally["runs"] += lacking
    store.finish_upgrade(CLAIM_EVENTS, rewrites, tally)
    return store.upgrade_record(CLAIM_EVENTS).report


def _upgraded(run: StoredSummaries, column: str, summary: dict, restate: Callable | None,
              tally: dict[str, Any]) -> list[dict]:
    """The claims of ``summary`` (the run's ``column``), each without events given the events of its restated claim
    where they reproduce it (see the module docstring); ``tally`` counts what happened."""
    claims = summary["privacy"]
    try:
        if restate is None:
            raise LookupError(f"{run.mechanism} has no restatement of its stored claims")
        restated = {c.label: c for c in restate(run.config, summary) if c.events}
    except Exception as exc:  # noqa: BLE001  (an old config or summary this code cannot read: reported, kept)
        tally["not_restated"].append({"run_id": run.id, "in": column, "why": f"{type(exc).__name__}: {exc}"})
        return claims
    out = []
    for data in claims:
        match = None if data.get("events") else restated.get(data["label"])
        if match is None:
            tally["figures"] += not data.get("events")
            out.append(data)
            continue
        why = _why_not(data, match)
        if why is None:
            tally["given_events"] += 1
            out.append({**data, "events": list(match.events), "relation": match.relation})
        else:
            tally["not_reproduced"].append({"run_id": run.id, "in": column, "label": data["label"], "why": why})
            out.append(data)
    return out


def _why_not(stored: dict[str, Any], restated: PrivacyClaim) -> str | None:
    """None if ``restated``'s events reproduce the ``stored`` claim (see the module docstring), else why not."""
    epsilon, delta = stored.get("epsilon"), stored.get("delta")
    if not all(isinstance(v, (int, float)) for v in (epsilon, delta)):
        return f"its stored (ε, δ) = ({epsilon}, {delta}) is not a pair of numbers"
    prv = ACCOUNTANT_NAMES["prv"] in stored.get("accountant", "")
    if restated.delta != delta or not math.isclose(restated.epsilon, epsilon, rel_tol=RELATIVE,
                                                   abs_tol=2 * PRV_EPS_ERROR if prv else 0.0):
        return (f"restated from its stored config and summary it is ε = {restated.epsilon:.6g} at δ = "
                f"{restated.delta:g}, not the stored ε = {epsilon:.6g} at δ = {delta:g}")
    if delta == 0:
        return None
    composed, accountant = epsilon_alone(restated.events, restated.relation, delta)
    if composed > epsilon * (1 + LEDGER_TOLERANCE) + 2 * PRV_EPS_ERROR:
        return f"its events compose to ε = {composed:.6g} ({accountant}), above the stored ε = {epsilon:.6g}"
    return None
