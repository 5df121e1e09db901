"""Channel normalisation of scattering features: public statistics are free, private ones are a Gaussian
mechanism composed into every claim, and the noise calibration accounts for it."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from dp_accounting import pld
import dp_accounting

from privengine.claims import claims_of
from privengine.accounting.subsampled_gaussian import calibrate_noise_multiplier, epsilon_of
from privengine.dpsgd.privacy import compose_runs
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.normalization import channel_moments, private_norm, public_clip, public_norm
from privengine.errors import ConfigError
from tests.test_dpsgd_run import _run

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing")


def _features(n: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, 6, 4, 4, generator=g) * torch.arange(1, 7).reshape(1, 6, 1, 1)


def test_public_norm_standardises_each_channel_of_the_public_split():
    x = _features(500, 0)
    y = public_norm(x)(x)
    assert y.mean(dim=(0, 2, 3)) == pytest.approx(torch.zeros(6), abs=1e-5)
    assert y.pow(2).mean(dim=(0, 2, 3)) == pytest.approx(torch.ones(6), abs=1e-4)


def test_private_statistics_have_sensitivity_clip_and_the_stated_noise():
    """Adding one example moves the noiseless release by at most the clip; the noise has sd sigma * clip."""
    x_public, x_private = _features(200, 1), _features(300, 2)
    clip = public_clip(x_public)
    outlier = torch.full((1, 6, 4, 4), 1e3)

    declared = 300  # N: public, the same for both neighbours

    def release(x, seed):  # N * (mean, E[x^2]) recovered from the returned norm
        norm, used = private_norm(x, x_public, private_size=declared, noise_multiplier=2.0,
                                  generator=torch.Generator().manual_seed(seed))
        assert used == clip
        mean = norm.mean.reshape(-1)
        return torch.cat([mean, norm.sd.reshape(-1).pow(2) + mean.pow(2)]) * declared

    base = release(x_private, 0)
    plus = release(torch.cat([x_private, outlier]), 0)   # same noise draw, one more (clipped) example
    # the floor on the variance may bind for the second moments; the means are untouched by it
    assert (plus[:6] - base[:6]).norm() <= clip * (1 + 1e-4)
    draws = torch.stack([release(x_private, s)[:6] for s in range(400)])
    clean = channel_moments(x_private)
    clean = (clean * (clip / clean.norm(dim=1, keepdim=True)).clamp(max=1)).sum(0)[:6]
    assert draws.mean(0) == pytest.approx(clean, abs=4 * 2.0 * clip / 20)
    assert draws.std(0).mean() == pytest.approx(2.0 * clip, rel=0.1)


def test_private_statistics_divide_by_the_declared_size_not_the_data_count():
    """The noisy sums are divided by the declared N: a neighbour with one example fewer moves the released mean by
    at most clip / N (the sensitivity of the sum, scaled by the public divisor), never by a divisor that itself
    tells the neighbours apart."""
    x_public, x_private = _features(200, 3), _features(301, 4)
    clip = public_clip(x_public)

    def released_mean(x):
        norm, _ = private_norm(x, x_public, private_size=250, noise_multiplier=2.0,
                               generator=torch.Generator().manual_seed(0))
        return norm.mean.reshape(-1)

    whole, fewer = released_mean(x_private), released_mean(x_private[1:])
    assert 0 < (whole - fewer).norm() <= clip / 250 * (1 + 1e-4)
    # the divisor is N = 250, not the 301 rows present: without noise the mean is (sum of clipped s_i)[:C] / 250
    s = channel_moments(x_private)
    clipped_sum = (s * (clip / s.norm(dim=1, keepdim=True)).clamp(max=1)).sum(0)
    noiseless, _ = private_norm(x_private, x_public, private_size=250, noise_multiplier=0.0,
                                generator=torch.Generator().manual_seed(0))
    assert noiseless.mean.reshape(-1) == pytest.approx(clipped_sum[:6] / 250, rel=1e-5)


def test_private_norm_step_is_composed_and_prv_agrees_with_pld():
    sigma_norm, sigma, q, steps, delta = 8.0, 3.0, 0.1, 200, 1e-5
    history = [(sigma_norm, 1.0, 1), (sigma, q, steps)]
    ours = epsilon_of(history, accountant="prv", delta=delta)[0]
    accountant = pld.PLDAccountant()
    accountant.compose(dp_accounting.GaussianDpEvent(sigma_norm))
    accountant.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), steps)
    reference = accountant.get_epsilon(delta)
    assert ours == pytest.approx(reference, rel=0.02)
    assert ours > epsilon_of([(sigma, q, steps)], accountant="prv", delta=delta)[0]


def test_calibration_with_a_prefix_lands_just_below_the_target():
    prefix = [(8.0, 1.0, 1)]
    sigma = calibrate_noise_multiplier(target_epsilon=3.0, delta=1e-5, sample_rate=0.1, steps=200,
                                       accountant="rdp", prefix=prefix)
    eps = epsilon_of(prefix + [(sigma, 0.1, 200)], accountant="rdp", delta=1e-5)[0]
    assert 2.99 <= eps <= 3.0
    with pytest.raises(ValueError, match="alone"):
        calibrate_noise_multiplier(target_epsilon=0.05, delta=1e-5, sample_rate=0.1, steps=10, accountant="rdp",
                                   prefix=[(1.0, 1.0, 1)])


def test_private_normalisation_run_charges_the_step_in_every_claim(private_home):
    common = dict(dataset="digits", model="scatter_linear", epochs=1.0, batch_size=64, noise_mode="sigma",
                  noise_multiplier=2.0, alphas=(0.0,), accountant="rdp", public_fraction=0.2)
    summary, _ = _run(normalization="private", norm_noise_multiplier=8.0, n_seeds=2, **common)
    q, steps = summary["sample_rate"], summary["steps_per_model"]
    each, together = claims_of(summary)[:2]
    assert each.epsilon == pytest.approx(
        epsilon_of([(8.0, 1.0, 1), (2.0, q, steps)], accountant="rdp", delta=1e-5)[0], rel=1e-12)
    assert together.epsilon == pytest.approx(
        epsilon_of([(8.0, 1.0, 2), (2.0, q, 2 * steps)], accountant="rdp", delta=1e-5)[0], rel=1e-12)
    assert any("Gaussian mechanism (noise multiplier 8" in c for c in each.caveats)
    record = dataclasses.make_dataclass("Record", ["summary", "config"])(summary, {"accountant": "rdp"})
    assert compose_runs([record]).epsilon == pytest.approx(together.epsilon, rel=1e-12)
    public, _ = _run(normalization="public", **common)
    assert claims_of(public)[0].epsilon == epsilon_of([(2.0, q, steps)], accountant="rdp", delta=1e-5)[0]


@pytest.mark.parametrize("changes,field", [
    ({"normalization": "private"}, "normalization"),  # the default model is not a scattering model
    ({"model": "scatter_linear", "dataset": "digits", "normalization": "private", "show_gdp": True}, "show_gdp"),
])
def test_bad_normalisation_configs_name_the_field(changes, field):
    with pytest.raises(ConfigError) as err:
        DPSGDConfig(**changes).validate()
    assert err.value.field == field
