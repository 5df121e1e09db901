"""The membership attack on a PATE run's recipe as a stored audit job (``pate-membership``): the pieces of
:mod:`.membership_job` (knobs, result, live figures, sweep axes) around :func:`.membership_pate.attack_pate`.

Its knobs name the attacked PATE run by id (``run``; empty: :data:`DEMO`, a recipe on the bundled digits, so the
audit also runs without a stored run). ``noise_scale`` multiplies the aggregator's noise (LNMax's ``1 / gamma``,
GNMax's ``sigma``, Confident-GNMax's ``sigma1`` and ``sigma2``), so a sweep of this audit over it charts the
student's epsilon against the leakage axes of :data:`.membership_job.MEMBERSHIP_FRONTIER`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import knob
from ..errors import ConfigError
from .interface import AuditResult, NullReporter, audit_entry
from .membership_job import (MEMBERSHIP_FRONTIER, PATE_MEMBERSHIP, MembershipKnobs, attack_options, attack_result,
                             stored_recipe)

if TYPE_CHECKING:
    from ..pate.config import PateConfig
    from ..store import RunStore

__all__ = ["CLAIM", "DEMO", "PateMembershipConfig", "run", "target_config"]

# the attacked recipe when no run is named: 10 MLP teachers on 64 digits each, GNMax on 100 queries, a supervised
# student, a baseline trained long enough to overfit its 648 examples
DEMO = dict(dataset="digits", teachers=10, architecture="mlp", aggregator="gnmax", sigma=4.0, queries=100,
            teacher_epochs=20, student_epochs=30, baseline_epochs=40, sanitize=False)
CLAIM = ("PATE's guarantee for the attacked student: (eps, delta)-DP for private sets of one size that differ in one "
         "example (replace one), the data-independent (a priori) RDP bound of the aggregator on every submitted "
         "query; every test of which example of a pair was trained on then has TPR <= min(e^eps FPR + delta, "
         "1 - e^-eps (1 - delta - FPR))")


@dataclass(frozen=True)
class PateMembershipConfig(MembershipKnobs):
    """Knobs of the membership attack on a PATE run's recipe."""

    noise_scale: float = knob(1.0, low=0.0, high=100.0, low_open=True, log=True, label="noise ×",
                              help="Multiplies the aggregator's noise (GNMax sigma, Confident-GNMax sigma1 and "
                                   "sigma2, LNMax 1/gamma); 1: the run's own (sweep it to chart leakage against ε).")

    def target(self, store: "RunStore | None") -> "PateConfig":
        return target_config(self, store)


def target_config(config: PateMembershipConfig, store: "RunStore | None") -> "PateConfig":
    """The attacked recipe: run ``config.run``'s config (its noise scaled by ``noise_scale``), or :data:`DEMO`.
    ConfigError (field ``run``) for an unknown, active or non-PATE run or one with too many teachers for half its
    data."""
    from ..pate.config import PateConfig
    from .membership_pate import check_target

    recipe = PateConfig.from_dict(stored_recipe(config, store, "pate")) if config.run else PateConfig().replace(
        **DEMO)
    s = config.noise_scale
    if s != 1.0:
        try:
            recipe = recipe.replace(gamma=recipe.gamma / s, sigma=recipe.sigma * s, sigma1=recipe.sigma1 * s,
                                    sigma2=recipe.sigma2 * s)
        except ConfigError as exc:  # a scaled noise out of its knob's range: say which knob scaled it
            raise ConfigError("noise_scale", f"= {s:g} takes the run's aggregator noise out of range: {exc}") from None
    check_target(recipe)
    return recipe


def run(config: PateMembershipConfig, reporter=None) -> AuditResult:
    """The job: attack the recipe of ``config.run`` (see :mod:`.membership_pate`)."""
    from .membership_pate import attack_pate

    reporter = reporter or NullReporter()
    recipe = target_config(config, getattr(reporter, "store", None))
    result = attack_pate(recipe, **attack_options(config, reporter))
    # the trained target's claim; before it: the a-priori one of its planned queries (the same: it reads no vote)
    claimed = result.claimed_epsilon(float("nan"))
    notes = ["The target is the run's student retrained (runs keep no weights) with its teachers on one example of "
             f"each of {result.pairs or 0} random pairs of its private split (an independent fair coin per pair), "
             f"so every model trains on sets of one size, as PATE's replace-one claim needs; {claimed:.4g} is the "
             "a-priori epsilon of that student's queries (its sanitized figure, if the run published one, is not "
             "part of what the student saw).",
             "The audited ε is the one-run bound (Steinke, Nasr & Jagielski 2023) with the pairs as canaries: 'first "
             "of the pair in' for the highest score differences, 'second in' for the lowest; sound because the coins "
             "are independent and flipping one is a replace-one neighbour, and the reference models are "
             "independent of them."]
    return attack_result(config, result, audit=PATE_MEMBERSHIP, mechanism="pate",
                         claim=CLAIM + f" (δ = {recipe.delta:g})", claimed=claimed, delta=recipe.delta, notes=notes)


PATE_MEMBERSHIP_AUDIT = audit_entry(
    name=PATE_MEMBERSHIP, mechanism="pate", title="PATE: membership inference on a run's student",
    config_cls=PateMembershipConfig, audit=run, claim=CLAIM, frontier=MEMBERSHIP_FRONTIER,
    description=("Retrains a PATE run's teachers and student on one example of each random pair of its private "
                 "split, with reference pipelines on the other choices and PATE's non-private baseline as the twin, "
                 "attacks the student with LiRA, RMIA or the loss attack, and draws the ROC (TPR against FPR, "
                 "log-log) under the bounds of its a-priori claim: (ε, δ) and the tighter RDP trade-off of the "
                 "same RDP curve (GNMax, Confident-GNMax). Covered by no claim itself."),
    smoke={"reference_models": 2, "models_per_pass": 0, "guesses": 40})
