"""Binary datasets with a rare positive class, as flat float features and {0, 1} labels.

- ``fashion_mnist``: the seed's demo. Label 1 iff the image is class 1 (trouser)
  *and* a seeded draw keeps it with probability ``keep`` (2/11 by default: 10% of
  the images are trousers, so about 1.8% positives); the trousers not kept become
  negatives. The test split gets the same relabelling (an independent draw).
  Images are flattened to 784 features with pixel values in [0, 1] (as the seed fed them).
- ``synthetic``: the embedded default, scikit-learn's ``make_classification``
  (seeded; 2 informative clusters per class, no label noise) with the requested
  positive rate; a quarter as many test examples as training ones; features
  standardised with the training mean and standard deviation.
- a stored user data set (a table with a binary label, :mod:`privengine.datasets`): the passive party's features
  are its private rows' columns scaled by public facts only (:func:`privengine.datasets.inputs.model_inputs`:
  numeric columns from their public bounds onto [-1, 1], categories one-hot), the active party's label is the
  row's class code (1: the second declared class); each private row is held out for the test split with
  probability 0.2 by a keyed hash of the row and the run's ``seed`` (:func:`privengine.datasets.held_out.split_rows`,
  validation and test rows together), the rest is the training split. The public rows are not used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from privengine.data import load_image_dataset
from privengine.datasets import load_dataset, private_part
from privengine.datasets.held_out import split_rows
from privengine.datasets.inputs import model_inputs
from privengine.errors import ConfigError
from privengine.randomness import data_fingerprint

TROUSER = 1  # Fashion-MNIST class index of "Trouser"


@dataclass(frozen=True)
class BinaryData:
    """A binary task, on the CPU.

    Attributes:
        x_train, x_test: ``(n, features)`` float32.
        y_train, y_test: ``(n,)`` float32 in {0, 1}.
        name: dataset name.
        features: the raw features a kept model reads, in words.
        classes: the names of labels 0 and 1.
        preprocessing: how raw features became ``x`` (``divide_by``, then per feature ``mean`` and ``sd``;
            :mod:`privengine.kept_models.loader`), with the ``source`` of its constants.
    """

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    name: str
    features: str
    classes: tuple[str, str] = ("0", "1")
    preprocessing: dict = field(default_factory=dict, compare=False)

    @property
    def n_features(self) -> int:
        return self.x_train.shape[1]

    @cached_property
    def private_fingerprint(self) -> tuple[int, ...]:
        """:func:`~privengine.randomness.data_fingerprint` of the training split (``x_train``, ``y_train``: the
        protected labels and the features their gradients depend on): the data key of the protections' noise
        (computed once per loaded data set)."""
        return data_fingerprint(self.x_train, self.y_train)

    def to(self, device: torch.device) -> "BinaryData":
        return BinaryData(self.x_train.to(device), self.y_train.to(device), self.x_test.to(device),
                          self.y_test.to(device), self.name, self.features, self.classes, self.preprocessing)


def load(config) -> BinaryData:
    """The dataset named by ``config.dataset`` (a :class:`~.config.SplitLabelConfig`)."""
    if config.dataset == "fashion_mnist":
        return fashion_mnist_trousers(keep=config.trouser_keep, seed=config.seed, root=config.data_root or None)
    if config.is_user_dataset:
        return user_table(config.dataset, seed=config.seed)
    return synthetic(n_train=config.n_train, n_features=config.n_features, positive_rate=config.positive_rate,
                     seed=config.seed)


def trouser_labels(classes: torch.Tensor, *, keep: float, rng: np.random.Generator) -> torch.Tensor:
    """``1.0`` where the class is trouser and a uniform draw is below ``keep``, else ``0.0``; shape of ``classes``."""
    kept = torch.from_numpy(rng.random(classes.shape[0]) < keep)
    return ((classes == TROUSER) & kept).float()


def fashion_mnist_trousers(*, keep: float, seed: int, root: str | None) -> BinaryData:
    """The seed's binarised Fashion-MNIST (see the module docstring); raises DatasetNotFoundError if absent."""
    rng = np.random.default_rng([seed, 11])
    splits = []
    for train in (True, False):
        # pixels in [0, 1], as the seed's demo fed them
        images = load_image_dataset("fashion_mnist", train=train, root=root, standardize=False)
        splits.append((images.x.flatten(1), trouser_labels(images.y, keep=keep, rng=rng)))
    (x_train, y_train), (x_test, y_test) = splits
    return BinaryData(x_train, y_train, x_test, y_test, "fashion_mnist",
                      "Fashion-MNIST images flattened to 784 pixel values 0-255", ("0", "1"),
                      {"divide_by": 255.0, "source": "public constant: 8-bit pixel values mapped to [0, 1]"})


def synthetic(*, n_train: int, n_features: int, positive_rate: float, seed: int) -> BinaryData:
    """Seeded ``make_classification`` data with about ``positive_rate`` positives in both splits."""
    from sklearn.datasets import make_classification

    n_test = max(n_train // 4, 100)
    informative = max(2, n_features // 2)
    x, y = make_classification(
        n_samples=n_train + n_test, n_features=n_features, n_informative=informative,
        n_redundant=min(n_features - informative, informative // 2), n_clusters_per_class=2,
        weights=[1.0 - positive_rate], flip_y=0.0, class_sep=1.0, random_state=seed)
    x = x.astype(np.float32)
    mean, std = x[:n_train].mean(axis=0), x[:n_train].std(axis=0) + 1e-6
    x = (x - mean) / std
    t = torch.from_numpy
    return BinaryData(t(x[:n_train]), t(y[:n_train].astype(np.float32)), t(x[n_train:]),
                      t(y[n_train:].astype(np.float32)), "synthetic",
                      f"the embedded synthetic data set's {n_features} features as generated", ("0", "1"),
                      {"mean": mean.tolist(), "sd": std.tolist(),
                       "source": "the training split's feature means and sds (+1e-6): the passive party's own "
                                 "features, no label is read; the protection is of the labels only"})


def user_table(name: str, *, seed: int) -> BinaryData:
    """Stored data set ``name`` as a binary task (see the module docstring); the config has checked that it fits."""
    data = load_dataset(name)
    private = data.private()
    x = model_inputs(data, private)
    y = torch.as_tensor(private["y"], dtype=torch.float32)
    validation, test, train = split_rows(private, seed)
    held, train = torch.as_tensor(np.concatenate([validation, test])), torch.as_tensor(train)
    return BinaryData(x[train], y[train], x[held], y[held], name, private_part.raw_features(data.manifest),
                      tuple(str(c) for c in data.classes), private_part.preprocessing(data.manifest))


def short_batch_note(data: BinaryData, batch_size: int) -> str | None:
    """What a run on a stored data set logs when its actual training rows n' are fewer than ``batch_size`` B (the
    config checks B against the declared N only, never the rows): each epoch is then one batch of all n' rows;
    None when n' >= B."""
    n = data.x_train.shape[0]
    if n >= batch_size:
        return None
    return (f"{data.name}: only {n} actual training rows, fewer than batch_size {batch_size} (checked against the "
            f"declared size): each epoch trains one short batch of all {n}")


def check_batch_size(data: BinaryData, batch_size: int) -> None:
    """A batch must fit in the training set (ConfigError otherwise)."""
    if batch_size > data.x_train.shape[0]:
        raise ConfigError("batch_size", f"must be at most the {data.x_train.shape[0]} training examples of "
                                        f"{data.name}; got {batch_size}")
