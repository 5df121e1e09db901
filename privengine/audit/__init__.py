"""Empirical privacy audits: a lower bound on epsilon beside every claimed upper bound.

- :mod:`.bounds`: epsilon lower bounds from test outcomes: many runs (threshold test,
  Clopper-Pearson, with a Gaussian-DP variant) and one run (Steinke, Nasr, Jagielski 2023).
- :mod:`.procedures`: scores -> counts: event/threshold tests with sound event selection,
  one-run guesses.
- :mod:`.reference`: exact privacy curves (Gaussian, Laplace, randomized response, any pair of
  discrete laws), the truth the audits are tested against.
- :mod:`.interface`: :class:`AuditResult` (one interface for every mechanism) and
  :func:`audit_entry`, which makes an audit an entry of the mechanism registry, run as a job
  and stored like any run; :mod:`.pate_gnmax`, :mod:`.dpsgd_one_run` and :mod:`.dp_bayes_release` (with its
  neighbouring data sets in :mod:`.dp_bayes_neighbours`) are the audits so far; :mod:`.cli` the ``audit`` command.
- :mod:`.membership`: membership-inference attacks (LiRA, RMIA, loss) and the bound a DP claim puts on their
  TPR at each FPR; :mod:`.membership_dpsgd` trains a DP-SGD recipe's target and reference models for them
  (``audit membership --run RUN_ID``).

The names below are loaded on first use, so the CLI starts without importing ``scipy.stats``.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    ".bounds": ("clopper_pearson_lower", "clopper_pearson_upper", "epsilon_from_rates", "many_run_epsilon_lower",
                "many_run_mu_lower", "mu_from_rates", "one_run_epsilon_lower", "one_run_p_value"),
    ".interface": ("AuditResult", "NO_BOUND", "NullReporter", "audit_entry", "result_of"),
    ".procedures": ("EventTest", "OneRunTest", "best_event_test", "event_test", "one_run_guesses", "one_run_test",
                    "threshold_test"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
