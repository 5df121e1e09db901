"""DP Bayesian inference: posterior densities, SGLD trace, utility over steps, error vs epsilon."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from ui import charts
from ui.mechanism_page import render_mechanism_page

INTRO = (
    "Releases a **mean-field Gaussian approximation** of a Bayesian regression posterior with the exponential "
    "mechanism. Each record's log-likelihood is sanitized to τ·tanh(l/τ), so the utility U(z) (the ELBO with "
    "the sanitized likelihood, entropy weighted by w) changes by at most Δ_U = 2τ when one record is replaced "
    "(τ for add/remove). One exact draw of z = (mean, log sd) from f(z) ∝ exp(ε U / (2Δ_U)) is ε-DP; here it "
    "is drawn by preconditioned SGLD, an approximate sampler, so the guarantee is approximate. Expect the "
    "private mean about √(4τ/ε) posterior sds off, and overconfident private sds unless w is raised.")

COLORS = {"reference": "#444444", "vi": "#1f77b4", "private": "#d62728"}


def _densities(table: dict, run_id: str) -> None:
    names = list(table)
    cols = st.columns(2)
    for i, name in enumerate(names):
        d = table[name]
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=d["x"], y=d["reference"], name="reference posterior",
                                 line=dict(color=COLORS["reference"], width=3)))
        fig.add_trace(go.Scatter(x=d["x"], y=d["vi"], name="non-private VI", line=dict(color=COLORS["vi"])))
        fig.add_trace(go.Scatter(x=d["x"], y=d["private"], name="private draw", line=dict(color=COLORS["private"])))
        ratio = d["private_log_sd_ratio"] / math.log(10)
        fig.update_layout(title=f"{name}: private sd = 10^{ratio:.1f} × posterior sd", xaxis_title=name,
                          yaxis=dict(range=[0, d["y_max"]], title="density"), **charts.LAYOUT)
        with cols[i % 2]:
            charts.show(fig, key=f"dp_bayes.{run_id}.density.{name}")


def _phase_lines(fig: go.Figure, phases: dict | None) -> None:
    for key, text in (("warmup_end", "SGLD starts"), ("burn_in_end", "sampling")):
        if phases and key in phases:
            fig.add_vline(x=phases[key], line_dash="dot", annotation_text=text)


def _trace(metrics: pd.DataFrame, prefix: str, title: str, y_title: str, run_id: str, phases: dict | None) -> None:
    names = sorted(n for n in metrics["name"].unique() if n.startswith(prefix))
    if not names:
        return
    fig = charts.curves(metrics, names, title=title, y_title=y_title, labels={n: n[len(prefix):] for n in names})
    _phase_lines(fig, phases)
    charts.show(fig, key=f"dp_bayes.{run_id}.{prefix}")


def _utility(metrics: pd.DataFrame, run_id: str, phases: dict | None) -> None:
    names = sorted(n for n in metrics["name"].unique() if n.startswith("utility"))
    if not names:
        return
    part = metrics[metrics["step"] > (phases or {}).get("vi_end", -1)]
    fig = charts.curves(part, names, title="Sanitized utility U(z) of the chain (warm-up, then SGLD)",
                        y_title="U (Monte Carlo estimate)")
    _phase_lines(fig, phases)
    charts.show(fig, key=f"dp_bayes.{run_id}.utility")


def _sweep(sweep: dict, run_id: str) -> None:
    rows = pd.DataFrame(sweep["rows"])
    med = rows.groupby("epsilon", as_index=False).median(numeric_only=True)
    eps = sorted(rows["epsilon"].unique())
    left, right = st.columns(2)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=rows["epsilon"], y=rows["mean_error_sd_rms"], mode="markers", name="one release",
                             marker=dict(color=COLORS["private"], opacity=0.4)))
    fig.add_trace(go.Scatter(x=med["epsilon"], y=med["mean_error_sd_rms"], mode="lines+markers",
                             name="median", line=dict(color=COLORS["private"])))
    fig.add_trace(go.Scatter(x=eps, y=[math.sqrt(2 * sweep["delta_u"] / e) for e in eps], mode="lines",
                             name="√(2Δ_U/ε): quadratic approximation", line=dict(dash="dash", color="gray")))
    fig.add_hline(y=sweep["vi"]["mean_error_sd_rms"], line_color=COLORS["vi"], annotation_text="non-private VI")
    fig.update_layout(title="Mean error of the private draw (RMS over parameters)", xaxis_type="log",
                      yaxis_type="log", xaxis_title="ε", yaxis_title="posterior sds", **charts.LAYOUT)
    with left:
        charts.show(fig, key=f"dp_bayes.{run_id}.sweep.mean")
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=rows["epsilon"], y=rows["log10_sd_ratio_mean"], mode="markers", name="one release",
                             marker=dict(color=COLORS["private"], opacity=0.4)))
    fig.add_trace(go.Scatter(x=med["epsilon"], y=med["log10_sd_ratio_mean"], mode="lines+markers", name="median",
                             line=dict(color=COLORS["private"])))
    fig.add_hline(y=sweep["vi"]["log10_sd_ratio_mean"], line_color=COLORS["vi"], annotation_text="non-private VI")
    fig.update_layout(title="sd ratio of the private draw (log10, geometric mean over parameters)",
                      xaxis_type="log", xaxis_title="ε", yaxis_title="log10(private sd / posterior sd)",
                      **charts.LAYOUT)
    with right:
        charts.show(fig, key=f"dp_bayes.{run_id}.sweep.sd")
    st.dataframe(med[["epsilon", "mean_error_sd_rms", "sd_ratio_geomean", "kl", "w2_sd_units"]], hide_index=True,
                 width="stretch")


def _scores(scores: dict) -> None:
    names = scores["names"]
    table = pd.DataFrame({
        "parameter": names,
        "reference mean": scores["reference_mean"], "reference sd": scores["reference_sd"],
        "VI mean error (sds)": scores["vi"]["mean_error_sd"], "VI sd ratio": scores["vi"]["sd_ratio"],
    })
    if scores["private"]:
        first = scores["private"][0]
        table["private mean error (sds)"] = first["mean_error_sd"]
        table["private log10 sd ratio"] = [v / math.log(10) for v in first["log_sd_ratio"]]
    st.dataframe(table, hide_index=True, width="stretch")


def draw(snapshot) -> None:
    run_id, metrics, artifacts = snapshot.run.id, snapshot.metrics, snapshot.artifacts
    phases = artifacts.get("phases")
    if "densities" in artifacts:
        st.subheader("Posterior density per parameter")
        _densities(artifacts["densities"], run_id)
    elif metrics.empty:
        st.caption("Computing the reference posterior…")
    if not metrics.empty:
        left, right = st.columns(2)
        with left:
            _utility(metrics, run_id, phases)
            _trace(metrics, "mean_sd.", "SGLD trace: private mean − posterior mean (first chain)",
                   "posterior sds", run_id, phases)
        with right:
            charts.show(charts.curves(metrics, ["vi_elbo"], title="Non-private VI: ELBO", y_title="ELBO"),
                        key=f"dp_bayes.{run_id}.vi")
            _trace(metrics, "log_sd_ratio.", "SGLD trace: log(private sd / posterior sd) (first chain)",
                   "natural log", run_id, phases)
    if "sweep" in artifacts:
        st.subheader("Error vs ε (sweep)")
        _sweep(artifacts["sweep"], run_id)
    elif not snapshot.run.active:
        st.caption("Run in **sweep** mode to chart the error against ε over several repeats.")
    if "scores" in artifacts:
        st.subheader("Scores against the reference posterior")
        _scores(artifacts["scores"])


render_mechanism_page("dp_bayes", draw, intro=INTRO)
