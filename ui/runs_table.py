"""Tables of stored runs for the Home and Runs pages."""

from __future__ import annotations

import time

import pandas as pd

from privengine.claims import headline_of
from privengine.figures.text import accountant_name, headline_text
from privengine.store import RunRecord


def runs_frame(runs: list[RunRecord]) -> pd.DataFrame:
    """One row per run: id, mechanism, state, start time, duration, device, origin, headline privacy claim
    and its accountant (the run's page has the full statement: neighbouring relation, order, caveats)."""
    rows = []
    for run in runs:
        headline = headline_of(run.summary)
        rows.append({
            "run": run.id,
            "mechanism": run.mechanism,
            "state": run.state,
            "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created_at)),
            "elapsed (s)": None if run.elapsed_s is None else round(run.elapsed_s, 1),
            "device": run.device or "",
            "source": run.source,
            "privacy": headline_text(headline),
            "accountant": accountant_name(headline.accountant) if headline else "",
        })
    return pd.DataFrame(rows, columns=["run", "mechanism", "state", "created", "elapsed (s)", "device", "source",
                                       "privacy", "accountant"])


def config_differences(runs: list[RunRecord]) -> pd.DataFrame:
    """The headline privacy claim of each of ``runs`` and the config fields whose values differ among them
    (rows: runs; columns: run, mechanism, headline privacy, then the differing fields)."""
    keys = sorted({k for r in runs for k in r.config})
    varying = [k for k in keys if len({repr(r.config.get(k)) for r in runs}) > 1]
    return pd.DataFrame([{"run": r.id, "mechanism": r.mechanism, "privacy (headline)": headline_text(
        headline_of(r.summary)), **{k: _text(r.config.get(k)) for k in varying}} for r in runs])


def _text(value) -> str:
    """A config value as the table shows it: a dash where there is none."""
    return "—" if value is None else str(value)
