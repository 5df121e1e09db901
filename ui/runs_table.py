"""Tables of stored runs for the Home and Runs pages."""

from __future__ import annotations

import re
import time

import pandas as pd

from privengine.claims import PrivacyClaim, headline_of
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
            "accountant": _short(headline.accountant) if headline else "",
        })
    return pd.DataFrame(rows, columns=["run", "mechanism", "state", "created", "elapsed (s)", "device", "source",
                                       "privacy", "accountant"])


def headline_text(claim: PrivacyClaim | None) -> str:
    """``ε = 3, δ = 1e-05 [label]`` of a run's headline claim; empty when it has none."""
    return f"{claim.statement()} [{claim.label}]" if claim else ""


def _short(accountant: str) -> str:
    """The accountant's name without its parameters and reference (the run's page shows them all)."""
    return re.split(r"[,(:]", accountant, maxsplit=1)[0].strip()


def config_differences(runs: list[RunRecord]) -> pd.DataFrame:
    """The headline privacy claim of each of ``runs`` and the config fields whose values differ among them
    (rows: runs; columns: run, mechanism, headline privacy, then the differing fields)."""
    keys = sorted({k for r in runs for k in r.config})
    varying = [k for k in keys if len({repr(r.config.get(k)) for r in runs}) > 1]
    return pd.DataFrame([{"run": r.id, "mechanism": r.mechanism, "privacy (headline)": headline_text(
        headline_of(r.summary)), **{k: str(r.config.get(k, "")) for k in varying}} for r in runs])
