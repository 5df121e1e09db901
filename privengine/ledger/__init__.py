"""The privacy ledger: one per private data source, every release charged to it and composed tightly, with a budget.

- :mod:`.sources`: the data source a run reads (what the user chose: ``mnist/train``, ``linreg/seed=0``), the
  back-fill of runs stored before sources were, the keys a user may name;
- :mod:`.charges`: what each run on a source is charged (its headline claim, an active run's planned charge) and
  the uses no claim covers (audits, runs that state no claim);
- :mod:`.composition`: the tight composition (PLD, else RDP; basic composition for claims without events; group
  privacy between add/remove and replace-one), kept incrementally;
- :mod:`.ledger`: :func:`ledger_of`, a source's :class:`Ledger` (total, each run's share, uncovered uses, the
  ledger over time), cached per process;
- :mod:`.budget`: budgets (every setting recorded) and :func:`check_launch`, which refuses a launch that would
  exceed one (:class:`BudgetExceeded`);
- :mod:`.cli`: ``python -m privengine ledger [SOURCE] [--json]`` and ``ledger budget SOURCE --epsilon E --delta D``.
"""

# The names below are loaded on first use (PEP 562), so that importing one light submodule (``.cli``'s parser,
# ``.sources``) does not import dp-accounting, torch and Opacus through ``.budget`` and ``.ledger``.
_EXPORTS = {"BudgetExceeded": "budget", "LaunchCheck": "budget", "budget_of": "budget", "check_launch": "budget",
            "set_budget": "budget", "DEFAULT_DELTA": "ledger", "Ledger": "ledger", "ledger_of": "ledger",
            "backfill": "sources", "known_sources": "sources", "source_of": "sources"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
