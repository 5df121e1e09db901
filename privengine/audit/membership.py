r"""Membership-inference attacks and the DP bound they are drawn under: scores, ROC, and the claim's trade-off.

Pure functions of model outputs (numpy; no torch, no mechanism): the DP-SGD driver that trains the target and its
reference models is :mod:`.membership_dpsgd`. Shapes: ``n`` examples under attack, ``R`` reference models, ``m``
population examples (RMIA), ``C`` classes; a model's outputs are logits ``z`` ``(..., n, C)``.

The game. A target model is trained on a random half of a data pool; for each pool example ``x`` the attack outputs
a score, higher meaning "member". Sweeping a threshold gives the ROC curve: TPR (members called members) against
FPR (non-members called members).

Attacks (higher score = member):

- **loss** (Yeom et al. 2018): ``s(x) = log p_theta(y | x) = -loss``: training examples have lower loss.
- **LiRA** (Carlini et al., S&P 2022) on the logit-scaled confidence of the true label,
  ``phi = log(p_y / (1 - p_y)) = z_y - logsumexp_{j != y} z_j`` (:func:`logit_confidence`, computed in that stable
  form). For each ``x``, Gaussians are fitted to ``phi`` over the reference models trained with ``x`` (IN:
  ``N(mu_in, s_in^2)``) and without it (OUT: ``N(mu_out, s_out^2)``). Online:
  ``s(x) = log N(phi_target; mu_in, s_in^2) - log N(phi_target; mu_out, s_out^2)``. Offline (OUT models only):
  ``s(x) = (phi_target - mu_out) / s_out``, a monotone transform of the paper's ``1 - Pr[Z > phi_target]``,
  ``Z ~ N(mu_out, s_out^2)`` (the same ROC, without the saturation of the probability near 1). With few reference
  models the variances are pooled over the examples (the paper's "fixed variance", which it recommends below
  about 64 models); the means stay per example.
- **RMIA** (Zarifzadeh et al., ICML 2024): ``ratio(x) = Pr(x | theta) / Pr(x)`` with ``Pr(x | theta) = p_theta(y |
  x)`` and ``Pr(x)`` the mean of ``p(y | x)`` over reference models; ``s(x) = Pr_z[ratio(x) / ratio(z) > gamma]``,
  the fraction of population examples ``z`` (here: held-out examples, never trained on by any model) that ``x``
  dominates. Online: ``Pr(x)`` over all reference models (half of them IN for each x by construction: the paper's
  ``(Pr_IN + Pr_OUT) / 2``). Offline: the paper's linear approximation ``Pr_IN(x) ~ a Pr_OUT(x) + (1 - a)``, so
  ``Pr(x) = ((1 + a) Pr_OUT(x) + (1 - a)) / 2``, applied to ``x`` and ``z`` alike; ``a`` and ``gamma`` are
  arguments (defaults a = 0.3, gamma = 1, not tuned here). For a fixed ``z`` set ``s`` is a non-decreasing function
  of ``ratio(x)``, so its ROC is that of the ratio at the resolution ``1 / m``: examples that dominate the same
  number of ``z`` (e.g. every ``z``: the strongest members, where the low-FPR end of the ROC lies) tie. The ties
  are broken by ``ratio(x)`` itself (the order a larger population would give): ``s = (count + u) / (m + 1)``,
  ``u`` in (0, 1) the rank of ``ratio(x)`` among the pool's, so ``s`` is strictly increasing in ``ratio(x)``.

The bound. If the training algorithm is (eps, delta)-DP with respect to adding or removing one example, then for
every example ``x`` and every test (any function of the target model and of anything independent of ``x``'s
membership: the reference models here are trained on halves drawn independently of the target's),
``P[guess in | x in] <= e^eps P[guess in | x out] + delta`` and, from the complement,
``P[guess out | x out] <= e^eps P[guess out | x in] + delta`` (Kairouz, Oh, Viswanath 2015), so

    TPR <= min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))         (:func:`dp_tpr_bound`)

per example; the right side is concave in FPR, so it also holds for the averages over the examples (Jensen), which
is what the ROC measures. For DP-SGD the whole family ``delta(eps)`` of the composed Poisson-subsampled Gaussian
gives the tighter ``TPR <= inf_eps min(e^eps FPR + delta(eps), 1 - e^-eps (1 - delta(eps) - FPR))``
(:func:`pld_tpr_bound`, from dp_accounting's privacy loss distribution; any finite eps grid keeps it an upper bound).

Resolution. With ``N`` non-members the empirical FPRs are ``0, 1/N, 2/N, ...``: at a level below ``1/N`` the only
threshold with FPR at most the level has FPR 0, and the TPR read there is the TPR at FPR 0, not at the level. Such a
level is below resolution (it needs ``ceil(1 / level)`` non-members, :func:`non_members_needed`): no TPR, interval
or bound check is reported at it (:func:`below_resolution`).

Confidence. At each FPR level of the grid the threshold is the one of largest TPR with empirical FPR <= the level;
the counts of true and false positives get two-sided Clopper-Pearson intervals (each end at ``(1 + confidence) /
2`` one-sided). The measured point is *consistent with the claim* when the lower end of the TPR interval is at most
the bound at the upper end of the FPR interval (:func:`roc_summary`, ``exceeds_bound``). The intervals treat the
examples' outcomes as independent trials; they share one target model, so the intervals are the usual reading of
MIA papers rather than a proof, and a violation is a reason to look for a bug, which then says so.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Mapping, Sequence

import numpy as np
from scipy.special import logsumexp

from ..errors import ConfigError
from .bounds import clopper_pearson_lower, clopper_pearson_upper

__all__ = ["ATTACK_INDEX", "ATTACKS", "CURVE_FPR", "FPR_GRID", "NOT_COVERED", "TRADEOFF_BOUNDS", "above_a_bound",
           "applied_twice", "attack_scores", "below_resolution", "check_attack", "dp_tpr_bound", "every_attack",
           "exceeds", "lira_scores", "logit_confidence", "loss_scores", "non_members_needed", "one_run_guesses",
           "passes", "pld_tpr_bound", "rdp_tpr_bound", "rmia_scores", "roc_summary", "tradeoff_fields",
           "tradeoff_of", "true_label_log_prob", "warn_if_above"]

ATTACKS = ("lira", "rmia", "loss")
FPR_GRID = (0.001, 0.01)
GLOBAL_VARIANCE_BELOW = 64  # LiRA pools the variances below this many reference models on a side (Carlini et al.)
_MIN_STD = 1e-6


def true_label_log_prob(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``log p(y | x) = z_y - logsumexp_j z_j``: logits ``(..., n, C)``, labels ``(n,)`` -> ``(..., n)``."""
    z = np.asarray(logits, dtype=np.float64)
    zy = np.take_along_axis(z, np.broadcast_to(np.asarray(labels)[:, None], z.shape[:-1] + (1,)), -1)[..., 0]
    return zy - logsumexp(z, axis=-1)


def logit_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """LiRA's ``phi = log(p_y / (1 - p_y)) = z_y - logsumexp_{j != y} z_j``: ``(..., n, C)``, ``(n,)`` -> ``(..., n)``
    (stable where ``p_y`` rounds to 1)."""
    z = np.asarray(logits, dtype=np.float64)
    onehot = np.zeros(z.shape, dtype=bool)
    np.put_along_axis(onehot, np.broadcast_to(np.asarray(labels)[:, None], z.shape[:-1] + (1,)), True, -1)
    zy = np.where(onehot, z, 0.0).sum(-1)
    return zy - logsumexp(np.where(onehot, -np.inf, z), axis=-1)


def loss_scores(target_log_prob: np.ndarray) -> np.ndarray:
    """Yeom et al.'s loss attack: the score is ``log p(y | x) = -loss``, ``(n,)`` -> ``(n,)``."""
    return np.asarray(target_log_prob, dtype=np.float64)


def _side_stats(ref: np.ndarray, side: np.ndarray, pooled: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-example mean ``(n,)`` and std ``(n,)`` of ``ref`` ``(R, n)`` over the models where ``side`` ``(R, n)`` is
    True; the std pooled over all examples when ``pooled``."""
    count = side.sum(0)
    if (count == 0).any():
        raise ValueError(f"{int((count == 0).sum())} example(s) have no reference model on one side (IN or OUT)")
    mean = np.where(side, ref, 0.0).sum(0) / count
    resid = np.where(side, ref - mean, 0.0)
    if pooled:
        dof = max(int(count.sum()) - len(count), 1)
        std = np.full(mean.shape, math.sqrt((resid ** 2).sum() / dof))
    else:
        std = np.sqrt((resid ** 2).sum(0) / np.maximum(count - 1, 1))
    return mean, np.maximum(std, _MIN_STD)


def lira_scores(target_phi: np.ndarray, ref_phi: np.ndarray, ref_in: np.ndarray, *, online: bool = True,
                pooled_variance: bool | None = None) -> np.ndarray:
    """LiRA (see the module docstring): ``target_phi`` ``(n,)``, ``ref_phi`` ``(R, n)`` and ``ref_in`` ``(R, n)``
    (reference model r trained on example i) -> scores ``(n,)``.

    ``pooled_variance`` None: pooled when a side has fewer than :data:`GLOBAL_VARIANCE_BELOW` models."""
    ref_phi, ref_in = np.asarray(ref_phi, dtype=np.float64), np.asarray(ref_in, dtype=bool)
    if pooled_variance is None:
        pooled_variance = min(ref_in.sum(0).min(), (~ref_in).sum(0).min()) < GLOBAL_VARIANCE_BELOW
    mu_out, s_out = _side_stats(ref_phi, ~ref_in, pooled_variance)
    if not online:
        return (target_phi - mu_out) / s_out
    mu_in, s_in = _side_stats(ref_phi, ref_in, pooled_variance)
    from scipy import stats  # here, as in the functions below: the registry imports this module, and scipy.stats
    # and sklearn.metrics take about a second to import, which every process paid before any attack ran

    return stats.norm.logpdf(target_phi, mu_in, s_in) - stats.norm.logpdf(target_phi, mu_out, s_out)


def _log(p) -> np.ndarray:
    return np.log(np.maximum(np.asarray(p, dtype=np.float64), np.finfo(np.float64).tiny))


def rmia_scores(target_p_x: np.ndarray, ref_p_x: np.ndarray, ref_in: np.ndarray, target_p_z: np.ndarray,
                ref_p_z: np.ndarray, *, online: bool = True, a: float = 0.3, gamma: float = 1.0) -> np.ndarray:
    """RMIA (see the module docstring): ``p(y | x)`` of the target ``(n,)`` and of the references ``(R, n)``, with
    ``ref_in`` ``(R, n)``; the same for the population, ``(m,)`` and ``(R, m)`` -> scores ``(n,)`` in (0, 1): the
    fraction of the population dominated, ties broken by the ratio."""
    ref_p_x, ref_in = np.asarray(ref_p_x, dtype=np.float64), np.asarray(ref_in, dtype=bool)
    if online:
        pr_x, pr_z = ref_p_x.mean(0), np.asarray(ref_p_z, dtype=np.float64).mean(0)
    else:
        out = ~ref_in
        if (out.sum(0) == 0).any():
            raise ValueError("offline RMIA needs an OUT reference model for every example")
        pr_x = 0.5 * ((1 + a) * np.where(out, ref_p_x, 0.0).sum(0) / out.sum(0) + (1 - a))
        pr_z = 0.5 * ((1 + a) * np.asarray(ref_p_z, dtype=np.float64).mean(0) + (1 - a))
    # probabilities that underflowed to 0 (a confidently wrong model) are floored at the smallest positive double:
    # log 0 - log 0 would be nan and sort anywhere
    log_ratio_x = _log(target_p_x) - _log(pr_x)
    log_ratio_z = np.sort(_log(target_p_z) - _log(pr_z))
    # ratio_x / ratio_z > gamma  <=>  log ratio_z < log ratio_x - log gamma
    count = np.searchsorted(log_ratio_z, log_ratio_x - math.log(gamma), side="left")
    from scipy import stats

    tie_break = stats.rankdata(log_ratio_x) / (len(log_ratio_x) + 1)  # in (0, 1), increasing in ratio(x)
    return (count + tie_break) / (len(log_ratio_z) + 1)


def dp_tpr_bound(fpr, epsilon: float, delta: float):
    """The largest TPR an (eps, delta)-DP algorithm allows at ``fpr`` (scalar or array):
    ``min(e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR))``, clipped to [0, 1] (at least FPR when eps, delta >= 0).

    >>> round(float(dp_tpr_bound(0.01, 1.0, 1e-5)), 6)   # e * 0.01 + 1e-5
    0.027193
    """
    fpr = np.asarray(fpr, dtype=np.float64)
    bound = np.minimum(np.exp(epsilon) * fpr + delta, 1.0 - np.exp(-epsilon) * (1.0 - delta - fpr))
    bound = np.clip(bound, 0.0, 1.0)
    return float(bound) if bound.ndim == 0 else bound


@functools.lru_cache(maxsize=16)
def _pld_deltas(history: tuple[tuple[float, float, int], ...], eps_max: float, points: int,
                discretization: float) -> tuple[np.ndarray, np.ndarray]:
    """``(eps, delta(eps))`` on ``points`` eps in [0, ``eps_max``] of the composed history's pessimistic PLD,
    computed once per history: an attack checks every pass and every attack against the same one (a build takes
    about half a second)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    pld = None
    for sigma, q, steps in history:
        one = pld_lib.from_gaussian_mechanism(standard_deviation=sigma, sampling_prob=q,
                                              value_discretization_interval=discretization).self_compose(steps)
        pld = one if pld is None else pld.compose(one)
    eps = np.linspace(0.0, eps_max, points)
    delta = np.asarray(pld.get_delta_for_epsilon(eps), dtype=np.float64)
    eps.setflags(write=False)
    delta.setflags(write=False)
    return eps, delta


def pld_tpr_bound(fpr, history: Sequence[tuple[float, float, int]], *, eps_max: float = 30.0, points: int = 600,
                  discretization: float = 1e-3):
    """The trade-off bound of DP-SGD's composed Poisson-subsampled Gaussian (add or remove one example) at ``fpr``
    (scalar or array): ``inf_eps min(e^eps FPR + delta(eps), 1 - e^-eps (1 - delta(eps) - FPR))`` over ``points``
    eps in [0, ``eps_max``], with ``delta(eps)`` from dp_accounting's pessimistic privacy loss distribution of the
    history ``[(sigma, q, steps), ...]`` (each entry self-composed, entries composed). Every eps of the grid gives a
    valid bound, so the grid only makes it looser, never unsound."""
    fpr = np.asarray(fpr, dtype=np.float64)
    if not history:  # nothing released
        return fpr.copy() if fpr.ndim else float(fpr)
    key = tuple((float(sigma), float(q), int(steps)) for sigma, q, steps in history)
    eps, delta = _pld_deltas(key, eps_max, points, discretization)
    bound = np.min(dp_tpr_bound(fpr.reshape(-1, 1), eps[None, :], delta[None, :]), axis=1).reshape(fpr.shape)
    return float(bound) if bound.ndim == 0 else bound


def _key(level: float) -> str:
    return f"{level:g}"


def non_members_needed(level: float | str) -> int:
    """The fewest non-members at which FPR ``level`` (a number or its key, e.g. "0.001") can be measured:
    ``ceil(1 / level)``, the smallest ``N`` with one false positive, FPR ``1/N``, at most the level.

    >>> non_members_needed("0.001"), non_members_needed(0.003)
    (1000, 334)
    """
    return math.ceil(1.0 / float(level) - 1e-9)  # 1e-9: a level written as 1/N may divide to just above N


def below_resolution(level: float | str, non_members: int) -> str | None:
    """``"below resolution (needs ≥ N non-members)"`` when ``non_members`` are too few to measure FPR ``level``
    (:func:`non_members_needed`: the TPR read there would be the one at FPR 0), else None."""
    needed = non_members_needed(level)
    return f"below resolution (needs ≥ {needed} non-members)" if non_members < needed else None


def exceeds(summary: dict, bound) -> dict[str, bool]:
    """Per FPR level a :func:`roc_summary` resolves: whether the lower end of its TPR interval is above ``bound`` (a
    vectorised ``fpr -> tpr`` bound, e.g. :func:`dp_tpr_bound` or :func:`pld_tpr_bound`) at the upper end of its FPR
    interval, i.e. the claim behind the bound is contradicted there at the intervals' confidence."""
    keys = list(summary["tpr_interval_at_fpr"])
    uppers = np.array([summary["fpr_interval_at_fpr"][k][1] for k in keys], dtype=np.float64)
    bounds = np.atleast_1d(bound(uppers))
    return {k: bool(summary["tpr_interval_at_fpr"][k][0] > float(b) + 1e-12) for k, b in zip(keys, bounds)}


def rdp_tpr_bound(fpr, orders: np.ndarray, rdp: np.ndarray, delta: float, *, deltas: np.ndarray | None = None):
    """The trade-off bound of an RDP curve ``rdp`` ``(L,)`` at ``orders`` ``(L,)`` at ``fpr`` (scalar or array):
    ``inf_d min(e^eps(d) FPR + d, 1 - e^-eps(d) (1 - d - FPR))`` over ``d`` in ``deltas`` (default: 1e-12 to 0.9
    on a log grid) and the claim's ``delta``, with ``eps(d) = min_lam rdp(lam) + ln(1/d) / (lam - 1)``, the
    conversion PATE's claims use (Mironov 2017, Prop. 3). Every ``(eps(d), d)`` is a valid DP guarantee of the same
    mechanism, so the grid only makes the bound looser, never unsound; it includes the claim's own (ε, δ)."""
    deltas = np.r_[np.logspace(-12, np.log10(0.9), 120) if deltas is None else deltas, delta]
    finite = np.isfinite(rdp)
    eps = np.min(rdp[finite][None, :] - np.log(deltas)[:, None] / (orders[finite][None, :] - 1.0), axis=1)
    fpr = np.asarray(fpr, dtype=np.float64)
    bound = np.min(dp_tpr_bound(fpr.reshape(-1, 1), eps[None, :], deltas[None, :]), axis=1).reshape(fpr.shape)
    return float(bound) if bound.ndim == 0 else bound


CURVE_FPR = np.logspace(-4, 0, 41)  # where a trade-off bound is drawn (the chart's FPR axis, 1e-4 to 1)
# the tighter bound an attack's output may carry beside the (ε, δ) one, by key prefix: DP-SGD's from the privacy
# loss distribution of its history, PATE's from the RDP of its a-priori claim
TRADEOFF_BOUNDS = {"pld": "PLD trade-off bound", "rdp": "RDP trade-off bound"}


def tradeoff_fields(prefix: str, bound) -> dict:
    """The output keys of a trade-off bound (``bound``: a vectorised ``fpr -> tpr``): ``{prefix}_bound_at_fpr`` at
    the grid's levels and ``{prefix}_bound_curve`` (``fpr``, ``tpr`` lists on :data:`CURVE_FPR`) for the chart."""
    values = np.atleast_1d(bound(np.r_[FPR_GRID, CURVE_FPR]))
    return {f"{prefix}_bound_at_fpr": {_key(a): float(b) for a, b in zip(FPR_GRID, values)},
            f"{prefix}_bound_curve": {"fpr": CURVE_FPR.tolist(), "tpr": values[len(FPR_GRID):].round(6).tolist()}}


def tradeoff_of(out: dict) -> tuple[str, str] | None:
    """``(prefix, name)`` of the trade-off bound an attack output carries (:data:`TRADEOFF_BOUNDS`), or None."""
    return next(((p, name) for p, name in TRADEOFF_BOUNDS.items() if f"{p}_bound_at_fpr" in out), None)


def applied_twice(out: Mapping) -> str:
    """What the bounds of attack output ``out`` add to their name where they are the attacked model's applied twice:
    a replace-one game (its ``neighbouring`` starts with "replace": a stored digits model) is a remove, then an add,
    so its bound is ``TPR <= b(b(FPR))``, ``b`` the model's own (group of 2); empty for add or remove (and for PATE,
    whose claim is stated for replace one)."""
    return (", applied twice (replace one: a remove, then an add)"
            if str(out.get("neighbouring", "")).startswith("replace") else "")


def above_a_bound(summary: dict) -> bool:
    """Whether an attack's summary is above its (ε, δ) bound or its trade-off bound (PLD or RDP) at some FPR level;
    a level below resolution for its ``non_members`` (when it states them) counts for nothing: outputs stored before
    those levels were left out still hold a check there."""
    non_members = summary.get("non_members")
    return any(above and (non_members is None or below_resolution(level, non_members) is None)
               for key in ("exceeds_bound", *(f"exceeds_{p}_bound" for p in TRADEOFF_BOUNDS))
               for level, above in summary.get(key, {}).items())


def roc_summary(scores: np.ndarray, is_member: np.ndarray, *, fprs: Sequence[float] = FPR_GRID,
                confidence: float = 0.95, epsilon: float | None = None, delta: float | None = None,
                bound=None) -> dict:
    """ROC, AUC and the TPR at each FPR level with Clopper-Pearson intervals; ``scores`` and ``is_member`` ``(n,)``.

    Returns a JSON-ready dict: ``auc``; ``members``, ``non_members``; ``roc`` (``fpr``, ``tpr`` lists, sklearn's
    ``roc_curve`` with its collinear points dropped); ``tpr_at_fpr`` and ``tpr_interval_at_fpr`` keyed by
    ``f"{level:g}"`` (the TPR of the threshold of largest TPR whose empirical FPR is at most the level) with the
    achieved ``fpr_at_fpr`` and its interval, ``true_positives_at_fpr``, ``false_positives_at_fpr``, at each level
    the non-members resolve; ``below_resolution_at_fpr``: the other levels, each with the non-members it needs
    (:func:`non_members_needed`), in none of those. With ``epsilon`` and ``delta`` (or a ``bound(fpr)`` callable,
    e.g. :func:`pld_tpr_bound` with its history): ``bound_at_fpr`` (the bound at every nominal level) and
    ``exceeds_bound`` (at each resolved level: the TPR interval's lower end above the bound at the FPR interval's
    upper end, the claim contradicted there).
    """
    is_member = np.asarray(is_member, dtype=bool)
    scores = np.asarray(scores, dtype=np.float64)
    if scores.shape != is_member.shape or scores.ndim != 1:
        raise ValueError(f"scores and is_member must be (n,) alike; got {scores.shape} and {is_member.shape}")
    n_pos, n_neg = int(is_member.sum()), int((~is_member).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("the attack needs members and non-members")
    from sklearn.metrics import auc, roc_curve

    fpr, tpr, _ = roc_curve(is_member, scores, drop_intermediate=False)
    level = (1.0 + confidence) / 2.0
    if bound is None and epsilon is not None:
        def bound(x):
            return dp_tpr_bound(x, epsilon, delta or 0.0)
    out: dict = {"auc": float(auc(fpr, tpr)), "members": n_pos, "non_members": n_neg, "confidence": confidence}
    for name in ("tpr_at_fpr", "tpr_interval_at_fpr", "fpr_at_fpr", "fpr_interval_at_fpr", "true_positives_at_fpr",
                 "false_positives_at_fpr", "below_resolution_at_fpr") + (
                     ("bound_at_fpr", "exceeds_bound") if bound is not None else ()):
        out[name] = {}
    for alpha in fprs:
        k = _key(alpha)
        if bound is not None:
            out["bound_at_fpr"][k] = float(bound(alpha))
        if below_resolution(alpha, n_neg):
            out["below_resolution_at_fpr"][k] = non_members_needed(alpha)
            continue
        i = int(np.searchsorted(fpr, alpha, side="right")) - 1  # the last point with fpr <= alpha (fpr[0] = 0)
        tp, fp = int(round(tpr[i] * n_pos)), int(round(fpr[i] * n_neg))
        tpr_ci = [clopper_pearson_lower(tp, n_pos, level=level), clopper_pearson_upper(tp, n_pos, level=level)]
        fpr_ci = [clopper_pearson_lower(fp, n_neg, level=level), clopper_pearson_upper(fp, n_neg, level=level)]
        out["tpr_at_fpr"][k], out["tpr_interval_at_fpr"][k] = tp / n_pos, tpr_ci
        out["fpr_at_fpr"][k], out["fpr_interval_at_fpr"][k] = fp / n_neg, fpr_ci
        out["true_positives_at_fpr"][k], out["false_positives_at_fpr"][k] = tp, fp
    if bound is not None:
        out["exceeds_bound"] = exceeds(out, bound)
    fpr, tpr, _ = roc_curve(is_member, scores)  # the curve to draw: collinear points dropped
    out["roc"] = {"fpr": fpr.round(6).tolist(), "tpr": tpr.round(6).tolist()}
    return out


# The drivers' shared pieces (membership_dpsgd, membership_pate): stream indices, the caveat, guesses, scores, passes
ATTACK_INDEX = 1_000_000  # first model index of the attack's streams: above any run's own model indices
NOT_COVERED = ("Not covered by any privacy claim: the attack trains models on the private split and reports their "
               "statistics (an operator's diagnostic; keep it with the data, do not publish it).")


def one_run_guesses(scores: np.ndarray, is_member: np.ndarray, guesses: int) -> tuple[int, int]:
    """``(r, v)``: the auditor guesses "in" for the ``r / 2`` highest scores and "out" for the ``r / 2`` lowest
    (``r = 2 floor(min(guesses, n) / 2)``, fixed before the scores are seen), ``v`` of them right."""
    order = np.argsort(np.asarray(scores), kind="stable")
    k = min(guesses, len(order)) // 2
    right = int(is_member[order[len(order) - k:]].sum()) + int((~is_member[order[:k]]).sum())
    return 2 * k, right


def attack_scores(attack: str, logits: np.ndarray, labels: np.ndarray, n: int, ref_in: np.ndarray, *,
                  offline: bool) -> np.ndarray:
    """``(n,)`` scores of the target (row 0 of ``logits`` ``(R + 1, n + m, C)``) on the pool (its first n columns)."""
    if attack == "loss":
        return loss_scores(true_label_log_prob(logits[0, :n], labels[:n]))
    if attack == "lira":
        phi = logit_confidence(logits[:, :n], labels[:n])
        return lira_scores(phi[0], phi[1:], ref_in, online=not offline)
    p = np.exp(true_label_log_prob(logits, labels))
    return rmia_scores(p[0, :n], p[1:, :n], ref_in, p[0, n:], p[1:, n:], online=not offline)


def check_attack(attack: str, reference_models: int) -> None:
    """ConfigError (naming the field) unless ``attack`` is known and has the reference models it needs (at least
    two; the loss attack needs none)."""
    if attack not in ATTACKS:
        raise ConfigError("attack", f"must be one of {', '.join(ATTACKS)}; got {attack!r}")
    if reference_models < 2 and attack != "loss":
        raise ConfigError("reference_models", f"must be at least 2 for {attack}; got {reference_models}")


def every_attack(out: dict, summary_of: Callable[[str], dict]) -> dict:
    """``all_attacks`` of an output: the AUC, TPRs (and levels below resolution) and bound checks of every attack on
    the same models, the chosen one (``out["attack"]``) from ``out``, the others from ``summary_of(name)``."""
    keys = ("auc", "tpr_at_fpr", "below_resolution_at_fpr", "exceeds_bound",
            *(f"exceeds_{p}_bound" for p in TRADEOFF_BOUNDS))
    summaries = {name: out if name == out["attack"] else summary_of(name) for name in ATTACKS}
    return {name: {k: s[k] for k in keys if k in s} for name, s in summaries.items()}


def warn_if_above(out: dict, log: Callable[[str], None], attacked: str) -> None:
    """Log a warning when an attack of ``out`` (the chosen one or another in ``all_attacks``) is above a bound."""
    if above_a_bound(out) or any(above_a_bound(other) for other in out.get("all_attacks", {}).values()):
        log(f"WARNING: an attack on the {attacked} is above a bound of its claim ((ε, δ) or its trade-off) at some "
            "FPR, beyond the confidence intervals: a bug to report in the mechanism or its accounting")


def passes(trained: int, per_pass: int) -> list[tuple[int, int]]:
    """Model ranges ``[lo, hi)`` of the passes: the target with the first references, then the others, each pass
    of an even number of references (``per_pass`` rounded down to even, at least 2; 0: all in one pass)."""
    if per_pass <= 0 or trained <= 1:
        return [(0, trained)]
    step = max(per_pass // 2 * 2, 2)
    edges = [0] + list(range(1 + step, trained, step)) + [trained]
    return list(zip(edges[:-1], edges[1:]))
