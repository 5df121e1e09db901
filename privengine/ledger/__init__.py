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

from .budget import BudgetExceeded, LaunchCheck, budget_of, check_launch, set_budget
from .ledger import DEFAULT_DELTA, Ledger, ledger_of
from .sources import backfill, known_sources, source_of

__all__ = ["DEFAULT_DELTA", "BudgetExceeded", "LaunchCheck", "Ledger", "backfill", "budget_of", "check_launch",
           "known_sources", "ledger_of", "set_budget", "source_of"]
