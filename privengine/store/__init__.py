"""The SQLite run store, along its concerns.

- :mod:`.run_store`: :class:`RunStore`, every query over runs, sweeps, metrics, artifacts and logs, and what an
  interrupted run is charged (:meth:`RunStore.death_charge`);
- :mod:`.records`: the records it returns (:class:`RunRecord`, :class:`SweepRecord`, :class:`RunSnapshot`), the
  run states and the names stored values keep;
- :mod:`.schema`: the ordered migrations (``PRAGMA user_version``); a migration rewriting one mechanism's stored
  data is named for it (:mod:`.migrations_pate`);
- :mod:`.liveness`: the owner's heartbeat and when an active run has lost its owner;
- :mod:`.ledger_tables`: the privacy ledger's side, each run's private data source and the budgets set on sources
  (:class:`BudgetRecord`), part of :class:`RunStore`;
- :mod:`.model_files`: the files of the models a run keeps (safetensors weights and an architecture spec under
  ``HOME/models/RUN_ID``), part of :class:`RunStore`;
- :mod:`.upgrades`: the one-time upgrades of stored data the store asks for and records but cannot do (it imports no
  mechanism: the ledger gives old claims their privacy events), part of :class:`RunStore`;
- :mod:`.admission`: the lock that admits one launch at a time across the processes sharing a store
  (:func:`admission_lock`, a write transaction on a file beside it), which the budget check holds.

A run's CSV and JSON export is formatted above the store, beside figures and reports (:mod:`privengine.figures.export`).
"""

from ..errors import StoreError
from .admission import admission_lock
from .records import (ACTIVE_STATES, EPSILON_BASIS_ARTIFACT, NAME_MAX_CHARS, NOTES_MAX_CHARS, STATES,
                      TERMINAL_STATES, BudgetRecord, RunRecord, RunSnapshot, SweepRecord, is_epsilon_metric)
from .run_store import DEATH_CAVEAT, NO_CLAIM_AFTER_DEATH, RunStore, default_home
from .schema import MIGRATIONS, SCHEMA_VERSION

__all__ = ["ACTIVE_STATES", "BudgetRecord", "DEATH_CAVEAT", "EPSILON_BASIS_ARTIFACT", "MIGRATIONS", "NAME_MAX_CHARS",
           "NOTES_MAX_CHARS", "NO_CLAIM_AFTER_DEATH", "SCHEMA_VERSION", "STATES", "TERMINAL_STATES", "RunRecord",
           "RunSnapshot", "RunStore", "StoreError", "SweepRecord", "admission_lock", "default_home",
           "is_epsilon_metric"]
