r"""From a mechanism's outputs to the counts of :mod:`.bounds`: event tests and one-run guesses.

Scores are oriented so that a *higher* score is evidence for the alternative input ``D1``;
the event of a threshold ``t`` is ``{score >= t}``: false positives are ``D0`` outputs with
``score >= t``, false negatives ``D1`` outputs with ``score < t``.

The bound of :func:`~.bounds.many_run_epsilon_lower` is valid only for an event fixed
independently of the draws it is evaluated on. Choosing the best of several events is made
sound in one of two ways, both stated in the result's ``selection``:

- **Bonferroni** (a short list of events fixed in advance, :func:`best_event_test`): each of
  the ``K`` events is tested at confidence ``1 - gamma/K``; the largest bound is then valid at
  ``1 - gamma`` (it exceeds the truth only if some event's intervals fail: probability
  ``<= K gamma/K``).
- **split** (any threshold, :func:`threshold_test` with no ``thresholds``): the threshold is
  chosen on the first ``selection_fraction`` of each sample (draws are i.i.d., so their
  order is independent of their values) and the bound is computed on the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats

from ..errors import ConfigError
from .bounds import many_run_epsilon_lower, many_run_mu_lower, one_run_epsilon_lower

__all__ = ["EventTest", "OneRunTest", "best_event_test", "event_test", "one_run_guesses", "one_run_test",
           "threshold_test"]

_MAX_CANDIDATES = 512


@dataclass(frozen=True)
class EventTest:
    """A threshold (event) test's counts and the bounds they give.

    Attributes:
        false_positives, null_trials: ``D0`` outputs in the event, of all ``D0`` outputs used.
        false_negatives, alt_trials: ``D1`` outputs outside the event, of all ``D1`` outputs used.
        epsilon_lower: the (eps, delta) lower bound at ``confidence`` (after the selection correction).
        mu_lower: the Gaussian-DP lower bound from the same counts and intervals.
        delta, confidence: as asked.
        event: which event won (its index in the list given, or the threshold).
        selection: how the event was chosen (``"fixed"``, ``"bonferroni over K events"``, ``"split ..."``).
    """

    false_positives: int
    null_trials: int
    false_negatives: int
    alt_trials: int
    epsilon_lower: float
    mu_lower: float
    delta: float
    confidence: float
    event: float | int | None
    selection: str

    @property
    def fpr(self) -> float:
        return self.false_positives / self.null_trials

    @property
    def fnr(self) -> float:
        return self.false_negatives / self.alt_trials

    def counts(self) -> dict[str, int]:
        return {"false_positives": self.false_positives, "null_trials": self.null_trials,
                "false_negatives": self.false_negatives, "alt_trials": self.alt_trials}


def event_test(*, false_positives: int, null_trials: int, false_negatives: int, alt_trials: int, delta: float,
               confidence: float = 0.95, event: float | int | None = None, selection: str = "fixed") -> EventTest:
    """The bounds of one event fixed in advance (see :func:`~.bounds.many_run_epsilon_lower`)."""
    counts = dict(false_positives=int(false_positives), null_trials=int(null_trials),
                  false_negatives=int(false_negatives), alt_trials=int(alt_trials))
    return EventTest(**counts, delta=delta, confidence=confidence, event=event, selection=selection,
                     epsilon_lower=many_run_epsilon_lower(**counts, delta=delta, confidence=confidence),
                     mu_lower=many_run_mu_lower(**counts, confidence=confidence))


def best_event_test(false_positives: Sequence[int], false_negatives: Sequence[int], *, null_trials: int,
                    alt_trials: int, delta: float, confidence: float = 0.95) -> EventTest:
    """The best of ``K`` events fixed in advance, each tested at ``1 - (1 - confidence)/K`` (Bonferroni).

    ``false_positives[k]`` and ``false_negatives[k]`` are event ``k``'s counts on the same draws.
    """
    fps, fns = list(false_positives), list(false_negatives)
    if not fps or len(fps) != len(fns):
        raise ConfigError("false_negatives", f"must give one count per event ({len(fps)}); got {len(fns)}")
    k = len(fps)
    each = 1.0 - (1.0 - confidence) / k
    tests = [event_test(false_positives=fp, false_negatives=fn, null_trials=null_trials, alt_trials=alt_trials,
                        delta=delta, confidence=each, event=i) for i, (fp, fn) in enumerate(zip(fps, fns))]
    best = max(tests, key=lambda t: (t.epsilon_lower, t.mu_lower))
    selection = "fixed" if k == 1 else f"bonferroni over {k} events"
    return EventTest(**best.counts(), epsilon_lower=best.epsilon_lower, mu_lower=best.mu_lower, delta=delta,
                     confidence=confidence, event=best.event, selection=selection)


def _scores(name: str, x) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0 or not np.all(np.isfinite(a)):
        raise ConfigError(name, "must be a non-empty array of finite scores")
    return a


def _counts_at(null_sorted: np.ndarray, alt_sorted: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(false positives, false negatives)`` of the events ``{score >= t}`` for each ``t``."""
    fp = null_sorted.size - np.searchsorted(null_sorted, t, side="left")
    fn = np.searchsorted(alt_sorted, t, side="left")
    return fp, fn


def _select_threshold(null_sel: np.ndarray, alt_sel: np.ndarray, delta: float, confidence: float) -> float:
    """The threshold whose Clopper-Pearson eps bound is largest on the selection draws (vectorised)."""
    null_sorted, alt_sorted = np.sort(null_sel), np.sort(alt_sel)
    cands = np.unique(np.concatenate([null_sorted, alt_sorted]))
    if cands.size > _MAX_CANDIDATES:
        cands = np.unique(np.quantile(cands, np.linspace(0, 1, _MAX_CANDIDATES)))
    fp, fn = _counts_at(null_sorted, alt_sorted, cands)
    n0, n1 = null_sorted.size, alt_sorted.size
    level = 1.0 - (1.0 - confidence) / 2.0
    fpr_hi = np.where(fp == n0, 1.0, stats.beta.ppf(level, fp + 1, np.maximum(n0 - fp, 1)))
    fnr_hi = np.where(fn == n1, 1.0, stats.beta.ppf(level, fn + 1, np.maximum(n1 - fn, 1)))
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.clip(1.0 - delta - fnr_hi, 0.0, None) / fpr_hi)
        b = np.log(np.clip(1.0 - delta - fpr_hi, 0.0, None) / fnr_hi)
    score = np.nan_to_num(np.maximum(a, b), nan=-np.inf)
    return float(cands[int(np.argmax(score))])


def threshold_test(scores_null, scores_alt, *, delta: float, confidence: float = 0.95,
                   thresholds: Sequence[float] | None = None, selection_fraction: float = 0.5) -> EventTest:
    """Threshold test of ``M(D0)`` scores against ``M(D1)`` scores (higher = evidence for ``D1``).

    ``thresholds`` given: the best of these, Bonferroni-corrected (one threshold: no correction).
    ``thresholds=None``: choose the threshold on the first ``selection_fraction`` of each sample,
    compute the bound on the rest.
    """
    s0, s1 = _scores("scores_null", scores_null), _scores("scores_alt", scores_alt)
    if thresholds is not None:
        t = np.asarray(list(thresholds), dtype=float)
        fp, fn = _counts_at(np.sort(s0), np.sort(s1), t)
        best = best_event_test(fp.tolist(), fn.tolist(), null_trials=s0.size, alt_trials=s1.size, delta=delta,
                               confidence=confidence)
        return EventTest(**best.counts(), epsilon_lower=best.epsilon_lower, mu_lower=best.mu_lower, delta=delta,
                         confidence=confidence, event=float(t[best.event]), selection=best.selection)
    if not 0.0 < selection_fraction < 1.0:
        raise ConfigError("selection_fraction", f"must be in (0, 1); got {selection_fraction!r}")
    k0, k1 = int(s0.size * selection_fraction), int(s1.size * selection_fraction)
    if min(k0, k1, s0.size - k0, s1.size - k1) < 1:
        raise ConfigError("scores_null", "must hold enough draws to split into a selection and an evaluation part")
    t = _select_threshold(s0[:k0], s1[:k1], delta, confidence)
    fp, fn = _counts_at(np.sort(s0[k0:]), np.sort(s1[k1:]), np.array([t]))
    return event_test(false_positives=int(fp[0]), null_trials=s0.size - k0, false_negatives=int(fn[0]),
                      alt_trials=s1.size - k1, delta=delta, confidence=confidence, event=t,
                      selection=f"split: threshold chosen on {k0} + {k1} draws, bound on the other "
                                f"{s0.size - k0} + {s1.size - k1}")


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class OneRunTest:
    """A one-run audit's counts (``m`` canaries, ``r`` guesses, ``v`` correct) and its bound."""

    m: int
    r: int
    v: int
    k_pos: int
    k_neg: int
    epsilon_lower: float
    delta: float
    confidence: float

    def counts(self) -> dict[str, int]:
        return {"canaries": self.m, "guesses": self.r, "correct": self.v, "guessed_in": self.k_pos,
                "guessed_out": self.k_neg}


def one_run_guesses(scores, *, k_pos: int, k_neg: int) -> np.ndarray:
    """``(m,)`` int8 guesses: +1 ("in") for the ``k_pos`` highest scores, -1 ("out") for the ``k_neg``
    lowest, 0 (abstain) otherwise. Ties are broken by position (a stable sort), which is independent
    of which canaries were included when canaries are placed independently of their inclusion bits."""
    s = _scores("scores", scores)
    if k_pos < 0 or k_neg < 0 or k_pos + k_neg > s.size:
        raise ConfigError("k_pos", f"k_pos + k_neg must be in [0, m = {s.size}]; got {k_pos} + {k_neg}")
    order = np.argsort(s, kind="stable")
    guesses = np.zeros(s.size, dtype=np.int8)
    guesses[order[:k_neg]] = -1
    if k_pos:
        guesses[order[-k_pos:]] = 1
    return guesses


def one_run_test(scores, included, *, k_pos: int, k_neg: int, delta: float = 0.0,
                 confidence: float = 0.95) -> OneRunTest:
    """Steinke-Nasr-Jagielski one-run audit of ``m`` canaries.

    ``scores[i]``: the auditor's score of canary ``i`` (higher = "more likely included"),
    computed from the single output; ``included[i]``: whether canary ``i`` was in (each drawn
    independently with probability 1/2). ``k_pos`` and ``k_neg`` must be fixed in advance.
    """
    inc = np.asarray(included, dtype=bool).ravel()
    guesses = one_run_guesses(scores, k_pos=k_pos, k_neg=k_neg)
    if inc.shape != guesses.shape:
        raise ConfigError("included", f"must have one entry per score ({guesses.size}); got {inc.size}")
    truth = np.where(inc, 1, -1)
    m, r = guesses.size, int(np.count_nonzero(guesses))
    v = int(np.count_nonzero(guesses == truth))
    return OneRunTest(m=m, r=r, v=v, k_pos=k_pos, k_neg=k_neg, delta=delta, confidence=confidence,
                      epsilon_lower=one_run_epsilon_lower(m=m, r=r, v=v, delta=delta, confidence=confidence))
