"""Run a sweep's runs as Ray tasks, on a local Ray cluster or an existing one.

Ray core tasks rather than Ray Tune: the sweep engine already owns the grid, the seeds, the
frontier and the store, so Tune's search, trial bookkeeping and result logging would duplicate
them; a task per run is all that is needed.

The driver (this process) is the only writer of the store: workers on other machines cannot
reach its SQLite file. A run's task gets a :class:`~.ray_worker.WorkerReporter` with the Reporter contract
(metric, artifact, log, progress, should_stop) that batches its events to a :class:`~.ray_worker.Hub`
actor; a driver thread drains the hub about four times a second into the store, so the
dashboard draws Ray runs live exactly like local ones. Stops travel the other way: the driver
forwards a stop (from :meth:`RayExecutor.stop`, or a store stop flag set by another process)
to the hub, which the worker polls every half second. At most ``workers`` runs are in flight;
the others wait in a FIFO queue on the driver, so cancelling a queued run costs nothing.

The driver owns the runs (host and pid in the store) and keeps them alive there: the queue it shares with the job
manager touches them while they are queued or in flight (:class:`~privengine.jobs.RunQueue`, the heartbeat of
:mod:`privengine.store.liveness`); a worker, which cannot reach the store, never does.

On an existing cluster (``address`` or ``$RAY_ADDRESS``) privengine must be importable on the
workers (installed there, or shipped with a Ray ``runtime_env``). An address that cannot be joined (nothing
listens, or the cluster refuses this driver's authentication) is a ConfigError of ``address``
(:mod:`.ray_address`), before anything is stored or queued.

Faults. A run whose task dies (its worker process killed, its node lost) is marked *failed* with a
sentence saying what died (:func:`death_sentence`) and, if it stored outputs, the planned charge its worker
sent before its first output (``reporter.charge_plan``; :meth:`~privengine.store.RunStore.death_charge`);
the other runs go on. If the driver loses the cluster itself (the hub actor, which lives on the driver's
node, or the connection), the executor is
*lost* (:attr:`RayExecutor.lost`): the runs that had started are failed, those that never started are
marked interrupted ("never started", resumable), nothing more is started, and the caller says how to
resume the sweep. A task that dies before its run reported starting is likewise "never started".
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privengine.config import BaseConfig
from privengine.errors import ConfigError, PrivengineError
from privengine.jobs import RunQueue, run_ids
from privengine.store import NO_CLAIM_AFTER_DEATH, RunStore

from .ray_address import check_reachable, join_error
from .ray_worker import STOP_POLL_S, Hub, execute_group, execute_run, ray_module

DRAIN_S = 0.25          # how often the driver moves worker events into the store
LOST_AFTER_S = 10.0     # the driver gives the cluster up after failing to reach it this long (or at once, see below)
# A run of a group whose task returned without ending it (nor returning its outcome): failed, and no claim covers it.
NOT_ENDED = "its group's task ended without ending it"
NO_CLAIM_NOT_ENDED = "the claim it was charged with stayed in its group's task, which returned no outcome for it"
_ENV_PASSED = ("PRIVENGINE_PLUGINS", "PRIVENGINE_TORCH_THREADS", "PRIVENGINE_DATA", "PRIVENGINE_HOME")


class ExecutorLostError(PrivengineError):
    """The Ray executor lost its cluster; a new executor (a new command) is needed to resume."""


def worker_runtime_env(address: str | None) -> dict | None:
    """The Ray ``runtime_env`` of the workers: privengine's environment variables (``_ENV_PASSED``) and its checkout
    first on ``PYTHONPATH``, or None when they inherit both anyway.

    They do on the local cluster this executor starts (no ``address``) when the checkout is on this process's
    ``PYTHONPATH`` or is its working directory: that cluster's processes are started from this one with its
    environment, and Ray puts the driver's working directory on its workers' ``sys.path``. Without a runtime_env
    the first tasks run on the workers Ray prestarts, one per CPU, instead of on new ones started for the
    runtime_env while those sit idle (``bench/bench_ray_start.py``, two workers on two busy cores: wall 0.88, CPU
    0.97 of a sweep's with a runtime_env; one worker: no change).
    """
    env = {k: os.environ[k] for k in _ENV_PASSED if k in os.environ}
    root = Path(__file__).resolve().parents[2]
    path = os.environ.get("PYTHONPATH")
    if not address and root in {Path(p).resolve() for p in [os.curdir, *filter(None, (path or "").split(os.pathsep))]}:
        return None
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), path]))
    return {"env_vars": env}


def death_sentence(exc: BaseException) -> str:
    """What died, for a run whose Ray task raised ``exc`` instead of returning (its own errors are returned)."""
    errors = ray_module().exceptions
    if isinstance(exc, errors.NodeDiedError):
        what = "the Ray node running it was lost"
    elif isinstance(exc, errors.WorkerCrashedError):
        what = "the Ray worker process running it died (killed, or crashed)"
    elif isinstance(exc, errors.TaskCancelledError):
        what = "its Ray task was cancelled"
    elif isinstance(exc, (errors.RaySystemError, errors.ObjectLostError, errors.LocalRayletDiedError)):
        what = "the driver lost its connection to the Ray cluster running it"
    elif isinstance(exc, errors.RayActorError):
        what = "the Ray driver's hub actor died while it ran"
    else:
        what = "its Ray task died"
    detail = " ".join(str(exc).split())
    return f"{what} ({type(exc).__name__}: {detail[:240]}{'...' if len(detail) > 240 else ''})"


def _outcome(ray, ref) -> dict:
    """A finished task's result; a task that died (worker killed, node lost) is a failed run, not a lost one."""
    try:
        return ray.get(ref)
    except Exception as exc:  # RayTaskError, WorkerCrashedError, ...: the run's own errors are caught in execute_run
        return {"state": "failed", "died": True, "error": death_sentence(exc), "traceback": traceback.format_exc()}


def _cluster_gone(exc: BaseException) -> bool:
    """Whether an error of the driver loop means the cluster is lost for good (else it is retried a while)."""
    try:
        errors = ray_module().exceptions
    except ConfigError:
        return True
    return isinstance(exc, (errors.ActorDiedError, errors.RaySystemError, errors.LocalRayletDiedError))


@dataclass
class _Job:
    run_id: str
    mechanism: str
    config: dict
    ref: Any = None


@dataclass
class _GroupJob:
    """Runs executed together as one Ray task (one worker slot); each ends on its own (an ``"outcome"`` event)."""

    run_ids: list[str]
    mechanism: str
    configs: dict[str, dict]
    ref: Any = None

    @property
    def run_id(self) -> str:
        return self.run_ids[0]


class RayExecutor(RunQueue):
    """The sweep executor on Ray (see the module docstring).

    Args:
        store: the driver's run store.
        address: an existing cluster (default ``$RAY_ADDRESS``; none: start a local cluster of ``workers`` CPUs).
        workers: runs in flight at once (the rest wait in the driver's queue).
    """

    name = "ray"

    def __init__(self, store: RunStore, *, address: str | None = None, workers: int = 1):
        ray = ray_module()
        self.lost: str | None = None  # why the cluster was lost, once it is (see the module docstring)
        super().__init__(store, workers)
        address = address or os.environ.get("RAY_ADDRESS") or None
        store.recover_interrupted()
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            if address:  # refused, unreachable or token-refusing: one sentence naming the address, not minutes of
                check_reachable(address)  # retries and a ConnectionError traceback
            # no address: "local" starts this sweep's own cluster (with no address, ray.init joins any cluster a
            # `ray start` left recorded in /tmp/ray, and refuses num_cpus there)
            try:
                ray.init(address=address or "local", num_cpus=None if address else workers, include_dashboard=False,
                         log_to_driver=False, configure_logging=False, runtime_env=worker_runtime_env(address))
            except (ConnectionError, getattr(ray.exceptions, "AuthenticationError", ConnectionError)) as exc:
                if not address:
                    raise
                raise join_error(address, exc) from None
        # the hub lives on the driver's node (hard affinity: a soft one may land elsewhere), so a worker node lost
        # takes only its own runs with it
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self._hub = ray.remote(num_cpus=0)(Hub).options(scheduling_strategy=here).remote()
        self._task = ray.remote(execute_run)

        self._group_task = ray.remote(execute_group)
        self._closed = False
        self._pump = threading.Thread(target=self._loop, name="privengine-ray-driver", daemon=True)
        self._pump.start()

    # ---- the executor interface -------------------------------------------------------

    def submit(self, mechanism: str, config: BaseConfig, *, source: str = "api", sweep_id: str | None = None,
               sweep_point: int | None = None) -> str:
        config.validate()
        if self.lost:
            raise ExecutorLostError(f"the Ray executor lost its cluster ({self.lost}); start a new one to resume")
        self._check_device(config)
        run_id, = self._create_runs(mechanism, [config], source=source, sweep_id=sweep_id, points=[sweep_point])
        self._enqueue(_Job(run_id, mechanism, config.to_dict()))
        return run_id

    def submit_group(self, mechanism: str, configs: list[BaseConfig], *, source: str = "api",
                     sweep_id: str | None = None, sweep_points: list[int | None] | None = None) -> list[str]:
        """Runs that execute together as one Ray task (the mechanism's ``run_group``), each its own run in the
        store; their ids. One run: :meth:`submit`."""
        points = sweep_points or [None] * len(configs)
        if len(configs) == 1:
            return [self.submit(mechanism, configs[0], source=source, sweep_id=sweep_id, sweep_point=points[0])]
        for config in configs:
            config.validate()
        if self.lost:
            raise ExecutorLostError(f"the Ray executor lost its cluster ({self.lost}); start a new one to resume")
        self._check_device(configs[0])
        ids = self._create_runs(mechanism, configs, source=source, sweep_id=sweep_id, points=points)
        self._enqueue(_GroupJob(list(ids), mechanism, {i: c.to_dict() for i, c in zip(ids, configs)}))
        return ids

    def _check_device(self, config: BaseConfig) -> None:
        """Refuse at launch a ``device="cuda"`` run on a cluster without a GPU: its task asks Ray for one GPU and would
        wait for it forever. (``auto`` runs on a CPU here: Ray hides the GPUs from a task that asked for none.)"""
        if getattr(config, "device", None) != "cuda":
            return
        gpus = ray_module().cluster_resources().get("GPU", 0)
        if gpus < 1:
            raise ConfigError("device", "must not be cuda on this Ray cluster: it has no GPU, so the run would wait "
                                        "for one forever; choose cpu or auto, or add a node with a GPU")

    def shutdown(self, *, timeout: float = 30.0) -> None:
        """Stop what is queued or running, wait for it, and stop the local cluster if this executor started it."""
        super().shutdown(timeout=timeout)
        with self._lock:
            self._closed = True
        self._pump.join(timeout=5)
        if self._owns_ray:
            try:
                ray_module().shutdown()
            except Exception:  # noqa: BLE001  (a lost cluster may not shut down cleanly; nothing is left to save)
                pass

    # ---- RunQueue hooks and the driver thread --------------------------------------------

    def _start_locked(self, job: _Job | _GroupJob) -> None:
        group = isinstance(job, _GroupJob)
        first = job.configs[job.run_id] if group else job.config
        num_gpus = 1 if first.get("device") == "cuda" else 0
        # no retries: a retried task would replay the same noise under the same run id
        options = self._group_task if group else self._task
        args = (list(job.run_ids), [job.configs[i] for i in job.run_ids]) if group else (job.run_id, job.config)
        job.ref = options.options(num_cpus=1, num_gpus=num_gpus, max_retries=0).remote(
            self._hub, args[0], job.mechanism, args[1])

    def _stop_running(self, job: _Job | _GroupJob, run_id: str) -> None:
        try:
            self._hub.request_stop.remote(run_id)
        except Exception:  # noqa: BLE001  (the cluster is lost: the loop ends the run)
            pass

    def _start_ready_locked(self) -> None:
        if self.lost is None:
            super()._start_ready_locked()
            return
        while self._queue:  # nothing starts on a lost cluster: the queued runs stay resumable
            for run_id in run_ids(self._queue.popleft()):  # every run of a queued group, not only its first
                self._never_started(run_id, self.lost)
        self._done.notify_all()

    def _loop(self) -> None:
        """The driver thread: events into the store, stop flags to the workers, outcomes recorded.

        An error of the loop itself is retried for up to :data:`LOST_AFTER_S`; one that means the cluster is gone
        (the hub actor died, the connection is lost), or one that persists, loses the executor (:meth:`_lose`)
        rather than leaving runs running forever or the thread dying with a traceback.
        """
        ray = ray_module()
        last_stop_check = 0.0
        failing_since: float | None = None
        try:
            while True:
                with self._lock:
                    closed = self._closed
                    jobs = list({id(j): j for j in self._running.values()}.values())  # a group once
                if closed:
                    if self.lost is None:
                        self._write(ray.get(self._hub.drain.remote()))
                    return
                try:
                    last_stop_check = self._pump_once(ray, jobs, last_stop_check)
                    failing_since = None
                except Exception as exc:  # noqa: BLE001  (any failure here must end the runs, not hang them)
                    failing_since = failing_since or time.monotonic()
                    if _cluster_gone(exc) or time.monotonic() - failing_since >= LOST_AFTER_S:
                        self._lose(exc, traceback.format_exc())
                        return
                    time.sleep(DRAIN_S)
        except Exception as exc:  # noqa: BLE001  (e.g. the last drain: never a traceback in this thread)
            if self.lost is None:
                self._lose(exc, traceback.format_exc())
        finally:
            self.store.close()

    def _lose(self, exc: BaseException, trace: str) -> None:
        """The cluster is lost: fail the runs that had started, mark the others never started, start nothing more."""
        first = " ".join(str(exc).split()).split(". ")[0][:160]
        reason = f"the Ray cluster was lost ({type(exc).__name__}: {first})"
        with self._lock:
            self.lost = reason
            in_flight = list(self._running.items())
        for job in {id(j): j for _, j in in_flight}.values():
            try:
                ray_module().cancel(job.ref, force=True)
            except Exception:  # noqa: BLE001  (best effort: the task may be gone with its node)
                pass
        for run_id, _ in in_flight:
            try:
                if self.store.get_run(run_id).state == "running":
                    self._mark_died(run_id, f"{reason} while it ran", trace)
                else:
                    self._never_started(run_id, reason)
            finally:
                self._ended(run_id)  # starts nothing: queued runs are marked never started instead
        with self._lock:
            self._start_ready_locked()

    def _mark_died(self, run_id: str, sentence: str, trace: str | None, why: str = NO_CLAIM_AFTER_DEATH) -> None:
        """A started run whose task died (or ended without ending it): failed, saying so and what covers what it
        stored: its planned charge, or no claim if it sent none (``why``: its charged claim died with the task, or
        never left it); see :meth:`~privengine.store.RunStore.death_charge`."""
        clause, summary = self.store.death_charge(run_id, why)
        self.store.mark_ended(run_id, "failed", error=sentence + clause, traceback=trace, summary=summary)

    def _never_started(self, run_id: str, reason: str) -> None:
        self.store.mark_ended(run_id, "interrupted", error=f"never started: {reason} before it began; nothing of "
                                                           "it was stored (resuming the sweep runs it)")

    def _pump_once(self, ray, jobs: list[_Job], last_stop_check: float) -> float:
        if jobs:
            ready, _ = ray.wait([j.ref for j in jobs], num_returns=len(jobs), timeout=DRAIN_S)
        else:
            ready = []
            time.sleep(DRAIN_S)
        self._write(ray.get(self._hub.drain.remote()))
        for job in jobs:
            if job.ref in ready:
                self._finish(job, _outcome(ray, job.ref))
        if time.monotonic() - last_stop_check >= STOP_POLL_S:
            last_stop_check = time.monotonic()
            with self._lock:
                running = list(self._running)
            for run_id in running:
                if self.store.stop_requested(run_id):
                    self._hub.request_stop.remote(run_id)
        return last_stop_check

    def _write(self, events_by_run: dict[str, list]) -> None:
        store = self.store
        for run_id, events in events_by_run.items():
            for event in events:
                kind = event[0]
                if kind == "metrics":
                    store.add_metrics(run_id, event[1])
                elif kind == "artifact":
                    store.put_artifact(run_id, event[1], event[2])
                elif kind == "log":
                    store.add_log(run_id, event[1])
                elif kind == "progress":
                    store.set_progress(run_id, event[1], event[2])
                elif kind == "planned_charge":
                    store.set_planned_charge(run_id, event[1])
                elif kind == "model":
                    store.put_model(run_id, event[1], event[2], event[3])
                elif kind == "running":
                    node = f" on node {event[2]}" if len(event) > 2 else ""
                    store.mark_running(run_id, device=f"{event[1]} (Ray){node}")
                elif kind == "outcome":  # one run of a group has ended (the others go on)
                    self._record(run_id, event[1])
                    self._ended(run_id)

    def _finish(self, job: _Job | _GroupJob, outcome: dict, *, drain: bool = True) -> None:
        """The task of ``job`` has returned (or died): every run of it not yet ended is ended by ``outcome`` (a
        group's: one outcome per run it did not end through the hub, or the death of the whole task)."""
        if drain:
            self._write(ray_module().get(self._hub.drain.remote()))  # the runs' last events before their end
        with self._lock:
            left = [i for i in run_ids(job) if self._running.get(i) is job]
        for run_id in left:
            mine = outcome if not isinstance(job, _GroupJob) or outcome.get("died") else outcome.get(run_id, {
                "state": "failed", "died": True, "error": NOT_ENDED, "traceback": None, "no_claim": NO_CLAIM_NOT_ENDED})
            self._record(run_id, mine)
            self._ended(run_id)

    def _record(self, run_id: str, outcome: dict) -> None:
        """Store one run's end: its state, summary (a failed run's charged one) or what died."""
        if outcome.get("died"):  # the task died (or never ended it): no summary; never started if it never said so
            if self.store.get_run(run_id).state == "queued":
                self._never_started(run_id, outcome["error"])
            else:
                self._mark_died(run_id, outcome["error"], outcome["traceback"],
                                outcome.get("no_claim", NO_CLAIM_AFTER_DEATH))
        elif outcome["state"] == "failed":  # a run that raised has its charged summary
            self.store.mark_ended(run_id, "failed", error=outcome["error"], traceback=outcome["traceback"],
                                  summary=outcome.get("summary"))
        else:
            self.store.mark_ended(run_id, outcome["state"], summary=outcome["summary"])
