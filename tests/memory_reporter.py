"""An in-memory test double of privengine.reporter.Reporter, for calling a mechanism's run() directly."""

from __future__ import annotations

from privengine.reporter import ReleaseCharge


class MemoryReporter(ReleaseCharge):
    """The reporter interface, kept in memory (a test double of privengine.reporter.Reporter); what a run
    charges is read with ``charged_summary()``."""

    def __init__(self, device: str = "cpu", stop_after_metrics: int | None = None):
        self.device = device
        self.metrics: dict[str, list[tuple[int, float]]] = {}
        self.artifacts: dict[str, object] = {}
        self.logs: list[str] = []
        self._stop_after = stop_after_metrics

    def metric(self, step: int, **values: float) -> None:
        for name, value in values.items():
            self.metrics.setdefault(name, []).append((step, value))

    def artifact(self, name: str, data) -> None:
        self.artifacts[name] = data

    def log(self, text: str) -> None:
        self.logs.append(text)

    def progress(self, fraction: float, text: str = "") -> None:
        assert 0.0 <= fraction <= 1.0

    def should_stop(self) -> bool:
        return self._stop_after is not None and sum(map(len, self.metrics.values())) >= self._stop_after
