"""Which stored runs use a user data set, and deleting one only while none does (:func:`delete_unused`)."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from ..store import RunStore
from . import storage

SOURCE_PREFIX = "user/"


def source_key(name: str) -> str:
    """The privacy ledger's source key of user data set ``name`` (``user/NAME``): what a run on it stores as its
    data source."""
    return SOURCE_PREFIX + name


def referencing_runs(store: RunStore, name: str) -> list[str]:
    """Ids of the stored runs (any state) whose config reads data set ``name`` (``"dataset": NAME``) or whose
    stored data source is :func:`source_key` of it, newest first."""
    return [run.id for run in store.list_runs()
            if run.config.get("dataset") == name or run.data_source == source_key(name)]


def delete_unused(store: RunStore, name: str, home=None) -> dict[str, Any]:
    """Delete data set ``name`` (:func:`.storage.delete`) and return its manifest; ConfigError naming ``name`` if
    it is not stored or stored runs use it (their results and ledger refer to it)."""
    storage.manifest(name, home)
    runs = referencing_runs(store, name)
    if runs:
        shown = ", ".join(runs[:5]) + (", ..." if len(runs) > 5 else "")
        raise ConfigError("name", f"is used by {len(runs)} stored run{'s' * (len(runs) > 1)} ({shown}); delete "
                                  f"{'them' if len(runs) > 1 else 'it'} first (python -m privengine delete ID)")
    return storage.delete(name, home)
