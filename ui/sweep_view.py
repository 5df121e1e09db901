"""Views of sweeps for the Explore page: the frontier chart, the points table, the live panel, the overlay
(the figures and the table are built by :mod:`privengine.figures.sweep`, which reports share).

Everything is read from the store through :func:`privengine.explore.runner.result`; the live panel
re-reads it once a second inside a fragment while the sweep has queued or running runs.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any, Callable

import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from privengine import registry
from privengine.claims import PrivacyClaim
from privengine.errors import ConfigError
from privengine.explore import runner
from privengine.explore.export import points_csv
from privengine.figures.sweep import (axis_title, best_run_text, drawn, frontier_figure, headline_accountants,
                                      missing_utility, nothing_drawn, pareto_trace, point_seeds, points_frame,
                                      points_trace, short_label, sweep_label, with_axes)
from privengine.figures.text import settings_text
from privengine.ledger import BudgetExceeded

from . import charts, services
from .budget_notice import show_refusal
from .links import link_to_mechanism
from .report_button import report_button
from .run_panel import privacy_claim
from .sweep_parcoords import brushed_runs

REFRESH_S = 1.0
_STATE_COLOURS = {"running": "blue", "finished": "green", "stopped": "orange", "incomplete": "orange"}
_ENDED = ("finished", "failed", "stopped", "interrupted")


def live_sweep(sweep_id: str, *, utility: str | None, active: bool, stop_executor: Any,
               resume_executor: Callable[[], Any]) -> None:
    """Draw sweep ``sweep_id`` and keep it updating while it has queued or running runs.

    ``stop_executor``: the executor that runs it in this process, if known (else the store's stop flags
    reach the runs); ``resume_executor()`` gives the executor to resume it with.
    """

    @st.fragment(run_every=REFRESH_S if active else None)
    def _live() -> None:
        store = services.store()
        res = runner.result(store, sweep_id, utility=utility)
        _header(res, stop_executor, resume_executor)
        _utility_note(res, chosen=utility is not None)
        selected = _frontier_chart(res)
        kept = brushed_runs(res)
        frame = points_frame(res)
        if kept is not None:  # only the points of the runs inside the box; a new box starts a new row selection
            frame = frame[frame["point"].isin({p.index for p in res.points if set(p.runs) & set(kept)})]
        table = st.dataframe(frame, hide_index=True, width="stretch", on_select="rerun", selection_mode="multi-row",
                             key=f"explore.points.{sweep_id}.{hash(tuple(kept)) if kept is not None else 'all'}",
                             placeholder=charts.MISSING)
        st.caption("Select points on the chart or rows of the table to open their runs. "
                   "✓ = on the Pareto frontier: no other point is better on both axes.")
        selected |= {int(frame["point"].iloc[i]) for i in table.selection.rows}
        if kept is not None:
            selected = (selected or set(frame["point"])) & set(frame["point"])
        _run_links(res, sorted(selected), only=None if kept is None else set(kept))
        _claims(res)
        _exports(res)
        if active and res.state != "running":
            st.rerun()  # the sweep ended: redraw the whole page once, without the timer

    _live()


def _utility_note(res: runner.SweepResult, *, chosen: bool) -> None:
    """Which utility the chart plots when neither the user nor the sweep chose one, or, when the finished runs do not
    report the one shown, that they do not and which ones they do."""
    why = missing_utility(res)
    if why:
        offer = f" Choose {'it' if len(res.reported) == 1 else 'one'} under Utility metric." if res.reported else ""
        st.warning(why + offer, icon=":material/warning:")
    elif not (chosen or res.spec.utility) and res.reported:
        st.caption(f"Utility: **{short_label(res.utility_axis)}**, the first of "
                   f"{registry.get(res.mechanism).title}'s utility metrics that the finished runs report.")


def _claims(res: runner.SweepResult) -> None:
    """The sweep's composed claim (or why there is none) and, for random repetition, the best-only claim."""
    st.subheader("Privacy of the whole sweep")
    if res.utility_axis is not None and not res.utility_axis.covered:
        st.warning(f"{res.utility_axis.label} is computed from the private data: choosing a point by it is not "
                   "covered by any claim here.", icon=":material/warning:")
    if res.claim is not None:
        privacy_claim(res.claim)
        if res.state == "running":
            st.caption("So far: the claim grows as more runs state theirs.")
    else:
        st.info("No run of this sweep states an (ε, δ) claim, so there is no composed one; each run's own "
                "guarantee is on its page.", icon=":material/info:")
    if isinstance(res.selection, PrivacyClaim):
        privacy_claim(res.selection)
    elif res.selection:
        st.caption(f"Publishing only the best run (random repetition): no claim, because {res.selection}.")
    if res.best is not None:
        st.caption(best_run_text(res.best, res.selection))


def _header(res: runner.SweepResult, stop_executor: Any, resume_executor: Callable[[], Any]) -> None:
    record = services.store().get_sweep(res.sweep_id)
    st.badge(res.state, color=_STATE_COLOURS.get(res.state, "gray"))
    created = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_at))
    shape = (f"{res.runs_total} run(s) drawn at random over {len(res.points)} point(s) (random repetition)"
             if res.spec.repeat else f"{len(res.points)} point(s) × {res.spec.seeds} seed(s)")
    resumed = f" · {res.attempts} attempts stored (resumed runs)" if res.attempts > res.runs_total else ""
    st.caption(f"Sweep **{res.sweep_id}** of **{registry.get(res.mechanism).title}** · {shape} · executor "
               f"**{res.executor}** · created {created} from {record.source}{resumed}")
    ended = sum(n for s, n in res.runs_by_state.items() if s in _ENDED)
    counts = " · ".join(f"{n} {s}" for s, n in sorted(res.runs_by_state.items()))
    st.progress(ended / res.runs_total if res.runs_total else 0.0,
                text=f"{ended} of {res.runs_total} runs ended · {counts}")
    failed = [e for p in res.points for e in p.errors]
    if failed:
        st.warning(f"{len(failed)} run(s) failed (their errors are in the table's last column), e.g. {failed[0]}",
                   icon=":material/error:")
    if res.state == "running":
        if record.stop_requested:
            st.caption("Stop requested: queued runs are cancelled and running ones stop within a second or two.")
        elif st.button("Stop sweep", key=f"explore.stop.{res.sweep_id}", icon=":material/stop:"):
            n = runner.stop(services.store(), stop_executor, res.sweep_id)
            st.toast(f"Stop requested for {n} active run(s)")
    elif res.state in ("stopped", "incomplete"):
        todo = len(runner.missing(services.store(), res.sweep_id))
        if st.button(f"Resume: run the {todo} missing run(s)", key=f"explore.resume.{res.sweep_id}",
                     icon=":material/play_arrow:", disabled=not todo,
                     help="Runs again only what did not finish (failed, stopped or lost runs), on the executor "
                          "chosen in the form."):
            try:
                runner.resume(services.store(), resume_executor(), res.sweep_id, source="dashboard")
            except BudgetExceeded as exc:
                show_refusal(exc)
            except (ConfigError, ImportError, ConnectionError) as exc:
                st.error(f"Could not resume: {exc}", icon=":material/error:")
            else:
                st.rerun()


def _frontier_chart(res: runner.SweepResult) -> set[int]:
    """Draw the frontier; return the indices of the points selected on it."""
    store = services.store()
    fig = frontier_figure(res, point_seeds(store, res), accountants=headline_accountants(store, res))
    event = charts.show(fig, key=f"explore.frontier.{res.sweep_id}", selectable=True, on_select="rerun",
                        selection_mode=("points", "box", "lasso"))
    return {pt["customdata"][0] for pt in event.selection.points if pt.get("customdata")}


def _run_links(res: runner.SweepResult, indices: list[int], *, only: set[str] | None = None) -> None:
    """Links to the runs of the points ``indices`` (the first 8), only those in ``only`` when given."""
    if not indices:
        return
    runs = {r.id: r for r in services.store().sweep_runs(res.sweep_id)}
    by_index = {p.index: p for p in res.points}
    for index in indices[:8]:
        point = by_index[index]
        with st.container(border=True):
            st.markdown(f"**Point {index}**: {settings_text(res.mechanism, point.settings)}")
            for run_id in point.runs if only is None else [r for r in point.runs if r in only]:
                run = runs[run_id]
                link_to_mechanism(res.mechanism, f"Run {run_id} · seed {run.config.get('seed', '—')} · {run.state}",
                                  run_id=run_id)
    if len(indices) > 8:
        st.caption(f"Links are shown for the first 8 of the {len(indices)} selected points.")


def _exports(res: runner.SweepResult) -> None:
    c1, c2, c3 = st.columns(3)
    # callables: the export is built when the button is clicked, not on every refresh
    c1.download_button("Points (CSV)", functools.partial(points_csv, res), file_name=f"{res.sweep_id}.csv",
                       mime="text/csv", key=f"explore.csv.{res.sweep_id}", icon=":material/download:")
    c2.download_button("Everything (JSON)", functools.partial(_json_text, res),
                       file_name=f"{res.sweep_id}.json", mime="application/json",
                       key=f"explore.json.{res.sweep_id}", icon=":material/download:")
    with c3:
        report_button([res.sweep_id], key=f"explore.report.{res.sweep_id}")


def _json_text(res: runner.SweepResult) -> str:
    return json.dumps(res.to_dict(), indent=2)


def overlay(results: list[runner.SweepResult], *, key: str) -> None:
    """Several sweeps on one frontier chart, one colour each; sweeps whose privacy or utility measure is not
    comparable with the first one's are left out with a warning instead of being mixed on the same axes."""
    first = results[0]
    same = [r for r in results if r.privacy_axis.comparable(first.privacy_axis) and (
        r.utility_axis is None if first.utility_axis is None else
        r.utility_axis is not None and r.utility_axis.comparable(first.utility_axis))]
    for r in results:
        if r not in same:
            st.warning(f"Not drawn: **{sweep_label(r.mechanism, r.sweep_id)}** plots {axis_title(r.privacy_axis)} "
                       f"against {axis_title(r.utility_axis)}, while "
                       f"**{sweep_label(first.mechanism, first.sweep_id)}** plots {axis_title(first.privacy_axis)} "
                       f"against {axis_title(first.utility_axis)}: their "
                       "numbers are not comparable on one chart.", icon=":material/warning:")
    fig = go.Figure()
    palette = px.colors.qualitative.Plotly
    for i, r in enumerate(same):
        name, colour = sweep_label(r.mechanism, r.sweep_id), palette[i % len(palette)]
        fig.add_trace(points_trace(r, drawn(r), point_seeds(services.store(), r), name=name, legendgroup=r.sweep_id,
                                    marker=dict(size=10, color=colour)))
        if len(r.frontier) > 1:
            fig.add_trace(pareto_trace(r, f"{name} frontier", colour, legendgroup=r.sweep_id, showlegend=False))
    xs = [p.privacy for r in same for p in drawn(r)]
    accountants = list(dict.fromkeys(a for r in same for a in headline_accountants(services.store(), r)))
    fig = with_axes(fig, [r.privacy_axis for r in same], [r.utility_axis for r in same], xs,
                    "Frontiers of the selected sweeps", empty=nothing_drawn(same), accountants=accountants)
    charts.show(fig, key=key)
