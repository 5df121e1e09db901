"""Command-line interface: ``python -m privengine COMMAND``.

Commands: ``list``, ``run MECHANISM [--field value ...] [--json]``, ``runs``,
``show ID``, ``export ID --format csv|json``, ``export ID --format model --output DIR`` (the kept models and their
card, :mod:`privengine.report.model_export`), ``export ID --to mlflow [--tracking-uri URI] [--experiment NAME]``
(:mod:`privengine.report.mlflow_export`), ``predict --model DIR --data FILE``
(:mod:`privengine.kept_models.predict`),
``report ID [--format html] [--output FILE]``,
``stop ID``, ``delete ID``, the
sweep commands of :mod:`privengine.explore.cli` (``sweep``, ``sweeps``, ``show-sweep``, ...),
``audit AUDIT [--field value ...] [--json]`` of :mod:`privengine.audit.cli` and ``ledger [SOURCE]``,
``ledger budget SOURCE --epsilon E --delta D`` of :mod:`privengine.ledger.cli`, and ``data add NAME PATH``,
``data list``, ``data show NAME``, ``data delete NAME`` of :mod:`privengine.datasets.cli`.
The flags of ``run`` are generated from the mechanism's config fields, so they
always match the dashboard's form. Runs land in the same store as the
dashboard's. Bad input exits with status 2 and one line naming the field.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from typing import Any, Iterator, NoReturn, Sequence, TextIO

from . import registry
from .audit import cli as audit_cli
from .audit.interface import result_of
from .claims import claims_of, headline_of
from .cli_fields import add_field_flags, field_values
from .datasets import cli as data_cli
from .explore import cli as sweep_cli
from .kept_models import predict
from .errors import AmbiguousIdError, ConfigError, PrivengineError, RunNotFoundError
from .ledger import cli as ledger_cli
from .presets import changed_fields, source_with_preset
from .store import NAME_MAX_CHARS, NOTES_MAX_CHARS, STATES, RunRecord, RunStore

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m privengine",
                     description="Run and inspect privacy-preserving ML mechanisms.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    listing = sub.add_parser("list", help="list the mechanisms and what they protect")
    listing.add_argument("--json", action="store_true", help="print them as a JSON list")

    run = sub.add_parser("run", help="run a mechanism (flags come from its config; see run MECHANISM --help)")
    mechs = run.add_subparsers(dest="mechanism", required=True, metavar="MECHANISM")
    for mech in registry.all_mechanisms():
        p = mechs.add_parser(mech.name, help=mech.title, description=mech.description)
        p.add_argument("--json", action="store_true", help="print the finished run as JSON on stdout")
        _add_config_flags(p, mech)

    presets = sub.add_parser("presets", help="list the named presets (published settings, demos)")
    presets.add_argument("mechanism", nargs="?", metavar="MECHANISM", help="only this mechanism's")
    presets.add_argument("--json", action="store_true", help="print them as a JSON list")

    runs = sub.add_parser("runs", help="list stored runs, newest first")
    runs.add_argument("--mechanism", help="only this mechanism")
    runs.add_argument("--state", choices=STATES, help="only runs in this state")
    runs.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    runs.add_argument("--json", action="store_true", help="print them as a JSON list (each with its headline claim)")

    show = sub.add_parser("show", help="show one run: config, state, summary, privacy claims")
    show.add_argument("run_id", metavar="ID")
    show.add_argument("--json", action="store_true", help="print as JSON")

    export = sub.add_parser("export", help="export a run's metrics (csv), everything (json) or its kept models with "
                                           "their model card (model), or log it all to MLflow (--to mlflow)")
    export.add_argument("run_id", metavar="ID")
    where = export.add_mutually_exclusive_group(required=True)
    where.add_argument("--format", choices=("csv", "json", "model"))
    where.add_argument("--to", choices=("mlflow",), help="log the run to an MLflow tracking store (needs the optional "
                                                         "MLflow packages of requirements-dev.txt)")
    export.add_argument("--output", metavar="FILE", help="write here instead of stdout (model: a new or empty folder, "
                                                         "required)")
    export.add_argument("--tracking-uri", metavar="URI", help="with --to mlflow: the tracking store (default: "
                                                              "$MLFLOW_TRACKING_URI, else SQLite under the run store's "
                                                              "home, HOME/mlruns/mlflow.db)")
    export.add_argument("--experiment", metavar="NAME", help="with --to mlflow: the MLflow experiment (default "
                                                             "privengine; created if absent)")
    predict.add_parser(sub)

    report = sub.add_parser("report", help="write a self-contained HTML report of a run, a sweep or a comparison")
    report.add_argument("ref", metavar="ID", help="a run id (or a unique prefix), a sweep id, or run ids joined by "
                                                  "commas for a comparison")
    report.add_argument("--format", choices=("html",), default="html",
                        help="html: one file that opens offline (default)")
    report.add_argument("--output", metavar="FILE", help="where to write it (default report-ID.html here)")

    label = sub.add_parser("label", help="name a run and/or write its notes (shown in tables, links and reports)")
    label.add_argument("run_id", metavar="ID")
    label.add_argument("--name", help=f"a short name, one line of at most {NAME_MAX_CHARS} characters ('' clears it)")
    label.add_argument("--notes", help=f"free text, at most {NOTES_MAX_CHARS} characters ('' clears them)")

    for name, text in (("stop", "ask a queued or running run to stop"), ("delete", "delete an ended run")):
        p = sub.add_parser(name, help=text)
        p.add_argument("run_id", metavar="ID")
    sweep_cli.add_parsers(sub, _add_config_flags)
    audit_cli.add_parsers(sub)
    ledger_cli.add_parsers(sub)
    data_cli.add_parsers(sub)
    return parser


def _add_config_flags(p: argparse.ArgumentParser, mech: registry.Mechanism) -> None:
    """``--preset NAME``, ``--config FILE`` and one ``--field-name VALUE`` flag per config field."""
    names = ", ".join(pr.name for pr in mech.presets)
    p.add_argument("--preset", metavar="NAME", help=f"start from this named preset ({names or 'none'}); "
                                                     "--config and flags override it")
    p.add_argument("--config", metavar="FILE", help="JSON file of config values (flags override it)")
    add_field_flags(p.add_argument_group("config fields"), mech.config_cls)


def main(argv: Sequence[str] | None = None, *, stdout: TextIO | None = None, stderr: TextIO | None = None,
         restore_stdout: bool = True) -> int:
    """Run the CLI; return the exit status.

    With ``--json`` (or ``export --format json`` onto stdout) stdout receives exactly one JSON document, whatever
    else the command's libraries print (:func:`json_only_stdout`). ``restore_stdout=False`` (the
    ``python -m privengine`` process) keeps file descriptor 1 on stderr after the document, so nothing printed at
    exit (Ray's shutdown, say) can follow it."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    args = build_parser().parse_args(argv)
    with json_only_stdout(out, err, enabled=_prints_json(args), restore=restore_stdout) as out:
        return _dispatch(args, out, err)


def _prints_json(args: argparse.Namespace) -> bool:
    """Whether the command's stdout is a machine-readable document."""
    if getattr(args, "json", False):
        return True
    return args.command in ("export", "export-sweep") and args.format == "json" and not args.output


@contextlib.contextmanager
def json_only_stdout(out: TextIO, err: TextIO, *, enabled: bool, restore: bool = True) -> Iterator[TextIO]:
    """While a ``--json`` command works, send everything bound for stdout to stderr; yield the stream that reaches
    the real stdout, for the document alone.

    Prints, Python logging, Ray's driver messages (``(raylet) A worker died ...``, printed to ``sys.stdout`` from
    Ray's threads) and child processes started meanwhile (Ray's raylet, workers) all write to file descriptor 1, so
    when ``out`` is this process's stdout, descriptor 1 itself is pointed at stderr (``os.dup2``) and the document
    is written to a duplicate of the original. Otherwise (an in-process caller's own stream) only ``sys.stdout`` is
    redirected. ``restore``: point descriptor 1 back at stdout afterwards.
    """
    if not enabled:
        yield out
        return
    try:
        out_fd, err_fd = out.fileno(), err.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        out_fd = err_fd = None
    if out is not sys.stdout or out_fd is None or err_fd is None:
        saved = sys.stdout
        sys.stdout = err
        try:
            yield out
        finally:
            sys.stdout = saved
        return
    out.flush()
    document_fd = os.dup(out_fd)
    os.dup2(err_fd, out_fd)
    document = open(document_fd, "w", encoding=out.encoding or "utf-8", closefd=True)
    try:
        yield document
    finally:
        try:
            document.flush()  # BrokenPipeError when the reader has gone: the document is closed all the same
        finally:
            out.flush()  # what was printed meanwhile goes to stderr, where descriptor 1 still points
            if restore:
                os.dup2(document_fd, out_fd)
            document.close()


def _dispatch(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    try:
        if args.command == "list":
            return _cmd_list(args, out)
        if args.command == "presets":
            return _cmd_presets(args, out)
        if args.command == "predict":
            return predict.run(args, out)
        store = RunStore()
        if args.command in audit_cli.COMMANDS:
            return audit_cli.dispatch(args, store, out, err, submit_and_follow)
        if args.command == "run":
            return _cmd_run(args, store, out, err)
        if args.command == "runs":
            return _cmd_runs(args, store, out)
        if args.command == "show":
            return _cmd_show(args, store, out)
        if args.command == "export":
            return _cmd_export(args, store, out)
        if args.command == "report":
            return _cmd_report(args, store, out, err)
        if args.command in sweep_cli.COMMANDS:
            return sweep_cli.dispatch(args, store, out, err, _config_values)
        if args.command in ledger_cli.COMMANDS:
            return ledger_cli.dispatch(args, store, out)
        if args.command in data_cli.COMMANDS:
            return data_cli.dispatch(args, store, out)
        if args.command == "label":
            return _cmd_label(args, store, out)
        if args.command == "stop":
            store.request_stop(args.run_id)
            print(f"stop requested for {args.run_id}", file=out)
            return EXIT_OK
        store.delete_run(args.run_id)
        print(f"deleted {args.run_id}", file=out)
        return EXIT_OK
    except (ConfigError, RunNotFoundError, AmbiguousIdError) as exc:
        print(f"privengine: error: {exc}", file=err)
        return EXIT_USAGE
    except PrivengineError as exc:
        print(f"privengine: error: {exc}", file=err)
        return EXIT_FAILED


def _cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    if args.json:
        rows = [{"name": m.name, "title": m.title, "protects": m.protects, "sweepable": m.frontier is not None}
                for m in registry.all_mechanisms()]
        print(json.dumps(rows, indent=2), file=out)
        return EXIT_OK
    for mech in registry.all_mechanisms():
        print(f"{mech.name:12s} {mech.title}\n{'':12s} protects: {mech.protects}\n", file=out)
    return EXIT_OK


def _cmd_presets(args: argparse.Namespace, out: TextIO) -> int:
    mechanisms = [registry.get(args.mechanism)] if args.mechanism else registry.all_mechanisms()
    rows = [p.to_dict(m.name) for m in mechanisms for p in m.presets]
    if args.json:
        print(json.dumps(rows, indent=2), file=out)
        return EXIT_OK
    for row in rows:
        pub = row["published"]
        figure = (f"  [published: {pub['metric']} {pub['value']:g}"
                  + (f" at ε = {pub['epsilon']:g}" if pub["epsilon"] is not None else "") + f"; {pub['source']}]"
                  if pub else "")
        print(f"{row['mechanism']:12s} {row['name']:24s} {row['description']}{figure}", file=out)
    if not rows:
        print("no presets", file=out)
    return EXIT_OK


def _config_from_args(args: argparse.Namespace) -> Any:
    return registry.get(args.mechanism).config_cls.from_dict(_config_values(args))


def _config_values(args: argparse.Namespace) -> dict[str, Any]:
    """The config values given by ``--config FILE`` and the field flags (flags win), each checked."""
    mech = registry.get(args.mechanism)
    values: dict[str, Any] = dict(mech.preset(args.preset).overrides) if args.preset else {}
    if args.config:
        try:
            with open(args.config, encoding="utf-8") as fh:
                from_file = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError("config", f"must be a readable JSON file; {exc}") from None
        if not isinstance(from_file, dict):
            raise ConfigError("config", "must hold a JSON object of field values")
        values.update(from_file)
    values.update(field_values(args, mech.config_cls))
    return values


def _source(args: argparse.Namespace, config: Any) -> str:
    """``cli``, with the preset the run starts from (``modified`` when a file or flag changed one of its fields)."""
    if not args.preset:
        return "cli"
    expected = registry.get(args.mechanism).preset_config(args.preset).to_dict()
    return source_with_preset("cli", args.preset, modified=bool(changed_fields(expected, config.to_dict())))


def _cmd_run(args: argparse.Namespace, store: RunStore, out: TextIO, err: TextIO) -> int:
    config = _config_from_args(args)
    run = submit_and_follow(store, args.mechanism, config, source=_source(args, config), err=err)
    if run is None:
        return EXIT_INTERRUPTED
    if args.json:
        print(json.dumps(_run_json(run), indent=2, sort_keys=True), file=out)
    else:
        _print_run(run, out)
    if run.state == "failed":
        print(f"run {run.id} failed: {run.error}", file=err)
    return EXIT_OK if run.state == "finished" else EXIT_FAILED


def submit_and_follow(store: RunStore, name: str, config: Any, *, source: str, err: TextIO) -> RunRecord | None:
    """Queue a run of registry entry ``name`` (a mechanism or an audit) and show its progress on ``err`` until it
    ends; return its record, or None when Ctrl-C stopped it (said on ``err``)."""
    from .jobs import JobManager  # imports torch lazily through the device module

    manager = JobManager(store)
    run_id = manager.submit(name, config, source=source)
    print(f"run {run_id}: {name} started (stored in {store.path})", file=err)
    progress = _ProgressLine(err)
    try:
        while run_id in manager.active_run_ids():
            progress.update(store.get_run(run_id), store)
            manager.wait(run_id, timeout=0.5)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the run...", file=err)
        manager.stop(run_id)
        manager.wait(run_id, timeout=10)
        manager.join(run_id, timeout=10)
        progress.finish()
        print(f"run {run_id} {store.get_run(run_id).state}", file=err)
        return None
    manager.join(run_id)  # the run's thread exits before the process does (see JobManager.join)
    progress.finish()
    return store.get_run(run_id)


class _ProgressLine:
    """A one-line progress display: redrawn in place on a terminal, every few seconds in a log."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self._last_print = 0.0
        self._drawn = False

    def update(self, run: RunRecord, store: RunStore) -> None:
        now = time.monotonic()
        if not self.tty and now - self._last_print < 5.0:
            return
        self._last_print = now
        latest = store.metrics(run.id, max_points=2).groupby("name")["value"].last()
        values = "  ".join(f"{k}={v:.4g}" for k, v in list(latest.items())[:4])
        pct = "" if run.progress is None else f"{100 * run.progress:5.1f}% "
        line = f"[{run.state}] {pct}{run.progress_text or ''}  {values}  {run.elapsed_s or 0:.0f}s"
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150))
            self._drawn = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()


def _run_json(run: RunRecord) -> dict[str, Any]:
    return {k: getattr(run, k) for k in ("id", "mechanism", "state", "device", "config", "summary", "error",
                                         "created_at", "started_at", "finished_at", "elapsed_s", "source")}


def _run_listing_json(run: RunRecord) -> dict[str, Any]:
    """A run as ``runs --json`` lists it: its record without config and summary, plus its headline claim (as the
    runs table shows it) and, for an audit, its result (``show ID --json`` gives the whole run)."""
    keys = ("id", "name", "notes", "mechanism", "state", "device", "error", "created_at", "started_at", "finished_at",
            "elapsed_s", "source", "sweep_id", "sweep_point", "progress", "progress_text")
    from .figures.text import headline_text  # here: the figures package imports plotly and pandas (about 1.5 s)

    headline, audit = headline_of(run.summary), result_of(run.summary)
    return {**{k: getattr(run, k) for k in keys},
            "headline_privacy": None if headline is None else headline.to_dict(),
            "headline_privacy_text": None if headline is None else headline_text(headline),
            "audit": None if audit is None else audit.headline()}


def _print_run(run: RunRecord, out: TextIO) -> None:
    print(f"run {run.title}  {run.mechanism}  {run.state}  device: {run.device or '-'}  "
          f"elapsed: {run.elapsed_s or 0:.1f}s  source: {run.source}", file=out)
    if run.notes:
        print(f"notes: {run.notes}", file=out)
    print("config: " + " ".join(f"{k}={v}" for k, v in run.config.items()), file=out)
    if run.error:
        print(f"error: {run.error}", file=out)
    for claim in sorted(claims_of(run.summary), key=lambda c: not c.headline):  # the headline first
        print(f"privacy{' (headline)' if claim.headline else ''}: {claim.text()}", file=out)
    audit = result_of(run.summary)
    for line in audit.summary_lines() if audit else ():
        print(line, file=out)
    for key, value in (run.summary or {}).items():
        if key == "privacy":
            continue
        if isinstance(value, (list, dict)):  # tables: too wide for a terminal line
            value = f"<{len(value)} entries; see `show --json` or `export`>"
        print(f"{key}: {value}", file=out)


def _cmd_runs(args: argparse.Namespace, store: RunStore, out: TextIO) -> int:
    runs = store.list_runs(mechanism=args.mechanism, states=[args.state] if args.state else None, limit=args.limit)
    if args.json:
        print(json.dumps([_run_listing_json(run) for run in runs], indent=2, sort_keys=True), file=out)
        return EXIT_OK
    if not runs:
        print("no runs stored yet", file=out)
    from .figures.text import headline_text

    for run in runs:
        created = time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created_at))
        headline, audit = headline_of(run.summary), result_of(run.summary)
        privacy = f"  {headline_text(headline)}" if headline else ""  # worded as the pages' runs tables
        privacy += f"  {audit.headline()}" if audit else ""
        print(f"{run.id}  {created}  {run.mechanism:12s} {run.state:11s} {run.elapsed_s or 0:8.1f}s  "
              f"{run.device or '':8s}{privacy}" + (f"  \"{run.name}\"" if run.name else ""), file=out)
    return EXIT_OK


def _cmd_label(args: argparse.Namespace, store: RunStore, out: TextIO) -> int:
    if args.name is None and args.notes is None:
        raise ConfigError("label", "needs --name and/or --notes")
    run = store.set_label(args.run_id, name=args.name, notes=args.notes)
    print(f"run {run.id}: name {run.name!r}, notes {len(run.notes)} characters", file=out)
    return EXIT_OK


def _cmd_show(args: argparse.Namespace, store: RunStore, out: TextIO) -> int:
    from .ledger import upgrade as ledger_upgrade  # here: it imports the accountants (torch, Opacus)

    ledger_upgrade.ensure(store)  # claims stored before they carried events get them (once per store)
    run = store.get_run(args.run_id)
    if args.json:
        print(json.dumps(_run_json(run), indent=2, sort_keys=True), file=out)
    else:
        _print_run(run, out)
    return EXIT_OK


def _cmd_export(args: argparse.Namespace, store: RunStore, out: TextIO) -> int:
    mlflow_flags = [flag for flag, value in (("--tracking-uri", args.tracking_uri), ("--experiment", args.experiment))
                    if value is not None]
    if args.to == "mlflow":
        from .report.mlflow_export import DEFAULT_EXPERIMENT, export_to_mlflow  # MLflow itself only when it runs

        if args.output:
            raise ConfigError("--output", "applies to --format only; --to mlflow writes into the tracking store")
        exported = export_to_mlflow(store, args.run_id, tracking_uri=args.tracking_uri,
                                    experiment=DEFAULT_EXPERIMENT if args.experiment is None else args.experiment)
        print(exported.text(args.run_id), file=out)
        return EXIT_OK
    if mlflow_flags:
        raise ConfigError(mlflow_flags[0], "applies to --to mlflow only")
    if args.format == "model":
        from .report.model_export import export_model  # imports plotly through the report package

        if not args.output:
            raise ConfigError("--output", "is required with --format model: the folder to write the model into")
        print(export_model(store, args.run_id, args.output), file=out)
        return EXIT_OK
    from .figures.export import run_csv, run_json  # here: the figures package imports plotly and pandas

    text = (run_csv if args.format == "csv" else run_json)(store, args.run_id)
    sweep_cli.write_output(text, args.output, out)
    return EXIT_OK


def _cmd_report(args: argparse.Namespace, store: RunStore, out: TextIO, err: TextIO) -> int:
    from .report import build  # imports plotly and the mechanisms' figures only when a report is asked for

    report = build(store, args.ref)
    try:
        path = report.write(args.output)
    except OSError as exc:
        print(f"privengine: error: cannot write the report to {args.output or report.filename}: "
              f"{exc.strerror or exc}", file=err)
        return EXIT_FAILED
    print(path, file=out)
    return EXIT_OK
