"""Issue 37, item 5: a sweep composes its runs' privacy events tightly, and dp-accounting run directly on the same
events gives the same epsilon, below the sum of the runs' epsilons.

DP-SGD sweeps compose with the mechanism's own accountant (Opacus, ``compose_runs``) and carry every model's
events; other mechanisms' sweeps compose the events of their runs' headline claims (``explore.privacy.composition``:
dp-accounting's PLD, pure-ε events as PLDs of their privacy parameters), and fall back to basic composition, saying
why, when a claim records no events, the claims state different relations or all are pure. The runs are written into
the store directly (summaries from ``dpsgd_claims``, or hand-built claims of the toy mechanism), nothing trained.
"""

from __future__ import annotations

import dataclasses

from types import SimpleNamespace

import dp_accounting as dpa
import pytest
from dp_accounting import dp_event
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd)
from privengine.accounting.events import PureDpEvent, epsilon_of_json, from_json, to_json
from privengine.claims import PrivacyClaim, headline_of
from privengine.dpsgd.privacy import dpsgd_claims, repeat_and_select
from privengine.explore.privacy import sweep_claim
from tests.test_claim_events_dpsgd import assert_reproduced

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order")

ADD_REMOVE = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE
Q, STEPS = 0.01, 300


def _dpsgd_run(store, sigma: float, models: int, accountant: str):
    """A finished DP-SGD run of ``models`` models at (sigma, Q, STEPS), its claims stated by ``dpsgd_claims``."""
    claims = dpsgd_claims(histories=[[(sigma, Q, STEPS)]] * models, accountant=accountant, delta=1e-5,
                          private_size=9000, public_note="", sampling="poisson")
    summary = {"noise_multiplier": sigma, "sample_rate": Q, "steps_per_model": STEPS,
               "models": [{"steps": STEPS}] * models, "privacy": [c.to_dict() for c in claims]}
    run_id = store.create_run("dpsgd", {"accountant": accountant, "delta": 1e-5})
    store.mark_ended(run_id, "finished", summary=summary)
    return store.get_run(run_id)


@pytest.mark.parametrize("accountant", ["prv", "rdp"])
def test_a_dpsgd_sweep_carries_every_models_events_and_dp_accounting_reproduces_it(store, accountant):
    runs = [_dpsgd_run(store, 1.0, 2, accountant), _dpsgd_run(store, 1.5, 1, accountant)]
    claim = sweep_claim("dpsgd", runs)
    assert_reproduced(claim)
    model = [dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(s)), STEPS) for s in (1.0, 1.5)]
    assert [from_json(e) for e in claim.events] == [dpa.SelfComposedDpEvent(model[0], 2), model[1]]
    assert claim.epsilon < sum(headline_of(r.summary).epsilon for r in runs)


def _toy_run(store, *claims: PrivacyClaim):
    """A finished run of the toy mechanism (no ``Frontier.compose``) stating ``claims``, the first the headline."""
    run_id = store.create_run("toy", {"steps": 1})
    summary = {"score": 1.0, "privacy": [c.to_dict() for c in claims]}
    store.mark_ended(run_id, "finished", summary=summary)
    return store.get_run(run_id)


def _claim(events, *, delta: float, relation: str = "add_or_remove_one", headline: bool = True) -> PrivacyClaim:
    """A claim of ``events``, its epsilon computed from them by dp-accounting; at delta 0 (pure events) their epsilons
    added, a Laplace event's being 1 / noise_multiplier (sensitivity over scale)."""
    if delta == 0:
        epsilon = sum(e.epsilon if isinstance(e, PureDpEvent) else 1 / e.noise_multiplier for e in events)
    else:
        epsilon = epsilon_of_json([to_json(e) for e in events], delta=delta, relation=relation).epsilon
    return PrivacyClaim("toy", epsilon, delta, "by hand", "add or remove one example", headline=headline,
                        events=tuple(to_json(e) for e in events), relation=relation)


def test_gaussian_and_laplace_runs_compose_as_dp_accountings_pld(store):
    gaussian = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(1.2)), 100)
    laplace = dpa.LaplaceDpEvent(4.0)  # ε = 1/4 at δ = 0
    runs = [_toy_run(store, _claim([gaussian], delta=1e-5)), _toy_run(store, _claim([laplace], delta=0.0))]
    claim = sweep_claim("toy", runs)
    reference = pld_privacy_accountant.PLDAccountant(ADD_REMOVE, value_discretization_interval=1e-4)
    reference.compose(dpa.ComposedDpEvent([gaussian, laplace]))
    assert claim.delta == 1e-5 and claim.epsilon == pytest.approx(reference.get_epsilon(1e-5), rel=1e-6)
    assert claim.accountant.startswith("dp-accounting PLD") and claim.relation == "add_or_remove_one"
    assert [from_json(e) for e in claim.events] == [gaussian, laplace]
    assert claim.epsilon < sum(headline_of(r.summary).epsilon for r in runs)


def test_claims_at_different_deltas_compose_at_the_largest(store):
    runs = [_toy_run(store, _claim([dpa.GaussianDpEvent(s)], delta=d)) for s, d in ((2.0, 1e-5), (3.0, 1e-7))]
    claim = sweep_claim("toy", runs)
    reference = pld_privacy_accountant.PLDAccountant(ADD_REMOVE, value_discretization_interval=1e-4)
    reference.compose(dpa.ComposedDpEvent([dpa.GaussianDpEvent(2.0), dpa.GaussianDpEvent(3.0)]))
    assert claim.delta == 1e-5 and claim.epsilon == pytest.approx(reference.get_epsilon(1e-5), rel=1e-6)


def test_a_tight_composition_above_the_sum_of_epsilons_gives_way_to_basic_composition(store):
    """The guard against stating more than adding the claims would (review R1): claims whose stated epsilons sum
    below what their events compose to at the largest delta (here made so by stating each at a looser figure than
    its events; a claim's own accountant may be tighter than PLD) are added instead, with the sum of deltas."""
    claims = [dataclasses.replace(_claim([dpa.GaussianDpEvent(s)], delta=1e-5), epsilon=0.1) for s in (1.0, 2.0)]
    claim = sweep_claim("toy", [_toy_run(store, c) for c in claims])
    assert claim.epsilon == pytest.approx(0.2) and claim.delta == pytest.approx(2e-5)
    assert "above the sum of the claims' epsilons" in claim.caveats[-1]


def test_a_pure_release_composes_as_the_pld_of_its_privacy_parameters(store):
    """dp-accounting has no pure-ε event: the reference composes its PLD constructors directly."""
    runs = [_toy_run(store, _claim([dpa.GaussianDpEvent(3.0)], delta=1e-5)),
            _toy_run(store, _claim([PureDpEvent(0.4)], delta=0.0))]
    claim = sweep_claim("toy", runs)
    reference = pld_lib.from_gaussian_mechanism(3.0, value_discretization_interval=1e-4).compose(
        pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(0.4, 0.0),
                                        value_discretization_interval=1e-4))
    assert claim.delta == 1e-5 and claim.epsilon == pytest.approx(reference.get_epsilon_for_delta(1e-5), rel=1e-6)
    assert claim.epsilon < sum(headline_of(r.summary).epsilon for r in runs)


@pytest.mark.parametrize("second, why", [
    (PrivacyClaim("toy", 1.0, 1e-5, "by hand", "add or remove one example", headline=True),
     "the headline claims of 1 of the 2 runs record no privacy events"),
    (_claim([dpa.GaussianDpEvent(2.0)], delta=1e-5, relation="replace_one"), "different neighbouring relations"),
])
def test_basic_composition_when_the_events_cannot_compose_and_it_says_why(store, second, why):
    first = _claim([dpa.GaussianDpEvent(2.0)], delta=1e-5)
    claim = sweep_claim("toy", [_toy_run(store, first), _toy_run(store, second)])
    assert claim.epsilon == pytest.approx(first.epsilon + second.epsilon) and claim.delta == pytest.approx(2e-5)
    assert "basic composition" in claim.accountant and not claim.events and claim.relation is None
    assert why in claim.caveats[-1]


def test_pure_claims_alone_add_up_exactly(store):
    runs = [_toy_run(store, _claim([PureDpEvent(0.3)], delta=0.0)), _toy_run(store, _claim([PureDpEvent(0.5)],
                                                                                         delta=0.0))]
    claim = sweep_claim("toy", runs)
    assert (claim.epsilon, claim.delta) == (pytest.approx(0.8), 0.0) and "pure" in claim.caveats[-1]


def test_the_random_repetition_claim_records_its_repeat_and_select_event():
    summary = {"noise_multiplier": 1.0, "sample_rate": Q, "models": [{"steps": STEPS}], "privacy": []}
    runs = [SimpleNamespace(summary=summary, config={"accountant": "rdp", "delta": 1e-5})] * 3
    claim = repeat_and_select(runs, "geometric", 3.0)
    (event,) = [from_json(e) for e in claim.events]
    one_run = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(1.0)), STEPS)
    assert event == dp_event.RepeatAndSelectDpEvent(one_run, 3.0, 1.0) and claim.relation == "add_or_remove_one"
    reference = rdp_privacy_accountant.RdpAccountant()
    reference.compose(event)
    assert reference.get_epsilon_and_optimal_order(1e-5) == (claim.epsilon, claim.order)
