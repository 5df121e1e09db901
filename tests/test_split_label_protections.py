"""The active party's protections: what each does to a batch of cut gradients, checked statistically."""

from __future__ import annotations

import math

import pytest
import torch

from privengine.split_label import marvell
from privengine.split_label.protections import (
    IsotropicNoise, Marvell, MaxNormAlignment, NoProtection, class_stats, make_protection)


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _two_class_batch(n_pos: int, n_neg: int, d: int, *, seed: int = 0):
    """Positives spread widely around one mean, negatives tightly around another (so u < v)."""
    g = _gen(seed)
    pos = torch.tensor([1.0] + [0.0] * (d - 1)) + 0.3 * torch.randn(n_pos, d, generator=g, dtype=torch.float64)
    neg = torch.tensor([0.0, 0.5] + [0.0] * (d - 2)) + 0.05 * torch.randn(n_neg, d, generator=g, dtype=torch.float64)
    return torch.cat([pos, neg]), torch.cat([torch.ones(n_pos), torch.zeros(n_neg)]).double()


def test_max_norm_aligns_every_expected_squared_norm_with_the_batch_maximum():
    base = torch.tensor([[3.0, 4.0], [0.3, 0.1], [-1.0, 2.0], [0.0, 0.02]], dtype=torch.float64)
    reps = 40_000
    grad = base.repeat(reps, 1)  # the batch maximum is ||(3, 4)|| = 5 for every copy
    sent = MaxNormAlignment()(grad, torch.zeros(len(grad)), _gen()).grad
    sq = sent.square().sum(1).view(reps, len(base))
    max_sq = 25.0
    norms_sq = base.square().sum(1)
    s_sq = max_sq / norms_sq - 1
    sd_of_mean = norms_sq * torch.sqrt(4 * s_sq + 2 * s_sq ** 2) / math.sqrt(reps)  # Var((1 + xi s)^2) = 4s^2 + 2s^4
    assert torch.all((sq.mean(0) - max_sq).abs() <= 5 * sd_of_mean + 1e-12), (sq.mean(0), sd_of_mean)
    # the largest gradient is sent unchanged, and directions only flip sign
    assert torch.equal(sent[0], base[0])
    cos = torch.nn.functional.cosine_similarity(sent, grad, dim=1)
    assert torch.allclose(cos.abs(), torch.ones_like(cos))


def test_max_norm_leaves_zero_gradients_at_zero():
    grad = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    sent = MaxNormAlignment()(grad, torch.tensor([1.0, 0.0]), _gen()).grad
    assert torch.equal(sent[1], torch.zeros(2)) and torch.isfinite(sent).all()


def test_isotropic_noise_has_the_stated_per_coordinate_variance():
    grad, y = _two_class_batch(2000, 18000, 8)
    t = 2.0
    out = IsotropicNoise(t)(grad, y, _gen())
    noise = out.grad - grad
    expected = (t * grad.norm(dim=1).max()) ** 2 / 8
    assert noise.var(0).mean() == pytest.approx(float(expected), rel=0.03)
    stats = class_stats(grad, y)
    lam = float(expected)
    assert out.sumkl == pytest.approx(marvell.sum_kl((lam,) * 4, u=stats.u, v=stats.v,
                                                     g_norm_square=stats.g_norm_square, dim=8))


def test_marvell_noise_has_the_solved_covariance_per_class_and_meets_the_threshold():
    d = 4
    grad, y = _two_class_batch(20_000, 20_000, d)
    protection = Marvell(threshold=0.16)
    out = protection(grad, y, _gen(1))
    stats = class_stats(grad, y)
    solution = protection.solve(stats)
    assert out.sumkl == solution.sumkl <= 0.16 and out.power_scale == solution.power_scale
    l1_pos, l2_pos, l1_neg, l2_neg = solution.lambdas
    assert l2_pos == 0.0 < l2_neg  # the positives have the larger variance here
    e = stats.direction.double()
    for label, l1, l2 in ((1.0, l1_pos, l2_pos), (0.0, l1_neg, l2_neg)):
        noise = (out.grad - grad)[y == label]
        cov = torch.cov(noise.T)
        expected = (l1 - l2) * torch.outer(e, e) + l2 * torch.eye(d, dtype=torch.float64)
        scale = max(l1, 1e-12)
        assert torch.allclose(cov, expected, atol=0.05 * scale), (label, cov, expected)


def test_marvell_sends_single_class_batches_unchanged_and_says_so():
    grad = torch.randn(10, 3, generator=_gen())
    for labels in (torch.zeros(10), torch.ones(10)):
        out = Marvell(threshold=0.64)(grad, labels, _gen())
        assert not out.noised and torch.equal(out.grad, grad) and math.isnan(out.sumkl)
        assert class_stats(grad, labels) is None


def test_class_stats_are_the_population_moments_of_each_class():
    grad, y = _two_class_batch(30, 70, 3)
    stats = class_stats(grad, y)
    pos, neg = grad[y == 1], grad[y == 0]
    delta = pos.mean(0) - neg.mean(0)
    assert stats.p == 0.3 and stats.dim == 3
    assert stats.v == pytest.approx(float(((pos - pos.mean(0)) ** 2).mean()))
    assert stats.u == pytest.approx(float(((neg - neg.mean(0)) ** 2).mean()))
    assert stats.g_norm_square == pytest.approx(float(delta @ delta))
    assert torch.allclose(stats.direction, delta / delta.norm())


def test_make_protection_by_name():
    assert isinstance(make_protection("none"), NoProtection)
    assert make_protection("iso", iso_scale=5.0).key == "iso_t5"
    assert make_protection("marvell", sumkl_threshold=0.64).label == "Marvell sumKL≤0.64"
    assert make_protection("marvell", power_scale=4.0).key == "marvell_s4"
    with pytest.raises(ValueError, match="exactly one"):
        make_protection("marvell")
    with pytest.raises(ValueError, match="unknown protection"):
        make_protection("dp")
