"""Home: what each mechanism protects and against whom, the detected device, recent runs."""

import streamlit as st

from privengine import registry
from ui import services
from ui.links import link_to_mechanism
from ui.runs_table import runs_frame

st.title("privengine")
st.markdown(
    "Explore how privacy mechanisms trade **privacy for utility**. Pick a mechanism, tune its knobs, "
    "launch a run and watch it train live. Every ε shown names its accountant, δ and assumptions.")

device = services.devices()[0]
st.caption(f"Runs go to **{device.name}** by default (CUDA, then Apple MPS, else CPU); each form lets you pick another.")

mechanisms = registry.all_mechanisms()
if not mechanisms:
    st.warning("No mechanism is registered.", icon=":material/warning:")
columns = st.columns(2)
for i, mech in enumerate(mechanisms):
    with columns[i % 2].container(border=True):
        st.subheader(mech.title)
        st.markdown(f"**Protects:** {mech.protects}")
        with st.expander("How it works"):
            st.markdown(mech.description)
        link_to_mechanism(mech.name, f"Open {mech.title}")

st.subheader("Recent runs")
recent = services.store().list_runs(limit=8)
if recent:
    st.dataframe(runs_frame(recent), hide_index=True, width="stretch")
    st.page_link("pages/runs.py", label="All runs", icon=":material/table_rows:")
else:
    st.caption("No runs yet. Launch one from a mechanism page, or from a terminal: "
               "`python -m privengine run <mechanism> --help`.")
