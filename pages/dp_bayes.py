"""DP Bayesian inference: the method comparison (error and coverage vs epsilon), released intervals,
posterior densities, SGLD trace, utility over steps, error vs epsilon."""

from __future__ import annotations

import streamlit as st

from privengine.figures import dp_bayes as figures
from ui import charts
from ui.audit_panel import audit_section
from ui.mechanism_page import render_mechanism_page
from ui.shell import through_app

INTRO = (
    "Releases a **mean-field Gaussian approximation** of a Bayesian regression posterior with the exponential "
    "mechanism. Each record's log-likelihood is sanitized to τ·tanh(l/τ), so the utility U(z) (the ELBO with "
    "the sanitized likelihood, entropy weighted by w) changes by at most Δ_U = 2τ when one record is replaced "
    "(τ for add/remove). One exact draw of z = (mean, log sd) from f(z) ∝ exp(ε U / (2Δ_U)) is ε-DP; here it "
    "is drawn by preconditioned SGLD, an approximate sampler, so the guarantee is approximate. Expect the "
    "private mean about √(4τ/ε) posterior sds off, and overconfident private sds unless w is raised. Two other "
    "methods (the **method** knob): **SSP** releases the rescaled sufficient statistics X^T X, X^T y, y^T y with "
    "Gaussian noise ((ε, δ)-DP, analytic Gaussian mechanism) and infers the posterior given them, modelling the "
    "noise; **DPVI** runs DP-SGD on the ELBO with Opacus ((ε, δ) from the RDP accountant). Load the "
    "**method-comparison** preset to chart error and coverage against ε for all of them at once.")


def _show(fig, key: str) -> None:
    if fig is not None:
        charts.show(fig, key=key)


def _comparison(snapshot) -> None:
    run_id, artifacts = snapshot.run.id, snapshot.artifacts
    st.subheader("Which private posterior to trust: error and coverage against ε, per method")
    err, cov = figures.comparison_figures(artifacts["comparison"], delta=float(snapshot.run.config.get("delta", 1e-5)))
    left, right = st.columns(2)
    with left:
        charts.show(err, key=f"dp_bayes.{run_id}.comparison.error")
    with right:
        charts.show(cov, key=f"dp_bayes.{run_id}.comparison.coverage")
    st.caption("Each point: median over the repeats (fresh noise; fresh data sets for SSP and DPVI, data set 0 for "
               "the exponential mechanism, whose chains share it). A trustworthy private posterior sits near the "
               "0.9 line on the right; the left chart says how much the release moved from the truth.")
    charts.table(figures.comparison_table(artifacts["comparison"]))


def draw(snapshot) -> None:
    run_id, metrics, artifacts = snapshot.run.id, snapshot.metrics, snapshot.artifacts
    phases = artifacts.get("phases")
    if "comparison" in artifacts:
        _comparison(snapshot)
    if "intervals" in artifacts:
        st.subheader("Released posterior: mean and 90 % interval per parameter")
        charts.show(figures.intervals_figure(artifacts["intervals"]), key=f"dp_bayes.{run_id}.intervals")
    if (held_out := figures.held_out_text(snapshot.run.summary)) is not None:
        st.markdown(held_out)
    if (features := figures.features_table(snapshot.run.summary)) is not None:
        st.caption("On your data set each coefficient multiplies one column (scaled by its public bounds; a "
                   "category is 1 for its rows, 0 otherwise):")
        charts.table(features)
    if "densities" in artifacts:
        st.subheader("Posterior density per parameter")
        cols = st.columns(2)
        for i, (name, fig) in enumerate(zip(artifacts["densities"], figures.densities(artifacts["densities"]))):
            with cols[i % 2]:
                charts.show(fig, key=f"dp_bayes.{run_id}.density.{name}")
    elif metrics.empty and "intervals" not in artifacts and "comparison" not in artifacts:
        st.caption("Computing the reference posterior and the release…")
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
    elif not snapshot.run.active and "comparison" not in artifacts:
        st.caption("Run in **sweep** mode to chart the error against ε over several repeats, or load the "
                   "**method-comparison** preset to compare every method.")
    if "scores" in artifacts:
        st.subheader("Scores against the reference posterior")
        charts.table(figures.scores_table(artifacts["scores"]))


through_app()  # first: the app's shell when Streamlit ran this script directly
render_mechanism_page("dp_bayes", draw, intro=INTRO)
audit_section("dp_bayes")
