r"""Local and smooth sensitivity of the data-dependent RDP of GNMax and Confident-GNMax (Papernot et al. 2018, App. B).

The data-dependent RDP (:mod:`.gnmax`) depends on the votes, so releasing it (or the
eps built from it) needs its own noise, scaled to a smooth bound on its local
sensitivity. Notation: one query's histogram n (m classes, N = sum n teachers); moving
one teacher's vote from one class to another gives a neighbour (distance 1); the
distance between histograms is the number of teachers that must change their vote,
``||n - n'||_1 / 2``. ``beta(q)`` is the data-dependent RDP of GNMax at order ``lam``
as a function of the bound ``q~`` (``gnmax_rdp`` of ``gnmax_log_q``).

For one query, :func:`gnmax_local_sensitivity_bounds` and
:func:`threshold_local_sensitivity_bounds` return ``A[d]``, ``d = 0..N-1``: a bound on
the local sensitivity of that RDP at distance ``d`` (the largest change one teacher can
cause, over every histogram that ``<= d`` teachers can reach). Bounds of a sum of
queries add up: one teacher votes in every query, so a data set within distance ``d``
of x in "teachers changed" is within distance ``d`` in every query, and the local
sensitivity of the sum at distance ``d`` is at most the sum of the per-query bounds at
distance ``d`` (:func:`gnmax_summed_local_sensitivity_bounds`,
:func:`confident_gnmax_summed_local_sensitivity_bounds`). :func:`smooth_sensitivity`
gives ``SS = max_d e^{-beta d} A[d]``, which :mod:`.gnss` turns into a release.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import log_ndtr, ndtri_exp

from privengine.errors import ConfigError

from .common import SS_CHUNK_ELEMS, nonnegative_arg, order_arg, positive_arg, real_arg, votes_arg, answered_weights
from .gnmax import gnmax_log_q, gnmax_rdp

_SQRT2 = math.sqrt(2.0)


# --------------------------------------------------------------------------- one query


def _vote_histogram(votes) -> np.ndarray:
    """One query's votes as a float copy: 1-D, >= 2 classes, whole counts >= 0, >= 1 vote."""
    try:
        h = np.array(votes, dtype=float, copy=True)
    except (TypeError, ValueError):
        raise ConfigError("votes", "must be a 1-D (n_classes,) array of vote counts; "
                                   f"got {type(votes).__name__}") from None
    if h.ndim != 1:
        raise ConfigError("votes", f"must be a 1-D (n_classes,) histogram of one query's votes; got shape {h.shape}")
    votes_arg(h[None, :])  # >= 2 classes, finite, >= 0
    if not np.all(h == np.round(h)):
        raise ConfigError("votes", "must hold whole vote counts (integers >= 0): distances count teachers")
    if h.sum() < 1:
        raise ConfigError("votes", "must hold at least one vote (num_teachers = sum(votes) >= 1)")
    return h


def _rdp_of_log_q(log_q, sigma: float, order: float) -> np.ndarray:
    """beta(q): GNMax data-dependent RDP at one order for an array of ``log q`` (Thm 6)."""
    return gnmax_rdp(np.atleast_1d(np.asarray(log_q, dtype=float)), sigma, np.array([order]))[:, 0]


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
    chunk = max(1, SS_CHUNK_ELEMS // m)
    lq_max = np.full(n, np.inf)
    d_end = min(n, int(math.ceil((c[0] - c[1]) / 2.0)))
    for s in range(0, d_end, chunk):
        d = np.arange(s, min(d_end, s + chunk), dtype=float)
        hist = np.repeat(c[None, :], d.size, axis=0)
        hist[:, 0] -= d
        hist[:, 1] += d
        lq_max[s:s + d.size] = gnmax_log_q(hist, sigma)
    # Taking from the largest other class removes their votes in decreasing "height"
    # order (a class with k votes holds heights 1..k); ties in any order.
    others = c[1:].astype(np.int64)
    total = int(others.sum())  # N - c_0 moves reach unanimity
    cls = np.repeat(np.arange(m - 1), others)
    height = np.repeat(others, others) - (np.arange(total) - np.repeat(np.cumsum(others) - others, others))
    taken_from = cls[np.lexsort((cls, -height))]
    lq_min = np.empty(n)
    lq_min[0] = gnmax_log_q(c[None, :], sigma)[0]
    removed = np.zeros(m - 1)
    for s in range(0, total, chunk):
        e = min(total, s + chunk)
        onehot = np.zeros((e - s, m - 1))
        onehot[np.arange(e - s), taken_from[s:e]] = 1.0
        cum = removed + np.cumsum(onehot, axis=0)
        removed = cum[-1]
        hist = np.column_stack((c[0] + np.arange(s + 1, e + 1, dtype=float), others[None, :] - cum))
        lq_min[s + 1:e + 1] = gnmax_log_q(hist, sigma)
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
        ``beta`` = the RDP at ``order`` of :func:`~.gnmax.gnmax_analysis` (Thm 6, capped at
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
    sigma = positive_arg("sigma", sigma)
    order = order_arg(order)
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
    Its data-dependent RDP (as in :func:`~.gnmax.confident_gnmax_analysis`; Papernot et al.
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
    t = real_arg("threshold", threshold)
    sigma = positive_arg("sigma", sigma)
    order = order_arg(order)
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
        raise ConfigError("local_bounds", "must be a 1-D array of bounds >= 0; "
                                          f"got {type(local_bounds).__name__}") from None
    if a.ndim != 1 or a.size == 0:
        raise ConfigError("local_bounds", "must be a non-empty 1-D array (one bound per distance d); "
                                          f"got shape {a.shape}")
    if not np.all(np.isfinite(a)) or a.min() < 0:
        raise ConfigError("local_bounds", "must hold finite bounds >= 0")
    beta = nonnegative_arg("beta", beta)
    with np.errstate(under="ignore"):
        return float(np.max(a * np.exp(-beta * np.arange(a.size))))


# --------------------------------------------------------------------------- a run: sums over its queries


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

    ``f(x) = sum_i beta(q~(n_i(x)))`` at ``order`` (each term as in :func:`~.gnmax.gnmax_analysis`).
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
    v = votes_arg(votes)
    sigma = positive_arg("sigma", sigma)
    order = order_arg(order)
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

    The RDP at ``order`` charged with a fixed mask ``answered`` (:func:`~.gnmax.confident_gnmax_analysis`
    with that mask) is ``f(x) = sum_{all i} theta_i(x) + sum_{answered i} beta_i(x)``: the
    threshold check of every submitted query plus the GNMax step of the masked ones. The mask
    does not depend on ``x`` here (a run's sanitized release charges every submitted query, the
    only choice that bounds the privacy loss; see :func:`~.gnmax.confident_gnmax_analysis`), so::

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
    v = votes_arg(votes)
    w = answered_weights(answered, v.shape[0])
    if not np.all((w == 0) | (w == 1)):
        raise ConfigError("answered", "must hold booleans (the queries whose GNMax step is charged), "
                                      "not answer probabilities")
    t = real_arg("threshold", threshold)
    sigma1 = positive_arg("sigma1", sigma1)
    sigma2 = positive_arg("sigma2", sigma2)
    order = order_arg(order)
    if v.shape[0] == 0:
        return np.zeros(1)
    _teacher_count(v)
    top = v.max(axis=1)
    _, first, counts = np.unique(top, return_index=True, return_counts=True)  # T_i depends on (max, N) only
    total = sum(count * threshold_local_sensitivity_bounds(v[i], t, sigma1, order) for i, count in zip(first, counts))
    return total + gnmax_summed_local_sensitivity_bounds(v[w == 1], sigma2, order) if w.any() else total
