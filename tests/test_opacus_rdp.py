"""Opacus' RDP analysis with each (sigma, q)'s one-step RDP kept per process: Opacus' values to the bit.

The references are Opacus' own ``RDPAccountant.get_privacy_spent`` and ``compute_safe_domain_size`` on random
histories (a seeded draw: 1-3 entries, sigma log-uniform in [0.3, 30], q log-uniform in [1e-4, 1] or exactly 1,
steps log-uniform in [1, 20 000]), computed afresh, without the cache; and histories chosen so that a wrong cache
key shows: entries sharing sigma but not q, and q but not sigma.
"""

from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest
from opacus.accountants import RDPAccountant
from opacus.accountants.analysis.prv import PoissonSubsampledGaussianPRV, compute_safe_domain_size
from opacus.accountants.analysis.rdp import compute_rdp

from privengine.accounting import opacus_rdp
from privengine.accounting.opacus_rdp import history_rdp, one_step_rdp, rdp_epsilon, safe_domain_size
from privengine.accounting.subsampled_gaussian import epsilon_of


def _random_histories(count: int, seed: int, entries: tuple[int, int] = (1, 3)) -> list[list[tuple[float, float, int]]]:
    rng = random.Random(seed)

    def entry():
        sigma = math.exp(rng.uniform(math.log(0.3), math.log(30)))
        q = 1.0 if rng.random() < 0.2 else math.exp(rng.uniform(math.log(1e-4), 0))
        return sigma, q, round(math.exp(rng.uniform(0, math.log(20_000))))

    return [[entry() for _ in range(rng.randint(*entries))] for _ in range(count)]


SHARED_SIGMA_OR_Q = [(1.5, 0.01, 100), (1.5, 1.0, 1), (0.9, 0.01, 10)]
HISTORIES = _random_histories(12, seed=20261128) + [SHARED_SIGMA_OR_Q]


def _opacus_rdp(history, delta):
    acc = RDPAccountant()
    acc.history = list(history)
    return acc.get_privacy_spent(delta=delta)


@pytest.mark.parametrize("history", HISTORIES, ids=lambda h: f"{len(h)}-entries")
def test_rdp_epsilon_and_safe_domain_are_opacus_to_the_bit(history):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus warns when the best order is at the end of its grid
        for delta in (1e-5, 1e-8):
            assert rdp_epsilon(history, delta) == _opacus_rdp(history, delta)
            expected = compute_safe_domain_size(
                prvs=[PoissonSubsampledGaussianPRV(q, sigma) for sigma, q, _ in history],
                max_self_compositions=[steps for _, _, steps in history], eps_error=0.01, delta_error=delta / 1000)
            assert safe_domain_size(history, 0.01, delta / 1000) == expected


@pytest.mark.parametrize("history", _random_histories(4, seed=7, entries=(3, 5)), ids=lambda h: f"{len(h)}-entries")
def test_the_history_rdp_is_opacus_sum_in_the_historys_order(history):
    """Opacus' accountant sums compute_rdp of each entry with Python's sum (from 0, in the history's order); these
    histories have entries enough for that order to show in the last bits of the RDP vector."""
    per_entry = [compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=RDPAccountant.DEFAULT_ALPHAS)
                 for sigma, q, steps in history]
    assert not np.array_equal(sum(per_entry), sum(per_entry[::-1]))  # the order matters here
    assert np.array_equal(history_rdp(history), sum(per_entry))


def test_each_sigma_and_q_is_analysed_once_per_process(monkeypatch):
    """A run's live epsilon asks about one (sigma, q) at many step counts; a calibration probe's domain asks twice:
    each distinct (sigma, q) reaches Opacus' compute_rdp once."""
    calls = []
    real = opacus_rdp.compute_rdp

    def counted(**kwargs):
        calls.append((kwargs["noise_multiplier"], kwargs["q"]))
        return real(**kwargs)

    monkeypatch.setattr(opacus_rdp, "compute_rdp", counted)
    one_step_rdp.cache_clear()
    sigma, q = 3.1234, 0.137
    for steps in (10, 20, 290):
        safe_domain_size([(8.0, 1.0, 1), (sigma, q, steps)], 0.01, 1e-8)
        rdp_epsilon([(sigma, q, steps)], 1e-5)
    assert sorted(calls) == [(3.1234, 0.137), (8.0, 1.0)]


def test_the_kept_rdp_cannot_be_changed_by_a_caller():
    rdp = one_step_rdp(2.0, 0.01)
    with pytest.raises(ValueError):
        rdp[0] = 0.0


def test_a_float32_sigma_is_not_served_a_float64_ones_analysis():
    """np.float32(1.1) == float(np.float32(1.1)), but Opacus computes with the float32 in float32."""
    sigma = np.float32(1.1)
    one_step_rdp(float(sigma), 0.05)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert rdp_epsilon([(sigma, 0.05, 100)], 1e-5) == _opacus_rdp([(sigma, 0.05, 100)], 1e-5)


def test_the_rdp_accountants_epsilon_is_the_kept_analysis():
    history = [(8.0, 1.0, 1), (1.1, 256 / 60000, 10_000)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert epsilon_of(history, accountant="rdp", delta=1e-5) == _opacus_rdp(history, 1e-5)
