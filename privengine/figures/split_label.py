"""Split learning label protection: test AUC and leak AUC per epoch, gradient-norm histograms before and after
protection, and the test AUC vs leak AUC trade-off, one point per setting."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from privengine.store import RunSnapshot

from .common import LAYOUT, REFERENCE_COLOUR, Table, curves, measures
from .metric_names import header
from .split_label_names import ATTACKS, BOUNDS, LAYERS

# the leak the presets publish (privengine.presets.Published.metric), by layer: the norm attack's mean leak AUC
PUBLISHED_LEAK = {"cut": "leak AUC (norm attack, cut layer)"}
SETTINGS_COLUMNS = ["test_auc", "leak_run.norm.cut.q95", "leak_run.cos.cut.q95", "leak.norm.cut.mean",
                    "leak.norm.first.mean", "sumkl.max", "auc_bound", "auc_bound.mean", "single_class_batches",
                    "epochs_done"]
# settings-table columns a setting's last epoch gives (the others cover every batch of its run)
LAST_EPOCH = ("test_auc", "leak.norm.cut.mean", "leak.norm.first.mean")


def split(metrics: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Metrics per setting: ``{key: long table with the prefix removed}``; key '' in single mode."""
    names = metrics["name"].str.split("/", n=1, expand=True)
    if names.shape[1] == 1:
        return {"": metrics}
    out = {}
    for key in names[0][names[1].notna()].unique():
        part = metrics[names[0] == key].copy()
        part["name"] = names[1][names[0] == key]
        out[key] = part
    return out


def labels(snapshot: RunSnapshot) -> dict[str, str]:
    """Setting key -> its label, from the trade-off artifact."""
    points = snapshot.artifacts.get("tradeoff", {}).get("points", [])
    return {p["setting"]: p["label"] for p in points}


def per_setting(snapshot: RunSnapshot) -> dict[str, pd.DataFrame]:
    """The metrics of each setting, in the order the job ran them."""
    names, by_key = labels(snapshot), split(snapshot.metrics)
    order = [k for k in names if k in by_key] + [k for k in by_key if k not in names]
    return {k: by_key[k] for k in order}


def test_auc(settings: dict[str, pd.DataFrame], names: dict[str, str]) -> go.Figure:
    fig = go.Figure()
    for key, metrics in settings.items():
        part = metrics[metrics["name"] == "test_auc"]
        fig.add_trace(go.Scatter(x=part["step"], y=part["value"], mode="lines+markers",
                                 name=names.get(key, key or "test AUC")))
    fig.update_layout(title="Test AUC", xaxis_title="epoch", yaxis_title="ROC AUC", **LAYOUT)
    return fig


def leak(metrics: pd.DataFrame, layer: str, *, title: str) -> go.Figure:
    """Mean and 95% quantile leak AUC of both attacks at ``layer`` ("cut" or "first") per epoch, beside the bounds
    Marvell's realised sumKL implies (:func:`privengine.split_label.attacks.sumkl_summary`): at the epoch's largest
    sumKL (every batch's leak AUC) and the mean of the per-batch bounds (the mean curves')."""
    names, text_of = [], {}
    for attack, text in ATTACKS.items():
        for stat, what in (("mean", "mean"), ("q95", "95% quantile")):
            name = f"leak.{attack}.{layer}.{stat}"
            names.append(name)
            text_of[name] = f"{text}, {what}"
        text_of[f"unprotected.{attack}.{layer}.mean"] = f"{text}, unprotected (mean)"
        names.append(f"unprotected.{attack}.{layer}.mean")
    names += list(BOUNDS)
    text_of |= BOUNDS
    fig = curves(metrics, names, title=title, x_title="epoch", y_title="leak AUC", labels=text_of)
    for trace in fig.data:
        if trace.name == BOUNDS["auc_bound"]:
            trace.line = dict(color=REFERENCE_COLOUR, dash="dash")
        elif trace.name == BOUNDS["auc_bound.mean"]:
            trace.line = dict(color=REFERENCE_COLOUR, dash="dot")
        elif "unprotected" in trace.name:
            trace.line = dict(dash="dot", width=1)
        elif "95%" in trace.name:
            trace.line = dict(dash="dashdot")
    fig.update_yaxes(range=[0.0, 1.02])
    fig.update_layout(height=460)  # up to eight curves: the legend below takes four rows
    return measures(fig, PUBLISHED_LEAK[layer]) if layer in PUBLISHED_LEAK else fig


def published_values(snapshot: RunSnapshot) -> dict[str, float]:
    """The norm attack's mean leak AUC at the cut layer in the last epoch reported, for a one-setting run."""
    settings = split(snapshot.metrics) if not snapshot.metrics.empty else {}
    if len(settings) != 1:
        return {}
    metrics = next(iter(settings.values()))
    part = metrics[metrics["name"] == "leak.norm.cut.mean"]
    return {} if part.empty else {PUBLISHED_LEAK["cut"]: float(part["value"].iloc[-1])}


def histogram(data: dict) -> go.Figure:
    """Share of each class per bin of log10 of the cut-layer gradient norm, before and after protection."""
    edges = np.asarray(data["edges"])
    centres = (edges[:-1] + edges[1:]) / 2
    # which half is which goes in its x axis' title: subplot titles sat where the chart's title is placed
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True)
    for col, when in enumerate(("before", "after"), start=1):
        for label, color in (("positive", "#d62728"), ("negative", "#1f77b4")):
            counts = np.asarray(data[when][label], dtype=float)
            share = counts / counts.sum() if counts.sum() else counts
            fig.add_trace(go.Bar(x=centres, y=share, name=f"{label}s", marker_color=color, opacity=0.6,
                                 showlegend=col == 1), row=1, col=col)
    fig.update_layout(barmode="overlay", title=f"Cut-layer gradient norms, epoch {data['epoch']}", **LAYOUT)
    fig.update_xaxes(title_text="log10 ‖g‖ before protection", col=1)
    fig.update_xaxes(title_text="log10 ‖g‖ after protection", col=2)
    fig.update_yaxes(title_text="share of the class", col=1)
    return fig


def histogram_data(snapshot: RunSnapshot, key: str) -> dict | None:
    """The gradient-norm histogram of setting ``key`` ('' in single mode), if reported yet."""
    return snapshot.artifacts.get(f"grad_norms/{key}" if key else "grad_norms")


def tradeoff(points: list[dict]) -> go.Figure:
    """Test AUC against leak AUC at the cut layer, one point per setting, labelled once: the stronger attack's
    mean leak AUC over every batch of the setting's run (the mean the leak charts' solid curves and the demo's
    text speak of); each attack's mean and 95 % quantile, and the unprotected gradients' mean, on hover. Both axes
    span 0.5 (chance: no leak, no skill) to 1, further only for a value below 0.5."""
    leaks = [max((p.get(f"leak_run.{attack}.cut.mean") for attack in ATTACKS
                  if p.get(f"leak_run.{attack}.cut.mean") is not None), default=None) for p in points]
    tests = [p.get("test_auc") for p in points]
    fig = go.Figure(go.Scatter(
        x=leaks, y=tests, text=[p["label"] for p in points], mode="markers+text",
        textposition=["top right" if (x or 1) < 0.75 else "top left" for x in leaks],  # clear of the axes' ticks
        cliponaxis=False, marker=dict(size=12), name="setting", showlegend=False,
        hovertext=[_tradeoff_hover(p) for p in points], hoverinfo="text"))
    fig.update_layout(title="Test AUC against leak AUC (cut layer; the stronger attack's mean over the run's "
                            "batches)", xaxis_title="leak AUC (0.5 = no leak)", yaxis_title="test AUC", **LAYOUT)
    fig.update_layout(margin=dict(l=40, r=40))  # room for the point labels at the edges (drawn unclipped)
    for axis, values in (("xaxis", leaks), ("yaxis", tests)):
        low = min([0.5, *(v for v in values if v is not None)])
        fig.update_layout({axis: dict(range=[low - 0.03, 1.05], dtick=0.1)})
    return fig


def _tradeoff_hover(point: dict) -> str:
    """A trade-off point's numbers, in lines a half-width chart shows whole: test AUC, each attack's mean and 95 %
    quantile (q95) leak AUC over the run at the cut layer, and the unprotected gradients' means."""
    lines = [f"<b>{point['label']}</b>", f"test AUC {_auc(point.get('test_auc'))}"]
    for attack, text in ATTACKS.items():
        mean, q95 = point.get(f"leak_run.{attack}.cut.mean"), point.get(f"leak_run.{attack}.cut.q95")
        lines.append(f"{text}: mean {_auc(mean)}, q95 {_auc(q95)}")
    unprotected = ", ".join(f"{text.split()[0]} {_auc(point.get(f'unprotected_run.{attack}.cut.mean'))}"
                            for attack, text in ATTACKS.items())
    return "<br>".join([*lines, f"unprotected means: {unprotected}"])


def _auc(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def settings_table(summary: dict) -> pd.DataFrame | None:
    """One row per setting (indexed by its label): test AUC, leak AUCs, sumKL, bound, headed as the charts name
    them; None in single mode."""
    if not summary.get("settings"):
        return None
    table = pd.DataFrame(summary["settings"]).set_index("label").rename_axis("setting")
    table = table[[c for c in SETTINGS_COLUMNS if c in table]]
    return table.rename(columns=column_header)


def column_header(key: str) -> str:
    """A settings-table column's header: the metric's name on the charts (metric_names), and where it comes from."""
    text = header("split_label", key)
    return f"{text} (last epoch)" if key in LAST_EPOCH else text


def figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart of the page, with the per-setting charts of every setting (the page shows one at a time)."""
    if snapshot.metrics.empty:
        return []
    names, settings = labels(snapshot), per_setting(snapshot)
    out = [test_auc(settings, names)]
    points = snapshot.artifacts.get("tradeoff", {}).get("points", [])
    if points:
        out.append(tradeoff(points))
    for key, metrics in settings.items():
        suffix = f" ({names.get(key, key)})" if len(settings) > 1 else ""
        out += [leak(metrics, layer, title=title + suffix) for layer, title in LAYERS.items()]
        hist = histogram_data(snapshot, key)
        if hist:
            fig = histogram(hist)
            fig.update_layout(title=fig.layout.title.text + suffix)
            out.append(fig)
    return out


def tables(snapshot: RunSnapshot) -> list[Table]:
    table = settings_table(snapshot.run.summary or {})
    return [] if table is None else [Table("Settings", table.reset_index())]
