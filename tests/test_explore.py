"""Sweeps: spec validation, the frontier, the composed claim, failures, stop / resume, both executors, the CLI."""

from __future__ import annotations

import csv
import io
import json
import math
import threading
import time

import pytest

from privengine import registry
from privengine.claims import headline_of
from privengine.accounting.subsampled_gaussian import epsilon_of, merge
from privengine.errors import ConfigError
from privengine.explore import SweepSpec, expand, pareto, run_configs, suggest_values
from privengine.explore import runner
from privengine.explore.export import points_csv
from privengine.explore.spec import resolve
from privengine.jobs import JobManager
from tests.conftest import run_cli

SWEEPABLE = [m.name for m in registry.all_mechanisms() if m.frontier is not None and m.name != "toy"]


@pytest.fixture
def local(store):
    manager = JobManager(store, max_concurrent=1)
    yield manager
    manager.shutdown()


def _finish(store, executor, spec: SweepSpec, timeout: float = 600) -> runner.SweepResult:
    sweep_id = runner.launch(store, executor, spec)
    for run in store.sweep_runs(sweep_id):
        executor.wait(run.id, timeout=timeout)
    return runner.result(store, sweep_id)


# ---- the spec -------------------------------------------------------------------------------

def test_bad_values_name_the_field_and_its_range_before_anything_runs(store):
    with pytest.raises(ConfigError, match=r"`rate` must be in \(0, 1\]; got 5"):
        expand(SweepSpec("toy", axes={"rate": [0.1, 5.0]}))
    with pytest.raises(ConfigError, match="`nonsense` is not a field"):
        expand(SweepSpec("toy", axes={"nonsense": [1]}))
    with pytest.raises(ConfigError, match="`seed` cannot be varied"):
        expand(SweepSpec("toy", axes={"seed": [1, 2]}))
    with pytest.raises(ConfigError, match="`replica` cannot be varied"):
        expand(SweepSpec("toy", axes={"replica": [0, 1]}))
    with pytest.raises(ConfigError, match="`replica` must be 0 in a sweep's base"):
        expand(SweepSpec("toy", base={"replica": 1}, axes={"rate": [0.1]}))
    with pytest.raises(ConfigError, match="`samples` must be > 0 exactly when"):
        expand(SweepSpec("toy", random={"rate": (0.1, 0.5)}))
    with pytest.raises(ConfigError, match="`fail_at` must be below steps"):  # a rule across fields, per run
        run_configs(SweepSpec("toy", base={"steps": 2}, axes={"fail_at": [1, 5]}))
    with pytest.raises(ConfigError, match="`extra` has no effect unless mode is b"):
        expand(SweepSpec("toy", axes={"extra": [1, 2]}))
    expand(SweepSpec("toy", axes={"extra": [1, 2], "mode": ["b"]}))  # fine once its parent is varied to b
    with pytest.raises(ConfigError, match="`utility` must be one of score"):
        expand(SweepSpec("toy", axes={"rate": [0.1]}, utility="scroe"))
    with pytest.raises(ConfigError, match="`draw_seed` must be an integer >= 0"):
        expand(SweepSpec("toy", axes={"rate": [0.1]}, draw_seed=-1))
    # what the private data is, and the neighbouring relation, stay fixed across a sweep's runs
    with pytest.raises(ConfigError, match="`public_fraction` cannot be varied in a sweep: it decides which examples"):
        expand(SweepSpec("dpsgd", axes={"public_fraction": [0.05, 0.1]}))
    with pytest.raises(ConfigError, match="`neighbouring` cannot be varied in a sweep"):
        expand(SweepSpec("dp_bayes", axes={"neighbouring": ["replace-one", "add-remove"]}))
    assert store.list_sweeps() == []


def test_grid_times_seeds_and_random_draws_within_the_declared_range():
    spec = SweepSpec("toy", base={"seed": 10}, axes={"mode": ["a", "b"], "steps": [1, 2]}, seeds=3)
    configs = run_configs(spec)
    assert len(expand(spec)) == 4 and len(configs) == 12
    assert sorted({c.seed for _, c in configs}) == [10, 11, 12]
    drawn = expand(SweepSpec("toy", random={"rate": (0.001, 1.0), "steps": (1, 50)}, samples=200, draw_seed=3))
    rates = [p.settings["rate"] for p in drawn]
    assert all(0.001 <= r <= 1.0 for r in rates) and all(isinstance(p.settings["steps"], int) for p in drawn)
    # rate is a log knob: log-uniform, so about a third of the draws fall in each decade
    assert 40 < sum(r < 0.01 for r in rates) < 95


def test_suggested_values_respect_the_knob():
    spec = registry.get("toy").config_cls.spec
    assert suggest_values(spec("mode")) == ["a", "b"]
    rates = suggest_values(spec("rate"))
    assert len(rates) >= 3 and all(0 < r <= 1 for r in rates) and rates[-1] / rates[0] > 10  # geometric


def test_pate_and_dpsgd_accuracies_can_share_a_chart_and_leak_auc_cannot():
    pate, dpsgd, split = (registry.get(n).frontier for n in ("pate", "dpsgd", "split_label"))
    assert pate.utility[0].comparable(dpsgd.utility[0]) and pate.privacy.comparable(dpsgd.privacy)
    assert not split.privacy.comparable(dpsgd.privacy)


def test_pareto_keeps_the_best_utility_for_each_privacy_level():
    points = [(1.0, 0.80), (1.0, 0.82), (2.0, 0.81), (3.0, 0.90), (4.0, 0.85), (math.nan, 1.0)]
    assert pareto(points, privacy_better="lower", utility_better="higher") == [1, 3]
    assert pareto(points, privacy_better="lower", utility_better="lower") == [0]


# ---- sweeps of every mechanism, the composed claim -------------------------------------------

@pytest.mark.parametrize("name", SWEEPABLE)
def test_sweep_of_every_mechanism_on_its_smoke_config(name, store, local):
    mech = registry.get(name)
    first = mech.config_cls.spec("seed")  # every mechanism has one; vary a knob of its own instead
    assert first
    axis = {"dpsgd": {"max_grad_norm": [0.5, 2.0]}, "pate": {"queries": [50, 100]},
            "dp_bayes": {"epsilon": [0.5, 5.0]}, "split_label": {"protection": ["none", "max_norm"]}}[name]
    res = _finish(store, local, SweepSpec(name, base=dict(mech.smoke), axes=axis, seeds=1))
    assert res.state == "finished" and res.runs_by_state == {"finished": 2}
    assert all(p.seeds == 1 and math.isfinite(p.privacy) and math.isfinite(p.utility) for p in res.points)
    assert res.frontier and set(res.frontier) <= {0, 1}
    if name == "split_label":
        assert res.claim is None and res.privacy_axis.name == "leak_auc"
    else:
        assert res.claim.headline and "selecting among the 2 runs of the sweep that state a claim" in res.claim.label


def test_dpsgd_sweep_claim_composes_every_model_with_the_accountant(store, local):
    spec = SweepSpec("dpsgd", base={"epochs": 1.0, "n_seeds": 1, "noise_mode": "sigma", "accountant": "rdp",
                                    "alphas": [0.0]}, axes={"noise_multiplier": [0.8, 1.5]}, seeds=2)
    res = _finish(store, local, spec)
    histories = [[(r.summary["noise_multiplier"], r.summary["sample_rate"], m["steps"])]
                 for r in store.sweep_runs(res.sweep_id) for m in r.summary["models"]]
    assert len(histories) == 4
    assert res.claim.epsilon == pytest.approx(epsilon_of(merge(histories), accountant="rdp", delta=1e-5)[0])
    assert res.claim.delta == 1e-5 and "Opacus RDP" in res.claim.accountant
    per_run = [p.privacy for p in res.points]
    assert res.claim.epsilon > max(per_run) and per_run[0] > per_run[1]  # more noise, less epsilon
    # issue 24, item 6: the exported epsilon names its delta and accountant
    rows = list(csv.reader(io.StringIO(points_csv(res))))
    assert rows[0][3:6] == ["headline_epsilon", "headline_epsilon_sd", "headline_epsilon_basis"]
    runs = {r.id: r for r in store.sweep_runs(res.sweep_id)}
    for row, point in zip(rows[1:], res.points):
        accountant = headline_of(runs[point.runs[0]].summary).accountant
        assert row[5] == point.privacy_basis == f"delta = 1e-05; accountant: {accountant}"


def test_basic_composition_sums_the_headlines(store, local):
    res = _finish(store, local, SweepSpec("toy", base={"steps": 1}, axes={"rate": [0.1, 0.3]}, seeds=2))
    assert res.claim.epsilon == pytest.approx(2 * (1.0 + 3.0)) and res.claim.delta == pytest.approx(4e-5)
    assert "basic composition" in res.claim.accountant and "Choosing the best" in res.claim.caveats[0]
    assert [p.utility_sd > 0 for p in res.points] == [True, True]  # the toy's seed noise: sd over seeds


def test_a_failed_run_is_shown_with_its_error_and_the_sweep_goes_on(store, local):
    res = _finish(store, local, SweepSpec("toy", base={"steps": 3}, axes={"fail_at": [-1, 1]}, seeds=2))
    assert res.runs_by_state == {"finished": 2, "failed": 2} and res.failed and res.state == "incomplete"
    good, bad = res.points
    assert good.seeds == 2 and bad.seeds == 0 and math.isnan(bad.utility)
    assert bad.errors and "toy failure at step 1" in bad.errors[0]
    assert res.claim is not None and "2 run(s) of the sweep stated no claim" in " ".join(res.claim.caveats)


@pytest.mark.slow
def test_stop_cancels_and_resume_runs_only_what_is_missing(store, local):
    spec = SweepSpec("toy", base={"steps": 200, "delay": 0.01}, axes={"rate": [0.1, 0.2, 0.3]}, seeds=1)
    sweep_id = runner.launch(store, local, spec)
    deadline = time.monotonic() + 30
    while not any(r.state == "running" for r in store.sweep_runs(sweep_id)) and time.monotonic() < deadline:
        time.sleep(0.02)
    runner.stop(store, local, sweep_id)
    for run in store.sweep_runs(sweep_id):
        local.wait(run.id, timeout=10)
    states = sorted(r.state for r in store.sweep_runs(sweep_id))
    assert states == ["stopped", "stopped", "stopped"] and runner.result(store, sweep_id).state == "stopped"
    todo = runner.missing(store, sweep_id)
    assert len(todo) == 3 and {c.replica for _, c in todo} == {1}  # reruns draw fresh noise: the next replica
    new = runner.resume(store, local, sweep_id)
    assert len(new) == 3
    for run_id in new:
        local.wait(run_id, timeout=60)
    res = runner.result(store, sweep_id)
    assert runner.missing(store, sweep_id) == [] and res.state == "finished"
    assert res.runs_total == 3 and res.attempts == 6 and res.runs_by_state == {"finished": 3}
    assert runner.resume(store, local, sweep_id) == []  # nothing left to run


def test_two_resumes_of_one_sweep_at_once_submit_what_is_missing_once(store, local, monkeypatch):
    """Each resume reads what is missing inside the admission, so the second finds the run under way: no run is
    submitted (trained and charged) twice."""
    from privengine.ledger import budget

    check = budget.check_configs

    def slow_check(*args, **kwargs):  # a check that takes a while: the other resume starts meanwhile
        time.sleep(1.0)
        return check(*args, **kwargs)

    monkeypatch.setattr(budget, "check_configs", slow_check)
    sweep_id = store.create_sweep("toy", resolve(SweepSpec("toy", base={"steps": 1}, axes={"rate": [0.1]})).to_dict())
    start, new = threading.Barrier(2), []

    def resume():
        start.wait(30)
        new.append(runner.resume(store, local, sweep_id))

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(len(ids) for ids in new) == [0, 1]
    assert [r.id for r in store.sweep_runs(sweep_id)] == [i for ids in new for i in ids]


def test_a_resumed_failure_no_longer_counts_as_failed(store, local):
    sweep_id = runner.launch(store, local, SweepSpec("toy", base={"steps": 3}, axes={"fail_at": [-1]}))
    for run in store.sweep_runs(sweep_id):
        local.wait(run.id, timeout=30)
    (run,) = store.sweep_runs(sweep_id)
    store.mark_ended(run.id, "failed", error="a transient failure")  # as if the machine had lost it
    assert runner.result(store, sweep_id).failed
    for run_id in runner.resume(store, local, sweep_id):
        local.wait(run_id, timeout=30)
    res = runner.result(store, sweep_id)
    assert not res.failed and res.points[0].errors == [] and res.claim.epsilon == pytest.approx(1.0)
    assert "1 run(s) of the sweep stated no claim" in " ".join(res.claim.caveats)  # the lost attempt is said


def test_a_run_stopped_while_queued_never_starts(store):
    manager = JobManager(store, max_concurrent=1)
    try:
        first = manager.submit("toy", {"steps": 50, "delay": 0.02})
        second = manager.submit("toy", {"steps": 2})
        store.request_stop(second)  # from another process: only the store flag is set
        manager.wait(first, timeout=30)
        assert manager.wait(second, timeout=10).state == "stopped" and store.metrics(second).empty
    finally:
        manager.shutdown()


def test_utility_computed_from_private_data_is_flagged_in_the_claim(store, local):
    smoke = dict(registry.get("dp_bayes").smoke)
    res = _finish(store, local, SweepSpec("dp_bayes", base=smoke, axes={"epsilon": [1.0, 4.0]}))
    assert not res.utility_axis.covered
    assert any("is NOT covered" in c for c in res.claim.caveats)


# ---- the Ray executor, on a real local cluster --------------------------------------------------

def ray_executor_has_gpu() -> bool:
    import ray

    return ray.cluster_resources().get("GPU", 0) >= 1


@pytest.mark.slow
def test_ray_executor_gives_the_same_numbers_as_local(store, local, monkeypatch):
    pytest.importorskip("ray", reason="the Ray executor needs the ray package (installed by the test requirements)")
    from privengine.explore.ray_executor import RayExecutor

    monkeypatch.setenv("PRIVENGINE_PLUGINS", "tests.toy_mechanism")
    spec = SweepSpec("dp_bayes", base=dict(registry.get("dp_bayes").smoke), axes={"epsilon": [0.5, 5.0]}, seeds=2)
    on_local = _finish(store, local, spec)
    ray_executor = RayExecutor(store, workers=2)
    try:
        on_ray = _finish(store, ray_executor, spec)
        # stop reaches a Ray worker: a toy run of 10 000 steps of 10 ms (over 100 s) ends stopped, not finished,
        # within the wait's 20 s (a liveness bound, not a speed assertion)
        long_id = runner.launch(store, ray_executor, SweepSpec("toy", base={"steps": 10_000, "delay": 0.01}))
        (run,) = store.sweep_runs(long_id)
        deadline = time.monotonic() + 60
        while store.metrics(run.id).empty and time.monotonic() < deadline:
            time.sleep(0.05)
        runner.stop(store, ray_executor, long_id)
        stopped = ray_executor.wait(run.id, timeout=20)
        assert stopped.state == "stopped"
        # a cuda run on a cluster without a GPU is refused at launch (its task would wait for a GPU forever)
        if not ray_executor_has_gpu():
            runs_before = len(store.list_runs())
            with pytest.raises(ConfigError, match="must not be cuda on this Ray cluster: it has no GPU"):
                ray_executor.submit("toy", registry.get("toy").config_cls.from_dict({"device": "cuda"}))
            assert len(store.list_runs()) == runs_before  # nothing stored, nothing queued
    finally:
        ray_executor.shutdown()
    assert on_ray.executor == "ray" and on_ray.runs_by_state == {"finished": 4}
    for a, b in zip(on_local.points, on_ray.points):
        assert a.settings == b.settings and a.utility == b.utility and a.privacy == b.privacy
    ray_runs = store.sweep_runs(on_ray.sweep_id)
    assert all("(Ray)" in r.device for r in ray_runs)
    assert all(not store.metrics(r.id).empty and store.artifacts(r.id) for r in ray_runs)  # live curves arrived


# ---- the CLI ----------------------------------------------------------------------------------

_cli = run_cli  # in-process through cli.main; test_cli.py runs `python -m privengine` itself once


def test_cli_sweep_json_and_exit_status(private_home):
    done = _cli("sweep", "toy", "--vary", "rate=0.1,0.5", "--seeds", "2", "--steps", "2", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["mechanism"] == "toy" and out["sweep_id"].startswith("s")
    assert out["privacy_metric"] == {"name": "headline_epsilon", "label": "ε per run (its headline claim)",
                                     "better": "lower", "kind": "headline_epsilon", "covered": True}
    assert out["utility_metric"]["name"] == "score" and out["utility_metric"]["better"] == "higher"
    assert [p["settings"] for p in out["points"]] == [{"rate": 0.1}, {"rate": 0.5}]
    assert all(len(p["runs"]) == 2 and p["seeds"] == 2 and "utility_sd" in p for p in out["points"])
    assert out["frontier"] == [0, 1] and out["privacy"]["headline"]
    listed = _cli("sweeps")
    assert out["sweep_id"] in listed.stdout and "finished" in listed.stdout
    csv = _cli("export-sweep", out["sweep_id"], "--format", "csv")
    assert csv.stdout.splitlines()[0].startswith("point,rate,seeds,headline_epsilon")
    failed = _cli("sweep", "toy", "--vary", "fail_at=-1,1", "--steps", "3")
    assert failed.returncode == 1 and "toy failure at step 1" in failed.stdout
    bad = _cli("sweep", "toy", "--vary", "rate=0.1,7")
    assert bad.returncode == 2 and bad.stderr.strip() == "privengine: error: `rate` must be in (0, 1]; got 7.0"


# ---- random-repetition tuning (Papernot & Steinke) ------------------------------------------------

def test_random_repetition_sweep_draws_its_runs_and_claims_the_best_only(store, local):
    import dp_accounting
    from dp_accounting import dp_event, rdp

    base = {"epochs": 1.0, "n_seeds": 1, "noise_mode": "sigma", "noise_multiplier": 1.0, "alphas": [0.0],
            "accountant": "rdp"}
    spec = SweepSpec("dpsgd", base=base, axes={"lr": [0.05, 0.1, 0.2]}, repeat={"shape": "logarithmic", "mean": 3})
    res = _finish(store, local, spec)
    k = len(res.spec.plan)
    assert k >= 1 and res.runs_total == k and res.state == "finished"
    assert sum(p.seeds for p in res.points) == k
    (run,) = {(r.summary["noise_multiplier"], r.summary["sample_rate"], r.summary["models"][0]["steps"])
              for r in store.sweep_runs(res.sweep_id)}
    sigma, q, steps = run
    one = dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)),
                                            steps)
    reference = rdp.RdpAccountant()
    reference.compose(dp_event.RepeatAndSelectDpEvent(one, 3.0, 0.0))
    best_only = res.selection
    assert best_only.epsilon == pytest.approx(reference.get_epsilon(1e-5)) and not best_only.headline
    single = epsilon_of([(sigma, q, steps)], accountant="rdp", delta=1e-5)[0]
    assert single < best_only.epsilon and "only the single best run" in best_only.caveats[0]
    # the same draw replays from the recorded plan; a knob that changes sigma has no bound
    assert runner.missing(store, res.sweep_id) == []
    # refused before anything runs: a knob that changes sigma, a mechanism without RDP, an unknown law
    sweeps_before = len(store.list_sweeps())
    with pytest.raises(ConfigError, match="`repeat` needs one privacy cost for every candidate, but noise_multiplier"):
        runner.launch(store, local, SweepSpec("dpsgd", base=base, axes={"noise_multiplier": [0.8, 1.2]},
                                              repeat={"shape": "geometric", "mean": 2}))
    with pytest.raises(ConfigError, match="`repeat` is not available for toy"):
        runner.launch(store, local, SweepSpec("toy", axes={"rate": [0.1]}, repeat={"shape": "poisson", "mean": 3}))
    with pytest.raises(ConfigError, match="`repeat` shape must be one of poisson, geometric, logarithmic"):
        runner.launch(store, local, SweepSpec("toy", axes={"rate": [0.1]}, repeat={"shape": "uniform", "mean": 3}))
    assert len(store.list_sweeps()) == sweeps_before


def test_points_keep_their_settings_whatever_order_the_knobs_come_in(store, local):
    """Regression: the stored spec sorts its keys, so points must not depend on the order of the axes."""
    res = _finish(store, local, SweepSpec("toy", base={"steps": 1}, axes={"rate": [0.1, 1.0], "mode": ["a", "b"]}))
    for point in res.points:
        assert point.privacy == pytest.approx(10 * point.settings["rate"]), point
        for run_id in point.runs:
            config = store.get_run(run_id).config
            assert all(config[k] == v for k, v in point.settings.items())
