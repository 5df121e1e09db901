"""Configuration of a DP Bayesian inference run (no torch import: the CLI lists it cheaply)."""

from __future__ import annotations

from dataclasses import dataclass

from privengine.config import (MIN_SAMPLE_RATE, RunConfig, check_stored_only, declared_private_size_knob,
                               keep_model_knob, knob)
from privengine.datasets import private_part
from privengine.errors import ConfigError

from . import user_facts

DATASETS = (user_facts.SYNTHETIC,)  # the built-in one: the synthetic generator
MODELS = ("linear", "logistic")
NEIGHBOURING = ("replace-one", "add-remove")
MODES = ("release", "sweep")
METHODS = ("exponential", "ssp", "dpvi", "all")
METHOD_LABELS = {"exponential": "exponential mechanism (seed)",
                 "ssp": "sufficient-statistics perturbation (noise-aware)",
                 "dpvi": "DP variational inference (DP-SGD)", "all": "all three (sweep mode only)"}
PRIVATE_METHODS = ("exponential", "ssp", "dpvi")
LINEAR_ONLY = ("ssp",)
MAX_ELEMENTS = 20_000_000  # chains x Monte Carlo samples x records evaluated per step (memory bound)


@dataclass(frozen=True)
class DpBayesConfig(RunConfig):
    """Knobs of a ``dp_bayes`` run; defaults reproduce the seed's setting (N = 4000, tau = 4, eps = 1)."""

    method: str = knob("exponential", choices=METHODS, choice_labels=METHOD_LABELS,
                       help="exponential: the seed's exponential mechanism over a mean-field Gaussian (SGLD draw). "
                            "ssp: release noisy X^T X, X^T y, y^T y (Gaussian mechanism) and infer the posterior "
                            "given them, modelling the noise (linear model only). dpvi: DP-SGD on the ELBO's "
                            "per-record terms (Opacus). all: every method side by side (sweep mode only).")
    model: str = knob("linear", choices=MODELS,
                      choice_labels={"linear": "linear regression", "logistic": "logistic regression"},
                      help="Bayesian linear regression (Gaussian noise, half-Cauchy prior on its scale) "
                           "or Bayesian logistic regression.")
    dataset: str = knob(user_facts.SYNTHETIC, choices=DATASETS, user_datasets=True,
                        unkeyed_default=True,
                        help="synthetic: records drawn from the generator below; or the name of a table you stored "
                             "(python -m privengine data add) with a binary label: the logistic model on its "
                             "columns scaled by their public bounds (categories one-hot), exponential or dpvi, "
                             "release mode; each private row is held out with probability 0.2 (a hash of the row "
                             "and data_seed) to score the release.")
    private_size: int = declared_private_size_knob(
        "dpvi's divisor is round(q N).", built_in="0 (the synthetic records' size is n_records)")
    n_records: int = knob(4000, low=10, high=1_000_000, log=True, shown_when=("dataset", (user_facts.SYNTHETIC,)),
                          help="Number of synthetic records N.")
    data_seed: int = knob(0, low=0, high=2**31 - 1,
                          help="Seed of the synthetic data, or of a stored data set's held-out split (the run's "
                               "`seed` drives the samplers).")
    coefficients: tuple[float, ...] = knob((2.0, -3.5), low=-100.0, high=100.0, max_items=10,
                                           shown_when=("dataset", (user_facts.SYNTHETIC,)),
                                           help="True coefficients; one feature per entry, features ~ U(-0.5, 0.5).")
    intercept: float = knob(-5.0, low=-100.0, high=100.0, shown_when=("dataset", (user_facts.SYNTHETIC,)),
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
                             choice_labels={"replace-one": "replace one record",
                                            "add-remove": "add or remove one record"},
                             help="Neighbouring datasets: replace one record (sensitivity 2 tau) or add/remove "
                                  "one record (sensitivity tau).")
    delta: float = knob(1e-5, low=0.0, high=0.1, low_open=True, log=True,
                        shown_when=("method", ("ssp", "dpvi", "all")),
                        help="delta of the (epsilon, delta) guarantee of ssp (analytic Gaussian mechanism) and "
                             "dpvi (Opacus RDP accountant); the exponential mechanism has delta = 0.")
    x_bound: float = knob(0.5, low=0.0, high=1e4, low_open=True, log=True, shown_when=("method", ("ssp", "all")),
                          help="ssp domain: every feature is clipped to [-x_bound, x_bound] before the statistics "
                               "are computed (the synthetic features are U(-0.5, 0.5)). Part of the guarantee.")
    y_low: float = knob(-10.0, low=-1e4, high=1e4, shown_when=("method", ("ssp", "all")),
                        help="ssp domain: lower clip bound of the response y (public, fixed before seeing the data).")
    y_high: float = knob(0.0, low=-1e4, high=1e4, shown_when=("method", ("ssp", "all")),
                         help="ssp domain: upper clip bound of the response y; must exceed y_low. The statistics "
                              "use y - (y_low + y_high) / 2, so the sensitivity grows with the half-width.")
    ssp_mcmc_steps: int = knob(6000, low=200, high=1_000_000, log=True, advanced=True,
                               shown_when=("method", ("ssp", "all")),
                               help="Metropolis steps of the noise-aware posterior (half adapt the proposal and are "
                                    "discarded, half are kept). Post-processing: no privacy cost.")
    dpvi_steps: int = knob(1000, low=10, high=1_000_000, log=True, shown_when=("method", ("dpvi", "all")),
                           help="DP-SGD steps of dpvi (each on a Poisson sample of the records).")
    dpvi_sample_rate: float = knob(0.05, low=MIN_SAMPLE_RATE, high=1.0, log=True,
                                   shown_when=("method", ("dpvi", "all")),
                                   help="Poisson sampling rate q of dpvi: each record joins each step's batch "
                                        "independently with probability floor(q 2^24) / 2^24, at most q.")
    dpvi_clip: float = knob(20.0, low=0.0, high=1e6, low_open=True, log=True, shown_when=("method", ("dpvi", "all")),
                            help="Per-record clipping norm C of the ELBO term's gradient in dpvi.")
    dpvi_lr: float = knob(0.1, low=0.0, high=10.0, low_open=True, log=True, advanced=True,
                          shown_when=("method", ("dpvi", "all")), help="Adam learning rate of dpvi.")
    coverage_repeats: int = knob(20, low=0, high=500, shown_when=("mode", ("release",)),
                                 help="Synthetic records only (not used with a stored data set). ssp / dpvi "
                                      "release: extra evaluation releases, each on a fresh synthetic data set (data "
                                      "seeds data_seed + 1, ...) with fresh noise, to estimate coverage_90. They "
                                      "touch no record of the released data set. The exponential method's coverage "
                                      "uses its `draws`.")
    mode: str = knob("release", choices=MODES,
                     choice_labels={"release": "release once", "sweep": "sweep over ε (evaluation only)"},
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
    keep_model: bool = keep_model_knob()

    @property
    def chains(self) -> int:
        """Number of SGLD chains: one per released draw, or one per (epsilon, repeat) of a sweep."""
        return self.draws if self.mode == "release" else len(self.sweep_epsilons) * self.sweep_repeats

    @property
    def is_user_dataset(self) -> bool:
        """Whether the records are a stored user data set's (:mod:`.user_facts`), not the synthetic generator's
        (:func:`private_part.is_user_dataset`)."""
        return private_part.is_user_dataset(self.dataset, DATASETS)

    @property
    def record_count(self) -> int:
        """N, public: ``n_records`` for the synthetic records; for a stored data set its declared private part less
        the held-out fifth (:func:`~.user_facts.training_size`), never a count of the rows."""
        if self.is_user_dataset:
            return user_facts.training_size(self.dataset, self.private_size)
        return self.n_records

    @property
    def methods(self) -> tuple[str, ...]:
        """The private methods this run releases or compares (``all``: every one the model supports)."""
        if self.method != "all":
            return (self.method,)
        return tuple(m for m in PRIVATE_METHODS if self.model == "linear" or m not in LINEAR_ONLY)

    def check_rules(self) -> None:
        if self.is_user_dataset:
            user_facts.check(self.dataset, model=self.model, method=self.method, mode=self.mode,
                             private_size=self.private_size)
        else:
            check_stored_only(self, "private_size")
        if self.method == "all" and self.mode != "sweep":
            raise ConfigError("method", "must be one of exponential, ssp, dpvi in release mode (`all` compares the "
                                        f"methods in a sweep: set mode to sweep); got {self.method!r}")
        if self.method in LINEAR_ONLY and self.model != "linear":
            raise ConfigError("method", f"must be exponential or dpvi for the {self.model} model (ssp releases the "
                                        f"sufficient statistics of the linear model); got {self.method!r}")
        if not self.y_high > self.y_low:
            raise ConfigError("y_high", f"must be > y_low = {self.y_low:g} (the response's clip interval "
                                        f"[y_low, y_high] must not be empty); got {self.y_high:g}")
        if "exponential" not in self.methods:
            return
        work = self.chains * self.mc_samples * self.record_count
        if work > MAX_ELEMENTS and self.is_user_dataset:  # N is the data set's declaration: draws is the user's
            raise ConfigError("draws", f"times mc_samples ({self.mc_samples}) times the declared N "
                                       f"({self.record_count}) must be at most {MAX_ELEMENTS:,} (per-step memory): "
                                       f"lower draws or mc_samples; got {self.draws}")
        if work > MAX_ELEMENTS:
            raise ConfigError("n_records", f"times chains ({self.chains}) times mc_samples ({self.mc_samples}) must "
                                           f"be at most {MAX_ELEMENTS:,} (per-step memory); got {work:,}")

    @classmethod
    def user_dataset_problem(cls, name: str, values: dict) -> str | None:
        known = {**cls().to_dict(), **values}
        try:
            user_facts.check(name, model=known["model"], method=known["method"], mode=known["mode"],
                             private_size=known["private_size"])
        except ConfigError as exc:
            return str(exc)
        return None

    @classmethod
    def user_dataset_start(cls, name: str) -> dict:
        """The logistic model: the one a stored table (a binary label) fits; nothing read from the data set."""
        return {"model": "logistic"}
