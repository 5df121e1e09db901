"""Where people see the privacy ledger (issue 37, item 4): the step chart of spent over time (its points checked
against dp-accounting composing the first k runs' events directly), the Ledger page (AppTest: empty state, two runs,
the budget form and its field-named errors), the line under a mechanism page's Launch button, and the ledger section
of reports; and the membership section's one-line verdict in a run's report (issue 40, item 6).

Runs are stored by hand (records whose headline claims carry events): nothing trains."""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from streamlit.testing.v1 import AppTest

from privengine import registry
from privengine.accounting import events
from privengine.audit.interface import AuditResult
from privengine.audit.membership import roc_summary
from privengine.claims import PrivacyClaim
from privengine.figures import membership
from privengine.explore import SweepSpec
from privengine.figures.ledger import share_text, spent_figure
from privengine.ledger import ledger_of, set_budget
from privengine.ledger.budget import planned_claim_of
from privengine.report import build
from tests.conftest import ROOT, run_sweep

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order")  # Opacus' RDP, planning DP-SGD's default launch
APP = str(ROOT / "app.py")
ADD = "add_or_remove_one"
DELTA = 1e-5
SOURCE = "linreg/seed=0"  # DP-SGD's default data set


def gaussian(sigma: float, count: int) -> dp_event.DpEvent:
    return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(sigma), count)


def add_run(store, event: dp_event.DpEvent, *, state: str = "finished", name: str = "", data_seed: int = 0) -> str:
    """A stored DP-SGD run on ``linreg/seed=<data_seed>`` (default :data:`SOURCE`) whose headline claim carries
    ``event`` (its ε a placeholder: the ledger reads the events)."""
    claim = PrivacyClaim("all 1 models", 1.0, DELTA, "test", "add or remove one", headline=True,
                         events=(events.to_json(event),), relation=ADD)
    run_id = store.create_run("dpsgd", {"dataset": "linreg", "data_seed": data_seed})
    if name:
        store.set_label(run_id, name=name)
    store.mark_ended(run_id, state, summary={"privacy": [claim.to_dict()]})
    return run_id


def composed(evs: list[dp_event.DpEvent], delta: float = DELTA) -> float:
    """ε of ``evs`` composed by dp-accounting's own PLD accountant."""
    accountant = PLDAccountant(events.RELATIONS[ADD])
    for e in evs:
        accountant.compose(e)
    return accountant.get_epsilon(delta)


def test_the_step_chart_draws_the_ledger_after_each_run_and_the_budget(store):
    evs = [gaussian(3.0, 4), gaussian(2.0, 2), gaussian(5.0, 10)]
    for e in evs:
        add_run(store, e)
    set_budget(store, SOURCE, 4.0, DELTA, "first")
    set_budget(store, SOURCE, 6.0, DELTA, "raised")
    ledger = ledger_of(store, SOURCE)
    fig = spent_figure(ledger)
    spent = next(t for t in fig.data if t.name == "ε spent")
    assert list(spent.y) == [p.epsilon for p in ledger.over_time]
    # each step is the composition of the runs charged so far, as dp-accounting composes them directly
    assert list(spent.y) == pytest.approx([composed(evs[:k]) for k in (1, 2, 3)], rel=1e-3)
    assert spent.line.shape == "hv" and list(spent.x) == sorted(spent.x)
    (held,) = [t for t in fig.data if t.showlegend is False]  # the last value, held until now
    assert list(held.y) == [spent.y[-1]] * 2 and held.x[0] == spent.x[-1]
    budget = next(t for t in fig.data if t.name == "budget ε")
    assert list(budget.y) == [4.0, 6.0, 6.0] and budget.line.shape == "hv"


def test_an_active_runs_planned_charge_is_the_last_point_apart(store):
    add_run(store, gaussian(3.0, 4))
    running = store.create_run("dpsgd", {"dataset": "linreg"})
    store.mark_running(running, device="cpu")
    plan = PrivacyClaim("plan", 1.0, DELTA, "test", "add or remove one", headline=True,
                        events=(events.to_json(gaussian(2.0, 3)),), relation=ADD)
    store.set_planned_charge(running, {"privacy": [plan.to_dict()]})
    fig = spent_figure(ledger_of(store, SOURCE))
    spent, planned = fig.data[0], fig.data[1]
    assert list(spent.y) == pytest.approx([composed([gaussian(3.0, 4)])], rel=1e-3)
    # the planned line starts at the last ended point and ends at the total with the plan
    assert list(planned.y) == pytest.approx([spent.y[-1], composed([gaussian(3.0, 4), gaussian(2.0, 3)])], rel=1e-3)
    assert planned.line.dash == "dot"


def _ledger_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/ledger.py")
    return at.run()


def test_the_ledger_page_says_when_no_run_has_read_a_private_data_set(store):
    at = _ledger_page()
    assert not at.exception, [e.message for e in at.exception]
    assert at.title[0].value == "Ledger"
    assert any("No run has read a private data set yet" in i.value for i in at.info)
    assert not at.dataframe


def test_the_ledger_page_shows_the_total_and_each_runs_share(store):
    ids = [add_run(store, gaussian(3.0, 4), name="first try"), add_run(store, gaussian(2.0, 2))]
    at = _ledger_page()
    assert not at.exception, [e.message for e in at.exception]
    assert at.selectbox(key="ledger.source").value == SOURCE
    expected = composed([gaussian(3.0, 4), gaussian(2.0, 2)])
    spent = next(m for m in at.metric if m.label == "ε spent")
    assert float(spent.value) == pytest.approx(expected, rel=1e-3)
    words = " ".join(m.value for m in at.markdown)
    assert "at δ = 1e-05 for neighbouring data sets that add or remove one record" in words
    assert events.PLD in words
    table = at.dataframe[0].value
    assert table["run"].tolist() == ids and table["name"].tolist() == ["first try", ""]
    assert table["ε alone"].tolist() == pytest.approx([composed([gaussian(3.0, 4)]), composed([gaussian(2.0, 2)])],
                                                      rel=1e-3)
    assert table["open"].tolist() == [f"dpsgd?run={i}" for i in ids]
    assert sum(table["ε alone"]) > expected  # the shares do not add up to the tight total


def test_the_source_shown_follows_the_link_then_the_choice(store):
    add_run(store, gaussian(3.0, 4))
    other = add_run(store, gaussian(2.0, 2), data_seed=7)
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/ledger.py")
    at.query_params["source"] = "linreg/seed=7"
    at.run()
    assert at.selectbox(key="ledger.source").value == "linreg/seed=7"
    assert at.dataframe[0].value["run"].tolist() == [other]
    at.selectbox(key="ledger.source").select(SOURCE).run()
    assert at.query_params["source"] == SOURCE and at.dataframe[0].value["run"].tolist() != [other]


def test_the_budget_form_sets_a_budget_and_names_the_field_it_refuses(store):
    add_run(store, gaussian(3.0, 4))
    at = _ledger_page()
    eps, delta = (next(n for n in at.number_input if n.label == label) for label in ("Budget ε", "Budget δ"))
    eps.set_value(0.0)
    at.button[0].click()
    at.run()
    assert any("**Budget ε** must be a finite number > 0; got 0.0" in e.value for e in at.error)
    assert store.budget_history(SOURCE) == []

    eps, delta = (next(n for n in at.number_input if n.label == label) for label in ("Budget ε", "Budget δ"))
    eps.set_value(3.0)
    delta.set_value(1.5)
    at.button[0].click()
    at.run()
    assert any("**Budget δ** must be in (0, 1); got 1.5" in e.value for e in at.error)

    eps, delta = (next(n for n in at.number_input if n.label == label) for label in ("Budget ε", "Budget δ"))
    eps.set_value(10.0)
    delta.set_value(1e-6)
    next(t for t in at.text_input if t.label.startswith("Why")).set_value("first budget")
    at.button[0].click()
    at.run()
    assert not at.exception and not at.error
    (budget,) = store.budget_history(SOURCE)
    assert (budget.epsilon, budget.delta, budget.note) == (10.0, 1e-6, "first budget")
    assert next(m for m in at.metric if m.label == "Budget ε").value == "10"
    ledger = ledger_of(store, SOURCE)  # now stated at the budget's delta
    assert ledger.delta == 1e-6 and ledger.epsilon == pytest.approx(composed([gaussian(3.0, 4)], 1e-6), rel=1e-3)
    assert at.get("progress")[0].value == pytest.approx(100 * ledger.epsilon / 10.0, abs=1)  # in percent


@pytest.mark.slow
def test_the_line_under_launch_shows_the_sources_ledger_and_what_the_launch_adds(store):
    """DP-SGD's default config reads linreg/seed=0; what it adds is its planned claim's events composed with the
    ledger's, checked here by dp-accounting composing the stored and the planned events directly."""
    stored = gaussian(3.0, 4)
    add_run(store, stored)
    set_budget(store, SOURCE, 50.0, DELTA)
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/dpsgd.py")
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    (line,) = [c.value for c in at.caption if c.value.startswith("Ledger of ")]
    head = f"Ledger of [{SOURCE}](ledger?source=linreg%2Fseed%3D0): ε "
    spent, adds, after = (float(x) for x in re.fullmatch(
        re.escape(head) + r"(\S+) of 50 spent · this launch \+(\S+) → (\S+)", line).groups())
    planned = planned_claim_of("dpsgd", registry.get("dpsgd").default_config())
    assert planned.relation == ADD and planned.events
    launched = [events.from_json(e) for e in planned.events]
    assert spent == pytest.approx(composed([stored]), rel=6e-3)  # shown to 3 digits
    assert after == pytest.approx(composed([stored, *launched]), rel=6e-3)
    assert adds == pytest.approx(after - spent, abs=1e-2 * after)


def test_the_line_says_a_launch_over_the_budget_would_be_refused(store):
    add_run(store, gaussian(3.0, 4))
    set_budget(store, SOURCE, 2.0, DELTA)
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/dpsgd.py")
    at.run()
    (line,) = [c.value for c in at.caption if c.value.startswith("Ledger of ")]
    assert re.search(r":red\[ε \S+ of 2 spent: over the budget\] · :red\[this launch \+\S+ → \S+: over the "
                     r"budget, refused\]$", line), line


def test_every_report_has_the_ledger_section(store):
    first, second = add_run(store, gaussian(3.0, 4)), add_run(store, gaussian(2.0, 2))
    set_budget(store, SOURCE, 5.0, DELTA)
    ledger = ledger_of(store, SOURCE)
    page = build(store, first).html
    assert "Privacy ledger" in page and f"<dd>{SOURCE}</dd>" in page
    assert f"ε = {ledger.epsilon:.4g} at δ = 1e-05" in page and "<dd>ε = 5 at δ = 1e-05 (" in page
    share = ledger.shares[0]
    assert share.run_id == first and f"<dd>ε = {share.epsilon:.4g} alone at δ = 1e-05" in page
    both = build(store, f"{first},{second}").html
    assert both.count("Privacy ledger") == 2  # each run's own report in the comparison has it
    attack = store.create_run("dpsgd-membership", {"run": first})  # charged to the attacked run's source
    store.add_metrics(attack, [(1, "attack_auc", 0.5)])
    store.mark_ended(attack, "finished", summary={})
    assert "<dt>this run's share</dt><dd>not charged: finished audit (" in html.unescape(build(store, attack).html)


def test_a_sweep_report_lists_its_runs_shares(store):
    sweep_id = run_sweep(store, SweepSpec("toy", base={"steps": 2}, axes={"rate": [0.1, 0.5]}, seeds=1), timeout=30,
                         max_concurrent=1)
    runs = store.sweep_runs(sweep_id)
    ledger = ledger_of(store, "toy/unspecified")  # the toy mechanism declares no source: one per mechanism
    page = build(store, sweep_id).html
    section = page[page.index("<h2>Privacy ledger</h2>"):page.index("<h2>Configuration</h2>")]
    assert "<dd>toy/unspecified</dd>" in section and "<th>share</th>" in section
    for run in runs:  # the toy's claims carry no events: each run's share is its claim's own (10 x rate, 1e-5)
        share = share_text(ledger, run.id)
        assert share.startswith(f"ε = {10 * run.config['rate']:g} alone at δ = 1e-05 (") and "without events" in share
        assert f"<td>{run.id}</td><td>finished</td><td>{html.escape(share)}</td>" in section


def _attack_output() -> dict:
    """A membership attack's output at ε = 1 whose members score a little higher than its non-members."""
    rng = np.random.default_rng(1)
    is_member = np.r_[np.ones(2_000, bool), np.zeros(20_000, bool)]
    scores = rng.normal(size=is_member.size) + 0.3 * is_member
    out = roc_summary(scores, is_member, epsilon=1.0, delta=DELTA)
    return out | {"attack": "loss", "epsilon": 1.0, "delta": DELTA, "accountant": "rdp", "reference_models": 0}


def test_the_reports_membership_section_states_the_verdict_before_the_roc(store):
    run_id = add_run(store, gaussian(3.0, 4))
    out = _attack_output()
    result = AuditResult("dpsgd-membership", "dpsgd", "loss attack", "the run's claim", 1.0, 0.0, 0.95, DELTA,
                         details={"membership": out})
    attack = store.create_run("dpsgd-membership", {"run": run_id})
    store.mark_ended(attack, "finished", summary=result.to_dict())
    page = build(store, run_id).html
    line = membership.verdict(out)
    assert line.startswith("Flagging") and math.isfinite(out["auc"])
    assert f"<p>{html.escape(line)}</p>" in page
    section = page[page.index("Membership inference"):]
    assert section.index(html.escape(line)) < section.index('class="plotly-graph-div"')
