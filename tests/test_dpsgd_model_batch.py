"""Issue 26, item 3: the model batch (privengine.dpsgd.model_batch) trains K isotropic models together, and for the
same keys agrees with the Opacus path (privengine.dpsgd.training) model by model: weights, evaluations, accountant
histories, and through run() the summaries and claims.

Every comparison sets ``physical_batch_size`` above any Poisson batch, so the Opacus path's train_loss (a mean of
physical-batch means) is the logical batch's mean the model batch reports.
"""

from __future__ import annotations

import dataclasses
import math
from concurrent.futures import Future

import pytest
import torch
from opacus.utils.uniform_sampler import UniformWithReplacementSampler
from torch.utils.data import BatchSampler, RandomSampler

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd)
from privengine.accounting.subsampled_gaussian import epsilon_of
from privengine.dpsgd import metrics as M
from privengine.dpsgd import run as dpsgd_run
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.data import PendingFingerprint, load_task
from privengine.dpsgd.model_batch import Member, _Batch, train_models, unbatchable
from privengine.dpsgd.stacked_model import ClippedGradients
from privengine.dpsgd.training import STREAM_SAMPLING, Plan, Training
from privengine.poisson import inclusion_rate
from privengine.randomness import noise_generator
from tests.memory_reporter import MemoryReporter

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing", "ignore:Optimal order")

DIGITS = dict(dataset="digits", epochs=1.0, batch_size=64, noise_mode="sigma", noise_multiplier=1.0,
              physical_batch_size=1024, accountant="rdp", alphas=(0.0,))
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def tasks():
    cache = {}

    def get(features: str):
        if features not in cache:
            cache[features] = load_task(dataset="digits", seed=0, public_fraction=0.05, train_limit=0, data_root="",
                                        device=CPU, features=features)
        return cache[features]

    return get


def _plan(config: DPSGDConfig, task) -> Plan:
    q = config.batch_size / task.n_private
    return Plan(noise_multiplier=config.noise_multiplier, sample_rate=q, steps=int(config.epochs / q),
                expected_batch_size=config.batch_size)


def _batched(task, config, plan, keys):
    """Train the models ``keys`` = [(seed, index)] as one batch; (the batch, results, reports per index)."""
    reports: dict[int, list] = {}
    members = [Member(0.0, seed, index, lambda step, values, history, i=index: reports.setdefault(i, []).append(
        (step, values, history))) for seed, index in keys]
    batch = _Batch(task, config, plan, members, CPU)
    return batch, batch.run(lambda: False), reports


@pytest.mark.parametrize("changes", [
    dict(model="scatter_linear", lr=2.0, momentum=0.5, lr_schedule="cosine", ema_decay=0.9),
    dict(model="linear", lr=0.5, sampling="shuffle", grad_sample_mode="ghost"),
    dict(model="mlp", lr=0.5, max_grad_norm=0.1),
    dict(model="scatter_mlp", projection_rank=16, normalization="public", lr=1.0, warm_start_epochs=1.0),
])
def test_batched_models_equal_the_opacus_path_model_by_model(tasks, changes):
    """K = 3 models (two seeds, three indices) trained together against each trained alone on Opacus."""
    config = DPSGDConfig().replace(**DIGITS, **changes)
    task = tasks("scattering" if config.model.startswith("scatter") else "pixels")
    plan = _plan(config, task)
    keys = [(0, 0), (1, 1), (0, 2)]
    batch, results, reports = _batched(task, config, plan, keys)
    for k, (seed, index) in enumerate(keys):
        alone: list = []
        training = Training(task, config, plan, alpha=0.0, seed=seed, index=index, device=CPU)
        result = training.run(lambda: False, lambda step, values, history: alone.append((step, values, history)))
        weights = [p.detach() for p in training.model.parameters()]
        for mine, theirs in zip(batch.parameters_of(k), weights, strict=True):
            torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-5)
        assert results[k].history == result.history == [(1.0, plan.sample_rate, plan.steps)]
        assert results[k].steps_done == result.steps_done == plan.steps and not results[k].stopped
        assert [(s, h) for s, _, h in reports[index]] == [(s, h) for s, _, h in alone]  # same steps, same histories
        for (_, mine, _), (_, theirs, _) in zip(reports[index], alone, strict=True):
            assert mine.keys() == theirs.keys()
            assert mine[M.TEST_ACC] == pytest.approx(theirs[M.TEST_ACC], abs=1.5 / task.n_test)  # one flip at most
            assert mine[M.TRAIN_LOSS] == pytest.approx(theirs[M.TRAIN_LOSS], rel=1e-4)
        assert results[k].final.keys() == result.final.keys() >= {M.TEST_ACC, M.VAL_ACC, M.TRAIN_LOSS}
    # different seeds and indices: different models
    assert not torch.equal(batch.parameters_of(0)[-1], batch.parameters_of(2)[-1])


def test_the_linreg_model_agrees_too(tasks):
    config = DPSGDConfig().replace(dataset="linreg", epochs=0.5, noise_mode="sigma", noise_multiplier=1.0,
                                   physical_batch_size=1024, accountant="rdp", alphas=(0.0,))
    task = load_task(dataset="linreg", seed=0, public_fraction=0.05, train_limit=0, data_root="", device=CPU)
    plan = _plan(config, task)
    batch, results, _ = _batched(task, config, plan, [(0, 0), (1, 1)])
    for k, seed in enumerate((0, 1)):
        training = Training(task, config, plan, alpha=0.0, seed=seed, index=k, device=CPU)
        result = training.run(lambda: False, lambda *a: None)
        for mine, theirs in zip(batch.parameters_of(k), training.model.parameters(), strict=True):
            torch.testing.assert_close(mine, theirs.detach(), rtol=1e-4, atol=1e-6)
        assert results[k].final[M.EXCESS_RISK] == pytest.approx(result.final[M.EXCESS_RISK], rel=1e-4)


def test_each_model_draws_its_own_poisson_batches_exactly_as_opacus_does(tasks):
    """The masks are Opacus' UniformWithReplacementSampler's for the same key (integers: exact), each model's own,
    at the rate on the sampler's grid, floor(q 2^24) / 2^24 (privengine.poisson: Opacus' float32 uniforms are
    multiples of 2^-24, so its comparison with that rate, exact in float32, is the same law, draw for draw)."""
    config = DPSGDConfig().replace(**DIGITS, model="linear")
    task = tasks("pixels")
    plan = _plan(config, task)
    members = [Member(0.0, seed, index, lambda *a: None) for seed, index in [(0, 0), (0, 1), (1, 2)]]
    batch = _Batch(task, config, plan, members, CPU)
    samplers = [iter(UniformWithReplacementSampler(
        num_samples=task.n_private, sample_rate=inclusion_rate(plan.sample_rate), steps=5,
        generator=noise_generator(config, m.seed, m.index, STREAM_SAMPLING, data=task.private_fingerprint,
                                  device=CPU, on="cpu"))) for m in members]
    for _ in range(5):
        idx, valid, counts = batch.sampling.draw()
        drawn = [idx[k][valid[k]].tolist() for k in range(3)]
        assert drawn == [next(s) for s in samplers]
        assert counts.tolist() == [len(d) for d in drawn]
        assert drawn[0] != drawn[1]  # same seed, another index: another stream


def test_shuffled_batches_are_torch_s_random_passes_over_each_model_s_examples(tasks):
    """sampling="shuffle": without an inclusion mask, each model's batches are those of torch's
    BatchSampler(RandomSampler) (what the Opacus path's loader drew before it shared the sampler); with one, the
    successive passes randperm(m) over the model's m included examples."""
    config = DPSGDConfig().replace(**DIGITS, model="linear", sampling="shuffle")
    task = tasks("pixels")
    plan = _plan(config, task)
    keys = [(0, 0), (1, 1)]
    members = [Member(0.0, seed, index, lambda *a: None) for seed, index in keys]
    inclusion = torch.rand(2, task.n_private, generator=torch.Generator().manual_seed(0)) < 0.3

    def generator(seed, index):
        return noise_generator(config, seed, index, STREAM_SAMPLING, data=task.private_fingerprint, device=CPU,
                               on="cpu")

    b = plan.expected_batch_size
    steps = task.n_private // b + 2  # into a second pass over all the examples
    plan = dataclasses.replace(plan, steps=steps)
    plain = _Batch(task, config, plan, members, CPU)
    masked = _Batch(task, config, plan, members, CPU, inclusion=inclusion)
    torch_batches = [iter(BatchSampler(RandomSampler(range(task.n_private), num_samples=steps * b,
                                                     generator=generator(*key)), b, drop_last=True)) for key in keys]
    passes = []
    for k, key in enumerate(keys):
        mine, g = inclusion[k].nonzero().reshape(-1), generator(*key)
        passes.append(torch.cat([mine[torch.randperm(len(mine), generator=g)]
                                 for _ in range(-(-steps * b // len(mine)))]).tolist())
    for step in range(steps):
        idx, valid, counts = plain.sampling.draw()
        assert valid.all() and counts.tolist() == [b, b]
        assert idx.tolist() == [next(batches) for batches in torch_batches]
        idx, _, _ = masked.sampling.draw()
        assert idx.tolist() == [p[step * b:(step + 1) * b] for p in passes]


def test_a_model_is_the_same_whatever_it_is_batched_with(tasks):
    """Same seed and index, other batch companions: the same Poisson batches and noise, so the same model (the
    models of a batch do not interact); another index with the same seed gives another model."""
    config = DPSGDConfig().replace(**DIGITS, model="scatter_linear", lr=2.0)
    task = tasks("scattering")
    plan = _plan(config, task)
    alone, _, _ = _batched(task, config, plan, [(0, 3)])
    together, _, _ = _batched(task, config, plan, [(1, 0), (0, 3), (0, 4)])
    for a, b in zip(alone.parameters_of(0), together.parameters_of(1), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(together.parameters_of(1)[-1], together.parameters_of(2)[-1])


def test_the_run_summaries_and_claims_of_the_two_paths_agree():
    config = DPSGDConfig().replace(**{**DIGITS, "epochs": 0.5}, model="scatter_linear", lr=2.0, n_seeds=3)
    batched_reporter, opacus_reporter = MemoryReporter(), MemoryReporter()
    batched = dpsgd_run.run(config, batched_reporter)
    opacus = dpsgd_run.run(config, opacus_reporter, model_batch=False)
    assert batched["privacy"] == opacus["privacy"]  # the same histories, so the same claims, to the bit
    assert [(m["seed"], m["steps"], m["stopped"]) for m in batched["models"]] == \
        [(m["seed"], m["steps"], m["stopped"]) for m in opacus["models"]] == \
        [(s, batched["steps_per_model"], False) for s in (0, 1, 2)]
    for mine, theirs in zip(batched["models"], opacus["models"], strict=True):
        assert mine[M.TEST_ACC] == pytest.approx(theirs[M.TEST_ACC], abs=1.5 / 180)
        assert mine[M.TRAIN_LOSS] == pytest.approx(theirs[M.TRAIN_LOSS], rel=1e-4)
    assert batched_reporter.metrics.keys() == opacus_reporter.metrics.keys()
    assert batched_reporter.metrics[M.EPSILON] == opacus_reporter.metrics[M.EPSILON]
    assert any("train together in a model batch" in line for line in batched_reporter.logs)
    assert any("one model at a time on Opacus (the model batch is off)" in line for line in opacus_reporter.logs)


def test_unbatchable_settings_take_the_opacus_path():
    base = DPSGDConfig().replace(dataset="digits", model="linear")
    assert unbatchable(base, 0.0) is None
    assert "alpha != 0" in unbatchable(base, 4.0)
    assert "model cnn" in unbatchable(base.replace(model="cnn"), 0.0)
    assert "model cnn" in unbatchable(base.replace(model="auto"), 0.0)
    assert unbatchable(DPSGDConfig(), 0.0) is None  # linreg: auto is linear
    assert "private normalisation" in unbatchable(base.replace(model="scatter_linear", normalization="private"), 0.0)
    reporter = MemoryReporter()
    summary = dpsgd_run.run(DPSGDConfig().replace(**{**DIGITS, "alphas": (0.0, 4.0), "epochs": 0.3}, model="linear",
                                                  n_seeds=2, subspace_rank=4, refresh_every=5), reporter)
    assert [(m["setting"], m["seed"]) for m in summary["models"]] == \
        [(M.ISOTROPIC, 0), ("alpha=4", 0), (M.ISOTROPIC, 1), ("alpha=4", 1)]  # (seed, setting) order, as before
    assert any(line.startswith("alpha=4: one model at a time on Opacus (alpha != 0") for line in reporter.logs)


def test_a_stop_during_the_batch_stops_every_model_at_the_same_step():
    config = DPSGDConfig().replace(**DIGITS, model="linear", n_seeds=3, lr=0.5)
    reporter = MemoryReporter(stop_after_metrics=10)  # a few evaluations in
    summary = dpsgd_run.run(config, reporter)
    assert summary["stopped"] and summary["stopped_during"].startswith("the batch of 3 models trained together")
    steps = {m["steps"] for m in summary["models"]}
    assert len(steps) == 1 and 0 < steps.pop() < summary["steps_per_model"]
    assert all(m["stopped"] for m in summary["models"]) and summary["models_trained"] == 3
    # each model is charged for the steps it took
    step = summary["models"][0]["steps"]
    each = next(c for c in summary["privacy"] if not c["headline"])
    assert each["epsilon"] == pytest.approx(epsilon_of([(1.0, summary["sample_rate"], step)], accountant="rdp",
                                                       delta=config.delta)[0], rel=1e-12)


def test_a_failure_during_the_batch_charges_every_model_that_reported():
    config = DPSGDConfig().replace(**DIGITS, model="linear", n_seeds=2, lr=0.5)
    real = dpsgd_run.train_models

    def failing(task, config, plan, members, **kwargs):
        def wrap(member):
            def on_eval(step, values, history):
                if step >= 4 * plan.eval_every:
                    raise RuntimeError("simulated failure in the batch")
                member.on_eval(step, values, history)
            return dataclasses.replace(member, on_eval=on_eval)
        return real(task, config, plan, [wrap(m) for m in members], **kwargs)

    reporter = MemoryReporter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dpsgd_run, "train_models", failing)
        with pytest.raises(RuntimeError, match="simulated failure in the batch"):
            dpsgd_run.run(config, reporter)
    charged = reporter.charged_summary()
    assert charged["models_trained"] == 0 and charged["models_charged"] == 2
    assert charged["failed_during"].startswith("the batch of 2 models trained together (models 1, 2 of 2)")
    assert all(m["failed"] and m["steps"] == charged["steps_per_model"] for m in charged["models"])


@pytest.mark.parametrize("model", ["scatter_linear", "mlp"])
def test_per_model_lr_clip_sigma_and_ema_agree_with_each_model_alone_on_opacus(tasks, model):
    """Models of several runs in one batch (a sweep's group): each with its own config (lr, clip norm, EMA decay,
    seed) and plan (sigma) agrees with its run's model trained alone on Opacus, keyed by its own config."""
    base = DPSGDConfig().replace(**DIGITS, model=model, momentum=0.5)
    task = tasks("scattering" if model.startswith("scatter") else "pixels")
    own = [(base.replace(lr=2.0, max_grad_norm=0.1, ema_decay=0.9, seed=0), 1.0),
           (base.replace(lr=0.5, max_grad_norm=1.0, ema_decay=0.0, seed=0), 2.5),
           (base.replace(lr=1.0, max_grad_norm=0.5, ema_decay=0.5, seed=3), 0.7)]
    plans = [dataclasses.replace(_plan(config, task), noise_multiplier=sigma) for config, sigma in own]
    reports: dict[int, list] = {}
    members = [Member(0.0, config.seed, 0, lambda step, values, history, i=k: reports.setdefault(i, []).append(
        (step, values, history)), config=config, plan=plan) for k, ((config, _), plan) in enumerate(zip(own, plans))]
    batch = _Batch(task, base, plans[0], members, CPU)
    results = batch.run(lambda: False)
    for k, ((config, sigma), plan) in enumerate(zip(own, plans)):
        alone: list = []
        training = Training(task, config, plan, alpha=0.0, seed=config.seed, index=0, device=CPU)
        result = training.run(lambda: False, lambda step, values, history: alone.append((step, values, history)))
        for mine, theirs in zip(batch.parameters_of(k), training.model.parameters(), strict=True):
            torch.testing.assert_close(mine, theirs.detach(), rtol=1e-4, atol=1e-5)
        assert results[k].history == result.history == [(sigma, plan.sample_rate, plan.steps)]
        for (s1, mine, h1), (s2, theirs, h2) in zip(reports[k], alone, strict=True):
            assert (s1, h1) == (s2, h2)
            assert mine[M.TEST_ACC] == pytest.approx(theirs[M.TEST_ACC], abs=1.5 / task.n_test)
            assert mine[M.TRAIN_LOSS] == pytest.approx(theirs[M.TRAIN_LOSS], rel=1e-4)
    assert not torch.equal(batch.parameters_of(0)[-1], batch.parameters_of(1)[-1])  # same seed and index, own keys


def test_a_member_that_stops_leaves_the_batch_and_the_others_are_unchanged(tasks):
    """Member 1's own stop comes after a few steps: it returns its partial result (on_done at once) while the others
    train on to the end with exactly the models they have without it."""
    config = DPSGDConfig().replace(**DIGITS, model="linear", lr=0.5)
    task = tasks("pixels")
    plan = _plan(config, task)
    steps = iter(range(10**6))
    done: list = []
    stop_after = 3  # checks: before step 1, 2, 3 say no, then yes
    members = [Member(0.0, 0, 0, lambda *a: None, on_done=done.append),
               Member(0.0, 0, 1, lambda *a: None, should_stop=lambda: next(steps) >= stop_after, on_done=done.append),
               Member(0.0, 1, 2, lambda *a: None, on_done=done.append)]
    batch = _Batch(task, config, plan, members, CPU)
    results = batch.run(lambda: False)
    assert results[1].stopped and 0 < results[1].steps_done < plan.steps and done[0] is results[1]
    assert results[1].history == [(1.0, plan.sample_rate, results[1].steps_done)]
    assert [r.stopped for r in (results[0], results[2])] == [False, False]
    assert results[0].steps_done == results[2].steps_done == plan.steps
    reference, _, _ = _batched(task, config, plan, [(0, 0), (1, 2)])
    for k, position in ((0, 0), (1, 2)):
        for a, b in zip(reference.parameters_of(k), batch.parameters_of(position), strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_members_that_differ_in_a_shared_setting_are_refused(tasks):
    config = DPSGDConfig().replace(**DIGITS, model="linear")
    task = tasks("pixels")
    plan = _plan(config, task)
    other = Member(0.0, 0, 1, lambda *a: None, config=config.replace(momentum=0.9))
    with pytest.raises(ValueError, match="its config differs in momentum"):
        train_models(task, config, plan, [Member(0.0, 0, 0, lambda *a: None), other], device=CPU,
                     should_stop=lambda: False)


def test_the_progress_of_a_batch_rises_with_its_steps():
    """The batched models train first: their progress is step / steps of the run (it read 1.0 from the first
    evaluation on, as if the batch's models had finished before it started)."""
    fractions: list[float] = []

    class Recording(MemoryReporter):
        def progress(self, fraction: float, text: str = "") -> None:
            super().progress(fraction, text)
            if "step" in text:
                fractions.append(fraction)

    config = DPSGDConfig().replace(**DIGITS, model="linear", n_seeds=2, lr=0.5)
    dpsgd_run.run(config, Recording())
    assert fractions and fractions == sorted(fractions) and fractions[0] < 0.2 and fractions[-1] == 1.0


def _unmasked(patch) -> None:
    """The code path before padded slots were zeroed: they read example 0's features (kept only as a reference)."""
    real = ClippedGradients.inputs
    patch.setattr(ClippedGradients, "inputs", lambda self, idx, padding: real(self, idx, None))


@pytest.mark.parametrize("model, cached", [("scatter_linear", True), ("mlp", True), ("linear", False)])
def test_zeroed_padded_slots_leave_every_real_result_bit_identical(tasks, model, cached):
    """The padded slots of a Poisson batch hold zeros instead of example 0's features: for the same keys the models,
    the evaluations, the losses and the histories are those of the unmasked path to the bit (padded slots weigh 0
    in both; the samples and the noise do not change). ``cached``: the prefix features cached or computed per
    chunk."""
    config = DPSGDConfig().replace(**DIGITS, model=model, lr=1.0, momentum=0.5)
    task = tasks("scattering" if model.startswith("scatter") else "pixels")
    plan = _plan(config, task)
    keys = [(0, 0), (1, 1), (0, 2)]
    with pytest.MonkeyPatch.context() as patch:
        if not cached:
            patch.setattr("privengine.dpsgd.stacked_model.PREFIX_CACHE_BYTES", 0)
        masked, masked_results, masked_reports = _batched(task, config, plan, keys)
        assert (masked.gradients.private_features is not None) == cached
        _unmasked(patch)
        plain, plain_results, plain_reports = _batched(task, config, plan, keys)
    for k in range(len(keys)):
        for a, b in zip(masked.parameters_of(k), plain.parameters_of(k), strict=True):
            assert torch.equal(a, b)
        assert masked_results[k].history == plain_results[k].history
        assert masked_results[k].final == plain_results[k].final
    assert masked_reports == plain_reports  # every evaluation: step, accuracy, train loss, history


def test_an_overflowing_example_0_does_not_poison_the_models_that_never_sample_it(tasks):
    """Example 0 has infinite features and no model samples it (``inclusion``): before, the padded slots read it,
    and 0 x inf made NaN every model's clipped sum; now the models are finite and equal, to the bit, those trained
    with a finite example 0 (its data key pinned, so the same batches and noise)."""
    config = DPSGDConfig().replace(**DIGITS, model="mlp", lr=1.0)
    task = tasks("pixels")
    x = task.x_private.clone()
    x[0] = math.inf
    pinned = Future()
    pinned.set_result(task.private_fingerprint)  # the same data key, so the same batches and noise
    poisoned = dataclasses.replace(task, x_private=x, fingerprint_pending=PendingFingerprint(
        x, task.y_private, (x._version, task.y_private._version), pinned))
    plan = _plan(config, task)
    inclusion = torch.ones(2, task.n_private, dtype=torch.bool)
    inclusion[:, 0] = False

    def train(on):
        members = [Member(0.0, seed, index, lambda *a: None) for seed, index in [(0, 0), (1, 1)]]
        batch = _Batch(on, config, plan, members, CPU, inclusion=inclusion)
        return batch, batch.run(lambda: False)

    clean, clean_results = train(task)
    dirty, dirty_results = train(poisoned)
    for k in range(2):
        assert all(torch.isfinite(p).all() for p in dirty.parameters_of(k))
        for a, b in zip(dirty.parameters_of(k), clean.parameters_of(k), strict=True):
            assert torch.equal(a, b)
        assert dirty_results[k].final == clean_results[k].final
    with pytest.MonkeyPatch.context() as patch:  # the unmasked path: the NaN this guards against
        _unmasked(patch)
        unguarded, _ = train(poisoned)
    assert not all(torch.isfinite(p).all() for p in unguarded.parameters_of(0))
