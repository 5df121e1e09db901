"""The live view of one run: state, device, elapsed time, stop button, error, privacy claims, charts.

Everything is drawn inside a fragment that re-runs every second while the run is
queued or running and stops polling once it has ended (one full rerun then
redraws the page without the timer).
"""

from __future__ import annotations

from typing import Callable

import streamlit as st

from privengine.claims import claims_of
from privengine.store import RunSnapshot

from . import services
from .charts import default_draw

REFRESH_S = 1.0
MAX_POINTS = 400  # per metric and refresh: keeps each redraw cheap on long runs

Draw = Callable[[RunSnapshot], None]

_STATE_ICONS = {"queued": "⏳", "running": "🏃", "finished": "✅", "failed": "❌", "stopped": "⏹️",
                "interrupted": "⚠️"}


def live_run(run_id: str, draw: Draw | None = None) -> None:
    """Draw run ``run_id`` and keep it updating while it is active."""
    active = services.store().get_run(run_id).active

    @st.fragment(run_every=REFRESH_S if active else None)
    def _live() -> None:
        snapshot = services.store().snapshot(run_id, max_points=MAX_POINTS)
        _header(snapshot)
        (draw or default_draw)(snapshot)
        if active and not snapshot.run.active:
            st.rerun()  # the run ended: redraw the whole page once, without the timer

    _live()


def _header(snapshot: RunSnapshot) -> None:
    run = snapshot.run
    c1, c2, c3, c4 = st.columns([1.2, 2, 1, 1])
    c1.metric("State", f"{_STATE_ICONS.get(run.state, '')} {run.state}")
    c2.metric("Device", run.device or "not started")
    c3.metric("Elapsed", f"{run.elapsed_s:.1f} s" if run.elapsed_s is not None else "-")
    c4.metric("Run", run.id)
    if run.active:
        if run.progress is not None:
            st.progress(run.progress, text=run.progress_text or None)
        if run.stop_requested:
            st.caption("Stop requested; the run stops at its next check (within about a second).")
        elif st.button("Stop run", key=f"stop.{run.id}", icon=":material/stop:", type="secondary"):
            services.manager().stop(run.id)
            st.toast(f"Stop requested for run {run.id}")
    if run.state == "failed":
        st.error(f"The run failed: {run.error}", icon=":material/error:")
        with st.expander("Details (traceback)"):
            st.code(run.traceback or "no traceback recorded", language="text")
    elif run.state == "interrupted":
        st.warning(f"Interrupted: {run.error}", icon=":material/warning:")
    for claim in claims_of(run.summary):
        st.info(claim.text(), icon=":material/shield:")
    if not run.active:
        summary_table(run.summary)


def summary_table(summary: dict | None) -> None:
    """The run summary's plain values (privacy claims are drawn by the header)."""
    rows = {k: v for k, v in (summary or {}).items() if k != "privacy" and not isinstance(v, (dict, list))}
    if rows:
        st.dataframe({"value": {k: str(v) for k, v in rows.items()}}, width="stretch")
