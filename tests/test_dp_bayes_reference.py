"""dp_bayes reference posteriors: the conjugate closed form, the sigma grid, and an independent check."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privengine.dp_bayes.data import synthetic_records
from privengine.dp_bayes.laplace import log_posterior
from privengine.dp_bayes.metrics import score
from privengine.dp_bayes.models import build_model
from privengine.dp_bayes.reference import conditional_coefficients, importance_reference, linear_reference


@pytest.fixture(scope="module")
def seed_model():
    """The seed's setting: N = 4000, y = 2 x1 - 3.5 x2 - 5 + N(0, 0.1^2), priors N(0, 10^2) and half-Cauchy(1)."""
    records = synthetic_records("linear", n=4000, coefficients=(2.0, -3.5), intercept=-5.0, noise_sd=0.1, seed=0)
    return build_model("linear", records, prior_sd=10.0, sigma_prior_scale=1.0)


@pytest.fixture(scope="module")
def seed_reference(seed_model):
    return linear_reference(seed_model)


def test_conditional_posterior_is_the_conjugate_closed_form(seed_model):
    """Given sigma, log N(theta; mean, cov) - (loglik + log prior) must not depend on theta."""
    sigma = 0.093
    mean, cov = conditional_coefficients(seed_model, np.array([sigma]))
    rng = np.random.default_rng(0)
    coef = rng.multivariate_normal(mean[0], 25 * cov[0], size=50)
    theta = torch.from_numpy(np.hstack([coef, np.full((50, 1), math.log(sigma))]))
    unnormalised = log_posterior(seed_model, theta).numpy()
    gauss = -0.5 * np.einsum("ni,ij,nj->n", coef - mean[0], np.linalg.inv(cov[0]), coef - mean[0])
    gap = gauss - unnormalised
    assert np.ptp(gap) < 1e-6 * np.abs(unnormalised).max()


def test_sigma_marginal_matches_chibs_identity(seed_model, seed_reference):
    """p(log sigma | y) ∝ p(theta, log sigma | y) / p(theta | sigma, y) for any theta (here the conditional mean)."""
    j = len(seed_reference.mean) - 1
    grid = seed_reference.mean[j] + seed_reference.sd[j] * np.linspace(-3, 3, 13)
    mean, cov = conditional_coefficients(seed_model, np.exp(grid))
    theta = torch.from_numpy(np.hstack([mean, grid[:, None]]))
    log_joint = log_posterior(seed_model, theta).numpy()
    log_cond = -0.5 * np.linalg.slogdet(2 * math.pi * cov)[1]  # conditional density at its own mean
    chib = log_joint - log_cond
    dens = np.log(seed_reference.density(j, grid))
    assert np.allclose(dens - dens[6], chib - chib[6], atol=2e-3)


def test_seed_setting_posterior_sds_match_theory(seed_reference):
    """sd(slope) ≈ sigma / sqrt(N Var(x)) = 0.1 / sqrt(4000 / 12) ≈ 0.0055, sd(intercept) ≈ 0.1 / sqrt(4000)."""
    sd = seed_reference.sd
    assert sd[0] == pytest.approx(0.1 / math.sqrt(4000 / 12), rel=0.05)
    assert sd[1] == pytest.approx(0.1 / math.sqrt(4000 / 12), rel=0.05)
    assert sd[2] == pytest.approx(0.1 / math.sqrt(4000), rel=0.05)
    assert sd[3] == pytest.approx(1 / math.sqrt(2 * 4000), rel=0.05)  # log sigma: Fisher information 2N
    assert np.allclose(seed_reference.mean[:3], [2.0, -3.5, -5.0], atol=4 * sd[:3])


def test_exact_reference_agrees_with_independent_importance_sampling(seed_model, seed_reference):
    """An independent route (Laplace + importance sampling on the full model) gives the same moments."""
    check = importance_reference(seed_model, draws=8000, seed=1)
    assert check.ess > 4000
    tol = 5 / math.sqrt(check.ess)  # Monte Carlo error of a weighted mean, in posterior sds, with margin
    assert np.all(np.abs(check.mean - seed_reference.mean) / seed_reference.sd < tol)
    assert np.allclose(check.sd / seed_reference.sd, 1.0, atol=0.03)
    scores = score(np.concatenate([check.mean, np.log(check.sd)]), seed_reference)
    assert scores.summary()["mean_error_sd_rms"] < tol


def test_marginal_densities_integrate_to_one_and_match_the_moments(seed_reference):
    for j in range(len(seed_reference.mean)):
        mu, sd = seed_reference.mean[j], seed_reference.sd[j]
        x = np.linspace(mu - 10 * sd, mu + 10 * sd, 4001)
        d = seed_reference.density(j, x)
        assert np.trapezoid(d, x) == pytest.approx(1.0, abs=1e-3)
        assert np.trapezoid(d * x, x) == pytest.approx(mu, abs=1e-3 * sd)


def test_scores_of_the_reference_itself_and_of_a_shifted_overconfident_q(seed_reference):
    p = len(seed_reference.mean)
    exact = score(np.concatenate([seed_reference.mean, np.log(seed_reference.sd)]), seed_reference)
    assert exact.summary()["mean_error_sd_rms"] < 1e-12
    assert np.allclose(exact.sd_ratio, 1.0)
    shifted = np.concatenate([seed_reference.mean + 4 * seed_reference.sd, np.log(seed_reference.sd) - 900])
    s = score(shifted, seed_reference)  # e^s underflows: every score stays finite
    assert np.allclose(s.mean_error_sd, 4.0)
    assert s.summary()["log10_sd_ratio_mean"] == pytest.approx(-900 / math.log(10))
    assert math.isfinite(s.kl) and s.kl > 900 * p
    assert s.w2 == pytest.approx(math.sqrt(16 * p + p), rel=0.05)  # the sds vanish: |shift|^2 + tr(R)


def test_logistic_reference_is_labelled_as_an_approximation():
    records = synthetic_records("logistic", n=2000, coefficients=(2.0, -3.5), intercept=0.5, seed=0)
    ref = importance_reference(build_model("logistic", records, prior_sd=10.0), draws=5000)
    assert not ref.exact and "approximation" in ref.method and ref.ess > 1000
    assert np.allclose(ref.mean, [2.0, -3.5, 0.5], atol=4 * ref.sd)
