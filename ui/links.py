"""The app's pages, and links between them, for page scripts and generated (script-less) pages alike.

:mod:`app` builds its navigation from these pages, so a link, :func:`open_run` and the navigation always name the
same page (Streamlit matches pages by their URL path).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NoReturn

import streamlit as st

from privengine import registry

from .ledger_panel import LEDGER_PATH
from .scroll import scroll_to_top_if_asked, start_next_page_at_top

PAGES_DIR = Path(__file__).resolve().parents[1] / "pages"
MECHANISM_ICON = ":material/science:"
# URL parameters of a mechanism page: the audit its Audit section shows (ui.audit_panel), the membership attack its
# Membership inference section shows (ui.membership_panel); here, so the runs tables link to them without
# importing the panels (the attack's brings torch)
AUDIT_QUERY_KEY = "audit"
ATTACK_QUERY_KEY = "attack"


def page_script(name: str) -> Path | None:
    """Mechanism ``name``'s own page script, or None when it uses the generic page."""
    script = PAGES_DIR / f"{name}.py"
    return script if script.exists() else None


def home_page() -> st.Page:
    return st.Page(PAGES_DIR / "home.py", title="Home", icon=":material/home:", default=True)


def runs_page() -> st.Page:
    return st.Page(PAGES_DIR / "runs.py", title="Runs", url_path="runs", icon=":material/table_rows:")


def explore_page() -> st.Page:
    return st.Page(PAGES_DIR / "explore.py", title="Explore", url_path="explore", icon=":material/scatter_plot:")


def ledger_page() -> st.Page:
    return st.Page(PAGES_DIR / "ledger.py", title="Ledger", url_path=LEDGER_PATH, icon=":material/account_balance:")


def data_page() -> st.Page:
    return st.Page(PAGES_DIR / "data.py", title="Data", url_path="data", icon=":material/dataset:")


def mechanism_page(name: str) -> st.Page:
    """Mechanism ``name``'s page at ``/name``: its own page script if it has one, else the generic page."""
    title = registry.get(name).title
    script = page_script(name)
    if script is not None:
        return st.Page(script, title=title, url_path=name, icon=MECHANISM_ICON)

    def generic() -> None:  # runs under the app's navigation only (it has no script): no shell to build
        from .mechanism_page import render_mechanism_page  # the page's modules load when it is opened

        scroll_to_top_if_asked()
        render_mechanism_page(name)

    return st.Page(generic, title=title, url_path=name, icon=MECHANISM_ICON)


def sections() -> dict[str, list[st.Page]]:
    """The app's navigation: Home and Data (the user's data sets), one page per registered mechanism, then the
    results pages."""
    return {
        "": [home_page(), data_page()],
        "Mechanisms": [mechanism_page(m.name) for m in registry.all_mechanisms()],
        "Results": [runs_page(), explore_page(), ledger_page()],
    }


def link_to_mechanism(name: str, label: str, *, run_id: str | None = None, preset: str | None = None,
                      config: dict | None = None) -> None:
    """A link to mechanism ``name``'s page, optionally showing run ``run_id``, with preset ``preset`` loaded or its
    form seeded with the fields ``config`` (``?config=<JSON>``, on top of the defaults)."""
    seeded = json.dumps(config, separators=(",", ":")) if config else None
    query = {k: v for k, v in (("run", run_id), ("preset", preset), ("config", seeded)) if v}
    st.page_link(mechanism_page(name), label=label, icon=":material/arrow_forward:", query_params=query or None)


def open_run(name: str, run_id: str) -> NoReturn:
    """Go to mechanism ``name``'s page showing run ``run_id`` (the URL says ``?run=ID``, so it can be shared), at its
    top, where the run's state and charts are."""
    start_next_page_at_top()
    st.switch_page(mechanism_page(name), query_params={"run": run_id})
