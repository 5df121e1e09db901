"""Sweeps on an existing Ray cluster, as the README's "An existing Ray cluster" section says: a head started with
``ray start --head`` in a subprocess, joined through the CLI's ``--address``; and the one-line error for an address
that cannot be joined (nothing listens, a malformed address, a cluster that refuses the driver's token)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from privengine.errors import ConfigError
from privengine.explore.ray_address import check_reachable, host_port, join_error
from tests.conftest import ROOT, app_page, run_cli, subprocess_env


def free_port() -> int:
    """A TCP port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- the address, checked before joining ------------------------------------------------------------------------

@pytest.mark.parametrize("address, endpoint", [("10.0.0.5:6379", ("10.0.0.5", 6379)),
                                               ("ray://head:10001", ("head", 10001)),
                                               ("[::1]:6379", ("::1", 6379)), ("auto", None), ("local", None)])
def test_an_address_names_its_endpoint(address, endpoint):
    assert host_port(address) == endpoint


@pytest.mark.parametrize("address", ["head", "head:", ":6379", "head:0", "head:65536", "head:port"])
def test_a_malformed_address_is_refused_naming_the_field_and_the_forms(address):
    with pytest.raises(ConfigError, match=r"`address` must be HOST:PORT .*\[1, 65535\]") as info:
        host_port(address)
    assert repr(address) in str(info.value)


def test_an_address_where_nothing_listens_is_refused_before_ray_tries_it():
    port = free_port()
    with pytest.raises(ConfigError, match="cannot be reached") as info:
        check_reachable(f"127.0.0.1:{port}")
    assert f"127.0.0.1:{port}" in str(info.value) and f"ray start --head --port {port}" in str(info.value)


def test_an_authentication_refusal_says_how_to_pass_the_token():
    # the shape ray.init raises: a ConnectionError caused by a RuntimeError holding the AuthenticationError's text
    try:
        try:
            raise RuntimeError("Failed to connect to GCS. Last connection error: ray.exceptions.AuthenticationError: "
                               "RPC error: InvalidAuthToken: Authentication token is missing or incorrect")
        except RuntimeError as cause:
            raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.5:6379") from cause
    except ConnectionError as exc:
        refusal = join_error("10.0.0.5:6379", exc)
    assert refusal.field == "address" and "10.0.0.5:6379" in str(refusal) and "RAY_AUTH_MODE=token" in str(refusal)
    other = join_error("10.0.0.5:6379", ConnectionError("Could not find any running Ray instance. More text."))
    assert "RAY_AUTH_MODE" not in str(other) and "Could not find any running Ray instance" in str(other)


@pytest.mark.slow
def test_the_cli_refuses_an_unreachable_cluster_in_one_line(store):
    pytest.importorskip("ray", reason="the Ray executor needs the ray package (installed by the test requirements)")
    address = f"127.0.0.1:{free_port()}"
    res = run_cli("sweep", "toy", "--executor", "ray", "--address", address, "--steps", "2")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].startswith("privengine: error: `address`") and address in lines[0] and "ray start" in lines[0]
    assert store.list_runs() == [] and store.list_sweeps() == []  # nothing stored, nothing queued


@pytest.mark.slow
def test_the_explore_page_names_the_ray_address_it_cannot_join(store):
    pytest.importorskip("ray", reason="the Ray executor needs the ray package (installed by the test requirements)")
    address = f"127.0.0.1:{free_port()}"
    at = app_page("pages/explore.py")
    at.selectbox(key="explore.mechanism").set_value("toy").run()
    at.radio(key="explore.executor").set_value("ray").run()
    at.text_input(key="explore.address").set_value(address).run()
    at.button(key="explore.launch").click().run()
    assert not at.exception, [e.message for e in at.exception]
    refusals = [e.value for e in at.error if "was not launched" in e.value]
    assert len(refusals) == 1 and "**Ray address**" in refusals[0] and address in refusals[0], refusals
    assert store.list_sweeps() == []


# ---- a head started with `ray start` ------------------------------------------------------------------------------

def _ray_cli() -> str:
    return str(Path(sys.executable).with_name("ray"))


@pytest.fixture
def ray_head():
    """A Ray head started with ``ray start --head --block`` in its own session, with a temp dir of its own (a short
    path: Ray's socket paths must fit 107 bytes) and a token of its own (``RAY_AUTH_TOKEN``, so the user's
    ~/.ray/auth_token is neither read nor written); yields (address, token). Teardown ends that head alone: SIGTERM to
    ``ray start --block`` stops the processes it started, then SIGKILL to its process group if any remain
    (``ray stop`` would stop every Ray cluster of this machine, another test run's or a user's included)."""
    pytest.importorskip("ray", reason="a Ray head needs the ray package (installed by the test requirements)")
    temp = tempfile.mkdtemp(prefix="pe-ray-", dir="/tmp")
    token = secrets.token_hex(32)
    port = free_port()
    log = Path(temp) / "head.log"
    with open(log, "w") as out:
        head = subprocess.Popen(
            [_ray_cli(), "start", "--head", "--block", f"--port={port}", "--num-cpus=1", f"--temp-dir={temp}",
             "--include-dashboard=false", "--disable-usage-stats",
             f"--dashboard-agent-listen-port={free_port()}"],  # its default, 52365, is one port for every head
            env=subprocess_env(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None and time.monotonic() < deadline, f"ray start failed:\n{log.read_text()}"
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", token
    finally:
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # the session's group: only what this head started
        except ProcessLookupError:
            pass
        head.wait(timeout=10)
        shutil.rmtree(temp, ignore_errors=True)


def _sweep(address: str, home: Path, **env: str) -> subprocess.CompletedProcess:
    """``python -m privengine sweep toy`` of two seeds on the cluster at ``address``, in a process of its own (the
    auth mode is read when Ray starts in a process, so it cannot change between tests of one process)."""
    plain = {k: v for k, v in subprocess_env(PRIVENGINE_HOME=str(home), **env).items()
             if k not in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS") or k in env}
    return subprocess.run([sys.executable, "-m", "privengine", "sweep", "toy", "--executor", "ray", "--address",
                           address, "--workers", "1", "--seeds", "2", "--steps", "2", "--json"],
                          env=plain, capture_output=True, text=True, timeout=300, cwd=ROOT)


@pytest.mark.slow
def test_a_sweep_runs_on_a_head_started_with_ray_start(ray_head, tmp_path):
    pytest.importorskip("ray", reason="the Ray executor needs the ray package (installed by the test requirements)")
    import ray

    address, token = ray_head
    if hasattr(ray.exceptions, "AuthenticationError"):  # a Ray with token authentication (2.52 on)
        # without the token: refused in one line that names the address and the token step (the README's); Ray's
        # own retry warnings precede it on stderr, but no traceback. Ray's driver tries to join once a second, 20
        # times by default; RAY_gcs_server_port_wait_time_s=3 caps it at three tries, which get the same refusal
        refused = _sweep(address, tmp_path / "refused", RAY_gcs_server_port_wait_time_s="3")
        assert refused.returncode == 2, refused.stderr
        errors = [line for line in refused.stderr.splitlines() if line.startswith("privengine: error:")]
        assert len(errors) == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert address in errors[0] and "RAY_AUTH_MODE=token" in errors[0]
    # with it: the sweep runs on the cluster's node
    ran = _sweep(address, tmp_path / "ran", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["executor"] == "ray" and result["runs_by_state"] == {"finished": 2}
