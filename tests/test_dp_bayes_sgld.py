"""dp_bayes sampler: SGLD recovers known targets; at very large epsilon the draw sits at the VI optimum."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from privengine.dp_bayes.data import synthetic_records
from privengine.dp_bayes.laplace import laplace_approximation
from privengine.dp_bayes.models import build_model
from privengine.dp_bayes.objective import Objective
from privengine.dp_bayes.sgld import (
    ElementwiseTransform,
    PreconditionedSGLD,
    exponential_mechanism_transform,
)
from privengine.dp_bayes.vi import laplace_start, maximise


def test_sgld_recovers_the_mean_and_covariance_of_a_correlated_gaussian():
    """4000 chains with a diagonal preconditioner on a 3-D Gaussian with correlations up to 0.6 and scales 1e-3..10."""
    gen = torch.Generator().manual_seed(0)
    mu = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    scales = torch.tensor([1e-3, 1.0, 10.0], dtype=torch.float64)
    corr = torch.tensor([[1.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 1.0]], dtype=torch.float64)
    cov = corr * torch.outer(scales, scales)
    prec = torch.linalg.inv(cov)

    def grad_log_f(z):
        d = z - mu
        return -0.5 * ((d @ prec) * d).sum(1), -d @ prec

    chains = 4000
    transform = ElementwiseTransform(mu + scales * 3.0, scales.expand(chains, -1))  # start 3 sds off
    sampler = PreconditionedSGLD(grad_log_f, transform=transform, step_size=0.02, generator=gen)
    y, done = sampler.run(torch.zeros(chains, 3, dtype=torch.float64), 1500)
    z = transform.forward(y)
    assert done == 1500
    assert torch.all((z.mean(0) - mu).abs() / scales < 0.06)  # standard error ~0.016 sd, bias O(h)
    emp = torch.cov(z.T)
    assert torch.allclose(emp / torch.outer(scales, scales), corr, atol=0.08)  # SGLD bias O(h) + sampling error


@pytest.mark.parametrize("cw", [0.0625, 6.25])
def test_sgld_recovers_the_exponential_mechanism_log_sd_law(cw):
    """Quadratic model of U: m ~ N(0, 1/(c w)), and e^{2 s} ~ Gamma(c w / 2, c w / 2) (long left tail for small c w).

    cw = 0.0625 is the seed's setting (tau = 4, eps = 1, w = 1).
    """
    gen = torch.Generator().manual_seed(1)
    chains = 2000

    def grad_log_f(z):
        m, s = z[:, :1], z[:, 1:]
        log_f = cw * (-0.5 * m**2 + s - 0.5 * torch.exp(2 * s))
        return log_f.sum(1), torch.cat([-cw * m, cw * (1 - torch.exp(2 * s))], 1)

    transform = exponential_mechanism_transform(torch.zeros(chains, 2, dtype=torch.float64),
                                                torch.full((chains,), cw, dtype=torch.float64), 1.0)
    sampler = PreconditionedSGLD(grad_log_f, transform=transform, step_size=0.05, generator=gen)
    y, _ = sampler.run(torch.zeros(chains, 2, dtype=torch.float64), 2000)
    z = transform.forward(y).numpy()
    assert z[:, 0].std() * math.sqrt(cw) == pytest.approx(1.0, abs=0.06)
    probs = [0.1, 0.5, 0.9]
    exact = 0.5 * np.log(stats.gamma(cw / 2, scale=2 / cw).ppf(probs))
    sd = math.sqrt(float(torch.special.polygamma(1, torch.tensor(cw / 2)))) / 2
    assert np.allclose(np.quantile(z[:, 1], probs), exact, atol=0.12 * sd)


def test_at_very_large_epsilon_the_private_draw_sits_at_the_vi_optimum():
    """eps = 1e5, tau = 100 (the sanitizer is nearly the identity): f concentrates at the ELBO's maximiser."""
    gen = torch.Generator().manual_seed(2)
    records = synthetic_records("linear", n=500, coefficients=(2.0, -3.5), intercept=-5.0, noise_sd=0.1, seed=3)
    model = build_model("linear", records, prior_sd=10.0, sigma_prior_scale=1.0)
    laplace = laplace_approximation(model)
    z0, scale = laplace_start(laplace, 1)
    z_vi = maximise(Objective(model, tau=None, mc_samples=8), z0, scale=scale, steps=1500, generator=gen)
    tau, eps = 100.0, 1e5
    utility = Objective(model, tau=tau, mc_samples=8)
    z_star = maximise(utility, z_vi, scale=scale, steps=300, generator=gen)
    chains = 8
    c = torch.full((chains,), eps / (4 * tau), dtype=torch.float64)
    transform = exponential_mechanism_transform(z_star.expand(chains, -1), c, 1.0)

    def grad_log_f(z):
        value, grad = utility.value_and_grad(z, generator=gen)
        return c * value, c[:, None] * grad

    sampler = PreconditionedSGLD(grad_log_f, transform=transform, step_size=0.01, generator=gen)
    y, _ = sampler.run(torch.zeros_like(transform.center), 800)
    z = transform.forward(y)
    p = model.n_params
    sd_vi = torch.exp(z_vi[0, p:])
    assert torch.all((z[:, :p] - z_vi[0, :p]).abs() / sd_vi < 0.35)  # spread ~ sqrt(1/c) = 0.06 sds
    assert torch.all((z[:, p:] - z_vi[0, p:]).abs() < 0.35)  # log-sd spread ~ 1/sqrt(2c) = 0.045
