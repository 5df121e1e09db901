"""Anisotropic noise: the sampler's law, alpha = 0 is Opacus' DP-SGD, the noise ignores the private data."""

from __future__ import annotations

import math

import pytest
import torch
from opacus.grad_sample import GradSampleModule
from opacus.optimizers import DPOptimizer
from torch import nn

from privengine.dpsgd.noise import sample_anisotropic
from privengine.dpsgd.optimizer import AnisotropicDPOptimizer, make_optimizer

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


def _basis(d: int, k: int, seed: int = 0) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(d, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q


def test_sampler_covariance_matches_formula():
    d, k, alpha, std, n = 6, 2, 3.0, 0.7, 200_000
    basis = _basis(d, k)
    x = sample_anisotropic(basis, alpha, std, n, torch.Generator().manual_seed(1))
    assert x.shape == (n, d) and x.dtype == basis.dtype
    empirical = x.T @ x / n
    eye = torch.eye(d, dtype=basis.dtype)
    expected = std ** 2 * (eye + alpha * (eye - basis @ basis.T))
    # each entry's standard error is at most sqrt(2 / n) * std^2 (1 + alpha) ~ 0.0062: allow 5 of them
    tol = 5 * math.sqrt(2 / n) * std ** 2 * (1 + alpha)
    assert torch.allclose(empirical, expected, atol=tol), (empirical - expected).abs().max()
    assert x.mean(0).abs().max() < 5 * std * math.sqrt((1 + alpha) / n)
    # inside span(U) the variance is the isotropic std^2; outside it is (1 + alpha) std^2
    inside = (x @ basis[:, 0]).var()
    outside_dir = torch.linalg.qr(torch.cat([basis, torch.randn(d, 1, dtype=basis.dtype)], 1))[0][:, -1]
    outside = (x @ outside_dir).var()
    assert inside == pytest.approx(std ** 2, rel=0.02)
    assert outside == pytest.approx(std ** 2 * (1 + alpha), rel=0.02)


def test_alpha_zero_is_exactly_isotropic():
    basis = _basis(10, 3).float()
    x = sample_anisotropic(basis, 0.0, 1.5, 7, torch.Generator().manual_seed(5))
    z = torch.randn(7, 10, generator=torch.Generator().manual_seed(5))
    assert torch.equal(x, 1.5 * z)


def test_sampler_rejects_negative_alpha():
    with pytest.raises(ValueError, match="alpha"):
        sample_anisotropic(_basis(4, 1), -1.0, 1.0, 2)


def _step(optimizer_cls, x, y, *, seed=0, noise_seed=7, basis=None, **kwargs):
    """One private step of a small model; returns (model params' noisy grads, summed clipped grads), flattened."""
    torch.manual_seed(seed)
    model = GradSampleModule(nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)))
    opt = optimizer_cls(torch.optim.SGD(model.parameters(), lr=0.0), noise_multiplier=1.3, max_grad_norm=0.5,
                        expected_batch_size=len(x), generator=torch.Generator().manual_seed(noise_seed), **kwargs)
    if basis is not None:
        opt.set_basis(basis)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
    summed = torch.cat([p.summed_grad.reshape(-1) for p in model.parameters()])
    return grad, summed, opt


def _data(seed: int, n: int = 8):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 5, generator=g), torch.randint(0, 3, (n,), generator=g)


def test_optimizer_with_alpha_zero_is_opacus_dp_sgd():
    x, y = _data(0)
    ours, _, opt = _step(AnisotropicDPOptimizer, x, y, alpha=0.0)
    opacus, _, _ = _step(DPOptimizer, x, y)
    assert torch.equal(ours, opacus)
    assert opt.noise_multiplier == 1.3  # the accountant sees sigma unchanged


def test_noise_does_not_depend_on_private_data():
    d = 5 * 4 + 4 + 4 * 3 + 3
    basis = _basis(d, 4).float()
    noises = []
    for data_seed in (0, 1):
        x, y = _data(data_seed)
        grad, summed, _ = _step(AnisotropicDPOptimizer, x, y, alpha=4.0, basis=basis)
        noises.append(grad * len(x) - summed)  # p.grad = (summed + noise) / B
    assert not torch.allclose(*[_step(AnisotropicDPOptimizer, *_data(s), alpha=4.0, basis=basis)[1] for s in (0, 1)])
    assert torch.allclose(noises[0], noises[1], atol=1e-5)


@pytest.mark.parametrize("alpha,clipping", [(3.0, "flat"), (-0.75, "elliptical")])
def test_step_noise_has_the_shaped_law(alpha, clipping):
    """Over repeated steps the optimizer's noise has variance (sigma C)^2 in span(U) and (1 + alpha) times that
    outside, for the seed's flat-clip variant and for the elliptical one with a negative alpha."""
    model = GradSampleModule(nn.Linear(60, 30))
    d, k, sigma, clip = 60 * 30 + 30, 300, 1.3, 0.5
    basis = _basis(d, k).float()
    opt = make_optimizer(torch.optim.SGD(model.parameters(), lr=0.0), grad_sample_mode="hooks", alpha=alpha,
                         projected=False, clipping=clipping, noise_multiplier=sigma, max_grad_norm=clip,
                         expected_batch_size=8, generator=torch.Generator().manual_seed(3))
    opt.set_basis(basis)
    x, y = torch.randn(8, 60), torch.randint(0, 30, (8,))
    noise = []
    for _ in range(12):
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        noise.append(torch.cat([p.grad.reshape(-1) * 8 - p.summed_grad.reshape(-1) for p in model.parameters()]))
        opt.zero_grad()
    noise = torch.stack(noise)
    inside = noise @ basis                       # 12 x 300 coordinates in span(U)
    outside = noise - inside @ basis.T           # the rest, d - k dimensions per step
    std2 = (sigma * clip) ** 2
    assert opt.noise_multiplier == sigma  # what the accountant reads
    # relative standard errors: sqrt(2 / 3600) = 2.4% inside, sqrt(2 / 18360) = 1% outside; allow about 4 of them
    assert inside.pow(2).mean() == pytest.approx(std2, rel=0.1)
    assert outside.pow(2).sum(1).mean() / (d - k) == pytest.approx((1 + alpha) * std2, rel=0.04)


def test_projected_update_lies_in_the_subspace_and_energy_is_reported():
    d = 5 * 4 + 4 + 4 * 3 + 3
    basis = _basis(d, 4).float()
    x, y = _data(0)
    grad, summed, opt = _step(AnisotropicDPOptimizer, x, y, alpha=1.0, projected=True, basis=basis)
    assert (grad - basis @ (basis.T @ grad)).norm() < 1e-5 * grad.norm()
    expected = float((basis.T @ summed).pow(2).sum() / summed.pow(2).sum())
    assert float(opt.last_energy) == pytest.approx(expected, rel=1e-5)
    assert 0 <= float(opt.last_energy) <= 1


def test_shaped_step_needs_a_basis_of_the_right_shape():
    x, y = _data(0)
    with pytest.raises(RuntimeError, match="set_basis"):
        _step(AnisotropicDPOptimizer, x, y, alpha=2.0)
    with pytest.raises(ValueError, match="basis must have shape"):
        _step(AnisotropicDPOptimizer, x, y, alpha=2.0, basis=_basis(7, 2).float())
