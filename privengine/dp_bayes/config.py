"""Configuration of a DP Bayesian inference run (no torch import: the CLI lists it cheaply)."""

from __future__ import annotations

from dataclasses import dataclass

from privengine.config import RunConfig, knob
from privengine.errors import ConfigError

MODELS = ("linear", "logistic")
NEIGHBOURING = ("replace-one", "add-remove")
MODES = ("release", "sweep")
MAX_ELEMENTS = 20_000_000  # chains x Monte Carlo samples x records evaluated per step (memory bound)


@dataclass(frozen=True)
class DpBayesConfig(RunConfig):
    """Knobs of a ``dp_bayes`` run; defaults reproduce the seed's setting (N = 4000, tau = 4, eps = 1)."""

    model: str = knob("linear", choices=MODELS,
                      help="Bayesian linear regression (Gaussian noise, half-Cauchy prior on its scale) "
                           "or Bayesian logistic regression.")
    n_records: int = knob(4000, low=10, high=1_000_000, log=True, help="Number of synthetic records N.")
    data_seed: int = knob(0, low=0, high=2**31 - 1,
                          help="Seed of the synthetic data (the run's `seed` drives the samplers).")
    coefficients: tuple[float, ...] = knob((2.0, -3.5), low=-100.0, high=100.0, max_items=10,
                                           help="True coefficients; one feature per entry, features ~ U(-0.5, 0.5).")
    intercept: float = knob(-5.0, low=-100.0, high=100.0,
                            help="True intercept. For the logistic model pick one near 0 for balanced labels.")
    noise_sd: float = knob(0.1, low=0.0, high=100.0, low_open=True, log=True,
                           shown_when=("model", ("linear",)), help="True noise sd of the linear model.")
    prior_sd: float = knob(10.0, low=0.0, high=1e4, low_open=True, log=True,
                           help="Sd of the N(0, sd^2) prior on every coefficient and the intercept. It must be "
                                "finite: a flat prior makes the exponential mechanism's density unnormalisable.")
    sigma_prior_scale: float = knob(1.0, low=0.0, high=1e4, low_open=True, log=True,
                                    shown_when=("model", ("linear",)),
                                    help="Scale of the half-Cauchy prior on the noise sd sigma.")
    epsilon: float = knob(1.0, low=1e-3, high=1e6, log=True,
                          help="Privacy budget of one released draw (k draws cost k * epsilon).")
    tau: float = knob(4.0, low=1e-3, high=1e4, log=True,
                      help="Sanitizer bound: each record's log-likelihood l becomes tau * tanh(l / tau), "
                           "in (-tau, tau), so the utility's sensitivity is 2 tau (replace-one) or tau (add/remove).")
    entropy_weight: float = knob(1.0, low=0.0, high=1e3, low_open=True, log=True,
                                 help="Weight w of the entropy H(q) in the utility. w = 1 is the ELBO; larger w "
                                      "counters the overconfident (too small) private sds. H(q) does not depend on "
                                      "the data, so w leaves the sensitivity unchanged; w > 0 keeps the density "
                                      "normalisable.")
    neighbouring: str = knob("replace-one", choices=NEIGHBOURING,
                             help="Neighbouring datasets: replace one record (sensitivity 2 tau) or add/remove "
                                  "one record (sensitivity tau).")
    mode: str = knob("release", choices=MODES,
                     help="release: draw the private approximation(s) once. sweep: repeat the release over "
                          "several epsilons and repetitions to chart error vs epsilon (evaluation only).")
    draws: int = knob(1, low=1, high=100, shown_when=("mode", ("release",)),
                      help="Number of released draws k (independent chains); the release costs k * epsilon.")
    sweep_epsilons: tuple[float, ...] = knob((0.1, 0.3, 1.0, 3.0, 10.0), low=1e-3, high=1e6, max_items=12,
                                             shown_when=("mode", ("sweep",)), help="Epsilons of the sweep.")
    sweep_repeats: int = knob(8, low=1, high=200, shown_when=("mode", ("sweep",)),
                              help="Independent releases (chains) per epsilon in the sweep.")
    steps: int = knob(10_000, low=10, high=10_000_000, log=True,
                      help="SGLD steps after burn-in; the final state is the released draw.")
    burn_in: int = knob(2000, low=0, high=10_000_000,
                        help="SGLD steps run and discarded before the `steps` that produce the draw. The "
                             "preconditioner is fixed before them, from the warm-up maximiser z* and epsilon.")
    step_size: float = knob(0.05, low=0.0, high=1.0, low_open=True, log=True,
                            help="SGLD step h in preconditioned units (the target's sds are ~1 there).")
    warmup_steps: int = knob(1000, low=0, high=1_000_000, advanced=True,
                             help="Adam steps on the sanitized utility from the non-private VI solution (a "
                                  "data-dependent start) to its maximiser z*, where every chain starts.")
    vi_steps: int = knob(2000, low=10, high=1_000_000, advanced=True,
                         help="Adam steps of the non-private VI baseline.")
    mc_samples: int = knob(2, low=1, high=256, advanced=True,
                           help="Reparameterised samples per utility-gradient estimate (used in antithetic pairs "
                                "when even).")

    @property
    def chains(self) -> int:
        """Number of SGLD chains: one per released draw, or one per (epsilon, repeat) of a sweep."""
        return self.draws if self.mode == "release" else len(self.sweep_epsilons) * self.sweep_repeats

    def check_rules(self) -> None:
        work = self.chains * self.mc_samples * self.n_records
        if work > MAX_ELEMENTS:
            raise ConfigError("n_records", f"times chains ({self.chains}) times mc_samples ({self.mc_samples}) must be "
                                           f"at most {MAX_ELEMENTS:,} (per-step memory); got {work:,}")
