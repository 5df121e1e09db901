"""scripts/bootstrap.sh installs only what is missing: `app` after `test` reinstalls nothing (issue 40, item 10).

The venv is a stand-in: its ``bin/python`` only logs how it was called, so no package is installed and nothing is
downloaded; a stand-in ``chromium`` on the PATH keeps `test` from asking apt for the browser."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "bootstrap.sh"


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/usr/bin/env bash\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _bootstrap(mode: str, venv: Path, bin_dir: Path) -> list[str]:
    """Run ``bootstrap.sh MODE``; return the pip installs it made (the stand-in python's calls with ``pip``)."""
    log = venv / "calls.log"
    before = log.read_text().splitlines() if log.exists() else []
    env = {**os.environ, "PRIVENGINE_VENV": str(venv), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(SCRIPT), mode], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()[len(before):]
    assert calls[-1].startswith("-m streamlit" if mode == "app" else "-m pytest")  # then it ran what was asked
    return [c for c in calls if c.startswith("-m pip install")]


def test_app_after_test_installs_nothing_and_a_changed_requirement_file_installs_again(tmp_path):
    venv, bin_dir = tmp_path / "venv", tmp_path / "bin"
    _stub(venv / "bin" / "python", f'echo "$*" >> "{venv}/calls.log"\n')
    _stub(bin_dir / "chromium", "exit 0\n")
    installs = _bootstrap("test", venv, bin_dir)
    assert installs[-1] == "-m pip install --quiet -r requirements.txt -r requirements-dev.txt"
    assert _bootstrap("app", venv, bin_dir) == []  # test's requirements include app's
    assert _bootstrap("test", venv, bin_dir) == []
    # a requirement file that changed since it was installed is installed again (a stamp of other content)
    for old in venv.glob(".installed-requirements.txt-*"):
        old.rename(venv / ".installed-requirements.txt-0000000000000000")
    assert _bootstrap("app", venv, bin_dir)[-1] == "-m pip install --quiet -r requirements.txt"
    assert _bootstrap("app", venv, bin_dir) == []


def test_the_tests_run_with_bytecode_caches_whatever_the_environment_says(tmp_path, monkeypatch):
    """An environment with PYTHONDONTWRITEBYTECODE=1 (this machine's) would make every process of the suite compile
    the project, and pytest rewrite every test module, anew: `test` runs pytest with the caches on."""
    venv, bin_dir = tmp_path / "venv", tmp_path / "bin"
    _stub(venv / "bin" / "python", f'echo "$* [${{PYTHONDONTWRITEBYTECODE-unset}}]" >> "{venv}/calls.log"\n')
    _stub(bin_dir / "chromium", "exit 0\n")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    _bootstrap("test", venv, bin_dir)
    calls = (venv / "calls.log").read_text().splitlines()
    assert calls[-1].startswith("-m pytest") and calls[-1].endswith("[unset]")
    assert all(c.endswith("[1]") for c in calls[:-1])  # the installs before it see the environment as it is
