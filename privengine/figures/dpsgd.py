"""Anisotropic DP-SGD: per-model curves (colour = setting, dash = seed), ε, captured energy, the comparison."""

from __future__ import annotations

import pandas as pd
import plotly.colors
import plotly.graph_objects as go

from privengine.dpsgd import metrics as M
from privengine.store import RunSnapshot

from .common import LAYOUT, Table, curves

PALETTE = plotly.colors.qualitative.Plotly
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
METRIC_TITLES = {M.TEST_ACC: "Test accuracy", M.EXCESS_RISK: "Excess risk (population, exact)",
                 M.TRAIN_LOSS: "Train loss on the private batches (not privatised)",
                 M.ENERGY: "Captured energy ‖UᵀG‖² / ‖G‖² of the clipped private gradient G"}

Series = dict[str, list[tuple[str, str, int]]]


def series(metrics: pd.DataFrame) -> Series:
    """metric -> [(stored name, setting, seed)] for the per-model curves."""
    out: Series = {}
    for name in metrics["name"].unique():
        metric, setting, seed = M.split_metric_key(name)
        if setting is not None:
            out.setdefault(metric, []).append((name, setting, seed))
    return {metric: sorted(rows, key=lambda r: (r[1] != M.ISOTROPIC, r[1], r[2])) for metric, rows in out.items()}


def settings_of(by_metric: Series) -> list[str]:
    """The compared settings, isotropic first: their places fix their colours on every chart."""
    return sorted({setting for rows in by_metric.values() for _, setting, _ in rows},
                  key=lambda setting: (setting != M.ISOTROPIC, setting))


def quality_metric(by_metric: Series) -> str:
    """Excess risk for the regression task, test accuracy otherwise."""
    return M.EXCESS_RISK if M.EXCESS_RISK in by_metric else M.TEST_ACC


def per_model(metrics: pd.DataFrame, rows: list[tuple[str, str, int]], metric: str, *, settings: list[str],
              log_y: bool = False) -> go.Figure:
    """One line per (setting, seed): the colour is the setting (its place in ``settings``), the dash the seed."""
    seeds = sorted({seed for _, _, seed in rows})
    fig = go.Figure()
    for name, setting, seed in rows:
        part = metrics[metrics["name"] == name]
        fig.add_trace(go.Scatter(
            x=part["step"], y=part["value"], mode="lines", name=f"{setting} · seed {seed}", legendgroup=setting,
            line=dict(color=PALETTE[settings.index(setting) % len(PALETTE)],
                      dash=DASHES[seeds.index(seed) % len(DASHES)])))
    fig.update_layout(**LAYOUT)
    fig.update_layout(title=METRIC_TITLES.get(metric, metric), xaxis_title="optimizer step",
                      height=300 + 22 * ((len(rows) + 2) // 3), legend=dict(orientation="h", y=-0.2, yanchor="top"))
    if log_y:
        fig.update_yaxes(type="log")
    return fig


def epsilon(metrics: pd.DataFrame) -> go.Figure:
    return curves(metrics, [M.EPSILON], title="ε spent by each model alone (the run's headline composes all models)",
                  x_title="optimizer step", y_title="ε")


def comparison(rows: list[dict]) -> go.Figure:
    """Mean ± std of the final metric per setting (dots with error bars) and each seed's value."""
    metric = rows[0]["metric"]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=[r["setting"] for r in rows], y=[r["mean"] for r in rows], mode="markers",
                             marker=dict(size=14), name="mean ± std over seeds",
                             error_y=dict(type="data", array=[r["std"] for r in rows], visible=True)))
    fig.add_trace(go.Scatter(x=[r["setting"] for r in rows for _ in r["values"]],
                             y=[v for r in rows for v in r["values"]], mode="markers",
                             marker=dict(size=7, symbol="circle-open"), name="one seed"))
    fig.update_layout(title=f"Final {METRIC_TITLES.get(metric, metric).lower()} by setting",
                      yaxis_title=metric, **LAYOUT)
    return fig


def comparison_table(rows: list[dict]) -> pd.DataFrame:
    """Per setting: its alpha, seeds, the final metric's mean and std, ε per model, captured energy."""
    metric = rows[0]["metric"]
    return pd.DataFrame([{"setting": r["setting"], "alpha": r["alpha"], "seeds": r["n_seeds"],
                          f"{metric} mean": r["mean"], f"{metric} std": r["std"], "ε per model": r["epsilon"],
                          "captured energy": r["captured_energy"]} for r in rows])


def figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart of the page, in its order."""
    metrics = snapshot.metrics
    if metrics.empty:
        return []
    by_metric = series(metrics)
    settings, quality = settings_of(by_metric), quality_metric(by_metric)
    out = [per_model(metrics, by_metric.get(quality, []), quality, settings=settings, log_y=quality == M.EXCESS_RISK),
           per_model(metrics, by_metric.get(M.TRAIN_LOSS, []), M.TRAIN_LOSS, settings=settings, log_y=True),
           epsilon(metrics)]
    if M.ENERGY in by_metric:
        out.append(per_model(metrics, by_metric[M.ENERGY], M.ENERGY, settings=settings))
    if snapshot.artifacts.get("comparison"):
        out.append(comparison(snapshot.artifacts["comparison"]))
    return out


def tables(snapshot: RunSnapshot) -> list[Table]:
    rows = snapshot.artifacts.get("comparison")
    return [Table("Comparison across settings and seeds", comparison_table(rows))] if rows else []
