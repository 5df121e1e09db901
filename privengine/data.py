"""Datasets: real image datasets through torchvision, loaded whole into tensors.

The data root is ``$PRIVENGINE_DATA`` (default ``$PRIVENGINE_HOME/data``), in
torchvision's layout (``MNIST/raw/...``, ``FashionMNIST/raw/...``, ``cifar-10-batches-py``,
...). Nothing is downloaded unless asked (``download=True``); a missing dataset
raises :class:`~privengine.errors.DatasetNotFoundError` naming where it was
looked for and how to get it. Embedded default datasets (scikit-learn's bundled
data, seeded generators) live with the mechanism that uses them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .errors import DatasetNotFoundError
from .store import default_home

# name -> (torchvision class name, channel means, channel stds, number of classes)
_TORCHVISION = {
    "mnist": ("MNIST", (0.1307,), (0.3081,), 10),
    "fashion_mnist": ("FashionMNIST", (0.2860,), (0.3530,), 10),
    "cifar10": ("CIFAR10", (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616), 10),
    "cifar100": ("CIFAR100", (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762), 100),
    "svhn": ("SVHN", (0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970), 10),
}
TORCHVISION_DATASETS = tuple(_TORCHVISION)
# what torchvision needs under the data root for each dataset (its raw files, as it lays them out)
_PRESENT_IF = {"mnist": "MNIST/raw", "fashion_mnist": "FashionMNIST/raw", "cifar10": "cifar-10-batches-py",
               "cifar100": "cifar-100-python", "svhn": "train_32x32.mat"}


def data_root() -> Path:
    """Where real datasets are looked for: ``$PRIVENGINE_DATA`` or ``$PRIVENGINE_HOME/data``."""
    return Path(os.environ.get("PRIVENGINE_DATA") or default_home() / "data")


def dataset_present(name: str, root: str | os.PathLike | None = None) -> bool:
    """Whether torchvision dataset ``name`` has its files under ``root`` (default :func:`data_root`); a quick look
    at the folder, without loading anything."""
    return (Path(root or data_root()) / _PRESENT_IF[name]).exists()


@dataclass(frozen=True)
class ImageData:
    """A whole image dataset split in memory.

    Attributes:
        x: ``(n, channels, height, width)`` float32, standardised per channel (or in [0, 1]).
        y: ``(n,)`` int64 class labels.
        n_classes: number of classes.
        name: dataset name.
    """

    x: torch.Tensor
    y: torch.Tensor
    n_classes: int
    name: str


def load_image_dataset(name: str, *, train: bool, root: str | os.PathLike | None = None,
                       download: bool = False, standardize: bool = True) -> ImageData:
    """Load a torchvision dataset split as float tensors.

    Args:
        name: one of :data:`TORCHVISION_DATASETS`.
        train: the training split (else the test split).
        root: data root (default :func:`data_root`).
        download: let torchvision fetch the files if they are missing (needs a network).
        standardize: subtract the channel means and divide by the channel stds of the
            training split; False gives pixel values in [0, 1].
    """
    import torchvision

    if name not in _TORCHVISION:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(_TORCHVISION)}")
    cls_name, mean, std, n_classes = _TORCHVISION[name]
    root = Path(root) if root else data_root()
    cls = getattr(torchvision.datasets, cls_name)
    split = {"split": "train" if train else "test"} if name == "svhn" else {"train": train}
    try:
        ds = cls(root=str(root), download=download, **split)
    except RuntimeError:  # torchvision's "Dataset not found or corrupted. You can use download=True ..."
        raise DatasetNotFoundError(
            f"{cls_name} ({'train' if train else 'test'} split) was not found in the data root {root}. Put "
            f"torchvision's {cls_name} files there ({root / _PRESENT_IF[name]}), or point the data root at a folder "
            "that has them: the data root field of the form, or the PRIVENGINE_DATA environment variable.") from None
    images = np.asarray(ds.data)
    if images.ndim == 3:  # (n, h, w) grayscale
        images = images[:, None]
    elif images.shape[-1] == 3:  # (n, h, w, c) -> (n, c, h, w)
        images = images.transpose(0, 3, 1, 2)
    x = torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0)
    if standardize:
        x = (x - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)
    labels = getattr(ds, "targets", None)
    if labels is None:
        labels = ds.labels
    y = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
    return ImageData(x=x, y=y, n_classes=n_classes, name=name)
