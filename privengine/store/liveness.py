"""Whether a run's owner still lives: the owner's heartbeat, and the rule every read of the store applies.

A run is owned by the process that created it (``owner_host``, ``owner_pid``), which touches it
(``heartbeat_at``, :meth:`privengine.store.RunStore.touch`) every :data:`HEARTBEAT_S` seconds while it is queued
or running (:class:`privengine.jobs.RunQueue`, which the job manager and the Ray driver share). The owner of an
active run is gone (:func:`owner_gone`) when

- the run names this host (or no host: stored before owners were) and its pid is no longer alive: it ended, killed
  or crashed; the run is interrupted on the next read; or
- its last heartbeat is older than :data:`HEARTBEAT_LIMIT_S`: its process ended or hangs, on this host under a pid
  that another process has since taken (a pid alone would read as alive), or on another host, whose pids mean
  nothing here and which is judged by its heartbeat alone.

The limit is twelve beats, so a process slowed by a busy machine (a touch may wait up to 30 s for the store's
write lock) is not taken for dead; hosts that share a store must agree on the time to well within it.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass

HEARTBEAT_S = 5.0          # how often an owner touches its queued and running runs
HEARTBEAT_LIMIT_S = 60.0   # a run whose heartbeat is older than this has lost its owner


@dataclass(frozen=True)
class OwnerGone:
    """How the owner of an active run is known to be gone, in the words of the run's error."""

    who: str    # "the process (pid 123 on host-a)"
    how: str    # "ended", or "fell silent (no heartbeat for 75 s, over the 60 s limit)"
    cause: str  # what may have happened to it: "killed or crashed", or "killed, crashed or hung"


def owner_gone(row: sqlite3.Row, *, now: float, host: str) -> OwnerGone | None:
    """How the owner of active run ``row`` (a runs row: ``owner_host``, ``owner_pid``, ``heartbeat_at``) is gone at
    time ``now`` as seen from ``host``, or None while it lives (the rule of the module docstring)."""
    who = f"the process (pid {row['owner_pid']} on {row['owner_host'] or 'this host'})"
    if row["owner_host"] in (host, None) and not pid_alive(row["owner_pid"]):
        return OwnerGone(who, "ended", "killed or crashed")
    beat = row["heartbeat_at"]
    if beat is None:
        return OwnerGone(who, "fell silent (it stored no heartbeat)", "killed, crashed or hung")
    if now - beat > HEARTBEAT_LIMIT_S:
        return OwnerGone(who, f"fell silent (no heartbeat for {now - beat:.0f} s, over the {HEARTBEAT_LIMIT_S:g} s "
                              "limit)", "killed, crashed or hung")
    return None


def pid_alive(pid: int | None) -> bool:
    """Whether a process ``pid`` runs on this host (this process included; None: no pid was stored)."""
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
