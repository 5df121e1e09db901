"""dp_bayes engine math: sanitizer, sensitivity of the utility, analytic gradients, proper priors, config."""

from __future__ import annotations

import math

import pytest
import torch

from privengine.dp_bayes.config import DpBayesConfig
from privengine.dp_bayes.data import Records, synthetic_records
from privengine.dp_bayes.models import build_model
from privengine.dp_bayes.objective import Objective
from privengine.dp_bayes.sanitizer import sanitize, sensitivity
from privengine.errors import ConfigError

TAU = 4.0


def _model(kind: str = "linear", n: int = 300, **kw):
    records = synthetic_records(kind, n=n, coefficients=(2.0, -3.5), intercept=-5.0 if kind == "linear" else 0.5,
                                noise_sd=0.1, seed=1)
    return build_model(kind, records, prior_sd=10.0, sigma_prior_scale=1.0, **kw)


def _random_z(model, count: int, gen: torch.Generator) -> torch.Tensor:
    """Means around the truth and far from it, log-sds from very narrow to very wide."""
    p = model.n_params
    mean = torch.randn(count, p, generator=gen, dtype=torch.float64) * torch.tensor([0.1, 0.1, 0.1, 3.0][:p])
    mean *= 10 ** torch.randint(-1, 3, (count, 1), generator=gen)
    log_sd = torch.rand(count, p, generator=gen, dtype=torch.float64) * 10 - 8
    return torch.cat([mean, log_sd], 1)


def test_sanitizer_is_bounded_monotone_and_near_identity_at_zero():
    ll = torch.cat([torch.linspace(-1e4, 1e4, 20001, dtype=torch.float64), torch.tensor([-1e300, 1e300])])
    gamma, slope = sanitize(ll, TAU)
    assert bool((gamma.abs() <= TAU).all())
    assert bool((gamma[1:-2].diff() >= 0).all())
    assert bool(((slope >= 0) & (slope <= 1)).all())
    small = torch.linspace(-0.01, 0.01, 11, dtype=torch.float64)
    assert torch.allclose(sanitize(small, TAU)[0], small, atol=1e-6)  # tau tanh(l / tau) = l - l^3/(3 tau^2) + ...


def test_sensitivity_per_relation():
    assert sensitivity(TAU, "replace-one") == 2 * TAU
    assert sensitivity(TAU, "add-remove") == TAU


@pytest.mark.parametrize("kind", ["linear", "logistic"])
def test_replacing_one_record_moves_the_utility_by_less_than_two_tau(kind):
    """Empirical sensitivity over random z plus z chosen to nearly attain the bound, common Monte Carlo noise.

    The replaced record is the one the truth fits best (largest log-likelihood at a small sigma), the new
    one is an outlier: at z near (truth, sigma = that record's residual) the difference approaches 2 tau
    for the linear model; the logistic log-likelihood is <= 0, so there it approaches tau.
    """
    gen = torch.Generator().manual_seed(0)
    model = _model(kind)
    x, y = model.records.x, model.records.y
    truth = torch.tensor([2.0, -3.5, -5.0 if kind == "linear" else 0.5], dtype=torch.float64)
    resid = y - x @ truth[:2] - truth[2]
    i = int(resid.abs().argmin()) if kind == "linear" else 0
    if kind == "linear":
        near = torch.cat([truth, torch.log(resid[i].abs())[None], torch.full((4,), -12.0, dtype=torch.float64)])
        new_y = 1e3
    else:
        near = torch.cat([truth * 50 * (2 * y[i] - 1), torch.full((3,), -12.0, dtype=torch.float64)])
        new_y = 1.0 - float(y[i])
    z = torch.cat([_random_z(model, 400, gen), near[None]])
    other = build_model(kind, model.records.replace_record(i, x[i], new_y), prior_sd=10.0, sigma_prior_scale=1.0)
    u, u2 = Objective(model, tau=TAU, mc_samples=4), Objective(other, tau=TAU, mc_samples=4)
    noise = u.draw_noise(len(z), gen)
    diff = (u.value_and_grad(z, noise=noise)[0] - u2.value_and_grad(z, noise=noise)[0]).abs()
    assert float(diff.max()) <= 2 * TAU  # tanh saturates to exactly 1 in floating point
    assert float(diff.max()) > (1.8 if kind == "linear" else 0.9) * TAU  # the bound is nearly attained


def test_removing_one_record_moves_the_utility_by_less_than_tau():
    gen = torch.Generator().manual_seed(1)
    model = _model()
    smaller = build_model("linear", Records(model.records.x[1:], model.records.y[1:]), prior_sd=10.0,
                          sigma_prior_scale=1.0)
    u, u2 = Objective(model, tau=TAU, mc_samples=2), Objective(smaller, tau=TAU, mc_samples=2)
    z = _random_z(model, 400, gen)
    noise = u.draw_noise(len(z), gen)
    diff = (u.value_and_grad(z, noise=noise)[0] - u2.value_and_grad(z, noise=noise)[0]).abs()
    assert float(diff.max()) <= TAU


@pytest.mark.parametrize("kind", ["linear", "logistic"])
@pytest.mark.parametrize("tau", [None, TAU])
def test_analytic_gradient_matches_autograd(kind, tau):
    gen = torch.Generator().manual_seed(2)
    model = _model(kind, n=50)
    obj = Objective(model, tau=tau, entropy_weight=1.7, mc_samples=3)
    p = model.n_params
    z = torch.cat([torch.randn(6, p, generator=gen, dtype=torch.float64) * 0.5,
                   torch.rand(6, p, generator=gen, dtype=torch.float64) * 6 - 6], 1)
    noise = obj.draw_noise(6, gen)
    _, grad = obj.value_and_grad(z, noise=noise)
    auto = torch.autograd.functional.jacobian(lambda zz: obj.value_and_grad(zz, noise=noise)[0].sum(), z)
    assert torch.allclose(grad, auto, rtol=1e-8, atol=1e-8)


def test_utility_is_an_unbiased_elbo_estimate_for_a_known_case():
    """Linear model, raw likelihood: E_q[loglik] has a closed form given (m, s); compare to the MC average."""
    gen = torch.Generator().manual_seed(3)
    model = _model(n=200)
    x, y = model.records.x, model.records.y
    m = torch.tensor([1.9, -3.4, -5.05, -2.0], dtype=torch.float64)
    s = torch.tensor([-3.0, -3.0, -4.0, -3.5], dtype=torch.float64)
    z = torch.cat([m, s])[None].expand(4000, -1)
    obj = Objective(model, tau=None, entropy_weight=0.0, mc_samples=2)
    mc = obj.value_and_grad(z, generator=gen)[0].mean() - model.log_prior(m[None])[0]  # prior term is ~linear here
    v = torch.exp(2 * s)
    resid2 = (y - x @ m[:2] - m[2]).square() + x.square() @ v[:2] + v[2]
    exact = (-0.5 * resid2 * torch.exp(-2 * m[3] + 2 * v[3]) - m[3] - 0.5 * math.log(2 * math.pi)).sum()
    assert float(mc) == pytest.approx(float(exact), rel=2e-3)


def test_flat_priors_are_refused():
    records = synthetic_records("linear", n=20, coefficients=(1.0,), intercept=0.0)
    for field, kw in (("prior_sd", dict(prior_sd=math.inf, sigma_prior_scale=1.0)),
                      ("sigma_prior_scale", dict(prior_sd=10.0, sigma_prior_scale=math.inf))):
        with pytest.raises(ConfigError, match=f"`{field}`.*improper"):
            build_model("linear", records, **kw)
    with pytest.raises(ConfigError, match="`prior_sd`"):
        DpBayesConfig(prior_sd=math.inf).validate()
    with pytest.raises(ConfigError, match="`entropy_weight` must be in \\(0, 1000\\]"):
        DpBayesConfig(entropy_weight=0.0).validate()


def test_config_defaults_and_ranges():
    cfg = DpBayesConfig().validate()
    assert (cfg.n_records, cfg.tau, cfg.epsilon, cfg.entropy_weight, cfg.draws) == (4000, 4.0, 1.0, 1.0, 1)
    with pytest.raises(ConfigError, match="`neighbouring` must be one of replace-one, add-remove"):
        DpBayesConfig(neighbouring="swap").validate()
    with pytest.raises(ConfigError, match="`epsilon`"):
        DpBayesConfig(epsilon=0.0).validate()
    with pytest.raises(ConfigError, match="`n_records` times chains \\(100\\) times mc_samples \\(256\\)"):
        DpBayesConfig(draws=100, mc_samples=256).validate()
    assert DpBayesConfig(mode="sweep", sweep_epsilons=(0.1, 1.0), sweep_repeats=3).validate().chains == 6
