"""The run store: one SQLite file of runs, their configs, metrics, artifacts and logs, and sweeps.

One file (``$PRIVENGINE_HOME/runs.sqlite``, default ``~/.privengine``) in WAL mode, shared by the dashboard, the
CLI and the job threads. Each thread gets its own connection; writes are short ``BEGIN IMMEDIATE`` transactions,
so a job thread writing metrics and the UI reading a snapshot never block each other for long. Opening a store
upgrades its schema (:func:`.schema.migrate`).

Every read of runs first interrupts the active runs whose owner is gone (:mod:`.liveness`: a dead pid on this
host, or a heartbeat older than its limit), so no listing shows a dead run as running. A run whose process dies
(or its Ray worker or node) after storing outputs is charged the planned charge it stored before its first output
(``reporter.charge_plan``; :meth:`RunStore.death_charge`): the store copies that summary, adding a caveat, and
knows nothing of any mechanism.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

if TYPE_CHECKING:
    import pandas as pd

from ..claims import with_caveat
from ..errors import ConfigError, RunNotFoundError, StoreError
from ..jsonable import to_jsonable
from . import liveness
from .ledger_tables import LedgerTables
from .model_files import ModelFiles
from .records import (ACTIVE_STATES, NAME_MAX_CHARS, NOTES_MAX_CHARS, TERMINAL_STATES, RunRecord, RunSnapshot,
                      SweepRecord, finite_or_none, run_record, sweep_record)
from .schema import migrate
from .upgrades import UpgradeTables

# Why a run ended by the death of its process (or its Ray worker or node) states no claim when it stored no planned
# charge (a run stored before planned charges, or of a mechanism that states no claim).
NO_CLAIM_AFTER_DEATH = "the claim it was charged with lived in the process that died and could not be stored"
# The caveat of the claims of a run charged its planned release after the death of its process.
DEATH_CAVEAT = ("Its process (or its Ray worker or node) died before the run ended, so what it released before that "
                "is not known: it is charged its whole planned release (every model, query or draw it would have "
                "released had it finished; the planned charge it stored before its first output), which covers "
                "every output its claims cover whenever it died; the diagnostics its caveats name are covered by no "
                "claim. Do not publish the moment it died.")
_ACTIVE = f"state IN ({', '.join(repr(state) for state in ACTIVE_STATES)})"  # SQL: the run is queued or running


def default_home() -> Path:
    """The data directory: ``$PRIVENGINE_HOME`` or ``~/.privengine``."""
    return Path(os.environ.get("PRIVENGINE_HOME") or Path.home() / ".privengine")


class RunStore(LedgerTables, UpgradeTables, ModelFiles):
    """Thread-safe access to the run database (one SQLite connection per thread); the ledger's queries (data
    sources, budgets) are :class:`~.ledger_tables.LedgerTables`', the one-time upgrades'
    :class:`~.upgrades.UpgradeTables`', the files of its kept models :class:`~.model_files.ModelFiles`'."""

    def __init__(self, path: str | os.PathLike | None = None):
        self.path = Path(path) if path is not None else default_home() / "runs.sqlite"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._migrate()

    # ---- connections and transactions -------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=ON")
            self._local.conn = conn
        return conn

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close this thread's connection (other threads' close when they end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def schema_version(self) -> int:
        return self._conn().execute("PRAGMA user_version").fetchone()[0]

    def _migrate(self) -> None:
        with self._tx() as conn:
            migrate(conn, self.path)

    # ---- writing ----------------------------------------------------------------------

    def create_run(self, mechanism: str, config: dict[str, Any], *, source: str = "api",
                   sweep_id: str | None = None, sweep_point: int | None = None, data_source: str | None = None) -> str:
        """Insert a queued run owned by this process (at ``sweep_point`` of ``sweep_id``, if given); return its id.
        Its first heartbeat is its creation: the owner keeps touching it from then on (:meth:`touch`).
        ``source``: who launched it (``cli``, ``dashboard``, ...); ``data_source``: the private data source it
        reads (:mod:`privengine.ledger`; None: the ledger computes it from the config on first use)."""
        run_id = uuid.uuid4().hex[:10]
        now = time.time()
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO runs (id, mechanism, config, state, created_at, source, owner_host, owner_pid,"
                " sweep_id, sweep_point, heartbeat_at, data_source) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, mechanism, json.dumps(config, sort_keys=True), now, source,
                 socket.gethostname(), os.getpid(), sweep_id, sweep_point, now, data_source))
        return run_id

    def touch(self, run_ids: Iterable[str]) -> None:
        """The owner's heartbeat: mark these runs, those of them still active, alive now (:mod:`.liveness`)."""
        ids = list(run_ids)
        if ids:
            with self._tx() as conn:
                conn.execute(f"UPDATE runs SET heartbeat_at=? WHERE id IN ({','.join('?' * len(ids))}) AND {_ACTIVE}",
                             (time.time(), *ids))

    def create_sweep(self, mechanism: str, spec: dict[str, Any], *, source: str = "api",
                     executor: str = "local") -> str:
        """Insert a sweep (its runs are added with :meth:`create_run`); return its id."""
        sweep_id = "s" + uuid.uuid4().hex[:9]
        with self._tx() as conn:
            conn.execute("INSERT INTO sweeps (id, mechanism, spec, created_at, source, executor)"
                         " VALUES (?, ?, ?, ?, ?, ?)",
                         (sweep_id, mechanism, json.dumps(to_jsonable(spec), sort_keys=True), time.time(), source,
                          executor))
        return sweep_id

    def set_sweep_stop(self, sweep_id: str, requested: bool) -> None:
        """Mark a sweep as stopped by its user (or resumed), so no executor starts its missing runs."""
        self.get_sweep(sweep_id)
        with self._tx() as conn:
            conn.execute("UPDATE sweeps SET stop_requested=? WHERE id=?", (int(requested), sweep_id))

    def mark_running(self, run_id: str, *, device: str) -> None:
        """A queued run has started (a run that has already ended is left as it is)."""
        with self._tx() as conn:
            conn.execute("UPDATE runs SET state='running', device=?, started_at=? WHERE id=? AND state='queued'",
                         (device, time.time(), run_id))

    def mark_ended(self, run_id: str, state: str, *, summary: dict | None = None,
                   error: str | None = None, traceback: str | None = None) -> None:
        """Record a terminal state (finished, failed, stopped or interrupted)."""
        if state not in TERMINAL_STATES:
            raise ValueError(f"state must be one of {TERMINAL_STATES}; got {state!r}")
        summary_json = None if summary is None else json.dumps(to_jsonable(summary))
        with self._tx() as conn:
            conn.execute("UPDATE runs SET state=?, finished_at=?, summary=?, error=?, traceback=? WHERE id=?",
                         (state, time.time(), summary_json, error, traceback, run_id))

    def add_metrics(self, run_id: str, rows: Iterable[tuple[int, str, float]]) -> None:
        """Append metric points ``(step, name, value)``; NaN and inf are stored as NULL."""
        clean = [(run_id, int(s), n, finite_or_none(v)) for s, n, v in rows]
        if clean:
            with self._tx() as conn:
                conn.executemany("INSERT INTO metrics (run_id, step, name, value) VALUES (?, ?, ?, ?)", clean)

    def put_artifact(self, run_id: str, name: str, data: Any) -> None:
        """Store (or replace) a JSON artifact such as a histogram or a table."""
        payload = json.dumps(to_jsonable(data))
        with self._tx() as conn:
            conn.execute("INSERT INTO artifacts (run_id, name, data, updated_at) VALUES (?, ?, ?, ?)"
                         " ON CONFLICT(run_id, name) DO UPDATE SET data=excluded.data, updated_at=excluded.updated_at",
                         (run_id, name, payload, time.time()))

    def set_planned_charge(self, run_id: str, summary: dict[str, Any]) -> None:
        """Store the summary charging the run's whole planned release (``reporter.charge_plan``), replacing any
        earlier one: what the run is charged should its process die (:meth:`death_charge`)."""
        with self._tx() as conn:
            conn.execute("UPDATE runs SET planned_charge=? WHERE id=?", (json.dumps(to_jsonable(summary)), run_id))

    def planned_charge(self, run_id: str) -> dict[str, Any] | None:
        """The run's stored planned charge (:meth:`set_planned_charge`); None if it stored none."""
        row = self._conn().execute("SELECT planned_charge FROM runs WHERE id=?", (run_id,)).fetchone()
        return None if row is None or row[0] is None else json.loads(row[0])

    def add_log(self, run_id: str, text: str) -> None:
        with self._tx() as conn:
            conn.execute("INSERT INTO logs (run_id, ts, text) VALUES (?, ?, ?)", (run_id, time.time(), text))

    def set_progress(self, run_id: str, fraction: float, text: str = "") -> None:
        with self._tx() as conn:
            conn.execute("UPDATE runs SET progress=?, progress_text=? WHERE id=?",
                         (min(max(float(fraction), 0.0), 1.0), text, run_id))

    def set_label(self, run_id: str, *, name: str | None = None, notes: str | None = None) -> RunRecord:
        """Set a run's name and/or notes (None leaves one as it is), active or ended; returns the updated run.
        Surrounding whitespace is dropped; a name is one line of at most :data:`NAME_MAX_CHARS` characters, notes
        at most :data:`NOTES_MAX_CHARS` (ConfigError naming the field otherwise)."""
        self.get_run(run_id)
        changes = {}
        if name is not None:
            name = name.strip()
            if len(name) > NAME_MAX_CHARS or "\n" in name:
                raise ConfigError("Run name", f"must be one line of at most {NAME_MAX_CHARS} characters; got "
                                              f"{len(name)} characters")
            changes["name"] = name
        if notes is not None:
            notes = notes.strip()
            if len(notes) > NOTES_MAX_CHARS:
                raise ConfigError("Notes", f"must be at most {NOTES_MAX_CHARS} characters; got {len(notes)}")
            changes["notes"] = notes
        if changes:
            with self._tx() as conn:
                conn.execute(f"UPDATE runs SET {', '.join(f'{k}=?' for k in changes)} WHERE id=?",
                             (*changes.values(), run_id))
        return self.get_run(run_id)

    def request_stop(self, run_id: str) -> None:
        """Ask a run to stop; the process that executes it sees the flag within a second."""
        self.get_run(run_id)
        with self._tx() as conn:
            conn.execute("UPDATE runs SET stop_requested=1 WHERE id=?", (run_id,))

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its metrics, artifacts, logs and kept models; refused while it is active."""
        run = self.get_run(run_id)
        if run.active:
            raise StoreError(f"run {run_id} is {run.state}; stop it before deleting it")
        with self._tx() as conn:
            conn.execute("DELETE FROM runs WHERE id=?", (run_id,))
        self.delete_models(run.id)

    def recover_interrupted(self) -> list[str]:
        """Mark queued or running runs whose owning process is gone as interrupted; return their ids.

        The owner is gone when its pid is dead on this host or its heartbeat is older than
        :data:`.liveness.HEARTBEAT_LIMIT_S` (a run of another host is judged by its heartbeat alone; see
        :mod:`.liveness`). Every read of runs (:meth:`get_run`, :meth:`list_runs`, :meth:`sweep_runs`) applies it
        first, in one query over the active runs, so a run whose process was killed never reads as queued or
        running.
        """
        rows = self._conn().execute(
            f"SELECT id, state, owner_host, owner_pid, heartbeat_at FROM runs WHERE {_ACTIVE}").fetchall()
        return self._interrupt_orphans(rows)

    def _interrupt_orphans(self, rows: Iterable[sqlite3.Row]) -> list[str]:
        """Of ``rows`` (with id, state, owner_host, owner_pid, heartbeat_at), mark those active whose owner is gone
        (:func:`.liveness.owner_gone`) as interrupted, each with a sentence saying what ended and what covers what it
        stored, and the summary charging it (:meth:`death_charge`); return their ids. A run touched since it was
        read, or ended meanwhile, is left as it is."""
        now, host = time.time(), socket.gethostname()
        marked = []
        for row in rows:
            gone = liveness.owner_gone(row, now=now, host=host) if row["state"] in ACTIVE_STATES else None
            if gone is None:
                continue
            error, summary = self._orphan_end(row, gone)
            with self._tx() as conn:  # only if unchanged: a reader never overwrites an ending or a fresh heartbeat
                changed = conn.execute(f"UPDATE runs SET state='interrupted', finished_at=?, error=?, summary=? "
                                       f"WHERE id=? AND {_ACTIVE} AND heartbeat_at IS ?",
                                       (time.time(), error, None if summary is None else json.dumps(summary),
                                        row["id"], row["heartbeat_at"])).rowcount
            if changed:
                marked.append(row["id"])
        return marked

    def _orphan_end(self, row: sqlite3.Row, gone: liveness.OwnerGone) -> tuple[str, dict[str, Any] | None]:
        """Why an orphaned run is interrupted and what covers what it stored: ``(error, summary)``, the summary its
        planned charge (:meth:`death_charge`; the summary it was charged with in memory died with its process)."""
        if row["state"] == "queued":
            return (f"never started: {gone.who} that queued it {gone.how} before it began; nothing of it ran or was "
                    "stored"), None
        ended = f"{gone.who} running it {gone.how} before the run did ({gone.cause})"
        clause, summary = self.death_charge(row["id"])
        if not clause:  # it stored nothing
            return f"{ended}, before it stored any output", None
        return f"{ended}{clause}", summary

    def death_charge(self, run_id: str, why: str = NO_CLAIM_AFTER_DEATH) -> tuple[str, dict[str, Any] | None]:
        """What covers the outputs of a started run whose process (or Ray worker or node) died: ``(clause,
        summary)``, the clause ending the sentence that says what died and the summary to store with the run.

        - no output stored: ``("", None)``, nothing needs a claim;
        - a planned charge stored (``reporter.charge_plan``, before the run's first output): that summary, its every
          claim with :data:`DEATH_CAVEAT`, marked ``failed`` and ``process_died``. What the run released before it
          died is not known (the claim it was charged with in memory died with it), and its whole planned release
          covers it whatever the moment of death. The copy is the run's own JSON: nothing is computed here;
        - none (a run stored before planned charges, or of a mechanism that states no claim): no summary, and a
          clause saying that no claim covers what it stored (``why``: why none could be stored) rather than a
          made-up epsilon.
        """
        if not self.has_outputs(run_id):
            return "", None
        planned = self.planned_charge(run_id)
        if planned is None:
            return (f"; the curves and tables it stored before that are covered by no privacy claim ({why}): do not "
                    "publish them"), None
        return ("; it is charged its whole planned release (the planned charge it stored before its first output), "
                "which covers every output its claims cover (not the diagnostics their caveats name): what it released "
                "before it died is not known", with_caveat(planned, DEATH_CAVEAT, failed=True, process_died=True))

    def has_outputs(self, run_id: str) -> bool:
        """Whether the run stored any metric point or artifact (outputs a claim must cover)."""
        return bool(self._conn().execute(
            "SELECT EXISTS(SELECT 1 FROM metrics WHERE run_id=?) OR EXISTS(SELECT 1 FROM artifacts WHERE run_id=?)",
            (run_id, run_id)).fetchone()[0])

    # ---- reading ----------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        """One run; an active run whose owner is gone (:mod:`.liveness`) is marked interrupted first (never shown
        running)."""
        row = self._conn().execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(run_id)
        if self._interrupt_orphans([row]):
            row = self._conn().execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return run_record(row)

    def get_sweep(self, sweep_id: str) -> SweepRecord:
        row = self._conn().execute("SELECT * FROM sweeps WHERE id=?", (sweep_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(sweep_id, what="sweep")
        return sweep_record(row)

    def list_sweeps(self, *, mechanism: str | None = None, limit: int | None = None) -> list[SweepRecord]:
        """Sweeps, newest first."""
        sql, args = "SELECT * FROM sweeps", []
        if mechanism is not None:
            sql, args = sql + " WHERE mechanism=?", [mechanism]
        sql += " ORDER BY created_at DESC, id DESC" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return [sweep_record(r) for r in self._conn().execute(sql, args).fetchall()]

    def sweep_runs(self, sweep_id: str) -> list[RunRecord]:
        """The runs of a sweep, by point then creation (a resumed point may hold several attempts); runs whose
        owner is gone read as interrupted (:meth:`recover_interrupted`)."""
        self.recover_interrupted()
        rows = self._conn().execute("SELECT * FROM runs WHERE sweep_id=? ORDER BY sweep_point, created_at",
                                    (sweep_id,)).fetchall()
        return [run_record(r) for r in rows]

    def ids_starting_with(self, prefix: str) -> dict[str, list[str]]:
        """The run ids and the sweep ids that start with ``prefix``: ``{"run": [...], "sweep": [...]}``."""
        return {what: [r[0] for r in self._conn().execute(
                    f"SELECT id FROM {table} WHERE substr(id, 1, ?) = ? ORDER BY id", (len(prefix), prefix))]
                for what, table in (("run", "runs"), ("sweep", "sweeps"))}

    def stop_requested(self, run_id: str) -> bool:
        row = self._conn().execute("SELECT stop_requested FROM runs WHERE id=?", (run_id,)).fetchone()
        return bool(row and row[0])

    def list_runs(self, *, mechanism: str | Iterable[str] | None = None,
                  states: Iterable[str] | None = None, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first, optionally filtered by mechanism(s) and state(s); runs whose owner is gone read
        as interrupted (:meth:`recover_interrupted`)."""
        self.recover_interrupted()
        where, args = [], []
        if mechanism is not None:
            names = [mechanism] if isinstance(mechanism, str) else list(mechanism)
            where.append(f"mechanism IN ({','.join('?' * len(names))})")
            args += names
        if states is not None:
            states = list(states)
            where.append(f"state IN ({','.join('?' * len(states))})")
            args += states
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "")
        sql += " ORDER BY created_at DESC, id DESC"  # the id breaks ties of runs created in one clock tick
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [run_record(r) for r in self._conn().execute(sql, args).fetchall()]

    def mechanisms(self) -> list[str]:
        """The mechanisms that have stored runs (registered or not)."""
        return [r[0] for r in self._conn().execute("SELECT DISTINCT mechanism FROM runs ORDER BY mechanism")]

    def metrics(self, run_id: str, *, names: Iterable[str] | None = None,
                max_points: int | None = None) -> pd.DataFrame:
        """Metric points as a long table (step, name, value), ordered by name and step.

        With ``max_points``, each metric is thinned to about that many evenly spaced
        points (always keeping its last one) so that drawing a long run stays cheap.
        """
        args: list[Any] = [run_id]
        name_filter = ""
        if names is not None:
            names = list(names)
            name_filter = f" AND name IN ({','.join('?' * len(names))})"
            args += names
        if max_points is None:
            sql = f"SELECT step, name, value FROM metrics WHERE run_id=?{name_filter} ORDER BY name, step, rowid"
        else:
            cap = max(int(max_points), 2)
            sql = (f"WITH m AS (SELECT step, name, value, ROW_NUMBER() OVER w AS rn, COUNT(*) OVER (PARTITION BY name) AS n"
                   f" FROM metrics WHERE run_id=?{name_filter} WINDOW w AS (PARTITION BY name ORDER BY step, rowid))"
                   f" SELECT step, name, value FROM m WHERE n <= {cap} OR (rn - 1) % ((n + {cap} - 1) / {cap}) = 0"
                   " OR rn = n ORDER BY name, step, rn")
        rows = self._conn().execute(sql, args).fetchall()
        import pandas as pd  # here, not at the top: the CLI and the job manager never need it (1 s to import)

        frame = pd.DataFrame([tuple(r) for r in rows], columns=["step", "name", "value"])
        frame["value"] = frame["value"].astype(float)
        return frame

    def artifacts(self, run_id: str) -> dict[str, Any]:
        rows = self._conn().execute("SELECT name, data FROM artifacts WHERE run_id=?", (run_id,)).fetchall()
        return {r["name"]: json.loads(r["data"]) for r in rows}

    def logs(self, run_id: str, *, limit: int = 200) -> list[tuple[float, str]]:
        """The last ``limit`` log lines of a run, oldest first."""
        rows = self._conn().execute("SELECT ts, text FROM logs WHERE run_id=? ORDER BY ts DESC, rowid DESC LIMIT ?",
                                    (run_id, limit)).fetchall()
        return [(r["ts"], r["text"]) for r in reversed(rows)]

    def snapshot(self, run_id: str, *, max_points: int = 400) -> RunSnapshot:
        """A consistent-enough view of a run for drawing (each query sees committed data)."""
        return RunSnapshot(self.get_run(run_id), self.metrics(run_id, max_points=max_points), self.artifacts(run_id))
