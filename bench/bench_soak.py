"""Soak benchmark (issue 28): concurrent runs of every mechanism, readers, and injected faults, against one store.

Not a timed test: it prints what a reliability claim rests on.

Phase 1, runs: ``--runs`` concurrent CLI runs (``python -m privengine run MECH --json``) of every registered
mechanism (its smoke configuration, a different seed each), plus one more run per mechanism that is killed with
``kill -9`` once it is running (fault: a killed run).
Phase 2, a Ray sweep (``sweep dp_bayes --executor ray --workers 2 --json``) in which one Ray task worker is killed
with ``kill -9`` (fault: a lost worker), then ``resume-sweep``.
Phase 3, the same sweep in which the raylet of its local cluster is killed (fault: a lost node), then ``resume-sweep``.
Throughout, ``--readers`` threads read the store as the pages and ``privengine runs`` do (``list_runs`` with their
claims, ``sweep_runs``), every ``--read-every`` seconds, and time each read; a ``runs --json`` CLI process is run
every few seconds and its output parsed.

Figures (want 0 for the first three):
- runs lost: a run some process started that is missing from the store, or a run no fault touched that did not
  finish, or a sweep point that is not finished after its resume;
- runs left non-terminal: runs still queued or running once every process has ended;
- invalid JSON outputs: ``--json`` stdouts (runs, sweeps, resumes, ``runs --json`` listings) that do not parse as
  one JSON document;
- store integrity (``PRAGMA integrity_check``), and the slowest store read under load (with the median).

    python bench/bench_soak.py                     # 1 run per mechanism + faults: a few minutes on 2 cores
    python bench/bench_soak.py --runs 3 --readers 4
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RAY_SWEEP = ("sweep", "dp_bayes", "--vary", "epsilon=0.3,1,3", "--seeds", "2", "--n-records", "500",
             "--vi-steps", "200", "--warmup-steps", "100", "--burn-in", "200", "--steps", "300",
             "--executor", "ray", "--workers", "2", "--json")


class Soak:
    def __init__(self, home: Path, args: argparse.Namespace):
        self.home, self.args = home, args
        self.env = dict(os.environ, PRIVENGINE_HOME=str(home), PYTHONPATH=str(ROOT))
        self.env.pop("RAY_ADDRESS", None)
        self.invalid_json: list[str] = []
        self.json_outputs = 0
        self.read_times: list[float] = []
        self.read_errors: list[str] = []
        self.stuck_seen: list[str] = []  # runs a reader saw running whose process was dead (must stay empty)
        self.started_ids: set[str] = set()
        self.faulted: set[str] = set()  # runs a fault hit (killed process, worker or node)
        self.victim_pids: set[int] = set()  # CLI processes killed on purpose
        self._stop = threading.Event()

    # ---- processes ---------------------------------------------------------------------------------------

    def popen(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "privengine", *args], cwd=ROOT, env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def parse(self, what: str, stdout: str):
        self.json_outputs += 1
        try:
            return json.loads(stdout)
        except json.JSONDecodeError as exc:
            self.invalid_json.append(f"{what}: {exc}: {stdout[:120]!r}")
            return None

    def store(self):
        from privengine.store import RunStore

        return RunStore(self.home / "runs.sqlite")

    # ---- readers -----------------------------------------------------------------------------------------

    def reader(self) -> None:
        from privengine.claims import headline_of

        store = self.store()
        while not self._stop.is_set():
            t0 = time.perf_counter()
            try:
                runs = store.list_runs()
                for run in runs:
                    headline_of(run.summary)
                for sweep in store.list_sweeps():
                    store.sweep_runs(sweep.id)
            except sqlite3.Error as exc:
                self.read_errors.append(repr(exc))
            self.read_times.append(time.perf_counter() - t0)
            self._stop.wait(self.args.read_every)
        store.close()

    def cli_lister(self) -> None:
        while not self._stop.wait(self.args.list_every):
            done = subprocess.run([sys.executable, "-m", "privengine", "runs", "--json", "--limit", "200"], cwd=ROOT,
                                  env=self.env, capture_output=True, text=True, timeout=120)
            self.parse("runs --json", done.stdout)

    # ---- phases --------------------------------------------------------------------------------------------

    def phase_runs(self) -> None:
        from privengine import registry

        procs = []
        mechanisms = registry.all_mechanisms()
        for mech in mechanisms:
            for i in range(self.args.runs):
                config = self.home / f"{mech.name}-{i}.json"
                config.write_text(json.dumps({**mech.smoke, "seed": 100 + i}))
                procs.append((mech.name, self.popen("run", mech.name, "--config", str(config), "--json")))
        victims = []
        for mech in mechanisms:  # one more run of each, killed once it is running
            config = self.home / f"{mech.name}-victim.json"
            config.write_text(json.dumps({**mech.smoke, "seed": 999}))
            victims.append((mech.name, self.popen("run", mech.name, "--config", str(config))))
        store = self.store()
        for name, proc in victims:
            self.victim_pids.add(proc.pid)
            run = self._wait_running(store, proc.pid)
            if run is not None:
                self.faulted.add(run)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if run is not None and store.get_run(run).state in ("queued", "running"):
                self.stuck_seen.append(run)  # read right after the kill: must already read as interrupted
        for name, proc in procs:
            out, _ = proc.communicate(timeout=1800)
            doc = self.parse(f"run {name}", out)
            if doc:
                self.started_ids.add(doc["id"])
        store.close()

    def _wait_running(self, store, pid: int, timeout: float = 300) -> str | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            mine = [r for r in store.list_runs(states=["running"]) if r.owner_pid == pid]
            if mine:
                time.sleep(0.5)
                return mine[0].id
            time.sleep(0.2)
        return None

    def phase_ray(self, fault: str) -> dict:
        store = self.store()
        before = {s.id for s in store.list_sweeps()}
        proc = self.popen(*RAY_SWEEP)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len([r for r in store.list_runs(states=["running"])
                                                   if r.owner_pid == proc.pid]) < 2:
            time.sleep(0.2)
        running = {r.id for r in store.list_runs(states=["running"]) if r.owner_pid == proc.pid}
        time.sleep(1.0)
        victims = [(pid, cmd) for pid, cmd in descendants(proc.pid)
                   if (cmd.startswith("ray::execute_run") if fault == "worker" else cmd.split()[0].endswith("/raylet"))]
        if victims:
            os.kill(victims[0][0], signal.SIGKILL)
        out, err = proc.communicate(timeout=1800)
        self.parse(f"sweep ({fault} killed)", out)
        (sweep_id,) = {s.id for s in store.list_sweeps()} - before
        hit = {r.id for r in store.sweep_runs(sweep_id) if r.state == "failed"}
        self.faulted |= hit
        wrongly_failed = hit - running  # a fault must fail only runs that were running
        message = [line for line in err.splitlines() if "resume-sweep" in line]
        never = sum(r.state == "interrupted" and (r.error or "").startswith("never started")
                    for r in store.sweep_runs(sweep_id))
        resumed = subprocess.run([sys.executable, "-m", "privengine", "resume-sweep", sweep_id, "--executor", "ray",
                                  "--workers", "2", "--json"], cwd=ROOT, env=self.env, capture_output=True, text=True,
                                 timeout=1800)
        after = self.parse(f"resume-sweep ({fault})", resumed.stdout) or {}
        store.close()
        return {"fault": fault, "killed": len(victims) > 0, "exit": proc.returncode, "traceback": "Traceback" in err,
                "resume_message": len(message) == 1, "failed": len(hit), "failed_not_running": len(wrongly_failed),
                "never_started": never,
                "resume_exit": resumed.returncode, "after_resume": after.get("runs_by_state"),
                "unfinished_points": sum(1 for p in after.get("points", ()) if p["seeds"] < 2) if after else None}

    # ---- the whole soak ------------------------------------------------------------------------------------

    def run(self) -> None:
        t0 = time.perf_counter()
        threads = [threading.Thread(target=self.reader, daemon=True) for _ in range(self.args.readers)]
        threads.append(threading.Thread(target=self.cli_lister, daemon=True))
        for t in threads:
            t.start()
        self.phase_runs()
        ray_results = [] if self.args.no_ray else [self.phase_ray("worker"), self.phase_ray("raylet")]
        self._stop.set()
        for t in threads:
            t.join(timeout=180)
        store = self.store()
        runs = store.list_runs()
        ids = {r.id for r in runs}
        missing = self.started_ids - ids
        not_finished = [r for r in runs if r.sweep_id is None and r.id not in self.faulted
                        and r.owner_pid not in self.victim_pids and r.state != "finished"]
        unfinished_points = sum(x["unfinished_points"] or 0 for x in ray_results)
        lost = len(missing) + len(not_finished) + unfinished_points
        stuck = [r.id for r in runs if r.active] + self.stuck_seen
        integrity = store._conn().execute("PRAGMA integrity_check").fetchone()[0]
        times = sorted(self.read_times)
        print(f"soak: {len(runs)} runs stored ({sum(r.state == 'finished' for r in runs)} finished, "
              f"{sum(r.state == 'failed' for r in runs)} failed, {sum(r.state == 'interrupted' for r in runs)} "
              f"interrupted) in {time.perf_counter() - t0:.0f} s; {self.args.runs} run(s) per mechanism + 1 killed "
              f"each, {self.args.readers} reader thread(s)")
        for r in ray_results:
            print(f"  Ray fault '{r['fault']}': killed={r['killed']} exit={r['exit']} traceback={r['traceback']} "
                  f"one resume message={r['resume_message']} failed={r['failed']} (of them not running when hit: "
                  f"{r['failed_not_running']}) never started={r['never_started']} -> resume exit={r['resume_exit']} "
                  f"{r['after_resume']}")
        for run in not_finished:
            print(f"  not finished without a fault: {run.id} {run.mechanism} {run.state}: {run.error}")
        for line in self.invalid_json:
            print(f"  invalid JSON: {line}")
        print(f"runs lost: {lost}")
        print(f"runs left non-terminal: {len(stuck)}")
        print(f"invalid JSON outputs: {len(self.invalid_json)} of {self.json_outputs}")
        print(f"store integrity: {integrity}; read errors: {len(self.read_errors)}")
        if times:
            print(f"store reads under load: {len(times)}, median {1000 * statistics.median(times):.1f} ms, "
                  f"slowest {1000 * times[-1]:.1f} ms")
        store.close()


def descendants(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process below ``pid``, from /proc (the faults test kills its own Ray
    processes with it too)."""
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                with open(f"/proc/{entry}/cmdline") as fh:
                    cmd = fh.read().replace("\0", " ").strip()
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append((int(entry), cmd))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1, help="concurrent runs per mechanism (default 1)")
    parser.add_argument("--readers", type=int, default=2, help="reader threads (default 2)")
    parser.add_argument("--read-every", type=float, default=0.5, help="seconds between a reader's reads")
    parser.add_argument("--list-every", type=float, default=5.0, help="seconds between `runs --json` processes")
    parser.add_argument("--no-ray", action="store_true", help="leave out the Ray phases")
    parser.add_argument("--home", help="PRIVENGINE_HOME to use (default: a fresh temporary directory)")
    args = parser.parse_args()
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="privengine-soak-"))
    os.environ["PRIVENGINE_HOME"] = str(home)
    Soak(home, args).run()


if __name__ == "__main__":
    main()
