"""AppTest of the DP-SGD page: it renders, launches the smoke config from a preset link, and draws the run."""

from __future__ import annotations

import json
import time

import pytest
from streamlit.testing.v1 import AppTest

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd until privengine/mechanisms.py imports it)
from privengine import registry
from tests.conftest import ROOT

PAGE = str(ROOT / "pages" / "dpsgd.py")
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


def _page(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def test_page_renders_its_form():
    at = _page()
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == registry.get("dpsgd").title
    keys = {w.key for w in list(at.selectbox) + list(at.number_input) + list(at.text_input)}
    for field in ("dataset", "epochs", "batch_size", "lr", "max_grad_norm", "target_epsilon", "delta", "accountant",
                  "alphas", "variant", "subspace_rank", "public_fraction", "refresh_every", "n_seeds"):
        assert f"form.dpsgd.{field}" in keys, field


@pytest.mark.slow
def test_launch_smoke_run_and_draw_its_charts(store):
    smoke = dict(registry.get("dpsgd").smoke) | {"n_seeds": 2}
    at = _page(config=json.dumps(smoke))
    at.button(key="launch.dpsgd").click().run()
    assert not at.exception, [e.message for e in at.exception]
    run_id = at.query_params["run"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    deadline = time.monotonic() + 120
    while store.get_run(run_id).active and time.monotonic() < deadline:
        time.sleep(0.2)
    record = store.get_run(run_id)
    assert record.state == "finished", record.traceback
    at = _page(run=run_id)
    assert not at.exception, [e.message for e in at.exception]
    headlines = " ".join(m.value for m in at.markdown)
    assert "each trained model" in headlines and "all 4 models of this run released together" in headlines
    assert any("Opacus PRV accountant" in c.value and "public" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) == 5  # quality, epsilon, loss, energy, comparison
    assert any("comparison" in s.value.lower() for s in at.subheader)
