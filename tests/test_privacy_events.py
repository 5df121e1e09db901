"""Privacy events (accounting/events.py): the JSON form round-trips, and compose() agrees with dp-accounting's
own accountants and with the exact composition of pure-ε mechanisms derived from the math."""

import json
import math
from unittest import mock

import dp_accounting as dpa
from dp_accounting import dp_event
import pytest
from hypothesis import example, given, settings, strategies as st
from scipy.optimize import brentq
from scipy.stats import binom

from privengine.accounting import events as ev
from privengine.claims import PrivacyClaim

ADD_REMOVE, REPLACE = "add_or_remove_one", "replace_one"

gaussian = st.builds(dpa.GaussianDpEvent, st.floats(0.5, 5.0))
laplace = st.builds(dpa.LaplaceDpEvent, st.floats(0.5, 5.0))
sampled = st.builds(dpa.PoissonSampledDpEvent, st.floats(0.001, 0.2), gaussian | laplace)
leaf = gaussian | laplace | sampled
trees = st.recursive(
    leaf, lambda inner: st.builds(dpa.SelfComposedDpEvent, inner, st.integers(1, 20))
    | st.builds(dpa.ComposedDpEvent, st.lists(inner, min_size=1, max_size=3)), max_leaves=4)


@settings(max_examples=60, deadline=None)
@given(trees | st.builds(ev.PureDpEvent, st.floats(0.01, 3.0)))
def test_json_form_round_trips_and_names_dp_accounting_classes(event):
    data = ev.to_json(event)
    assert ev.from_json(data) == event
    assert data["type"] == type(event).__name__
    if not isinstance(event, ev.PureDpEvent):
        assert getattr(dpa, data["type"]) is type(event)


def test_json_form_writes_an_infinite_parameter_as_a_string_json_can_hold():
    event = dp_event.RepeatAndSelectDpEvent(dpa.GaussianDpEvent(2.0), 3.0, math.inf)  # a Poisson law of repetitions
    data = json.loads(json.dumps(ev.to_json(event), allow_nan=False))
    assert data["shape"] == "inf" and ev.from_json(data) == event


def test_json_form_of_the_issue_example():
    data = {"type": "SelfComposedDpEvent", "count": 950, "event": {
        "type": "PoissonSampledDpEvent", "sampling_probability": 0.0105,
        "event": {"type": "GaussianDpEvent", "noise_multiplier": 0.82}}}
    assert ev.from_json(data) == dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(0.0105, dpa.GaussianDpEvent(0.82)), 950)


@pytest.mark.parametrize("bad, words", [({"type": "NopeDpEvent"}, "unknown privacy event type"),
                                        ({"type": "GaussianDpEvent", "sigma": 1.0}, "no field(s) sigma"),
                                        ({"type": "GaussianDpEvent"}, "lacks field(s) noise_multiplier"),
                                        ({"type": "GaussianDpEvent", "noise_multiplier": "2"}, "must be a number"),
                                        ({"type": "GaussianDpEvent", "noise_multiplier": None}, "must be a number")])
def test_json_form_refuses_unknown_types_and_fields(bad, words):
    with pytest.raises(ValueError) as info:
        ev.from_json(bad)
    assert words in str(info.value)


def releases(events) -> int:
    """How many leaf mechanisms the events release (a self-composition counts its count)."""
    total = 0
    for e in events:
        if isinstance(e, dpa.SelfComposedDpEvent):
            total += e.count * releases([e.event])
        elif isinstance(e, dpa.ComposedDpEvent):
            total += releases(e.events)
        else:
            total += 1
    return total


#: the property test's PLD grid: the walk it checks is the same at any grid, whose width sets only the cost (at the
#: module's 1e-4, some draws of a few sigma-0.5 Gaussians took minutes, 145 s of CPU for 12 examples in one CI run;
#: 1e-3 takes about a tenth, so 15 examples where there were 12). compose() at the module's own grid is checked
#: against exact values below.
PROPERTY_GRID = 1e-3


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(st.lists(trees, min_size=1, max_size=3), st.sampled_from([1e-5, 1e-3]))
@example([dpa.SelfComposedDpEvent(dpa.SelfComposedDpEvent(dpa.SelfComposedDpEvent(
    dpa.GaussianDpEvent(3.02), 20), 20), 20)], 1e-5)  # 8000 releases: over the memory guard, composed by RDP
@example([dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.01, dpa.GaussianDpEvent(1.0)), 20)], 1e-5)
def test_pld_composition_equals_dp_accountings_pld_accountant(events, delta):
    """The event -> PLD walk builds what PLDAccountant builds, unless the memory guard sends the events to RDP.

    PLDAccountant composes a self-composed Gaussian as one Gaussian of sigma / sqrt(count), discretised once; here
    each release is discretised (rounded up, at most one interval of privacy loss) and then composed, so the loss
    can sit up to one interval per release above the reference's: both pessimistic, ours never below."""
    with mock.patch.object(ev, "VALUE_DISCRETIZATION", PROPERTY_GRID):
        ours = ev.compose(events, delta=delta, relation=ADD_REMOVE)
    guard = ev.RdpBound(ADD_REMOVE)
    guard.add(events)
    if guard.too_large_for_pld():
        rdp = dpa.rdp.RdpAccountant()
        for e in events:
            rdp.compose(e)
        assert ours.accountant == ev.RDP and ours.epsilon == pytest.approx(rdp.get_epsilon(delta), rel=1e-12)
        return
    accountant = dpa.pld.PLDAccountant(value_discretization_interval=PROPERTY_GRID)
    for e in events:
        accountant.compose(e)
    assert ours.accountant == ev.PLD
    reference = accountant.get_epsilon(delta)
    slack = releases(events) * PROPERTY_GRID
    assert reference - 1e-9 <= ours.epsilon <= reference * 1.01 + slack + 1e-3


def exact_pure_composition_epsilon(eps: float, k: int, delta: float) -> float:
    """The exact epsilon of k-fold composition of eps-DP at delta (Kairouz, Oh & Viswanath 2015): the worst case
    is randomized response, whose privacy loss is +eps w.p. p = e^eps / (1 + e^eps), -eps otherwise, so after k
    draws L = (2i - k) eps with i ~ Binomial(k, p), and delta(e) = E[(1 - e^(e - L))_+]."""
    p = math.exp(eps) / (1 + math.exp(eps))

    def delta_at(e):
        return sum(binom.pmf(i, k, p) * max(0.0, 1 - math.exp(e - (2 * i - k) * eps)) for i in range(k + 1))

    if delta_at(0.0) <= delta:
        return 0.0
    return brentq(lambda e: delta_at(e) - delta, 0.0, k * eps)


@pytest.mark.parametrize("eps, k, delta", [(0.5, 10, 1e-5), (1.0, 3, 1e-6), (0.1, 50, 1e-3), (2.0, 1, 1e-5)])
def test_pure_events_compose_to_the_exact_pure_composition(eps, k, delta):
    events = [dpa.SelfComposedDpEvent(ev.PureDpEvent(eps), k)]
    ours = ev.compose(events, delta=delta, relation=REPLACE)
    exact = exact_pure_composition_epsilon(eps, k, delta)
    # pessimistic discretisation: never below the exact value, at most a few grid steps (1e-4 each) per composition
    assert exact - 1e-9 <= ours.epsilon <= exact + k * 2e-4
    assert ours.epsilon <= k * eps + 1e-9


def test_rdp_fallback_adds_pure_events_by_basic_composition():
    zcdp = dpa.ZCDpEvent(0.05)
    ours = ev.compose([zcdp, ev.PureDpEvent(0.3), ev.PureDpEvent(0.2)], delta=1e-5, relation=ADD_REMOVE)
    accountant = dpa.rdp.RdpAccountant()
    accountant.compose(zcdp)
    assert ours.accountant == ev.RDP
    assert ours.epsilon == pytest.approx(accountant.get_epsilon(1e-5) + 0.5, rel=1e-12)


@pytest.mark.parametrize("event", [dpa.LaplaceDpEvent(2.0), dpa.GaussianDpEvent(3.0)])
def test_an_unsampled_event_under_replace_one_reads_its_multiplier_against_the_replace_distance(event):
    """A shift of one noise multiplier under either relation (the module's convention): equal to add/remove, and
    never above dp-accounting's RDP accountant under REPLACE_ONE, which reads it the same way."""
    replace = ev.compose([event], delta=1e-5, relation=REPLACE)
    assert replace.epsilon == pytest.approx(ev.compose([event], delta=1e-5, relation=ADD_REMOVE).epsilon)
    accountant = dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    accountant.compose(event)
    assert replace.accountant == ev.PLD and replace.epsilon <= accountant.get_epsilon(1e-5) + 1e-3
    if isinstance(event, dpa.LaplaceDpEvent):  # Laplace of multiplier 2 is exactly 1/2-DP
        assert replace.epsilon == pytest.approx(0.5, abs=1e-3)


def test_a_sampled_event_under_replace_one_is_refused_by_name():
    with pytest.raises(ValueError) as info:
        ev.compose([dpa.PoissonSampledDpEvent(0.1, dpa.GaussianDpEvent(1.0))], delta=1e-5, relation=REPLACE)
    assert "PoissonSampledDpEvent" in str(info.value)


@pytest.mark.parametrize("event", [dpa.GaussianDpEvent(0.0), ev.PureDpEvent(math.inf)])
def test_a_non_private_event_composes_to_infinity(event):
    composed = ev.compose([event, dpa.GaussianDpEvent(1.0)], delta=1e-5, relation=ADD_REMOVE)
    assert composed.epsilon == math.inf and composed.accountant == ev.NOT_PRIVATE


def exact_pure_and_gaussian_delta(eps: float, k: int, sigma: float, e: float) -> float:
    """delta(e) of k eps-DP randomized responses and one Gaussian of noise multiplier sigma, exactly: the Gaussian's
    privacy loss is N(m, 2m) with m = 1 / (2 sigma^2), so given the responses' loss L, the hockey stick at e is the
    Gaussian's delta at e - L (the closed form of Balle & Wang 2018), averaged over L (as in
    exact_pure_composition_epsilon)."""
    from scipy.stats import norm
    p = math.exp(eps) / (1 + math.exp(eps))

    def gauss_delta(x):
        return norm.cdf(-x * sigma + 1 / (2 * sigma)) - math.exp(x) * norm.cdf(-x * sigma - 1 / (2 * sigma))

    return sum(binom.pmf(i, k, p) * gauss_delta(e - (2 * i - k) * eps) for i in range(k + 1))


@pytest.mark.parametrize("eps, k, sigma", [(0.3, 5, 2.0), (0.05, 40, 1.0)])
def test_pure_and_gaussian_events_compose_to_the_exact_mixed_composition(eps, k, sigma):
    ours = ev.compose([dpa.SelfComposedDpEvent(ev.PureDpEvent(eps), k), dpa.GaussianDpEvent(sigma)], delta=1e-5,
                      relation=ADD_REMOVE)
    exact = brentq(lambda e: exact_pure_and_gaussian_delta(eps, k, sigma, e) - 1e-5, 0.0, 50.0)
    assert exact - 1e-9 <= ours.epsilon <= exact + (k + 1) * 3e-4


@pytest.mark.parametrize("kwargs, words", [(dict(delta=0.0, relation=ADD_REMOVE), "delta must be in (0, 1)"),
                                           (dict(delta=1e-5, relation="swap"), "unknown neighbouring relation")])
def test_compose_refuses_bad_delta_and_relation(kwargs, words):
    with pytest.raises(ValueError) as info:
        ev.compose([dpa.GaussianDpEvent(1.0)], **kwargs)
    assert words in str(info.value)


def test_a_claim_keeps_its_events_through_its_stored_form():
    event = ev.to_json(dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 4))
    claim = PrivacyClaim("x", 1.0, 1e-5, "acc", "add or remove one", events=(event,), relation=ADD_REMOVE)
    back = PrivacyClaim.from_dict(claim.to_dict())
    assert back == claim
    assert ev.epsilon_of_json(back.events, delta=1e-5, relation=back.relation).epsilon == pytest.approx(
        ev.compose([dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 4)], delta=1e-5, relation=ADD_REMOVE).epsilon)


def test_events_far_beyond_any_meaningful_epsilon_are_composed_by_rdp_not_a_pld_that_would_fill_memory():
    """The memory guard: the sigma 0.05 diagnostic of docs/results (RDP eps ~ 1e5) would need a PLD of many GB."""
    diagnostic = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(256 / 60_000, dpa.GaussianDpEvent(0.05)), 2_000)
    assert ev.pld_of_events([diagnostic], ADD_REMOVE) is None
    ours = ev.compose([diagnostic, dpa.GaussianDpEvent(5.0)], delta=1e-5, relation=ADD_REMOVE)
    accountant = dpa.rdp.RdpAccountant()
    accountant.compose(diagnostic)
    accountant.compose(dpa.GaussianDpEvent(5.0))
    assert ours.accountant == ev.RDP and ours.epsilon == pytest.approx(accountant.get_epsilon(1e-5))
    assert ours.epsilon > ev.PLD_EPSILON_LIMIT


def test_the_memory_guard_lets_pld_compose_what_rdp_does_not_cover():
    """Review R4: a large pure epsilon beside a Poisson-sampled Laplace (PLD covers it, RDP does not) must not be
    sent to RDP, which would refuse it."""
    events = [ev.PureDpEvent(150.0), dpa.PoissonSampledDpEvent(0.5, dpa.LaplaceDpEvent(1.0))]
    composed = ev.compose(events, delta=1e-5, relation=ADD_REMOVE)
    assert composed.accountant == ev.PLD and 150.0 <= composed.epsilon <= 152.0


def test_a_kept_pld_is_a_fresh_construction_built_once_per_event_and_grid():
    """pld_of keeps each hashable event's PLD: asked again (an equal event, not the same object), it builds nothing
    and gives the PLD a fresh construction gives; another loss grid is another PLD; a composition (unhashable) is
    composed from its parts' kept PLDs."""
    step = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.0123, dpa.GaussianDpEvent(1.234)), 30)
    ev._kept_pld.cache_clear()
    real, built = ev.pld_lib.from_gaussian_mechanism, []

    def counted(*args, **kwargs):
        built.append(kwargs["value_discretization_interval"])
        return real(*args, **kwargs)

    with mock.patch.object(ev.pld_lib, "from_gaussian_mechanism", counted):
        first = ev.pld_of(step, ev.RELATIONS[ADD_REMOVE])
        replace_one = ev.pld_of(step, ev.RELATIONS[REPLACE])  # not accounted by PLD under replace-one
        again = ev.pld_of(dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.0123, dpa.GaussianDpEvent(1.234)), 30),
                          ev.RELATIONS[ADD_REMOVE])
        composed = ev.pld_of(dpa.ComposedDpEvent([step, dpa.GaussianDpEvent(5.0)]), ev.RELATIONS[ADD_REMOVE])
        with mock.patch.object(ev, "VALUE_DISCRETIZATION", 1e-3):
            coarse = ev.pld_of(step, ev.RELATIONS[ADD_REMOVE])
    assert again is first and replace_one is None
    assert built == [1e-4, 1e-4, 1e-3]  # the step once, the Gaussian once, the step on 1e-3
    fresh = real(standard_deviation=1.234, value_discretization_interval=1e-4, sampling_prob=0.0123).self_compose(30)
    walked = ev.pld_lib.identity(value_discretization_interval=1e-4).compose(fresh).compose(
        real(standard_deviation=5.0, value_discretization_interval=1e-4))
    for delta in (1e-3, 1e-5, 1e-7):
        assert first.get_epsilon_for_delta(delta) == fresh.get_epsilon_for_delta(delta)
        assert composed.get_epsilon_for_delta(delta) == walked.get_epsilon_for_delta(delta)
    assert coarse is not first and coarse.get_epsilon_for_delta(1e-5) != first.get_epsilon_for_delta(1e-5)


@pytest.mark.parametrize("count", [2.5, 0, -1, "inf", "nan", True, "3"])
def test_a_self_composition_count_that_is_not_a_whole_number_is_refused_by_name(count):
    with pytest.raises(ValueError, match="count must be"):
        ev.from_json({"type": "SelfComposedDpEvent", "count": count,
                      "event": {"type": "GaussianDpEvent", "noise_multiplier": 1.0}})


def test_a_whole_float_count_reads_as_the_int_count():
    event = ev.from_json({"type": "SelfComposedDpEvent", "count": 30.0,
                          "event": {"type": "GaussianDpEvent", "noise_multiplier": 1.0}})
    assert event.count == 30 and isinstance(event.count, int)
