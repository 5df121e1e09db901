"""PATE page: teachers, votes, privacy cost against queries answered, student."""

import streamlit as st

from privengine.figures import pate as figures
from ui import charts
from ui.audit_panel import audit_section
from ui.mechanism_page import render_mechanism_page
from ui.membership_panel import membership_section
from ui.shell import through_app


def draw(snapshot) -> None:
    run_id = snapshot.run.id
    with st.container(horizontal=True, gap="medium"):  # each tile as wide as its text, wrapping when narrow
        for label, value in figures.results(snapshot).items():
            st.metric(label, figures.percent(value), width="content")

    left, right = st.columns(2)
    with left:
        charts.show(figures.teacher_loss(snapshot), key=f"{run_id}.teacher_loss")
        charts.show(figures.epsilon(snapshot), key=f"{run_id}.eps")
    with right:
        charts.show(figures.teacher_accuracy(snapshot), key=f"{run_id}.teacher_hist")
        charts.show(figures.student(snapshot), key=f"{run_id}.student")
    charts.show(figures.vote_margins(snapshot), key=f"{run_id}.margins")


through_app()  # first: the app's shell when Streamlit ran this script directly
render_mechanism_page("pate", draw)
audit_section("pate")
membership_section("pate")
