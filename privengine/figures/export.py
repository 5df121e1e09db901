"""A stored run as a file: its metrics as CSV (one column per metric), or the whole run as JSON.

The Runs page's downloads and ``python -m privengine export`` write these. Every epsilon column names the delta and
the accountant it rests on (:func:`epsilon_column`), so a figure never leaves the tool without its assumptions.
"""

from __future__ import annotations

import json
from dataclasses import fields

from privengine.claims import headline_of
from privengine.jsonable import to_jsonable
from privengine.store import EPSILON_BASIS_ARTIFACT, RunRecord, RunStore, is_epsilon_metric
from privengine.store.records import finite_or_none


def run_json(store: RunStore, run_id: str) -> str:
    """The whole run (record, headline privacy claim, all metrics, artifacts, logs) as one JSON document."""
    run = store.get_run(run_id)
    metrics = store.metrics(run_id)
    headline = headline_of(run.summary)
    doc = {
        "run": {f.name: getattr(run, f.name) for f in fields(RunRecord)},
        "headline_privacy": None if headline is None else headline.to_dict(),
        "metrics": {name: {"step": g["step"].tolist(), "value": [finite_or_none(v) for v in g["value"]]}
                    for name, g in metrics.groupby("name", sort=True)},
        "artifacts": store.artifacts(run_id),
        "logs": [{"ts": ts, "text": text} for ts, text in store.logs(run_id, limit=10**9)],
    }
    return json.dumps(to_jsonable(doc), indent=2, sort_keys=True)


def run_csv(store: RunStore, run_id: str) -> str:
    """The run's metrics as CSV, one row per step and one column per metric, each epsilon column headed by
    :func:`epsilon_column`."""
    run = store.get_run(run_id)
    metrics = store.metrics(run_id)
    if metrics.empty:
        return "step\n"
    wide = metrics.pivot_table(index="step", columns="name", values="value", aggfunc="last", dropna=False)
    wide.columns.name = None
    basis = store.artifacts(run_id).get(EPSILON_BASIS_ARTIFACT) or {}
    wide.columns = [epsilon_column(name, run, basis.get(name)) for name in wide.columns]
    return wide.reset_index().to_csv(index=False)


def epsilon_column(name: str, run: RunRecord, basis: dict | None = None) -> str:
    """``name``, or for an epsilon metric ``name [delta = D; accountant: A]``.

    ``basis``: what the run declared for this metric in its :data:`~privengine.store.EPSILON_BASIS_ARTIFACT`
    artifact (``{"delta": D, "accountant": A}``: each curve's own analysis, e.g. a data-dependent curve's, or an
    a-priori curve without a release its headline composes). Without one, D and A are the run's headline claim's,
    marked "(the run's headline claim)", and a run without a claim falls back to its configuration's ``delta`` and
    ``accountant`` knobs, and says so when it has neither.
    """
    if not is_epsilon_metric(name):
        return name
    headline = headline_of(run.summary)
    if basis:
        delta, accountant = basis.get("delta"), basis.get("accountant")
    elif headline is not None:
        delta, accountant = headline.delta, f"{headline.accountant} (the run's headline claim)"
    else:
        delta, accountant = run.config.get("delta"), run.config.get("accountant")
    delta_text = f"delta = {delta:g}" if isinstance(delta, (int, float)) else "delta not stated"
    return f"{name} [{delta_text}; accountant: {accountant or 'not stated'}]"
