"""A data source's budget refuses a launch before anything is stored or trained, on every launch path (issue 37,
item 3): the CLI's ``run`` and ``sweep`` (a sweep's whole plan, every run x seed, up front), a mechanism page's
Launch button and its link launch, the Explore page's sweep; runs queued or starting count at their planned
releases; a launch under the budget proceeds and is charged. Each mechanism's planned claim, from its config alone,
bounds what a finished smoke run's headline releases (equal: the smoke runs release all they plan).

Refused launches run DP-SGD configs in sigma mode (no calibration) with a run function that fails the test if it is
ever called; the expected figures are dp-accounting's PLD accountant run directly on the events the config plans
(q = B / N, steps = int(epochs / q), one Poisson-subsampled Gaussian history per model)."""

from __future__ import annotations

import json
import re
import threading

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from streamlit.testing.v1 import AppTest

from privengine import registry
from privengine.accounting import events
from privengine.claims import headline_of
from privengine.dpsgd.config import DPSGDConfig, declared_private_size
from privengine.ledger import BudgetExceeded, ledger_of, set_budget
from privengine.ledger.budget import check_configs
from tests.conftest import ROOT, run_cli

APP = str(ROOT / "app.py")
SOURCE = "linreg/seed=0"  # the source of DP-SGD's default data set
DELTA = 1e-5
SIGMA_RUN = {"noise_mode": "sigma", "epochs": 1.0, "n_seeds": 1}  # two models (alphas 0 and 4), no calibration
FLAGS = ["--noise-mode", "sigma", "--epochs", "1", "--n-seeds", "1"]


def planned_epsilon(runs: int, **changes) -> float:
    """ε at DELTA of ``runs`` runs of the DP-SGD config SIGMA_RUN (+ ``changes``), by dp-accounting's PLD accountant
    on the events it plans, written out here from the config: every model of every run one history of
    ``int(epochs / q)`` Poisson-subsampled Gaussian steps, q = B / N."""
    config = DPSGDConfig.from_dict(SIGMA_RUN | changes)
    q = config.batch_size / declared_private_size(config)
    model = dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(config.noise_multiplier)), int(config.epochs / q))
    accountant = PLDAccountant(events.RELATIONS["add_or_remove_one"])
    accountant.compose(dp_event.SelfComposedDpEvent(model, runs * config.n_seeds * len(config.alphas)))
    return accountant.get_epsilon(DELTA)


def added(message: str) -> float:
    """The ε a refusal says the launch would add."""
    return float(re.search(r"would add ε = ([0-9.e+-]+)", message)[1])


@pytest.fixture
def never_trains(monkeypatch):
    """DP-SGD's run function replaced by one that fails the test if any run of it starts."""
    calls = []

    def run(config, reporter):
        calls.append(config)
        raise AssertionError("a refused launch trained")

    monkeypatch.setattr("privengine.dpsgd.run.run", run)
    return calls


def nothing_stored(store) -> bool:
    return store.list_runs() == [] and store.list_sweeps() == []


def test_cli_run_over_the_budget_stores_and_trains_nothing(store, never_trains):
    set_budget(store, SOURCE, 0.1, DELTA)
    done = run_cli("run", "dpsgd", *FLAGS)
    assert done.returncode == 2 and done.stdout == ""
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1  # one line, no traceback
    for text in (f"`budget` of {SOURCE} is ε = 0.1 at δ = 1e-05", "spent ε = 0 (nothing charged yet)",
                 f"python -m privengine ledger budget {SOURCE} --epsilon E --delta 1e-05", "Nothing was launched"):
        assert text in message
    assert added(message) == pytest.approx(planned_epsilon(1), rel=0.01)
    assert nothing_stored(store) and never_trains == []
    # the budget the message asks for is enough, and raising it is recorded beside the first setting
    needed = re.search(r"raise the budget to at least ε = (\S+):", message)[1]
    assert run_cli("ledger", "budget", SOURCE, "--epsilon", needed, "--delta", "1e-05").returncode == 0
    assert [b.epsilon for b in store.budget_history(SOURCE)] == [0.1, float(needed)]
    (check,) = check_configs(store, "dpsgd", [DPSGDConfig.from_dict(SIGMA_RUN)])
    assert not check.exceeds and check.after.epsilon <= float(needed)


def test_cli_sweep_plans_every_run_and_seed_up_front(store, never_trains):
    one, four = planned_epsilon(1), planned_epsilon(4)
    set_budget(store, SOURCE, (one + four) / 2, DELTA)
    # one run alone fits (checked without launching anything); the sweep's four runs together do not
    (alone,) = check_configs(store, "dpsgd", [DPSGDConfig.from_dict(SIGMA_RUN)])
    assert alone.after.epsilon == pytest.approx(one, rel=0.01) and not alone.exceeds
    done = run_cli("sweep", "dpsgd", *FLAGS, "--seeds", "4")
    assert done.returncode == 2 and "this launch (4 runs) would exceed it" in done.stderr
    assert added(done.stderr) == pytest.approx(four, rel=0.01)
    assert nothing_stored(store) and never_trains == []


def test_queued_runs_count_at_their_planned_release(store, manager, monkeypatch):
    """A run that is queued or starting has released nothing, but will: the next launch is checked with its planned
    release counted, so two launches in a row cannot both fit in what is left."""
    started, release = threading.Event(), threading.Event()

    def waits(config, reporter):
        started.set()
        release.wait(30)
        return {}

    monkeypatch.setattr("privengine.dpsgd.run.run", waits)
    one, two = planned_epsilon(1), planned_epsilon(2)
    set_budget(store, SOURCE, (one + two) / 2, DELTA)
    first = manager.submit("dpsgd", DPSGDConfig.from_dict(SIGMA_RUN))
    assert started.wait(30)
    try:
        with pytest.raises(BudgetExceeded) as refused:
            manager.submit("dpsgd", DPSGDConfig.from_dict(SIGMA_RUN | {"seed": 1}))
    finally:
        release.set()
    check = refused.value.check
    assert check.reserved == 1 and check.spent.epsilon == pytest.approx(one, rel=0.01)
    assert check.after.epsilon == pytest.approx(two, rel=0.01)
    assert "with the planned releases of 1 queued or starting run(s)" in str(refused.value)
    assert [r.id for r in store.list_runs()] == [first]


def _dpsgd_page(**query) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/dpsgd.py")
    at.query_params["config"] = json.dumps(SIGMA_RUN)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def _refusal_shown(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]
    (notice,) = [e.value for e in at.error if "Not launched: over the privacy budget" in e.value]
    assert "Budget ε = 0.1 at δ = 1e-05; spent ε = 0 (nothing charged yet)" in notice
    assert added(notice) == pytest.approx(planned_epsilon(1), rel=0.01)
    (command,) = [c.value for c in at.code]
    needed = float(re.search(r"--epsilon (\S+)", command)[1])
    assert command == f"python -m privengine ledger budget {SOURCE} --epsilon {needed:g} --delta 1e-05"
    assert planned_epsilon(1) * 0.99 <= needed <= planned_epsilon(1) * 1.02  # enough, rounded up


@pytest.mark.parametrize("how", ["button", "link"])
def test_the_mechanism_page_refuses_under_the_launch_button(store, never_trains, how):
    set_budget(store, SOURCE, 0.1, DELTA)
    if how == "link":
        at = _dpsgd_page(launch="1")
    else:
        at = _dpsgd_page()
        at.button(key="launch.dpsgd").click().run()
    _refusal_shown(at)
    assert nothing_stored(store) and never_trains == []
    assert "run" not in at.query_params


def test_the_explore_page_refuses_a_sweep_over_the_budget(store, never_trains):
    set_budget(store, SOURCE, 0.1, DELTA)
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("pages/explore.py")
    at.run()
    at.selectbox(key="explore.mechanism").set_value("dpsgd").run()
    at.selectbox(key="explore.dpsgd.base.noise_mode").set_value("sigma").run()
    at.number_input(key="explore.dpsgd.base.epochs").set_value(1.0)
    at.number_input(key="explore.dpsgd.base.n_seeds").set_value(1)
    at.number_input(key="explore.seeds").set_value(2).run()
    at.button(key="explore.launch").click().run()
    assert not at.exception, [e.message for e in at.exception]
    (notice,) = [e.value for e in at.error if "Not launched: over the privacy budget" in e.value]
    assert "This launch (2 runs) would add" in notice
    assert added(notice) == pytest.approx(planned_epsilon(2), rel=0.01)
    assert nothing_stored(store) and never_trains == []


@pytest.mark.slow
def test_a_launch_under_the_budget_trains_and_is_charged(store):
    set_budget(store, SOURCE, 2 * planned_epsilon(1), DELTA)
    done = run_cli("run", "dpsgd", *FLAGS, "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["id"]
    ledger = ledger_of(store, SOURCE)
    assert [(s.run_id, s.state, s.planned) for s in ledger.shares] == [(run_id, "finished", False)]
    assert ledger.epsilon == pytest.approx(planned_epsilon(1), rel=0.01) and ledger.epsilon < ledger.budget.epsilon


@pytest.mark.slow
@pytest.mark.parametrize("name, changes", [
    ("dpsgd", {}),
    ("pate", {}),  # Confident-GNMax with a sanitized release: a headline without events
    ("pate", {"aggregator": "gnmax", "sanitize": False}),
    ("dp_bayes", {}),
    ("dp_bayes", {"method": "dpvi", "neighbouring": "add-remove", "dpvi_steps": 40, "coverage_repeats": 0}),
], ids=["dpsgd", "pate sanitized", "pate gnmax", "dp_bayes exponential", "dp_bayes dpvi"])
def test_a_smoke_run_releases_what_its_config_plans(store, manager, name, changes):
    """The planned claim (from the config alone, nothing loaded) against the headline of the finished smoke run,
    which releases all it plans: the same events (so any accountant composes them to the same ε), or, for a
    headline without events, the same (ε, δ)."""
    mech = registry.get(name)
    config = mech.config_cls.from_dict(dict(mech.smoke) | changes)
    planned = mech.planned_of(config)
    run = manager.wait(manager.submit(name, config), timeout=600)
    assert run.state == "finished", run.error
    released = headline_of(run.summary)
    assert (released.relation, released.delta) == (planned.relation, planned.delta)
    if planned.events:
        assert released.events == planned.events
    else:
        assert released.events == ()
        assert released.epsilon == pytest.approx(planned.epsilon, rel=1e-9)


@pytest.mark.slow
def test_a_stopped_run_releases_less_than_its_plan():
    """A DP-SGD run stopped early states the steps it took: its headline's events compose (accounting.events) to
    less than the planned events, which the budget was checked with."""
    from privengine.dpsgd.run import run
    from tests.memory_reporter import MemoryReporter

    config = DPSGDConfig.from_dict(SIGMA_RUN | {"epochs": 3.0})
    summary = run(config, MemoryReporter(stop_after_metrics=3))
    assert summary["stopped"]
    released, planned = headline_of(summary), registry.get("dpsgd").planned_of(config)
    ran, plan = (events.epsilon_of_json(c.events, delta=DELTA, relation=c.relation).epsilon
                 for c in (released, planned))
    assert ran < plan == pytest.approx(planned_epsilon(1, epochs=3.0), rel=0.01)


def test_split_learning_plans_no_claim_and_is_never_refused(store):
    """Split learning states no (ε, δ) claim: it plans none, and a budget on its source refuses nothing (the ledger
    lists its runs as uses no claim covers)."""
    mech = registry.get("split_label")
    config = mech.config_cls.from_dict(dict(mech.smoke))
    assert mech.planned_of(config) is None
    set_budget(store, mech.source_of(config), 1e-3, DELTA)
    assert check_configs(store, "split_label", [config]) == []


def test_a_launch_whose_events_no_accountant_covers_is_refused_not_waved_through(store):
    """Review R3 #5: a planned release no accountant composes gave epsilon NaN, which no comparison refused."""
    from privengine.ledger.budget import check_launch

    set_budget(store, "linreg/seed=0", 5.0, 1e-5)
    uncovered = events.to_json(dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(1.0)))  # replace-one
    with pytest.raises(BudgetExceeded):
        check_launch(store, "linreg/seed=0", [uncovered], "replace_one")
