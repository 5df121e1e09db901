"""A budget holds across processes sharing one run store (issue 37, item 3): launches are admitted (checked against
the budget and stored) one at a time, by the store's admission lock, in every process; a launch that waits too long
for it is refused saying so; the lock of a process that dies while holding it is released.

The children are real processes (multiprocessing's ``spawn``), each running the CLI's ``run`` on this test's store
(PRIVENGINE_HOME), with DP-SGD's run function replaced by one that records that it trained, and each check made
slow (held 2 s after it passes): without a lock across processes both would pass it before either stored its run.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import queue
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

import pytest

from privengine.dpsgd.config import DPSGDConfig
from privengine.ledger import set_budget
from privengine.ledger.budget import AdmissionBusy, admitted
from tests.test_budget_refusal import DELTA, FLAGS, SIGMA_RUN, SOURCE, planned_epsilon

SPAWN = multiprocessing.get_context("spawn")
CHECK_HELD_S = 2.0  # how long each child holds its check open after it passed
WAIT_S = 120  # the most any step of these tests waits for a child


def _trains_until(marks: Path, release) -> Callable[..., dict]:
    """A DP-SGD run function that marks ``marks / PID`` (it trained in this process) and then stays running (its
    planned release reserved in the ledger) until ``release`` is set."""

    def run(config, reporter):
        (marks / str(os.getpid())).touch()
        release.wait(WAIT_S)
        return {}

    return run


def _trained(marks: Path, done: Callable[[], bool], count: int = 2) -> list[str]:
    """The pids that trained (their marks), once ``count`` have or ``done()`` (at most WAIT_S seconds)."""
    deadline = time.monotonic() + WAIT_S
    while len(list(marks.iterdir())) < count and not done() and time.monotonic() < deadline:
        time.sleep(0.2)
    return sorted(p.name for p in marks.iterdir())


def _slow_checks() -> None:
    """Make this process's budget checks hold 2 s after they pass, as a slow composition would."""
    from privengine.ledger import budget

    check = budget.check_configs

    def held(*args, **kwargs):
        checks = check(*args, **kwargs)
        time.sleep(CHECK_HELD_S)
        return checks

    budget.check_configs = held


def _cli_run(marks: Path, start, release, results) -> None:
    """A child: ``python -m privengine run dpsgd FLAGS`` once every child is ready; puts (pid, exit code, stderr),
    or (pid, None, the traceback) if the child itself failed (then the other one does not wait for it)."""
    try:
        import privengine.dpsgd.run
        from privengine.cli import main

        privengine.dpsgd.run.run = _trains_until(marks, release)
        _slow_checks()
        out, err = io.StringIO(), io.StringIO()
        start.wait(WAIT_S)
        code, message = main(["run", "dpsgd", *FLAGS], stdout=out, stderr=err), err.getvalue()
    except BaseException:
        start.abort()
        code, message = None, traceback.format_exc()
    results.put((os.getpid(), code, message))


def _hold_admission(held, results) -> None:
    """A child: admit a launch and never leave (it is killed holding the admission lock)."""
    from privengine.store import RunStore

    with admitted(RunStore(), "dpsgd", [DPSGDConfig.from_dict(SIGMA_RUN)]):
        held.set()
        time.sleep(WAIT_S)
    results.put("left the admission")


@pytest.mark.slow  # two child processes each import the engine and run the CLI
def test_two_processes_launching_at_once_cannot_both_spend_the_budget(store, tmp_path):
    """A budget with room for one run: two CLIs launching at the same moment, one is stored and trains, the other
    is refused with the budget's message, stores nothing and trains nothing."""
    one, two = planned_epsilon(1), planned_epsilon(2)
    set_budget(store, SOURCE, (one + two) / 2, DELTA)
    marks = tmp_path / "trained"
    marks.mkdir()
    start, release, results = SPAWN.Barrier(2), SPAWN.Event(), SPAWN.Queue()
    children = [SPAWN.Process(target=_cli_run, args=(marks, start, release, results)) for _ in range(2)]
    for child in children:
        child.start()
    try:
        assert len(_trained(marks, lambda: not results.empty())) < 2, "both launches were admitted and trained"
        refused_pid, code, message = results.get(timeout=WAIT_S)  # the refused one ends first: the other trains
        assert code == 2 and len(message.strip().splitlines()) == 1, message  # one line, no traceback
        assert f"`budget` of {SOURCE} is ε = {(one + two) / 2:g} at δ = 1e-05" in message
        assert "this launch would exceed it" in message and "Nothing was launched" in message
        assert "with the planned releases of 1 queued or starting run(s)" in message
        (run,) = store.list_runs()
        assert _trained(marks, lambda: False, count=1) == [str(run.owner_pid)] != [str(refused_pid)]
        release.set()
        admitted_pid, code, message = results.get(timeout=WAIT_S)
        assert (admitted_pid, code) == (run.owner_pid, 0), message
    finally:
        release.set()
        for child in children:
            child.join(WAIT_S)
            if child.is_alive():
                child.kill()
    assert [r.id for r in store.list_runs()] == [run.id]


@pytest.mark.slow  # a child process imports the engine
def test_a_launch_waits_for_the_lock_within_its_limit_and_a_dead_holder_releases_it(store, monkeypatch):
    set_budget(store, SOURCE, 5.0, DELTA)
    config = DPSGDConfig.from_dict(SIGMA_RUN)
    held, results = SPAWN.Event(), SPAWN.Queue()
    child = SPAWN.Process(target=_hold_admission, args=(held, results))
    child.start()
    try:
        assert held.wait(WAIT_S)
        monkeypatch.setattr("privengine.ledger.budget.ADMISSION_WAIT_S", 0.5)
        with pytest.raises(AdmissionBusy) as busy:
            with admitted(store, "dpsgd", [config]):
                pytest.fail("admitted while another process held the admission lock")
        message = str(busy.value)
        assert message.startswith(f"`budget` of {SOURCE} (ε = 5 at δ = 1e-05) could not be checked: this launch "
                                  "waited 0.5 s while another launch on the run store")
        assert "Nothing was launched" in message
    finally:
        child.kill()  # SIGKILL: no exit handler runs, the operating system drops its locks
        child.join(WAIT_S)
    with pytest.raises(queue.Empty):
        results.get_nowait()  # it died inside the admission
    monkeypatch.setattr("privengine.ledger.budget.ADMISSION_WAIT_S", float(WAIT_S))
    with admitted(store, "dpsgd", [config]) as checks:
        (check,) = checks
        assert check.source == SOURCE and not check.exceeds


@pytest.mark.slow  # a child process imports the engine
def test_a_store_opened_through_a_symlink_shares_the_admission_lock_of_its_file(store, tmp_path, monkeypatch):
    """One store file, two spellings of its path (a symlinked home): a launch through the link waits for the lock a
    process holds through the real path (review helper-60: the lock file was named after the path as given, so
    both were admitted at once)."""
    set_budget(store, SOURCE, 5.0, DELTA)
    link = tmp_path / "linked-home" / "runs.sqlite"
    link.parent.mkdir()
    link.symlink_to(store.path)
    held, results = SPAWN.Event(), SPAWN.Queue()
    child = SPAWN.Process(target=_hold_admission, args=(held, results))  # through the real path
    child.start()
    try:
        assert held.wait(WAIT_S)
        monkeypatch.setattr("privengine.ledger.budget.ADMISSION_WAIT_S", 0.5)
        with pytest.raises(AdmissionBusy):
            with admitted(_store_at(link), "dpsgd", [DPSGDConfig.from_dict(SIGMA_RUN)]):
                pytest.fail("admitted through the link while another process held the store's admission lock")
    finally:
        child.kill()
        child.join(WAIT_S)


def test_a_launch_inside_an_admitted_one_is_not_checked_again_and_other_threads_wait(store, monkeypatch):
    """The same thread re-enters (a sweep's runs, submitted under its plan's check) without the store's lock, which
    it holds; another thread of the process waits for the whole admission, within the limit."""
    set_budget(store, SOURCE, 5.0, DELTA)
    config = DPSGDConfig.from_dict(SIGMA_RUN)
    monkeypatch.setattr("privengine.ledger.budget.ADMISSION_WAIT_S", 0.5)
    outcome = []

    def other_thread():
        try:
            with admitted(store, "dpsgd", [config]):
                outcome.append("admitted")
        except AdmissionBusy as exc:
            outcome.append(exc)

    with admitted(store, "dpsgd", [config]) as checks:
        assert [c.source for c in checks] == [SOURCE]
        with admitted(store, "dpsgd", [config]) as inner:
            assert inner == []
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(WAIT_S)
    (busy,) = outcome
    assert isinstance(busy, AdmissionBusy) and "this launch waited 0.5 s" in str(busy)
    other_thread()  # once the admission has ended, the next one goes ahead
    assert outcome[1:] == ["admitted"]


def test_a_lock_file_this_user_cannot_write_refuses_the_launch(store, monkeypatch):
    """SQLite opens a lock file this user cannot write read-only, without a word, and BEGIN IMMEDIATE then takes no
    lock (review helper-54): the launch is refused naming the budget and the file, and stores nothing. (os.access is
    made to answer no: as root, which the CI is, every file is writable.)"""
    from privengine.errors import ConfigError
    from privengine.store.admission import admission_path

    set_budget(store, SOURCE, 5.0, DELTA)
    config = DPSGDConfig.from_dict(SIGMA_RUN)
    lock_file = admission_path(store.path)
    real_access = os.access
    monkeypatch.setattr("privengine.store.admission.os.access",
                        lambda path, mode: False if Path(path) == lock_file else real_access(path, mode))
    runs_before = len(store.list_runs())
    with pytest.raises(ConfigError, match="budget") as refused:
        with admitted(store, "dpsgd", [config]):
            store.create_run("dpsgd", config.to_dict())  # what a launch does inside: never reached
    assert str(lock_file) in str(refused.value) and "not writable" in str(refused.value)
    assert len(store.list_runs()) == runs_before


def _in_thread(target: Callable[[], object]) -> tuple[threading.Thread, list]:
    """``target`` started in a thread; the list gets what it returned or raised."""
    outcome: list = []

    def run():
        try:
            outcome.append(target())
        except Exception as exc:  # noqa: BLE001 (the test reads it)
            outcome.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_a_launch_is_planned_before_the_locks_so_others_do_not_wait_for_its_plan(store, monkeypatch):
    """A sweep's plan (DP-SGD's sigma calibration) can take seconds: it is made before the admission locks, so a
    launch that comes meanwhile is admitted at once, and inside the locks the plan is only checked, not made again."""
    from privengine.ledger import budget
    from privengine.store import admission_lock

    set_budget(store, SOURCE, 5.0, DELTA)
    slow, quick = DPSGDConfig.from_dict(SIGMA_RUN | {"seed": 7}), DPSGDConfig.from_dict(SIGMA_RUN)
    planning, go, plans = threading.Event(), threading.Event(), []
    real_plan = budget.planned_claim_of

    def store_lock_free() -> bool:
        try:
            with admission_lock(store.path, 0.0):
                return True
        except TimeoutError:
            return False

    def plan(mechanism, config):
        plans.append((config.seed, store_lock_free()))
        if config.seed == 7:
            planning.set()
            assert go.wait(WAIT_S)
        return real_plan(mechanism, config)

    monkeypatch.setattr(budget, "planned_claim_of", plan)
    monkeypatch.setattr(budget, "ADMISSION_WAIT_S", 0.5)

    def launch_slow():
        with admitted(store, "dpsgd", [slow]) as checks:
            return checks

    thread, outcome = _in_thread(launch_slow)
    try:
        assert planning.wait(WAIT_S)
        with admitted(store, "dpsgd", [quick]) as checks:  # not AdmissionBusy: nobody holds the locks
            assert [c.source for c in checks] == [SOURCE]
    finally:
        go.set()
        thread.join(WAIT_S)
    ((check,),) = outcome
    assert check.source == SOURCE and not check.exceeds
    assert sorted(plans) == [(0, True), (7, True)]  # each planned once, with the store's lock free


def test_each_store_has_its_own_admission_lock(store, tmp_path, monkeypatch):
    """A launch on one store neither waits for one on another store of the same process nor, when made inside it
    (the same thread), goes unchecked on the other store's budget."""
    from privengine.ledger import BudgetExceeded
    from privengine.store import RunStore

    other = RunStore(tmp_path / "other" / "runs.sqlite")
    set_budget(store, SOURCE, 5.0, DELTA)
    set_budget(other, SOURCE, planned_epsilon(1) / 2, DELTA)  # no room for one run
    config = DPSGDConfig.from_dict(SIGMA_RUN)
    monkeypatch.setattr("privengine.ledger.budget.ADMISSION_WAIT_S", 0.5)
    inside, leave = threading.Event(), threading.Event()

    def hold_the_first_store():
        with admitted(store, "dpsgd", [config]):
            inside.set()
            return leave.wait(WAIT_S)

    thread, outcome = _in_thread(hold_the_first_store)
    try:
        assert inside.wait(WAIT_S)
        with pytest.raises(BudgetExceeded):  # checked on its own budget, not AdmissionBusy
            with admitted(other, "dpsgd", [config]):
                pytest.fail("admitted over the other store's budget")
    finally:
        leave.set()
        thread.join(WAIT_S)
    assert outcome == [True]
    with admitted(store, "dpsgd", [config]):
        with pytest.raises(BudgetExceeded):
            with admitted(other, "dpsgd", [config]):
                pytest.fail("a launch on another store inside an admitted one went unchecked")
    other.close()


def test_a_launch_check_reads_the_ledger_once(store, monkeypatch):
    """The check reads what is spent, the pending runs' plans and what the launch adds from one query of the ledger
    (one read of the source's run states), not three that other threads' queries could interleave with."""
    from privengine.ledger import check_launch

    set_budget(store, SOURCE, 5.0, DELTA)
    reads = []
    real_states = store.source_run_states
    monkeypatch.setattr(store, "source_run_states", lambda source: reads.append(source) or real_states(source))
    planned = DPSGDConfig.from_dict(SIGMA_RUN)
    from privengine.ledger.budget import planned_claim_of

    claim = planned_claim_of("dpsgd", planned)
    check = check_launch(store, SOURCE, claim.events, claim.relation)
    assert reads == [SOURCE]
    assert check.after.epsilon == pytest.approx(planned_epsilon(1), rel=0.01) and check.spent.epsilon == 0


def _store_at(path: Path):
    """A run store opened at ``path``."""
    from privengine.store import RunStore

    return RunStore(path)
