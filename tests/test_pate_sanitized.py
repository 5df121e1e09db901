"""The sanitized data-dependent epsilon of GNMax / Confident-GNMax runs (Papernot et al. 2018, Sec. 4, App. B).

Checked here: the run's summed local-sensitivity bounds against per-query sums and against
brute force on tiny vote matrices; the shifted GNSS release against its derivation (pairs
of neighbouring outputs, closed-form Renyi divergences); the published epsilon and the
composed headline against the formulas; reproducibility through the noise streams; the
claims' labels; and bad inputs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import ndtri

from privengine.accounting.pate import (
    GNMAX_ORDERS,
    confident_gnmax_analysis,
    confident_gnmax_summed_local_sensitivity_bounds,
    gnmax_analysis,
    gnmax_local_sensitivity_bounds,
    gnmax_summed_local_sensitivity_bounds,
    gnss_rdp,
    gnss_rdp_at_orders,
    sanitize_rdp,
    shifted_gnss_sigma,
    smooth_sensitivity,
    threshold_local_sensitivity_bounds,
)
from privengine.errors import ConfigError
from privengine.pate.config import PateConfig
from privengine.pate.privacy import (SS_BETA_TIMES_ORDER, analyse, draw_standard_normal, sanitize_order,
                                     sanitize_sigma, sanitized_epsilon)
from privengine.randomness import data_fingerprint
from tests.test_pate_smooth_sensitivity import (_gauss_renyi, _gnmax_rdp_of, _histograms, _threshold_rdp_of)

LOG_INV_DELTA = math.log(1e5)
TEACHER_DATA = data_fingerprint(np.arange(10))  # stands for the fingerprint of the teachers' private data


def _votes(n=40, teachers=50, m=4, seed=0, concentration=0.3):
    """Vote matrices with a spread of margins: every row sums to ``teachers``."""
    rng = np.random.default_rng(seed)
    votes = np.stack([rng.multinomial(teachers, rng.dirichlet(np.full(m, concentration))) for _ in range(n)])
    return votes.astype(float)


def _confident(**kw):
    return PateConfig(aggregator="confident_gnmax", threshold=30.0, sigma1=10.0, sigma2=6.0, **kw)


# --------------------------------------------------------------------------- summed bounds


def test_summed_bounds_are_the_sum_of_per_query_bounds():
    votes = _votes()
    answered = np.arange(len(votes)) % 3 != 0
    lam = 6.0
    gn = gnmax_summed_local_sensitivity_bounds(votes, 6.0, lam)
    direct = sum(gnmax_local_sensitivity_bounds(v, 6.0, lam) for v in votes)
    np.testing.assert_allclose(gn, direct, rtol=1e-12, atol=0)
    conf = confident_gnmax_summed_local_sensitivity_bounds(votes, answered, 30.0, 10.0, 6.0, lam)
    direct = (sum(threshold_local_sensitivity_bounds(v, 30.0, 10.0, lam) for v in votes)
              + sum(gnmax_local_sensitivity_bounds(v, 6.0, lam) for v in votes[answered]))
    np.testing.assert_allclose(conf, direct, rtol=1e-12, atol=0)
    assert conf.shape == (50,) and np.all(np.diff(conf) >= 0)
    # the smooth sensitivity of the run is the discounted max of the summed bounds
    beta = SS_BETA_TIMES_ORDER / lam
    assert smooth_sensitivity(conf, beta) == pytest.approx(max(math.exp(-beta * d) * conf[d] for d in range(50)),
                                                           rel=1e-12)


def _ball(x: np.ndarray, hists: np.ndarray, d: int) -> np.ndarray:
    return np.flatnonzero(np.abs(hists - x).sum(axis=1) / 2 <= d)


def _moves(hists: np.ndarray) -> list[list[int]]:
    """For each histogram, the indices of itself and of every histogram one moved vote away."""
    index = {tuple(h): i for i, h in enumerate(hists.astype(int))}
    out = []
    for h in hists.astype(int):
        near = [index[tuple(h)]]
        for a, b in itertools.permutations(range(len(h)), 2):
            if h[a]:
                g = h.copy()
                g[a] -= 1
                g[b] += 1
                near.append(index[tuple(g)])
        out.append(near)
    return out


@pytest.mark.parametrize("x, answered", [(([5, 1, 0], [3, 2, 1]), (True, True)),
                                         (([6, 0, 0], [2, 2, 2]), (True, False)),
                                         (([4, 2, 0], [6, 0, 0]), (False, True))])
def test_summed_bounds_dominate_brute_force_local_sensitivity_of_the_run(x, answered):
    """Two queries, six teachers, three classes: every pair of histograms within d changed teachers of x.

    One changed teacher moves at most one vote in each query (or none), jointly; the exact local
    sensitivity of the run's RDP at a pair is the max over those joint moves, and the bound at d
    must dominate its max over the pairs within distance d (a superset of the reachable pairs)."""
    sigma1, sigma2, threshold, lam = 2.0, 1.5, 4.0, 4.0
    x = np.array(x, dtype=float)
    hists = _histograms(6, 3)
    theta = _threshold_rdp_of(hists, threshold, sigma1, lam)
    gn = _gnmax_rdp_of(hists, sigma2, lam)
    per_query = [theta + (gn if a else 0.0) for a in answered]
    near = _moves(hists)
    bounds = confident_gnmax_summed_local_sensitivity_bounds(x, answered, threshold, sigma1, sigma2, lam)
    for d in range(6):
        worst = 0.0
        for i in _ball(x[0], hists, d):
            for j in _ball(x[1], hists, d):
                here = per_query[0][i] + per_query[1][j]
                worst = max(worst, max(abs(here - per_query[0][k] - per_query[1][l])
                                       for k in near[i] for l in near[j]))
        assert bounds[d] >= worst * (1 - 1e-9) - 1e-12, (d, bounds[d], worst)


# --------------------------------------------------------------------------- the shifted release


@pytest.mark.parametrize("beta, sigma, shift, lam", [(0.3 / 9, 8.0, ndtri(0.95), 9.0), (0.05, 3.0, 2.0, 4.0),
                                                     (0.3 / 20, 20.0, 1.0, 20.0), (0.02, 5.0, 0.0, 10.0)])
def test_shifted_release_never_exceeds_its_charged_cost(beta, sigma, shift, lam):
    """M(x) = f(x) + SS(x) (shift sigma + sigma Z) on neighbours with SS(y) = e^t SS(x), |t| <= beta, and
    |f(x) - f(y)| <= min(SS(x), SS(y)): every Renyi divergence at lam is at most the cost charged."""
    charged = gnss_rdp(beta, shifted_gnss_sigma(beta, sigma, shift), lam)
    worst = 0.0
    for t in np.linspace(-beta, beta, 201):
        ss_x, ss_y = 1.0, math.exp(t)
        for frac in (-1.0, -0.5, 0.0, 0.5, 1.0):
            df = frac * min(ss_x, ss_y)  # f(y) - f(x)
            mu_x, mu_y = shift * sigma * ss_x, df + shift * sigma * ss_y
            worst = max(worst, _gauss_renyi(lam, mu_x, sigma * ss_x, mu_y, sigma * ss_y),
                        _gauss_renyi(lam, mu_y, sigma * ss_y, mu_x, sigma * ss_x))
    assert worst <= charged * (1 + 1e-12)
    if shift == 0:
        assert shifted_gnss_sigma(beta, sigma, shift) == sigma
    else:  # the shift is not free: it costs more than the unshifted release
        assert charged > gnss_rdp(beta, sigma, lam)


def test_published_rdp_is_an_upper_bound_with_the_stated_probability():
    shift = float(ndtri(0.95))
    z = np.linspace(-4, 4, 801)
    published = np.array([sanitize_rdp(1.0, 0.1, 50.0, sigma=8.0, shift=shift, standard_normal=v) for v in z])
    assert np.all((published >= 1.0) == (z >= -shift))  # Pr[Z >= -shift] = Phi(shift) = 0.95
    assert sanitize_rdp(1.0, 0.1, 1.5, sigma=8.0, shift=shift, standard_normal=3.0) == 1.5  # clipped to the cap
    assert sanitize_rdp(0.1, 0.1, 1.5, sigma=8.0, shift=0.0, standard_normal=-3.0) == 0.0  # and to 0


# --------------------------------------------------------------------------- the published epsilon and the headline


@pytest.mark.parametrize("config", [_confident(), _confident(ss_order=12.0, ss_sigma=20.0, ss_confidence=0.5),
                                    PateConfig(aggregator="gnmax", sigma=6.0, ss_confidence=0.99)])
def test_sanitized_epsilon_composes_release_and_mechanism_by_formula(config):
    votes = _votes()
    answered = (np.arange(len(votes)) % 3 != 0) if config.aggregator == "confident_gnmax" else np.ones(40, bool)
    z = -0.7
    s = sanitized_epsilon(votes, answered, config, z)
    n = len(votes) if config.aggregator == "confident_gnmax" else int(answered.sum())
    lam, rule = sanitize_order(config, n)
    assert s.order == lam and (config.ss_order == 0) == ("a-priori order" in rule)
    beta, shift = SS_BETA_TIMES_ORDER / lam, float(ndtri(config.ss_confidence))
    sigma = config.ss_sigma or lam  # 0: the release's order
    assert s.sigma == sigma
    if config.aggregator == "gnmax":
        a = gnmax_analysis(votes, config.sigma, 1e-5, orders=[lam])
        bounds = sum(gnmax_local_sensitivity_bounds(v, config.sigma, lam) for v in votes)
    else:  # both steps of every submitted query, whatever was answered (the realised mask is not a bound)
        a = confident_gnmax_analysis(votes, config.threshold, config.sigma1, config.sigma2, 1e-5,
                                     answered=np.ones(len(votes), bool), orders=[lam])
        bounds = (sum(threshold_local_sensitivity_bounds(v, config.threshold, config.sigma1, lam) for v in votes)
                  + sum(gnmax_local_sensitivity_bounds(v, config.sigma2, lam) for v in votes))
    ss = max(math.exp(-beta * d) * bounds[d] for d in range(len(bounds)))
    released = min(max(a.cost[0] + ss * sigma * (shift + z), 0.0), a.data_independent_cost[0])
    cost = gnss_rdp(beta, sigma / (1 + shift * sigma * math.expm1(beta)), lam)
    assert s.rdp == pytest.approx(a.cost[0], rel=1e-12) and s.smooth_sensitivity == pytest.approx(ss, rel=1e-12)
    assert s.released_rdp == pytest.approx(released, rel=1e-12) and s.release_rdp == pytest.approx(cost, rel=1e-12)
    assert s.epsilon == pytest.approx(released + cost + LOG_INV_DELTA / (lam - 1), rel=1e-12)


def test_auto_order_is_twice_the_a_priori_order_minus_one():
    config = PateConfig(aggregator="confident_gnmax", sigma1=150.0, sigma2=40.0, threshold=200.0)
    a_priori = 1000 * (GNMAX_ORDERS / (2 * 150.0**2) + GNMAX_ORDERS / 40.0**2) + LOG_INV_DELTA / (GNMAX_ORDERS - 1)
    lam0 = GNMAX_ORDERS[np.argmin(a_priori)]
    assert lam0 == 5.0 and sanitize_order(config, 1000) == (9.0, "1 + 2 (a-priori order 5 - 1), from the "
                                                                 "configuration alone")
    assert sanitize_order(config.replace(ss_order=14.0), 1000)[0] == 14.0


def test_auto_sigma_keeps_the_release_cost_a_fixed_share_of_the_conversion_term():
    """sigma_ss = lam: c(lam) (lam - 1) barely moves from lam = 3 to 480, so small-epsilon (large-order) runs
    pay the same share as others (a fixed sigma_ss = 8 would cost lam/64 and more at large orders)."""
    config = _confident()
    for confidence, low, high in ((0.95, 2.6, 3.0), (0.5, 1.55, 1.76)):
        shares = []
        for lam in (3.0, 9.0, 50.0, 480.0):
            sigma, rule = sanitize_sigma(config, lam)
            assert sigma == lam and rule == "the release's order"
            beta, shift = SS_BETA_TIMES_ORDER / lam, float(ndtri(confidence))
            shares.append(gnss_rdp(beta, shifted_gnss_sigma(beta, sigma, shift), lam) * (lam - 1))
        assert low <= min(shares) and max(shares) <= high, shares
    assert sanitize_sigma(config.replace(ss_sigma=5.0), 9.0) == (5.0, "set in the configuration")


@pytest.mark.parametrize("aggregator", ["gnmax", "confident_gnmax"])
def test_headline_composes_the_release_cost_at_every_order(aggregator):
    votes = _votes()
    config = (_confident() if aggregator == "confident_gnmax" else PateConfig(aggregator="gnmax", sigma=6.0))
    report = analyse(votes, np.ones(len(votes), bool), config, n_private=60_000, data=TEACHER_DATA)
    (headline,) = [c for c in report.claims if c.headline]
    s = report.sanitized
    sigma_eff = shifted_gnss_sigma(s.beta, s.sigma, s.shift)
    per_query = (GNMAX_ORDERS / (2 * 10.0**2) + GNMAX_ORDERS / 6.0**2 if aggregator == "confident_gnmax"
                 else GNMAX_ORDERS / 6.0**2)
    best = min(40 * per_query[i] + gnss_rdp(s.beta, sigma_eff, lam) + LOG_INV_DELTA / (lam - 1)
               for i, lam in enumerate(GNMAX_ORDERS) if 2 * s.beta * lam < 1)
    assert headline.epsilon == pytest.approx(best, rel=1e-12)
    assert "and the sanitized data-dependent ε release" in headline.label and "GNSS" in headline.accountant
    off = analyse(votes, np.ones(len(votes), bool), config.replace(sanitize=False), n_private=60_000, data=TEACHER_DATA)
    assert [c for c in off.claims if c.headline][0].epsilon < headline.epsilon and off.sanitized is None
    assert np.all(np.isinf(gnss_rdp_at_orders(s.beta, sigma_eff, GNMAX_ORDERS)[2 * s.beta * GNMAX_ORDERS >= 1]))


# --------------------------------------------------------------------------- noise streams and claims


def test_same_seed_replays_the_sanitized_figure_and_other_seeds_do_not():
    votes = _votes(teachers=100, m=10, concentration=0.05)  # teachers that mostly agree: no clipping
    answered = votes.max(axis=1) > 60
    config = PateConfig(aggregator="confident_gnmax", threshold=60.0, sigma1=30.0, sigma2=15.0, teachers=100,
                        ss_sigma=2.0)

    def figure(**kw) -> float:
        s = analyse(votes, answered, config.replace(**kw), n_private=60_000, data=TEACHER_DATA).sanitized
        assert 0 < s.released_rdp < s.order * (len(votes) / (2 * 30.0**2) + answered.sum() / 15.0**2)
        return s.epsilon

    assert figure(seed=0) == figure(seed=0)
    assert len({figure(seed=0), figure(seed=1), figure(seed=2)}) == 3
    def draw(config, device="cpu", data=TEACHER_DATA) -> float:
        return draw_standard_normal(config, device, data=data)

    assert draw(_confident(seed=3)) == draw(_confident(seed=3))
    # keyed by the run's device type like every stream, by every knob, and by the teachers' private data
    assert draw(_confident(seed=3)) != draw(_confident(seed=3), device="cuda")
    assert draw(_confident(seed=3)) != draw(_confident(seed=3, ss_sigma=9.0))
    assert draw(_confident(seed=3)) != draw(_confident(seed=3), data=data_fingerprint(np.arange(11)))
    assert figure(secure_noise=True) != figure(secure_noise=True)


@pytest.mark.parametrize("aggregator", ["gnmax", "confident_gnmax"])
def test_claims_show_the_raw_and_the_sanitized_figure_with_clear_labels(aggregator):
    votes = _votes()
    config = _confident() if aggregator == "confident_gnmax" else PateConfig(aggregator="gnmax", sigma=6.0)
    report = analyse(votes, np.ones(len(votes), bool), config, n_private=60_000, data=TEACHER_DATA,
                     extra_caveats=("Noise source: x",))
    by_label = {c.label: c for c in report.claims}
    raw = by_label["data-dependent (not publishable)"]
    sanitized = by_label["data-dependent, sanitized through smooth sensitivity (publishable)"]
    assert sanitized.epsilon == report.sanitized.epsilon and not sanitized.headline
    assert sanitized.condition == "≥ the exact figure with probability 0.95"
    text = sanitized.text()
    for needle in (f"fixed order lam = {report.sanitized.order:g}", f"sigma_ss = {report.sanitized.order:g}",
                   "sigma_ss (the release's order)", "probability 0.95",
                   f"beta = 0.3/lam = {report.sanitized.beta:.4g}", "not part of delta", "Noise source: x",
                   "not for every data set", "Fixed before the votes were seen"):
        assert needle in text, needle
    assert "optimal order" not in text  # its order is fixed, not optimised
    assert "sanitized data-dependent figure" in " ".join(raw.caveats)
    median = analyse(votes, np.ones(len(votes), bool), config.replace(ss_confidence=0.5), n_private=60_000,
                     data=TEACHER_DATA)
    assert [c for c in median.claims if "sanitized" in c.label and not c.headline][0].condition == (
        "a median-unbiased estimate of the exact figure")


def test_a_sanitized_figure_above_the_headline_says_to_rely_on_the_headline():
    rng = np.random.default_rng(0)
    votes = np.stack([rng.multinomial(10, np.full(10, 0.1)) for _ in range(30)]).astype(float)  # no consensus
    report = analyse(votes, np.ones(30, bool), PateConfig(aggregator="gnmax", sigma=2.0), n_private=60_000,
                     data=TEACHER_DATA)
    (headline,) = [c for c in report.claims if c.headline]
    sanitized = [c for c in report.claims if "sanitized" in c.label and not c.headline][0]
    assert sanitized.epsilon >= headline.epsilon
    assert any("rely on the headline" in c for c in sanitized.caveats)


def test_lnmax_publishes_no_sanitized_figure():
    report = analyse(_votes(), np.ones(40, bool), PateConfig(aggregator="lnmax"), n_private=60_000, data=TEACHER_DATA)
    assert report.sanitized is None and not any("sanitized" in c.label for c in report.claims)


# --------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("changes, field", [
    ({"ss_sigma": -1.0}, "ss_sigma"),
    ({"ss_sigma": float("nan")}, "ss_sigma"),
    ({"ss_confidence": 0.3}, "ss_confidence"),
    ({"ss_confidence": 1.0}, "ss_confidence"),
    ({"ss_order": 1.5}, "ss_order"),
    ({"ss_order": -2.0}, "ss_order"),
    ({"ss_order": 600.0}, "ss_order"),
    ({"sanitize": "yes"}, "sanitize"),
])
def test_bad_sanitize_knobs_raise_config_error_naming_the_field(changes, field):
    with pytest.raises(ConfigError, match=f"`{field}`"):
        PateConfig.from_dict({"aggregator": "gnmax", **changes})


@pytest.mark.parametrize("call, field", [
    (lambda: gnmax_summed_local_sensitivity_bounds([[3, 1], [2, 1]], 1.0, 2.0), "votes"),  # unequal row sums
    (lambda: gnmax_summed_local_sensitivity_bounds([[3.5, 0.5]], 1.0, 2.0), "votes"),
    (lambda: gnmax_summed_local_sensitivity_bounds([[3, 1]], 1.0, 1.0), "order"),
    (lambda: confident_gnmax_summed_local_sensitivity_bounds([[3, 1]], [0.5], 2.0, 1.0, 1.0, 2.0), "answered"),
    (lambda: confident_gnmax_summed_local_sensitivity_bounds([[3, 1]], [True, False], 2.0, 1.0, 1.0, 2.0),
     "answered"),
    (lambda: confident_gnmax_summed_local_sensitivity_bounds([[3, 1]], [True], 2.0, 0.0, 1.0, 2.0), "sigma1"),
    (lambda: shifted_gnss_sigma(0.1, 0.0, 1.0), "sigma_ss"),
    (lambda: shifted_gnss_sigma(0.1, 1.0, -1.0), "shift"),
    (lambda: sanitize_rdp(-1.0, 0.1, 1.0, sigma=1.0, shift=0.0, standard_normal=0.0), "rdp"),
    (lambda: sanitize_rdp(1.0, np.nan, 1.0, sigma=1.0, shift=0.0, standard_normal=0.0), "smooth_sensitivity"),
    (lambda: sanitize_rdp(1.0, 0.1, 1.0, sigma=1.0, shift=0.0, standard_normal=np.inf), "standard_normal"),
])
def test_bad_inputs_of_the_accounting_functions_name_the_argument(call, field):
    with pytest.raises(ConfigError, match=f"`{field}`"):
        call()


@pytest.mark.parametrize("dataset", ["mnist", "fashion_mnist", "digits", "synthetic"])
def test_a_sanitized_figure_on_the_votes_its_settings_were_tuned_on_is_not_covered(dataset):
    """Issue 35, item 4: beta, sigma_ss and lam's rule were chosen on MNIST votes, so an MNIST run's sanitized figure
    says it is not covered and is never called publishable (claim, condition, caveats); other data keep the claim."""
    report = analyse(_votes(), np.ones(len(_votes()), bool), _confident(dataset=dataset), n_private=60_000,
                     data=TEACHER_DATA)
    (sanitized,) = [c for c in report.claims if "sanitized" in c.label and not c.headline]
    text = " ".join(c.text() for c in report.claims)
    if dataset == "mnist":
        assert sanitized.condition == "not covered: tuned on these votes"
        assert "(not covered: tuned on these votes)" in sanitized.statement()
        assert "(publishable)" not in sanitized.label and "not publishable" in sanitized.label
        assert "may be published" not in text and "Fixed before the votes were seen" not in text
        assert "is covered: its release is charged" not in text and "and so is the sanitized" not in text
    else:
        assert sanitized.label == "data-dependent, sanitized through smooth sensitivity (publishable)"
        assert sanitized.condition == "≥ the exact figure with probability 0.95"
        assert "Fixed before the votes were seen" in text and "tuned on these votes" not in text
