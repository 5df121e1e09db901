"""Issue 27 in a real browser: on the DP-SGD and the PATE page of an ended run, "Attack this run" launches the
membership attack (a stored job) and its ROC and AUC tiles appear live under the run, without an error element. Uses
the Streamlit server and browser tab fixtures of tests/conftest.py (skips with its reason when Chromium or
Playwright is missing)."""

from __future__ import annotations

import pytest

from privengine.dpsgd.config import DPSGDConfig
from privengine.store import RunStore
from tests.test_browser import _errors, _settle
from tests.test_membership import RECIPE

pytestmark = pytest.mark.browser  # a real Chromium against a served app


def _ended_run(store: RunStore, mechanism: str) -> str:
    """A stored, ended run of ``mechanism`` with the recipe its attack tests use."""
    from privengine.pate.config import PateConfig
    from tests.test_membership_pate import RECIPE as PATE_RECIPE

    config = DPSGDConfig().replace(**RECIPE) if mechanism == "dpsgd" else PateConfig().replace(**PATE_RECIPE)
    run_id = store.create_run(mechanism, config.to_dict(), source="test")
    store.mark_running(run_id, device="cpu")
    store.mark_ended(run_id, "finished", summary={})
    return run_id


@pytest.mark.parametrize("mechanism, caption, in_chart", [
    ("dpsgd", None, "Membership attack"),
    ("pate", "PATE: the student is attacked", "PATE student"),  # its student attacked, a pate-membership job
])
def test_attack_this_run_draws_the_attack_live(app_url, app_home, page, mechanism, caption, in_chart):  # noqa: F811
    store = RunStore(app_home / "runs.sqlite")
    run_id = _ended_run(store, mechanism)
    page.goto(f"{app_url}/{mechanism}?run={run_id}")
    _settle(page)
    if caption:
        page.get_by_text(caption).wait_for(timeout=30_000)
    page.get_by_role("button", name="Attack this run").click()
    page.get_by_text("Attack AUC").wait_for(timeout=180_000)  # the attack's tiles: its first pass is done
    page.locator(".js-plotly-plot", has_text=in_chart).first.wait_for(timeout=60_000)
    assert _errors(page) == []
    attacks = store.list_runs(mechanism=f"{mechanism}-membership")
    assert [a.config["run"] for a in attacks] == [run_id]
