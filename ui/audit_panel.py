"""The audit section of a mechanism page: launch an audit, watch it, read the claimed epsilon against the audited
lower bound with its confidence and what the audit assumed.

A page calls :func:`audit_section` once with its mechanism's name; it draws one block per audit registered for
that mechanism (``registry.audits_for``) and nothing when there is none. Audits are runs of the store like any
other: launched through the job manager, drawn by the same live panel (state, progress, stop, report), listed on
the Runs page; the section keeps only the audit run's id (session and ``?audit=ID``), so reloads reattach.
"""

from __future__ import annotations

import streamlit as st

from privengine import registry
from privengine.audit import NO_BOUND, result_of
from privengine.audit.membership_job import AUDIT_OF_MECHANISM
from privengine.config import BaseConfig
from privengine.errors import RunNotFoundError
from privengine.figures import audit as figures
from privengine.figures.text import value_text
from privengine.store import RunSnapshot

from . import charts, services
from .form import FIXED_FIELDS, config_form, field_label
from .launch import launch
from .links import AUDIT_QUERY_KEY
from .run_panel import live_run

INTRO = ("Every ε above is an accountant's **upper bound**. An audit measures a **lower bound**: with the stated "
         "confidence the implementation, as it runs, is not private for any smaller ε. An implementation that keeps "
         "its promise has its true ε between the two; an audited bound above the claim refutes it.")


def audit_section(mechanism: str) -> None:
    """Draw the audits of ``mechanism`` (nothing if it has none)."""
    audits = [a for a in registry.audits_for(mechanism) if not attacks_a_run(a)]
    if not audits:
        return
    st.divider()
    st.header("Audit", anchor="audit")
    st.markdown(INTRO)
    for entry in audits:
        _audit_block(entry)


def attacks_a_run(entry: registry.Mechanism) -> bool:
    """Whether audit ``entry`` attacks a stored run (a mechanism's membership attack, by the explicit list
    :data:`~privengine.audit.membership_job.AUDIT_OF_MECHANISM`): such an audit is drawn beside the run
    (:mod:`ui.membership_panel`), not in this section."""
    return entry.name in AUDIT_OF_MECHANISM.values()


def _audit_block(entry: registry.Mechanism) -> None:
    st.subheader(entry.title)
    st.caption(entry.description)
    run_id = _current_audit_run(entry.name)
    left, right = st.columns([1, 2.2], gap="large")
    with left:
        with st.expander("Audit settings"):
            initial = services.store().get_run(run_id).config if run_id else None
            config, errors = config_form(entry.config_cls, key=f"audit.form.{entry.name}", initial=initial)
        if config is not None:
            st.caption(what_it_audits(entry.name, config))
        clicked = st.button("Launch audit", disabled=config is None, key=f"audit.launch.{entry.name}",
                            icon=":material/fact_check:", width="stretch")
        if errors:
            st.caption(f"Fix {len(errors)} audit setting{'s' if len(errors) > 1 else ''} to launch.")
        if clicked and config is not None:
            launched = launch(entry.name, config)
            if launched is not None:
                _select(entry.name, launched)
                st.rerun()
        _recent_audits_picker(entry.name, run_id)
    with right:
        if run_id is None:
            st.info("Launch the audit to compare its lower bound with the claim (the default runs in at most two "
                    "minutes on two CPU cores).", icon=":material/fact_check:")
        else:
            live_run(run_id, draw_audit)


AUDITED_KNOBS = 4  # knobs named in the sentence under Launch audit; the rest are under "Audit settings"


def what_it_audits(audit: str, config: BaseConfig) -> str:
    """One sentence on what audit ``audit`` tests: its own setting (its first knobs by label, values as the form
    shows them), not the run on the page (e.g. "It audits its own setting (Sigma 20, Votes 100, 95, 5, Trials
    1000000, Confidence 0.95, ...), not the run shown above: change it under Audit settings.")."""
    specs = [s for s in config.specs() if s.name not in FIXED_FIELDS]
    knobs = [f"{field_label(s)} {value_text(audit, s.name, getattr(config, s.name))}" for s in specs[:AUDITED_KNOBS]]
    more = ", ..." if len(specs) > AUDITED_KNOBS else ""
    return (f"It audits its own setting ({', '.join(knobs)}{more}), not the run shown above: change it under "
            "Audit settings.")


def draw_audit(snapshot: RunSnapshot) -> None:
    """The live view of one audit run: the result tile and charts, the settings table, the assumptions."""
    run_id = snapshot.run.id
    result = result_of(snapshot.run.summary)
    if result is not None:
        claimed, audited = st.columns(2)
        claimed.metric("Claimed ε (upper bound)", f"{result.claimed_epsilon:.3g}", help=result.claim)
        if result.epsilon_lower is None:  # a game without a lower bound: its ROC only, never a measured 0
            audited.metric("Audited ε", "none", help=f"{NO_BOUND}: {result.method}")
        else:
            audited.metric(f"Audited ε ≥ ({100 * result.confidence:g} % confidence)", f"{result.epsilon_lower:.3g}",
                           help=result.method)
        verdict = ("**refutes the claim**: the implementation leaks more than its accountant says"
                   if result.refutes_claim else "consistent with the claim")
        share = "" if result.claimed_epsilon <= 0 else f" · {result.tightness:.0%} of the claim confirmed"
        st.caption(f"δ = {result.delta:g} for both · {verdict}{share} · method: {result.method}")
    elif snapshot.metrics.empty:
        st.caption("Waiting for the audit's first result.")
    for i, fig in enumerate(figures.figures(snapshot)):
        charts.show(fig, key=f"audit.{run_id}.fig{i}")
    for table in figures.tables(snapshot):
        with st.expander(table.title, expanded=table.title.startswith("What")):
            charts.table(table.frame)


def _current_audit_run(name: str) -> str | None:
    """The audit run shown for audit ``name``: from the URL (if it is one of this audit's runs), else the session."""
    linked = st.query_params.get(AUDIT_QUERY_KEY)
    for wanted in (linked, st.session_state.get(f"audit.run.{name}")):
        if not wanted:
            continue
        try:
            run = services.store().get_run(wanted)
        except RunNotFoundError:
            continue
        if run.mechanism == name:
            st.session_state[f"audit.run.{name}"] = wanted
            return wanted
    return None


def _select(name: str, run_id: str) -> None:
    st.session_state[f"audit.run.{name}"] = run_id
    st.query_params[AUDIT_QUERY_KEY] = run_id


def _recent_audits_picker(name: str, run_id: str | None) -> None:
    runs = services.store().list_runs(mechanism=name, limit=20)
    if not runs:
        return
    ids = [r.id for r in runs]
    labels = {r.id: _label(r) for r in runs}
    states = ",".join(r.state for r in runs)  # a new widget when a state changes, so labels never go stale
    choice = st.selectbox("Show a recent audit", ids, index=ids.index(run_id) if run_id in ids else None,
                          format_func=labels.get, key=f"audit.pick.{name}.{run_id}.{states}", placeholder="pick one")
    if choice is not None and choice != run_id:
        _select(name, choice)
        st.rerun()


def _label(run) -> str:
    result = result_of(run.summary)
    return f"{run.id} · {run.state}" + ("" if result is None else f" · {result.headline()}")
