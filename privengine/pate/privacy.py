"""PATE's privacy analysis of a run's votes, turned into stated claims and plottable curves."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..accounting.pate import PateAnalysis, confident_gnmax_analysis, gnmax_analysis, lnmax_analysis
from ..claims import PrivacyClaim
from .config import PateConfig

NEIGHBOURING = ("private training sets of the same, public size that differ in one example (replace one): the "
                "random partition depends only on the size and the seed, so the example sits in one teacher's "
                "partition and each query's vote vector changes by moving at most one vote (adding or removing "
                "an example can reshuffle every partition, so add/remove is not covered)")
DATA_DEPENDENT_CAVEAT = ("The data-dependent epsilon is computed from the private votes, so publishing it is "
                         "itself not covered by this guarantee (the data-independent bound is).")


@dataclass(frozen=True)
class PrivacyReport:
    analysis: PateAnalysis
    claims: tuple[PrivacyClaim, ...]


def analyse(votes: np.ndarray, answered: np.ndarray, config: PateConfig) -> PrivacyReport:
    """Privacy cost of answering ``votes[answered]`` (``votes``: ``(N, C)`` counts of every submitted query).

    LNMax and GNMax charge the answered rows only (not all rows, and not rows indexed by
    the noisy labels as the seed did). Confident-GNMax charges the threshold check on
    every submitted query and the GNMax answer on the answered ones (adaptive composition).
    """
    if config.aggregator == "lnmax":
        a = lnmax_analysis(votes[answered], config.gamma, config.delta, config.moments, beta=config.beta)
        accountant = (f"moments accountant of LNMax (Papernot et al. 2016), orders l = 1..{config.moments}, "
                      f"each query 2·gamma = {2 * config.gamma:g} pure DP")
        extra = (f"Smooth sensitivity of the data-dependent epsilon: {a.smooth_sensitivity:.4g} "
                 f"(beta = {config.beta:g}).",)
        di_extra = ()
    else:
        if config.aggregator == "gnmax":
            a = gnmax_analysis(votes[answered], config.sigma, config.delta)
            what = f"GNMax, sigma = {config.sigma:g}"
        else:
            a = confident_gnmax_analysis(votes, config.threshold, config.sigma1, config.sigma2, config.delta,
                                         answered=answered.astype(float))
            what = (f"Confident-GNMax, T = {config.threshold:g}, sigma1 = {config.sigma1:g}, "
                    f"sigma2 = {config.sigma2:g}; threshold checks on all {len(votes)} submitted queries, "
                    f"GNMax on the {int(answered.sum())} answered")
        accountant = (f"Renyi DP of {what} (Papernot et al. 2018, Thm 6 for the data-dependent bound), "
                      "orders 2..500, converted with eps = RDP(lam) + ln(1/delta)/(lam-1)")
        extra = ()
        di_extra = ("Confident-GNMax's data-independent bound still depends on which queries were answered.",) \
            if config.aggregator == "confident_gnmax" else ()
    claims = (
        PrivacyClaim("data-dependent", a.eps, config.delta, accountant, NEIGHBOURING, a.order,
                     (DATA_DEPENDENT_CAVEAT,) + extra + _warning(a.warning)),
        PrivacyClaim("data-independent", a.data_independent_eps, config.delta, accountant, NEIGHBOURING,
                     a.data_independent_order, di_extra + _warning(a.data_independent_warning)),
    )
    return PrivacyReport(a, claims)


def _warning(text: str | None) -> tuple[str, ...]:
    """The analysis' warning (minimum at the last order searched) as a caveat, if any."""
    return () if text is None else (text[:1].upper() + text[1:] + ".",)
