"""Runs side by side: every chart of several runs with each run's lines on it (the Runs page's comparison), and
the live version on a mechanism page, where the shown run's curves are overlaid on an earlier run of the same
mechanism and both update while either runs (``?compare=ID`` in the page's URL, so a talk can link to it).

The figures come from :mod:`privengine.figures` (the artifact overlays of the runs' mechanism, e.g. DP-Bayes'
posterior densities, then one chart per metric chart of the runs' pages), as comparison reports draw them.
"""

from __future__ import annotations

import streamlit as st

from privengine.figures import overlay_figures
from privengine.figures.compare import comparison_figures, single_values
from privengine.store import RunRecord

from . import charts, services

QUERY_KEY = "compare"
MAX_POINTS = 400  # per metric and run, as the run panel draws them
CHOICES = 30  # earlier runs offered


def draw_comparison(runs: list[RunRecord], *, key: str, columns: int = 2) -> None:
    """The values the runs report once (a table), then their overlaid charts, ``columns`` per row; ``key`` tells
    the charts of several comparisons on one page apart."""
    store = services.store()
    per_run = {r.id: store.metrics(r.id, max_points=MAX_POINTS) for r in runs}
    once = single_values(runs, per_run)
    if once is not None:
        st.markdown(f"**{once.title}**")
        charts.table(once.frame)
    figures = overlay_figures(runs, {r.id: store.artifacts(r.id) for r in runs}) + comparison_figures(runs, per_run)
    if not figures and once is None:
        st.caption("The runs reported no metrics yet.")
    cells = st.columns(columns)
    for i, fig in enumerate(figures):
        with cells[i % columns]:
            charts.show(fig, key=f"{key}.{i}.{fig.layout.title.text}")


def compare_picker(mechanism: str, run_id: str) -> str | None:
    """"Compare with an earlier run": a selectbox of the mechanism's other runs, newest first (the previous run at
    the top), kept in the URL as ``?compare=ID``; returns the chosen run's id, or None."""
    runs = [r for r in services.store().list_runs(mechanism=mechanism, limit=CHOICES + 1) if r.id != run_id]
    wanted = st.query_params.get(QUERY_KEY)
    if wanted and wanted not in {r.id for r in runs}:
        linked = _linked_run(wanted, mechanism, run_id)
        if linked is None:
            del st.query_params[QUERY_KEY]
            wanted = None
        else:
            runs.append(linked)  # older than the runs offered
    if not runs:
        return None
    ids = [r.id for r in runs]
    labels = {r.id: f"{r.title} · {r.state}" for r in runs}
    choice = st.selectbox("Compare with an earlier run", ids, index=ids.index(wanted) if wanted in ids else None,
                          format_func=labels.get, placeholder="none: this run alone", key=f"compare.{run_id}",
                          help="Overlay this run's curves on another run's, live while either runs.")
    if choice != wanted:
        if choice is None:
            st.query_params.pop(QUERY_KEY, None)
        else:
            st.query_params[QUERY_KEY] = choice
        st.rerun()  # the run panel polls while either run is active: it is set up again with the choice
    return choice


def _linked_run(wanted: str, mechanism: str, run_id: str) -> RunRecord | None:
    """The run ``?compare=`` names, or None with the reason shown (not stored, another mechanism), or the shown run
    itself."""
    other = services.stored_run_of(mechanism, wanted, role=" to compare with")
    return None if other is None or other.id == run_id else other
