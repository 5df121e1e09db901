"""Membership-attack runs (``dpsgd-membership``, ``pate-membership``): the ROC on log-log axes under what the attacked
model's claim allows, a one-line verdict on it (:func:`verdict`), beside the audit charts every audit has
(:mod:`.audit`).

The ROC chart plots TPR against FPR from 1e-4 to 1 (both log), drawn for a reader who is no expert: the attack on the
private model (DP-SGD's model, PATE's student), the same attack on its non-private twin, the one bound that says what
ε allows (:func:`tightest_bound`: the trade-off bound where the output has one, DP-SGD's PLD of the model's history or
PATE's RDP of its a-priori claim, else the (eps, delta) bound ``min(e^eps FPR + delta, 1 - e^-eps (1 - delta -
FPR))``, which the trade-off bound lies under; a stored digits model's replace-one game has that bound applied twice,
and the legend, title and verdict say so), chance (TPR = FPR, labelled on the chart), and the TPR at FPR 0.1 %
and 1 % as points on the attack's curve. Their intervals are one legend entry, "95 % interval", in a lighter colour
with caps at both ends, so they cannot be read as the curve: the TPR interval upright at the nominal level, the FPR
interval across at the point's TPR, from its lower end to the upper one, where the bound is checked. A level below
the non-members' resolution (under ``1 / non-members``, where the TPR read would be the one at FPR 0) gets no point,
and the verdict says so; outputs stored before such levels were left out are drawn so too.
While the attack runs it draws the output of the last pass (the ``membership`` artifact), so the curves fill in as
reference models finish; points with FPR or TPR 0 are off a log axis and left out.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import plotly.graph_objects as go

from privengine.audit.membership_job import measured, measured_output
from privengine.accounting.opacus_names import ACCOUNTANT_NAMES
from privengine.audit.membership import (above_a_bound, applied_twice, below_resolution, dp_tpr_bound,
                                         non_members_needed, tradeoff_of)
from privengine.store import RunSnapshot

from . import audit
from .common import LAYOUT, REFERENCE_COLOUR, Table, waiting_if_empty
from .text import accountant_name

ATTACKED, TWIN, BOUND, PLD = "#d62728", "#ff7f0e", "#1f77b4", "#2ca02c"
INTERVAL = "#f4a6a6"  # the intervals: the attack's red, lighter, so they do not read as its curve
CAP = 9  # px across an interval's end cap
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


def tightest_bound(out: Mapping) -> tuple[str, dict[str, float]]:
    """``(name, bound at each nominal FPR level)`` of the tightest bound attack output ``out`` carries: its trade-off
    bound (PLD or RDP, :func:`privengine.audit.membership.tradeoff_of`), else its (ε, δ) bound; the name says
    "applied twice" for a replace-one game (a stored digits model), whose numbers are the model's bound applied twice
    (:func:`privengine.audit.membership.applied_twice`)."""
    tradeoff = tradeoff_of(out)
    name, bound = (("(ε, δ) bound", out["bound_at_fpr"]) if tradeoff is None else
                   (tradeoff[1], out[f"{tradeoff[0]}_bound_at_fpr"]))
    return name + applied_twice(out), bound


def _resolved(out: Mapping) -> list[str]:
    """The FPR levels of ``out``'s TPR points that its non-members resolve (:func:`below_resolution`), lowest first."""
    return sorted((k for k in out["tpr_at_fpr"] if below_resolution(k, out["non_members"]) is None), key=float)


def _percent(rate: float) -> str:
    """A rate as a percentage to 3 significant digits: 0.0021 -> "0.21 %", 1.0 -> "100 %"."""
    return f"{100 * rate:.3g} %"


def verdict(out: Mapping) -> str:
    """One line for a reader who is no expert: what the attack achieved at the lowest FPR level its non-members
    resolve (the share of members it finds there, with the interval), what the attacked model's ε allows there
    (:func:`tightest_bound` at that level), and whether the attack exceeds a bound beyond its intervals at any level
    (:func:`privengine.audit.membership.above_a_bound`); levels too few non-members resolve are named. With no level
    resolved there is no verdict, and the line says how many non-members the highest level needs.
    ``out``: an attack output (:func:`privengine.audit.membership_dpsgd.attack_dpsgd`)."""
    name, bound = tightest_bound(out)
    eps, confidence = f"ε = {out['epsilon']:.3g}", f"{100 * out.get('confidence', 0.95):g} %"
    levels = _resolved(out)
    unread = [k for k in sorted(bound, key=float) if k not in levels]
    if not levels:
        top = unread[-1]
        return (f"Too few non-members ({out['non_members']}) to read the attack at any false-positive rate checked "
                f"({_percent(float(top))} needs ≥ {non_members_needed(top)}): no verdict yet. Flagging "
                f"{_percent(float(top))} of non-members by mistake, an attack may find at most "
                f"{_percent(bound[top])} of the members under {eps}, by its {name}.")
    level = levels[0]
    lo, hi = out["tpr_interval_at_fpr"][level]
    found = (f"Flagging {_percent(float(level))} of non-members by mistake, the attack finds "
             f"{_percent(out['tpr_at_fpr'][level])} of the members ({confidence} interval {_percent(lo)} to "
             f"{_percent(hi)}); {eps} allows at most {_percent(bound[level])}, by its {name}")
    if above_a_bound(out):
        found += (f". It is above a bound beyond its {confidence} intervals: the claim is contradicted; report it "
                  f"as a bug.")
    else:
        found += ": nothing exceeds the bound at any rate read."
    too_few = "; ".join(f"{_percent(float(k))} needs ≥ {non_members_needed(k)}" for k in unread)
    return found + (f" Too few non-members to read lower rates ({too_few})." if too_few else "")


def roc(out: Mapping) -> go.Figure:
    """The ROC of the attack (and of the twin) under the tightest bound ε allows (:func:`tightest_bound`); ``out``
    an attack output (:func:`privengine.audit.membership_dpsgd.attack_dpsgd`)."""
    fig = go.Figure()
    grid = np.logspace(np.log10(FPR_MIN), 0, 81)
    eps, delta = out["epsilon"], out["delta"]
    fig.add_trace(go.Scatter(x=grid, y=grid, mode="lines", name="chance (TPR = FPR)", showlegend=False,
                             line=dict(color=REFERENCE_COLOUR, dash="dot", width=1), hoverinfo="skip"))
    fig.add_annotation(x=-3, y=-3, text="random guess", showarrow=False, xanchor="left", yanchor="top", xshift=6,
                       font=dict(color=REFERENCE_COLOUR, size=11))  # log axes: at (0.001, 0.001), under the diagonal
    tradeoff = tradeoff_of(out)
    if tradeoff is None:
        y = dp_tpr_bound(grid, eps, delta)
        x, y, colour = grid, dp_tpr_bound(y, eps, delta) if applied_twice(out) else y, BOUND
    else:
        curve = out[f"{tradeoff[0]}_bound_curve"]
        x, y, colour = curve["fpr"], curve["tpr"], PLD
    fig.add_trace(go.Scatter(x=x, y=y, mode="lines",
                             name=f"the most ε = {eps:.3g} allows, by its {tightest_bound(out)[0]}",
                             line=dict(color=colour, dash="dash")))
    twin = out.get("non_private_twin")
    if twin:
        x, y = _positive(twin["roc"]["fpr"], twin["roc"]["tpr"])
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"{out.get('twin_name', 'non-private twin')} (AUC "
                                                              f"{twin['auc']:.3f})",
                                 line=dict(color=TWIN)))
    x, y = _positive(out["roc"]["fpr"], out["roc"]["tpr"])
    fig.add_trace(go.Scatter(x=x, y=y, mode="lines", name=f"attack on the {out.get('attacked', 'DP-SGD model')} (AUC "
                                                          f"{out['auc']:.3f})",
                             line=dict(color=ATTACKED, width=2.5), legendgroup="attack"))
    levels = _resolved(out)
    if levels:
        _points_and_intervals(fig, out, levels)
    refs = out.get("reference_models_so_far", out.get("reference_models"))
    accountant = accountant_name(ACCOUNTANT_NAMES.get(out.get("accountant"), str(out.get("accountant"))))
    allows = f"model's ε = {out['epsilon']:.3g} allows{applied_twice(out)}"
    fig.update_layout(title=f"Membership attack ({out['attack']}, {refs} reference models) under what the attacked "
                            f"{allows} ({accountant}, δ = {delta:g})",
                      xaxis_title="false-positive rate", yaxis_title="true-positive rate", **{**LAYOUT, "height": 420})
    fig.update_xaxes(type="log", range=[np.log10(FPR_MIN), 0])
    fig.update_yaxes(type="log", range=[np.log10(FPR_MIN), 0])
    return fig


def _points_and_intervals(fig: go.Figure, out: Mapping, levels: list[str]) -> None:
    """The TPR points at the resolved FPR ``levels`` on the attack's curve (no legend entry of their own), and their
    intervals as one trace, "95 % interval" (at the output's confidence): per point, the TPR interval upright at the
    nominal level and the FPR interval [lo, hi] across at the point's TPR (none for a TPR under the axis, whose point
    is not drawn either), each capped at its ends; an end below the axis' edge (FPR_MIN; a threshold at FPR 0 has
    lo = 0, a TPR of 0 its lower end 0) is drawn to the edge without a cap.

    The FPR interval is drawn as it is: an error bar around the nominal level cannot end below it, and hi is below
    the level where the threshold's FPR fell well short of it, e.g. on tied scores. The bound is checked at hi, so a
    point may sit above the bound's line while its FPR interval reaches where the bound is higher."""
    tpr = [out["tpr_at_fpr"][k] for k in levels]
    fig.add_trace(go.Scatter(
        x=[float(k) for k in levels], y=tpr, mode="markers", marker=dict(color=ATTACKED, size=9, symbol="diamond"),
        name=f"TPR at FPR {', '.join(_percent(float(k)) for k in levels)}", legendgroup="attack", showlegend=False))
    segments = []  # (x, y, cap symbol) of both ends, an interval's ends in a row
    for level, t in zip(levels, tpr):
        t_lo, t_hi = out["tpr_interval_at_fpr"][level]
        segments.append(([float(level)] * 2, [t_lo, t_hi], "line-ew"))
        f_lo, f_hi = out["fpr_interval_at_fpr"][level]
        if f_hi > FPR_MIN and t >= FPR_MIN:  # a TPR under the axis (0: no point drawn) has its FPR interval there too
            segments.append(([f_lo, f_hi], [t, t], "line-ns"))
    xs, ys, symbols, sizes = [], [], [], []
    for x, y, symbol in segments:
        ends = list(zip(x, y))
        xs += [max(e[0], FPR_MIN) for e in ends] + [None]
        ys += [max(e[1], FPR_MIN) for e in ends] + [None]
        symbols += [symbol] * 3
        sizes += [CAP if min(e) >= FPR_MIN else 0 for e in ends] + [0]
    fig.add_trace(go.Scatter(
        x=xs, y=ys, mode="lines+markers", name=f"{100 * out.get('confidence', 0.95):g} % interval",
        line=dict(color=INTERVAL, width=1.5), hoverinfo="skip",
        marker=dict(symbol=symbols, size=sizes, color=INTERVAL, line=dict(color=INTERVAL, width=1.5))))


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
