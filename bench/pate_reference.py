"""Plain-Python reference for the PATE privacy accounting.

The straightforward per-query, per-order loop, written from the formulas of
/work/shared/REFERENCE.md section 1 (1a: LNMax + moments accountant and the smooth
sensitivity of its data-dependent eps; 1b: GNMax, Confident-GNMax, data-dependent
RDP and the RDP -> (eps, delta) conversion). The math uses the `math` module only:
no numpy and no import of privengine, so it stays independent of the vectorised
code in privengine.accounting.pate. It is the reference that
tests/test_accounting_pate.py checks that code against, and the baseline that
bench/bench_pate_analysis.py times it against.

`votes` may be a numpy array or a list of rows; each row is turned into a list of
Python floats before any math is done. A zero q (a wrong answer so unlikely that
its probability underflows) gives log q = -inf, which costs nothing.
"""

from __future__ import annotations

import math

__all__ = [
    "ORDERS",
    "confident_gnmax_eps",
    "gaussian_tail",
    "gnmax_eps",
    "gnmax_log_q",
    "gnmax_rdp",
    "lnmax_alpha",
    "lnmax_eps",
    "lnmax_q",
    "lnmax_smooth_sensitivity",
    "rdp_to_eps",
]

# RDP orders of Papernot et al. (2018): arange(2, 100.5, 0.5) U logspace(log10(100), log10(500), 100).
# Built here with Python floats; a few of the logspace points can differ from numpy's by one ulp.
_LO, _HI = 2.0, math.log10(500)
ORDERS = ([2 + 0.5 * i for i in range(197)]
          + [10.0 ** (_LO + i * (_HI - _LO) / 99) for i in range(99)] + [10.0 ** _HI])


def _rows(votes):
    """The vote matrix as a list of rows of Python floats."""
    rows = votes.tolist() if hasattr(votes, "tolist") else votes
    return [[float(x) for x in row] for row in rows]


def _log(x):
    """log x, with log 0 = -inf."""
    return math.log(x) if x > 0 else -math.inf


# --------------------------------------------------------------------------- 1a. LNMax


def lnmax_q(row, gamma):
    """Bound on Pr[noisy argmax != plurality class j*]:
    min( sum_{j != j*} (2 + gamma D_j) / (4 exp(gamma D_j)), 1 - 1/m ), D_j = n_{j*} - n_j."""
    m = len(row)
    js = max(range(m), key=lambda j: row[j])
    q = 0.0
    for j in range(m):
        if j != js:
            d = row[js] - row[j]
            q += (2 + gamma * d) / (4 * math.exp(gamma * d))
    return min(q, 1 - 1 / m)


def lnmax_alpha(q, eps0, l):
    """Log moment of one query at order l:
    min( eps0^2 l (l+1) / 2, eps0 l, log((1-q) ((1-q)/(1 - e^eps0 q))^l + q e^(eps0 l)) ),
    the last term only where q < 1/(e^eps0 + 1)."""
    a = min(0.5 * eps0**2 * l * (l + 1), eps0 * l)
    if q < 1 / (math.exp(eps0) + 1):
        mid = math.log((1 - q) * ((1 - q) / (1 - math.exp(eps0) * q)) ** l + q * math.exp(eps0 * l))
        a = min(a, mid)
    return a


def lnmax_eps(votes, gamma, delta, moments=8):
    """Moments accountant, eps0 = 2 gamma: (data-dependent eps, data-independent eps, l*), where
    eps = min_l (sum_queries alpha(l) + ln(1/delta)) / l and l* is the (first) order achieving it;
    the data-independent bound puts every query at q = 1."""
    eps0 = 2 * gamma
    rows = _rows(votes)
    tot = [0.0] * moments
    for row in rows:
        q = lnmax_q(row, gamma)
        for l in range(1, moments + 1):
            tot[l - 1] += lnmax_alpha(q, eps0, l)
    dd = [(tot[l - 1] + math.log(1 / delta)) / l for l in range(1, moments + 1)]
    n = len(rows)
    di = [(n * min(0.5 * eps0**2 * l * (l + 1), eps0 * l) + math.log(1 / delta)) / l for l in range(1, moments + 1)]
    best = min(range(moments), key=lambda i: dd[i])
    return dd[best], min(di), best + 1


def lnmax_smooth_sensitivity(votes, gamma, l, beta):
    """Brute force SS = max_k e^(-beta k) LS(k) / l of the order-l data-dependent eps: on each row's
    *sorted* counts, move k votes from the top class to the runner-up and recompute q from scratch;
    LS(k) sums over queries the largest |alpha(one more move) - alpha(this many moves)| seen so far."""
    eps0 = 2 * gamma

    def alpha(counts):
        return lnmax_alpha(lnmax_q(counts, gamma), eps0, l)

    rows = _rows(votes)
    kmax = int(max((max(r) for r in rows), default=0.0)) + 2
    per_query = []
    for row in rows:
        c = sorted(row, reverse=True)
        ls_k, run = [], 0.0
        for k in range(kmax):
            if c[0] - c[1] - 2 * k > 0:
                a0 = alpha([c[0] - k, c[1] + k] + c[2:])
                a1 = alpha([c[0] - k - 1, c[1] + k + 1] + c[2:])
                run = max(run, abs(a1 - a0))
            ls_k.append(run)
        per_query.append(ls_k)
    return max(math.exp(-beta * k) * sum(pq[k] for pq in per_query) for k in range(kmax)) / l


# --------------------------------------------------------------------------- 1b. GNMax, Confident-GNMax


def gaussian_tail(d, s):
    """Pr[N(0, s^2) > d]."""
    return 0.5 * math.erfc(d / (s * math.sqrt(2)))


def gnmax_log_q(row, sigma):
    """log of min( sum_{j != j*} Pr[N(0, 2 sigma^2) > n_{j*} - n_j], 1 - 1/m ); -inf where q underflows to 0."""
    m = len(row)
    js = max(range(m), key=lambda j: row[j])
    q = sum(gaussian_tail(row[js] - row[j], math.sqrt(2) * sigma) for j in range(m) if j != js)
    return _log(min(q, 1 - 1 / m))


def gnmax_rdp(logq, sigma, lam):
    """Data-dependent RDP of one GNMax query at order lam (Papernot et al. 2018, Thm 6):
    min( lam/sigma^2, log((1-q) A^(lam-1) + q B^(lam-1)) / (lam-1) ) where its conditions hold,
    else lam/sigma^2; q = 0 costs 0."""
    if logq == -math.inf:
        return 0.0
    di = lam / sigma**2
    mu2 = sigma * math.sqrt(-logq)
    mu1 = mu2 + 1
    eps1, eps2 = mu1 / sigma**2, mu2 / sigma**2
    if (mu1 > lam and mu2 > 1 and -logq > eps2
            and logq <= (mu2 - 1) * eps2 - mu2 * (math.log(1 + 1 / (mu1 - 1)) + math.log(1 + 1 / (mu2 - 1)))):
        q = math.exp(logq)
        a = (1 - q) / (1 - (math.exp(eps2) * q) ** ((mu2 - 1) / mu2))
        log_b = eps1 - logq / (mu1 - 1)  # log B, B = e^eps1 / q^(1/(mu1-1)); q itself may underflow
        # log((1-q) A^(lam-1) + q B^(lam-1)), summed as two logs (B^(lam-1) can overflow a float)
        t1, t2 = math.log1p(-q) + (lam - 1) * math.log(a), logq + (lam - 1) * log_b
        hi, lo = max(t1, t2), min(t1, t2)
        return min(di, (hi + math.log1p(math.exp(lo - hi))) / (lam - 1))
    return di


def rdp_to_eps(total, delta, orders=ORDERS):
    """eps = min_lam ( RDP(lam) + ln(1/delta) / (lam - 1) )."""
    return min(t + math.log(1 / delta) / (lam - 1) for t, lam in zip(total, orders))


def gnmax_eps(votes, sigma, delta, orders=ORDERS):
    """GNMax data-dependent eps: the per-query RDP summed over queries, converted at delta."""
    total = [0.0] * len(orders)
    for row in _rows(votes):
        lq = gnmax_log_q(row, sigma)
        for i, lam in enumerate(orders):
            total[i] += gnmax_rdp(lq, sigma, lam)
    return rdp_to_eps(total, delta, orders)


def confident_gnmax_eps(votes, t, s1, s2, delta, orders=ORDERS, *, expected_cost=False):
    """Confident-GNMax: (eps, expected number answered). Per query, p = Pr[max_j n_j + N(0, s1^2) >= t];
    the threshold step is GNMax-like with sigma sqrt(2) s1 and q = min(p, 1-p); RDP = RDP_threshold +
    w RDP_gnmax(s2) with w = 1 (every submitted query charged its GNMax step too: the bound) or, with
    ``expected_cost``, w = p (the expected cost, not a bound)."""
    total = [0.0] * len(orders)
    expected = 0.0
    for row in _rows(votes):
        top = max(row)
        p = gaussian_tail(t - top, s1)
        lq1 = _log(min(p, gaussian_tail(top - t, s1)))  # 1 - p, computed as its own tail
        expected += p
        w = p if expected_cost else 1.0
        lq2 = gnmax_log_q(row, s2)
        for i, lam in enumerate(orders):
            total[i] += gnmax_rdp(lq1, math.sqrt(2) * s1, lam) + w * gnmax_rdp(lq2, s2, lam)
    return rdp_to_eps(total, delta, orders), expected
