"""The dashboard draws every chart with the download format chosen in its sidebar (issue 29, item 7g): a 2x PNG
at a slide's width by default, an SVG once chosen."""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from tests.conftest import app_page, run_from_published_preset


def _download_options(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.config)["toImageButtonOptions"] for c in at.get("plotly_chart")]


def test_the_sidebar_choice_sets_every_chart_download(store):
    run_id = run_from_published_preset(store)
    at = app_page("pages/dpsgd.py", run=run_id)
    assert not at.exception, [e.message for e in at.exception]
    options = _download_options(at)
    assert len(options) >= 2 and all((o["format"], o["scale"], o["width"]) == ("png", 2, 1000) for o in options)
    choice = at.sidebar.radio(key="charts.download_format")
    choice.set_value("svg").run()
    assert not at.exception
    assert {o["format"] for o in _download_options(at)} == {"svg"}
