"""Home: the quick-demo gallery (one click launches a mechanism's demo and opens its page), the presets with the
figures they reproduce, recent runs.

It loads neither torch nor Opacus (``tests/test_page_start_imports.py``): a fresh server's first page would wait
seconds for them. So it names the device order, not the device found here: finding a CUDA GPU takes torch; each
mechanism form names it."""

import streamlit as st

from privengine import registry
from ui import charts, services
from ui.gallery import presets_table, quick_demo_card
from ui.runs_table import column_config, runs_frame
from ui.shell import through_app

through_app()

st.title("privengine")
st.markdown(
    "Explore how privacy mechanisms trade **privacy for utility**. Pick a mechanism, tune its knobs, "
    "launch a run and watch it train live. Every ε shown names its accountant, δ and assumptions.")

st.caption("Runs go to the best device here by default (a CUDA GPU, then Apple MPS, else the CPU); each mechanism's "
           "form names it and lets you pick another.")

st.subheader("Quick demos")
st.caption("One click each: the demo starts here at once (seconds to half a minute on two CPU cores) and its page "
           "opens with the run live.")
mechanisms = registry.all_mechanisms()
if not mechanisms:
    st.warning("No mechanism is registered.", icon=":material/warning:")
for row in range(0, len(mechanisms), 2):  # row by row, so the cards of a row start level
    for column, mech in zip(st.columns(2), mechanisms[row:row + 2]):
        with column:
            quick_demo_card(mech)

st.subheader("Presets and the published figures they reproduce")
st.caption("Each opens its mechanism's page with the form filled in, ready to launch; a run started from a preset "
           "draws its published figure as a dashed line on the chart of that metric. From a terminal: "
           "`python -m privengine presets`, `python -m privengine run MECHANISM --preset NAME`.")
presets_table(mechanisms)

st.subheader("Recent runs")
recent = services.store().list_runs(limit=8)
if recent:
    charts.table(runs_frame(recent), column_config=column_config())
    st.page_link("pages/runs.py", label="All runs", icon=":material/table_rows:")
else:
    st.caption("No runs yet. Launch one from a mechanism page, or from a terminal: "
               "`python -m privengine run <mechanism> --help`.")
