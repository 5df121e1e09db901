"""DP-SGD accounting: REFERENCE.md check values, calibration, composition of several models, claims."""

from __future__ import annotations

import pytest
from opacus.accountants import RDPAccountant

from privengine.dpsgd.accounting import (
    ACCOUNTANT_NAMES,
    calibrate_noise_multiplier,
    dpsgd_claims,
    epsilon_of,
    merge,
)


@pytest.mark.parametrize("sigma,q,epochs,expected", [
    (1.1, 256 / 60000, 60, 2.597),   # REFERENCE.md section 2: Opacus RDP accountant, delta = 1e-5
    (1.0, 512 / 50000, 10, 2.129),
])
def test_reference_check_values_rdp(sigma, q, epochs, expected):
    steps = int(epochs / q)  # Opacus' convention (get_noise_multiplier with epochs)
    eps, order = epsilon_of([(sigma, q, steps)], accountant="rdp", delta=1e-5)
    assert eps == pytest.approx(expected, abs=5e-4)  # the reference gives 3 decimals
    assert order in RDPAccountant.DEFAULT_ALPHAS


def test_prv_is_tighter_than_rdp_and_gdp_is_reported():
    history = [(1.0, 512 / 50000, 976)]
    rdp, _ = epsilon_of(history, accountant="rdp", delta=1e-5)
    prv, order = epsilon_of(history, accountant="prv", delta=1e-5)
    gdp, _ = epsilon_of(history, accountant="gdp", delta=1e-5)
    assert order is None
    assert 0 < prv < rdp and 0 < gdp < rdp


def test_no_step_spends_nothing():
    assert epsilon_of([], accountant="prv", delta=1e-5) == (0.0, None)


def test_calibrated_sigma_reaches_the_target_from_below(accountant="rdp"):  # PRV: see test_dpsgd_run.py
    q, steps, target = 256 / 59000, 460, 3.0
    sigma = calibrate_noise_multiplier(target_epsilon=target, delta=1e-5, sample_rate=q, steps=steps,
                                       accountant=accountant)
    eps, _ = epsilon_of([(sigma, q, steps)], accountant=accountant, delta=1e-5)
    assert target - 0.02 < eps <= target  # Opacus' binary search stops within 0.01 of the target


def test_merge_composes_histories():
    a, b = [(1.0, 0.01, 100)], [(1.0, 0.01, 50), (2.0, 0.01, 10)]
    assert sorted(merge([a, b])) == [(1.0, 0.01, 150), (2.0, 0.01, 10)]
    assert merge([[], []]) == []
    eps_one, _ = epsilon_of(a, accountant="rdp", delta=1e-5)
    eps_two, _ = epsilon_of(merge([a, a]), accountant="rdp", delta=1e-5)
    assert eps_one < eps_two < 2 * eps_one  # composing two runs costs more than one, less than twice


def test_claims_state_accountant_relation_and_caveats():
    history = [(1.0, 0.01, 200)]
    claims = dpsgd_claims(histories=[history, history], accountant="rdp", delta=1e-5, n_private=9000,
                          public_note="PUBLIC NOTE", sampling="poisson")
    assert [c.label for c in claims] == ["each trained model", "all 2 models of this run released together"]
    each, together = claims
    assert each.accountant == ACCOUNTANT_NAMES["rdp"] and "Poisson" in each.neighbouring
    assert "add or remove one" in each.neighbouring
    assert each.epsilon == epsilon_of(history, accountant="rdp", delta=1e-5)[0]
    assert together.epsilon == epsilon_of(merge([history, history]), accountant="rdp", delta=1e-5)[0]
    assert each.order is not None and "PUBLIC NOTE" in each.caveats
    assert not any("Poisson samples" in c for c in each.caveats)
    shuffled = dpsgd_claims(histories=[history], accountant="gdp", delta=1e-2, n_private=500,
                            public_note="PUBLIC NOTE", sampling="shuffle")
    assert len(shuffled) == 1
    text = " ".join(shuffled[0].caveats)
    assert "not Poisson samples" in text and "GDP" in text and "not small against 1/n" in text
