"""PATE engine: batched teachers, aggregation, privacy analysis wiring, seed-bug regressions, end-to-end runs."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privengine.accounting.pate import GNMAX_ORDERS, lnmax_analysis
from privengine.errors import ConfigError
from privengine.jobs import JobManager
from privengine.pate.aggregate import aggregate, vote_counts
from privengine.claims import claims_of
from privengine.pate.config import PateConfig
from privengine.pate.data import load_pate_data
from privengine.pate.ensemble import Ensemble, partition_rows, train_ensemble
from privengine.pate.models import MLP, ConvNet, ScatterLinear, build_model
from privengine.pate.privacy import analyse
from privengine.randomness import data_fingerprint
from tests.conftest import SHARED_DATA

CPU = torch.device("cpu")


def _mlps(k: int, seed: int = 0) -> list[torch.nn.Module]:
    generator = torch.Generator().manual_seed(seed)
    return [build_model("mlp", (6,), 3, width=8, depth=1, generator=generator) for _ in range(k)]


# ---- config -----------------------------------------------------------------------------

def test_cross_field_rules_name_the_field():
    with pytest.raises(ConfigError, match=r"`teachers` must be at most 129 for digits \(1297 private examples, at least 10 per teacher\); got 200"):
        PateConfig(dataset="digits", teachers=200).validate()
    with pytest.raises(ConfigError, match="`queries` must be at most 4500 for synthetic"):
        PateConfig(queries=4800).validate()


# ---- batched teachers ---------------------------------------------------------------------

def test_batched_training_equals_training_each_model_alone():
    torch.manual_seed(0)
    k, n = 3, 40
    x, y = torch.randn(k, n, 6), torch.randint(0, 3, (k, n))
    batched = Ensemble(_mlps(k), CPU)
    alone = [Ensemble(_mlps(1), CPU) for _ in range(k)]
    for i, single in enumerate(alone):  # same initial parameters
        for name, p in single.params.items():
            p.data.copy_(batched.params[name].data[i:i + 1])
    gen = torch.Generator().manual_seed(0)
    # full-batch epochs: the data order cannot differ between the two ways of training
    train_ensemble(batched, x, y, epochs=5, lr=0.01, batch_size=n, generator=gen)
    for i, single in enumerate(alone):
        train_ensemble(single, x[i:i + 1], y[i:i + 1], epochs=5, lr=0.01, batch_size=n, generator=gen)
        for name, p in single.params.items():
            torch.testing.assert_close(p.data[0], batched.params[name].data[i], rtol=1e-5, atol=1e-6)


def test_predict_matches_direct_logits_and_chunks(monkeypatch):
    import privengine.pate.ensemble as ensemble_module

    ens = Ensemble(_mlps(4), CPU)
    x = torch.randn(50, 6)
    direct = ens.logits(x.expand(4, 50, 6)).argmax(-1)
    monkeypatch.setattr(ensemble_module, "ACTIVATION_BUDGET", 4 * 8 * 3)  # forces chunks of 3 examples
    assert torch.equal(ens.predict(x), direct)
    assert ens.predict(x, should_stop=lambda: True) is None


def test_partition_is_disjoint_and_equal_sized():
    rows = partition_rows(103, 10, torch.Generator().manual_seed(1))
    assert rows.shape == (10, 10) and max(rows.flatten().tolist()) < 103
    assert len(set(rows.flatten().tolist())) == 100  # no example in two partitions


def test_teachers_learn_on_separable_data():
    torch.manual_seed(0)
    centers = torch.randn(3, 6) * 4
    y = torch.randint(0, 3, (600,))
    x = centers[y] + torch.randn(600, 6)
    rows = partition_rows(len(y), 5, torch.Generator().manual_seed(0))
    xs, ys = x[rows], y[rows]
    ens = Ensemble(_mlps(5), CPU)
    train_ensemble(ens, xs, ys, epochs=15, lr=0.01, batch_size=16, generator=torch.Generator().manual_seed(0))
    accuracy = (ens.predict(x) == y).float().mean(1)
    assert accuracy.min() > 0.9


# ---- aggregation and the seed bugs (REFERENCE 1d) ------------------------------------------

def test_vote_counts_use_the_true_number_of_classes():
    predictions = torch.tensor([[0, 1, 1], [0, 1, 0]])  # classes 2..9 never predicted
    counts = vote_counts(predictions, 10)
    assert counts.shape == (3, 10)
    assert counts[:, 0].tolist() == [2, 0, 1] and counts[:, 2:].sum() == 0


def test_laplace_noise_is_real_valued_so_ties_break_both_ways():
    # With Lap(0.1) noise truncated to integers (the seed's bug) the tie would always go to class 0.
    counts = torch.tensor([[5.0, 5.0, 0.0]]).repeat(4000, 1)
    answers = aggregate(counts, aggregator="lnmax", gamma=10.0, generator=torch.Generator().manual_seed(0))
    share = (answers.labels == 1).double().mean().item()
    assert 0.45 < share < 0.55  # binomial sd ~0.008
    assert set(answers.labels.tolist()) == {0, 1}


def test_gaussian_noise_scale():
    counts = torch.zeros(20000, 2)
    counts[:, 0] = 1.0
    answers = aggregate(counts, aggregator="gnmax", sigma=1.0, generator=torch.Generator().manual_seed(0))
    # P[N(0,1) - N(0,1) > 1] = P[N(0, 2) > 1] = 1 - Phi(1/sqrt 2)
    expected = 0.5 * math.erfc(1 / 2)
    assert abs((answers.labels == 1).double().mean().item() - expected) < 0.01


def test_confident_gnmax_answers_only_above_the_threshold():
    counts = torch.tensor([[90.0, 10.0], [50.0, 50.0]]).repeat(100, 1)
    answers = aggregate(counts, aggregator="confident_gnmax", threshold=80.0, sigma1=1.0, sigma2=1.0,
                        generator=torch.Generator().manual_seed(0))
    assert answers.answered[0::2].all() and not answers.answered[1::2].any()
    assert (answers.labels[1::2] == -1).all() and (answers.labels[0::2] == 0).all()


def _votes(n=60, teachers=250, seed=0):
    rng = np.random.default_rng(seed)
    top = rng.integers(120, 250, n)
    votes = np.zeros((n, 10))
    votes[np.arange(n), rng.integers(0, 10, n)] = top
    votes[:, 9] += teachers - votes.sum(1)  # the rest vote for class 9 (or add to it)
    return votes


TEACHER_DATA = data_fingerprint(np.arange(10))  # stands for the fingerprint of the teachers' private data


def _analyse(votes, answered, config, n_private=60_000):
    return analyse(votes, answered, config, n_private=n_private, data=TEACHER_DATA)


def _kinds(claims) -> dict:
    """Claims by kind: "a priori" (the headline), "data-dependent", "sanitized" (GNMax and Confident-GNMax with
    sanitize on), "realised" and "odometer" (Confident-GNMax only)."""
    def kind(c) -> str:
        if c.headline:
            return "a priori"
        if "realised data-dependent" in c.label:
            return "realised"
        return "odometer" if "odometer" in c.label else "sanitized" if "sanitized" in c.label else "data-dependent"
    by_kind = {kind(c): c for c in claims}
    assert len(by_kind) == len(claims)
    return by_kind


def test_analysis_charges_the_answered_queries_not_rows_indexed_by_labels():
    votes = _votes()
    config = PateConfig(aggregator="lnmax", gamma=0.05)
    report = _analyse(votes, np.ones(len(votes), dtype=bool), config)
    assert report.analysis.eps == pytest.approx(lnmax_analysis(votes, 0.05, 1e-5).eps)
    labels = np.argmax(votes, axis=1)  # what the seed passed as "indices"
    assert report.analysis.eps != pytest.approx(lnmax_analysis(votes[labels], 0.05, 1e-5).eps)


def test_data_independent_bound_counts_answered_queries_only():
    votes = _votes()
    answered = np.zeros(len(votes), dtype=bool)
    answered[:17] = True
    report = _analyse(votes, answered, PateConfig(aggregator="gnmax", sigma=40.0, sanitize=False))
    lam = GNMAX_ORDERS
    expected = np.min(17 * lam / 40.0**2 + math.log(1e5) / (lam - 1))
    assert report.analysis.data_independent_eps == pytest.approx(expected, rel=1e-12)
    claims = _kinds(report.claims)
    assert claims["a priori"].epsilon == report.analysis.data_independent_eps
    assert claims["data-dependent"].epsilon <= claims["a priori"].epsilon
    assert "Thm 6" in claims["data-dependent"].accountant and claims["data-dependent"].delta == 1e-5
    # the partition depends on the dataset size, so only replace-one neighbours keep the one-vote sensitivity
    assert "replace one" in claims["data-dependent"].neighbouring
    assert "add/remove is not covered" in claims["a priori"].neighbouring


# ---- issue 10: which PATE figure is publishable, and what the claims must say -------------------

@pytest.mark.parametrize("aggregator", ["lnmax", "gnmax", "confident_gnmax"])
def test_the_headline_is_the_data_independent_bound_never_the_data_dependent_one(aggregator):
    votes = _votes()
    report = _analyse(votes, np.ones(len(votes), dtype=bool), PateConfig(aggregator=aggregator, sigma=40.0,
                                                                         threshold=150.0, sigma1=60.0))
    (headline,) = [c for c in report.claims if c.headline]
    assert headline.label.startswith("data-independent (a priori)")
    dependent = _kinds(report.claims)["data-dependent"]
    assert "not publishable" in dependent.label and dependent.epsilon < headline.epsilon


@pytest.mark.parametrize("sanitize", [False, True])
def test_confident_gnmax_headline_is_a_priori_whatever_was_answered(sanitize):
    votes = _votes(n=200)
    config = PateConfig(aggregator="confident_gnmax", threshold=150.0, sigma1=60.0, sigma2=20.0, sanitize=sanitize)
    few, many = np.zeros(200, dtype=bool), np.ones(200, dtype=bool)
    few[:20] = True
    reports = [_analyse(votes, mask, config) for mask in (few, many)]
    headlines = [_kinds(r.claims)["a priori"] for r in reports]
    lam = GNMAX_ORDERS
    expected = np.min(200 * (lam / (2 * 60.0**2) + lam / 20.0**2) + math.log(1e5) / (lam - 1))
    if sanitize:  # the release's cost is data-independent too (tests/test_pate_sanitized.py checks its formula)
        assert headlines[0].epsilon == headlines[1].epsilon > expected
        return
    assert headlines[0].epsilon == headlines[1].epsilon == pytest.approx(expected, rel=1e-12)
    odometer = _kinds(reports[0].claims)["odometer"]  # the realised figure depends on the answered queries
    assert odometer.epsilon == reports[0].realised.data_independent_eps < headlines[0].epsilon
    assert "20 answered" in odometer.label and "not an a-priori guarantee" in odometer.caveats[0]


@pytest.mark.parametrize("aggregator", ["lnmax", "gnmax", "confident_gnmax"])
def test_every_pate_claim_lists_the_unprotected_diagnostics(aggregator):
    votes = _votes()
    report = _analyse(votes, np.ones(len(votes), dtype=bool), PateConfig(aggregator=aggregator))
    for claim in report.claims:
        text = " ".join(claim.caveats)
        for diagnostic in ("vote-margin histogram", "noise-free ensemble accuracy", "per-teacher accuracies",
                           "smooth-sensitivity value", "non-private baseline"):
            assert diagnostic in text, (claim.label, diagnostic)


def test_pate_warns_when_delta_is_not_small_against_one_over_n():
    votes = _votes()
    answered = np.ones(len(votes), dtype=bool)
    large = _analyse(votes, answered, PateConfig(aggregator="gnmax", delta=1e-3), n_private=1297)
    small = _analyse(votes, answered, PateConfig(aggregator="gnmax", delta=1e-5), n_private=1297)
    assert all(any("not small against 1/n" in c for c in claim.caveats) for claim in large.claims)
    assert not any("not small against 1/n" in c for claim in small.claims for c in claim.caveats)


@pytest.mark.parametrize("dataset", ["synthetic", "digits"])
def test_embedded_data_is_standardised_with_public_statistics_only(dataset):
    data = load_pate_data(dataset)
    public = torch.cat([data.pool_x, data.test_x]).double()
    dims = 0 if dataset == "synthetic" else None
    mean = public.mean(dim=dims) if dims is not None else public.mean()
    std = public.std(dim=dims) if dims is not None else public.std()
    assert torch.allclose(mean, torch.zeros_like(mean), atol=1e-5)
    assert torch.allclose(std, torch.ones_like(std), atol=1e-5)


def test_convnet_outputs_one_logit_per_class():
    # the seed's Net had 10 outputs for CIFAR-100
    model = build_model("convnet", (3, 32, 32), 100, width=8, depth=3, generator=torch.Generator())
    logits = model(torch.randn(2, 3, 32, 32))
    assert logits.shape == (2, 100)
    assert torch.allclose(torch.log_softmax(logits, dim=1).exp().sum(1), torch.ones(2))


@pytest.mark.parametrize("architecture, shape", [("convnet", (1, 12, 12)), ("mlp", (6,)),
                                                 ("scatter_linear", (81, 7, 7))])
def test_models_are_torchs_default_initialisation_drawn_from_their_generator(architecture, shape):
    """Issue 36, item 5: build_model draws every parameter from its generator, the draws torch's default initialisation
    makes from the global generator (a module built after ``torch.manual_seed(s)`` has the weights of one built from
    a generator seeded ``s``), and reads nothing of the global generator's state."""
    def weights(model):
        return [p.detach().clone() for p in model.parameters()]

    built = []
    for global_seed in (1, 2):
        torch.manual_seed(global_seed)
        built.append(weights(build_model(architecture, shape, 3, width=8, depth=1,
                                         generator=torch.Generator().manual_seed(7))))
    torch.manual_seed(7)
    default = weights({"convnet": lambda: ConvNet(shape, 3, width=8, depth=1),
                       "mlp": lambda: MLP(6, 3, width=8, depth=1),
                       "scatter_linear": lambda: ScatterLinear(shape, 3)}[architecture]())
    for first, second, reference in zip(*built, default, strict=True):
        assert torch.equal(first, second) and torch.equal(first, reference)


# ---- end to end ----------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("aggregator", ["lnmax", "gnmax", "confident_gnmax"])
def test_tiny_run_through_the_job_manager(store, aggregator):
    manager = JobManager(store)
    try:
        run_id = manager.submit("pate", {"teachers": 20, "teacher_epochs": 3, "student_epochs": 5, "queries": 300,
                                         "aggregator": aggregator, "threshold": 10.0, "sigma1": 5.0, "sigma2": 4.0,
                                         "sigma": 4.0, "gamma": 0.2, "baseline_epochs": 1})
        run = manager.wait(run_id, timeout=300)
    finally:
        manager.shutdown()
    assert run.state == "finished", run.traceback
    s = run.summary
    assert s["student_accuracy"] > 0.3 and s["baseline_accuracy"] > 0.5  # 10 classes: chance is 0.1
    assert s["queries_answered"] > 0 and s["examples_per_teacher"] == 3000
    claims = _kinds(claims_of(s))
    assert set(claims) == {"lnmax": {"a priori", "data-dependent"}, "gnmax": {"a priori", "data-dependent", "sanitized"},
                           "confident_gnmax": {"a priori", "data-dependent", "sanitized", "realised",
                                               "odometer"}}[aggregator]
    if aggregator != "lnmax":  # the published part of the sanitized release, the smooth sensitivity a diagnostic
        assert s["sanitized_epsilon"]["epsilon"] == claims["sanitized"].epsilon and s["smooth_sensitivity"] >= 0
    assert all("Noise source: reproducible" in " ".join(c.caveats) for c in claims.values())
    metrics = store.metrics(run_id)
    eps = metrics[metrics["name"] == "eps_data_independent"]
    assert eps["value"].is_monotonic_increasing and eps["step"].is_monotonic_increasing
    art = store.artifacts(run_id)
    assert len(art["teacher_accuracy"]["accuracy"]) == 20 and len(art["vote_margins"]["margin"]) == 300


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_tiny_run_on_cuda(store):
    manager = JobManager(store)
    run_id = manager.submit("pate", {"teachers": 10, "teacher_epochs": 1, "student_epochs": 1, "queries": 100,
                                     "device": "cuda"})
    run = manager.wait(run_id, timeout=300)
    manager.shutdown()
    assert run.state == "finished", run.traceback and "CUDA" in run.device


@pytest.mark.slow
@pytest.mark.skipif(not (SHARED_DATA / "MNIST" / "raw").exists(), reason=f"MNIST is not under {SHARED_DATA}")
def test_tiny_run_on_real_mnist(store):
    manager = JobManager(store)
    run_id = manager.submit("pate", {"dataset": "mnist", "data_root": str(SHARED_DATA), "teachers": 10, "width": 8,
                                     "teacher_epochs": 1, "student_epochs": 3, "queries": 200, "baseline": False,
                                     "aggregator": "gnmax", "sigma": 2.0})
    run = manager.wait(run_id, timeout=600)
    manager.shutdown()
    assert run.state == "finished", run.traceback
    assert run.summary["architecture"] == "convnet" and run.summary["teacher_accuracy_mean"] > 0.8


def test_missing_real_dataset_fails_with_where_it_looked(store, tmp_path):
    manager = JobManager(store)
    run_id = manager.submit("pate", {"dataset": "cifar10", "data_root": str(tmp_path), "teachers": 10})
    run = manager.wait(run_id, timeout=60)
    manager.shutdown()
    assert run.state == "failed" and str(tmp_path) in run.error and "PRIVENGINE_DATA" in run.error


def test_lnmax_warns_when_the_minimum_sits_at_the_last_moment():
    unanimous = np.zeros((100, 10))
    unanimous[:, 0] = 250
    claims = _kinds(_analyse(unanimous, np.ones(100, dtype=bool), PateConfig(aggregator="lnmax", gamma=0.05)).claims)
    assert claims["data-dependent"].order == 8
    assert any("ln(1/delta)/L = 1.439" in c for c in claims["data-dependent"].caveats)
    assert claims["a priori"].order == 5  # 100 queries, gamma 0.05: the check value's order
    assert not any("last moment" in c for c in claims["a priori"].caveats)
