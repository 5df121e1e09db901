"""The contract every registered mechanism keeps, checked through the registry (toy included)."""

from __future__ import annotations

import time

import pytest

from privengine import registry
from privengine.claims import claims_of, headline_of
from privengine.explore.frontier import run_values

MECHANISMS = [m.name for m in registry.all_mechanisms()]


@pytest.mark.parametrize("name", MECHANISMS)
def test_registry_entry_is_complete(name):
    mech = registry.get(name)
    assert mech.title and mech.protects and mech.description
    assert mech.default_config().to_dict()
    mech.config_cls.from_dict(dict(mech.smoke))  # the smoke overrides are valid
    assert callable(mech.load_run())
    for preset in mech.presets:  # every preset is a valid config, and every real mechanism has a quick demo
        mech.config_cls.from_dict(dict(preset.overrides)).validate()
    if name != "toy":
        assert "quick-demo" in [p.name for p in mech.presets]


@pytest.mark.parametrize("name", MECHANISMS)
def test_smoke_run_finishes_reports_and_states_its_privacy(name, manager, store):
    run_id = manager.submit(name, dict(registry.get(name).smoke))
    run = manager.wait(run_id, timeout=600)
    assert run.state == "finished", run.traceback
    assert not store.metrics(run_id).empty
    claims = claims_of(run.summary)
    for claim in claims:  # every epsilon names its accountant, delta, neighbours and where its noise came from
        assert claim.accountant and claim.neighbouring and claim.epsilon >= 0 and 0 <= claim.delta < 1
        if name != "toy":
            assert any(c.startswith("Noise source: reproducible") for c in claim.caveats)
        assert "pure DP" not in claim.text()
    if claims:  # exactly one headline, the figure every single-number view shows
        assert sum(c.headline for c in claims) == 1 and headline_of(run.summary).headline
    elif name == "split_label":  # no (eps, delta) exists: its leakage bound states the noise source instead
        assert any(c.startswith("Noise source") for c in run.summary["label_leakage_bound"]["caveats"])
    frontier = registry.get(name).frontier
    if frontier is not None:  # the declared axes name numbers the summary really has
        values = run_values(run.summary)
        assert frontier.privacy.name in values
        assert any(axis.name in values for axis in frontier.utility), (sorted(values), frontier.utility)


def test_dpsgd_classification_summary_has_its_declared_utility(manager):
    run_id = manager.submit("dpsgd", dict(registry.get("dpsgd").smoke) | {"dataset": "digits", "epochs": 0.5})
    run = manager.wait(run_id, timeout=600)
    assert run.state == "finished", run.traceback
    assert {"headline_epsilon", "best_test_acc", "best_val_acc"} <= set(run_values(run.summary))
    assert run.summary["selected_on"].startswith("validation (") and run.summary["reported_on"].startswith("test (")


@pytest.mark.parametrize("name", [m for m in MECHANISMS if m != "toy"])
def test_secure_noise_is_never_recorded_and_does_not_replay(name, manager, store):
    """Issue 10, item 5: with secure noise the noise comes from OS entropy: two runs of one seed differ,
    and the claims say the noise cannot be regenerated from the record; seeded runs replay exactly."""
    def results(secure: bool) -> str:
        run_id = manager.submit(name, dict(registry.get(name).smoke) | {"secure_noise": secure})
        run = manager.wait(run_id, timeout=600)
        assert run.state == "finished", run.traceback
        caveats = " ".join(c for claim in claims_of(run.summary) for c in claim.caveats)
        caveats += " ".join(run.summary.get("label_leakage_bound", {}).get("caveats", []))
        assert ("secure mode" in caveats) == secure
        return store.export_csv(run_id)

    assert results(False) == results(False)
    assert results(True) != results(True)


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
