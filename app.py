"""privengine dashboard: builds the navigation (Home, one page per registered mechanism, Runs, Explore)."""

import streamlit as st

from privengine import registry
from ui.links import PAGES_DIR, page_script
from ui.mechanism_page import render_mechanism_page


def mechanism_page(name: str, title: str) -> st.Page:
    """The mechanism's own page script if it has one, else the generic page."""
    script = page_script(name)
    if script is not None:
        return st.Page(script, title=title, url_path=name, icon=":material/science:")

    def generic() -> None:
        render_mechanism_page(name)

    return st.Page(generic, title=title, url_path=name, icon=":material/science:")


st.set_page_config(page_title="privengine", page_icon=":material/shield_lock:", layout="wide")
navigation = st.navigation({
    "": [st.Page(PAGES_DIR / "home.py", title="Home", icon=":material/home:", default=True)],
    "Mechanisms": [mechanism_page(m.name, m.title) for m in registry.all_mechanisms()],
    "Results": [st.Page(PAGES_DIR / "runs.py", title="Runs", url_path="runs", icon=":material/table_rows:"),
                st.Page(PAGES_DIR / "explore.py", title="Explore", url_path="explore", icon=":material/scatter_plot:")],
})
navigation.run()
