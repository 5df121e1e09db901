"""Runs of the ssp and dpvi methods, and the all-methods sweep: releases, scores, coverage, claims.

Problems. Data set k has data seed ``data_seed + k``; data set 0 is the run's own (the released one).

- release mode: data set 0 at ``epsilon`` is the release; data sets 1..``coverage_repeats`` are
  evaluation releases with fresh data and fresh noise, used only for ``coverage_90``;
- sweep mode: data sets 0..``sweep_repeats - 1`` at every epsilon of ``sweep_epsilons`` (fresh noise per
  release; the same data sets across epsilons, so the lines compare like with like).

Every data set gets its reference posterior; the non-private reference's own errors and coverage on
the same data sets are the charts' reference line. The exponential method (``method = all``) comes
from :func:`~.run.run_exponential`, whose repeats share data set 0 (its chains are vectorised over one
data set), which its rows say.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from privengine.accounting.subsampled_gaussian import epsilon_of, merge
from privengine.claims import PrivacyClaim
from privengine.randomness import data_fingerprint, noise_caveat, noise_generator

from . import releases as R
from .config import DpBayesConfig
from .coverage import Released, coverage_90, evaluate, reference_release
from .data import Records, synthetic_records, true_parameters
from .kept import keep_posteriors
from .models import build_model
from .privacy import (DPVI_NEIGHBOURING, EVALUATION_NOTE, add_remove_target, composition, dpvi_claim,
                      exponential_claim, replace_one_by_group_privacy, ssp_claim, with_records_caveat)
from .reference import ReferencePosterior, StopRequested, reference_posterior
from .user_data import UserRecords, held_out_scores, records_of
from .user_facts import feature_names

SSP_STREAM, DPVI_STREAM = 2, 3   # noise stream keys (privengine.randomness); the exponential uses 1
REFERENCE_METHOD = "non-private posterior"


def datasets(config: DpBayesConfig, count: int) -> list[Records]:
    """Data sets 0..count-1 (data seeds data_seed + k), float64 on the CPU."""
    return [synthetic_records(config.model, n=config.n_records, coefficients=config.coefficients,
                              intercept=config.intercept, noise_sd=config.noise_sd, seed=config.data_seed + k)
            for k in range(count)]


def references(config: DpBayesConfig, data: list[Records], should_stop) -> list[ReferencePosterior]:
    priors = dict(prior_sd=config.prior_sd, sigma_prior_scale=config.sigma_prior_scale)
    out = []
    for k, records in enumerate(data):
        if should_stop():
            raise StopRequested
        out.append(reference_posterior(build_model(config.model, records, **priors), seed=config.seed + k,
                                       should_stop=should_stop))
    return out


def truth_of(config: DpBayesConfig) -> np.ndarray:
    return np.array(true_parameters(config.model, coefficients=config.coefficients, intercept=config.intercept,
                                    noise_sd=config.noise_sd))


def describe(released: Released, names: tuple[str, ...]) -> dict:
    """The published numbers of one release, per parameter."""
    return {n: {"mean": float(released.mean[j]), "sd": float(released.sd[j]), "lower_90": float(released.lower[j]),
                "upper_90": float(released.upper[j])} for j, n in enumerate(names)}


def intervals_table(names, truth: np.ndarray | None, reference: ReferencePosterior, released: Released,
                    method: str) -> dict:
    """Per parameter: the truth, the reference's and the release's mean and 90 % interval (the page's forest plot).
    Without a truth (a stored data set's records) the reference's mean stands in its place, and ``zero`` says so."""
    ref = reference_release(reference)
    zero = "true value" if truth is not None else "non-private posterior mean"
    return {"names": list(names), "truth": (truth if truth is not None else ref.mean).tolist(), "zero": zero,
            "method": method,
            "reference": {"mean": ref.mean.tolist(), "lower": ref.lower.tolist(), "upper": ref.upper.tolist()},
            "released": {"mean": released.mean.tolist(), "lower": released.lower.tolist(),
                         "upper": released.upper.tolist()}}


def data_key(data: list[Records]) -> tuple[int, ...]:
    """The data key of a method's noise stream, which draws the releases of every data set in ``data``: the
    fingerprint of their fingerprints (:attr:`~.data.Records.fingerprint`), so a change to any record of any of
    them (data set 0's above all, the released one) gives the stream independent noise."""
    return data_fingerprint(np.array([records.fingerprint for records in data], dtype=np.uint32))


def _method_releases(config, method, data, problems, reporter, stage):
    stop = reporter.should_stop
    key = data_key(data)
    if method == "ssp":
        reporter.progress(0.0, f"{stage}: SSP release and noise-aware posterior")
        return R.ssp_releases(config, data, problems, noise_generator(config, SSP_STREAM, data=key), should_stop=stop)
    return R.dpvi_releases(config, data, problems, noise_generator(config, DPVI_STREAM, data=key), should_stop=stop,
                           on_progress=lambda f, text: reporter.progress(f, f"{stage}: {text}"))


def _claims(config: DpBayesConfig, method: str, info, epsilons: list[float], *, headline: bool, sweep: bool):
    """The claim of ``method`` on data set 0: one release per epsilon in ``epsilons`` (composed if several).

    DPVI: the releases' history is accounted under add/remove at delta' = delta / (1 + e^(E/2)), E the sum of
    the requested epsilons (:func:`~.privacy.add_remove_target`; delta' = delta under add/remove), and under
    replace-one restated by group privacy as (2 eps, (1 + e^eps) delta'), which is at most (E, delta) when
    eps <= E/2 (always for one release, by calibration); otherwise the claim states the larger delta.
    """
    noise = noise_caveat(secure=config.secure_noise)
    label = (f"{method} sweep (evaluation only): every release of data set 0 composed" if sweep else None)
    if method == "ssp":  # synthetic records only (user_facts refuses ssp on a stored data set)
        return ssp_claim(release_mus=tuple(info.mu[e] for e in epsilons), delta=config.delta,
                         neighbouring=config.neighbouring, d=len(config.coefficients), x_bound=config.x_bound,
                         y_low=config.y_low, y_high=config.y_high, noise=noise, headline=headline, label=label)
    history = merge([[(info.noise_multiplier[e], config.dpvi_sample_rate, info.steps[e])] for e in epsilons])
    requested = (sum(epsilons), config.delta)
    _, delta_ar = add_remove_target(*requested, config.neighbouring)
    eps, order = epsilon_of(history, accountant=R.DPVI_ACCOUNTANT, delta=delta_ar)
    claim = dpvi_claim(epsilon=eps, delta=delta_ar, order=order,
                      noise_multipliers=tuple(info.noise_multiplier[e] for e in epsilons),
                      sample_rate=config.dpvi_sample_rate, steps=tuple(info.steps[e] for e in epsilons),
                      clip=config.dpvi_clip, n_records=config.record_count, neighbouring=config.neighbouring,
                      requested=requested, noise=noise, headline=headline, label=label,
                      n_source="declared with the data set" if config.is_user_dataset else "n_records, public")
    return with_records_caveat(claim, config)


def run_release(config: DpBayesConfig, reporter) -> dict:
    """Release mode of ssp or dpvi: data set 0 released, ``coverage_repeats`` more for coverage_90."""
    started = time.perf_counter()
    method, names = config.method, _names(config)
    user = records_of(config) if config.is_user_dataset else None  # coverage_repeats does not apply to it
    data = [user.train] if user is not None else datasets(config, 1 + config.coverage_repeats)
    truth = None if user is not None else truth_of(config)
    try:
        refs = references(config, data, reporter.should_stop)
        problems = [(k, config.epsilon) for k in range(len(data))]
        released, info = _method_releases(config, method, data, problems, reporter, "release")
    except StopRequested:
        return {"stopped_in": method}
    if len(released) < len(problems):
        return {"stopped_in": method}
    coefs = coefficient_count(config)
    rows = [{"method": method, "epsilon": config.epsilon, "repeat": k,
             **evaluate(r, refs[k], truth, coefficient_count=coefs)} for k, r in enumerate(released)]
    own = rows[0]
    claim = _claims(config, method, info, [config.epsilon], headline=True, sweep=False)
    if len(data) > 1:  # evaluation releases on other synthetic data sets (never on a stored data set)
        claim = replace(claim, caveats=claim.caveats + (EVALUATION_NOTE,))
    # the release is stored from here on: a failure from now on stores this claim (reporter.charge), and so does
    # the death of the process (reporter.charge_plan: the whole release is made, so the plan is this claim)
    charged = {"method": method, "model": config.model, "privacy": [claim.to_dict()]}
    reporter.charge_plan(charged)
    reporter.charge(charged | {"failed_during": "after the release"})
    reporter.artifact("intervals", intervals_table(names, truth, refs[0], released[0], method))
    reporter.artifact("scores", {"names": list(names), "reference_mean": refs[0].mean, "reference_sd": refs[0].sd,
                                 "private": [{"mean_error_sd": (np.abs(released[0].mean - refs[0].mean)
                                                                / refs[0].sd).tolist(),
                                              "log_sd_ratio": (released[0].log_sd - np.log(refs[0].sd)).tolist()}]})
    summary = {
        "method": method, "model": config.model, "reference": refs[0].method, "neighbouring": config.neighbouring,
        "epsilon": config.epsilon, "delta": config.delta,
        **{f"private_{k}": v for k, v in own.items() if k not in ("method", "epsilon", "repeat", "covered")},
        **coverage_summary(rows, truth), **user_summary(user, released[:1]),
        "released": describe(released[0], names),
        **_info_summary(method, info),
        "wall_time_s": time.perf_counter() - started,
        "privacy": [claim.to_dict()],
    }
    if config.keep_model:  # the release on data set 0; the others only estimate coverage
        keep_posteriors(reporter, config, released[:1], names,
                        {k: v for k, v in own.items() if k not in ("method", "epsilon", "repeat", "covered")})
    reporter.progress(1.0, "done")
    return summary


def run_sweep(config: DpBayesConfig, reporter, *, methods: tuple[str, ...], exponential: dict | None = None) -> dict:
    """Sweep mode over ``methods`` (ssp / dpvi), merged with the exponential run's summary when given."""
    started = time.perf_counter()
    data = datasets(config, config.sweep_repeats)
    truth = truth_of(config)
    eps = list(config.sweep_epsilons)
    problems = [(k, e) for e in eps for k in range(len(data))]
    try:
        refs = references(config, data, reporter.should_stop)
        results = {m: _method_releases(config, m, data, problems, reporter, f"sweep {m}") for m in methods}
    except StopRequested:  # the exponential draws (method "all") are stored: their claim stays with the run
        return {**(exponential or {}), "stopped_in": "sweep"}
    coefs = coefficient_count(config)
    rows = [{"method": REFERENCE_METHOD, "epsilon": None, "repeat": k,
             **evaluate(reference_release(r), r, truth, coefficient_count=coefs)} for k, r in enumerate(refs)]
    for m, (released, _) in results.items():
        rows += [{"method": m, "epsilon": e, "repeat": k, **evaluate(r, refs[k], truth, coefficient_count=coefs)}
                 for (k, e), r in zip(problems, released)]
    if exponential is not None:
        rows += [{"method": "exponential", **r} for r in exponential["sweep"]]
    claims = [_claims(config, m, info, eps, headline=False, sweep=True) for m, (_, info) in results.items()]
    if exponential is not None:
        claims = [PrivacyClaim.from_dict({**c, "headline": False}) for c in exponential["privacy"]] + claims
    claims, headline = sweep_headline(config, claims)
    # every release is made: stored from here on, they are charged this (with method "all", the exponential draws'
    # claim too) should the run fail (reporter.charge) or its process die (reporter.charge_plan, which widens the
    # exponential run's plan)
    charged = {**(exponential or {}), "method": config.method, "model": config.model,
               "privacy": [headline.to_dict()] + [c.to_dict() for c in claims if len(claims) > 1]}
    reporter.charge_plan(charged)
    reporter.charge(charged | {"failed_during": "after the sweep's releases"})
    coverage = coverage_by(rows)
    private = [c for c in coverage if c["method"] != REFERENCE_METHOD]
    reference_row = next(c for c in coverage if c["method"] == REFERENCE_METHOD)
    reporter.artifact("comparison", {"rows": rows, "coverage": coverage, "names": list(_names(config)),
                                     "reference_method": REFERENCE_METHOD})
    summary = {
        **(exponential or {}),
        "method": config.method, "model": config.model, "neighbouring": config.neighbouring, "delta": config.delta,
        "sweep": rows, "coverage": private, "reference_coverage_90": reference_row["coverage_90"],
        "reference_truth_error_sd_rms": reference_row["median_truth_error_sd_rms"],
        "reference_truth_error_rms": reference_row["median_truth_error_rms"],
        "reference_truth_coef_error_rms": reference_row["median_truth_coef_error_rms"],
        **{k: v for m, (_, info) in results.items() for k, v in _info_summary(m, info).items()},
        "wall_time_s": time.perf_counter() - started + (exponential or {}).get("wall_time_s", 0.0),
        "privacy": [headline.to_dict()] + [c.to_dict() for c in claims if len(claims) > 1],
    }
    reporter.progress(1.0, "done")
    return summary


def sweep_headline(config: DpBayesConfig, claims: list[PrivacyClaim]) -> tuple[list[PrivacyClaim], PrivacyClaim]:
    """The per-method claims of a sweep, each under the config's relation, and the one headline over them.

    Claims compose only under one neighbouring relation. DPVI's claims come from :func:`_claims`
    already under the config's relation (replace-one: by group privacy from its add/remove accounting);
    an add/remove DPVI claim reaching a replace-one sweep (none does now) would be restated the same way
    here before the composition (:func:`~.privacy.composition`: tight over the parts' events at the configured
    delta when every part has events, as under add/remove; else basic, as under replace-one, where DPVI's
    restated claim has none). A single claim stays as it is.
    """
    if len(claims) == 1:
        return claims, replace(claims[0], headline=True)
    if config.neighbouring == "replace-one":
        claims = [replace_one_by_group_privacy(c) if c.neighbouring == DPVI_NEIGHBOURING else c for c in claims]
    return claims, composition(claims, label="all-methods sweep (evaluation only): every release of data set 0, "
                                             "composed across methods", delta=config.delta)


def coverage_by(rows: list[dict]) -> list[dict]:
    """coverage_90 and median errors per (method, epsilon): the sweep's summary table."""
    out = []
    for key in dict.fromkeys((r["method"], r["epsilon"]) for r in rows):
        part = [r for r in rows if (r["method"], r["epsilon"]) == key]
        out.append({"method": key[0], "epsilon": key[1], "coverage_90": coverage_90(part), "releases": len(part),
                    **{f"median_{m}": float(np.median([r[m] for r in part]))
                       for m in ("truth_error_rms", "truth_coef_error_rms", "truth_error_sd_rms", "mean_error_sd_rms",
                                 "sd_ratio_geomean", "kl")}})
    return out


def coverage_summary(rows: list[dict], truth: np.ndarray | None) -> dict:
    """``coverage_90`` of a release's evaluated ``rows`` and their count; nothing without a truth (a stored data
    set's records)."""
    return {} if truth is None else {"coverage_90": coverage_90(rows), "coverage_releases": len(rows)}


def user_summary(user: UserRecords | None, released: list[Released]) -> dict:
    """What a release on a stored data set adds to the summary: its feature names (beta_j is the j-th) and how the
    released posteriors predict the held-out rows (:func:`~.user_data.held_out_scores`); nothing otherwise."""
    if user is None:
        return {}
    return {"features": {f"beta{j + 1}": name for j, name in enumerate(user.features)},
            **held_out_scores(released, user.held_out)}


def feature_count(config: DpBayesConfig) -> int:
    """d: the synthetic generator's coefficients, or a stored data set's features (:func:`~.user_facts.feature_names`,
    public)."""
    return len(feature_names(config.dataset)) if config.is_user_dataset else len(config.coefficients)


def coefficient_count(config: DpBayesConfig) -> int:
    """Number of regression-function parameters (beta and b), the leading entries of theta."""
    return feature_count(config) + 1


def _names(config: DpBayesConfig) -> tuple[str, ...]:
    base = tuple(f"beta{j + 1}" for j in range(feature_count(config))) + ("intercept",)
    return base + ("log_sigma",) if config.model == "linear" else base


def _info_summary(method: str, info) -> dict:
    if method == "ssp":
        return {"ssp_delta_2": info.delta_2, "ssp_noise_sd": {f"{e:g}": s for e, s in info.noise_sd.items()},
                "ssp_mcmc_acceptance": info.acceptance, "ssp_clipped_fraction": info.clipped_fraction}
    return {"dpvi_noise_multiplier": {f"{e:g}": s for e, s in info.noise_multiplier.items()},
            "dpvi_steps": {f"{e:g}": s for e, s in info.steps.items()}}


def _info_of(method: str, summary: dict, epsilons: list[float]) -> R.SspInfo | R.DpviInfo | None:
    """The releases' info as :func:`_info_summary` stored it, for ``epsilons``; None if the summary has none."""
    def per_epsilon(key: str) -> dict[float, float] | None:
        stored = summary.get(key) or {}
        return {e: stored[f"{e:g}"] for e in epsilons} if all(f"{e:g}" in stored for e in epsilons) else None

    if method == "ssp":
        sd = per_epsilon("ssp_noise_sd")
        return None if sd is None else R.SspInfo({e: summary["ssp_delta_2"] / s for e, s in sd.items()}, sd,
                                                 summary["ssp_delta_2"], summary["ssp_mcmc_acceptance"],
                                                 summary["ssp_clipped_fraction"])
    sigmas, steps = per_epsilon("dpvi_noise_multiplier"), per_epsilon("dpvi_steps")
    return None if sigmas is None or steps is None else R.DpviInfo(sigmas, steps)


def stored_claims(config: dict, summary: dict) -> list[PrivacyClaim]:
    """Every claim a stored run of ``config`` may state, restated from its stored config and summary (each method's
    noise and steps as :func:`_info_summary` stored them; SSP's mu = Delta_2 / noise sd) by the functions that state
    them: the exponential draws' claim, each private method's release or sweep claim, and the sweep's headline over
    them. How the store's one-time upgrade gives the claims of runs stored before claims carried events theirs
    (:mod:`privengine.ledger.upgrade` matches them to the stored claims by label and keeps the stored caveats)."""
    cfg = DpBayesConfig.from_dict(config)
    own = [exponential_claim(cfg)] if "exponential" in cfg.methods else []
    epsilons = _epsilons(cfg)
    infos = {m: info for m in cfg.methods if m != "exponential" and (info := _info_of(m, summary, epsilons))}
    if cfg.mode == "release":
        return own + [_claims(cfg, m, info, epsilons, headline=True, sweep=False) for m, info in infos.items()]
    parts = [_claims(cfg, m, info, epsilons, headline=False, sweep=True) for m, info in infos.items()]
    if not parts:
        return own
    parts, headline = sweep_headline(cfg, [replace(c, headline=False) for c in own] + parts)
    return parts + [headline]  # parts: the exponential draws' claim (no longer the headline) among them


def planned_claims(config: DpBayesConfig) -> list[PrivacyClaim]:
    """Every claim a run of ``config`` states had it made every planned release, from the configuration alone:
    each private method's planned releases (:func:`~.releases.planned_info`: DPVI at all its steps) summarised as
    the run stores them (:func:`_info_summary`) and restated by :func:`stored_claims`, so the planned claims are the
    ones a finished run's summary gives, the exponential draws' included."""
    summary = {key: value for m in config.methods if m != "exponential"
               for key, value in _info_summary(m, R.planned_info(config, m, _epsilons(config))).items()}
    return stored_claims(config.to_dict(), summary)


def _epsilons(config: DpBayesConfig) -> list[float]:
    """The epsilons the private methods release at: ``epsilon`` (release mode) or every ``sweep_epsilons``."""
    return [config.epsilon] if config.mode == "release" else list(config.sweep_epsilons)
