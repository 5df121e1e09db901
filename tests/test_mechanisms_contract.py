"""The contract every registered mechanism keeps, checked through the registry (toy included)."""

from __future__ import annotations

import time

import pytest

from privengine import registry
from privengine.claims import claims_of
from privengine.jobs import JobManager

MECHANISMS = [m.name for m in registry.all_mechanisms()]


@pytest.fixture
def manager(store):
    m = JobManager(store)
    yield m
    m.shutdown()


@pytest.mark.parametrize("name", MECHANISMS)
def test_registry_entry_is_complete(name):
    mech = registry.get(name)
    assert mech.title and mech.protects and mech.description
    assert mech.default_config().to_dict()
    mech.config_cls.from_dict(dict(mech.smoke))  # the smoke overrides are valid
    assert callable(mech.load_run())


@pytest.mark.parametrize("name", MECHANISMS)
def test_smoke_run_finishes_reports_and_states_its_privacy(name, manager, store):
    run_id = manager.submit(name, dict(registry.get(name).smoke))
    run = manager.wait(run_id, timeout=600)
    assert run.state == "finished", run.traceback
    assert not store.metrics(run_id).empty
    for claim in claims_of(run.summary):  # every epsilon names its accountant, delta and neighbours
        assert claim.accountant and claim.neighbouring and claim.epsilon >= 0 and 0 <= claim.delta < 1


@pytest.mark.parametrize("name", MECHANISMS)
def test_stop_mid_run_within_two_seconds(name, manager, store):
    run_id = manager.submit(name, _long_config(name))
    deadline = time.monotonic() + 120
    while store.metrics(run_id).empty and store.get_run(run_id).active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.get_run(run_id).active, "the run ended before it could be stopped: make its default longer"
    t0 = time.monotonic()
    manager.stop(run_id)
    run = manager.wait(run_id, timeout=10)
    assert time.monotonic() - t0 < 2.0, f"stop took {time.monotonic() - t0:.1f} s"
    assert run.state == "stopped"


def _long_config(name: str) -> dict:
    """The default config: long enough to be stopped while running."""
    return registry.get(name).default_config().to_dict() | ({"steps": 10_000, "delay": 0.01} if name == "toy" else {})
