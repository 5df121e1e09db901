"""The line under a mechanism page's Launch button: the privacy ledger of the data source the form's config reads,
what it has spent against its budget, and what this launch would add (its planned claim composed with the ledger:
:func:`privengine.ledger.budget.check_claims`, as the launch itself is checked), with a link to the source's Ledger
page.

Planning a launch may take seconds (a DP-SGD plan calibrates σ), so the line is drawn at once with what is spent, and
what the launch adds is filled in by the function :func:`ledger_line` returns, which the page calls once everything
else is drawn."""

from __future__ import annotations

from typing import Callable
from urllib.parse import quote

import streamlit as st

from privengine.config import BaseConfig
from privengine.errors import ConfigError
from privengine.figures.text import number
from privengine.ledger import BudgetExceeded, LaunchCheck, ledger_of, source_of
from privengine.ledger.budget import check_claims, planned_claim_of
from privengine.ledger.sources import NO_SOURCE
from privengine.store import BudgetRecord

from . import services

LEDGER_PATH = "ledger"  # the Ledger page's URL path (ui.links.ledger_page)
HELP = ("Every run on a private data source is charged to its ledger: the tight composition of everything released "
        "from it. The Ledger page shows each run's share and sets the budget; a launch that would exceed the budget "
        "is refused before anything trains.")


def ledger_url(source: str) -> str:
    """The Ledger page of ``source``, relative to the app's pages (``ledger?source=mnist%2Ftrain``)."""
    return f"{LEDGER_PATH}?source={quote(source, safe='')}"


def spent_text(source: str, spent: float, budget: BudgetRecord | None) -> str:
    """``Ledger of mnist/train: ε 1.2 of 3 spent`` (Markdown, the source a link to its Ledger page; in red when over
    the budget)."""
    if budget is None:
        state = f"ε {number(spent, 3)} spent, no budget"
    else:
        state = f"ε {number(spent, 3)} of {budget.epsilon:g} spent"
        if spent > budget.epsilon:
            state = f":red[{state}: over the budget]"
    return f"Ledger of [{source}]({ledger_url(source)}): {state}"


def adds_text(check: LaunchCheck) -> str:
    """`` · this launch +0.4 → 1.6`` (in red, saying it would be refused, when that exceeds the budget)."""
    text = f"this launch +{number(check.adds, 3)} → {number(check.after.epsilon, 3)}"
    return f" · :red[{text}: over the budget, refused]" if check.exceeds else f" · {text}"


def launch_check(mechanism: str, config: BaseConfig, source: str) -> LaunchCheck | str:
    """What launching ``config`` would do to ``source``'s ledger, or, where it cannot be said, why in a few words."""
    try:
        claim = planned_claim_of(mechanism, config)
    except ConfigError:
        return "its planned release cannot be computed: the launch would fail"
    if claim is None:
        return "its run states no claim: an uncovered use"
    try:
        return check_claims(services.store(), source, [claim])
    except BudgetExceeded as exc:
        return exc.check


def ledger_line(mechanism: str, config: BaseConfig | None) -> Callable[[], None]:
    """Draw the line for ``config`` with what is spent (nothing while the form has errors: which source it reads is
    not known); return the function that adds what the launch would add (call it when the page is drawn)."""
    store = services.store()
    source = None if config is None else source_of(store, mechanism, config)
    if source is None or source == NO_SOURCE:
        return lambda: None
    ledger = ledger_of(store, source)
    slot = st.empty()
    spent = spent_text(source, ledger.epsilon, ledger.budget)
    slot.caption(f"{spent} · this launch: planning…", help=_help(ledger.delta))

    def add_launch() -> None:
        check = launch_check(mechanism, config, source)
        if isinstance(check, str):
            slot.caption(f"{spent} · {check}", help=_help(ledger.delta))
        else:  # spent: with the planned releases of the source's queued runs, as the launch is checked
            slot.caption(spent_text(source, check.spent.epsilon, check.budget) + adds_text(check),
                         help=_help(check.spent.delta))

    return add_launch


def _help(delta: float) -> str:
    return f"Every ε at δ = {delta:g}. {HELP}"
