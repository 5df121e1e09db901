"""The privacy-ledger section of every report (run, sweep, comparison): for each private data source the reported
runs read, the source, what its ledger has spent (:func:`privengine.figures.ledger.total_text`), its budget, and the
reported runs' shares, each its own ε alone (the shares do not add up to the total, which composes them tightly). The
ledger is read as the report is built, and the section says when."""

from __future__ import annotations

import time

import pandas as pd

from privengine.figures.ledger import budget_text, share_text, total_text
from privengine.ledger import ledger_of, source_of
from privengine.ledger.budget import raise_command
from privengine.ledger.ledger import SHARES_NOTE
from privengine.ledger.sources import NO_SOURCE
from privengine.store import RunRecord, RunStore

from .html import Document

__all__ = ["ledger_section"]


def _source(store: RunStore, run: RunRecord) -> str:
    """The data source ``run`` is charged to: stored with it, else computed as the ledger back-fills it."""
    return run.data_source if run.data_source is not None else source_of(store, run.mechanism, run.config)


def ledger_section(doc: Document, store: RunStore, runs: list[RunRecord], *, level: int) -> None:
    """Add the section for ``runs`` (one run's report: its share as a fact; several: a table of their shares)."""
    by_source: dict[str, list[RunRecord]] = {}
    for run in runs:
        by_source.setdefault(_source(store, run), []).append(run)
    doc.heading("Privacy ledger", level)
    for source, group in by_source.items():
        if source == NO_SOURCE:
            doc.paragraph(f"{_runs_text(group)} no private data source: no ledger is charged.")
            continue
        ledger = ledger_of(store, source)
        budget = budget_text(ledger.budget)
        if ledger.budget is None:
            budget += f" (set one: {raise_command(source)})"
        else:
            budget += f" ({100 * ledger.epsilon / ledger.budget.epsilon:.0f} % spent)"
        facts = [("data source", source), ("spent", total_text(ledger)), ("budget", budget),
                 ("uncovered uses", f"{len(ledger.uncovered)} (covered by no claim: audits and attacks that "
                                    "train on the private data, runs without a claim, public or held-out rows, "
                                    "outputs published without privacy, other sources' runs released on it)")]
        if len(runs) == 1:
            facts.append(("this run's share", share_text(ledger, group[0].id)))
        doc.facts(facts)
        if len(runs) > 1:
            doc.table(pd.DataFrame([{"run": r.id, "state": r.state, "share": share_text(ledger, r.id)}
                                    for r in group], columns=["run", "state", "share"]))
    doc.paragraph(f"The ledger as of {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, as python -m privengine ledger SOURCE "
                  f"prints it; {SHARES_NOTE}.", note=True)


def _runs_text(runs: list[RunRecord]) -> str:
    return f"Run {runs[0].id} reads" if len(runs) == 1 else f"Runs {', '.join(r.id for r in runs)} read"
