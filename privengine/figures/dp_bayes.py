"""DP Bayesian inference: the method comparison (error and coverage vs ε), released intervals, posterior
densities, SGLD traces, the chain's utility, error vs ε of the exponential mechanism, error vs N, scores."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go

from privengine.store import RunRecord, RunSnapshot

from .common import INK, LAYOUT, REFERENCE_COLOUR, Table, curves, run_line

COLORS = {"reference": REFERENCE_COLOUR, "vi": "#1f77b4", "private": "#d62728"}
METHOD_STYLE = {  # method -> (label, colour)
    "exponential": ("exponential mechanism (seed; SGLD draw)", "#d62728"),
    "ssp": ("SSP + noise-aware posterior", "#2ca02c"),
    "dpvi": ("DPVI (DP-SGD on the ELBO)", "#9467bd"),
}
# each method's ε comes from its own accountant: the axis says which
COMPARISON_AXIS = ("ε per release (log scale): exponential mechanism (exact draw); "
                   "SSP analytic Gaussian, δ = {delta:g}; DPVI Opacus RDP, δ = {delta:g}")
MEAN_TRACE = ("mean_sd.", "Private mean − posterior mean (SGLD trace, first chain)", "posterior sds")
SD_TRACE = ("log_sd_ratio.", "log(private sd / posterior sd) (SGLD trace, first chain)", "natural log")
UTILITY_TITLE = "Utility U(z) of the chain (sanitized; warm-up, then SGLD)"
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
        fig.update_layout(title=f"{name}: private vs posterior (private sd = {_times_text(ratio)} "
                                f"posterior sd)", xaxis_title=name,
                          yaxis=dict(range=[0, d["y_max"]], title="density"), **LAYOUT)
        out.append(fig)
    return out


def overlays(runs: list[RunRecord], artifacts: dict[str, dict], labels: dict[str, str],
             styles: dict[str, dict]) -> list[go.Figure]:
    """Several runs' posterior densities, one chart per parameter: each run's private draw (solid) over its
    reference posterior (dotted; runs on the same data share it), in the run's width (the caller gives each line a
    colour of its own). ``artifacts``: run
    id -> the run's artifacts; runs without densities are left out."""
    charts: dict[str, go.Figure] = {}
    tops: dict[str, float] = {}  # per parameter, the highest of the runs' y_max (each page clips its narrow draws)
    for run in runs:
        for name, d in (artifacts.get(run.id, {}).get("densities") or {}).items():
            fig = charts.setdefault(name, go.Figure())
            if "y_max" in d:
                tops[name] = max(tops.get(name, 0.0), float(d["y_max"]))
            for key, series, dash, width in (("private", "private draw", "solid", None),
                                             ("reference", "reference posterior", "dot", 2)):
                fig.add_trace(run_line(run.id, labels[run.id], styles[run.id], d["x"], d[key], series=series,
                                       dash=dash, width=width, markers=False))
    out = []
    for name, fig in charts.items():
        top = [0, tops[name]] if name in tops else None
        fig.update_layout(title=f"{name}: posterior densities (private draw against reference)",
                          xaxis_title=name, yaxis=dict(title="density", range=top),
                          **{**LAYOUT, "height": 300 + 22 * len(fig.data)})  # the legend lists every line below
        out.append(fig)
    return out


def _times_text(log10_ratio: float) -> str:
    """A ratio given by its base-10 log, for a title: ``"0.63 ×"`` near 1, else ``"10<sup>−5.8</sup> ×"`` (plotly
    draws the superscript; a caret read as code)."""
    if abs(log10_ratio) < 2:
        return f"{10 ** log10_ratio:.2g} ×"
    return f"10<sup>{log10_ratio:.1f}</sup> ×".replace("-", "−")


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
    fig = curves(part, names, title=UTILITY_TITLE,
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
    """Per parameter: the reference posterior, and the errors of non-private VI (the exponential mechanism's runs,
    which fit it; SSP and DP-VI runs have none) and of the first private draw."""
    table = pd.DataFrame({"parameter": scores["names"], "reference mean": scores["reference_mean"],
                          "reference sd": scores["reference_sd"]})
    if "vi" in scores:
        table["VI mean error (sds)"] = scores["vi"]["mean_error_sd"]
        table["VI sd ratio"] = scores["vi"]["sd_ratio"]
    if scores["private"]:
        first = scores["private"][0]
        table["private mean error (sds)"] = first["mean_error_sd"]
        table["private log10 sd ratio"] = [v / math.log(10) for v in first["log_sd_ratio"]]
    return table


def _medians(comparison: dict) -> pd.DataFrame:
    return pd.DataFrame(comparison["coverage"])


def comparison_figures(comparison: dict, *, delta: float) -> list[go.Figure]:
    """The presenter's pair: error against the truth and 90 % coverage, against ε, one line per method.

    Error: median over the repeats of the RMS (over parameters) distance of the released mean from the true
    parameters, in reference posterior sds. Coverage: fraction of true values inside the released central
    90 % intervals. The non-private posterior on the same data sets is the dashed reference line.
    """
    table = _medians(comparison)
    ref = table[table["method"] == comparison["reference_method"]].iloc[0]
    axis = COMPARISON_AXIS.format(delta=delta)
    err, cov = go.Figure(), go.Figure()
    for method, (label, colour) in METHOD_STYLE.items():
        part = table[table["method"] == method].sort_values("epsilon")
        if part.empty:
            continue
        line = dict(color=colour, width=3)
        err.add_trace(go.Scatter(x=part["epsilon"], y=part["median_truth_error_sd_rms"], mode="lines+markers",
                                 name=label, line=line))
        cov.add_trace(go.Scatter(x=part["epsilon"], y=part["coverage_90"], mode="lines+markers", name=label,
                                 line=line))
    err.add_hline(y=ref["median_truth_error_sd_rms"], line_dash="dash", line_color=COLORS["reference"],
                  annotation_text="non-private posterior", annotation_position="bottom right")
    err.update_layout(title="Error of the released mean (against the true parameters, median over repeats)",
                      xaxis_type="log", yaxis_type="log", xaxis_title=axis,
                      yaxis_title="RMS error (reference posterior sds, log)", **{**LAYOUT, "height": 420})
    cov.add_hrect(y0=0.85, y1=0.95, fillcolor="#2ca02c", opacity=0.08, line_width=0)
    cov.add_hline(y=ref["coverage_90"], line_dash="dash", line_color=COLORS["reference"],
                  annotation_text=f"non-private posterior ({ref['coverage_90']:.2f})",
                  annotation_position="bottom right")
    cov.add_hline(y=0.9, line_dash="dot", line_color="gray", annotation_text="nominal 0.90",
                  annotation_position="top left")
    cov.update_layout(title="90 % interval coverage (true values inside the released 90 % intervals)",
                      xaxis_type="log",
                      xaxis_title=axis, yaxis=dict(range=[-0.02, 1.02], title="coverage_90"),
                      **{**LAYOUT, "height": 420})
    return [err, cov]


def comparison_table(comparison: dict) -> pd.DataFrame:
    """Per method and ε: coverage_90, median errors (truth, reference), sd ratio and KL."""
    table = _medians(comparison)
    return table[["method", "epsilon", "releases", "coverage_90", "median_truth_error_sd_rms",
                  "median_truth_error_rms", "median_mean_error_sd_rms", "median_sd_ratio_geomean", "median_kl"]]


def intervals_figure(intervals: dict) -> go.Figure:
    """Per parameter, relative to the truth (or, on a stored data set, to the reference's mean: ``zero``): the
    reference's and the release's mean with 90 % interval."""
    truth, zero = intervals["truth"], intervals.get("zero", "true value")
    fig = go.Figure()
    for key, label, colour, shift in (("reference", "non-private posterior", COLORS["reference"], -0.12),
                                      ("released", METHOD_STYLE[intervals["method"]][0],
                                       METHOD_STYLE[intervals["method"]][1], 0.12)):
        part = intervals[key]
        y = [i + shift for i in range(len(truth))]
        fig.add_trace(go.Scatter(
            x=[m - t for m, t in zip(part["mean"], truth)], y=y, mode="markers", name=label,
            marker=dict(color=colour, size=9),
            error_x=dict(type="data", symmetric=False, array=[u - m for u, m in zip(part["upper"], part["mean"])],
                         arrayminus=[m - lo for m, lo in zip(part["mean"], part["lower"])])))
    fig.add_vline(x=0, line_color=INK, annotation_text=zero)
    fig.update_layout(title=f"Released mean and 90 % interval (minus the {zero})", xaxis_title="parameter units",
                      yaxis=dict(tickvals=list(range(len(truth))), ticktext=intervals["names"]), **LAYOUT)
    return fig


def error_vs_n_figure(rows: list[dict], *, epsilon: float) -> go.Figure:
    """Error of each method's released mean against the truth vs N (log-log), with a 1/(εN) guide.

    ``rows``: {"method", "n_records", "median_truth_error_rms"} (non-private rows under "non-private posterior"),
    the error of the regression function's parameters (beta, b).
    The guide passes through the best private method's first point.
    """
    table = pd.DataFrame(rows)
    fig = go.Figure()
    styles = {**METHOD_STYLE, "non-private posterior": ("non-private posterior", COLORS["reference"])}
    for method, part in table.groupby("method", sort=False):
        label, colour = styles[method]
        part = part.sort_values("n_records")
        fig.add_trace(go.Scatter(x=part["n_records"], y=part["median_truth_error_rms"], mode="lines+markers",
                                 name=label, line=dict(color=colour, dash="dash" if method not in METHOD_STYLE
                                                       else None)))
    private = table[table["method"].isin(METHOD_STYLE)]
    best = private.groupby("method")["median_truth_error_rms"].mean().idxmin()
    first = private[private["method"] == best].sort_values("n_records").iloc[0]
    n = sorted(table["n_records"].unique())
    fig.add_trace(go.Scatter(x=n, y=[first["median_truth_error_rms"] * first["n_records"] / v for v in n],
                             mode="lines", name="∝ 1/(εN)", line=dict(color="gray", dash="dot")))
    fig.update_layout(title=f"Error vs N (against the true parameters, at ε = {epsilon:g})", xaxis_type="log",
                      yaxis_type="log", xaxis_title="records N (log)",
                      yaxis_title="median RMS error of (β, b) (log)", **{**LAYOUT, "height": 420})
    return fig


def figures(snapshot: RunSnapshot) -> list[go.Figure]:
    """Every chart of the page, in its order."""
    metrics, artifacts = snapshot.metrics, snapshot.artifacts
    phases = artifacts.get("phases")
    out = []
    if "comparison" in artifacts:
        out += comparison_figures(artifacts["comparison"], delta=_delta(snapshot))
    if "intervals" in artifacts:
        out.append(intervals_figure(artifacts["intervals"]))
    out += densities(artifacts["densities"]) if "densities" in artifacts else []
    if not metrics.empty:
        out += [utility(metrics, phases), trace(metrics, MEAN_TRACE, phases), vi_elbo(metrics),
                trace(metrics, SD_TRACE, phases)]
    if "sweep" in artifacts:
        out += sweep_figures(artifacts["sweep"])
    return [fig for fig in out if fig is not None]


def features_table(summary: dict | None) -> pd.DataFrame | None:
    """On a stored data set, which column each coefficient beta_j multiplies (``summary["features"]``: public, the
    schema and the declared categories); None on the synthetic records."""
    features = (summary or {}).get("features")
    if not features:
        return None
    return pd.DataFrame({"parameter": list(features), "column": list(features.values())})


def held_out_text(summary: dict | None) -> str | None:
    """On a stored data set, how the release predicts its held-out rows (n, accuracy, log-loss), in words, said to
    be published without privacy; None on the synthetic records or before the run has finished."""
    summary = summary or {}
    if "held_out_rows" not in summary:
        return None
    if not summary["held_out_rows"]:
        return "No private row was held out, so the release is not scored."
    return (f"On the {summary['held_out_rows']} held-out private rows: accuracy {summary['held_out_accuracy']:.3f}, "
            f"log-loss {summary['held_out_log_loss']:.3f} (computed from those rows without privacy).")


def _delta(snapshot: RunSnapshot) -> float:
    return float(snapshot.run.config.get("delta", 1e-5))


def tables(snapshot: RunSnapshot) -> list[Table]:
    artifacts = snapshot.artifacts
    out = []
    if "comparison" in artifacts:
        out.append(Table("Methods compared: coverage and median errors per ε",
                         comparison_table(artifacts["comparison"])))
    if "sweep" in artifacts:
        out.append(Table("Error vs ε (medians over the repeats)", sweep_table(artifacts["sweep"])))
    if "scores" in artifacts:
        out.append(Table("Scores against the reference posterior", scores_table(artifacts["scores"])))
    if (features := features_table(snapshot.run.summary)) is not None:
        out.append(Table("Coefficients and the data set's columns", features))
    return out
