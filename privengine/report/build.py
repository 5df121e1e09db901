"""The report of a run, a sweep or a comparison of runs, read from the store.

:func:`build` resolves an id the way the CLI takes it (a run id or a unique prefix of one, a sweep id, or
run ids joined by commas) and renders one :class:`Report`: header facts, the privacy claims with their
accountants and caveats (headline first), the privacy ledger of each data source read (:mod:`.ledger`), the
configuration (every knob, by label), the charts and result tables the dashboard shows, and the command line that
reproduces it.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pandas as pd

from privengine import __version__, registry
from privengine.claims import claims_of, headline_of
from privengine.cli_fields import flag_name
from privengine.errors import AmbiguousIdError, ConfigError, RunNotFoundError, UnknownMechanismError
from privengine.explore import runner
from privengine.figures import overlay_figures, run_figures, run_tables
from privengine.figures.compare import comparison_figures, single_values
from privengine.figures.sweep import (best_run_text, frontier_figure, headline_accountants, point_seeds,
                                      points_frame)
from privengine.figures.text import headline_text, summary_values, value_text
from privengine.store import RunRecord, RunStore

from .command import Reproduction, run_command, sweep_command
from .html import Document
from .ledger import ledger_section
from .membership import membership_section

Kind = Literal["run", "sweep", "comparison"]
MAX_POINTS = 400  # per metric, as the dashboard draws them


@dataclass(frozen=True)
class Report:
    """A rendered report: what it covers (``kind`` and the resolved ``ids``) and the HTML document."""

    kind: Kind
    ids: tuple[str, ...]
    html: str

    @property
    def filename(self) -> str:
        return filename(self.ids)

    def write(self, path: str | os.PathLike | None = None) -> Path:
        """Write the report to ``path`` (default :attr:`filename` here) atomically; return the path."""
        target = Path(path if path is not None else self.filename)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
        try:
            with open(tmp, "x", encoding="utf-8") as fh:  # created with the umask's permissions, like any file
                fh.write(self.html)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return target


def filename(ids: tuple[str, ...] | list[str]) -> str:
    """A report's default file name, ``report-<id>.html`` (ids joined by ``-`` for a comparison)."""
    return f"report-{'-'.join(ids)}.html"


def resolve(store: RunStore, ref: str) -> tuple[Kind, tuple[str, ...]]:
    """What ``ref`` names: ``("run", (id,))``, ``("sweep", (id,))`` or ``("comparison", (id, ...))``.

    Raises RunNotFoundError (naming ``ref``) when nothing matches, AmbiguousIdError for a prefix of several
    ids, ConfigError for a comparison of fewer than two distinct runs.
    """
    if "," in ref:
        ids = tuple(dict.fromkeys(_one(store, part.strip(), sweeps=False)[1] for part in ref.split(",") if part.strip()))
        if len(ids) < 2:
            raise ConfigError("ID", f"a comparison needs two or more different run ids; got {ref!r}")
        return "comparison", ids
    kind, found = _one(store, ref.strip(), sweeps=True)
    return kind, (found,)


def _one(store: RunStore, ref: str, *, sweeps: bool) -> tuple[Kind, str]:
    matches = store.ids_starting_with(ref) if ref else {"run": [], "sweep": []}
    candidates = [("run", i) for i in matches["run"]] + ([("sweep", i) for i in matches["sweep"]] if sweeps else [])
    exact = [c for c in candidates if c[1] == ref]
    if exact or len(candidates) == 1:
        return (exact or candidates)[0]
    if not candidates:
        raise RunNotFoundError(ref, what="run or sweep" if sweeps else "run")
    raise AmbiguousIdError(ref, [i for _, i in candidates])


def build(store: RunStore, ref: str) -> Report:
    """The report of whatever ``ref`` names (see :func:`resolve`)."""
    kind, ids = resolve(store, ref)
    if kind == "run":
        return Report(kind, ids, run_report(store, ids[0]))
    if kind == "sweep":
        return Report(kind, ids, sweep_report(store, ids[0]))
    return Report(kind, ids, comparison_report(store, list(ids)))


def run_report(store: RunStore, run_id: str) -> str:
    """The HTML report of one run: facts, the headline claim in one line, charts, results, then every claim in
    full, the knobs, the command that reproduces it and the log."""
    run = store.get_run(run_id)
    doc = Document(f"{_title(run.mechanism)} · run {run.title}")
    _run_body(doc, store, run, level=2)
    return doc.html(footer=_footer())


def sweep_report(store: RunStore, sweep_id: str) -> str:
    """The HTML report of a sweep: its facts and composed claim in one line, the frontier and points, then the
    composed claim in full, knobs, runs and command."""
    record = store.get_sweep(sweep_id)
    res = runner.result(store, sweep_id)
    doc = Document(f"{_title(res.mechanism)} · sweep {sweep_id}")
    shape = (f"{res.runs_total} run(s) drawn at random over {len(res.points)} point(s) (random repetition)"
             if res.spec.repeat else f"{len(res.points)} point(s) × {res.spec.seeds} seed(s)")
    doc.facts([("mechanism", f"{_title(res.mechanism)} ({res.mechanism})"), ("state", res.state), ("shape", shape),
               ("runs", ", ".join(f"{n} {s}" for s, n in sorted(res.runs_by_state.items())) or "none"),
               ("executor", res.executor), ("source", record.source), ("created", _when(record.created_at)),
               ("privacy axis", f"{res.privacy_axis.label} ({res.privacy_axis.better} is better)"),
               ("utility axis", f"{res.utility_axis.label} ({res.utility_axis.better} is better)"
                if res.utility_axis else "none declared")])
    if res.claim is not None:
        doc.headline_line(res.claim)
    doc.heading("Privacy-utility frontier")
    doc.figure(frontier_figure(res, point_seeds(store, res), accountants=headline_accountants(store, res)))
    doc.heading("Points")
    doc.table(points_frame(res))
    doc.heading("Privacy of the whole sweep")
    if res.utility_axis is not None and not res.utility_axis.covered:
        doc.paragraph(f"{res.utility_axis.label} is computed from the private data: choosing a point by it is not "
                      "covered by any claim here.", note=True)
    if res.claim is not None:
        doc.claim(res.claim)
    else:
        doc.paragraph("No run of this sweep states an (ε, δ) claim, so there is no composed one.")
    if res.selection is not None:
        if isinstance(res.selection, str):
            doc.paragraph(f"Publishing only the best run (random repetition): no claim, because {res.selection}.")
        else:
            doc.claim(res.selection)
    if res.best is not None:
        doc.paragraph(best_run_text(res.best, res.selection))
    ledger_section(doc, store, store.sweep_runs(sweep_id), level=2)
    doc.heading("Configuration")
    varied = {**{k: ", ".join(value_text(res.mechanism, k, v) for v in vs) for k, vs in res.spec.axes.items()},
              **{k: f"at random in [{value_text(res.mechanism, k, lo)}, {value_text(res.mechanism, k, hi)}]"
                 for k, (lo, hi) in res.spec.random.items()}}
    _config_table(doc, res.mechanism, res.spec.base, varied=varied)
    doc.paragraph(f"Seeds per point: {res.spec.seeds}" + (f"; random draws: {res.spec.samples}" if res.spec.samples
                                                         else "") + ".")
    doc.heading("Runs")
    doc.table(_runs_frame(store.sweep_runs(sweep_id)))
    _command(doc, sweep_command(res.spec, executor=res.executor), what="sweep")
    return doc.html(footer=_footer())


def comparison_report(store: RunStore, run_ids: list[str]) -> str:
    """The HTML report of several runs side by side: their headline claims and differing knobs, overlays of
    their curves, then each run's own report."""
    runs = [store.get_run(i) for i in run_ids]
    doc = Document(f"Comparison of {len(runs)} runs: {', '.join(run_ids)}")
    doc.heading("Runs side by side")
    doc.table(_comparison_frame(runs))
    per_run = {r.id: store.metrics(r.id, max_points=MAX_POINTS) for r in runs}
    once = single_values(runs, per_run)
    figures = (overlay_figures(runs, {r.id: store.artifacts(r.id) for r in runs})
               + comparison_figures(runs, per_run))
    if once is not None:
        doc.heading(once.title)
        doc.table(once.frame)
    if figures:
        doc.heading("Curves overlaid")
        for fig in figures:
            doc.figure(fig)
    for run in runs:
        doc.heading(f"{_title(run.mechanism)} · run {run.title}")
        _run_body(doc, store, run, level=3)
    return doc.html(footer=_footer())


def _run_body(doc: Document, store: RunStore, run: RunRecord, *, level: int) -> None:
    snapshot = store.snapshot(run.id, max_points=MAX_POINTS)
    doc.facts([("name", run.name or None), ("notes", run.notes or None),
               ("mechanism", f"{_title(run.mechanism)} ({run.mechanism})"), ("state", run.state),
               ("device", run.device or "not assigned"), ("source", run.source), ("created", _when(run.created_at)),
               ("started", _when(run.started_at)), ("finished", _when(run.finished_at)),
               ("elapsed", None if run.elapsed_s is None else f"{run.elapsed_s:.1f} s"),
               ("sweep", None if run.sweep_id is None else f"{run.sweep_id}, point {run.sweep_point}"),
               ("error", run.error)])
    claims = sorted(claims_of(run.summary), key=lambda c: not c.headline)  # the headline first
    if claims and claims[0].headline:
        doc.headline_line(claims[0])
    figures = run_figures(snapshot)  # charts first, as the page shows them; every claim in full below them
    if figures:
        doc.heading("Charts", level)
        for fig in figures:
            doc.figure(fig)
    doc.heading("Results", level)
    values, tables = summary_values(run.summary), run_tables(snapshot)
    if values:
        doc.heading("Run summary", level + 1)
        doc.table(pd.DataFrame({"result": list(values), "value": list(values.values())}))
    for table in tables:
        doc.heading(table.title, level + 1)
        doc.table(table.frame)
    if not values and not tables:
        doc.paragraph("No result yet." if run.active else "The run stored no summary.")
    membership_section(doc, store, run, level=level)
    doc.heading("Privacy", level)
    for claim in claims:
        doc.claim(claim)
    if not claims:
        doc.paragraph("This run states no (ε, δ) privacy claim" + (" yet." if run.active else "."))
    ledger_section(doc, store, [run], level=level + 1)
    doc.heading("Configuration", level)
    _config_table(doc, run.mechanism, run.config)
    try:
        _command(doc, run_command(run.mechanism, run.config), what="run", level=level)
    except UnknownMechanismError:
        doc.heading("Reproduce", level)
        doc.paragraph(f"Mechanism {run.mechanism} is not registered here, so no command can rerun it.")
    logs = store.logs(run.id)
    if logs:
        doc.details(f"Log ({len(logs)} lines)", "\n".join(f"{_when(ts)}  {text}" for ts, text in logs))


def _config_table(doc: Document, mechanism: str, values: dict, *, varied: dict[str, str] | None = None) -> None:
    """Every knob by label with its value (``varied`` knobs: the text of their values), non-defaults in bold."""
    try:
        specs = registry.get(mechanism).config_cls.specs()
    except UnknownMechanismError:
        specs = ()
    rows, changed = [], []
    for spec in specs:
        value = values.get(spec.name, spec.default)
        if (varied and spec.name in varied) or (tuple(value) if spec.is_list else value) != spec.default:
            changed.append(len(rows))
        text = f"varied: {varied[spec.name]}" if varied and spec.name in varied else \
            value_text(mechanism, spec.name, value)
        rows.append({"knob": spec.label, "flag": flag_name(spec), "value": text,
                     "default": value_text(mechanism, spec.name, spec.default)})
    known = {spec.name for spec in specs}
    rows += [{"knob": name, "flag": "—", "value": str(value), "default": "not a knob here"}
             for name, value in values.items() if name not in known]
    doc.table(pd.DataFrame(rows, columns=["knob", "flag", "value", "default"]), highlight=changed)
    doc.paragraph("Knobs set away from their defaults are in bold.", note=True)


def _command(doc: Document, reproduction: Reproduction, *, what: str, level: int = 2) -> None:
    doc.heading("Reproduce", level)
    doc.paragraph(f"This command reruns the {what} (only the knobs away from their defaults are given):")
    doc.code(reproduction.command)
    for note in reproduction.notes:
        doc.paragraph(note, note=True)


def _runs_frame(runs: list[RunRecord]) -> pd.DataFrame:
    return pd.DataFrame([{"run": r.id, "point": r.sweep_point, "seed": r.config.get("seed"), "state": r.state,
                          "privacy (headline)": _headline_text(r)} for r in runs],
                        columns=["run", "point", "seed", "state", "privacy (headline)"])


def _comparison_frame(runs: list[RunRecord]) -> pd.DataFrame:
    """Per run: mechanism, state, headline claim and accountant, and the knobs whose values differ, by label."""
    fixed = ["run", "mechanism", "state", "privacy (headline)", "accountant (headline)"]
    keys = sorted({k for r in runs for k in r.config})
    varying = {k: _knob_label(runs, k) for k in keys if len({repr(r.config.get(k)) for r in runs}) > 1}
    varying = {k: f"{label} (knob)" if label in fixed else label for k, label in varying.items()}
    rows = []
    for r in runs:
        headline = headline_of(r.summary)
        rows.append([r.id, _title(r.mechanism), r.state, _headline_text(r), headline.accountant if headline else "—",
                     *(_knob_value(r.mechanism, k, r.config.get(k)) for k in varying)])
    return pd.DataFrame(rows, columns=fixed + list(varying.values()))


def _headline_text(run: RunRecord) -> str:
    return headline_text(headline_of(run.summary)) or "no (ε, δ) claim"


def _knob_label(runs: list[RunRecord], name: str) -> str:
    """The label of knob ``name`` in the first run's mechanism that declares it (else the name itself)."""
    for run in runs:
        try:
            return registry.get(run.mechanism).config_cls.spec(name).label
        except ConfigError:  # an unregistered mechanism, or a knob of another mechanism
            continue
    return name


def _knob_value(mechanism: str, name: str, value) -> str:
    """The value as the form shows it; a dash where the run's mechanism has no such knob."""
    if value is None:
        return "—"
    try:
        return value_text(mechanism, name, value)
    except ConfigError:
        return str(value)


def _title(mechanism: str) -> str:
    try:
        return registry.get(mechanism).title
    except UnknownMechanismError:
        return mechanism


def _when(ts: float | None) -> str | None:
    return None if ts is None else time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(ts))


def _footer() -> str:
    return f"Generated by privengine {__version__} on {_when(time.time())}."
