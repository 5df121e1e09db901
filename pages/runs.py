"""Runs: every stored run; filter, open, stop, delete, export, report, and overlay the curves of several."""

import functools

import streamlit as st

from privengine import registry
from privengine.figures.compare import mechanism_name
from privengine.figures.export import run_csv, run_json
from privengine.store import STATES
from ui import charts, services
from ui.links import link_to_mechanism
from ui.model_button import model_button
from ui.report_button import report_button
from ui.runs_table import column_config, config_differences, identical_configs, runs_frame
from ui.shell import through_app
from ui.side_by_side import draw_comparison

through_app()
st.title("Runs")
store = services.store()

known = sorted({m.name for m in registry.all_mechanisms()} | set(store.mechanisms()))
f1, f2, f3 = st.columns([2, 2, 1])
mechanisms = f1.multiselect("Mechanism", known, format_func=mechanism_name, placeholder="all mechanisms")
states = f2.multiselect("State", list(STATES), placeholder="all states")
f3.button("Refresh", icon=":material/refresh:", width="stretch")

runs = store.list_runs(mechanism=mechanisms or None, states=states or None)
if not runs:
    st.info("No runs match. Launch one from a mechanism page, or `python -m privengine run ...`.",
            icon=":material/info:")
    st.stop()

table = runs_frame(runs)
event = charts.table(table, on_select="rerun", selection_mode="multi-row", key="runs.table",
                     column_config=column_config())
selected = [runs[i] for i in event.selection.rows]
st.caption(f"{len(runs)} runs · **open ↗** opens a run; select rows (left edge) to act on them; select two or more "
           "to compare their curves.")
if not selected:
    st.stop()

st.subheader(f"{len(selected)} selected")
active = [r for r in selected if r.active]
ended = [r for r in selected if not r.active]
a1, a2 = st.columns(2)
if active and a1.button(f"Stop {len(active)} active run(s)", icon=":material/stop:"):
    for run in active:
        services.manager().stop(run.id)
    st.toast("Stop requested")
    st.rerun()
if ended:
    confirm = a2.checkbox(f"Yes, delete {len(ended)} ended run(s) and their metrics")
    if a2.button("Delete", icon=":material/delete:", disabled=not confirm):
        for run in ended:
            store.delete_run(run.id)
        st.toast(f"Deleted {len(ended)} run(s)")
        st.rerun()

for run in selected[:6]:
    with st.container(border=True):
        c1, c2, c3, c4 = st.columns([2, 1, 1, 1.4])
        with c1:
            link_to_mechanism(run.mechanism, f"Open run {run.title} ({mechanism_name(run.mechanism)}, {run.state})",
                              run_id=run.id)
        # callables: the export is built when the button is clicked, not on every rerun
        c2.download_button("CSV", functools.partial(run_csv, store, run.id), file_name=f"{run.id}.csv",
                           mime="text/csv", key=f"csv.{run.id}", icon=":material/download:")
        c3.download_button("JSON", functools.partial(run_json, store, run.id), file_name=f"{run.id}.json",
                           mime="application/json", key=f"json.{run.id}", icon=":material/download:")
        with c4:
            report_button([run.id], key=f"report.{run.id}")
            model_button(run, key=f"model.{run.id}")
if len(selected) > 6:
    st.caption("Links and exports are shown for the first six selected runs.")

if len(selected) >= 2:
    st.subheader("Compare")
    st.markdown("The settings that differ, then each run's result and privacy:")
    differences = config_differences(selected)
    charts.table(differences, column_config=column_config())
    if identical_configs(differences):
        st.caption("The selected runs have identical configs.")
    report_button([r.id for r in selected], key="report.compare", label="Report of the comparison (HTML)")
    draw_comparison(selected, key="compare")
