"""DP Bayesian inference: posterior densities, SGLD trace, utility over steps, error vs epsilon."""

from __future__ import annotations

import streamlit as st

from privengine.figures import dp_bayes as figures
from ui import charts
from ui.mechanism_page import render_mechanism_page

INTRO = (
    "Releases a **mean-field Gaussian approximation** of a Bayesian regression posterior with the exponential "
    "mechanism. Each record's log-likelihood is sanitized to τ·tanh(l/τ), so the utility U(z) (the ELBO with "
    "the sanitized likelihood, entropy weighted by w) changes by at most Δ_U = 2τ when one record is replaced "
    "(τ for add/remove). One exact draw of z = (mean, log sd) from f(z) ∝ exp(ε U / (2Δ_U)) is ε-DP; here it "
    "is drawn by preconditioned SGLD, an approximate sampler, so the guarantee is approximate. Expect the "
    "private mean about √(4τ/ε) posterior sds off, and overconfident private sds unless w is raised.")


def _show(fig, key: str) -> None:
    if fig is not None:
        charts.show(fig, key=key)


def draw(snapshot) -> None:
    run_id, metrics, artifacts = snapshot.run.id, snapshot.metrics, snapshot.artifacts
    phases = artifacts.get("phases")
    if "densities" in artifacts:
        st.subheader("Posterior density per parameter")
        cols = st.columns(2)
        for i, (name, fig) in enumerate(zip(artifacts["densities"], figures.densities(artifacts["densities"]))):
            with cols[i % 2]:
                charts.show(fig, key=f"dp_bayes.{run_id}.density.{name}")
    elif metrics.empty:
        st.caption("Computing the reference posterior…")
    if not metrics.empty:
        left, right = st.columns(2)
        with left:
            _show(figures.utility(metrics, phases), f"dp_bayes.{run_id}.utility")
            _show(figures.trace(metrics, figures.MEAN_TRACE, phases), f"dp_bayes.{run_id}.mean_sd.")
        with right:
            charts.show(figures.vi_elbo(metrics), key=f"dp_bayes.{run_id}.vi")
            _show(figures.trace(metrics, figures.SD_TRACE, phases), f"dp_bayes.{run_id}.log_sd_ratio.")
    if "sweep" in artifacts:
        st.subheader("Error vs ε (sweep)")
        mean, sd = figures.sweep_figures(artifacts["sweep"])
        left, right = st.columns(2)
        with left:
            charts.show(mean, key=f"dp_bayes.{run_id}.sweep.mean")
        with right:
            charts.show(sd, key=f"dp_bayes.{run_id}.sweep.sd")
        charts.table(figures.sweep_table(artifacts["sweep"]))
    elif not snapshot.run.active:
        st.caption("Run in **sweep** mode to chart the error against ε over several repeats.")
    if "scores" in artifacts:
        st.subheader("Scores against the reference posterior")
        charts.table(figures.scores_table(artifacts["scores"]))


render_mechanism_page("dp_bayes", draw, intro=INTRO)
