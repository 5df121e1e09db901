"""Tables of stored runs for the Home and Runs pages."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from privengine import registry
from privengine.audit.membership_job import AUDIT_OF_MECHANISM
from privengine.claims import headline_of
from privengine.config import RunConfig
from privengine.errors import PrivengineError
from privengine.figures.compare import differing_fields, mechanism_name
from privengine.figures.text import (accountant_name, knob_label, privacy_text, result_text, settings_text,
                                     value_text)
from privengine.store import RunRecord

from .links import ATTACK_QUERY_KEY, AUDIT_QUERY_KEY

_COMMON_FIELDS = {s.name for s in RunConfig.specs()}  # device, seed, replica, noise source: not a run's setting

COLUMNS = ["open", "run", "name", "mechanism", "state", "privacy", "result", "settings", "created", "elapsed (s)",
           "device", "source", "accountant"]


def column_config() -> dict:
    """The runs tables' columns: "open", a link to the run's page (a click on it opens the run); widths of the long
    text columns, so the privacy claim stays readable beside the others."""
    return {"open": st.column_config.LinkColumn("open", display_text="open ↗", width=70,
                                                help="Open the run's page (in a new tab)"),
            "privacy": st.column_config.TextColumn(width="large"),
            "result": st.column_config.TextColumn(width="medium"),
            "settings": st.column_config.TextColumn(width="medium"),
            "name": st.column_config.TextColumn(width="medium")}


def run_url(run: RunRecord) -> str | None:
    """The run's page, relative to the app's pages (``pate?run=ID``): a link that works from every page, whatever
    path the app is served under. An audit's run is shown on its mechanism's page: a membership attack beside the
    run it attacked (``dpsgd?run=RUN&attack=ID``; none for an attack of the demonstration recipe, which no page
    shows), any other audit in the page's audit section (``pate?audit=ID``). None for an unregistered
    mechanism."""
    try:
        entry = registry.get(run.mechanism)
    except PrivengineError:
        return None
    if entry.audits is None:
        return f"{run.mechanism}?run={run.id}"
    if run.mechanism in AUDIT_OF_MECHANISM.values():
        attacked = run.config.get("run")
        return f"{entry.audits}?run={attacked}&{ATTACK_QUERY_KEY}={run.id}" if attacked else None
    return f"{entry.audits}?{AUDIT_QUERY_KEY}={run.id}"


def runs_frame(runs: list[RunRecord]) -> pd.DataFrame:
    """One row per run: a link to its page, id, name, mechanism, state, privacy (headline claim, or the leakage of a
    mechanism without one), result (the mechanism's main utility, e.g. the student's test accuracy), the settings
    that differ from the mechanism's defaults, start time, duration, device, origin and the headline's accountant
    (the run's page has the full statement: neighbouring relation, order, caveats)."""
    rows = []
    for run in runs:
        headline = headline_of(run.summary)
        rows.append({
            "open": run_url(run),
            "run": run.id,
            "name": run.name,
            "mechanism": mechanism_name(run.mechanism),
            "state": run.state,
            "privacy": privacy_text(run),
            "result": result_text(run),
            "settings": key_settings(run),
            "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created_at)),
            "elapsed (s)": None if run.elapsed_s is None else round(run.elapsed_s, 1),
            "device": run.device or "",
            "source": run.source,
            "accountant": accountant_name(headline.accountant) if headline else "",
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def key_settings(run: RunRecord) -> str:
    """The run's knobs that differ from its mechanism's defaults, as the form names them (device, seed and noise
    source left out); "defaults" when none does."""
    try:
        specs = registry.get(run.mechanism).config_cls.specs()
    except PrivengineError:
        return ""
    changed = {s.name: run.config[s.name] for s in specs
               if s.name not in _COMMON_FIELDS and s.name in run.config and _differs(run.config[s.name], s.default)}
    return settings_text(run.mechanism, changed) if changed else "defaults"


def _differs(value, default) -> bool:
    return list(value) != list(default) if isinstance(default, tuple) else value != default


def config_differences(runs: list[RunRecord]) -> pd.DataFrame:
    """The knobs whose values differ among the runs of each mechanism, by their form labels, then each run's result
    and privacy (rows: runs; columns: open, run, mechanism, the differing knobs, result, privacy). The knobs come
    first: they are what tells the runs apart, and the long privacy text would push them off a 1280 px screen."""
    rows = [{"open": run_url(r), "run": r.title, "mechanism": mechanism_name(r.mechanism)} for r in runs]
    for mechanism in dict.fromkeys(r.mechanism for r in runs):
        group = [r for r in runs if r.mechanism == mechanism]
        for field in differing_fields(group):
            label = knob_label(mechanism, field)
            for row, run in zip(rows, runs):
                if run.mechanism == mechanism:
                    row[label] = value_text(mechanism, field, run.config.get(field))
    for row, run in zip(rows, runs):
        row.update(result=result_text(run), privacy=privacy_text(run))
    return pd.DataFrame(rows)


def identical_configs(differences: pd.DataFrame) -> bool:
    """Whether a :func:`config_differences` table has no differing knob."""
    return set(differences.columns) <= {"open", "run", "mechanism", "result", "privacy"}
