"""Knobs of a DP-SGD run (no torch import: the CLI lists mechanisms cheaply).

One run trains one model per (setting, seed): a setting is a value of ``alphas``
(0 = isotropic DP-SGD; otherwise noise, and with the elliptical variant also
the clip, shaped around the public subspace, or the projected update when
``variant`` is ``"projected"``), and the seeds are ``seed, seed + 1, ...,
seed + n_seeds - 1``. Every model of a run uses the same noise multiplier,
sample rate and number of steps, so each one has the same epsilon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from privengine.config import MIN_SAMPLE_RATE, RunConfig, declared_private_size_knob, keep_model_knob, knob
from privengine.errors import ConfigError

from privengine.datasets import private_part

from . import user_facts

DATASETS = ("linreg", "digits", "mnist", "fashion_mnist", "cifar10")
MODELS = ("auto", "linear", "mlp", "cnn", "scatter_linear", "scatter_cnn", "scatter_mlp")
ACCOUNTANTS = ("prv", "rdp")  # sound accountants only: GDP is offered beside them (show_gdp)
VARIANTS = ("anisotropic", "projected", "elliptical")
NOISE_MODES = ("target_epsilon", "sigma")
GRAD_SAMPLE_MODES = ("hooks", "ghost")
SAMPLINGS = ("poisson", "shuffle")
NORMALIZATIONS = ("group", "public", "private")  # see privengine.dpsgd.normalization
LR_SCHEDULES = ("constant", "cosine")
# The embedded data sets' sizes (privengine.dpsgd.data draws them) and the training split of every data set, before
# the public part is taken, so a batch larger than the private part is refused in the form, before anything runs.
LINREG_N = 10_000
DIGITS_N, DIGITS_TEST_FRACTION = 1797, 0.2    # scikit-learn's 8x8 digits; a fifth held out
TRAIN_EXAMPLES = {"linreg": LINREG_N, "digits": DIGITS_N - round(DIGITS_TEST_FRACTION * DIGITS_N),
                  "mnist": 60_000, "fashion_mnist": 60_000, "cifar10": 50_000}


def is_user_dataset(dataset: str) -> bool:
    """Whether ``dataset`` names a stored user data set, not one of :data:`DATASETS`
    (:func:`private_part.is_user_dataset`)."""
    return private_part.is_user_dataset(dataset, DATASETS)


def resolved_model(config: "DPSGDConfig") -> str:
    """The model ``auto`` stands for: linear on linreg and on a stored table, else the CNN."""
    if config.model != "auto":
        return config.model
    if is_user_dataset(config.dataset):
        return user_facts.resolved_model(private_part.stored(config.dataset), "auto")
    return "linear" if config.dataset == "linreg" else "cnn"


def documented_training_examples(dataset: str, train_limit: int) -> int:
    """n: a built-in data set's documented training split, at most ``train_limit`` of it when set."""
    return TRAIN_EXAMPLES[dataset] if not train_limit else min(train_limit, TRAIN_EXAMPLES[dataset])


def public_examples(dataset: str, train_limit: int, public_fraction: float) -> int:
    """How many training examples are declared public: ``max(1, floor(public_fraction * n))`` of the documented n
    (:func:`documented_training_examples`), a function of the config alone: a data root whose training file has a
    record more or less gets the same public count, which the run publishes. A user data set: the rows it declares
    public (``public_fraction`` is for the built-in data sets)."""
    if is_user_dataset(dataset):
        return private_part.public_rows(dataset)
    return max(1, math.floor(public_fraction * documented_training_examples(dataset, train_limit)))


def private_examples(dataset: str, train_limit: int, public_fraction: float) -> int:
    """The documented size of a built-in data set's private split: its documented training split (at most
    ``train_limit`` of it when set) minus its public part (:func:`public_examples`). A function of the config alone,
    never of the data (a neighbouring data set has the same)."""
    return documented_training_examples(dataset, train_limit) - public_examples(dataset, train_limit,
                                                                               public_fraction)


def declared_private_size(config: "DPSGDConfig") -> int:
    """N, the private split's size **declared public**: the config's ``private_size``, or (0) the built-in data set's
    documented size (:func:`private_examples`).

    Every quantity a run derives from "the number of private examples" comes from N, never from the loaded split:
    q = B / N, steps = int(epochs / q), the private normalisation's divisor, the delta caveat and the size the summary
    publishes. So a data set and its add/remove neighbour (one example more or less) get the same q, the same number
    of released iterates and the same published fields, which is what the add/remove claim needs; the Poisson sampler
    still includes each example actually present with probability q.
    """
    if is_user_dataset(config.dataset):  # the declared private part less its held-out rows
        part = private_part.declared_part(config.dataset, config.private_size)
        return part - private_part.held_out(part)
    return config.private_size or private_examples(config.dataset, config.train_limit, config.public_fraction)


def private_size_basis(config: "DPSGDConfig") -> str:
    """Where :func:`declared_private_size` comes from, in words (the summary and the claims state it)."""
    if is_user_dataset(config.dataset):
        return private_part.basis(config.dataset, config.private_size)
    n = declared_private_size(config)
    if config.private_size:
        return f"N = {n}, declared in the config (private size)"
    limit = f" (at most train_limit = {config.train_limit})" if config.train_limit else ""
    return (f"N = {n}, the documented size of {config.dataset}'s training split of {TRAIN_EXAMPLES[config.dataset]}"
            f"{limit} minus its public part of "
            f"{public_examples(config.dataset, config.train_limit, config.public_fraction)}")


def published_size(config: "DPSGDConfig") -> dict:
    """The size fields a DP-SGD summary publishes: the declared private size N and where it comes from. The loaded
    split's own size is never published (under add/remove it alone would tell a data set from its neighbour)."""
    return {"private_size": declared_private_size(config), "private_size_basis": private_size_basis(config)}


def check_batches(batch_size: int, epochs: float, private_size: int, basis: str = "", *,
                  poisson: bool = True) -> None:
    """Raise ConfigError unless the batch is below the declared private size, ``epochs`` give at least one
    step and, for Poisson batches (``poisson``), the rate q = batch_size / size is one the sampler can draw (at
    least 2^-24: :func:`privengine.poisson.inclusion_threshold`). ``basis``: where the size comes from, in words,
    for the message; default: the size alone."""
    if batch_size >= private_size:
        raise ConfigError("batch_size", f"must be below the declared private size ({basis or private_size}); "
                                        f"got {batch_size}")
    q = batch_size / private_size
    if poisson and q < MIN_SAMPLE_RATE:
        raise ConfigError("batch_size", f"must give a sampling rate q = batch_size / private size of at least "
                                        f"2^-24 = {MIN_SAMPLE_RATE:.3g}, the Poisson sampler's resolution (q = "
                                        f"{q:.3g} with the declared private size {basis or private_size}); "
                                        f"got {batch_size}")
    if int(epochs / q) < 1:
        raise ConfigError("epochs", f"must give at least one step (epochs >= q = {q:.3g}); got {epochs}")


@dataclass(frozen=True)
class DPSGDConfig(RunConfig):
    dataset: str = knob("linreg", choices=DATASETS, user_datasets=True,
                        help="linreg: the embedded synthetic linear regression whose gradients live near a "
                             "low-dimensional subspace; digits: scikit-learn's bundled 8x8 digits; mnist, "
                             "fashion_mnist, cifar10: torchvision files under the data root; or the name of a "
                             "data set you stored (python -m privengine data add): a table trains linear or mlp, "
                             "images the CNN; its declared public rows are the public data, each private row "
                             "is held out for validation and test with probability 0.2 (by a hash of the row "
                             "and data_seed).")
    model: str = knob("auto", choices=MODELS,
                      help="auto: linear for linreg, the small GroupNorm CNN for images. linear on images is "
                           "softmax regression; mlp has one hidden layer. scatter_linear / scatter_cnn / scatter_mlp "
                           "train on the images' 2-D scattering (J = 2, L = 8: 81 channels per image channel, "
                           "computed once and cached; data-independent, so it costs no privacy), opened by a "
                           "normalisation (see normalization; Tramer & Boneh 2021); scatter_mlp then projects onto "
                           "the public split's top principal directions (projection_rank, free) and trains a "
                           "256-unit tanh hidden layer on them.")
    projection_rank: int = knob(256, low=1, high=100_000, advanced=True, shown_when=("model", ("scatter_mlp",)),
                                label="public projection rank",
                                help="r: scatter_mlp maps the normalised scattering features onto the top r principal "
                                     "directions of the public split's features (fixed, from public data only: "
                                     "free). At most n_public - 1.")
    normalization: str = knob("group", choices=NORMALIZATIONS,
                              choice_labels={"group": "GroupNorm (per example, free)",
                                             "public": "channel statistics of the public split (free)",
                                             "private": "channel statistics of the private split (DP, charged)"},
                              help="How the scattering models normalise their input channels: per example "
                                   "(GroupNorm), with the public split's per-channel mean and sd, or with a "
                                   "Gaussian-mechanism estimate from the private split (noise multiplier "
                                   "norm_noise_multiplier, clip from the public split), composed into every claim "
                                   "(Tramer & Boneh's MNIST recipe).")
    norm_noise_multiplier: float = knob(8.0, low=0.5, high=1000.0, log=True, label="normalisation noise multiplier",
                                        shown_when=("normalization", ("private",)),
                                        help="Noise multiplier of the private channel statistics (one Gaussian "
                                             "mechanism per model, sensitivity = its clip).")
    epochs: float = knob(10.0, low=0.0, high=1000.0, low_open=True,
                         help="Passes over the private data; steps = int(epochs / q) with q = batch / N (N: the "
                              "declared private size).")
    batch_size: int = knob(100, low=1, high=1_000_000,
                           help="Expected (logical) batch B of Poisson sampling: each private example joins a "
                                "step with probability q = B / N (N: the declared private size).")
    private_size: int = declared_private_size_knob(
        "q = B / N, the step count and the private normalisation's divisor come from N, so a data set and its "
        "neighbour with one example more or less get the same q, steps and published fields (the add/remove "
        "guarantee needs that). Do not understate the data: delta is judged against 1 / N.",
        built_in="N itself (0 = its documented training split, at most train_limit, minus the public part; set it "
                 "when the data root holds another version of the data)")
    physical_batch_size: int = knob(0, low=0, high=1_000_000, advanced=True,
                                    help="Largest batch sent through the model at once (Opacus' "
                                         "BatchMemoryManager splits logical batches); no effect on privacy. "
                                         "0 = auto: on a CPU the largest power of two whose per-example "
                                         "gradients of the largest parameter fit in 24 MiB (bigger blocks are "
                                         "mapped and zeroed afresh by the C allocator at every batch, which "
                                         "can double the step time); on a GPU the expected batch plus four standard "
                                         "deviations, a multiple of 64, at most 1024.")
    lr: float = knob(0.1, low=0.0, high=100.0, low_open=True, log=True, label="learning rate",
                     help="SGD learning rate (about 0.1 for linreg, 1-4 for the CNNs with batch 256).")
    momentum: float = knob(0.0, low=0.0, high=0.99, advanced=True, help="SGD momentum.")
    lr_schedule: str = knob("constant", choices=LR_SCHEDULES, advanced=True, label="learning-rate schedule",
                            help="constant: the learning rate throughout; cosine: lr_t = lr (1 + cos(pi t / T)) / 2 "
                                 "after t of the T logical steps (torch's CosineAnnealingLR), down to 0 at the end. "
                                 "Free: the schedule is fixed before training and looks at no data.")
    ema_decay: float = knob(0.0, low=0.0, high=1.0, high_open=True, advanced=True, label="EMA decay",
                            help="Evaluate (and report) an exponential moving average of the trained parameters, "
                                 "ema <- decay * ema + (1 - decay) * params after every step (0 = off, the last "
                                 "iterate). Free: a function of the noisy iterates, which the guarantee covers.")
    max_grad_norm: float = knob(1.0, low=0.0, high=1e4, low_open=True, log=True, label="clip norm",
                                help="C: each per-example gradient (all parameters flattened) is clipped to this norm.")
    noise_mode: str = knob("target_epsilon", choices=NOISE_MODES,
                           choice_labels={"target_epsilon": "target ε (σ calibrated)", "sigma": "noise multiplier σ"},
                           help="Give the noise multiplier sigma directly, or calibrate it to a target epsilon "
                                "with Opacus' get_noise_multiplier for this accountant, q and step count.")
    target_epsilon: float = knob(3.0, low=0.05, high=100.0, log=True, shown_when=("noise_mode", ("target_epsilon",)),
                                 help="Epsilon each trained model should reach at the end of training.")
    noise_multiplier: float = knob(1.0, low=0.05, high=100.0, log=True, label="sigma",
                                   shown_when=("noise_mode", ("sigma",)),
                                   help="Noise multiplier: noise std inside span(U) is sigma * C per step (sum).")
    delta: float = knob(1e-5, low=0.0, high=0.1, low_open=True, log=True, help="Target delta of every claim.")
    accountant: str = knob("prv", choices=ACCOUNTANTS,
                           choice_labels={"prv": "PRV (numerical composition)", "rdp": "RDP (Renyi DP)"},
                           help="Opacus accountant of every claim and of the sigma calibration: prv (numerical "
                                "composition of privacy loss random variables, tightest; the default) or rdp.")
    show_gdp: bool = knob(False, advanced=True, label="also show the GDP approximation",
                          help="Add Opacus' GDP (Gaussian DP, central-limit) figure beside the claims, labelled as "
                               "an approximation: it underestimates epsilon and is never the headline.")
    alphas: tuple[float, ...] = knob((0.0, 4.0), low=-1.0, high=1e6, low_open=True, max_items=8, label="alphas",
                                     help="One compared setting per value. 0 = isotropic DP-SGD; otherwise the noise "
                                          "variance outside span(U) is multiplied by 1 + alpha (alpha < 0, down to "
                                          "but excluding -1, only with the elliptical variant).")
    variant: str = knob("anisotropic", choices=VARIANTS,
                        choice_labels={"anisotropic": "anisotropic (seed: flat clip, shaped noise)",
                                       "projected": "projected (flat clip, update kept in span(U))",
                                       "elliptical": "elliptical (clip and noise shaped alike)"},
                        help="What a setting with alpha != 0 does. anisotropic (the seed's variant, alpha > 0): clip "
                             "to ||g|| <= C, add N(0, s^2 S) with S = I + alpha (I - UU^T). projected: keep only the "
                             "span(U) part of the noisy gradient (the alpha -> infinity limit; alpha's value is then "
                             "irrelevant, so at most one alpha > 0 is allowed). elliptical (alpha > -1): clip in the "
                             "norm sqrt(g^T S^-1 g) <= C and add N(0, s^2 S); alpha < 0 trades a tighter clip outside "
                             "span(U) for less noise there. Every variant has the epsilon of isotropic DP-SGD at the "
                             "same sigma.")
    subspace_rank: int = knob(8, low=1, high=100_000, label="subspace rank k",
                              help="Rank k of the public gradient subspace U (d x k).")
    public_fraction: float = knob(0.05, low=0.0, high=0.5, low_open=True, shown_when=("dataset", DATASETS),
                                  help="Fraction of the training split declared public: used to estimate U and "
                                       "for the optional warm start, never in the private training, and not "
                                       "protected. A user data set's public part is the rows it declares public.")
    warm_start_epochs: float = knob(0.0, low=0.0, high=1000.0, advanced=True,
                                    help="Before private training, train each model this many epochs on the public "
                                         "split without noise (plain SGD, batch warm_start_batch, learning rate "
                                         "warm_start_lr). Costs no privacy: the public examples are disjoint from "
                                         "the private ones (and are not protected). 0 = off.")
    warm_start_lr: float = knob(0.1, low=0.0, high=100.0, low_open=True, log=True, advanced=True,
                                help="Learning rate of the public warm start (plain SGD, momentum 0.9).")
    warm_start_batch: int = knob(64, low=1, high=100_000, advanced=True,
                                 help="Batch size of the public warm start.")
    public_batch: int = knob(256, low=1, high=100_000, advanced=True,
                             help="Public examples whose per-example gradients estimate U at each refresh (m >= k).")
    refresh_every: int = knob(20, low=1, high=1_000_000, label="refresh interval (steps)",
                              help="R: re-estimate U from public gradients at the current model every R steps.")
    grad_sample_mode: str = knob("hooks", choices=GRAD_SAMPLE_MODES, advanced=True,
                                 help="hooks: Opacus per-example gradients; ghost: Opacus fast gradient "
                                      "clipping (per-example norms without per-example gradients where the "
                                      "layer allows it).")
    sampling: str = knob("poisson", choices=SAMPLINGS, advanced=True,
                         help="poisson: Opacus' Poisson sampler, which the accountants assume; shuffle: fixed-size "
                              "batches of a shuffled pass (faster, but the reported epsilon is then not a proof).")
    n_seeds: int = knob(2, low=1, high=20, label="seeds",
                        help="Train every setting with seeds seed, seed+1, ...; the comparison shows mean and std.")
    data_seed: int = knob(0, low=0, high=2**31 - 1, advanced=True,
                          help="Seed of the data splits (training subset, public part, digits' test part). Kept "
                               "apart from the run's seed so that every seed, and every run of a sweep, protects the "
                               "same private examples.")
    train_limit: int = knob(0, low=0, high=10_000_000, advanced=True, shown_when=("dataset", DATASETS),
                            help="Use only this many training examples (a seeded random subset; 0 = all).")
    data_root: str = knob("", advanced=True,
                          help="Folder with torchvision datasets (empty: $PRIVENGINE_DATA or $PRIVENGINE_HOME/data).")
    keep_model: bool = keep_model_knob()

    def check_rules(self) -> None:
        if is_user_dataset(self.dataset):
            user_facts.check(self.dataset, self.model, self.private_size, self.train_limit)
            self._check_public_rows()
            if self.uses_subspace:
                user_facts.check_subspace_rank(self.dataset, resolved_model(self), self.subspace_rank)
        if self.model.startswith("scatter") and self.dataset == "linreg":
            raise ConfigError("model", f"must not be a scattering model for the linreg dataset (it has no images); "
                                       f"got {self.model!r}")
        if self.normalization != "group" and not self.model.startswith("scatter"):
            raise ConfigError("normalization", f"must be 'group' unless the model is a scattering model (the "
                                               f"statistics are per scattering channel); got {self.normalization!r} "
                                               f"with model {self.model!r}")
        if self.normalization == "private" and self.show_gdp:
            raise ConfigError("show_gdp", "must be off with private normalisation (Opacus' GDP accountant takes a "
                                          "single (sigma, q); the run composes two)")
        if self.dataset == "linreg" and self.model not in ("auto", "linear"):
            raise ConfigError("model", f"must be auto or linear for the linreg dataset; got {self.model!r}")
        if len(set(self.alphas)) != len(self.alphas):
            raise ConfigError("alphas", f"must not repeat a value; got {list(self.alphas)}")
        if self.variant != "elliptical" and any(a < 0 for a in self.alphas):
            raise ConfigError("alphas", f"must be >= 0 with variant {self.variant!r} (a negative alpha would put "
                                        f"less than the isotropic noise outside span(U) with a flat clip; use variant "
                                        f"'elliptical'); got {list(self.alphas)}")
        if self.variant == "elliptical" and self.grad_sample_mode != "hooks":
            raise ConfigError("grad_sample_mode", "must be 'hooks' with variant 'elliptical' (its clip needs "
                                                  f"per-example gradients); got {self.grad_sample_mode!r}")
        if self.variant == "projected" and sum(a > 0 for a in self.alphas) > 1:
            raise ConfigError("alphas", "must hold at most one value > 0 with variant 'projected' "
                                        f"(the projection ignores alpha's size); got {list(self.alphas)}")
        check_batches(self.batch_size, self.epochs, declared_private_size(self),
                      private_size_basis(self) if is_user_dataset(self.dataset) else "",
                      poisson=self.sampling == "poisson")
        if self.uses_subspace and self.subspace_rank > self.public_batch:
            raise ConfigError("subspace_rank", f"must be at most public_batch ({self.public_batch}): m public "
                                               f"gradients span at most m directions; got {self.subspace_rank}")

    def _check_public_rows(self) -> None:
        """ConfigError naming the knob when the run needs public data and its user data set declares none."""
        needs = [(field, why) for field, why, on in (
            ("alphas", "a setting with alpha != 0 shapes its noise by the public subspace", self.uses_subspace),
            ("warm_start_epochs", "the warm start trains on the public rows", self.warm_start_epochs > 0))
            if on]
        if needs and private_part.public_rows(self.dataset) == 0:
            field, why = needs[0]
            raise ConfigError(field, f"needs public rows, and data set {self.dataset!r} declares none ({why}): "
                                     "choose alphas 0 and no warm start, or add the data set again with "
                                     "--public-rows N")

    @classmethod
    def user_dataset_problem(cls, name: str, values: dict) -> str | None:
        try:
            user_facts.check(name, values.get("model", "auto"), values.get("private_size", 0),
                             values.get("train_limit", 0))
        except ConfigError as exc:
            return str(exc)
        return None

    @property
    def uses_subspace(self) -> bool:
        """Whether some setting needs the public basis U."""
        return any(a != 0 for a in self.alphas)

    @classmethod
    def user_dataset_start(cls, name: str) -> dict:
        """From public facts only (N = N_part - round(0.2 N_part), the declared training rows; n_public, the
        declared public rows; d, the auto model's parameter count from the schema and the declared classes): the
        batch B = max(1, min(B_default, floor(N / 10))), so q = B / N <= 1/10 and the default epochs give >= 10
        steps; with no public rows, alphas (0,) (isotropic only: no public subspace), else the subspace rank
        k = min(k_default, n_public, d)."""
        part = private_part.declared_part(name, 0)
        start = {"batch_size": max(1, min(cls.spec("batch_size").default, (part - private_part.held_out(part)) // 10))}
        manifest, rows = private_part.stored(name), private_part.public_rows(name)
        if rows == 0:
            start["alphas"] = (0.0,)
        elif user_facts.model_problem(manifest, "auto") is None:
            d = user_facts.parameter_count(manifest, user_facts.resolved_model(manifest, "auto"))
            start["subspace_rank"] = min(cls.spec("subspace_rank").default, rows, d)
        return start
