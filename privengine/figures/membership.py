"""Membership-attack runs (``dpsgd-membership``, ``pate-membership``): the ROC on log-log axes under the bounds of
the attacked model's claim, beside the audit charts every audit has (:mod:`.audit`).

The ROC chart plots TPR against FPR from 1e-4 to 1 (both log): the attack on the private model (DP-SGD's model,
PATE's student), the same attack on its non-private twin, the (eps, delta) bound ``min(e^eps FPR + delta, 1 - e^-eps
(1 - delta - FPR))``, the tighter trade-off bound (DP-SGD: the PLD of the model's history; PATE: the RDP of its
a-priori claim), chance (TPR = FPR), and the TPR at FPR 0.1 % and 1 % with the intervals of both rates (the FPR
interval a segment at the point's TPR, from its lower end to the upper one, where the bound is checked). A level
below the non-members' resolution (under ``1 / non-members``, where the TPR read would be the one at FPR 0) gets no
point, only its mark in the points' legend entry; outputs stored before such levels were left out are drawn so too.
While the attack runs it draws the output of the last pass (the ``membership`` artifact), so the curves fill in as
reference models finish; points with FPR or TPR 0 are off a log axis and left out.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import plotly.graph_objects as go

from privengine.audit.membership_job import measured, measured_output
from privengine.accounting.subsampled_gaussian import ACCOUNTANT_NAMES
from privengine.audit.membership import below_resolution, dp_tpr_bound, tradeoff_of
from privengine.store import RunSnapshot

from . import audit
from .common import LAYOUT, REFERENCE_COLOUR, Table, waiting_if_empty
from .text import accountant_name

ATTACKED, TWIN, BOUND, PLD = "#d62728", "#ff7f0e", "#1f77b4", "#2ca02c"
FPR_MIN = 1e-4
CAVEAT = ("Covered by no privacy claim: the attack trains on the private split (an operator's diagnostic, not for "
          "publication).")


def output_of(snapshot: RunSnapshot) -> Mapping | None:
    """The attack's output: the stored result's, else the last pass's (the ``membership`` artifact), else None."""
    partial = snapshot.artifacts.get("membership")
    return measured_output(snapshot.run.summary) or (partial if measured(partial) else None)


def _positive(fpr, tpr) -> tuple[list[float], list[float]]:
    """The ROC points a log-log chart can show (both rates above 0; FPR from :data:`FPR_MIN`)."""
    points = [(f, t) for f, t in zip(fpr, tpr) if f >= FPR_MIN and t > 0]
    return [f for f, _ in points], [t for _, t in points]


def roc(out: Mapping) -> go.Figure:
    """The ROC of the attack (and of the twin) under the (eps, delta) and PLD bounds; ``out`` an attack output
    (:func:`privengine.audit.membership_dpsgd.attack_dpsgd`)."""
    fig = go.Figure()
    grid = np.logspace(np.log10(FPR_MIN), 0, 81)
    eps, delta = out["epsilon"], out["delta"]
    fig.add_trace(go.Scatter(x=grid, y=grid, mode="lines", name="chance (TPR = FPR)",
                             line=dict(color=REFERENCE_COLOUR, dash="dot", width=1)))
    fig.add_trace(go.Scatter(x=grid, y=dp_tpr_bound(grid, eps, delta), mode="lines",
                             name=f"(ε, δ) bound, ε = {eps:.3g}, δ = {delta:g}",
                             line=dict(color=BOUND, dash="dash")))
    tradeoff = tradeoff_of(out)
    if tradeoff is not None:
        curve = out[f"{tradeoff[0]}_bound_curve"]
        fig.add_trace(go.Scatter(x=curve["fpr"], y=curve["tpr"], mode="lines", name=f"{tradeoff[1]} (tighter)",
                                 line=dict(color=PLD, dash="dash")))
    twin = out.get("non_private_twin")
    if twin:
        x, y = _positive(twin["roc"]["fpr"], twin["roc"]["tpr"])
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"{out.get('twin_name', 'non-private twin')} (AUC "
                                                              f"{twin['auc']:.3f})",
                                 line=dict(color=TWIN)))
    x, y = _positive(out["roc"]["fpr"], out["roc"]["tpr"])
    fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"attack on the {out.get('attacked', 'DP-SGD model')} (AUC "
                                                          f"{out['auc']:.3f})",
                             line=dict(color=ATTACKED, width=2.5)))
    levels = [k for k in out["tpr_at_fpr"] if below_resolution(k, out["non_members"]) is None]
    unresolved = [f"FPR {k} {note}: no point" for k in out["bound_at_fpr"]
                  if (note := below_resolution(k, out["non_members"]))]
    tpr = [out["tpr_at_fpr"][k] for k in levels]
    lo_hi = [out["tpr_interval_at_fpr"][k] for k in levels]
    # at the nominal FPR with the TPR interval; the FPR interval [lo, hi] as a segment at the same TPR (an error bar
    # around the nominal level cannot end below it, and hi is below the level where the threshold's FPR fell well
    # short of it, e.g. on tied scores). The bound is checked at hi, so a point may sit above the line while its
    # segment reaches where the bound is higher (a threshold at FPR 0: lo = 0, drawn from FPR_MIN)
    drawn = f"TPR at FPR {', '.join(levels)} ({100 * out.get('confidence', 0.95):g} % intervals of both)"
    name = "; ".join(([drawn] if levels else []) + unresolved)
    fig.add_trace(go.Scatter(
        x=[float(k) for k in levels], y=tpr, mode="markers", marker=dict(color=ATTACKED, size=9, symbol="diamond"),
        name=name, legendgroup="points",
        error_y=dict(type="data", symmetric=False, array=[h - t for t, (_, h) in zip(tpr, lo_hi)],
                     arrayminus=[t - lo for t, (lo, _) in zip(tpr, lo_hi)])))
    segments = [([max(lo, FPR_MIN), hi, None], [t, t, None])
                for t, (lo, hi) in zip(tpr, (out["fpr_interval_at_fpr"][k] for k in levels)) if hi > FPR_MIN]
    fig.add_trace(go.Scatter(x=[x for xs, _ in segments for x in xs], y=[y for _, ys in segments for y in ys],
                             mode="lines", line=dict(color=ATTACKED, width=1.5), name="FPR intervals of the TPR points",
                             legendgroup="points", showlegend=False, hoverinfo="skip"))
    refs = out.get("reference_models_so_far", out.get("reference_models"))
    accountant = accountant_name(ACCOUNTANT_NAMES.get(out.get("accountant"), str(out.get("accountant"))))
    fig.update_layout(title=f"Membership attack ({out['attack']}, {refs} reference models) under the bounds of the "
                            f"attacked model's ε = {out['epsilon']:.3g} ({accountant}, δ = {delta:g})",
                      xaxis_title="false-positive rate", yaxis_title="true-positive rate", **{**LAYOUT, "height": 420})
    fig.update_xaxes(type="log", range=[np.log10(FPR_MIN), 0])
    fig.update_yaxes(type="log", range=[np.log10(FPR_MIN), 0])
    return fig


def roc_or_waiting(out: dict | None) -> go.Figure:
    """The ROC under the bounds of the attack's output ``out`` (:func:`output_of`), or a note while no pass has
    finished (None)."""
    if out is not None:
        return roc(out)
    return waiting_if_empty(
        go.Figure(layout=dict(title="Membership attack (under the bounds of the attacked model's claim)", **LAYOUT)),
        "the ROC appears once the target and a pair of reference models are trained")


def figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """The ROC under the bounds (a note while no pass has finished), then the audit's own charts."""
    return [roc_or_waiting(output_of(snapshot))] + audit.figures(snapshot)


def tables(snapshot: RunSnapshot) -> list[Table]:
    """The audit's tables: the attacked model and its twin (AUC, TPR at FPR 0.1 % / 1 % with intervals, the bounds
    there), and what the audit assumed (the caveat first)."""
    return audit.tables(snapshot)
