"""The contract every registered mechanism keeps, checked through the registry (toy included)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from privengine import registry
from privengine.accounting.events import RELATIONS, epsilon_of_json
from privengine.claims import claims_of, headline_of
from privengine.entries import Mechanism
from privengine.explore.frontier import run_values
from privengine.jobs import JobManager

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
        if name != "toy":  # claims as data: the relation always, events that recompute an epsilon no larger
            assert claim.relation in RELATIONS
            if claim.events:
                at = claim.delta or 1e-12  # a pure claim: its events' epsilon at any delta is at most its own
                recomputed = epsilon_of_json(claim.events, delta=at, relation=claim.relation).epsilon
                assert recomputed <= claim.epsilon * 1.01 + 0.02  # PLD against the claim's accountant (PRV: +-0.02)
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


@pytest.mark.slow
@pytest.mark.parametrize("name", [m for m in MECHANISMS if m != "toy"])
def test_secure_noise_is_never_recorded_and_does_not_replay(name, manager, store):
    """Issue 10, item 5: with secure noise the noise comes from OS entropy: two runs of one seed differ,
    and the claims say the noise cannot be regenerated from the record; seeded runs replay exactly."""
    from privengine.figures.export import run_csv

    def results(secure: bool) -> str:
        run_id = manager.submit(name, dict(registry.get(name).smoke) | {"secure_noise": secure})
        run = manager.wait(run_id, timeout=600)
        assert run.state == "finished", run.traceback
        caveats = " ".join(c for claim in claims_of(run.summary) for c in claim.caveats)
        caveats += " ".join(run.summary.get("label_leakage_bound", {}).get("caveats", []))
        assert ("secure mode" in caveats) == secure
        return run_csv(store, run_id)

    assert results(False) == results(False)
    assert results(True) != results(True)


@pytest.mark.slow
@pytest.mark.parametrize("name", MECHANISMS)
def test_stop_mid_run_within_a_few_polls(name, manager, store, stop_polls):
    run_id = manager.submit(name, _long_config(name))
    deadline = time.monotonic() + 120
    while store.metrics(run_id).empty and store.get_run(run_id).active and time.monotonic() < deadline:
        time.sleep(0.05)
    assert store.get_run(run_id).active, "the run ended before it could be stopped: make its default longer"
    manager.stop(run_id)
    run = manager.wait(run_id, timeout=120)  # a hang guard only: promptness is counted in polls below
    assert run.state == "stopped"
    stop_polls.assert_stopped_promptly(run_id)


def _long_config(name: str) -> dict:
    """The default config: long enough to be stopped while running."""
    return registry.get(name).default_config().to_dict() | ({"steps": 10_000, "delay": 0.01} if name == "toy" else {})


CLOCK_READINGS = ("seconds", "wall_time_s", "sgld_steps_per_s")  # summary keys that time a run, at any depth


def _without_clock_readings(value):
    if isinstance(value, dict):
        return {k: _without_clock_readings(v) for k, v in value.items() if k not in CLOCK_READINGS}
    if isinstance(value, list):
        return [_without_clock_readings(v) for v in value]
    return value


@pytest.mark.slow
@pytest.mark.parametrize("name", MECHANISMS)
def test_two_concurrent_smoke_runs_each_equal_the_run_alone(name, store, monkeypatch):
    """Issue 36, item 5: a sweep executes runs of one process in threads, so every random draw of a run must come
    from the run's own generators. Two smoke runs (seeds 0 and 1) started together (each waits for the other at a
    barrier before its first step) each give, to the bit, the summary (its clock readings aside:
    :data:`CLOCK_READINGS`) and the metrics of the same run executed alone."""
    configs = [dict(registry.get(name).smoke) | {"seed": seed} for seed in (0, 1)]

    def results(manager: JobManager) -> list[tuple[str, str]]:
        run_ids = [manager.submit(name, config) for config in configs]
        try:
            runs = [manager.wait(run_id, timeout=600) for run_id in run_ids]
        finally:
            manager.shutdown()
        for run in runs:
            assert run.state == "finished", run.traceback
        return [(json.dumps(_without_clock_readings(run.summary), sort_keys=True),
                 json.dumps(store.metrics(run.id).values.tolist())) for run in runs]

    alone = results(JobManager(store))
    both_started = threading.Barrier(2, timeout=60)
    load_run = Mechanism.load_run

    def load_run_starting_together(mechanism: Mechanism):
        run = load_run(mechanism)

        def run_once_both_started(config, reporter):
            both_started.wait()
            return run(config, reporter)
        return run_once_both_started

    monkeypatch.setattr(Mechanism, "load_run", load_run_starting_together)
    together = results(JobManager(store, max_concurrent=2))
    for seed, ((summary, metrics), (summary_alone, metrics_alone)) in enumerate(zip(together, alone)):
        assert summary == summary_alone, f"seed {seed}: the summary of the concurrent run differs from the run alone"
        assert metrics == metrics_alone, f"seed {seed}: the metrics of the concurrent run differ from the run alone"
