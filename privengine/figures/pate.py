"""PATE: teacher training loss, ε against queries answered, teacher accuracies, student accuracy, vote margins."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from privengine.claims import headline_of
from privengine.store import RunSnapshot

from .common import LAYOUT, Table, curves, measures, waiting_if_empty

STUDENT_ACCURACY = "student test accuracy"  # as the presets publish it (privengine.presets.Published.metric)


def last(metrics: pd.DataFrame, name: str) -> float | None:
    """The last reported value of metric ``name`` (None before the first)."""
    part = metrics[metrics["name"] == name]
    return None if part.empty else float(part["value"].iloc[-1])


def results(snapshot: RunSnapshot) -> dict[str, float | None]:
    """The run's key fractions, as the page's tiles show them (None while unknown)."""
    summary = snapshot.run.summary or {}
    return {"Teacher acc. (mean)": summary.get("teacher_accuracy_mean"),
            "Ensemble, no noise": last(snapshot.metrics, "ensemble_accuracy"),
            "Noisy labels correct": summary.get("noisy_label_accuracy"),
            "Queries answered": last(snapshot.metrics, "fraction_answered")}


def percent(value: float | None) -> str:
    """``42.0%``, or a dash for an unknown value."""
    return "—" if value is None else f"{value:.1%}"


def teacher_loss(snapshot: RunSnapshot) -> go.Figure:
    return curves(snapshot.metrics, ["teacher_loss_mean", "teacher_loss_max"], title="Teacher training loss",
                  x_title="epoch", labels={"teacher_loss_mean": "mean over teachers",
                                           "teacher_loss_max": "worst teacher"})


def accountant(config: dict) -> str:
    """The analysis behind a run's ε curves, by its aggregator (the claims name it in full)."""
    if config.get("aggregator") == "lnmax":
        return "moments accountant of Papernot et al. 2016"
    return "Rényi DP accountant of Papernot et al. 2018"


def epsilon(snapshot: RunSnapshot) -> go.Figure:
    """Data-dependent and a-priori ε against the queries charged; Confident-GNMax adds the paper-style realised figure.

    LNMax and GNMax charge (and answer) every query, so the x axis counts queries answered; Confident-GNMax charges
    every submitted query both steps, answered or not, so its x axis counts queries submitted. Confident-GNMax runs
    stored before that charge have only ``eps_realised`` and ``eps_odometer`` (renamed by the store's migration),
    against queries answered.
    """
    config = snapshot.run.config
    confident = config.get("aggregator") == "confident_gnmax"
    migrated = "eps_odometer" in set(snapshot.metrics["name"]) if not snapshot.metrics.empty else False
    unit = "queries submitted" if confident and not migrated else "queries answered"
    fig = curves(snapshot.metrics, ["eps_data_dependent", "eps_data_independent", "eps_realised", "eps_odometer"],
                 title=f"ε against {unit} (δ = {config.get('delta', 0):g}, {accountant(config)})",
                 x_title=unit, y_title="ε",
                 labels={"eps_data_dependent": "data-dependent (not publishable)",
                         "eps_data_independent": "data-independent (a priori)",
                         "eps_realised": "realised, paper-style (not a bound)",
                         "eps_odometer": "realised data-independent (odometer)"})
    headline = headline_of(snapshot.run.summary)
    if headline is not None and confident:
        fig.add_hline(y=headline.epsilon, line_dash="dot",
                      annotation_text=f"headline ε = {headline.epsilon:.3g}")
    return fig


def teacher_accuracy(snapshot: RunSnapshot) -> go.Figure:
    accuracies = snapshot.artifacts.get("teacher_accuracy", {}).get("accuracy")
    fig = go.Figure()
    if accuracies:
        fig.add_trace(go.Histogram(x=accuracies, nbinsx=30, name="teachers"))
    fig.update_layout(title="Individual teacher accuracy (student test split)", xaxis_title="accuracy",
                      yaxis_title="teachers", **LAYOUT)
    return waiting_if_empty(fig, "after the teachers are trained")


def student(snapshot: RunSnapshot) -> go.Figure:
    fig = curves(snapshot.metrics, ["student_accuracy", "baseline_accuracy"], title="Student test accuracy",
                 x_title="epoch", labels={"student_accuracy": "student (noisy labels)",
                                          "baseline_accuracy": "non-private baseline"})
    baseline = (snapshot.run.summary or {}).get("baseline_accuracy")
    if baseline is not None:
        fig.add_hline(y=baseline, line_dash="dot", annotation_text=f"baseline {baseline:.1%}")
    fig.update_yaxes(title_text="accuracy")
    return measures(fig, STUDENT_ACCURACY)


def published_values(snapshot: RunSnapshot) -> dict[str, float]:
    """The student's test accuracy (the summary's once the run has ended, else the last reported epoch's)."""
    value = (snapshot.run.summary or {}).get("student_accuracy")
    if value is None:
        value = last(snapshot.metrics, "student_accuracy")
    return {} if value is None else {STUDENT_ACCURACY: float(value)}


def vote_margins(snapshot: RunSnapshot) -> go.Figure:
    margins = snapshot.artifacts.get("vote_margins", {})
    fig = go.Figure()
    if margins.get("margin"):
        fig.add_trace(go.Histogram(x=margins["margin"], nbinsx=40))
    fig.update_layout(title="Vote margin per query (top count − runner-up; large margins are cheap)",
                      xaxis_title="votes", yaxis_title="queries", **LAYOUT)
    return waiting_if_empty(fig, "after the teachers vote")


def figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart of the page, in its order."""
    return [teacher_loss(snapshot), epsilon(snapshot), teacher_accuracy(snapshot), student(snapshot),
            vote_margins(snapshot)]


def tables(snapshot: RunSnapshot) -> list[Table]:
    rows = [{"result": k, "value": percent(v)} for k, v in results(snapshot).items()]
    return [Table("Key figures", pd.DataFrame(rows))]
