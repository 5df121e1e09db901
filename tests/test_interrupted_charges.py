"""Issue 35, item 2: a run whose process (or Ray worker) dies after storing outputs is charged its whole planned
release, in its own claim and in every composition, and a sweep counts every attempt it stored.

A run declares its planned charge before its first output (``reporter.charge_plan``) and the store keeps it. The
death is real where it is cheap (``kill -9`` of a CLI run), else simulated at the point a death leaves the store in:
a Ray worker whose events stop reaching the hub, a run row owned by a dead pid. A run stored before planned charges
(an old store) keeps the sentence saying that no claim covers what it stored.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import types
from dataclasses import replace

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant

import privengine.mechanisms  # noqa: F401  (registers the shipped mechanisms)
from privengine import registry
from privengine.accounting.subsampled_gaussian import epsilon_of
from privengine.claims import PrivacyClaim, claims_of, headline_of
from privengine.dpsgd.config import DPSGDConfig
from privengine.explore import SweepSpec, run_configs, runner
from privengine.explore.privacy import sweep_claim
from privengine.reporter import Reporter
from privengine.store import DEATH_CAVEAT, NO_CLAIM_AFTER_DEATH, SCHEMA_VERSION, RunStore
from tests.conftest import store_at_version
from tests.memory_reporter import MemoryReporter
from tests.test_explore_batching import _clusterless_driver, _WorkerRay
from tests.test_explore_failures import Q, SIGMA, STEPS, _summary
from tests.test_faults import _popen, _wait_for

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing", "ignore:Optimal order")

CHARGED_PLAN = "charged its whole planned release"  # in the error of a dead run charged its planned charge


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    return int(done.stdout)


def _orphan(store: RunStore, run_id: str) -> None:
    """Leave ``run_id`` as a process that died leaves it: owned by a pid that no longer runs."""
    with store._tx() as conn:
        conn.execute("UPDATE runs SET owner_pid=? WHERE id=?", (_dead_pid(), run_id))


def _pld_epsilon(sigma: float, q: float, steps: int, delta: float) -> float:
    """dp-accounting's PLD epsilon of ``steps`` Poisson-subsampled Gaussian steps (add or remove one)."""
    accountant = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    accountant.compose(dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)),
                                                    steps))
    return accountant.get_epsilon(delta)


# ---- (a) the run's own claim --------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_killed_dpsgd_run_is_charged_every_model_at_its_planned_history(private_home):
    """Regression: a DP-SGD run killed (kill -9) after storing curves read "covered by no privacy claim", and
    resuming its sweep trained it again with new noise, a second release charged nowhere."""
    proc = _popen("run", "dpsgd", "--epochs", "100", "--alphas", "0,4", "--n-seeds", "1", "--noise-mode", "sigma",
                  "--noise-multiplier", "1.0", "--accountant", "prv")
    try:
        store = RunStore()
        run_id = _wait_for(lambda: [r.id for r in store.list_runs() if r.state == "running"
                                    and not store.metrics(r.id).empty], 240, "the run to store a curve")[0]
    finally:
        proc.kill()
        proc.wait()
    run = RunStore().get_run(run_id)
    assert run.state == "interrupted" and CHARGED_PLAN in run.error and f"pid {proc.pid}" in run.error
    summary = run.summary
    assert summary["failed"] and summary["process_died"]
    steps = summary["steps_per_model"]
    assert [m["steps"] for m in summary["models"]] == [steps, steps]  # both models, every planned step
    headline = headline_of(summary)
    assert DEATH_CAVEAT in headline.caveats and headline.delta == 1e-5
    # an independent accountant over the planned history of the two models: 2 x steps subsampled Gaussian steps
    pld = _pld_epsilon(summary["noise_multiplier"], summary["sample_rate"], 2 * steps, 1e-5)
    assert pld - 0.02 <= headline.epsilon <= pld + 0.02  # Opacus' PRV: the top of an interval of width 0.02


class _WorkerDied(BaseException):
    """The death of a Ray worker's process, as its run sees it: nothing after it runs (``execute_run`` catches only
    Exception)."""


class _HubOfADyingWorker:
    """The driver's hub as a worker calls it: it keeps what is pushed, and the worker dies right after its first
    push holding a curve."""

    def __init__(self):
        self.events: dict[str, list] = {}
        self.push = types.SimpleNamespace(remote=self._push)
        self.stop_requested = types.SimpleNamespace(remote=lambda run_id: False)

    def _push(self, run_id: str, events: list):
        self.events.setdefault(run_id, []).extend(events)
        if any(e[0] == "metrics" for e in events):
            raise _WorkerDied
        return None


def test_a_dpsgd_run_whose_ray_worker_died_is_charged_its_planned_release(store, monkeypatch):
    """The Ray path: the worker's reporter sends the planned charge to the hub before any output, the driver stores
    it first, and the run of a dead task is failed with it (it was failed with no claim)."""
    from privengine.explore import ray_executor, ray_worker

    monkeypatch.setattr(ray_worker, "ray_module", _WorkerRay)
    config = DPSGDConfig().replace(n_seeds=1, alphas=(0.0, 4.0), epochs=1.0, noise_mode="sigma",
                                   noise_multiplier=1.0, accountant="rdp")
    run_id = store.create_run("dpsgd", config.to_dict())
    hub = _HubOfADyingWorker()
    with pytest.raises(_WorkerDied):
        ray_worker.execute_run(hub, run_id, "dpsgd", config.to_dict())
    assert [e[0] for e in hub.events[run_id]].index("planned_charge") < [e[0] for e in hub.events[run_id]].index(
        "metrics")
    driver = _clusterless_driver(store)
    job = ray_executor._Job(run_id, "dpsgd", config.to_dict())
    driver._running = {run_id: job}
    driver._write(hub.events)
    died = "the Ray worker process running it died (killed, or crashed) (WorkerCrashedError: simulated)"
    driver._finish(job, {"state": "failed", "died": True, "error": died, "traceback": None}, drain=False)
    run = store.get_run(run_id)
    assert run.state == "failed" and run.error.startswith(died) and CHARGED_PLAN in run.error
    assert run.summary["process_died"] and not store.metrics(run_id).empty
    steps = run.summary["steps_per_model"]
    assert [m["steps"] for m in run.summary["models"]] == [steps, steps]
    headline = headline_of(run.summary)
    assert headline.epsilon == epsilon_of([(1.0, run.summary["sample_rate"], 2 * steps)], accountant="rdp",
                                          delta=1e-5)[0]
    assert DEATH_CAVEAT in headline.caveats


@pytest.mark.parametrize("mechanism,changes", [
    ("dpsgd", {"alphas": [0.0, 4.0], "accountant": "rdp"}),
    ("pate", {}),
    ("pate", {"aggregator": "gnmax", "sanitize": True}),
    ("dp_bayes", {"method": "exponential"}),
    ("dp_bayes", {"method": "dpvi", "coverage_repeats": 0}),
])
@pytest.mark.slow
def test_every_mechanism_declares_its_whole_release_before_its_first_output(mechanism, changes):
    """The planned charge comes before any curve or table, and its headline is the one the finished run states
    (what the run would have released had it not died)."""
    class Recording(MemoryReporter):
        stop_was_requested = False

        def __init__(self):
            super().__init__()
            self.before_plan: list[str] = []  # the outputs stored before the planned charge

        def metric(self, step, **values):
            if self.planned_summary() is None:
                self.before_plan += list(values)
            super().metric(step, **values)

        def artifact(self, name, data):
            if self.planned_summary() is None:
                self.before_plan.append(name)
            super().artifact(name, data)

    mech = registry.get(mechanism)
    reporter = Recording()
    finished = mech.load_run()(mech.config_cls.from_dict(dict(mech.smoke) | changes), reporter)
    planned = headline_of(reporter.planned_summary())
    # DP-SGD may store first the artifact naming its epsilon curve's delta and accountant (from the config alone)
    assert set(reporter.before_plan) <= ({"epsilon_basis"} if mechanism == "dpsgd" else set())
    # the same claim (its caveats aside: DP-SGD's plan is the bare accounting summary, without the notes on the
    # curves its full summary adds)
    assert planned is not None and replace(planned, caveats=()) == replace(headline_of(finished), caveats=())


# ---- (b) the sweep's composition ----------------------------------------------------------------------------

SWEEP = SweepSpec("dpsgd", base={"accountant": "rdp", "n_seeds": 1, "alphas": [0.0]}, axes={"lr": [0.05, 0.1, 0.2]})


def test_a_resumed_sweep_composes_the_interrupted_attempt_and_counts_every_stored_run(store):
    """Regression (the reviewer's case): a sweep of 3 points whose process died with one run under way (its curves
    stored) and two queued, then resumed to the end, holds 6 runs; its claim composed the 3 finished ones "among
    all 3 runs", leaving out the dead attempt's release."""
    sweep_id = store.create_sweep("dpsgd", SWEEP.to_dict())
    first = []
    for point, config in run_configs(SWEEP):
        first.append(store.create_run("dpsgd", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index))
    store.mark_running(first[0], device="cpu")
    reporter = Reporter(store, first[0])
    planned = {k: v for k, v in _summary().items() if k not in ("best_test_acc", "best_val_acc")}
    reporter.charge_plan(planned)  # one model at its planned STEPS
    reporter.metric(10, train_loss=0.5)
    reporter.flush()
    for run_id in first:
        _orphan(store, run_id)
    todo = runner.missing(store, sweep_id)  # reads the sweep: the dead process's runs are interrupted now
    assert [c.replica for _, c in todo] == [1, 1, 1]
    for point, config in todo:
        resumed = store.create_run("dpsgd", config.to_dict(), sweep_id=sweep_id, sweep_point=point.index)
        store.mark_ended(resumed, "finished", summary=_summary())

    dead = store.get_run(first[0])
    assert dead.state == "interrupted" and CHARGED_PLAN in dead.error
    assert DEATH_CAVEAT in headline_of(dead.summary).caveats
    res = runner.result(store, sweep_id)
    assert res.runs_by_state == {"finished": 3} and res.attempts == 6
    claim = res.claim
    assert claim.epsilon == pytest.approx(epsilon_of([(SIGMA, Q, 4 * STEPS)], accountant="rdp", delta=1e-5)[0],
                                          rel=1e-12)  # the dead attempt's planned steps too
    assert claim.label == ("selecting among the 4 runs of the sweep that state a claim (4 models composed), "
                           "composing 4 of the 6 runs the sweep stored (the caveats say why not the others)")
    caveats = " ".join(claim.caveats)
    assert "Composes the claims of 4 run(s): 3 finished, 1 interrupted" in caveats
    assert "of the 6 runs the sweep stored (each attempt, a resumed run's earlier ones included)" in caveats
    assert "2 run(s) of the sweep stated no claim (2 interrupted)" in caveats  # never started: nothing released
    never = [store.get_run(i) for i in first[1:]]
    assert all(r.error.startswith("never started:") and r.summary is None for r in never)


# ---- (c) an old store ---------------------------------------------------------------------------------------

def test_a_dead_run_of_an_old_store_still_says_that_no_claim_covers_it(tmp_path):
    """A run stored before planned charges (schema 5) whose process died with curves stored: no claim is made up;
    its error says that none covers them, and a sweep leaves it out, saying so."""
    path = tmp_path / "v5.sqlite"
    conn = store_at_version(path, 5)
    claim = PrivacyClaim("toy", 1.0, 1e-5, "toy accountant", "add or remove one example", headline=True)
    conn.execute("INSERT INTO runs (id, mechanism, config, state, created_at, summary) VALUES "
                 "('done', 'toy', '{}', 'finished', 1.0, ?)", (json.dumps({"privacy": [claim.to_dict()]}),))
    conn.execute("INSERT INTO runs (id, mechanism, config, state, created_at, started_at, owner_host, owner_pid) "
                 "VALUES ('old', 'toy', '{}', 'running', 2.0, 2.0, ?, ?)", (socket.gethostname(), _dead_pid()))
    conn.execute("INSERT INTO metrics (run_id, step, name, value) VALUES ('old', 1, 'loss', 0.5)")
    conn.commit()
    conn.close()

    store = RunStore(path)
    assert store.schema_version() == SCHEMA_VERSION and store.planned_charge("old") is None
    old = store.get_run("old")
    assert old.state == "interrupted" and old.summary is None
    assert old.error.endswith(f"the curves and tables it stored before that are covered by no privacy claim "
                              f"({NO_CLAIM_AFTER_DEATH}): do not publish them")
    composed = sweep_claim("toy", [store.get_run("done"), old])
    assert composed.epsilon == 1.0 and "composing 1 of the 2 runs the sweep stored" in composed.label
    assert any(c.startswith("1 run(s) of the sweep stated no claim (1 interrupted)") for c in composed.caveats)
    assert claims_of(old.summary) == []
