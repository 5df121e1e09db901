"""Anisotropic DP-SGD: per-model curves (colour = setting, dash = seed), ε, captured energy, the comparison."""

from __future__ import annotations

import pandas as pd
import plotly.colors
import plotly.graph_objects as go

from privengine.dpsgd import metrics as M
from privengine.store import RunSnapshot

from .common import LAYOUT, Table, curves, measures

PALETTE = plotly.colors.qualitative.Plotly
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
METRIC_TITLES = {M.TEST_ACC: "Test accuracy", M.EXCESS_RISK: "Excess risk (population, exact)",
                 M.TRAIN_LOSS: "Train loss on the private batches (not privatised)",
                 M.ENERGY: "Captured energy ‖UᵀG‖² / ‖G‖² (G is the clipped private gradient)"}
Y_TITLES = {M.TEST_ACC: "accuracy", M.EXCESS_RISK: "excess risk (log scale)", M.TRAIN_LOSS: "loss (log scale)",
            M.ENERGY: "fraction of ‖G‖²"}
# the metrics the presets publish, by the name presets give them (privengine.presets.Published.metric)
PUBLISHED_METRICS = {M.TEST_ACC: "test accuracy"}
# the Opacus accountant of a run (its config's ``accountant``), as every ε chart names it
ACCOUNTANTS = {"prv": "Opacus PRV accountant", "rdp": "Opacus RDP accountant"}

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
                      yaxis_title=Y_TITLES.get(metric, ""),
                      height=300 + 22 * ((len(rows) + 2) // 3))
    if log_y:
        fig.update_yaxes(type="log")  # ticked by common.readable_log_axes when the chart is finished
    if metric in PUBLISHED_METRICS:
        measures(fig, PUBLISHED_METRICS[metric])
    return fig


def epsilon(metrics: pd.DataFrame, *, accountant: str | None = None, delta: float | None = None) -> go.Figure:
    """ε of one model against its steps, the accountant (config ``accountant``: prv or rdp) named on the axis."""
    name = ACCOUNTANTS.get(accountant or "", accountant or "Opacus accountant")
    at = f", δ = {delta:g}" if delta else ""
    return curves(metrics, [M.EPSILON], x_title="optimizer step", y_title="ε",
                  title=f"ε spent by each model alone ({name}{at}; the run's headline composes all models)")


def run_epsilon(snapshot: RunSnapshot) -> go.Figure:
    """:func:`epsilon` of a run, with the accountant and δ of its config."""
    config = snapshot.run.config
    return epsilon(snapshot.metrics, accountant=config.get("accountant"), delta=config.get("delta"))


def published_values(snapshot: RunSnapshot) -> dict[str, float]:
    """The run's test accuracy, as its presets publish it: once the run has ended, the summary's
    ``best_test_acc`` (the setting chosen on the validation part, its mean over seeds on the test part); live,
    for a run of one setting only, the mean of its models' last reported test values. A live run of several
    settings shows none: choosing the best by the test curves would select on the reported examples."""
    summary = snapshot.run.summary or {}
    if summary.get(f"best_{M.TEST_ACC}") is not None:
        return {PUBLISHED_METRICS[M.TEST_ACC]: float(summary[f"best_{M.TEST_ACC}"])}
    metrics = snapshot.metrics
    last: dict[str, list[float]] = {}
    for name, setting, _ in series(metrics).get(M.TEST_ACC, []):
        part = metrics[metrics["name"] == name]
        if not part.empty:
            last.setdefault(setting, []).append(float(part["value"].iloc[-1]))
    if len(last) != 1 or len(snapshot.run.config.get("alphas") or [None]) != 1:
        return {}
    (values,) = last.values()
    return {PUBLISHED_METRICS[M.TEST_ACC]: sum(values) / len(values)}


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
    name, _, detail = METRIC_TITLES.get(metric, metric).partition(" (")  # "Excess risk", "population, exact)"
    fig.update_layout(title=f"Final {name.lower()} by setting" + (f" ({detail}" if detail else ""),
                      yaxis_title=Y_TITLES.get(metric, metric).replace(" (log scale)", ""), **LAYOUT)
    # plotly's autorange puts a lone point (one setting, one seed) in a window of +-0.5: a 98.9 % accuracy
    # shown on a 0-1.5 axis. The window is the data's own, error bars included, padded by a third.
    ends = [r["mean"] - r["std"] for r in rows] + [r["mean"] + r["std"] for r in rows] + \
        [v for r in rows for v in r["values"]]
    low, high = min(ends), max(ends)
    pad = (high - low or abs(high) * 0.01 or 1e-3) / 3
    fig.update_yaxes(range=[low - pad, high + pad])
    return fig


def comparison_table(rows: list[dict]) -> pd.DataFrame:
    """Per setting: its alpha, seeds, the final metric's mean and std (test part), the validation-part mean the
    best setting is chosen by (classification), ε per model, captured energy."""
    metric = rows[0]["metric"]
    validated = any("validation_mean" in r for r in rows)
    return pd.DataFrame([{"setting": r["setting"], "alpha": r["alpha"], "seeds": r["n_seeds"],
                          f"{metric} mean": r["mean"], f"{metric} std": r["std"],
                          **({"validation mean (selects)": r.get("validation_mean")} if validated else {}),
                          "ε per model": r["epsilon"], "captured energy": r["captured_energy"]} for r in rows])


def figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart of the page, in its order."""
    metrics = snapshot.metrics
    if metrics.empty:
        return []
    by_metric = series(metrics)
    settings, quality = settings_of(by_metric), quality_metric(by_metric)
    out = [per_model(metrics, by_metric.get(quality, []), quality, settings=settings, log_y=quality == M.EXCESS_RISK),
           per_model(metrics, by_metric.get(M.TRAIN_LOSS, []), M.TRAIN_LOSS, settings=settings, log_y=True),
           run_epsilon(snapshot)]
    if M.ENERGY in by_metric:
        out.append(per_model(metrics, by_metric[M.ENERGY], M.ENERGY, settings=settings))
    if snapshot.artifacts.get("comparison"):
        out.append(comparison(snapshot.artifacts["comparison"]))
    return out


def tables(snapshot: RunSnapshot) -> list[Table]:
    rows = snapshot.artifacts.get("comparison")
    return [Table("Comparison across settings and seeds", comparison_table(rows))] if rows else []
