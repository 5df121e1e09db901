"""Where a sweep's runs execute: the local job manager, or a Ray cluster (:mod:`.ray_executor`), for the CLI and the
Explore page alike."""

from __future__ import annotations

from privengine.errors import ConfigError
from privengine.store import RunStore

from . import runner


def make_executor(store: RunStore, kind: str, *, address: str | None = None, workers: int | None = None):
    """The local job manager or a Ray executor with ``workers`` concurrent runs."""
    if workers is not None and workers < 1:
        raise ConfigError("workers", f"must be >= 1; got {workers}")
    workers = workers or runner.default_workers()
    if kind == "ray":
        from .ray_executor import RayExecutor

        return RayExecutor(store, address=address, workers=workers)
    if address:
        raise ConfigError("address", "is for the ray executor only (add --executor ray)")
    from privengine.jobs import JobManager

    return JobManager(store, max_concurrent=workers)
