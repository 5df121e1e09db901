"""Tests of privengine.accounting.pate (PATE privacy accounting), public API only.

The reference implementations (bench/pate_reference.py, shared with the benchmark)
are plain per-query, per-order Python loops written from the formulas in
shared/REFERENCE.md section 1 (math module only), independent of the vectorised
numpy code under test.

Published-figure note: Papernot et al. (2018) report eps = 1.97 (delta = 1e-5) for
MNIST Confident-GNMax with T=200, sigma1=150, sigma2=40 and 286 answered queries.
Their teacher votes are not available here, so that figure is deliberately not
tested (it cannot be reproduced without the votes and must not be faked).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from bench.pate_reference import confident_gnmax_eps as ref_confident
from bench.pate_reference import gnmax_eps as ref_gnmax
from bench.pate_reference import lnmax_eps as ref_lnmax
from bench.pate_reference import lnmax_smooth_sensitivity as ref_lnmax_ss
from privengine.accounting.pate import (
    GNMAX_ORDERS,
    PateAnalysis,
    confident_gnmax_analysis,
    confident_gnmax_eps_curve,
    confident_gnmax_epsilon,
    gnmax_analysis,
    gnmax_eps_curve,
    gnmax_epsilon,
    lnmax_analysis,
    lnmax_eps_curve,
    lnmax_moments_epsilon,
    lnmax_smooth_sensitivity,
)
from privengine.errors import ConfigError

ORDERS = [float(x) for x in GNMAX_ORDERS]
LOG_1E5 = math.log(1e5)


def random_votes(rng, n, m, teachers, concentration=0.3):
    """Teacher votes: a true class per query, teacher accuracy ~ Beta, errors on a few confusers."""
    true = rng.integers(0, m, n)
    acc = rng.beta(4, 1.5, n)
    p = rng.dirichlet(np.full(m, concentration), n) * (1 - acc)[:, None]
    p[np.arange(n), true] += acc
    return rng.multinomial(teachers, p).astype(float)


# --------------------------------------------------------------------------- reference check values


@pytest.mark.parametrize("gamma, expected", [(0.1, 11.756463), (0.05, 5.302585)])
def test_lnmax_data_independent_check_values(gamma, expected):
    votes = random_votes(np.random.default_rng(1), 100, 10, 250)
    dd, di = lnmax_moments_epsilon(votes, noise_eps=gamma, delta=1e-5)
    assert di == pytest.approx(expected, abs=1e-5)
    assert isinstance(dd, float) and isinstance(di, float)
    assert dd <= di


def test_lnmax_data_independent_counts_answered_rows():
    votes = random_votes(np.random.default_rng(2), 300, 10, 250)
    for k in (1, 10, 100, 300):
        _, di = lnmax_moments_epsilon(votes[:k], 0.05, 1e-5)
        want = min((k * min(0.5 * 0.1**2 * l * (l + 1), 0.1 * l) + LOG_1E5) / l for l in range(1, 9))
        assert di == pytest.approx(want, rel=1e-12)


# --------------------------------------------------------------------------- seed bugs (REFERENCE 1d)


def _seed_bug_votes():
    """250 teachers, 100 answered queries, 10 classes: rows 0..9 unanimous, the rest split."""
    rng = np.random.default_rng(3)
    votes = np.zeros((100, 10))
    votes[np.arange(10), np.arange(10)] = 250.0
    for i in range(10, 100):
        a, b, c = rng.choice(10, 3, replace=False)
        votes[i, [a, b, c]] = [140.0, 80.0, 30.0]
    return votes, rng.integers(0, 10, 100)  # noisy labels in 0..9


def test_seed_bug_rows_indexed_by_labels_differ_from_answered_queries():
    votes, labels = _seed_bug_votes()
    right = lnmax_analysis(votes, noise_eps=0.05, delta=1e-5)
    wrong = lnmax_analysis(votes[labels], noise_eps=0.05, delta=1e-5)
    # The seed's bug: analysing rows 0..9 over and over sits at the ln(1/delta)/L floor.
    assert wrong.eps == pytest.approx(LOG_1E5 / 8, abs=0.01)
    assert wrong.warning is not None and "l = L = 8" in wrong.warning
    assert right.eps > wrong.eps + 1.0
    # All rows are used, in any order; the data-independent bound counts them all.
    assert right.eps == pytest.approx(ref_lnmax(votes, 0.05, 1e-5)[0], rel=1e-9)
    perm = np.random.default_rng(4).permutation(100)
    assert lnmax_moments_epsilon(votes[perm], 0.05, 1e-5)[0] == pytest.approx(right.eps, rel=1e-12)
    assert lnmax_moments_epsilon(votes[:10], 0.05, 1e-5)[0] < right.eps
    assert right.data_independent_eps == pytest.approx(5.302585, abs=1e-5)
    assert right.n_queries == 100


def test_num_classes_is_votes_shape_not_classes_seen():
    # All-split rows: q is capped at 1 - 1/m with m = votes.shape[1].
    for m in (3, 10, 17):
        votes = np.full((5, m), 7.0)
        assert np.allclose(lnmax_analysis(votes, 0.05, 1e-5).log_q, math.log(1 - 1 / m), rtol=1e-14)
        assert np.allclose(gnmax_analysis(votes, 40, 1e-5).log_q, math.log(1 - 1 / m), rtol=1e-14)
    # A class nobody voted for still counts: it adds a term to q.
    narrow = np.tile([8.0, 2.0], (20, 1))
    wide = np.tile([8.0, 2.0, 0.0], (20, 1))
    a_n = lnmax_analysis(narrow, noise_eps=1.0, delta=1e-5)
    a_w = lnmax_analysis(wide, noise_eps=1.0, delta=1e-5)
    f = lambda d: (2 + d) / (4 * math.exp(d))  # noqa: E731  (gamma = 1)
    assert a_n.log_q[0] == pytest.approx(math.log(f(6)), rel=1e-12)
    assert a_w.log_q[0] == pytest.approx(math.log(f(6) + f(8)), rel=1e-12)
    assert a_w.eps > a_n.eps
    assert a_w.eps == pytest.approx(ref_lnmax(wide, 1.0, 1e-5)[0], rel=1e-9)


def test_lnmax_smooth_sensitivity_sorts_counts_first():
    # The 2016 script's early exit reads unsorted counts; here the top class is not column 0.
    votes = np.array([[2.0, 200.0, 48.0, 0.0], [30.0, 10.0, 210.0, 0.0], [0.0, 5.0, 1.0, 244.0]])
    ss = lnmax_smooth_sensitivity(votes, noise_eps=0.05, delta=1e-5)
    for perm in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2]):
        assert lnmax_smooth_sensitivity(votes[:, perm], 0.05, 1e-5) == pytest.approx(ss, rel=1e-12)
    l_star = lnmax_analysis(votes, 0.05, 1e-5).order
    assert ss == pytest.approx(ref_lnmax_ss(votes, 0.05, l_star, 0.09), rel=1e-9)
    assert ss > 0


# --------------------------------------------------------------------------- vectorised == loops


@pytest.mark.parametrize("seed", range(6))
def test_lnmax_matches_loop(seed):
    rng = np.random.default_rng(100 + seed)
    n, m = rng.integers(1, 40), rng.integers(2, 12)
    votes = random_votes(rng, n, m, int(rng.integers(5, 300)))
    if seed % 2:
        votes = votes + rng.uniform(0, 1, votes.shape)  # float votes are allowed too
    gamma = float(rng.choice([0.02, 0.05, 0.1, 0.3, 1.0]))
    moments = int(rng.integers(1, 20))
    dd, di = lnmax_moments_epsilon(votes, gamma, 1e-5, moments=moments)
    r_dd, r_di, r_l = ref_lnmax(votes, gamma, 1e-5, moments)
    assert dd == pytest.approx(r_dd, rel=1e-9)
    assert di == pytest.approx(r_di, rel=1e-9)
    assert lnmax_analysis(votes, gamma, 1e-5, moments).order == r_l


@pytest.mark.parametrize("seed", range(4))
def test_lnmax_smooth_sensitivity_matches_brute_force(seed):
    rng = np.random.default_rng(200 + seed)
    votes = random_votes(rng, int(rng.integers(1, 8)), int(rng.integers(2, 6)), int(rng.integers(10, 60)))
    gamma = float(rng.choice([0.05, 0.2, 0.5]))
    beta = float(rng.choice([0.09, 0.5]))
    a = lnmax_analysis(votes, gamma, 1e-5, beta=beta)
    assert a.smooth_sensitivity == pytest.approx(ref_lnmax_ss(votes, gamma, a.order, beta), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_gnmax_matches_loop(seed):
    rng = np.random.default_rng(300 + seed)
    votes = random_votes(rng, int(rng.integers(1, 15)), int(rng.integers(2, 10)), int(rng.integers(20, 300)))
    sigma = float(rng.choice([2.0, 5.0, 20.0, 40.0]))
    delta = float(rng.choice([1e-5, 1e-6]))
    assert gnmax_epsilon(votes, sigma, delta) == pytest.approx(ref_gnmax(votes, sigma, delta), rel=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_confident_gnmax_matches_loop(seed):
    rng = np.random.default_rng(400 + seed)
    votes = random_votes(rng, int(rng.integers(1, 12)), int(rng.integers(2, 10)), 250)
    t = float(rng.choice([100.0, 200.0, 300.0]))
    s1, s2 = float(rng.choice([20.0, 80.0, 150.0])), float(rng.choice([5.0, 20.0, 40.0]))
    eps, expected = confident_gnmax_epsilon(votes, t, s1, s2, 1e-5)
    r_eps, r_expected = ref_confident(votes, t, s1, s2, 1e-5)
    assert eps == pytest.approx(r_eps, rel=1e-9)
    assert expected == pytest.approx(r_expected, rel=1e-9)
    # the expected cost (weights p, not a bound) through the answered weights, against the loop's
    p = np.exp(confident_gnmax_analysis(votes, t, s1, s2, 1e-5).extras["log_p_answered"])
    expected_cost = confident_gnmax_analysis(votes, t, s1, s2, 1e-5, answered=p).eps
    assert expected_cost == pytest.approx(ref_confident(votes, t, s1, s2, 1e-5, expected_cost=True)[0], rel=1e-9)
    assert expected_cost <= eps


# --------------------------------------------------------------------------- GNMax specifics


@pytest.mark.parametrize("n, m, sigma", [(1, 10, 40.0), (50, 10, 40.0), (300, 3, 100.0)])
def test_gnmax_all_split_votes_cost_lam_over_sigma_squared(n, m, sigma):
    votes = np.full((n, m), 25.0)  # q capped at 1 - 1/m: only the data-independent bound applies
    want = min(n * lam / sigma**2 + LOG_1E5 / (lam - 1) for lam in ORDERS)
    a = gnmax_analysis(votes, sigma, 1e-5)
    assert a.eps == pytest.approx(want, rel=1e-12)
    assert a.data_independent_eps == pytest.approx(want, rel=1e-12)
    assert np.allclose(a.cost, n * GNMAX_ORDERS / sigma**2, rtol=1e-12)


def test_gnmax_unanimous_votes_cost_far_less_than_data_independent():
    votes = np.zeros((1000, 10))
    votes[:, 3] = 250.0
    a = gnmax_analysis(votes, sigma=40, delta=1e-5)
    assert a.eps < 0.2 * a.data_independent_eps
    assert a.order in GNMAX_ORDERS
    assert a.eps == pytest.approx(min(a.cost + LOG_1E5 / (a.orders - 1)), rel=1e-12)


def test_zero_q_costs_nothing():
    # Huge unanimous margin: log q is far below anything exp() can represent ...
    votes = np.zeros((5, 4))
    votes[:, 0] = 1e6
    a = gnmax_analysis(votes, sigma=1.0, delta=1e-5)
    assert np.all(a.log_q < -1e10) and np.all(a.cost == 0.0)
    # ... or underflows to -inf (q = 0): the RDP is exactly 0.
    votes[:, 0] = 1e160
    a = gnmax_analysis(votes, sigma=1e-3, delta=1e-5)
    assert np.all(np.isneginf(a.log_q))
    assert np.all(a.cost == 0.0)
    assert a.eps == pytest.approx(min(LOG_1E5 / (lam - 1) for lam in ORDERS))
    assert a.warning is not None  # the minimum sits at the last order (500)


# --------------------------------------------------------------------------- Confident-GNMax specifics


def test_confident_threshold_step_data_independent_is_lam_over_2_sigma1_squared():
    # Nothing reaches the threshold: p ~ 0, and the threshold step (q = p tiny) is data-dependent;
    # charged its GNMax step anyway (the bound), each query costs lam/(2 s1^2) + lam/s2^2 data-independently.
    votes = np.full((40, 10), 25.0)
    a = confident_gnmax_analysis(votes, threshold=10_000, sigma1=150, sigma2=40, delta=1e-5)
    assert a.expected_answered < 1e-12
    assert np.allclose(a.data_independent_cost, 40 * (GNMAX_ORDERS / (2 * 150.0**2) + GNMAX_ORDERS / 40.0**2),
                       rtol=1e-12)
    assert a.eps < a.data_independent_eps
    # with the expected weights (not a bound) the GNMax step costs ~0
    e = confident_gnmax_analysis(votes, 10_000, 150, 40, 1e-5, answered=np.exp(a.extras["log_p_answered"]))
    assert np.allclose(e.data_independent_cost, 40 * GNMAX_ORDERS / (2 * 150.0**2), rtol=1e-9)
    # p = 1/2 exactly (top == T): q = 1/2, only the data-independent bound applies.
    b = confident_gnmax_analysis(votes, threshold=25.0, sigma1=150, sigma2=40, delta=1e-5)
    assert b.expected_answered == pytest.approx(20.0)
    assert np.allclose(b.extras["log_q_threshold"], math.log(0.5))


def test_confident_answered_mask():
    rng = np.random.default_rng(5)
    votes = random_votes(rng, 60, 10, 250)
    a = confident_gnmax_analysis(votes, 200, 150, 40, 1e-5)
    p = np.exp(a.extras["log_p_answered"])
    # The default charges every query both steps: the same as an all-True mask, and more than the expected cost.
    every = confident_gnmax_analysis(votes, 200, 150, 40, 1e-5, answered=np.ones(60, bool))
    assert every.eps == a.eps and np.array_equal(a.answered_curve, np.arange(1, 61))
    b = confident_gnmax_analysis(votes, 200, 150, 40, 1e-5, answered=p)
    assert b.eps <= a.eps
    # ... and a realised mask charges GNMax only on the answered rows.
    mask = rng.random(60) < p
    c = confident_gnmax_analysis(votes, 200, 150, 40, 1e-5, answered=mask)
    thr_only = confident_gnmax_analysis(votes, 200, 150, 40, 1e-5, answered=np.zeros(60, bool))
    gn = gnmax_analysis(votes[mask], 40, 1e-5)
    assert np.allclose(c.cost, thr_only.cost + gn.cost, rtol=1e-12, atol=0)
    assert c.answered_curve[-1] == mask.sum()
    assert c.expected_answered == pytest.approx(p.sum())


# --------------------------------------------------------------------------- properties


def test_data_independent_eps_decreases_with_noise():
    votes = random_votes(np.random.default_rng(6), 200, 10, 250)
    di = [lnmax_moments_epsilon(votes, g, 1e-5)[1] for g in (1.0, 0.5, 0.1, 0.05, 0.02)]
    assert all(a > b for a, b in zip(di, di[1:]))
    di = [gnmax_analysis(votes, s, 1e-5).data_independent_eps for s in (5, 10, 20, 40, 80)]
    assert all(a > b for a, b in zip(di, di[1:]))
    di = [confident_gnmax_analysis(votes, 200, 3 * s, s, 1e-5, answered=np.ones(200, bool)).data_independent_eps
          for s in (5, 10, 20, 40, 80)]
    assert all(a > b for a, b in zip(di, di[1:]))


def test_data_dependent_eps_decreases_with_noise_where_q_is_capped():
    votes = np.full((100, 10), 25.0)
    dd = [lnmax_moments_epsilon(votes, g, 1e-5)[0] for g in (1.0, 0.5, 0.1, 0.05)]
    assert all(a > b for a, b in zip(dd, dd[1:]))
    dd = [gnmax_epsilon(votes, s, 1e-5) for s in (5, 10, 20, 40, 80)]
    assert all(a > b for a, b in zip(dd, dd[1:]))


def test_data_dependent_eps_is_not_monotone_in_noise_under_consensus():
    # Not a bug: with strong consensus, less noise makes a wrong answer less likely,
    # so the data-dependent cost can *fall* as the noise shrinks (PATE's synergy).
    votes = np.tile([230.0, 20.0] + [0.0] * 8, (100, 1))
    assert gnmax_epsilon(votes, 10, 1e-5) < gnmax_epsilon(votes, 40, 1e-5)


def test_more_consensus_never_costs_more():
    rng = np.random.default_rng(7)
    votes = random_votes(rng, 100, 10, 250)
    stronger = votes.copy()
    top = votes.argmax(axis=1)
    idx = np.arange(100)
    second = np.argsort(votes, axis=1)[:, -2]
    moved = np.minimum(votes[idx, second], 10.0)
    stronger[idx, second] -= moved
    stronger[idx, top] += moved
    assert lnmax_moments_epsilon(stronger, 0.05, 1e-5)[0] <= lnmax_moments_epsilon(votes, 0.05, 1e-5)[0]
    assert gnmax_epsilon(stronger, 40, 1e-5) <= gnmax_epsilon(votes, 40, 1e-5)


def test_curves_are_monotone_and_end_at_eps():
    votes = random_votes(np.random.default_rng(8), 150, 10, 250)
    for answered, dd, di in (lnmax_eps_curve(votes, 0.05, 1e-5), gnmax_eps_curve(votes, 40, 1e-5),
                             confident_gnmax_eps_curve(votes, 200, 150, 40, 1e-5)):
        assert answered.shape == dd.shape == di.shape == (150,)
        assert np.all(np.diff(dd) >= 0) and np.all(np.diff(di) >= 0) and np.all(np.diff(answered) >= 0)
        assert np.all(dd <= di)
    a = lnmax_analysis(votes, 0.05, 1e-5)
    assert a.eps_curve[-1] == a.eps and a.data_independent_curve[-1] == a.data_independent_eps
    assert np.array_equal(a.answered_curve, np.arange(1, 151))
    # Curve entry i equals the analysis of the first i+1 rows.
    for k in (1, 17, 80):
        assert a.eps_curve[k - 1] == pytest.approx(lnmax_moments_epsilon(votes[:k], 0.05, 1e-5)[0], rel=1e-12)
        assert gnmax_eps_curve(votes, 40, 1e-5)[1][k - 1] == pytest.approx(gnmax_epsilon(votes[:k], 40, 1e-5),
                                                                           rel=1e-12)


def test_unanimous_votes_data_dependent_far_below_data_independent():
    votes = np.zeros((1000, 10))
    votes[:, 0] = 250.0
    a = lnmax_analysis(votes, 0.05, 1e-5, moments=8)
    assert a.log_q.max() < math.log(1e-3)
    assert a.eps < 0.2 * a.data_independent_eps
    # With a larger L the floor ln(1/delta)/L stops binding.
    b = lnmax_analysis(votes, 0.05, 1e-5, moments=64)
    assert b.eps < a.eps and b.warning is None


def test_analysis_object_and_wrappers_agree():
    votes = random_votes(np.random.default_rng(9), 80, 10, 250)
    a = lnmax_analysis(votes, 0.05, 1e-5)
    assert isinstance(a, PateAnalysis) and a.mechanism == "lnmax"
    assert lnmax_moments_epsilon(votes, 0.05, 1e-5) == (a.eps, a.data_independent_eps)
    assert lnmax_smooth_sensitivity(votes, 0.05, 1e-5) == a.smooth_sensitivity
    assert 1 <= a.order <= 8 and a.orders.tolist() == list(range(1, 9))
    g = gnmax_analysis(votes, 40, 1e-5)
    assert gnmax_epsilon(votes, 40, 1e-5) == g.eps and g.order in GNMAX_ORDERS
    c = confident_gnmax_analysis(votes, 200, 150, 40, 1e-5)
    assert confident_gnmax_epsilon(votes, 200, 150, 40, 1e-5) == (c.eps, c.expected_answered)
    with pytest.raises(ValueError):
        a.eps_curve[0] = 0.0  # read-only arrays
    # Keyword use and integer votes.
    assert lnmax_moments_epsilon(votes=votes.astype(int), noise_eps=0.05, delta=1e-5, moments=8) == (
        a.eps, a.data_independent_eps)


def test_smooth_sensitivity_max_k_and_beta():
    votes = random_votes(np.random.default_rng(10), 30, 10, 250)
    full = lnmax_smooth_sensitivity(votes, 0.05, 1e-5)
    k0 = lnmax_smooth_sensitivity(votes, 0.05, 1e-5, max_k=0)
    assert 0 < k0 <= full
    assert lnmax_smooth_sensitivity(votes, 0.05, 1e-5, beta=5.0) == pytest.approx(k0, rel=1e-12)
    assert lnmax_smooth_sensitivity(votes, 0.05, 1e-5, beta=0.01) >= full
    # Tied rows: nothing to move, sensitivity 0.
    assert lnmax_smooth_sensitivity(np.full((4, 5), 50.0), 0.05, 1e-5) == 0.0


def test_empty_votes():
    votes = np.zeros((0, 10))
    dd, di = lnmax_moments_epsilon(votes, 0.05, 1e-5)
    assert dd == di == pytest.approx(LOG_1E5 / 8)
    assert gnmax_epsilon(votes, 40, 1e-5) == pytest.approx(min(LOG_1E5 / (lam - 1) for lam in ORDERS))
    assert confident_gnmax_epsilon(votes, 200, 150, 40, 1e-5)[1] == 0.0


vote_matrices = st.integers(1, 8).flatmap(
    lambda m: hnp.arrays(np.float64, st.tuples(st.integers(0, 12), st.just(m + 1)),
                         elements=st.one_of(st.integers(0, 400).map(float),
                                            st.floats(0, 1e4, allow_nan=False, allow_infinity=False))))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(votes=vote_matrices,
       gamma=st.floats(1e-3, 5.0),
       sigma=st.floats(0.1, 500.0),
       delta=st.floats(1e-12, 0.5),
       moments=st.integers(1, 40),
       threshold=st.floats(-100.0, 1e4))
def test_random_votes_never_crash(votes, gamma, sigma, delta, moments, threshold):
    a = lnmax_analysis(votes, gamma, delta, moments)
    g = gnmax_analysis(votes, sigma, delta)
    c = confident_gnmax_analysis(votes, threshold, 1.5 * sigma, sigma, delta)
    for x in (a, g, c):
        vals = [x.eps, x.data_independent_eps, *x.eps_curve, *x.data_independent_curve, *x.cost]
        assert all(math.isfinite(v) and v >= 0 for v in vals)
        assert x.eps <= x.data_independent_eps
    assert math.isfinite(a.smooth_sensitivity) and a.smooth_sensitivity >= 0
    assert 0 <= c.expected_answered <= votes.shape[0]
    dd, di = lnmax_moments_epsilon(votes, gamma, delta, moments)
    assert type(dd) is float and type(di) is float


# --------------------------------------------------------------------------- validation


GOOD = np.tile([200.0, 50.0, 0.0], (3, 1))


@pytest.mark.parametrize("call, field", [
    (lambda: lnmax_moments_epsilon(np.ones(5), 0.05, 1e-5), "votes"),
    (lambda: lnmax_moments_epsilon(np.ones((2, 3, 4)), 0.05, 1e-5), "votes"),
    (lambda: lnmax_moments_epsilon(np.ones((4, 1)), 0.05, 1e-5), "votes"),
    (lambda: lnmax_moments_epsilon(-GOOD, 0.05, 1e-5), "votes"),
    (lambda: lnmax_moments_epsilon(GOOD * np.nan, 0.05, 1e-5), "votes"),
    (lambda: lnmax_moments_epsilon([["a", "b"]], 0.05, 1e-5), "votes"),
    (lambda: lnmax_moments_epsilon(GOOD, 0.0, 1e-5), "noise_eps"),
    (lambda: lnmax_moments_epsilon(GOOD, -1, 1e-5), "noise_eps"),
    (lambda: lnmax_moments_epsilon(GOOD, float("nan"), 1e-5), "noise_eps"),
    (lambda: lnmax_moments_epsilon(GOOD, "0.1", 1e-5), "noise_eps"),
    (lambda: lnmax_moments_epsilon(GOOD, True, 1e-5), "noise_eps"),
    (lambda: lnmax_moments_epsilon(GOOD, 0.05, 0.0), "delta"),
    (lambda: lnmax_moments_epsilon(GOOD, 0.05, 1.0), "delta"),
    (lambda: lnmax_moments_epsilon(GOOD, 0.05, 1e-5, moments=0), "moments"),
    (lambda: lnmax_moments_epsilon(GOOD, 0.05, 1e-5, moments=2.5), "moments"),
    (lambda: lnmax_smooth_sensitivity(GOOD, 0.05, 1e-5, beta=0), "beta"),
    (lambda: lnmax_smooth_sensitivity(GOOD, 0.05, 1e-5, max_k=-1), "max_k"),
    (lambda: gnmax_epsilon(GOOD, 0, 1e-5), "sigma"),
    (lambda: gnmax_epsilon(GOOD, -1, 1e-5), "sigma"),
    (lambda: gnmax_epsilon(GOOD, 40, 2.0), "delta"),
    (lambda: gnmax_analysis(GOOD, 40, 1e-5, orders=[0.5, 2]), "orders"),
    (lambda: confident_gnmax_epsilon(GOOD, 200, 0, 40, 1e-5), "sigma1"),
    (lambda: confident_gnmax_epsilon(GOOD, 200, 150, -40, 1e-5), "sigma2"),
    (lambda: confident_gnmax_epsilon(GOOD, float("inf"), 150, 40, 1e-5), "threshold"),
    (lambda: confident_gnmax_analysis(GOOD, 200, 150, 40, 1e-5, answered=[True]), "answered"),
])
def test_bad_inputs_raise_config_error(call, field):
    with pytest.raises(ConfigError) as info:
        call()
    assert info.value.field == field
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"`{field}` ")


def test_docstring_examples_hold():
    """The modules' worked examples (e.g. the default Confident-GNMax charge, 1.2806) are checked, not just shown."""
    import doctest
    import importlib
    import pkgutil

    import privengine.accounting.pate as package

    modules = [package] + [importlib.import_module(f"{package.__name__}.{info.name}")
                           for info in pkgutil.iter_modules(package.__path__)]
    results = [doctest.testmod(module) for module in modules]
    assert all(failed == 0 for failed, _ in results)
    assert sum(attempted for _, attempted in results) > 20
