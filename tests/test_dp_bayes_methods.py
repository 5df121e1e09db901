"""dp_bayes methods beside the exponential mechanism: SSP (release, claim, noise-aware posterior) and DPVI (claim)."""

from __future__ import annotations

import itertools
import math

import dp_accounting
import numpy as np
import pytest
import torch
from dp_accounting.pld import pld_privacy_accountant
from opacus.accountants import RDPAccountant
from opacus.accountants.utils import get_noise_multiplier
from scipy import stats
from scipy.special import logsumexp

from privengine.accounting.events import from_json
from privengine.accounting.gaussian import gaussian_epsilon
from privengine.dp_bayes import ssp
from privengine.dp_bayes.config import DpBayesConfig
from privengine.dp_bayes.data import synthetic_records
from privengine.dp_bayes.ssp_posterior import NoiseAwareTarget, adaptive_metropolis, noise_aware_samples
from privengine.errors import ConfigError


@pytest.mark.parametrize("neighbouring", ["add-remove", "replace-one"])
def test_ssp_sensitivity_bounds_every_neighbouring_change(neighbouring):
    """Over the domain's corners and random records, the released entries move by at most (Delta_1, Delta_2)."""
    d, domain = 2, ssp.Domain(0.5, -10.0, 0.0)
    pairs = ssp.released_entries(d, neighbouring)
    delta_1, delta_2 = ssp.sensitivity(d, neighbouring)
    rng = np.random.default_rng(0)
    corners = np.array(list(itertools.product([-0.5, 0.5], [-0.5, 0.5], [-10.0, 0.0])))
    records = np.vstack([corners, np.column_stack([rng.uniform(-0.6, 0.6, (200, 2)), rng.uniform(-11, 1, 200)])])
    u = domain.record_vectors(records[:, :2], records[:, 2])[0]
    assert np.abs(u).max() <= 1.0
    contrib = u[:, pairs[:, 0]] * u[:, pairs[:, 1]]  # a record's contribution to each released entry
    if neighbouring == "add-remove":
        changes = contrib
    else:
        changes = (contrib[:, None, :] - contrib[None, :, :]).reshape(-1, len(pairs))
    assert np.linalg.norm(changes, axis=1).max() <= delta_2 + 1e-12
    assert np.abs(changes).sum(1).max() <= delta_1 + 1e-12
    if neighbouring == "add-remove":  # exact: attained at a corner
        assert np.linalg.norm(changes, axis=1).max() == pytest.approx(delta_2)


@pytest.mark.parametrize("epsilon", [0.3, 1.0, 3.0])
def test_analytic_gaussian_calibration_matches_pld_accounting(epsilon):
    """mu from the closed form gives epsilon back under dp-accounting's PLD accountant, alone and composed."""
    delta = 1e-5
    mu = ssp.gaussian_mu(epsilon, delta)
    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(1 / mu))
    assert acc.get_epsilon(delta) == pytest.approx(epsilon, rel=1e-3)
    three = pld_privacy_accountant.PLDAccountant()
    three.compose(dp_accounting.GaussianDpEvent(1 / mu), 3)
    assert gaussian_epsilon(math.sqrt(3) * mu, delta) == pytest.approx(three.get_epsilon(delta), rel=1e-3)


@pytest.mark.parametrize("field, bad", [("y_high", {"y_low": -1.0, "y_high": -2.0}), ("y_high", {"y_high": -10.0}),
                                        ("x_bound", {"x_bound": 0.0}), ("x_bound", {"x_bound": -1.0})])
def test_bad_domain_bounds_name_the_field(field, bad):
    with pytest.raises(ConfigError) as err:
        DpBayesConfig.from_dict({"method": "ssp", **bad})
    assert err.value.field == field and "must" in str(err.value)


def test_bad_domain_bounds_in_the_engine_name_the_field():
    with pytest.raises(ConfigError, match="`y_high` must be > y_low"):
        ssp.Domain(1.0, 2.0, 2.0)
    with pytest.raises(ConfigError, match="`x_bound` must be a finite number > 0"):
        ssp.Domain(math.inf, 0.0, 1.0)


def test_methods_outside_their_scope_are_refused():
    with pytest.raises(ConfigError, match="`method` must be exponential or dpvi for the logistic model"):
        DpBayesConfig.from_dict({"method": "ssp", "model": "logistic"})
    with pytest.raises(ConfigError, match="`method` .* set mode to sweep"):
        DpBayesConfig.from_dict({"method": "all"})


def _brute_force_log_density(u, z, sd, n, centre, prior_sd):
    """log p(beta, b, l, A00, A01 | Z) of the tiny d = 1 replace-one problem, written out independently in numpy.

    Released entries (replace-one, d = 1): (0,0) (0,1) (0,2) (1,2) (2,2): A00 = sum x^2, A01 = sum x,
    Sxy = (sum x y', sum y'), Syy = sum y'^2.
    """
    beta, b, l, a00, a01 = u.T
    s2 = np.exp(2 * l)
    wc = np.stack([beta, b - centre], 1)
    big = np.stack([np.stack([a00, a01], 1), np.stack([a01, np.full_like(a00, n)], 1)], 1)  # (M, 2, 2)
    aw = np.einsum("mij,mj->mi", big, wc)
    quad = np.einsum("mi,mi->m", wc, aw)
    mean = np.column_stack([aw, quad + n * s2])
    cov = np.zeros((len(u), 3, 3))
    cov[:, :2, :2] = s2[:, None, None] * big
    cov[:, :2, 2] = cov[:, 2, :2] = 2 * s2[:, None] * aw
    cov[:, 2, 2] = 4 * s2 * quad + 2 * n * s2**2
    cov += np.diag(sd[2:] ** 2)
    resid = z[2:] - mean
    sign, logdet = np.linalg.slogdet(cov)
    ll_s = -0.5 * np.einsum("mi,mi->m", resid, np.linalg.solve(cov, resid[:, :, None])[:, :, 0]) - 0.5 * logdet
    ll_xx = -0.5 * (((z[0] - a00) / sd[0]) ** 2 + ((z[1] - a01) / sd[1]) ** 2)
    prior = -0.5 * (beta**2 + b**2) / prior_sd**2 - np.log1p(np.exp(2 * l)) + l  # half-Cauchy(0, 1) on e^l
    # support: A positive definite and inside the box |A00| <= N bx^2, |A01| <= N bx (bx = 1 here)
    ok = (a00 > 0) & (a00 * n - a01**2 > 0) & (a00 <= n) & (np.abs(a01) <= n) & (sign > 0)
    return np.where(ok, prior + ll_s + ll_xx, -np.inf)


@pytest.mark.slow
def test_noise_aware_posterior_matches_brute_force_importance_sampling():
    """Tiny problem (d = 1, N = 200, eps = 3): the sampler's moments and quantiles against 400k importance draws."""
    n, d, prior_sd = 200, 1, 10.0
    domain = ssp.Domain(1.0, -3.0, 3.0)
    rec = synthetic_records("linear", n=n, coefficients=(1.0,), intercept=0.5, noise_sd=0.5, seed=3)
    pairs = ssp.released_entries(d, "replace-one")
    exact = ssp.statistics(domain.record_vectors(rec.x.numpy() * 2, rec.y.numpy())[0])[None]
    noise_sd = ssp.sensitivity(d, "replace-one")[1] / ssp.gaussian_mu(3.0, 1e-5)
    scales = domain.entry_scales(pairs, d)
    z = ssp.release(exact, pairs, np.array([noise_sd]), torch.Generator().manual_seed(5))[0] * scales
    sd = noise_sd * scales
    target = NoiseAwareTarget(torch.as_tensor(z[None]), torch.as_tensor(sd[None]), torch.tensor([float(n)]), d,
                              domain, prior_sd, 1.0)
    # many short chains, not a few long ones: a step costs about the same for 8 or 48 chains (d = 1), and 48 x 500
    # kept states from 8 000 steps each are six times the 8 x 500 of 40 000 steps, in a fifth of the time
    theta, _ = noise_aware_samples(target, steps=8_000, chains=48, generator=torch.Generator().manual_seed(0))
    theta = theta[0]
    # brute force: self-normalised importance sampling of the numpy density above. The proposal is a Student-t
    # with the moments of a separate pilot chain over the full state, inflated; the weights correct any error
    # in it, so the check does not rest on the sampler being right.
    u0, scale = target.plug_in()
    pilot, _ = adaptive_metropolis(target, u0, scale, steps=5_000, generator=torch.Generator().manual_seed(9))
    pilot = pilot[0].numpy()
    draws = 400_000
    proposal = stats.multivariate_t(loc=pilot.mean(0), shape=2.0 * np.cov(pilot.T), df=5,
                                    seed=np.random.default_rng(1))
    u = proposal.rvs(size=draws)
    log_q = proposal.logpdf(u)
    log_w = _brute_force_log_density(u, z, sd, n, domain.centre, prior_sd) - log_q
    w = np.exp(log_w - logsumexp(log_w))
    ess = 1 / np.sum(w**2)
    assert ess > 2000, ess
    bf_mean = w @ u[:, :3]
    bf_sd = np.sqrt(w @ (u[:, :3] - bf_mean) ** 2)
    assert np.all(np.abs(theta.mean(0) - bf_mean) < 0.1 * bf_sd), (theta.mean(0), bf_mean, bf_sd)
    assert np.allclose(theta.std(0), bf_sd, rtol=0.1), (theta.std(0), bf_sd)
    for j in range(3):  # the 5 % and 95 % quantiles, which make the released interval
        order = np.argsort(u[:, j])
        cdf = np.cumsum(w[order])
        bf_q = u[order, j][np.searchsorted(cdf, [0.05, 0.95])]
        assert np.allclose(np.quantile(theta[:, j], [0.05, 0.95]), bf_q, atol=0.15 * bf_sd[j])


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
def test_dpvi_noise_multiplier_and_claim_follow_opacus(neighbouring):
    """sigma is Opacus' get_noise_multiplier at the add/remove target; the claim is Opacus' RDP accountant's.

    Under replace-one the target is (eps/2, delta/(1 + e^(eps/2))) and the claim, restated by group privacy,
    is the requested (eps, delta) within calibration tolerance, like SSP's and the exponential mechanism's.
    """
    from privengine.dp_bayes.comparison import _claims
    from privengine.dp_bayes.releases import DpviInfo, dpvi_noise_multiplier

    config = DpBayesConfig.from_dict({"method": "dpvi", "epsilon": 1.0, "dpvi_steps": 300, "dpvi_sample_rate": 0.1,
                                      "neighbouring": neighbouring})
    replace_one = neighbouring == "replace-one"
    target, delta_ar = (0.5, 1e-5 / (1 + math.exp(0.5))) if replace_one else (1.0, 1e-5)
    sigma = dpvi_noise_multiplier(config, 1.0)
    assert sigma == pytest.approx(get_noise_multiplier(target_epsilon=target, target_delta=delta_ar, sample_rate=0.1,
                                                       steps=300, accountant="rdp"))
    claim = _claims(config, "dpvi", DpviInfo({1.0: sigma}, {1.0: 300}), [1.0], headline=True, sweep=False)
    acc = RDPAccountant()
    acc.history = [(sigma, 0.1, 300)]
    eps_ar, order = acc.get_privacy_spent(delta=delta_ar)  # add/remove, for the calibrated sigma
    assert target - 0.01 <= eps_ar <= target and claim.order == order
    assert "Opacus RDP" in claim.accountant and claim.delta == 1e-5  # the requested delta in both relations
    assert 0.98 <= claim.epsilon <= 1.0  # the requested epsilon within calibration tolerance, never above
    assert any("configured N = 4000 (n_records, public)" in c for c in claim.caveats)
    if replace_one:
        assert claim.epsilon == pytest.approx(2 * eps_ar) and (1 + math.exp(eps_ar)) * delta_ar <= 1e-5
        assert claim.neighbouring.startswith("replace one record") and "group privacy" in claim.accountant
        assert any("Calibrated for replace-one" in c for c in claim.caveats)
    else:
        assert claim.epsilon == pytest.approx(eps_ar) and claim.neighbouring.startswith("add or remove")


@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
def test_sweep_headline_composes_claims_under_one_relation(neighbouring):
    """Every method's claim is under the config's relation before they compose.

    Under add/remove every part carries privacy events, and the headline composes them tightly at the configured
    delta: dp-accounting's PLD accountant on the same events gives the same epsilon, below the parts' sum. Under
    replace-one DPVI's claim is the group-privacy restatement of its add/remove accounting (2 eps, (1 + e^eps)
    delta') at the calibrated target, which carries no events, so the headline adds like budgets; an add/remove
    DPVI claim that still reached the composition would be restated there.
    """
    from privengine.dp_bayes.comparison import _claims, sweep_headline
    from privengine.dp_bayes.privacy import dpvi_claim
    from privengine.dp_bayes.releases import DpviInfo, SspInfo, dpvi_noise_multiplier

    config = DpBayesConfig.from_dict({"method": "all", "mode": "sweep", "sweep_epsilons": [1.0, 3.0],
                                      "neighbouring": neighbouring, "dpvi_steps": 300, "dpvi_sample_rate": 0.1})
    mu = {e: ssp.gaussian_mu(e, config.delta) for e in (1.0, 3.0)}
    ssp_claim = _claims(config, "ssp", SspInfo(mu, mu, 1.0, 0.3, 0.0), [1.0, 3.0], headline=False, sweep=True)
    sigmas = {e: dpvi_noise_multiplier(config, e) for e in (1.0, 3.0)}
    dpvi = _claims(config, "dpvi", DpviInfo(sigmas, {1.0: 300, 3.0: 300}), [1.0, 3.0], headline=False, sweep=True)
    claims, head = sweep_headline(config, [ssp_claim, dpvi])
    assert head.headline and not any(c.headline for c in claims) and claims[1] == dpvi
    assert dpvi.delta == config.delta and dpvi.epsilon <= 4.0  # the two releases' RDP composition, within 1 + 3
    relation = "replace one record" if neighbouring == "replace-one" else "add or remove"
    assert all(c.neighbouring.startswith(relation) for c in claims)
    if neighbouring == "add-remove":
        pld = pld_privacy_accountant.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
        pld.compose(dp_accounting.ComposedDpEvent([from_json(e) for e in ssp_claim.events + dpvi.events]))
        assert head.events == ssp_claim.events + dpvi.events and head.relation == "add_or_remove_one"
        assert head.epsilon == pytest.approx(pld.get_epsilon(config.delta), rel=1e-6)
        assert head.delta == config.delta and head.epsilon < ssp_claim.epsilon + dpvi.epsilon
        return
    assert head.epsilon == pytest.approx(ssp_claim.epsilon + dpvi.epsilon) == pytest.approx(
        sum(c.epsilon for c in claims))
    assert head.delta == pytest.approx(2 * config.delta) and not head.events
    acc = RDPAccountant()
    acc.history = [(sigmas[1.0], 0.1, 300), (sigmas[3.0], 0.1, 300)]
    delta_ar = config.delta / (1 + math.exp(2.0))
    eps_ar, _ = acc.get_privacy_spent(delta=delta_ar)
    assert dpvi.epsilon == pytest.approx(2 * eps_ar) and (1 + math.exp(eps_ar)) * delta_ar <= config.delta
    raw = dpvi_claim(epsilon=eps_ar, delta=delta_ar, order=None, noise_multipliers=(1.0,), sample_rate=0.1,
                     steps=(300,), clip=1.0, n_records=10, neighbouring="add-remove", requested=(4.0, 1e-5),
                     noise="")
    (guarded, _), head2 = sweep_headline(config, [raw, ssp_claim])
    assert guarded.epsilon == pytest.approx(2 * eps_ar) and guarded.neighbouring.startswith("replace one")
    assert head2.delta == pytest.approx((1 + math.exp(eps_ar)) * delta_ar + config.delta)


def test_dpvi_normalises_by_the_configured_record_count():
    """round(q N) and the 1/N weight of the prior and entropy terms come from n_records, not from len(data).

    One noiseless step on the same 40 records (same Poisson sample and Monte Carlo draws): the gradient Adam
    receives is (sum of clipped l_i gradients / (q N) + grad r / N), so with n_records = 80 it is exactly half
    the one with n_records = 40. Had either normaliser been read from the data, the two would not be in ratio 2.
    """
    from privengine.dp_bayes import dpvi
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    records = synthetic_records("linear", n=40, coefficients=(2.0, -3.5), intercept=-5.0, seed=3)
    grads: list[list[torch.Tensor]] = []
    hook = register_optimizer_step_pre_hook(
        lambda opt, args, kwargs: grads.append([p.grad.clone() for g in opt.param_groups for p in g["params"]]))
    try:
        for n_records in (40, 80):
            dpvi.fit("linear", [records], n_records=n_records, noise_multiplier=0.0, sample_rate=0.5, steps=1,
                     clip=1e6, lr=0.1, mc_samples=2, prior_sd=10.0, sigma_prior_scale=1.0,
                     generator=torch.Generator().manual_seed(0))
        short = synthetic_records("linear", n=39, coefficients=(2.0, -3.5), intercept=-5.0, seed=3)
        dpvi.fit("linear", [records, short], n_records=40, noise_multiplier=1.0, sample_rate=0.5, steps=2, clip=1.0,
                 lr=0.1, mc_samples=2, prior_sd=10.0, sigma_prior_scale=1.0, generator=torch.Generator().manual_seed(0))
    finally:
        hook.remove()
    assert all(torch.count_nonzero(g) > 0 for g in grads[0])
    for a, b in zip(grads[0], grads[1]):
        torch.testing.assert_close(a, 2 * b, rtol=1e-12, atol=1e-15)
    assert dpvi.expected_batch_size(0.5, 40) == 20
