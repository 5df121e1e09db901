"""The worker side of the Ray executor (:mod:`.ray_executor`, the driver side): what runs inside a Ray worker.

A run's task (:func:`execute_run`) or a group's (:func:`execute_group`) gets a :class:`WorkerReporter` with the
Reporter contract (metric, artifact, log, progress, should_stop) that batches its events to the :class:`Hub` actor,
which the driver drains into the store; stops travel the other way, polled every half second. Nothing here imports
the driver.
"""

from __future__ import annotations

import collections
import time
from typing import Any

from privengine.errors import ConfigError
from privengine.reporter import NOT_ENDED_BY_GROUP, ReleaseCharge, outcome_record

WORKER_FLUSH_S = 0.25   # how old a worker's buffered metrics may get
STOP_POLL_S = 0.5       # how often a worker asks the hub whether to stop


def ray_module():
    """The ``ray`` package, imported on first use (ConfigError naming the executor when it is missing)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("executor", "ray needs the Ray package: pip install \"ray>=2.50\" "
                                      "(or choose the local executor)") from None
    return ray


class Hub:
    """Ray actor: the mailbox between workers (events up, stop requests down)."""

    def __init__(self):
        self.events: dict[str, list] = collections.defaultdict(list)
        self.stops: set[str] = set()

    def push(self, run_id: str, events: list) -> None:
        self.events[run_id].extend(events)

    def drain(self) -> dict[str, list]:
        out, self.events = dict(self.events), collections.defaultdict(list)
        return out

    def request_stop(self, run_id: str) -> None:
        self.stops.add(run_id)

    def stop_requested(self, run_id: str) -> bool:
        return run_id in self.stops


class WorkerReporter(ReleaseCharge):
    """The Reporter contract inside a Ray worker: events are batched to the hub, never to a store. Its charge
    (:class:`~privengine.reporter.ReleaseCharge`) is computed in the worker when the run fails and travels with
    the outcome; its planned charge goes to the hub at once, ahead of every output (the driver stores it first),
    so a run whose worker dies is charged it."""

    def __init__(self, hub, run_id: str, device: str):
        self.hub, self.run_id, self.device = hub, run_id, device
        self._pending: list = []
        self._metrics: list = []
        self._last_flush = self._last_poll = 0.0
        self._stopped = False

    def metric(self, step: int, **values: float) -> None:
        self._metrics.extend((int(step), k, float(v)) for k, v in values.items() if v is not None)
        if time.monotonic() - self._last_flush >= WORKER_FLUSH_S:
            self.flush()

    def artifact(self, name: str, data: Any) -> None:
        self._pending.append(("artifact", name, data))
        self.flush()

    def log(self, text: str) -> None:
        self._pending.append(("log", text))
        self.flush()

    def progress(self, fraction: float, text: str = "") -> None:
        self._pending.append(("progress", float(fraction), text))
        self.flush()

    def keep_model(self, name: str, tensors: dict, spec: dict) -> None:
        """Send the model to the driver, which alone writes the store (the tensors on the CPU)."""
        self._pending.append(("model", name, {k: t.detach().to("cpu") for k, t in tensors.items()}, spec))
        self.flush()

    def _persist_plan(self, summary: dict) -> None:
        """Deliver the planned charge to the hub before the run goes on: the driver writes a run's events in order,
        so any output that reaches the store comes after it."""
        self._pending.append(("planned_charge", summary))
        self.flush(wait=True)

    def should_stop(self) -> bool:
        now = time.monotonic()
        if self._metrics and now - self._last_flush >= WORKER_FLUSH_S:
            self.flush()
        if not self._stopped and now - self._last_poll >= STOP_POLL_S:
            self._last_poll = now
            self._stopped = ray_module().get(self.hub.stop_requested.remote(self.run_id))
        return self._stopped

    @property
    def stop_was_requested(self) -> bool:
        return self._stopped

    def flush(self, *, wait: bool = False) -> None:
        """Send the buffered events (in order: one caller, one actor); ``wait`` until the hub has them."""
        self._last_flush = time.monotonic()
        events = ([("metrics", self._metrics)] if self._metrics else []) + self._pending
        self._metrics, self._pending = [], []
        if events:
            ref = self.hub.push.remote(self.run_id, events)
            if wait:
                ray_module().get(ref)


def execute_run(hub, run_id: str, mechanism: str, config: dict) -> dict:
    """A run inside a Ray worker: the same run function, config and seed as a local run."""
    from privengine import registry
    from privengine.device import configure_torch_threads, resolve_device

    reporter = None
    try:
        mech = registry.get(mechanism)
        cfg = mech.config_cls.from_dict(config)
        configure_torch_threads()
        device = resolve_device(getattr(cfg, "device", "cpu"))
        node = ray_module().get_runtime_context().get_node_id()[:8]  # which node of the cluster runs it
        ray_module().get(hub.push.remote(run_id, [("running", device.name, node)]))  # delivered before any other event
        reporter = WorkerReporter(hub, run_id, device.id)
        summary = mech.load_run()(cfg, reporter)
        reporter.flush(wait=True)
        return outcome_record(reporter, summary)
    except Exception as exc:  # recorded by the driver as a failed run (with its charged claims), never lost
        record = outcome_record(reporter, exc)
        if reporter is not None:
            try:
                reporter.flush(wait=True)
            except Exception:  # noqa: BLE001  (the hub is gone: the charged claim must still travel with the outcome)
                pass
        return record


def execute_group(hub, run_ids: list[str], mechanism: str, configs: list[dict]) -> dict:
    """Runs executed together inside one Ray worker (the mechanism's ``run_group``): each run's outcome
    (:func:`~privengine.reporter.outcome_record`: its summary, or its failure with its charged claim) is pushed to
    the hub as soon as it ends (an ``"outcome"`` event, the driver ends that run at once). The task returns, by run
    id, the records the hub did not take (the same records, never lost with a failed push) and, should the group
    itself raise, the failed outcome of every run it has not ended. A run the group returns without ending fails
    here, in the worker, with its own charge (its reporter holds the claim covering what it stored; the driver
    could only say that no claim covers it)."""
    from privengine import registry
    from privengine.device import configure_torch_threads, resolve_device

    reporters: list[WorkerReporter] = []
    ended: set[str] = set()
    undelivered: dict[str, dict] = {}

    def end(i: int, outcome) -> None:
        run_id, reporter = run_ids[i], reporters[i]
        record = outcome_record(reporter, outcome)  # in run_group's except block when the run failed
        ended.add(run_id)
        try:
            reporter.flush(wait=True)
            ray_module().get(hub.push.remote(run_id, [("outcome", record)]))
        except Exception:  # noqa: BLE001  (the hub did not take it: the record travels with the task's result)
            undelivered[run_id] = record

    try:
        mech = registry.get(mechanism)
        cfgs = [mech.config_cls.from_dict(c) for c in configs]
        configure_torch_threads()
        device = resolve_device(getattr(cfgs[0], "device", "cpu"))
        node = ray_module().get_runtime_context().get_node_id()[:8]
        for run_id in run_ids:
            ray_module().get(hub.push.remote(run_id, [("running", device.name, node)]))
            reporters.append(WorkerReporter(hub, run_id, device.id))
        registry.load_callable(mech.run_group)(cfgs, reporters, end)
        for i, run_id in enumerate(run_ids):
            if run_id not in ended:
                try:
                    raise RuntimeError(NOT_ENDED_BY_GROUP)
                except RuntimeError as exc:  # outcome_record formats the traceback being handled
                    end(i, exc)
        return undelivered
    except Exception as exc:  # the runs not ended fail, each with its own charge
        out = dict(undelivered)
        for i, run_id in enumerate(run_ids):
            if run_id not in ended:
                out[run_id] = outcome_record(reporters[i] if i < len(reporters) else None, exc)
        return out
