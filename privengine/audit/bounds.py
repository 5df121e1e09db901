r"""Epsilon lower bounds from the outcomes of a membership test: the statistics behind every audit.

An audit runs a mechanism and tries to tell two neighbouring inputs apart. A claimed
(eps, delta)-DP guarantee caps how well any test can do; counts that beat the cap at a
stated confidence refute the claim and give a lower bound on the true epsilon. Every
function here is a pure function of counts; :mod:`.procedures` turns scores into counts.

Many runs: a threshold (event) test on two neighbouring inputs
---------------------------------------------------------------
Run ``M`` ``n0`` times on ``D0`` and ``n1`` times on ``D1`` (independent draws); reject
"the input was ``D0``" when the output falls in an event ``S`` fixed before the draws. With
``FPR = P[M(D0) in S]`` and ``FNR = P[M(D1) not in S]``, (eps, delta)-DP applied to ``S``
(from ``D1`` to ``D0``) and to its complement (from ``D0`` to ``D1``) gives::

    1 - FNR = P[M(D1) in S]      <= e^eps P[M(D0) in S]      + delta = e^eps FPR + delta
    1 - FPR = P[M(D0) not in S]  <= e^eps P[M(D1) not in S]  + delta = e^eps FNR + delta

hence (Kairouz, Oh, Viswanath 2015, Thm 2.1; Jagielski, Ullman, Oprea 2020)::

    eps >= max( log((1 - delta - FNR) / FPR),  log((1 - delta - FPR) / FNR),  0 ).

Both terms decrease in ``FPR`` and ``FNR``, so upper confidence bounds ``FPR_hi >= FPR``
and ``FNR_hi >= FNR`` give a lower bound whenever both hold. Each is a one-sided
Clopper-Pearson bound at level ``1 - gamma/2`` (``gamma = 1 - confidence``), so by the
union bound both hold, and the reported bound is below the true epsilon, with probability
at least ``confidence`` (:func:`many_run_epsilon_lower`). The CP upper bound of ``k``
successes in ``n`` trials is the ``1 - g`` quantile of Beta(k + 1, n - k) (1 when k = n).

Gaussian DP (Dong, Roth, Su 2022): ``M`` is mu-GDP iff every test has
``FNR >= G_mu(FPR) = Phi(Phi^{-1}(1 - FPR) - mu)``. ``G_mu`` decreases in ``FPR``, so
``FNR_hi < G_mu(FPR_hi)`` refutes mu-GDP; that holds exactly for
``mu < Phi^{-1}(1 - FPR_hi) - Phi^{-1}(FNR_hi)``, the GDP lower bound of
:func:`many_run_mu_lower` (symmetric in the two rates). It refutes mu-GDP only: turning it
into an epsilon (:func:`~privengine.audit.reference.gaussian_epsilon`) further assumes the
mechanism's trade-off curve is Gaussian, as for the Gaussian mechanism and DP-SGD.

One run (Steinke, Nasr, Jagielski, NeurIPS 2023)
-------------------------------------------------
``m`` canaries, each included independently with probability 1/2 (``S_i`` uniform); the
mechanism runs once; from its output alone the auditor guesses "in" for some canaries and
"out" for others and abstains on the rest (``r`` guesses, the numbers of each fixed in
advance), ``v`` of them correct. If ``M`` is eps-DP with respect to one canary, each guess
is right with probability at most ``q = e^eps / (1 + e^eps)`` given everything before it,
so the number of correct guesses is stochastically dominated by Binomial(r, q) (their
Thm 3.1): the p-value of "M is eps-DP" is ``P[Binomial(r, q) >= v]``. For delta > 0 (their
approximate-DP extension; the p-value their published code computes, as quoted in issue 15)::

    beta  = P[Binomial(r, q) >= v]
    alpha = max_{i = 1..v} ( P[Binomial(r, q) >= v - i] - beta ) / i
    p     = min( beta + 2 m delta alpha, 1 )

and the lower bound is the largest eps rejected at level ``1 - confidence``
(:func:`one_run_epsilon_lower`). For delta = 0 it has a closed form: ``P[Bin(r, q) >= v]``
is the regularised incomplete beta ``I_q(v, r - v + 1)``, so the bound is
``logit(Beta(v, r - v + 1).ppf(1 - confidence))``: the logit of the one-sided
Clopper-Pearson lower bound on the guessing accuracy. Since ``p >= beta``, that closed form
also caps the delta > 0 bound. Even a perfect auditor (v = r) cannot exceed
``logit((1 - confidence)^(1/r))`` (3.49 for r = 100, 5.81 for r = 1000, at 95 %).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, logit, ndtri

from ..errors import ConfigError

__all__ = [
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_from_rates",
    "many_run_epsilon_lower",
    "many_run_mu_lower",
    "mu_from_rates",
    "one_run_epsilon_lower",
    "one_run_p_value",
]

_SEARCH_GRID = 512  # points of the eps grid on which the one-run p-value is scanned for its first crossing
_BISECTIONS = 50


# --------------------------------------------------------------------------- checks


def _stats():
    """``scipy.stats``, imported on first use: the registry imports the audits, and scipy.stats takes most of a second
    to import, which every process (the CLI's ``--help`` too) paid before any bound was computed."""
    from scipy import stats

    return stats


def _count(name: str, value, *, high: int | None = None, low: int = 0) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ConfigError(name, f"must be an integer; got {value!r}")
    k = int(value)
    if k < low or (high is not None and k > high):
        raise ConfigError(name, f"must be in [{low}, {high}]; got {k}" if high is not None else
                          f"must be >= {low}; got {k}")
    return k


def _unit(name: str, value, *, open_low: bool, open_high: bool) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(name, f"must be a number; got {value!r}") from None
    if not (x > 0 if open_low else x >= 0) or not (x < 1 if open_high else x <= 1) or math.isnan(x):
        interval = f"{'(' if open_low else '['}0, 1{')' if open_high else ']'}"
        raise ConfigError(name, f"must be in {interval}; got {value!r}")
    return x


def _confidence(value) -> float:
    return _unit("confidence", value, open_low=True, open_high=True)


def _delta(value) -> float:
    return _unit("delta", value, open_low=False, open_high=True)


# --------------------------------------------------------------------------- Clopper-Pearson


def clopper_pearson_upper(successes: int, trials: int, *, level: float) -> float:
    """One-sided upper bound ``p_hi`` on a binomial rate with ``P[p <= p_hi] >= level``.

    ``p_hi = Beta(k + 1, n - k).ppf(level)`` (1 when ``k = n``): the largest ``p`` with
    ``P[Binomial(n, p) <= k] >= 1 - level``.

    >>> round(clopper_pearson_upper(0, 100, level=0.975), 5)   # the "rule of three" at 97.5 %: 3.7 / n
    0.03622
    """
    n = _count("trials", trials, low=1)
    k = _count("successes", successes, high=n)
    level = _unit("level", level, open_low=True, open_high=True)
    return 1.0 if k == n else float(_stats().beta.ppf(level, k + 1, n - k))


def clopper_pearson_lower(successes: int, trials: int, *, level: float) -> float:
    """One-sided lower bound ``p_lo`` on a binomial rate with ``P[p >= p_lo] >= level``:
    ``Beta(k, n - k + 1).ppf(1 - level)`` (0 when ``k = 0``)."""
    n = _count("trials", trials, low=1)
    k = _count("successes", successes, high=n)
    level = _unit("level", level, open_low=True, open_high=True)
    return 0.0 if k == 0 else float(_stats().beta.ppf(1.0 - level, k, n - k + 1))


# --------------------------------------------------------------------------- many runs


def epsilon_from_rates(*, fpr: float, fnr: float, delta: float = 0.0) -> float:
    """``max(0, log((1 - delta - fnr)/fpr), log((1 - delta - fpr)/fnr))``: the smallest eps that a
    test with these error rates allows at ``delta`` (see the module docstring); ``inf`` when a rate is 0
    and the other below ``1 - delta``.

    >>> round(epsilon_from_rates(fpr=1 / (1 + math.e), fnr=1 / (1 + math.e)), 12)   # randomized response, eps 1
    1.0
    """
    delta = _delta(delta)
    fpr = _unit("fpr", fpr, open_low=False, open_high=False)
    fnr = _unit("fnr", fnr, open_low=False, open_high=False)
    best = 0.0
    for num, den in ((1.0 - delta - fnr, fpr), (1.0 - delta - fpr, fnr)):
        if num > 0:
            best = max(best, math.inf if den == 0 else math.log(num / den))
    return best


def _rate_upper_bounds(false_positives, null_trials, false_negatives, alt_trials, confidence) -> tuple[float, float]:
    """``(FPR_hi, FNR_hi)``, each a one-sided CP bound at ``1 - (1 - confidence)/2``: both hold w.p. >= confidence."""
    level = 1.0 - (1.0 - _confidence(confidence)) / 2.0
    n0 = _count("null_trials", null_trials, low=1)
    n1 = _count("alt_trials", alt_trials, low=1)
    fpr_hi = clopper_pearson_upper(_count("false_positives", false_positives, high=n0), n0, level=level)
    fnr_hi = clopper_pearson_upper(_count("false_negatives", false_negatives, high=n1), n1, level=level)
    return fpr_hi, fnr_hi


def many_run_epsilon_lower(*, false_positives: int, null_trials: int, false_negatives: int, alt_trials: int,
                           delta: float, confidence: float = 0.95) -> float:
    """Epsilon lower bound from a threshold test's counts, valid with probability >= ``confidence``.

    ``false_positives`` of ``null_trials`` outputs of ``M(D0)`` fell in the event,
    ``false_negatives`` of ``alt_trials`` outputs of ``M(D1)`` did not. The event must be fixed
    independently of these draws. Returns
    ``max(0, log((1 - delta - FNR_hi)/FPR_hi), log((1 - delta - FPR_hi)/FNR_hi))`` with
    Clopper-Pearson upper bounds at ``1 - (1 - confidence)/2`` each.

    >>> round(many_run_epsilon_lower(false_positives=269, null_trials=1000, false_negatives=269,
    ...                              alt_trials=1000, delta=0.0), 3)   # randomized response at eps 1
    0.859
    """
    fpr_hi, fnr_hi = _rate_upper_bounds(false_positives, null_trials, false_negatives, alt_trials, confidence)
    return epsilon_from_rates(fpr=fpr_hi, fnr=fnr_hi, delta=delta)


def mu_from_rates(*, fpr: float, fnr: float) -> float:
    """``max(0, Phi^{-1}(1 - fpr) - Phi^{-1}(fnr))``: the largest mu that these error rates refute as mu-GDP."""
    fpr = _unit("fpr", fpr, open_low=False, open_high=False)
    fnr = _unit("fnr", fnr, open_low=False, open_high=False)
    with np.errstate(divide="ignore"):
        mu = float(ndtri(1.0 - fpr) - ndtri(fnr))
    return 0.0 if math.isnan(mu) else max(0.0, mu)


def many_run_mu_lower(*, false_positives: int, null_trials: int, false_negatives: int, alt_trials: int,
                      confidence: float = 0.95) -> float:
    """Gaussian-DP lower bound: with probability >= ``confidence`` the mechanism is not mu-GDP for any
    smaller mu. Same counts and Clopper-Pearson bounds as :func:`many_run_epsilon_lower`."""
    fpr_hi, fnr_hi = _rate_upper_bounds(false_positives, null_trials, false_negatives, alt_trials, confidence)
    return mu_from_rates(fpr=fpr_hi, fnr=fnr_hi)


# --------------------------------------------------------------------------- one run


def _one_run_counts(m, r, v) -> tuple[int, int, int]:
    m = _count("m", m, low=1)
    r = _count("r", r, high=m)
    v = _count("v", v, high=r)
    return m, r, v


def _p_values(eps: np.ndarray, m: int, r: int, v: int, delta: float) -> np.ndarray:
    """The one-run p-value at each ``eps`` (vectorised; see the module docstring)."""
    q = expit(np.asarray(eps, dtype=float))
    beta = _stats().binom.sf(v - 1, r, q)  # P[Bin(r, q) >= v]
    if delta == 0.0 or v == 0:
        return np.minimum(beta, 1.0)
    k = np.arange(v - 1, -1, -1)  # v-1, v-2, ..., 0  (i = v - k = 1..v)
    pmf = _stats().binom.pmf(k[None, :], r, q[:, None])
    below = np.cumsum(pmf, axis=1)  # P[v - i <= Bin < v] = P[Bin >= v - i] - beta
    alpha = (below / np.arange(1, v + 1)[None, :]).max(axis=1)
    return np.minimum(beta + 2.0 * m * delta * alpha, 1.0)


def one_run_p_value(epsilon: float, *, m: int, r: int, v: int, delta: float = 0.0) -> float:
    """P-value of "the mechanism is (epsilon, delta)-DP" given ``v`` correct guesses out of ``r`` on ``m`` canaries.

    >>> round(one_run_p_value(1.0, m=1000, r=100, v=80), 5)      # = P[Binomial(100, e/(1+e)) >= 80]
    0.07156
    """
    m, r, v = _one_run_counts(m, r, v)
    if not (isinstance(epsilon, (int, float, np.floating, np.integer)) and epsilon >= 0 and math.isfinite(epsilon)):
        raise ConfigError("epsilon", f"must be a finite number >= 0; got {epsilon!r}")
    return float(_p_values(np.array([float(epsilon)]), m, r, v, _delta(delta))[0])


def one_run_epsilon_lower(*, m: int, r: int, v: int, delta: float = 0.0, confidence: float = 0.95) -> float:
    """The one-run epsilon lower bound: every eps up to it is rejected at level ``1 - confidence``.

    delta = 0: the closed form ``logit(Beta(v, r - v + 1).ppf(1 - confidence))`` (0 if that is
    below 0). delta > 0: the p-value is scanned on a grid of [0, the delta = 0 bound] and the
    bound is the first point where its running maximum reaches ``1 - confidence``, refined by
    bisection (the running maximum makes the search sound even if the p-value were not
    monotone in eps).

    >>> round(one_run_epsilon_lower(m=1000, r=100, v=100), 3)     # a perfect auditor, 100 guesses
    3.493
    >>> 0 < one_run_epsilon_lower(m=1000, r=100, v=100, delta=1e-5) < 3.493
    True
    """
    m, r, v = _one_run_counts(m, r, v)
    delta, level = _delta(delta), 1.0 - _confidence(confidence)
    if v == 0:
        return 0.0
    cap = float(logit(_stats().beta.ppf(level, v, r - v + 1)))  # P[Bin(r, expit(cap)) >= v] = level
    if not cap > 0:
        return 0.0
    if delta == 0.0:
        return cap
    grid = np.linspace(0.0, cap, _SEARCH_GRID + 1)
    envelope = np.maximum.accumulate(_p_values(grid, m, r, v, delta))
    crossed = np.flatnonzero(envelope >= level)
    first = int(crossed[0]) if crossed.size else grid.size  # the cap itself has p >= beta = level
    if first == 0:
        return 0.0
    lo, hi = float(grid[first - 1]), (float(grid[first]) if first < grid.size else cap)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        if _p_values(np.array([mid]), m, r, v, delta)[0] < level:
            lo = mid
        else:
            hi = mid
    return lo
