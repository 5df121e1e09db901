"""The worker side of a group of runs executed together as one Ray task (:mod:`.ray_executor`, ``submit_group``).

Split from :mod:`.ray_executor` (which keeps the driver side) to keep each module short.
"""

from __future__ import annotations

from privengine.reporter import NOT_ENDED_BY_GROUP, outcome_record

from .ray_executor import _ray, _WorkerReporter


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

    reporters: list[_WorkerReporter] = []
    ended: set[str] = set()
    undelivered: dict[str, dict] = {}

    def end(i: int, outcome) -> None:
        run_id, reporter = run_ids[i], reporters[i]
        record = outcome_record(reporter, outcome)  # in run_group's except block when the run failed
        ended.add(run_id)
        try:
            reporter.flush(wait=True)
            _ray().get(hub.push.remote(run_id, [("outcome", record)]))
        except Exception:  # noqa: BLE001  (the hub did not take it: the record travels with the task's result)
            undelivered[run_id] = record

    try:
        mech = registry.get(mechanism)
        cfgs = [mech.config_cls.from_dict(c) for c in configs]
        configure_torch_threads()
        device = resolve_device(getattr(cfgs[0], "device", "cpu"))
        node = _ray().get_runtime_context().get_node_id()[:8]
        for run_id in run_ids:
            _ray().get(hub.push.remote(run_id, [("running", device.name, node)]))
            reporters.append(_WorkerReporter(hub, run_id, device.id))
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
