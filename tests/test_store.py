"""The SQLite run store: concurrency, migrations, interrupted-run recovery, export, deletion."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
import threading

import pandas as pd
import pytest

from privengine.claims import PrivacyClaim
from privengine.errors import RunNotFoundError
from privengine.store import EPSILON_BASIS_ARTIFACT, MIGRATIONS, SCHEMA_VERSION, RunStore, StoreError


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
            while not stop_reading.is_set():
                for run_id in ids:
                    snap = s.snapshot(run_id, max_points=50)
                    seen_counts.append(len(snap.metrics))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in ids]
    read_thread = threading.Thread(target=reader)
    read_thread.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop_reading.set()
    read_thread.join()
    assert not errors, errors
    assert seen_counts, "the reader never got a snapshot"
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
    conn = sqlite3.connect(path)
    for step in MIGRATIONS[:3]:
        for statement in step:
            conn.execute(statement)
    conn.execute("PRAGMA user_version = 3")
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


def test_export_csv_and_json(store):
    run_id = store.create_run("toy", {"steps": 2})
    store.add_metrics(run_id, [(0, "loss", 1.0), (0, "acc", 0.1), (1, "loss", 0.5), (2, "acc", 0.7)])
    store.put_artifact(run_id, "hist", {"counts": [1, 2]})
    store.add_log(run_id, "hello")
    store.mark_ended(run_id, "finished", summary={"final": 0.7})
    frame = pd.read_csv(io.StringIO(store.export_csv(run_id)))
    assert list(frame.columns) == ["step", "acc", "loss"]
    assert frame["step"].tolist() == [0, 1, 2]
    assert frame["loss"].tolist()[:2] == [1.0, 0.5] and pd.isna(frame["loss"].iloc[2])
    doc = json.loads(store.export_json(run_id))
    assert doc["run"]["summary"] == {"final": 0.7}
    assert doc["metrics"]["acc"] == {"step": [0, 2], "value": [0.1, 0.7]}
    assert doc["artifacts"]["hist"] == {"counts": [1, 2]}
    assert doc["logs"][0]["text"] == "hello"


def test_exported_epsilon_columns_name_their_delta_and_accountant(store):
    """Issue 24, item 6: an epsilon column says at which delta and by which accountant it was computed."""
    claim = PrivacyClaim("data-independent (a priori)", 2.5, 1e-5, "RDP of GNMax (Papernot et al. 2018)", "replace one",
                         5.0, (), headline=True)
    run_id = store.create_run("pate", {"delta": 1e-5})
    store.add_metrics(run_id, [(1, "eps_data_dependent", 0.3), (1, "eps_realised", 0.2), (1, "teacher_loss_mean", 1.0),
                               (1, "epochs_done", 3.0)])
    store.mark_ended(run_id, "finished", summary={"privacy": [claim.to_dict()]})
    columns = list(pd.read_csv(io.StringIO(store.export_csv(run_id))).columns)
    tag = " [delta = 1e-05; accountant: RDP of GNMax (Papernot et al. 2018) (the run's headline claim)]"
    assert columns == ["step", "epochs_done", "eps_data_dependent" + tag, "eps_realised" + tag, "teacher_loss_mean"]
    # a run that states each curve's own basis (EPSILON_BASIS_ARTIFACT) is exported with it
    store.put_artifact(run_id, EPSILON_BASIS_ARTIFACT, {"eps_realised": {"delta": 1e-5, "accountant": "Thm 6; realised"}})
    columns = list(pd.read_csv(io.StringIO(store.export_csv(run_id))).columns)
    assert columns[2:4] == ["eps_data_dependent" + tag, "eps_realised [delta = 1e-05; accountant: Thm 6; realised]"]
    no_claim = store.create_run("dpsgd", {"delta": 1e-6, "accountant": "prv"})
    store.add_metrics(no_claim, [(5, "epsilon_each_model", 0.9)])
    store.mark_ended(no_claim, "failed", error="boom")
    assert store.export_csv(no_claim).splitlines()[0] == "step,epsilon_each_model [delta = 1e-06; accountant: prv]"


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
