"""The layout every mechanism page shares: description, config form, launch, live run view.

The page keeps only the run id, in ``st.session_state`` and in the URL
(``?run=ID``), so a reload, a second tab or a shared link reattaches to the run.
``?config=<JSON>`` pre-fills the form (a shareable preset).
"""

from __future__ import annotations

import streamlit as st

from privengine import registry
from privengine.errors import ConfigError, RunNotFoundError

from . import services
from .form import config_form
from .run_panel import Draw, live_run


def render_mechanism_page(name: str, draw: Draw | None = None, *, intro: str | None = None) -> None:
    """Draw the page of mechanism ``name``; ``draw(snapshot)`` draws its live charts."""
    mech = registry.get(name)
    st.title(mech.title)
    st.markdown(intro or mech.description)
    with st.expander("What it protects, and against whom"):
        st.markdown(mech.protects)

    run_id = _current_run(name)
    left, right = st.columns([1, 2.2], gap="large")
    with left:
        st.subheader("Configure")
        _preset_picker(mech)
        initial = _initial_config(mech.config_cls, run_id)
        config, errors = config_form(mech.config_cls, key=_form_key(name), initial=initial)
        launch = st.button("Launch run", type="primary", disabled=config is None, key=f"launch.{name}",
                           icon=":material/play_arrow:", width="stretch")
        if errors:
            st.caption(f"Fix {len(errors)} field{'s' if len(errors) > 1 else ''} to launch.")
        if launch and config is not None:
            try:
                run_id = services.manager().submit(name, config, source="dashboard")
            except ConfigError as exc:
                st.error(str(exc), icon=":material/error:")
            else:
                _select_run(name, run_id)
                st.rerun()
        _recent_runs_picker(name, run_id)
    with right:
        if run_id is None:
            st.info("Set the knobs and press **Launch run**; the charts appear here as the run reports.",
                    icon=":material/insights:")
        else:
            live_run(run_id, draw)


def _current_run(name: str) -> str | None:
    """The run this page shows: from the URL first, then from the session."""
    wanted = st.query_params.get("run") or st.session_state.get(f"run.{name}")
    if not wanted:
        return None
    try:
        run = services.store().get_run(wanted)
    except RunNotFoundError:
        st.warning(f"Run {wanted} is not in the store (deleted?).", icon=":material/warning:")
        return None
    if run.mechanism != name:
        st.warning(f"Run {wanted} is a {run.mechanism} run, not {name}.", icon=":material/warning:")
        return None
    _select_run(name, wanted)
    return wanted


def _select_run(name: str, run_id: str) -> None:
    st.session_state[f"run.{name}"] = run_id
    if st.query_params.get("run") != run_id:
        st.query_params["run"] = run_id


def _initial_config(config_cls, run_id: str | None) -> dict | None:
    """Seed the form: from ``?config=<JSON>`` (a shareable preset), else the shown run's config."""
    preset = st.query_params.get("config")
    if preset:
        try:
            return config_cls.from_json(preset).to_dict()
        except ConfigError as exc:
            st.error(f"The config in the link was not used: {exc}", icon=":material/error:")
    if run_id is None:
        return None
    return services.store().get_run(run_id).config


def _form_key(name: str) -> str:
    """The form's widget key prefix: ``form.NAME``, then ``form.NAME.gN`` after the N-th preset load."""
    generation = st.session_state.get(f"form.{name}.generation", 0)
    return f"form.{name}" if generation == 0 else f"form.{name}.g{generation}"


def _preset_picker(mech: registry.Mechanism) -> None:
    """Load one of the mechanism's named presets into the form (through ``?config=``, so the link shares it)."""
    if not mech.presets:
        return
    names = [p.name for p in mech.presets]
    c1, c2 = st.columns([3, 1], vertical_alignment="bottom")
    chosen = c1.selectbox("Start from a preset", names, index=None, placeholder="pick a preset",
                          key=f"preset.{mech.name}")
    if chosen is not None:
        preset = mech.preset(chosen)
        published = preset.published
        st.caption(preset.description + (f" Published: {published.metric} {published.value:g}"
                                          + (f" at ε = {published.epsilon:g}" if published.epsilon else "")
                                          + f" ({published.source})." if published else ""))
    if c2.button("Load", disabled=chosen is None, key=f"preset.load.{mech.name}", width="stretch"):
        config = mech.config_cls.from_dict(dict(mech.preset(chosen).overrides))
        # new widget keys: the browser keeps the old widgets' values, new widgets start from the preset
        st.session_state[f"form.{mech.name}.generation"] = st.session_state.get(f"form.{mech.name}.generation", 0) + 1
        st.query_params.clear()
        st.query_params["config"] = config.to_json()
        st.rerun()


def _recent_runs_picker(name: str, run_id: str | None) -> None:
    runs = services.store().list_runs(mechanism=name, limit=20)
    if not runs:
        return
    ids = [r.id for r in runs]
    labels = {r.id: f"{r.id} · {r.state}" for r in runs}
    index = ids.index(run_id) if run_id in ids else None
    states = ",".join(r.state for r in runs)  # a new widget when a state changes, so labels never go stale
    choice = st.selectbox("Show a recent run", ids, index=index, format_func=labels.get,
                          key=f"pick.{name}.{run_id}.{states}", placeholder="pick a run")
    if choice is not None and choice != run_id:
        _select_run(name, choice)
        st.rerun()
