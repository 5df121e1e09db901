"""The SQLite run store: concurrency, migrations, interrupted runs (a dead pid, a silent heartbeat), deletion."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pandas as pd
import pytest

from privengine.claims import PrivacyClaim
from privengine.errors import RunNotFoundError
from privengine.store import DEATH_CAVEAT, MIGRATIONS, SCHEMA_VERSION, RunStore, StoreError, liveness
from tests.conftest import store_at_version


def test_concurrent_writers_and_a_reader(store):
    ids = [store.create_run("toy", {"i": i}) for i in range(4)]
    n_points = 300
    errors: list[BaseException] = []
    stop_reading = threading.Event()
    seen_counts: list[int] = []

    def writer(run_id: str) -> None:
        try:
            s = RunStore(store.path)
            s.mark_running(run_id, device="cpu")
            for step in range(n_points):
                s.add_metrics(run_id, [(step, "loss", 1.0 / (step + 1)), (step, "acc", step / n_points)])
                if step % 50 == 0:
                    s.put_artifact(run_id, "hist", {"step": step})
            s.mark_ended(run_id, "finished", summary={"ok": True})
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    def reader() -> None:
        try:
            s = RunStore(store.path)
            while True:  # a last pass after the writers ended, whenever they end
                done = stop_reading.is_set()
                for run_id in ids:
                    snap = s.snapshot(run_id, max_points=50)
                    seen_counts.append(len(snap.metrics))
                reading.set()
                if done:
                    break
        except BaseException as exc:
            errors.append(exc)
            reading.set()

    threads = [threading.Thread(target=writer, args=(i,)) for i in ids]
    read_thread = threading.Thread(target=reader)
    reading = threading.Event()
    read_thread.start()
    reading.wait(timeout=60)  # the writers start once the reader reads: the writes and reads then overlap
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop_reading.set()
    read_thread.join()
    assert not errors, errors
    assert seen_counts and seen_counts[-1] > 0  # its last pass, after every writer ended, sees their points
    for run_id in ids:
        run = store.get_run(run_id)
        assert run.state == "finished" and run.summary == {"ok": True}
        metrics = store.metrics(run_id)
        assert len(metrics) == 2 * n_points
        assert store.artifacts(run_id)["hist"] == {"step": 250}


def test_downsampling_keeps_last_point_and_caps_size(store):
    run_id = store.create_run("toy", {})
    store.add_metrics(run_id, [(s, "loss", float(s)) for s in range(10_000)])
    thin = store.metrics(run_id, max_points=200)
    assert 100 <= len(thin) <= 201
    assert thin["step"].iloc[-1] == 9999 and thin["step"].iloc[0] == 0
    assert thin["step"].is_monotonic_increasing


def test_non_finite_values_become_missing(store):
    run_id = store.create_run("toy", {})
    store.add_metrics(run_id, [(0, "x", float("nan")), (1, "x", float("inf")), (2, "x", 1.5)])
    values = store.metrics(run_id)["value"].tolist()
    assert pd.isna(values[0]) and pd.isna(values[1]) and values[2] == 1.5


def _v1_database(path):
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO runs (id, mechanism, config, state, created_at, summary)"
                 " VALUES ('old1', 'toy', '{\"steps\": 3}', 'finished', 1.0, '{\"acc\": 0.5}')")
    conn.execute("INSERT INTO metrics (run_id, step, name, value) VALUES ('old1', 0, 'acc', 0.5)")
    conn.commit()
    conn.close()


def test_migration_from_version_1_keeps_data(tmp_path):
    path = tmp_path / "old.sqlite"
    _v1_database(path)
    s = RunStore(path)
    assert s.schema_version() == SCHEMA_VERSION
    run = s.get_run("old1")
    assert run.summary == {"acc": 0.5} and run.source == "unknown" and not run.stop_requested
    assert s.metrics("old1")["value"].tolist() == [0.5]
    s.add_log("old1", "logs table exists after migration")
    assert s.logs("old1")[0][1] == "logs table exists after migration"


def test_migration_names_old_confident_gnmax_figures_for_what_they_are(tmp_path):
    """Issue 24, items 1 and 6: Confident-GNMax runs stored before every submitted query was charged both steps
    keep their curves, renamed (realised figure, odometer), and their sanitized claim loses "publishable"."""
    from privengine.pate.privacy import SANITIZED_LABEL
    path = tmp_path / "v3.sqlite"
    conn = store_at_version(path, 3)
    label = "data-dependent, sanitized through smooth sensitivity (publishable)"
    assert label == SANITIZED_LABEL  # the label PATE runs store
    from privengine.pate.privacy import SANITIZED_CAVEAT
    summary = json.dumps({"privacy": [{"label": label, "epsilon": 3.0, "caveats": [SANITIZED_CAVEAT]},
                                      {"label": "data-dependent (not publishable)", "epsilon": 1.9}],
                          "sanitized_epsilon": {"epsilon": 3.0}, "queries_answered": 7})
    for run_id, aggregator in (("conf", "confident_gnmax"), ("gn", "gnmax")):
        conn.execute("INSERT INTO runs (id, mechanism, config, state, created_at, summary) VALUES (?, 'pate', ?, "
                     "'finished', 1.0, ?)", (run_id, json.dumps({"aggregator": aggregator}), summary))
        conn.executemany("INSERT INTO metrics (run_id, step, name, value) VALUES (?, 1, ?, 1.0)",
                         [(run_id, name) for name in ("eps_data_dependent", "eps_data_independent",
                                                      "teacher_loss_mean")])
    conn.commit()
    conn.close()
    s = RunStore(path)
    assert set(s.metrics("conf")["name"]) == {"eps_realised", "eps_odometer", "teacher_loss_mean"}
    assert set(s.metrics("gn")["name"]) == {"eps_data_dependent", "eps_data_independent", "teacher_loss_mean"}
    old = s.get_run("conf").summary
    sanitized, dependent = (c["label"] for c in old["privacy"])
    assert "publishable)" not in sanitized and "not a bound, do not publish" in sanitized
    assert "may be published" not in old["privacy"][0]["caveats"][0]  # its caveat no longer contradicts the label
    assert "must not be published" in old["privacy"][0]["caveats"][0]
    assert dependent.startswith("realised data-dependent figure") and "not a bound" in dependent
    assert old["sanitized_epsilon"] == {"epsilon": 3.0, "not_a_bound": True} and old["queries_answered"] == 7
    assert s.get_run("gn").summary == json.loads(summary)  # GNMax's charge was right: untouched


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.sqlite"
    RunStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this privengine"):
        RunStore(path)


def test_runs_of_a_dead_process_are_marked_interrupted(store):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    orphan = store.create_run("toy", {})
    alive = store.create_run("toy", {})
    store.mark_running(orphan, device="cpu")
    store.mark_running(alive, device="cpu")
    with store._tx() as conn:  # simulate a run left behind by the dead process
        conn.execute("UPDATE runs SET owner_pid=? WHERE id=?", (dead_pid, orphan))
    assert store.recover_interrupted() == [orphan]
    assert store.get_run(orphan).state == "interrupted"
    assert "ended before the run did" in store.get_run(orphan).error
    assert store.get_run(alive).state == "running"


@pytest.fixture
def live_pid():
    """The pid of a process that lives through the test (not this one): what a reused pid reads as."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield proc.pid
    proc.kill()
    proc.wait()


def _own(store: RunStore, run_id: str, *, host: str, pid: int, silent_s: float) -> None:
    """Leave ``run_id`` owned by ``pid`` on ``host``, its last heartbeat ``silent_s`` seconds ago."""
    with store._tx() as conn:
        conn.execute("UPDATE runs SET owner_host=?, owner_pid=?, heartbeat_at=? WHERE id=?",
                     (host, pid, time.time() - silent_s, run_id))


def _charged_running_run(store: RunStore) -> str:
    """A running run that stored a planned charge and a curve, as a run of a mechanism that states a claim does."""
    run_id = store.create_run("toy", {})
    store.mark_running(run_id, device="cpu")
    claim = PrivacyClaim("toy", 2.0, 1e-5, "toy accountant", "add or remove one example", headline=True)
    store.set_planned_charge(run_id, {"privacy": [claim.to_dict()]})
    store.add_metrics(run_id, [(0, "loss", 1.0)])
    return run_id


def test_a_reused_pid_does_not_keep_a_silent_run_alive(store, live_pid):
    """Issue 36, item 4: a run whose owner died and whose pid another process took read as running for ever. With no
    heartbeat for longer than the limit it is interrupted (and charged), though its pid is alive; the same pid with a
    fresh heartbeat is an owner at work."""
    here = socket.gethostname()
    reused, working = _charged_running_run(store), store.create_run("toy", {})
    _own(store, reused, host=here, pid=live_pid, silent_s=liveness.HEARTBEAT_LIMIT_S + 5)
    _own(store, working, host=here, pid=live_pid, silent_s=liveness.HEARTBEAT_S)
    assert store.recover_interrupted() == [reused]
    run = store.get_run(reused)
    assert run.state == "interrupted" and f"pid {live_pid} on {here}" in run.error
    assert "fell silent (no heartbeat for 65 s, over the 60 s limit) before the run did" in run.error
    assert "charged its whole planned release" in run.error
    assert run.summary["process_died"] and DEATH_CAVEAT in run.summary["privacy"][0]["caveats"]
    assert store.get_run(working).state == "queued"


def test_a_run_of_another_host_is_judged_by_its_heartbeat_alone(store):
    """Issue 36, item 4: runs of another host were never checked. A stale heartbeat interrupts one; a fresh one
    leaves it running, whatever its pid means here (none of this host's processes has it)."""
    dead_pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                                  text=True, check=True).stdout)
    stale, fresh, queued = _charged_running_run(store), _charged_running_run(store), store.create_run("toy", {})
    _own(store, stale, host="other-host", pid=os.getpid(), silent_s=liveness.HEARTBEAT_LIMIT_S + 1)
    _own(store, fresh, host="other-host", pid=dead_pid, silent_s=liveness.HEARTBEAT_LIMIT_S - 10)
    _own(store, queued, host="other-host", pid=dead_pid, silent_s=liveness.HEARTBEAT_LIMIT_S + 1)
    listed = {r.id: r for r in store.list_runs()}
    assert listed[fresh].state == "running"
    assert listed[stale].state == "interrupted" and f"pid {os.getpid()} on other-host" in listed[stale].error
    assert listed[stale].summary["process_died"]
    assert listed[queued].state == "interrupted"
    assert listed[queued].error.startswith("never started: the process (pid ") and "fell silent" in listed[queued].error


def test_a_heartbeat_after_the_read_keeps_the_run(store):
    """A reader that judged a run silent leaves it alone if its owner touches it before the reader writes."""
    run_id = store.create_run("toy", {})
    _own(store, run_id, host="other-host", pid=1, silent_s=liveness.HEARTBEAT_LIMIT_S + 1)
    (row,) = store._conn().execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchall()
    store.touch([run_id])
    assert store._interrupt_orphans([row]) == []
    assert store.get_run(run_id).state == "queued"


@pytest.mark.slow
def test_a_live_owner_keeps_its_runs_alive_past_the_limit(store, monkeypatch):
    """The job manager touches its queued and running runs: with a limit shorter than either run lasts, no read ever
    finds one silent, and both finish."""
    from privengine.jobs import JobManager

    monkeypatch.setattr(liveness, "HEARTBEAT_S", 0.1)
    monkeypatch.setattr(liveness, "HEARTBEAT_LIMIT_S", 2.5)
    manager = JobManager(store)
    try:
        ids = [manager.submit("toy", {"steps": 70, "delay": 0.05}) for _ in range(2)]  # the second queued ~3.5 s
        states = set()
        while any(r.active for r in (store.get_run(i) for i in ids)):
            states |= {r.state for r in store.list_runs()}
            time.sleep(0.05)
        assert "interrupted" not in states and {r.state for r in store.list_runs()} == {"finished"}
        deadline = time.monotonic() + 5
        while manager._heartbeat is not None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert manager._heartbeat is None  # the thread lives only while the queue owns runs
    finally:
        manager.shutdown()


def test_migration_from_version_6_gives_active_runs_a_heartbeat(tmp_path):
    """Schema 7 adds ``heartbeat_at``: an active run stored before gets the migration's time, so a live owner still
    has the whole limit; an ended one none (it needs none)."""
    path = tmp_path / "v6.sqlite"
    conn = store_at_version(path, 6)
    for run_id, state in (("live", "running"), ("done", "finished")):
        conn.execute("INSERT INTO runs (id, mechanism, config, state, created_at, owner_host, owner_pid) "
                     "VALUES (?, 'toy', '{}', ?, 1.0, ?, ?)", (run_id, state, socket.gethostname(), os.getpid()))
    conn.commit()
    conn.close()
    before = time.time()
    s = RunStore(path)
    assert s.schema_version() == SCHEMA_VERSION
    live = s.get_run("live")
    assert live.state == "running" and before - 1 <= live.heartbeat_at <= time.time() + 1
    assert s.get_run("done").heartbeat_at is None


def test_delete_refuses_active_runs_and_cascades(store):
    run_id = store.create_run("toy", {})
    with pytest.raises(StoreError, match="stop it before deleting"):
        store.delete_run(run_id)
    store.add_metrics(run_id, [(0, "x", 1.0)])
    store.mark_ended(run_id, "finished")
    store.delete_run(run_id)
    with pytest.raises(RunNotFoundError):
        store.get_run(run_id)
    assert store.metrics(run_id).empty


def test_list_runs_filters(store):
    a = store.create_run("toy", {})
    b = store.create_run("other", {})
    store.mark_ended(b, "failed", error="boom")
    assert [r.id for r in store.list_runs(mechanism="toy")] == [a]
    assert [r.id for r in store.list_runs(states=["failed"])] == [b]
    assert [r.id for r in store.list_runs()] == [b, a]


def test_migration_says_old_mnist_sanitized_figures_are_not_covered(tmp_path):
    """Issue 35, item 4 (review of 06ce2cd): the sanitizer's settings were tuned on MNIST votes, so new MNIST runs
    say their sanitized figure is not covered; runs stored before said "publishable". Migration 7 -> 8 gives them the
    label, condition and caveats a new MNIST run states (the texts PATE writes now), and leaves other data alone."""
    from privengine.pate import privacy as P

    path = tmp_path / "v7.sqlite"
    conn = store_at_version(path, 7)
    fixed = "Fixed before the votes were seen, so the choices release nothing: lam (rule), beta = 0.3/lam."
    common = [P.UNPROTECTED_CAVEAT, "noise caveat"]
    summary = json.dumps({"privacy": [
        {"label": "data-independent (a priori)", "epsilon": 7.35, "caveats": common, "headline": True},
        {"label": "data-dependent (not publishable)", "epsilon": 1.9, "caveats": [P.DATA_DEPENDENT_CAVEAT, *common]},
        {"label": P.SANITIZED_LABEL, "epsilon": 3.4, "caveats": [P.SANITIZED_CAVEAT, "how", fixed, *common],
         "condition": "≥ the exact figure with probability 0.95"}]})
    for run_id, dataset in (("mnist", "mnist"), ("fmnist", "fashion_mnist")):
        conn.execute("INSERT INTO runs (id, mechanism, config, state, created_at, summary) VALUES (?, 'pate', ?, "
                     "'finished', 1.0, ?)", (run_id, json.dumps({"aggregator": "confident_gnmax",
                                                                 "dataset": dataset}), summary))
    conn.commit()
    conn.close()
    s = RunStore(path)
    a_priori, dependent, sanitized = s.get_run("mnist").summary["privacy"]
    assert sanitized["label"] == P.SANITIZED_TUNED_LABEL and sanitized["condition"] == P.TUNED_CONDITION
    assert sanitized["caveats"][0] == P.TUNED_CAVEAT and sanitized["caveats"][2].startswith("Not fixed before")
    assert dependent["caveats"][0] == P.DATA_DEPENDENT_TUNED_CAVEAT
    assert a_priori["caveats"][0] == P.UNPROTECTED_TUNED_CAVEAT and a_priori["epsilon"] == 7.35
    assert "may be published" not in json.dumps(s.get_run("mnist").summary)
    assert s.get_run("fmnist").summary == json.loads(summary)  # not tuned on Fashion-MNIST: untouched


def test_runs_created_in_one_clock_tick_list_in_a_fixed_order(store, monkeypatch):
    """Issue 36, item 6: list_runs ordered by creation time only, so runs created within one tick of the clock came
    back in an order SQLite was free to change; the id breaks the tie."""
    monkeypatch.setattr(time, "time", lambda: 1_700_000_000.0)
    ids = [store.create_run("toy", {"steps": k}) for k in range(5)]
    assert [r.id for r in store.list_runs()] == sorted(ids, reverse=True)
    assert [r.id for r in store.list_runs(limit=2)] == sorted(ids, reverse=True)[:2]
