"""Process-wide engine objects for the dashboard, created once per data directory."""

from __future__ import annotations

import importlib.util
import os

import streamlit as st

from privengine.device import DeviceChoice, available_devices
from privengine.errors import ConfigError, RunNotFoundError
from privengine.explore.executors import make_executor
from privengine.jobs import JobManager
from privengine.store import RunRecord, RunStore, default_home


@st.cache_resource(show_spinner=False)
def _manager_for(home: str) -> JobManager:
    return JobManager(RunStore(os.path.join(home, "runs.sqlite")), max_concurrent=max_concurrent())


def max_concurrent() -> int:
    """``$PRIVENGINE_MAX_CONCURRENT`` (default 1): how many runs train at once; the rest queue."""
    text = os.environ.get("PRIVENGINE_MAX_CONCURRENT", "1")
    if not text.strip().isdigit() or int(text) < 1:
        raise ConfigError("PRIVENGINE_MAX_CONCURRENT", f"must be an integer >= 1; got {text!r}")
    return int(text)


def manager() -> JobManager:
    """The job manager of this app process (one per ``PRIVENGINE_HOME``); recovers interrupted runs on creation."""
    return _manager_for(str(default_home()))


def store() -> RunStore:
    return manager().store


@st.cache_resource(show_spinner=False)
def devices() -> list[DeviceChoice]:
    """Devices present on this machine, the preferred first."""
    return available_devices()


RAY_INSTALL = 'pip install "ray>=2.50"'


@st.cache_resource(show_spinner=False)
def ray_missing() -> str | None:
    """Why the Ray executor cannot be used here (no ``ray`` package), or None when it can (not imported here:
    importing Ray is slow and only the executor needs it)."""
    if importlib.util.find_spec("ray") is None:
        return f"Ray is not installed; install it with `{RAY_INSTALL}`."
    return None


@st.cache_resource(show_spinner=False)
def _sweep_executor_for(home: str, kind: str, address: str | None, workers: int, generation: int = 0):
    return make_executor(RunStore(os.path.join(home, "runs.sqlite")), kind, address=address, workers=workers)


_GENERATIONS: dict[tuple, int] = {}  # executors replaced because their Ray cluster was lost


def sweep_executor(kind: str, *, workers: int, address: str | None = None):
    """The executor of this app process's sweeps: a JobManager dedicated to sweeps (``kind="local"``) or a
    Ray executor, one per (``PRIVENGINE_HOME``, kind, address, workers). A Ray executor that lost its cluster is
    shut down and replaced, so Resume reconnects. Raises ConfigError on a bad setting and ImportError when Ray
    is not installed."""
    key = (str(default_home()), kind, address or None, workers)
    executor = _sweep_executor_for(*key, _GENERATIONS.get(key, 0))
    if getattr(executor, "lost", None):
        executor.shutdown()
        _GENERATIONS[key] = _GENERATIONS.get(key, 0) + 1
        executor = _sweep_executor_for(*key, _GENERATIONS[key])
    return executor


def stored_run_of(mechanism: str, run_id: str, *, role: str = "") -> RunRecord | None:
    """Run ``run_id`` when it is stored and of ``mechanism``; otherwise None, with a warning that says which
    (``role``, e.g. " to compare with", follows the run's id in it)."""
    try:
        run = store().get_run(run_id)
    except RunNotFoundError:
        st.warning(f"Run {run_id}{role} is not in the store (deleted?).", icon=":material/warning:")
        return None
    if run.mechanism != mechanism:
        st.warning(f"Run {run_id}{role} is a {run.mechanism} run, not {mechanism}.", icon=":material/warning:")
        return None
    return run
