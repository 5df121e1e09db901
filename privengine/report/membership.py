"""The membership section of a DP-SGD or PATE run's report: the latest stored membership attack of that run (the
``dpsgd-membership`` or ``pate-membership`` audit, :mod:`privengine.audit.membership_job`) with its one-line verdict
(:func:`privengine.figures.membership.verdict`), its ROC under the claim's bounds, its table and what it assumed;
nothing when no attack of the run has measured anything."""

from __future__ import annotations

from privengine.audit import result_of
from privengine.audit.membership_job import AUDIT_OF_MECHANISM, measured_output, stored_attacks
from privengine.figures import membership as figures
from privengine.store import RunRecord, RunStore

from .html import Document

__all__ = ["latest_attack", "membership_section"]


def latest_attack(store: RunStore, run: RunRecord) -> RunRecord | None:
    """The newest ended attack of ``run`` at its own noise that measured a ROC (None if there is none, or if its
    mechanism has no membership attack)."""
    if run.mechanism not in AUDIT_OF_MECHANISM:
        return None
    for attack in stored_attacks(store, run.id, audit=AUDIT_OF_MECHANISM[run.mechanism]):
        if measured_output(attack.summary) is not None:
            return attack
    return None


def membership_section(doc: Document, store: RunStore, run: RunRecord, *, level: int) -> None:
    """Add the section to ``doc`` for a ``run`` with a stored attack."""
    attack = latest_attack(store, run)
    if attack is None:
        return
    snapshot = store.snapshot(attack.id)
    result = result_of(attack.summary)
    out = result.details["membership"]
    doc.heading("Membership inference", level)
    attacked = out.get("attacked", "recipe of this run")  # a stored model's attack names the model
    bound = " (one-run bound of the attack's guesses)" if "one_run" in out else ""
    doc.paragraph(f"Attack run {attack.id} ({attack.state}): {out['attack']} with {out['reference_models']} reference "
                  f"models on the {attacked}, {out['members']} members and {out['non_members']} non-members. "
                  f"{result.headline()}{bound}.")
    doc.paragraph(figures.CAVEAT, note=True)
    doc.paragraph(figures.verdict(out))
    doc.figure(figures.roc(out))
    for table in figures.tables(snapshot):
        doc.heading(table.title, level + 1)
        doc.table(table.frame)
