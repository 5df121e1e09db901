"""What every PATE analysis shares: the inputs it accepts, the result it returns, the RDP orders it searches.

``votes`` is always an ``(n_queries, n_classes)`` array of teacher vote counts
(integers or floats, >= 0), one row per query that is charged; its number of
columns is the true number of classes ``m`` (a class nobody voted for is a zero
column, not a missing one). Every analysis is vectorised over queries x orders.

Inputs are checked here, and a bad one raises :class:`privengine.errors.ConfigError`
naming its field (``votes``, ``sigma``, ``delta``, ``orders``, ``answered``, ...).
Every analysis of a whole run returns a :class:`PateAnalysis`: its epsilon at the best
order, the data-independent figure beside it, and both as curves over the queries
charged. RDP is converted with ``eps = min_lam RDP(lam) + ln(1/delta)/(lam-1)`` over
:data:`GNMAX_ORDERS` (LNMax: over the moments ``1..L``), and :func:`edge_warning`
says when the minimum sits at the last order searched (the true minimum may lie beyond).
"""

from __future__ import annotations

import math
import numbers
import operator
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

from privengine.errors import ConfigError

#: RDP orders used for GNMax / Confident-GNMax, as in Papernot et al. (2018).
GNMAX_ORDERS = np.concatenate((np.arange(2, 100.5, 0.5), np.logspace(np.log10(100), np.log10(500), 100)))
GNMAX_ORDERS.setflags(write=False)

# Elements per temporary (n_queries x k-chunk) array in the smooth-sensitivity scan.
SS_CHUNK_ELEMS = 1 << 21


# --------------------------------------------------------------------------- result


def read_only(a: np.ndarray) -> np.ndarray:
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
            (see :func:`~.lnmax.lnmax_smooth_sensitivity`), else ``None``.
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


def real_arg(name: str, value, *, allow_nonfinite: bool = False) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise ConfigError(name, f"must be a real number; got {value!r}")
    x = float(value)
    if not allow_nonfinite and not math.isfinite(x):
        raise ConfigError(name, f"must be finite; got {value!r}")
    return x


def positive_arg(name: str, value) -> float:
    x = real_arg(name, value)
    if not x > 0:
        raise ConfigError(name, f"must be > 0; got {value!r}")
    return x


def nonnegative_arg(name: str, value) -> float:
    x = real_arg(name, value)
    if not x >= 0.0:
        raise ConfigError(name, f"must be >= 0; got {value!r}")
    return x


def delta_arg(value) -> float:
    x = real_arg("delta", value)
    if not 0.0 < x < 1.0:
        raise ConfigError("delta", f"must be in (0, 1); got {value!r}")
    return x


def int_arg(name: str, value, low: int) -> int:
    if isinstance(value, (bool, np.bool_)):
        raise ConfigError(name, f"must be an integer >= {low}; got {value!r}")
    try:
        k = operator.index(value)
    except TypeError:
        raise ConfigError(name, f"must be an integer >= {low}; got {value!r}") from None
    if k < low:
        raise ConfigError(name, f"must be an integer >= {low}; got {value!r}")
    return k


def order_arg(value) -> float:
    x = real_arg("order", value)
    if not x > 1.0:
        raise ConfigError("order", f"must be an RDP order > 1; got {value!r}")
    return x


def votes_arg(votes) -> np.ndarray:
    try:
        v = np.array(votes, dtype=float, copy=True)
    except (TypeError, ValueError):
        raise ConfigError("votes", "must be a 2-D (n_queries, n_classes) array of counts; "
                                   f"got {type(votes).__name__}") from None
    if v.ndim != 2:
        raise ConfigError("votes", f"must be a 2-D (n_queries, n_classes) array of counts; got shape {v.shape}")
    if v.shape[1] < 2:
        raise ConfigError("votes", f"must have at least 2 classes (columns); got {v.shape[1]}")
    if not np.all(np.isfinite(v)):
        raise ConfigError("votes", "must be finite counts; got NaN or inf")
    if v.size and v.min() < 0:
        raise ConfigError("votes", f"must be >= 0 (vote counts); got {v.min()!r}")
    return v


def orders_arg(orders) -> np.ndarray:
    if orders is None:
        return np.asarray(GNMAX_ORDERS)
    try:
        o = np.array(orders, dtype=float).ravel()
    except (TypeError, ValueError):
        raise ConfigError("orders", f"must be a 1-D array of RDP orders > 1; got {orders!r}") from None
    if o.size == 0 or not np.all(np.isfinite(o)) or o.min() <= 1:
        raise ConfigError("orders", "must be a non-empty 1-D array of finite RDP orders > 1")
    return o


def answered_weights(answered, n: int) -> np.ndarray:
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


def log1mexp(x: np.ndarray) -> np.ndarray:
    """``log(1 - exp(x))`` for ``x <= 0``, accurate at both ends (``-inf`` at 0)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > -math.log(2.0), np.log(-np.expm1(x)), np.log1p(-np.exp(x)))


def others_logsumexp(log_terms: np.ndarray, top_idx: np.ndarray) -> np.ndarray:
    """``logsumexp`` over each row's classes except its (single) plurality index."""
    t = log_terms.copy()
    t[np.arange(t.shape[0]), top_idx] = -np.inf
    return logsumexp(t, axis=1)


def min_over_orders(per_order: np.ndarray, orders: np.ndarray) -> tuple[float, float, int]:
    i = int(np.argmin(per_order))
    return float(per_order[i]), float(orders[i]), i


def edge_warning(what: str, i: int, n_orders: int, name: str, hint: str) -> str | None:
    if i == n_orders - 1:
        return f"{what} eps is minimised at the last {name} searched; {hint}"
    return None
