"""A data source's privacy ledger (:class:`privengine.ledger.Ledger`) drawn and written for people, without Streamlit:
the Ledger page, the line beside a mechanism page's Launch button and every report's ledger section read these.

- :func:`spent_figure`: ε spent over time, a step chart. Point k is the ledger's ε after its first ``runs_k``
  charged runs (``Ledger.over_time``: ε_k = composition of the events of runs 1..k at the ledger's δ), held
  until the next run is charged; the budget in force, a step line over its settings; the last point, when active
  runs are charged their planned release, apart;
- :func:`total_text`, :func:`budget_text`, :func:`share_text`: the total with its δ, neighbouring relation,
  accountants and any group-privacy conversion in words; a budget; one run's share (its ε alone) or why it has none;
- :func:`shares_frame`, :func:`uncovered_frame`, :func:`budget_history_frame`: the page's tables.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Mapping

import pandas as pd
import plotly.graph_objects as go

from privengine.accounting.events import RELATION_TEXT
from privengine.ledger import Ledger
from privengine.ledger.ledger import EVENTS
from privengine.store import BudgetRecord

from .common import INK, LAYOUT, waiting_if_empty
from .compare import mechanism_name
from .text import accountant_name, number

SPENT, PLANNED = "#1f77b4", "#9ecae1"  # the spent line; the point with the active runs' planned charges, lighter


def budget_text(budget: BudgetRecord | None) -> str:
    """``ε = 3 at δ = 1e-05`` of a budget; ``none set`` without one."""
    return "none set" if budget is None else f"ε = {budget.epsilon:g} at δ = {budget.delta:g}"


def total_text(ledger: Ledger) -> str:
    """The ledger's total in words: ε at its δ, the neighbouring relation it holds for, how many runs it charges,
    the accountants that composed it, and the group-privacy conversion and basic composition where they were used."""
    total = ledger.total
    if not ledger.shares:
        return f"Nothing charged yet: ε = 0 at δ = {ledger.delta:g}."
    planned = sum(s.planned for s in ledger.shares)
    runs = f"{len(ledger.shares)} charged run{'s' if len(ledger.shares) > 1 else ''}" + (
        f" ({planned} still active, charged their planned release)" if planned else "")
    text = (f"ε = {number(total.epsilon)} at δ = {total.delta:.3g} for neighbouring data sets that "
            f"{RELATION_TEXT[total.relation]}, over {runs}, composed by {' and '.join(total.accountants)}.")
    if total.conversion:
        text += f" Add/remove and replace-one releases are joined by {total.conversion}."
    if total.basic != (0.0, 0.0):
        text += (f" Claims without events count ε = {number(total.basic[0])}, δ = {total.basic[1]:.3g} of it "
                 "(basic composition).")
    return text


def share_text(ledger: Ledger, run_id: str) -> str:
    """What run ``run_id`` is charged in ``ledger``: its ε alone (at the ledger's δ, from its events, or its claim's
    own (ε, δ)), or why it is charged nothing (an uncovered use, pending, or it released nothing)."""
    share = next((s for s in ledger.shares if s.run_id == run_id), None)
    if share is not None:
        how = "from its events" if share.composed == EVENTS else "its claim's own (ε, δ), without events"
        return (f"ε = {number(share.epsilon)} alone at δ = {share.delta:.3g} ({accountant_name(share.accountant)}, "
                f"{how})" + ("; planned: the run is still active" if share.planned else ""))
    use = next((u for u in ledger.uncovered + ledger.pending if u.run.id == run_id), None)
    if use is not None:
        return f"not charged: {use.why}"
    return "not charged: it released nothing"


def _when(at: float) -> datetime:
    return datetime.fromtimestamp(at)


def _clock(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at))


def spent_figure(ledger: Ledger) -> go.Figure:
    """The step chart of ε spent over time (see the module docstring), with the budget's settings as a dashed step
    line. The points' ε are those of ``ledger.over_time``, in order: the ended runs' on the spent line, then, when
    active runs are charged their planned release, the last on a trace of its own; a line without points holds the
    last value until now (and until the budget's last setting, if later)."""
    points = list(ledger.over_time)
    planned = any(s.planned for s in ledger.shares)
    ended, last = (points[:-1], points[-1:]) if planned else (points, [])
    fig = go.Figure()

    def trace(part, name: str, colour: str, dash: str) -> go.Scatter:
        return go.Scatter(x=[_when(p.at) for p in part], y=[p.epsilon for p in part], name=name, mode="lines+markers",
                          line=dict(shape="hv", color=colour, dash=dash), marker=dict(size=7),
                          hovertemplate="%{text}<extra></extra>",
                          text=[f"{_clock(p.at)}<br>after {p.runs} run{'s' if p.runs > 1 else ''}: "
                                f"ε = {number(p.epsilon)}" for p in part])

    if ended:
        fig.add_trace(trace(ended, "ε spent", SPENT, "solid"))
    if last:
        fig.add_trace(trace(ended[-1:] + last, "with active runs' planned charges", PLANNED, "dot"))
    history = ledger.budget_history
    end = max([p.at for p in points] + [b.set_at for b in history[-1:]] + [time.time()])
    if points:  # the ledger holds its last value until now
        fig.add_trace(go.Scatter(x=[_when(points[-1].at), _when(end)], y=[points[-1].epsilon] * 2, mode="lines",
                                 line=dict(color=PLANNED if last else SPENT, dash="dot" if last else "solid"),
                                 showlegend=False, hoverinfo="skip"))
    if history and points:
        fig.add_trace(go.Scatter(x=[_when(b.set_at) for b in history] + [_when(end)],
                                 y=[b.epsilon for b in history] + [history[-1].epsilon], name="budget ε",
                                 mode="lines", line=dict(shape="hv", color=INK, dash="dash", width=1.5),
                                 hovertemplate="budget ε = %{y:g}<extra></extra>"))
    how = ", ".join(accountant_name(a) for a in ledger.total.accountants)
    fig.update_layout(title=f"ε spent over time (every run charged so far, at δ = {ledger.delta:g}"
                            + (f", by {how})" if how else ")"),
                      xaxis_title="when the run was charged", yaxis_title="ε spent", **{**LAYOUT, "height": 360})
    fig.update_yaxes(rangemode="tozero")
    return waiting_if_empty(fig, "no run charged yet")


def shares_frame(ledger: Ledger, names: Mapping[str, str] | None = None) -> pd.DataFrame:
    """One row per charged run, in the order charged: id, name (``names``: run id -> name), mechanism, state, its ε
    alone at its δ (the ledger's; a claim's own without events: the shares do not add up to the total), when it was
    charged, how its ε was computed, and its sweep."""
    names = names or {}
    rows = [{"run": s.run_id, "name": names.get(s.run_id, ""), "mechanism": mechanism_name(s.mechanism),
             "state": s.state + (" (planned charge)" if s.planned else ""), "ε alone": s.epsilon, "δ": f"{s.delta:g}",
             "charged": _clock(s.at), "computed": f"{accountant_name(s.accountant)} ({s.composed})",
             "sweep": s.sweep_id or ""} for s in ledger.shares]
    return pd.DataFrame(rows, columns=["run", "name", "mechanism", "state", "ε alone", "δ", "charged", "computed",
                                       "sweep"])


def uncovered_frame(ledger: Ledger) -> pd.DataFrame:
    """The uses of the source no claim covers (an audit's, a run's without a claim, the public or held-out rows a
    run used): run, mechanism, state, kind, when the run was created, and why in words."""
    rows = [{"run": u.run.id, "mechanism": mechanism_name(u.run.mechanism), "state": u.run.state, "kind": u.kind,
             "created": _clock(u.run.created_at), "why": u.why} for u in ledger.uncovered]
    return pd.DataFrame(rows, columns=["run", "mechanism", "state", "kind", "created", "why"])


def budget_history_frame(ledger: Ledger) -> pd.DataFrame:
    """Every budget set on the source, newest first (the first row is in force)."""
    rows = [{"set": _clock(b.set_at), "ε": b.epsilon, "δ": f"{b.delta:g}", "note": b.note}
            for b in reversed(ledger.budget_history)]
    return pd.DataFrame(rows, columns=["set", "ε", "δ", "note"])
