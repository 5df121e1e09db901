"""Configuration of a PATE run (no torch import: the CLI lists it cheaply)."""

from __future__ import annotations

from dataclasses import dataclass

from ..config import RunConfig, check_stored_only, declared_private_size_knob, keep_model_knob, knob
from ..datasets import private_part
from ..errors import ConfigError
from . import user_facts

EMBEDDED_DATASETS = ("synthetic", "digits")
DATA_SEED = 1234  # the embedded datasets and the public split are fixed; the run seed drives training and noise
REAL_DATASETS = ("mnist", "fashion_mnist", "cifar10", "cifar100", "svhn")
AGGREGATORS = ("lnmax", "gnmax", "confident_gnmax")
STUDENTS = ("supervised", "semi_supervised", "self_training")  # self_training: privengine.pate.self_training
QUERY_SELECTIONS = ("first", "typical")  # implemented in privengine.pate.selection
SCATTERING_DATASETS = ("mnist", "fashion_mnist")  # 28 x 28 grey images: ScatterNet J = 2, L = 8 gives 81 x 7 x 7

# Examples in each dataset's private (teacher) split and public split (queries + student test).
SPLIT_SIZES = {
    "synthetic": (60_000, 5_000),
    "digits": (1_297, 500),
    "mnist": (60_000, 10_000),
    "fashion_mnist": (60_000, 10_000),
    "cifar10": (50_000, 10_000),
    "cifar100": (50_000, 10_000),
    "svhn": (73_257, 26_032),
}
MIN_EXAMPLES_PER_TEACHER = 10


def is_user_dataset(dataset: str) -> bool:
    """Whether ``dataset`` names a stored user data set, not one of :data:`SPLIT_SIZES`'
    (:func:`private_part.is_user_dataset`)."""
    return private_part.is_user_dataset(dataset, SPLIT_SIZES)


def student_test_size(n_public: int) -> int:
    """Public examples kept out of the query pool to test the student: 10%, at least 200."""
    return max(200, n_public // 10)


@dataclass(frozen=True)
class PateConfig(RunConfig):
    """A PATE run: K teachers on disjoint private partitions, a noisy vote aggregator, a student."""

    dataset: str = knob("synthetic", choices=EMBEDDED_DATASETS + REAL_DATASETS,
                        choice_labels={"synthetic": "synthetic (embedded)", "digits": "digits 8x8 (embedded)",
                                       "mnist": "MNIST", "fashion_mnist": "Fashion-MNIST", "cifar10": "CIFAR-10",
                                       "cifar100": "CIFAR-100", "svhn": "SVHN"},
                        user_datasets=True,
                        help="synthetic: a seeded 10-class scikit-learn generator (embedded, about a minute on a "
                             "CPU); digits: scikit-learn's 8x8 digits (small: use few teachers); the others are "
                             "torchvision datasets read from the data root; or the name of a data set you stored "
                             "(python -m privengine data add) with public rows and a declared private size: the "
                             "queries come from its public rows, a fifth of its private rows is held out to test, "
                             "and each other private row trains the teacher its own hash names (add/remove).")
    data_root: str = knob("", shown_when=("dataset", REAL_DATASETS),
                          help="Folder with torchvision's dataset files; empty: $PRIVENGINE_DATA.")
    download: bool = knob(False, shown_when=("dataset", REAL_DATASETS), advanced=True,
                          help="Let torchvision download a missing dataset (needs a network).")
    private_size: int = declared_private_size_knob(
        f"N caps the teachers (at least {MIN_EXAMPLES_PER_TEACHER} rows each) and their rows.")
    data_seed: int = knob(0, low=0, high=2**31 - 1, advanced=True, unkeyed_default=True,
                          help="A user data set only: the seed of the row hashes that hold a fifth of its private "
                               "rows out and name each other row's teacher. Kept apart from the run's seed so that "
                               "every seed protects the same partition.")
    teachers: int = knob(100, low=1, high=1000,
                         help="Number of teachers K; each trains on its own 1/K of the private data.")
    architecture: str = knob("auto", choices=("auto", "mlp", "convnet", "scatter_linear"),
                             choice_labels={"auto": "auto", "mlp": "MLP", "convnet": "ConvNet",
                                            "scatter_linear": "linear on ScatterNet features"},
                             help="Teachers' model. auto: the ConvNet for images, the MLP for tabular data. "
                                  "scatter_linear: GroupNorm and one linear layer on the data-independent ScatterNet "
                                  "features (J = 2, L = 8) of MNIST / Fashion-MNIST, strong on 240 examples; the "
                                  "features are computed once and cached. The self-training student uses the same model "
                                  "on the same features, the supervised and FixMatch students the ConvNet on pixels; "
                                  "the baseline follows the student.")
    width: int = knob(32, low=4, high=512, advanced=True,
                      help="ConvNet channels per layer / MLP hidden units of the teachers, the student and the "
                           "baseline (the seed's ConvNet uses 128).")
    depth: int = knob(2, low=1, high=4, advanced=True,
                      help="ConvNet conv blocks / MLP hidden layers (the seed's ConvNet uses 3).")
    aggregator: str = knob("confident_gnmax", choices=AGGREGATORS,
                           choice_labels={"lnmax": "LNMax (Laplace)", "gnmax": "GNMax (Gaussian)",
                                          "confident_gnmax": "Confident-GNMax"},
                           help="lnmax: Laplace noise, moments accountant (2016); gnmax: Gaussian noise, RDP "
                                "(2018); confident_gnmax: answer only when the noisy top vote clears a threshold.")
    gamma: float = knob(0.05, low=0.0, high=10.0, low_open=True, log=True, shown_when=("aggregator", ("lnmax",)),
                        help="LNMax noise: each count gets Lap(1/gamma); one query costs 2*gamma pure DP.")
    sigma: float = knob(20.0, low=0.0, high=1000.0, low_open=True, log=True, shown_when=("aggregator", ("gnmax",)),
                        help="GNMax noise: each count gets N(0, sigma^2).")
    threshold: float = knob(80.0, low=0.0, high=10_000.0, shown_when=("aggregator", ("confident_gnmax",)),
                            help="Confident-GNMax: answer only if max vote + N(0, sigma1^2) >= threshold.")
    sigma1: float = knob(40.0, low=0.0, high=1000.0, low_open=True, log=True,
                         shown_when=("aggregator", ("confident_gnmax",)),
                         help="Confident-GNMax: noise of the threshold check.")
    sigma2: float = knob(15.0, low=0.0, high=1000.0, low_open=True, log=True,
                         shown_when=("aggregator", ("confident_gnmax",)),
                         help="Confident-GNMax: noise of the answer (GNMax step).")
    queries: int = knob(1000, low=1, high=100_000,
                        help="Public examples submitted to the ensemble; the student trains on the answered ones.")
    query_selection: str = knob("first", choices=QUERY_SELECTIONS,
                                choice_labels={"first": "the first of the pool (the papers')",
                                               "typical": "the most typical, spread over clusters"},
                                help="Which public images to submit. first: the first ones of the pool. typical: "
                                     "k-means on the pool's (public) features, the most central image of each "
                                     "cluster first, round-robin: the teachers agree more on them, so fewer answered "
                                     "labels are wrong and each costs less data-dependent epsilon. Looks at public "
                                     "features only, never at a vote: no privacy cost.")
    selection_clusters: int = knob(30, low=2, high=10_000, advanced=True,
                                   shown_when=("query_selection", ("typical",)),
                                   help="typical selection: the number of k-means clusters the queries are spread "
                                        "over.")
    delta: float = knob(1e-5, low=0.0, high=1.0, low_open=True, high_open=True, log=True,
                        help="The delta of the (epsilon, delta) guarantee.")
    moments: int = knob(8, low=1, high=100, shown_when=("aggregator", ("lnmax",)),
                        help="LNMax: highest moment order L of the moments accountant (eps >= ln(1/delta)/L).")
    beta: float = knob(0.09, low=0.0, high=10.0, low_open=True, advanced=True,
                       shown_when=("aggregator", ("lnmax",)),
                       help="LNMax: beta of the smooth sensitivity of the data-dependent epsilon.")
    sanitize: bool = knob(True, label="publish a sanitized data-dependent ε",
                          shown_when=("aggregator", ("gnmax", "confident_gnmax")),
                          help="Also publish the data-dependent ε through the smooth-sensitivity framework (Papernot "
                               "et al. 2018, Sec. 4): noisy, shifted up to be an upper bound with the confidence "
                               "below; its own privacy cost is added to it and to the a-priori headline. On MNIST "
                               "it is not covered (not publishable): the sanitizer's settings were tuned on MNIST "
                               "votes.")
    ss_order: float = knob(0.0, low=0.0, high=500.0, advanced=True,
                           shown_when=("aggregator", ("gnmax", "confident_gnmax")),
                           help="RDP order at which the data-dependent ε is sanitized, fixed before the run's votes "
                                "are seen; 0: 1 + 2 (a-priori order - 1), from the configuration alone (a rule chosen "
                                "on MNIST votes). Otherwise >= 2.")
    ss_sigma: float = knob(0.0, low=0.0, high=10_000.0, advanced=True,
                           shown_when=("aggregator", ("gnmax", "confident_gnmax")),
                           help="Noise of the sanitized ε in units of its smooth sensitivity: larger costs less "
                                "privacy but gives a noisier (and, shifted, larger) published figure. 0: the order "
                                "λ of the release (its cost then stays about a quarter of ln(1/δ)/(λ-1) at "
                                "δ = 1e-5, whatever λ).")
    ss_confidence: float = knob(0.95, low=0.5, high=1.0, high_open=True, advanced=True,
                                shown_when=("aggregator", ("gnmax", "confident_gnmax")),
                                help="Probability that the published sanitized ε is at least the exact data-dependent "
                                     "one (its noise is shifted up accordingly); 0.5: no shift, a median-unbiased "
                                     "estimate as in the paper.")
    teacher_epochs: int = knob(20, low=1, high=1000, help="Training epochs of every teacher.")
    teacher_lr: float = knob(3e-3, low=0.0, high=1.0, low_open=True, log=True, help="Adam learning rate of the teachers.")
    student: str = knob("supervised", choices=STUDENTS,
                        choice_labels={"supervised": "supervised (answered queries only)",
                                       "semi_supervised": "semi-supervised (FixMatch on the whole public pool)",
                                       "self_training": "self-training (pseudo-labels on the pool, mixup)"},
                        help="supervised: the student learns from the answered queries only. semi_supervised "
                             "(image datasets): FixMatch, which also learns from every unlabelled image of the "
                             "public query pool (public, so free of privacy cost; only answered labels are charged). "
                             "self_training: the teachers' model on the teachers' inputs (ScatterNet features with "
                             "scatter_linear), refitted in rounds on the answered labels plus sharpened "
                             "pseudo-labels of the confident pool images, with mixup; also free of privacy cost.")
    student_epochs: int = knob(30, low=1, high=1000,
                               help="Training epochs of the student (semi-supervised: passes over the unlabelled "
                                    "pool; self-training: passes over the pool in every round).")
    student_lr: float = knob(3e-3, low=0.0, high=1.0, low_open=True, log=True, help="Adam learning rate of the student.")
    confidence: float = knob(0.95, low=0.0, high=1.0, low_open=True, advanced=True,
                             shown_when=("student", ("semi_supervised", "self_training")),
                             help="FixMatch: an unlabelled image teaches the student only when its prediction on the "
                                  "weakly augmented image has at least this probability (tau); self-training: "
                                  "only when the last round's prediction (after distribution alignment, if on) has at "
                                  "least this probability.")
    self_training_rounds: int = knob(12, low=1, high=100, advanced=True, shown_when=("student", ("self_training",)),
                                     help="Self-training: pseudo-labelling rounds after the first fit on the answered "
                                          "queries (each refits the student from scratch).")
    mixup_alpha: float = knob(0.4, low=0.0, high=10.0, advanced=True, shown_when=("student", ("self_training",)),
                              help="Self-training: mixup's Beta(alpha, alpha) parameter (0: no mixup).")
    align_distribution: bool = knob(True, advanced=True, shown_when=("student", ("self_training",)),
                                    help="Self-training: rescale the pool's predictions so that their mean is the "
                                         "uniform class distribution before pseudo-labelling (distribution alignment; "
                                         "assumes the pool's classes are about balanced).")
    unlabelled_weight: float = knob(1.0, low=0.0, high=100.0, advanced=True,
                                    shown_when=("student", ("semi_supervised",)),
                                    help="FixMatch: weight of the unlabelled loss (lambda_u).")
    unlabelled_ratio: int = knob(4, low=1, high=64, advanced=True, shown_when=("student", ("semi_supervised",)),
                                 help="FixMatch: unlabelled images per labelled image in a batch (mu).")
    batch_size: int = knob(32, low=1, high=4096, advanced=True, help="Minibatch size of every teacher.")
    student_batch_size: int = knob(64, low=1, high=4096, advanced=True,
                                   help="Minibatch size of the student and of the baseline.")
    baseline: bool = knob(True, help="Also train one non-private model on all private data (the reference line); "
                                     "it uses the student's model, inputs, learning rate and batch size.")
    baseline_epochs: int = knob(5, low=1, high=1000, shown_when=("baseline", (True,)),
                                help="Training epochs of the non-private baseline.")
    keep_model: bool = keep_model_knob()

    def check_rules(self) -> None:
        if 0.0 < self.ss_order < 2.0:
            raise ConfigError("ss_order", f"must be 0 (chosen from the configuration) or an RDP order >= 2; "
                                          f"got {self.ss_order:g}")
        if is_user_dataset(self.dataset):
            user_facts.check(self.dataset, self.to_dict(), min_per_teacher=MIN_EXAMPLES_PER_TEACHER)
            return
        check_stored_only(self, "private_size", "data_seed")
        n_private, n_public = SPLIT_SIZES[self.dataset]
        most = n_private // MIN_EXAMPLES_PER_TEACHER
        if self.teachers > most:
            raise ConfigError("teachers", f"must be at most {most} for {self.dataset} ({n_private} private examples, "
                                          f"at least {MIN_EXAMPLES_PER_TEACHER} per teacher); got {self.teachers}")
        if self.architecture == "scatter_linear" and self.dataset not in SCATTERING_DATASETS:
            raise ConfigError("architecture", "scatter_linear needs 28 x 28 grey images "
                                              f"({', '.join(SCATTERING_DATASETS)}); got dataset {self.dataset}")
        if self.student == "semi_supervised" and self.dataset == "synthetic":
            raise ConfigError("student", "semi_supervised augments images: it needs an image dataset (digits, mnist, "
                                         "fashion_mnist, cifar10, cifar100, svhn); got dataset synthetic")
        held_out = student_test_size(n_public)
        pool = n_public - held_out
        if self.queries > pool:
            raise ConfigError("queries", f"must be at most {pool} for {self.dataset} ({held_out} public "
                                         f"examples are kept to test the student); got {self.queries}")
        if self.query_selection == "typical" and self.selection_clusters > pool:
            raise ConfigError("selection_clusters", f"must be at most the pool size {pool} for {self.dataset}; "
                                                    f"got {self.selection_clusters}")

    @classmethod
    def user_dataset_problem(cls, name: str, values: dict) -> str | None:
        try:
            user_facts.check(name, {**{s.name: s.default for s in cls.specs()}, **values},
                             min_per_teacher=MIN_EXAMPLES_PER_TEACHER)
        except ConfigError as exc:
            return str(exc)
        return None

    @classmethod
    def user_dataset_start(cls, name: str) -> dict:
        """From public facts only (N, the declared private training rows; n_public, the declared public rows): at
        most N / MIN_EXAMPLES_PER_TEACHER teachers and at most n_public queries (each at least 1; the defaults when
        they fit)."""
        n, pool = user_facts.training_size(name, 0), user_facts.public_rows(name)
        return {"teachers": max(1, min(cls.spec("teachers").default, n // MIN_EXAMPLES_PER_TEACHER)),
                "queries": max(1, min(cls.spec("queries").default, pool))}
