"""The ledger's commands: ``python -m privengine ledger [SOURCE] [--delta D] [--json]`` (no SOURCE: every source
with what it has spent and its budget; a SOURCE: its ledger) and ``ledger budget SOURCE --epsilon E --delta D``
(sets or raises its budget, recorded with the time); ``ledger upgrade`` gives the claims of runs stored before claims
carried privacy events theirs, once per store, and prints what it did (:mod:`.upgrade`). Bad input raises ConfigError
naming the option (exit 2)."""

from __future__ import annotations

import argparse
import json
import time
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import ConfigError
from ..jsonable import to_jsonable
from ..store import BudgetRecord, RunStore
from ..store.upgrades import CLAIM_EVENTS

if TYPE_CHECKING:
    from .ledger import Ledger

# The ledger's modules are imported by the commands that use them, not here: they import dp-accounting, torch and
# Opacus, and every `python -m privengine ...` builds this command's parser.

COMMANDS = ("ledger",)


def add_parsers(sub) -> None:
    """Add the ``ledger`` command to ``sub`` (the CLI's subparsers)."""
    p = sub.add_parser("ledger", help="what every run on a private data source has spent, composed, and its budget "
                                      "(ledger budget SOURCE --epsilon E --delta D sets one)",
                       description="The privacy ledger of each private data source (e.g. mnist/train, linreg/seed=0).")
    p.add_argument("words", nargs="*", metavar="SOURCE",
                   help="a data source: its ledger (none: every source); `budget SOURCE`: set its budget; "
                        "`upgrade`: give old runs' claims their privacy events")
    p.add_argument("--epsilon", type=float, help="with `budget`: the budget's epsilon, > 0")
    p.add_argument("--delta", type=float, help="with `budget`: the budget's delta, in (0, 1); otherwise the delta to "
                                               "state the ledger at (default: the budget's, else 1e-5)")
    p.add_argument("--note", default="", help="with `budget`: why it is set (kept in its history)")
    p.add_argument("--json", action="store_true", help="print as JSON")


def dispatch(args: argparse.Namespace, store: RunStore, out: TextIO) -> int:
    """Run ``ledger``; return 0 (errors are raised: ConfigError for bad input)."""
    from .ledger import ledger_of
    from .sources import check_source, known_sources

    words = list(args.words)
    if words[:1] == ["budget"]:
        return _budget(args, words[1:], store, out)
    if words == ["upgrade"]:
        return _upgrade(args, store, out)
    if len(words) > 1:
        raise ConfigError("SOURCE", f"must be one data source (or `budget SOURCE`); got {' '.join(words)!r}")
    if args.epsilon is not None:
        raise ConfigError("--epsilon", "is for `ledger budget SOURCE --epsilon E --delta D` only")
    if words:
        ledger = ledger_of(store, check_source(store, words[0]), delta=args.delta)
        if args.json:
            _print(ledger.to_dict(), out)
        else:
            _print_ledger(ledger, out)
        return 0
    ledgers = [ledger_of(store, source, delta=args.delta) for source in known_sources(store)
               if store.budget_history(source) or store.source_run_states(source)]
    if args.json:
        _print([_overview(ledger) for ledger in ledgers], out)
    for ledger in ledgers if not args.json else ():
        budget = _budget_text(ledger.budget) if ledger.budget else "no budget"
        print(f"{ledger.source:28s} {len(ledger.shares):4d} runs  spent ε = {ledger.epsilon:.4g} at δ = "
              f"{ledger.total.delta:.3g}  {budget}" + (f"  {len(ledger.uncovered)} uncovered" if ledger.uncovered
                                                        else ""), file=out)
    if not ledgers and not args.json:
        print("no data source has runs or a budget yet", file=out)
    return 0


def _budget(args: argparse.Namespace, words: list[str], store: RunStore, out: TextIO) -> int:
    if len(words) != 1:
        raise ConfigError("SOURCE", "`ledger budget` needs one data source: ledger budget SOURCE --epsilon E --delta D")
    for option, value in (("--epsilon", args.epsilon), ("--delta", args.delta)):
        if value is None:
            raise ConfigError(option, "is required: ledger budget SOURCE --epsilon E --delta D")
    from .budget import set_budget
    from .ledger import ledger_of

    record = set_budget(store, words[0], args.epsilon, args.delta, args.note)
    ledger = ledger_of(store, record.source)
    if args.json:
        _print({"budget": vars(record), "ledger": _overview(ledger)}, out)
        return 0
    print(f"budget of {record.source}: {_budget_text(record)} (set {_when(record.set_at)}); spent ε = "
          f"{ledger.epsilon:.4g}" + (" (over it)" if ledger.epsilon > record.epsilon else ""), file=out)
    return 0


def _upgrade(args: argparse.Namespace, store: RunStore, out: TextIO) -> int:
    """``ledger upgrade``: give the claims of runs stored before claims carried events theirs, if the store asks for
    it and it is not done yet (:mod:`.upgrade`), and print its report."""
    from .upgrade import upgrade

    report = upgrade(store)
    if args.json:
        _print({"upgrade": CLAIM_EVENTS, "report": report}, out)
    elif report is None:
        print("nothing to upgrade: this store held no run when it reached schema version 10", file=out)
    else:
        print(f"claims' privacy events: {report['runs']} runs had claims without events; {report['given_events']} "
              f"claims got events; {report['figures']} are figures, not compositions of releases; "
              f"{len(report['headlines_without_events'])} runs' headlines stay without events (basic composition)",
              file=out)
        for item in report["not_reproduced"] + report["not_restated"]:
            print(f"  {item['run_id']} ({item['in']}) {item.get('label', '')}: not upgraded, {item['why']}", file=out)
    return 0


def _overview(ledger: Ledger) -> dict[str, Any]:
    return {"source": ledger.source, "epsilon": ledger.epsilon, "delta": ledger.total.delta,
            "runs": len(ledger.shares), "uncovered_uses": len(ledger.uncovered),
            "budget": None if ledger.budget is None else vars(ledger.budget)}


def _print(document: Any, out: TextIO) -> None:
    print(json.dumps(to_jsonable(document), indent=2, sort_keys=True), file=out)


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _budget_text(budget: BudgetRecord) -> str:
    return f"budget ε = {budget.epsilon:g} at δ = {budget.delta:g}"


def _print_ledger(ledger: Ledger, out: TextIO) -> None:
    total = ledger.total
    print(f"ledger of {ledger.source}: ε = {total.epsilon:.4g} at δ = {total.delta:.3g}, neighbours: "
          f"{total.relation.replace('_', ' ')}", file=out)
    if total.delta_basis:
        print(f"δ: {total.delta_basis}", file=out)
    print("accountant: " + ("; ".join(total.accountants) or "nothing charged yet")
          + (f"; {total.conversion}" if total.conversion else ""), file=out)
    for caveat in total.caveats:
        print(f"caveat: {caveat}", file=out)
    if ledger.budget:
        print(f"{_budget_text(ledger.budget)}: {100 * total.epsilon / ledger.budget.epsilon:.0f} % spent", file=out)
    print(f"runs charged ({len(ledger.shares)}; each run's ε alone at δ = {ledger.delta:g}, the shares do not add "
          "up):", file=out)
    for s in ledger.shares:
        print(f"  {s.run_id}  {_when(s.at)}  {s.mechanism:14s} {s.state:11s} ε = {s.epsilon:.4g} alone"
              f"{' (planned: still running)' if s.planned else ''}  [{s.composed}]", file=out)
    print(f"uncovered uses ({len(ledger.uncovered)}: covered by no claim):", file=out)
    for use in ledger.uncovered:
        print(f"  {use.run.id}  {_when(use.run.created_at)}  {use.run.mechanism:14s} {use.run.state:11s} {use.why}",
              file=out)
    if ledger.pending or ledger.released_nothing:
        print(f"not charged: {len(ledger.pending)} pending (nothing released yet), {ledger.released_nothing} that "
              "released nothing", file=out)
    print("budget history:" + ("" if ledger.budget_history else " none set"), file=out)
    for budget in ledger.budget_history:
        print(f"  {_when(budget.set_at)}  {_budget_text(budget)}" + (f"  ({budget.note})" if budget.note else ""),
              file=out)
