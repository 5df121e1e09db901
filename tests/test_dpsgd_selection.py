"""Issue 24, item 7: DP-SGD chooses on a validation part of its held-out split and reports on the rest.

The best setting of a run, the Pareto set of a sweep and the run a random-repetition sweep publishes are chosen
by validation accuracy; the number reported for them (``best_test_acc``: frontier, presets, reports) is the
test-part accuracy, and nothing selects on the live test curves.
"""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
import torch

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd)
from privengine.claims import PrivacyClaim
from privengine.dpsgd import metrics as M
from privengine.dpsgd import run as run_module
from privengine.dpsgd import training
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.data import load_task
from privengine.dpsgd.training import ModelResult, Plan
from privengine.explore import SweepSpec, runner
from privengine.explore.cli import _text
from privengine.explore.export import points_csv
from privengine.store import RunSnapshot
from tests.memory_reporter import MemoryReporter

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")

DIGITS = dict(dataset="digits", model="linear", epochs=1.0, batch_size=64, lr=0.5, noise_mode="sigma",
              noise_multiplier=1.0, subspace_rank=8)


def _digits(seed: int = 0):
    return load_task(dataset="digits", seed=seed, public_fraction=0.05, train_limit=0, data_root="",
                     device=torch.device("cpu"))


def _rows(x: torch.Tensor, y: torch.Tensor) -> list[tuple]:
    return sorted((tuple(xi.flatten().tolist()), int(yi)) for xi, yi in zip(x, y))


def test_held_out_split_is_halved_once_by_the_data_seed_into_validation_and_test():
    task = _digits()
    assert (task.n_val, task.n_test) == (179, 180)  # digits holds out round(0.2 * 1797) = 359
    again, other = _digits(), _digits(seed=1)
    assert torch.equal(again.x_val, task.x_val) and torch.equal(again.x_test, task.x_test)
    assert not torch.equal(other.x_test, task.x_test)
    # the two parts and the training splits are every digit exactly once
    parts = [(task.x_private, task.y_private), (task.x_public, task.y_public), (task.x_val, task.y_val),
             (task.x_test, task.y_test)]
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x_all = (torch.as_tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0 - 0.5) / 0.5
    assert _rows(torch.cat([x for x, _ in parts]), torch.cat([y for _, y in parts])) == \
        _rows(x_all, torch.as_tensor(bunch.target))
    assert load_task(dataset="linreg", seed=0, public_fraction=0.05, train_limit=0, data_root="",
                     device=torch.device("cpu")).x_val is None


def test_run_reports_on_test_the_setting_chosen_on_validation(monkeypatch):
    """Two settings whose best on validation (isotropic) is not their best on test (alpha = 2): the run's best
    is the validation winner, and its reported number is that setting's test mean."""
    truth = {(0.0, "validation"): 0.9, (0.0, "test"): 0.5, (2.0, "validation"): 0.6, (2.0, "test"): 0.8}
    training_now: dict[str, float] = {}
    parts_seen: list[tuple[str, int | None]] = []
    train_model = run_module.train_model

    def tracking_train_model(task, config, plan, *, alpha, **kwargs):
        training_now["alpha"] = alpha
        return train_model(task, config, plan, alpha=alpha, **kwargs)

    def fake_evaluate(model, task, should_stop, *, limit, part="test"):
        parts_seen.append((part, limit))
        return truth[(training_now["alpha"], part)]

    monkeypatch.setattr(run_module, "train_model", tracking_train_model)
    monkeypatch.setattr(training, "_evaluate", fake_evaluate)
    reporter = MemoryReporter("cpu")
    # the Opacus path, whose evaluation is faked above (the model batch evaluates its K models at once)
    summary = run_module.run(DPSGDConfig().replace(**DIGITS, alphas=(0.0, 2.0), n_seeds=2), reporter,
                             model_batch=False)
    assert summary["best_setting"] == M.ISOTROPIC
    assert summary["best_test_acc"] == pytest.approx(0.5) and summary["best_val_acc"] == pytest.approx(0.9)
    assert summary["selected_on"] == "validation (179 examples)"
    assert summary["reported_on"] == "test (180 examples)"
    rows = {r["setting"]: r for r in summary["comparison"]}
    assert rows["alpha=2"]["mean"] == pytest.approx(0.8) and rows["alpha=2"]["validation_mean"] == pytest.approx(0.6)
    assert all(m[M.VAL_ACC] == truth[(m["alpha"], "validation")] for m in summary["models"])
    # validation is measured once per model, on the whole part, at the last step; the live curves stay on test
    assert parts_seen.count(("validation", None)) == 4
    assert not any(M.VAL_ACC in key for key in reporter.metrics)


def test_a_real_run_measures_both_parts_and_selects_by_validation():
    summary, = [run_module.run(DPSGDConfig().replace(**DIGITS, alphas=(0.0, 2.0), n_seeds=1),
                               MemoryReporter("cpu"))]
    rows = summary["comparison"]
    best = max(rows, key=lambda r: r["validation_mean"])
    assert summary["best_setting"] == best["setting"] and summary["best_test_acc"] == best["mean"]
    assert all(0.0 <= m[M.VAL_ACC] <= 1.0 and 0.0 <= m[M.TEST_ACC] <= 1.0 for m in summary["models"])


def test_a_stopped_run_never_selects_on_partial_test_values():
    """Models stopped before their last evaluation have only an intermediate test value: no best is named."""
    task = _digits()
    config = DPSGDConfig().replace(**DIGITS, alphas=(0.0, 2.0)).validate()
    plan = Plan(noise_multiplier=1.0, sample_rate=0.05, steps=20, expected_batch_size=64)

    def model(alpha, final, stopped):
        return ModelResult(setting=M.setting_label(alpha, config.variant), alpha=alpha, seed=0, steps_done=10,
                           history=[(1.0, 0.05, 10)], final=final, energy_mean=math.nan, seconds=0.0, stopped=stopped)

    partial = run_module.summarise([model(0.0, {M.TEST_ACC: 0.4}, True)], task, config, plan, stopped=True)
    assert "best_test_acc" not in partial and "best_setting" not in partial
    one_done = run_module.summarise([model(0.0, {M.TEST_ACC: 0.4, M.VAL_ACC: 0.5}, False),
                                     model(2.0, {M.TEST_ACC: 0.9}, True)], task, config, plan, stopped=True)
    assert one_done["best_setting"] == M.ISOTROPIC and one_done["best_test_acc"] == 0.4


def test_live_published_value_is_not_a_maximum_over_test_curves(store):
    def snapshot(alphas, curves):
        run_id = store.create_run("dpsgd", {"alphas": alphas})
        rows = [(10, name, value) for name, value in curves.items()]
        store.add_metrics(run_id, rows)
        return RunSnapshot(store.get_run(run_id), pd.DataFrame(rows, columns=["step", "name", "value"]))

    from privengine.figures import dpsgd as figures

    two = snapshot([0.0, 2.0], {"test_acc|isotropic|seed=0": 0.7, "test_acc|alpha=2|seed=0": 0.8})
    assert figures.published_values(two) == {}
    one = snapshot([0.0], {"test_acc|isotropic|seed=0": 0.7, "test_acc|isotropic|seed=1": 0.8})
    assert figures.published_values(one) == {"test accuracy": pytest.approx(0.75)}


def _sweep_run(store, sweep_id: str, point: int, seed: int, *, val: float, test: float) -> str:
    claim = PrivacyClaim("all 1 models of this run released together", 2.0, 1e-5, "Opacus RDP accountant",
                         "add/remove one", headline=True)
    run_id = store.create_run("dpsgd", {"seed": seed, "accountant": "rdp", "delta": 1e-5, "lr": 0.1},
                              sweep_id=sweep_id, sweep_point=point)
    store.mark_ended(run_id, "finished", summary={
        "metric": "test_acc", "best_val_acc": val, "best_test_acc": test, "noise_multiplier": 1.0,
        "sample_rate": 0.01, "models": [{"steps": 100}], "privacy": [claim.to_dict()]})
    return run_id


def test_random_repetition_publishes_the_run_best_on_validation(store):
    spec = SweepSpec("dpsgd", axes={"lr": [0.05, 0.1, 0.2]}, repeat={"shape": "logarithmic", "mean": 3},
                     plan=[[0, 0], [1, 1], [2, 2]])
    sweep_id = store.create_sweep("dpsgd", spec.to_dict())
    _sweep_run(store, sweep_id, 0, 0, val=0.70, test=0.95)  # best on test
    chosen = _sweep_run(store, sweep_id, 1, 1, val=0.90, test=0.60)  # best on validation
    _sweep_run(store, sweep_id, 2, 2, val=0.80, test=0.80)
    res = runner.result(store, sweep_id)
    assert res.best == {"run": chosen, "point": 1, "selected_by": "best_val_acc", "selection": 0.9,
                        "utility": "best_test_acc", "value": 0.6}
    assert res.to_dict()["best_run"]["run"] == chosen
    assert f"best run (by best_val_acc = 0.9): {chosen} at point 1, best_test_acc = 0.6" in _text(res)


def test_the_frontier_is_chosen_by_validation_and_plots_test(store):
    """Same epsilon: only the point best on validation is on the frontier, whatever the test values say."""
    spec = SweepSpec("dpsgd", axes={"lr": [0.05, 0.1]})
    sweep_id = store.create_sweep("dpsgd", spec.to_dict())
    _sweep_run(store, sweep_id, 0, 0, val=0.90, test=0.50)
    _sweep_run(store, sweep_id, 1, 0, val=0.60, test=0.80)
    res = runner.result(store, sweep_id)
    assert res.frontier == [0] and res.best is None
    assert [(p.selection, p.utility) for p in res.points] == [(0.9, 0.5), (0.6, 0.8)]
    assert points_csv(res).splitlines()[0].endswith("best_test_acc,best_test_acc_sd,best_val_acc,on_frontier,runs,"
                                                    "states")
    assert dataclasses.asdict(res.utility_axis)["select_by"] == "best_val_acc"
