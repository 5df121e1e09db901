"""Issue 24, item 3: a DP-SGD run that fails after releasing curves is charged for them, and a bad config fails
before anything trains.

A later model's failure is simulated by wrapping ``train_model`` (the real training, whose ``on_eval`` raises
after a given number of reported evaluations), so every number here comes from the real run.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd)
from privengine.claims import claims_of, headline_of
from privengine.dpsgd import metrics as M
from privengine.dpsgd import run as dpsgd_run
from privengine.accounting.subsampled_gaussian import epsilon_of
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.data import load_task
from privengine.dpsgd.models import num_parameters
from privengine.dpsgd.normalization import public_norm
from privengine.dpsgd.training import EVAL_POINTS, build_network
from privengine.errors import ConfigError
from privengine.explore import SweepSpec, runner
from privengine.jobs import JobManager
from tests.conftest import run_sweep
from tests.memory_reporter import MemoryReporter

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing", "ignore:Optimal order")

# linreg: 9 500 private examples, q = 100 / 9500, 95 steps per model; two models (alpha 0 and 4), RDP
BASE = dict(n_seeds=1, alphas=(0.0, 4.0), epochs=1.0, noise_mode="sigma", noise_multiplier=1.0, accountant="rdp")


def _failing(model_index: int, after_reports: int, *, only_lr: float | None = None):
    """``train_model`` that trains model ``model_index`` for real but raises at its evaluation number
    ``after_reports + 1`` (before reporting it): after ``after_reports`` reported evaluations."""
    real = dpsgd_run.train_model

    def train(task, config, plan, *, index, on_eval, **kwargs):
        if index != model_index or (only_lr is not None and config.lr != only_lr):
            return real(task, config, plan, index=index, on_eval=on_eval, **kwargs)
        reported = []

        def on_eval_then_fail(step, values, history):
            if len(reported) == after_reports:
                raise RuntimeError("simulated failure of a later model")
            reported.append(step)
            on_eval(step, values, history)

        return real(task, config, plan, index=index, on_eval=on_eval_then_fail, **kwargs)

    return train


def _failing_batch(model_index: int, after_reports: int):
    """``train_models`` (the model batch) whose member ``model_index`` raises as :func:`_failing`'s model does."""
    real = dpsgd_run.train_models

    def train(task, config, plan, members, **kwargs):
        reported = []

        def wrap(member):
            def on_eval_then_fail(step, values, history):
                if len(reported) == after_reports:
                    raise RuntimeError("simulated failure of a later model")
                reported.append(step)
                member.on_eval(step, values, history)

            return dataclasses.replace(member, on_eval=on_eval_then_fail) if member.index == model_index else member

        return real(task, config, plan, [wrap(m) for m in members], **kwargs)

    return train


def _rdp(q: float, steps: int) -> float:
    return epsilon_of([(1.0, q, steps)], accountant="rdp", delta=1e-5)[0]


def test_a_run_failing_in_its_second_model_stores_a_claim_covering_both(store, monkeypatch):
    monkeypatch.setattr(dpsgd_run, "train_model", _failing(model_index=1, after_reports=2))
    manager = JobManager(store)
    try:
        run = manager.wait(manager.submit("dpsgd", BASE), timeout=300)
    finally:
        manager.shutdown()
    assert run.state == "failed" and "simulated failure of a later model" in run.error
    summary = run.summary
    q, steps = summary["sample_rate"], summary["steps_per_model"]
    assert steps == 95 and summary["failed"] and not summary["stopped"]
    assert summary["models_trained"] == 1 and summary["models_charged"] == 2
    first, failed = summary["models"]
    assert first["steps"] == steps and not first.get("failed")
    every = steps // EVAL_POINTS
    assert failed["failed"] and failed["steps_reported"] == 2 * every and failed["steps"] == steps
    assert summary["failed_during"].startswith("alpha=4, seed 0 (model 2 of 2) after reporting step")
    # both models' curves are in the store, so the headline charges both: the second at its whole plan
    names = set(store.metrics(run.id)["name"])
    assert M.metric_key(M.EXCESS_RISK, "alpha=4", 0) in names and M.metric_key(M.EXCESS_RISK, M.ISOTROPIC, 0) in names
    headline = headline_of(summary)
    assert headline.label == "all 2 models of this run released together"
    assert headline.epsilon == pytest.approx(_rdp(q, 2 * steps), rel=1e-12)
    each = next(c for c in claims_of(summary) if not c.headline)
    assert each.epsilon == pytest.approx(_rdp(q, steps), rel=1e-12)
    # the finished model alone is what the comparison reports (the failed one has no final values)
    assert [row["setting"] for row in summary["comparison"]] == [M.ISOTROPIC]


def test_a_model_that_failed_before_reporting_is_not_charged():
    reporter = MemoryReporter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dpsgd_run, "train_model", _failing(model_index=1, after_reports=0))
        with pytest.raises(RuntimeError, match="simulated failure"):
            dpsgd_run.run(DPSGDConfig().replace(**BASE), reporter)
    assert not any("alpha=4" in name for name in reporter.metrics)  # the second model released nothing
    charged = reporter.charged_summary()
    assert charged["failed"] and charged["models_trained"] == charged["models_charged"] == 1
    assert charged["failed_during"] == "after model 1, before model 2 reported anything"
    (claim,) = claims_of(charged)
    assert claim.headline and claim.epsilon == pytest.approx(_rdp(charged["sample_rate"], 95), rel=1e-12)


def test_a_run_that_fails_before_any_model_reports_charges_nothing():
    reporter = MemoryReporter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dpsgd_run, "train_model", _failing(model_index=0, after_reports=0))
        patch.setattr(dpsgd_run, "train_models", _failing_batch(model_index=0, after_reports=0))
        with pytest.raises(RuntimeError, match="simulated failure"):
            dpsgd_run.run(DPSGDConfig().replace(**BASE), reporter)
    assert reporter.metrics == {} and reporter.charged_summary() is None


def test_a_subspace_rank_too_large_for_the_public_data_fails_before_any_training():
    """Regression: the check fired when the first alpha != 0 model was built, after the isotropic model had
    trained and stored its curves and comparison (with no claim, since the run then failed)."""
    reporter = MemoryReporter()
    config = DPSGDConfig().replace(**BASE, subspace_rank=200, public_fraction=0.01)  # 100 public examples
    with pytest.raises(ConfigError) as err:
        dpsgd_run.run(config, reporter)
    assert err.value.field == "subspace_rank" and "min(d, n_public) = min(401, 100)" in str(err.value)
    assert reporter.metrics == {} and reporter.artifacts == {}
    assert reporter.charged_summary() is None


@pytest.mark.parametrize("changes", [
    {}, {"dataset": "digits"}, {"dataset": "digits", "model": "mlp"},
    {"dataset": "digits", "model": "scatter_cnn"},
    {"dataset": "digits", "model": "scatter_mlp", "projection_rank": 16, "normalization": "public"},
    {"dataset": "digits", "model": "scatter_mlp", "projection_rank": 16, "normalization": "private"},
])
def test_the_dimension_checked_before_training_is_the_trained_models(changes, private_home):
    """check_models builds the architecture from shapes alone (stand-ins for the data-dependent buffers): its d
    must be the d of the model train_model builds, which its subspace check used to read."""
    config = DPSGDConfig().replace(**changes)
    task = load_task(dataset=config.dataset, seed=config.data_seed, public_fraction=config.public_fraction,
                     train_limit=0, data_root="", device=torch.device("cpu"),
                     features="scattering" if config.model.startswith("scatter") else "pixels")
    norm = public_norm(task.x_public) if config.normalization != "group" else None  # values: irrelevant to d
    trained = build_network(task, config, config.seed, torch.device("cpu"), norm)
    assert dpsgd_run.model_dimension(task, config) == num_parameters(trained)
    dpsgd_run.check_models(task, config)  # none of these fails
    if config.model == "scatter_mlp":  # digits: 71 public examples, so at most 70 directions
        with pytest.raises(ConfigError, match=r"`projection_rank` must be at most min\(n_public - 1, features\) = 70"):
            dpsgd_run.check_models(task, config.replace(projection_rank=100))


def test_a_model_the_builder_refuses_for_the_data_is_a_config_error_naming_the_model(private_home):
    """model_dimension builds through training.build_network: the builder's ValueError (no CNN for such images)
    becomes a ConfigError on the model field before anything trains."""
    config = DPSGDConfig().replace(dataset="digits", model="cnn")
    task = load_task(dataset="digits", seed=0, public_fraction=config.public_fraction, train_limit=0, data_root="",
                     device=torch.device("cpu"))
    cropped = dataclasses.replace(task, x_private=task.x_private[..., :6, :6], x_public=task.x_public[..., :6, :6])
    with pytest.raises(ConfigError) as err:
        dpsgd_run.check_models(cropped, config)
    assert err.value.field == "model" and f"cannot be trained on {task.name}: no CNN for 6x6 images" in str(err.value)


def test_a_sweep_composes_the_run_that_failed_after_its_first_model(store, monkeypatch):
    monkeypatch.setattr(dpsgd_run, "train_model", _failing(model_index=1, after_reports=1, only_lr=0.2))
    sweep_id = run_sweep(store, SweepSpec("dpsgd", base=BASE, axes={"lr": [0.1, 0.2]}), timeout=300)
    res = runner.result(store, sweep_id)
    assert res.runs_by_state == {"finished": 1, "failed": 1}
    failed = next(r for r in store.sweep_runs(sweep_id) if r.state == "failed")
    q, steps = failed.summary["sample_rate"], failed.summary["steps_per_model"]
    # four models were trained and reported (two per run): all four are composed, the failed one at its plan
    assert res.claim.label == "selecting among the 2 runs of the sweep that state a claim (4 models composed)"
    assert res.claim.epsilon == pytest.approx(_rdp(q, 4 * steps), rel=1e-12)
    assert "Composes the claims of 2 run(s): 1 finished, 1 failed" in " ".join(res.claim.caveats)
    assert not any("stated no claim" in c for c in res.claim.caveats)


def test_a_failure_in_the_final_summary_still_charges_every_model(monkeypatch):
    """The claim must not depend on the reporting code: if ``summarise`` itself raises (after every model has
    trained and reported), the charge falls back to the bare accounting of every model."""
    def broken(*args, **kwargs):
        raise KeyError("a bug in the summary")

    monkeypatch.setattr(dpsgd_run, "summarise", broken)
    reporter = MemoryReporter()
    with pytest.raises(KeyError, match="a bug in the summary"):
        dpsgd_run.run(DPSGDConfig().replace(**BASE), reporter)
    charged = reporter.charged_summary()
    assert charged["summary_error"] == "KeyError: 'a bug in the summary'" and charged["models_charged"] == 2
    assert [m["steps"] for m in charged["models"]] == [95, 95]
    assert headline_of(charged).epsilon == pytest.approx(_rdp(charged["sample_rate"], 2 * 95), rel=1e-12)
