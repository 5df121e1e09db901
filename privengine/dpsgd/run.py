"""``run(config, reporter)``: the isotropic baseline and the anisotropic settings over several seeds.

Every model of a run trains on the same private split with the same sigma,
q = B / N and steps = int(epochs / q), N the declared private size (public, from the config, never read from the
data: :func:`~.config.declared_private_size`), so each has the same epsilon;
the models differ in the noise shape (alpha, variant) and the seed, and each
draws its own Poisson batches and noise (keyed by its index in the run), so the
run's headline claim composes all of them. The isotropic models of the linear and MLP
heads (every seed) train first, together, in one model batch (:mod:`.model_batch`);
the others then train one at a time on Opacus, seeds the outer loop, so a stopped
sweep still holds every setting.

Every check of the configuration against the data (:func:`check_models`, :func:`~.planning.make_plan`) runs
before the first model trains, so a bad configuration fails before anything is released. A run that
fails later anyway (an out-of-memory error, a bug) has released curves: it is charged through
``reporter.charge`` (:func:`charged_summary`), and stores that claim with its failure.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

import torch

from privengine.accounting.opacus_names import ACCOUNTANT_NAMES
from privengine.accounting.subsampled_gaussian import History, epsilon_of
from privengine.errors import ConfigError
from privengine.randomness import noise_caveat
from privengine.store import EPSILON_BASIS_ARTIFACT

from . import metrics as M
from .config import DPSGDConfig, declared_private_size, is_user_dataset, published_size
from .data import Task, load_task
from .kept import keep_models
from .model_batch import Member, train_models, unbatchable
from .models import num_parameters
from .normalization import ChannelNorm
from .planning import PlanSearch
from .privacy import dpsgd_claims
from .summary import evaluation_caveats, final_text, normalization_caveats, comparison, summarise
from .training import EVAL_POINTS, ModelResult, Plan, build_network, normalization_history, train_model
from .user_data import load_user_task

EPSILON_POINTS = 8  # points of the live epsilon curve (a PRV evaluation takes 0.2-0.5 s)


def run(config: DPSGDConfig, reporter, *, model_batch: bool = True) -> dict:
    """Train every (seed, setting) model of the run and summarise them with their claims.

    ``model_batch``: the models :func:`~.model_batch.unbatchable` accepts (isotropic settings of the linear and MLP
    heads) train together in one model batch (:mod:`.model_batch`), before the others, which train one at a time on
    Opacus; False trains every model on Opacus (the batched and Opacus paths agree to float tolerance for the same
    keys: tests/test_dpsgd_model_batch.py compares them through this switch). Each model's index, keys, history
    and claims are the same either way (but on a GPU, where the model batch draws its Poisson masks on the device
    from a stream of their own: the same law, other batches), and the summary lists the models in (seed, setting)
    order.
    """
    device = torch.device(reporter.device)
    search = PlanSearch(config, reporter)  # sigma's calibration, a function of the config alone, while the data loads
    try:
        task = load(config, device, should_stop=reporter.should_stop, progress=reporter.progress)
        if task is None:
            return STOPPED_LOADING | {"dataset": config.dataset}
        state = RunState(config, reporter, task, model_batch=model_batch)
        if not state.prepare(search):
            return state.stopped_calibrating()
    finally:  # a run that stopped or failed before its plan ends the search; once the plan is made, a no-op
        search.cancel()
    if state.batched:
        new = train_models(task, config, state.plan, state.members(), device=device, should_stop=reporter.should_stop)
        if (stopped := state.batch_done(new)) is not None:
            return stopped
    return state.train_rest(device)


STOPPED_LOADING = {"models_trained": 0, "stopped": True, "stopped_during": "scattering"}


def load(config: DPSGDConfig, device: torch.device, *, should_stop: Callable[[], bool],
         progress: Callable[..., None]) -> Task | None:
    """The run's task (its data, or scattering features, on ``device``; a stored user data set's splits:
    :mod:`.user_data`); None if a stop came during the scattering."""
    progress(0.0, "loading data")
    if is_user_dataset(config.dataset):
        return load_user_task(config, device)
    features = "scattering" if config.model.startswith("scatter") else "pixels"
    if features == "scattering":
        progress(0.0, "scattering features (computed once per dataset, then cached)")
    return load_task(dataset=config.dataset, seed=config.data_seed, public_fraction=config.public_fraction,
                     train_limit=config.train_limit, data_root=config.data_root, device=device, features=features,
                     declared_size=declared_private_size(config), should_stop=should_stop, progress=progress)


class RunState:
    """One run's models after its data is loaded: its plan, the order and index of its models, its results, its
    charge, and the steps :func:`run` takes (also the steps of each run of a sweep's group, :mod:`.group`)."""

    def __init__(self, config: DPSGDConfig, reporter, task: Task, *, model_batch: bool = True):
        self.config, self.reporter, self.task, self.model_batch = config, reporter, task, model_batch
        self.plan: Plan | None = None
        seeds = [config.seed + i for i in range(config.n_seeds)]
        self.order = [(seed, alpha) for seed in seeds for alpha in config.alphas]  # a model's index: its place here
        self.total = len(self.order)
        self.batched = [i for i, (_, alpha) in enumerate(self.order)
                        if model_batch and unbatchable(config, alpha) is None]
        self.results: list[ModelResult] = []
        # The models in training, by index: setting, seed, and the last step each reported (None: none yet).
        self.under_way: dict[int, dict] = {}

    def prepare(self, search: PlanSearch | None = None) -> bool:
        """Check the models against the data, fix sigma (calibrated if asked; ``search``: a calibration already
        started for this config, which its caller cancels should this raise), log the plan and declare the charge;
        False if a stop came during the calibration (nothing trained). ConfigError before anything is released."""
        config, reporter, task = self.config, self.reporter, self.task
        check_models(task, config)
        self.plan = plan = (search or PlanSearch(config, reporter)).plan()
        if plan is None:
            return False
        # Stored at once, before any output (the log and artifacts below included): should the process die, the
        # run is charged every one of its models at its whole planned history, as charged_summary charges a model
        # that failed (the in-memory charge declared further down dies with the process).
        reporter.charge_plan(_accounting_summary([planned_model(config, plan, alpha=alpha, seed=seed)
                                                  for seed, alpha in self.order], task, config, plan))
        reporter.log(f"{task.name}: declared private size {declared_private_size(config)}, {task.n_public} public "
                     f"examples; sigma = "
                     f"{plan.noise_multiplier:.4g}, q = {plan.sample_rate:.4g}, {plan.steps} steps per model, "
                     f"{self.total} models")
        reporter.artifact(EPSILON_BASIS_ARTIFACT, {M.EPSILON: {
            "delta": config.delta, "accountant": f"{ACCOUNTANT_NAMES[config.accountant]}; one model alone, its steps "
                                                 "so far" + (", after the private normalisation statistics"
                                                             if config.normalization == "private" else "")}})
        for alpha in config.alphas:
            why = "the model batch is off" if not self.model_batch else unbatchable(config, alpha)
            reporter.log(f"{M.setting_label(alpha, config.variant)}: "
                         + (f"its {config.n_seeds} model(s) train together in a model batch" if why is None
                            else f"one model at a time on Opacus ({why})"))
        # From here on every output is covered should the run fail (see charged_summary); computed only then.
        reporter.charge(functools.partial(charged_summary, self.results, self.under_way, task, config, plan))
        return True

    def stopped_calibrating(self) -> dict:
        return {"dataset": self.task.name, "models_trained": 0, "stopped": True,
                "stopped_during": "calibrating sigma"}

    def finished(self, new: list[ModelResult]) -> None:
        self.results.extend(new)
        self.results.sort(key=lambda r: self.order.index((r.seed, r.alpha)))  # in place: the charge holds this list
        self.under_way.clear()  # charged by their own histories from now on
        for result in new:
            kept = "" if result.projection_captured is None else \
                f"; its projection keeps {100 * result.projection_captured:.1f} % of the public features' variance"
            together = f" (its share of a batch of {len(new)})" if len(new) > 1 else ""
            self.reporter.log(f"{result.setting}, seed {result.seed}: {final_text(result, self.task)} after "
                              f"{result.steps_done} steps in {result.seconds:.1f} s{together}"
                              + (" (stopped)" if result.stopped else "") + kept)
        self.reporter.artifact("comparison", comparison(self.results, self.task, self.config))

    def members(self, *, own: bool = False, on_done: Callable[[ModelResult], None] | None = None) -> list[Member]:
        """The :class:`~.model_batch.Member` of each batched model, each under way from now on. ``own``: each
        carries this run's config, plan and stop (a batch holding models of several runs)."""
        members = []
        stop = self.reporter.should_stop  # one object: the batch asks it once per check for all of them
        for index in self.batched:
            seed, alpha = self.order[index]
            label = M.setting_label(alpha, self.config.variant)
            self.under_way[index] = dict(label=label, alpha=alpha, seed=seed, index=index, total=self.total,
                                         reported=None)
            on_eval = _eval_reporter(self.reporter, self.config, self.plan, label=label, seed=seed, index=index,
                                     total=self.total, under_way=self.under_way[index],
                                     batch=(0, len(self.batched)))  # the batch trains first
            extra = dict(config=self.config, plan=self.plan, should_stop=stop) if own else {}
            members.append(Member(alpha=alpha, seed=seed, index=index, on_eval=on_eval, on_done=on_done, **extra))
        return members

    def batch_done(self, new: list[ModelResult]) -> dict | None:
        """The batched models' results are in; the stopped summary if they stopped, else None (go on)."""
        self.finished(new)
        if not new[0].stopped:
            return None
        summary = summarise(self.results, self.task, self.config, self.plan, stopped=True)
        return summary | {"stopped_during": f"the batch of {len(new)} models trained together (models "
                                            f"{', '.join(str(i + 1) for i in self.batched)} of {self.total}) at "
                                            f"step {new[0].steps_done} of {self.plan.steps}"}

    def train_rest(self, device: torch.device) -> dict:
        """Train the models left (one at a time on Opacus, in order) and return the run's summary; a run that
        finishes keeps its models first when ``keep_model`` is on (:mod:`.kept`)."""
        config, reporter, plan = self.config, self.reporter, self.plan
        for index, (seed, alpha) in enumerate(self.order):
            if index in self.batched:
                continue
            label = M.setting_label(alpha, config.variant)
            self.under_way[index] = dict(label=label, alpha=alpha, seed=seed, index=index, total=self.total,
                                         reported=None)
            on_eval = _eval_reporter(reporter, config, plan, label=label, seed=seed, index=index, total=self.total,
                                     under_way=self.under_way[index], batch=(len(self.results), 1))
            result = train_model(self.task, config, plan, alpha=alpha, seed=seed, index=index, device=device,
                                 should_stop=reporter.should_stop, on_eval=on_eval)
            self.finished([result])
            if result.stopped:
                summary = summarise(self.results, self.task, config, plan, stopped=True)
                return summary | {"stopped_during": f"{label}, seed {seed} (model {index + 1} of {self.total}) at "
                                                    f"step {result.steps_done} of {plan.steps}"}
        summary = summarise(self.results, self.task, config, plan, stopped=False)
        if config.keep_model:
            keep_models(reporter, self.results, self.task, config, summary)
        reporter.progress(1.0, "done")
        return summary


def _eval_reporter(reporter, config: DPSGDConfig, plan: Plan, *, label: str, seed: int, index: int, total: int,
                   under_way: dict | None = None, batch: tuple[int, int] | None = None):
    """The ``on_eval`` callback of model ``index``: its curves, progress, and (first model only) epsilon.

    Before anything is reported it records the step in ``under_way["reported"]``: the model has released
    output, so a failure from then on charges it (:func:`charged_summary`). ``batch = (done, k)``: ``done`` models
    finished before this one started, and it trains with ``k - 1`` others (the progress bar's share);
    default ``(index, 1)``."""
    eps_every = plan.eval_every * max(1, round(EVAL_POINTS / EPSILON_POINTS))
    done, k = (index, 1) if batch is None else batch
    text = f"{label}, seed {seed}" if k == 1 else f"{k} models together"

    def on_eval(step: int, values: dict[str, float], history: History) -> None:
        if under_way is not None:
            under_way["reported"] = step
        reporter.metric(step, **{M.metric_key(name, label, seed): v for name, v in values.items()})
        if index == 0 and (step % eps_every == 0 or step == plan.steps):  # the same curve for every model
            reporter.metric(step, **{M.EPSILON: epsilon_of(history, accountant=config.accountant,
                                                           delta=config.delta)[0]})
        reporter.progress(min(1.0, (done + k * step / plan.steps) / total), f"{text}: step {step} of {plan.steps}")

    return on_eval


def charged_summary(results: list[ModelResult], under_way: dict, task: Task, config: DPSGDConfig,
                    plan: Plan) -> dict | None:
    """What a run that fails stores (its ``reporter.charge``): the summary of what it released, with claims
    covering all of it; None if no model reported anything (nothing released, no claim needed).

    Charged, each as an independent mechanism composed into the headline as in a successful run:

    - every model that returned (finished, or stopped): its own accountant history, as :func:`summarise`
      charges it in a run that ends normally;
    - each model in training when the run failed (one, or the K of a model batch), if it had reported any
      evaluation (its curves are stored):
      its whole planned history (the private-normalisation step if any, then ``plan.steps`` steps), not the
      steps up to its last reported evaluation. The plan bounds every step it took, the ones after its last
      evaluation included (what the job cannot observe once the training loop has raised); it does not depend
      on when the failure came, which may itself depend on the private data (a non-finite loss on a private
      batch, say), so the claim never rests on a data-dependent stopping point; and it is what the model would
      have cost had it finished, so a failed run's claim never exceeds the one its configuration states when it
      succeeds. Its row in ``models`` says ``failed``, ``steps`` (charged) and ``steps_reported``;
    - a model in training that had reported nothing, and the models never started: nothing (nothing released).

    ``under_way`` maps the index of each model in training to its setting, seed and last reported step.

    The summary is :func:`summarise`'s over the charged models (the failed model has no final values, so it
    adds no comparison row); should that fail too, a bare accounting summary (:func:`_accounting_summary`).
    """
    charged = list(results)
    failed = [u for u in under_way.values() if u.get("reported") is not None]
    charged += [planned_model(config, plan, alpha=u["alpha"], seed=u["seed"]) for u in failed]
    if not charged:
        return None
    try:
        summary = summarise(charged, task, config, plan, stopped=False)
    except Exception as exc:  # noqa: BLE001  (the claim must not depend on the reporting code that may have failed)
        summary = _accounting_summary(charged, task, config, plan)
        summary["summary_error"] = f"{type(exc).__name__}: {exc}"
    for row, u in zip(summary["models"][len(results):], failed):
        row.update(failed=True, steps=plan.steps, steps_reported=u["reported"],
                   charged="its whole planned history: the steps it took are unknown after the failure")
    if len(failed) == 1 and len(under_way) == 1:
        u = failed[0]
        during = (f"{u['label']}, seed {u['seed']} (model {u['index'] + 1} of {u['total']}) after reporting step "
                  f"{u['reported']} of {plan.steps}")
    elif failed:
        during = (f"the batch of {len(under_way)} models trained together (models "
                  f"{', '.join(str(i + 1) for i in sorted(under_way))} of {failed[0]['total']}) after reporting "
                  f"step {max(u['reported'] for u in failed)} of {plan.steps}")
    else:
        during = f"after model {len(results)}" + (f", before model {len(results) + 1} reported anything"
                                                  if len(under_way) == 1 else
                                                  f", before the {len(under_way)} models trained together reported "
                                                  "anything" if under_way else "")
    return summary | {"stopped": False, "failed": True, "failed_during": during, "models_trained": len(results),
                      "models_charged": len(charged)}


def planned_model(config: DPSGDConfig, plan: Plan, *, alpha: float, seed: int) -> ModelResult:
    """The charge of one model of the setting ``alpha`` and ``seed`` taken at its whole plan (no results): what a
    model is charged whose steps after its last report are unknown (a failure, a death)."""
    return ModelResult(setting=M.setting_label(alpha, config.variant), alpha=alpha, seed=seed, steps_done=plan.steps,
                       history=planned_history(config, plan), final={}, energy_mean=math.nan, seconds=0.0,
                       stopped=False)


def planned_history(config: DPSGDConfig, plan: Plan) -> History:
    """The accountant history of one model that takes every planned step: what ``train_model``'s accountant holds
    at the end of a model that finishes (the private-normalisation step, then ``plan.steps`` steps)."""
    return normalization_history(config) + [(plan.noise_multiplier, plan.sample_rate, plan.steps)]


def _accounting_summary(charged: list[ModelResult], task: Task, config: DPSGDConfig, plan: Plan) -> dict:
    """The fields a claim and a sweep's composition (``accounting.compose_runs``) read, and the claims: the
    fallback of :func:`charged_summary` when :func:`summarise` itself fails."""
    public_note = (f"Public data: {task.n_public} training examples (a seeded random "
                   f"{100 * config.public_fraction:.3g} % of the training split) are declared public; they are "
                   "not protected by this guarantee.")
    claims = dpsgd_claims(histories=[r.history for r in charged], accountant=config.accountant, delta=config.delta,
                          private_size=declared_private_size(config), public_note=public_note,
                          sampling=config.sampling,
                          extra_caveats=(noise_caveat(secure=config.secure_noise),) + normalization_caveats(config)
                          + evaluation_caveats(config))
    summary = {"dataset": task.name, **published_size(config), "n_public": task.n_public,
               "noise_multiplier": plan.noise_multiplier, "sample_rate": plan.sample_rate,
               "steps_per_model": plan.steps, "normalization": config.normalization,
               "models": [{"setting": r.setting, "alpha": r.alpha, "seed": r.seed, "steps": r.steps_done,
                           "stopped": r.stopped} for r in charged],
               "privacy": [c.to_dict() for c in claims]}
    if config.normalization == "private":
        summary["norm_noise_multiplier"] = config.norm_noise_multiplier
    return summary


def check_models(task: Task, config: DPSGDConfig) -> None:
    """Every ConfigError that building a model of this run would raise, raised now, before anything is trained
    (a run must not release its first models and then fail on a later one): the model exists for the data
    (``model``), ``scatter_mlp``'s ``projection_rank`` is at most min(n_public - 1, features), and, when some
    setting uses the public subspace, ``subspace_rank`` is at most min(d, n_public), d the number of trainable
    parameters (:func:`model_dimension`). ``train_model`` keeps its own checks as a backstop.
    """
    d = model_dimension(task, config)
    if config.uses_subspace and config.subspace_rank > min(d, task.n_public):
        raise ConfigError("subspace_rank", f"must be at most min(d, n_public) = min({d}, {task.n_public}); "
                                           f"got {config.subspace_rank}")


def model_dimension(task: Task, config: DPSGDConfig) -> int:
    """d, the trainable parameters of the run's model, from shapes and the config only.

    The model ``training.build_network`` builds (the same builder and checks), with stand-ins for what is computed from
    data: the fixed normalisation maps and scatter_mlp's projection are buffers, not parameters, so their values
    change neither d nor any check (and the private normalisation estimate, which would spend privacy, is never
    computed here). ConfigError where ``training.build_network`` would fail: the projection rank (its own error), a
    model that does not exist for the data or that Opacus cannot train.
    """
    channels = task.input_shape[0]
    norm = ChannelNorm(torch.zeros(channels), torch.ones(channels)) if config.normalization != "group" else None
    try:
        model = build_network(task, config, 0, torch.device("cpu"), norm, stand_in_projection=True)
    except ConfigError:
        raise
    except ValueError as exc:  # "no CNN for 12x12 images", Opacus' unsupported layers, ...
        raise ConfigError("model", f"cannot be trained on {task.name}: {exc}") from None
    return num_parameters(model)
