"""The CLI's ``audit`` command: ``python -m privengine audit AUDIT [--field value ...] [--json]``.

One sub-command per registered audit (e.g. ``pate-gnmax``), its flags generated from the
audit's config knobs. The audit runs as a job, like ``run``: it is stored (``runs``, ``show``,
``export`` and the dashboard see it), its progress goes to stderr, and Ctrl-C stops it. It
prints the claimed epsilon beside the audited lower bound (``--json``: one object, the run's
summary :meth:`~privengine.audit.interface.AuditResult.to_dict` with its ``run_id``). Exit
status 0 when the audit ran, whatever it found; 1 when it failed or was stopped; bad input
raises :class:`~privengine.errors.ConfigError`, which the main CLI turns into one line naming
the field and exit status 2.
"""

from __future__ import annotations

import argparse
import json
from typing import Callable, TextIO

from .. import registry
from ..cli_fields import add_field_flags, field_values
from ..store import RunStore
from .interface import AuditResult, result_of

COMMANDS = ("audit",)
EXIT_OK, EXIT_FAILED, EXIT_INTERRUPTED = 0, 1, 130


def add_parsers(sub) -> None:
    """Add ``audit`` and one sub-command per registered audit to the CLI's subparsers."""
    audit = sub.add_parser("audit", help="audit a mechanism empirically: a lower bound on epsilon beside the claim")
    audits = audit.add_subparsers(dest="audit", required=True, metavar="AUDIT")
    for entry in registry.all_audits():
        p = audits.add_parser(entry.name, help=entry.title, description=entry.description)
        p.add_argument("--json", action="store_true", help="print the result as one JSON object")
        add_field_flags(p.add_argument_group("audit fields"), entry.config_cls)


def dispatch(args: argparse.Namespace, store: RunStore, out: TextIO, err: TextIO, follow: Callable) -> int:
    """Run the audit named on the command line as a stored job (``follow``: the CLI's submit-and-follow) and
    print its result."""
    entry = registry.get(args.audit)
    config = entry.config_cls.from_dict(field_values(args, entry.config_cls))
    run = follow(store, entry.name, config, source="cli", err=err)
    if run is None:
        return EXIT_INTERRUPTED
    result = result_of(run.summary)
    if result is None:
        print(f"audit run {run.id} {run.state}: {run.error or 'no result'}", file=err)
        return EXIT_FAILED
    if args.json:
        print(json.dumps({"run_id": run.id, **run.summary}, indent=2, sort_keys=True), file=out)
    else:
        print_result(result, out, run_id=run.id)
    return EXIT_OK if run.state == "finished" else EXIT_FAILED


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)


def print_result(result: AuditResult, out: TextIO, *, run_id: str) -> None:
    """The human-readable result: claim beside bound, method, counts, details and notes."""
    print(f"audit {result.audit} (mechanism {result.mechanism}), run {run_id}", file=out)
    for line in result.summary_lines():
        print(line, file=out)
    print("counts:   " + "  ".join(f"{k}={v}" for k, v in result.counts.items()), file=out)
    for key, value in result.details.items():
        print(f"  {key}: {_short(value)}", file=out)
    for note in result.notes:
        print(f"note: {note}", file=out)
