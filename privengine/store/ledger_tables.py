"""The store's side of the privacy ledger (:mod:`privengine.ledger`): each run's private data source and the budgets
set on sources (schema version 9).

:class:`LedgerTables` is a part of :class:`~.run_store.RunStore` (its base class), over the store's connection and
transactions. The store knows no mechanism, so it never computes a source: runs are created with theirs
(``RunStore.create_run(data_source=...)``, from the launch paths), and the ledger back-fills those stored before
(:meth:`unsourced_runs`, :meth:`set_data_sources`). Nor does it know which other sources a run releases on (a
DP-Bayes run's evaluation data sets): the ledger computes them from the configs of the runs of the mechanisms that
declare any (:meth:`mechanism_runs`, :meth:`run_configs`).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any, Mapping, Sequence

from .records import BudgetRecord, RunRecord, run_record


def text_digest(text: str | None) -> str | None:
    """A 128-bit BLAKE2b digest of a stored JSON text, in hex (None for None): two texts with one digest are, but
    for a collision of probability about 2^-64 among 2^32 texts, the same text."""
    return None if text is None else hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


class LedgerTables:
    """Queries over runs' data sources and the ``budgets`` table (mixed into ``RunStore``, which provides
    ``_conn``, ``_tx`` and ``recover_interrupted``)."""

    def unsourced_runs(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``(id, mechanism, config)`` of every run whose data source is not stored yet (stored before sources were),
        oldest first."""
        rows = self._conn().execute(
            "SELECT id, mechanism, config FROM runs WHERE data_source IS NULL ORDER BY created_at, id").fetchall()
        return [(r["id"], r["mechanism"], json.loads(r["config"])) for r in rows]

    def set_data_sources(self, sources: Mapping[str, str]) -> None:
        """Store each run's data source (run id -> source key)."""
        if sources:
            with self._tx() as conn:
                conn.executemany("UPDATE runs SET data_source=? WHERE id=?",
                                 [(source, run_id) for run_id, source in sources.items()])

    def data_source_of(self, run_id: str) -> str | None:
        """The stored data source of run ``run_id`` (None if it has none yet, or no such run is stored)."""
        row = self._conn().execute("SELECT data_source FROM runs WHERE id=?", (run_id,)).fetchone()
        return None if row is None else row[0]

    def data_sources(self) -> list[str]:
        """Every source a stored run reads or a budget was set on, sorted."""
        rows = self._conn().execute("SELECT data_source FROM runs WHERE data_source IS NOT NULL UNION "
                                    "SELECT source FROM budgets ORDER BY 1").fetchall()
        return [r[0] for r in rows]

    def mechanism_runs(self, mechanisms: Sequence[str]) -> list[tuple[str, float, str]]:
        """``(id, created_at, mechanism)`` of every run of ``mechanisms``, oldest first (no config: the ledger reads
        those of the runs it has not seen, :meth:`run_configs`)."""
        if not mechanisms:
            return []
        rows = self._conn().execute(
            f"SELECT id, created_at, mechanism FROM runs WHERE mechanism IN ({', '.join('?' * len(mechanisms))}) "
            "ORDER BY created_at, id", tuple(mechanisms)).fetchall()
        return [(r[0], r[1], r[2]) for r in rows]

    def run_configs(self, run_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The stored config of each run of ``run_ids`` that is stored (run id -> config)."""
        found: dict[str, dict[str, Any]] = {}
        ids = list(run_ids)
        for start in range(0, len(ids), 500):  # under SQLite's limit on bound parameters
            chunk = ids[start:start + 500]
            rows = self._conn().execute(f"SELECT id, config FROM runs WHERE id IN ({', '.join('?' * len(chunk))})",
                                        tuple(chunk)).fetchall()
            found.update((r[0], json.loads(r[1])) for r in rows)
        return found

    def source_run_states(self, source: str) -> list[tuple[str, str, float | None, str | None, str | None]]:
        """``(id, state, finished_at, planned, summary)`` of every run of ``source``, ``planned`` and ``summary`` the
        digests (:func:`text_digest`) of its stored planned charge and summary (None: none stored), after marking
        orphaned runs interrupted (``recover_interrupted``): what changes when a run's charge does, a planned charge
        stored again wider or a summary rewritten by another process included (a cheap check before the ledger
        decodes summaries)."""
        self.recover_interrupted()
        rows = self._conn().execute("SELECT id, state, finished_at, planned_charge, summary FROM runs "
                                    "WHERE data_source=? ORDER BY id", (source,)).fetchall()
        return [(r[0], r[1], r[2], text_digest(r[3]), text_digest(r[4])) for r in rows]

    def source_runs(self, source: str) -> list[RunRecord]:
        """Every run of ``source``, in the order they were charged: ended runs by the time they ended, then the
        active ones by creation (orphaned runs are marked interrupted first)."""
        self.recover_interrupted()
        rows = self._conn().execute(
            "SELECT * FROM runs WHERE data_source=? ORDER BY finished_at IS NULL, finished_at, created_at, id",
            (source,)).fetchall()
        return [run_record(r) for r in rows]

    def add_budget(self, source: str, epsilon: float, delta: float, note: str = "") -> BudgetRecord:
        """Record a budget (epsilon at delta) on ``source``, now; it replaces the one in force, which stays in the
        history. The values are stored as given (:func:`privengine.ledger.budget.set_budget` checks them)."""
        record = BudgetRecord(source, float(epsilon), float(delta), time.time(), note)
        with self._tx() as conn:
            conn.execute("INSERT INTO budgets (source, epsilon, delta, set_at, note) VALUES (?, ?, ?, ?, ?)",
                         (record.source, record.epsilon, record.delta, record.set_at, record.note))
        return record

    def budget_history(self, source: str) -> list[BudgetRecord]:
        """Every budget set on ``source``, oldest first (the last is the one in force)."""
        rows = self._conn().execute("SELECT source, epsilon, delta, set_at, note FROM budgets WHERE source=? "
                                    "ORDER BY set_at, id", (source,)).fetchall()
        return [BudgetRecord(*tuple(r)) for r in rows]

