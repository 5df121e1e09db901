"""Issue 26, item 3 (the sweep part): a sweep's compatible DP-SGD points train in one model batch, locally as one job
and on Ray as one task, each point still its own run (claim, curves, progress, stop); for the same keys the grouped
and one-at-a-time sweeps agree."""

from __future__ import annotations

import dataclasses
import json
import math
import time
import types

import pytest

from privengine import registry
from privengine.explore import SweepSpec, run_configs
from privengine.explore import runner
from privengine.jobs import JobManager

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing", "ignore:Optimal order")

# digits, a linear head on pixels: about 25 steps per model, seconds per sweep
BASE = dict(dataset="digits", model="linear", alphas=[0.0], n_seeds=1, epochs=1.0, batch_size=64,
            physical_batch_size=1024, accountant="rdp", momentum=0.5)


@pytest.fixture
def local(store):
    manager = JobManager(store, max_concurrent=1)
    yield manager
    manager.shutdown()


def _sweep(store, executor, spec: SweepSpec, *, group: bool) -> runner.SweepResult:
    sweep_id = runner.launch(store, executor, spec, group=group)
    for run in store.sweep_runs(sweep_id):
        executor.wait(run.id, timeout=600)
    return runner.result(store, sweep_id)


def _runs(store, result: runner.SweepResult) -> dict:
    """The sweep's runs by (point, seed)."""
    return {(r.sweep_point, r.config["seed"]): r for r in store.sweep_runs(result.sweep_id)}


def _assert_same_runs(store, grouped, alone):
    a, b = _runs(store, grouped), _runs(store, alone)
    assert a.keys() == b.keys() and len(a) > 1
    for key in a:
        mine, theirs = a[key], b[key]
        assert mine.state == theirs.state == "finished" and mine.config == theirs.config
        # the same sigma and histories: the same claims, to the bit
        assert mine.summary["noise_multiplier"] == theirs.summary["noise_multiplier"]
        assert mine.summary["privacy"] == theirs.summary["privacy"]
        for m1, m2 in zip(mine.summary["models"], theirs.summary["models"], strict=True):
            assert (m1["seed"], m1["steps"], m1["stopped"]) == (m2["seed"], m2["steps"], m2["stopped"])
            assert m1["test_acc"] == pytest.approx(m2["test_acc"], abs=1.5 / mine.summary["private_size"] + 0.006)
            assert m1["train_loss"] == pytest.approx(m2["train_loss"], rel=1e-4)
        curves_a, curves_b = store.metrics(mine.id), store.metrics(theirs.id)
        assert sorted(set(curves_a["name"])) == sorted(set(curves_b["name"]))
        loss = [n for n in set(curves_a["name"]) if n.startswith("train_loss")]
        for name in loss:
            va = curves_a[curves_a["name"] == name].sort_values("step")
            vb = curves_b[curves_b["name"] == name].sort_values("step")
            assert list(va["step"]) == list(vb["step"])
            assert list(va["value"]) == pytest.approx(list(vb["value"]), rel=1e-4)
    assert grouped.claim.epsilon == alone.claim.epsilon  # the sweep's composed claim too


@pytest.mark.slow
def test_grouped_and_one_at_a_time_sweeps_agree_for_the_same_keys(store, local):
    """Points differing in target epsilon (so sigma), learning rate, clip norm and EMA, two seeds each: 8 runs in
    one model batch against the same 8 runs one at a time."""
    spec = SweepSpec("dpsgd", base=BASE, axes={"target_epsilon": [1.0, 4.0], "lr": [0.5, 2.0]}, seeds=2)
    alone = _sweep(store, local, spec, group=False)
    grouped = _sweep(store, local, spec, group=True)
    _assert_same_runs(store, grouped, alone)
    logs = [[text for _, text in store.logs(r.id)] for r in store.sweep_runs(grouped.sweep_id)]
    assert all(any("train in one model batch with 7 model(s) of 7 other run(s)" in line for line in log)
               for log in logs)
    assert not any(any("model batch with" in text for _, text in store.logs(r.id))
                   for r in store.sweep_runs(alone.sweep_id))
    spec2 = SweepSpec("dpsgd", base={**BASE, "noise_mode": "sigma"},
                      axes={"max_grad_norm": [0.1, 1.0], "ema_decay": [0.0, 0.9]}, seeds=1)
    _assert_same_runs(store, _sweep(store, local, spec2, group=True), _sweep(store, local, spec2, group=False))


def test_groups_are_what_a_model_batch_can_share():
    spec = SweepSpec("dpsgd", base=BASE, axes={"lr": [0.5, 1.0], "batch_size": [32, 64]}, seeds=2)
    runs = run_configs(spec)
    groups = runner.groups("dpsgd", runs)
    # lr and the seed may differ in a batch, the batch size may not: one group per batch size
    assert sorted(len(g) for g in groups) == [4, 4]
    assert all(len({c.batch_size for _, c in g}) == 1 for g in groups)
    # shared by the workers
    assert sorted(len(g) for g in runner.groups("dpsgd", runs, workers=3)) == [1, 1, 1, 1, 2, 2]
    unbatchable = run_configs(SweepSpec("dpsgd", base={**BASE, "alphas": [0.0, 4.0]}, axes={"lr": [0.5, 1.0]}))
    assert [len(g) for g in runner.groups("dpsgd", unbatchable)] == [1, 1]  # alpha 4 trains on Opacus: alone
    toy = run_configs(SweepSpec("toy", axes={"rate": [0.1, 0.2]}))
    assert [len(g) for g in runner.groups("toy", toy)] == [1, 1]  # a mechanism without groups
    # by default only on an accelerator: on a CPU one model batch of K costs about K single models
    assert not runner.groups_pay(run_configs(SweepSpec("dpsgd", base={**BASE, "device": "cpu"}, axes={"lr": [1.0]})))
    many = run_configs(SweepSpec("dpsgd", base=BASE, axes={"lr": [0.1 * (i + 1) for i in range(20)]}, seeds=2))
    assert [len(g) for g in runner.groups("dpsgd", many)] == [20, 20]  # at most MAX_GROUP_RUNS = 32 a group


def test_one_run_of_a_group_stops_and_the_others_finish(store, local):
    configs = [c for _, c in run_configs(SweepSpec("dpsgd", base={**BASE, "epochs": 30.0, "noise_mode": "sigma"},
                                                   axes={"lr": [0.5, 1.0, 2.0]}))]
    sweep_id = store.create_sweep("dpsgd", {}, source="test", executor="local")
    ids = local.submit_group("dpsgd", configs, sweep_id=sweep_id, sweep_points=[0, 1, 2])
    deadline = time.monotonic() + 120
    while store.metrics(ids[1]).empty and time.monotonic() < deadline:
        time.sleep(0.05)
    local.stop(ids[1])
    stopped = local.wait(ids[1], timeout=60)
    assert stopped.state == "stopped" and stopped.summary["stopped"]
    others = [local.wait(i, timeout=600) for i in (ids[0], ids[2])]
    assert all(r.state == "finished" for r in others)
    planned = others[0].summary["steps_per_model"]
    assert 0 < stopped.summary["models"][0]["steps"] < planned
    assert all(r.summary["models"][0]["steps"] == planned for r in others)
    assert stopped.summary["privacy"][0]["epsilon"] < others[0].summary["privacy"][0]["epsilon"]  # its own history


def test_a_run_stopped_while_its_group_is_queued_never_starts_and_the_group_runs_without_it(store):
    manager = JobManager(store, max_concurrent=1)
    try:
        blocker = manager.submit("toy", registry.get("toy").config_cls.from_dict({"steps": 10_000, "delay": 0.01}))
        configs = [c for _, c in run_configs(SweepSpec("dpsgd", base=BASE, axes={"lr": [0.5, 1.0]}))]
        ids = manager.submit_group("dpsgd", configs)
        assert manager.ahead_of(ids[1]) == [blocker, ids[0]]
        manager.stop(ids[0])
        manager.stop(blocker)
        assert manager.wait(ids[1], timeout=600).state == "finished"
        assert store.get_run(ids[0]).state == "stopped" and store.metrics(ids[0]).empty
    finally:
        manager.shutdown()


@pytest.mark.slow
def test_a_group_on_ray_is_one_task_with_the_same_runs(store, local):
    pytest.importorskip("ray", reason="the Ray executor needs the ray package (installed by the test requirements)")
    from privengine.explore.ray_executor import RayExecutor

    spec = SweepSpec("dpsgd", base=BASE, axes={"target_epsilon": [1.0, 4.0]}, seeds=2)
    alone = _sweep(store, local, spec, group=False)
    executor = RayExecutor(store, workers=1)
    try:
        on_ray = _sweep(store, executor, spec, group=True)
    finally:
        executor.shutdown()
    assert on_ray.executor == "ray" and on_ray.runs_by_state == {"finished": 4}
    _assert_same_runs(store, on_ray, alone)
    runs = store.sweep_runs(on_ray.sweep_id)
    assert all("(Ray)" in r.device for r in runs)
    assert all(math.isfinite(p.privacy) for p in on_ray.points)


def test_a_failure_of_the_shared_batch_fails_every_run_with_its_own_charge(monkeypatch):
    from privengine.dpsgd import group
    from tests.memory_reporter import MemoryReporter

    configs = [c for _, c in run_configs(SweepSpec("dpsgd", base={**BASE, "noise_mode": "sigma"},
                                                   axes={"noise_multiplier": [0.8, 1.6]}))]
    real = group.train_models

    def failing(task, config, plan, members, **kwargs):
        def wrap(member):
            def on_eval(step, values, history):
                if step >= 3 * plan.eval_every:
                    raise RuntimeError("simulated failure in the batch")
                member.on_eval(step, values, history)
            return dataclasses.replace(member, on_eval=on_eval)
        return real(task, config, plan, [wrap(m) for m in members], **kwargs)

    monkeypatch.setattr(group, "train_models", failing)
    reporters = [MemoryReporter(), MemoryReporter()]
    outcomes: dict[int, object] = {}
    group.run_group(configs, reporters, lambda i, outcome: outcomes.__setitem__(i, outcome))
    assert sorted(outcomes) == [0, 1] and all(isinstance(o, RuntimeError) for o in outcomes.values())
    for reporter, config in zip(reporters, configs):
        charged = reporter.charged_summary()
        assert charged["failed"] and charged["models_charged"] == 1
        assert charged["noise_multiplier"] == config.noise_multiplier  # its own sigma, its whole planned history
        assert charged["models"][0]["steps"] == charged["steps_per_model"]


def test_a_group_queued_when_the_ray_cluster_is_lost_has_every_run_marked_never_started(store):
    """Regression (review of item 3): on a lost cluster only the first run of a queued group was marked never started;
    the others stayed 'queued' in the store, owned by no executor (wait returned at once, resume skipped them).
    The driver's own lost-cluster path, on an executor built without a cluster (nothing of it needs Ray)."""
    from privengine.explore.ray_executor import _GroupJob

    ids = [store.create_run("dpsgd", {"lr": lr}, source="test") for lr in (0.5, 1.0, 2.0)]
    executor = _clusterless_driver(store, lost="the Ray cluster was lost (test)")
    executor._queue.append(_GroupJob(list(ids), "dpsgd", {}))
    with executor._lock:
        executor._start_ready_locked()
    assert not executor.active_run_ids()
    for run_id in ids:
        run = store.get_run(run_id)
        assert run.state == "interrupted" and run.error.startswith("never started: the Ray cluster was lost")


def _clusterless_driver(store, lost: str | None = None):
    """A RayExecutor's driver state without a cluster or driver thread: its queue, lock, store and record paths."""
    import collections
    import threading

    from privengine.explore.ray_executor import RayExecutor

    executor = object.__new__(RayExecutor)
    executor.store, executor.max_concurrent, executor.lost = store, 1, lost
    executor._lock = threading.Lock()
    executor._done = threading.Condition(executor._lock)
    executor._queue, executor._running = collections.deque(), {}
    return executor


class _WorkerRay:
    """What a Ray worker's code calls of ``ray``, in this process: ``get`` of a ref (its value, or it raises the
    exception the ref holds) and the node id."""

    @staticmethod
    def get(ref):
        if isinstance(ref, BaseException):
            raise ref
        return ref

    @staticmethod
    def get_runtime_context():
        return types.SimpleNamespace(get_node_id=lambda: "0123456789abcdef")


class _RefusingHub:
    """The driver's hub as a worker calls it (``push.remote``, ``stop_requested.remote``): it keeps the events
    pushed, but an ``"outcome"`` event of a run in ``refused`` fails (its ``get`` raises)."""

    def __init__(self, refused: set[str]):
        self.events: dict[str, list] = {}
        self.push = types.SimpleNamespace(remote=self._push)
        self.stop_requested = types.SimpleNamespace(remote=lambda run_id: False)
        self.refused = refused

    def _push(self, run_id: str, events: list):
        if run_id in self.refused and any(e[0] == "outcome" for e in events):
            return ConnectionError("the hub did not take the push (simulated)")
        self.events.setdefault(run_id, []).extend(events)
        return None


def test_a_group_run_whose_outcome_push_fails_is_recorded_with_the_same_outcome(store, monkeypatch):
    """Regression: a group's worker marked a run ended before pushing its outcome, so a failed push lost it and the
    driver recorded the bare 'its group's task ended without ending it' (no charged claim, no word that none covers
    its outputs). Now the same :func:`outcome_record` comes back with the task; a run the group returns without
    ending fails in the worker with its own charge (review of 404218c: the driver's fallback had dropped that
    claim, held by the worker, for the no-claim sentence). Worker and driver code in this process (no cluster)."""
    from privengine.claims import PrivacyClaim
    from privengine.explore import ray_executor, ray_worker
    from privengine.reporter import FAILURE_CAVEAT

    ids = [store.create_run("toy", {}, source="test") for _ in range(4)]
    claim = PrivacyClaim("toy", 1.0, 1e-5, "toy accountant", "add or remove one example", headline=True).to_dict()

    def run_group(configs, reporters, ended):
        reporters[0].metric(1, score=0.5)
        ended(0, {"score": 0.5})                      # pushed: the driver ends it through the hub
        reporters[1].metric(1, score=0.4)
        reporters[1].charge({"privacy": [claim]})
        try:
            raise RuntimeError("run 1 failed")
        except RuntimeError as exc:
            ended(1, exc)                             # its outcome push fails: returned with the task
        ended(2, {"score": 0.7})                      # its outcome push fails too
        reporters[3].charge({"privacy": [claim]})
        reporters[3].metric(1, score=0.1)
        reporters[3].flush(wait=True)                 # stored outputs under its charge, then never ended

    toy = registry.get("toy")
    monkeypatch.setattr(registry, "get", lambda name: dataclasses.replace(toy, run_group=run_group))
    monkeypatch.setattr("privengine.device.configure_torch_threads", lambda: 1)
    monkeypatch.setattr(ray_worker, "ray_module", _WorkerRay)
    monkeypatch.setattr(ray_executor, "ray_module", _WorkerRay)
    hub = _RefusingHub(refused={ids[1], ids[2]})
    returned = ray_worker.execute_group(hub, ids, "toy", [{}] * 4)

    assert set(returned) == {ids[1], ids[2]}
    failed = returned[ids[1]]
    assert failed["state"] == "failed" and failed["error"] == "RuntimeError: run 1 failed"
    assert "run 1 failed" in failed["traceback"] and failed["summary"]["failed"] is True
    assert FAILURE_CAVEAT in failed["summary"]["privacy"][0]["caveats"]  # its charged claim, as every failure's
    assert returned[ids[2]] == {"state": "finished", "summary": {"score": 0.7}}

    driver = _clusterless_driver(store)
    job = ray_executor._GroupJob(list(ids), "toy", {})
    driver._running = {run_id: job for run_id in ids}
    driver._write(hub.events)  # what the hub took: running, curves, run 0's outcome
    driver._finish(job, returned, drain=False)  # the task's result
    runs = [store.get_run(run_id) for run_id in ids]
    assert [r.state for r in runs] == ["finished", "failed", "finished", "failed"]
    assert runs[0].summary == {"score": 0.5} and runs[2].summary == {"score": 0.7}
    assert runs[1].error == "RuntimeError: run 1 failed" and runs[1].summary == failed["summary"]
    assert runs[3].error == f"RuntimeError: {ray_worker.NOT_ENDED_BY_GROUP}"  # through the hub, as run 0's end
    assert runs[3].summary["failed"] is True and runs[3].summary["privacy"][0]["epsilon"] == 1.0
    assert FAILURE_CAVEAT in runs[3].summary["privacy"][0]["caveats"]  # the claim charged for what it stored
    assert not driver.active_run_ids()


def test_a_group_run_missing_from_its_tasks_result_is_covered_by_no_claim(store):
    """The driver's fallback for a started run of a group that neither the hub nor the task's result ended (no
    outcome reached the driver, so no claim did): failed, saying that no claim covers the outputs it stored."""
    from privengine.explore import ray_executor

    ids = [store.create_run("toy", {}, source="test") for _ in range(2)]
    for run_id in ids:
        store.mark_running(run_id, device="cpu (Ray)")
    store.add_metrics(ids[0], [(1, "score", 0.1)])
    driver = _clusterless_driver(store)
    job = ray_executor._GroupJob(list(ids), "toy", {})
    driver._running = {run_id: job for run_id in ids}
    driver._finish(job, {}, drain=False)
    with_outputs, without = (store.get_run(run_id) for run_id in ids)
    assert with_outputs.state == "failed" and with_outputs.summary is None
    assert with_outputs.error == (f"{ray_executor.NOT_ENDED}; the curves and tables it stored before that are "
                                  f"covered by no privacy claim ({ray_executor.NO_CLAIM_NOT_ENDED}): do not publish "
                                  "them")
    assert without.state == "failed" and without.error == ray_executor.NOT_ENDED and without.summary is None
    assert not driver.active_run_ids()


@pytest.mark.parametrize("flag, pays, together", [
    ("--group", False, True),      # forced where grouping does not pay (this CPU)
    ("--no-group", True, False),   # refused where it would
    (None, True, True),            # by default, what runner.groups_pay says
])
def test_the_sweep_command_groups_as_its_flag_says(store, monkeypatch, flag, pays, together):
    import io

    from privengine import cli
    from privengine.explore import cli as sweep_cli

    monkeypatch.setattr(runner, "groups_pay", lambda runs: pays)
    args = ["sweep", "dpsgd", "--vary", "lr=0.5,1.0", "--dataset", "digits", "--model", "linear", "--alphas", "0",
            "--n-seeds", "1", "--epochs", "0.5", "--batch-size", "64", "--physical-batch-size", "1024",
            "--accountant", "rdp", "--workers", "1", "--json", *([flag] if flag else [])]
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(args, stdout=out, stderr=err) == 0, err.getvalue()
    runs = store.sweep_runs(json.loads(out.getvalue())["sweep_id"])
    assert len(runs) == 2 and all(r.state == "finished" for r in runs)
    batched = [any("train in one model batch with 1 model(s) of 1 other run(s)" in text for _, text in store.logs(r.id))
               for r in runs]
    assert batched == [together, together]
    # the resume command a failed sweep prints keeps the choice; resume-sweep takes it
    parsed = cli.build_parser().parse_args(args)
    assert sweep_cli.resume_command(parsed, "s1").endswith({"--group": " --group", "--no-group": " --no-group",
                                                             None: " --workers 1"}[flag])
    assert cli.build_parser().parse_args(["resume-sweep", "s1", *([flag] if flag else [])]).group == \
        {"--group": True, "--no-group": False, None: None}[flag]


def test_a_local_group_run_left_unended_by_its_group_fails_with_its_charge(store, monkeypatch):
    """The local executor's twin of the Ray case above (review of 404218c): a run the mechanism's run_group returns
    without ending is not left 'running' while the app lives; it fails with the claim it was charged with."""
    from privengine.claims import PrivacyClaim
    from privengine.reporter import FAILURE_CAVEAT, NOT_ENDED_BY_GROUP

    claim = PrivacyClaim("toy", 1.0, 1e-5, "toy accountant", "add/remove one").to_dict()

    def run_group(configs, reporters, ended):
        ended(0, {"score": 0.5})
        reporters[1].charge({"privacy": [claim]})
        reporters[1].metric(1, score=0.1)  # stored under its charge, then never ended

    toy = registry.get("toy")
    monkeypatch.setattr(registry, "get", lambda name: dataclasses.replace(toy, run_group=run_group))
    manager = JobManager(store)
    try:
        ids = manager.submit_group("toy", [toy.config_cls(), toy.config_cls()])
        done, left = (manager.wait(run_id, timeout=30) for run_id in ids)
    finally:
        manager.shutdown()
    assert done.state == "finished" and done.summary == {"score": 0.5}
    assert left.state == "failed" and left.error == f"RuntimeError: {NOT_ENDED_BY_GROUP}"
    assert left.summary["privacy"][0]["epsilon"] == 1.0 and FAILURE_CAVEAT in left.summary["privacy"][0]["caveats"]
    assert list(store.metrics(left.id)["value"]) == [0.1]
