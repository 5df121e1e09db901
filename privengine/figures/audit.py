"""Audit runs: the claimed epsilon against the audited lower bound (per audited setting), the bound as the audit
goes, and the DP-SGD shaped-noise chart (canaries inside vs outside span(U), against alpha).

Every chart names what each number is: the claim is an accountant's upper bound, the audit a lower bound at a
stated confidence; an implementation that keeps its promise has its true epsilon between the two.
"""

from __future__ import annotations

from typing import Iterable, Mapping

import pandas as pd
import plotly.graph_objects as go

from privengine.audit import AuditResult, result_of
from privengine.store import RunSnapshot

from .common import LAYOUT, Table, curves

CLAIMED, AUDITED = "#1f77b4", "#d62728"
# what the audit's own setting caps it at (a detail an audit may report), drawn as a reference line
CEILINGS = {"pair_exact_epsilon": "exact ε of the audited pair (no audit of it can exceed this)",
            "perfect_auditor_cap": "the most a perfect auditor can show with these guesses"}
# what a step of an audit's curves counts, by audit
STEP_AXIS = {"pate-gnmax": "noisy answers drawn per histogram", "dpsgd-one-run": "audited model (one per alpha)",
             "dp-bayes-release": "releases drawn per data set",
             "dpsgd-membership": "reference models trained (the twin's after the target's)",
             "pate-membership": "reference models trained (the twin's after the target's)"}
SPACE_STYLE = {"inside": ("circle", "solid"), "outside": ("diamond", "dash"), "random": ("square", "dot")}


def _confidence_text(result: AuditResult) -> str:
    return f"{100 * result.confidence:g} % confidence"


def setting_rows(result: AuditResult) -> list[dict]:
    """One row per audited setting: ``setting``, ``claimed_epsilon``, ``audited_epsilon_lower`` (and the other
    columns the audit reports per setting); a single row named after the audit when it has no settings."""
    rows = result.details.get("settings")
    if rows:
        return [{**row, "audited_epsilon_lower": row["epsilon_lower"]} for row in rows]
    return [{"setting": result.audit, "claimed_epsilon": result.claimed_epsilon,
             "audited_epsilon_lower": result.epsilon_lower}]


def claimed_vs_audited(result: AuditResult) -> go.Figure:
    """Per audited setting, the claimed epsilon (accountant, upper bound) beside the audited lower bound."""
    rows = setting_rows(result)
    names = [str(r["setting"]) for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=names, y=[r["claimed_epsilon"] for r in rows], name="claimed ε (upper bound)",
                         marker_color=CLAIMED, opacity=0.55))
    fig.add_trace(go.Bar(x=names, y=[r["audited_epsilon_lower"] for r in rows],
                         name=f"audited ε ≥ ({_confidence_text(result)})", marker_color=AUDITED))
    for key, text in CEILINGS.items():
        value = result.details.get(key)
        if value is not None:
            fig.add_hline(y=value, line=dict(color="gray", dash="dot"), annotation_text=text,
                          annotation_position="top left")
    fig.update_layout(title=f"Claimed against audited ε (δ = {result.delta:g})", barmode="group",
                      xaxis_title="audited setting", yaxis_title="ε", **LAYOUT)
    return fig


def bound_so_far(snapshot: RunSnapshot) -> go.Figure:
    """The claimed epsilon and the audited lower bound as the audit reports them (the last point is the result)."""
    fig = curves(snapshot.metrics, ["claimed_epsilon", "audited_epsilon_lower"], title="Audited bound so far",
                 x_title=STEP_AXIS.get(snapshot.run.mechanism, "step"), y_title="ε",
                 labels={"claimed_epsilon": "claimed ε (upper bound)", "audited_epsilon_lower": "audited ε ≥"})
    for trace in fig.data:
        trace.line = dict(color=AUDITED if trace.name == "audited ε ≥" else CLAIMED)
    return fig


def shaped_noise(rows: Iterable[Mapping]) -> go.Figure:
    """The DP-SGD one-run audit against alpha, one line per canary space (inside / outside span(U), random).

    ``rows``: mappings with ``canary_space``, ``alpha``, ``epsilon_lower`` and ``claimed_epsilon`` (the
    ``details["settings"]`` rows of ``dpsgd-one-run`` results, of one run or several). Every setting shares
    the claim of isotropic DP-SGD at the same sigma, drawn as one line per distinct value.
    """
    frame = pd.DataFrame(list(rows))
    fig = go.Figure()
    if frame.empty:
        return fig
    for space, part in frame.sort_values("alpha").groupby("canary_space", sort=False):
        symbol, dash = SPACE_STYLE.get(space, ("circle", "solid"))
        fig.add_trace(go.Scatter(x=part["alpha"], y=part["epsilon_lower"], mode="lines+markers",
                                 name=f"audited ε ≥, canaries {space} span(U)", line=dict(dash=dash),
                                 marker=dict(symbol=symbol, size=9)))
    for claimed in sorted(frame["claimed_epsilon"].round(4).unique()):
        fig.add_hline(y=claimed, line=dict(color="black", dash="dash"),
                      annotation_text=f"claimed ε = {claimed:.3g} (every α: isotropic DP-SGD's accountant)",
                      annotation_position="bottom right")
    fig.update_layout(title="DP-SGD one-run audit: canaries inside vs outside the public subspace",
                      xaxis_title="α (noise outside span(U) is (1 + α) times isotropic)", yaxis_title="ε", **LAYOUT)
    fig.update_xaxes(type="log" if (frame["alpha"] > 0).all() else "linear")
    return fig


def figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart of an audit run: the bound so far, then (once it has a result) claimed against audited, and for
    a DP-SGD audit over several alphas the shaped-noise chart."""
    out = [] if snapshot.metrics.empty else [bound_so_far(snapshot)]
    result = result_of(snapshot.run.summary)
    if result is not None:
        out.append(claimed_vs_audited(result))
        settings = result.details.get("settings") or []
        if len({row["alpha"] for row in settings if "alpha" in row}) > 1:
            out.append(shaped_noise(settings))
    return out


def tables(snapshot: RunSnapshot) -> list[Table]:
    """The audited settings (one row each), and what the audit assumed."""
    result = result_of(snapshot.run.summary)
    if result is None:
        return []
    rows = pd.DataFrame([{k: v for k, v in row.items() if not isinstance(v, (dict, list))}
                         for row in setting_rows(result)])
    return [Table("Audited settings", rows), Table("What the audit assumed", pd.DataFrame({"note": result.notes}))]
