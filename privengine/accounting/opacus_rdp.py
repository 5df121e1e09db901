"""Opacus' RDP analysis of the Poisson-subsampled Gaussian, each (sigma, q)'s one-step RDP computed once per process.

The RDP of ``steps`` compositions of the subsampled Gaussian at order alpha is ``steps * R_alpha(sigma, q)``
(Mironov, Talwar & Zhang 2019), and a history's is the sum over its ``(sigma, q, steps)`` entries. Opacus computes
``R_alpha(sigma, q)`` at each of its default orders afresh for every entry of every history it is asked about: for
its RDP accountant, and twice per entry for the domain of its PRV accountant (Gopi, Lee & Wutschitz 2021, remark
5.6: Opacus' ``compute_safe_domain_size``). A run asks about the same (sigma, q) over and over: its live epsilon at
every evaluation point (histories that differ only in their steps), the PRV grid check, its claims; a sigma
calibration asks twice per probe. The series behind ``R_alpha`` (``_compute_log_a_for_frac_alpha`` at the fractional
orders) was the largest part of the accountant's time.

Written here (Opacus takes no precomputed RDP): :func:`history_rdp` and :func:`rdp_epsilon` are Opacus'
``RDPAccountant.get_privacy_spent`` and :func:`safe_domain_size` is Opacus' ``compute_safe_domain_size``, step for
step (the same sums in the same order, over Opacus' own ``compute_rdp`` at one step and its ``get_privacy_spent``
conversion), so every value is Opacus' to the bit (tests/test_opacus_rdp.py compares them on random histories).
"""

from __future__ import annotations

import functools

import numpy as np
from opacus.accountants import RDPAccountant
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent

History = list[tuple[float, float, int]]  # (noise multiplier, sample rate, steps), Opacus' format

ORDERS = RDPAccountant.DEFAULT_ALPHAS  # Opacus' default RDP orders, what its accountants use


@functools.lru_cache(maxsize=4096, typed=True)
def one_step_rdp(sigma: float, q: float) -> np.ndarray:
    """``(len(ORDERS),)`` R_alpha(sigma, q) of one step at Opacus' orders (``compute_rdp`` at ``steps=1``), read-only;
    inf where the mechanism has no RDP bound (sigma = 0). Kept by value and type: a float32 sigma equal to a float64
    one is another key, as Opacus computes it in float32."""
    rdp = np.asarray(compute_rdp(q=q, noise_multiplier=sigma, steps=1, orders=ORDERS), dtype=float)
    rdp.setflags(write=False)
    return rdp


def history_rdp(history: History) -> np.ndarray:
    """``(len(ORDERS),)`` RDP of a history: sum over entries of steps x R_alpha(sigma, q), as Opacus sums it."""
    return sum([one_step_rdp(sigma, q) * steps for sigma, q, steps in history])


def rdp_epsilon(history: History, delta: float) -> tuple[float, float]:
    """``(epsilon, best order)`` of a non-empty history at ``delta``: Opacus' ``RDPAccountant.get_privacy_spent``."""
    eps, order = get_privacy_spent(orders=ORDERS, rdp=history_rdp(history), delta=delta)
    return float(eps), float(order)


def safe_domain_size(history: History, eps_error: float, delta_error: float) -> float:
    """Half-width L of the PRV accountant's domain [-L, L] for ``history``: Opacus' ``compute_safe_domain_size``.

    L = max(eps(history at delta_error / 4), max over entries of eps(one step of it at delta_error / (8 N)),
    eps_error) + 3, eps the RDP epsilon (:func:`rdp_epsilon`) and N the history's total steps.
    """
    total_steps = sum(steps for _, _, steps in history)
    half_width = rdp_epsilon(history, delta_error / 4)[0]
    for sigma, q, _ in history:
        half_width = max(half_width, rdp_epsilon([(sigma, q, 1)], delta_error / (8 * total_steps))[0])
    return max(half_width, eps_error) + 3
