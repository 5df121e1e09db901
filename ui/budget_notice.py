"""A launch refused by a data source's privacy budget, said where the viewer looks: under the Launch button that was
pressed (a mechanism page's run, a link launch, the Explore page's sweep, a sweep's Resume), never a traceback.

The launch paths raise :class:`privengine.ledger.BudgetExceeded` before anything is stored or trained; its
``check`` has the figures this notice states: the budget, what is spent, what the launch would add, and how to
raise the budget (the Ledger page, or the command)."""

from __future__ import annotations

import streamlit as st

from privengine.figures.text import number
from privengine.ledger import BudgetExceeded, LaunchCheck
from privengine.ledger.budget import raise_command

from .ledger_panel import ledger_url


def refusal_text(check: LaunchCheck) -> str:
    """The notice's Markdown: what was refused and why, in the figures of ``check`` (a check over its budget)."""
    budget, spent, after = check.budget, check.spent, check.after
    return (f"**Not launched: over the privacy budget of [{check.source}]({ledger_url(check.source)}).** "
            f"Budget ε = {budget.epsilon:g} at δ = {budget.delta:g}; spent ε = {number(spent.epsilon)} "
            f"({check.basis}). {check.launch.capitalize()} would add ε = {number(check.adds)} (ε = "
            f"{number(check.alone)} alone), ε = "
            f"{number(after.epsilon)} after it. Nothing was stored or trained. To go ahead, raise the budget to at "
            f"least ε = {check.needed:g}" + (f" at δ = {check.needed_delta:.3g}" if check.needed_delta > budget.delta
                                               else "") + " on the Ledger page, or:")


def show_refusal(exc: BudgetExceeded) -> None:
    """Draw the notice of a refused launch, with the command that raises the budget to what the launch needs."""
    check = exc.check
    st.error(refusal_text(check), icon=":material/block:")
    st.code(raise_command(check.source, f"{check.needed:g}", f"{check.needed_delta:.3g}"), language="bash")
