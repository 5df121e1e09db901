r"""LNMax with the moments accountant (Papernot et al. 2016): data-independent and data-dependent epsilon.

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

The data-dependent eps is a function of the votes; :func:`lnmax_smooth_sensitivity`
gives its smooth sensitivity (at the moment ``l*`` achieving it): per query, the
change of ``alpha(l*)`` when ``k`` teachers move their vote from the top class to
the runner-up, summed over the queries (one teacher votes in every query), smoothed
with ``e^{-beta k}``.

>>> import numpy as np
>>> votes = np.zeros((100, 10)); votes[:, 0] = 250          # 100 unanimous queries
>>> dd, di = lnmax_moments_epsilon(votes, noise_eps=0.1, delta=1e-5)
>>> round(di, 6)                                               # 2 l(l+1)+ln(1e5) over l, at l=2
11.756463
>>> dd < di
True
"""

from __future__ import annotations

import math

import numpy as np

from .common import (SS_CHUNK_ELEMS, PateAnalysis, delta_arg, edge_warning, read_only, int_arg, min_over_orders,
                     others_logsumexp, positive_arg, votes_arg)

_LOG4 = math.log(4.0)


def _lnmax_log_q(v: np.ndarray, gamma: float) -> np.ndarray:
    """``(n,)`` log of the LNMax bound ``min(sum_{j!=j*} (2+g D_j)/(4 e^{g D_j}), 1-1/m)``."""
    n, m = v.shape
    top_idx = np.argmax(v, axis=1)
    d = v[np.arange(n), top_idx][:, None] - v  # D_j >= 0
    log_terms = np.log(2.0 + gamma * d) - _LOG4 - gamma * d
    return np.minimum(others_logsumexp(log_terms, top_idx), math.log1p(-1.0 / m))


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
    chunk = max(1, min(k_last + 1, SS_CHUNK_ELEMS // n))
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
        :class:`~.common.PateAnalysis` with ``orders = 1..L`` and curves of shape ``(n,)``.

    >>> import numpy as np
    >>> votes = np.tile([200., 30., 20.] + [0.] * 7, (100, 1))
    >>> a = lnmax_analysis(votes, noise_eps=0.05, delta=1e-5)
    >>> round(a.data_independent_eps, 6), a.data_independent_order
    (5.302585, 5.0)
    >>> a.eps < a.data_independent_eps and a.eps_curve.shape == (100,)
    True
    """
    v = votes_arg(votes)
    gamma = positive_arg("noise_eps", noise_eps)
    delta = delta_arg(delta)
    L = int_arg("moments", moments, 1)
    beta = positive_arg("beta", beta)
    if max_k is not None:
        max_k = int_arg("max_k", max_k, 0)
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
    eps, order, i = min_over_orders((cost + log_inv_delta) / ls, ls)
    di_curve = ((di_cum + log_inv_delta) / ls).min(axis=1)
    di_eps, di_order, di_i = min_over_orders((di_cost + log_inv_delta) / ls, ls)

    hint = f"eps cannot go below ln(1/delta)/L = {log_inv_delta / L:.4g}; increase `moments`"

    ss = None
    if compute_smooth_sensitivity:
        ss = _lnmax_smooth_sensitivity(v, gamma, order, beta, max_k) / order

    return PateAnalysis(
        mechanism="lnmax", eps=eps, delta=delta, order=order,
        data_independent_eps=di_eps, data_independent_order=di_order,
        n_queries=n, expected_answered=float(n), orders=read_only(ls),
        cost=read_only(cost), data_independent_cost=read_only(di_cost),
        answered_curve=read_only(np.arange(1, n + 1)), eps_curve=read_only(eps_curve),
        data_independent_curve=read_only(di_curve), log_q=read_only(log_q),
        smooth_sensitivity=ss, warning=edge_warning("data-dependent", i, L, f"moment l = L = {L}", hint),
        data_independent_warning=edge_warning("data-independent", di_i, L, f"moment l = L = {L}", hint),
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
