r"""Audit of a DP-Bayes release: many releases from two neighbouring data sets, a threshold test, a lower bound.

Neighbours. :mod:`.dp_bayes_neighbours` builds, per release method, the pair of data sets differing in
one worst-case record and the released statistic the test reads (higher = evidence for ``D1``).

Draws. ``releases`` independent releases from each data set, drawn in chunks by the mechanism's own code,
each data set's noise from its own generator (derived from the audit's seed):

- exponential: :mod:`privengine.dp_bayes.chains`, as a run does it: VI, the warm-up to U's maximiser z*
  (seeded with ``seed``, as in a run), then one SGLD chain per release (``burn_in + steps`` steps from
  z*); the release is the chain's final state;
- ssp: the statistics of the clipped, rescaled records plus the Gaussian noise of
  :func:`privengine.dp_bayes.ssp.release`; the noise-aware posterior is post-processing of them and is
  not drawn (it cannot show more);
- dpvi: :func:`privengine.dp_bayes.dpvi.fit` on ``chunk`` copies of the data set at once (independent
  Poisson samples, Monte Carlo draws and noise per copy), sigma calibrated as a run does.

Test. :func:`~.procedures.threshold_test` with the threshold chosen on the first half of each sample and
the bound computed on the other half (Clopper-Pearson upper bounds on both error rates, union bound):
``eps >= max(log((1 - delta - FNR)/FPR), log((1 - delta - FPR)/FNR))`` with probability >= confidence.
The bound on the releases so far is reported after every chunk; the last one is the result.

Claims. exponential: eps-DP (delta = 0) for one exact draw, replace one record; an eps-DP mechanism is
(eps, delta)-DP for every delta, so the bound is computed at ``delta``. ssp: (eps, delta)-DP exactly
(analytic Gaussian mechanism at the claim's Delta_2). dpvi: (eps, delta)-DP by Opacus' RDP accountant,
add or remove one record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from ..config import BaseConfig, knob
from ..dp_bayes.config import METHOD_LABELS, PRIVATE_METHODS, DpBayesConfig
from ..errors import ConfigError
from .interface import AuditResult, NullReporter, audit_entry

if TYPE_CHECKING:
    from ..reporter import Reporter

    from .dp_bayes_neighbours import Neighbours

AUDIT_STREAM = 13  # stream key of the audit's generators: (13, 0) for D0, (13, 1) for D1
DEFAULT_RELEASES = {"exponential": 1000, "ssp": 1_000_000, "dpvi": 800}
CHUNK = {"exponential": 250, "ssp": 1 << 18, "dpvi": 50}  # releases drawn per data set at once
_DP_BAYES = DpBayesConfig()
START_STEPS = {"vi_steps": 500, "warmup_steps": 300}  # to the chains' start z* (the quick-demo preset: 1000, 500)

CLAIM = ("DP-Bayes release guarantee of the audited method: exponential, eps-DP for one exact draw of the "
         "mean-field posterior (replace one record); ssp, (eps, delta)-DP of the noisy sufficient statistics "
         "(analytic Gaussian mechanism, replace one record); dpvi, (eps, delta)-DP of the released variational "
         "parameters (Opacus RDP accountant, add or remove one record)")


@dataclass(frozen=True)
class DpBayesAuditConfig(BaseConfig):
    """Knobs of the DP-Bayes release audit (the other DP-Bayes knobs keep their run defaults)."""

    method: str = knob("exponential", choices=PRIVATE_METHODS,
                       choice_labels={m: METHOD_LABELS[m] for m in PRIVATE_METHODS},
                       help="The release method audited (the linear model; see the DP-Bayes page).")
    epsilon: float = knob(1.0, low=1e-3, high=100.0, log=True, help="Epsilon of one release (the claim).")
    delta: float = knob(1e-5, low=0.0, high=0.1, low_open=True, log=True,
                        help="Delta of the claim (ssp, dpvi) and of the lower bound (every method).")
    n_records: int = knob(100, low=10, high=100_000, log=True,
                          help="Records of the synthetic data set; the guarantee does not depend on it, the cost "
                               "of a release does.")
    releases: int = knob(0, low=0, high=100_000_000, log=False,
                         help="Independent releases from each data set; 0 = the method's default "
                              "(exponential 1 000, ssp 1 000 000, dpvi 800: each about a minute here).")
    burn_in: int = knob(500, low=0, high=1_000_000, shown_when=("method", ("exponential",)),
                        help="SGLD burn-in steps of each chain (a run's default is 2 000).")
    steps: int = knob(1500, low=10, high=1_000_000, log=True, shown_when=("method", ("exponential",)),
                      help="SGLD steps after burn-in; the final state is the release (a run's default is 10 000).")
    dpvi_steps: int = knob(200, low=10, high=100_000, log=True, shown_when=("method", ("dpvi",)),
                           help="DP-SGD steps of each DPVI release (a run's default is 1 000); sigma is "
                                "calibrated to epsilon over them.")
    confidence: float = knob(0.95, low=0.5, high=1.0, high_open=True, help="Confidence of the lower bound.")
    seed: int = knob(0, low=0, high=2**31 - 1,
                     help="Seed of the releases' noise (and, as in a run, of the exponential method's warm-up).")

    @property
    def release_count(self) -> int:
        return self.releases or DEFAULT_RELEASES[self.method]

    def check_rules(self) -> None:
        if self.releases == 1:
            raise ConfigError("releases", "must be 0 (the method's default) or >= 2: the threshold is chosen on "
                                          "half of the releases and the bound computed on the other half")

    def dp_bayes(self) -> DpBayesConfig:
        """The DP-Bayes run config whose release is audited: the run's defaults with these knobs, under the
        method's own relation (dpvi: add/remove, where Opacus' accountant states its claim directly)."""
        return _DP_BAYES.replace(method=self.method, epsilon=self.epsilon, delta=self.delta,
                                 neighbouring="add-remove" if self.method == "dpvi" else "replace-one",
                                 n_records=self.n_records, burn_in=self.burn_in, steps=self.steps,
                                 dpvi_steps=self.dpvi_steps, seed=self.seed, device="cpu", **START_STEPS)


@dataclass(frozen=True)
class Plan:
    """How one method is audited: its claim, a draw function ``draw(which, count)`` (statistics, None when
    stopped), and what the result says about the setting."""

    claimed: float
    claim: str
    draw: Callable[[int, int], "np.ndarray | None"]
    notes: tuple[str, ...]
    details: dict


def _generators(config: DpBayesAuditConfig):
    from ..randomness import derived_generator

    return [derived_generator(config.seed, AUDIT_STREAM, which) for which in (0, 1)]


def _exponential_plan(config: DpBayesAuditConfig, run: DpBayesConfig, pair: "Neighbours", stop) -> Plan:
    import torch

    from ..dp_bayes import chains
    from ..dp_bayes.laplace import laplace_approximation

    starts = []
    for records in (pair.null, pair.alt):
        exact, model = chains.models_of(run, records, torch.device("cpu"))
        gen = torch.Generator().manual_seed(run.seed)
        z_vi, scale = chains.fit_vi(run, model, laplace_approximation(exact), generator=gen,
                                    on_report=lambda step, value: stop())
        starts.append(chains.warm_up(run, model, z_vi, scale, generator=gen, on_report=lambda step, value: stop()))
    noise = _generators(config)
    total = run.burn_in + run.steps

    def draw(which: int, count: int):
        z_star, utility = starts[which]
        sampler, _ = chains.sgld_sampler(run, utility, z_star, [run.epsilon] * count, noise=noise[which])
        y, done = sampler.run(torch.zeros_like(sampler.transform.center), total, report_every=chains.CHECK_EVERY,
                              on_report=lambda step, z, log_f: stop())
        return sampler.transform.forward(y)[:, 0].double().numpy() if done == total else None

    shift = float(starts[1][0][0, 0] - starts[0][0][0, 0])
    return Plan(run.epsilon, f"eps-DP for one exact draw (tau = {run.tau:g}, Delta_U = 2 tau, replace one record)",
                draw, (
                    "What this audits is the SGLD approximation of the claim's caveat: the claim holds for an exact "
                    "draw from f(z) ∝ exp(eps U(z) / (2 Delta_U)); each release here is the final state of a finite "
                    f"preconditioned SGLD chain ({run.burn_in} burn-in + {run.steps} steps, step {run.step_size:g}) "
                    "started at z*, the maximiser of the sanitized utility found from the data set itself (VI and "
                    f"warm-up, {run.vi_steps} and {run.warmup_steps} Adam steps, seeded with the seed as in a run). "
                    "An exact sampler would not depend on z*; a bound "
                    "above the claim would show the approximation leaks more than the claim allows.",
                    f"The warm-up's z* differs between the data sets by {shift:.4g} in the first coefficient's mean; "
                    "the chains forget it only as far as they mix.",
                    "delta: the claim is eps-DP (delta = 0), which implies (eps, delta)-DP for every delta, so the "
                    f"bound is computed at delta = {config.delta:g}.",
                ), {"z_star_shift": shift})


def _ssp_plan(config: DpBayesAuditConfig, run: DpBayesConfig, pair: "Neighbours", stop) -> Plan:
    from ..dp_bayes import ssp
    from ..dp_bayes.releases import domain_of
    from .reference import gaussian_epsilon

    domain = domain_of(run)
    d = pair.null.x.shape[1]
    pairs = ssp.released_entries(d, run.neighbouring)
    stats = [ssp.statistics(domain.record_vectors(r.x.numpy(), r.y.numpy())[0]) for r in (pair.null, pair.alt)]
    delta_2, mu, noise_sd = ssp.calibration(d, run.neighbouring, run.epsilon, run.delta)
    norm = float(np.linalg.norm(pair.direction))
    unit = pair.direction / norm
    gens = _generators(config)

    def draw(which: int, count: int):
        if stop():
            return None
        batch = np.broadcast_to(stats[which], (count,) + stats[which].shape)
        return ssp.release(batch, pairs, np.full(count, noise_sd), gens[which]) @ unit

    pair_exact = gaussian_epsilon(norm / noise_sd, run.delta)
    return Plan(run.epsilon, f"(eps, delta)-DP, analytic Gaussian mechanism, mu = {mu:.4g} (Delta_2 = {delta_2:.4g}, "
                             "replace one record)", draw, (
                    "The test reads the noisy statistics themselves; the noise-aware posterior, its samples and "
                    "intervals are post-processing of them and cannot show more.",
                    f"The records' change has L2 norm {norm:.4g} in the rescaled statistics against the claim's "
                    f"Delta_2 = {delta_2:.4g} (an upper bound no pair of records attains): this pair's exact epsilon "
                    f"is {pair_exact:.4g}, and no audit of it can exceed that, whatever the number of releases.",
                ), {"noise_sd": noise_sd, "gdp_mu_claimed": mu, "pair_mu": norm / noise_sd,
                    "pair_exact_epsilon": pair_exact, "sensitivity_claimed": delta_2, "sensitivity_pair": norm})


def _dpvi_plan(config: DpBayesAuditConfig, run: DpBayesConfig, pair: "Neighbours", stop) -> Plan:
    from ..dp_bayes import dpvi
    from ..dp_bayes.releases import dpvi_noise_multiplier

    sigma = dpvi_noise_multiplier(run, run.epsilon)
    gens = _generators(config)

    def draw(which: int, count: int):
        records = (pair.null, pair.alt)[which]
        z, done = dpvi.fit(run.model, [records] * count, n_records=run.n_records, noise_multiplier=sigma, sample_rate=run.dpvi_sample_rate,
                           steps=run.dpvi_steps, clip=run.dpvi_clip, lr=run.dpvi_lr, mc_samples=run.mc_samples,
                           prior_sd=run.prior_sd, sigma_prior_scale=run.sigma_prior_scale, generator=gens[which],
                           should_stop=stop)
        return z[:, 0].numpy() if done == run.dpvi_steps else None

    return Plan(run.epsilon, f"(eps, delta)-DP, Opacus RDP accountant: sigma = {sigma:.4g}, q = "
                             f"{run.dpvi_sample_rate:g}, {run.dpvi_steps} steps, clip {run.dpvi_clip:g} (add or remove "
                             "one record)", draw, (
                    "Black box: the audit sees only the released z (the average of the last quarter of the "
                    "iterates), not the noisy gradients of each step that the accountant covers, so it sees less "
                    "than the claim's worst case.",
                    f"Both data sets are trained with the public N = {run.n_records} (the divisor round(q N) of the "
                    "noisy sums and the weight of the prior and entropy terms), D1 holding one record more.",
                ), {"noise_multiplier": sigma})


PLANS = {"exponential": _exponential_plan, "ssp": _ssp_plan, "dpvi": _dpvi_plan}


def _test(scores: list[list[np.ndarray]], config: DpBayesAuditConfig):
    from .procedures import threshold_test  # scipy.stats: imported when an audit runs, not when the CLI starts

    return threshold_test(np.concatenate(scores[0]), np.concatenate(scores[1]), delta=config.delta,
                          confidence=config.confidence)


def run(config: DpBayesAuditConfig, reporter: "Reporter | None" = None) -> AuditResult:
    """Audit the configured DP-Bayes method (module docstring). Reports after each chunk (step = releases drawn
    per data set) ``claimed_epsilon`` and ``audited_epsilon_lower``, the bound on the releases so far."""
    from .dp_bayes_neighbours import PAIRS

    config = config.validate()
    reporter = reporter or NullReporter()
    run_config = config.dp_bayes().validate()
    reporter.progress(0.0, "neighbouring data sets")
    pair = PAIRS[config.method](run_config)
    plan = PLANS[config.method](config, run_config, pair, reporter.should_stop)
    wanted, chunk = config.release_count, CHUNK[config.method]
    reporter.progress(0.01, "releases")
    scores: list[list[np.ndarray]] = [[], []]
    done, test = 0, None
    while done < wanted and not reporter.should_stop():
        count = max(2, min(chunk, wanted - done))
        drawn = [plan.draw(which, count) for which in (0, 1)]
        if any(d is None for d in drawn):
            break
        for which in (0, 1):
            scores[which].append(drawn[which])
        done += count
        test = _test(scores, config)
        reporter.metric(done, claimed_epsilon=plan.claimed, audited_epsilon_lower=test.epsilon_lower)
        reporter.progress(min(done / wanted, 1.0), f"{done:,} of {wanted:,} releases per data set")
    stopped = done < wanted
    statistics = {f"statistic_mean_{name}": float(np.mean(np.concatenate(s))) if s else math.nan
                  for name, s in zip(("null", "alt"), scores)}
    notes = [
        f"Neighbouring data sets: {config.n_records} seeded synthetic records (Y = 2 X1 - 3.5 X2 - 5 + N(0, 0.1^2)) "
        f"with D0's record {pair.record_null} and D1's record {pair.record_alt}: the worst case of "
        "privengine.audit.dp_bayes_neighbours for this method (its docstring says why).",
        *plan.notes,
        f"{done:,} independent releases from each data set (noise from generators derived from seed "
        f"{config.seed}); statistic: the {pair.statistic}, higher for D1.",
        "Sound at the stated confidence: the threshold was chosen on the first half of each sample and the bound "
        "computed on the other half, so it exceeds the true epsilon of the implementation only if a Clopper-Pearson "
        "interval fails, with probability at most 1 - confidence.",
    ]
    if stopped:
        notes.append(f"Stopped early: {done:,} of {wanted:,} releases per data set were drawn (still sound).")
    counts = {"releases_per_data_set": done}
    details = {"release_method": config.method, "statistic": pair.statistic, "record_null": pair.record_null,
               "record_alt": pair.record_alt, **plan.details, **statistics, "stopped_early": stopped}
    if test is not None:
        counts |= test.counts()
        details |= {"gdp_mu_lower": test.mu_lower, "threshold": test.event, "selection": test.selection}
    return AuditResult(
        audit="dp-bayes-release", mechanism="dp_bayes",
        method=(f"{METHOD_LABELS[config.method]}: many-run threshold test on the {pair.statistic}, threshold chosen "
                "on half the releases, Clopper-Pearson upper bounds on both error rates (union bound); "
                "eps >= max(log((1-delta-FNR)/FPR), log((1-delta-FPR)/FNR))"),
        claim=f"{METHOD_LABELS[config.method]}: {plan.claim}", claimed_epsilon=plan.claimed,
        epsilon_lower=0.0 if test is None else test.epsilon_lower, confidence=config.confidence, delta=config.delta,
        counts=counts, notes=tuple(notes), details=details)


DP_BAYES_RELEASE_AUDIT = audit_entry(
    name="dp-bayes-release", mechanism="dp_bayes", title="DP-Bayes: one release, neighbouring data sets",
    config_cls=DpBayesAuditConfig, audit=run, claim=CLAIM,
    description=("Draws many independent releases of the chosen method (exponential mechanism by SGLD, "
                 "sufficient-statistics perturbation, or DPVI) from two data sets that differ in one worst-case "
                 "record, thresholds a statistic of the release, and turns the error rates into an epsilon lower "
                 "bound (Clopper-Pearson) beside the method's claim."),
    smoke={"releases": 40, "n_records": 60, "burn_in": 20, "steps": 30, "dpvi_steps": 20})
