"""The CLI's ``audit`` command: ``python -m privengine audit AUDIT [--field value ...] [--json]``.

One sub-command per registered auditor (e.g. ``pate-gnmax``), its flags generated from the
audit's config knobs. It prints the claimed epsilon beside the audited lower bound (``--json``:
one object, :meth:`~privengine.audit.interface.AuditResult.to_dict`). Exit status 0 when the
audit ran, whatever it found; bad input raises :class:`~privengine.errors.ConfigError`, which
the main CLI turns into one line naming the field and exit status 2.
"""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from ..cli_fields import add_field_flags, field_values
from .interface import AuditResult, all_auditors, get_auditor

COMMANDS = ("audit",)


def add_parsers(sub) -> None:
    """Add ``audit`` and one sub-command per auditor to the CLI's subparsers."""
    audit = sub.add_parser("audit", help="audit a mechanism empirically: a lower bound on epsilon beside the claim")
    audits = audit.add_subparsers(dest="audit", required=True, metavar="AUDIT")
    for auditor in all_auditors():
        p = audits.add_parser(auditor.name, help=auditor.title, description=auditor.description)
        p.add_argument("--json", action="store_true", help="print the result as one JSON object")
        add_field_flags(p.add_argument_group("audit fields"), auditor.config_cls)


def dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run the audit named on the command line and print its result; returns 0."""
    auditor = get_auditor(args.audit)
    config = auditor.config_cls.from_dict(field_values(args, auditor.config_cls))
    result = auditor.audit(config)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, sort_keys=True), file=out)
    else:
        print_result(result, out)
    return 0


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_short(v) for v in value) + "]"
    return str(value)


def print_result(result: AuditResult, out: TextIO) -> None:
    """The human-readable result: claim beside bound, method, counts, details and notes."""
    print(f"audit {result.audit} (mechanism {result.mechanism})", file=out)
    for line in result.summary_lines():
        print(line, file=out)
    print("counts:   " + "  ".join(f"{k}={v}" for k, v in result.counts.items()), file=out)
    for key, value in result.details.items():
        print(f"  {key}: {_short(value)}", file=out)
    for note in result.notes:
        print(f"note: {note}", file=out)
