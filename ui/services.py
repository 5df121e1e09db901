"""Process-wide engine objects for the dashboard, created once per data directory."""

from __future__ import annotations

import os

import streamlit as st

from privengine.device import DeviceChoice, available_devices
from privengine.errors import ConfigError
from privengine.jobs import JobManager
from privengine.store import RunStore, default_home


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
