"""The result of a membership attack on a recipe, one type for both drivers: DP-SGD's
(:func:`.membership_dpsgd.attack_dpsgd`) and PATE's (:func:`.membership_pate.attack_pate`).

A driver creates it with the game it plays and fills it as its models train: the claim of the attacked model, the
trade-off bound of that claim, the ROC summary of the chosen attack (:func:`.membership.roc_summary` with the bound
checks and the one-run guesses), the non-private twin's and every attack's. :meth:`MembershipResult.to_dict` is the
JSON object jobs store under the audit's ``details["membership"]``, pages draw and the CLI prints, with the keys the
drivers' dicts had; :meth:`MembershipResult.from_dict` reads a stored one back.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .membership import NOT_COVERED, TRADEOFF_BOUNDS, every_attack, warn_if_above

# the parts of a summary kept for the non-private twin (it has no claim, hence no trade-off bound check)
TWIN_KEYS = ("auc", "tpr_at_fpr", "tpr_interval_at_fpr", "fpr_at_fpr", "fpr_interval_at_fpr", "exceeds_bound", "roc",
             "one_run", "reference_models_so_far")


@dataclass
class MembershipResult:
    """What a membership attack found so far.

    The game: ``attack`` (``offline`` or online), the claim's ``delta``, the ``seed`` of the halves and models,
    ``reference_models`` trained beside the target, the ``pool`` of examples under attack (PATE: ``pairs`` of them,
    the ``attacked`` model, its ``twin_name`` and the ``neighbouring`` relation of its claim); ``privacy``: the
    result is covered by no claim. The attacked model: its claim's ``accountant``, ``planned_epsilon`` (before it
    trains) and ``epsilon``, and ``target`` (the driver's description of it). ``bounds``: the claim's trade-off
    bound (:func:`.membership.tradeoff_fields`: ``{prefix}_bound_at_fpr``, ``{prefix}_bound_curve``). ``summary``:
    the chosen attack's ROC summary on the models trained so far (empty until the target and a pair of references
    are). ``non_private_twin`` (:data:`TWIN_KEYS` of the twin's summary and its test accuracy), ``all_attacks``
    (:func:`.membership.every_attack`), ``stopped``, and the ``seconds`` it took so far. A field that is None (or
    empty) has no key in :meth:`to_dict`.
    """

    attack: str
    offline: bool
    delta: float
    seed: int
    privacy: str = NOT_COVERED
    attacked: str | None = None
    twin_name: str | None = None
    neighbouring: str | None = None
    reference_models: int | None = None
    pool: int | None = None
    pairs: int | None = None
    accountant: str | None = None
    planned_epsilon: float | None = None
    epsilon: float | None = None
    target: dict[str, Any] | None = None
    bounds: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    non_private_twin: dict[str, Any] | None = None
    all_attacks: dict[str, Any] | None = None
    stopped: bool = False
    seconds: float | None = None

    @property
    def measured(self) -> bool:
        """Whether it holds a ROC: the target and a pair of references were trained."""
        return "auc" in self.summary

    def claimed_epsilon(self, default: float) -> float:
        """The attacked model's claim: the trained target's, before it the planned one, else ``default`` (a stop
        came before either was known)."""
        return next((e for e in (self.epsilon, self.planned_epsilon) if e is not None), default)

    def measure_twin(self, summary: dict[str, Any], test_accuracy: float | None) -> None:
        """The non-private twin's figures, from its ROC summary and its test accuracy."""
        self.non_private_twin = {k: summary[k] for k in TWIN_KEYS} | {"test_accuracy": test_accuracy}

    def compare_attacks(self, summary_of: Callable[[str], dict]) -> None:
        """``all_attacks``: every attack on the same models (``summary_of(name)``: its summary), for comparison."""
        self.all_attacks = every_attack(self.to_dict(), summary_of)

    def clock(self, started: float) -> MembershipResult:
        """Record the seconds since ``started`` (``time.perf_counter``); returns itself."""
        self.seconds = round(time.perf_counter() - started, 2)
        return self

    def finish(self, started: float, reporter, log: Callable[[str], None], attacked: str) -> MembershipResult:
        """The attack is over: its seconds, the reporter's progress at the end, and a warning in the log when an
        attack on the ``attacked`` model is above a bound of its claim; returns itself."""
        self.clock(started)
        reporter.progress(1.0, "stopped" if self.stopped else "done")
        warn_if_above(self.to_dict(), log, attacked)
        return self

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready object: every field that is set, with ``bounds`` and ``summary`` spread at the top level."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in ("bounds", "summary"):
                out.update(value)
            elif value is not None:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, out: dict[str, Any]) -> MembershipResult:
        """The result :meth:`to_dict` gave ``out`` (a stored one: its keys are the fields', the trade-off bound's and
        the summary's; any other key is kept in the summary)."""
        names = {f.name for f in dataclasses.fields(cls)} - {"bounds", "summary"}
        bound_keys = {f"{p}_bound_{part}" for p in TRADEOFF_BOUNDS for part in ("at_fpr", "curve")}
        return cls(**{k: v for k, v in out.items() if k in names},
                   bounds={k: v for k, v in out.items() if k in bound_keys},
                   summary={k: v for k, v in out.items() if k not in names and k not in bound_keys})
