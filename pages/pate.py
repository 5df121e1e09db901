"""PATE page: teachers, votes, privacy cost against queries answered, student."""

import plotly.graph_objects as go
import streamlit as st

from privengine.claims import headline_of
from ui import charts
from ui.mechanism_page import render_mechanism_page


def _last(metrics, name):
    part = metrics[metrics["name"] == name]
    return None if part.empty else float(part["value"].iloc[-1])


def draw(snapshot) -> None:
    m, art, run_id = snapshot.metrics, snapshot.artifacts, snapshot.run.id
    summary = snapshot.run.summary or {}

    tiles = st.columns(4)
    tiles[0].metric("Teacher acc. (mean)", _pct(summary.get("teacher_accuracy_mean")))
    tiles[1].metric("Ensemble, no noise", _pct(_last(m, "ensemble_accuracy")))
    tiles[2].metric("Noisy labels correct", _pct(summary.get("noisy_label_accuracy")))
    tiles[3].metric("Queries answered", _pct(_last(m, "fraction_answered")))

    left, right = st.columns(2)
    with left:
        charts.show(charts.curves(m, ["teacher_loss_mean", "teacher_loss_max"], title="Teacher training loss",
                                  x_title="epoch", labels={"teacher_loss_mean": "mean over teachers",
                                                           "teacher_loss_max": "worst teacher"}),
                    key=f"{run_id}.teacher_loss")
        confident = snapshot.run.config.get("aggregator") == "confident_gnmax"
        fig = charts.curves(m, ["eps_data_dependent", "eps_data_independent"],
                            title=f"ε against queries answered (δ = {snapshot.run.config.get('delta', 0):g})",
                            x_title="queries answered", y_title="ε",
                            labels={"eps_data_dependent": "data-dependent (not publishable)",
                                    "eps_data_independent": ("realised data-independent (odometer)" if confident
                                                             else "data-independent")})
        headline = headline_of(summary)
        if headline is not None and confident:
            fig.add_hline(y=headline.epsilon, line_dash="dot",
                          annotation_text=f"a-priori bound (headline) ε = {headline.epsilon:.3g}")
        charts.show(fig, key=f"{run_id}.eps")
    with right:
        accuracies = art.get("teacher_accuracy", {}).get("accuracy")
        fig = go.Figure()
        if accuracies:
            fig.add_trace(go.Histogram(x=accuracies, nbinsx=30, name="teachers"))
        fig.update_layout(title="Individual teacher accuracy (student test split)", xaxis_title="accuracy",
                          yaxis_title="teachers", **charts.LAYOUT)
        charts.show(charts.waiting_if_empty(fig, "after the teachers are trained"), key=f"{run_id}.teacher_hist")
        student = charts.curves(m, ["student_accuracy", "baseline_accuracy"], title="Student test accuracy",
                                x_title="epoch", labels={"student_accuracy": "student (noisy labels)",
                                                         "baseline_accuracy": "non-private baseline"})
        baseline = summary.get("baseline_accuracy")
        if baseline is not None:
            student.add_hline(y=baseline, line_dash="dot", annotation_text=f"baseline {baseline:.1%}")
        charts.show(student, key=f"{run_id}.student")
    margins = art.get("vote_margins", {})
    fig = go.Figure()
    if margins.get("margin"):
        fig.add_trace(go.Histogram(x=margins["margin"], nbinsx=40))
    fig.update_layout(title="Vote margin per query: top count − runner-up (large margins are cheap)",
                      xaxis_title="votes", yaxis_title="queries", **charts.LAYOUT)
    charts.show(charts.waiting_if_empty(fig, "after the teachers vote"), key=f"{run_id}.margins")


def _pct(value) -> str:
    return "-" if value is None else f"{value:.1%}"


render_mechanism_page("pate", draw)
