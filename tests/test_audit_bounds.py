"""Audit bounds (privengine.audit): formulas against independent computations, soundness over seeds on
mechanisms whose exact epsilon is known, and power against deliberately broken mechanisms (tests only)."""

from __future__ import annotations

import doctest
import math

import mpmath
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import expit

from privengine.audit import (bounds, clopper_pearson_upper, epsilon_from_rates, interface, many_run_epsilon_lower,
                              mu_from_rates, one_run_epsilon_lower, one_run_p_value, one_run_test, procedures,
                              reference, threshold_test)
from privengine.audit.reference import (discrete_epsilon, gaussian_delta, gaussian_epsilon, laplace_epsilon,
                                        randomized_response_epsilon)
from privengine.errors import ConfigError

CONFIDENCE = 0.95
DELTA = 1e-5


# --------------------------------------------------------------------------- mechanisms (known exact epsilon)


def randomized_response(bits: np.ndarray, eps: float, rng: np.random.Generator) -> np.ndarray:
    """Report each bit with probability e^eps / (1 + e^eps), else its flip: exactly eps-DP per bit."""
    keep = rng.random(bits.shape) < expit(eps)
    return np.where(keep, bits, 1 - bits).astype(float)


def laplace_mechanism(bits: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    """bit + Lap(scale): sensitivity 1, exactly (1/scale)-DP."""
    return bits + rng.laplace(0.0, scale, bits.shape)


def gaussian_mechanism(bits: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """bit + N(0, sigma^2): sensitivity 1, exactly (1/sigma)-GDP."""
    return bits + rng.normal(0.0, sigma, bits.shape)


def many_run(mechanism, param, *, trials: int, seed: int, delta: float, thresholds=None):
    """Audit ``mechanism`` on neighbours 0 and 1 with ``trials`` independent outputs from each."""
    rng = np.random.default_rng(seed)
    out0 = mechanism(np.zeros(trials), param, rng)
    out1 = mechanism(np.ones(trials), param, rng)
    return threshold_test(out0, out1, delta=delta, confidence=CONFIDENCE, thresholds=thresholds)


def one_run(mechanism, param, *, m: int, k: int, seed: int, delta: float):
    """Steinke et al. one-run audit: m canaries in with probability 1/2, one output each, k in / k out guesses."""
    rng = np.random.default_rng(seed)
    included = rng.random(m) < 0.5
    scores = mechanism(included.astype(float), param, rng)
    return one_run_test(scores, included, k_pos=k, k_neg=k, delta=delta, confidence=CONFIDENCE)


# --------------------------------------------------------------------------- formulas


def test_docstring_examples_hold():
    for module in (bounds, reference, procedures, interface):
        failed, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert failed == 0, module.__name__


def _direct_p_value(eps: float, m: int, r: int, v: int, delta: float) -> float:
    """The issue's formula, term by term, in 50-digit arithmetic."""
    mpmath.mp.dps = 50
    q = mpmath.e**eps / (1 + mpmath.e**eps)

    def at_least(k: int):
        return mpmath.fsum(mpmath.binomial(r, j) * q**j * (1 - q) ** (r - j) for j in range(max(k, 0), r + 1))

    beta = at_least(v)
    alpha = max(((at_least(v - i) - beta) / i for i in range(1, v + 1)), default=mpmath.mpf(0))
    return float(min(beta + 2 * m * delta * alpha, 1))


@pytest.mark.parametrize("eps, m, r, v, delta", [
    (1.0, 1000, 100, 80, 0.0), (1.0, 1000, 100, 80, 1e-5), (0.5, 500, 200, 150, 1e-3),
    (2.0, 50, 50, 45, 1e-2), (3.0, 1000, 60, 60, 1e-4), (0.0, 10, 10, 3, 0.05),
])
def test_one_run_p_value_matches_a_direct_binomial_computation(eps, m, r, v, delta):
    assert one_run_p_value(eps, m=m, r=r, v=v, delta=delta) == pytest.approx(
        _direct_p_value(eps, m, r, v, delta), rel=1e-9, abs=1e-300)


@pytest.mark.parametrize("m, r, v", [(1000, 100, 80), (1000, 200, 200), (100, 40, 30), (10_000, 1000, 700)])
def test_one_run_bound_without_delta_is_where_the_binomial_tail_reaches_the_level(m, r, v):
    eps = one_run_epsilon_lower(m=m, r=r, v=v, confidence=CONFIDENCE)
    assert eps > 0
    # P[Binomial(r, e^eps/(1+e^eps)) >= v] = 0.05 at the bound, by scipy's binomial directly
    assert stats.binom.sf(v - 1, r, expit(eps)) == pytest.approx(1 - CONFIDENCE, rel=1e-7)
    assert one_run_epsilon_lower(m=m, r=r, v=r // 2, confidence=CONFIDENCE) == 0.0  # chance-level guessing


@pytest.mark.parametrize("m, r, v, delta", [(1000, 100, 80, 1e-5), (1000, 200, 200, 1e-5), (100, 40, 30, 1e-3),
                                            (10_000, 1000, 700, 1e-6), (1000, 100, 100, 1e-3)])
def test_one_run_bound_with_delta_is_the_first_eps_not_rejected(m, r, v, delta):
    eps = one_run_epsilon_lower(m=m, r=r, v=v, delta=delta, confidence=CONFIDENCE)
    level = 1 - CONFIDENCE
    assert 0 < eps <= one_run_epsilon_lower(m=m, r=r, v=v, confidence=CONFIDENCE)  # delta only weakens it
    grid = np.linspace(0, eps, 50)
    p = [one_run_p_value(float(e), m=m, r=r, v=v, delta=delta) for e in grid]
    assert max(p) < level  # every eps up to the bound is rejected
    assert np.all(np.diff(p) >= -1e-15)  # and the p-value grows with eps
    assert one_run_p_value(eps + 1e-6, m=m, r=r, v=v, delta=delta) >= level - 1e-9  # the bound is the crossing


def test_clopper_pearson_and_rates_against_direct_formulas():
    for k, n in ((0, 100), (7, 100), (50, 100), (999, 1000)):
        hi = clopper_pearson_upper(k, n, level=0.975)
        assert stats.binom.cdf(k, n, hi) == pytest.approx(0.025, rel=1e-6)  # the upper end of the interval
    assert clopper_pearson_upper(5, 5, level=0.975) == 1.0
    p = expit(1.0)
    assert epsilon_from_rates(fpr=1 - p, fnr=1 - p) == pytest.approx(1.0)
    assert epsilon_from_rates(fpr=0.0, fnr=0.5) == math.inf
    assert epsilon_from_rates(fpr=0.5, fnr=0.5) == 0.0
    # a test on N(0,1) vs N(mu,1) at threshold t has FPR = Phi(-t), FNR = Phi(t - mu): mu comes back exactly
    assert mu_from_rates(fpr=stats.norm.sf(0.3), fnr=stats.norm.cdf(0.3 - 1.7)) == pytest.approx(1.7)
    with pytest.raises(ConfigError, match="`false_positives` must be in"):
        many_run_epsilon_lower(false_positives=11, null_trials=10, false_negatives=0, alt_trials=10, delta=0.0)
    with pytest.raises(ConfigError, match="`confidence` must be in"):
        one_run_epsilon_lower(m=10, r=10, v=10, confidence=1.0)


def test_reference_curves_against_numerical_integration():
    for mu in (0.5, 1.0, 2.0):
        for eps in (0.0, 0.5, 2.0):
            def excess(x):  # density of N(0,1) minus e^eps times that of N(mu,1), where positive
                return max(stats.norm.pdf(x) - math.exp(eps) * stats.norm.pdf(x, mu), 0.0)
            direct = integrate.quad(excess, -30, 30, points=[0.0, mu], epsabs=1e-13, limit=200)[0]
            assert gaussian_delta(eps, mu) == pytest.approx(direct, rel=1e-6, abs=1e-12)
        assert gaussian_delta(gaussian_epsilon(mu, DELTA), mu) == pytest.approx(DELTA, rel=1e-8)
    for eps0, eps in ((1.0, 0.0), (1.0, 0.4), (3.0, 2.0)):
        def lap_excess(x):
            return max(0.5 * math.exp(-abs(x)) - math.exp(eps) * 0.5 * math.exp(-abs(x - eps0)), 0.0)
        direct = integrate.quad(lap_excess, -40, 40, points=[0.0, eps0], epsabs=1e-13)[0]
        assert laplace_epsilon(eps0, direct) == pytest.approx(eps, abs=1e-7)
    p = expit(1.2)
    assert discrete_epsilon([p, 1 - p], [1 - p, p], 1e-3) == pytest.approx(randomized_response_epsilon(1.2, 1e-3))
    assert discrete_epsilon([0.5, 0.5, 0.0], [0.4, 0.5, 0.1], 0.05) == math.inf


# --------------------------------------------------------------------------- soundness over seeds


def _violations(bounds_found, truth) -> int:
    return int(np.sum(np.asarray(bounds_found) > truth + 1e-12))


def test_many_run_is_sound_on_randomized_response_which_it_can_nearly_reach():
    # Randomized response is the tight case: the event "output 1" has exactly the likelihood ratio e^eps.
    found = [many_run(randomized_response, 1.0, trials=2000, seed=s, delta=0.0, thresholds=[0.5]).epsilon_lower
             for s in range(200)]
    assert _violations(found, 1.0) <= 20  # stated failure probability 5 %: at most 10 % of 200 seeds
    assert np.median(found) > 0.75  # and it is not vacuous


@pytest.mark.parametrize("name, mechanism, param, truth", [
    ("gaussian sigma 1", gaussian_mechanism, 1.0, gaussian_epsilon(1.0, DELTA)),
    ("laplace scale 1", laplace_mechanism, 1.0, laplace_epsilon(1.0, DELTA)),
])
def test_many_run_with_a_chosen_threshold_is_sound(name, mechanism, param, truth):
    tests = [many_run(mechanism, param, trials=20_000, seed=s, delta=DELTA) for s in range(100)]
    found = [t.epsilon_lower for t in tests]
    assert _violations(found, truth) <= 12, name  # 5 % of 100 seeds plus slack
    assert 0 < np.median(found) < truth
    if mechanism is gaussian_mechanism:  # the Gaussian-DP bound: the mechanism is exactly 1-GDP
        mus = [t.mu_lower for t in tests]
        assert _violations(mus, 1.0) <= 12 and np.median(mus) > 0.6  # threshold chosen for eps, not mu


def test_one_run_is_sound_on_randomized_response_canaries():
    # guessing on every canary: correct guesses ~ Binomial(m, q) for the canaries the output separates
    found = [one_run(randomized_response, 1.0, m=1000, k=500, seed=s, delta=0.0).epsilon_lower for s in range(200)]
    assert _violations(found, 1.0) <= 20
    assert np.median(found) > 0.5


@pytest.mark.parametrize("mechanism, param, truth, delta", [
    (gaussian_mechanism, 1.0, gaussian_epsilon(1.0, DELTA), DELTA),
    (gaussian_mechanism, 0.5, gaussian_epsilon(2.0, 1e-3), 1e-3),
    (laplace_mechanism, 1.0, 1.0, 0.0),
])
def test_one_run_is_sound_on_gaussian_and_laplace_canaries(mechanism, param, truth, delta):
    found = [one_run(mechanism, param, m=1000, k=100, seed=s, delta=delta).epsilon_lower for s in range(20)]
    assert _violations(found, truth) <= 3


# --------------------------------------------------------------------------- power: broken mechanisms


def test_broken_laplace_scale_divided_by_ten_is_caught_far_above_its_claim():
    claim = 1.0  # the mechanism claims eps = 1 (scale 1) but runs with scale 0.1: true eps 10
    many = [many_run(laplace_mechanism, 0.1, trials=20_000, seed=s, delta=0.0).epsilon_lower for s in range(5)]
    one = [one_run(laplace_mechanism, 0.1, m=1000, k=100, seed=s, delta=0.0).epsilon_lower for s in range(5)]
    assert min(many) > 4 * claim
    assert min(one) > 3 * claim


def test_broken_gaussian_and_noiseless_randomized_response_are_caught():
    claim = gaussian_epsilon(1.0, DELTA)  # 4.38: claims sigma 1, runs sigma 0.1
    broken = [many_run(gaussian_mechanism, 0.1, trials=20_000, seed=s, delta=DELTA) for s in range(5)]
    assert min(t.epsilon_lower for t in broken) > 1.5 * claim
    assert min(t.mu_lower for t in broken) > 5.0  # claimed mu = 1
    noiseless = [many_run(lambda b, _, rng: b.astype(float), None, trials=20_000, seed=s, delta=0.0, thresholds=[0.5])
                 for s in range(5)]  # randomized response with the flipping removed, claimed eps 1
    assert min(t.epsilon_lower for t in noiseless) > 8.0
