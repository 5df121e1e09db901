"""The privacy claims of a ``dp_bayes`` run: what is released, under which relation, and how honestly.

Every claim that composes releases carries them as privacy events (JSON, :mod:`privengine.accounting.events`)
under the config's relation (:data:`RELATION`): an exponential-mechanism draw is a ``PureDpEvent(epsilon)``;
an SSP release the Gaussian mechanism ``GaussianDpEvent(1 / mu)`` (noise sd over the L2 sensitivity
Delta_2 under the stated relation, ``Delta_2 / mu`` over ``Delta_2``); DPVI's steps the Poisson-subsampled
Gaussians of their history (:func:`~privengine.accounting.subsampled_gaussian.history_events`). DPVI's
replace-one claim, a group-privacy conversion of its add/remove accounting, carries none
(:func:`replace_one_by_group_privacy`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from dp_accounting import dp_event

from privengine.accounting.events import PureDpEvent, compose, from_json, to_json
from privengine.accounting.gaussian import gaussian_epsilon
from privengine.accounting.subsampled_gaussian import history_events
from privengine.claims import PrivacyClaim, union_caveats
from privengine.randomness import noise_caveat

from .config import DpBayesConfig
from .sanitizer import NEIGHBOURING_TEXT, sensitivity
from .user_facts import data_caveat

#: the config's neighbouring knob -> the events' relation (a key of ``accounting.events.RELATIONS``)
RELATION = {"replace-one": "replace_one", "add-remove": "add_or_remove_one"}

EXACT_ONLY = "ε-DP for an exact draw only; the SGLD release is approximate and its δ is not bounded"
CONDITION = "exact draw only"  # the label and caveats say why: the SGLD release is approximate
ACCOUNTANT = ("exponential mechanism (McSherry & Talwar 2007): one exact draw of z from "
              "f(z) ∝ exp(ε U(z; x) / (2 Δ_U)) is ε-DP; k draws cost kε (basic composition)")


def _caveats(*, tau: float, delta_u: float, entropy_weight: float, step_size: float, steps: int,
             mc_samples: int, noise: str) -> tuple[str, ...]:
    return (
        "Approximate sampler: the draw comes from preconditioned SGLD "
        f"(step {step_size:g}, {steps} steps after burn-in, {mc_samples} Monte Carlo sample(s) per gradient), "
        "not from f exactly. A sampler whose output is within total-variation distance TV of f gives "
        "(ε, (1 + e^ε)·TV)-DP; TV is not bounded here, so the stated ε holds for an exact draw only. The chains "
        "start at the maximum of the sanitized utility, found from the private data: an exact draw does not "
        "depend on its start, a finite SGLD chain does.",
        f"Δ_U = {delta_u:g} rests on the sanitizer τ·tanh(loglik/τ) with τ = {tau:g}, which keeps each record's "
        f"term in (-τ, τ); the prior and the entropy term (weight w = {entropy_weight:g}) do not depend on the data.",
        "Only the released variational parameters z = (mean, log sd) are covered. The reference posterior, the "
        "non-private VI baseline, the SGLD trace, the utility curve and every error metric are computed from "
        "the raw data to evaluate the mechanism and are not private.",
        noise,
    )


def release_claim(*, epsilon: float, draws: int, tau: float, neighbouring: str, entropy_weight: float,
                  step_size: float, steps: int, mc_samples: int, noise: str) -> PrivacyClaim:
    """The (headline) claim of releasing ``draws`` independent draws at ``epsilon`` each.

    delta = 0 holds for exact draws only; the label says so, and never "pure DP": the
    release comes from finite SGLD, whose distance to the exact distribution is not bounded.
    """
    delta_u = sensitivity(tau, neighbouring)
    label = (EXACT_ONLY if draws == 1
             else f"{draws} draws at ε = {epsilon:g} each (kε); {EXACT_ONLY}")
    return PrivacyClaim(label, draws * epsilon, 0.0, ACCOUNTANT, NEIGHBOURING_TEXT[neighbouring], None,
                        _caveats(tau=tau, delta_u=delta_u, entropy_weight=entropy_weight, step_size=step_size,
                                 steps=steps, mc_samples=mc_samples, noise=noise), headline=True,
                        condition=CONDITION, events=(_draws(epsilon, draws),), relation=RELATION[neighbouring])


def _draws(epsilon: float, count: int) -> dict:
    """``count`` exact draws at ``epsilon`` each, as one JSON event."""
    return to_json(dp_event.SelfComposedDpEvent(PureDpEvent(epsilon), count))


def sweep_claim(*, epsilons: tuple[float, ...], repeats: int, tau: float, neighbouring: str,
                entropy_weight: float, step_size: float, steps: int, mc_samples: int, noise: str) -> PrivacyClaim:
    """The claim of a sweep: its draws are for evaluation; publishing all of them would cost their sum."""
    delta_u = sensitivity(tau, neighbouring)
    total = repeats * sum(epsilons)
    return PrivacyClaim(
        f"sweep (evaluation only): total if every draw were published; {EXACT_ONLY}", total, 0.0, ACCOUNTANT,
        NEIGHBOURING_TEXT[neighbouring], None,
        (f"The sweep draws {repeats} release(s) at each ε in {', '.join(f'{e:g}' for e in epsilons)} from the "
         "same data to chart utility against ε; none is meant for publication. Each draw alone has its own ε.",)
        + _caveats(tau=tau, delta_u=delta_u, entropy_weight=entropy_weight, step_size=step_size, steps=steps,
                   mc_samples=mc_samples, noise=noise), headline=True, condition=CONDITION,
        events=tuple(_draws(e, repeats) for e in epsilons), relation=RELATION[neighbouring])


def exponential_claim(config: DpBayesConfig) -> PrivacyClaim:
    """The claim of the exponential method's draws: :func:`release_claim` (release mode) or :func:`sweep_claim`,
    from the configuration alone (a run states it before its first output; the store's upgrade restates it)."""
    args = dict(tau=config.tau, neighbouring=config.neighbouring, entropy_weight=config.entropy_weight,
                step_size=config.step_size, steps=config.steps, mc_samples=config.mc_samples,
                noise=noise_caveat(secure=config.secure_noise))
    if config.mode == "release":
        return with_records_caveat(release_claim(epsilon=config.epsilon, draws=config.draws, **args), config)
    return sweep_claim(epsilons=config.sweep_epsilons, repeats=config.sweep_repeats, **args)


def with_records_caveat(claim: PrivacyClaim, config: DpBayesConfig) -> PrivacyClaim:
    """``claim`` with a first caveat saying where its records and N come from when ``config`` reads a stored data set
    (:func:`~.user_facts.data_caveat`); as it is for the synthetic records."""
    if not config.is_user_dataset:
        return claim
    return replace(claim, caveats=(data_caveat(config.dataset, config.private_size),) + claim.caveats)


SSP_ACCOUNTANT = ("analytic Gaussian mechanism (Balle & Wang 2018; mu-GDP, Dong, Roth & Su 2019): noise sd s on "
                  "entries of L2 sensitivity Delta_2 is mu = Delta_2 / s GDP, exactly (epsilon, delta)-DP for "
                  "delta = Phi(-epsilon/mu + mu/2) - e^epsilon Phi(-epsilon/mu - mu/2); releases compose to "
                  "sqrt(sum mu^2)-GDP")
SSP_NEIGHBOURING = {
    "replace-one": "replace one record (Delta_2 = sqrt(D + 4 O) over the rescaled statistics; N public)",
    "add-remove": "add or remove one record (Delta_2 = sqrt(E) over the rescaled statistics, N released noisily)",
}
DPVI_NEIGHBOURING = "add or remove one record (Poisson-subsampled DP-SGD steps)"
EVALUATION_NOTE = ("Evaluation releases on other synthetic data sets (data seeds data_seed + 1, ...), used only to "
                   "estimate coverage, read no record of the released data set and cost it nothing.")


def _diagnostics_caveat(what: str) -> str:
    return (f"Only {what} is covered. The reference posterior, the non-private baseline and every error and "
            "coverage figure are computed from the raw data to evaluate the mechanism and are not private.")


def ssp_claim(*, release_mus: tuple[float, ...], delta: float, neighbouring: str, d: int, x_bound: float,
              y_low: float, y_high: float, noise: str, headline: bool = True, label: str | None = None) -> PrivacyClaim:
    """The claim of SSP releases of one data set, the i-th ``release_mus[i]``-GDP: they compose to
    ``mu = sqrt(sum_i mu_i^2)``-GDP exactly, i.e. (epsilon, delta)-DP with the analytic Gaussian mechanism's
    epsilon at ``delta``; events ``GaussianDpEvent(1 / mu_i)``, one per release."""
    releases = len(release_mus)
    mu = math.sqrt(sum(m * m for m in release_mus))
    caveats = (
        f"Domain, fixed before seeing the data and part of the guarantee: each of the {d} features clipped to "
        f"[-{x_bound:g}, {x_bound:g}], the response to [{y_low:g}, {y_high:g}]; the statistics are those of the "
        "clipped records rescaled to [-1, 1]. Records outside the domain are clipped, which biases the posterior "
        "(the noise-aware model assumes none were).",
        "Everything after the noisy statistics (the noise-aware posterior, its samples, intervals) is "
        "post-processing. The posterior models the sampling distribution of y'^T y' by a Gaussian (central "
        "limit theorem) and puts a flat prior on X^T X: that affects calibration, not privacy.",
        _diagnostics_caveat("the noisy sufficient statistics and what is computed from them"),
        noise,
    )
    if neighbouring == "add-remove":
        caveats = caveats + ("Under add/remove the record count N is private too: it is released with noise "
                             "as the constant entry of X~^T X~ and is latent in the posterior.",)
    name = label or (f"{releases} SSP releases of the data set (composed)" if releases > 1
                     else "noisy sufficient statistics (SSP) and the posterior inferred from them")
    return PrivacyClaim(name, gaussian_epsilon(mu, delta), delta, f"{SSP_ACCOUNTANT}; mu = {mu:.4g}",
                        SSP_NEIGHBOURING[neighbouring], None, caveats, headline=headline,
                        events=tuple(to_json(dp_event.GaussianDpEvent(1.0 / m)) for m in release_mus),
                        relation=RELATION[neighbouring])


def add_remove_target(epsilon: float, delta: float, neighbouring: str) -> tuple[float, float]:
    """The add/remove (epsilon', delta') DPVI's noise is calibrated to, for a requested (epsilon, delta).

    Opacus accounts DP-SGD under add/remove. Under add/remove the target is the request itself. Under
    replace-one, neighbours D and D'' differ in one record x -> x''; D' = D without x is an add/remove
    neighbour of both, so an (epsilon', delta') add/remove guarantee gives, for every event S,

        P[M(D) in S] <= e^eps' P[M(D') in S] + delta'
                     <= e^eps' (e^eps' P[M(D'') in S] + delta') + delta'
                     =  e^(2 eps') P[M(D'') in S] + (1 + e^eps') delta',

    i.e. (2 eps', (1 + e^eps') delta') under replace-one (group privacy of size 2). Solving
    2 eps' = epsilon and (1 + e^eps') delta' = delta gives

        eps' = epsilon / 2,   delta' = delta / (1 + e^(epsilon / 2)),

    so that SSP and the exponential mechanism (calibrated to replace-one epsilon directly) and DPVI get
    the same budget. Opacus' calibration lands eps_acc in [eps' - 0.01, eps'] at delta'; then
    2 eps_acc <= epsilon and (1 + e^eps_acc) delta' <= delta.

    >>> add_remove_target(2.0, 1e-5, "add-remove")
    (2.0, 1e-05)
    >>> e, d = add_remove_target(2.0, 1e-5, "replace-one"); round(e, 6), round(d * (1 + math.exp(1.0)), 12)
    (1.0, 1e-05)
    """
    if neighbouring == "add-remove":
        return epsilon, delta
    half = epsilon / 2
    return half, delta / (1 + math.exp(half))


def dpvi_claim(*, epsilon: float, delta: float, order: float | None, noise_multipliers: tuple[float, ...],
               sample_rate: float, steps: tuple[int, ...], clip: float, n_records: int, neighbouring: str,
               requested: tuple[float, float], noise: str, headline: bool = True,
               label: str | None = None, n_source: str = "n_records, public") -> PrivacyClaim:
    """The claim of one DPVI run per entry of ``noise_multipliers`` on one data set (Opacus RDP, composed).

    ``epsilon``, ``delta`` and ``order`` are the add/remove accountant's (at the delta' of
    :func:`add_remove_target`); ``requested`` is the (epsilon, delta) asked for, summed over the runs.
    Under replace-one the claim is restated by :func:`replace_one_by_group_privacy` as
    (2 epsilon, (1 + e^epsilon) delta) and states the requested delta when that bounds it: within
    calibration tolerance, the requested (epsilon, delta) itself. Under add/remove it carries the steps as
    events (``history_events`` of ``(sigma_i, sample_rate, steps_i)``); the replace-one restatement carries none.
    ``n_source`` says where the public N = ``n_records`` comes from (the config, or a stored data set's declaration).
    """
    runs = len(noise_multipliers)
    want_eps, want_delta = requested
    caveats = [
        f"DP-SGD on the ELBO's per-record terms: per-record gradients clipped to C = {clip:g}, Gaussian noise "
        f"multiplier(s) sigma = {', '.join(f'{s:.4g}' for s in noise_multipliers)}, Poisson sampling rate "
        f"q = {sample_rate:g}, {', '.join(map(str, steps))} step(s). The prior and entropy terms read no record and "
        "are added after the noise; the released z averages the last iterates (post-processing).",
        f"The divisor round(q N) of the noisy gradient sum and the weight 1/N of the prior and entropy terms use "
        f"the configured N = {n_records} ({n_source}), not the number of records in the private data, "
        "which under add/remove is itself private.",
        _diagnostics_caveat("the released variational parameters z"),
        noise,
    ]
    if neighbouring == "replace-one":
        caveats.append(f"Calibrated for replace-one: sigma is chosen so that the add/remove accountant gives at most "
                       f"(epsilon/2, delta/(1 + e^(epsilon/2))) for the requested (epsilon, delta) = "
                       f"({want_eps:g}, {want_delta:g}); group privacy over the removal and addition that replace "
                       "a record then gives (epsilon, delta).")
    name = label or (f"{runs} DPVI runs on the data set (composed)" if runs > 1
                     else "the released variational posterior (DPVI)")
    accountant = ("Opacus RDP accountant (Mironov, Talwar & Zhang 2019) over the Poisson-subsampled Gaussian "
                  "steps" + (f" of {runs} runs composed" if runs > 1 else ""))
    history = [(sigma, sample_rate, n) for sigma, n in zip(noise_multipliers, steps, strict=True)]
    claim = PrivacyClaim(name, epsilon, delta, accountant, DPVI_NEIGHBOURING, order, tuple(caveats),
                         headline=headline, events=(to_json(history_events(history)),),
                         relation=RELATION["add-remove"])
    return replace_one_by_group_privacy(claim, delta_bound=want_delta) if neighbouring == "replace-one" else claim


def replace_one_by_group_privacy(claim: PrivacyClaim, *, delta_bound: float | None = None) -> PrivacyClaim:
    """An add/remove claim (epsilon, delta) restated for replace-one neighbours: (2 epsilon, (1 + e^epsilon) delta).

    Replacing a record is removing it and adding another, so group privacy over the two steps gives
    P[M(D) in S] <= e^eps (e^eps P[M(D') in S] + delta) + delta (see :func:`add_remove_target`).
    ``delta_bound``: the delta stated instead when it is at least (1 + e^epsilon) delta (a larger delta
    is a weaker, still valid claim), so a run calibrated to a requested delta states that delta.

    The restated claim carries no events: it is a conversion of one (epsilon, delta) pair, not a composition
    of releases, and its add/remove events would recompute the add/remove epsilon, not this one. Ledgers and
    sweeps compose it by its (epsilon, delta); a caveat says so.

    >>> c = replace_one_by_group_privacy(PrivacyClaim("x", 1.0, 1e-5, "acc", DPVI_NEIGHBOURING))
    >>> round(c.epsilon, 6), round(c.delta, 10), c.neighbouring.startswith("replace one record")
    (2.0, 3.71828e-05, True)
    >>> replace_one_by_group_privacy(PrivacyClaim("x", 1.0, 1e-5, "acc", DPVI_NEIGHBOURING), delta_bound=4e-5).delta
    4e-05
    """
    eps, delta = claim.epsilon, claim.delta
    group_delta = (1 + math.exp(eps)) * delta
    stated = delta_bound if delta_bound is not None and delta_bound >= group_delta else group_delta
    note = (f"Restated for replace-one by group privacy: the accountant gives epsilon = {eps:.4g}, delta = {delta:.3g} "
            "under add/remove; replacing one record is a removal and an addition, so under replace-one the "
            f"guarantee is (2 epsilon, (1 + e^epsilon) delta) = ({2 * eps:.4g}, {group_delta:.3g})"
            + (f", stated with delta = {stated:g} >= {group_delta:.3g}." if stated != group_delta else ".")
            + " A conversion, not a composition of releases: this claim carries no privacy events, so a ledger or "
              "a sweep composes it by its (epsilon, delta).")
    return replace(claim, epsilon=2 * eps, delta=stated,
                   accountant=claim.accountant + "; group privacy of size 2 (add/remove to replace-one)",
                   neighbouring="replace one record (group privacy of size 2 from add/remove)",
                   caveats=claim.caveats + (note,), events=(), relation="replace_one")


def composition(claims: list[PrivacyClaim], *, label: str, delta: float) -> PrivacyClaim:
    """The headline over several methods' claims on the same data.

    When every part carries events under one relation: their union, composed tightly at ``delta``
    (:func:`privengine.accounting.events.compose`: PLD, pure draws as PLDs of their privacy parameters, else RDP
    with the pure draws' epsilons added), the accountant it names. Otherwise basic composition: epsilons and
    deltas add, no events, and a caveat names the parts without events. Inherits the condition "exact draw only"
    when any part has it.
    """
    condition = next((c.condition for c in claims if c.condition), None)
    caveats = union_caveats(claims)
    neighbouring = "; ".join(dict.fromkeys(c.neighbouring for c in claims))
    parts = "; ".join(f"{c.label}: {c.statement()}" for c in claims)
    relations = {c.relation for c in claims}
    if all(c.events for c in claims) and len(relations) == 1:
        (relation,) = relations
        events = tuple(e for c in claims for e in c.events)
        tight = compose([from_json(e) for e in events], delta=delta, relation=relation)
        return PrivacyClaim(label, tight.epsilon, delta, f"{tight.accountant}, over the privacy events of: {parts}",
                            neighbouring, None, caveats, headline=True, condition=condition, events=events,
                            relation=relation)
    without = [c.label for c in claims if not c.events]
    why = (f"Basic composition: {', '.join(without)} carr{'ies' if len(without) == 1 else 'y'} no privacy events"
           if without else "Basic composition: the parts' events are stated under different relations")
    return PrivacyClaim(label, sum(c.epsilon for c in claims), sum(c.delta for c in claims),
                        f"basic composition (epsilons and deltas add) of: {parts}", neighbouring, None,
                        caveats + (why + ", so they are composed by their (epsilon, delta), not tightly.",),
                        headline=True, condition=condition)
