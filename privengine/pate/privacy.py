"""PATE's privacy analysis of a run's votes, turned into stated claims and plottable curves.

Claims of a run, headline first:

- **data-independent (a priori)**, the headline: a bound fixed before any vote is seen.
  LNMax and GNMax answer every submitted query, so it charges all of them. Confident-GNMax
  charges every submitted query as answered (threshold check + GNMax), since which ones are
  answered is itself an output of the mechanism. It carries those releases as privacy events
  (:func:`a_priori_events`, under ``replace_one``), from which dp-accounting recomputes it
  (its RDP at every order exactly; its ε, converted more tightly, at most the stated one); with a
  sanitized release it carries none: that release (GNSS) is no dp-accounting event, so ledgers and
  sweeps compose the claim by its (ε, δ). Every other claim is a figure, never events.
- **data-dependent** (not publishable): a function of the private votes. For Confident-GNMax
  it charges every submitted query its threshold check *and* its GNMax step: an unanswered
  query still releases "no answer", whose probability depends on the votes through both steps
  (:func:`~privengine.accounting.pate.confident_gnmax_analysis`), so charging it the threshold
  step alone is not a bound.
- Confident-GNMax only, for comparison with the paper and never publishable: the **realised
  data-dependent** figure (the threshold check of every submitted query but the GNMax step of the
  answered ones only, as Papernot et al. 2018
  report it) and the **realised data-independent** figure over the answered queries, both
  labelled as privacy odometer readings.
- GNMax and Confident-GNMax with ``sanitize`` on: the **sanitized data-dependent** figure
  (publishable), released through the smooth-sensitivity framework (Papernot et al. 2018,
  Sec. 4, App. B-C; :func:`sanitized_epsilon`). Its release is a DP mechanism of its own,
  so its cost is added both to it and to the a-priori headline (which must cover
  everything the run publishes). On MNIST it is not covered and not publishable: the
  sanitizer's settings were chosen on MNIST votes (:data:`SANITIZER_TUNED_ON`).

The sanitized release, at an order ``lam`` fixed before any vote is seen:

- ``f(x)`` = the run's data-dependent RDP at ``lam`` (GNMax: every answer; Confident-GNMax:
  the threshold check and the GNMax step of every submitted query);
- ``A[d]`` = the sum of the per-query local-sensitivity bounds at distance ``d``,
  ``SS = max_d e^{-beta d} A[d]`` with ``beta = 0.3 / lam``;
- published ``R = clip(f + SS (z sigma_ss + sigma_ss Z), 0, f_DI)`` (``sigma_ss = lam`` unless set),
  ``Z ~ N(0, 1)`` from the
  run's noise stream :data:`SANITIZE_STREAM`, ``z = Phi^{-1}(ss_confidence)``, ``f_DI`` the
  data-independent RDP at ``lam``: ``R >= f`` with probability ``Phi(z)``;
- cost of the release: ``c(lam') = gnss_rdp(beta, sigma_ss / (1 + z sigma_ss (e^beta - 1)), lam')``
  (:func:`~privengine.accounting.pate.shifted_gnss_sigma`), finite for ``lam' < 1/(2 beta)``;
- sanitized ``eps = R + c(lam) + ln(1/delta)/(lam - 1)``: by composition at ``lam`` the
  answers and ``R`` together have RDP ``f(x) + c(lam)`` at this dataset, so the published
  eps is at least the exact data-dependent eps of everything released with probability
  ``Phi(z)`` over ``Z`` (a statement about the estimate; it is not part of delta);
- headline: ``min_{lam' < 1/(2 beta)} RDP_a_priori(lam') + c(lam') + ln(1/delta)/(lam' - 1)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch
from scipy.special import ndtri

from ..accounting.pate import (GNMAX_ORDERS, PateAnalysis, confident_gnmax_a_priori_epsilon,
                               confident_gnmax_analysis, confident_gnmax_events,
                               confident_gnmax_summed_local_sensitivity_bounds, gnmax_analysis, gnmax_events,
                               gnmax_summed_local_sensitivity_bounds, gnss_rdp, gnss_rdp_at_orders, lnmax_analysis,
                               lnmax_events, sanitize_rdp, shifted_gnss_sigma, smooth_sensitivity)
from ..accounting.events import to_json
from ..claims import PrivacyClaim, delta_caveat
from ..randomness import noise_generator
from . import user_facts
from .config import PateConfig, is_user_dataset

SANITIZE_STREAM = 2  # stream key of the sanitized epsilon's noise (the aggregator's is 1, see run.NOISE_STREAM)
SS_BETA_TIMES_ORDER = 0.3  # beta = 0.3 / lam: see sanitized_epsilon for why
# The sanitized claim's label: the figure, then its qualifier (the store's migration 4 relabels it in runs stored before
# issue 24). A qualifier that limits what the figure covers is the claim's ``condition`` (data, printed with its ε by
# every view), and the label's qualifier is written from it (SANITIZED_TUNED_LABEL), never rewritten in the store.
SANITIZED = "data-dependent, sanitized through smooth sensitivity"
SANITIZED_LABEL = f"{SANITIZED} (publishable)"
# The private data sets on whose votes the sanitizer's settings were chosen: beta = 0.3 / lam, sigma_ss = lam and lam's
# rule were picked by comparing exact data-dependent epsilons of 250-teacher MNIST ensembles' votes
# (docs/results/pate.md, "Sanitized data-dependent ε"). On that data the settings are themselves a function of the
# private votes that no accountant charges, so a sanitized figure there is not covered and not publishable.
SANITIZER_TUNED_ON = ("mnist",)
TUNED_CONDITION = "not covered: tuned on these votes"
SANITIZED_TUNED_LABEL = f"{SANITIZED} ({TUNED_CONDITION}; not publishable)"
TUNED_CAVEAT = ("Not covered and not publishable on this data set: the sanitizer's settings (beta = 0.3/lam, "
                "sigma_ss = lam and the rule that fixes lam) were chosen by comparing exact data-dependent epsilons "
                "of MNIST teachers' votes, so they are a function of this private data that no accountant charges. "
                "The figure is shown to compare with the paper; rely on the a-priori headline.")

NEIGHBOURING = ("private training sets of the same, public size that differ in one example (replace one): the "
                "random partition depends only on the size and the seed, so the example sits in one teacher's "
                "partition and each query's vote vector changes by moving at most one vote (adding or removing "
                "an example can reshuffle every partition, so add/remove is not covered)")
DATA_DEPENDENT_CAVEAT = ("The data-dependent epsilon is computed from the private votes, so publishing it is "
                         "itself not covered by this guarantee (the a-priori data-independent bound is, and so is "
                         "the sanitized data-dependent figure where the run publishes one).")
DATA_DEPENDENT_TUNED_CAVEAT = ("The data-dependent epsilon is computed from the private votes, so publishing it is "
                               "itself not covered by this guarantee (the a-priori data-independent bound is; on this "
                               "data set the sanitized figure is not, since its settings were tuned on these votes).")
SANITIZED_CAVEAT = ("A data-dependent guarantee: it bounds the privacy loss for this private data set against its "
                    "neighbours, not for every data set (the a-priori headline does that). Unlike the raw figure it "
                    "may be published: the data-dependent RDP was released with Gaussian noise scaled to its smooth "
                    "sensitivity (Papernot et al. 2018, Sec. 4 and App. B), and that release's own cost is included "
                    "here and in the headline.")
REALISED_CAVEAT = ("Realised figure, not a guarantee and not publishable: it charges the threshold check of every "
                   "submitted query but the GNMax step of the answered ones only, as Papernot et al. (2018) report "
                   "their 1.97 on MNIST. An unanswered query still "
                   "releases 'no answer', whose probability depends on the votes through both steps, so only the "
                   "data-dependent figure that charges every submitted query both steps bounds the privacy loss. "
                   "Shown to compare with the paper.")
ODOMETER_CAVEAT = ("Privacy odometer, not an a-priori guarantee: this figure charges only the queries that were "
                   "answered, and which queries pass the noisy threshold is itself an output of the mechanism "
                   "(Rogers et al. 2016). Rely on the a-priori bound, which charges every submitted query.")
_UNPROTECTED = ("Covered: the noisy labels of the answered queries, which queries were answered, and what is "
                "computed from them alone (the student). Not covered, because they are exact functions of the "
                "private data shown to evaluate the mechanism: the vote-margin histogram (the very statistic "
                "the data-dependent epsilon is computed from), the noise-free ensemble accuracy, the "
                "per-teacher accuracies and training losses, the data-dependent epsilon, its curve and its "
                "order (and Confident-GNMax's realised figure and its curve), the "
                "smooth-sensitivity value, and the non-private baseline.")
UNPROTECTED_CAVEAT = _UNPROTECTED + (" (A sanitized data-dependent epsilon, where the run publishes one, is covered: "
                                     "its release is charged.)")
UNPROTECTED_TUNED_CAVEAT = _UNPROTECTED + (" (The sanitized data-dependent epsilon is not covered on this data set "
                                           "either: its settings were tuned on these votes.)")
RELATION = "replace_one"  # the a-priori claims' events' neighbouring relation (NEIGHBOURING, as data)
NO_EVENTS_CAVEAT = ("This claim carries no privacy events: the sanitized release (GNSS, Gaussian noise scaled to a "
                    "smooth sensitivity) has no dp-accounting event, so a ledger or a sweep composes this run by "
                    "its (ε, δ) (basic composition); with sanitize off the a-priori claim carries its queries' "
                    "events.")


def sanitizer_tuned_on(config: PateConfig) -> bool:
    """Whether the sanitizer's settings were chosen on votes of ``config``'s private data (:data:`SANITIZER_TUNED_ON`).

    Then its sanitized figure is not covered: the settings are a function of that data that no accountant charges.
    """
    return config.dataset in SANITIZER_TUNED_ON


@dataclass(frozen=True)
class SanitizedEpsilon:
    """The sanitized data-dependent epsilon of a GNMax / Confident-GNMax run (see the module docstring).

    Published: ``order`` (lam), ``beta``, ``sigma`` (sigma_ss), ``confidence`` (``Phi(shift)``),
    ``shift`` (z), ``order_rule`` and ``sigma_rule`` (how lam and sigma_ss were fixed), ``release_rdp`` (the release's own RDP at
    lam), ``released_rdp`` (R), ``epsilon`` and ``delta``. Private diagnostics (exact functions of
    the votes, never part of a claim): ``rdp`` (f) and ``smooth_sensitivity`` (SS).
    """

    order: float
    beta: float
    sigma: float
    confidence: float
    shift: float
    order_rule: str
    sigma_rule: str
    release_rdp: float
    released_rdp: float
    epsilon: float
    delta: float
    rdp: float
    smooth_sensitivity: float

    @property
    def effective_sigma(self) -> float:
        """The GNSS noise multiplier the shifted release amounts to (:func:`shifted_gnss_sigma`)."""
        return shifted_gnss_sigma(self.beta, self.sigma, self.shift)

    def public(self) -> dict:
        """The published fields (no function of the votes but ``released_rdp`` and ``epsilon``)."""
        return {"epsilon": self.epsilon, "delta": self.delta, "order": self.order, "order_rule": self.order_rule,
                "beta": self.beta, "sigma_ss": self.sigma, "sigma_rule": self.sigma_rule,
                "confidence": self.confidence, "shift": self.shift, "released_rdp": self.released_rdp,
                "release_rdp": self.release_rdp}


@dataclass(frozen=True)
class PrivacyReport:
    """A run's claims, the analysis they rest on, and (Confident-GNMax) the realised paper-style analysis.

    ``analysis`` charges what bounds the release (Confident-GNMax: both steps of every submitted
    query); ``realised`` (Confident-GNMax only, else None) charges every threshold check but the answered queries'
    GNMax step
    only, for comparison with Papernot et al. (2018).
    """

    analysis: PateAnalysis
    claims: tuple[PrivacyClaim, ...]
    sanitized: SanitizedEpsilon | None = None
    realised: PateAnalysis | None = None


def a_priori_rdp(config: PateConfig, n_queries: int, orders: np.ndarray) -> np.ndarray:
    """Data-independent RDP of the aggregator on ``n_queries`` queries, per order.

    GNMax: ``n lam / sigma^2`` (n answered = submitted). Confident-GNMax: every submitted query
    charged as answered, ``n (lam / (2 sigma1^2) + lam / sigma2^2)``.
    """
    if config.aggregator == "gnmax":
        return n_queries * orders / config.sigma**2
    if config.aggregator == "confident_gnmax":
        return n_queries * (orders / (2.0 * config.sigma1**2) + orders / config.sigma2**2)
    raise ValueError(f"no RDP a-priori bound for {config.aggregator!r}")


def a_priori_events(config: PateConfig, n_queries: int) -> tuple[dict, ...]:
    """The JSON privacy events (replace one) of the aggregator's answers to ``n_queries`` queries: GNMax and LNMax
    the answered ones, Confident-GNMax every submitted one, charged both steps
    (:mod:`privengine.accounting.pate.a_priori` states each event's sensitivity)."""
    if config.aggregator == "gnmax":
        event = gnmax_events(config.sigma, n_queries)
    elif config.aggregator == "confident_gnmax":
        event = confident_gnmax_events(config.sigma1, config.sigma2, n_queries)
    else:
        event = lnmax_events(config.gamma, n_queries)
    return (to_json(event),)


def _best_order(rdp: np.ndarray, orders: np.ndarray, delta: float) -> tuple[float, float, int]:
    """``(eps, order, index)`` minimising ``rdp + ln(1/delta)/(lam - 1)`` over the finite entries."""
    eps = np.where(np.isfinite(rdp), rdp - math.log(delta) / (orders - 1.0), np.inf)
    i = int(np.argmin(eps))
    return float(eps[i]), float(orders[i]), i


def sanitize_order(config: PateConfig, n_queries: int) -> tuple[float, str]:
    """``(lam, rule)``: the order of the sanitized release, fixed from the configuration alone.

    ``ss_order > 0``: that order. ``0``: ``1 + 2 (lam_0 - 1)``, ``lam_0`` the order of the
    aggregator's a-priori bound on ``n_queries`` (a function of the knobs only). Why: for an
    RDP ``s lam``, ``s lam + ln(1/delta)/(lam - 1)`` is least near ``lam - 1 = sqrt(ln(1/delta)/s)``,
    and the data-dependent slope of a run whose teachers mostly agree is several times the
    a-priori one smaller, which moves the best order up; the smooth sensitivity grows with
    lam, which moves the best order of the *sanitized* figure back down (on our MNIST votes:
    a-priori order 5, raw data-dependent 14, sanitized best near 10). Choosing lam from the
    votes, as the paper's script does, would make the order itself a function of the private
    data that no accountant charges.
    """
    if config.ss_order > 0:
        return float(config.ss_order), "set in the configuration"
    _, lam0, _ = _best_order(a_priori_rdp(config, n_queries, GNMAX_ORDERS), GNMAX_ORDERS, config.delta)
    return 1.0 + 2.0 * (lam0 - 1.0), f"1 + 2 (a-priori order {lam0:g} - 1), from the configuration alone"


def sanitize_sigma(config: PateConfig, order: float) -> tuple[float, str]:
    """``(sigma_ss, rule)``: ``ss_sigma`` if set, else ``sigma_ss = lam`` (the release's order).

    Why ``lam``: the release costs about ``lam e^{2 beta} / sigma'^2 + (beta lam - ln(1 - 2 beta lam)/2)
    / (lam - 1)`` with ``beta lam`` fixed and ``sigma' = sigma / (1 + z sigma (e^beta - 1))``; with
    ``sigma = lam`` (so ``z sigma beta = 0.3 z``) every term falls like ``1/lam``, the rate of the
    conversion term ``ln(1/delta)/(lam - 1)``, so the release costs the same share of it in every
    regime (c(lam) (lam - 1) is 2.6-3.0 at confidence 0.95 and 1.6-1.8 unshifted, for lam from 3 to
    480: 23-26 % or 14-15 % of the conversion term at delta = 1e-5), instead of swamping runs whose small
    epsilon comes from a large order. On MNIST (lam = 9) it is also near the sigma that minimised
    the expected published figure (docs/results/pate.md).
    """
    if config.ss_sigma > 0:
        return float(config.ss_sigma), "set in the configuration"
    return float(order), "the release's order"


def _rdp_cap_and_bounds(votes: np.ndarray, answered: np.ndarray, config: PateConfig,
                        order: float) -> tuple[float, float, np.ndarray]:
    """``(f, f_DI, A)`` at ``order``: the run's data-dependent RDP, its data-independent cap, summed LS bounds.

    GNMax charges the answered rows (all of them); Confident-GNMax the threshold check and the
    GNMax step of every submitted row (the only charge that bounds the release, see the module
    docstring), whatever was answered.
    """
    orders = np.array([order])
    if config.aggregator == "gnmax":
        a = gnmax_analysis(votes[answered], config.sigma, config.delta, orders=orders)
        bounds = gnmax_summed_local_sensitivity_bounds(votes[answered], config.sigma, order)
    else:
        every = np.ones(len(votes), dtype=bool)
        a = confident_gnmax_analysis(votes, config.threshold, config.sigma1, config.sigma2, config.delta,
                                     answered=every, orders=orders)
        bounds = confident_gnmax_summed_local_sensitivity_bounds(votes, every, config.threshold, config.sigma1,
                                                                 config.sigma2, order)
    return float(a.cost[0]), float(a.data_independent_cost[0]), bounds


def sanitized_epsilon(votes: np.ndarray, answered: np.ndarray, config: PateConfig, standard_normal: float,
                      ) -> SanitizedEpsilon:
    """Release the run's data-dependent epsilon at a fixed order through GNSS (module docstring).

    Choices, all fixed before the run's votes are seen (a choice made from the votes would leak; on MNIST they were
    chosen on earlier runs' votes, so its figure is not covered: :data:`SANITIZER_TUNED_ON`):
    ``lam`` by :func:`sanitize_order`; ``beta = 0.3 / lam``; ``sigma_ss`` by :func:`sanitize_sigma`;
    the confidence from its knob. ``beta lam`` trades the smooth sensitivity (smaller for larger beta)
    against the release's cost, which grows without bound as ``beta lam -> 1/2``; at 0.3 the
    exact worst case of :func:`~privengine.accounting.pate.gnss_rdp` (its ``r = 1 - lam (1 -
    e^{-2 beta}) ~ 1 - 2 beta lam``) stays >= 0.4, and on our MNIST and synthetic votes
    0.3-0.35 minimised the expected shifted figure for every sigma_ss we tried. (The paper's
    script scans beta lam in [0.3, 0.495) with Theorem 23 only, which under-reports there.)
    ``standard_normal`` is the N(0, 1) draw (:func:`draw_standard_normal`).
    """
    order, rule = sanitize_order(config, len(votes) if config.aggregator == "confident_gnmax"
                                 else int(answered.sum()))
    sigma, sigma_rule = sanitize_sigma(config, order)
    beta = SS_BETA_TIMES_ORDER / order
    shift = float(ndtri(config.ss_confidence))
    rdp, cap, bounds = _rdp_cap_and_bounds(votes, answered, config, order)
    ss = smooth_sensitivity(bounds, beta)
    released = sanitize_rdp(rdp, ss, cap, sigma=sigma, shift=shift, standard_normal=standard_normal)
    cost = gnss_rdp(beta, shifted_gnss_sigma(beta, sigma, shift), order)
    eps = released + cost - math.log(config.delta) / (order - 1.0)
    return SanitizedEpsilon(order, beta, sigma, config.ss_confidence, shift, rule, sigma_rule, cost, released, eps,
                            config.delta, rdp, ss)


def draw_standard_normal(config: PateConfig, device: torch.device | str = "cpu", *, data: tuple[int, ...]) -> float:
    """One N(0, 1) draw from the run's stream :data:`SANITIZE_STREAM` (seeded, or OS entropy with secure noise).

    Drawn on the CPU, keyed by the run's device type and by ``data``, the fingerprint of the teachers'
    private data (:attr:`~privengine.pate.data.PateData.private_fingerprint`), like every noise stream
    (:func:`privengine.randomness.noise_generator`).
    """
    generator = noise_generator(config, SANITIZE_STREAM, data=data, device=device, on="cpu")
    return float(torch.randn((), generator=generator, dtype=torch.float64))


def analyse(votes: np.ndarray, answered: np.ndarray, config: PateConfig, *, n_private: int, data: tuple[int, ...],
            extra_caveats: tuple[str, ...] = (), device: torch.device | str = "cpu") -> PrivacyReport:
    """Privacy cost of answering ``votes[answered]`` (``votes``: ``(N, C)`` counts of every submitted query).

    LNMax and GNMax charge the answered rows only (all of them are answered; not the rows
    indexed by the noisy labels as the seed did). Confident-GNMax's data-dependent figure
    charges the threshold check and the GNMax step of every submitted query (composition,
    then post-processing: the only charge that bounds the release), as does its headline;
    the realised figures (no GNMax step for unanswered queries) are listed beside them as
    odometer readings, never publishable.
    GNMax and Confident-GNMax with ``config.sanitize`` also publish the sanitized figure
    (its noise drawn by :func:`draw_standard_normal` on ``device``'s stream, keyed by ``data``:
    the fingerprint of the teachers' private data), and the headline then composes its cost.
    ``n_private`` (records the teachers learn from) decides whether delta is small enough.
    """
    answered = np.asarray(answered, dtype=bool)
    tuned = config.aggregator != "lnmax" and config.sanitize and sanitizer_tuned_on(config)
    common = ((UNPROTECTED_TUNED_CAVEAT if tuned else UNPROTECTED_CAVEAT),) + delta_caveat(config.delta, n_private) \
        + tuple(extra_caveats)
    dependent_caveat = DATA_DEPENDENT_TUNED_CAVEAT if tuned else DATA_DEPENDENT_CAVEAT
    if config.aggregator == "lnmax":
        a = lnmax_analysis(votes[answered], config.gamma, config.delta, config.moments, beta=config.beta)
        accountant = (f"moments accountant of LNMax (Papernot et al. 2016), orders l = 1..{config.moments}, "
                      f"each query (2·gamma = {2 * config.gamma:g}, 0)-DP")
        extra = (f"Smooth sensitivity of the data-dependent epsilon: {a.smooth_sensitivity:.4g} "
                 f"(beta = {config.beta:g}).",)
        data_dependent = PrivacyClaim("data-dependent (not publishable)", a.eps, config.delta, accountant,
                                      NEIGHBOURING, a.order,
                                      (DATA_DEPENDENT_CAVEAT,) + extra + _warning(a.warning) + common)
        n = int(answered.sum())
        a_priori = PrivacyClaim(f"data-independent (a priori), all {n} queries answered",
                                a.data_independent_eps, config.delta, accountant, NEIGHBOURING,
                                a.data_independent_order, _warning(a.data_independent_warning) + common,
                                headline=True, events=a_priori_events(config, n), relation=RELATION)
        return PrivacyReport(a, _with_relation((a_priori, data_dependent), config))

    realised = None
    if config.aggregator == "gnmax":
        a = gnmax_analysis(votes[answered], config.sigma, config.delta)
        what = f"GNMax, sigma = {config.sigma:g}"
    else:
        a = confident_gnmax_analysis(votes, config.threshold, config.sigma1, config.sigma2, config.delta,
                                     answered=np.ones(len(votes), dtype=bool))
        realised = confident_gnmax_analysis(votes, config.threshold, config.sigma1, config.sigma2, config.delta,
                                            answered=answered)
        what = f"Confident-GNMax, T = {config.threshold:g}, sigma1 = {config.sigma1:g}, sigma2 = {config.sigma2:g}"
    accountant = (f"Renyi DP of {what} (Papernot et al. 2018, Thm 6 for the data-dependent bound), "
                  "orders 2..500, converted with eps = RDP(lam) + ln(1/delta)/(lam-1)")
    sanitized = (sanitized_epsilon(votes, answered, config, draw_standard_normal(config, device, data=data))
                 if config.sanitize else None)
    charged = () if realised is None else (
        f"Charged: the threshold check and the GNMax step of every one of the {len(votes)} submitted queries, "
        "answered or not (an unanswered query's 'no answer' depends on the votes through both steps).",)
    data_dependent = PrivacyClaim("data-dependent (not publishable)", a.eps, config.delta, accountant, NEIGHBOURING,
                                  a.order, (dependent_caveat,) + charged + _warning(a.warning) + common)
    claims = [_a_priori_claim(a, answered, config, accountant, sanitized, common), data_dependent]
    if sanitized is not None:
        claims.append(_sanitized_claim(sanitized, config, what, claims[0].epsilon, common))
    if realised is not None:
        n_answered = int(answered.sum())
        claims.append(PrivacyClaim(
            f"realised data-dependent figure, GNMax step of the {n_answered} answered queries only (threshold "
            f"check of all {len(votes)}), as Papernot et al. 2018 report it (not a bound; not publishable)",
            realised.eps, config.delta, accountant, NEIGHBOURING, realised.order,
            (REALISED_CAVEAT, dependent_caveat) + _warning(realised.warning) + common))
        claims.append(PrivacyClaim(
            f"realised data-independent figure for the {n_answered} answered queries (privacy odometer)",
            realised.data_independent_eps, config.delta, accountant, NEIGHBOURING, realised.data_independent_order,
            (ODOMETER_CAVEAT,) + _warning(realised.data_independent_warning) + common))
    return PrivacyReport(a, _with_relation(claims, config), sanitized, realised)


def _with_relation(claims, config: PateConfig) -> tuple[PrivacyClaim, ...]:
    """``claims``, each stating its relation, a figure without events too, as a ledger reads it: replace-one, or on a
    user data set add/remove (:mod:`.user_facts`: each row's teacher from its own hash; the same moved vote)."""
    if is_user_dataset(config.dataset):
        return tuple(replace(c, neighbouring=user_facts.NEIGHBOURING, relation=user_facts.RELATION) for c in claims)
    return tuple(c if c.relation else replace(c, relation=RELATION) for c in claims)


def epsilon_basis(report: PrivacyReport) -> dict[str, dict]:
    """What each epsilon curve of a run rests on, for exports (:data:`privengine.store.EPSILON_BASIS_ARTIFACT`).

    ``{metric: {"delta": delta, "accountant": text}}`` for ``eps_data_dependent``, ``eps_data_independent`` (the
    aggregator's a-priori bound, without the sanitized release that the headline adds) and, Confident-GNMax only,
    ``eps_realised``: the curves :func:`privengine.pate.run` stores.
    """
    (dependent,) = [c for c in report.claims if c.label == "data-dependent (not publishable)"]
    kinds = {"eps_data_dependent": "data-dependent (not publishable)",
             "eps_data_independent": "data-independent, a priori (without the sanitized release, if any)"}
    if report.realised is not None:
        kinds["eps_realised"] = "realised, paper-style (not a bound)"
    return {name: {"delta": dependent.delta, "accountant": f"{dependent.accountant}; {kind}"}
            for name, kind in kinds.items()}


def _a_priori_claim(a: PateAnalysis, answered: np.ndarray, config: PateConfig, accountant: str,
                    sanitized: SanitizedEpsilon | None, common: tuple[str, ...]) -> PrivacyClaim:
    """The headline: the aggregator's data-independent bound, composed with the sanitized release if any.

    Without a release this is exactly the aggregator's bound (GNMax: ``a.data_independent_eps``;
    Confident-GNMax: :func:`confident_gnmax_a_priori_epsilon`). With one, per order
    ``a_priori_rdp(lam') + c(lam')`` over the orders where the release's cost is finite
    (``lam' < 1/(2 beta)``), the same delta. It carries the aggregator's events (:func:`a_priori_events`) without
    a release and none with one (:data:`NO_EVENTS_CAVEAT`: the release is no dp-accounting event).
    """
    n = len(answered) if config.aggregator == "confident_gnmax" else int(answered.sum())
    if config.aggregator == "gnmax":
        label = f"data-independent (a priori), all {n} queries answered"
    else:
        label = f"data-independent (a priori), every one of the {n} submitted queries charged as answered"
        accountant = f"{accountant}; every submitted query charged lam/(2 sigma1^2) + lam/sigma2^2"
    if sanitized is None:
        if config.aggregator == "gnmax":
            eps, order, warning = a.data_independent_eps, a.data_independent_order, a.data_independent_warning
        else:
            eps, order, warning = confident_gnmax_a_priori_epsilon(n, config.sigma1, config.sigma2, config.delta)
        return PrivacyClaim(label, eps, config.delta, accountant, NEIGHBOURING, order, _warning(warning) + common,
                            headline=True, events=a_priori_events(config, n), relation=RELATION)
    release = gnss_rdp_at_orders(sanitized.beta, sanitized.effective_sigma, GNMAX_ORDERS)
    eps, order, i = _best_order(a_priori_rdp(config, n, GNMAX_ORDERS) + release, GNMAX_ORDERS, config.delta)
    limit = 1.0 / (2.0 * sanitized.beta)
    caveats = ()
    if i == int(np.flatnonzero(np.isfinite(release))[-1]):
        caveats = (f"The minimum sits at the largest order searched below 1/(2 beta) = {limit:.4g}, where the "
                   "sanitized release's cost stops being finite; a larger ss_order (the limit is ss_order/0.6) or "
                   "sanitize off would let it move.",)
    return PrivacyClaim(
        f"{label}, and the sanitized data-dependent ε release", eps, config.delta,
        f"{accountant}; plus the sanitized release (GNSS, beta = {sanitized.beta:.4g}, effective sigma = "
        f"{sanitized.effective_sigma:.4g}, Papernot et al. 2018 Thm 23 or the exact worst case if larger) composed "
        f"at each order below 1/(2 beta) = {limit:.4g}",
        NEIGHBOURING, order, caveats + (NO_EVENTS_CAVEAT,) + common, headline=True)


def _sanitized_claim(s: SanitizedEpsilon, config: PateConfig, what: str, headline: float,
                     common: tuple[str, ...]) -> PrivacyClaim:
    """The sanitized data-dependent claim: ``R + c(lam) + ln(1/delta)/(lam - 1)`` at the fixed order.

    Publishable, except on the data sets whose votes chose the sanitizer's settings (:data:`SANITIZER_TUNED_ON`):
    there its label, condition and caveats say it is not covered. Its order goes in the accountant text, not in
    ``order`` (which claims print as "optimal").
    """
    charged = ("the GNMax step of every answered query" if config.aggregator == "gnmax" else
               "the threshold check and the GNMax step of every submitted query, answered or not")
    accountant = (f"data-dependent Renyi DP of {what} (Papernot et al. 2018, Thm 6) at the fixed order "
                  f"lam = {s.order:g}, released through smooth sensitivity (GNSS, App. B): published RDP "
                  f"{s.released_rdp:.4g} plus the release's own RDP {s.release_rdp:.4g}, converted with "
                  "eps = RDP + ln(1/delta)/(lam-1)")
    how = (f"How it was published: the exact data-dependent RDP f at lam = {s.order:g} ({charged}) plus "
           f"SS * ({s.shift:.3g} + N(0, 1)) * sigma_ss, sigma_ss = {s.sigma:g}, where SS is the beta-smooth "
           f"sensitivity of f (beta = {SS_BETA_TIMES_ORDER:g}/lam = {s.beta:.4g}, from the sum over queries of the "
           "per-query local-sensitivity bounds at each distance), clipped to [0, the data-independent RDP at lam]. "
           f"The shift of {s.shift:.3g} noise standard deviations makes the published figure at least the exact one "
           f"with probability {s.confidence:.3g} over that noise (not part of delta, which is the RDP conversion's "
           "alone); the release is GNSS with effective sigma "
           f"{s.effective_sigma:.4g} (the shift costs privacy too), RDP {s.release_rdp:.4g} at lam.")
    if sanitizer_tuned_on(config):
        label, first, condition = SANITIZED_TUNED_LABEL, TUNED_CAVEAT, TUNED_CONDITION
        fixed = (f"Not fixed before votes of this data set were seen: lam ({s.order_rule}), "
                 f"beta = {SS_BETA_TIMES_ORDER:g}/lam and sigma_ss ({s.sigma_rule}) were chosen by comparing exact "
                 "data-dependent epsilons of MNIST teachers' votes (docs/results/pate.md); the confidence is a knob.")
    else:
        label, first = SANITIZED_LABEL, SANITIZED_CAVEAT
        condition = (f"≥ the exact figure with probability {s.confidence:.3g}" if s.shift > 0
                     else "a median-unbiased estimate of the exact figure")
        fixed = (f"Fixed before the votes were seen, so the choices release nothing: lam ({s.order_rule}), "
                 f"beta = {SS_BETA_TIMES_ORDER:g}/lam, sigma_ss ({s.sigma_rule}) and the confidence (a knob). The "
                 "raw data-dependent figure picks its order from the votes, has no noise, shift or release cost, and "
                 "is usually smaller, but is not publishable.")
    above = ((f"Here it exceeds the a-priori headline ({headline:.3g}), which holds for every data set: rely on "
              "the headline (the data-dependent saving is small against the smooth sensitivity, which the "
              "published figure adds in noise and shift).",) if s.epsilon >= headline else ())
    return PrivacyClaim(label, s.epsilon, s.delta, accountant, NEIGHBOURING, None, (first, how, fixed) + above + common,
                        condition=condition)


def _warning(text: str | None) -> tuple[str, ...]:
    """The analysis' warning (minimum at the last order searched) as a caveat, if any."""
    return () if text is None else (text[:1].upper() + text[1:] + ".",)
