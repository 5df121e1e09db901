"""A DP-SGD run's summary: per-setting comparison rows, the selected setting, per-model rows and the claims.

Split from :mod:`.run`, which trains the models; :func:`summarise` is also what a failed run's charge
(:func:`.run.charged_summary`) builds over the models it charges.
"""

from __future__ import annotations

import math

import numpy as np

from privengine.datasets import private_part
from privengine.accounting.subsampled_gaussian import epsilon_of
from privengine.randomness import noise_caveat

from . import metrics as M
from .config import DPSGDConfig, declared_private_size, is_user_dataset, published_size
from .data import Task
from .privacy import dpsgd_claims
from .training import ModelResult, Plan


def normalization_caveats(config: DPSGDConfig) -> tuple[str, ...]:
    if config.normalization == "public":
        return ("The input channels are normalised with the public split's per-channel mean and sd (free).",)
    if config.normalization != "private":
        return ()
    return (f"Each model first releases per-channel means and second moments of the private scattering "
            f"features by the Gaussian mechanism (noise multiplier {config.norm_noise_multiplier:g}, each example's "
            "statistics clipped to the 90 % quantile of the public examples' norms); that step is composed "
            "into every epsilon here. The sums are divided by the declared private size N (public, from the "
            "config, never the data's count; as Opacus divides by the expected batch size).",)


def evaluation_caveats(config: DPSGDConfig) -> tuple[str, ...]:
    """On a user data set: the held-out rows the accuracies are measured on are the user's own rows, drawn from the
    private part, and no claim covers them."""
    if not is_user_dataset(config.dataset):
        return ()
    part = private_part.declared_part(config.dataset, config.private_size)
    return (f"Evaluation data drawn from your rows: data set {config.dataset} declares no test part, so each row "
            "of its private part is held out with probability 0.2, decided by a keyed hash of that row and "
            f"data_seed = {config.data_seed} alone (about {private_part.held_out(part)} of the declared {part}; adding "
            "or removing one row changes no other row's split); the validation and test accuracies are computed on "
            "them without privacy, the counts the summary gives are the actual numbers of held-out rows, and those "
            "rows are not protected by this guarantee (the ledger lists them, by their expected count).",)


def _metric_name(task: Task) -> str:
    return M.EXCESS_RISK if task.regression else M.TEST_ACC


def final_text(result: ModelResult, task: Task) -> str:
    name = _metric_name(task)
    value = result.final.get(name)
    return f"{name} = {value:.4g}" if value is not None else f"{name} not measured"


def comparison(results: list[ModelResult], task: Task, config: DPSGDConfig) -> list[dict]:
    """One row per setting: mean and sample std over seeds of the final metric (classification: on the test part
    of the held-out split), epsilon, captured energy; classification rows also carry ``validation_mean`` /
    ``validation_values``, the validation-part accuracy of the models that finished (None before any did): the
    number the run selects its best setting by (:func:`summarise`)."""
    name = _metric_name(task)
    rows = []
    for alpha in config.alphas:
        mine = [r for r in results if r.alpha == alpha and name in r.final]
        if not mine:
            continue
        values = np.array([r.final[name] for r in mine])
        energies = [r.energy_mean for r in mine if not math.isnan(r.energy_mean)]
        eps = max(epsilon_of(r.history, accountant=config.accountant, delta=config.delta)[0] for r in mine)
        row = {"setting": mine[0].setting, "alpha": alpha, "metric": name, "n_seeds": len(mine),
               "mean": float(values.mean()), "std": float(values.std(ddof=1)) if len(mine) > 1 else 0.0,
               "values": values.tolist(), "epsilon": eps,
               "captured_energy": float(np.mean(energies)) if energies else None}
        if not task.regression:
            validated = [r.final[M.VAL_ACC] for r in mine if M.VAL_ACC in r.final]
            row |= {"validation_mean": float(np.mean(validated)) if validated else None,
                    "validation_values": validated}
        rows.append(row)
    return rows


def selection_parts(task: Task) -> dict[str, str]:
    """The summary's ``selected_on`` / ``reported_on``: which examples chose the best setting, which report it."""
    if task.regression:
        exact = "population (the exact excess risk; no held-out sample, so none is reused)"
        return {"selected_on": exact, "reported_on": exact}
    return {"selected_on": f"validation ({task.n_val} examples)", "reported_on": f"test ({task.n_test} examples)"}


def best_of(results: list[ModelResult], rows: list[dict], task: Task) -> dict | None:
    """The run's best setting and its numbers: ``{"setting", "selection", "reported"}``, or None if none can be
    chosen yet.

    Classification: chosen by the mean over seeds of the final VALIDATION-part accuracy (only the models that
    finished their last evaluation count, so a stopped run never selects on a partial test curve), and reported
    by the mean TEST-part accuracy of those same models. The held-out split is halved even for a run with a single
    (pre-declared) setting, rather than reporting that one on the whole split: a sweep chooses among its runs by
    this same validation number (its frontier, the best run of a random-repetition sweep), so a run cannot know
    whether it will be selected on, and one rule keeps every reported number (run, sweep, preset) on examples
    nothing chose by. The cost is sampling noise: the test part is half the held-out split (MNIST: 5 000 of the
    10 000 test images, so about 1.4x the standard error of the papers' full-test-set figures, e.g. ±0.42 instead
    of ±0.30 points at 90 %).

    Regression (``linreg``): the excess risk is the exact population value, with no held-out sample that choosing
    could overfit, so the setting of least mean risk is chosen and reported by it.
    """
    name = _metric_name(task)
    if task.regression:
        if not rows:
            return None
        best = min(rows, key=lambda r: r["mean"])
        return {"setting": best["setting"], "selection": best["mean"], "reported": best["mean"]}
    candidates = [r for r in rows if r.get("validation_mean") is not None]
    if not candidates:
        return None
    best = max(candidates, key=lambda r: r["validation_mean"])
    chosen = [r.final[name] for r in results if r.alpha == best["alpha"] and M.VAL_ACC in r.final]
    return {"setting": best["setting"], "selection": best["validation_mean"], "reported": float(np.mean(chosen))}


def summarise(results: list[ModelResult], task: Task, config: DPSGDConfig, plan: Plan, *, stopped: bool) -> dict:
    """The run summary: headline values per setting, per-model rows, and the privacy claims.

    ``best_setting`` is chosen on the part named by ``selected_on`` and ``best_test_acc`` (``best_excess_risk``)
    is its value on ``reported_on``; ``best_val_acc`` is its validation number (see :func:`best_of`).
    """
    name = _metric_name(task)
    rows = comparison(results, task, config)
    summary: dict = {
        "dataset": task.name, "metric": name, **published_size(config), "n_public": task.n_public,
        "noise_multiplier": plan.noise_multiplier, "sample_rate": plan.sample_rate,
        "steps_per_model": plan.steps, "models_trained": len(results), "stopped": stopped,
        "normalization": config.normalization,
    }
    if config.normalization == "private":
        summary["norm_noise_multiplier"] = config.norm_noise_multiplier
    if task.regression:
        summary["null_excess_risk"] = task.population.null_risk()
    for row in rows:
        validation = "" if row.get("validation_mean") is None else f"; validation {row['validation_mean']:.4g}"
        summary[f"{row['setting']}: {name}"] = (f"{row['mean']:.4g} ± {row['std']:.2g} "
                                               f"({row['n_seeds']} seed{'s' if row['n_seeds'] > 1 else ''}"
                                               f"{validation})")
    summary |= selection_parts(task)
    best = best_of(results, rows, task)
    if best is not None:
        summary["best_setting"] = best["setting"]  # chosen on `selected_on`
        summary[f"best_{name}"] = best["reported"]  # on `reported_on`: the sweeps' utility (the headline covers all)
        if not task.regression:
            summary[f"best_{M.VAL_ACC}"] = best["selection"]  # what sweeps choose runs by (the frontier's select_by)
    summary["comparison"] = rows
    summary["models"] = [{"setting": r.setting, "alpha": r.alpha, "seed": r.seed, "steps": r.steps_done,
                          "seconds": round(r.seconds, 3), "stopped": r.stopped, **r.final,
                          "captured_energy": None if math.isnan(r.energy_mean) else r.energy_mean}
                         | ({} if r.projection_captured is None else {"projection_captured": r.projection_captured})
                         for r in results]
    uses = [use for use, on in (("the subspace U", config.uses_subspace),
                                ("the warm start", config.warm_start_epochs > 0),
                                ("the normalisation statistics", config.normalization == "public"),
                                ("the clip of the private normalisation statistics",
                                 config.normalization == "private"),
                                ("the principal directions of the model's fixed projection",
                                 config.model == "scatter_mlp")) if on]
    which = (f"the first {task.n_public} rows of data set {config.dataset}, declared public with it"
             if is_user_dataset(config.dataset) else
             f"a seeded random {100 * config.public_fraction:.3g} % of the training split")
    public_note = (f"Public data ({', '.join(uses) if uses else 'unused by this run'}): {task.n_public} training "
                   f"examples ({which}, the same for every model) are declared public; they are never in the private "
                   "training and are not protected by this guarantee.")
    claims = dpsgd_claims(histories=[r.history for r in results] or [[]], accountant=config.accountant,
                          delta=config.delta, private_size=declared_private_size(config), public_note=public_note,
                          sampling=config.sampling, show_gdp=config.show_gdp,
                          extra_caveats=(noise_caveat(secure=config.secure_noise),) + normalization_caveats(config)
                          + evaluation_caveats(config))
    summary["privacy"] = [c.to_dict() for c in claims]
    return summary
