"""PATE's privacy analysis of a run's votes, turned into stated claims and plottable curves.

Claims of a run, headline first:

- **data-independent (a priori)**, the headline: a bound fixed before any vote is seen.
  LNMax and GNMax answer every submitted query, so it charges all of them. Confident-GNMax
  charges every submitted query as answered (threshold check + GNMax), since which ones are
  answered is itself an output of the mechanism.
- **data-dependent** (not publishable): a function of the private votes.
- Confident-GNMax only: the **realised data-independent** figure over the queries actually
  answered, labelled as a privacy odometer reading.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..accounting.pate import (PateAnalysis, confident_gnmax_a_priori_epsilon, confident_gnmax_analysis,
                               gnmax_analysis, lnmax_analysis)
from ..claims import PrivacyClaim, delta_caveat
from .config import PateConfig

NEIGHBOURING = ("private training sets of the same, public size that differ in one example (replace one): the "
                "random partition depends only on the size and the seed, so the example sits in one teacher's "
                "partition and each query's vote vector changes by moving at most one vote (adding or removing "
                "an example can reshuffle every partition, so add/remove is not covered)")
DATA_DEPENDENT_CAVEAT = ("The data-dependent epsilon is computed from the private votes, so publishing it is "
                         "itself not covered by this guarantee (the a-priori data-independent bound is).")
ODOMETER_CAVEAT = ("Privacy odometer, not an a-priori guarantee: this figure charges only the queries that were "
                   "answered, and which queries pass the noisy threshold is itself an output of the mechanism "
                   "(Rogers et al. 2016). Rely on the a-priori bound, which charges every submitted query.")
UNPROTECTED_CAVEAT = ("Covered: the noisy labels of the answered queries, which queries were answered, and what is "
                      "computed from them alone (the student). Not covered, because they are exact functions of the "
                      "private data shown to evaluate the mechanism: the vote-margin histogram (the very statistic "
                      "the data-dependent epsilon is computed from), the noise-free ensemble accuracy, the "
                      "per-teacher accuracies and training losses, the data-dependent epsilon, its curve and its order, the "
                      "smooth-sensitivity value, and the non-private baseline.")


@dataclass(frozen=True)
class PrivacyReport:
    analysis: PateAnalysis
    claims: tuple[PrivacyClaim, ...]


def analyse(votes: np.ndarray, answered: np.ndarray, config: PateConfig, *, n_private: int,
            extra_caveats: tuple[str, ...] = ()) -> PrivacyReport:
    """Privacy cost of answering ``votes[answered]`` (``votes``: ``(N, C)`` counts of every submitted query).

    LNMax and GNMax charge the answered rows only (all of them are answered; not the rows
    indexed by the noisy labels as the seed did). Confident-GNMax's data-dependent figure
    charges the threshold check on every submitted query and the GNMax answer on the
    answered ones (adaptive composition); its headline charges every submitted query.
    ``n_private`` (records the teachers learn from) decides whether delta is small enough.
    """
    common = (UNPROTECTED_CAVEAT,) + delta_caveat(config.delta, n_private) + tuple(extra_caveats)
    if config.aggregator == "lnmax":
        a = lnmax_analysis(votes[answered], config.gamma, config.delta, config.moments, beta=config.beta)
        accountant = (f"moments accountant of LNMax (Papernot et al. 2016), orders l = 1..{config.moments}, "
                      f"each query (2·gamma = {2 * config.gamma:g}, 0)-DP")
        extra = (f"Smooth sensitivity of the data-dependent epsilon: {a.smooth_sensitivity:.4g} "
                 f"(beta = {config.beta:g}).",)
    else:
        if config.aggregator == "gnmax":
            a = gnmax_analysis(votes[answered], config.sigma, config.delta)
            what = f"GNMax, sigma = {config.sigma:g}"
        else:
            a = confident_gnmax_analysis(votes, config.threshold, config.sigma1, config.sigma2, config.delta,
                                         answered=answered.astype(float))
            what = (f"Confident-GNMax, T = {config.threshold:g}, sigma1 = {config.sigma1:g}, "
                    f"sigma2 = {config.sigma2:g}")
        accountant = (f"Renyi DP of {what} (Papernot et al. 2018, Thm 6 for the data-dependent bound), "
                      "orders 2..500, converted with eps = RDP(lam) + ln(1/delta)/(lam-1)")
        extra = ()
    data_dependent = PrivacyClaim("data-dependent (not publishable)", a.eps, config.delta, accountant, NEIGHBOURING,
                                  a.order, (DATA_DEPENDENT_CAVEAT,) + extra + _warning(a.warning) + common)
    if config.aggregator != "confident_gnmax":
        a_priori = PrivacyClaim(f"data-independent (a priori), all {int(answered.sum())} queries answered",
                                a.data_independent_eps, config.delta, accountant, NEIGHBOURING,
                                a.data_independent_order, _warning(a.data_independent_warning) + common,
                                headline=True)
        return PrivacyReport(a, (a_priori, data_dependent))
    eps, order, warning = confident_gnmax_a_priori_epsilon(len(votes), config.sigma1, config.sigma2, config.delta)
    a_priori = PrivacyClaim(
        f"data-independent (a priori), every one of the {len(votes)} submitted queries charged as answered",
        eps, config.delta, f"{accountant}; every submitted query charged lam/(2 sigma1^2) + lam/sigma2^2",
        NEIGHBOURING, order, _warning(warning) + common, headline=True)
    realised = PrivacyClaim(
        f"realised data-independent figure for the {int(answered.sum())} answered queries (privacy odometer)",
        a.data_independent_eps, config.delta, accountant, NEIGHBOURING, a.data_independent_order,
        (ODOMETER_CAVEAT,) + _warning(a.data_independent_warning) + common)
    return PrivacyReport(a, (a_priori, data_dependent, realised))


def _warning(text: str | None) -> tuple[str, ...]:
    """The analysis' warning (minimum at the last order searched) as a caveat, if any."""
    return () if text is None else (text[:1].upper() + text[1:] + ".",)
