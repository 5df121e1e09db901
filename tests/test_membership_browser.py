"""Issue 27 in a real browser: on the DP-SGD (and PATE) page of an ended run, "Attack this run" launches the membership attack
(a stored job) and its ROC and AUC tiles appear live under the run, without an error element. Uses the Streamlit
server and Chromium fixtures of tests/test_browser.py (skips with its reason when Chromium or Playwright is
missing)."""

from __future__ import annotations

from privengine.dpsgd.config import DPSGDConfig
from privengine.store import RunStore
from tests.test_browser import _errors, _settle, app_home, app_url, browser, chromium, page  # noqa: F401
from tests.test_membership import RECIPE


def test_attack_this_run_draws_the_attack_live(app_url, app_home, page):  # noqa: F811
    store = RunStore(app_home / "runs.sqlite")
    run_id = store.create_run("dpsgd", DPSGDConfig().replace(**RECIPE).to_dict(), source="test")
    store.mark_running(run_id, device="cpu")
    store.mark_ended(run_id, "finished", summary={})
    page.goto(f"{app_url}/dpsgd?run={run_id}")
    _settle(page)
    page.get_by_role("button", name="Attack this run").click()
    page.get_by_text("Attack AUC").wait_for(timeout=180_000)  # the attack's tiles: its first pass is done
    page.locator(".js-plotly-plot", has_text="Membership attack").first.wait_for(timeout=60_000)
    assert _errors(page) == []
    attacks = store.list_runs(mechanism="dpsgd-membership")
    assert [a.config["run"] for a in attacks] == [run_id]


def test_a_pate_run_is_attacked_from_its_page(app_url, app_home, page):  # noqa: F811
    """The PATE page has the same section: its student is attacked (a pate-membership job), the ROC drawn live."""
    from privengine.pate.config import PateConfig
    from tests.test_membership_pate import RECIPE as PATE_RECIPE

    store = RunStore(app_home / "runs.sqlite")
    run_id = store.create_run("pate", PateConfig().replace(**PATE_RECIPE).to_dict(), source="test")
    store.mark_running(run_id, device="cpu")
    store.mark_ended(run_id, "finished", summary={})
    page.goto(f"{app_url}/pate?run={run_id}")
    _settle(page)
    page.get_by_text("PATE: the student is attacked").wait_for(timeout=30_000)
    page.get_by_role("button", name="Attack this run").click()
    page.get_by_text("Attack AUC").wait_for(timeout=180_000)
    page.locator(".js-plotly-plot", has_text="PATE student").first.wait_for(timeout=60_000)
    assert _errors(page) == []
    assert [a.config["run"] for a in store.list_runs(mechanism="pate-membership")] == [run_id]
