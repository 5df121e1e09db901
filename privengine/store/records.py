"""What the store holds, decoded: a run's and a sweep's record, a run's snapshot, and the names stored values keep.

Rows become records here (:func:`run_record`, :func:`sweep_record`); nothing in this module opens the database.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

ACTIVE_STATES = ("queued", "running")
TERMINAL_STATES = ("finished", "failed", "stopped", "interrupted")
STATES = ACTIVE_STATES + TERMINAL_STATES
NAME_MAX_CHARS, NOTES_MAX_CHARS = 80, 4000  # a name fits a table cell and a legend; notes a paragraph or a few

# The artifact in which a run states, per epsilon metric it stores, ``{"delta": ..., "accountant": ...}``: what
# an export names beside that column (:func:`privengine.figures.export.epsilon_column`).
EPSILON_BASIS_ARTIFACT = "epsilon_basis"


def is_epsilon_metric(name: str) -> bool:
    """Whether a stored metric is an epsilon (``eps_*``, ``epsilon*``, ``*_epsilon*``, e.g. ``epsilon_each_model``)."""
    words = name.lower().replace(".", "_").replace("|", "_").split("_")
    return "eps" in words or any(w.startswith("epsilon") for w in words)


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
    heartbeat_at: float | None = None
    data_source: str | None = None

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


@dataclass(frozen=True)
class BudgetRecord:
    """One setting of a data source's privacy budget: (epsilon, delta), when it was set, and why (free text).
    The budget in force is the source's latest setting; the earlier ones are its history."""

    source: str
    epsilon: float
    delta: float
    set_at: float
    note: str = ""


def run_record(row: sqlite3.Row) -> RunRecord:
    """A row of the runs table as a :class:`RunRecord` (its JSON columns parsed)."""
    return RunRecord(
        id=row["id"], mechanism=row["mechanism"], config=json.loads(row["config"]), state=row["state"],
        device=row["device"], created_at=row["created_at"], started_at=row["started_at"],
        finished_at=row["finished_at"], error=row["error"], traceback=row["traceback"],
        summary=None if row["summary"] is None else json.loads(row["summary"]), source=row["source"],
        owner_host=row["owner_host"], owner_pid=row["owner_pid"], stop_requested=bool(row["stop_requested"]),
        progress=row["progress"], progress_text=row["progress_text"], sweep_id=row["sweep_id"],
        sweep_point=row["sweep_point"], name=row["name"], notes=row["notes"], heartbeat_at=row["heartbeat_at"],
        data_source=row["data_source"])


def sweep_record(row: sqlite3.Row) -> SweepRecord:
    """A row of the sweeps table as a :class:`SweepRecord`."""
    return SweepRecord(id=row["id"], mechanism=row["mechanism"], spec=json.loads(row["spec"]),
                       created_at=row["created_at"], source=row["source"], executor=row["executor"],
                       stop_requested=bool(row["stop_requested"]))


def finite_or_none(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing, NaN or infinite (how metrics and exports store them)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
