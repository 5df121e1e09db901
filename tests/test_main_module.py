"""The test process keeps its own ``__main__`` across tests (``conftest.main_module_kept``): Streamlit's AppTest
installs the page script it runs as ``sys.modules["__main__"]`` and leaves it there, and a ``spawn`` child of a later
test then re-imports that script as its main module and dies before it reports (CI: three budget tests)."""

from __future__ import annotations

import sys

from streamlit.testing.v1 import AppTest

STARTED_WITH = sys.modules["__main__"]  # at collection, before any test of this worker ran a page


def test_a_page_run_in_process_installs_its_script_as_main(tmp_path):
    script = tmp_path / "page.py"
    script.write_text('import streamlit as st\nst.write("drawn")\n')
    at = AppTest.from_file(str(script)).run()
    assert [m.value for m in at.markdown] == ["drawn"]
    assert getattr(sys.modules["__main__"], "__file__", None) == str(script)  # what the fixture must undo


def test_the_next_test_finds_the_process_main_again():
    assert sys.modules["__main__"] is STARTED_WITH
