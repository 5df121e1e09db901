"""The worker side of a group of runs executed together as one Ray task (:mod:`.ray_executor`, ``submit_group``).

Split from :mod:`.ray_executor` (which keeps the driver side) to keep each module short.
"""

from __future__ import annotations

from privengine.reporter import outcome_record

from .ray_executor import _ray, _WorkerReporter


def execute_group(hub, run_ids: list[str], mechanism: str, configs: list[dict]) -> dict:
    """Runs executed together inside one Ray worker (the mechanism's ``run_group``): each run's outcome is pushed to
    the hub as soon as it ends (an ``"outcome"`` event, the driver ends that run at once); the task returns the
    outcome of every run it has not ended, all failed, should the group itself raise."""
    from privengine import registry
    from privengine.device import configure_torch_threads, resolve_device

    reporters: list[_WorkerReporter] = []
    ended: set[str] = set()

    def end(i: int, outcome) -> None:
        run_id, reporter = run_ids[i], reporters[i]
        ended.add(run_id)
        record = outcome_record(reporter, outcome)
        reporter.flush(wait=True)
        _ray().get(hub.push.remote(run_id, [("outcome", record)]))

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
        return {}
    except Exception as exc:  # the runs not ended fail, each with its own charge
        out = {}
        for i, run_id in enumerate(run_ids):
            if run_id not in ended:
                out[run_id] = outcome_record(reporters[i] if i < len(reporters) else None, exc)
        return out
