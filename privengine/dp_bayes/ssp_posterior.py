"""The noise-aware posterior of the linear model given SSP's noisy statistics (Bernstein & Sheldon 2019).

Everything here is post-processing of the released vector Z (:mod:`.ssp`): it never touches a record.

Model. theta = (w, l): w = (beta_1..beta_d, b) (p = d + 1 entries), sigma = e^l, with the exact
model's priors (N(0, prior_sd^2) on w, half-Cauchy on sigma). With the response centred at c
(w' = w - c e_d, e_d the intercept's unit vector) and A = X~^T X~ (p, p), the statistics
s = (X~^T y', y'^T y') given A and theta have the exact first two moments

    mean = (A w',  w'^T A w' + N sigma^2)
    cov  = [[sigma^2 A,         2 sigma^2 A w'                    ],
            [2 sigma^2 w'^T A,  4 sigma^2 w'^T A w' + 2 N sigma^4 ]],     N = A_dd,

and are modelled as Gaussian with them: X~^T y' given A is exactly Gaussian, y'^T y' (a scaled
noncentral chi-square with N degrees of freedom) is approximated by the central limit theorem, as
Bernstein & Sheldon do. A itself is latent: a flat prior over the matrices a data set in the domain
can produce (positive definite, |A_jk| <= A_dd b_j b_k), with A_dd = N known under replace-one and
latent under add/remove. The release adds independent N(0, s_e^2) to every released entry e (in the
data's units, :mod:`.ssp`), so with s integrated out analytically

    log p(theta, A | Z) = log p(theta) + log N(Z_xx | vech A, diag s_xx^2)
                          + log N(Z_s | mean, cov + diag s_s^2) + const.

Sampler. Adaptive random-walk Metropolis (Haario, Saksman & Tamminen 2001), vectorised over problems
and chains: during the first half of the steps the proposal covariance is re-estimated at the end of
each round from that round's states (scaled by 2.38^2 / D) and its scale is tuned towards acceptance
0.234 (Robbins-Monro); the second half runs with the proposal fixed (a valid Metropolis chain) and is
kept, thinned. Written here because no installed library samples a batch of small, different targets
at once; its output is tested against brute-force importance sampling of the same density.

State layout, per chain: u = (w (p), l, a (L)) with a the latent entries of A in the order of
:func:`latent_pairs`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from .models import coefficient_log_prior, log_sigma_log_prior
from .reference import StopRequested
from .ssp import Domain, released_entries

TARGET_ACCEPT = 0.234
ADAPT_ROUNDS = 6
KEEP_PER_CHAIN = 500
MAX_ABS_LOG_SIGMA = 30.0
DTYPE = torch.float64
STOP_CHECK_EVERY = 25  # Metropolis steps between stop checks


def latent_pairs(d: int, neighbouring: str) -> np.ndarray:
    """Index pairs (L, 2) of the latent entries of A (j <= k <= d): all but (d, d) = N under replace-one."""
    pairs = released_entries(d, neighbouring)
    return pairs[pairs[:, 1] <= d]


@dataclass
class NoiseAwareTarget:
    """log p(theta, A | Z) for B independent problems (one row of ``z`` each).

    Args:
        z: released entries (B, E) in the data's units, in the order of :func:`~.ssp.released_entries`.
        noise_sd: their noise sds (B, E).
        n_known: N (B,) under replace-one (None under add/remove: A_dd is latent).
    """

    z: torch.Tensor
    noise_sd: torch.Tensor
    n_known: torch.Tensor | None
    d: int
    domain: Domain
    prior_sd: float
    sigma_prior_scale: float

    def __post_init__(self):
        neighbouring = "add-remove" if self.n_known is None else "replace-one"
        pairs = released_entries(self.d, neighbouring)
        self.latent = torch.as_tensor(latent_pairs(self.d, neighbouring))
        self.p = self.d + 1
        is_s = torch.as_tensor(pairs[:, 1] == self.p)
        self.z_xx, self.z_s = self.z[:, ~is_s], self.z[:, is_s]
        self.sd_xx, self.sd_s = self.noise_sd[:, ~is_s], self.noise_sd[:, is_s]
        b = torch.as_tensor(self.domain.bounds(self.d)[: self.p], dtype=DTYPE)
        self.box = b[:, None] * b[None, :]  # |A_jk| <= A_dd b_j b_k

    @property
    def dim(self) -> int:
        return self.p + 1 + len(self.latent)

    def matrix(self, a: torch.Tensor) -> torch.Tensor:
        """A (B, p, p) from its latent entries a (B, L) (and N where known)."""
        big = torch.zeros(a.shape[0], self.p, self.p, dtype=DTYPE)
        if self.n_known is not None:
            big[:, self.d, self.d] = self.n_known
        j, k = self.latent[:, 0], self.latent[:, 1]
        big[:, j, k] = a
        big[:, k, j] = a
        return big

    def log_density(self, u: torch.Tensor) -> torch.Tensor:
        """log p(theta, A | Z) up to a constant (B,), -inf outside the support."""
        p, d = self.p, self.d
        w, log_sigma, a = u[:, :p], u[:, p], u[:, p + 1:]
        big = self.matrix(a)
        n = big[:, d, d]
        _, info = torch.linalg.cholesky_ex(big)
        ok = (info == 0) & (big.abs() <= n[:, None, None] * self.box).flatten(1).all(1)
        ok &= log_sigma.abs() <= MAX_ABS_LOG_SIGMA
        wc = w.clone()
        wc[:, d] -= self.domain.centre
        aw = (big @ wc[:, :, None])[:, :, 0]
        quad = (wc * aw).sum(1)
        s2 = torch.exp(2 * log_sigma.clamp(-MAX_ABS_LOG_SIGMA, MAX_ABS_LOG_SIGMA))
        mean = torch.cat([aw, (quad + n * s2)[:, None]], 1)
        cov = torch.zeros(u.shape[0], p + 1, p + 1, dtype=DTYPE)
        cov[:, :p, :p] = s2[:, None, None] * big
        cov[:, :p, p] = cov[:, p, :p] = 2 * s2[:, None] * aw
        cov[:, p, p] = 4 * s2 * quad + 2 * n * s2**2
        cov += torch.diag_embed(self.sd_s**2)
        chol, info_s = torch.linalg.cholesky_ex(cov)
        ok &= info_s == 0
        chol = torch.where(ok[:, None, None], chol, torch.eye(p + 1, dtype=DTYPE))
        r = torch.linalg.solve_triangular(chol, (self.z_s - mean)[:, :, None], upper=False)[:, :, 0]
        ll_s = -0.5 * r.square().sum(1) - torch.log(torch.diagonal(chol, dim1=1, dim2=2)).sum(1)
        ll_xx = -0.5 * ((self.z_xx - a) / self.sd_xx).square().sum(1)
        prior = coefficient_log_prior(w, self.prior_sd)[0] + log_sigma_log_prior(log_sigma, self.sigma_prior_scale)[0]
        value = prior + ll_s + ll_xx
        return torch.where(ok & torch.isfinite(value), value, torch.full_like(value, -math.inf))

    def plug_in(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A feasible start u0 (B, D) from the noisy statistics taken as exact, and rough scales (B, D).

        A0: the noisy matrix with eigenvalues floored and entries clipped to the box; where that is not
        feasible, the diagonal matrix of features spread uniformly over the domain, with w0 = 0.
        """
        p, d = self.p, self.d
        a0 = self.z_xx.clone()
        n0 = self.matrix(a0)[:, d, d].clamp_min(1.0)
        if self.n_known is None:
            a0[:, -1] = n0  # (d, d) is the last latent pair under add/remove
        big = self.matrix(a0)
        vals, vecs = torch.linalg.eigh(big)
        big = (vecs * vals.clamp_min(1e-6 * n0[:, None])[:, None, :]) @ vecs.transpose(1, 2)
        big = torch.maximum(torch.minimum(big, n0[:, None, None] * self.box), -n0[:, None, None] * self.box)
        a0 = big[:, self.latent[:, 0], self.latent[:, 1]]
        wc = torch.linalg.solve(big, self.z_s[:, :p, None])[:, :, 0]
        rss = (self.z_s[:, p] - (wc * self.z_s[:, :p]).sum(1)).clamp_min(1e-6 * n0)
        w0 = wc.clone()
        w0[:, d] += self.domain.centre
        log_sigma0 = 0.5 * torch.log(rss / n0)
        u0 = torch.cat([w0, log_sigma0[:, None], a0], 1)
        bad = ~torch.isfinite(self.log_density(u0))
        if bad.any():
            b = torch.as_tensor(self.domain.bounds(d)[:p], dtype=DTYPE)
            safe = torch.diag_embed(n0[:, None] * (b**2 / 3).where(torch.arange(p) < d, torch.ones(p, dtype=DTYPE)))
            fallback = torch.cat([torch.zeros_like(w0), torch.full_like(log_sigma0, math.log(self.domain.half_width))
                                  [:, None], safe[:, self.latent[:, 0], self.latent[:, 1]]], 1)
            u0 = torch.where(bad[:, None], fallback, u0)
            big = torch.where(bad[:, None, None], safe, big)
        inv = torch.linalg.inv(big)
        sn2 = self.sd_s[:, :p].square().amax(1, keepdim=True) + self.sd_xx.square().amax(1, keepdim=True) * (
            wc.square().sum(1, keepdim=True))
        spread = sn2 * (inv @ inv).diagonal(dim1=1, dim2=2)
        w_scale = (spread + torch.exp(2 * log_sigma0)[:, None] * inv.diagonal(dim1=1, dim2=2)).sqrt()
        scale = torch.cat([w_scale, torch.full_like(log_sigma0, 0.2)[:, None],
                           self.sd_xx], 1)
        return u0, scale


def adaptive_metropolis(target: NoiseAwareTarget, u0: torch.Tensor, scale: torch.Tensor, *, steps: int,
                        generator: torch.Generator, keep: int = KEEP_PER_CHAIN,
                        should_stop: Callable[[], bool] = lambda: False) -> tuple[torch.Tensor, torch.Tensor]:
    """Samples (B, K, D) of ``target`` from chains started at u0 (B, D) and their acceptance rates (B,).

    Raises :class:`~.reference.StopRequested` when ``should_stop()`` (polled every STOP_CHECK_EVERY steps) says so.

    Proposal: u' = u + lambda L xi, xi ~ N(0, I); L starts as diag(scale) 2.38 / sqrt(D) and is
    re-estimated ADAPT_ROUNDS times during the first half of the steps; the second half is kept,
    thinned to at most ``keep`` states per chain.
    """
    b, dim = u0.shape
    u, lp = u0.clone(), target.log_density(u0)
    chol = torch.diag_embed(scale * 2.38 / math.sqrt(dim))
    log_lam = torch.zeros(b, dtype=DTYPE)
    adapt = steps // 2
    round_len = max(adapt // ADAPT_ROUNDS, 1)

    count = [0]

    def step(u, lp, lam):
        count[0] += 1
        if count[0] % STOP_CHECK_EVERY == 0 and should_stop():
            raise StopRequested
        xi = torch.randn(b, dim, generator=generator, dtype=DTYPE)
        prop = u + lam[:, None] * (chol @ xi[:, :, None])[:, :, 0]
        lp_prop = target.log_density(prop)
        log_ratio = torch.nan_to_num(lp_prop - lp, nan=-math.inf)
        accept_prob = torch.exp(log_ratio.clamp(max=0.0))
        accept = torch.rand(b, generator=generator, dtype=DTYPE) < accept_prob
        return torch.where(accept[:, None], prop, u), torch.where(accept, lp_prop, lp), accept, accept_prob

    for _ in range(ADAPT_ROUNDS):
        states, accepted = [], torch.zeros(b, dtype=DTYPE)
        for t in range(round_len):
            u, lp, acc, prob = step(u, lp, torch.exp(log_lam))
            log_lam += (prob - TARGET_ACCEPT) / math.sqrt(t + 1)
            states.append(u)
            accepted += acc
        hist = torch.stack(states, 1)
        centred = hist - hist.mean(1, keepdim=True)
        cov = centred.transpose(1, 2) @ centred / max(round_len - 1, 1)
        prop_cov = cov * 2.38**2 / dim + 1e-10 * torch.diag_embed(cov.diagonal(dim1=1, dim2=2))
        new_chol, info = torch.linalg.cholesky_ex(prop_cov)
        adopt = (info == 0) & (accepted / round_len > 0.05)
        chol = torch.where(adopt[:, None, None], new_chol, chol)
        log_lam = torch.where(adopt, torch.zeros_like(log_lam), log_lam)
    kept_steps = steps - adapt
    thin = max(1, kept_steps // keep)
    samples, accepted = [], torch.zeros(b, dtype=DTYPE)
    lam = torch.exp(log_lam)
    for t in range(kept_steps):
        u, lp, acc, _ = step(u, lp, lam)
        accepted += acc
        if (t + 1) % thin == 0:
            samples.append(u)
    return torch.stack(samples, 1), accepted / max(kept_steps, 1)


def noise_aware_samples(target: NoiseAwareTarget, *, steps: int, chains: int, generator: torch.Generator,
                        should_stop: Callable[[], bool] = lambda: False) -> tuple[np.ndarray, np.ndarray]:
    """theta samples (B, chains * K, p + 1) of every problem, and the mean acceptance rate per problem (B,)."""
    u0, scale = target.plug_in()
    rep = lambda t: t.repeat_interleave(chains, 0)  # noqa: E731
    chain_target = NoiseAwareTarget(rep(target.z), rep(target.noise_sd),
                                    None if target.n_known is None else rep(target.n_known), target.d,
                                    target.domain, target.prior_sd, target.sigma_prior_scale)
    samples, accept = adaptive_metropolis(chain_target, rep(u0), rep(scale), steps=steps, generator=generator,
                                          should_stop=should_stop)
    b = target.z.shape[0]
    theta = samples[:, :, : target.p + 1].reshape(b, -1, target.p + 1)
    return theta.numpy(), accept.reshape(b, chains).mean(1).numpy()
