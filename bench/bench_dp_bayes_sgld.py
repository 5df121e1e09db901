"""Benchmark: privengine's vectorised SGLD for the exponential mechanism vs a per-step autograd loop.

The baseline is written here from the formulas, like the seed's loop: one chain, leaf tensors
(mean, log sd) with requires_grad, one reparameterised draw theta = mean + e^{log sd} * eps per step,
the sanitized log-likelihood sum_i tau tanh(loglik_i / tau) plus the log prior and the weighted
entropy, ``backward()``, and a diagonal-preconditioned SGLD update. privengine runs the same target
exp(c U(z)) (c = eps / (4 tau)) with the same number of steps: one chain with one Monte Carlo draw
(the baseline's work per step), the default two (antithetic), and 64 chains at once. Both compute
U at a common point with common noise first, to check that they target the same density.

Run: python bench/bench_dp_bayes_sgld.py [--steps 3000] [--chains 64]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from privengine.dp_bayes.data import Records, synthetic_records  # noqa: E402
from privengine.dp_bayes.laplace import laplace_approximation  # noqa: E402
from privengine.dp_bayes.models import build_model  # noqa: E402
from privengine.dp_bayes.objective import Objective  # noqa: E402
from privengine.dp_bayes.sgld import PreconditionedSGLD, exponential_mechanism_transform  # noqa: E402

N, TAU, EPS, W, PRIOR_SD, SIGMA_SCALE, STEP = 4000, 4.0, 1.0, 1.0, 10.0, 1.0, 0.05
DTYPE = torch.float32


# --------------------------------------------------------------------------- the baseline, from the formulas

def baseline_log_f(mean: torch.Tensor, log_sd: torch.Tensor, noise: torch.Tensor, x, y, c: float) -> torch.Tensor:
    """c * U(z) for one z and one draw, with autograd-friendly torch ops (theta = (b1, b2, intercept, log sigma))."""
    theta = mean + torch.exp(log_sd) * noise
    log_sigma = theta[3]
    resid = y - (x @ theta[:2] + theta[2])
    loglik = -0.5 * (resid / torch.exp(log_sigma)) ** 2 - log_sigma - 0.5 * math.log(2 * math.pi)
    sanitized = (TAU * torch.tanh(loglik / TAU)).sum()
    coef_prior = (-0.5 * theta[:3] ** 2 / PRIOR_SD**2 - math.log(PRIOR_SD) - 0.5 * math.log(2 * math.pi)).sum()
    sigma_prior = (math.log(2 / (math.pi * SIGMA_SCALE)) - torch.log1p(torch.exp(2 * log_sigma) / SIGMA_SCALE**2)
                   + log_sigma)
    entropy = log_sd.sum() + 2 * math.log(2 * math.pi * math.e)
    return c * (sanitized + coef_prior + sigma_prior + W * entropy)


def baseline_sgld(z0: torch.Tensor, precond: torch.Tensor, x, y, c: float, steps: int, gen) -> torch.Tensor:
    mean = z0[:4].clone().requires_grad_(True)
    log_sd = z0[4:].clone().requires_grad_(True)
    m_mean, m_sd = precond[:4], precond[4:]
    for _ in range(steps):
        noise = torch.randn(4, generator=gen, dtype=DTYPE)
        lf = baseline_log_f(mean, log_sd, noise, x, y, c)
        mean.grad = log_sd.grad = None
        lf.backward()
        with torch.no_grad():
            for param, var in ((mean, m_mean), (log_sd, m_sd)):
                kick = torch.randn(4, generator=gen, dtype=DTYPE)
                param += 0.5 * STEP * var * param.grad + (STEP * var).sqrt() * kick
    return torch.cat([mean.detach(), log_sd.detach()])


# --------------------------------------------------------------------------- privengine

def privengine_sgld(utility: Objective, z_star: torch.Tensor, c: float, chains: int, steps: int, gen) -> torch.Tensor:
    cc = torch.full((chains,), c, dtype=DTYPE)
    transform = exponential_mechanism_transform(z_star.expand(chains, -1), cc, W)

    def grad_log_f(z):
        value, grad = utility.value_and_grad(z, generator=gen)
        return cc * value, cc[:, None] * grad

    sampler = PreconditionedSGLD(grad_log_f, transform=transform, step_size=STEP, generator=gen)
    y, _ = sampler.run(torch.zeros_like(transform.center), steps)
    return transform.forward(y)


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--chains", type=int, default=64)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rec = synthetic_records("linear", n=N, coefficients=(2.0, -3.5), intercept=-5.0, noise_sd=0.1, seed=0)
    lap = laplace_approximation(build_model("linear", rec, prior_sd=PRIOR_SD, sigma_prior_scale=SIGMA_SCALE))
    rec32 = Records(rec.x.to(DTYPE), rec.y.to(DTYPE))
    model = build_model("linear", rec32, prior_sd=PRIOR_SD, sigma_prior_scale=SIGMA_SCALE)
    z_star = torch.cat([lap.mode, lap.mean_field_sd.log()]).to(DTYPE)
    c = EPS / (4 * TAU)
    gen = torch.Generator().manual_seed(0)

    # same target: c U at a common point with common noise
    one = Objective(model, tau=TAU, entropy_weight=W, mc_samples=1)
    noise = one.draw_noise(1, gen)
    ours = c * float(one.value_and_grad(z_star[None], noise=noise)[0][0])
    theirs = float(baseline_log_f(z_star[:4], z_star[4:], noise[0, 0], rec32.x, rec32.y, c))
    assert math.isclose(ours, theirs, rel_tol=1e-4), (ours, theirs)
    print(f"same target: c*U = {ours:.4f} (privengine) vs {theirs:.4f} (baseline)")

    precond = exponential_mechanism_transform(z_star, torch.tensor([c], dtype=DTYPE), W).a[0] ** 2
    steps = args.steps
    t_base = timed(lambda: baseline_sgld(z_star, precond, rec32.x, rec32.y, c, steps, gen))
    runs = {
        "privengine, 1 chain, 1 draw/step": (Objective(model, tau=TAU, entropy_weight=W, mc_samples=1), 1),
        "privengine, 1 chain, 2 antithetic draws/step (default)": (Objective(model, tau=TAU, entropy_weight=W), 1),
        f"privengine, {args.chains} chains, 2 draws/step": (Objective(model, tau=TAU, entropy_weight=W), args.chains),
    }
    print(f"N = {N}, tau = {TAU}, eps = {EPS}, {steps} SGLD steps per chain, torch threads = 1")
    print(f"{'baseline per-step autograd loop (1 chain, 1 draw/step)':58s} {steps / t_base:10.0f} chain-steps/s  1.00x")
    for label, (objective, chains) in runs.items():
        t = timed(lambda: privengine_sgld(objective, z_star, c, chains, steps, gen))
        rate = chains * steps / t
        print(f"{label:58s} {rate:10.0f} chain-steps/s  {rate / (steps / t_base):.2f}x")


if __name__ == "__main__":
    main()
