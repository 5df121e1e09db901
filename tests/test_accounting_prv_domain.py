"""PRV epsilon with the safe domain computed once: Opacus' epsilon to the bit, the same grid check, one computation.

:func:`epsilon_of` with ``accountant="prv"`` runs Opacus' PRV accountant through a subclass that computes Gopi et
al.'s safe domain size L once (by :func:`privengine.accounting.opacus_rdp.safe_domain_size`), for both the memory
check and the discretisation; plain Opacus is the reference.
"""

from __future__ import annotations

import warnings

import numpy as np
import opacus.accountants.prv as opacus_prv
import pytest
from opacus.accountants import PRVAccountant
from opacus.accountants.analysis.prv import PoissonSubsampledGaussianPRV, compute_safe_domain_size

import privengine.accounting.subsampled_gaussian as accounting
from privengine.accounting.opacus_names import PRV_EPS_ERROR
from privengine.accounting.opacus_rdp import safe_domain_size
from privengine.accounting.subsampled_gaussian import (IntractableAccounting, check_prv_tractable, epsilon_of,
                                                       prv_grid_points)

HISTORIES = [
    [(0.5, 1e-3, 10000)],
    [(0.5, 0.01, 100)],
    [(0.5, 1.0, 3)],
    [(0.7, 0.05, 1000)],
    [(1.0, 1.0, 1)],
    [(1.1, 256 / 60000, 10000)],
    [(2.0, 0.1, 500)],
    [(3.4, 8192 / 59400, 290)],   # the Fashion-MNIST preset's
    [(5.0, 1.0, 10)],
    [(8.0, 1e-3, 1)],
    [(20.0, 1.0, 1)],
    [(20.0, 0.5, 10000)],
    [(8.0, 1.0, 1), (2.5, 0.069, 580)],   # a private-normalisation step, then DP-SGD
    [(3.4, 0.138, 100), (3.6, 0.138, 190), (0.8, 1e-3, 2000)],
    [(20.0, 1.0, 1), (0.5, 1e-3, 10000), (1.5, 0.2, 50)],
]


@pytest.fixture(autouse=True)
def _probe_done_before() -> None:
    """The once-per-process probe of Opacus (a one-step PRV epsilon) has run before each test, so a test counts its
    own evaluations only, whichever tests ran before it (the fast lane leaves out those that used to run it)."""
    accounting._check_opacus_calls_the_override()


def _opacus_epsilon(history, delta: float) -> float:
    """Opacus' plain PRV accountant, as epsilon_of called it before (same eps_error, same warning filter)."""
    acc = PRVAccountant()
    acc.history = list(history)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "divide by zero encountered in log", RuntimeWarning)
        return float(acc.get_epsilon(delta=delta, eps_error=PRV_EPS_ERROR))


def _direct_grid_points(history, delta: float) -> float:
    """2 L / mesh from Opacus' compute_safe_domain_size and its mesh, as prv_grid_points computed it before."""
    delta_error = delta / 1000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        half_width = compute_safe_domain_size(
            prvs=[PoissonSubsampledGaussianPRV(q, sigma) for sigma, q, _ in history],
            max_self_compositions=[steps for _, _, steps in history], eps_error=PRV_EPS_ERROR,
            delta_error=delta_error)
    mesh = PRV_EPS_ERROR / np.sqrt(sum(steps for _, _, steps in history) * np.log(12 / delta_error) / 2)
    return float(2 * half_width / mesh)


@pytest.mark.slow
@pytest.mark.parametrize("delta", [1e-5, 1e-7])
@pytest.mark.parametrize("history", HISTORIES)
def test_prv_epsilon_is_opacus_to_the_bit_and_the_grid_is_unchanged(history, delta):
    accounting._epsilon.cache_clear()
    assert epsilon_of(history, accountant="prv", delta=delta)[0] == _opacus_epsilon(history, delta)
    assert prv_grid_points(history, delta) == _direct_grid_points(history, delta)


def test_an_intractable_history_is_refused_as_before_and_before_discretisation(monkeypatch):
    """The refusal is check_prv_tractable's, message included, and Opacus never reaches its discretisation."""
    history = [(0.5, 1.0, 10000)]

    def discretize(*args, **kwargs):
        raise AssertionError("discretised an intractable history")

    monkeypatch.setattr(opacus_prv, "discretize", discretize)
    with pytest.raises(IntractableAccounting) as expected:
        check_prv_tractable(history, 1e-5)
    accounting._epsilon.cache_clear()
    with pytest.raises(IntractableAccounting) as refused:
        epsilon_of(history, accountant="prv", delta=1e-5)
    assert str(refused.value) == str(expected.value)


def test_the_safe_domain_is_computed_once_per_prv_epsilon(monkeypatch):
    """One safe domain per uncached evaluation (the check's and Opacus' own, once each before), by
    opacus_rdp.safe_domain_size, never by Opacus' compute_safe_domain_size; a cached one computes nothing."""
    calls = []

    def counted(*args):
        calls.append(args)
        return safe_domain_size(*args)

    def opacus_own(**kwargs):
        raise AssertionError("Opacus computed the safe domain itself")

    monkeypatch.setattr(accounting, "safe_domain_size", counted)
    monkeypatch.setattr(opacus_prv, "compute_safe_domain_size", opacus_own)
    accounting._epsilon.cache_clear()
    for history in ([(3.4, 8192 / 59400, 10)], [(8.0, 1.0, 1), (3.4, 8192 / 59400, 20)]):
        calls.clear()
        epsilon_of(history, accountant="prv", delta=1e-5)
        assert len(calls) == 1
        epsilon_of(history, accountant="prv", delta=1e-5)
        assert len(calls) == 1


def test_an_opacus_that_no_longer_builds_its_domain_through_the_override_is_refused(monkeypatch):
    """The memory check lives in the override of Opacus' private _get_domain: if Opacus stopped calling it, an
    intractable history would be discretised unchecked, so a one-step probe refuses every PRV epsilon first, before
    any grid is built (here an intractable history, whose grid is never discretised)."""
    monkeypatch.setattr(accounting._CheckedPRVAccountant, "_get_domain", PRVAccountant._get_domain)
    real_discretize, discretised = opacus_prv.discretize, []

    def small_grids_only(prv, domain):
        assert domain.size < 10**6, "an unchecked grid was discretised"
        discretised.append(domain.size)
        return real_discretize(prv, domain)

    monkeypatch.setattr(opacus_prv, "discretize", small_grids_only)
    accounting._check_opacus_calls_the_override.cache_clear()
    accounting._epsilon.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="no longer builds its domain through _get_domain"):
            accounting.epsilon_of([(0.5, 1.0, 10000)], accountant="prv", delta=1e-5)
        assert len(discretised) == 1  # the probe's one-step history only
    finally:
        accounting._check_opacus_calls_the_override.cache_clear()
        accounting._epsilon.cache_clear()
