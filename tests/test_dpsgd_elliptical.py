"""Elliptical clipping: the whitened clipped gradients have norm <= C, and the epsilon is Opacus' isotropic one
at the same sigma, for negative alpha too (the noise law N(0, (sigma C)^2 S): tests/test_dpsgd_noise.py)."""

from __future__ import annotations

import pytest
import torch
from opacus.accountants import RDPAccountant
from opacus.grad_sample import GradSampleModule
from torch import nn

from privengine.claims import claims_of
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.optimizer import AnisotropicDPOptimizer, make_optimizer
from privengine.errors import ConfigError
from tests.test_dpsgd_noise import _basis
from tests.test_dpsgd_run import _opacus_epsilon, _run

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")

D_IN, D_OUT = 6, 3
D = D_IN * D_OUT + D_OUT


def _whitener(basis: torch.Tensor, alpha: float) -> torch.Tensor:
    """S^-1/2 for S = I + alpha (I - U U^T), by a float64 eigendecomposition (independent of the optimizer)."""
    u = basis.double()
    s = torch.eye(len(u), dtype=torch.float64) + alpha * (torch.eye(len(u), dtype=torch.float64) - u @ u.T)
    w, v = torch.linalg.eigh(s)
    return v @ torch.diag(w.rsqrt()) @ v.T


def _elliptical_step(x, y, basis, alpha, *, sigma=0.0, clip=0.5, seed=0):
    """One step of a linear model; returns (per-example gradients (B, d), summed clipped gradient, noisy sum)."""
    torch.manual_seed(seed)
    model = GradSampleModule(nn.Linear(D_IN, D_OUT))
    opt = AnisotropicDPOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), alpha=alpha, clipping="elliptical",
                                 noise_multiplier=sigma, max_grad_norm=clip, expected_batch_size=len(x),
                                 generator=torch.Generator().manual_seed(5))
    opt.set_basis(basis)
    nn.functional.cross_entropy(model(x), y).backward()
    per_example = torch.cat([p.grad_sample.reshape(len(x), -1) for p in model.parameters()], dim=1)
    opt.step()
    summed = torch.cat([p.summed_grad.reshape(-1) for p in model.parameters()])
    noisy = torch.cat([p.grad.reshape(-1) for p in model.parameters()]) * len(x)
    return per_example, summed, noisy


@pytest.mark.parametrize("alpha", [-0.95, -0.5, 0.7, 5.0])
def test_whitened_clipped_gradients_have_norm_at_most_c(alpha):
    """Every clip factor f_i makes ||S^-1/2 f_i g_i|| <= C, and a clipped g_i (f_i < 1) lands within the
    optimizer's rounding margin (1e-5 / min(1, 1 + alpha), relative) below C."""
    g = torch.Generator().manual_seed(1)
    x, y = 3 * torch.randn(16, D_IN, generator=g), torch.randint(0, D_OUT, (16,), generator=g)
    basis = _basis(D, 4).float()
    clip = 0.5
    per_example, summed, _ = _elliptical_step(x, y, basis, alpha, clip=clip)
    whitener = _whitener(basis, alpha)
    norms = (per_example.double() @ whitener).norm(dim=1)          # ||g_i||_S, computed independently
    factors = (clip / norms).clamp(max=1.0)
    assert (factors < 1).sum() >= 8, "the test needs clipped examples"
    assert summed.double() == pytest.approx((factors[:, None] * per_example.double()).sum(0), rel=1e-3, abs=1e-5)
    # the optimizer's own factors, recovered per example from a one-example batch each
    ours = torch.stack([_elliptical_step(x[i:i + 1], y[i:i + 1], basis, alpha, clip=clip)[1] for i in range(16)])
    whitened = ours.double() @ whitener
    assert whitened.norm(dim=1).max() <= clip
    margin = 1e-5 / min(1.0, 1.0 + alpha)
    assert whitened.norm(dim=1)[factors < 1].min() >= clip * (1 - 2 * margin)


def test_elliptical_with_alpha_zero_is_the_flat_clip():
    x, y = torch.randn(8, D_IN), torch.randint(0, D_OUT, (8,))
    per_example, summed, _ = _elliptical_step(x, y, _basis(D, 4).float(), 0.0, clip=0.1)
    flat = (0.1 / per_example.norm(dim=1)).clamp(max=1.0)
    assert summed == pytest.approx((flat[:, None] * per_example).sum(0), abs=1e-5)


def test_flat_clip_refuses_negative_alpha_and_ghost_refuses_elliptical():
    sgd = torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=0.1)
    common = dict(noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=4)
    with pytest.raises(ValueError, match="flat clipping"):
        AnisotropicDPOptimizer(sgd, alpha=-0.5, **common)
    with pytest.raises(ValueError, match="> -1"):
        AnisotropicDPOptimizer(sgd, alpha=-1.0, clipping="elliptical", **common)
    with pytest.raises(ValueError, match="per-example gradients"):
        make_optimizer(sgd, grad_sample_mode="ghost", alpha=-0.5, projected=False, clipping="elliptical",
                       generator=None, **common)


@pytest.mark.parametrize("changes,field", [
    ({"alphas": (0.0, -0.5)}, "alphas"),                                   # negative alpha needs elliptical
    ({"variant": "elliptical", "alphas": (0.0, -1.0)}, "alphas"),          # alpha must stay above -1
    ({"variant": "elliptical", "grad_sample_mode": "ghost"}, "grad_sample_mode"),
])
def test_bad_elliptical_configs_name_the_field(changes, field):
    with pytest.raises(ConfigError) as err:
        DPSGDConfig().replace(**changes).validate()
    assert err.value.field == field


def test_elliptical_run_claims_opacus_isotropic_epsilon_and_labels_its_settings():
    summary, reporter = _run(epochs=1.0, n_seeds=1, noise_mode="sigma", noise_multiplier=1.1, accountant="rdp",
                             variant="elliptical", alphas=(0.0, -0.5, 2.0))
    q, steps = summary["sample_rate"], summary["steps_per_model"]
    each, together = claims_of(summary)
    assert each.epsilon == pytest.approx(_opacus_epsilon(RDPAccountant, [(1.1, q, steps)]), rel=1e-12)
    assert together.epsilon == pytest.approx(_opacus_epsilon(RDPAccountant, [(1.1, q, 3 * steps)]), rel=1e-12)
    settings = {row["setting"] for row in summary["comparison"]}
    assert settings == {"isotropic", "elliptical alpha=-0.5", "elliptical alpha=2"}
    assert all(row["epsilon"] == each.epsilon for row in summary["comparison"])
    assert any(k.startswith("captured_energy|elliptical alpha=-0.5") for k in reporter.metrics)


def test_elliptical_step_on_an_empty_poisson_batch_adds_the_noise_and_counts_the_step():
    """Poisson sampling draws empty batches; the step must still add N(0, (sigma C)^2 S) and be accounted."""
    model = GradSampleModule(nn.Linear(D_IN, D_OUT))
    opt = AnisotropicDPOptimizer(torch.optim.SGD(model.parameters(), lr=0.0), alpha=-0.5, clipping="elliptical",
                                 noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=4,
                                 generator=torch.Generator().manual_seed(0))
    steps = []
    opt.attach_step_hook(lambda o: steps.append(o.noise_multiplier))
    opt.set_basis(_basis(D, 4).float())
    x, y = torch.zeros(0, D_IN), torch.zeros(0, dtype=torch.int64)
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    assert steps == [1.0]
    assert all((p.summed_grad == 0).all() for p in model.parameters())
    assert torch.cat([p.grad.reshape(-1) for p in model.parameters()]).norm() > 0
