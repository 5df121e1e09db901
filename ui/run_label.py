"""A run's name and notes: how its panel titles it, and the editor that sets them (stored with the run, shown in the
runs tables, comparison legends, links and reports; ``python -m privengine label ID --name ... --notes ...``)."""

from __future__ import annotations

import streamlit as st

from privengine.errors import ConfigError
from privengine.store import NAME_MAX_CHARS, NOTES_MAX_CHARS, RunRecord

from . import services


def escape_markdown(text: str) -> str:
    """Show ``*`` and ``_`` (formulas, file names) literally instead of as emphasis."""
    return text.replace("\\", "\\\\").replace("*", "\\*").replace("_", "\\_")


def heading(run: RunRecord) -> str:
    """``Run **id**``, or ``**name** · run id`` for a named run (Markdown)."""
    return f"**{escape_markdown(run.name)}** · run {run.id}" if run.name else f"Run **{run.id}**"


SAVED = "run_label.saved"  # the run whose name and notes the last Save stored, for the toast after the rerun


def label_editor(run: RunRecord) -> None:
    """Run name and notes in a popover form; a bad value is refused with the field's label and its limit. A Save
    reruns the page, so the heading above (drawn before the form) shows the new name at once (issue 40, item 10)."""
    if st.session_state.get(SAVED) == run.id:
        del st.session_state[SAVED]
        st.toast(f"Saved the name and notes of run {run.id}")
    with st.popover("Name and notes", icon=":material/edit_note:"):
        with st.form(key=f"label.{run.id}", border=False):
            name = st.text_input("Run name", value=run.name, max_chars=NAME_MAX_CHARS,
                                 placeholder="e.g. baseline for the talk")
            notes = st.text_area("Notes", value=run.notes, max_chars=NOTES_MAX_CHARS,
                                 placeholder="what this run is for, what you noticed")
            if st.form_submit_button("Save", icon=":material/save:"):
                try:
                    services.store().set_label(run.id, name=name, notes=notes)
                except ConfigError as exc:
                    st.error(str(exc), icon=":material/error:")
                else:
                    st.session_state[SAVED] = run.id
                    st.rerun()


def notes_caption(run: RunRecord) -> None:
    """The run's notes under its heading (nothing when it has none)."""
    if run.notes:
        st.caption(escape_markdown(run.notes))
