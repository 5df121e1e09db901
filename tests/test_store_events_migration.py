"""Issue 37, item 1: a store of the last release (schema version 8), whose claims carry no privacy events, is migrated
and its runs' claims get their events, rebuilt from the stored configs and summaries (privengine.ledger.upgrade),
once, recorded; dp-accounting turns the events ``show ID --json`` gives into the stored ε.

The old stores hold runs as that version stored them: summaries whose claims are stated by the mechanisms' own
builders (fast tests) or by real smoke runs (the slow test), with ``events`` and ``relation`` taken out. The checks of
an ε against its events use dp-accounting directly, or closed forms:

- Opacus' PRV against dp-accounting's PLD: within PRV's own error, 2 eps_error (PRV returns the upper end of an
  interval of that width around its estimate); Opacus' RDP against dp-accounting's RDP: 1e-5 relative (a fractional
  order's series summed differently);
- PATE's a-priori bound: dp-accounting's RDP of the events at the claim's orders, converted as the claim converts
  (RDP(lam) + ln(1/delta)/(lam - 1)), to 1e-6 relative;
- exact draws of the exponential mechanism: the sum of their pure ε.
"""

from __future__ import annotations

import json
import math
import sqlite3

import dp_accounting
import numpy as np
import pytest
from dp_accounting import dp_event

from privengine import registry
from privengine.accounting.events import from_json
from privengine.accounting.pate import GNMAX_ORDERS
from privengine.accounting.opacus_names import PRV_EPS_ERROR
from privengine.claims import PrivacyClaim, claims_of, headline_of
from privengine.dp_bayes.config import DpBayesConfig
from privengine.dp_bayes.privacy import exponential_claim
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.privacy import dpsgd_claims
from privengine.ledger import ledger_of, source_of
from privengine.ledger.ledger import BASIC
from privengine.pate.config import PateConfig
from privengine.pate.run import a_priori_headline
from privengine.store import MIGRATIONS, RunStore
from privengine.store.upgrades import CLAIM_EVENTS
from tests.conftest import run_cli, store_at_version

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order")
REL = dp_accounting.NeighboringRelation
LAST_RELEASE = 8  # the schema version of the last release: claims without events


def stripped(summary: dict) -> dict:
    """``summary`` as the last release stored it: its claims without ``events`` and ``relation``."""
    return {**summary, "privacy": [{k: v for k, v in c.items() if k not in ("events", "relation")}
                                   for c in summary.get("privacy", [])]}


def text_of(claim: PrivacyClaim) -> dict:
    """A claim's fields but its events and their relation: what the upgrade never changes."""
    return {k: v for k, v in claim.to_dict().items() if k not in ("events", "relation")}


def old_store(path, runs: list[tuple[str, str, dict, dict]]) -> None:
    """A store at the last release's schema holding ``runs`` (id, mechanism, config, summary), finished, the summary's
    claims stripped of their events."""
    conn = store_at_version(path, LAST_RELEASE)
    for i, (run_id, mechanism, config, summary) in enumerate(runs):
        conn.execute("INSERT INTO runs (id, mechanism, config, state, created_at, finished_at, summary) VALUES "
                     "(?, ?, ?, 'finished', ?, ?, ?)", (run_id, mechanism, json.dumps(config), 1.0 + i, 2.0 + i,
                                                        json.dumps(stripped(summary))))
    conn.commit()
    conn.close()


def shown(run_id: str) -> dict:
    """The run's summary as ``show ID --json`` prints it."""
    done = run_cli("show", run_id, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["summary"]


def stored_texts(path) -> dict[str, str]:
    with sqlite3.connect(path) as conn:
        return dict(conn.execute("SELECT id, summary FROM runs").fetchall())


# ---- independent checks of an ε against its events ----------------------------------------------------------------

def pld_epsilon(claim: PrivacyClaim) -> float:
    accountant = dp_accounting.pld.PLDAccountant(REL.ADD_OR_REMOVE_ONE, value_discretization_interval=1e-4)
    accountant.compose(dp_event.ComposedDpEvent([from_json(e) for e in claim.events]))
    return accountant.get_epsilon(claim.delta)


def rdp_epsilon(claim: PrivacyClaim) -> float:
    """dp-accounting's RDP accountant on the events (Opacus' RDP: the same orders' RDP and conversion)."""
    accountant = dp_accounting.rdp.RdpAccountant(neighboring_relation=REL.ADD_OR_REMOVE_ONE)
    accountant.compose(dp_event.ComposedDpEvent([from_json(e) for e in claim.events]))
    return accountant.get_epsilon(claim.delta)


def classical_rdp_epsilon(claim: PrivacyClaim) -> float:
    """dp-accounting's RDP of the events at PATE's orders, converted as PATE converts: min RDP + ln(1/δ)/(λ - 1)."""
    accountant = dp_accounting.rdp.RdpAccountant(orders=list(GNMAX_ORDERS), neighboring_relation=REL.REPLACE_ONE)
    accountant.compose(dp_event.ComposedDpEvent([from_json(e) for e in claim.events]))
    return float(np.min(accountant.rdp + math.log(1 / claim.delta) / (GNMAX_ORDERS - 1)))


def pure_sum(event: dict) -> float:
    if event["type"] == "SelfComposedDpEvent":
        return event["count"] * pure_sum(event["event"])
    assert event["type"] == "PureDpEvent", event
    return event["epsilon"]


# ---- fast: summaries stated by the mechanisms' builders, nothing trained ------------------------------------------

@pytest.fixture
def builders_store(private_home):
    """An old store of a DP-SGD run (two models, RDP, with its GDP figure), a PATE GNMax run (80 of 100 queries
    answered, with a data-dependent figure), an exponential-mechanism run of DP-Bayes, and a DP-SGD run whose stored
    headline ε is not what its summary's histories give (``tampered``). (PRV claims: the slow test's smoke runs.)"""
    dpsgd = DPSGDConfig().replace(accountant="rdp", delta=1e-5)
    histories = [[(1.1, 0.01, 300)], [(1.1, 0.01, 250)]]
    dpsgd_summary = {"noise_multiplier": 1.1, "sample_rate": 0.01, "steps_per_model": 300,
                     "models": [{"steps": 300}, {"steps": 250}],
                     "privacy": [c.to_dict() for c in dpsgd_claims(histories=histories, accountant="rdp", delta=1e-5,
                                                                   private_size=60_000, public_note="",
                                                                   sampling="poisson", show_gdp=True)]}
    tampered = json.loads(json.dumps(dpsgd_summary))
    tampered["privacy"][1]["epsilon"] *= 1.5
    pate = PateConfig(aggregator="gnmax", sigma=20.0, sanitize=False, queries=100)
    headline = a_priori_headline(pate, 80, n_classes=10, n_private=60_000)
    figure = PrivacyClaim("data-dependent (not publishable)", 1.2, 1e-5, "Renyi DP", headline.neighbouring)
    pate_summary = {"queries_submitted": 100, "queries_answered": 80, "privacy": [headline.to_dict(), figure.to_dict()]}
    bayes = DpBayesConfig(draws=3)
    runs = [("sgd", "dpsgd", dpsgd.to_dict(), dpsgd_summary), ("pt", "pate", pate.to_dict(), pate_summary),
            ("bay", "dp_bayes", bayes.to_dict(), {"privacy": [exponential_claim(bayes).to_dict()]}),
            ("tampered", "dpsgd", dpsgd.to_dict(), tampered)]
    path = private_home / "runs.sqlite"
    private_home.mkdir(parents=True, exist_ok=True)
    old_store(path, runs)
    return path, {run_id: summary for run_id, _, _, summary in runs}


def test_show_gives_the_old_claims_events_that_reproduce_their_stored_epsilon(builders_store):
    path, built = builders_store
    store = RunStore(path)
    assert store.upgrade_record(CLAIM_EVENTS).done_at is None  # asked for by the migration, not done yet
    assert not any(c.get("events") for c in store.get_run("sgd").summary["privacy"])

    alone, together, gdp = claims_of(shown("sgd"))
    for claim in (alone, together):
        assert claim.relation == "add_or_remove_one"
        assert rdp_epsilon(claim) == pytest.approx(claim.epsilon, rel=1e-5)
    assert [e["count"] for e in alone.events] == [300]  # the model of the larger ε alone, both models together
    assert [e["count"] for e in together.events] == [300, 250]
    assert not gdp.events and gdp.relation is None  # an approximation, not a bound: no events

    headline, figure = claims_of(shown("pt"))
    assert headline.relation == "replace_one" and headline.events[0]["count"] == 80  # the answered queries
    assert classical_rdp_epsilon(headline) == pytest.approx(headline.epsilon, rel=1e-6)
    assert not figure.events

    (draws,) = claims_of(shown("bay"))
    assert draws.delta == 0 and sum(pure_sum(e) for e in draws.events) == pytest.approx(draws.epsilon, rel=1e-12)

    # only the structured fields changed: every claim's text is the one stored
    for run_id in ("sgd", "pt", "bay"):
        assert [text_of(c) for c in claims_of(store.get_run(run_id).summary)] == [
            text_of(c) for c in claims_of(built[run_id])]


def test_a_claim_its_events_do_not_reproduce_keeps_none_and_is_reported(builders_store):
    path, built = builders_store
    store = RunStore(path)
    done = run_cli("ledger", "upgrade", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["report"]
    assert report["runs"] == 4 and report["given_events"] == 5  # sgd 2, pt 1, bay 1, tampered: its model alone
    (refused,) = report["not_reproduced"]
    assert refused["run_id"] == "tampered" and refused["label"] == built["tampered"]["privacy"][1]["label"]
    assert report["headlines_without_events"] == ["tampered"] and report["not_restated"] == []
    assert report["figures"] == 3  # the two GDP figures and PATE's data-dependent one
    assert not headline_of(store.get_run("tampered").summary).events
    # the ledger composes the tampered run by its stated (ε, δ), the other DP-SGD run by its events
    ledger = ledger_of(store, source_of(store, "dpsgd", store.get_run("sgd").config))
    assert {s.run_id: s.composed for s in ledger.shares} == {"sgd": "events", "tampered": BASIC}


def test_the_upgrade_runs_once_and_is_recorded(builders_store):
    path, _ = builders_store
    RunStore(path)
    first = run_cli("ledger", "upgrade")
    assert first.returncode == 0 and "claims got events" in first.stdout, first.stderr
    record = RunStore(path).upgrade_record(CLAIM_EVENTS)
    texts = stored_texts(path)
    again = run_cli("ledger", "upgrade", "--json")
    assert json.loads(again.stdout)["report"] == record.report  # the recorded report, nothing redone
    assert stored_texts(path) == texts and RunStore(path).upgrade_record(CLAIM_EVENTS).done_at == record.done_at


def test_no_migration_since_the_last_release_rewrites_claim_text():
    """Relabelling is data (a claim's condition, its events): the store's text rewriting stops at the last release."""
    for step in MIGRATIONS[LAST_RELEASE:]:
        for statement in step:
            words = " ".join(statement.lower().split())
            assert "replace(" not in words and "set summary" not in words and "set planned_charge" not in words


def test_a_store_created_now_asks_for_no_upgrade(store):
    assert store.upgrade_record(CLAIM_EVENTS) is None
    done = run_cli("ledger", "upgrade")
    assert done.returncode == 0 and "nothing to upgrade" in done.stdout


# ---- slow: real smoke runs of each mechanism, stored as the last release stored them -------------------------------

SMOKES = {"dpsgd": ("dpsgd", {}), "pate": ("pate", {"aggregator": "confident_gnmax", "sanitize": False}),
          "exponential": ("dp_bayes", {}),
          "all": ("dp_bayes", {"method": "all", "mode": "sweep", "neighbouring": "add-remove",
                               "sweep_epsilons": [1.0, 2.0], "sweep_repeats": 1, "dpvi_steps": 50})}


@pytest.mark.slow
def test_smoke_runs_of_every_mechanism_stored_as_the_last_release_stored_them_get_their_events_back(
        tmp_path, private_home):
    runs_store = RunStore(tmp_path / "runs.sqlite")
    from privengine.jobs import JobManager

    manager = JobManager(runs_store)
    try:
        ids = {key: manager.submit(name, dict(registry.get(name).smoke) | changes)
               for key, (name, changes) in SMOKES.items()}
        runs = {key: manager.wait(run_id, timeout=600) for key, run_id in ids.items()}
    finally:
        manager.shutdown()
    assert all(r.state == "finished" for r in runs.values()), {k: r.traceback for k, r in runs.items()}
    private_home.mkdir(parents=True, exist_ok=True)
    old_store(private_home / "runs.sqlite", [(key, r.mechanism, r.config, r.summary) for key, r in runs.items()])

    for key, run in runs.items():
        upgraded = claims_of(shown(key))
        # every claim gets back the events the run stored (and their relation), and its text is the stored one
        stored = claims_of(run.summary)
        assert [c.events for c in upgraded] == [c.events for c in stored]
        assert [c.relation for c in upgraded if c.events] == [c.relation for c in stored if c.events]
        assert [text_of(c) for c in upgraded] == [text_of(c) for c in stored]
    dpsgd = headline_of(shown("dpsgd"))
    assert pld_epsilon(dpsgd) == pytest.approx(dpsgd.epsilon, abs=2 * PRV_EPS_ERROR)
    pate = headline_of(shown("pate"))
    assert classical_rdp_epsilon(pate) == pytest.approx(pate.epsilon, rel=1e-6)
    draws = headline_of(shown("exponential"))
    assert sum(pure_sum(e) for e in draws.events) == pytest.approx(draws.epsilon, rel=1e-12)
    report = json.loads(run_cli("ledger", "upgrade", "--json").stdout)["report"]
    assert report["not_reproduced"] == [] and report["not_restated"] == [] and report["runs"] == len(SMOKES)
    assert report["headlines_without_events"] == []
