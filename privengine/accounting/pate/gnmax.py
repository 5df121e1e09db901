r"""GNMax and Confident-GNMax with data-dependent RDP (Papernot et al. 2018), and their a-priori bounds.

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
:data:`~.common.GNMAX_ORDERS`.

Confident-GNMax's data-independent figure over the *answered* queries depends on
which queries were answered, itself an output of the mechanism: it is a privacy
odometer reading, not an a-priori guarantee. The a-priori bound
(:func:`confident_gnmax_a_priori_epsilon`) charges every submitted query as if
it were answered: ``n_submitted (lam/(2 sigma1^2) + lam/sigma2^2)``.
"""

from __future__ import annotations

import math
import types

import numpy as np
from scipy.special import log_ndtr

from .common import (PateAnalysis, delta_arg, edge_warning, read_only, int_arg, log1mexp, min_over_orders, orders_arg,
                     others_logsumexp, positive_arg, real_arg, votes_arg, answered_weights)


# --------------------------------------------------------------------------- GNMax


def gnmax_log_q(v: np.ndarray, sigma: float) -> np.ndarray:
    """``(n,)`` log q: ``logsumexp_{j!=j*} log Pr[N(0, 2 sigma^2) > D_j]`` capped at ``log(1-1/m)``."""
    n, m = v.shape
    top_idx = np.argmax(v, axis=1)
    d = v[np.arange(n), top_idx][:, None] - v
    log_terms = log_ndtr(-d / (math.sqrt(2.0) * sigma))
    return np.minimum(others_logsumexp(log_terms, top_idx), math.log1p(-1.0 / m))


def gnmax_rdp(log_q: np.ndarray, sigma: float, orders: np.ndarray) -> np.ndarray:
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
        log1m_q = log1mexp(lq)
        log_a = log1m_q - log1mexp(np.minimum((mu2 - 1.0) / mu2 * (eps2 + lq), 0.0))
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
    eps, order, i = min_over_orders(cost + conv, orders)
    di_eps, di_order, di_i = min_over_orders(di_cost + conv, orders)
    curve = (cum + conv).min(axis=1)
    di_curve = (cum_di + conv).min(axis=1)
    hint = "extend `orders` to larger values"
    return dict(eps=eps, order=order, data_independent_eps=di_eps, data_independent_order=di_order,
                cost=read_only(cost), data_independent_cost=read_only(di_cost), eps_curve=read_only(curve),
                data_independent_curve=read_only(di_curve),
                warning=edge_warning("data-dependent", i, orders.size, "RDP order", hint),
                data_independent_warning=edge_warning("data-independent", di_i, orders.size, "RDP order", hint))


def gnmax_analysis(votes, sigma, delta, *, orders=None) -> PateAnalysis:
    """Data-dependent RDP analysis of GNMax (Papernot et al. 2018), see module docstring.

    Args:
        votes: ``(n_answered, n_classes)`` vote counts of the answered queries.
        sigma: standard deviation of the Gaussian noise added to each count.
        delta: target delta in (0, 1).
        orders: RDP orders (default :data:`~.common.GNMAX_ORDERS`).

    >>> import numpy as np
    >>> votes = np.tile([240., 10.] + [0.] * 8, (300, 1))
    >>> a = gnmax_analysis(votes, sigma=40, delta=1e-5)
    >>> a.eps < a.data_independent_eps
    True
    """
    v = votes_arg(votes)
    sigma = positive_arg("sigma", sigma)
    delta = delta_arg(delta)
    o = orders_arg(orders)
    n = v.shape[0]
    log_q = gnmax_log_q(v, sigma)
    rdp = gnmax_rdp(log_q, sigma, o)
    rdp_di = np.broadcast_to(o / sigma**2, rdp.shape)
    s = _rdp_summary(rdp, rdp_di, o, delta)
    return PateAnalysis(mechanism="gnmax", delta=delta, n_queries=n, expected_answered=float(n),
                        orders=read_only(o), answered_curve=read_only(np.arange(1, n + 1)),
                        log_q=read_only(log_q), **s)


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
    v = votes_arg(votes)
    t = real_arg("threshold", threshold)
    sigma1 = positive_arg("sigma1", sigma1)
    sigma2 = positive_arg("sigma2", sigma2)
    delta = delta_arg(delta)
    o = orders_arg(orders)
    n = v.shape[0]
    top = v.max(axis=1)
    log_p = log_ndtr((top - t) / sigma1)
    log_1mp = log_ndtr((t - top) / sigma1)
    log_q_thr = np.minimum(log_p, log_1mp)
    w = np.ones(n) if answered is None else answered_weights(answered, n)

    rdp_thr = gnmax_rdp(log_q_thr, math.sqrt(2.0) * sigma1, o)
    log_q = gnmax_log_q(v, sigma2)
    rdp_gn = gnmax_rdp(log_q, sigma2, o)
    per_query = rdp_thr + w[:, None] * rdp_gn
    per_query_di = o[None, :] / (2.0 * sigma1**2) + w[:, None] * (o[None, :] / sigma2**2)
    s = _rdp_summary(per_query, per_query_di, o, delta)
    extras = types.MappingProxyType({"log_p_answered": read_only(log_p), "log_q_threshold": read_only(log_q_thr),
                                     "answer_weight": read_only(w)})
    return PateAnalysis(mechanism="confident_gnmax", delta=delta, n_queries=n,
                        expected_answered=float(np.exp(log_p).sum()), orders=read_only(o),
                        answered_curve=read_only(np.cumsum(w)), log_q=read_only(log_q), extras=extras, **s)


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
    n = int_arg("n_submitted", n_submitted, 0)
    sigma1 = positive_arg("sigma1", sigma1)
    sigma2 = positive_arg("sigma2", sigma2)
    delta = delta_arg(delta)
    o = orders_arg(orders)
    total = n * (o / (2.0 * sigma1**2) + o / sigma2**2)
    eps, order, i = min_over_orders(total - math.log(delta) / (o - 1.0), o)
    return eps, order, edge_warning("a-priori", i, o.size, "RDP order", "extend `orders` to larger values")
