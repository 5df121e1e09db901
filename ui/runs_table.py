"""Tables of stored runs for the Home and Runs pages."""

from __future__ import annotations

import re
import time

import pandas as pd

from privengine.claims import claims_of
from privengine.store import RunRecord


def runs_frame(runs: list[RunRecord]) -> pd.DataFrame:
    """One row per run: id, mechanism, state, start time, duration, device, origin, headline privacy claim
    and its accountant (the run's page has the full statement: neighbouring relation, order, caveats)."""
    rows = []
    for run in runs:
        claims = claims_of(run.summary)
        rows.append({
            "run": run.id,
            "mechanism": run.mechanism,
            "state": run.state,
            "created": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created_at)),
            "elapsed (s)": None if run.elapsed_s is None else round(run.elapsed_s, 1),
            "device": run.device or "",
            "source": run.source,
            "privacy": f"{claims[0].headline()} [{claims[0].label}]" if claims else "",
            "accountant": _short(claims[0].accountant) if claims else "",
        })
    return pd.DataFrame(rows, columns=["run", "mechanism", "state", "created", "elapsed (s)", "device", "source",
                                       "privacy", "accountant"])


def _short(accountant: str) -> str:
    """The accountant's name without its parameters and reference (the run's page shows them all)."""
    return re.split(r"[,(:]", accountant, maxsplit=1)[0].strip()


def config_differences(runs: list[RunRecord]) -> pd.DataFrame:
    """The config fields whose values differ among ``runs`` (rows: runs; columns: fields)."""
    keys = sorted({k for r in runs for k in r.config})
    varying = [k for k in keys if len({repr(r.config.get(k)) for r in runs}) > 1]
    return pd.DataFrame([{"run": r.id, "mechanism": r.mechanism, **{k: str(r.config.get(k, "")) for k in varying}}
                         for r in runs])
