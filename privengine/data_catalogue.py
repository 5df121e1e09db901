"""The real image datasets the engine knows, as public facts: their names, where torchvision's files lie under the
data root, the published standardisation constants, the class names. No torch, no numpy: configs, forms and pages
read these (the Home page renders without loading torch); :mod:`privengine.data` loads the datasets as tensors.

The data root is ``$PRIVENGINE_DATA`` (default ``$PRIVENGINE_HOME/data``), in torchvision's layout
(``MNIST/raw/...``, ``FashionMNIST/raw/...``, ``cifar-10-batches-py``, ...).
"""

from __future__ import annotations

import os
from pathlib import Path

from .store import default_home

# name -> (torchvision class name, channel means, channel stds, number of classes)
TORCHVISION_FACTS = {
    "mnist": ("MNIST", (0.1307,), (0.3081,), 10),
    "fashion_mnist": ("FashionMNIST", (0.2860,), (0.3530,), 10),
    "cifar10": ("CIFAR10", (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616), 10),
    "cifar100": ("CIFAR100", (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762), 100),
    "svhn": ("SVHN", (0.4377, 0.4438, 0.4728), (0.1980, 0.2010, 0.1970), 10),
}
TORCHVISION_DATASETS = tuple(TORCHVISION_FACTS)
# what torchvision needs under the data root for each dataset (its raw files, as it lays them out)
FILES_UNDER_ROOT = {"mnist": "MNIST/raw", "fashion_mnist": "FashionMNIST/raw", "cifar10": "cifar-10-batches-py",
                    "cifar100": "cifar-100-python", "svhn": "train_32x32.mat"}

# the class names of each dataset's labels 0, 1, ... (torchvision's; absent: the label numbers themselves)
_CLASS_NAMES = {
    "fashion_mnist": ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                      "Ankle boot"),
    "cifar10": ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
}

STANDARDISATION_SOURCE = ("fixed published constants (channel statistics of the whole training split, computed by "
                          "others once): not computed by this run, but a function of data it treats as private, "
                          "which no claim covers")


def standardisation(name: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(means, sds)`` per channel that :func:`privengine.data.load_image_dataset` standardises dataset ``name``'s
    pixels in [0, 1] with, ``x' = (x - mean_c) / sd_c`` for channel ``c``: fixed published constants (of the whole
    training split), never computed here."""
    _, mean, std, _ = TORCHVISION_FACTS[name]
    return mean, std


def class_names(name: str) -> list[str]:
    """The names of dataset ``name``'s classes in label order (the label numbers as text where they are the
    names: digits)."""
    return list(_CLASS_NAMES.get(name) or (str(k) for k in range(TORCHVISION_FACTS[name][3])))


def data_root() -> Path:
    """Where real datasets are looked for: ``$PRIVENGINE_DATA`` or ``$PRIVENGINE_HOME/data``."""
    return Path(os.environ.get("PRIVENGINE_DATA") or default_home() / "data")


def dataset_present(name: str, root: str | os.PathLike | None = None) -> bool:
    """Whether torchvision dataset ``name`` has its files under ``root`` (default :func:`data_root`); a quick look
    at the folder, without loading anything."""
    return (Path(root or data_root()) / FILES_UNDER_ROOT[name]).exists()
