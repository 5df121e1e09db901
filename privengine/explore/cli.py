"""The CLI's sweep commands: ``sweep``, ``sweeps``, ``show-sweep``, ``export-sweep``, ``stop-sweep``, ``resume-sweep``.

``python -m privengine sweep MECHANISM [--vary FIELD=V1,V2,...]... [--random FIELD=LOW:HIGH --samples N]
[--seeds N] [--executor local|ray] [--address ADDR] [--workers N] [--group | --no-group] [--field value ...] [--json]``
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable, TextIO

from privengine import registry
from privengine.errors import ConfigError
from privengine.store import RunStore

from . import runner
from .executors import make_executor
from .export import points_csv
from .spec import SweepSpec

EXECUTORS = ("local", "ray")


def add_parsers(sub, add_config_flags: Callable[[argparse.ArgumentParser, Any], None]) -> None:
    """Add the sweep commands to the CLI's subparsers (``add_config_flags(parser, mechanism)`` adds --field flags)."""
    sweep = sub.add_parser("sweep", help="run a grid of configurations over several seeds and show the frontier")
    mechs = sweep.add_subparsers(dest="mechanism", required=True, metavar="MECHANISM")
    for mech in registry.sweepable():
        p = mechs.add_parser(mech.name, help=mech.title, description=f"Sweep {mech.title}. Flags of its config set "
                                                                      "the values every run shares.")
        p.add_argument("--vary", action="append", default=[], metavar="FIELD=V1,V2,...",
                       help="vary FIELD over these values (a grid with the other --vary)")
        p.add_argument("--random", action="append", default=[], metavar="FIELD=LOW:HIGH",
                       help="draw FIELD at random in [LOW, HIGH] (log-uniform for log knobs); needs --samples")
        p.add_argument("--samples", type=int, default=0, metavar="N", help="random draws (with --random)")
        p.add_argument("--seeds", type=int, default=1, metavar="N", help="runs per point, seeds seed, seed+1, ...")
        p.add_argument("--utility", metavar="NAME", help="utility metric to report (default: the mechanism's)")
        p.add_argument("--repeat", metavar="SHAPE:MEAN",
                       help="random-repetition tuning (Papernot & Steinke): a random number of runs, law SHAPE "
                            "(poisson, geometric or logarithmic) with mean MEAN, each at a random point")
        _executor_flags(p)
        p.add_argument("--json", action="store_true", help="print the finished sweep as JSON on stdout")
        add_config_flags(p, mech)

    sweeps = sub.add_parser("sweeps", help="list stored sweeps, newest first")
    sweeps.add_argument("--limit", type=int, default=20)
    sweeps.add_argument("--json", action="store_true", help="print them as a JSON list (each with its composed claim)")
    show = sub.add_parser("show-sweep", help="show a sweep: its points, frontier and composed privacy claim")
    show.add_argument("sweep_id", metavar="ID")
    show.add_argument("--json", action="store_true")
    show.add_argument("--utility", metavar="NAME", help="another summary number as the utility axis")
    export = sub.add_parser("export-sweep", help="export a sweep's points (csv) or everything (json)")
    export.add_argument("sweep_id", metavar="ID")
    export.add_argument("--format", choices=("csv", "json"), required=True)
    export.add_argument("--output", metavar="FILE")
    stop = sub.add_parser("stop-sweep", help="cancel a sweep's queued runs and stop its running ones")
    stop.add_argument("sweep_id", metavar="ID")
    resume = sub.add_parser("resume-sweep", help="run again only the runs of a sweep that did not finish")
    resume.add_argument("sweep_id", metavar="ID")
    resume.add_argument("--json", action="store_true")
    _executor_flags(resume)


def _executor_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local: this machine's job threads; ray: a Ray cluster (local one unless --address)")
    p.add_argument("--address", metavar="ADDR", help="Ray cluster address (default $RAY_ADDRESS, else a new local one)")
    p.add_argument("--workers", type=int, metavar="N",
                   help=f"concurrent runs (default {runner.default_workers()}: one per two cores)")
    p.add_argument("--group", action=argparse.BooleanOptionalAction, default=None,
                   help="train compatible runs together (DP-SGD: one model batch, one job or Ray task); default: "
                        "only when the runs' device is an accelerator (CUDA, MPS), since on a CPU a batch of K "
                        "models costs about K single ones")


COMMANDS = ("sweep", "sweeps", "show-sweep", "export-sweep", "stop-sweep", "resume-sweep")


def dispatch(args: argparse.Namespace, store: RunStore, out: TextIO, err: TextIO,
             config_values: Callable[[argparse.Namespace], dict]) -> int:
    """Run one sweep command; returns the exit status (1 if a run of the sweep failed)."""
    if args.command == "sweeps":
        records = store.list_sweeps(limit=args.limit)
        if args.json:
            print(json.dumps([_sweep_listing_json(runner.result(store, r.id), r) for r in records], indent=2),
                  file=out)
            return 0
        for record in records:
            res = runner.result(store, record.id)
            created = time.strftime("%Y-%m-%d %H:%M", time.localtime(record.created_at))
            so_far = " so far" if res.state == "running" else ""
            claim = f"  {res.claim.statement()} [sweep{so_far}]" if res.claim else ""
            print(f"{record.id}  {created}  {record.mechanism:12s} {res.state:10s} {len(res.points)} points, "
                  f"{res.runs_total} runs ({record.executor}){claim}", file=out)
        return 0
    if args.command == "show-sweep":
        res = runner.result(store, args.sweep_id, utility=args.utility)
        print(json.dumps(res.to_dict(), indent=2) if args.json else _text(res), file=out)
        return 0
    if args.command == "export-sweep":
        res = runner.result(store, args.sweep_id)
        write_output(json.dumps(res.to_dict(), indent=2) if args.format == "json" else points_csv(res), args.output,
                     out)
        return 0
    if args.command == "stop-sweep":
        print(f"stop requested for {runner.stop(store, None, args.sweep_id)} active run(s)", file=out)
        return 0
    executor = make_executor(store, args.executor, address=args.address, workers=args.workers)
    try:
        if args.command == "resume-sweep":
            sweep_id, run_ids = args.sweep_id, runner.resume(store, executor, args.sweep_id, source="cli",
                                                            group=args.group)
            print(f"sweep {sweep_id}: {len(run_ids)} missing run(s) resubmitted", file=err)
        else:
            spec = parse_spec_values(SweepSpec(
                args.mechanism, base=config_values(args), axes=dict(map(_vary, args.vary)),
                random=dict(map(_random_range, args.random)), samples=args.samples, seeds=args.seeds,
                utility=args.utility, repeat=_repeat(args.repeat)))
            sweep_id = runner.launch(store, executor, spec, source="cli", group=args.group)
            run_ids = [r.id for r in store.sweep_runs(sweep_id)]
            print(f"sweep {sweep_id}: {len(run_ids)} runs on the {executor.name} executor "
                  f"(stored in {store.path})", file=err)
        _wait(store, executor, sweep_id, run_ids, err)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping the sweep...", file=err)
        runner.stop(store, executor, sweep_id)
        return 130
    finally:
        executor.shutdown()
    res = runner.result(store, sweep_id)
    print(json.dumps(res.to_dict(), indent=2) if args.json else _text(res), file=out)
    message = incomplete_message(res, getattr(executor, "lost", None), resume_command(args, sweep_id))
    if message:
        print(message, file=err)
        return 1
    return 0


def resume_command(args: argparse.Namespace, sweep_id: str) -> str:
    """The command that runs a sweep's missing runs again, on the executor (and cluster) this command used."""
    words = ["python -m privengine resume-sweep", sweep_id]
    if args.executor != "local":
        words += ["--executor", args.executor]
    if args.address:
        words += ["--address", args.address]
    if args.workers:
        words += ["--workers", str(args.workers)]
    if args.group is not None:
        words.append("--group" if args.group else "--no-group")
    return " ".join(words)


def incomplete_message(res: runner.SweepResult, lost: str | None, command: str) -> str | None:
    """One paragraph for a sweep that ended without all its runs finishing (None when they all did): what was lost,
    how many runs failed or never started, and the command that completes it. Every attempt stays charged in the
    sweep's claim."""
    if res.state == "finished" or (res.state == "stopped" and not lost and not res.failed):
        return None
    counts = res.runs_by_state
    parts = [f"{n} {state}" for state, n in sorted(counts.items()) if state != "finished" and n]
    head = f"sweep {res.sweep_id} did not complete"
    if lost:
        head += f": {lost}"
    return (f"{head}. Of its {res.runs_total} runs {counts.get('finished', 0)} finished"
            + (f", {', '.join(parts)}" if parts else "")
            + f" (each run's error says what ended it). Resume it with: {command} "
            "(it reruns only the runs that did not finish; every attempt stays charged in the sweep's claim).")


def _sweep_listing_json(res: runner.SweepResult, record) -> dict[str, Any]:
    """A sweep as ``sweeps --json`` lists it (``show-sweep ID --json`` gives everything)."""
    return {"sweep_id": res.sweep_id, "mechanism": res.mechanism, "created_at": record.created_at,
            "source": record.source, "executor": res.executor, "state": res.state, "points": len(res.points),
            "runs_total": res.runs_total, "runs_by_state": res.runs_by_state, "attempts": res.attempts,
            "privacy": None if res.claim is None else res.claim.to_dict()}


def write_output(text: str, path: str | None, out: TextIO) -> None:
    """An export: into ``path`` (saying so on ``out``), or onto ``out`` itself."""
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        print(f"wrote {path}", file=out)
    else:
        out.write(text)


def _wait(store: RunStore, executor, sweep_id: str, run_ids: list[str], err: TextIO) -> None:
    tty = bool(getattr(err, "isatty", lambda: False)())
    last = 0.0
    pending = list(run_ids)
    while pending:
        executor.wait(pending[0], timeout=0.5)
        runs = store.sweep_runs(sweep_id)  # one query a round; no claim is composed while waiting
        active = {r.id for r in runs if r.active}
        pending = [r for r in pending if r in active]
        now = time.monotonic()
        if tty or now - last >= 5.0 or not pending:
            last = now
            counts = runner.state_counts(runner.latest_attempts(runs))
            done = sum(v for k, v in counts.items() if k not in ("queued", "running"))
            bar = "#" * int(30 * done / max(len(run_ids), 1))
            line = (f"[{bar:30s}] {done}/{len(run_ids)} runs ended  "
                    + "  ".join(f"{k} {v}" for k, v in sorted(counts.items())))
            err.write(("\r" + line.ljust(110)) if tty else line + "\n")
            err.flush()
    if tty:
        err.write("\n")


def _vary(text: str) -> tuple[str, list]:
    name, sep, values = text.partition("=")
    if not sep or not values:
        raise ConfigError("vary", f"must look like FIELD=V1,V2,...; got {text!r}")
    return name.strip().replace("-", "_"), [v.strip() for v in values.split(",") if v.strip()]


def _random_range(text: str) -> tuple[str, tuple[str, str]]:
    name, sep, bounds = text.partition("=")
    low, colon, high = bounds.partition(":")
    if not sep or not colon:
        raise ConfigError("random", f"must look like FIELD=LOW:HIGH; got {text!r}")
    return name.strip().replace("-", "_"), (low.strip(), high.strip())


def _repeat(text: str | None) -> dict | None:
    if text is None:
        return None
    shape, colon, mean = text.partition(":")
    try:
        return {"shape": shape.strip(), "mean": float(mean)}
    except ValueError:
        raise ConfigError("repeat", f"must look like SHAPE:MEAN, e.g. logarithmic:10; got {text!r}") from None


def parse_spec_values(spec: SweepSpec) -> SweepSpec:
    """The spec with the CLI's text values parsed through each knob (ConfigError naming the field)."""
    cls = registry.get(spec.mechanism).config_cls
    axes = {k: [cls.spec(k).parse(v) if isinstance(v, str) else v for v in vs] for k, vs in spec.axes.items()}
    rnd = {k: tuple(cls.spec(k).parse(v) if isinstance(v, str) else v for v in b) for k, b in spec.random.items()}
    return SweepSpec(**{**spec.__dict__, "axes": axes, "random": rnd})


def _text(res: runner.SweepResult) -> str:
    u = res.utility_axis.label if res.utility_axis else "utility"
    lines = [f"sweep {res.sweep_id}  {res.mechanism}  {res.state}  executor: {res.executor}  runs: "
             + ", ".join(f"{v} {k}" for k, v in sorted(res.runs_by_state.items())),
             f"privacy: {res.privacy_axis.label} ({res.privacy_axis.better} is better); utility: {u} "
             f"({res.utility_axis.better if res.utility_axis else '-'} is better)"]
    for p in res.points:
        star = "*" if p.index in res.frontier else " "
        settings = " ".join(f"{k}={v}" for k, v in p.settings.items()) or "(base config)"
        lines.append(f"{star} {p.index:3d}  {settings:40s} privacy {p.privacy:.4g} ± {p.privacy_sd:.2g}  "
                     f"utility {p.utility:.4g} ± {p.utility_sd:.2g}  ({p.seeds} seed(s); {', '.join(p.states)})")
        lines.extend(f"      error: {e}" for e in p.errors)
    chooser = res.utility_axis.select_by if res.utility_axis else ""
    lines.append("* = on the Pareto frontier"
                 + (f" (chosen by {chooser}, not by the utility shown)" if chooser else ""))
    lines.append(f"sweep privacy: {res.claim.text()}" if res.claim else
                 "sweep privacy: no run states an (ε, δ) claim (see each run's own guarantee)")
    if res.selection is not None:
        lines.append(f"best run only: {res.selection.text() if hasattr(res.selection, 'text') else res.selection}")
    if res.best is not None:
        b = res.best
        lines.append(f"best run (by {b['selected_by']} = {b['selection']:.4g}): {b['run']} at point {b['point']}, "
                     f"{b['utility']} = " + ("-" if b["value"] is None else f"{b['value']:.4g}"))
    return "\n".join(lines)
