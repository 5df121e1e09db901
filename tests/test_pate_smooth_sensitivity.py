"""Smooth sensitivity of PATE's data-dependent RDP (Papernot et al. 2018, App. B).

Checks of :mod:`privengine.accounting.pate`'s ``gnmax_local_sensitivity_bounds``,
``threshold_local_sensitivity_bounds``, ``smooth_sensitivity`` and ``gnss_rdp``:

1. brute force: every histogram of a few teachers, the exact local sensitivity at
   distance d (max over histograms <= d changed teachers away of the largest RDP
   change one more teacher can cause) must stay below the bounds;
2. formulas and properties;
3. values computed with tensorflow/privacy's ``research/pate_2018`` code (see
   ``TF_*`` below for how).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import log_ndtr, logsumexp

from privengine.accounting.pate import (
    gnmax_local_sensitivity_bounds,
    gnss_rdp,
    smooth_sensitivity,
    threshold_local_sensitivity_bounds,
)
from privengine.accounting.pate.gnmax import gnmax_log_q, gnmax_rdp
from privengine.accounting.pate.sensitivity import _gnmax_log_q_extremes

# --------------------------------------------------------------------------- brute force helpers


def _histograms(n: int, m: int) -> np.ndarray:
    """Every histogram of ``n`` votes over ``m`` classes, ``(count, m)``."""
    if m == 1:
        return np.array([[n]], dtype=float)
    rows = [np.column_stack((np.full(len(rest), i), rest)) for i in range(n + 1)
            for rest in [_histograms(n - i, m - 1)]]
    return np.vstack(rows).astype(float)


def _exact_ls(hists: np.ndarray, f: np.ndarray) -> np.ndarray:
    """``LS(h) = max over neighbours h' (one vote moved) of |f(h) - f(h')|`` for every histogram."""
    index = {tuple(h): i for i, h in enumerate(hists.astype(int))}
    m = hists.shape[1]
    ls = np.zeros(len(hists))
    for i, h in enumerate(hists.astype(int)):
        for a in range(m):
            if h[a] == 0:
                continue
            for b in range(m):
                if a != b:
                    g = h.copy()
                    g[a] -= 1
                    g[b] += 1
                    ls[i] = max(ls[i], abs(f[i] - f[index[tuple(g)]]))
    return ls


def _distance(hists: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Number of teachers that must change their vote to turn ``x`` into each histogram."""
    return np.abs(hists - x).sum(axis=1) / 2.0


def _exact_ls_at_distance(hists: np.ndarray, ls: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``(N,)``: max of LS over histograms within distance d of x, d = 0..N-1."""
    dist = _distance(hists, x)
    n = int(x.sum())
    return np.array([ls[dist <= d].max() for d in range(n)])


def _gnmax_rdp_of(hists: np.ndarray, sigma: float, order: float) -> np.ndarray:
    return gnmax_rdp(gnmax_log_q(hists, sigma), sigma, np.array([order]))[:, 0]


def _threshold_rdp_of(hists: np.ndarray, threshold: float, sigma: float, order: float) -> np.ndarray:
    top = hists.max(axis=1)
    log_q = np.minimum(log_ndtr((top - threshold) / sigma), log_ndtr((threshold - top) / sigma))
    return gnmax_rdp(log_q, math.sqrt(2.0) * sigma, np.array([order]))[:, 0]


def _assert_upper_bound(bound: np.ndarray, exact: np.ndarray) -> None:
    assert bound.shape == exact.shape
    slack = bound - exact
    assert np.all(slack >= -1e-12 - 1e-9 * exact), (bound, exact)


# --------------------------------------------------------------------------- 1. brute force: GNMax

# (teachers N, classes m, sigma, order). Small sigma so that q~ spans the
# data-dependent region, the plateau and the data-independent region.
GNMAX_GRID = [(6, 3, 0.5, 1.5), (8, 3, 1.0, 2.0), (8, 3, 2.0, 3.0), (8, 3, 1.0, 5.0),
              (7, 4, 0.5, 1.5), (7, 4, 1.0, 2.0), (8, 4, 2.0, 3.0), (8, 4, 0.7, 10.0)]


@pytest.mark.parametrize("n, m, sigma, order", GNMAX_GRID)
def test_gnmax_bounds_dominate_exact_local_sensitivity(n, m, sigma, order):
    hists = _histograms(n, m)
    ls = _exact_ls(hists, _gnmax_rdp_of(hists, sigma, order))
    ratios = []
    for x in hists:
        exact = _exact_ls_at_distance(hists, ls, x)
        bound = gnmax_local_sensitivity_bounds(x, sigma, order)
        _assert_upper_bound(bound, exact)
        assert np.all(np.diff(bound) >= 0)  # a max over growing balls
        assert np.all(bound <= order / sigma**2 + 1e-12)  # RDP lies in [0, lam/sigma^2]
        pos = exact > 1e-9
        if pos.any():
            ratios.append(float(np.max(bound[pos] / exact[pos])))
    if ratios and order <= 3:
        # Prop 13's BU/BL assume every gap moves by 2; not tight, but close here.
        assert np.median(ratios) <= 2.0
        assert max(ratios) <= 6.0


def test_gnmax_bounds_zero_when_rdp_is_constant():
    # sigma = 5 with 8 teachers: q~ stays above q0 for every histogram, so the RDP
    # is lam/sigma^2 everywhere and the exact local sensitivity is 0 at every distance.
    hists = _histograms(8, 3)
    f = _gnmax_rdp_of(hists, 5.0, 2.0)
    assert np.allclose(f, 2.0 / 25.0)
    for x in ([8, 0, 0], [5, 2, 1], [3, 3, 2]):
        assert np.all(gnmax_local_sensitivity_bounds(np.array(x), 5.0, 2.0) == 0.0)


@pytest.mark.parametrize("n, m, sigma", [(8, 3, 1.0), (7, 4, 0.5), (8, 4, 2.0)])
def test_extreme_q_at_distance_matches_enumeration(n, m, sigma):
    # Algorithms 4-5: min q~ (votes to the top class from the largest other class)
    # and max q~ (top class to runner-up, while 2d < gap) over the ball of radius d.
    hists = _histograms(n, m)
    log_q = gnmax_log_q(hists, sigma)
    for x in hists:
        lq_min, lq_max = _gnmax_log_q_extremes(np.sort(x)[::-1], sigma)
        dist = _distance(hists, x)
        for d in range(n):
            ball = log_q[dist <= d]
            assert lq_min[d] == pytest.approx(ball.min(), abs=1e-9)
            if np.isfinite(lq_max[d]):
                assert lq_max[d] == pytest.approx(ball.max(), abs=1e-9)
            else:
                assert 2 * d >= np.sort(x)[-1] - np.sort(x)[-2]


def test_gnmax_bound_holds_where_condition_c6_fails():
    # sigma = 10, lam = 20, m = 3: Delta(q) = beta(BU(q)) - beta(q) peaks below q1
    # (condition C6 of the paper fails), so "U(q_max(d)), then the plateau U(q1)"
    # is not an upper bound. Exact value at votes (53, 5, 2), d = 8: 0.0092262107...;
    # tensorflow/privacy's compute_local_sensitivity_bounds_gnmax(votes, 60, 10., 20.)
    # returns 0.0029977551891637 there (below the truth).
    hists = _histograms(60, 3)
    ls = _exact_ls(hists, _gnmax_rdp_of(hists, 10.0, 20.0))
    for x in ([53, 5, 2], [45, 12, 3], [30, 20, 10], [20, 20, 20]):
        x = np.array(x, dtype=float)
        exact = _exact_ls_at_distance(hists, ls, x)
        _assert_upper_bound(gnmax_local_sensitivity_bounds(x, 10.0, 20.0), exact)
    exact = _exact_ls_at_distance(hists, ls, np.array([53.0, 5.0, 2.0]))
    assert exact[8] == pytest.approx(0.009226210738671997, rel=1e-9)
    assert exact[8] > 0.0029977551891637033


# --------------------------------------------------------------------------- 1. brute force: threshold

THRESHOLD_GRID = [(8, 3, 4.0, 1.0, 2.0), (8, 3, 6.0, 0.7, 5.0), (8, 4, 2.0, 1.0, 3.0),
                  (8, 4, 10.0, 1.0, 2.0), (7, 4, 5.0, 0.5, 1.5)]


@pytest.mark.parametrize("n, m, threshold, sigma, order", THRESHOLD_GRID)
def test_threshold_bounds_dominate_exact_local_sensitivity(n, m, threshold, sigma, order):
    hists = _histograms(n, m)
    f = _threshold_rdp_of(hists, threshold, sigma, order)
    ls = _exact_ls(hists, f)
    theta = _threshold_rdp_of(np.arange(n + 1.0)[:, None] * np.eye(1, 2), threshold, sigma, order)  # by top count
    step = np.abs(np.diff(theta))
    for x in hists:
        exact = _exact_ls_at_distance(hists, ls, x)
        bound = threshold_local_sensitivity_bounds(x, threshold, sigma, order)
        _assert_upper_bound(bound, exact)
        assert np.all(np.diff(bound) >= 0)
        # The formula: A[d] = the largest one-step change |theta(u+1) - theta(u)| with
        # u or u+1 in [v-d, v+d] (top counts clipped to [0, N], as in the paper).
        v = int(x.max())
        for d in range(n):
            lo, hi = max(v - d, 0), min(v + d, n)
            window = [step[u] for u in range(max(lo - 1, 0), min(hi + 1, n))]
            assert bound[d] == pytest.approx(max(window, default=0.0), abs=1e-15)


def test_threshold_bound_is_exact_away_from_ties_and_the_pigeonhole_floor():
    n, m, threshold, sigma, order = 8, 3, 4.0, 1.0, 2.0
    hists = _histograms(n, m)
    ls = _exact_ls(hists, _threshold_rdp_of(hists, threshold, sigma, order))
    floor = math.ceil(n / m)
    checked = 0
    for x in hists:
        top = np.sort(x)[::-1]
        if top[0] == top[1]:
            continue  # a tied top count cannot drop in one move
        exact = _exact_ls_at_distance(hists, ls, x)
        bound = threshold_local_sensitivity_bounds(x, threshold, sigma, order)
        for d in range(n):
            if top[0] - d - 1 > floor:  # the ball's top counts are all realisable with a unique top
                assert bound[d] == pytest.approx(exact[d], rel=1e-12, abs=1e-15)
                checked += 1
    assert checked > 20


# --------------------------------------------------------------------------- 2. formulas and properties


def test_smooth_sensitivity_is_discounted_max():
    rng = np.random.default_rng(3)
    for _ in range(20):
        a = rng.exponential(size=int(rng.integers(1, 50))) * rng.choice([1e-6, 1.0, 1e3])
        beta = float(rng.choice([0.0, 1e-3, 0.05, 0.49 / 20, 2.0]))
        direct = max(math.exp(-beta * d) * a[d] for d in range(a.size))
        assert smooth_sensitivity(a, beta) == pytest.approx(direct, rel=1e-12)
    assert smooth_sensitivity([0.0, 1.0, 1.0], 0.5) == pytest.approx(math.exp(-0.5))
    assert smooth_sensitivity([3.0, 1.0], 0.0) == 3.0
    assert smooth_sensitivity([0.0, 0.0], 0.1) == 0.0
    assert smooth_sensitivity(np.array([1.0] + [1e300] * 10), 1e4) == 1.0  # e^{-beta d} underflows to 0


def _t23(beta, sigma, lam):
    """Papernot et al. 2018, Theorem 23 as printed (and as in tensorflow/privacy)."""
    return lam * math.exp(2 * beta) / sigma**2 + (beta * lam - 0.5 * math.log(1 - 2 * lam * beta)) / (lam - 1)


def _gauss_renyi(lam, mu0, s0, mu1, s1):
    """D_lam(N(mu0, s0^2) || N(mu1, s1^2)), closed form (needs lam s1^2 + (1-lam) s0^2 > 0)."""
    v = lam * s1**2 + (1 - lam) * s0**2
    return lam * (mu0 - mu1) ** 2 / (2 * v) + math.log(s1 / s0) + math.log(s1**2 / v) / (2 * (lam - 1))


def _gnss_worst_case(beta, sigma, lam, n_t=2001):
    """max over S(y) = e^t S(x), |t| <= beta, Delta = min(S(x), S(y)) of D_lam(M(x) || M(y)), S(x) = 1."""
    return max(_gauss_renyi(lam, 0.0, sigma, min(1.0, math.exp(t)), sigma * math.exp(t))
               for t in np.linspace(-beta, beta, n_t))


@pytest.mark.parametrize("beta, sigma, lam", [(0.01, 10.0, 5.0), (0.05, 2.0, 3.0), (0.001, 1.0, 100.0),
                                              (0.1, 0.5, 2.0), (0.02, 5.0, 10.0)])
def test_gnss_rdp_is_theorem_23_where_that_bound_holds(beta, sigma, lam):
    assert _t23(beta, sigma, lam) >= _gnss_worst_case(beta, sigma, lam)
    assert gnss_rdp(beta, sigma, lam) == pytest.approx(_t23(beta, sigma, lam), rel=1e-12)


@pytest.mark.parametrize("beta, sigma, lam", [(0.049, 3.0, 10.0), (0.49 / 20, 10.0, 20.0), (0.1, 1.0, 4.6),
                                              (0.05, 5.0, 9.91)])
def test_gnss_rdp_corrects_theorem_23_near_order_one_over_two_beta(beta, sigma, lam):
    # Near lam = 1/(2 beta) the pair S(y) = e^{-beta} S(x), Delta = S(y) has a Renyi
    # divergence above Theorem 23's value; gnss_rdp returns the exact worst case.
    worst = _gnss_worst_case(beta, sigma, lam)
    assert worst > _t23(beta, sigma, lam)
    r = 1 - lam * (1 - math.exp(-2 * beta))
    closed = lam * math.exp(-2 * beta) / (2 * sigma**2 * r) + (-lam * beta - 0.5 * math.log(r)) / (lam - 1)
    assert closed == pytest.approx(worst, rel=1e-9)
    assert gnss_rdp(beta, sigma, lam) == pytest.approx(closed, rel=1e-12)


def test_gnss_worst_case_matches_numerical_integration():
    # D_lam(N(0, sigma^2) || N(e^{-beta}, sigma^2 e^{-2 beta})) by quadrature on a grid.
    beta, sigma, lam = 0.049, 3.0, 10.0
    s0, s1, mu1 = sigma, sigma * math.exp(-beta), math.exp(-beta)
    x = np.linspace(-3000.0, 3000.0, 600_001)
    log_p = -0.5 * (x / s0) ** 2 - math.log(s0 * math.sqrt(2 * math.pi))
    log_q = -0.5 * ((x - mu1) / s1) ** 2 - math.log(s1 * math.sqrt(2 * math.pi))
    numeric = (logsumexp(lam * log_p + (1 - lam) * log_q) + math.log(x[1] - x[0])) / (lam - 1)
    assert numeric == pytest.approx(gnss_rdp(beta, sigma, lam), rel=1e-6)
    assert numeric > 5 * _t23(beta, sigma, lam)


def test_gnss_rdp_dominates_every_neighbouring_pair():
    for beta in (1e-3, 0.02, 0.1):
        for sigma in (0.5, 2.0, 20.0):
            for frac in (0.05, 0.3, 0.6, 0.9, 0.99):
                lam = 1 + frac * (1 / (2 * beta) - 1)
                assert gnss_rdp(beta, sigma, lam) >= _gnss_worst_case(beta, sigma, lam, n_t=401) * (1 - 1e-12)
    # beta = 0: a global sensitivity bound; Theorem 23 gives lam / sigma^2 (>= lam / (2 sigma^2)).
    assert gnss_rdp(0.0, 2.0, 3.0) == pytest.approx(0.75)


def test_gnss_rdp_monotone():
    # Decreasing in sigma, increasing in beta. (Not monotone in lam: Theorem 23's
    # (beta lam - ln(1 - 2 lam beta)/2) / (lam - 1) grows without bound as lam -> 1.)
    assert gnss_rdp(0.05, 3.0, 5.0) > gnss_rdp(0.05, 6.0, 5.0)
    assert gnss_rdp(0.05, 3.0, 5.0) > gnss_rdp(0.01, 3.0, 5.0)


def test_bounds_monotone_and_capped_on_larger_inputs():
    for votes, sigma, order in [([240, 5, 3, 2] + [0] * 6, 40.0, 10.0), ([90, 80, 60, 20], 20.0, 25.0),
                                ([10, 0, 0], 0.5, 1.5), ([1000, 500, 300, 200, 0], 250.0, 10.0)]:
        a = gnmax_local_sensitivity_bounds(np.array(votes), sigma, order)
        assert a.shape == (sum(votes),)
        assert np.all(np.diff(a) >= 0) and np.all(a >= 0) and np.all(a <= order / sigma**2 + 1e-12)
        t = threshold_local_sensitivity_bounds(np.array(votes), 0.8 * sum(votes), sigma, order)
        assert t.shape == (sum(votes),)
        assert np.all(np.diff(t) >= 0) and np.all(t >= 0) and np.all(t <= order / (2 * sigma**2) + 1e-12)
    # the order of the classes does not matter
    assert np.array_equal(gnmax_local_sensitivity_bounds([3, 40, 7], 5.0, 4.0),
                          gnmax_local_sensitivity_bounds([40, 7, 3], 5.0, 4.0))


def test_single_teacher():
    a = gnmax_local_sensitivity_bounds([1, 0, 0], 1.0, 2.0)
    assert a.shape == (1,)
    t = threshold_local_sensitivity_bounds([0, 1], 0.5, 1.0, 2.0)
    assert t.shape == (1,)
    theta = _threshold_rdp_of(np.array([[0.0, 0.0], [1.0, 0.0]]), 0.5, 1.0, 2.0)  # top count 0 and 1
    assert t[0] == pytest.approx(abs(theta[1] - theta[0]))


@pytest.mark.parametrize("call, field", [
    (lambda: gnmax_local_sensitivity_bounds([[5, 1]], 1.0, 2.0), "votes"),
    (lambda: gnmax_local_sensitivity_bounds([5], 1.0, 2.0), "votes"),
    (lambda: gnmax_local_sensitivity_bounds([5, -1], 1.0, 2.0), "votes"),
    (lambda: gnmax_local_sensitivity_bounds([5, 1.5], 1.0, 2.0), "votes"),
    (lambda: gnmax_local_sensitivity_bounds([0, 0], 1.0, 2.0), "votes"),
    (lambda: gnmax_local_sensitivity_bounds([5, np.nan], 1.0, 2.0), "votes"),
    (lambda: gnmax_local_sensitivity_bounds([5, 1], 0.0, 2.0), "sigma"),
    (lambda: gnmax_local_sensitivity_bounds([5, 1], 1.0, 1.0), "order"),
    (lambda: gnmax_local_sensitivity_bounds([5, 1], 1.0, "2"), "order"),
    (lambda: threshold_local_sensitivity_bounds([5, 1], np.inf, 1.0, 2.0), "threshold"),
    (lambda: threshold_local_sensitivity_bounds([5, 1], 3.0, -1.0, 2.0), "sigma"),
    (lambda: threshold_local_sensitivity_bounds([5, 1], 3.0, 1.0, 0.5), "order"),
    (lambda: smooth_sensitivity([], 0.1), "local_bounds"),
    (lambda: smooth_sensitivity([[1.0]], 0.1), "local_bounds"),
    (lambda: smooth_sensitivity([1.0, -0.1], 0.1), "local_bounds"),
    (lambda: smooth_sensitivity([1.0, np.inf], 0.1), "local_bounds"),
    (lambda: smooth_sensitivity([1.0], -0.1), "beta"),
    (lambda: gnss_rdp(0.1, 1.0, 5.0), "order"),  # lam = 1/(2 beta): Theorem 23 does not apply
    (lambda: gnss_rdp(0.1, 1.0, 7.0), "order"),
    (lambda: gnss_rdp(0.1, 1.0, 1.0), "order"),
    (lambda: gnss_rdp(-0.1, 1.0, 2.0), "beta"),
    (lambda: gnss_rdp(0.1, 0.0, 2.0), "sigma"),
    (lambda: gnss_rdp(np.nan, 1.0, 2.0), "beta"),
])
def test_bad_inputs_raise_value_error_naming_the_argument(call, field):
    with pytest.raises(ValueError, match=f"`{field}`"):
        call()


# --------------------------------------------------------------------------- 3. tensorflow/privacy values
#
# Produced with tensorflow/privacy research/pate_2018/{core,smooth_sensitivity}.py
# (commit 03035d5d4a271ac795dab80f5bc1cef82fc3d462), run with numpy/scipy in a scratch
# directory (absl and sympy stubbed; not used by these functions), calling
#     compute_local_sensitivity_bounds_gnmax(votes, num_teachers, sigma, order)
# with the arguments in the order of its signature. Its own helper
# compute_smooth_sensitivity_gnmax(beta, counts, num_teachers, sigma, order) passes
# them as (counts, sigma, order, num_teachers); for the first case below it raises
# IndexError (num_teachers = 10.0 read as the array length), for the second
# "math domain error". Smooth sensitivities are
#     compute_discounted_max(beta, compute_local_sensitivity_bounds_gnmax(...)).

# [60, 25, 10, 5], sigma = 10, lam = 5: q~ below q1 ("go right"), plateau from d = 5.
TF_GO_RIGHT = [0.005063695608888221, 0.006375184193544138, 0.007833236925385081,
               0.009389195341785776, 0.010976911994471004] + [0.011291252909011958] * 95
# [40, 35, 25], sigma = 8, lam = 3: q~ above q0 ("go left"), plateau from d = 10.
TF_GO_LEFT = [0.0] * 8 + [0.0018104629437478703, 0.01255703843860595] + [0.013790422525953347] * 90
# tensorflow/privacy's own test (smooth_sensitivity_test.py): [1000, 500, 300, 200, 0],
# sigma = 250, lam = 10, 2000 teachers.
TF_TEST_GO_LEFT = [0.0] * 298 + [2.77693450548e-7, 2.10853979548e-6] + [2.73113623988e-6] * 1700


def test_gnmax_matches_tensorflow_privacy_where_its_assumptions_hold():
    a = gnmax_local_sensitivity_bounds([60, 25, 10, 5], 10.0, 5.0)
    np.testing.assert_allclose(a, TF_GO_RIGHT, rtol=1e-9, atol=1e-15)
    assert smooth_sensitivity(a, 0.49 / 5) == pytest.approx(0.007417144593247799, rel=1e-9)
    assert smooth_sensitivity(a, 0.05) == pytest.approx(0.008987135423703977, rel=1e-9)
    b = gnmax_local_sensitivity_bounds([40, 35, 25], 8.0, 3.0)
    np.testing.assert_allclose(b, TF_GO_LEFT, rtol=1e-9, atol=1e-15)
    assert smooth_sensitivity(b, 0.49 / 3) == pytest.approx(0.002887183155504814, rel=1e-9)
    assert smooth_sensitivity(b, 0.05) == pytest.approx(0.008364314072382445, rel=1e-9)
    c = gnmax_local_sensitivity_bounds([1000, 500, 300, 200, 0], 250.0, 10.0)
    np.testing.assert_allclose(c, TF_TEST_GO_LEFT, rtol=1e-8, atol=1e-15)


def test_gnmax_small_sigma_differs_from_tensorflow_privacy_after_the_first_steps():
    # tensorflow/privacy's test: [10, 0, 0], sigma = 0.5, lam = 1.5 gives
    # [3.13503646e-17, 1.60178280e-08, 5.90681786e-03] + [5.99981308] * 7. Its
    # smooth-sensitivity code treats the RDP as lam/sigma^2 for log q >= -9
    # (a clipped q0), while core.rdp_gaussian (and this module) use Thm 6 down to
    # log q ~ -4.4; the first three entries (below both q1's) agree.
    a = gnmax_local_sensitivity_bounds([10, 0, 0], 0.5, 1.5)
    np.testing.assert_allclose(a[:3], [3.13503646e-17, 1.60178280e-08, 5.90681786e-03], rtol=1e-8)
    assert np.all(a[3:] < 6.0)


# tensorflow/privacy's test for the threshold ([20, 10, 0], 30 teachers, sigma = 2,
# lam = 10): compute_local_sensitivity_bounds_threshold returns max(LS1(v-d), LS1(v+d))
# (the sphere, not the ball) and only for d < max(v, N - v) (zeros after). Our bound
# is its running maximum, and the smooth sensitivity is the same.
TF_THRESHOLD_T2 = [0.16021207912838123, 0.20702113247198342, 0.20702113247198342, 0.19312786044212632,
                   0.16830210632508757, 0.14218045235722754, 0.1160540003359174, 0.09015432659573697,
                   0.06457756967199324, 0.03941532410863591, 0.014782687038580322, 0.00014845412875219566] + [0.0] * 18
TF_THRESHOLD_T16 = [0.0, 0.0, 0.0, 0.00014845412875219566, 0.014782687038580322, 0.03941532410863591,
                    0.06457756967199324, 0.09015432659573697, 0.1160540003359174, 0.14218045235722754,
                    0.14218045235722754, 0.0001484541287524177, 0.0147826870385801, 0.03941532410863591,
                    0.06457756967199324, 0.09015432659573697, 0.1160540003359174, 0.14218045235722754,
                    0.16830210632508757, 0.19312786044212632] + [0.0] * 10


@pytest.mark.parametrize("threshold, tf_values, tf_ss", [(2.0, TF_THRESHOLD_T2, 0.19692459270081086),
                                                        (16.0, TF_THRESHOLD_T16, 0.0906582590332866)])
def test_threshold_matches_running_max_of_tensorflow_privacy(threshold, tf_values, tf_ss):
    a = threshold_local_sensitivity_bounds([20, 10, 0], threshold, 2.0, 10.0)
    running = np.maximum.accumulate(tf_values)
    np.testing.assert_allclose(a[:20], running[:20], rtol=1e-9, atol=1e-15)
    assert np.all(a[20:] >= a[19])
    assert smooth_sensitivity(a, 0.05) == pytest.approx(tf_ss, rel=1e-9)


def test_gnss_matches_tensorflow_privacy_where_theorem_23_holds():
    # compute_rdp_of_smooth_sensitivity_gaussian(beta, sigma, order) of tensorflow/privacy.
    for (beta, sigma, lam), tf in [((0.01, 10.0, 5.0), 0.07668013145856607),
                                   ((0.05, 2.0, 3.0), 0.9930469245414189),
                                   ((0.001, 1.0, 100.0), 100.20233722204303)]:
        assert gnss_rdp(beta, sigma, lam) == pytest.approx(tf, rel=1e-12)
    # ... and where it does not: tensorflow/privacy gives 1.4972932615332388 here.
    assert gnss_rdp(0.049, 3.0, 10.0) == pytest.approx(7.671743229594371, rel=1e-9)
