"""A run's state in a few words, its progress and its Stop button: the run panel's header draws them, and so does
the strip right under a Launch button (:func:`status_strip`): a Launch scrolls the page to the run's panel and
its charts, and the form is taller than a screen, so whoever scrolls back to the form sees the run there too.
"""

from __future__ import annotations

import time

import streamlit as st

from privengine.store import RunRecord

from . import services
from .run_label import heading

REFRESH_S = 1.0
STILL_AFTER_S = 2.0  # a progress line unchanged this long says for how long it has waited
_SEEN = "run_status.progress_seen"  # session state: run id -> ((fraction, text), when this session first saw it)

STATE_COLOURS = {"queued": "gray", "running": "blue", "finished": "green", "failed": "red", "stopped": "orange",
                 "interrupted": "orange"}


def state_text(run: RunRecord) -> str:
    """What the run is doing in words: which runs a queued run waits for, where and for how long it runs or ran."""
    if run.state == "queued":
        ahead = services.manager().ahead_of(run.id)
        if not ahead:
            return "waits for a free slot (device assigned when it starts)"
        more = f" and {len(ahead) - 1} more" if len(ahead) > 1 else ""
        return f"waits for run {ahead[0]}{more} to end"
    elapsed = "" if run.elapsed_s is None else f" · {run.elapsed_s:.1f} s"
    return f"on {run.device or 'an unrecorded device'}{elapsed}"


def progress_text(run: RunRecord, seen: dict, now: float) -> str | None:
    """The progress bar's text: what the run reports it is doing and, once that line (text and fraction) has not
    changed for :data:`STILL_AFTER_S`, for how long it has waited on it, so a step that blocks (reading a data set,
    one accountant evaluation) reads as working, not stalled. ``seen`` (run id -> ((fraction, text), first seen)) is
    this session's memory of the line, updated here; ``now``: the time, in seconds (``time.time()``)."""
    line = (run.progress, run.progress_text or "")
    if run.id not in seen or seen[run.id][0] != line:
        seen[run.id] = (line, now)
    waited = now - seen[run.id][1]
    if waited < STILL_AFTER_S:
        return run.progress_text or None
    return f"{run.progress_text or 'working'} · {waited:.0f} s on this step, still working"


def controls(run: RunRecord, *, key: str) -> None:
    """The progress bar and the Stop button of an active run (nothing once it has ended); ``key`` tells the
    buttons of several places apart."""
    progress_bar(run)
    stop_button(run, key=key)


def progress_bar(run: RunRecord) -> None:
    """The progress bar of an active run with what it is doing (:func:`progress_text`); nothing once it ended."""
    if run.active and run.progress is not None:
        st.progress(run.progress, text=progress_text(run, st.session_state.setdefault(_SEEN, {}), time.time()))


def stop_button(run: RunRecord, *, key: str) -> None:
    """The Stop button of an active run, or the note that a stop was asked for; nothing once it has ended."""
    if not run.active:
        return
    if run.stop_requested:
        st.caption("Stop requested; the run stops at its next check (within about a second).")
    elif st.button("Stop run", key=f"stop.{key}.{run.id}", icon=":material/stop:", type="secondary"):
        services.manager().stop(run.id)
        st.toast(f"Stop requested for run {run.id}")


def badge(run: RunRecord) -> str:
    """The run's state as a coloured Markdown badge."""
    return f":{STATE_COLOURS.get(run.state, 'gray')}-badge[{run.state}]"


def status_strip(run_id: str) -> None:
    """A compact, live view of run ``run_id``: state, what it is doing, progress and Stop; polls while active."""
    active = services.store().get_run(run_id).active

    @st.fragment(run_every=REFRESH_S if active else None)
    def _strip() -> None:
        run = services.store().get_run(run_id)
        with st.container(border=True, key=f"status-strip-{run_id}"):
            st.markdown(f"{badge(run)} {heading(run)} · {state_text(run)}")
            controls(run, key="strip")

    _strip()
