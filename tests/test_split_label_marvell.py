"""Marvell's solver against an independent brute-force search, and its sumKL against explicit Gaussian KLs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from privengine.split_label import marvell


def _instances(count: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        g = 10 ** rng.uniform(-2, 1)
        yield dict(p=float(rng.uniform(0.005, 0.995)), u=float(10 ** rng.uniform(-4, 0)),
                   v=float(10 ** rng.uniform(-4, 0)), g_norm_square=g, power=float(10 ** rng.uniform(-2, 1.5) * g),
                   dim=int(rng.integers(1, 64)))


INSTANCES = list(_instances(14, seed=7))


def _objective(l1p, l2p, l1n, l2n, *, u, v, g_norm_square, dim):
    """sumKL = F/2 - d written directly from the problem statement, vectorised over numpy arrays."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = ((dim - 1) * (l2n + u) / (l2p + v) + (dim - 1) * (l2p + v) / (l2n + u)
             + (l1n + u + g_norm_square) / (l1p + v) + (l1p + v + g_norm_square) / (l1n + u))
    return np.where(np.isfinite(f), f / 2 - dim, np.inf)


def _power(x, p, dim):
    return p * (x[..., 0] + (dim - 1) * x[..., 1]) + (1 - p) * (x[..., 2] + (dim - 1) * x[..., 3])


def brute_force(p, u, v, g_norm_square, power, dim):
    """Best feasible point of a zooming 4-D grid (no tightness or structure assumed), polished by SLSQP
    and projected back into the feasible set (scaled down to the budget, l2 clipped to l1)."""
    stats = dict(u=u, v=v, g_norm_square=g_norm_square, dim=dim)
    span = np.array([power / p, power / (p * dim), power / (1 - p), power / ((1 - p) * dim)])
    if dim == 1:
        span[[1, 3]] = 0.0
    low, high, best, best_value = np.zeros(4), span, None, np.inf
    for _ in range(25):
        axes = np.meshgrid(*[np.linspace(a, b, 9) for a, b in zip(low, high)], indexing="ij")
        x = np.stack([a.ravel() for a in axes], axis=1)
        ok = (_power(x, p, dim) <= power) & (x[:, 1] <= x[:, 0]) & (x[:, 3] <= x[:, 2])
        values = np.where(ok, _objective(*x.T, **stats), np.inf)
        k = int(np.argmin(values))
        if values[k] < best_value:
            best, best_value = x[k], values[k]
        width = (high - low) * 0.4
        low, high = np.maximum(best - width, 0.0), best + width
    constraints = [{"type": "ineq", "fun": lambda x: power - _power(x, p, dim)},
                   {"type": "ineq", "fun": lambda x: x[0] - x[1]}, {"type": "ineq", "fun": lambda x: x[2] - x[3]}]
    bounds = [(0, None), (0, 0 if dim == 1 else None), (0, None), (0, 0 if dim == 1 else None)]
    polished = minimize(lambda x: float(_objective(*x, **stats)), best, method="SLSQP", bounds=bounds,
                        constraints=constraints, options={"ftol": 1e-14, "maxiter": 500}).x
    polished = np.maximum(polished, 0.0)
    polished[1], polished[3] = min(polished[1], polished[0]), min(polished[3], polished[2])
    polished *= min(1.0, power / _power(polished, p, dim))
    return min(best_value, float(_objective(*polished, **stats)))


@pytest.mark.parametrize("case", INSTANCES, ids=lambda c: f"d{c['dim']}-p{c['p']:.2f}")
def test_solver_matches_brute_force_and_keeps_the_constraints(case):
    lambdas, kl = marvell.solve(**case)
    l1_pos, l2_pos, l1_neg, l2_neg = lambdas
    reference = brute_force(**case)
    # optimal: never worse than the brute force (1e-9 relative), which itself gets within 1e-3 of it
    assert kl <= reference * (1 + 1e-9) + 1e-12
    assert reference <= kl * (1 + 1e-3) + 1e-9
    # the reported sumKL is the one these lambdas achieve (formula written independently here)
    stats = {k: case[k] for k in ("u", "v", "g_norm_square", "dim")}
    assert float(_objective(*lambdas, **stats)) == pytest.approx(kl, rel=1e-9, abs=1e-12)
    # the power budget is spent exactly, l2 <= l1, and the larger-variance class gets no across-noise
    assert _power(np.array(lambdas), case["p"], case["dim"]) == pytest.approx(case["power"], rel=1e-9)
    assert min(lambdas) >= 0 and l2_pos <= l1_pos and l2_neg <= l1_neg
    assert (l2_pos if case["v"] >= case["u"] else l2_neg) == 0.0


def _gaussian_sum_kl(mean_pos, cov_pos, mean_neg, cov_neg):
    """KL(N1||N0) + KL(N0||N1) from full covariance matrices (log-determinants cancel)."""
    d = len(mean_pos)
    diff = mean_pos - mean_neg
    inv_pos, inv_neg = np.linalg.inv(cov_pos), np.linalg.inv(cov_neg)
    return 0.5 * (np.trace(inv_neg @ cov_pos) + np.trace(inv_pos @ cov_neg) + diff @ (inv_pos + inv_neg) @ diff) - d


def test_sum_kl_equals_the_kl_of_the_explicit_gaussians():
    rng = np.random.default_rng(3)
    d, u, v = 5, 0.3, 0.05
    delta = rng.normal(size=d)
    e = delta / np.linalg.norm(delta)
    lambdas = (0.7, 0.2, 0.4, 0.0)  # l1_pos, l2_pos, l1_neg, l2_neg
    cov_pos = v * np.eye(d) + (lambdas[0] - lambdas[1]) * np.outer(e, e) + lambdas[1] * np.eye(d)
    cov_neg = u * np.eye(d) + (lambdas[2] - lambdas[3]) * np.outer(e, e) + lambdas[3] * np.eye(d)
    expected = _gaussian_sum_kl(delta, cov_pos, np.zeros(d), cov_neg)
    assert marvell.sum_kl(lambdas, u=u, v=v, g_norm_square=float(delta @ delta), dim=d) == pytest.approx(
        expected, rel=1e-12)


def test_zero_variances_reduce_to_the_one_dimensional_problem():
    p, g, power = 0.1, 2.0, 3.0
    (l1_pos, l2_pos, l1_neg, l2_neg), kl = marvell.solve(p, 0.0, 0.0, g, power, 32)
    assert l2_pos == l2_neg == 0.0
    one_d = ((l1_neg + g) / l1_pos + (l1_pos + g) / l1_neg) / 2 - 1
    assert kl == pytest.approx(one_d, rel=1e-12)
    # the closed-form ratio condition of the 1-D optimum: l1_pos = E * l1_neg
    c = power
    assert l1_pos / l1_neg == pytest.approx(math.sqrt((c + (1 - p) * g) / (c + p * g)), rel=1e-9)


def test_more_power_never_hurts_and_identical_gradients_need_no_noise():
    kls = [marvell.solve(0.02, 1e-3, 4e-3, 1.0, power, 32)[1] for power in (0.0, 0.5, 2.0, 8.0, 32.0)]
    assert all(a > b for a, b in zip(kls, kls[1:]))
    assert marvell.solve(0.3, 0.0, 0.0, 0.0, 1.0, 8) == (marvell.NO_NOISE, 0.0)


def test_threshold_mode_grows_the_power_scale_by_half_until_the_threshold_holds():
    stats = dict(p=0.02, u=1e-3, v=4e-3, g_norm_square=1.0, dim=32)
    for threshold in (0.64, 0.16, 0.01):
        sol = marvell.solve_threshold(**stats, threshold=threshold)
        rounds = math.log(sol.power_scale) / math.log(marvell.THRESHOLD_GROWTH)
        assert rounds == pytest.approx(round(rounds), abs=1e-9)  # s = 1.5^k
        assert sol.sumkl <= threshold
        if sol.power_scale > 1:  # the previous scale was not enough
            before = marvell.solve_power_scale(**stats, power_scale=sol.power_scale / marvell.THRESHOLD_GROWTH)
            assert before.sumkl > threshold
        assert sol.power == pytest.approx(sol.power_scale * stats["g_norm_square"])


def test_auc_bound_matches_the_published_values_and_saturates():
    assert marvell.auc_bound(0.64) == pytest.approx(0.82)
    assert marvell.auc_bound(0.16) == pytest.approx(0.68)
    assert marvell.auc_bound(0.0) == 0.5 and marvell.auc_bound(4.0) == 1.0 and marvell.auc_bound(50.0) == 1.0


@pytest.mark.parametrize("bad", [dict(p=0.0), dict(p=1.0), dict(u=-1.0), dict(power=math.nan), dict(dim=0)])
def test_invalid_inputs_are_refused(bad):
    args = dict(p=0.1, u=0.1, v=0.1, g_norm_square=1.0, power=1.0, dim=4) | bad
    with pytest.raises(ValueError, match=rf"^{next(iter(bad))}\b"):
        marvell.solve(**args)
