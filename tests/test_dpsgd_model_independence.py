"""The models of one DP-SGD run are independent mechanisms, so releasing them together composes.

Regression (issue 10, item 1): models that shared a seed but differed in alpha used identical
generators for the Poisson batches and the noise. From two of them (alpha 4 and 16, one step)
the private clipped gradient outside span(U) could be solved for exactly: with shared z the
noisy sums are y_a = g + sigma C (P z + sqrt(1 + a) (I - P) z), two equations in (I - P) g and
(I - P) z. With a noise and a batch stream per model the same algebra recovers nothing.
"""

from __future__ import annotations

import math

import pytest
import torch

from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.data import load_task
from privengine.dpsgd.subspace import per_example_gradients
from privengine.dpsgd.training import Plan, _loader, Training

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")

SIGMA, LR = 1.0, 1.0


def _one_step(task, config, plan, *, alpha: float, index: int) -> tuple[Training, torch.Tensor]:
    """Train model ``index`` (seed 0) for one step; return it and y = g_sum + noise, flattened."""
    training = Training(task, config, plan, alpha=alpha, seed=0, index=index, device=torch.device("cpu"))
    training.run(lambda: False, lambda *args: None)
    theta = torch.cat([p.detach().reshape(-1) for p in training.model.parameters()])
    # zero start, SGD without momentum: theta_1 = -lr (g_sum + noise) / B
    return training, -theta * plan.expected_batch_size / LR


def test_two_models_of_a_run_share_neither_batches_nor_noise():
    config = DPSGDConfig(dataset="linreg", alphas=(4.0, 16.0), noise_mode="sigma", noise_multiplier=SIGMA,
                         lr=LR, n_seeds=1, accountant="rdp")
    task = load_task(dataset="linreg", seed=0, public_fraction=config.public_fraction, train_limit=0,
                     data_root="", device=torch.device("cpu"))
    plan = Plan(noise_multiplier=SIGMA, sample_rate=config.batch_size / task.n_private, steps=1,
                expected_batch_size=config.batch_size)
    first, y4 = _one_step(task, config, plan, alpha=4.0, index=0)
    second, y16 = _one_step(task, config, plan, alpha=16.0, index=1)
    basis = first.optimizer.basis
    assert torch.equal(basis, second.optimizer.basis)  # U is shared: public data, same start (a paired comparison)

    batch0 = next(iter(_loader(task, config, plan, 0, 0)))
    batch1 = next(iter(_loader(task, config, plan, 0, 1)))
    assert batch0[1].shape != batch1[1].shape or not torch.equal(batch0[1], batch1[1])

    # the attack: eliminate the shared z outside span(U), then read off the clipped gradient there
    def outside(v: torch.Tensor) -> torch.Tensor:
        return v - basis @ (basis.T @ v)

    std = SIGMA * config.max_grad_norm
    c4, c16 = math.sqrt(5.0), math.sqrt(17.0)
    z_perp = (outside(y16) - outside(y4)) / (std * (c16 - c4))
    g_perp_guess = outside(y4) - c4 * std * z_perp
    params = {k: torch.zeros_like(p) for k, p in first.shadow.named_parameters()}
    g = per_example_gradients(first.shadow, first.criterion, batch0[0], batch0[1], params=params,
                              clip=config.max_grad_norm).sum(0)
    error = (g_perp_guess - outside(g)).norm()
    noise_scale = std * math.sqrt(basis.shape[0] - basis.shape[1])  # norm of the noise outside span(U), alpha 0
    assert error > 0.5 * noise_scale, (float(error), noise_scale)


def test_seeded_noise_replays_per_configuration_and_secure_noise_never_does():
    """Same config, seed and private data: the same noise (a replay releases nothing new). A different knob (two
    points of a sweep, or two runs a user compares) or other private data: independent noise, so releasing both
    composes. Secure mode: fresh OS entropy every time."""
    from privengine.randomness import data_fingerprint, derived_seed, noise_generator

    private = data_fingerprint(torch.arange(6.0))

    def draw(config: DPSGDConfig, data: tuple[int, ...] = private) -> torch.Tensor:
        return torch.randn(4, generator=noise_generator(config, 0, 1, 2, data=data))

    base = DPSGDConfig(alphas=(0.0, 4.0))
    assert torch.equal(draw(base), draw(DPSGDConfig(alphas=(0.0, 4.0))))
    # even knobs that only change how a run is computed get their own noise: sharing it would release the
    # noise-free difference of two slightly different gradient sums (a helper review's finding)
    for how in (base.replace(device="cpu"), base.replace(physical_batch_size=32, grad_sample_mode="ghost")):
        assert not torch.equal(draw(base), draw(how))
    on_cuda = torch.randn(4, generator=noise_generator(base, 0, 1, 2, data=private, device="cuda", on="cpu"))
    assert not torch.equal(draw(base), on_cuda)  # CPU and CUDA runs never share a stream (their noise differs)
    for other in (base.replace(alphas=(0.0, 1.0)), base.replace(max_grad_norm=2.0), base.replace(seed=1)):
        assert not torch.equal(draw(base), draw(other))
    neighbour = data_fingerprint(torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 9.0]))  # the last record replaced
    assert not torch.equal(draw(base), draw(base, neighbour))
    secure = base.replace(secure_noise=True)
    assert not torch.equal(draw(secure), draw(secure))
    assert derived_seed(5) != derived_seed(5, 0) != derived_seed(5, 0, 0)  # SeedSequence alone equates these
