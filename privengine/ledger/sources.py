"""Private data sources: the key each run is charged to, the back-fill of runs stored before sources were, and which
keys a user may name.

A source is what the user chose to read (:attr:`privengine.entries.Mechanism.data_source`): a built-in data set and
split (``mnist/train``: DP-SGD and PATE on MNIST read the same people), or a synthetic set and its generating seed
(``linreg/seed=0``), never a fingerprint of the content, since a corrected record is still the same people.

Runs launched since schema version 9 store their source when they are created (the job manager and the Ray
executor call :func:`source_of`). The store cannot compute one for the runs stored before (it imports no
mechanism), so the ledger does, on first use: :func:`backfill` reads their stored configs through the registry.
"""

from __future__ import annotations

import re
from typing import Any

from .. import registry
from ..config import BaseConfig
from ..entries import SAME_AS_RUN
from ..errors import ConfigError, UnknownMechanismError
from ..store import RunStore

_SEED = re.compile(r"seed=\d+")
NO_SOURCE = ""  # the stored key of a run that reads no private data source


def source_of(store: RunStore, mechanism: str, config: BaseConfig | dict[str, Any]) -> str:
    """The data source a run of ``mechanism`` with ``config`` (a config, or a stored config's dict) reads, as stored
    with the run: the mechanism's ``data_source``, ``run:ID`` resolved to the source stored with (or computed for)
    run ID, :data:`NO_SOURCE` for a run that reads no private data source. A mechanism the registry does not know
    (a plugin no longer loaded) is charged to ``NAME/unspecified``, as one that declares no source."""
    try:
        entry = registry.get(mechanism)
    except UnknownMechanismError:
        return f"{mechanism}/unspecified"
    source = entry.source_of(config)
    if source is None:
        return NO_SOURCE
    if not source.startswith(SAME_AS_RUN):
        return source
    attacked = source[len(SAME_AS_RUN):]
    stored = store.data_source_of(attacked)
    if stored is not None:
        return stored
    try:
        run = store.get_run(attacked)
    except LookupError:
        return f"the source of run {attacked} (deleted since)"
    return source_of(store, run.mechanism, run.config)


def backfill(store: RunStore) -> int:
    """Compute and store the source of every run stored without one (schema < 9); return how many."""
    rows = store.unsourced_runs()
    store.set_data_sources({run_id: source_of(store, mechanism, config) for run_id, mechanism, config in rows})
    return len(rows)


def catalogue() -> list[str]:
    """The sources the registered mechanisms read at their defaults, for each choice of their ``dataset`` knob
    where they have one (a synthetic set at its default seed)."""
    found = set()
    for entry in registry.all_mechanisms():
        choices = next((s.knob.choices for s in entry.config_cls.specs() if s.name == "dataset"), None) or (None,)
        for choice in choices:
            source = entry.source_of({} if choice is None else {"dataset": choice})
            if source:
                found.add(source)
    return sorted(found)


def known_sources(store: RunStore) -> list[str]:
    """Every source the store knows (runs read it, their sources back-filled first, or a budget was set on it) and
    the :func:`catalogue`'s."""
    backfill(store)
    return sorted(set(store.data_sources()) - {NO_SOURCE} | set(catalogue()))


def check_source(store: RunStore, source: str) -> str:
    """``source`` if it is known (:func:`known_sources`), or a synthetic set of a known kind at another seed
    (``linreg/seed=7`` as ``linreg/seed=0`` is known); ConfigError (field ``SOURCE``) listing the known ones
    otherwise."""
    known = known_sources(store)
    if source in known or (_SEED.search(source) and _SEED.sub("seed=0", source) in
                           {_SEED.sub("seed=0", k) for k in known}):
        return source
    raise ConfigError("SOURCE", f"must be a data source: one of {', '.join(known)} (a synthetic set at any seed); "
                                f"got {source!r}")
