"""PATE's three disjoint splits: private (teachers), query pool (student), student test.

The teachers see only the private split. Queries come from the public split's
query pool, which the teachers never saw; the student is tested on the rest of
the public split. Image datasets: the torchvision train split is private and the
test split public, its first images the query pool and its last
:func:`~privengine.pate.config.student_test_size` images the student's test set (the
PATE papers' split: MNIST's first 9 000 test images are the pool, the last 1 000 the
test set). Embedded datasets: a seeded shuffle of the public rows. Nothing the public
side sees depends on private data: embedded datasets are standardised with the public
split's statistics, image datasets with fixed per-dataset constants.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from ..data import load_image_dataset
from ..data_catalogue import STANDARDISATION_SOURCE, standardisation
from ..features.scattering import dataset_scattering
from ..randomness import data_fingerprint
from .config import DATA_SEED, REAL_DATASETS, SPLIT_SIZES, student_test_size


@dataclass(frozen=True)
class PateData:
    """Tensors on the CPU; ``x`` of shape ``(n, *input_shape)`` float32, ``y`` of shape ``(n,)`` int64.
    ``preprocessing``: how raw features became ``x`` (``divide_by``, then per channel or feature ``mean`` and ``sd``,
    or a user table's ``table``; :mod:`privengine.kept_models.loader`), with the ``source`` of its constants.
    ``partition_draws``: a user data set's ``(n_private,)`` float64 row draws the teachers' partition is cut from
    (:func:`privengine.pate.user_data.hashed_partition`); None: a random permutation cuts it
    (:func:`privengine.pate.ensemble.partition_rows`)."""

    private_x: torch.Tensor
    private_y: torch.Tensor
    pool_x: torch.Tensor
    pool_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    n_classes: int
    is_image: bool
    preprocessing: dict = field(default_factory=dict, compare=False)
    partition_draws: torch.Tensor | None = field(default=None, compare=False)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(self.private_x.shape[1:])

    @cached_property
    def private_fingerprint(self) -> tuple[int, ...]:
        """:func:`~privengine.randomness.data_fingerprint` of the teachers' private training set (``private_x``,
        ``private_y``; the records themselves, whatever features the teachers see of them): the data key of the
        run's noise streams (computed once per loaded data set)."""
        return data_fingerprint(self.private_x, self.private_y)


def load_pate_data(dataset: str, *, root: str = "", download: bool = False) -> PateData:
    """The splits of ``dataset`` (see :data:`~privengine.pate.config.SPLIT_SIZES`)."""
    if dataset in REAL_DATASETS:
        train = load_image_dataset(dataset, train=True, root=root or None, download=download)
        test = load_image_dataset(dataset, train=False, root=root or None, download=download)
        mean, sd = standardisation(dataset)
        return _with_public_split(train.x, train.y, test.x, test.y, train.n_classes, is_image=True, shuffle=False,
                                  preprocessing={"divide_by": 255.0, "mean": list(mean), "sd": list(sd),
                                                 "source": STANDARDISATION_SOURCE})
    x, y, n_classes, per_feature = _embedded(dataset)
    n_private = SPLIT_SIZES[dataset][0]
    mean, sd = public_statistics(x[n_private:], per_feature=per_feature)
    x = (x - mean) / sd
    steps = {"divide_by": 16.0} if dataset == "digits" else {}
    return _with_public_split(x[:n_private], y[:n_private], x[n_private:], y[n_private:], n_classes, is_image=False,
                              shuffle=True, preprocessing={**steps, "mean": mean.reshape(-1).tolist(),
                                                           "sd": sd.reshape(-1).tolist(),
                                                           "source": "the public split's mean and sd (no private "
                                                                     "row is read)"})


def public_statistics(public: torch.Tensor, *, per_feature: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean and std of the public rows only (per feature, or one of each), that every split is standardised
    with, ``(x - mean) / std``.

    Statistics of the private rows would make every public query depend on private data;
    the public split's cost nothing.
    """
    dims = 0 if per_feature else tuple(range(public.ndim))
    return public.mean(dim=dims), public.std(dim=dims)


def _embedded(dataset: str) -> tuple[torch.Tensor, torch.Tensor, int, bool]:
    """``(x, y, n_classes, per_feature)``: raw features, private rows first; ``per_feature`` says how to
    standardise them (per feature for tabular data, one mean and std for pixels)."""
    if dataset == "synthetic":
        from sklearn.datasets import make_classification

        n = sum(SPLIT_SIZES["synthetic"])
        x, y = make_classification(n_samples=n, n_features=40, n_informative=12, n_redundant=4, n_classes=10,
                                   n_clusters_per_class=1, class_sep=1.8, flip_y=0.0, random_state=DATA_SEED)
        return torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.int64), 10, True
    if dataset == "digits":
        from sklearn.datasets import load_digits

        digits = load_digits()
        order = np.random.default_rng(DATA_SEED).permutation(len(digits.target))
        x = digits.images[order].astype(np.float32)[:, None] / 16.0
        return torch.tensor(x), torch.tensor(digits.target[order], dtype=torch.int64), 10, False
    raise ValueError(f"unknown embedded dataset {dataset!r}")


def _with_public_split(private_x, private_y, public_x, public_y, n_classes: int, *, is_image: bool,
                       shuffle: bool, preprocessing: dict) -> PateData:
    """The pool is the first public rows and the test set the last ones, after a seeded shuffle if ``shuffle``."""
    if shuffle:
        order = torch.from_numpy(np.random.default_rng(DATA_SEED).permutation(len(public_y)))
        public_x, public_y = public_x[order], public_y[order]
    n_pool = len(public_y) - student_test_size(len(public_y))
    return PateData(private_x, private_y, public_x[:n_pool], public_y[:n_pool], public_x[n_pool:], public_y[n_pool:],
                    n_classes, is_image, preprocessing)


@dataclass(frozen=True)
class TeacherInputs:
    """What the teachers see of the private split, the query pool and the student test set, row for row
    the examples of :class:`PateData`: their pixels, or their ScatterNet features ``(n, 81, 7, 7)``."""

    private_x: torch.Tensor
    pool_x: torch.Tensor
    test_x: torch.Tensor


def load_scattering_inputs(dataset: str, *, root: str = "", download: bool = False, device=None,
                           should_stop=lambda: False, progress=lambda fraction, text: None) -> TeacherInputs | None:
    """The scattering (J = 2, L = 8, from pixels in [0, 1]) of ``dataset``'s splits on ``device`` (default: the
    CPU), from the cache every mechanism shares (computed there on first use: about a minute for MNIST on 2 CPU
    cores); None if a stop came meanwhile."""
    train = load_image_dataset(dataset, train=True, root=root or None, download=download, standardize=False)
    test = load_image_dataset(dataset, train=False, root=root or None, download=download, standardize=False)
    private = dataset_scattering(train.x, f"{dataset}-train", device=device, should_stop=should_stop,
                                 progress=progress)
    public = None if private is None else dataset_scattering(test.x, f"{dataset}-test", device=device,
                                                             should_stop=should_stop, progress=progress)
    if public is None:
        return None
    n_pool = len(test.y) - student_test_size(len(test.y))
    return TeacherInputs(private, public[:n_pool], public[n_pool:])
