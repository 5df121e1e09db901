"""The live view of one run: state, device, elapsed time, stop button (report download once it has ended),
error, privacy claims, charts.

Everything is drawn inside a fragment that re-runs every second while the run is
queued or running and stops polling once it has ended (one full rerun then
redraws the page without the timer).
"""

from __future__ import annotations

import math
import time
from typing import Callable

import pandas as pd
import streamlit as st

from privengine import registry
from privengine.claims import PrivacyClaim, claims_of
from privengine.errors import PrivengineError
from privengine.figures import changed_from_preset, preset_of, published_value
from privengine.figures.text import claim_label, summary_values
from privengine.presets import Published, source_detail
from privengine.registry import HEADLINE_EPSILON
from privengine.store import RunSnapshot

from . import services
from .charts import default_draw, published_reference, table
from .model_button import model_button
from .report_button import report_button
from .run_label import escape_markdown, heading, label_editor, notes_caption
from .run_status import REFRESH_S, badge, progress_bar, state_text, stop_button
from .side_by_side import draw_comparison

MAX_POINTS = 400  # per metric and refresh: keeps each redraw cheap on long runs

Draw = Callable[[RunSnapshot], None]

def live_run(run_id: str, draw: Draw | None = None, *, compare_with: str | None = None,
             columns: int = 2) -> None:
    """Draw run ``run_id`` and keep it updating while it is active; ``compare_with``: another run of its mechanism
    whose curves its own are overlaid on (:mod:`.side_by_side`), above its own charts, updating while either runs;
    ``columns``: charts per row of that overlay."""
    store = services.store()
    active = store.get_run(run_id).active or (compare_with is not None and store.get_run(compare_with).active)

    @st.fragment(run_every=REFRESH_S if active else None)
    def _live() -> None:
        snapshot = services.store().snapshot(run_id, max_points=MAX_POINTS)
        _header(snapshot)
        if compare_with is not None:
            other = services.store().get_run(compare_with)
            with st.container(border=True):
                st.markdown(f":material/compare_arrows: **Side by side**: this run against run {other.title} "
                            f"({other.state})")
                draw_comparison([snapshot.run, other], key=f"side.{run_id}.{compare_with}", columns=columns)
        with published_reference(snapshot.run):  # the preset's published figure on the chart of its metric
            (draw or default_draw)(snapshot)
        _log(run_id)
        if not snapshot.run.active:
            summary_table(snapshot.run.summary)
        if active and not _any_active(run_id, compare_with):
            st.rerun()  # the run ended: redraw the whole page once, without the timer

    _live()


def _any_active(*run_ids: str | None) -> bool:
    return any(services.store().get_run(i).active for i in run_ids if i is not None)


def _header(snapshot: RunSnapshot) -> None:
    run = snapshot.run
    st.markdown(f"{badge(run)} {heading(run)} · {state_text(run)} · from {run.source}")
    notes_caption(run)
    progress_bar(run)
    with st.container(horizontal=True):  # the buttons side by side, each as wide as its label: one row
        stop_button(run, key="panel")
        if not run.active:
            report_button([run.id], key=f"report.{run.id}")
            model_button(run, key=f"model.{run.id}")
        label_editor(run)
    if run.state == "failed":
        st.error(f"The run failed: {run.error}", icon=":material/error:")
        with st.expander("Details (traceback)"):
            st.code(run.traceback or "no traceback recorded", language="text")
    elif run.state == "interrupted":
        st.warning(f"Interrupted: {run.error}", icon=":material/warning:")
    elif run.state == "stopped" and run.summary and run.summary.get("stopped_during"):
        st.warning(f"Stopped during {run.summary['stopped_during']}; the results below are partial.",
                   icon=":material/stop_circle:")
    published_beside_own(snapshot)
    claims = claims_of(run.summary)
    if not claims and run.active and _states_a_claim(run.mechanism):
        _claim_placeholder()
    else:
        claims_in_brief(claims)


def published_beside_own(snapshot: RunSnapshot) -> None:
    """For a run started from a preset with a published figure: that figure beside the run's own value."""
    preset = preset_of(snapshot.run)
    if preset is None or preset.published is None:
        return
    published = preset.published
    own = published_value(snapshot)
    at = "" if published.epsilon is None else f" at ε = {published.epsilon:g}"
    if own is None:
        here = "not reported yet"
    else:
        here = f"**{published.value_text(own)}**" + (" so far" if snapshot.run.active else "")
    changed = changed_from_preset(snapshot.run, preset)
    with st.container(border=True):
        st.markdown(f":material/menu_book: Preset **{preset.name}** · published {published.metric} "
                    f"**{published.value_text()}**{at} ({published.attribution()}) · this run: {here}")
        note = (f" This run changed {', '.join(changed)} from the preset, so it is not the published setting."
                if changed else "")
        st.caption(f"Source: {published.source}. The dashed line on the {published.metric} chart marks the "
                   f"published value.{note}")
        why = two_epsilons_text(published, claims_of(snapshot.run.summary))
        if why:
            st.markdown(f":material/help: {why}")


def two_epsilons_text(published: Published, claims: list[PrivacyClaim]) -> str | None:
    """One line on why the published ε and this run's headline ε differ (None when they agree within 1 %, or
    either is missing): the paper's figure is what its source says it is; the headline is what this tool
    stands behind."""
    headline = next((c for c in claims if c.headline), None)
    if published.epsilon is None or headline is None:
        return None
    if math.isclose(headline.epsilon, published.epsilon, rel_tol=0.01):
        return None
    detail = source_detail(published.source)
    paper = f"the paper's own figure ({detail})" if detail else "the paper's own figure"
    return (f"Why two ε: the published ε = {published.epsilon:g} is {paper}; this run's headline "
            f"ε = {headline.epsilon:.3g} is its {claim_label(headline.label)} claim, the one this tool stands behind.")


def claims_in_brief(claims: list[PrivacyClaim]) -> None:
    """The headline claim in one line, then every claim in full (:func:`privacy_claim`) in a closed expander: the
    caveats run to many lines and would push the charts below the fold."""
    if not claims:
        return
    claims = sorted(claims, key=lambda c: not c.headline)  # the headline first
    with st.container(border=True):
        _claim_line(claims[0])
    more = len(claims) - 1
    others = f", and {more} more claim{'s' if more > 1 else ''}" if more else ""
    with st.expander(f"What the ε rests on: accountant, neighbouring datasets, caveats{others}"):
        for claim in claims:
            privacy_claim(claim)


def _states_a_claim(mechanism: str) -> bool:
    """Whether the mechanism's runs end with an (ε, δ) headline claim (its frontier's privacy axis is that ε)."""
    try:
        frontier = registry.get(mechanism).frontier
    except PrivengineError:
        return False
    return frontier is not None and frontier.privacy.name == HEADLINE_EPSILON


def _claim_placeholder() -> None:
    """While the run is active: the claim's box and expander, saying when they fill in, so the charts below do not
    jump down when the run ends (issue 29, item 8)."""
    with st.container(border=True):
        st.markdown(":material/shield: The run's privacy claim appears here when it ends.")
    with st.expander("What the ε rests on: accountant, neighbouring datasets, caveats"):
        st.caption("Stated with the claim when the run ends.")


def _claim_line(claim: PrivacyClaim) -> None:
    label = claim_label(claim.label)
    if claim.headline:
        st.markdown(f":material/shield: **{claim.statement()}** — {label} · *headline*")
    else:
        st.markdown(f":material/info: {claim.statement()} — {label}")


def privacy_claim(claim: PrivacyClaim) -> None:
    """An epsilon with everything it rests on right under it; the run's headline claim says so."""
    with st.container(border=True):
        _claim_line(claim)
        details = [f"Accountant: {claim.accountant}."]
        if claim.order is not None:
            details.append(f"Optimal order: {claim.order:g}.")
        details.append(f"Neighbouring datasets: {claim.neighbouring}.")
        details.extend(claim.caveats)
        st.caption(escape_markdown(" ".join(details)))


def _log(run_id: str) -> None:
    """The run's log lines (stage changes, notes from the mechanism), newest last."""
    lines = services.store().logs(run_id, limit=50)
    if lines:
        with st.expander(f"Log ({len(lines)} line{'s' if len(lines) > 1 else ''})"):
            st.code("\n".join(f"{time.strftime('%H:%M:%S', time.localtime(ts))}  {text}" for ts, text in lines),
                    language="text")


def summary_table(summary: dict | None) -> None:
    """The run summary's plain values (privacy claims are drawn by the header), in an expander."""
    rows = summary_values(summary)
    if rows:
        with st.expander("Run summary", expanded=False):
            table(pd.DataFrame({"value": rows}), hide_index=False)
