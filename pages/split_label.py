"""Split learning label protection: test AUC and the passive party's leak AUC per epoch, gradient-norm
histograms before/after protection, and the test AUC vs leak AUC trade-off, one point per setting."""

from __future__ import annotations

import streamlit as st

from privengine.figures import split_label as figures
from ui import charts
from ui.mechanism_page import render_mechanism_page
from ui.shell import through_app

NAME = "split_label"

BOUND_TEXT = """
**What protects the labels here, and what it does not promise.** There is no (ε, δ): this is not
differential privacy. Marvell chooses, batch by batch, Gaussian noise for the cut-layer gradients that keeps
**sumKL**, the symmetrised KL divergence between the gradient distributions of positives and of negatives,
under a threshold. By the Marvell paper's theorem, **any** scorer the passive party builds from one batch then has
a leak AUC of at most **1/2 + √sumKL/2 − sumKL/8** (0.82 at sumKL 0.64, 0.68 at 0.16; proof: the ROC curve lies
under FPR + TV, so AUC ≤ 1/2 + TV − TV²/2, and Pinsker on the smaller of the two KLs gives TV ≤ √sumKL/2). The
leak charts compare it, per epoch, with the measured leak AUCs: the dashed line is the bound at the epoch's largest
realised sumKL (it covers every batch), the dotted one the mean of the per-batch bounds (it covers the mean over
batches, the quantity the solid "mean" curves estimate; a batch's AUC is measured from its few positives, so a 95 %
quantile above the bound can be sampling noise). Caveats: the bound is computed in Marvell's Gaussian model (each class's gradients Gaussian with
isotropic covariance, statistics estimated from the batch), which real gradients do not follow. In particular, with
a linear top model (top hidden = 0) the unprotected cut gradients all lie on one line, the class with the larger
variance gets no noise across that line, and an attacker who scores |cos| with a known positive can exceed the bound.
The bound holds per batch, not for an attacker who combines an example's gradients across epochs; batches with a
single class get no Marvell noise. Isotropic noise gets a sumKL in the same model; max norm alignment has none.
"""


def draw(snapshot) -> None:
    run_id = snapshot.run.id
    if snapshot.metrics.empty:
        st.caption("Waiting for the first epoch.")
        return
    labels = figures.labels(snapshot)
    per_setting = figures.per_setting(snapshot)
    left, right = st.columns(2)
    with left:
        charts.show(figures.test_auc(per_setting, labels), key=f"{run_id}.test_auc")
    with right:
        points = snapshot.artifacts.get("tradeoff", {}).get("points", [])
        if points:
            charts.show(figures.tradeoff(points), key=f"{run_id}.tradeoff")
        else:
            st.caption("The trade-off scatter gets a point when a setting finishes.")

    key = ""
    if len(per_setting) > 1:
        key = st.selectbox("Setting shown below", list(per_setting), format_func=lambda k: labels.get(k, k),
                           key=f"{run_id}.setting")
    metrics = per_setting.get(key, snapshot.metrics)
    left, right = st.columns(2)
    with left:
        charts.show(figures.leak(metrics, "cut", title=figures.LAYERS["cut"]), key=f"{run_id}.{key}.leak_cut")
    with right:
        charts.show(figures.leak(metrics, "first", title=figures.LAYERS["first"]), key=f"{run_id}.{key}.leak_first")
    hist = figures.histogram_data(snapshot, key)
    if hist:
        charts.show(figures.histogram(hist), key=f"{run_id}.{key}.hist")
    with st.expander("The sumKL bound: what it means and its caveats", expanded=False):
        st.markdown(BOUND_TEXT)
    table = figures.settings_table(snapshot.run.summary or {})
    if table is not None:  # a column per setting, a row per measure: the values in view, not right of long headers
        charts.table(table.T.rename_axis("measure"), hide_index=False)


through_app()  # first: the app's shell when Streamlit ran this script directly
render_mechanism_page(NAME, draw)
