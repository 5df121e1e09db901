r"""What PATE's aggregators release, query by query, as dp-accounting privacy events (the a-priori claims' events).

Neighbours are private training sets of the same size that differ in one example (replace one,
:data:`~privengine.accounting.events.RELATIONS` ``"replace_one"``): the example sits in one teacher's
partition, so each query's vote histogram ``n`` (``(m,)``, one count per class) changes by moving at most
one vote, ``n' = n - e_i + e_j``. The same events hold under add/remove one example
(``"add_or_remove_one"``) when K is fixed and each example's teacher comes from a hash of that example alone
(a user data set's partition, :mod:`privengine.pate.user_facts`): the example added or removed joins or leaves one
teacher's partition, the others' are unchanged, and ``n`` again moves one vote. The per-teacher cap (a teacher
keeps at most ``cap`` of its rows, those of smallest draw) keeps the change inside that one teacher: a row added
may evict one row from the same teacher's capped set, a row removed may let one of the same teacher's rows back
in, and either way no other teacher's rows change, so ``n`` still moves one vote. Each aggregator's answer is
post-processing of a noisy statistic of ``n``; the events describe that statistic, with dp-accounting's
convention that a Gaussian's (Laplace's) ``noise_multiplier`` is its standard deviation (scale) over the
sensitivity of what it is added to:

- GNMax, ``argmax(n + N(0, sigma^2 I))``: a Gaussian mechanism on ``n``, L2 sensitivity
  ``||e_j - e_i||_2 = sqrt(2)``: ``GaussianDpEvent(sigma / sqrt(2))``, whose RDP
  ``lam / (2 (sigma / sqrt 2)^2) = lam / sigma^2`` is the data-independent RDP of :mod:`.gnmax`.
- Confident-GNMax: the threshold check releases ``max_j n_j + N(0, sigma1^2)`` (compared with ``T``),
  and the max count moves by at most 1: ``GaussianDpEvent(sigma1)``, RDP ``lam / (2 sigma1^2)``; then the
  GNMax step with ``sigma2``: ``GaussianDpEvent(sigma2 / sqrt(2))``. Every submitted query is charged both,
  answered or not, as :func:`~.gnmax.confident_gnmax_a_priori_epsilon` charges it.
- LNMax, ``argmax(n + Lap(b)^m)`` with ``b = 1 / gamma``: the noisy histogram's privacy loss is the sum of
  the losses of the two coordinates that change, independent one-dimensional Laplace mechanisms of
  sensitivity 1 each, so a query is exactly two ``LaplaceDpEvent(b)``: together ``2 / b = 2 gamma``-DP, the
  moments accountant's ``eps0`` (:mod:`.lnmax`). One ``LaplaceDpEvent(b / 2)`` (L1 sensitivity 2 on one
  coordinate) would also be valid but looser: it is the worst case over all changes of L1 norm 2, which a
  moved vote never is. dp-accounting's ``PLDAccountant(REPLACE_ONE)`` refuses Laplace events; an unsampled
  Laplace is a shift of one noise multiplier under either relation (the convention of
  :mod:`privengine.accounting.events`), so :func:`~privengine.accounting.events.compose` takes its PLD at
  add/remove (exact for this release), and dp-accounting's RDP accountant under REPLACE_ONE reads it the same
  way (the exact Laplace RDP).

``queries`` such queries compose: ``SelfComposedDpEvent(per_query, queries)`` (``NoOpDpEvent`` for none).
"""

from __future__ import annotations

import math

from dp_accounting import dp_event

from .common import int_arg, positive_arg


def _repeated(event: dp_event.DpEvent, queries) -> dp_event.DpEvent:
    count = int_arg("queries", queries, 0)
    return dp_event.SelfComposedDpEvent(event, count) if count else dp_event.NoOpDpEvent()


def gnmax_events(sigma, queries) -> dp_event.DpEvent:
    """``queries`` GNMax answers with noise ``N(0, sigma^2)`` on every count (see the module docstring).

    >>> event = gnmax_events(2.0, 3)
    >>> event.count, round(event.event.noise_multiplier ** 2, 12)   # z^2 = sigma^2 / 2
    (3, 2.0)
    """
    return _repeated(dp_event.GaussianDpEvent(positive_arg("sigma", sigma) / math.sqrt(2.0)), queries)


def confident_gnmax_events(sigma1, sigma2, queries) -> dp_event.DpEvent:
    """``queries`` submitted Confident-GNMax queries, each charged its threshold check (``sigma1``) and its GNMax
    step (``sigma2``), answered or not."""
    check = dp_event.GaussianDpEvent(positive_arg("sigma1", sigma1))
    answer = dp_event.GaussianDpEvent(positive_arg("sigma2", sigma2) / math.sqrt(2.0))
    return _repeated(dp_event.ComposedDpEvent([check, answer]), queries)


def lnmax_events(gamma, queries) -> dp_event.DpEvent:
    """``queries`` LNMax answers with noise ``Lap(1/gamma)`` on every count: two unit-sensitivity Laplace events per
    query, the two counts a moved vote changes."""
    coordinate = dp_event.LaplaceDpEvent(1.0 / positive_arg("noise_eps", gamma))
    return _repeated(dp_event.SelfComposedDpEvent(coordinate, 2), queries)
