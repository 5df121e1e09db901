"""Links between pages that survive both page scripts and generated (script-less) pages."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

PAGES_DIR = Path(__file__).resolve().parents[1] / "pages"


def page_script(name: str) -> Path | None:
    """Mechanism ``name``'s own page script, or None when it uses the generic page."""
    script = PAGES_DIR / f"{name}.py"
    return script if script.exists() else None


def link_to_mechanism(name: str, label: str, *, run_id: str | None = None) -> None:
    """A link to mechanism ``name``'s page, optionally showing run ``run_id``."""
    query = {"run": run_id} if run_id else None
    script = page_script(name)
    if script is not None:
        st.page_link(str(script), label=label, icon=":material/arrow_forward:", query_params=query)
    else:
        st.markdown(f"[{label}](/{name}{'?run=' + run_id if run_id else ''})")
