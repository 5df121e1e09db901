"""The membership-inference attack as a stored audit job (``dpsgd-membership``; PATE's ``pate-membership`` is
registered by :mod:`.membership_pate_job` on the pieces shared here): launched through the job manager,
progress while the reference models train, the ROC redrawn after each pass, stop, the result stored as the run's
summary (:class:`~.interface.AuditResult`, the attack's whole output under ``details["membership"]``).

Its knobs name the attacked DP-SGD run by id (``run``; empty: :data:`DEMO`, a recipe on the bundled digits, so the
audit also runs without a stored run, as the shared audit tests launch it); the attack itself is
:func:`.membership_dpsgd.attack_dpsgd`. The audited epsilon is the one-run bound of the attack's guesses (see that
module); the ROC figures beside it (AUC, TPR at FPR 0.001 / 0.01 with intervals, the (eps, delta) and PLD bounds
there, the non-private twin's) are :attr:`~.interface.AuditResult.values` and details. With ``stored_model`` the
attack is :func:`.membership_stored.attack_stored` on the run's kept model, whose game gives no audited epsilon
(None: :data:`~.interface.NO_BOUND`, never 0).

Sweeps: ``target_epsilon`` recalibrates the attacked recipe's sigma, so a sweep of this audit over it (one run,
several epsilons) charts epsilon against the leakage axes of :data:`MEMBERSHIP_FRONTIER` (attack AUC, TPR at 1 %
FPR), the attacked models' accuracy and the audited epsilon (its guesses are scored against the private split's
members). Those figures are computed on the private split: covered by no claim (``covered=False``), as every output
of the attack.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..config import DEVICE_CHOICES, BaseConfig, knob
from ..errors import ConfigError, RunNotFoundError
from ..entries import TEST_ACCURACY, Axis, Frontier
from .interface import NO_BOUND, AuditResult, NullReporter, audit_entry, result_of
from .membership import ATTACKS, NOT_COVERED, TRADEOFF_BOUNDS, applied_twice, below_resolution
from .membership_result import MembershipResult

if TYPE_CHECKING:
    from ..dpsgd.config import DPSGDConfig
    from .membership_stored import StoredTarget
    from ..store import RunStore

__all__ = ["AUDIT_OF_MECHANISM", "DEMO", "DPSGD_MEMBERSHIP_AUDIT", "MEMBERSHIP", "MEMBERSHIP_FRONTIER",
           "PATE_MEMBERSHIP", "MembershipAuditConfig", "MembershipKnobs", "attack_options", "attack_result", "measured",
           "measured_output", "run", "setting_rows", "stored_attacks",
           "stored_recipe", "target_config", "values_of"]

MEMBERSHIP = "dpsgd-membership"
PATE_MEMBERSHIP = "pate-membership"  # registered by .membership_pate_job
AUDIT_OF_MECHANISM = {"dpsgd": MEMBERSHIP, "pate": PATE_MEMBERSHIP}  # the membership audit of a mechanism's runs
# the attacked recipe when no run is named: 285 private digits, an MLP that overfits them without noise, eps 1
DEMO = dict(dataset="digits", model="mlp", train_limit=300, batch_size=32, epochs=30.0, lr=0.5, max_grad_norm=1.0,
            noise_mode="target_epsilon", target_epsilon=1.0, delta=1e-5, accountant="rdp", alphas=(0.0,),
            n_seeds=1)
CLAIM = ("DP-SGD's guarantee for the attacked model: (eps, delta)-DP for adding or removing one example "
         "(Poisson-subsampled, clipped, Gaussian noise), from the run's accountant on the model's history; every "
         "membership test then has TPR <= min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))")
UNCOVERED = " (covered by no claim: computed on the private split)"
MEMBERSHIP_FRONTIER = Frontier(
    privacy=Axis("claimed_epsilon", "ε of the attacked model (its accountant)", "lower"),
    utility=(Axis("attack_tpr_at_1pct_fpr", "membership attack: TPR at 1 % FPR" + UNCOVERED, "lower", covered=False),
             Axis("attack_auc", "membership attack: AUC" + UNCOVERED, "lower", covered=False),
             Axis("target_test_accuracy", "test accuracy of the attacked model (a recipe: retrained on about half "
                                          "the private split; a stored model: the kept model on the run's test "
                                          "part)" + UNCOVERED, "higher", kind=TEST_ACCURACY, covered=False),
             Axis("audited_epsilon_lower", "audited ε ≥ (one-run bound of the attack's guesses)" + UNCOVERED,
                  "higher", covered=False)))


@dataclass(frozen=True)
class MembershipKnobs(BaseConfig):
    """Knobs of a membership attack on a run's recipe, whatever its mechanism."""

    run: str = knob("", label="attacked run",
                    help="Id of a stored run of this mechanism whose recipe is attacked (retrained on halves of its "
                         "private split); empty: a demonstration recipe on the bundled digits.")
    attack: str = knob("lira", choices=ATTACKS,
                       help="lira: Carlini et al. 2022; rmia: Zarifzadeh et al. 2024; loss: Yeom et al. 2018 (no "
                            "reference model).")
    offline: bool = knob(False, help="LiRA / RMIA from the reference models trained without each example only.")
    reference_models: int = knob(16, low=2, high=1024, log=True,
                                 help="R, even: each pool example is in half of them.")
    models_per_pass: int = knob(8, low=0, high=1024, advanced=True,
                                help="Models trained together in one batch (0: all at once); the ROC is redrawn "
                                     "after each pass.")
    guesses: int = knob(100, low=2, high=1_000_000, log=True,
                        help="r: 'in' for the r/2 highest scores, 'out' for the r/2 lowest (the audited ε).")
    confidence: float = knob(0.95, low=0.5, high=1.0, high_open=True,
                             help="Confidence of the intervals and of the audited ε.")
    twin: bool = knob(True, label="non-private twin",
                      help="Also attack the same models trained without privacy (DP-SGD: no clipping or noise; "
                           "PATE: its non-private baseline).")
    seed: int = knob(0, low=0, high=2**31 - 1, help="Seed of the halves and of the attack's models.")
    device: str = knob("auto", choices=DEVICE_CHOICES, help="Where the attack's models train.")

    def check_rules(self) -> None:
        if self.reference_models % 2:  # the loss attack needs none, but the halves are drawn in pairs all the same
            raise ConfigError("reference_models", f"must be even; got {self.reference_models}")

    def target(self, store: "RunStore | None") -> BaseConfig:
        """The attacked recipe; ConfigError (field ``run``) when it cannot be attacked (each mechanism's knobs)."""
        raise NotImplementedError


@dataclass(frozen=True)
class MembershipAuditConfig(MembershipKnobs):
    """Knobs of the membership attack on a DP-SGD run's recipe."""

    target_epsilon: float = knob(0.0, low=0.0, high=100.0, label="attacked ε",
                                 help="0: the run's own recipe (a target-ε run's sigma is recalibrated for the "
                                      "attacked model's half of the data); above 0: sigma calibrated so that the "
                                      "attacked model has this ε (sweep it to chart leakage against ε).")

    stored_model: bool = knob(False, label="attack the stored model",
                              help="Attack the run's kept final model itself (runs on digits or a user data set): "
                                   "members are its private training rows, non-members the held-out rows it never "
                                   "trained on; the reference models retrain its recipe on halves of those rows.")

    def check_rules(self) -> None:
        super().check_rules()
        if not self.stored_model:
            return
        if not self.run:
            raise ConfigError("run", "must name a finished run that kept its model to attack the stored model")
        if self.target_epsilon > 0:
            raise ConfigError("target_epsilon", f"must be 0 when the stored model is attacked (it was trained at the "
                                                f"run's own noise); got {self.target_epsilon:g}")
        if self.attack == "rmia":
            raise ConfigError("attack", "must be lira or loss when the stored model is attacked: RMIA needs a "
                                        "population no model trained on, and every held-out row is in half the "
                                        "reference models")

    def target(self, store: "RunStore | None") -> "DPSGDConfig":
        if self.stored_model:
            return stored_model_target(self, store).recipe
        return target_config(self, store)


def stored_recipe(config: MembershipKnobs, store: "RunStore | None", mechanism: str) -> dict[str, Any]:
    """The config dict of the attacked run ``config.run``; ConfigError (field ``run``) for an unknown or active run
    or one of another mechanism."""
    if store is None:
        raise ConfigError("run", "needs the run store to read the attacked run")
    try:
        record = store.get_run(config.run)
    except RunNotFoundError:
        raise ConfigError("run", f"must be the id of a stored run; {config.run!r} is not in the store") from None
    if record.mechanism != mechanism:
        raise ConfigError("run", f"is a {record.mechanism} run; this attack retrains {mechanism} runs (membership "
                                 f"attacks cover {', '.join(AUDIT_OF_MECHANISM)} runs)")
    if record.active:
        raise ConfigError("run", f"is still {record.state}; attack it once it has ended")
    return record.config


def target_config(config: MembershipAuditConfig, store: "RunStore | None") -> "DPSGDConfig":
    """The attacked recipe: run ``config.run``'s config (sigma recalibrated to ``target_epsilon`` when it is set),
    or :data:`DEMO`. ConfigError (field ``run``) for an unknown, active or non-DP-SGD run or one the model batch
    cannot retrain."""
    from ..dpsgd.config import DPSGDConfig
    from .membership_dpsgd import check_target

    recipe = DPSGDConfig.from_dict(stored_recipe(config, store, "dpsgd")) if config.run else DPSGDConfig().replace(
        **DEMO)
    if config.target_epsilon > 0:
        recipe = recipe.replace(noise_mode="target_epsilon", target_epsilon=config.target_epsilon)
    check_target(recipe)
    return recipe


def stored_model_target(config: MembershipAuditConfig, store: "RunStore | None") -> "StoredTarget":
    """The kept model of run ``config.run`` that a ``stored_model`` attack scores
    (:func:`.membership_stored.stored_target`, which makes the recipe attack's checks too); ConfigError (field
    ``run``) when it cannot be attacked. The job calls it as the command line and the page do."""
    from ..dpsgd.config import DPSGDConfig
    from .membership_stored import stored_target

    recipe = DPSGDConfig.from_dict(stored_recipe(config, store, "dpsgd"))
    return stored_target(config.run, recipe, store)


def stored_attacks(store: "RunStore", run_id: str, *, audit: str = MEMBERSHIP, limit: int = 200) -> list:
    """The stored attacks (audit ``audit``) of run ``run_id`` at its own noise (no ``target_epsilon`` or
    ``noise_scale`` override: a sweep's attacks at other noise are not attacks of the run as it ran), newest first,
    among the ``limit`` newest attacks."""
    return [r for r in store.list_runs(mechanism=audit, limit=limit)
            if r.config.get("run") == run_id and not r.config.get("target_epsilon")
            and r.config.get("noise_scale", 1.0) == 1.0]


def measured(out: Mapping[str, Any] | None) -> bool:
    """Whether an attack's output (whole or after a pass) holds a ROC: the target and a pair of references were
    trained."""
    return bool(out) and "auc" in out


def measured_output(summary: Mapping[str, Any] | None) -> dict | None:
    """The attack's output stored in an attack run's summary, when it measured a ROC (else None)."""
    result = result_of(summary)
    out = None if result is None else result.details.get("membership")
    return out if measured(out) else None


def values_of(out: dict) -> dict[str, float]:
    """The summary numbers of an attack's output that sweeps chart (absent while unmeasured)."""
    values = {"attack_auc": out.get("auc"), "attack_tpr_at_1pct_fpr": out.get("tpr_at_fpr", {}).get("0.01"),
              "attack_tpr_at_0.1pct_fpr": out.get("tpr_at_fpr", {}).get("0.001"),
              "target_test_accuracy": out.get("target", {}).get("test_accuracy"),
              "twin_auc": out.get("non_private_twin", {}).get("auc")}
    return {k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and math.isfinite(v)}


def _interval(values: dict, key: str) -> str | None:
    lo_hi = values.get(key)
    return None if lo_hi is None else f"[{lo_hi[0]:.4f}, {lo_hi[1]:.4f}]"


def _row(setting: str, part: dict, *, claimed: float | None, out: dict) -> dict[str, Any]:
    """One row of the audited-settings table: the ROC figures of ``part`` (the target's output or the twin's, on the
    same pool); at a level below the pool's resolution (no TPR there) the interval column says so; no audited ε
    (None) where the game has no one-run bound; the bound columns' names say where the bounds are applied twice
    (:func:`.membership.applied_twice`)."""
    row: dict[str, Any] = {"setting": setting, "claimed_epsilon": claimed,
                           "epsilon_lower": part.get("one_run", {}).get("epsilon_lower"),
                           "test_accuracy": part.get("test_accuracy", out.get("target", {}).get("test_accuracy")),
                           "auc": part.get("auc")}
    for key, pct in (("0.001", "0.1 %"), ("0.01", "1 %")):
        row[f"TPR at {pct} FPR"] = part.get("tpr_at_fpr", {}).get(key)
        row[f"interval at {pct}"] = (below_resolution(key, out["non_members"])
                                     or _interval(part.get("tpr_interval_at_fpr", {}), key))
        row[f"(ε, δ) bound at {pct}{applied_twice(out)}"] = out.get("bound_at_fpr", {}).get(key)
        for prefix in TRADEOFF_BOUNDS:  # the tighter bound the output carries (DP-SGD: PLD; PATE: RDP), if any
            if f"{prefix}_bound_at_fpr" in out:
                row[f"{prefix.upper()} bound at {pct}{applied_twice(out)}"] = out[f"{prefix}_bound_at_fpr"][key]
    return row


def setting_rows(out: dict, config: MembershipKnobs) -> list[dict[str, Any]]:
    """The audited settings of an attack's output: the attacked model, then its non-private twin (once measured)."""
    if not measured(out):
        return []
    target = {**out, "test_accuracy": out.get("target", {}).get("test_accuracy")}
    rows = [_row(f"{out.get('attacked', 'DP-SGD model')} ({config.attack})", target, claimed=out.get("epsilon"),
                 out=out)]
    if "non_private_twin" in out:
        rows.append(_row(f"{out.get('twin_name', 'non-private twin')} (no claim)", out["non_private_twin"],
                         claimed=None, out=out))
    return rows


def _report(reporter, out: dict) -> None:
    """A pass is done: its figures as points of the curves (x: reference models so far) and the output so far as
    the ``membership`` artifact the page draws the ROC from."""
    twin = out.get("non_private_twin", {})
    step = twin.get("reference_models_so_far", 0) + out.get("reference_models_so_far", 0)
    audited = {"audited_epsilon_lower": out["one_run"]["epsilon_lower"]} if "one_run" in out else {}
    reporter.metric(step, claimed_epsilon=out["epsilon"], **audited, **values_of(out))
    reporter.artifact("membership", out)


ROC_NOTE = ("The ROC's Clopper-Pearson intervals treat the examples as independent trials; they share one target "
            "model, so they are the usual reading of membership-inference papers, not a proof.")


def attack_result(config: MembershipKnobs, result: MembershipResult, *, audit: str, mechanism: str, claim: str,
                  claimed: float, delta: float, notes: list[str], target: str | None = None) -> AuditResult:
    """The stored result of an attack's ``result`` (its driver's): the audited epsilon is its one-run bound (None
    where the game has none: :data:`~.interface.NO_BOUND`, never a measured 0), ``notes`` (what the target is, why
    the bound is sound) follow the not-covered caveat, the ROC note and a stop's note come after them; the attack's
    whole output is ``details["membership"]`` (``result.to_dict()``). ``target``: what was attacked, in the method
    (default: the recipe of the run)."""
    out = result.to_dict()
    one_run = out.get("one_run")
    notes = [NOT_COVERED, *notes, ROC_NOTE]
    if out.get("stopped"):
        notes.append("Stopped early: the figures cover the models trained before the stop" if measured(out) else
                     "Stopped before the target and a pair of reference models were trained: nothing measured.")
    refs = out.get("reference_models_so_far", 0)
    mode = "offline" if config.offline else "online"
    return AuditResult(
        audit=audit, mechanism=mechanism,
        method=(f"membership inference, {config.attack} {mode} with {refs} reference models, on "
                f"{target or 'the recipe of run ' + (config.run or 'demo (digits)')}; "
                + (f"one-run bound of {one_run['guesses']} guesses" if one_run else
                   f"{NO_BOUND} (the members are not independent fair coins)")),
        claim=claim, claimed_epsilon=float(claimed),
        epsilon_lower=float(one_run["epsilon_lower"]) if one_run else None,
        confidence=config.confidence, delta=delta,
        counts={"members": out.get("members", 0), "non_members": out.get("non_members", 0),
                "reference_models": refs,
                **({"guesses": one_run["guesses"], "correct": one_run["correct"]} if one_run else {})},
        notes=tuple(notes), details={"settings": setting_rows(out, config), "membership": out},
        values=values_of(out))


def attack_options(config: MembershipKnobs, reporter) -> dict[str, Any]:
    """The keyword arguments every attack driver takes from the knobs and the job's reporter."""
    return dict(attack=config.attack, reference_models=config.reference_models, seed=config.seed,
                offline=config.offline, twin=config.twin, device=getattr(reporter, "device", None), log=reporter.log,
                guesses=config.guesses, confidence=config.confidence, models_per_pass=config.models_per_pass,
                reporter=reporter, on_partial=lambda partial: _report(reporter, partial))


def run(config: MembershipAuditConfig, reporter=None) -> AuditResult:
    """The job: attack the recipe of ``config.run`` (see the module docstring)."""
    from .membership_dpsgd import attack_dpsgd

    reporter = reporter or NullReporter()
    if config.stored_model:
        return _run_stored(config, reporter)
    recipe = target_config(config, getattr(reporter, "store", None))
    result = attack_dpsgd(recipe, **attack_options(config, reporter))
    # the trained target's claim; before it: its planned history's; stopped while calibrating sigma: the target
    claimed = result.claimed_epsilon(recipe.target_epsilon)
    notes = ["The target is the run's recipe retrained (runs keep no weights) on a random subset of its private "
             f"split, each example in with probability 1/2, at q = B / floor(n / 2); {claimed:.4g} is that model's "
             "own epsilon (its accountant history).",
             "The audited ε is the one-run bound (Steinke, Nasr & Jagielski 2023) of the attack's guesses: 'in' for "
             "the highest scores, 'out' for the lowest, the whole pool as canaries; sound because the members are "
             "independent fair coins and the reference models independent of them."]
    return attack_result(config, result, audit=MEMBERSHIP, mechanism="dpsgd", claimed=claimed, delta=recipe.delta,
                         claim=CLAIM + f" ({recipe.accountant}, δ = {recipe.delta:g})", notes=notes)


def _run_stored(config: MembershipAuditConfig, reporter) -> AuditResult:
    """The job of a ``stored_model`` attack: the kept model of ``config.run`` (:mod:`.membership_stored`), refused
    (ConfigError naming ``run``) as :meth:`MembershipAuditConfig.target` refuses it."""
    from .membership_stored import MEANING, REPLACE_ONE, attack_stored

    target = stored_model_target(config, getattr(reporter, "store", None))
    result = attack_stored(target, **attack_options(config, reporter))
    recipe = target.recipe
    claimed = result.claimed_epsilon(0.0)
    dropped = (result.target or {}).get("duplicates_dropped", 0)
    notes = [f"The target is the run's stored model {target.name}, as it was kept: its members are the run's private "
             "training rows, its non-members the held-out rows the run never trained on, both reloaded from the "
             f"run's config; {claimed:.4g} is that model's own epsilon (its accountant history, as the run stored "
             "it).",
             f"Neighbouring relation of the game: {result.neighbouring}.",
             *([f"{dropped} rows left out of the pool: their content occurs more than once among the private and "
                "held-out rows, and such rows share one coin (a group, outside the one-row bound)."]
               if result.neighbouring != REPLACE_ONE else []),
             MEANING,
             f"{NO_BOUND}: the members are the run's own split, not independent fair coins, so no one-run lower "
             "bound on ε is computed."]
    twice = ("; this game replaces one example (a remove, then an add), so its bound is that bound applied twice "
             "(group of 2): TPR <= b(b(FPR)), b(FPR) the bound above" if result.neighbouring == REPLACE_ONE else "")
    return attack_result(config, result, audit=MEMBERSHIP, mechanism="dpsgd", claimed=claimed, delta=recipe.delta,
                         claim=CLAIM + f" ({recipe.accountant}, δ = {recipe.delta:g})" + twice, notes=notes,
                         target=f"the stored model {target.name} of run {config.run}")


DPSGD_MEMBERSHIP_AUDIT = audit_entry(
    name=MEMBERSHIP, mechanism="dpsgd", title="DP-SGD: membership inference on a run's recipe or stored model",
    config_cls=MembershipAuditConfig, audit=run, claim=CLAIM, frontier=MEMBERSHIP_FRONTIER,
    description=("Retrains a DP-SGD run's recipe on a random half of its private split, with reference models on "
                 "other halves and a non-private twin, attacks it with LiRA, RMIA or the loss attack, and draws the "
                 "ROC (TPR against FPR, log-log) under the bounds its claim implies: (ε, δ) and the tighter PLD "
                 "trade-off of its history; or attacks the model a run kept, its private rows against its held-out "
                 "ones (stored model). Covered by no claim itself."),
    smoke={"reference_models": 2, "models_per_pass": 2, "guesses": 40})
