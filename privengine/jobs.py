"""Background execution of runs: a bounded pool of threads over the run store.

``JobManager.submit(mechanism, config)`` validates the config, records a queued
run and returns its id at once. At most ``max_concurrent`` runs execute at a
time, each in its own thread; the others wait in FIFO order. A run function that
raises marks its run *failed* with the message and traceback, and with the summary
whose claims cover what it stored before failing (``reporter.charge``); nothing it does can
take the caller (the dashboard or the CLI) down. Stops are cooperative: the run
sees ``reporter.should_stop()`` turn true and returns. ``submit_group`` queues runs that execute
together (a mechanism's ``run_group``: a sweep's compatible DP-SGD points in one model batch) as one job of
one thread, each still its own run: stopped, waited for and ended on its own.

Threads here never touch Streamlit: pages read the store.
"""

from __future__ import annotations

import collections
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from . import registry
from .config import BaseConfig
from .device import configure_torch_threads, resolve_device
from .ledger.budget import admitted
from .ledger.sources import source_of
from .reporter import NOT_ENDED_BY_GROUP, Reporter, outcome_record
from .store import RunRecord, RunStore, liveness


@dataclass
class _Job:
    run_id: str
    mechanism: registry.Mechanism
    config: BaseConfig
    device_id: str
    device_name: str
    stop_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None


@dataclass
class _GroupJob:
    """Several runs executed together by the mechanism's ``run_group`` (one slot of the queue, one thread)."""

    run_ids: list[str]
    mechanism: registry.Mechanism
    configs: dict[str, BaseConfig]
    device_id: str
    device_name: str
    stop_events: dict[str, threading.Event] = field(default_factory=dict)
    thread: threading.Thread | None = None

    @property
    def run_id(self) -> str:
        return self.run_ids[0]


def run_ids(job) -> list[str]:
    """The runs of a queued or running job: its ``run_ids`` (a group of runs executed together), or its one run."""
    return list(job.run_ids) if hasattr(job, "run_ids") else [job.run_id]


class RunQueue:
    """A FIFO of runs with at most ``max_concurrent`` executing: what every executor shares.

    Subclasses start a queued job in ``_start_locked(job)`` (called with the lock held), tell one run of a
    running job to stop in ``_stop_running(job, run_id)``, and call :meth:`_ended` once a run has ended.
    Jobs need a ``run_id`` attribute, or ``run_ids`` for a group of runs executed together (one slot of the
    ``max_concurrent``, each of its runs stopped, waited for and ended on its own).

    The queue owns its runs: while it has any queued or running, a thread touches them every
    :data:`~privengine.store.liveness.HEARTBEAT_S` (:meth:`~privengine.store.RunStore.touch`), the heartbeat by
    which other processes, on this host or another, tell them from runs whose owner is gone.
    """

    def __init__(self, store: RunStore, max_concurrent: int):
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be >= 1; got {max_concurrent}")
        self.store = store
        self.max_concurrent = max_concurrent
        self._lock = threading.Lock()
        self._queue: collections.deque = collections.deque()
        self._running: dict[str, Any] = {}
        self._done = threading.Condition(self._lock)
        self._heartbeat: threading.Thread | None = None

    def stop(self, run_id: str) -> None:
        """Ask a run to stop. A queued run is marked stopped at once; a running one within a second or two.

        Works for runs of other processes too (through the store's stop flag).
        """
        with self._lock:
            for job in self._queue:
                if run_id in run_ids(job):
                    if len(run_ids(job)) == 1:
                        self._queue.remove(job)
                    else:  # the group starts without it
                        job.run_ids.remove(run_id)
                    self.store.mark_ended(run_id, "stopped", error=None)
                    self._done.notify_all()
                    return
            job = self._running.get(run_id)
        if job is not None:
            self._stop_running(job, run_id)
        self.store.request_stop(run_id)

    def wait(self, run_id: str, timeout: float | None = None) -> RunRecord:
        """Block until this executor's run ``run_id`` has ended (or ``timeout``); return its record."""
        with self._done:
            self._done.wait_for(lambda: not self._owns(run_id), timeout=timeout)
        return self.store.get_run(run_id)

    def active_run_ids(self) -> list[str]:
        """Ids of this executor's queued and running runs."""
        with self._lock:
            return self._active_locked()

    def ahead_of(self, run_id: str) -> list[str]:
        """The runs queued run ``run_id`` waits for: this executor's running runs, then the runs queued before
        it; empty when ``run_id`` is not queued here (running, ended, or queued by another process)."""
        with self._lock:
            queued = [i for j in self._queue for i in run_ids(j)]
            if run_id not in queued:
                return []
            return list(self._running) + queued[:queued.index(run_id)]

    def shutdown(self, *, timeout: float = 10.0) -> None:
        """Stop every queued and running run of this executor and wait for them."""
        for run_id in self.active_run_ids():
            self.stop(run_id)
        with self._done:
            self._done.wait_for(lambda: not self._running, timeout=timeout)

    def _create_runs(self, mechanism: str, configs: list[BaseConfig], *, source: str, sweep_id: str | None,
                     points: list[int | None]) -> list[str]:
        """Store the runs of one launch (one run, or a group), queued, each at its point of ``sweep_id`` and with its
        private data source; their ids. The one place runs are created: the launch is checked against the budgets
        of the sources it reads first (:func:`~privengine.ledger.budget.admitted`: BudgetExceeded, a ConfigError,
        and nothing is stored)."""
        with admitted(self.store, mechanism, configs):
            return [self.store.create_run(mechanism, c.to_dict(), source=source, sweep_id=sweep_id, sweep_point=point,
                                          data_source=source_of(self.store, mechanism, c))
                    for c, point in zip(configs, points)]

    def _enqueue(self, job) -> None:
        with self._lock:
            self._queue.append(job)
            self._start_ready_locked()
            if self._heartbeat is None:
                self._heartbeat = threading.Thread(target=self._beat, name="privengine-heartbeat", daemon=True)
                self._heartbeat.start()

    def _beat(self) -> None:
        """The heartbeat thread: touch this queue's queued and running runs every ``HEARTBEAT_S`` until it has
        none (a later job starts a new thread). A touch the store refuses (locked past its timeout) is retried at
        the next beat: the limit allows many missed ones."""
        try:
            while True:
                time.sleep(liveness.HEARTBEAT_S)
                with self._lock:
                    ids = self._active_locked()
                    if not ids:
                        self._heartbeat = None
                        return
                try:
                    self.store.touch(ids)
                except sqlite3.OperationalError:
                    pass  # the store was locked past its timeout: the next beat touches them
        finally:
            self.store.close()

    def _active_locked(self) -> list[str]:
        return list(self._running) + [i for j in self._queue for i in run_ids(j)]

    def _owns(self, run_id: str) -> bool:
        return run_id in self._running or any(run_id in run_ids(j) for j in self._queue)

    def _jobs_running(self) -> int:
        return len({id(job) for job in self._running.values()})

    def _start_ready_locked(self) -> None:
        while self._queue and self._jobs_running() < self.max_concurrent:
            job = self._queue.popleft()
            for run_id in run_ids(job):
                if self.store.stop_requested(run_id):  # stopped while queued, e.g. by another process
                    self.store.mark_ended(run_id, "stopped", error=None)
                    self._done.notify_all()
                    if hasattr(job, "run_ids"):
                        job.run_ids.remove(run_id)
                    else:
                        job = None
            if job is None or not run_ids(job):
                continue
            for run_id in run_ids(job):
                self._running[run_id] = job
            self._start_locked(job)

    def _ended(self, run_id: str) -> None:
        """A running job has ended: start the next ones and wake the waiters."""
        with self._lock:
            self._running.pop(run_id, None)
            self._start_ready_locked()
            self._done.notify_all()

    def _start_locked(self, job) -> None:
        raise NotImplementedError

    def _stop_running(self, job, run_id: str) -> None:
        raise NotImplementedError


class JobManager(RunQueue):
    """Runs mechanisms in background threads and records everything in ``store``.

    Args:
        store: where runs, metrics and artifacts go.
        max_concurrent: how many runs may execute at once (>= 1); the rest queue.
    """

    name = "local"  # as a sweep executor

    def __init__(self, store: RunStore, *, max_concurrent: int = 1):
        super().__init__(store, max_concurrent)
        store.recover_interrupted()
        self._threads: dict[str, threading.Thread] = {}

    def join(self, run_id: str, timeout: float | None = 30.0) -> None:
        """Wait until the thread of ended run ``run_id`` has exited (it frees the run's tensors after the run is
        recorded). A process must do this before it exits: the job threads are daemons, and interpreter shutdown
        in the middle of a thread's torch work aborts the process ("terminate called without an active exception",
        exit 134, seen after a Fashion-MNIST run that had finished)."""
        thread = self._threads.pop(run_id, None)
        if thread is not None:
            thread.join(timeout)

    def shutdown(self, *, timeout: float = 10.0) -> None:
        """Stop every queued and running run, wait for them, and for their threads to exit (see :meth:`join`)."""
        super().shutdown(timeout=timeout)
        for run_id in list(self._threads):
            self.join(run_id, timeout=timeout)

    def submit(self, mechanism: str, config: BaseConfig | dict[str, Any], *, source: str = "api",
               sweep_id: str | None = None, sweep_point: int | None = None) -> str:
        """Validate and queue a run (at ``sweep_point`` of ``sweep_id``, if given); return its id.

        Raises ConfigError on bad input."""
        mech = registry.get(mechanism)
        if isinstance(config, dict):
            config = mech.config_cls.from_dict(config)
        elif not isinstance(config, mech.config_cls):
            raise TypeError(f"config for {mechanism} must be a {mech.config_cls.__name__}; got {type(config).__name__}")
        config.validate()
        configure_torch_threads()
        device = resolve_device(getattr(config, "device", "cpu"))
        run_id, = self._create_runs(mech.name, [config], source=source, sweep_id=sweep_id, points=[sweep_point])
        self._enqueue(_Job(run_id, mech, config, device.id, device.name))
        return run_id

    def submit_group(self, mechanism: str, configs: list[BaseConfig], *, source: str = "api",
                     sweep_id: str | None = None, sweep_points: list[int | None] | None = None) -> list[str]:
        """Validate and queue runs that execute together (the mechanism's ``run_group``; their configs share its
        ``group_key``), each its own run in the store; return their ids. One run: :meth:`submit`."""
        points = sweep_points or [None] * len(configs)
        if len(configs) == 1:
            return [self.submit(mechanism, configs[0], source=source, sweep_id=sweep_id, sweep_point=points[0])]
        mech = registry.get(mechanism)
        if mech.run_group is None:
            raise ValueError(f"{mechanism} runs no groups")
        for config in configs:
            config.validate()
        configure_torch_threads()
        device = resolve_device(getattr(configs[0], "device", "cpu"))
        ids = self._create_runs(mech.name, configs, source=source, sweep_id=sweep_id, points=points)
        self._enqueue(_GroupJob(list(ids), mech, dict(zip(ids, configs)), device.id, device.name,
                                {i: threading.Event() for i in ids}))
        return ids

    # ---- RunQueue hooks ----------------------------------------------------------------

    def _start_locked(self, job: _Job | _GroupJob) -> None:
        group = isinstance(job, _GroupJob)
        job.thread = threading.Thread(target=self._execute_group if group else self._execute, args=(job,),
                                      daemon=True, name=f"privengine-run-{job.run_id}" + ("-group" if group else ""))
        for run_id in run_ids(job):
            self._threads[run_id] = job.thread
        job.thread.start()

    def _stop_running(self, job: _Job | _GroupJob, run_id: str) -> None:
        (job.stop_events[run_id] if isinstance(job, _GroupJob) else job.stop_event).set()

    def _execute(self, job: _Job) -> None:
        """Run the job; a run that raises is recorded *failed* with its error, traceback and the summary its
        reporter was charged with (:class:`~privengine.reporter.ReleaseCharge`: the claims covering what it
        stored before failing). Anything raised, ``BaseException`` included (e.g. ``SystemExit`` in the run's
        thread), takes that path: what the run stored is never left without its charge while the process lives."""
        store = self.store
        try:
            store.mark_running(job.run_id, device=job.device_name)
            reporter = Reporter(store, job.run_id, device=job.device_id, stop_event=job.stop_event)
            try:
                _record_end(store, job.run_id, reporter, job.mechanism.load_run()(job.config, reporter))
            except BaseException as exc:  # a run's failure is recorded, never propagated: the app must live on
                _record_end(store, job.run_id, reporter, exc)
                if not isinstance(exc, Exception):
                    raise
        finally:
            store.close()
            self._ended(job.run_id)

    def _execute_group(self, job: _GroupJob) -> None:
        """Run a group (the mechanism's ``run_group``): each run is marked running, then ended as soon as the group
        says it has (finished or stopped with its summary, or failed with its charge, as in :meth:`_execute`);
        should the group itself raise, or return without ending a run, every run it has not ended fails with its
        own charge."""
        store = self.store
        ids = run_ids(job)
        ended: set[str] = set()
        reporters: list[Reporter] = []

        def end(i: int, outcome) -> None:
            run_id, reporter = ids[i], reporters[i]
            ended.add(run_id)
            try:
                _record_end(store, run_id, reporter, outcome)
            finally:
                self._ended(run_id)

        try:
            for run_id in ids:
                store.mark_running(run_id, device=job.device_name)
                reporters.append(Reporter(store, run_id, device=job.device_id, stop_event=job.stop_events[run_id]))
            try:
                registry.load_callable(job.mechanism.run_group)([job.configs[i] for i in ids], reporters, end)
                for i, run_id in enumerate(ids):  # the contract is one end per run: one left fails with its charge
                    if run_id not in ended:
                        end(i, RuntimeError(NOT_ENDED_BY_GROUP))
            except BaseException as exc:  # as in _execute: recorded, never propagated
                for i, run_id in enumerate(ids):
                    if run_id not in ended and i < len(reporters):
                        end(i, exc)
                if not isinstance(exc, Exception):
                    raise
        finally:
            store.close()
            for run_id in ids:
                if run_id not in ended:  # never marked running (the store failed): not left owned forever
                    self._ended(run_id)


def _record_end(store: RunStore, run_id: str, reporter: Reporter, outcome) -> None:
    """Save what the run reported and store how it ended (:func:`~privengine.reporter.outcome_record`): a summary,
    or the exception it raised (then the flush is quiet, so a store error cannot hide the run's own)."""
    if isinstance(outcome, BaseException):
        _flush_quietly(reporter)
    else:
        reporter.flush()
    store.mark_ended(run_id, **outcome_record(reporter, outcome))


def _flush_quietly(reporter: Reporter) -> None:
    """Save what the failed run reported; a store error here must not hide the run's own error."""
    try:
        reporter.flush()
    except sqlite3.Error:
        pass
