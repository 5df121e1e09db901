"""The layout every mechanism page shares: description, config form, launch, live run view.

The page keeps only the run id, in ``st.session_state`` and in the URL
(``?run=ID``), so a reload, a second tab or a shared link reattaches to the run.
``?config=<JSON>`` pre-fills the form; ``?preset=NAME`` pre-fills it with a named preset, ready to launch,
and a run launched from it records the preset (:mod:`ui.launch`). ``&launch=1`` launches it on arrival (once), and
``?present=1`` is presentation mode (no intro, the form folded, the charts full width and sized for a room:
:mod:`ui.presentation`), so a talk is a list of
links such as ``/pate?preset=quick-demo&launch=1&present=1``; ``?compare=ID`` overlays the shown run's curves on
run ID's (:mod:`ui.side_by_side`).
"""

from __future__ import annotations

import streamlit as st

from privengine import registry
from privengine.audit.membership_job import AUDIT_OF_MECHANISM
from privengine.errors import ConfigError, RunNotFoundError
from privengine.figures import preset_of
from privengine.presets import Preset

from . import presentation, services
from .form import config_form, error_text
from .launch import launch, preset_config
from .ledger_panel import ledger_line
from .run_panel import Draw, live_run
from .run_status import status_strip
from .scroll import scroll_into_view
from .side_by_side import compare_picker


JUST_LAUNCHED = "mechanism_page.just_launched"  # the run launched by the last click, for one scroll to its charts


def render_mechanism_page(name: str, draw: Draw | None = None, *, intro: str | None = None) -> None:
    """Draw the page of mechanism ``name``; ``draw(snapshot)`` draws its live charts. A page script calls
    :func:`ui.shell.through_app` first; the generic page (:func:`ui.links.mechanism_page`) asks for the scroll."""
    mech = registry.get(name)
    st.title(mech.title)
    _refuse_unknown_linked_audits(mech)
    presenting = presentation.presenting()
    if not presenting:
        st.markdown(intro or mech.description)
        with st.expander("What it protects, and against whom"):
            st.markdown(mech.protects)

    run_id = _current_run(name)
    just_launched = run_id is not None and st.session_state.pop(JUST_LAUNCHED, None) == run_id
    if presenting:  # the charts take the page; the form folds away above them
        st.html(presentation.STYLE)
        folded = st.expander("Configure and launch", expanded=run_id is None)
        charts_area = st.container()
    else:
        st.html(NARROW_STYLE)
        folded, charts_area = st.columns([1, 2.2], gap="large")
    with folded:
        st.subheader("Configure")
        link_errors: list[str] = []  # what the URL asked for and the page refused
        preset = _linked_preset(mech, link_errors)
        origin = preset or _form_seed_preset(run_id)  # the preset the form starts from, if any
        _preset_picker(mech, origin)
        initial = _initial_config(mech, run_id, preset, link_errors)
        _form_follows_url(name)
        config, errors = config_form(mech.config_cls, key=_form_key(name), initial=initial)
        clicked = st.button("Launch run", type="primary", disabled=config is None, key=f"launch.{name}",
                            icon=":material/play_arrow:", width="stretch")
        add_launch_cost = ledger_line(name, config)  # filled in last: planning a launch may take seconds
        if errors:
            st.caption(f"Fix {len(errors)} field{'s' if len(errors) > 1 else ''} to launch.")
        if _launch_requested_by_link(errors, link_errors) or clicked:
            launched = None if config is None else launch(name, config, preset=None if origin is None else origin.name)
            if launched is not None:
                _select_run(name, launched)
                st.session_state[JUST_LAUNCHED] = launched
                st.rerun()
        if run_id is not None and not presenting:  # under Launch, for whoever scrolls back to the form
            status_strip(run_id)
        _recent_runs_picker(name, run_id)
        compare_with = None if run_id is None else compare_picker(name, run_id)
    with charts_area:
        if run_id is None:
            st.info("Set the knobs and press **Launch run**; the charts appear here as the run reports.",
                    icon=":material/insights:")
        else:
            with st.container(key=f"{RUN_PANEL}-{run_id}"):
                live_run(run_id, draw, compare_with=compare_with, columns=2 if presenting else 1)
            if just_launched and not presenting:
                _bring_run_panel_into_view(run_id)
    add_launch_cost()


RUN_PANEL = "run-panel"  # the key (CSS class st-key-run-panel-ID) of the container of a run's live view
# Beside the form, under 1 200 px (1024x768 with the sidebar open) the run panel is about 360 px wide: its charts,
# two a row, were 175 px wide, their titles cut at the edge. There each row of the panel stacks, a chart a row.
NARROW_STYLE = f"""<style>
@media (max-width: 1199px) {{
  [class*="st-key-{RUN_PANEL}-"] [data-testid="stColumn"] {{ min-width: 100% !important; }}
}}
</style>"""


def _bring_run_panel_into_view(run_id: str) -> None:
    """Right after a Launch (button or link) in normal mode: scroll the run's live view (state, progress, Stop, then
    its charts) to the top of the screen. The form is taller than a screen, so the Launch button sits 1 600-2 400 px
    down the page while the charts, beside the form's top, would stay above the screen for the whole run.
    (Presentation mode needs no scroll: its form folds away above the charts.)"""
    scroll_into_view(f".st-key-{RUN_PANEL}-{run_id}", block="start")


def _refuse_unknown_linked_audits(mech: registry.Mechanism) -> None:
    """Say so under the title when ``?attack=ID`` or ``?audit=ID`` names no stored membership attack or audit of
    this mechanism (the sections below would otherwise drop the id without a word): what the link asked for, and
    why it is not shown. ``?attack=`` must also attack the run the link shows (``?run=``)."""
    attack = AUDIT_OF_MECHANISM.get(mech.name)
    kinds = {"attack": ("membership attack", {attack} - {None}),
             "audit": ("audit", {a.name for a in registry.audits_for(mech.name)} - {attack})}
    for param, (what, allowed) in kinds.items():
        wanted = st.query_params.get(param)
        if not wanted:
            continue
        try:
            run = services.store().get_run(wanted)
        except RunNotFoundError:
            reason = f"no {what} with that id is in the store (deleted, or a mistyped link)"
        else:
            reason = (None if run.mechanism in allowed
                      else f"run {wanted} is a {run.mechanism} run, not a {what} of {mech.name} runs")
            attacked, shown = run.config.get("run"), st.query_params.get("run")
            if reason is None and param == "attack" and shown and attacked != shown:
                reason = f"it attacks run {attacked}, not run {shown} shown here"
        if reason is not None:
            st.error(f"The link asks for {what} `{wanted}`, but {reason}: nothing is shown for it.",
                     icon=":material/error:")


def _launch_requested_by_link(errors: list, link_errors: list[str]) -> bool:
    """Whether the URL asks to launch on arrival (``?launch=1``, with ``?preset=`` or ``?config=``), once: the flag
    leaves the URL, so a reload shows the run (``?run=``) instead of starting another. When the page refused the
    link's preset or config (``link_errors``), or the form has errors, nothing starts, and it says why under the
    Launch button, where the eye is."""
    if st.query_params.get("launch") != "1":
        return False
    del st.query_params["launch"]
    if link_errors:
        st.error("The link asked to launch, but nothing was launched: " + " ".join(link_errors),
                 icon=":material/error:")
        return False
    if errors:
        st.error("The link asked to launch, but the form has errors: fix them and press **Launch run**.",
                 icon=":material/error:")
        return False
    return True


def _current_run(name: str) -> str | None:
    """The run this page shows: from the URL first, then from the session."""
    wanted = st.query_params.get("run") or st.session_state.get(f"run.{name}")
    if not wanted:
        return None
    if services.stored_run_of(name, wanted) is None:
        return None
    _select_run(name, wanted)
    return wanted


def _select_run(name: str, run_id: str) -> None:
    st.session_state[f"run.{name}"] = run_id
    if st.query_params.get("run") != run_id:
        st.query_params["run"] = run_id


def _linked_preset(mech: registry.Mechanism, link_errors: list[str]) -> Preset | None:
    """The preset named in the URL (``?preset=NAME``), or None (with the reason shown, and added to ``link_errors``,
    for an unknown name)."""
    name = st.query_params.get("preset")
    if not name:
        return None
    try:
        return mech.preset(name)
    except ConfigError as exc:
        reason = f"The preset in the link was not used: {error_text(exc, mech.config_cls)}"
        st.error(reason, icon=":material/error:")
        link_errors.append(reason)
        return None


def _form_seed_preset(run_id: str | None) -> Preset | None:
    """The preset behind a form seeded from the shown run (no ``?config=`` or ``?preset=`` link): the run's own."""
    if run_id is None or st.query_params.get("config"):
        return None
    return preset_of(services.store().get_run(run_id))


def _initial_config(mech: registry.Mechanism, run_id: str | None, preset: Preset | None,
                    link_errors: list[str]) -> dict | None:
    """Seed the form: from ``?config=<JSON>`` (on top of the linked preset, if any), else the linked preset, else the
    shown run's config. A rejected config is shown, and added to ``link_errors``."""
    linked = st.query_params.get("config")
    if linked:
        base = None if preset is None else preset_config(mech.name, preset.name).to_dict()
        try:
            return mech.config_cls.from_json(linked, over=base).to_dict()
        except ConfigError as exc:
            reason = f"The config in the link was not used: {error_text(exc, mech.config_cls)}"
            st.error(reason, icon=":material/error:")
            link_errors.append(reason)
    if preset is not None:
        return preset_config(mech.name, preset.name).to_dict()
    if run_id is None:
        return None
    return services.store().get_run(run_id).config


def _form_follows_url(name: str) -> None:
    """Start the form afresh from the URL whenever what the URL says it holds (``?preset=``, ``?config=``) changed
    since the form was drawn, e.g. after the browser's Back from ``/pate?preset=X`` to ``/pate``: the browser kept the
    old widgets' values, so form and URL disagreed. A fresh form (new widget keys) starts from the URL's seed."""
    seed = (st.query_params.get("preset"), st.query_params.get("config"))
    key = f"mechanism_page.{name}.form_seed"  # not under form.NAME: those keys are the form's widgets
    if key in st.session_state and st.session_state[key] != seed:
        _fresh_form(name)
    st.session_state[key] = seed


def _fresh_form(name: str) -> None:
    """New widget keys for the form: the browser keeps the old widgets' values, new widgets start from the seed."""
    st.session_state[f"form.{name}.generation"] = st.session_state.get(f"form.{name}.generation", 0) + 1


def _form_key(name: str) -> str:
    """The form's widget key prefix: ``form.NAME``, then ``form.NAME.gN`` after the N-th preset load."""
    generation = st.session_state.get(f"form.{name}.generation", 0)
    return f"form.{name}" if generation == 0 else f"form.{name}.g{generation}"


def _preset_picker(mech: registry.Mechanism, linked: Preset | None) -> None:
    """Load one of the mechanism's named presets into the form (through ``?preset=NAME``, so the link shares it);
    ``linked``: the preset the form starts from, shown first."""
    if not mech.presets:
        return
    names = [p.name for p in mech.presets]
    c1, c2 = st.columns([2, 1], vertical_alignment="bottom")  # [3, 1] cut "Load" to "L…" at 1280 px
    chosen = c1.selectbox("Start from a preset", names, index=None if linked is None else names.index(linked.name),
                          placeholder="pick a preset", key=f"preset.{mech.name}")
    if chosen is not None:
        preset = mech.preset(chosen)
        published = preset.published
        at = "" if published is None or published.epsilon is None else f" at ε = {published.epsilon:g}"
        st.caption(preset.description + (f" Published: {published.metric} {published.value_text()}{at} "
                                          f"({published.source})." if published else ""))
    if c2.button("Load", disabled=chosen is None, key=f"preset.load.{mech.name}", width="stretch"):
        if st.query_params.get("preset") == chosen and not st.query_params.get("config"):
            _fresh_form(mech.name)  # the URL stays as it is: the form returns to the preset all the same
        st.query_params.clear()
        st.query_params["preset"] = chosen
        st.rerun()


def _recent_runs_picker(name: str, run_id: str | None) -> None:
    runs = services.store().list_runs(mechanism=name, limit=20)
    if not runs:
        return
    ids = [r.id for r in runs]
    labels = {r.id: f"{r.title} · {r.state}" for r in runs}
    index = ids.index(run_id) if run_id in ids else None
    states = ",".join(f"{r.state}:{r.name}" for r in runs)  # a new widget when a state or name changes: true labels
    choice = st.selectbox("Show a recent run", ids, index=index, format_func=labels.get,
                          key=f"pick.{name}.{run_id}.{states}", placeholder="pick a run")
    if choice is not None and choice != run_id:
        _select_run(name, choice)
        st.rerun()
