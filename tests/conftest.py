"""Shared fixtures: every test gets its own PRIVENGINE_HOME, and the toy mechanism is registered."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import functools
import io
import os
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests import toy_mechanism  # noqa: E402,F401  (registers "toy")

SHARED_DATA = ROOT.parent / "shared" / "data"
# the data root of the tests that read the real MNIST and Fashion-MNIST files: PRIVENGINE_DATA, else the shared one
REAL_DATA = Path(os.environ.get("PRIVENGINE_DATA") or SHARED_DATA)


@pytest.fixture(autouse=True)
def private_home(tmp_path, monkeypatch) -> Path:
    """Point the run store at a fresh directory so no test touches ~/.privengine."""
    home = tmp_path / "home"
    monkeypatch.setenv("PRIVENGINE_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def main_module_kept():
    """Put back ``sys.modules["__main__"]`` after each test: Streamlit's AppTest runs a page script as a module it
    installs there and leaves it, so a later test of the same worker that starts a ``spawn`` process had the child
    re-import that script (app.py) as its main module, fail, and never report (three budget tests failed in CI)."""
    main = sys.modules["__main__"]
    yield
    sys.modules["__main__"] = main


@pytest.fixture(autouse=True, scope="session")
def component_scan_once():
    """Scan the installed packages for Streamlit components once per test process, not once per AppTest: each new
    AppTest scans every installed distribution's metadata (``BidiComponentManager``; 0.2 s of CPU each here, about
    6 % of the fast lane's samples under py-spy), and the installed packages do not change during a session. A
    served app scans once at its start anyway."""
    from streamlit.components.v2 import manifest_scanner

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifest_scanner, "scan_component_manifests",
                      functools.cache(manifest_scanner.scan_component_manifests))
        yield


@pytest.fixture(scope="session")
def app_home(tmp_path_factory) -> Path:
    """The PRIVENGINE_HOME of the app the browser tests share (tests add runs to it, through the store or the CLI)."""
    return tmp_path_factory.mktemp("browser-home")


BROWSER_VIEWPORT = {"width": 1400, "height": 1000}  # the ``page`` fixture's size before a test sets its own


@pytest.fixture(scope="session")
def chromium():
    """Headless Chromium for every browser file of this test process (tests/test_browser.py's ``launched_chromium``;
    importing that file skips the test, with its reason, when Chromium or Playwright is missing)."""
    from tests.test_browser import launched_chromium

    with launched_chromium() as browser:
        yield browser


@pytest.fixture(scope="session")
def tab(chromium):
    """The one browser tab (tests/test_browser.py's ``ReusedTab``) that every test of this process opening a served app
    drives in turn, through ``page``: a new tab per test cost its renderer's start and script compiles anew."""
    from tests.test_browser import ReusedTab

    reused = ReusedTab(chromium, BROWSER_VIEWPORT)
    yield reused
    reused.close()


@pytest.fixture(scope="session")
def app_url(app_home, tab):
    """The dashboard served over ``app_home`` and warmed at Home (tests/test_browser.py's ``served_and_warm``): one
    per test process, for every browser file (a start and first render is about 9 s of CPU on two cores, once
    instead of once per file). Each test asserts on the runs it made itself, so others' runs in the home do not
    matter."""
    from tests.test_browser import served_and_warm

    with served_and_warm(app_home, tab) as url:
        yield url


@pytest.fixture
def page(tab, request):
    """This process's tab for one test, at 1400x1000 on about:blank (a test sizes it as it needs); a failure is
    screenshot into test-artifacts/, then the tab is handed back (storage cleared, about:blank)."""
    pg = tab.borrow()
    yield pg
    try:
        if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
            from tests.test_browser import SHOTS

            SHOTS.mkdir(exist_ok=True)
            pg.screenshot(path=str(SHOTS / f"{request.node.name}.png"), full_page=True)
    finally:
        tab.hand_back()


@pytest.fixture
def store(private_home):
    from privengine.store import RunStore

    s = RunStore()
    yield s
    s.close()


@pytest.fixture
def manager(store):
    """A job manager over the test's store, shut down after the test."""
    from privengine.jobs import JobManager

    m = JobManager(store)
    yield m
    m.shutdown()


class StopPolls:
    """Every answer of ``Reporter.should_stop()``, per run id, in order (the ``stop_polls`` fixture)."""

    def __init__(self) -> None:
        self.answers: dict[str, list[bool]] = collections.defaultdict(list)

    def wait_for_a_poll(self, run_id: str, timeout: float = 60.0) -> None:
        """Return once the run has polled ``should_stop()`` at least once, so a stop sent after this is a stop
        mid-run (a run in state "running" may not have reached its first poll yet)."""
        deadline = time.monotonic() + timeout
        while not self.answers[run_id]:
            assert time.monotonic() < deadline, f"run {run_id} never polled should_stop() within {timeout} s"
            time.sleep(0.01)

    def assert_stopped_promptly(self, run_id: str, *, most_after_stop: int = 3) -> None:
        """The run polled while it ran, and ended at most ``most_after_stop`` polls after should_stop() first said
        True: promptness counted in polls, not seconds, so a busy machine cannot break it (the reporter's contract
        is that a run polls at least once a second)."""
        answers = list(self.answers[run_id])
        assert answers and not answers[0], f"run {run_id} never polled should_stop() before the stop: {answers}"
        assert True in answers, f"run {run_id} never saw should_stop() say True ({len(answers)} polls)"
        after = len(answers) - answers.index(True)
        assert after <= most_after_stop, f"run {run_id} went on for {after} polls after should_stop() said True"


@pytest.fixture
def stop_polls(monkeypatch) -> StopPolls:
    """Count each run's ``should_stop()`` polls (every reporter of a job is a :class:`Reporter`)."""
    from privengine.reporter import Reporter

    polls = StopPolls()
    original = Reporter.should_stop

    def counted(self) -> bool:
        answer = original(self)
        polls.answers[self.run_id].append(answer)
        return answer

    monkeypatch.setattr(Reporter, "should_stop", counted)
    return polls


@dataclass
class CliResult:
    """What a shell sees of one ``python -m privengine`` command run in-process by :func:`run_cli`."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(*args: str) -> CliResult:
    """``python -m privengine ARGS`` in this process, through ``cli.main``: argparse's own errors (SystemExit 2) are
    caught as the shell sees them, and everything written to stderr (argparse writes to ``sys.stderr``) is captured.
    The store is this test's (PRIVENGINE_HOME, the ``private_home`` fixture)."""
    from privengine.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = main(list(args), stdout=out, stderr=err)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return CliResult(code, out.getvalue(), err.getvalue())


def subprocess_env(**extra: str) -> dict[str, str]:
    """Environment for a child process: this interpreter's env plus the toy plugin."""
    env = dict(os.environ)
    env["PRIVENGINE_PLUGINS"] = "tests.toy_mechanism"
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Expose each phase's report on the item (the browser test screenshots failures)."""
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(autouse=True, scope="session")
def torch_threads_as_in_runs():
    """Tests use the torch thread count runs use (cores - 1): two intra-op threads on a busy 2-core
    machine made small-tensor tests many times slower. Under pytest-xdist each of the W workers gets
    max(1, cores // W) threads (W workers of cores - 1 threads each would oversubscribe the cores), through
    PRIVENGINE_TORCH_THREADS so the runs, CLI processes and apps a test starts use the same; a value already set
    is kept."""
    from privengine.device import configure_torch_threads

    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        os.environ.setdefault("PRIVENGINE_TORCH_THREADS", str(max(1, (os.cpu_count() or 1) // workers)))
    configure_torch_threads()


def _starts_ray(item: pytest.Item) -> bool:
    """Whether test ``item`` may start a real local Ray cluster: its code names ``"ray"``, as each such test does
    in ``pytest.importorskip("ray")``."""
    return isinstance(item, pytest.Function) and "ray" in item.function.__code__.co_consts


@pytest.fixture(autouse=True)
def one_ray_cluster_at_a_time(request, tmp_path_factory):
    """Under pytest-xdist, a test that starts a Ray cluster waits until no other worker runs one: ``ray.init()``
    without an address joins the cluster a ``ray start`` head (``ray.cluster_utils.Cluster``) left in
    /tmp/ray/ray_current_cluster instead of starting its own, and a cluster's processes take the cores. The lock
    is a file in the run's shared base temp directory (each worker's base temp is a folder of it)."""
    if "PYTEST_XDIST_WORKER" not in os.environ or not _starts_ray(request.node):
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / "ray-cluster.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, after the test's teardown
        yield


def app_page(page: str, **query: str):
    """The dashboard (``app.py``, Streamlit's AppTest) opened at ``page`` (a page file, e.g. ``"pages/pate.py"``)
    with URL query parameters ``query``, after its first run."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(page)
    for key, value in query.items():
        at.query_params[key] = value
    return at.run()


def run_from_published_preset(store) -> str:
    """A finished DP-SGD run recorded as started from the preset fmnist-scatter-eps3 (published: test accuracy
    89.7 % at ε = 3, Tramer & Boneh 2021) that reached 88.1 %: a stored record, nothing is trained."""
    from privengine import registry
    from privengine.claims import PrivacyClaim

    mech = registry.get("dpsgd")
    config = mech.config_cls.from_dict(dict(mech.preset("fmnist-scatter-eps3").overrides)).to_dict()
    run_id = store.create_run("dpsgd", config, source="dashboard (preset fmnist-scatter-eps3)")
    store.add_metrics(run_id, [(step, "test_acc|isotropic|seed=0", value) for step, value in
                               ((10, 0.70), (20, 0.84), (30, 0.881))]
                      + [(step, "epsilon_each_model", step / 10) for step in (10, 20, 30)])
    claim = PrivacyClaim("all 1 models of this run released together", 3.0, 1e-5,
                         "Opacus PRV accountant (Gopi, Lee & Wutschitz 2021)", "add/remove one", headline=True)
    store.mark_ended(run_id, "finished", summary={"metric": "test_acc", "best_test_acc": 0.881,
                                                  "privacy": [claim.to_dict()]})
    return run_id


def run_sweep(store, spec, *, timeout: float, **manager_options) -> str:
    """Launch sweep ``spec`` on a job manager of its own (``manager_options``: e.g. ``max_concurrent``), wait for
    each of its runs (``timeout`` seconds each), shut the manager down; the sweep's id."""
    from privengine.explore import runner
    from privengine.jobs import JobManager

    manager = JobManager(store, **manager_options)
    try:
        sweep_id = runner.launch(store, manager, spec)
        for run in store.sweep_runs(sweep_id):
            manager.wait(run.id, timeout=timeout)
    finally:
        manager.shutdown()
    return sweep_id


def store_at_version(path: Path, version: int) -> sqlite3.Connection:
    """A connection to a new database at ``path`` with the schema of store version ``version`` (the migrations up
    to it), as a store written by an older privengine left it: rows go in, then a RunStore opens and migrates it."""
    from privengine.store.schema import MIGRATIONS

    conn = sqlite3.connect(path)
    for step in MIGRATIONS[:version]:
        for statement in step:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    return conn
