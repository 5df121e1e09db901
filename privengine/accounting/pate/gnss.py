r"""Publishing a data-dependent RDP through Gaussian noise scaled to its smooth sensitivity (GNSS).

Papernot et al. 2018, Section 4 and App. B-C: the data-dependent RDP of a whole run at a
fixed order lam, ``f(x) = sum_i beta_i(x)``, is published as ``f(x) + SS(x) * N(0, sigma^2)``,
``SS`` a beta-smooth bound on its local sensitivity (:mod:`.sensitivity`). :func:`gnss_rdp`
is the RDP of that release (the larger of Theorem 23 and the exact worst case);
:func:`shifted_gnss_sigma` and :func:`sanitize_rdp` shift the release up so that it is an
upper bound on ``f(x)`` with a stated probability, clipped to ``[0, cap]`` (see
:mod:`privengine.pate.privacy` for how a run uses them); :func:`gnss_rdp_at_orders`
gives the release's cost at every order, to be composed with the run's own.
"""

from __future__ import annotations

import math

import numpy as np

from privengine.errors import ConfigError

from .common import nonnegative_arg, order_arg, orders_arg, positive_arg, real_arg


def gnss_rdp(beta, sigma, order) -> float:
    r"""RDP at ``order`` of GNSS: release ``f(x) + SS_beta(x) * N(0, sigma^2)``.

    ``SS_beta`` is a beta-smooth upper bound on the local sensitivity of ``f``
    (:func:`~.sensitivity.smooth_sensitivity`). Papernot et al. 2018, App. B, Theorem 23::

        T23(lam) = lam e^{2 beta} / sigma^2 + (beta lam - ln(1 - 2 lam beta) / 2) / (lam - 1),
        valid for 1 < lam < 1/(2 beta).

    Derivation (checked here): for neighbours x, y write ``S(y) = e^t S(x)`` with
    ``|t| <= beta`` and ``Delta = |f(x) - f(y)| <= min(S(x), S(y))``. For Gaussians,
    ``D_lam(N(a, s0^2) || N(b, s1^2)) = lam (a-b)^2 / (2 s_lam^2) + ln(s1/s0)
    + ln(s1^2 / s_lam^2) / (2 (lam-1))`` with ``s_lam^2 = lam s1^2 + (1-lam) s0^2 > 0``.
    Both parts grow as ``t`` decreases, so the worst pair has ``t = -beta``,
    ``Delta = e^{-beta} S(x)``, giving the exact worst case::

        D*(lam) = lam e^{-2 beta} / (2 sigma^2 r) + (-lam beta - ln(r) / 2) / (lam - 1),
        r = 1 - lam (1 - e^{-2 beta}) > 0.

    ``T23 >= D*`` for small ``lam beta`` but NOT near ``lam = 1/(2 beta)``: ``D*``
    stays finite there while its first term grows like ``1/(4 sigma^2 beta^2)`` and
    overtakes ``T23`` (e.g. beta = 0.049, sigma = 3, lam = 10: T23 = 1.50, D* = 7.67,
    confirmed by numerical integration). So this returns ``max(T23, D*)``: the
    theorem's value wherever it is a valid bound, the exact worst case elsewhere.

    Args:
        beta: smoothness parameter ``>= 0`` (0: a global sensitivity bound; then the
            value is ``lam / sigma^2``).
        sigma: noise multiplier (> 0).
        order: RDP order with ``1 < order < 1/(2 beta)`` (Theorem 23's range).

    Raises:
        ConfigError (a ValueError): bad ``beta``/``sigma``, ``order <= 1``, or
            ``order >= 1/(2 beta)`` (where Theorem 23 does not apply).

    >>> round(gnss_rdp(0.01, 10.0, 5.0), 6)   # T23 = 5 e^{0.02}/100 + (0.05 - ln(0.9)/2)/4 >= D* = 0.0277
    0.07668
    """
    beta = nonnegative_arg("beta", beta)
    sigma = positive_arg("sigma", sigma)
    lam = order_arg(order)
    if beta > 0 and not lam * 2.0 * beta < 1.0:
        raise ConfigError("order", f"must be < 1/(2 beta) = {1.0 / (2.0 * beta):.6g} for GNSS (Theorem 23); "
                                   f"got {order!r} with beta = {beta!r}")
    t23 = lam * math.exp(2.0 * beta) / sigma**2 + (beta * lam - 0.5 * math.log1p(-2.0 * lam * beta)) / (lam - 1.0)
    r = 1.0 + lam * math.expm1(-2.0 * beta)  # > 1 - 2 lam beta > 0
    exact = lam * math.exp(-2.0 * beta) / (2.0 * sigma**2 * r) + (-lam * beta - 0.5 * math.log(r)) / (lam - 1.0)
    return max(t23, exact)


def shifted_gnss_sigma(beta, sigma, shift) -> float:
    r"""Noise multiplier of GNSS once its released value is shifted up by ``shift`` noise stds.

    Releasing ``R = f(x) + SS(x) (shift sigma + sigma Z)``, ``Z ~ N(0, 1)``, makes ``R >= f(x)``
    with probability ``Phi(shift)``. It is GNSS applied to ``g = f + shift sigma SS`` with
    the smooth bound ``S' = a SS``, ``a = 1 + shift sigma (e^beta - 1)``, and noise multiplier
    ``sigma' = sigma / a`` (``S' sigma' = SS sigma``):

    * ``S'`` is beta-smooth (a constant times SS);
    * ``S'`` bounds g's change between neighbours ``x, y``: with ``SS(y) <= SS(x)``,
      ``|f(x) - f(y)| <= LS_f(y) <= SS(y)`` and ``|SS(x) - SS(y)| <= (e^beta - 1) SS(y)``, so
      ``|g(x) - g(y)| <= a SS(y) = min(S'(x), S'(y))``, the condition :func:`gnss_rdp` needs.

    So the release costs ``gnss_rdp(beta, sigma', order)``; ``shift = 0`` gives ``sigma``.

    >>> round(shifted_gnss_sigma(0.0, 10.0, 2.0), 12), round(shifted_gnss_sigma(0.05, 10.0, 0.0), 12)
    (10.0, 10.0)
    """
    beta = nonnegative_arg("beta", beta)
    sigma = positive_arg("sigma_ss", sigma)
    shift = nonnegative_arg("shift", shift)
    return sigma / (1.0 + shift * sigma * math.expm1(beta))


def sanitize_rdp(rdp, smooth_sens, cap, *, sigma, shift, standard_normal) -> float:
    r"""The published value ``min(max(rdp + SS (shift sigma + sigma Z), 0), cap)``.

    ``Z = standard_normal`` is one N(0, 1) draw (from the run's noise generator). The value
    before clipping is the shifted GNSS release of :func:`shifted_gnss_sigma`; clipping to
    ``[0, cap]`` is post-processing, and keeps ``value >= rdp`` whenever the unclipped
    value is, provided ``0 <= rdp <= cap`` (``cap``: the data-independent RDP at the same
    order, which every data-dependent RDP is below). So ``Pr[value >= rdp] >= Phi(shift)``.

    >>> sanitize_rdp(1.0, 0.1, 5.0, sigma=10.0, shift=2.0, standard_normal=-0.5)   # 1 + 0.1 (20 - 5)
    2.5
    """
    rdp = nonnegative_arg("rdp", rdp)
    smooth_sens = nonnegative_arg("smooth_sensitivity", smooth_sens)
    cap = nonnegative_arg("cap", cap)
    sigma = positive_arg("sigma_ss", sigma)
    shift = nonnegative_arg("shift", shift)
    z = real_arg("standard_normal", standard_normal)
    return float(min(max(rdp + smooth_sens * sigma * (shift + z), 0.0), cap))


def gnss_rdp_at_orders(beta, sigma, orders) -> np.ndarray:
    """:func:`gnss_rdp` at every order of ``orders``; ``inf`` where ``order >= 1/(2 beta)`` (no bound there)."""
    beta = nonnegative_arg("beta", beta)
    sigma = positive_arg("sigma", sigma)
    o = orders_arg(orders)
    return np.array([gnss_rdp(beta, sigma, lam) if 2.0 * beta * lam < 1.0 else np.inf for lam in o])
