"""DP Bayesian inference: posterior densities, SGLD traces, the chain's utility, error vs ε, scores."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from privengine.store import RunSnapshot

from .common import LAYOUT, Table, curves

COLORS = {"reference": "#444444", "vi": "#1f77b4", "private": "#d62728"}
MEAN_TRACE = ("mean_sd.", "SGLD trace: private mean − posterior mean (first chain)", "posterior sds")
SD_TRACE = ("log_sd_ratio.", "SGLD trace: log(private sd / posterior sd) (first chain)", "natural log")
# the accountant of every ε here: the exponential mechanism's own guarantee, for an exact draw
EPSILON_AXIS = "ε (exponential mechanism, one exact draw; log scale)"


def densities(table: dict) -> list[go.Figure]:
    """Per parameter: the reference posterior, non-private VI and the private draw."""
    out = []
    for name, d in table.items():
        fig = go.Figure()
        fig.add_trace(go.Scatter(x=d["x"], y=d["reference"], name="reference posterior",
                                 line=dict(color=COLORS["reference"], width=3)))
        fig.add_trace(go.Scatter(x=d["x"], y=d["vi"], name="non-private VI", line=dict(color=COLORS["vi"])))
        fig.add_trace(go.Scatter(x=d["x"], y=d["private"], name="private draw", line=dict(color=COLORS["private"])))
        ratio = d["private_log_sd_ratio"] / math.log(10)
        fig.update_layout(title=f"{name}: private sd = 10^{ratio:.1f} × posterior sd", xaxis_title=name,
                          yaxis=dict(range=[0, d["y_max"]], title="density"), **LAYOUT)
        out.append(fig)
    return out


def _phase_lines(fig: go.Figure, phases: dict | None) -> None:
    # "SGLD starts" left of its line and "sampling" right of its own: the two lines are close, the labels not
    for key, text, side in (("warmup_end", "SGLD starts", "top left"), ("burn_in_end", "sampling", "top right")):
        if phases and key in phases:
            fig.add_vline(x=phases[key], line_dash="dot", annotation_text=text, annotation_position=side)


def trace(metrics: pd.DataFrame, which: tuple[str, str, str], phases: dict | None) -> go.Figure | None:
    """The first chain's trace ``which`` (:data:`MEAN_TRACE` or :data:`SD_TRACE`); None before it is reported."""
    prefix, title, y_title = which
    names = sorted(n for n in metrics["name"].unique() if n.startswith(prefix))
    if not names:
        return None
    fig = curves(metrics, names, title=title, y_title=y_title, labels={n: n[len(prefix):] for n in names})
    _phase_lines(fig, phases)
    return fig


def utility(metrics: pd.DataFrame, phases: dict | None) -> go.Figure | None:
    names = sorted(n for n in metrics["name"].unique() if n.startswith("utility"))
    if not names:
        return None
    part = metrics[metrics["step"] > (phases or {}).get("vi_end", -1)]
    fig = curves(part, names, title="Sanitized utility U(z) of the chain (warm-up, then SGLD)",
                 y_title="U (Monte Carlo estimate)")
    _phase_lines(fig, phases)
    return fig


def vi_elbo(metrics: pd.DataFrame) -> go.Figure:
    return curves(metrics, ["vi_elbo"], title="Non-private VI: ELBO", y_title="ELBO")


def _sweep_medians(sweep: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = pd.DataFrame(sweep["rows"])
    return rows, rows.groupby("epsilon", as_index=False).median(numeric_only=True)


def sweep_figures(sweep: dict) -> list[go.Figure]:
    """Mean error and sd ratio of the private draw against ε: each release, the median, the non-private VI."""
    rows, med = _sweep_medians(sweep)
    eps = sorted(rows["epsilon"].unique())
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=rows["epsilon"], y=rows["mean_error_sd_rms"], mode="markers", name="one release",
                             marker=dict(color=COLORS["private"], opacity=0.4)))
    fig.add_trace(go.Scatter(x=med["epsilon"], y=med["mean_error_sd_rms"], mode="lines+markers",
                             name="median", line=dict(color=COLORS["private"])))
    fig.add_trace(go.Scatter(x=eps, y=[math.sqrt(2 * sweep["delta_u"] / e) for e in eps], mode="lines",
                             name="√(2Δ_U/ε): quadratic approximation", line=dict(dash="dash", color="gray")))
    fig.add_hline(y=sweep["vi"]["mean_error_sd_rms"], line_color=COLORS["vi"], annotation_text="non-private VI")
    fig.update_layout(title="Mean error of the private draw (RMS over parameters)", xaxis_type="log",
                      yaxis_type="log", xaxis_title=EPSILON_AXIS, yaxis_title="posterior sds (log scale)", **LAYOUT)
    sd = go.Figure()
    sd.add_trace(go.Scatter(x=rows["epsilon"], y=rows["log10_sd_ratio_mean"], mode="markers", name="one release",
                            marker=dict(color=COLORS["private"], opacity=0.4)))
    sd.add_trace(go.Scatter(x=med["epsilon"], y=med["log10_sd_ratio_mean"], mode="lines+markers", name="median",
                            line=dict(color=COLORS["private"])))
    sd.add_hline(y=sweep["vi"]["log10_sd_ratio_mean"], line_color=COLORS["vi"], annotation_text="non-private VI")
    sd.update_layout(title="sd ratio of the private draw (log10, geometric mean over parameters)",
                     xaxis_type="log", xaxis_title=EPSILON_AXIS, yaxis_title="log10(private sd / posterior sd)",
                     **LAYOUT)
    return [fig, sd]


def sweep_table(sweep: dict) -> pd.DataFrame:
    """Medians over the repeats, per ε."""
    return _sweep_medians(sweep)[1][["epsilon", "mean_error_sd_rms", "sd_ratio_geomean", "kl", "w2_sd_units"]]


def scores_table(scores: dict) -> pd.DataFrame:
    """Per parameter: the reference posterior, and the errors of non-private VI and of the first private draw."""
    table = pd.DataFrame({
        "parameter": scores["names"],
        "reference mean": scores["reference_mean"], "reference sd": scores["reference_sd"],
        "VI mean error (sds)": scores["vi"]["mean_error_sd"], "VI sd ratio": scores["vi"]["sd_ratio"],
    })
    if scores["private"]:
        first = scores["private"][0]
        table["private mean error (sds)"] = first["mean_error_sd"]
        table["private log10 sd ratio"] = [v / math.log(10) for v in first["log_sd_ratio"]]
    return table


def figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart of the page, in its order."""
    metrics, artifacts = snapshot.metrics, snapshot.artifacts
    phases = artifacts.get("phases")
    out = densities(artifacts["densities"]) if "densities" in artifacts else []
    if not metrics.empty:
        out += [utility(metrics, phases), trace(metrics, MEAN_TRACE, phases), vi_elbo(metrics),
                trace(metrics, SD_TRACE, phases)]
    if "sweep" in artifacts:
        out += sweep_figures(artifacts["sweep"])
    return [fig for fig in out if fig is not None]


def tables(snapshot: RunSnapshot) -> list[Table]:
    artifacts = snapshot.artifacts
    out = []
    if "sweep" in artifacts:
        out.append(Table("Error vs ε (medians over the repeats)", sweep_table(artifacts["sweep"])))
    if "scores" in artifacts:
        out.append(Table("Scores against the reference posterior", scores_table(artifacts["scores"])))
    return out
