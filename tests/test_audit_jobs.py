"""Audits are registry entries run as jobs (privengine.audit.interface): the contract every registered audit keeps,
checked through the registry: a complete entry, a smoke audit that runs in the job manager and stores an audit
summary (claimed epsilon, audited lower bound, confidence, method, claim, assumptions) and its curves, and a stop
that ends a running audit within two seconds."""

from __future__ import annotations

import math
import time

import pytest

from privengine import registry
from privengine.audit import AuditResult, result_of
from privengine.figures import run_figures, run_tables

AUDITS = [a.name for a in registry.all_audits()]


def test_every_shipped_mechanism_with_an_audit_is_found_from_its_name():
    assert {"pate-gnmax", "dpsgd-one-run"} <= set(AUDITS)
    mechanisms = {m.name for m in registry.all_mechanisms()}
    assert not mechanisms & set(AUDITS)  # audits are not offered as mechanisms (pages, run, sweeps)
    for name in AUDITS:
        assert registry.get(name).audits in mechanisms


@pytest.mark.parametrize("name", AUDITS)
def test_registry_entry_is_complete(name):
    entry = registry.get(name)
    assert entry.title and entry.description and entry.protects.startswith(f"Tests this guarantee of {entry.audits}")
    entry.config_cls.from_dict(dict(entry.smoke)).validate()
    assert entry.default_config().to_dict()["confidence"] == 0.95  # the default confidence


@pytest.mark.parametrize("name", AUDITS)
def test_smoke_audit_is_a_stored_run_with_its_result_and_curves(name, manager, store):
    run_id = manager.submit(name, dict(registry.get(name).smoke), source="test")
    run = manager.wait(run_id, timeout=300)
    assert run.state == "finished", run.traceback
    result = result_of(run.summary)
    assert isinstance(result, AuditResult) and result.audit == name and result.mechanism == registry.get(name).audits
    assert result.claim and result.method and result.notes and result.confidence == 0.95
    assert 0 <= result.epsilon_lower and math.isfinite(result.claimed_epsilon) and 0 < result.delta < 1
    assert {"claimed_epsilon", "audited_epsilon_lower", "confidence", "method", "claim"} <= set(run.summary)
    metrics = store.metrics(run_id)
    last = metrics.groupby("name")["value"].last()
    assert last["claimed_epsilon"] == pytest.approx(result.claimed_epsilon)
    assert set(metrics["name"]) >= {"claimed_epsilon", "audited_epsilon_lower"}
    assert result_of(None) is None and result_of({"privacy": []}) is None
    snapshot = store.snapshot(run_id)  # what the page and the report draw
    assert len(run_figures(snapshot)) >= 2  # the bound so far, claimed against audited
    assert [t.title for t in run_tables(snapshot)] == ["Audited settings", "What the audit assumed"]


@pytest.mark.parametrize("name", AUDITS)
def test_stop_mid_audit_within_a_few_polls(name, manager, store, stop_polls):
    config = registry.get(name).default_config().to_dict()
    if name == "pate-gnmax":
        config["trials"] = 100_000_000  # long enough to be stopped while running
    run_id = manager.submit(name, config)
    deadline = time.monotonic() + 120
    while (store.get_run(run_id).progress or 0) <= 0 and store.get_run(run_id).active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.get_run(run_id).active, "the audit ended before it could be stopped"
    manager.stop(run_id)
    run = manager.wait(run_id, timeout=120)  # a hang guard only: promptness is counted in polls below
    stop_polls.assert_stopped_promptly(run_id)
    assert run.state == "stopped" and result_of(run.summary) is not None  # a partial result, still sound
