r"""Privacy accounting for PATE (Private Aggregation of Teacher Ensembles).

``votes`` is always an ``(n_queries, n_classes)`` array of teacher vote counts
(integers or floats, >= 0), one row per query that is charged; its number of
columns is the true number of classes ``m`` (a class nobody voted for is a zero
column, not a missing one). Every function is vectorised over queries x orders.

LNMax + moments accountant (Papernot et al. 2016)
-------------------------------------------------
Aggregation ``argmax_j (n_j + Lap(1/gamma))`` (``gamma`` = ``noise_eps``); one
query is ``eps0 = 2 gamma`` pure DP. With ``j*`` the plurality class and
``D_j = n_{j*} - n_j``::

    q        = min( sum_{j != j*} (2 + gamma D_j) / (4 exp(gamma D_j)),  1 - 1/m )
    alpha(l) = min( eps0^2 l (l+1) / 2,
                    log((1-q) ((1-q)/(1 - e^{eps0} q))^l + q e^{eps0 l}),   # only if q < 1/(e^{eps0}+1)
                    eps0 l )                                                   l = 1..L
    eps      = min_l ( sum_queries alpha(l) + ln(1/delta) ) / l

The data-independent bound uses the first and last terms only (``q = 1``):
``n * min(eps0^2 l(l+1)/2, eps0 l)``. Since ``eps >= ln(1/delta)/L`` a warning is
attached to the result when the minimum sits at ``l = L``.

GNMax / Confident-GNMax with data-dependent RDP (Papernot et al. 2018)
----------------------------------------------------------------------
GNMax ``argmax_j (n_j + N(0, sigma^2))`` has data-independent RDP ``lam/sigma^2``.
Its data-dependent RDP (Thm 6) is a function of ``q``, an upper bound on the
probability of not answering ``j*``::

    log q = min( logsumexp_{j != j*} log Pr[N(0, 2 sigma^2) > D_j],  log(1 - 1/m) )
    mu2 = sigma sqrt(-log q), mu1 = mu2 + 1, eps1 = mu1/sigma^2, eps2 = mu2/sigma^2
    A = (1-q) / (1 - (e^{eps2} q)^{(mu2-1)/mu2}),   B = e^{eps1} / q^{1/(mu1-1)}
    RDP(lam) = min( lam/sigma^2, log((1-q) A^{lam-1} + q B^{lam-1}) / (lam-1) )

the second term used only where ``mu1 > lam``, ``mu2 > 1``, ``-log q > eps2`` and
``log q <= (mu2-1) eps2 - mu2 (log(1+1/(mu1-1)) + log(1+1/(mu2-1)))``; ``q = 0``
costs 0. Confident-GNMax first checks ``max_j n_j + N(0, sigma1^2) >= T``; that
step is a GNMax-like step with ``sigma -> sqrt(2) sigma1`` and
``q = min(p, 1-p)``, ``p = Pr[answered]``; the total is
``sum_queries RDP_threshold + w RDP_gnmax(sigma2)`` with a weight ``w`` per query.
Only ``w = 1`` for every submitted query is a bound on what the mechanism releases:
an unanswered query still releases "no answer", whose probability depends on the
votes through both steps, and the release (threshold outcome, answer or not) is a
post-processing of the pair (threshold outcome, GNMax answer drawn anyway), whose
RDP at a fixed data set is at most the sum of the two steps'. The realised weights
(``w = 1`` on answered queries only, as Papernot et al. 2018 report) and the expected
ones (``w = p``) give smaller figures that are not bounds: one query with votes
(100, 100), T 100, sigma1 10, sigma2 1 has exact Renyi divergence 1.60 at order 9 to
its neighbour (101, 99), while the threshold step alone charges 0.045.
RDP is converted with ``eps = min_lam RDP(lam) + ln(1/delta)/(lam-1)`` over
:data:`GNMAX_ORDERS`.

Confident-GNMax's data-independent figure over the *answered* queries depends on
which queries were answered, itself an output of the mechanism: it is a privacy
odometer reading, not an a-priori guarantee. The a-priori bound
(:func:`confident_gnmax_a_priori_epsilon`) charges every submitted query as if
it were answered: ``n_submitted (lam/(2 sigma1^2) + lam/sigma2^2)``.

Smooth sensitivity of the data-dependent RDP (Papernot et al. 2018, App. B)
---------------------------------------------------------------------------
The data-dependent RDP depends on the votes, so releasing it (or the eps built
from it) needs its own noise. For one query with ``N`` teachers,
:func:`gnmax_local_sensitivity_bounds` and :func:`threshold_local_sensitivity_bounds`
return ``A[d]``, ``d = 0..N-1``: a bound on the local sensitivity of that RDP at
distance ``d`` (the largest change one teacher can cause, over every histogram
that ``<= d`` teachers can reach). Bounds of a sum of queries add up (one
teacher votes in every query). :func:`smooth_sensitivity` gives
``SS = max_d e^{-beta d} A[d]`` and :func:`gnss_rdp` the RDP of releasing
``value + SS * N(0, sigma^2)`` (GNSS). :func:`gnmax_summed_local_sensitivity_bounds`
and :func:`confident_gnmax_summed_local_sensitivity_bounds` sum the per-query bounds of
a run; :func:`shifted_gnss_sigma` and :func:`sanitize_rdp` publish the run's RDP shifted
up so that it is an upper bound with a stated probability (see
:mod:`privengine.pate.privacy` for how a run uses them).

Public API: the three scalar functions :func:`lnmax_moments_epsilon`,
:func:`gnmax_epsilon`, :func:`confident_gnmax_epsilon` are thin wrappers of
:func:`lnmax_analysis`, :func:`gnmax_analysis`, :func:`confident_gnmax_analysis`,
which return a :class:`PateAnalysis` (eps, order, eps-vs-queries curves, ...).
:func:`lnmax_eps_curve`, :func:`gnmax_eps_curve`, :func:`confident_gnmax_eps_curve`
give eps as a function of the number of queries charged (answered; Confident-GNMax: every submitted one by default), and
:func:`lnmax_smooth_sensitivity` the smooth sensitivity of the LNMax
data-dependent eps. Bad inputs raise :class:`privengine.errors.ConfigError`.

>>> import numpy as np
>>> votes = np.zeros((100, 10)); votes[:, 0] = 250          # 100 unanimous queries
>>> dd, di = lnmax_moments_epsilon(votes, noise_eps=0.1, delta=1e-5)
>>> round(di, 6)                                               # 2 l(l+1)+ln(1e5) over l, at l=2
11.756463
>>> dd < di
True
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.special import log_ndtr, logsumexp, ndtri_exp

from ..errors import ConfigError

__all__ = [
    "GNMAX_ORDERS",
    "PateAnalysis",
    "lnmax_analysis",
    "lnmax_moments_epsilon",
    "lnmax_smooth_sensitivity",
    "lnmax_eps_curve",
    "gnmax_analysis",
    "gnmax_epsilon",
    "gnmax_eps_curve",
    "confident_gnmax_analysis",
    "confident_gnmax_epsilon",
    "confident_gnmax_eps_curve",
    "confident_gnmax_a_priori_epsilon",
    "gnmax_local_sensitivity_bounds",
    "threshold_local_sensitivity_bounds",
    "smooth_sensitivity",
    "gnss_rdp",
    "gnss_rdp_at_orders",
    "gnmax_summed_local_sensitivity_bounds",
    "confident_gnmax_summed_local_sensitivity_bounds",
    "shifted_gnss_sigma",
    "sanitize_rdp",
]

#: RDP orders used for GNMax / Confident-GNMax, as in Papernot et al. (2018).
GNMAX_ORDERS = np.concatenate((np.arange(2, 100.5, 0.5), np.logspace(np.log10(100), np.log10(500), 100)))
GNMAX_ORDERS.setflags(write=False)

_LOG4 = math.log(4.0)
# Elements per temporary (n_queries x k-chunk) array in the smooth-sensitivity scan.
_SS_CHUNK_ELEMS = 1 << 21


# --------------------------------------------------------------------------- result


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float, copy=True)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, eq=False)
class PateAnalysis:
    """The privacy cost of a PATE run, for one mechanism and one ``delta``.

    Arrays are read-only; ``n`` is the number of rows of ``votes`` and ``O`` the
    number of orders (moments ``1..L`` for LNMax, RDP orders for GNMax).

    Attributes:
        mechanism: ``"lnmax"``, ``"gnmax"`` or ``"confident_gnmax"``.
        eps: data-dependent epsilon (what the student's release costs).
        delta: the delta it holds for.
        order: the moment ``l`` (LNMax) or RDP order ``lam`` achieving ``eps``.
        data_independent_eps, data_independent_order: the same without the
            data-dependent ``q`` bound.
        n_queries: rows analysed (queries charged; submitted ones for Confident-GNMax).
        expected_answered: ``n_queries`` for LNMax/GNMax; ``sum_i Pr[query i answered]``
            for Confident-GNMax.
        orders: ``(O,)`` the orders searched.
        cost: ``(O,)`` total log moment ``sum_i alpha_i(l)`` (LNMax) or total RDP
            (GNMax) per order, data-dependent.
        data_independent_cost: ``(O,)`` the same, data-independent.
        answered_curve: ``(n,)`` queries answered after each row (``1..n``, or the
            running expected count for Confident-GNMax): the x-axis of the curves.
        eps_curve: ``(n,)`` data-dependent eps after the first ``i+1`` rows.
        data_independent_curve: ``(n,)`` data-independent eps after ``i+1`` rows.
        log_q: ``(n,)`` per-query log of the bound on Pr[answer != plurality class].
        smooth_sensitivity: LNMax only: smooth sensitivity of ``eps`` at ``order``
            (see :func:`lnmax_smooth_sensitivity`), else ``None``.
        warning: text when the data-dependent minimum sits at the last order searched, else ``None``.
        data_independent_warning: the same for the data-independent bound.
        extras: mechanism-specific per-query arrays (e.g. ``log_p_answered``).
    """

    mechanism: str
    eps: float
    delta: float
    order: float
    data_independent_eps: float
    data_independent_order: float
    n_queries: int
    expected_answered: float
    orders: np.ndarray
    cost: np.ndarray
    data_independent_cost: np.ndarray
    answered_curve: np.ndarray
    eps_curve: np.ndarray
    data_independent_curve: np.ndarray
    log_q: np.ndarray
    smooth_sensitivity: float | None = None
    warning: str | None = None
    data_independent_warning: str | None = None
    extras: Mapping[str, np.ndarray] = field(default_factory=lambda: types.MappingProxyType({}))


# --------------------------------------------------------------------------- validation


def _real(name: str, value, *, allow_nonfinite: bool = False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise ConfigError(name, f"must be a real number; got {value!r}")
    x = float(value)
    if not allow_nonfinite and not math.isfinite(x):
        raise ConfigError(name, f"must be finite; got {value!r}")
    return x


def _positive(name: str, value) -> float:
    x = _real(name, value)
    if not x > 0:
        raise ConfigError(name, f"must be > 0; got {value!r}")
    return x


def _delta(value) -> float:
    x = _real("delta", value)
    if not 0.0 < x < 1.0:
        raise ConfigError("delta", f"must be in (0, 1); got {value!r}")
    return x


def _int(name: str, value, low: int) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ConfigError(name, f"must be an integer >= {low}; got {value!r}")
    try:
        k = operator.index(value)
    except TypeError:
        raise ConfigError(name, f"must be an integer >= {low}; got {value!r}") from None
    if k < low:
        raise ConfigError(name, f"must be an integer >= {low}; got {value!r}")
    return k


def _votes(votes) -> np.ndarray:
    try:
        v = np.array(votes, dtype=float, copy=True)
    except (TypeError, ValueError):
        raise ConfigError("votes", f"must be a 2-D (n_queries, n_classes) array of counts; got {type(votes).__name__}") from None
    if v.ndim != 2:
        raise ConfigError("votes", f"must be a 2-D (n_queries, n_classes) array of counts; got shape {v.shape}")
    if v.shape[1] < 2:
        raise ConfigError("votes", f"must have at least 2 classes (columns); got {v.shape[1]}")
    if not np.all(np.isfinite(v)):
        raise ConfigError("votes", "must be finite counts; got NaN or inf")
    if v.size and v.min() < 0:
        raise ConfigError("votes", f"must be >= 0 (vote counts); got {v.min()!r}")
    return v


def _orders(orders) -> np.ndarray:
    if orders is None:
        return np.asarray(GNMAX_ORDERS)
    try:
        o = np.array(orders, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ConfigError("orders", f"must be a 1-D array of RDP orders > 1; got {orders!r}") from None
    if o.size == 0 or not np.all(np.isfinite(o)) or o.min() <= 1:
        raise ConfigError("orders", "must be a non-empty 1-D array of finite RDP orders > 1")
    return o


def _weights(answered, n: int) -> np.ndarray:
    try:
        w = np.array(answered, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ConfigError("answered", f"must be a boolean array of length {n}; got {answered!r}") from None
    if w.shape != (n,):
        raise ConfigError("answered", f"must have one entry per row of `votes` ({n}); got {w.size}")
    if not np.all((w >= 0) & (w <= 1)):
        raise ConfigError("answered", "must hold booleans (or answer probabilities in [0, 1])")
    return w


# --------------------------------------------------------------------------- shared math


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """``log(1 - exp(x))`` for ``x <= 0``, accurate at both ends (``-inf`` at 0)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def _others_logsumexp(log_terms: np.ndarray, top_idx: np.ndarray) -> np.ndarray:
    """``logsumexp`` over each row's classes except its (single) plurality index."""
    t = log_terms.copy()
    t[np.arange(t.shape[0]), top_idx] = -np.inf
    return logsumexp(t, axis=1)


def _min_over_orders(per_order: np.ndarray, orders: np.ndarray) -> tuple[float, float, int]:
    i = int(np.argmin(per_order))
    return float(per_order[i]), float(orders[i]), i


def _edge_warning(what: str, i: int, n_orders: int, name: str, hint: str) -> str | None:
    if i == n_orders - 1:
        return f"{what} eps is minimised at the last {name} searched; {hint}"
    return None


# --------------------------------------------------------------------------- LNMax


def _lnmax_log_q(v: np.ndarray, gamma: float) -> np.ndarray:
    """``(n,)`` log of the LNMax bound ``min(sum_{j!=j*} (2+g D_j)/(4 e^{g D_j}), 1-1/m)``."""
    n, m = v.shape
    top_idx = np.argmax(v, axis=1)
    d = v[np.arange(n), top_idx][:, None] - v  # D_j >= 0
    log_terms = np.log(2.0 + gamma * d) - _LOG4 - gamma * d
    return np.minimum(_others_logsumexp(log_terms, top_idx), math.log1p(-1.0 / m))


def _lnmax_di_alpha(eps0: float, ls: np.ndarray) -> np.ndarray:
    return np.minimum(0.5 * eps0**2 * ls * (ls + 1.0), eps0 * ls)


def _lnmax_alpha(log_q: np.ndarray, eps0: float, ls: np.ndarray) -> np.ndarray:
    """Per-query log moments ``alpha(l)``: ``log_q`` of shape ``S`` -> ``S + (L,)``."""
    lq = np.asarray(log_q, dtype=float)[..., None]
    di = _lnmax_di_alpha(eps0, ls)
    # Paper's condition for the middle term: q < 1/(e^{eps0}+1). Elsewhere the
    # middle term is not a valid bound (and 1 - e^{eps0} q may be <= 0): use -inf
    # as a harmless placeholder, then select the data-independent value.
    cond = lq < -np.logaddexp(0.0, eps0)
    lq_safe = np.where(cond, lq, -np.inf)
    log1m_q = np.log1p(-np.exp(lq_safe))
    log1m_eq = np.log1p(-np.exp(lq_safe + eps0))
    middle = np.logaddexp((ls + 1.0) * log1m_q - ls * log1m_eq, lq_safe + eps0 * ls)
    # A log moment is >= 0 (Jensen); only rounding can push the bound below it.
    return np.where(cond, np.minimum(di, np.maximum(middle, 0.0)), di)


def _lnmax_smooth_sensitivity(v: np.ndarray, gamma: float, l: float, beta: float, max_k: int | None) -> float:
    """Smooth sensitivity of ``sum_i alpha_i(l)`` (log-moment scale, not divided by l).

    For each query, sorted counts ``c0 >= c1 >= c2 ...``; "k moves" = ``c0-k, c1+k``.
    ``LS_i(k) = |alpha_i(k+1 moves) - alpha_i(k moves)|`` while the gap
    ``c0 - c1 - 2k > 0`` and 0 once top and runner-up are tied (moving further
    widens the gap again). One teacher touches every query, and the local
    sensitivity at distance k is a max over datasets at distance <= k, so
    ``LS(k) = sum_i max_{k'<=k} LS_i(k')`` and ``SS = max_k e^{-beta k} LS(k)``.

    q after k moves in closed form (no (n, k, m) array): with ``top_k`` =
    ``max(c0-k, c1+k)``, ``s = top_k - c0`` and ``D_j = c0 - c_j`` (j >= 2),
    ``sum_{j>=2} f(D_j + s) = e^{-g s} (S1 + g s S0 / 4)`` where
    ``f(D) = (2 + g D) e^{-g D} / 4``, ``S0 = sum e^{-g D_j}``,
    ``S1 = sum (2 + g D_j) e^{-g D_j} / 4``; the pair contributes ``f(|c0-c1-2k|)``.
    """
    n, m = v.shape
    if n == 0:
        return 0.0
    eps0 = 2.0 * gamma
    ls = np.array([l])
    s = -np.sort(-v, axis=1)
    c0, c1 = s[:, 0], s[:, 1]
    gap0 = c0 - c1
    cap = math.log1p(-1.0 / m)
    if m > 2:
        dr = c0[:, None] - s[:, 2:]  # >= 0, increasing along the row
        dmin = dr[:, 0]
        w = np.exp(-gamma * (dr - dmin[:, None]))  # scaled by e^{g dmin}: no underflow
        s0 = w.sum(axis=1)
        s1 = ((2.0 + gamma * dr) * w).sum(axis=1) / 4.0
    k_need = int(math.ceil(float(gap0.max()) / 2.0)) - 1  # LS(k) = 0 for k >= gap0/2
    k_last = k_need if max_k is None else min(k_need, max_k)
    if k_last < 0:
        return 0.0
    # Every LS_i(k) is a difference of two numbers in [0, alpha_DI(l)].
    ls_total_cap = n * float(_lnmax_di_alpha(eps0, ls)[0])
    chunk = max(1, min(k_last + 1, _SS_CHUNK_ELEMS // n))
    running = np.zeros(n)
    best = 0.0
    for k_start in range(0, k_last + 1, chunk):
        if math.exp(-beta * k_start) * ls_total_cap <= best:
            break  # no later k can beat the current maximum
        ks = np.arange(k_start, min(k_last, k_start + chunk - 1) + 2, dtype=float)  # one extra for k+1
        g = gap0[:, None] - 2.0 * ks[None, :]
        ag = np.abs(g)
        log_q = np.log(2.0 + gamma * ag) - _LOG4 - gamma * ag
        if m > 2:
            sh = np.maximum(c0[:, None] - ks, c1[:, None] + ks) - c0[:, None]
            with np.errstate(divide="ignore"):
                log_rest = (-gamma * sh - gamma * dmin[:, None]
                            + np.log(s1[:, None] + gamma * sh * s0[:, None] / 4.0))
            log_q = np.logaddexp(log_q, log_rest)
        alpha = _lnmax_alpha(np.minimum(log_q, cap), eps0, ls)[..., 0]  # (n, len(ks))
        ls_i = np.where(g[:, :-1] > 0, np.abs(alpha[:, 1:] - alpha[:, :-1]), 0.0)
        cm = np.maximum.accumulate(np.concatenate((running[:, None], ls_i), axis=1), axis=1)[:, 1:]
        running = cm[:, -1]
        best = max(best, float(np.max(np.exp(-beta * ks[:-1]) * cm.sum(axis=0))))
    return best


def lnmax_analysis(votes, noise_eps, delta, moments=8, *, beta=0.09, max_k=None,
                   compute_smooth_sensitivity=True) -> PateAnalysis:
    """Moments-accountant analysis of LNMax (Papernot et al. 2016), see module docstring.

    Args:
        votes: ``(n_answered, n_classes)`` vote counts of the answered queries.
        noise_eps: ``gamma`` of the ``Lap(1/gamma)`` noise; ``eps0 = 2 gamma``.
        delta: target delta in (0, 1).
        moments: ``L``, the largest moment order; orders are ``1..L``.
        beta: smoothing parameter of the smooth sensitivity.
        max_k: largest distance k scanned by the smooth sensitivity (default: all
            k at which it can be non-zero).
        compute_smooth_sensitivity: set False to skip it (then ``None``).

    Returns:
        :class:`PateAnalysis` with ``orders = 1..L`` and curves of shape ``(n,)``.

    >>> import numpy as np
    >>> votes = np.tile([200., 30., 20.] + [0.] * 7, (100, 1))
    >>> a = lnmax_analysis(votes, noise_eps=0.05, delta=1e-5)
    >>> round(a.data_independent_eps, 6), a.data_independent_order
    (5.302585, 5.0)
    >>> a.eps < a.data_independent_eps and a.eps_curve.shape == (100,)
    True
    """
    v = _votes(votes)
    gamma = _positive("noise_eps", noise_eps)
    delta = _delta(delta)
    L = _int("moments", moments, 1)
    beta = _positive("beta", beta)
    if max_k is not None:
        max_k = _int("max_k", max_k, 0)
    n = v.shape[0]
    eps0 = 2.0 * gamma
    ls = np.arange(1, L + 1, dtype=float)
    log_inv_delta = -math.log(delta)

    log_q = _lnmax_log_q(v, gamma)
    alpha = _lnmax_alpha(log_q, eps0, ls)  # (n, L)
    di_alpha = _lnmax_di_alpha(eps0, ls)
    di_cum = np.arange(1, n + 1, dtype=float)[:, None] * di_alpha  # (n, L)
    # Both are valid bounds on the total log moment; taking the smaller one per
    # order also makes data-dependent <= data-independent hold exactly in floats.
    cum = np.minimum(np.cumsum(alpha, axis=0), di_cum)
    cost = cum[-1] if n else np.zeros(L)
    di_cost = n * di_alpha
    eps_curve = ((cum + log_inv_delta) / ls).min(axis=1)
    eps, order, i = _min_over_orders((cost + log_inv_delta) / ls, ls)
    di_curve = ((di_cum + log_inv_delta) / ls).min(axis=1)
    di_eps, di_order, di_i = _min_over_orders((di_cost + log_inv_delta) / ls, ls)

    hint = f"eps cannot go below ln(1/delta)/L = {log_inv_delta / L:.4g}; increase `moments`"

    ss = None
    if compute_smooth_sensitivity:
        ss = _lnmax_smooth_sensitivity(v, gamma, order, beta, max_k) / order

    return PateAnalysis(
        mechanism="lnmax", eps=eps, delta=delta, order=order,
        data_independent_eps=di_eps, data_independent_order=di_order,
        n_queries=n, expected_answered=float(n), orders=_frozen(ls),
        cost=_frozen(cost), data_independent_cost=_frozen(di_cost),
        answered_curve=_frozen(np.arange(1, n + 1)), eps_curve=_frozen(eps_curve),
        data_independent_curve=_frozen(di_curve), log_q=_frozen(log_q),
        smooth_sensitivity=ss, warning=_edge_warning("data-dependent", i, L, f"moment l = L = {L}", hint),
        data_independent_warning=_edge_warning("data-independent", di_i, L, f"moment l = L = {L}", hint),
    )


def lnmax_moments_epsilon(votes, noise_eps, delta, moments=8) -> tuple[float, float]:
    """``(data_dependent_eps, data_independent_eps)`` of LNMax on the answered ``votes``.

    ``votes``: ``(n_answered, n_classes)``; ``noise_eps``: gamma of ``Lap(1/gamma)``;
    moments ``l = 1..moments``. See :func:`lnmax_analysis`.

    >>> import numpy as np
    >>> dd, di = lnmax_moments_epsilon(np.full((100, 10), 25.0), noise_eps=0.05, delta=1e-5)
    >>> round(dd, 6), round(di, 6)      # all-tied votes: no data-dependent saving
    (5.302585, 5.302585)
    """
    a = lnmax_analysis(votes, noise_eps, delta, moments, compute_smooth_sensitivity=False)
    return float(a.eps), float(a.data_independent_eps)


def lnmax_smooth_sensitivity(votes, noise_eps, delta, moments=8, beta=0.09, max_k=None) -> float:
    """Smooth sensitivity of the LNMax data-dependent eps, at the order it is achieved.

    With ``l*`` the moment minimising eps on ``votes``, the released quantity is
    ``eps_{l*} = (sum_i alpha_i(l*) + ln(1/delta)) / l*``. Per query (counts sorted
    first), ``LS_i(k) = alpha_i(after k+1 moves) - alpha_i(after k moves)`` where a
    move takes one vote from the top class to the runner-up (0 once they tie).
    One teacher changes a vote in every query, and the local sensitivity at
    distance ``k`` maximises over ``k' <= k``, so
    ``LS(k) = sum_i max_{k'<=k} LS_i(k')`` and
    ``SS = max_k e^{-beta k} LS(k) / l*``. This is <= the sum of per-query
    smooth sensitivities used by the 2016 script.

    >>> import numpy as np
    >>> votes = np.tile([200., 30., 20.] + [0.] * 7, (100, 1))
    >>> 0 < lnmax_smooth_sensitivity(votes, noise_eps=0.05, delta=1e-5) < 1
    True
    """
    a = lnmax_analysis(votes, noise_eps, delta, moments, beta=beta, max_k=max_k)
    return float(a.smooth_sensitivity)


def lnmax_eps_curve(votes, noise_eps, delta, moments=8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """eps vs number of answered queries for LNMax: ``(answered, data_dependent, data_independent)``.

    All three have shape ``(n,)``; entry ``i`` is the eps after the first ``i+1``
    rows of ``votes`` (``answered[i] = i+1``).
    """
    a = lnmax_analysis(votes, noise_eps, delta, moments, compute_smooth_sensitivity=False)
    return a.answered_curve, a.eps_curve, a.data_independent_curve


# --------------------------------------------------------------------------- GNMax


def _gnmax_log_q(v: np.ndarray, sigma: float) -> np.ndarray:
    """``(n,)`` log q: ``logsumexp_{j!=j*} log Pr[N(0, 2 sigma^2) > D_j]`` capped at ``log(1-1/m)``."""
    n, m = v.shape
    top_idx = np.argmax(v, axis=1)
    d = v[np.arange(n), top_idx][:, None] - v
    log_terms = log_ndtr(-d / (math.sqrt(2.0) * sigma))
    return np.minimum(_others_logsumexp(log_terms, top_idx), math.log1p(-1.0 / m))


def _gnmax_rdp(log_q: np.ndarray, sigma: float, orders: np.ndarray) -> np.ndarray:
    """Data-dependent RDP (Papernot et al. 2018, Thm 6): ``(n,)`` x ``(O,)`` -> ``(n, O)``."""
    lq = np.asarray(log_q, dtype=float)[:, None]
    lam = orders[None, :]
    di = lam / sigma**2
    zero = np.isneginf(lq)  # q = 0: the answer is certain, no cost
    lq = np.where(zero, -1.0, lq)  # finite placeholder; overridden below
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mu2 = sigma * np.sqrt(-lq)
        mu1 = mu2 + 1.0
        eps1 = mu1 / sigma**2
        eps2 = mu2 / sigma**2
        ok = ((mu2 > 1.0) & (-lq > eps2)
              & (lq <= (mu2 - 1.0) * eps2 - mu2 * (np.log1p(1.0 / (mu1 - 1.0)) + np.log1p(1.0 / (mu2 - 1.0)))))
        ok = ok & (mu1 > lam)
        log1m_q = _log1mexp(lq)
        log_a = log1m_q - _log1mexp(np.minimum((mu2 - 1.0) / mu2 * (eps2 + lq), 0.0))
        log_b = eps1 - lq / (mu1 - 1.0)
        dd = np.logaddexp(log1m_q + (lam - 1.0) * log_a, lq + (lam - 1.0) * log_b) / (lam - 1.0)
        rdp = np.where(ok, np.minimum(di, dd), di)
    return np.where(zero, 0.0, rdp)


def _rdp_summary(per_query: np.ndarray, per_query_di: np.ndarray, orders: np.ndarray, delta: float):
    """Sum RDP over queries, cumulative curves and ``eps = min_lam RDP + ln(1/delta)/(lam-1)``."""
    n = per_query.shape[0]
    conv = -math.log(delta) / (orders - 1.0)
    cum_di = np.cumsum(per_query_di, axis=0)
    # per_query <= per_query_di elementwise, so the cap only removes rounding
    # differences: data-dependent <= data-independent then holds exactly.
    cum = np.minimum(np.cumsum(per_query, axis=0), cum_di)
    cost = cum[-1] if n else np.zeros(orders.size)
    di_cost = cum_di[-1] if n else np.zeros(orders.size)
    eps, order, i = _min_over_orders(cost + conv, orders)
    di_eps, di_order, di_i = _min_over_orders(di_cost + conv, orders)
    curve = (cum + conv).min(axis=1)
    di_curve = (cum_di + conv).min(axis=1)
    hint = "extend `orders` to larger values"
    return dict(eps=eps, order=order, data_independent_eps=di_eps, data_independent_order=di_order,
                cost=_frozen(cost), data_independent_cost=_frozen(di_cost), eps_curve=_frozen(curve),
                data_independent_curve=_frozen(di_curve),
                warning=_edge_warning("data-dependent", i, orders.size, "RDP order", hint),
                data_independent_warning=_edge_warning("data-independent", di_i, orders.size, "RDP order", hint))


def gnmax_analysis(votes, sigma, delta, *, orders=None) -> PateAnalysis:
    """Data-dependent RDP analysis of GNMax (Papernot et al. 2018), see module docstring.

    Args:
        votes: ``(n_answered, n_classes)`` vote counts of the answered queries.
        sigma: standard deviation of the Gaussian noise added to each count.
        delta: target delta in (0, 1).
        orders: RDP orders (default :data:`GNMAX_ORDERS`).

    >>> import numpy as np
    >>> votes = np.tile([240., 10.] + [0.] * 8, (300, 1))
    >>> a = gnmax_analysis(votes, sigma=40, delta=1e-5)
    >>> a.eps < a.data_independent_eps
    True
    """
    v = _votes(votes)
    sigma = _positive("sigma", sigma)
    delta = _delta(delta)
    o = _orders(orders)
    n = v.shape[0]
    log_q = _gnmax_log_q(v, sigma)
    rdp = _gnmax_rdp(log_q, sigma, o)
    rdp_di = np.broadcast_to(o / sigma**2, rdp.shape)
    s = _rdp_summary(rdp, rdp_di, o, delta)
    return PateAnalysis(mechanism="gnmax", delta=delta, n_queries=n, expected_answered=float(n),
                        orders=_frozen(o), answered_curve=_frozen(np.arange(1, n + 1)),
                        log_q=_frozen(log_q), **s)


def gnmax_epsilon(votes, sigma, delta) -> float:
    """Data-dependent eps of GNMax on the answered ``votes`` (``(n_answered, n_classes)``).

    >>> import numpy as np
    >>> round(gnmax_epsilon(np.full((10, 10), 25.0), sigma=40, delta=1e-5), 4)   # q capped: lam/sigma^2
    0.5427
    """
    return float(gnmax_analysis(votes, sigma, delta).eps)


def gnmax_eps_curve(votes, sigma, delta) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """eps vs number of answered queries for GNMax: ``(answered, data_dependent, data_independent)``, each ``(n,)``."""
    a = gnmax_analysis(votes, sigma, delta)
    return a.answered_curve, a.eps_curve, a.data_independent_curve


# --------------------------------------------------------------------------- Confident-GNMax


def confident_gnmax_analysis(votes, threshold, sigma1, sigma2, delta, *, answered=None,
                             orders=None) -> PateAnalysis:
    """Data-dependent RDP of Confident-GNMax (Papernot et al. 2018).

    ``votes`` holds EVERY submitted query, answered or not (``(n_submitted, n_classes)``).
    Query ``i`` is answered when ``max_j n_ij + N(0, sigma1^2) >= threshold``, with
    probability ``p_i = Phi((max_j n_ij - T) / sigma1)``, and answered ones cost a
    GNMax step with ``sigma2``. Total RDP per order::

        sum_i RDP_thr(lam; q_i = min(p_i, 1-p_i), sigma = sqrt(2) sigma1) + w_i RDP_gnmax(lam; sigma2)

    with ``w_i = 1`` for every submitted query (the default: the only weights that bound
    the privacy loss of what the mechanism releases, see the module docstring) or
    ``w_i = answered[i]`` when a mask or weights are passed: the realised mask gives the
    figure Papernot et al. 2018 report, and ``answered = exp(extras['log_p_answered'])``
    its expected value, neither of them a bound.

    The threshold step releases a noisy max count. Changing one teacher moves the
    max count by at most 1 (L2 sensitivity 1), so its data-independent RDP is
    ``lam * 1^2 / (2 sigma1^2) = lam / (sqrt(2) sigma1)^2``. GNMax's Thm 6 is stated
    for count vectors whose neighbours differ by sqrt(2) in L2 (one vote moves from
    one class to another), i.e. data-independent ``lam / sigma^2``; the two coincide
    with ``sigma = sqrt(2) sigma1``. So Thm 6 applied with ``sqrt(2) sigma1`` is
    capped by exactly ``lam / (2 sigma1^2)``; its "unlikely outcome" probability is
    that of the less likely of answer / no answer, ``min(p, 1-p)``.

    The data-independent figures use the same weights ``w_i`` but no ``q`` bound:
    ``sum_i lam/(2 sigma1^2) + w_i lam/sigma2^2``.

    ``expected_answered = sum_i p_i``; ``answered_curve`` is the running sum of ``w``
    (the queries charged: ``1..n`` by default) and ``extras['log_p_answered']`` holds
    ``log p_i``. ``log_q`` is the GNMax (second step) bound.

    >>> import numpy as np
    >>> votes = np.tile([240., 10.] + [0.] * 8, (100, 1)); votes[50:] = 25.0
    >>> eps, expected = confident_gnmax_epsilon(votes, threshold=200, sigma1=150, sigma2=40, delta=1e-5)
    >>> round(eps, 4), round(expected, 2)
    (1.2806, 36.34)
    """
    v = _votes(votes)
    t = _real("threshold", threshold)
    sigma1 = _positive("sigma1", sigma1)
    sigma2 = _positive("sigma2", sigma2)
    delta = _delta(delta)
    o = _orders(orders)
    n = v.shape[0]
    top = v.max(axis=1)
    log_p = log_ndtr((top - t) / sigma1)
    log_1mp = log_ndtr((t - top) / sigma1)
    log_q_thr = np.minimum(log_p, log_1mp)
    w = np.ones(n) if answered is None else _weights(answered, n)

    rdp_thr = _gnmax_rdp(log_q_thr, math.sqrt(2.0) * sigma1, o)
    log_q = _gnmax_log_q(v, sigma2)
    rdp_gn = _gnmax_rdp(log_q, sigma2, o)
    per_query = rdp_thr + w[:, None] * rdp_gn
    per_query_di = o[None, :] / (2.0 * sigma1**2) + w[:, None] * (o[None, :] / sigma2**2)
    s = _rdp_summary(per_query, per_query_di, o, delta)
    extras = types.MappingProxyType({"log_p_answered": _frozen(log_p), "log_q_threshold": _frozen(log_q_thr),
                                     "answer_weight": _frozen(w)})
    return PateAnalysis(mechanism="confident_gnmax", delta=delta, n_queries=n,
                        expected_answered=float(np.exp(log_p).sum()), orders=_frozen(o),
                        answered_curve=_frozen(np.cumsum(w)), log_q=_frozen(log_q), extras=extras, **s)


def confident_gnmax_epsilon(votes, threshold, sigma1, sigma2, delta) -> tuple[float, float]:
    """``(eps, expected_answered)`` of Confident-GNMax over all submitted ``votes``.

    ``eps`` charges both steps of every submitted query (:func:`confident_gnmax_analysis`'s default: a bound);
    ``expected_answered = sum_i Pr[query i answered]``.
    """
    a = confident_gnmax_analysis(votes, threshold, sigma1, sigma2, delta)
    return float(a.eps), float(a.expected_answered)


def confident_gnmax_eps_curve(votes, threshold, sigma1, sigma2, delta, *, answered=None):
    """eps vs queries for Confident-GNMax: ``(charged, data_dependent, data_independent)``.

    Each ``(n,)``; entry ``i`` after the first ``i+1`` submitted queries; the first array is the running
    number of queries whose GNMax step is charged (``1..n`` by default, every submitted query: a bound; or the
    running sum of ``answered``, see :func:`confident_gnmax_analysis`).
    """
    a = confident_gnmax_analysis(votes, threshold, sigma1, sigma2, delta, answered=answered)
    return a.answered_curve, a.eps_curve, a.data_independent_curve


def confident_gnmax_a_priori_epsilon(n_submitted, sigma1, sigma2, delta, *, orders=None
                                     ) -> tuple[float, float, str | None]:
    """``(eps, order, warning)``: the a-priori (eps, delta) bound of Confident-GNMax on ``n_submitted`` queries.

    Each submitted query runs the threshold check (a Gaussian mechanism on the max count,
    L2 sensitivity 1: RDP ``lam / (2 sigma1^2)``) and, if it passes, GNMax (count vector L2
    sensitivity sqrt(2): RDP ``lam / sigma2^2``); not answering costs nothing more, so by
    adaptive composition every query costs at most the sum, whatever the outcomes::

        eps = min_lam  n_submitted (lam/(2 sigma1^2) + lam/sigma2^2) + ln(1/delta)/(lam-1)

    ``warning`` is set when the minimum sits at the last order searched.

    >>> eps, order, _ = confident_gnmax_a_priori_epsilon(1, 1.0, 1.0, 1e-5, orders=[2.0, 3.0, 5.0, 9.0])
    >>> round(eps, 4), order                       # 1.5 lam + ln(1e5)/(lam-1), best at lam = 3
    (10.2565, 3.0)
    """
    n = _int("n_submitted", n_submitted, 0)
    sigma1 = _positive("sigma1", sigma1)
    sigma2 = _positive("sigma2", sigma2)
    delta = _delta(delta)
    o = _orders(orders)
    total = n * (o / (2.0 * sigma1**2) + o / sigma2**2)
    eps, order, i = _min_over_orders(total - math.log(delta) / (o - 1.0), o)
    return eps, order, _edge_warning("a-priori", i, o.size, "RDP order", "extend `orders` to larger values")


# --------------------------------------------------------------------------- smooth sensitivity
#
# Papernot et al. 2018 ("Scalable Private Learning with PATE", ICLR 2018), App. B.
# Notation: one query's histogram n (m classes, N = sum n teachers); moving one
# teacher's vote from one class to another gives a neighbour (distance 1); the
# distance between histograms is the number of teachers that must change their vote,
# ||n - n'||_1 / 2. beta(q) is the data-dependent RDP of GNMax at order lam as a
# function of the bound q~ (``_gnmax_rdp`` of ``_gnmax_log_q``).

_SQRT2 = math.sqrt(2.0)


def _vote_histogram(votes) -> np.ndarray:
    """One query's votes as a float copy: 1-D, >= 2 classes, whole counts >= 0, >= 1 vote."""
    try:
        h = np.array(votes, dtype=float, copy=True)
    except (TypeError, ValueError):
        raise ConfigError("votes", f"must be a 1-D (n_classes,) array of vote counts; got {type(votes).__name__}") from None
    if h.ndim != 1:
        raise ConfigError("votes", f"must be a 1-D (n_classes,) histogram of one query's votes; got shape {h.shape}")
    _votes(h[None, :])  # >= 2 classes, finite, >= 0
    if not np.all(h == np.round(h)):
        raise ConfigError("votes", "must hold whole vote counts (integers >= 0): distances count teachers")
    if h.sum() < 1:
        raise ConfigError("votes", "must hold at least one vote (num_teachers = sum(votes) >= 1)")
    return h


def _order(value) -> float:
    x = _real("order", value)
    if not x > 1.0:
        raise ConfigError("order", f"must be an RDP order > 1; got {value!r}")
    return x


def _nonnegative(name: str, value) -> float:
    x = _real(name, value)
    if not x >= 0.0:
        raise ConfigError(name, f"must be >= 0; got {value!r}")
    return x


def _rdp_of_log_q(log_q, sigma: float, order: float) -> np.ndarray:
    """beta(q): GNMax data-dependent RDP at one order for an array of ``log q`` (Thm 6)."""
    return _gnmax_rdp(np.atleast_1d(np.asarray(log_q, dtype=float)), sigma, np.array([order]))[:, 0]


@functools.lru_cache(maxsize=1024)
def _gnmax_log_q0(sigma: float, order: float) -> float:
    """``log q0``, q0 = sup{q : beta(q) < lam/sigma^2}: beyond it the data-independent bound rules.

    beta(q) is non-decreasing in q and reaches ``lam/sigma^2`` (the paper's
    condition C5; checked numerically over sigma in [0.2, 300], lam in [1.01, 300]),
    so ``{x = -log q : beta < lam/sigma^2}`` is a half-line, found by bisection.
    Below ``x_lo`` Thm 6 does not apply (``mu2 <= 1`` or ``mu1 <= lam``): beta = lam/sigma^2.
    """
    di = order / sigma**2

    def below(x: float) -> bool:
        return bool(_rdp_of_log_q(-x, sigma, order)[0] < di)

    lo = (0.999 * max(1.0, order - 1.0) / sigma) ** 2
    hi = 2.0 * lo + 1.0
    while not below(hi):  # beta -> 0 as q -> 0, so this ends
        lo, hi = hi, 2.0 * hi
        if not math.isfinite(hi):
            raise ConfigError("sigma", f"is too small for a data-dependent bound at order {order!r}; got {sigma!r}")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi:
            break
        if below(mid):
            hi = mid
        else:
            lo = mid
    return -hi


def _log_bu(log_q, sigma: float, m: int) -> np.ndarray:
    """``log BU(q)``, BU(q) = min(1, (m-1) Phi(Phi^{-1}(q/(m-1)) + sqrt(2)/sigma))."""
    lm = math.log(m - 1.0)
    z = ndtri_exp(np.minimum(np.asarray(log_q, dtype=float) - lm, 0.0))
    return np.minimum(lm + log_ndtr(z + _SQRT2 / sigma), 0.0)


def _log_bl(log_q, sigma: float, m: int) -> np.ndarray:
    """``log BL(q)``, BL(q) = (m-1) Phi(Phi^{-1}(q/(m-1)) - sqrt(2)/sigma); BU(BL(q)) = q."""
    lm = math.log(m - 1.0)
    z = ndtri_exp(np.minimum(np.asarray(log_q, dtype=float) - lm, 0.0))
    return lm + log_ndtr(z - _SQRT2 / sigma)


def _gnmax_u(log_q, sigma: float, order: float, m: int) -> np.ndarray:
    """Prop 13: ``U(q) = max(beta(BU(q)) - beta(q), beta(q) - beta(BL(q)))`` >= LS of any histogram with q~ = q."""
    lq = np.atleast_1d(np.asarray(log_q, dtype=float))
    b = _rdp_of_log_q(lq, sigma, order)
    up = _rdp_of_log_q(_log_bu(lq, sigma, m), sigma, order) - b
    down = b - _rdp_of_log_q(_log_bl(lq, sigma, m), sigma, order)
    return np.maximum(np.maximum(up, down), 0.0)


def _gnmax_delta_sup(lo, hi, sigma: float, order: float, m: int, samples: int) -> np.ndarray:
    """``sup_{log q in [lo, hi]} Delta(q)``, ``Delta(q) = beta(BU(q)) - beta(q)``, on ``samples`` points per segment.

    Used below q1, where Delta is smooth; both ends are sampled, so the value is
    exact whenever Delta is monotone on the segment (C6), and within sampling
    error of the supremum otherwise (segments are one vote step long).
    """
    lo = np.asarray(lo, dtype=float)
    hi = np.asarray(hi, dtype=float)
    if lo.size == 0:
        return np.zeros(0)
    pts = lo[:, None] + (hi - lo)[:, None] * np.linspace(0.0, 1.0, samples)[None, :]
    flat = pts.ravel()
    with np.errstate(invalid="ignore"):
        delta = _rdp_of_log_q(_log_bu(flat, sigma, m), sigma, order) - _rdp_of_log_q(flat, sigma, order)
    return np.maximum(np.nan_to_num(delta, nan=0.0), 0.0).reshape(pts.shape).max(axis=1)


def _gnmax_log_q_extremes(c: np.ndarray, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """``(log q_min(d), log q_max(d))``, ``d = 0..N-1``, over histograms within distance d of ``c``.

    ``c``: counts sorted in decreasing order. Algorithms 4-5 of Papernot et al. 2018,
    exact by convexity of ``D -> Phi(-D / (sqrt(2) sigma))`` for gaps ``D >= 0``:

    * q_min: every move gives a vote to the top class, taken from the currently
      largest other class (water-filling); constant once unanimous (``d >= N - c_0``).
    * q_max: every move takes a vote from the top class to the runner-up; exact while
      ``2d < c_0 - c_1`` (no other class can reach the top). From ``2d >= c_0 - c_1``
      on, ``+inf`` stands for "a (near-)tie of the two top classes is reachable".
    """
    m = c.size
    n = int(round(float(c.sum())))
    chunk = max(1, _SS_CHUNK_ELEMS // m)
    lq_max = np.full(n, np.inf)
    d_end = min(n, int(math.ceil((c[0] - c[1]) / 2.0)))
    for s in range(0, d_end, chunk):
        d = np.arange(s, min(d_end, s + chunk), dtype=float)
        hist = np.repeat(c[None, :], d.size, axis=0)
        hist[:, 0] -= d
        hist[:, 1] += d
        lq_max[s:s + d.size] = _gnmax_log_q(hist, sigma)
    # Taking from the largest other class removes their votes in decreasing "height"
    # order (a class with k votes holds heights 1..k); ties in any order.
    others = c[1:].astype(np.int64)
    total = int(others.sum())  # N - c_0 moves reach unanimity
    cls = np.repeat(np.arange(m - 1), others)
    height = np.repeat(others, others) - (np.arange(total) - np.repeat(np.cumsum(others) - others, others))
    taken_from = cls[np.lexsort((cls, -height))]
    lq_min = np.empty(n)
    lq_min[0] = _gnmax_log_q(c[None, :], sigma)[0]
    removed = np.zeros(m - 1)
    for s in range(0, total, chunk):
        e = min(total, s + chunk)
        onehot = np.zeros((e - s, m - 1))
        onehot[np.arange(e - s), taken_from[s:e]] = 1.0
        cum = removed + np.cumsum(onehot, axis=0)
        removed = cum[-1]
        hist = np.column_stack((c[0] + np.arange(s + 1, e + 1, dtype=float), others[None, :] - cum))
        lq_min[s + 1:e + 1] = _gnmax_log_q(hist, sigma)
    lq_min[total + 1:] = lq_min[total]
    return lq_min, lq_max


def gnmax_local_sensitivity_bounds(votes, sigma, order) -> np.ndarray:
    r"""Local-sensitivity bounds at distance ``d`` of one GNMax answer's data-dependent RDP.

    Papernot et al. 2018, App. B: Proposition 13 / Algorithm 3 (sensitivity as a
    function of q~) and Algorithms 4-5 (extreme q~ at distance ``d``).

    Args:
        votes: ``(m,)`` vote counts of one query (whole numbers >= 0, ``m >= 2``;
            ``N = sum(votes)`` teachers).
        sigma: std of GNMax's Gaussian noise (> 0).
        order: RDP order ``lam > 1``.

    Returns:
        ``A``, shape ``(N,)``: ``A[d] >= max_{n' : dist(n, n') <= d} LS(n')`` where
        ``LS(n') = max_{n'' : dist(n', n'') = 1} |beta(q~(n')) - beta(q~(n''))|``,
        ``beta`` = the RDP at ``order`` of :func:`gnmax_analysis` (Thm 6, capped at
        ``lam/sigma^2``) and ``dist`` = the number of teachers that change their vote
        (each moves one vote from one class to another). ``A`` is non-decreasing in
        ``d`` and ``A[d] <= lam/sigma^2``.

    The math. ``q~(n) = min(sum_{j != j*} Phi(-(n_{j*} - n_j) / (sqrt(2) sigma)), 1 - 1/m)``.
    One changed vote moves every sorted gap by at most 2, i.e. every
    ``Phi^{-1}(q_j)`` by at most ``sqrt(2)/sigma``; by concavity (convexity) of
    ``u -> Phi(Phi^{-1}(u) +- sqrt(2)/sigma)`` a neighbour's q~ lies in
    ``[BL(q~), BU(q~)]``, ``BU/BL(q) = (m-1) Phi(Phi^{-1}(q/(m-1)) +- sqrt(2)/sigma)``
    (BU capped at 1). beta is non-decreasing in q (condition C5), so (Prop 13)::

        LS(n) <= U(q~(n)),   U(q) = max(beta(BU(q)) - beta(q), beta(q) - beta(BL(q)))

    and ``A[d] = sup U`` over the q~ range ``[q_min(d), q_max(d)]`` of the histograms
    within distance ``d`` (Algorithms 4-5, see ``_gnmax_log_q_extremes``). With
    ``q0 = sup{q : beta(q) < lam/sigma^2}``, ``q1 = BL(q0)`` and
    ``Delta(q) = beta(BU(q)) - beta(q)``:

    * above q0, U is non-increasing (C5): the sup over ``[a, b]`` is ``U(a)``;
    * on ``[q1, q0]``, ``U <= P = max(lam/sigma^2 - beta(q1), sup_{[BL(q1), q1]} Delta)``,
      reached at ``q1+``: the plateau (Algorithm 3 replaces q~ in [q1, q0] by q1);
    * below q1, ``U(q) = max(Delta(q), Delta(BL(q)))``, so the sup over ``[a, b]`` is
      ``max(sup_{[a, b]} Delta, sup_{[BL(a), BL(b)]} Delta)``.

    When Delta is non-decreasing below q1 (the paper's condition C6) this is
    exactly the paper's algorithm: ``U(q_max(d))`` below the plateau,
    ``U(q_min(d))`` above it, ``P = U(q1)`` once ``[q_min(d), q_max(d)]`` meets
    ``[q1, q0]``. C6 fails for some settings (e.g. sigma = 20, m = 10, lam = 25,
    or sigma = 10, m = 3, lam = 20): Delta peaks below q1, and the supremum is then
    taken numerically (16 points per one-vote segment) instead of assumed at the
    end point. Differences from tensorflow/privacy's code: it assumes C6 (its
    bounds can then decrease with d), fills the plateau after unanimity even when
    every histogram lies above q0 (here ``U(q_min)``, often 0), and switches beta to
    ``lam/sigma^2`` above ``min(root, -(1+1/sigma)^2, ...)``; this module's beta keeps the
    data-dependent value wherever Thm 6 applies, which differs for small sigma.

    >>> import numpy as np
    >>> a = gnmax_local_sensitivity_bounds(np.array([1000, 500, 300, 200, 0]), sigma=250, order=10)
    >>> a.shape, float(a[0]), bool(np.all(np.diff(a) >= 0))
    ((2000,), 0.0, True)
    """
    h = _vote_histogram(votes)
    sigma = _positive("sigma", sigma)
    order = _order(order)
    m = h.size
    c = np.sort(h)[::-1]
    n = int(round(float(c.sum())))
    di = order / sigma**2
    lq0 = _gnmax_log_q0(sigma, order)
    lq1 = float(_log_bl(lq0, sigma, m))
    lq_min, lq_max = _gnmax_log_q_extremes(c, sigma)
    if lq_min[0] >= lq1:
        lq_max = np.full(n, np.inf)  # the range already meets [q1, q0] or lies above it

    b1 = float(_rdp_of_log_q(lq1, sigma, order)[0])
    # beta jumps to lam/sigma^2 just above q0 = BU(q1): use that value, not beta(BU(q1)) in floats.
    plateau = max(di - b1, float(_gnmax_delta_sup([_log_bl(lq1, sigma, m)], [lq1], sigma, order, m, 64)[0]))
    res = np.where((lq_max >= lq1) & (lq_min <= lq0), plateau, 0.0)  # [q_min, q_max] meets [q1, q0]
    above = lq_min > lq0
    if above.any():
        res[above] = np.maximum(res[above], _gnmax_u(lq_min[above], sigma, order, m))
    low = np.nonzero(lq_min < lq1)[0]
    if low.size:  # a suffix of d (q_min is non-increasing): sup of U over [a(d), b(d)] below q1
        a = lq_min[low]
        b = np.minimum(lq_max[low], lq1)
        sup_low = np.zeros(low.size)
        for lo, hi in ((a, b), (_log_bl(a, sigma, m), _log_bl(b, sigma, m))):  # U = max(Delta, Delta o BL)
            first = _gnmax_delta_sup(lo[:1], hi[:1], sigma, order, m, 64)
            down = _gnmax_delta_sup(lo[1:], lo[:-1], sigma, order, m, 16)  # new piece [a(d), a(d-1)]
            up = _gnmax_delta_sup(hi[:-1], hi[1:], sigma, order, m, 16)  # new piece [b(d-1), b(d)]
            sup_low = np.maximum(sup_low, np.maximum.accumulate(np.concatenate((first, np.maximum(down, up)))))
        res[low] = np.maximum(res[low], sup_low)
    return np.maximum.accumulate(res)


def threshold_local_sensitivity_bounds(votes, threshold, sigma, order) -> np.ndarray:
    r"""Local-sensitivity bounds at distance ``d`` of Confident-GNMax's threshold-step RDP.

    The threshold check releases whether ``max_j n_j + N(0, sigma^2) >= threshold``.
    Its data-dependent RDP (as in :func:`confident_gnmax_analysis`; Papernot et al.
    2018, Thm 6 applied to a sensitivity-1 count with ``sigma -> sqrt(2) sigma``) is a
    function of the top count ``v = max_j n_j`` only::

        p(v) = Phi((v - T) / sigma),   theta(v) = beta_{sqrt(2) sigma}(min(p(v), 1 - p(v)))

    One changed teacher moves ``v`` by at most 1, so ``d`` changed teachers reach top
    counts in ``[v - d, v + d]`` (clipped to ``[0, N]``) and (App. B, threshold case)::

        LS1(u) = max(|theta(u+1) - theta(u)|, |theta(u) - theta(u-1)|)   (existing terms)
        A[d]   = max_{u in [max(v-d, 0), min(v+d, N)]} LS1(u)

    Args:
        votes: ``(m,)`` vote counts of one query (whole numbers >= 0); ``N = sum(votes)``.
        threshold: the threshold ``T`` (any real).
        sigma: std ``sigma1`` of the noise added to the max count (> 0).
        order: RDP order ``lam > 1``.

    Returns:
        ``A``, shape ``(N,)``, non-decreasing in ``d``. (The pigeonhole bound
        ``v >= N/m`` is not used, as in the paper; the values stay valid upper bounds.
        tensorflow/privacy returns ``max(LS1(v-d), LS1(v+d))``, the sphere rather than
        the ball, whose running maximum is this ``A`` and whose smooth sensitivity is
        the same.)

    >>> import numpy as np
    >>> a = threshold_local_sensitivity_bounds(np.array([20, 10, 0]), threshold=2, sigma=2, order=10)
    >>> a.shape, round(float(a[0]), 6), round(float(a[-1]), 6)
    ((30,), 0.160212, 0.207021)
    """
    h = _vote_histogram(votes)
    t = _real("threshold", threshold)
    sigma = _positive("sigma", sigma)
    order = _order(order)
    n = int(round(float(h.sum())))
    v = int(round(float(h.max())))
    counts = np.arange(n + 1, dtype=float)
    log_q = np.minimum(log_ndtr((counts - t) / sigma), log_ndtr((t - counts) / sigma))
    theta = _rdp_of_log_q(log_q, _SQRT2 * sigma, order)
    step = np.abs(np.diff(theta))  # step[u] = |theta(u+1) - theta(u)|
    ls1 = np.zeros(n + 1)
    ls1[:-1] = step
    ls1[1:] = np.maximum(ls1[1:], step)
    down = np.maximum.accumulate(ls1[v::-1])  # [k]: max over [v-k, v]
    up = np.maximum.accumulate(ls1[v:])  # [k]: max over [v, v+k]
    d = np.arange(n)
    return np.maximum(down[np.minimum(d, v)], up[np.minimum(d, n - v)])


def smooth_sensitivity(local_bounds, beta) -> float:
    r"""``SS_beta = max_d e^{-beta d} A[d]``, the beta-smooth sensitivity from distance-``d`` bounds.

    ``local_bounds`` (``(D,)``, finite, >= 0) holds ``A[d]`` for ``d = 0..D-1``, e.g.
    from :func:`gnmax_local_sensitivity_bounds` (summed over queries for a sum of
    RDPs). When ``A[d](x) <= A[d+1](y)`` for neighbours x, y (true for these bounds,
    which maximise over balls), ``SS_beta`` is a beta-smooth upper bound on the local
    sensitivity: ``SS(x) >= LS(x)`` and ``SS(x) <= e^beta SS(y)`` (Nissim et al. 2007;
    Papernot et al. 2018, App. B). ``beta >= 0`` (0 gives ``max_d A[d]``).

    >>> smooth_sensitivity([0.0, 1.0, 1.0], beta=0.5) == float(np.exp(-0.5))
    True
    """
    try:
        a = np.array(local_bounds, dtype=float)
    except (TypeError, ValueError):
        raise ConfigError("local_bounds", f"must be a 1-D array of bounds >= 0; got {type(local_bounds).__name__}") from None
    if a.ndim != 1 or a.size == 0:
        raise ConfigError("local_bounds", f"must be a non-empty 1-D array (one bound per distance d); got shape {a.shape}")
    if not np.all(np.isfinite(a)) or a.min() < 0:
        raise ConfigError("local_bounds", "must hold finite bounds >= 0")
    beta = _nonnegative("beta", beta)
    with np.errstate(under="ignore"):
        return float(np.max(a * np.exp(-beta * np.arange(a.size))))


def gnss_rdp(beta, sigma, order) -> float:
    r"""RDP at ``order`` of GNSS: release ``f(x) + SS_beta(x) * N(0, sigma^2)``.

    ``SS_beta`` is a beta-smooth upper bound on the local sensitivity of ``f``
    (:func:`smooth_sensitivity`). Papernot et al. 2018, App. B, Theorem 23::

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
    beta = _nonnegative("beta", beta)
    sigma = _positive("sigma", sigma)
    lam = _order(order)
    if beta > 0 and not lam * 2.0 * beta < 1.0:
        raise ConfigError("order", f"must be < 1/(2 beta) = {1.0 / (2.0 * beta):.6g} for GNSS (Theorem 23); "
                                   f"got {order!r} with beta = {beta!r}")
    t23 = lam * math.exp(2.0 * beta) / sigma**2 + (beta * lam - 0.5 * math.log1p(-2.0 * lam * beta)) / (lam - 1.0)
    r = 1.0 + lam * math.expm1(-2.0 * beta)  # > 1 - 2 lam beta > 0
    exact = lam * math.exp(-2.0 * beta) / (2.0 * sigma**2 * r) + (-lam * beta - 0.5 * math.log(r)) / (lam - 1.0)
    return max(t23, exact)


# --------------------------------------------------------------------------- sanitized release (GNSS)
#
# Papernot et al. 2018, Section 4 and App. B-C: the data-dependent RDP of a whole run at a
# fixed order lam, f(x) = sum_i beta_i(x), is published as f(x) + noise scaled to a
# beta-smooth bound on its local sensitivity. One teacher votes in every query, so a
# histogram within distance d of x in "teachers changed" is within distance d in every
# query, and the local sensitivity of the sum at distance d is at most the sum of the
# per-query bounds at distance d.


def _teacher_count(v: np.ndarray) -> int:
    """``N``: the common row sum of ``v`` (every query is voted on by the same ``N`` teachers)."""
    if not np.all(v == np.round(v)):
        raise ConfigError("votes", "must hold whole vote counts (integers >= 0): distances count teachers")
    sums = v.sum(axis=1)
    if sums.min() < 1 or sums.max() != sums.min():
        raise ConfigError("votes", "must have the same number of votes (>= 1, the number of teachers) in every row; "
                                   f"got row sums from {sums.min():g} to {sums.max():g}")
    return int(round(float(sums[0])))


def gnmax_summed_local_sensitivity_bounds(votes, sigma, order) -> np.ndarray:
    r"""Local-sensitivity bounds at distance ``d`` of the data-dependent RDP of many GNMax answers.

    ``f(x) = sum_i beta(q~(n_i(x)))`` at ``order`` (each term as in :func:`gnmax_analysis`).
    Any ``x'`` within ``d`` changed teachers of ``x`` has every histogram ``n_i(x')`` within
    distance ``d`` of ``n_i(x)``, and ``LS_f(x') <= sum_i LS_i(n_i(x'))``, so::

        A_f[d] = sum_i A_i[d],     A_i = gnmax_local_sensitivity_bounds(n_i, sigma, order)

    bounds ``max_{dist(x, x') <= d} LS_f(x')``; each ``A_i`` depends on the sorted counts
    only, so equal sorted histograms are computed once.

    Args:
        votes: ``(n, m)`` vote counts of the answered queries (whole numbers, every row
            summing to the number of teachers ``N``).
        sigma: GNMax noise std; order: RDP order ``> 1``.

    Returns:
        ``(N,)`` non-decreasing bounds (``(1,)`` zeros when ``votes`` has no row).
    """
    v = _votes(votes)
    sigma = _positive("sigma", sigma)
    order = _order(order)
    if v.shape[0] == 0:
        return np.zeros(1)
    n_teachers = _teacher_count(v)
    rows, counts = np.unique(-np.sort(-v, axis=1), axis=0, return_counts=True)
    total = np.zeros(n_teachers)
    for row, count in zip(rows, counts):
        total += count * gnmax_local_sensitivity_bounds(row, sigma, order)
    return total


def confident_gnmax_summed_local_sensitivity_bounds(votes, answered, threshold, sigma1, sigma2, order) -> np.ndarray:
    r"""Local-sensitivity bounds at distance ``d`` of Confident-GNMax's data-dependent RDP.

    The RDP at ``order`` charged with a fixed mask ``answered`` (:func:`confident_gnmax_analysis`
    with that mask) is ``f(x) = sum_{all i} theta_i(x) + sum_{answered i} beta_i(x)``: the
    threshold check of every submitted query plus the GNMax step of the masked ones. The mask
    does not depend on ``x`` here (a run's sanitized release charges every submitted query, the
    only choice that bounds the privacy loss; see :func:`confident_gnmax_analysis`), so::

        A_f[d] = sum_{all i} T_i[d] + sum_{answered i} G_i[d]

    with ``T_i`` = :func:`threshold_local_sensitivity_bounds` (``sigma1``) and ``G_i`` =
    :func:`gnmax_local_sensitivity_bounds` (``sigma2``).

    Args:
        votes: ``(n_submitted, m)`` vote counts of every submitted query (whole numbers,
            equal row sums ``N``).
        answered: ``(n_submitted,)`` booleans: which queries' GNMax step is charged (all of them
            for a bound; not probabilities).
        threshold, sigma1, sigma2: the mechanism's parameters; order: RDP order ``> 1``.

    Returns:
        ``(N,)`` non-decreasing bounds (``(1,)`` zeros when ``votes`` has no row).
    """
    v = _votes(votes)
    w = _weights(answered, v.shape[0])
    if not np.all((w == 0) | (w == 1)):
        raise ConfigError("answered", "must hold booleans (the queries whose GNMax step is charged), "
                                      "not answer probabilities")
    t = _real("threshold", threshold)
    sigma1 = _positive("sigma1", sigma1)
    sigma2 = _positive("sigma2", sigma2)
    order = _order(order)
    if v.shape[0] == 0:
        return np.zeros(1)
    _teacher_count(v)
    top = v.max(axis=1)
    _, first, counts = np.unique(top, return_index=True, return_counts=True)  # T_i depends on (max, N) only
    total = sum(count * threshold_local_sensitivity_bounds(v[i], t, sigma1, order) for i, count in zip(first, counts))
    return total + gnmax_summed_local_sensitivity_bounds(v[w == 1], sigma2, order) if w.any() else total


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
    beta = _nonnegative("beta", beta)
    sigma = _positive("sigma_ss", sigma)
    shift = _nonnegative("shift", shift)
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
    rdp = _nonnegative("rdp", rdp)
    smooth_sens = _nonnegative("smooth_sensitivity", smooth_sens)
    cap = _nonnegative("cap", cap)
    sigma = _positive("sigma_ss", sigma)
    shift = _nonnegative("shift", shift)
    z = _real("standard_normal", standard_normal)
    return float(min(max(rdp + smooth_sens * sigma * (shift + z), 0.0), cap))


def gnss_rdp_at_orders(beta, sigma, orders) -> np.ndarray:
    """:func:`gnss_rdp` at every order of ``orders``; ``inf`` where ``order >= 1/(2 beta)`` (no bound there)."""
    beta = _nonnegative("beta", beta)
    sigma = _positive("sigma", sigma)
    o = _orders(orders)
    return np.array([gnss_rdp(beta, sigma, lam) if 2.0 * beta * lam < 1.0 else np.inf for lam in o])
