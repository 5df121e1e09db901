"""Scrolling the page from the server: Streamlit has no scrolling API, so these emit a few lines of the page's own
JavaScript (``st.html`` with scripts allowed), run once where they are drawn."""

from __future__ import annotations

import json

import streamlit as st

TO_TOP = "scroll.to_top"  # session flag: the next page drawn starts at its top (set before a page switch)


def scroll_into_view(selector: str, *, block: str = "center") -> None:
    """Scroll the first element matching CSS ``selector`` into view (``block``: "start", "center", "end" or
    "nearest"), once it is drawn: tried every 50 ms for up to 2 s."""
    st.html(f"""<script>
(() => {{
  let tries = 0;
  const go = () => {{
    const el = document.querySelector({json.dumps(selector)});
    if (el) {{ el.scrollIntoView({{block: {json.dumps(block)}, behavior: "instant"}}); }}
    else if (++tries < 40) {{ setTimeout(go, 50); }}
  }};
  go();
}})();
</script>""", unsafe_allow_javascript=True)


def start_next_page_at_top() -> None:
    """Ask the next page drawn in this session to start at its top (a page switch keeps the old page's scroll)."""
    st.session_state[TO_TOP] = True


def scroll_to_top_if_asked() -> None:
    """Scroll to the page's title when :func:`start_next_page_at_top` asked for it (once)."""
    if st.session_state.pop(TO_TOP, False):
        scroll_into_view("h1", block="start")
