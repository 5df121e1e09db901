"""Anisotropic DP-SGD: live training curves per (setting, seed), epsilon, captured energy, the comparison."""

from __future__ import annotations

import pandas as pd
import plotly.colors
import plotly.graph_objects as go
import streamlit as st

from privengine.dpsgd import metrics as M
from ui import charts
from ui.mechanism_page import render_mechanism_page

INTRO = (
    "Private SGD whose Gaussian noise is shaped by a gradient subspace **U** estimated from public examples "
    "only: variance σ²C² inside span(U), as in isotropic DP-SGD, and (1 + α) times more outside it "
    "(or, in the *projected* variant, only the span(U) part of the noisy gradient is kept). The accountant "
    "sees the noise multiplier σ, so every setting has the ε of isotropic DP-SGD. One run trains the "
    "isotropic baseline (α = 0) and each α in the list over several seeds; every model draws its own batches "
    "and noise, and the run's headline ε composes all of them, since the run reports every model's results.")

PALETTE = plotly.colors.qualitative.Plotly
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
METRIC_TITLES = {M.TEST_ACC: "Test accuracy", M.EXCESS_RISK: "Excess risk (population, exact)",
                 M.TRAIN_LOSS: "Train loss on the private batches (not privatised)",
                 M.ENERGY: "Captured energy ‖UᵀG‖² / ‖G‖² of the clipped private gradient G"}


def _series(metrics: pd.DataFrame) -> dict[str, list[tuple[str, str, int]]]:
    """metric -> [(stored name, setting, seed)] for the per-model curves."""
    out: dict[str, list[tuple[str, str, int]]] = {}
    for name in metrics["name"].unique():
        metric, setting, seed = M.split_metric_key(name)
        if setting is not None:
            out.setdefault(metric, []).append((name, setting, seed))
    return {metric: sorted(rows, key=lambda r: (r[1] != M.ISOTROPIC, r[1], r[2])) for metric, rows in out.items()}


def _per_model_chart(metrics: pd.DataFrame, series: list[tuple[str, str, int]], metric: str, *, key: str,
                     settings: list[str], log_y: bool = False) -> None:
    """One line per (setting, seed): the colour is the setting (its place in ``settings``), the dash the seed."""
    seeds = sorted({seed for _, _, seed in series})
    fig = go.Figure()
    for name, setting, seed in series:
        part = metrics[metrics["name"] == name]
        fig.add_trace(go.Scatter(
            x=part["step"], y=part["value"], mode="lines", name=f"{setting} · seed {seed}", legendgroup=setting,
            line=dict(color=PALETTE[settings.index(setting) % len(PALETTE)],
                      dash=DASHES[seeds.index(seed) % len(DASHES)])))
    fig.update_layout(**charts.LAYOUT)
    fig.update_layout(title=METRIC_TITLES.get(metric, metric), xaxis_title="optimizer step",
                      height=300 + 22 * ((len(series) + 2) // 3), legend=dict(orientation="h", y=-0.2, yanchor="top"))
    if log_y:
        fig.update_yaxes(type="log")
    charts.show(fig, key=key)


def _comparison(rows: list[dict], *, key: str) -> None:
    """Mean ± std of the final metric per setting (dots with error bars), each seed's value, and epsilon."""
    metric = rows[0]["metric"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[r["setting"] for r in rows], y=[r["mean"] for r in rows], mode="markers",
                             marker=dict(size=14), name="mean ± std over seeds",
                             error_y=dict(type="data", array=[r["std"] for r in rows], visible=True)))
    fig.add_trace(go.Scatter(x=[r["setting"] for r in rows for _ in r["values"]],
                             y=[v for r in rows for v in r["values"]], mode="markers",
                             marker=dict(size=7, symbol="circle-open"), name="one seed"))
    fig.update_layout(title=f"Final {METRIC_TITLES.get(metric, metric).lower()} by setting",
                      yaxis_title=metric, **charts.LAYOUT)
    charts.show(fig, key=key)
    table = pd.DataFrame([{"setting": r["setting"], "alpha": r["alpha"], "seeds": r["n_seeds"],
                           f"{metric} mean": r["mean"], f"{metric} std": r["std"], "ε per model": r["epsilon"],
                           "captured energy": r["captured_energy"]} for r in rows])
    st.dataframe(table, hide_index=True, width="stretch")


def draw(snapshot) -> None:
    run_id, metrics = snapshot.run.id, snapshot.metrics
    if metrics.empty:
        st.caption("No metric reported yet (loading data, calibrating σ, or training the first steps).")
        return
    series = _series(metrics)
    quality = M.EXCESS_RISK if M.EXCESS_RISK in series else M.TEST_ACC
    settings = sorted({setting for rows in series.values() for _, setting, _ in rows},
                      key=lambda setting: (setting != M.ISOTROPIC, setting))
    _per_model_chart(metrics, series.get(quality, []), quality, key=f"dpsgd.{run_id}.quality", settings=settings,
                     log_y=quality == M.EXCESS_RISK)
    _per_model_chart(metrics, series.get(M.TRAIN_LOSS, []), M.TRAIN_LOSS, key=f"dpsgd.{run_id}.loss",
                     settings=settings, log_y=True)
    charts.show(charts.curves(metrics, [M.EPSILON], title="ε spent by each model alone (the run's headline composes all models)",
                              x_title="optimizer step", y_title="ε"), key=f"dpsgd.{run_id}.epsilon")
    if M.ENERGY in series:
        _per_model_chart(metrics, series[M.ENERGY], M.ENERGY, key=f"dpsgd.{run_id}.energy", settings=settings)
    else:
        st.caption("Captured energy appears for settings with α > 0 (the isotropic baseline uses no subspace).")
    rows = snapshot.artifacts.get("comparison")
    if rows:
        st.subheader("Comparison across settings and seeds")
        _comparison(rows, key=f"dpsgd.{run_id}.comparison")


render_mechanism_page("dpsgd", draw, intro=INTRO)
