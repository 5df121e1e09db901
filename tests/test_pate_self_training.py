"""PATE issue 13: the self-training student (pseudo-labels on the public pool, sharpening, mixup)."""

from __future__ import annotations

import math

import pytest
import torch
from sklearn.datasets import make_moons

from privengine.errors import ConfigError
from privengine.jobs import JobManager
from privengine.pate import data as pate_data
from privengine.pate import pipeline
from privengine.pate import run as pate_run
from privengine.pate.config import PateConfig
from privengine.pate.models import build_model
from privengine.pate.self_training import (SelfTrainingSettings, align_to_uniform, fit_soft, mixup_weights,
                                          round_targets, sharpen, train_self_training)
from privengine.pate.student import accuracy
from tests.fake_mnist import fake_mnist
from tests.memory_reporter import MemoryReporter


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _settings(**changes) -> SelfTrainingSettings:
    base = dict(rounds=6, epochs=10, lr=1e-2, batch_size=64, confidence=0.8, mixup_alpha=0.4)
    return SelfTrainingSettings(**{**base, **changes})


def test_sharpen_is_the_renormalised_power_and_keeps_the_ranking():
    p = torch.tensor([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6]])
    squared = p ** 2
    torch.testing.assert_close(sharpen(p, 0.5), squared / squared.sum(1, keepdim=True))
    torch.testing.assert_close(sharpen(p, 1.0), p)
    out = sharpen(p)
    torch.testing.assert_close(out.sum(1), torch.ones(2))
    assert torch.equal(out.argmax(1), p.argmax(1)) and (out.max(1).values > p.max(1).values).all()


def test_alignment_divides_by_the_mean_prediction_and_leaves_a_balanced_pool_alone():
    p = torch.tensor([[0.8, 0.2], [0.6, 0.4], [0.7, 0.3]])  # mean (0.7, 0.3): class 0 favoured
    ratio = p / torch.tensor([0.7, 0.3])
    torch.testing.assert_close(align_to_uniform(p), ratio / ratio.sum(1, keepdim=True))
    assert (align_to_uniform(p).mean(0) - 0.5).abs().max() < (p.mean(0) - 0.5).abs().max()
    balanced = torch.tensor([[0.9, 0.1], [0.1, 0.9]])
    torch.testing.assert_close(align_to_uniform(balanced), balanced)


def test_a_soft_fit_without_mixup_learns_the_given_distribution():
    """Soft cross-entropy is minimised by softmax f(x) = t: a free bias per input learns any target row."""
    torch.manual_seed(0)
    x = torch.eye(3)
    targets = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    model = torch.nn.Linear(3, 3)
    assert fit_soft(model, x, targets, steps=1500, settings=_settings(lr=5e-2, batch_size=3, mixup_alpha=0.0),
                    generator=_gen(), should_stop=lambda: False)
    torch.testing.assert_close(model(x).softmax(1).detach(), targets, atol=2e-2, rtol=0)


def _moons(n: int = 700, seed: int = 0):
    x, y = make_moons(n, noise=0.08, random_state=seed)
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


def test_self_training_learns_from_the_pool_what_two_labels_cannot_teach():
    """One labelled point per moon: the fit on the labels alone draws a poor boundary (about 70 % right); the
    rounds of pseudo-labels on 500 unlabelled points carry the student along the moons (about 86 %; without
    mixup the same rounds stay at 70 %: a point far from the labels never becomes confident)."""
    x, y = _moons()
    pool_x, test_x, test_y = x[:500], x[500:], y[500:]
    labelled = torch.tensor([int((y[:500] == 0).nonzero()[0]), int((y[:500] == 1).nonzero()[0])])
    rounds = []
    init = _gen(0)
    model = train_self_training(lambda: build_model("mlp", (2,), 2, width=64, depth=2, generator=init), pool_x,
                                labelled, y[labelled], 2, test_x, test_y, _settings(), generator=_gen(),
                                on_round=lambda r, acc, frac: rounds.append((r, acc, frac)))
    assert [r for r, _, _ in rounds] == list(range(7))
    assert rounds[0][2] == 0.0 and all(0.0 < frac <= 1.0 for _, _, frac in rounds[1:])
    assert accuracy(model, test_x, test_y) == rounds[-1][1]  # the returned model is the one evaluated
    assert rounds[0][1] < 0.8 and rounds[-1][1] > rounds[0][1] + 0.1, rounds


def test_the_next_round_keeps_the_answers_and_the_confident_pseudo_labels_only():
    """Four pool images, K = 2; rows 2 and 0 answered, in that order. Row 0's answer (class 1) contradicts a
    confident prediction (class 0) and must win; row 1 is confident and gets its sharpened prediction; row 3 is
    below tau and is left out. The pseudo-labelled fraction counts unanswered images only: 1 of 2."""
    probabilities = torch.tensor([[0.99, 0.01], [0.9, 0.1], [0.5, 0.5], [0.6, 0.4]])
    rows, answers = torch.tensor([2, 0]), torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    targets, keep, fraction = round_targets(probabilities, rows, answers,
                                            _settings(confidence=0.8, align_distribution=False))
    assert keep.tolist() == [True, True, True, False]
    torch.testing.assert_close(targets[rows], answers)  # each answer on its own row, whatever the order
    torch.testing.assert_close(targets[1], torch.tensor([0.81, 0.01]) / 0.82)  # p^2 renormalised (T = 1/2)
    assert fraction == 0.5


def test_a_fully_answered_pool_has_no_pseudo_labels():
    probabilities = torch.tensor([[0.99, 0.01], [0.3, 0.7]])
    answers = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    targets, keep, fraction = round_targets(probabilities, torch.tensor([1, 0]), answers,
                                            _settings(confidence=0.8, align_distribution=False))
    assert keep.all() and fraction == 0.0
    torch.testing.assert_close(targets, answers)


def test_the_confidence_test_reads_the_aligned_predictions():
    """With alignment on, a pool whose mean prediction favours class 0 has class 0 scaled down before the
    threshold: a row at p = (0.85, 0.15) passes tau = 0.8 unaligned but not aligned."""
    probabilities = torch.tensor([[0.85, 0.15], [0.85, 0.15], [0.85, 0.15], [0.05, 0.95]])
    rows, answers = torch.tensor([3]), torch.tensor([[0.0, 1.0]])
    _, keep_raw, _ = round_targets(probabilities, rows, answers, _settings(confidence=0.8, align_distribution=False))
    _, keep_aligned, fraction = round_targets(probabilities, rows, answers,
                                              _settings(confidence=0.8, align_distribution=True))
    assert keep_raw.tolist() == [True, True, True, True]
    aligned = align_to_uniform(probabilities)
    assert aligned[0, 0] < 0.8  # 0.85 / 0.65 against 0.15 / 0.35, renormalised: about 0.75
    assert keep_aligned.tolist() == [False, False, False, True] and fraction == 0.0


def test_self_training_is_reproducible_and_stops_when_asked():
    x, y = _moons(300)
    finals = []
    for _ in range(2):
        init = _gen(1)
        model = train_self_training(lambda: build_model("mlp", (2,), 2, width=16, depth=1, generator=init), x[:200],
                                    torch.arange(10), y[:10], 2, x[200:], y[200:], _settings(rounds=2, epochs=2),
                                    generator=_gen(5))
        finals.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    torch.testing.assert_close(finals[0], finals[1], rtol=0, atol=0)
    assert train_self_training(lambda: torch.nn.Linear(2, 2), x, torch.arange(4), y[:4], 2, x, y, _settings(),
                               generator=_gen(), should_stop=lambda: True) is None


def test_self_training_knobs_are_checked_with_the_field_named():
    with pytest.raises(ConfigError, match="`self_training_rounds`"):
        PateConfig(student="self_training", self_training_rounds=0).validate()
    with pytest.raises(ConfigError, match="`mixup_alpha`"):
        PateConfig(student="self_training", mixup_alpha=-0.1).validate()
    PateConfig(student="self_training").validate()  # tabular data is fine: mixup needs no image


@pytest.mark.slow
def test_a_self_training_run_records_the_student_and_its_rounds(store):
    manager = JobManager(store)
    try:
        run_id = manager.submit("pate", {"teachers": 20, "teacher_epochs": 3, "queries": 200,
                                         "student": "self_training", "self_training_rounds": 2, "student_epochs": 2,
                                         "baseline": True, "baseline_epochs": 1, "aggregator": "gnmax",
                                         "sigma": 2.0})
        run = manager.wait(run_id, timeout=300)
    finally:
        manager.shutdown()
    assert run.state == "finished", run.traceback
    assert "self-training" in run.summary["student"] and "2 rounds" in run.summary["student"]
    assert run.summary["student_architecture"] == run.summary["architecture"] == "mlp"
    metrics = store.metrics(run_id)
    student = metrics[metrics["name"] == "student_accuracy"]
    assert list(student["step"]) == [2, 4, 6]  # after each round, at the passes over the pool so far
    assert student["value"].iloc[-1] == pytest.approx(run.summary["student_accuracy"])
    assert set(metrics[metrics["name"] == "student_pseudo_labelled"]["step"]) == {2, 4, 6}
    assert run.summary["baseline_accuracy"] > 0.5


@pytest.mark.slow
def test_the_scatter_student_learns_from_the_answered_rows_of_the_pool_features(monkeypatch):
    """Data flow of a run with ScatterNet teachers and the self-training student (fake MNIST): the student
    gets the pool's scattering features, exactly the submitted rows that were answered and exactly their
    noisy labels, and is tested on the test split's features."""
    fake_mnist(monkeypatch)
    seen: dict = {}

    def spy(function, name):
        def wrapper(*args, **kwargs):
            seen[name] = (args, kwargs, function(*args, **kwargs))
            return seen[name][2]
        monkeypatch.setattr(pipeline, function.__name__, wrapper)

    spy(pipeline.select_queries, "select")
    spy(pipeline.aggregate, "aggregate")
    spy(pipeline.train_self_training, "student")
    config = PateConfig(dataset="mnist", architecture="scatter_linear", teachers=4, teacher_epochs=2, queries=60,
                        query_selection="typical", selection_clusters=5, aggregator="confident_gnmax",
                        threshold=2.0, sigma1=1.0, sigma2=1.0, student="self_training", self_training_rounds=1,
                        student_epochs=1, baseline=False)
    summary = pate_run.run(config, MemoryReporter())
    submitted, answers = seen["select"][2], seen["aggregate"][2]
    assert 0 < int(answers.answered.sum()) < 60  # some rows left out, so the indexing is tested
    (_, pool_x, rows, labels, _, test_x, _, _), _, _ = seen["student"]
    features = pate_data.load_scattering_inputs("mnist")
    torch.testing.assert_close(pool_x, features.pool_x)
    torch.testing.assert_close(test_x, features.test_x)
    assert rows.tolist() == submitted[answers.answered].tolist()
    assert labels.tolist() == answers.labels[answers.answered].tolist()
    assert summary["queries_answered"] == len(rows) and summary["student_architecture"] == "scatter_linear"


def test_the_draws_do_not_depend_on_the_block_they_are_drawn_in(monkeypatch):
    """The batches and mixup weights are drawn ahead in blocks (for the CUDA graph's buffers); a fit drawn in blocks
    of 7 steps ends with the same weights, to the bit, as one drawn in a single block."""
    from privengine.pate import self_training

    x = torch.randn(100, 5, generator=_gen(3))
    targets = torch.softmax(torch.randn(100, 3, generator=_gen(4)), 1)
    weights = []
    for block in (self_training.DRAW_BLOCK, 7):
        monkeypatch.setattr(self_training, "DRAW_BLOCK", block)
        torch.manual_seed(0)
        model = torch.nn.Linear(5, 3)
        assert fit_soft(model, x, targets, steps=30, settings=_settings(batch_size=16), generator=_gen(),
                        should_stop=lambda: False)
        weights.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*weights))


def test_the_learning_rates_are_the_cosine_annealing_to_zero():
    from privengine.schedules import cosine_learning_rates

    rates = cosine_learning_rates(0.1, 50)
    expected = [0.05 * (1 + math.cos(math.pi * t / 50)) for t in range(50)]
    assert len(rates) == 50 and rates[0] == 0.1
    assert max(abs(a - b) for a, b in zip(rates, expected)) < 1e-12


def _step_by_step_fit(model, x, targets, *, steps, settings, generator) -> None:
    """The reference: the fit as a plain loop that draws each step's rows, mixup weights and partners when it takes
    the step, and steps torch's own scheduler (what fit_soft did before it drew ahead for the CUDA graph)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    batch = min(settings.batch_size, len(x))
    order, position = torch.randperm(len(x), generator=generator), 0
    for _ in range(steps):
        if position + batch > len(x):
            order, position = torch.randperm(len(x), generator=generator), 0
        rows = order[position:position + batch]
        position += batch
        lam = mixup_weights(torch.rand(batch, generator=generator, dtype=torch.float64), settings.mixup_alpha)
        partner = torch.randperm(batch, generator=generator)
        inputs = lam[:, None] * x[rows] + (1 - lam[:, None]) * x[rows][partner]
        soft = lam[:, None] * targets[rows] + (1 - lam[:, None]) * targets[rows][partner]
        loss = -(soft * model(inputs).log_softmax(1)).sum(1).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()


def test_mixup_weights_from_a_generator_have_the_folded_beta_distribution():
    """Issue 36, item 5: the mixup weights come from the fit's generator (Beta's inverse distribution function at
    its uniforms), with the distribution of max(l, 1 - l), l ~ Beta(alpha, alpha), that torch's Beta sampler (the
    global generator's, drawn before) gives: a two-sample Kolmogorov-Smirnov test does not tell them apart."""
    from scipy.stats import ks_2samp

    for alpha in (0.4, 2.0):
        drawn = mixup_weights(torch.rand(20_000, generator=_gen(8), dtype=torch.float64), alpha)
        assert drawn.dtype == torch.get_default_dtype() and 0.5 <= float(drawn.min()) and float(drawn.max()) <= 1.0
        torch.manual_seed(9)
        beta = torch.distributions.Beta(alpha, alpha).sample((20_000,))
        assert ks_2samp(drawn.numpy(), torch.maximum(beta, 1 - beta).numpy()).pvalue > 1e-3, alpha
    again = mixup_weights(torch.rand(20_000, generator=_gen(8), dtype=torch.float64), 2.0)
    assert torch.equal(drawn, again)  # the generator's draws alone decide them


@pytest.mark.slow
def test_the_fit_is_the_step_by_step_loop_to_the_bit():
    """fit_soft (draws ahead in blocks, rates read off the scheduler) gives the plain loop's weights exactly, on
    the CPU, across a reshuffle of the rows and more steps than one block of draws."""
    x = torch.randn(70, 6, generator=_gen(5))
    targets = torch.softmax(torch.randn(70, 3, generator=_gen(6)), 1)
    settings = _settings(batch_size=16, mixup_alpha=0.4)
    weights = []
    for fit in (fit_soft, _step_by_step_fit):
        torch.manual_seed(3)
        model = torch.nn.Linear(6, 3)
        kwargs = {"should_stop": lambda: False} if fit is fit_soft else {}
        fit(model, x, targets, steps=1100, settings=settings, generator=_gen(7), **kwargs)
        weights.append([p.detach().clone() for p in model.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*weights))
