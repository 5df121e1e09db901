"""Issue 37, item 1 (PATE and DP-Bayes): claims as data. Every claim that composes releases carries them as privacy
events, and dp-accounting alone, or a closed form, recomputes its epsilon from them; figures carry none.

Tolerances, and why:
- the same math (the claim's own RDP orders and conversion, a sum of pure epsilons, the analytic Gaussian's
  closed form, the same PLD): 1e-6 relative, floating point only;
- dp-accounting's PLD against an exact closed form: at least the exact figure (its estimate is pessimistic) and
  at most 1 % above it (its discretisation of the privacy loss, 1e-4 here);
- dp-accounting's RDP against Opacus' RDP on the same DP-SGD steps, orders and conversion: 1e-3 relative (the
  subsampled Gaussian's RDP at fractional orders is a numerical series that the two libraries sum differently);
- a tighter accountant (dp-accounting's RDP conversion, PLD) against a claim stated with a looser one (the papers'
  RDP conversion ln(1/delta)/(lam - 1), the moments bound of a pure-DP query): never above the claim.

dp-accounting's PLD constructors read an unsampled Gaussian's or Laplace's noise multiplier under REPLACE_ONE as
relative to half the replace-one sensitivity (they compare mu(x + 1) with mu(x - 1)), where the events state the
sensitivity under the claim's relation (accounting/events.py's convention, which its RDP accountant shares). For an
unsampled additive mechanism the privacy loss depends on the shift alone, so these tests build its PLD with the
one-unit-shift constructor (ADD_OR_REMOVE_ONE) whatever the relation.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from opacus.accountants import RDPAccountant

from privengine import registry
from privengine.accounting.events import epsilon_of_json, from_json, to_json
from privengine.accounting.gaussian import gaussian_epsilon
from privengine.accounting.pate import GNMAX_ORDERS, gnmax_events
from privengine.accounting.subsampled_gaussian import history_events
from privengine.claims import PrivacyClaim, claims_of, headline_of
from privengine.dp_bayes.comparison import _claims
from privengine.dp_bayes.config import DpBayesConfig
from privengine.dp_bayes.releases import DpviInfo
from privengine.pate.config import PateConfig
from privengine.pate.privacy import NO_EVENTS_CAVEAT, analyse
from privengine.randomness import data_fingerprint

REL = dp_accounting.NeighboringRelation
DELTA = 1e-5
TEACHER_DATA = data_fingerprint(np.arange(10))  # stands for the fingerprint of the teachers' private data


# ---- recomputing an epsilon from JSON events, with dp-accounting or by hand ---------------------------------------

def _events(claim: PrivacyClaim) -> dp_accounting.DpEvent:
    return dp_accounting.ComposedDpEvent([from_json(e) for e in claim.events])


def _shift_pld_epsilon(claim: PrivacyClaim) -> float:
    """dp-accounting's PLD accountant on the claim's events, each shifting its noise by one noise multiplier."""
    accountant = dp_accounting.pld.PLDAccountant(REL.ADD_OR_REMOVE_ONE)
    accountant.compose(_events(claim))
    return accountant.get_epsilon(claim.delta)


def _rdp(claim: PrivacyClaim, orders=None) -> dp_accounting.rdp.RdpAccountant:
    """dp-accounting's RDP accountant (at ``orders``, else its default ones) over the claim's events."""
    relation = REL.REPLACE_ONE if claim.relation == "replace_one" else REL.ADD_OR_REMOVE_ONE
    accountant = dp_accounting.rdp.RdpAccountant(orders=None if orders is None else list(orders),
                                                 neighboring_relation=relation)
    accountant.compose(_events(claim))
    return accountant


def _classical(rdp: np.ndarray, orders: np.ndarray, delta: float) -> tuple[float, float]:
    """(min over orders of RDP + ln(1/delta)/(lam - 1), its order): the PATE papers' conversion."""
    eps = rdp + math.log(1 / delta) / (orders - 1)
    return float(eps.min()), float(orders[int(np.argmin(eps))])


def _sum(event: dict, leaf) -> float:
    """Sum of ``leaf(event)`` over the leaves of a JSON event tree, counting self-compositions."""
    if event["type"] == "SelfComposedDpEvent":
        return event["count"] * _sum(event["event"], leaf)
    if event["type"] == "ComposedDpEvent":
        return sum(_sum(e, leaf) for e in event["events"])
    return leaf(event)


def _gaussian_mu(claim: PrivacyClaim) -> float:
    """The mu-GDP of a composition of unsampled Gaussians: sqrt(sum 1 / z^2), exact (Dong, Roth & Su 2019)."""
    def leaf(e):
        assert e["type"] == "GaussianDpEvent", e
        return e["noise_multiplier"] ** -2
    return math.sqrt(sum(_sum(e, leaf) for e in claim.events))


def _pure_epsilon(claim: PrivacyClaim) -> float:
    """Basic composition of pure-DP leaves: PureDpEvent(eps) is eps-DP, LaplaceDpEvent(z) is (1/z)-DP."""
    def leaf(e):
        assert e["type"] in ("PureDpEvent", "LaplaceDpEvent"), e
        return e["epsilon"] if e["type"] == "PureDpEvent" else 1 / e["noise_multiplier"]
    return sum(_sum(e, leaf) for e in claim.events)


def _hand_pld_epsilon(events: tuple[dict, ...], delta: float) -> float:
    """The add/remove PLD of JSON events from dp-accounting's public constructors, walked here by hand: pure events
    as PLDs of their privacy parameters, Gaussians (Poisson-sampled or not) by from_gaussian_mechanism."""
    def composed(parts):
        total = parts[0]
        for part in parts[1:]:
            total = total.compose(part)
        return total

    def pld(e):
        if e["type"] == "SelfComposedDpEvent":
            return pld(e["event"]).self_compose(e["count"])
        if e["type"] == "ComposedDpEvent":
            return composed([pld(x) for x in e["events"]])
        if e["type"] == "PureDpEvent":
            return pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(e["epsilon"], 0.0))
        q, gauss = (e["sampling_probability"], e["event"]) if e["type"] == "PoissonSampledDpEvent" else (1.0, e)
        assert gauss["type"] == "GaussianDpEvent", e
        return pld_lib.from_gaussian_mechanism(gauss["noise_multiplier"], sampling_prob=q)
    return float(composed([pld(e) for e in events]).get_epsilon_for_delta(delta))


def _finish(manager, mechanism: str, **overrides) -> tuple[str, dict]:
    run_id = manager.submit(mechanism, dict(registry.get(mechanism).smoke) | overrides)
    run = manager.wait(run_id, timeout=300)
    assert run.state == "finished", run.traceback
    return run_id, run.summary


# ---- PATE --------------------------------------------------------------------------------------------------------

PATE_KNOBS = {"lnmax": {"gamma": 0.05}, "gnmax": {"sigma": 20.0, "sanitize": False},
              "confident_gnmax": {"threshold": 60.0, "sigma1": 30.0, "sigma2": 12.0, "sanitize": False}}


def _check_pate_a_priori(claim: PrivacyClaim, config: PateConfig, queries: int) -> None:
    """The a-priori claim's events recompute it: per order exactly, converted tighter never above it."""
    assert claim.headline and claim.relation == "replace_one" and len(claim.events) == 1
    assert claim.events[0]["type"] == "SelfComposedDpEvent" and claim.events[0]["count"] == queries
    if config.aggregator == "lnmax":
        # the moments bound of a pure eps0-DP query, eps0 read off the events: the claim's math exactly
        eps0 = _pure_epsilon(claim) / queries
        assert eps0 == pytest.approx(2 * config.gamma, rel=1e-12)
        moments = np.arange(1, config.moments + 1.0)
        bound = queries * np.minimum(eps0**2 * moments * (moments + 1) / 2, eps0 * moments)
        assert claim.epsilon == pytest.approx(np.min((bound + math.log(1 / claim.delta)) / moments), rel=1e-6)
        # dp-accounting's exact Laplace RDP at the same orders (lam = l + 1) is below that bound
        exact = _rdp(claim, moments + 1).rdp
        assert np.all(exact <= bound / moments * (1 + 1e-9))
        rdp_epsilon = _rdp(claim).get_epsilon(claim.delta)
        # accounting.events takes the PLD (an unsampled Laplace: a shift of one multiplier under either relation),
        # exact for this release, so at most the RDP conversion of the same events, itself at most the claim
        composed = epsilon_of_json(claim.events, delta=claim.delta, relation="replace_one")
        assert composed.accountant.startswith("dp-accounting PLD")
        assert composed.epsilon <= rdp_epsilon * (1 + 1e-6) and rdp_epsilon <= claim.epsilon * (1 + 1e-9)
    else:
        # dp-accounting's Gaussian RDP at the claim's orders, converted as the claim converts: the same number
        accountant = _rdp(claim, GNMAX_ORDERS)
        epsilon, order = _classical(accountant.rdp, GNMAX_ORDERS, claim.delta)
        assert claim.epsilon == pytest.approx(epsilon, rel=1e-6) and claim.order == order
        assert accountant.get_epsilon(claim.delta) <= claim.epsilon  # its conversion is tighter
        # the exact figure: Gaussians compose to mu-GDP; PLD within its discretisation above it
        exact = gaussian_epsilon(_gaussian_mu(claim), claim.delta)
        assert exact <= claim.epsilon and exact * (1 - 1e-9) <= _shift_pld_epsilon(claim) <= exact * 1.01
        per_query = {"gnmax": 2 / config.sigma**2, "confident_gnmax": 1 / config.sigma1**2 + 2 / config.sigma2**2}
        assert _gaussian_mu(claim) ** 2 == pytest.approx(queries * per_query[config.aggregator], rel=1e-12)


@pytest.mark.parametrize("aggregator", ["lnmax", "gnmax", "confident_gnmax"])
def test_pate_a_priori_claim_is_recomputed_from_its_events_and_figures_carry_none(aggregator):
    rng = np.random.default_rng(0)
    votes = rng.multinomial(50, [0.7, 0.2, 0.1], size=120).astype(float)
    config = PateConfig(aggregator=aggregator, teachers=50, **PATE_KNOBS[aggregator])
    answered = np.ones(120, dtype=bool)  # LNMax and GNMax answer every query
    if aggregator == "confident_gnmax":
        answered[::3] = False  # its a-priori claim charges every submitted query all the same
    report = analyse(votes, answered, config, n_private=60_000, data=TEACHER_DATA)
    headline = next(c for c in report.claims if c.headline)
    _check_pate_a_priori(headline, config, 120)
    assert all(not c.events and c.relation == "replace_one" for c in report.claims if not c.headline)


@pytest.mark.parametrize("aggregator", ["gnmax", "confident_gnmax"])
def test_pate_headline_with_a_sanitized_release_carries_no_events_and_says_why(aggregator):
    votes = np.tile([40.0, 8.0, 2.0], (60, 1))
    config = PateConfig(aggregator=aggregator, teachers=50, **{**PATE_KNOBS[aggregator], "sanitize": True})
    report = analyse(votes, np.ones(60, dtype=bool), config, n_private=60_000, data=TEACHER_DATA)
    assert report.sanitized is not None and not any(c.events for c in report.claims)
    assert NO_EVENTS_CAVEAT in next(c for c in report.claims if c.headline).caveats


def test_events_compose_replace_one_gaussians_at_their_stated_sensitivity():
    events = (to_json(gnmax_events(20.0, 300)),)
    exact = gaussian_epsilon(math.sqrt(300 * 2 / 20.0**2), DELTA)
    epsilon = epsilon_of_json(events, delta=DELTA, relation="replace_one").epsilon
    assert exact <= epsilon <= exact * 1.01  # PLD is pessimistic: never below the exact mu-GDP profile


@pytest.mark.slow
@pytest.mark.parametrize("aggregator", ["lnmax", "gnmax", "confident_gnmax"])
def test_pate_smoke_run_and_its_planned_charge_carry_the_same_events(manager, store, aggregator):
    knobs = PATE_KNOBS[aggregator]
    run_id, summary = _finish(manager, "pate", aggregator=aggregator, **knobs)
    config = PateConfig.from_dict(dict(registry.get("pate").smoke) | {"aggregator": aggregator, **knobs})
    headline = headline_of(summary)
    _check_pate_a_priori(headline, config, config.queries)
    assert all(not c.events for c in claims_of(summary) if not c.headline)
    (planned,) = claims_of(store.planned_charge(run_id))
    assert planned.events == headline.events and planned.relation == headline.relation


# ---- DP-Bayes ----------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("neighbouring, relation",
                         [("replace-one", "replace_one"), ("add-remove", "add_or_remove_one")])
def test_exponential_draws_are_pure_events_whose_sum_is_the_claim(manager, store, neighbouring, relation):
    run_id, summary = _finish(manager, "dp_bayes", draws=3, epsilon=0.7, neighbouring=neighbouring)
    claim = headline_of(summary)
    assert claim.relation == relation and claim.delta == 0
    assert claim.events == ({"type": "SelfComposedDpEvent", "count": 3,
                             "event": {"type": "PureDpEvent", "epsilon": 0.7}},)
    assert claim.epsilon == pytest.approx(_pure_epsilon(claim), rel=1e-12)
    assert claims_of(store.planned_charge(run_id))[0].events == claim.events
    _, sweep = _finish(manager, "dp_bayes", mode="sweep", sweep_epsilons=[0.5, 2.0], sweep_repeats=2,
                       neighbouring=neighbouring)
    claim = headline_of(sweep)
    assert len(claim.events) == 2 and claim.epsilon == pytest.approx(_pure_epsilon(claim), rel=1e-12) == 5.0


@pytest.mark.slow
@pytest.mark.parametrize("neighbouring", ["replace-one", "add-remove"])
def test_ssp_release_is_a_gaussian_event_of_noise_sd_over_its_sensitivity(manager, neighbouring):
    _, summary = _finish(manager, "dp_bayes", method="ssp", epsilon=1.5, coverage_repeats=0, ssp_mcmc_steps=200,
                         neighbouring=neighbouring)
    claim = headline_of(summary)
    assert claim.relation == {"replace-one": "replace_one", "add-remove": "add_or_remove_one"}[neighbouring]
    (event,) = claim.events
    assert event["noise_multiplier"] == pytest.approx(summary["ssp_noise_sd"]["1.5"] / summary["ssp_delta_2"],
                                                      rel=1e-12)
    exact = gaussian_epsilon(_gaussian_mu(claim), claim.delta)  # the analytic Gaussian mechanism: the claim's math
    assert claim.epsilon == pytest.approx(exact, rel=1e-6) and exact == pytest.approx(1.5, rel=1e-6)
    assert exact * (1 - 1e-9) <= _shift_pld_epsilon(claim) <= exact * 1.01
    if neighbouring == "add-remove":
        composed = epsilon_of_json(claim.events, delta=claim.delta, relation=claim.relation).epsilon
        assert exact * (1 - 1e-9) <= composed <= exact * 1.01


@pytest.mark.slow
def test_dpvi_add_remove_release_carries_its_steps_as_events(manager):
    _, summary = _finish(manager, "dp_bayes", method="dpvi", epsilon=1.0, coverage_repeats=0, dpvi_steps=60,
                         neighbouring="add-remove")
    claim = headline_of(summary)
    sigma, steps = summary["dpvi_noise_multiplier"]["1"], summary["dpvi_steps"]["1"]
    assert claim.relation == "add_or_remove_one" and steps == 60
    assert claim.events == (to_json(history_events([(sigma, DpBayesConfig().dpvi_sample_rate, steps)])),)
    rdp = _rdp(claim, RDPAccountant.DEFAULT_ALPHAS).get_epsilon(claim.delta)  # Opacus' orders and conversion
    assert claim.epsilon == pytest.approx(rdp, rel=1e-3)
    composed = epsilon_of_json(claim.events, delta=claim.delta, relation=claim.relation)
    assert composed.epsilon == pytest.approx(_shift_pld_epsilon(claim), rel=1e-6) and composed.epsilon <= claim.epsilon


def test_dpvi_replace_one_claim_is_a_conversion_without_events():
    config = DpBayesConfig.from_dict({"method": "dpvi", "neighbouring": "replace-one", "dpvi_steps": 100})
    claim = _claims(config, "dpvi", DpviInfo({1.0: 2.0}, {1.0: 100}), [1.0], headline=True, sweep=False)
    assert claim.events == () and claim.relation == "replace_one"
    assert any("A conversion, not a composition" in c for c in claim.caveats)


@pytest.mark.slow
@pytest.mark.parametrize("neighbouring", ["add-remove", "replace-one"])
def test_all_methods_sweep_composes_every_part_by_its_events(manager, neighbouring):
    _, summary = _finish(manager, "dp_bayes", method="all", mode="sweep", sweep_epsilons=[0.5, 2.0], sweep_repeats=2,
                         ssp_mcmc_steps=200, dpvi_steps=30, neighbouring=neighbouring)
    headline, *parts = claims_of(summary)
    assert [p.label.split(" ")[0] for p in parts] == ["sweep", "ssp", "dpvi"]
    total = sum(p.epsilon for p in parts)
    if neighbouring == "replace-one":  # DPVI's claim is a group-privacy conversion: basic composition, said so
        assert not parts[2].events and not headline.events and headline.epsilon == pytest.approx(total)
        assert any("dpvi sweep" in c and "no privacy events" in c for c in headline.caveats)
        return
    assert headline.events == tuple(e for p in parts for e in p.events) and headline.relation == "add_or_remove_one"
    assert headline.delta == summary["delta"] and headline.accountant.startswith("dp-accounting PLD")
    assert headline.epsilon == pytest.approx(_hand_pld_epsilon(headline.events, headline.delta), rel=1e-6)
    assert headline.epsilon < total
