"""Issue 28: faults injected by hand, each as a test.

- ``--json`` output stays one JSON document whatever else reaches stdout (a chatty run; Ray's "(raylet) A worker
  died" message when a worker is killed);
- a killed Ray worker fails only its run; a lost Ray node (its raylet killed) fails the runs it was running, leaves
  the others resumable ("never started"), and the CLI says how to resume, without a traceback; the resume completes;
- a two-node cluster (``ray.cluster_utils.Cluster``): runs spread over both nodes, land in the one store, and
  removing a node mid-sweep fails only its run;
- a ``kill -9``-ed CLI run reads as interrupted at once, saying that no claim covers what it stored.

The Ray tests start real clusters (tens of seconds each on two cores).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from bench.bench_soak import descendants
from tests.conftest import ROOT, subprocess_env

pytestmark = pytest.mark.slow  # processes killed, Ray clusters started and lost


def _cli(*args: str, plugins: str = "tests.toy_mechanism", timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privengine", *args], cwd=ROOT,
                          env=subprocess_env(PRIVENGINE_PLUGINS=plugins), capture_output=True, text=True,
                          timeout=timeout)


def _popen(*args: str, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "privengine", *args], cwd=ROOT, env=subprocess_env(**env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _running_runs(store) -> list:
    return [r for r in store.list_runs() if r.state == "running"]


# ---- item 1: machine-readable output ------------------------------------------------------------------------

def test_json_output_is_one_document_whatever_the_run_writes_to_stdout(private_home):
    """A run that prints, logs to stdout, writes to descriptor 1 and starts a child process: stdout holds only the
    JSON document; the rest is on stderr."""
    done = _cli("run", "chatty", "--json", plugins="tests.chatty_mechanism")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["state"] == "finished"
    for text in ("chatty print 1", "chatty log 1", "chatty fd-1 write 1", "chatty child process"):
        assert text in done.stderr and text not in done.stdout


def test_runs_list_and_show_print_json(private_home):
    finished = json.loads(_cli("run", "toy", "--steps", "2", "--json").stdout)
    listed = _cli("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert run["id"] == finished["id"] and run["state"] == "finished"
    assert run["headline_privacy"]["epsilon"] == 1.0 and run["headline_privacy_text"] == "ε = 1, δ = 1e-05 [toy]"
    assert json.loads(_cli("show", run["id"], "--json").stdout)["summary"]["steps_done"] == 2
    assert {m["name"] for m in json.loads(_cli("list", "--json").stdout)} >= {"toy", "dpsgd", "pate"}
    assert json.loads(_cli("sweeps", "--json").stdout) == []


# ---- item 3: a dead run never reads as running --------------------------------------------------------------

def test_a_killed_cli_run_reads_as_interrupted_at_once_saying_no_claim_covers_its_outputs(private_home):
    """Regression: ``runs`` showed a kill -9-ed run as running until some other process started a job manager."""
    from privengine.store import RunStore

    proc = _popen("run", "toy", "--steps", "100000", "--delay", "0.01")
    try:
        store = RunStore()
        run_id = _wait_for(lambda: [r.id for r in _running_runs(store) if not store.metrics(r.id).empty], 60,
                           "the run to store a curve")[0]
    finally:
        proc.kill()
        proc.wait()
    listed = _cli("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert run["state"] == "interrupted", run
    assert f"pid {proc.pid}" in run["error"] and "killed or crashed" in run["error"]
    assert "covered by no privacy claim" in run["error"] and run["headline_privacy"] is None  # no made-up epsilon
    assert RunStore().get_run(run_id).state == "interrupted"


def test_a_queued_run_of_a_dead_process_reads_as_never_started(store):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    queued = store.create_run("toy", {})
    with store._tx() as conn:
        conn.execute("UPDATE runs SET owner_pid=? WHERE id=?", (int(dead.stdout), queued))
    assert [r.state for r in store.list_runs(states=["queued"])] == []  # a listing filtered by state checks too
    run = store.get_run(queued)
    assert run.state == "interrupted" and run.error.startswith("never started:")


# ---- items 1 and 2: Ray faults through the CLI -------------------------------------------------------------

RAY_SWEEP = ("sweep", "toy", "--vary", "rate=0.1,0.2,0.3", "--seeds", "2", "--steps", "25", "--delay", "0.1",
             "--executor", "ray", "--workers", "2", "--json")
# Ray's GCS declares a node dead after this many failed health checks this far apart (default 5 x 3 s: the driver
# waited 15 s to learn that its node was gone); a check of a live node still fails only after its 10 s timeout
FAST_NODE_DEATH = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3"}


def _sweep_with_fault(kill, **env: str) -> tuple[subprocess.CompletedProcess, str]:
    """Run RAY_SWEEP in a CLI process (with ``env`` added to its environment); once two runs are running,
    ``kill(descendants)`` kills one of its Ray processes. Returns the finished process and the sweep id."""
    from privengine.store import RunStore

    proc = _popen(*RAY_SWEEP, **env)
    try:
        store = RunStore()
        _wait_for(lambda: len(_running_runs(store)) >= 2, 180, "two running Ray runs")
        time.sleep(0.5)
        kill(descendants(proc.pid))
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (sweep,) = store.list_sweeps()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), sweep.id


def test_a_killed_ray_worker_fails_only_its_run_and_stdout_stays_json(private_home):
    """Regression: Ray's "(raylet) A worker died or was killed ..." line was printed into the JSON output."""
    pytest.importorskip("ray", reason="the Ray executor needs the ray package (installed by the test requirements)")
    from privengine.store import RunStore

    def kill_one_worker(processes):
        workers = [pid for pid, cmd in processes if cmd.startswith("ray::execute_run")]
        assert workers, processes
        os.kill(workers[0], signal.SIGKILL)

    done, sweep_id = _sweep_with_fault(kill_one_worker)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)  # exactly one JSON document
    assert result["runs_by_state"] == {"finished": 5, "failed": 1}
    (failed,) = [r for r in RunStore().sweep_runs(sweep_id) if r.state == "failed"]
    assert failed.error.startswith("the Ray worker process running it died (killed, or crashed) (WorkerCrashedError")
    assert f"resume-sweep {sweep_id} --executor ray" in done.stderr and "Traceback" not in done.stderr


def test_a_lost_ray_node_fails_only_its_running_runs_and_the_sweep_resumes(private_home):
    """Regression: killing the raylet killed the driver thread with a raw ActorDiedError traceback and marked all six
    runs failed, the four that never started included."""
    pytest.importorskip("ray", reason="the Ray executor needs the ray package (installed by the test requirements)")
    from privengine.explore import runner
    from privengine.store import RunStore

    def kill_the_raylet(processes):
        raylets = [pid for pid, cmd in processes if cmd.split()[0].endswith("/raylet")]
        assert len(raylets) == 1, processes
        os.kill(raylets[0], signal.SIGKILL)

    done, sweep_id = _sweep_with_fault(kill_the_raylet, **FAST_NODE_DEATH)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    json.loads(done.stdout)
    store = RunStore()
    runs = store.sweep_runs(sweep_id)
    failed = [r for r in runs if r.state == "failed"]
    never = [r for r in runs if r.state == "interrupted"]
    assert 1 <= len(failed) <= 2 and len(failed) + len(never) + sum(r.state == "finished" for r in runs) == 6
    assert all("the Ray node running it was lost" in r.error or "the Ray cluster was lost" in r.error for r in failed)
    assert never and all(r.error.startswith("never started:") for r in never)
    message = [line for line in done.stderr.splitlines() if line.startswith(f"sweep {sweep_id} did not complete")]
    assert len(message) == 1 and f"python -m privengine resume-sweep {sweep_id} --executor ray" in message[0]

    resumed = _cli("resume-sweep", sweep_id, "--executor", "ray", "--workers", "2", "--json")
    assert resumed.returncode == 0, resumed.stderr
    after = json.loads(resumed.stdout)
    assert after["state"] == "finished" and after["runs_by_state"] == {"finished": 6}
    assert after["attempts"] == 6 + len(failed) + len(never)  # every attempt is kept (and charged)
    claim = runner.result(store, sweep_id).claim
    assert any(f"{len(failed) + len(never)} run(s) of the sweep stated no claim" in c for c in claim.caveats)


# ---- item 4: a two-node cluster -----------------------------------------------------------------------------

def test_two_node_cluster_spreads_runs_and_a_removed_node_fails_only_its_run(store, monkeypatch):
    pytest.importorskip("ray", reason="the Ray executor needs the ray package (installed by the test requirements)")
    from ray.cluster_utils import Cluster

    from privengine.explore import SweepSpec, runner
    from privengine.explore.ray_executor import RayExecutor

    monkeypatch.setenv("PRIVENGINE_PLUGINS", "tests.toy_mechanism")
    errors: list = []
    monkeypatch.setattr(threading, "excepthook", errors.append)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    executor = None
    try:
        worker = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        head_id, worker_id = cluster.head_node.node_id[:8], worker.node_id[:8]
        executor = RayExecutor(store, address=cluster.address, workers=2)  # the --address path
        sweep_id = runner.launch(store, executor, SweepSpec("toy", base={"steps": 25, "delay": 0.1},
                                                            axes={"rate": [0.1, 0.2, 0.3]}, seeds=2))

        def on_node(node: str, state: str):
            return [r for r in store.sweep_runs(sweep_id) if r.state == state and (r.device or "").endswith(node)]

        _wait_for(lambda: on_node(worker_id, "finished") and on_node(head_id, "finished"), 180,
                  "a run finished on each node")
        # a run that has stored curves (the claim sentence below is about them; "running" comes before the first)
        (doomed,) = _wait_for(lambda: [r for r in on_node(worker_id, "running") if store.has_outputs(r.id)], 60,
                              "a second run on the worker node, with stored curves")
        cluster.remove_node(worker, allow_graceful=False)
        _wait_for(lambda: not any(r.active for r in store.sweep_runs(sweep_id)), 240, "the sweep to end")
        runs = {r.id: r for r in store.sweep_runs(sweep_id)}
        assert runs[doomed.id].state == "failed"
        assert runs[doomed.id].error.startswith("the Ray node running it was lost (NodeDiedError")
        assert "covered by no privacy claim" in runs[doomed.id].error  # it had stored curves
        others = [r for r in runs.values() if r.id != doomed.id]
        assert {r.state for r in others} <= {"finished", "interrupted"} and executor.lost is None
        assert all(r.error.startswith("never started:") for r in others if r.state == "interrupted")

        runner.resume(store, executor, sweep_id)  # the surviving node completes the sweep
        _wait_for(lambda: not any(r.active for r in store.sweep_runs(sweep_id)), 240, "the resumed runs")
        res = runner.result(store, sweep_id)
        assert res.state == "finished" and res.runs_by_state == {"finished": 6} and res.attempts > 6
        assert not errors
    finally:
        if executor is not None:
            executor.shutdown()
        cluster.shutdown()
