"""AppTest of the audit section (ui.audit_panel) on the PATE and DP-SGD pages: it offers each mechanism's audit,
launches one as a stored run, and draws the claimed epsilon against the audited lower bound, its charts and what
the audit assumed; a reload with ?audit=ID reattaches to the stored audit."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest

from privengine import registry
from privengine.audit import result_of
from tests.conftest import ROOT
from ui.audit_panel import attacks_a_run


def _page(name: str, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "pages" / f"{name}.py"), default_timeout=60)
    for k, v in query.items():
        at.query_params[k] = v
    return at.run()


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]


@pytest.mark.parametrize("mechanism", ["pate", "dpsgd"])
def test_each_page_with_an_audit_offers_it(mechanism):
    at = _page(mechanism)
    _clean(at)
    assert "Audit" in [h.value for h in at.header]
    for entry in registry.audits_for(mechanism):
        if attacks_a_run(entry):  # the membership attack: offered beside the run it attacks (tests/test_membership_job)
            assert entry.title not in [h.value for h in at.subheader] and "Membership inference" in \
                [h.value for h in at.header]
            continue
        assert entry.title in [h.value for h in at.subheader]
        assert not at.button(key=f"audit.launch.{entry.name}").disabled
        assert any(w.key.startswith(f"audit.form.{entry.name}.") for w in at.number_input)
        # it says plainly that it audits its own setting, not the run on the page
        assert any(c.value.startswith("It audits its own setting (") and "not the run shown above" in c.value
                   for c in at.caption)
    if mechanism == "pate":
        assert any("(Sigma 20, Votes 100, 95, 5, Trials 1000000, Confidence 0.95, ...)" in c.value for c in at.caption)


def test_launch_an_audit_watch_it_finish_and_reload_it(store):
    at = _page("pate")
    at.number_input(key="audit.form.pate-gnmax.trials").set_value(50_000)
    at.button(key="audit.launch.pate-gnmax").click().run()
    _clean(at)
    run_id = at.query_params["audit"]
    run_id = run_id[0] if isinstance(run_id, list) else run_id
    deadline = time.monotonic() + 120
    while store.get_run(run_id).active and time.monotonic() < deadline:
        time.sleep(0.2)
    run = store.get_run(run_id)
    assert run.mechanism == "pate-gnmax" and run.state == "finished", run.traceback
    assert run.config["trials"] == 50_000 and run.source == "dashboard"
    result = result_of(run.summary)

    again = _page("pate", audit=run_id)  # a reload (or a shared link) reattaches to the stored audit
    _clean(again)
    tiles = {m.label: m.value for m in again.metric}
    assert tiles["Claimed ε (upper bound)"] == f"{result.claimed_epsilon:.3g}"
    assert tiles["Audited ε ≥ (95 % confidence)"] == f"{result.epsilon_lower:.3g}"
    assert any("consistent with the claim" in c.value for c in again.caption)
    assert len(again.get("plotly_chart")) >= 2  # the bound so far, claimed against audited
    assert "What the audit assumed" in [e.label for e in again.expander]
