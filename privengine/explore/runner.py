"""Launch, stop, resume and read sweeps; the runs themselves go through an executor.

An executor is anything with ``submit(mechanism, config, *, source, sweep_id, sweep_point) -> run id``,
``stop(run_id)``, ``wait(run_id, timeout) -> RunRecord`` and ``shutdown()``: the local
:class:`~privengine.jobs.JobManager`, or :class:`~privengine.explore.ray_executor.RayExecutor`. Both also have
``submit_group(mechanism, configs, *, source, sweep_id, sweep_points) -> run ids``: runs of a mechanism that
declares ``group_key`` / ``run_group`` (DP-SGD: compatible points train in one model batch) whose configs share a
key are submitted as groups (:func:`groups`; by default only on an accelerator, :func:`groups_pay`), locally as one
job and on Ray as one task; every run of a group is still its own run in the store, with its own claim, curves,
progress and stop.
The store is the single source of truth: a sweep is a row of ``sweeps`` and its runs carry
its id and their point, so any process can draw, stop or resume it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from privengine import registry
from privengine.claims import PrivacyClaim, headline_of
from privengine.config import BaseConfig
from privengine.errors import ConfigError
from privengine.registry import Axis
from privengine.store import ACTIVE_STATES, RunRecord, RunStore, is_epsilon_metric

from .frontier import pareto, run_values
from .spec import Point, SweepSpec, expand, resolve, run_configs


class Executor(Protocol):
    name: str

    def submit(self, mechanism: str, config: BaseConfig, *, source: str, sweep_id: str | None,
               sweep_point: int | None) -> str: ...

    def stop(self, run_id: str) -> None: ...

    def wait(self, run_id: str, timeout: float | None = None) -> RunRecord: ...

    def shutdown(self) -> None: ...


def default_workers() -> int:
    """Concurrent runs a machine takes without thrashing: one per two cores (at least one).

    Each run's torch ops use cores - 1 threads already (``configure_torch_threads``), so more
    workers than half the cores make runs compete for the same cores and slow each other down.
    """
    return max(1, (os.cpu_count() or 1) // 2)


MAX_GROUP_RUNS = 32  # runs of one group at most (a group is one job: its models share one pass and one worker)


def groups(mechanism: str, runs: list[tuple[Point, BaseConfig]], *, workers: int = 1
           ) -> list[list[tuple[Point, BaseConfig]]]:
    """``runs`` split into the groups that execute together, in their order: runs whose configs have the same
    ``group_key`` of the mechanism (None: alone), each key's runs cut into ``max(ceil(n / MAX_GROUP_RUNS),
    min(workers, n))`` contiguous groups of near-equal size, so that several workers share them; a mechanism
    without ``group_key``: every run alone."""
    mech = registry.get(mechanism)
    if mech.group_key is None or mech.run_group is None:
        return [[r] for r in runs]
    key_of = registry.load_callable(mech.group_key)
    by_key: dict[str, list[tuple[Point, BaseConfig]]] = {}
    out: list[list[tuple[Point, BaseConfig]]] = []
    for run in runs:
        key = key_of(run[1])
        if key is None:
            out.append([run])
        else:
            by_key.setdefault(key, []).append(run)
    for members in by_key.values():
        n = len(members)
        parts = max(math.ceil(n / MAX_GROUP_RUNS), min(max(1, workers), n))
        edges = [round(i * n / parts) for i in range(parts + 1)]
        out += [members[a:b] for a, b in zip(edges, edges[1:])]
    return out


def groups_pay(runs: list[tuple[Point, BaseConfig]]) -> bool:
    """Whether grouping is the default for ``runs``: on an accelerator (their device resolves to CUDA or MPS), where
    one pass over K models keeps the device busy; not on a CPU, where a model batch costs about K times one model
    and the smaller chunks of a wide batch made 15 grouped Fashion-MNIST runs slower than the same runs one at a
    time (docs/results/gpu.md)."""
    from privengine.device import resolve_device

    return bool(runs) and resolve_device(getattr(runs[0][1], "device", "cpu")).id.split(":")[0] != "cpu"


def submit_all(executor: Executor, mechanism: str, runs: list[tuple[Point, BaseConfig]], *, source: str,
               sweep_id: str, group: bool | None = None) -> list[str]:
    """Submit ``runs`` (as :func:`groups` when ``group`` (None: :func:`groups_pay`) and the executor takes groups,
    else one by one); their run ids in the order of ``runs``."""
    if group is None:
        group = groups_pay(runs)
    if not group or not hasattr(executor, "submit_group"):
        parts = [[r] for r in runs]
    else:
        parts = groups(mechanism, runs, workers=getattr(executor, "max_concurrent", 1))
    ids: dict[int, str] = {}
    for part in parts:
        if len(part) == 1:
            point, config = part[0]
            new = [executor.submit(mechanism, config, source=source, sweep_id=sweep_id, sweep_point=point.index)]
        else:
            new = executor.submit_group(mechanism, [c for _, c in part], source=source, sweep_id=sweep_id,
                                        sweep_points=[p.index for p, _ in part])
        for run, run_id in zip(part, new):
            ids[id(run)] = run_id
    return [ids[id(run)] for run in runs]


def launch(store: RunStore, executor: Executor, spec: SweepSpec, *, source: str = "api",
           group: bool | None = None) -> str:
    """Validate every run of ``spec`` (ConfigError before anything starts), check the whole sweep's planned release
    (every run x seed) against the budgets of the data sources it reads (BudgetExceeded, before anything is
    stored: :func:`privengine.ledger.budget.admitted`), record the sweep, submit its runs (compatible runs together,
    see :func:`submit_all`: ``True`` always, ``False`` never, None on an accelerator)."""
    mechanism = registry.get(spec.mechanism)
    if mechanism.frontier is None:
        raise ConfigError("mechanism", f"{spec.mechanism!r} declares no frontier, so it cannot be swept")
    spec = resolve(spec)
    runs = run_configs(spec)
    if runs:  # the device is checked before anything is stored (ConfigError if it is absent)
        from privengine.device import resolve_device

        resolve_device(getattr(runs[0][1], "device", "cpu"))
    from privengine.ledger.budget import admitted  # here: it imports dp-accounting, torch and Opacus (the CLI's start)

    with admitted(store, spec.mechanism, [config for _, config in runs]):
        sweep_id = store.create_sweep(spec.mechanism, spec.to_dict(), source=source, executor=executor.name)
        submit_all(executor, spec.mechanism, runs, source=source, sweep_id=sweep_id, group=group)
    return sweep_id


def stop(store: RunStore, executor: Executor | None, sweep_id: str) -> int:
    """Stop a sweep: its queued runs are cancelled, its running ones stopped; returns how many were active."""
    store.set_sweep_stop(sweep_id, True)
    active = [r for r in store.sweep_runs(sweep_id) if r.active]
    for run in active:
        if executor is not None:
            executor.stop(run.id)
        else:
            store.request_stop(run.id)
    return len(active)


def missing(store: RunStore, sweep_id: str) -> list[tuple[Point, BaseConfig]]:
    """The runs of a sweep that have neither finished nor are under way (never run, failed, stopped, lost),
    each as the config of its next attempt: the next ``replica``, so a rerun never reuses the noise of an
    attempt whose partial outputs are stored (every attempt is charged in the sweep's claim)."""
    record = store.get_sweep(sweep_id)
    last_replica: dict[tuple, int] = {}
    done = set()
    for r in store.sweep_runs(sweep_id):
        key = _run_key(r)
        last_replica[key] = max(last_replica.get(key, -1), int(r.config.get("replica", 0)))
        if r.state == "finished" or r.active:
            done.add(key)
    out = []
    for point, config in run_configs(SweepSpec.from_dict(record.spec)):
        key = (point.index, getattr(config, "seed", None))
        if key not in done:
            out.append((point, config.replace(replica=last_replica[key] + 1) if key in last_replica else config))
    return out


def resume(store: RunStore, executor: Executor, sweep_id: str, *, source: str = "api", group: bool | None = None
           ) -> list[str]:
    """Run again only what is missing (see :func:`missing`), compatible runs together as in :func:`launch`, their
    planned release checked against the budgets first, as a launch's; returns the new run ids. What is missing is
    read again inside the admission (:func:`privengine.ledger.budget.admitted`), so two resumes of one sweep at once
    submit it once: the second finds it under way."""
    mechanism = store.get_sweep(sweep_id).mechanism
    todo: list[tuple[Point, BaseConfig]] = []

    def still_missing() -> list[BaseConfig]:
        todo[:] = missing(store, sweep_id)
        return [config for _, config in todo]

    from privengine.ledger.budget import admitted  # here: see launch

    with admitted(store, mechanism, still_missing):
        store.set_sweep_stop(sweep_id, False)
        return submit_all(executor, mechanism, list(todo), source=source, sweep_id=sweep_id, group=group)


@dataclass(frozen=True)
class PointResult:
    """One point of a sweep: its settings, its runs, and mean / sd over the seeds that finished.

    ``selection``: the mean of the utility axis' ``selector`` (e.g. DP-SGD's validation accuracy), which the
    Pareto set is chosen by; ``utility`` is the reported number (equal to it for axes without ``select_by``).
    ``privacy_basis``: for an epsilon privacy axis, the delta and accountant of the finished runs' headline
    claims it was read from (``delta = D; accountant: A``, distinct ones joined by `` | ``), else ``""``.
    """

    index: int
    settings: dict[str, Any]
    runs: list[str]
    states: list[str]
    errors: list[str]
    seeds: int
    privacy: float
    privacy_sd: float
    utility: float
    utility_sd: float
    selection: float = math.nan
    privacy_basis: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "settings": self.settings, "runs": self.runs, "states": self.states,
                "errors": self.errors, "seeds": self.seeds, "privacy": _json_float(self.privacy),
                "privacy_sd": _json_float(self.privacy_sd), "privacy_basis": self.privacy_basis,
                "utility": _json_float(self.utility), "utility_sd": _json_float(self.utility_sd),
                "selection": _json_float(self.selection)}


@dataclass(frozen=True)
class SweepResult:
    """Everything a page, the CLI or a report shows of a sweep."""

    sweep_id: str
    mechanism: str
    spec: SweepSpec
    executor: str
    state: str
    privacy_axis: Axis
    utility_axis: Axis | None
    points: list[PointResult]
    frontier: list[int]
    claim: PrivacyClaim | None
    runs_total: int
    runs_by_state: dict[str, int]
    selection: PrivacyClaim | str | None = None  # random repetition: the best-only claim, or why there is none
    attempts: int = 0  # runs stored, resumed attempts included (runs_total counts the latest attempt of each)
    best: dict[str, Any] | None = None  # random repetition: the run it publishes (:func:`best_run`)
    reported: tuple[str, ...] = ()  # the declared utility axes some finished run has a value for, in declared order

    @property
    def failed(self) -> bool:
        """Whether the latest attempt of some run failed (an earlier failure that a resume fixed does not count)."""
        return self.runs_by_state.get("failed", 0) > 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "sweep_id": self.sweep_id, "mechanism": self.mechanism, "spec": self.spec.to_dict(),
            "executor": self.executor, "state": self.state,
            "privacy_metric": self.privacy_axis.to_dict(),
            "utility_metric": None if self.utility_axis is None else self.utility_axis.to_dict(),
            "points": [p.to_dict() for p in self.points], "frontier": self.frontier,
            "privacy": None if self.claim is None else self.claim.to_dict(),
            "runs_total": self.runs_total, "runs_by_state": self.runs_by_state, "attempts": self.attempts,
            "privacy_best_only": self.selection.to_dict() if isinstance(self.selection, PrivacyClaim) else None,
            "privacy_best_only_note": self.selection if isinstance(self.selection, str) else None,
            "best_run": self.best, "utility_metrics_reported": list(self.reported),
        }


def result(store: RunStore, sweep_id: str, *, utility: str | None = None) -> SweepResult:
    """The sweep's points, Pareto frontier and composed claim, from the store (live while it runs).

    ``utility`` picks another declared utility axis (default: the spec's, else the first of the mechanism's that a
    finished run reports, else its first). Points use the latest attempt of each (point, seed); the claim charges all.
    """
    record = store.get_sweep(sweep_id)
    spec = SweepSpec.from_dict(record.spec)
    frontier = registry.get(record.mechanism).frontier
    runs = store.sweep_runs(sweep_id)
    latest = latest_attempts(runs)
    values = {r.id: run_values(r.summary) for r in latest if r.state == "finished"}
    privacy_axis = frontier.privacy
    reported = tuple(a.name for a in frontier.utility if any(a.name in v for v in values.values()))
    utility_axis = _pick_utility(frontier, utility or spec.utility, reported)
    points = []
    by_point: dict[int, list[RunRecord]] = {}
    for run in latest:
        by_point.setdefault(run.sweep_point, []).append(run)
    settings = {p.index: p.settings for p in expand(spec)}
    for index in sorted(settings):
        mine = by_point.get(index, [])
        done = [r for r in mine if r.id in values]
        pv = [values[r.id].get(privacy_axis.name, math.nan) for r in done]
        uv = [values[r.id].get(utility_axis.name, math.nan) if utility_axis else math.nan for r in done]
        sv = [values[r.id].get(utility_axis.selector, math.nan) if utility_axis else math.nan for r in done]
        points.append(PointResult(index, settings[index], [r.id for r in mine], [r.state for r in mine],
                                  [r.error for r in mine if r.error], len(done), *_mean_sd(pv), *_mean_sd(uv),
                                  _mean_sd(sv)[0], _privacy_basis(privacy_axis, done)))
    from .privacy import selection_claim, sweep_claim  # here: the accountants import dp-accounting (the CLI's start)

    # chosen by the selection number (e.g. validation accuracy), never by the reported one it plots
    front = pareto([(p.privacy, p.selection) for p in points], privacy_better=privacy_axis.better,
                   utility_better=utility_axis.better if utility_axis else "higher")
    by_state = state_counts(latest)
    finished = [r for r in latest if r.id in values]
    return SweepResult(sweep_id, record.mechanism, spec, record.executor,
                       _state(by_state, spec.run_count, record.stop_requested), privacy_axis, utility_axis, points,
                       [points[i].index for i in front], sweep_claim(record.mechanism, runs, utility_axis),
                       len(latest), by_state,
                       selection_claim(spec, finished, utility_axis, attempts=runs) if spec.repeat else None,
                       len(runs),
                       best_run(finished, values, utility_axis) if spec.repeat else None, reported)


def _privacy_basis(axis: Axis, runs: list[RunRecord]) -> str:
    """The delta and accountant behind an epsilon axis' values (:attr:`PointResult.privacy_basis`)."""
    if not is_epsilon_metric(axis.name):
        return ""
    headlines = [headline_of(r.summary) for r in runs]
    return " | ".join(sorted({f"delta = {h.delta:g}; accountant: {h.accountant}" for h in headlines if h}))


def best_run(finished: list[RunRecord], values: dict[str, dict[str, float]], axis: Axis | None
             ) -> dict[str, Any] | None:
    """The run a random-repetition sweep publishes: the finished run best by the utility axis' ``selector`` (e.g.
    DP-SGD's validation accuracy), with its reported number (the test accuracy) beside; None if no run has one."""
    if axis is None:
        return None
    scored = [(values[r.id][axis.selector], r) for r in finished
              if not math.isnan(values.get(r.id, {}).get(axis.selector, math.nan))]
    if not scored:
        return None
    chosen, run = (max if axis.better == "higher" else min)(scored, key=lambda pair: pair[0])
    return {"run": run.id, "point": run.sweep_point, "selected_by": axis.selector, "selection": chosen,
            "utility": axis.name, "value": _json_float(values[run.id].get(axis.name, math.nan))}


def latest_attempts(runs: list[RunRecord]) -> list[RunRecord]:
    """The latest attempt of each (point, seed) of a sweep (``runs`` in creation order within a point)."""
    return list({_run_key(r): r for r in runs}.values())


def state_counts(runs: list[RunRecord]) -> dict[str, int]:
    """How many of ``runs`` are in each state."""
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.state] = counts.get(run.state, 0) + 1
    return counts


def _run_key(run: RunRecord) -> tuple:
    """What identifies a run within its sweep, whatever its attempt: its point and its seed."""
    return run.sweep_point, run.config.get("seed")


def _pick_utility(frontier, wanted: str | None, reported: tuple[str, ...]) -> Axis | None:
    if wanted:
        return frontier.utility_axis(wanted)
    if reported:
        return frontier.utility_axis(reported[0])
    return frontier.utility[0] if frontier.utility else None


def _state(counts: dict[str, int], expected: int | None, stop_requested: bool) -> str:
    """From the latest attempts' state counts: running (some run queued or running), finished (every run
    finished), stopped, or incomplete."""
    if any(counts.get(s, 0) for s in ACTIVE_STATES):
        return "running"
    if expected is not None and counts.get("finished", 0) >= expected:
        return "finished"
    return "stopped" if stop_requested else "incomplete"


def _mean_sd(values: list[float]) -> tuple[float, float]:
    finite = np.array([v for v in values if not math.isnan(v)], dtype=float)
    if finite.size == 0:
        return math.nan, math.nan
    if finite.size == 1 or np.all(finite == finite[0]):  # no spread (not 1e-17 of rounding)
        return float(finite[0]), 0.0
    return float(finite.mean()), float(finite.std(ddof=1))


def _json_float(x: float) -> float | None:
    return None if math.isnan(x) else x
