"""Ledger: per private data source, what every run on it has spent, composed tightly (ε at δ, with the accountant,
neighbouring relation and any conversion in words), against its budget; spent over time as a step chart; each run's
share; the uses no claim covers; the budget's history and a form that sets or raises it (``?source=`` picks the
source, so a link can share it)."""

import math

import streamlit as st

from privengine.config import BaseConfig
from privengine.errors import ConfigError
from privengine.figures.ledger import (budget_history_frame, budget_text, shares_frame, spent_figure, total_text,
                                       uncovered_frame)
from privengine.figures.text import number
from privengine.ledger import Ledger, backfill, known_sources, ledger_of, set_budget
from privengine.ledger.ledger import SHARES_NOTE
from privengine.ledger.sources import NO_SOURCE
from privengine.store import BudgetRecord
from ui import charts, services
from ui.form import error_text
from ui.runs_table import column_config, run_url
from ui.shell import through_app

FIELDS = {"epsilon": "Budget ε", "delta": "Budget δ"}  # the form's labels of set_budget's fields
NUMBERS = {"ε alone": st.column_config.NumberColumn(format="%.4g"), "ε": st.column_config.NumberColumn(format="%g")}


def budget_form(store, source: str, budget: BudgetRecord | None, spent: float) -> None:
    """Set or raise ``source``'s budget (recorded with its note and time). Bad values are refused by
    :func:`privengine.ledger.set_budget`, its error shown naming the field by its label here."""
    suggested = budget.epsilon if budget is not None else max(1.0, math.ceil(spent) if math.isfinite(spent) else 1.0)
    with st.form(f"ledger.budget.{source}"):
        c1, c2 = st.columns(2)
        epsilon = c1.number_input(FIELDS["epsilon"], value=float(suggested), step=0.5, format="%g",
                                  help="The most ε the ledger may reach; must be > 0.")
        delta = c2.number_input(FIELDS["delta"], value=budget.delta if budget is not None else 1e-5, step=1e-6,
                                format="%g", help="The δ the ledger is stated at; must be in (0, 1).")
        note = st.text_input("Why (kept in the budget's history)", max_chars=200)
        submitted = st.form_submit_button("Raise or change the budget" if budget else "Set the budget",
                                          icon=":material/savings:")
    if submitted:
        try:
            set_budget(store, source, epsilon, delta, note)
        except ConfigError as exc:
            st.error(error_text(exc, BaseConfig, FIELDS), icon=":material/error:")
        else:
            st.toast(f"Budget of {source} set to ε = {epsilon:g} at δ = {delta:g}")
            st.rerun()


def budget_bar(ledger: Ledger) -> None:
    """Spent against the budget: a bar, and a warning when the ledger is over it."""
    budget = ledger.budget
    if budget is None:
        st.caption("No budget set: launches on this source are not limited. Set one below.")
        return
    used = ledger.epsilon / budget.epsilon
    st.progress(min(1.0, used), text=f"ε spent {number(ledger.epsilon)} of the budget's {budget.epsilon:g} "
                                     f"({100 * used:.0f} %) at δ = {budget.delta:g}")
    if used > 1:
        st.error("Over the budget: every launch on this source is refused until the budget is raised.",
                 icon=":material/block:")


def source_view(store, source: str) -> None:
    ledger = ledger_of(store, source)
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("ε spent", number(ledger.epsilon), help=f"at δ = {ledger.total.delta:.3g}")
    c2.metric("Budget ε", "none" if ledger.budget is None else f"{ledger.budget.epsilon:g}",
              help=f"{budget_text(ledger.budget)}; set below")
    c3.metric("Runs charged", len(ledger.shares))
    c4.metric("Uncovered uses", len(ledger.uncovered), help="Covered by no claim: audits and attacks that train on "
                                                            "the private data, runs that state no claim, the public "
                                                            "or held-out rows runs drew from the source, outputs "
                                                            "published without privacy, and other sources' runs "
                                                            "that released on this data set.")
    st.markdown(total_text(ledger))
    budget_bar(ledger)
    charts.show(spent_figure(ledger), key=f"ledger.spent.{source}")

    st.subheader("Runs and their shares")
    if ledger.shares:
        runs = {r.id: r for r in store.source_runs(source)}
        frame = shares_frame(ledger, {i: r.name for i, r in runs.items()})
        frame.insert(0, "open", [run_url(runs[i]) if i in runs else None for i in frame["run"]])
        charts.table(frame, column_config={"open": column_config()["open"], **NUMBERS})
        st.caption(f"{SHARES_NOTE[:1].upper()}{SHARES_NOTE[1:]}.")
    else:
        st.caption("No run is charged to this source yet.")
    if ledger.pending or ledger.released_nothing:
        st.caption(f"Not charged: {len(ledger.pending)} queued or starting (nothing released yet), "
                   f"{ledger.released_nothing} that ended having released nothing.")

    st.subheader("Uncovered uses")
    if ledger.uncovered:
        charts.table(uncovered_frame(ledger))
    else:
        st.caption("None: every use of this source is covered by a claim.")

    st.subheader("Budget")
    if ledger.budget_history:
        charts.table(budget_history_frame(ledger), column_config=NUMBERS)
        st.caption("Every setting is kept; the newest is in force.")
    budget_form(store, source, ledger.budget, ledger.epsilon)


through_app()
st.title("Ledger")
st.markdown("What every run on a private data source has spent, composed tightly, against the source's budget. A "
            "source is what a run reads (a built-in data set's split, a synthetic set's seed): runs of every "
            "mechanism on it share one ledger. From a terminal: `python -m privengine ledger [SOURCE]`.")
store = services.store()
backfill(store)
used = sorted(set(store.data_sources()) - {NO_SOURCE})
if not used:
    st.info("No run has read a private data set yet: launch one from a mechanism page, and its spending shows here.",
            icon=":material/info:")
    st.subheader("Set a budget before the first run")
    chosen = st.selectbox("Data source", known_sources(store), key="ledger.new_source")
    budget_form(store, chosen, None, 0.0)
    st.stop()

SOURCE_KEY = "ledger.source"
wanted = st.query_params.get("source")
if wanted in used:  # the URL names the source (a link, or the choice below): it wins over the session's
    st.session_state[SOURCE_KEY] = wanted
elif st.session_state.get(SOURCE_KEY) not in used:
    st.session_state[SOURCE_KEY] = used[0]
source = st.selectbox("Data source", used, key=SOURCE_KEY, help="Every source a run has read or a budget was set on.",
                      on_change=lambda: st.query_params.update(source=st.session_state[SOURCE_KEY]))
st.query_params["source"] = source
source_view(store, source)
