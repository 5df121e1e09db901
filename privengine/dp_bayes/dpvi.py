"""DP variational inference (Jalko, Dikmen & Honkela 2017): DP-SGD on the ELBO's per-record terms, with Opacus.

Variational family: mean-field Gaussian q(theta | z), z = (m, s) (mean and log sd per parameter, 2P).
With N the *configured* record count (``n_records``: public, fixed before seeing the data), the negative
ELBO divided by N splits into per-record terms and a data-independent rest,

    -ELBO(z) / N = (1/N) sum_i l_i(z) + r(z) / N,
    l_i(z) = -E_q[log p(y_i | x_i, theta)],   r(z) = -E_q[log p(theta)] - H(q),

each expectation a reparameterised Monte Carlo estimate (theta = m + e^s eps, L draws of eps per
record and step). One step of DP-SGD:

1. Poisson sampling: every record joins the batch independently with probability floor(q 2^24) / 2^24 <= q
   (:class:`privengine.poisson.PoissonSampler`: never above the q the accountant is given);
2. per-record gradients of l_i (Opacus' ``GradSampleModule``, functorch), each clipped to norm C, summed,
   plus N(0, sigma^2 C^2 I), divided by the expected batch size round(q N) (Opacus' ``DPOptimizer``);
3. plus grad r(z) / N, which reads no record (post-processing of the noisy iterate);
4. an Adam step, the learning rate decaying geometrically to a twentieth.

N in steps 2 and 3 is the configured count, never the length of the private data: under add/remove
neighbours the count is itself private, and a normaliser read from it would be a function of the data
outside the clipped, noised sum the accountant covers (the released z would then differ between
neighbours by more than the Gaussian mechanism's sensitivity allows). With a public N, one step is
post-processing of the noisy clipped sum, whatever the actual count (equal to N for the synthetic data).

The released z is the average of the iterates over the last quarter of the steps (post-processing).
Privacy: ``steps`` compositions of the Poisson-subsampled Gaussian mechanism (add/remove one record),
accounted by Opacus' RDP accountant; sigma is calibrated with Opacus' ``get_noise_multiplier``
(:func:`~.releases.dpvi_noise_multiplier`; under replace-one to the add/remove target of
:func:`~.privacy.add_remove_target`).

Vectorised over R independent problems (the released data set and evaluation data sets): the
parameters are (R, P) tables, each record carries its problem's index and only moves its row, so a
record's per-sample gradient, its clipping and the noise on each row are those of R separate runs
(Adam is elementwise, so the rows do not interact).
"""

from __future__ import annotations

import warnings
from typing import Callable

import torch
from opacus.grad_sample import GradSampleModule
from opacus.optimizers import DPOptimizer
from torch import nn

from privengine.poisson import PoissonSampler

from .data import Records
from .models import bernoulli_loglik, coefficient_log_prior, gaussian_loglik, log_sigma_log_prior

DTYPE = torch.float64
INIT_LOG_SD = -2.0     # data-independent start: means 0, sds e^-2
FINAL_LR_FACTOR = 0.05
AVERAGE_FRACTION = 0.25

# Opacus' backward hooks warn on every batch because the input rows need no gradient.
warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed",
                        category=UserWarning)


class RecordTerms(nn.Module):
    """l_i(z) for records of R problems: rows (B, 1 + d + 1 + L P) = (problem index, x, y, eps) -> (B,).

    Parameters ``mean`` and ``log_sd`` are (R, P); the linear model's theta is (beta, b, log sigma),
    the logistic model's (beta, b).
    """

    def __init__(self, model: str, problems: int, d: int, mc_samples: int):
        super().__init__()
        self.model, self.d, self.mc_samples = model, d, mc_samples
        self.p = d + 2 if model == "linear" else d + 1
        self.mean = nn.Parameter(torch.zeros(problems, self.p, dtype=DTYPE))
        self.log_sd = nn.Parameter(torch.full((problems, self.p), INIT_LOG_SD, dtype=DTYPE))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        d, p = self.d, self.p
        problem = rows[:, 0].long()
        x, y = rows[:, 1: d + 1], rows[:, d + 1]
        eps = rows[:, d + 2:].reshape(rows.shape[0], self.mc_samples, p)
        theta = self.mean[problem][:, None, :] + torch.exp(self.log_sd[problem])[:, None, :] * eps  # (B, L, P)
        eta = (theta[..., :d] * x[:, None, :]).sum(-1) + theta[..., d]
        if self.model == "linear":
            log_sigma = theta[..., d + 1]
            ll = gaussian_loglik((y[:, None] - eta) * torch.exp(-log_sigma), log_sigma)
        else:
            ll = bernoulli_loglik(y[:, None], eta)
        return -ll.mean(1)

    def rest(self, eps: torch.Tensor, *, prior_sd: float, sigma_prior_scale: float) -> torch.Tensor:
        """sum over problems of r(z) = -E_q[log p(theta)] - H(q) (up to a constant), from draws eps (R, L, P)."""
        theta = self.mean[:, None, :] + torch.exp(self.log_sd)[:, None, :] * eps
        flat = theta.reshape(-1, self.p)
        log_prior = coefficient_log_prior(flat[:, : self.d + 1], prior_sd)[0]
        if self.model == "linear":
            log_prior = log_prior + log_sigma_log_prior(flat[:, -1], sigma_prior_scale)[0]
        return -log_prior.sum() / self.mc_samples - self.log_sd.sum()


def _rows(datasets: list[Records]) -> torch.Tensor:
    """All problems' records as rows (sum N_r, 1 + d + 1): (problem index, x, y)."""
    return torch.cat([torch.cat([torch.full((r.n, 1), float(k), dtype=DTYPE), r.x.to(DTYPE), r.y.to(DTYPE)[:, None]], 1)
                      for k, r in enumerate(datasets)])


def fit(model: str, datasets: list[Records], *, n_records: int, noise_multiplier: float, sample_rate: float,
        steps: int, clip: float, lr: float, mc_samples: int, prior_sd: float, sigma_prior_scale: float,
        generator: torch.Generator, should_stop: Callable[[], bool] = lambda: False,
        on_step: Callable[[int, torch.Tensor], None] | None = None) -> tuple[torch.Tensor, int]:
    """DPVI on every data set at once: the released z (R, 2P) and the steps taken.

    ``n_records`` is the public N of the module docstring: the divisor round(q N) of the noisy gradient
    sum and the weight 1/N of the prior and entropy terms. The data sets' own lengths are never used
    for either (they may differ from it and from each other). ``generator`` drives the Poisson
    sampling, the Monte Carlo draws and the Gaussian noise (the mechanism's randomness).
    ``should_stop`` is polled every step; ``on_step(step, z)`` sees the iterate.
    """
    d = datasets[0].x.shape[1]
    terms = RecordTerms(model, len(datasets), d, mc_samples)
    module = GradSampleModule(terms, loss_reduction="sum", force_functorch=True)
    adam = torch.optim.Adam(terms.parameters(), lr=lr)
    optimizer = DPOptimizer(adam, noise_multiplier=noise_multiplier, max_grad_norm=clip,
                            expected_batch_size=expected_batch_size(sample_rate, n_records), loss_reduction="mean",
                            generator=generator)
    schedule = torch.optim.lr_scheduler.ExponentialLR(adam, gamma=FINAL_LR_FACTOR ** (1 / steps))
    rows = _rows(datasets)
    sampler = PoissonSampler(num_samples=len(rows), sample_rate=sample_rate, generator=generator, steps=steps)
    avg_from = int(steps * (1 - AVERAGE_FRACTION))
    total, count, done = torch.zeros(len(datasets), 2 * terms.p, dtype=DTYPE), 0, 0
    for step, batch in enumerate(sampler, start=1):
        idx = torch.as_tensor(batch, dtype=torch.long)
        eps = torch.randn(len(idx), mc_samples * terms.p, generator=generator, dtype=DTYPE)
        optimizer.zero_grad(set_to_none=True)
        module(torch.cat([rows[idx], eps], 1)).sum().backward()
        optimizer.pre_step()  # clip, sum, noise, divide by qN: p.grad is now the private data gradient
        draws = torch.randn(len(datasets), mc_samples, terms.p, generator=generator, dtype=DTYPE)
        rest = terms.rest(draws, prior_sd=prior_sd, sigma_prior_scale=sigma_prior_scale)
        for param, grad in zip((terms.mean, terms.log_sd), torch.autograd.grad(rest, (terms.mean, terms.log_sd))):
            param.grad += grad / n_records
        adam.step()
        schedule.step()
        done = step
        z = torch.cat([terms.mean, terms.log_sd], 1).detach()
        if step > avg_from:
            total += z
            count += 1
        if on_step is not None:
            on_step(step, z)
        if should_stop():
            break
    return (total / count if count else torch.cat([terms.mean, terms.log_sd], 1).detach()), done


def expected_batch_size(sample_rate: float, n: int) -> int:
    """qN rounded, at least 1: the divisor of the noisy gradient sum (Opacus' ``expected_batch_size``)."""
    return max(1, round(sample_rate * n))
