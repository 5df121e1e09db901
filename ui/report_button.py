"""The report download button: the same self-contained HTML file as ``python -m privengine report ID``."""

from __future__ import annotations

import functools

import streamlit as st

from privengine import report

from . import services


def report_button(ids: list[str], *, key: str, label: str = "Report (HTML)") -> None:
    """Download the report of one run, one sweep, or (several ids) a comparison of runs.

    The HTML is built when the button is clicked, not on every rerun.
    """
    st.download_button(label, functools.partial(_html, ",".join(ids)), file_name=report.filename(ids),
                       mime="text/html", key=key, icon=":material/description:",
                       help="One HTML file that opens offline: configuration, privacy claims, charts, tables and "
                            "the command line that reproduces it.")


def _html(ref: str) -> str:
    return report.build(services.store(), ref).html
