"""Anisotropic DP-SGD: live training curves per (setting, seed), epsilon, captured energy, the comparison."""

from __future__ import annotations

import streamlit as st

from privengine.dpsgd import metrics as M
from privengine.figures import dpsgd as figures
from ui import charts
from ui.audit_panel import audit_section
from ui.mechanism_page import render_mechanism_page
from ui.membership_panel import membership_section
from ui.shell import through_app

INTRO = (
    "Private SGD whose noise, and optionally clip, is shaped by a gradient subspace **U** estimated from public "
    "examples only. *anisotropic* (the seed's variant): flat clip, variance σ²C² inside span(U) and (1 + α) times "
    "more outside; *elliptical*: the clip is shaped like the noise (‖g‖ in the S-norm ≤ C), which allows α < 0, "
    "less noise outside span(U); *projected*: only the span(U) part of the noisy gradient is kept. The accountant "
    "sees the noise multiplier σ, so every setting has the ε of isotropic DP-SGD. One run trains the isotropic "
    "baseline (α = 0) and each α in the list over several seeds; every model draws its own batches and noise, and "
    "the run's headline ε composes all of them, since the run reports every model's results.")


def draw(snapshot) -> None:
    run_id, metrics = snapshot.run.id, snapshot.metrics
    if metrics.empty:
        st.caption("No metric reported yet (loading data, calibrating σ, or training the first steps).")
        return
    series = figures.series(metrics)
    settings, quality = figures.settings_of(series), figures.quality_metric(series)
    charts.show(figures.per_model(metrics, series.get(quality, []), quality, settings=settings,
                                  log_y=quality == M.EXCESS_RISK), key=f"dpsgd.{run_id}.quality")
    charts.show(figures.per_model(metrics, series.get(M.TRAIN_LOSS, []), M.TRAIN_LOSS, settings=settings, log_y=True),
                key=f"dpsgd.{run_id}.loss")
    charts.show(figures.run_epsilon(snapshot), key=f"dpsgd.{run_id}.epsilon")
    if M.ENERGY in series:
        charts.show(figures.per_model(metrics, series[M.ENERGY], M.ENERGY, settings=settings),
                    key=f"dpsgd.{run_id}.energy")
    else:
        st.caption("Captured energy appears for settings with α > 0 (the isotropic baseline uses no subspace).")
    rows = snapshot.artifacts.get("comparison")
    if rows:
        st.subheader("Comparison across settings and seeds")
        charts.show(figures.comparison(rows), key=f"dpsgd.{run_id}.comparison")
        charts.table(figures.comparison_table(rows))


through_app()  # first: the app's shell when Streamlit ran this script directly
render_mechanism_page("dpsgd", draw, intro=INTRO)
membership_section("dpsgd")
audit_section("dpsgd")
