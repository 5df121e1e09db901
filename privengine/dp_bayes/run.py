"""The ``dp_bayes`` run: dispatch on the method; the exponential mechanism's pipeline.

:func:`run` sends ``ssp`` and ``dpvi`` to :mod:`.comparison`, and ``all`` (a sweep) to the exponential
pipeline and then :func:`~.comparison.run_sweep`. The exponential pipeline's stages (each reports live
and stops within about a second when asked):

1. seeded synthetic records; the reference posterior (exact for the linear model) on the CPU in float64;
2. non-private VI: Adam on the plain ELBO, started at the Laplace approximation;
3. warm-up: Adam on the sanitized utility U (entropy weight w) from the VI solution, to U's maximiser z*;
4. SGLD on f(z) ∝ exp(c U(z)), c = eps / (2 Delta_U), one chain per released draw (release mode) or per
   (epsilon, repeat) pair (sweep mode): ``burn_in`` steps, then ``steps`` more; the final states are the draws.

VI and SGLD run in float32 on the run's device (the reference and the scores in float64).
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from privengine.randomness import noise_generator

from . import chains, comparison
from .charts_data import density_table
from .coverage import Released, coverage_90, evaluate
from .config import DpBayesConfig
from .data import synthetic_records
from .kept import keep_posteriors
from .laplace import laplace_approximation
from .metrics import score
from .privacy import exponential_claim
from .reference import StopRequested, reference_posterior
from .sanitizer import sensitivity
from .user_data import records_of

BIG_STEP = 1_000_000      # chains x samples x records above which SGLD checks every step
TRACE_POINTS = 1000       # trace and utility points per SGLD run, at most
DENSITY_EVERY_S = 2.0     # seconds between refreshes of the live density chart
PROGRESS_EVERY_S = 0.5
NOISE_STREAM = 1          # stream key of the SGLD noise and its Monte Carlo samples (privengine.randomness)


class _Live:
    """Turns the stages' callbacks into metrics, artifacts, progress and stop checks."""

    def __init__(self, reporter, reference, z_vi: np.ndarray, *, total_steps: int):
        self.reporter = reporter
        self.reference = reference
        self.z_vi = z_vi
        self.total_steps = max(total_steps, 1)
        self.done = 0
        self._last_progress = self._last_density = 0.0

    def progress(self, stage: str) -> None:
        now = time.monotonic()
        if now - self._last_progress >= PROGRESS_EVERY_S:
            self._last_progress = now
            self.reporter.progress(min(self.done / self.total_steps, 1.0), stage)

    def optimiser(self, metric: str, stage: str, offset: int = 0):
        def on_report(step: int, values: torch.Tensor) -> bool:
            self.reporter.metric(offset + step, **{metric: float(values[0])})
            self.done = offset + step
            self.progress(stage)
            return self.reporter.should_stop()
        return on_report

    def sampler(self, stage: str, *, offset: int, c: torch.Tensor, labels: dict[int, str], trace_every: int):
        """SGLD callback: utility of the labelled chains, trace of chain 0, live densities."""
        sums = torch.zeros_like(c)
        since = [0, 0]  # steps summed, steps done at the previous report
        p = len(self.reference.mean)
        names = self.reference.names

        def on_report(done: int, z: torch.Tensor, log_f: torch.Tensor) -> bool:
            window = done - since[1]
            since[1] = done
            sums.add_(log_f / c * window)
            since[0] += window
            step = offset + done
            if done % trace_every == 0:
                u = (sums / since[0]).cpu().numpy()
                z0 = z[0].double().cpu().numpy()
                values = {label: float(u[i]) for i, label in labels.items()}
                values |= {f"mean_sd.{n}": (z0[j] - self.reference.mean[j]) / self.reference.sd[j]
                           for j, n in enumerate(names)}
                values |= {f"log_sd_ratio.{n}": z0[p + j] - math.log(self.reference.sd[j]) for j, n in enumerate(names)}
                self.reporter.metric(step, **values)
                sums.zero_()
                since[0] = 0
            now = time.monotonic()
            if now - self._last_density >= DENSITY_EVERY_S:
                self._last_density = now
                self.densities(z[0])
            self.done = step
            self.progress(stage)
            return self.reporter.should_stop()
        return on_report

    def densities(self, z_private: torch.Tensor) -> None:
        self.reporter.artifact("densities", density_table(self.reference, self.z_vi,
                                                          z_private.double().cpu().numpy()))


def _chain_epsilons(config: DpBayesConfig) -> list[float]:
    if config.mode == "release":
        return [config.epsilon] * config.draws
    return [e for e in config.sweep_epsilons for _ in range(config.sweep_repeats)]


def _describe(z: np.ndarray, names: tuple[str, ...]) -> dict:
    p = len(names)
    return {n: {"mean": float(z[j]), "log_sd": float(z[p + j]), "sd": math.exp(max(z[p + j], -700.0))}
            for j, n in enumerate(names)}


def run(config: DpBayesConfig, reporter) -> dict:
    if config.method in ("ssp", "dpvi"):
        return comparison.run_release(config, reporter) if config.mode == "release" else comparison.run_sweep(
            config, reporter, methods=(config.method,))
    summary = run_exponential(config, reporter)
    if config.method == "exponential" or "stopped_in" in summary:
        return summary
    return comparison.run_sweep(config, reporter, methods=tuple(m for m in config.methods if m != "exponential"),
                                exponential=summary)


def run_exponential(config: DpBayesConfig, reporter) -> dict:
    """The seed's method: one SGLD chain per released draw (release) or per (epsilon, repeat) (sweep)."""
    started = time.perf_counter()
    device = torch.device(reporter.device)
    gen = torch.Generator(device=device).manual_seed(config.seed)
    user = records_of(config) if config.is_user_dataset else None
    records = user.train if user is not None else synthetic_records(
        config.model, n=config.n_records, coefficients=config.coefficients, intercept=config.intercept,
        noise_sd=config.noise_sd, seed=config.data_seed)
    exact_model, model = chains.models_of(config, records, device)
    names = model.names
    eps_chain = _chain_epsilons(config)
    delta_u = sensitivity(config.tau, config.neighbouring)
    sgld_steps = config.burn_in + config.steps
    total = config.vi_steps + config.warmup_steps + sgld_steps
    claim = exponential_claim(config)
    charged = {"method": "exponential", "model": config.model, "privacy": [claim.to_dict()]}
    # The claim covers every draw the run plans (it is computed from the configuration alone): stored before the
    # first output (the VI curve), it is what the run is charged should its process die. With method "all", the
    # other methods' releases widen it before their first output (comparison.run_sweep).
    reporter.charge_plan(charged)

    reporter.progress(0.0, "reference posterior")
    try:
        laplace = laplace_approximation(exact_model, should_stop=reporter.should_stop)
        reference = reference_posterior(exact_model, seed=config.seed, laplace=laplace,
                                        should_stop=reporter.should_stop)
    except StopRequested:
        return {"stopped_in": "reference posterior"}
    reporter.log(f"reference posterior: {reference.method}")

    # non-private VI, started at the Laplace approximation (its optimum for a Gaussian posterior)
    live = _Live(reporter, reference, None, total_steps=total)
    z_vi, scale = chains.fit_vi(config, model, laplace, generator=gen,
                                on_report=live.optimiser("vi_elbo", "non-private VI"))
    live.z_vi = z_vi[0].double().cpu().numpy()
    vi_scores = score(live.z_vi, reference)
    if reporter.stop_was_requested:
        return {"stopped_in": "non-private VI", "vi": vi_scores.summary()}

    # private warm-up to the sanitized utility's maximiser. Its Monte Carlo samples come from the seeded
    # generator even in secure mode: the start only affects how close finite SGLD gets to the exact
    # distribution (the claim's caveat), never the exact-draw guarantee.
    z_star, utility = chains.warm_up(config, model, z_vi, scale, generator=gen,
                                     on_report=live.optimiser("utility", "warm-up (Adam on the sanitized utility)",
                                                              offset=config.vi_steps))
    if reporter.stop_was_requested:
        return {"stopped_in": "warm-up", "vi": vi_scores.summary()}

    # SGLD on exp(c U): its injected noise and Monte Carlo samples are the mechanism's randomness, keyed by the
    # private records too (privengine.randomness)
    noise = noise_generator(config, NOISE_STREAM, data=records.fingerprint, device=device)
    sampler, c = chains.sgld_sampler(config, utility, z_star, eps_chain, noise=noise)
    transform = sampler.transform
    n_chains = config.chains
    if config.mode == "release":
        labels = {0: "utility"}
    else:
        labels = {i * config.sweep_repeats: f"utility.eps={e:g}" for i, e in enumerate(config.sweep_epsilons)}
    check_every = chains.CHECK_EVERY if n_chains * config.mc_samples * config.record_count <= BIG_STEP else 1
    trace_every = check_every * max(1, sgld_steps // (TRACE_POINTS * check_every))
    offset = config.vi_steps + config.warmup_steps
    reporter.artifact("phases", {"vi_end": config.vi_steps, "warmup_end": offset,
                                 "burn_in_end": offset + config.burn_in, "end": offset + sgld_steps})
    sgld_started = time.perf_counter()
    y = torch.zeros_like(transform.center)
    y, _ = sampler.run(y, config.burn_in, report_every=check_every,
                          on_report=live.sampler("SGLD burn-in", offset=offset, c=c, labels=labels,
                                                 trace_every=trace_every))
    if reporter.stop_was_requested:
        return {"stopped_in": "SGLD burn-in", "vi": vi_scores.summary()}
    y, _ = sampler.run(y, config.steps, report_every=check_every,
                          on_report=live.sampler("SGLD sampling", offset=offset + config.burn_in, c=c,
                                                 labels=labels, trace_every=trace_every))
    if reporter.stop_was_requested:
        return {"stopped_in": "SGLD sampling", "vi": vi_scores.summary()}
    sgld_seconds = time.perf_counter() - sgld_started
    z_final = transform.forward(y).double().cpu().numpy()
    # The draws are released from here on (their densities, scores, the release or sweep table; with method
    # "all", the other methods' sweep follows): a failure from now on stores this claim (reporter.charge). The
    # SGLD trace and utility stored before are diagnostics that no claim covers (the claim's caveats say so).
    reporter.charge(charged | {"failed_during": "after the SGLD draws"})
    live.densities(torch.from_numpy(z_final[0]))
    scores = [score(z, reference) for z in z_final]
    truth = None if user is not None else comparison.truth_of(config)
    coefs = comparison.coefficient_count(config)
    evaluated = [evaluate(Released.mean_field(z), reference, truth, coefficient_count=coefs) for z in z_final]

    reporter.artifact("scores", {
        "names": list(names), "reference_mean": reference.mean, "reference_sd": reference.sd,
        "vi": {"mean_error_sd": vi_scores.mean_error_sd, "sd_ratio": vi_scores.sd_ratio, **vi_scores.summary()},
        "private": [{"mean_error_sd": s.mean_error_sd, "log_sd_ratio": s.log_sd_ratio, **s.summary()}
                    for s in scores[: min(n_chains, 10)]],
    })
    summary = {
        "method": "exponential",
        "model": config.model,
        "reference": reference.method,
        "tau": config.tau,
        "neighbouring": config.neighbouring,
        "sensitivity_delta_u": delta_u,
        "entropy_weight": config.entropy_weight,
        **{f"vi_{k}": v for k, v in vi_scores.summary().items()},
        "sgld_steps_per_s": sgld_steps / max(sgld_seconds, 1e-9),
        "sgld_chains": n_chains,
        "wall_time_s": time.perf_counter() - started,
    }
    if config.mode == "release":
        released = [_describe(z, names) for z in z_final]
        reporter.artifact("release", released)
        summary |= {
            "epsilon_per_draw": config.epsilon, "draws": config.draws,
            "predicted_mean_spread_sd": math.sqrt(2 * delta_u / config.epsilon),
            **{f"private_{k}": v for k, v in evaluated[0].items() if k != "covered"},
            **comparison.coverage_summary(evaluated, truth),
            **comparison.user_summary(user, [Released.mean_field(z) for z in z_final]),
            "released": released,
            "privacy": [claim.to_dict()],
        }
        if config.keep_model:
            keep_posteriors(reporter, config, [Released.mean_field(z) for z in z_final], names,
                            {k: v for k, v in evaluated[0].items() if k != "covered"})
    else:
        rows = [{"epsilon": e, "repeat": i % config.sweep_repeats, "data": "data set 0 (shared by every repeat)", **ev}
                for i, (e, ev) in enumerate(zip(eps_chain, evaluated))]
        reporter.artifact("sweep", {"rows": rows, "vi": vi_scores.summary(), "delta_u": delta_u})
        summary |= {
            "sweep": rows,
            "coverage": [{"epsilon": e, "coverage_90": coverage_90([r for r in rows if r["epsilon"] == e])}
                         for e in config.sweep_epsilons],
            "privacy": [claim.to_dict()],
        }
    reporter.progress(1.0, "done")
    return summary
