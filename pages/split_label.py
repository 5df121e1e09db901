"""Split learning label protection: test AUC and the passive party's leak AUC per epoch, gradient-norm
histograms before/after protection, and the test AUC vs leak AUC trade-off, one point per setting."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from ui import charts
from ui.mechanism_page import render_mechanism_page

NAME = "split_label"
ATTACKS = {"norm": "norm attack", "cos": "cosine attack"}

BOUND_TEXT = """
**What protects the labels here, and what it does not promise.** There is no (ε, δ): this is not
differential privacy. Marvell chooses, batch by batch, Gaussian noise for the cut-layer gradients that keeps
**sumKL**, the symmetrised KL divergence between the gradient distributions of positives and of negatives,
under a threshold. By the Marvell paper's theorem, **any** scorer the passive party builds from one batch then has
a leak AUC of at most **1/2 + √sumKL/2 − sumKL/8** (0.82 at sumKL 0.64, 0.68 at 0.16); this is the dashed
"sumKL bound" line. Caveats: the bound is computed in Marvell's Gaussian model (each class's gradients Gaussian with
isotropic covariance, statistics estimated from the batch), which real gradients do not follow. In particular, with
a linear top model (top hidden = 0) the unprotected cut gradients all lie on one line, the class with the larger
variance gets no noise across that line, and an attacker who scores |cos| with a known positive can exceed the bound.
The bound holds per batch, not for an attacker who combines an example's gradients across epochs; batches with a
single class get no Marvell noise. Isotropic noise gets a sumKL in the same model; max norm alignment has none.
"""


def _split(metrics: pd.DataFrame) -> dict[str, pd.DataFrame]:
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


def _labels(snapshot) -> dict[str, str]:
    points = snapshot.artifacts.get("tradeoff", {}).get("points", [])
    return {p["setting"]: p["label"] for p in points}


def _leak_chart(metrics: pd.DataFrame, layer: str, *, title: str) -> go.Figure:
    names, labels = [], {}
    for attack, text in ATTACKS.items():
        for stat, what in (("mean", "mean"), ("q95", "95% quantile")):
            name = f"leak.{attack}.{layer}.{stat}"
            names.append(name)
            labels[name] = f"{text}, {what}"
        labels[f"unprotected.{attack}.{layer}.mean"] = f"{text}, unprotected (mean)"
        names.append(f"unprotected.{attack}.{layer}.mean")
    names.append("auc_bound")
    labels["auc_bound"] = "sumKL bound"
    fig = charts.curves(metrics, names, title=title, x_title="epoch", y_title="leak AUC", labels=labels)
    for trace in fig.data:
        if trace.name == "sumKL bound":
            trace.line = dict(color="black", dash="dash")
        elif "unprotected" in trace.name:
            trace.line = dict(dash="dot", width=1)
        elif "95%" in trace.name:
            trace.line = dict(dash="dashdot")
    fig.update_yaxes(range=[0.0, 1.02])
    return fig


def _histogram(data: dict) -> go.Figure:
    edges = np.asarray(data["edges"])
    centres = (edges[:-1] + edges[1:]) / 2
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=("before protection", "after protection"))
    for col, when in enumerate(("before", "after"), start=1):
        for label, color in (("positive", "#d62728"), ("negative", "#1f77b4")):
            counts = np.asarray(data[when][label], dtype=float)
            share = counts / counts.sum() if counts.sum() else counts
            fig.add_trace(go.Bar(x=centres, y=share, name=f"{label}s", marker_color=color, opacity=0.6,
                                 showlegend=col == 1), row=1, col=col)
    fig.update_layout(barmode="overlay", title=f"Cut-layer gradient norms, epoch {data['epoch']}",
                      **charts.LAYOUT)
    fig.update_xaxes(title_text="log10 ‖g‖")
    fig.update_yaxes(title_text="share of the class", col=1)
    return fig


def _tradeoff(points: list[dict]) -> go.Figure:
    fig = go.Figure()
    for attack, symbol in (("norm", "circle"), ("cos", "diamond")):
        fig.add_trace(go.Scatter(
            x=[p.get(f"leak_run.{attack}.cut.q95") for p in points], y=[p.get("test_auc") for p in points],
            text=[p["label"] for p in points], mode="markers+text", textposition="top center",
            marker=dict(symbol=symbol, size=11), name=f"{ATTACKS[attack]} (95% quantile over the run)"))
    fig.update_layout(title="Trade-off: test AUC vs leak AUC at the cut layer", xaxis_title="leak AUC",
                      yaxis_title="test AUC", **charts.LAYOUT)
    return fig


def draw(snapshot) -> None:
    run_id = snapshot.run.id
    if snapshot.metrics.empty:
        st.caption("Waiting for the first epoch.")
        return
    labels = _labels(snapshot)
    split = _split(snapshot.metrics)
    order = [k for k in labels if k in split] + [k for k in split if k not in labels]  # the job's order
    per_setting = {k: split[k] for k in order}
    left, right = st.columns(2)
    with left:
        fig = go.Figure()
        for key, metrics in per_setting.items():
            part = metrics[metrics["name"] == "test_auc"]
            fig.add_trace(go.Scatter(x=part["step"], y=part["value"], mode="lines+markers",
                                     name=labels.get(key, key or "test AUC")))
        fig.update_layout(title="Test AUC", xaxis_title="epoch", yaxis_title="ROC AUC", **charts.LAYOUT)
        charts.show(fig, key=f"{run_id}.test_auc")
    with right:
        points = snapshot.artifacts.get("tradeoff", {}).get("points", [])
        if points:
            charts.show(_tradeoff(points), key=f"{run_id}.tradeoff")
        else:
            st.caption("The trade-off scatter gets a point when a setting finishes.")

    key = ""
    if len(per_setting) > 1:
        key = st.selectbox("Setting shown below", list(per_setting), format_func=lambda k: labels.get(k, k),
                           key=f"{run_id}.setting")
    metrics = per_setting.get(key, snapshot.metrics)
    left, right = st.columns(2)
    with left:
        charts.show(_leak_chart(metrics, "cut", title="Leak AUC at the cut layer"), key=f"{run_id}.{key}.leak_cut")
    with right:
        charts.show(_leak_chart(metrics, "first", title="Leak AUC at the passive party's first layer"),
                    key=f"{run_id}.{key}.leak_first")
    hist = snapshot.artifacts.get(f"grad_norms/{key}" if key else "grad_norms")
    if hist:
        charts.show(_histogram(hist), key=f"{run_id}.{key}.hist")
    with st.expander("The sumKL bound: what it means and its caveats", expanded=False):
        st.markdown(BOUND_TEXT)
    summary = snapshot.run.summary or {}
    if summary.get("settings"):
        table = pd.DataFrame(summary["settings"]).set_index("label")
        columns = ["test_auc", "leak_run.norm.cut.q95", "leak_run.cos.cut.q95", "leak.norm.cut.mean",
                   "leak.norm.first.mean", "sumkl.max", "auc_bound", "single_class_batches", "epochs_done"]
        st.dataframe(table[[c for c in columns if c in table]], width="stretch")


render_mechanism_page(NAME, draw)
