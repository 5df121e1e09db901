"""Improvements that cost no privacy: the public warm start (public split only), the EMA of the iterates and
the learning-rate schedule."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from privengine.claims import claims_of
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.data import load_task
from privengine.dpsgd.training import _evaluate, build_network, warm_start
from privengine.errors import ConfigError
from tests.test_dpsgd_run import _run

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


def test_warm_start_reads_only_public_examples_and_learns_from_them():
    config = DPSGDConfig(dataset="digits", model="linear", public_fraction=0.3, warm_start_epochs=5.0,
                         warm_start_lr=0.1).validate()
    task = load_task(dataset="digits", seed=0, public_fraction=0.3, train_limit=0, data_root="",
                     device=torch.device("cpu"))
    # Poison the private split: a warm start that read any private example would turn the model into NaN.
    poisoned = dataclasses.replace(task, x_private=torch.full_like(task.x_private, float("nan")))
    model = build_network(poisoned, config, seed=0, device=torch.device("cpu"))
    before = _evaluate(model, poisoned, lambda: False, limit=None)
    warm_start(model, poisoned, config, torch.Generator().manual_seed(0))
    after = _evaluate(model, poisoned, lambda: False, limit=None)
    assert all(torch.isfinite(p).all() for p in model.parameters())
    assert before < 0.3 and after > 0.8, (before, after)


def test_warm_started_run_states_the_public_use_and_keeps_its_epsilon():
    common = dict(dataset="digits", model="linear", epochs=1.0, batch_size=64, noise_mode="sigma",
                  noise_multiplier=2.0, alphas=(0.0,), public_fraction=0.2, lr=0.5)
    cold, cold_rep = _run(**common)
    warm, warm_rep = _run(**common, warm_start_epochs=5.0)
    assert claims_of(warm)[0].epsilon == claims_of(cold)[0].epsilon
    assert any("warm start" in c for c in claims_of(warm)[0].caveats)
    assert not any("warm start" in c for c in claims_of(cold)[0].caveats)
    first = {name: rep.metrics["test_acc|isotropic|seed=0"][0][1] for name, rep in (("cold", cold_rep),
                                                                                     ("warm", warm_rep))}
    assert first["warm"] > first["cold"] + 0.2, first


def test_ema_of_the_iterates_is_what_gets_evaluated():
    """With ema_decay the evaluated model is torch's AveragedModel EMA of the noisy iterates, updated once per
    logical step (post-processing of what the guarantee covers)."""
    from privengine.dpsgd.training import Plan, Training

    config = DPSGDConfig(dataset="digits", model="linear", epochs=1.0, batch_size=64, noise_mode="sigma",
                         noise_multiplier=2.0, alphas=(0.0,), ema_decay=0.5, physical_batch_size=16).validate()
    task = load_task(dataset="digits", seed=0, public_fraction=0.05, train_limit=0, data_root="",
                     device=torch.device("cpu"))
    plan = Plan(noise_multiplier=2.0, sample_rate=64 / task.n_private, steps=3, expected_batch_size=64)
    training = Training(task, config, plan, alpha=0.0, seed=0, index=0, device=torch.device("cpu"))
    iterates = []
    update = training.ema.update_parameters

    def record_and_update(model):
        iterates.append([p.detach().clone() for p in model.parameters()])
        update(model)

    training.ema.update_parameters = record_and_update
    training.run(lambda: False, lambda *a: None)
    assert len(iterates) == plan.steps  # once per logical step, not per physical batch
    expected = iterates[0]
    for it in iterates[1:]:
        expected = [0.5 * e + 0.5 * p for e, p in zip(expected, it)]
    for e, p in zip(expected, training.ema.module.parameters()):
        assert torch.allclose(e, p, atol=1e-6)
    assert not all(torch.allclose(e, p) for e, p in zip(expected, training.model.parameters()))


def test_cosine_schedule_sets_each_logical_step_learning_rate():
    """lr_schedule = cosine: logical step t (0-based) of T updates with lr (1 + cos(pi t / T)) / 2, so the first
    step uses lr itself and the rate reaches 0 after the last; physical batches inside a step do not advance it."""
    from privengine.dpsgd.training import Plan, Training

    lr = 0.4
    config = DPSGDConfig(dataset="digits", model="linear", epochs=1.0, batch_size=64, noise_mode="sigma", lr=lr,
                         noise_multiplier=2.0, alphas=(0.0,), lr_schedule="cosine", physical_batch_size=16).validate()
    task = load_task(dataset="digits", seed=0, public_fraction=0.05, train_limit=0, data_root="",
                     device=torch.device("cpu"))
    plan = Plan(noise_multiplier=2.0, sample_rate=64 / task.n_private, steps=5, expected_batch_size=64)
    training = Training(task, config, plan, alpha=0.0, seed=0, index=0, device=torch.device("cpu"))
    used, step = [], training.optimizer.step

    def record_and_step(*args, **kwargs):
        rate, before = training.optimizer.param_groups[0]["lr"], training.steps_done
        result = step(*args, **kwargs)
        if training.steps_done > before:
            used.append(rate)
        return result

    training.optimizer.step = record_and_step
    training.run(lambda: False, lambda *a: None)
    expected = [lr * (1 + math.cos(math.pi * t / plan.steps)) / 2 for t in range(plan.steps)]
    assert used == pytest.approx(expected, abs=1e-9)
    assert training.optimizer.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-9)


def test_lr_schedule_defaults_to_constant_and_rejects_unknown_names():
    assert DPSGDConfig().lr_schedule == "constant"  # the presets' recorded figures were trained without one
    with pytest.raises(ConfigError, match="lr_schedule"):
        DPSGDConfig(lr_schedule="linear").validate()
