"""The vectorised ε of a PLD (accounting/pld_epsilon.py) against dp-accounting's own loop, on random PLDs and PMFs:
equal within 1e-12 relative both ways (the same formula, the same order of additions: only the last bits of exp and
log may differ). Equality, not "never smaller": an inflated ε would be a safe bound but a wrong figure."""

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.pld import pld_pmf
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from hypothesis import given, settings, strategies as st

from privengine.accounting import events as ev
from privengine.accounting import pld_epsilon

DELTAS = st.sampled_from([0.0, 1e-300, 1e-12, 1e-9, 1e-6, 1e-5, 1e-3, 0.05, 0.5, 1 - 1e-12])
gaussian = st.builds(dpa.GaussianDpEvent, st.floats(0.3, 5.0))
laplace = st.builds(dpa.LaplaceDpEvent, st.floats(0.3, 5.0))
pure = st.builds(ev.PureDpEvent, st.floats(0.05, 3.0))
sampled = st.builds(dpa.PoissonSampledDpEvent, st.floats(0.001, 0.3), gaussian | laplace)
events = st.lists(st.builds(dpa.SelfComposedDpEvent, gaussian | laplace | sampled, st.integers(1, 100))
                  | gaussian | laplace | sampled | pure
                  | st.builds(dpa.SelfComposedDpEvent, pure, st.integers(2, 200)),  # dense, with FFT's -1e-17 masses
                  min_size=1, max_size=3)


def agrees(ours: float, library: float) -> bool:
    """Equal within 1e-12 relative (both infinite counts as equal)."""
    if math.isinf(library):
        return math.isinf(ours)
    return math.isclose(ours, library, rel_tol=1e-12, abs_tol=1e-15)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(events, DELTAS)
def test_the_epsilon_of_a_composed_pld_is_dp_accountings(evs, delta):
    pld = ev.pld_of_events(evs, "add_or_remove_one")
    if pld is None:  # over the memory guard: no PLD to compare
        return
    assert agrees(pld_epsilon.epsilon_for_delta(pld, delta), pld.get_epsilon_for_delta(delta))


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 3000), st.integers(-2000, 2000), st.sampled_from([1e-4, 1e-2, 0.5]),
       st.sampled_from([0.0, 1e-9, 2e-5, 0.2]), st.floats(0.5, 30.0), st.integers(0, 2**31 - 1), DELTAS, st.integers(1, 64))
def test_a_random_dense_pmf_at_every_chunk_size(size, lower, step, infinity, spread, seed, delta, chunk):
    """PMFs of arbitrary shapes (losses up to 1 000, where e^-loss underflows to 0 and the library's second stopping
    rule applies), read in chunks of every size, so the answer falls on and between chunk boundaries."""
    rng = np.random.default_rng(seed)
    probs = rng.exponential(size=size) ** spread
    probs *= (1 - infinity) / probs.sum()
    pmf = pld_pmf.DensePLDPmf(step, lower, probs, infinity, True)
    pld = pld_lib.PrivacyLossDistribution(pmf)
    try:
        library = pmf.get_epsilon_for_delta(delta)
    except OverflowError:  # its loop passed a loss below -709 without stopping: delta(0) <= delta, ε = 0
        library = 0.0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pld_epsilon, "FIRST_CHUNK", chunk)
        assert agrees(pld_epsilon.epsilon_for_delta(pld, delta), library)


def test_an_asymmetric_pld_takes_the_larger_of_its_two_pmfs():
    pld = ev.pld_of_events([dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(1.0)), 100)],
                           "add_or_remove_one")
    assert not pld._symmetric  # a sampled Gaussian's remove and add PMFs differ
    assert pld_epsilon.epsilon_for_delta(pld, 1e-5) == pytest.approx(pld.get_epsilon_for_delta(1e-5), rel=1e-9)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(events, DELTAS)
def test_replace_one_plds_too(evs, delta):
    pld = ev.pld_of_events(evs, "replace_one")
    if pld is None:
        return
    assert agrees(pld_epsilon.epsilon_for_delta(pld, delta), pld.get_epsilon_for_delta(delta))


def test_negative_masses_of_a_convolution_count_as_the_library_counts_them():
    """Self-composed pure events give dense PMFs with about half their masses at -1e-17 (FFT noise, not clipped):
    each is added as it is, as the library's loop adds it (review helper-61: skipping them gave a smaller ε)."""
    pld = ev.pld_of_events([dpa.SelfComposedDpEvent(ev.PureDpEvent(0.7), 40), ev.PureDpEvent(3.0),
                            dpa.SelfComposedDpEvent(ev.PureDpEvent(0.05), 900)], "add_or_remove_one")
    assert (np.asarray(pld._pmf_remove._probs) < 0).any()  # the case: negative masses are there
    for delta in (1e-12, 1e-6, 0.5):
        assert agrees(pld_epsilon.epsilon_for_delta(pld, delta), pld.get_epsilon_for_delta(delta))


@pytest.mark.parametrize("delta", [0.0, 1e-5, 0.2, 0.6])
def test_mass_at_infinity_above_or_below_delta(delta):
    """A PMF with 0.3 of its mass at +inf: ε is infinite for δ < 0.3, finite above it, as the library says."""
    probs = np.random.default_rng(1).exponential(size=500)
    probs *= 0.7 / probs.sum()
    pld = pld_lib.PrivacyLossDistribution(pld_pmf.DensePLDPmf(1e-2, -100, probs, 0.3, True))
    assert agrees(pld_epsilon.epsilon_for_delta(pld, delta), pld.get_epsilon_for_delta(delta))


def test_a_sparse_add_side_beside_a_dense_remove_side():
    """Two PMFs of different kinds: the dense one read over arrays, the sparse one by the library, the larger kept."""
    rng = np.random.default_rng(2)
    probs = rng.exponential(size=2000)
    probs /= probs.sum()
    remove = pld_pmf.DensePLDPmf(1e-3, -500, probs, 0.0, True)
    add = pld_pmf.SparsePLDPmf({-10: 0.5, 3000: 0.5 - 1e-7}, 1e-3, 1e-7, True)
    pld = pld_lib.PrivacyLossDistribution(remove, add)
    for delta in (1e-9, 1e-6, 1e-3, 0.3):
        assert agrees(pld_epsilon.epsilon_for_delta(pld, delta), pld.get_epsilon_for_delta(delta))


def test_losses_past_exp_overflow_give_zero_where_the_library_overflows():
    """Masses at losses down to -6 292 (e^-l overflows a double past -709): the true ε at δ = 0.3 is 0 (δ(0) < 0.3),
    which the library's loop cannot reach (OverflowError); the array form says 0, not nan."""
    probs = np.full(1000, 1e-3)
    probs[::2] = 0.0
    pld = pld_lib.PrivacyLossDistribution(pld_pmf.DensePLDPmf(7.3, -862, probs, 0.0, True))
    with pytest.raises(OverflowError):
        pld.get_epsilon_for_delta(0.3)
    assert pld_epsilon.epsilon_for_delta(pld, 0.3) == 0.0
