"""Budgets: a data source may have one, (ε, δ), and a launch that would take its ledger over it is refused before
anything trains.

Every setting or raise is a row of the store's ``budgets`` table with its time (:func:`set_budget`): the one in
force is the latest (:func:`budget_of`), the earlier ones its history, shown with the ledger. :func:`check_launch`
composes what a launch plans to release (its events: a sweep's whole plan at once) with the ledger at the budget's
δ, and returns what it would add, or raises :class:`BudgetExceeded` saying the budget, what is spent, what the
launch would add and how to raise the budget.

Every launch path goes through :func:`admitted` before it stores anything: the job manager and the Ray executor
around the runs they create (one run, a group), a sweep's launch or resume around its whole plan (every run x seed;
the runs it then submits are not checked again). It plans each run from its config alone (the mechanism's
``planned_claim``: :func:`planned_claim_of`, :func:`plan_configs`) before it takes the locks, then, inside them,
composes the plans with the ledgers of the sources with a budget and checks them (:func:`check_configs`,
:func:`check_claims`). What is spent counts the runs queued or starting, which released nothing yet, at their
planned releases too: two launches in a row cannot both fit in what is left. The check and the creation of the runs
are one step for every thread and every process sharing the store: a lock per process and store path (re-entrant,
for a sweep's runs), then the store's admission lock (:func:`privengine.store.admission_lock`, released by the OS if
its process dies), each waited for at most :data:`ADMISSION_WAIT_S` seconds before the launch is refused
(:class:`AdmissionBusy`).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

from .. import registry
from ..claims import PrivacyClaim
from ..config import BaseConfig
from ..errors import ConfigError, StoreError
from ..store import BudgetRecord, RunStore, admission_lock
from .composition import Total
from .ledger import Ledger, Release, ledger_delta, outlook, release_of, total_of
from .sources import NO_SOURCE, check_source, source_of

#: what the CLI command setting a budget looks like (``raise_command``)
BUDGET_COMMAND = "python -m privengine ledger budget {source} --epsilon {epsilon} --delta {delta}"
#: how long (s) a launch waits for the launches being admitted before it, in this process or another one sharing
#: the store, before it is refused (AdmissionBusy): far above a check's usual second or so
ADMISSION_WAIT_S = 60.0


def set_budget(store: RunStore, source: str, epsilon: float, delta: float, note: str = "") -> BudgetRecord:
    """Set (or raise, or lower) the budget of ``source`` to ``epsilon`` at ``delta``, recorded now with ``note``.
    ConfigError naming the field for an epsilon that is not a finite number > 0, a delta outside (0, 1), or a source
    no run reads and no mechanism names (:func:`.sources.check_source`)."""
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise ConfigError("epsilon", f"must be a finite number > 0; got {epsilon}")
    ledger_delta(None, delta)
    return store.add_budget(check_source(store, source), epsilon, delta, note)


def budget_of(store: RunStore, source: str) -> BudgetRecord | None:
    """The budget in force on ``source`` (its latest setting), or None if it has none."""
    history = store.budget_history(source)
    return history[-1] if history else None


def raise_command(source: str, epsilon: str | float = "E", delta: str | float = "D") -> str:
    """The command that sets ``source``'s budget (E, D: placeholders)."""
    return BUDGET_COMMAND.format(source=source, epsilon=epsilon, delta=delta)


@dataclass(frozen=True)
class LaunchCheck:
    """What a launch would do to a source's ledger, both at the ledger's δ: ``spent`` before it (the ledger, with
    the planned releases of its ``reserved`` runs that are queued or starting), ``after`` it, ``adds`` = after -
    spent (less than the launch's own ε ``alone`` when composition is tight), the budget in force (None: no budget,
    nothing is refused) and how many ``runs`` the launch plans."""

    source: str
    spent: Total
    after: Total
    alone: float
    budget: BudgetRecord | None
    reserved: int = 0
    runs: int = 1

    @property
    def adds(self) -> float:
        return self.after.epsilon - self.spent.epsilon

    @property
    def basis(self) -> str:
        """How ``spent`` was reached: its accountants, and the runs reserved."""
        basis = ", ".join(self.spent.accountants) or "nothing charged yet"
        return basis + (f"; with the planned releases of {self.reserved} queued or starting run(s)"
                        if self.reserved else "")

    @property
    def launch(self) -> str:
        """``this launch``, with its runs when it plans several."""
        return "this launch" + (f" ({self.runs} runs)" if self.runs > 1 else "")

    @property
    def needed(self) -> float:
        """The smallest budget ε that lets the launch go ahead, rounded up to 3 significant digits.

        >>> from privengine.ledger.composition import Total
        >>> LaunchCheck("s", Total(1, 1e-5, "", (), None, (), (0, 0)), Total(3.14159, 1e-5, "", (), None, (), (0, 0)),
        ...             2.0, None).needed
        3.15
        """
        epsilon = self.after.epsilon
        if not (math.isfinite(epsilon) and epsilon > 0):
            return epsilon
        scale = 10.0 ** (math.floor(math.log10(epsilon)) - 2)
        return float(f"{math.ceil(round(epsilon / scale, 9)) * scale:.3g}")

    @property
    def needed_delta(self) -> float:
        """The budget δ the launch needs: the budget's, or the ledger's δ after it where that is larger (every run
        charged by basic composition, whose δ add up)."""
        return max(self.budget.delta, self.after.delta) if self.budget is not None else self.after.delta

    @property
    def exceeds(self) -> bool:
        """Whether the launch takes the ledger over its budget (in ε, or in δ when every run is charged by basic
        composition, whose δ add up); a figure that is not a number (an event no accountant covers) exceeds it."""
        return self.budget is not None and not (self.after.epsilon <= self.budget.epsilon
                                                and self.after.delta <= self.budget.delta)

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "spent": self.spent.to_dict(), "after": self.after.to_dict(),
                "adds": self.adds, "alone": self.alone, "budget": None if self.budget is None else vars(self.budget),
                "reserved": self.reserved, "runs": self.runs}


class BudgetExceeded(ConfigError):
    """A launch would take a source's ledger over its budget; nothing was launched. The message names the budget,
    what is spent, what the launch would add and the command that raises the budget; ``check`` holds the figures."""

    def __init__(self, check: LaunchCheck):
        self.check = check
        budget, after = check.budget, check.after
        super().__init__("budget", (
            f"of {check.source} is ε = {budget.epsilon:g} at δ = {budget.delta:g}, and {check.launch} would exceed "
            f"it: spent ε = {check.spent.epsilon:.4g} ({check.basis}); it would add ε = {check.adds:.4g} (ε = "
            f"{check.alone:.4g} alone), ε = {after.epsilon:.4g} at δ = {after.delta:.3g} after it. Nothing was "
            f"launched. To go ahead, raise the budget to at least ε = {check.needed:g}"
            + (f" at δ = {check.needed_delta:.3g}" if check.needed_delta > budget.delta else "")
            + f": {raise_command(check.source, 'E', f'{check.needed_delta:.3g}')}"))


def check_launch(store: RunStore, source: str, planned_events: Iterable[dict[str, Any]], relation: str,
                 delta: float | None = None) -> LaunchCheck:
    """What a launch releasing ``planned_events`` (JSON events under ``relation``, a key of
    ``accounting.events.RELATIONS``: a run's or a whole sweep's planned release) would add to the ledger of
    ``source``, at the budget's δ (without a budget: ``delta``, else the ledger's default); raises
    :class:`BudgetExceeded` if that takes the ledger over the budget. Nothing is stored."""
    planned = tuple(planned_events)
    return _checked(store, source, [(planned, math.nan, math.nan, relation)] if planned else [], delta)


def check_claims(store: RunStore, source: str, claims: Sequence[PrivacyClaim], delta: float | None = None
                 ) -> LaunchCheck:
    """:func:`check_launch` for a launch of ``len(claims)`` runs, each charged its planned claim as the ledger
    charges a run's headline: its events, or its (ε, δ) by basic composition when it carries none."""
    return _checked(store, source, [release_of(c) for c in claims], delta, runs=len(claims))


def _checked(store: RunStore, source: str, launch: list[Release], delta: float | None, *, runs: int = 1
             ) -> LaunchCheck:
    """The check of ``launch`` against the ledger of ``source``: one query of the ledger (:func:`.ledger.outlook`)
    gives what is spent, with the planned releases of its pending runs, and what the launch makes of it."""
    budget = budget_of(store, source)
    seen = outlook(store, source, budget.delta if budget is not None else delta, launch,
                   lambda ledger: [release_of(c) for c in _reserved(ledger)])
    alone = total_of(launch, seen.ledger.delta).epsilon if launch else 0.0
    check = LaunchCheck(source, seen.spent, seen.after, alone, budget, seen.reserved, runs)
    if check.exceeds:
        raise BudgetExceeded(check)
    return check


def _reserved(ledger: Ledger) -> list[PrivacyClaim]:
    """The planned claims of the ledger's pending runs (queued, or started without a planned charge yet): what they
    will release. A run of a mechanism no longer registered, or whose plan cannot be made (it fails at its plan,
    before any output), reserves nothing."""
    claims = []
    for use in ledger.pending:
        try:
            claim = planned_claim_of(use.run.mechanism, use.run.config)
        except ConfigError:
            continue
        if claim is not None:
            claims.append(claim)
    return claims


def planned_claim_of(mechanism: str, config: BaseConfig | dict[str, Any]) -> PrivacyClaim | None:
    """The headline claim of the whole planned release of a run of ``mechanism`` with ``config`` (its
    ``planned_claim``; None if it plans none), kept per process for each config (a DP-SGD plan may calibrate sigma
    for seconds). ConfigError (field ``budget``) if the plan cannot be made: the run would fail on it too."""
    return _planned(mechanism, _config_key(config))


def _config_key(config: BaseConfig | dict[str, Any]) -> str:
    """One string per config (its values as JSON, keys sorted)."""
    return json.dumps(config.to_dict() if isinstance(config, BaseConfig) else config, sort_keys=True)


@functools.lru_cache(maxsize=512)
def _planned(mechanism: str, values: str) -> PrivacyClaim | None:
    try:
        return registry.get(mechanism).planned_of(json.loads(values))
    except ConfigError:
        raise
    except ValueError as exc:  # e.g. a noise calibration that no sigma satisfies
        raise ConfigError("budget", f"cannot be checked: the {mechanism} run's planned release cannot be "
                                    f"computed ({exc}), so the run would fail too; change its settings") from None


@dataclass(frozen=True)
class Planned:
    """One config of a launch, planned: the data source it reads and, when that source has a budget (``planned``),
    its planned claim (None: it plans none)."""

    source: str
    claim: PrivacyClaim | None
    planned: bool


def plan_configs(store: RunStore, mechanism: str, configs: Sequence[BaseConfig]) -> dict[str, Planned]:
    """Each config of a launch of ``mechanism`` (by its values, :func:`_config_key`), planned for
    :func:`check_configs`: what takes time (DP-SGD's sigma calibration), done before the admission locks are taken.
    Configs whose source has no budget are not planned (nothing to refuse, no time spent). ConfigError (field
    ``budget``) if a plan cannot be made."""
    plans: dict[str, Planned] = {}
    budgeted: dict[str, bool] = {}
    for config in configs:
        key = _config_key(config)
        if key in plans:
            continue
        source = source_of(store, mechanism, config)
        if source not in budgeted:
            budgeted[source] = source != NO_SOURCE and budget_of(store, source) is not None
        plans[key] = Planned(source, planned_claim_of(mechanism, config) if budgeted[source] else None,
                             budgeted[source])
    return plans


def check_configs(store: RunStore, mechanism: str, configs: Sequence[BaseConfig],
                  plans: dict[str, Planned] | None = None) -> list[LaunchCheck]:
    """Check a launch of runs of ``mechanism`` with ``configs`` (one run, a group, a sweep's every run x seed)
    against the budget of each data source they read that has one, their planned claims composed with its ledger
    (:func:`check_claims`); raises :class:`BudgetExceeded` for the first source whose budget it exceeds. ``plans``
    (:func:`plan_configs`, made earlier: default now) gives each config's source and planned claim; a config it
    lacks, or whose source had no budget then but has one now, is planned here."""
    plans = plan_configs(store, mechanism, configs) if plans is None else plans
    by_source: dict[str, list[tuple[BaseConfig, Planned | None]]] = {}
    for config in configs:
        plan = plans.get(_config_key(config))
        by_source.setdefault(plan.source if plan else source_of(store, mechanism, config), []).append((config, plan))
    checks = []
    for source, group in by_source.items():
        if source == NO_SOURCE or budget_of(store, source) is None:
            continue
        claims = [plan.claim if plan is not None and plan.planned else planned_claim_of(mechanism, config)
                  for config, plan in group]
        claims = [c for c in claims if c is not None]
        if claims:
            checks.append(check_claims(store, source, claims))
    return checks


class AdmissionBusy(ConfigError):
    """A launch waited :data:`ADMISSION_WAIT_S` seconds for other launches on the same store to be checked and
    stored, and one still was; nothing was launched. The message names the budgets of the sources it reads."""

    def __init__(self, store: RunStore, mechanism: str, configs: Sequence[BaseConfig]):
        sources = sorted({source_of(store, mechanism, config) for config in configs} - {NO_SOURCE})
        budgets = {source: budget_of(store, source) for source in sources}
        named = ", ".join(f"{source} (ε = {b.epsilon:g} at δ = {b.delta:g})" if b is not None
                          else f"{source} (no budget)" for source, b in budgets.items()) or "its data source"
        super().__init__("budget", (
            f"of {named} could not be checked: this launch waited {ADMISSION_WAIT_S:g} s while another launch on "
            f"the run store {store.path} was being checked against its budget and stored (launches are admitted one "
            f"at a time, so that two cannot both spend what is left). Nothing was launched; launch again once it "
            f"is stored."))


_LOCKS: dict[str, threading.RLock] = {}  # store path -> this process's admission lock of that store
_LOCKS_LOCK = threading.Lock()
_ADMITTING = threading.local()  # .stores: the paths of the stores this thread is admitting a launch on


def _process_lock(key: str) -> threading.RLock:
    """This process's admission lock of the store at path ``key`` (one per store path, resolved: launches on two
    stores never wait for each other, and two RunStore objects of one file share one)."""
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(key, threading.RLock())


@contextlib.contextmanager
def admitted(store: RunStore, mechanism: str,
             launch: Sequence[BaseConfig] | Callable[[], Sequence[BaseConfig]]) -> Iterator[list[LaunchCheck]]:
    """Check a launch of runs of ``mechanism`` (:func:`check_configs`) and hold the admission locks of ``store``
    while the caller stores its runs, so the next launch, in any thread or process sharing the store, sees them;
    yields the checks. ``launch``: the configs, or a function giving them, called before the locks (to plan them)
    and again inside (what is missing of a sweep, say, which another launch may have just stored): what it gives
    then is what is checked, and what the caller may store. Each config is planned before the locks are taken
    (:func:`plan_configs`: other launches do not wait for a sigma calibration); inside them the planned claims are
    only composed with the ledger and checked. Inside an admitted launch on the same store (a sweep's runs
    submitted under its whole plan's check, in the same thread) nothing is planned or checked again.
    BudgetExceeded, AdmissionBusy after :data:`ADMISSION_WAIT_S` seconds waiting for the locks, or a ConfigError
    naming ``budget`` when a plan cannot be made or the store's lock cannot be taken (all ConfigErrors), before
    the caller stores anything."""
    read = launch if callable(launch) else lambda: launch
    path = store.path.resolve()  # one lock file and one process lock per store, however its path was spelled
    key = str(path)
    active = getattr(_ADMITTING, "stores", set())
    if key in active:  # this thread holds the store's locks already
        read()  # what it gives now is what the caller stores
        yield []
        return
    planned = list(read())
    plans = plan_configs(store, mechanism, planned)
    deadline = time.monotonic() + ADMISSION_WAIT_S
    lock = _process_lock(key)
    with contextlib.ExitStack() as held:
        if not lock.acquire(timeout=ADMISSION_WAIT_S):
            raise AdmissionBusy(store, mechanism, planned)
        held.callback(lock.release)
        try:
            held.enter_context(admission_lock(path, deadline - time.monotonic()))
        except TimeoutError:
            raise AdmissionBusy(store, mechanism, planned) from None
        except StoreError as exc:  # e.g. a lock file this user cannot write: no launch without the lock
            raise ConfigError("budget", f"cannot be checked one launch at a time: {exc}") from None
        checks = check_configs(store, mechanism, list(read()), plans)
        _ADMITTING.stores = active | {key}
        held.callback(setattr, _ADMITTING, "stores", active)
        yield checks
