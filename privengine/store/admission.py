"""One admission at a time per run store, across every process that opens it (the dashboard, CLIs, a Ray driver).

A launch is admitted when it has been checked against the budgets of the data sources it reads and its runs are
stored (:func:`privengine.ledger.budget.admitted`); two processes doing that at once could both pass the check on
the same ledger and together exceed a budget. :func:`admission_lock` makes the check and the storing one step for
all of them.

The lock is a write transaction (``BEGIN IMMEDIATE``) held open on a small SQLite file beside the store
(``runs.sqlite-admission``; it stays empty), not on the store itself: a write lock on the store would block every
running job's metrics and heartbeats for as long as a check composes the ledger, and the launch's own writes,
made on the store's per-thread connections, would wait for it. SQLite rather than an ``fcntl.flock`` on a lock
file because it gives what is needed without code of ours: a bounded wait (its busy timeout, no polling loop),
the locking the store already relies on on the same file system, and a release by the operating system when the
process holding it dies (its locks go with the process), so a killed launch never blocks the next.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Iterator

from ..errors import StoreError


def admission_path(store_path: Path) -> Path:
    """The lock file of the store at ``store_path``: ``<store file>-admission``, beside it."""
    return store_path.with_name(store_path.name + "-admission")


@contextlib.contextmanager
def admission_lock(store_path: Path, wait_s: float) -> Iterator[None]:
    """Hold the admission lock of the store at ``store_path`` for the block, waiting at most ``wait_s`` seconds for
    another process (or another connection of this one) to release it; TimeoutError if it is still held then.
    StoreError naming the lock file when this process cannot write it: SQLite would open it read-only without a
    word, and ``BEGIN IMMEDIATE`` on a read-only file takes no lock at all (review helper-54), so two launches
    could both pass a budget."""
    path = admission_path(store_path)
    conn = sqlite3.connect(path, timeout=max(wait_s, 0.0), isolation_level=None)
    try:
        if not os.access(path, os.W_OK):
            raise StoreError(f"the admission lock file {path} is not writable by this user, so launches on this "
                             "store cannot be admitted one at a time; give this user write access to it (or "
                             "delete it while nothing runs: it is recreated empty)")
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                raise StoreError(f"the admission lock file {path} cannot be locked: {exc}") from None
            raise TimeoutError(f"the admission lock of {store_path} was held for over {wait_s:g} s") from None
        yield
    finally:
        conn.close()  # ends the transaction: the lock is released
