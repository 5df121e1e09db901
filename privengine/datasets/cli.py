"""The data set commands: ``python -m privengine data add NAME PATH [...]``, ``data list``, ``data show NAME``,
``data delete NAME`` (refused while stored runs use it), each with ``--json``. Bad input raises ConfigError naming
the field (the CLI prints it in one line and exits 2), before anything is stored."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from ..store import RunStore
from .builtin import builtin_names
from .declaration import (DEFAULT_MAX_BYTES, DEFAULT_MIN_ROWS, KINDS, Declaration, parse_bounds, parse_categorical,
                          parse_list)
from .describe import ADDRESS_NOTE, address, fact_rows, shown, stored_message, summary
from .ingest import add_dataset
from .references import delete_unused, referencing_runs
from .storage import manifest, names

COMMANDS = ("data",)
PUBLIC_NOTE = ("Public facts (classes, bounds, category lists, sizes) must come from you or from the public rows, "
               "never from the private rows.")


def add_parsers(sub) -> None:
    """Add the ``data`` command and its actions to ``sub`` (the CLI's subparsers)."""
    data = sub.add_parser("data", help="your own data sets: data add NAME PATH, data list, data show NAME, "
                                       "data delete NAME", description="User data sets (tables, image folders).")
    actions = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="validate and store a CSV / Parquet table or an image folder / zip",
                             description="Validate a file and store it as data set NAME. " + PUBLIC_NOTE)
    add.add_argument("name", metavar="NAME", help="the data set's name (letters, digits, _ . -)")
    add.add_argument("path", metavar="PATH", help="a .csv or .parquet file, or a folder (or .zip) of class folders")
    add.add_argument("--kind", choices=KINDS, help="tabular or images (default: from PATH)")
    add.add_argument("--label", metavar="COLUMN", help="a table's label column")
    add.add_argument("--classes", metavar="A,B,...", help="the public class list (default: the public rows' labels)")
    add.add_argument("--public-rows", type=int, metavar="N", help="the first N rows (images) are public")
    add.add_argument("--private-size", type=int, metavar="N",
                     help="N, the private part's size declared public, used for sampling and accounting")
    add.add_argument("--categorical", action="extend", nargs="+", default=[], metavar="COL=a,b,c",
                     help="a categorical column and its public category list (repeatable)")
    add.add_argument("--bounds", action="extend", nargs="+", default=[], metavar="COL=LO:HI",
                     help="a numeric column's public range (clipping range); *=LO:HI for every other one")
    add.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, metavar="B",
                     help=f"refuse a file larger than this (default {DEFAULT_MAX_BYTES})")
    add.add_argument("--min-rows", type=int, default=DEFAULT_MIN_ROWS, metavar="N",
                     help=f"refuse fewer private rows than this (default {DEFAULT_MIN_ROWS})")
    listing = actions.add_parser("list", help="the stored data sets")
    show = actions.add_parser("show", help="one data set's schema, address and public facts")
    delete = actions.add_parser("delete", help="delete a data set no stored run uses")
    for p in (show, delete):
        p.add_argument("name", metavar="NAME")
    for p in (add, listing, show, delete):
        p.add_argument("--json", action="store_true", help="print as JSON")


def declaration_of(args: argparse.Namespace) -> Declaration:
    """The flags of ``data add`` as a Declaration (checked when added)."""
    return Declaration(args.name, kind=args.kind, label=args.label,
                       classes=None if args.classes is None else parse_list("classes", args.classes),
                       public_rows=args.public_rows, private_size=args.private_size,
                       categorical=parse_categorical(args.categorical), bounds=parse_bounds(args.bounds),
                       max_bytes=args.max_bytes, min_rows=args.min_rows)


def dispatch(args: argparse.Namespace, store: RunStore, out: TextIO) -> int:
    """Run ``data ACTION``; return 0 (errors are raised: ConfigError for bad input)."""
    if args.data_command == "add":
        document = add_dataset(declaration_of(args), args.path, reserved=builtin_names())
        text = f"{stored_message(document)}\n{facts_text(document)}"
        document = shown(document)
    elif args.data_command == "list":
        stored = [manifest(name) for name in names()]
        text = "\n".join(summary(d) for d in stored) or ("no data sets stored yet: python -m privengine data add "
                                                          "NAME PATH --label COLUMN")
        document = [shown(d) for d in stored]
    elif args.data_command == "show":
        stored, used_by = manifest(args.name), referencing_runs(store, args.name)
        text = show_text(stored, used_by)
        document = {**shown(stored), "used_by": used_by}
    else:
        document = {"deleted": args.name, "manifest": shown(delete_unused(store, args.name))}
        text = f"deleted data set {args.name}"
    if args.json:
        print(json.dumps(document, indent=2, sort_keys=True), file=out)
    else:
        print(text, file=out)
    return 0


def facts_text(document: dict[str, Any]) -> str:
    """The public facts, one per line, each with where it came from."""
    return "public facts:\n" + "\n".join(f"  {row['fact']}: {row['value']}  [{row['source']}]"
                                          for row in fact_rows(document))


def show_text(document: dict[str, Any], used_by: list[str]) -> str:
    """``data show``: a manifest and the stored runs that use it, in words."""
    schema = document["schema"]
    columns = ", ".join(f"{c['name']} ({c['role']})" for c in schema["columns"])
    used = ", ".join(used_by) or "no stored run"
    return (f"{summary(document)}\nfile: {document['file']}  stored: {document['bytes']} bytes\ncolumns: {columns}"
            + (f"\nimage shape: {schema['shape']}" if "shape" in schema else "")
            + f"\naddress: {address(document)} ({ADDRESS_NOTE})\nused by: {used}\n{facts_text(document)}")
