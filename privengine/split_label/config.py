"""The knobs of a split-learning label-protection run (no torch import: the CLI lists them cheaply)."""

from __future__ import annotations

from dataclasses import dataclass

from privengine.config import RunConfig, check_stored_only, declared_private_size_knob, keep_model_knob, knob
from privengine.datasets import private_part
from privengine.errors import ConfigError

DATASETS = ("synthetic", "fashion_mnist")
MODES = ("single", "trade_off")
PROTECTIONS = ("none", "iso", "max_norm", "marvell")
MARVELL_MODES = ("threshold", "power_scale")


@dataclass(frozen=True)
class SplitLabelConfig(RunConfig):
    """Two-party split learning on a binary task with a rare positive class; the active party protects its labels."""

    dataset: str = knob(
        "synthetic", choices=DATASETS, user_datasets=True,
        choice_labels={"fashion_mnist": "Fashion-MNIST (trousers vs the rest)"},
        help="synthetic: a seeded scikit-learn classification problem with rare positives (runs in about a "
             "minute on a CPU). fashion_mnist: label 1 iff the image is a trouser kept with probability "
             "`trouser keep` (the seed's demo, about 1.8% positives), read from the data root. Or the name of a "
             "table you stored (python -m privengine data add) with a binary label: the passive party holds its "
             "columns scaled by their public bounds (categories one-hot), the active party the label (1: the "
             "second declared class); each private row is held out for the test AUC with probability 0.2 (a hash "
             "of the row and the run's seed).")
    private_size: int = declared_private_size_knob(
        "the batch size may not exceed N; the held-out fifth scores the test AUC.")
    mode: str = knob(
        "single", choices=MODES,
        choice_labels={"single": "one protection", "trade_off": "trade-off (one training per setting)"},
        help="single: train once with the chosen protection. trade_off: train once per setting listed below "
             "(plus no protection and max norm) and plot test AUC against leak AUC, one point per setting.")
    protection: str = knob(
        "marvell", choices=PROTECTIONS, shown_when=("mode", ("single",)),
        choice_labels={"none": "no protection", "iso": "isotropic noise", "max_norm": "max norm alignment",
                       "marvell": "Marvell (optimal noise for a sumKL budget)"},
        help="What the active party does to the cut-layer gradients it sends: nothing, isotropic Gaussian noise, "
             "max norm alignment, or Marvell's optimal noise for a sumKL budget.")
    marvell_mode: str = knob(
        "threshold", choices=MARVELL_MODES, shown_when=("protection", ("marvell",)),
        choice_labels={"threshold": "sumKL threshold", "power_scale": "fixed power scale"},
        help="threshold: grow the noise power P = s·||Δ||² (s = 1, 1.5, 1.5², ...) until sumKL <= the threshold. "
             "power_scale: use a fixed s.")
    sumkl_threshold: float = knob(
        0.64, low=0.0, high=100.0, low_open=True, log=True, shown_when=("marvell_mode", ("threshold",)),
        label="sumKL threshold",
        help="Marvell's per-batch sumKL budget; it bounds every scorer's leak AUC by 1/2 + √sumKL/2 − sumKL/8 "
             "(0.64 → 0.82, 0.16 → 0.68).")
    power_scale: float = knob(
        1.0, low=0.0, high=1e6, low_open=True, log=True, shown_when=("marvell_mode", ("power_scale",)),
        help="Marvell's fixed power scale s: the expected squared noise norm is s·||Δ||² per batch.")
    iso_scale: float = knob(
        1.0, low=0.0, high=1e4, low_open=True, log=True, shown_when=("protection", ("iso",)),
        label="iso scale t",
        help="Isotropic noise N(0, (t·max_i ||g_i||)² / d · I) added to every cut gradient of the batch.")
    tradeoff_thresholds: tuple[float, ...] = knob(
        (0.64, 0.16), low=0.0, high=100.0, low_open=True, min_items=0, max_items=8,
        shown_when=("mode", ("trade_off",)), label="trade-off sumKL thresholds",
        help="One Marvell (threshold mode) point per value.")
    tradeoff_power_scales: tuple[float, ...] = knob(
        (), low=0.0, high=1e6, low_open=True, min_items=0, max_items=8,
        shown_when=("mode", ("trade_off",)), label="trade-off power scales",
        help="One Marvell (fixed power scale) point per value.")
    tradeoff_iso_scales: tuple[float, ...] = knob(
        (1.0,), low=0.0, high=1e4, low_open=True, min_items=0, max_items=8,
        shown_when=("mode", ("trade_off",)), label="trade-off iso scales",
        help="One isotropic-noise point per value of t.")
    batch_size: int = knob(600, low=2, high=65536, log=True,
                           help="Examples per batch; leak AUC is computed per batch.")
    epochs: int = knob(8, low=1, high=1000, help="Passes over the training set (per setting in trade-off mode).")
    lr: float = knob(0.1, low=0.0, high=10.0, low_open=True, log=True, label="learning rate",
                     help="Adagrad learning rate of both parties (Keras's Adagrad defaults otherwise, as in the "
                          "seed's demo, which used 0.01).")
    init_std: float = knob(0.0, low=0.0, high=1.0, advanced=True, label="init std",
                           help="0: PyTorch's default initialisation; > 0: weights N(0, init_std²) and zero biases "
                                "(the seed's demo used 0.01).")
    bottom_widths: tuple[int, ...] = knob(
        (128, 32), low=1, high=4096, max_items=4,
        help="Widths of the passive party's ReLU MLP; the last one is the cut layer's dimension d.")
    top_hidden: int = knob(0, low=0, high=4096,
                           help="Hidden width of the active party's top model; 0 = a single linear layer (the seed).")
    trouser_keep: float = knob(
        2 / 11, low=0.0, high=1.0, low_open=True, shown_when=("dataset", ("fashion_mnist",)), advanced=True,
        help="Probability that a trouser image is labelled positive (the others become negatives).")
    data_root: str = knob(
        "", shown_when=("dataset", ("fashion_mnist",)), advanced=True,
        help="Folder holding torchvision's FashionMNIST/raw files; empty = $PRIVENGINE_DATA or "
             "$PRIVENGINE_HOME/data.")
    n_train: int = knob(30000, low=100, high=1_000_000, log=True, shown_when=("dataset", ("synthetic",)),
                        advanced=True, help="Training examples of the synthetic dataset (plus a quarter for test).")
    n_features: int = knob(30, low=2, high=2000, shown_when=("dataset", ("synthetic",)), advanced=True,
                           help="Features of the synthetic dataset.")
    positive_rate: float = knob(0.02, low=0.001, high=0.5, log=True, shown_when=("dataset", ("synthetic",)),
                                advanced=True, help="Fraction of positives in the synthetic dataset.")
    keep_model: bool = keep_model_knob()

    @property
    def is_user_dataset(self) -> bool:
        """Whether ``dataset`` names a stored user data set, not one of :data:`DATASETS`
        (:func:`private_part.is_user_dataset`)."""
        return private_part.is_user_dataset(self.dataset, DATASETS)

    def check_rules(self) -> None:
        if self.is_user_dataset:
            _check_user_dataset(self.dataset, self.private_size, self.batch_size)
        else:
            check_stored_only(self, "private_size")
        if self.dataset == "synthetic" and self.batch_size > self.n_train:
            raise ConfigError("batch_size", f"must be at most n_train ({self.n_train}); got {self.batch_size}")

    @classmethod
    def user_dataset_problem(cls, name: str, values: dict) -> str | None:
        known = {**cls().to_dict(), **values}
        try:
            _check_user_dataset(name, known["private_size"], known["batch_size"])
        except ConfigError as exc:
            return str(exc)
        return None

    @classmethod
    def user_dataset_start(cls, name: str) -> dict:
        """A batch of at most N, the declared private training rows N = N_part - round(0.2 N_part) (public), at least
        the knob's lowest value: max(2, min(B_default, N))."""
        part = private_part.declared_part(name, 0)
        return {"batch_size": max(2, min(cls.spec("batch_size").default, part - private_part.held_out(part)))}


def _check_user_dataset(name: str, private_size: int, batch_size: int) -> None:
    """ConfigError naming the field when stored data set ``name`` cannot serve split learning: not a table with a
    binary label and public bounds (``dataset``), no declared private size, or a batch larger than its declared
    training rows N = N_part - round(0.2 N_part) (``private_size``, ``batch_size``: public sizes, never counted)."""
    if (why := private_part.binary_table_problem(private_part.stored(name))) is not None:
        raise ConfigError("dataset", f"{name!r} does not fit split learning: {why}")
    part = private_part.declared_part(name, private_size)
    n = part - private_part.held_out(part)
    if batch_size > n:
        raise ConfigError("batch_size", f"must be at most the {n} training rows declared for data set {name!r} "
                                        f"({private_part.basis(name, private_size)}); got {batch_size}")
