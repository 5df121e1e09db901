"""The Explore page's parallel coordinates of a sweep's runs, and the box drawn on them that filters the points table
(the chart and the rule are :mod:`privengine.figures.parcoords`).

Streamlit sends an Altair chart's interval selection back on every change (``on_select="rerun"``), which it does not
do for plotly's parcoords brushes: the box is read here and the page shows only the runs inside it.
"""

from __future__ import annotations

import streamlit as st

from privengine.explore import runner
from privengine.figures.parcoords import (BRUSH, UTILITY, parallel_coordinates, positions, runs_frame,
                                          runs_in_box, sweep_axes)
from privengine.figures.sweep import nothing_drawn

from . import services

MIN_RUNS = 2  # finished runs a parallel-coordinates view needs (one line has nothing to compare)


def brushed_runs(res: runner.SweepResult) -> list[str] | None:
    """Draw ``res``' finished runs in parallel coordinates; return the runs inside the box drawn on it, or None when
    no box is drawn (or the view is not: fewer than :data:`MIN_RUNS` finished runs), saying how many it keeps."""
    runs = runs_frame(services.store(), res)
    if len(runs) < MIN_RUNS:
        st.caption("Parallel coordinates of the runs: " + (
            nothing_drawn([res]) if runs.empty else f"{len(runs)} finished run so far, they need {MIN_RUNS}."))
        return None
    axes = sweep_axes(res, runs)
    title = next(a.title for a in axes if a.column == UTILITY)
    event = st.altair_chart(parallel_coordinates(runs, axes, colour_title=title), on_select="rerun",
                            key=f"explore.parcoords.{res.sweep_id}", width="stretch")
    box = event.selection.get(BRUSH) or None
    if box is None:
        st.caption(f"All {len(runs)} finished runs, one line each, coloured by {title}. Drag a box over a range of "
                   "an axis (or of neighbouring axes) to keep in the table only the runs whose line passes through "
                   "it; click outside the box to clear it.")
        return None
    kept = runs_in_box(positions(runs, axes), box)
    st.caption(f"**{len(kept)} of {len(runs)} runs** pass through the box on {', '.join(box['axis'])}: the table "
               "and the run links below show only them. Click the chart outside the box to show all runs again.")
    return kept
