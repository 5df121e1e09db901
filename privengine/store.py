"""SQLite run store: runs, their configs, metrics, artifacts and logs.

One file (``$PRIVENGINE_HOME/runs.sqlite``, default ``~/.privengine``) in WAL
mode, shared by the dashboard, the CLI and the job threads. Each thread gets its
own connection; writes are short ``BEGIN IMMEDIATE`` transactions, so a job
thread writing metrics and the UI reading a snapshot never block each other for
long. The schema version lives in ``PRAGMA user_version`` and is upgraded by the
ordered migrations in :data:`MIGRATIONS`.

A run whose process dies (or its Ray worker or node) after storing outputs is charged the planned charge it
stored before its first output (``reporter.charge_plan``; :meth:`RunStore.death_charge`): the store copies that
summary, adding a caveat, and knows nothing of any mechanism.

Longer than 500 lines because every SQL statement of privengine lives in this one module:
the schema, the migrations that rewrite stored runs and the queries over them change
together, and one class owns the connections they share. If it grows further, the
migrations (their texts and the stored labels they rewrite) are the part to move out.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

if TYPE_CHECKING:
    import pandas as pd

from .errors import ConfigError, PrivengineError, RunNotFoundError
from .claims import headline_of, with_caveat
from .jsonable import to_jsonable

# The artifact in which a run states, per epsilon metric it stores, ``{"delta": ..., "accountant": ...}``: what
# an export names beside that column (:func:`epsilon_column`).
EPSILON_BASIS_ARTIFACT = "epsilon_basis"

ACTIVE_STATES = ("queued", "running")
TERMINAL_STATES = ("finished", "failed", "stopped", "interrupted")
STATES = ACTIVE_STATES + TERMINAL_STATES
# Why a run ended by the death of its process (or its Ray worker or node) states no claim when it stored no planned
# charge (a run stored before planned charges, or of a mechanism that states no claim).
NO_CLAIM_AFTER_DEATH = "the claim it was charged with lived in the process that died and could not be stored"
# The caveat of the claims of a run charged its planned release after the death of its process.
DEATH_CAVEAT = ("Its process (or its Ray worker or node) died before the run ended, so what it released before that "
                "is not known: it is charged its whole planned release (every model, query or draw it would have "
                "released had it finished; the planned charge it stored before its first output), which covers "
                "whatever it stored. Do not publish the moment it died.")

_OLD_CONFIDENT = ("SELECT id FROM runs WHERE mechanism = 'pate' "
                  "AND json_extract(config, '$.aggregator') = 'confident_gnmax'")
_SANITIZED_LABEL = "data-dependent, sanitized through smooth sensitivity (publishable)"
_DATA_DEPENDENT_LABEL = "data-dependent (not publishable)"
_OLD_DATA_DEPENDENT_LABEL = ("realised data-dependent figure, no GNMax step for unanswered queries (stored before "
                             "that was fixed): not a bound; not publishable")
_SANITIZED_MAY_BE_PUBLISHED = "Unlike the raw figure it may be published"  # in the sanitized claim's caveat
_OLD_SANITIZED_CAVEAT = ("Stored before issue 24: released from a realised RDP that leaves out unanswered queries, "
                         "so it is not a bound and must not be published")
_OLD_SANITIZED_LABEL = ("data-dependent, sanitized from a realised RDP that leaves out the GNMax step of unanswered "
                        "queries (stored before that was fixed): not a bound, do not publish")

# Each entry upgrades the schema from version i to i + 1 (index i).
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 0 -> 1: the first schema
        """CREATE TABLE runs (
            id TEXT PRIMARY KEY, mechanism TEXT NOT NULL, config TEXT NOT NULL,
            state TEXT NOT NULL, device TEXT, created_at REAL NOT NULL,
            started_at REAL, finished_at REAL, error TEXT, traceback TEXT, summary TEXT)""",
        """CREATE TABLE metrics (
            run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            step INTEGER NOT NULL, name TEXT NOT NULL, value REAL)""",
        "CREATE INDEX metrics_by_run ON metrics(run_id, name, step)",
        """CREATE TABLE artifacts (
            run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            name TEXT NOT NULL, data TEXT NOT NULL, updated_at REAL NOT NULL,
            PRIMARY KEY (run_id, name))""",
    ),
    (  # 1 -> 2: cross-process ownership (interrupted-run recovery, stop from another process), progress, logs
        "ALTER TABLE runs ADD COLUMN source TEXT NOT NULL DEFAULT 'unknown'",
        "ALTER TABLE runs ADD COLUMN owner_host TEXT",
        "ALTER TABLE runs ADD COLUMN owner_pid INTEGER",
        "ALTER TABLE runs ADD COLUMN stop_requested INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE runs ADD COLUMN progress REAL",
        "ALTER TABLE runs ADD COLUMN progress_text TEXT",
        """CREATE TABLE logs (
            run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
            ts REAL NOT NULL, text TEXT NOT NULL)""",
        "CREATE INDEX logs_by_run ON logs(run_id, ts)",
        "CREATE INDEX runs_by_created ON runs(created_at)",
    ),
    (  # 2 -> 3: sweeps (a grid of runs over knobs and seeds); each run may belong to one, at one point
        """CREATE TABLE sweeps (
            id TEXT PRIMARY KEY, mechanism TEXT NOT NULL, spec TEXT NOT NULL, created_at REAL NOT NULL,
            source TEXT NOT NULL, executor TEXT NOT NULL, stop_requested INTEGER NOT NULL DEFAULT 0)""",
        "ALTER TABLE runs ADD COLUMN sweep_id TEXT REFERENCES sweeps(id) ON DELETE SET NULL",
        "ALTER TABLE runs ADD COLUMN sweep_point INTEGER",
        "CREATE INDEX runs_by_sweep ON runs(sweep_id, sweep_point)",
    ),
    (  # 3 -> 4: Confident-GNMax runs stored before issue 24 charged an unanswered query its threshold step only.
        # Their data-dependent curve is the realised (paper-style) figure, their data-independent curve the
        # odometer over the answered queries, and their sanitized figure rests on the realised RDP, which is not a
        # bound: name each for what it is.
        f"UPDATE metrics SET name = 'eps_realised' WHERE name = 'eps_data_dependent' AND run_id IN ({_OLD_CONFIDENT})",
        f"UPDATE metrics SET name = 'eps_odometer' WHERE name = 'eps_data_independent' "
        f"AND run_id IN ({_OLD_CONFIDENT})",
        f"UPDATE runs SET summary = replace(summary, '\"{_SANITIZED_LABEL}\"', '\"{_OLD_SANITIZED_LABEL}\"') "
        f"WHERE id IN ({_OLD_CONFIDENT})",
        f"UPDATE runs SET summary = replace(summary, '\"{_DATA_DEPENDENT_LABEL}\"', '\"{_OLD_DATA_DEPENDENT_LABEL}\"') "
        f"WHERE id IN ({_OLD_CONFIDENT})",
        f"UPDATE runs SET summary = replace(summary, '{_SANITIZED_MAY_BE_PUBLISHED}', '{_OLD_SANITIZED_CAVEAT}') "
        f"WHERE id IN ({_OLD_CONFIDENT})",
        "UPDATE runs SET summary = json_set(summary, '$.sanitized_epsilon.not_a_bound', json('true')) "
        f"WHERE id IN ({_OLD_CONFIDENT}) AND json_extract(summary, '$.sanitized_epsilon') IS NOT NULL",
    ),
    (  # 4 -> 5: a run's name and notes, written by its user (shown in tables, links and reports)
        "ALTER TABLE runs ADD COLUMN name TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT ''",
    ),
    (  # 5 -> 6: the summary charging a run's whole planned release, stored before its first output: what a run
        # whose process dies is charged (RunStore.death_charge). Runs stored before have none (NULL).
        "ALTER TABLE runs ADD COLUMN planned_charge TEXT",
    ),
)
NAME_MAX_CHARS, NOTES_MAX_CHARS = 80, 4000  # a name fits a table cell and a legend; notes a paragraph or a few
SCHEMA_VERSION = len(MIGRATIONS)


def default_home() -> Path:
    """The data directory: ``$PRIVENGINE_HOME`` or ``~/.privengine``."""
    return Path(os.environ.get("PRIVENGINE_HOME") or Path.home() / ".privengine")


@dataclass(frozen=True)
class RunRecord:
    """One row of the runs table, decoded."""

    id: str
    mechanism: str
    config: dict[str, Any]
    state: str
    device: str | None
    created_at: float
    started_at: float | None
    finished_at: float | None
    error: str | None
    traceback: str | None
    summary: dict[str, Any] | None
    source: str
    owner_host: str | None
    owner_pid: int | None
    stop_requested: bool
    progress: float | None
    progress_text: str | None
    sweep_id: str | None = None
    sweep_point: int | None = None
    name: str = ""
    notes: str = ""

    @property
    def title(self) -> str:
        """``"name (id)"`` for a named run, else its id: how links and legends name it."""
        return f"{self.name} ({self.id})" if self.name else self.id

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def elapsed_s(self) -> float | None:
        """Seconds spent running (so far, for a live run)."""
        if self.started_at is None:
            return None
        return (self.finished_at or time.time()) - self.started_at


@dataclass(frozen=True)
class SweepRecord:
    """One row of the sweeps table, decoded; ``spec`` is :meth:`privengine.explore.SweepSpec.to_dict`."""

    id: str
    mechanism: str
    spec: dict[str, Any]
    created_at: float
    source: str
    executor: str
    stop_requested: bool


@dataclass
class RunSnapshot:
    """What a page needs to draw one run: the record, its (downsampled) metrics and artifacts."""

    run: RunRecord
    metrics: pd.DataFrame
    artifacts: dict[str, Any] = field(default_factory=dict)


class StoreError(PrivengineError):
    """The store refused an operation (e.g. deleting a run that is still running)."""


class RunStore:
    """Thread-safe access to the run database (one SQLite connection per thread)."""

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
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema version {version}, newer than this privengine "
                                 f"({SCHEMA_VERSION}); upgrade privengine or set PRIVENGINE_HOME elsewhere")
            for step in MIGRATIONS[version:]:
                for statement in step:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ---- writing ----------------------------------------------------------------------

    def create_run(self, mechanism: str, config: dict[str, Any], *, source: str = "api",
                   sweep_id: str | None = None, sweep_point: int | None = None) -> str:
        """Insert a queued run owned by this process (at ``sweep_point`` of ``sweep_id``, if given); return its id."""
        run_id = uuid.uuid4().hex[:10]
        with self._tx() as conn:
            conn.execute(
                "INSERT INTO runs (id, mechanism, config, state, created_at, source, owner_host, owner_pid,"
                " sweep_id, sweep_point) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?)",
                (run_id, mechanism, json.dumps(config, sort_keys=True), time.time(), source,
                 socket.gethostname(), os.getpid(), sweep_id, sweep_point))
        return run_id

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
        clean = [(run_id, int(s), n, _finite_or_none(v)) for s, n, v in rows]
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
        """Delete a run with its metrics, artifacts and logs; refused while it is active."""
        run = self.get_run(run_id)
        if run.active:
            raise StoreError(f"run {run_id} is {run.state}; stop it before deleting it")
        with self._tx() as conn:
            conn.execute("DELETE FROM runs WHERE id=?", (run_id,))

    def recover_interrupted(self) -> list[str]:
        """Mark queued or running runs whose owning process is gone as interrupted.

        Ownership is (host, pid); a run owned by a live process on this host, or
        by another host, is left alone. Returns the ids that were marked. Every read of
        runs (:meth:`get_run`, :meth:`list_runs`, :meth:`sweep_runs`) applies it first, so
        a run whose process was killed never reads as queued or running.
        """
        rows = self._conn().execute(
            "SELECT id, state, owner_host, owner_pid FROM runs WHERE state IN ('queued', 'running')").fetchall()
        return self._interrupt_orphans(rows)

    def _interrupt_orphans(self, rows: Iterable[sqlite3.Row]) -> list[str]:
        """Of ``rows`` (with id, state, owner_host, owner_pid), mark those active and owned by a dead process of
        this host as interrupted, each with a sentence saying what ended and what covers what it stored, and the
        summary charging it (:meth:`death_charge`); return their ids."""
        host = socket.gethostname()
        dead = [r for r in rows if r["state"] in ACTIVE_STATES and r["owner_host"] in (host, None)
                and not _pid_alive(r["owner_pid"])]
        marked = []
        for row in dead:
            error, summary = self._orphan_end(row)
            with self._tx() as conn:  # only if still active: a reader never overwrites an ending
                changed = conn.execute("UPDATE runs SET state='interrupted', finished_at=?, error=?, summary=? "
                                       "WHERE id=? AND state IN ('queued', 'running')",
                                       (time.time(), error, None if summary is None else json.dumps(summary),
                                        row["id"])).rowcount
            if changed:
                marked.append(row["id"])
        return marked

    def _orphan_end(self, row: sqlite3.Row) -> tuple[str, dict[str, Any] | None]:
        """Why an orphaned run is interrupted and what covers what it stored: ``(error, summary)``, the summary its
        planned charge (:meth:`death_charge`; the summary it was charged with in memory died with its process)."""
        who = f"the process (pid {row['owner_pid']} on {row['owner_host'] or 'this host'})"
        if row["state"] == "queued":
            return f"never started: {who} that queued it ended before it began; nothing of it ran or was stored", None
        clause, summary = self.death_charge(row["id"])
        if not clause:  # it stored nothing
            return f"{who} running it ended before the run did (killed or crashed), before it stored any output", None
        return f"{who} running it ended before the run did (killed or crashed){clause}", summary

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
                "which covers the curves and tables it stored before that: what it released before it died is not "
                "known", with_caveat(planned, DEATH_CAVEAT, failed=True, process_died=True))

    def has_outputs(self, run_id: str) -> bool:
        """Whether the run stored any metric point or artifact (outputs a claim must cover)."""
        return bool(self._conn().execute(
            "SELECT EXISTS(SELECT 1 FROM metrics WHERE run_id=?) OR EXISTS(SELECT 1 FROM artifacts WHERE run_id=?)",
            (run_id, run_id)).fetchone()[0])

    # ---- reading ----------------------------------------------------------------------

    def get_run(self, run_id: str) -> RunRecord:
        """One run; an active run whose owning process is dead is marked interrupted first (never shown running)."""
        row = self._conn().execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(run_id)
        if self._interrupt_orphans([row]):
            row = self._conn().execute("SELECT * FROM runs WHERE id=?", (run_id,)).fetchone()
        return _record(row)

    def get_sweep(self, sweep_id: str) -> SweepRecord:
        row = self._conn().execute("SELECT * FROM sweeps WHERE id=?", (sweep_id,)).fetchone()
        if row is None:
            raise RunNotFoundError(sweep_id, what="sweep")
        return _sweep_record(row)

    def list_sweeps(self, *, mechanism: str | None = None, limit: int | None = None) -> list[SweepRecord]:
        """Sweeps, newest first."""
        sql, args = "SELECT * FROM sweeps", []
        if mechanism is not None:
            sql, args = sql + " WHERE mechanism=?", [mechanism]
        sql += " ORDER BY created_at DESC" + (f" LIMIT {int(limit)}" if limit is not None else "")
        return [_sweep_record(r) for r in self._conn().execute(sql, args).fetchall()]

    def sweep_runs(self, sweep_id: str) -> list[RunRecord]:
        """The runs of a sweep, by point then creation (a resumed point may hold several attempts); runs of dead
        processes read as interrupted (:meth:`recover_interrupted`)."""
        self.recover_interrupted()
        rows = self._conn().execute("SELECT * FROM runs WHERE sweep_id=? ORDER BY sweep_point, created_at",
                                    (sweep_id,)).fetchall()
        return [_record(r) for r in rows]

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
        """Runs, newest first, optionally filtered by mechanism(s) and state(s); runs of dead processes read as
        interrupted (:meth:`recover_interrupted`)."""
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
        sql += " ORDER BY created_at DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_record(r) for r in self._conn().execute(sql, args).fetchall()]

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

    # ---- export -----------------------------------------------------------------------

    def export_json(self, run_id: str) -> str:
        """The whole run (record, headline privacy claim, all metrics, artifacts, logs) as one JSON document."""
        run = self.get_run(run_id)
        metrics = self.metrics(run_id)
        headline = headline_of(run.summary)
        doc = {
            "run": {k: getattr(run, k) for k in RunRecord.__dataclass_fields__},
            "headline_privacy": None if headline is None else headline.to_dict(),
            "metrics": {name: {"step": g["step"].tolist(), "value": [_finite_or_none(v) for v in g["value"]]}
                        for name, g in metrics.groupby("name", sort=True)},
            "artifacts": self.artifacts(run_id),
            "logs": [{"ts": ts, "text": text} for ts, text in self.logs(run_id, limit=10**9)],
        }
        return json.dumps(to_jsonable(doc), indent=2, sort_keys=True)

    def export_csv(self, run_id: str) -> str:
        """The run's metrics as CSV, one row per step and one column per metric.

        An epsilon column (:func:`epsilon_column`) names its delta and accountant in its header, so a figure
        never leaves the tool without the assumptions it rests on.
        """
        run = self.get_run(run_id)
        metrics = self.metrics(run_id)
        if metrics.empty:
            return "step\n"
        wide = metrics.pivot_table(index="step", columns="name", values="value", aggfunc="last", dropna=False)
        wide.columns.name = None
        basis = self.artifacts(run_id).get(EPSILON_BASIS_ARTIFACT) or {}
        wide.columns = [epsilon_column(name, run, basis.get(name)) for name in wide.columns]
        return wide.reset_index().to_csv(index=False)


def is_epsilon_metric(name: str) -> bool:
    """Whether a stored metric is an epsilon (``eps_*``, ``epsilon*``, ``*_epsilon*``, e.g. ``epsilon_each_model``)."""
    words = name.lower().replace(".", "_").replace("|", "_").split("_")
    return "eps" in words or any(w.startswith("epsilon") for w in words)


def epsilon_column(name: str, run: "RunRecord", basis: dict | None = None) -> str:
    """``name``, or for an epsilon metric ``name [delta = D; accountant: A]``.

    ``basis``: what the run declared for this metric in its :data:`EPSILON_BASIS_ARTIFACT` artifact
    (``{"delta": D, "accountant": A}``: each curve's own analysis, e.g. a data-dependent curve's, or an a-priori
    curve without a release its headline composes). Without one, D and A are the run's headline claim's, marked
    "(the run's headline claim)", and a run without a claim falls back to its configuration's ``delta`` and
    ``accountant`` knobs, and says so when it has neither.
    """
    if not is_epsilon_metric(name):
        return name
    headline = headline_of(run.summary)
    if basis:
        delta, accountant = basis.get("delta"), basis.get("accountant")
    elif headline is not None:
        delta, accountant = headline.delta, f"{headline.accountant} (the run's headline claim)"
    else:
        delta, accountant = run.config.get("delta"), run.config.get("accountant")
    delta_text = f"delta = {delta:g}" if isinstance(delta, (int, float)) else "delta not stated"
    return f"{name} [{delta_text}; accountant: {accountant or 'not stated'}]"


def _record(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"], mechanism=row["mechanism"], config=json.loads(row["config"]), state=row["state"],
        device=row["device"], created_at=row["created_at"], started_at=row["started_at"],
        finished_at=row["finished_at"], error=row["error"], traceback=row["traceback"],
        summary=None if row["summary"] is None else json.loads(row["summary"]), source=row["source"],
        owner_host=row["owner_host"], owner_pid=row["owner_pid"], stop_requested=bool(row["stop_requested"]),
        progress=row["progress"], progress_text=row["progress_text"], sweep_id=row["sweep_id"],
        sweep_point=row["sweep_point"], name=row["name"], notes=row["notes"])


def _sweep_record(row: sqlite3.Row) -> SweepRecord:
    return SweepRecord(id=row["id"], mechanism=row["mechanism"], spec=json.loads(row["spec"]),
                       created_at=row["created_at"], source=row["source"], executor=row["executor"],
                       stop_requested=bool(row["stop_requested"]))


def _finite_or_none(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True
