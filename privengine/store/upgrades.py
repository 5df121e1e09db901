"""One-time upgrades of stored data that the store asks for and records but cannot do itself, since it imports no
mechanism (schema version 10).

A migration asks for an upgrade by inserting its row into the ``upgrades`` table, ``requested_at`` the time the store
reached that version: :data:`CLAIM_EVENTS`, the privacy events of the claims stored before claims carried them, is
asked for in a store that held runs then. The layer that can do it (:mod:`privengine.ledger.upgrade`) reads the runs
created before the request (:meth:`UpgradeTables.runs_created_before`) and, in one transaction, rewrites their
summaries and records the upgrade done with its report (:meth:`UpgradeTables.finish_upgrade`). The rewrites replace
structured data only (a claim's ``events`` and ``relation``), never a claim's text.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Iterable

from ..jsonable import to_jsonable

CLAIM_EVENTS = "claim_events"  # the upgrade giving stored claims their privacy events
_COLUMNS = ("summary", "planned_charge")  # the run columns an upgrade may rewrite (JSON summaries)


@dataclass(frozen=True)
class UpgradeRecord:
    """An upgrade the store asked for: when (``requested_at``), when it was done (None: pending) and its report."""

    name: str
    requested_at: float
    done_at: float | None
    report: dict[str, Any] | None


@dataclass(frozen=True)
class StoredSummaries:
    """A run's stored config and JSON summaries, as text (what :meth:`UpgradeTables.finish_upgrade` compares)."""

    id: str
    mechanism: str
    config: dict[str, Any]
    summary: str | None
    planned_charge: str | None


class UpgradeTables:
    """Queries over the ``upgrades`` table (mixed into ``RunStore``, which provides ``_conn`` and ``_tx``)."""

    def upgrade_record(self, name: str) -> UpgradeRecord | None:
        """The upgrade ``name`` as recorded, or None if this store never asked for it."""
        row = self._conn().execute("SELECT name, requested_at, done_at, report FROM upgrades WHERE name=?",
                                   (name,)).fetchone()
        if row is None:
            return None
        return UpgradeRecord(row[0], row[1], row[2], None if row[3] is None else json.loads(row[3]))

    def runs_created_before(self, at: float) -> list[StoredSummaries]:
        """Every run created before ``at``, oldest first, with its summary and planned charge as stored."""
        rows = self._conn().execute("SELECT id, mechanism, config, summary, planned_charge FROM runs "
                                    "WHERE created_at < ? ORDER BY created_at, id", (at,)).fetchall()
        return [StoredSummaries(r[0], r[1], json.loads(r[2]), r[3], r[4]) for r in rows]

    def finish_upgrade(self, name: str, rewrites: Iterable[tuple[str, str, str, dict[str, Any]]],
                       report: dict[str, Any]) -> bool:
        """Record the pending upgrade ``name`` done with ``report`` and apply its ``rewrites``, ``(run id, column,
        the text read, the new summary)`` with column ``summary`` or ``planned_charge``, in one transaction. A
        column whose text changed since it was read keeps what it has (``report["changed_since_read"]`` counts
        them). False, and nothing written, if the upgrade is not pending (another process finished it first)."""
        rewrites = list(rewrites)
        if any(column not in _COLUMNS for _, column, _, _ in rewrites):
            raise ValueError(f"an upgrade rewrites only the columns {_COLUMNS}")
        with self._tx() as conn:
            row = conn.execute("SELECT done_at FROM upgrades WHERE name=?", (name,)).fetchone()
            if row is None or row[0] is not None:
                return False
            changed = 0
            for run_id, column, read, summary in rewrites:
                changed += 1 - conn.execute(f"UPDATE runs SET {column}=? WHERE id=? AND {column} IS ?",
                                            (json.dumps(to_jsonable(summary)), run_id, read)).rowcount
            conn.execute("UPDATE upgrades SET done_at=?, report=? WHERE name=?",
                         (time.time(), json.dumps(to_jsonable({**report, "changed_since_read": changed})), name))
        return True
