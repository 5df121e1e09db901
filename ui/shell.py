"""The app's shell: page config, navigation and sidebar menu, right from the first request after the server starts.

Why the app draws its own menu, and why every page script calls :func:`through_app`: Streamlit (checked with
1.67) decides when the *first* session of a server process starts whether the app is an old-style "pages/
directory" app, because a ``pages/`` folder sits beside ``app.py``. That first script run then goes through
Streamlit's automatic page list (``_mpa_v1`` in ``streamlit/runtime/scriptrunner/script_runner.py``): the sidebar
lists the raw file names ("app, dp bayes, dpsgd, home, ...") and a deep link such as ``/dpsgd?run=ID`` runs
``pages/dpsgd.py`` directly, without ``app.py``: narrow layout and the wrong menu until the user clicks a menu
item. The first ``st.navigation`` call ends that mode for the whole process (``PagesManager.uses_pages_directory``;
streamlit/streamlit#10276, #9992). So:

- ``client.showSidebarNavigation = false`` (``.streamlit/config.toml``) hides Streamlit's automatic list, also in
  that first run; it hides the app's ``st.navigation`` menu as well, so :func:`navigation` draws the menu itself,
  from the same pages.
- ``app.py`` sets the page config before it imports anything slow, and a page script that Streamlit ran directly
  builds the app's shell itself (:func:`through_app`: the same page config, navigation and menu) before it draws
  anything, so a deep link opened as the very first request lands on its page with the app's layout and menu.

The shell is built in place, never by a rerun: a rerun would drop the click that started the run, and
``streamlit.testing`` (AppTest) starts every run in that mode.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import streamlit as st

from . import charts, presentation
from .scroll import scroll_to_top_if_asked

PAGE_CONFIG = dict(page_title="privengine", page_icon=":material/shield_lock:", layout="wide")


def page_config() -> None:
    """The app's page config: title, icon, wide layout; the sidebar collapsed in presentation mode."""
    st.set_page_config(**PAGE_CONFIG, initial_sidebar_state="collapsed" if presentation.presenting() else "auto")


def _in_pages_directory_mode() -> bool:
    """Whether Streamlit still runs this process as a "pages/ directory" app (before the first ``st.navigation``
    call; False where this Streamlit has no such mode)."""
    try:
        from streamlit.runtime.pages_manager import PagesManager
    except ImportError:
        return False
    return bool(getattr(PagesManager, "uses_pages_directory", False))


def navigation(sections: Mapping[str, Sequence[st.Page]]) -> st.Page:
    """``st.navigation`` over ``sections`` (its own menu hidden) and the app's sidebar menu; returns the page to
    run. Also ends Streamlit's "pages/ directory" mode for the process."""
    page = st.navigation(dict(sections), position="hidden")
    with st.sidebar:
        for section, pages in sections.items():
            if section:
                st.caption(section)
            for item in pages:
                st.page_link(item, label=item.title, icon=item.icon or None)
        st.divider()
        charts.download_format_choice()
    return page


def through_app() -> None:
    """The first call of every page script, before it draws anything: when Streamlit ran the script directly (the
    first request after a start, see the module's doc), build the app's shell here, as ``app.py`` does; and start
    at the page's top when the page before asked for it (:func:`ui.scroll.start_next_page_at_top`)."""
    if _in_pages_directory_mode():
        _build_shell()
    scroll_to_top_if_asked()


def _build_shell() -> None:
    """The page config, navigation and menu that ``app.py`` would have set up."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    from .links import sections  # imported here: the pages module links back to page scripts

    page_config()
    ctx = get_script_run_ctx()
    if ctx is None:  # bare mode (no Streamlit runtime): nothing to navigate
        return
    # st.navigation resolves to this very page (same URL path, so the same page hash); it also makes the main
    # script the "active" one, which would give this page's widgets other ids than in every later run (where
    # the page runs under its own hash): keep this page's hash active, as later runs will
    with ctx.run_with_active_hash(ctx.page_script_hash):
        navigation(sections())
