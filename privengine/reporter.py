"""The reporter: the only channel from a running mechanism to the outside world.

A run function calls ``reporter.metric(step, loss=..., acc=...)`` for curves,
``reporter.artifact(name, data)`` for tables and histograms,
``reporter.log(text)``, ``reporter.progress(fraction, text)``, and returns early
when ``reporter.should_stop()`` says so (it must ask at least once a second).
Everything goes straight to the run store, so any page, tab or process sees it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .store import RunStore

METRIC_FLUSH_S = 0.25  # metric points are written in batches at most this old
STOP_POLL_S = 0.5      # how often the store's stop flag (set by another process) is read


class Reporter:
    """Writes one run's outputs to the store; thread-confined to the run's thread.

    Attributes:
        run_id: the run's id in the store.
        device: the torch device string the run must put its tensors on (``"cpu"``, ``"cuda"``, ...).
    """

    def __init__(self, store: RunStore, run_id: str, *, device: str = "cpu",
                 stop_event: threading.Event | None = None):
        self.store = store
        self.run_id = run_id
        self.device = device
        self._stop_event = stop_event or threading.Event()
        self._pending: list[tuple[int, str, float]] = []
        self._last_flush = 0.0
        self._last_stop_poll = 0.0

    def metric(self, step: int, **values: float) -> None:
        """Record metric values at ``step`` (e.g. an epoch or an optimiser step)."""
        self._pending.extend((int(step), name, float(v)) for name, v in values.items() if v is not None)
        now = time.monotonic()
        if now - self._last_flush >= METRIC_FLUSH_S:
            self.flush()

    def artifact(self, name: str, data: Any) -> None:
        """Store (or replace) a JSON-serialisable table, histogram or sample set."""
        self.store.put_artifact(self.run_id, name, data)

    def log(self, text: str) -> None:
        self.store.add_log(self.run_id, text)

    def progress(self, fraction: float, text: str = "") -> None:
        """Overall progress in [0, 1] with a short description of the current stage."""
        self.flush()
        self.store.set_progress(self.run_id, fraction, text)

    def should_stop(self) -> bool:
        """True once a stop was requested here or through the store (from another process).

        Also writes buffered metrics that have waited long enough, so a run that
        asks regularly shows its points promptly.
        """
        now = time.monotonic()
        if self._pending and now - self._last_flush >= METRIC_FLUSH_S:
            self.flush()
        if self._stop_event.is_set():
            return True
        if now - self._last_stop_poll >= STOP_POLL_S:
            self._last_stop_poll = now
            if self.store.stop_requested(self.run_id):
                self._stop_event.set()
        return self._stop_event.is_set()

    @property
    def stop_was_requested(self) -> bool:
        return self._stop_event.is_set()

    def flush(self) -> None:
        """Write buffered metric points now."""
        self._last_flush = time.monotonic()
        if self._pending:
            pending, self._pending = self._pending, []
            self.store.add_metrics(self.run_id, pending)
