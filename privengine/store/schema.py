"""The store's schema: the ordered migrations that build and upgrade it, and :func:`migrate`, which applies them.

The version lives in ``PRAGMA user_version``. A schema change is appended to :data:`MIGRATIONS` (never edited in
place): entry ``i`` upgrades version ``i`` to ``i + 1``. A migration that rewrites one mechanism's stored data
lives in a module named for that mechanism (:mod:`.migrations_pate`) and is listed here at its version. Only the two
PATE relabellings there rewrite claim text (history); later migrations change structured data only, and data the
store cannot compute (it imports no mechanism) is asked for as a one-time upgrade (:mod:`.upgrades`).
"""

from __future__ import annotations

import sqlite3
from os import PathLike

from ..errors import StoreError
from .migrations_pate import CONFIDENT_GNMAX_BEFORE_ISSUE_24, MNIST_SANITIZER_TUNED
from .upgrades import CLAIM_EVENTS

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
    # 3 -> 4: PATE's Confident-GNMax runs stored before issue 24 named for what their figures are
    CONFIDENT_GNMAX_BEFORE_ISSUE_24,
    (  # 4 -> 5: a run's name and notes, written by its user (shown in tables, links and reports)
        "ALTER TABLE runs ADD COLUMN name TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN notes TEXT NOT NULL DEFAULT ''",
    ),
    (  # 5 -> 6: the summary charging a run's whole planned release, stored before its first output: what a run
        # whose process dies is charged (RunStore.death_charge). Runs stored before have none (NULL).
        "ALTER TABLE runs ADD COLUMN planned_charge TEXT",
    ),
    (  # 6 -> 7: the owner's heartbeat (privengine.store.liveness). The active runs stored before have none: they are
        # given the migration's time, so their owner, if it still lives, has the whole limit to touch them.
        "ALTER TABLE runs ADD COLUMN heartbeat_at REAL",
        "UPDATE runs SET heartbeat_at = (julianday('now') - 2440587.5) * 86400.0 WHERE state IN ('queued', 'running')",
    ),
    MNIST_SANITIZER_TUNED,  # 7 -> 8: MNIST PATE runs' sanitized figures, tuned on those votes, are not covered
    (  # 8 -> 9: the privacy ledger (privengine.ledger). Each run's private data source, the key its ledger charges
        # (NULL for the runs stored before: the ledger back-fills it from their configs through the registry, which
        # the store may not import), and the budgets set on sources, every setting or raise a row of its own.
        "ALTER TABLE runs ADD COLUMN data_source TEXT",
        "CREATE INDEX runs_by_data_source ON runs(data_source, finished_at)",
        """CREATE TABLE budgets (
            id INTEGER PRIMARY KEY AUTOINCREMENT, source TEXT NOT NULL, epsilon REAL NOT NULL, delta REAL NOT NULL,
            set_at REAL NOT NULL, note TEXT NOT NULL DEFAULT '')""",
        "CREATE INDEX budgets_by_source ON budgets(source, set_at)",
    ),
    (  # 9 -> 10: one-time upgrades that the store asks for and records but cannot do (it imports no mechanism:
        # privengine.store.upgrades). A store holding runs asks for their claims' privacy events (CLAIM_EVENTS), which
        # the ledger rebuilds from their stored configs and summaries (privengine.ledger.upgrade); no text rewritten.
        "CREATE TABLE upgrades (name TEXT PRIMARY KEY, requested_at REAL NOT NULL, done_at REAL, report TEXT)",
        f"INSERT INTO upgrades (name, requested_at) SELECT '{CLAIM_EVENTS}', "
        "(julianday('now') - 2440587.5) * 86400.0 WHERE EXISTS (SELECT 1 FROM runs)",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(conn: sqlite3.Connection, path: str | PathLike) -> None:
    """Upgrade the database behind ``conn`` (``path``, for the message) to :data:`SCHEMA_VERSION`, inside the
    caller's transaction; StoreError if it is newer than this privengine."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(f"{path} has schema version {version}, newer than this privengine "
                         f"({SCHEMA_VERSION}); upgrade privengine or set PRIVENGINE_HOME elsewhere")
    for step in MIGRATIONS[version:]:
        for statement in step:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
