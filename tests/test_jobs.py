"""The job manager with the test-only toy mechanism: finish, stop, failure, queueing."""

from __future__ import annotations

import time

import pytest

from privengine.claims import headline_of
from privengine.device import resolve_device
from privengine.errors import ConfigError
from privengine.jobs import JobManager
from privengine.reporter import FAILURE_CAVEAT, Reporter


@pytest.fixture
def manager(store):
    m = JobManager(store, max_concurrent=1)
    yield m
    m.shutdown()


def _wait_for_state(store, run_id, states, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        run = store.get_run(run_id)
        if run.state in states:
            return run
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} still {store.get_run(run_id).state}, wanted {states}")


def test_run_finishes_with_metrics_artifacts_and_summary(manager, store):
    run_id = manager.submit("toy", {"steps": 4})
    run = manager.wait(run_id, timeout=60)
    assert run.state == "finished" and run.device and run.started_at and run.finished_at
    # the device the config's value ("auto" by default) resolves to on this machine: cuda where there is a GPU
    assert run.summary["steps_done"] == 4 and run.summary["device"] == resolve_device(run.config["device"]).id
    assert sorted(store.metrics(run_id)["name"].unique()) == ["acc", "loss"]
    assert store.artifacts(run_id)["hist"]["counts"] == [3, 4]


def test_stop_is_honoured_within_a_poll(manager, store, stop_polls):
    run_id = manager.submit("toy", {"steps": 10_000, "delay": 0.05})
    stop_polls.wait_for_a_poll(run_id)  # "running" is set before the run's first poll: stop it mid-run
    manager.stop(run_id)
    run = manager.wait(run_id, timeout=60)  # a hang guard only: promptness is counted in polls below
    assert run.state == "stopped" and run.summary["steps_done"] < 10_000
    stop_polls.assert_stopped_promptly(run_id, most_after_stop=1)


def test_failure_records_message_and_traceback_and_manager_lives_on(manager, store):
    bad = manager.submit("toy", {"steps": 5, "fail_at": 2})
    run = manager.wait(bad, timeout=60)
    assert run.state == "failed"
    assert run.error == "RuntimeError: toy failure at step 2"
    assert "Traceback" in run.traceback and "run_toy" in run.traceback
    assert store.metrics(bad)["step"].max() == 2  # what was reported before the failure is kept
    good = manager.submit("toy", {"steps": 2})
    assert manager.wait(good, timeout=60).state == "finished"


def test_runs_beyond_the_limit_queue_in_order(manager, store):
    ids = [manager.submit("toy", {"steps": 3, "delay": 0.1}) for _ in range(3)]
    states = [store.get_run(i).state for i in ids]
    assert states[1:] == ["queued", "queued"]
    assert manager.ahead_of(ids[2]) == ids[:2]  # the running run, then the one queued before it
    assert manager.ahead_of(ids[0]) == []  # running, not waiting
    finished = [manager.wait(i, timeout=60) for i in ids]
    assert all(r.state == "finished" for r in finished)
    starts = [r.started_at for r in finished]
    ends = [r.finished_at for r in finished]
    assert starts == sorted(starts)
    assert starts[1] >= ends[0] and starts[2] >= ends[1]  # never two at once


def test_stopping_a_queued_run(manager, store):
    first = manager.submit("toy", {"steps": 50, "delay": 0.05})
    queued = manager.submit("toy", {"steps": 2})
    manager.stop(queued)
    assert store.get_run(queued).state == "stopped"
    manager.stop(first)
    assert manager.wait(first, timeout=60).state == "stopped"


def test_two_runs_at_once_with_a_higher_limit(store):
    manager = JobManager(store, max_concurrent=2)
    try:
        a = manager.submit("toy", {"steps": 20, "delay": 0.05})
        b = manager.submit("toy", {"steps": 20, "delay": 0.05})
        _wait_for_state(store, a, {"running"})
        _wait_for_state(store, b, {"running"})
        assert {manager.wait(a, 60).state, manager.wait(b, 60).state} == {"finished"}
    finally:
        manager.shutdown()


def test_stop_through_the_store_flag_as_another_process_would(manager, store):
    run_id = manager.submit("toy", {"steps": 10_000, "delay": 0.02})
    _wait_for_state(store, run_id, {"running"})
    store.request_stop(run_id)  # what `python -m privengine stop ID` does from another process
    assert manager.wait(run_id, timeout=60).state == "stopped"  # a hang guard, not a promptness check


def test_bad_config_is_refused_before_queueing(manager, store):
    with pytest.raises(ConfigError, match="`steps`"):
        manager.submit("toy", {"steps": 0})
    with pytest.raises(ConfigError, match="`device` must be one of auto"):
        manager.submit("toy", {"device": "mps"} if not _has_mps() else {"device": "cuda"})
    assert store.list_runs() == []


def _has_mps() -> bool:
    import torch

    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


def test_reporter_flushes_buffered_points_when_polled(store):
    run_id = store.create_run("toy", {})
    reporter = Reporter(store, run_id)
    reporter.metric(0, x=1.0)  # the first point is written at once
    reporter.metric(1, x=2.0)  # buffered
    assert len(store.metrics(run_id)) == 1
    time.sleep(0.3)
    reporter.should_stop()
    assert len(store.metrics(run_id)) == 2


# ---- a failed run stores the claims it was charged with (issue 24, item 3) ----------------------------

def _toy_with(monkeypatch, run_function) -> None:
    """Swap the toy's run function for this test (the registry entry is restored afterwards)."""
    import dataclasses

    from privengine import registry

    monkeypatch.setitem(registry._mechanisms, "toy", dataclasses.replace(registry.get("toy"), run=run_function))


def _claim(epsilon: float) -> dict:
    from privengine.claims import PrivacyClaim

    return PrivacyClaim("what the toy released", epsilon, 1e-5, "none (test only)", "add/remove one example",
                        headline=True).to_dict()


def test_a_failed_run_stores_the_summary_it_was_charged_with(manager, store, monkeypatch):
    def run(config, reporter):
        computed = []
        reporter.charge(lambda: computed.append(1) or {"steps_done": len(computed), "privacy": [_claim(0.5)]})
        reporter.metric(0, loss=1.0)
        raise RuntimeError("failed after releasing a point")

    _toy_with(monkeypatch, run)
    failed = manager.wait(manager.submit("toy", {}), timeout=60)
    assert failed.state == "failed" and failed.error == "RuntimeError: failed after releasing a point"
    assert failed.summary["steps_done"] == 1 and failed.summary["failed"]  # computed once, when the run failed
    assert headline_of(failed.summary).epsilon == 0.5
    assert headline_of(failed.summary).caveats[-1] == FAILURE_CAVEAT  # the failure itself is not covered
    assert "Traceback" in failed.traceback and not store.metrics(failed.id).empty


def test_a_run_that_returns_stores_what_it_returned_not_its_charge(manager, monkeypatch):
    def run(config, reporter):
        reporter.charge({"privacy": [_claim(0.5)]})
        return {"steps_done": 1, "privacy": [_claim(0.7)]}

    _toy_with(monkeypatch, run)
    finished = manager.wait(manager.submit("toy", {}), timeout=60)
    assert finished.state == "finished" and "failed" not in finished.summary
    assert headline_of(finished.summary).epsilon == 0.7


def test_a_charge_that_cannot_be_computed_is_said_in_the_error(manager, monkeypatch):
    def run(config, reporter):
        reporter.charge(lambda: 1 / 0)
        raise RuntimeError("the run's own error")

    _toy_with(monkeypatch, run)
    failed = manager.wait(manager.submit("toy", {}), timeout=60)
    assert failed.state == "failed" and failed.summary is None
    assert failed.error.startswith("RuntimeError: the run's own error [and its privacy claim could not be computed "
                                   "(ZeroDivisionError: division by zero): what it stored is covered by no claim]")
    assert "While computing the charged claim" in failed.traceback


def test_a_charge_with_two_headlines_is_refused(manager, monkeypatch):
    def run(config, reporter):
        reporter.charge({"privacy": [_claim(0.5), _claim(0.6)]})
        raise RuntimeError("failed")

    _toy_with(monkeypatch, run)
    failed = manager.wait(manager.submit("toy", {}), timeout=60)
    assert failed.summary is None and "exactly one headline claim" in failed.error


def test_join_and_shutdown_leave_no_run_thread_behind(manager, store):
    """A process exits only after the run threads did: interpreter shutdown during a daemon thread's torch work
    aborted the CLI (exit 134) after a finished Fashion-MNIST run."""
    import threading

    first = manager.submit("toy", {"steps": 2})
    manager.wait(first, timeout=30)
    manager.join(first)
    second = manager.submit("toy", {"steps": 10_000, "delay": 0.01})
    manager.shutdown()
    assert store.get_run(first).state == "finished" and store.get_run(second).state == "stopped"
    assert [t.name for t in threading.enumerate() if t.name.startswith("privengine-run-")] == []
