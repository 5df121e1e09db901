"""The ssp and dpvi releases of a batch of problems, each problem a (data set, epsilon) pair.

Both methods are vectorised over problems: SSP releases every problem's statistics and samples all
noise-aware posteriors at once; DPVI trains every data set of one epsilon in one Opacus run (one noise
multiplier per epsilon). Each returns one :class:`~.coverage.Released` per problem, in order, and
what the claims need per epsilon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from privengine.accounting.subsampled_gaussian import calibrate_noise_multiplier

from . import dpvi, ssp
from .config import DpBayesConfig
from .coverage import Released
from .data import Records
from .privacy import add_remove_target
from .ssp_posterior import NoiseAwareTarget, noise_aware_samples

SSP_CHAINS = 4     # Metropolis chains per problem (pooled)
DPVI_ACCOUNTANT = "rdp"
PROGRESS_EVERY = 20  # DPVI steps between progress reports


@dataclass(frozen=True)
class SspInfo:
    """Per epsilon: mu of one release, the noise sd on the rescaled statistics; diagnostics of the batch."""

    mu: dict[float, float]
    noise_sd: dict[float, float]
    delta_2: float
    acceptance: float
    clipped_fraction: float


@dataclass(frozen=True)
class DpviInfo:
    """Per epsilon: the calibrated noise multiplier and the steps taken (fewer if stopped)."""

    noise_multiplier: dict[float, float]
    steps: dict[float, int]


def domain_of(config: DpBayesConfig) -> ssp.Domain:
    return ssp.Domain(config.x_bound, config.y_low, config.y_high)


def ssp_releases(config: DpBayesConfig, datasets: list[Records], problems: list[tuple[int, float]],
                 generator: torch.Generator, *, should_stop: Callable[[], bool] = lambda: False
                 ) -> tuple[list[Released], SspInfo]:
    """SSP release and noise-aware posterior of every problem (data set index, epsilon)."""
    domain = domain_of(config)
    d = datasets[0].x.shape[1]
    pairs = ssp.released_entries(d, config.neighbouring)
    vectors = [domain.record_vectors(r.x.double().cpu().numpy(), r.y.double().cpu().numpy()) for r in datasets]
    stats = np.stack([ssp.statistics(vectors[k][0]) for k, _ in problems])
    delta_2, mu, noise_sd = ssp_calibrations(config, d, sorted({e for _, e in problems}))
    sd = np.array([noise_sd[e] for _, e in problems])
    scales = domain.entry_scales(pairs, d)
    z = ssp.release(stats, pairs, sd, generator) * scales
    n_known = None if config.neighbouring == "add-remove" else torch.tensor(
        [float(datasets[k].n) for k, _ in problems], dtype=torch.float64)
    target = NoiseAwareTarget(torch.as_tensor(z), torch.as_tensor(sd[:, None] * scales), n_known, d, domain,
                              config.prior_sd, config.sigma_prior_scale)
    theta, accept = noise_aware_samples(target, steps=config.ssp_mcmc_steps, chains=SSP_CHAINS, generator=generator,
                                        should_stop=should_stop)
    info = SspInfo(mu, noise_sd, delta_2, float(accept.mean()),
                   float(np.mean([v[1] for v in vectors])))
    return [Released.samples(t) for t in theta], info


def ssp_calibrations(config: DpBayesConfig, d: int, epsilons: list[float]
                     ) -> tuple[float, dict[float, float], dict[float, float]]:
    """``(Delta_2, mu, noise sd)`` of SSP releases of ``d`` features, ``mu`` and the sd per epsilon of ``epsilons``
    (:func:`~.ssp.calibration` under the config's relation and delta)."""
    calibrated = {e: ssp.calibration(d, config.neighbouring, e, config.delta) for e in epsilons}
    delta_2 = next(iter(calibrated.values()))[0]
    return delta_2, {e: c[1] for e, c in calibrated.items()}, {e: c[2] for e, c in calibrated.items()}


def planned_info(config: DpBayesConfig, method: str, epsilons: list[float]) -> SspInfo | DpviInfo:
    """What the claims of ``method``'s releases at each of ``epsilons`` read, from the configuration alone (before
    any data): SSP's mu and noise sd (its data diagnostics, the MCMC acceptance and the clipped fraction, are NaN),
    DPVI's calibrated sigma and every one of its ``dpvi_steps`` steps (a run that stops takes fewer)."""
    if method == "ssp":
        delta_2, mu, noise_sd = ssp_calibrations(config, len(config.coefficients), epsilons)
        return SspInfo(mu, noise_sd, delta_2, math.nan, math.nan)
    return DpviInfo({e: dpvi_noise_multiplier(config, e) for e in epsilons}, {e: config.dpvi_steps for e in epsilons})


def dpvi_noise_multiplier(config: DpBayesConfig, epsilon: float) -> float:
    """sigma giving (``epsilon``, ``config.delta``) under ``config.neighbouring`` after ``dpvi_steps`` steps at rate q.

    Opacus' ``get_noise_multiplier`` (RDP, add/remove) at the add/remove target of
    :func:`~.privacy.add_remove_target`: the request itself under add/remove; (epsilon/2,
    delta/(1 + e^(epsilon/2))) under replace-one, which group privacy turns into (epsilon, delta).
    """
    target, delta = add_remove_target(epsilon, config.delta, config.neighbouring)
    return calibrate_noise_multiplier(target_epsilon=target, delta=delta,
                                      sample_rate=config.dpvi_sample_rate, steps=config.dpvi_steps,
                                      accountant=DPVI_ACCOUNTANT)


def dpvi_releases(config: DpBayesConfig, datasets: list[Records], problems: list[tuple[int, float]],
                  generator: torch.Generator, *, should_stop: Callable[[], bool],
                  on_progress: Callable[[float, str], None] = lambda f, t: None) -> tuple[list[Released], DpviInfo]:
    """DPVI release of every problem (data set index, epsilon): one vectorised Opacus run per epsilon.

    ``on_progress(fraction done, stage text)`` is called every PROGRESS_EVERY steps.
    """
    released: dict[int, Released] = {}
    sigmas, steps = {}, {}
    epsilons = sorted({e for _, e in problems})
    for done, eps in enumerate(epsilons):
        def on_step(step: int, _z, eps=eps, done=done) -> None:
            if step % PROGRESS_EVERY == 0:
                on_progress((done + step / config.dpvi_steps) / len(epsilons), f"DPVI at ε = {eps:g}")

        index = [i for i, (_, e) in enumerate(problems) if e == eps]
        sigmas[eps] = dpvi_noise_multiplier(config, eps)
        z, steps[eps] = dpvi.fit(config.model, [datasets[problems[i][0]] for i in index],
                                 n_records=config.record_count, noise_multiplier=sigmas[eps],
                                 sample_rate=config.dpvi_sample_rate,
                                 steps=config.dpvi_steps, clip=config.dpvi_clip, lr=config.dpvi_lr,
                                 mc_samples=config.mc_samples, prior_sd=config.prior_sd,
                                 sigma_prior_scale=config.sigma_prior_scale, generator=generator,
                                 should_stop=should_stop, on_step=on_step)
        for i, row in zip(index, z.numpy()):
            released[i] = Released.mean_field(row)
        if should_stop():
            break
    return [released[i] for i in sorted(released)], DpviInfo(sigmas, steps)
