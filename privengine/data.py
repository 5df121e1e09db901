"""Datasets: real image datasets in torchvision's file layout, loaded whole into tensors.

The data root is ``$PRIVENGINE_DATA`` (default ``$PRIVENGINE_HOME/data``), in
torchvision's layout (``MNIST/raw/...``, ``FashionMNIST/raw/...``, ``cifar-10-batches-py``,
...). MNIST and Fashion-MNIST are read here from their idx files, without importing
torchvision; the other datasets, and any download, go through torchvision. Nothing is
downloaded unless asked (``download=True``); a missing dataset raises
:class:`~privengine.errors.DatasetNotFoundError` naming where it was looked for and
how to get it, a malformed idx file :class:`~privengine.errors.DatasetCorruptError`
naming the file. Embedded default datasets (scikit-learn's bundled data, seeded
generators) live with the mechanism that uses them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .errors import DatasetCorruptError, DatasetNotFoundError
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
# datasets read from their idx files by _read_idx rather than through torchvision (see there why)
_IDX_DATASETS = ("mnist", "fashion_mnist")


# the class names of each dataset's labels 0, 1, ... (torchvision's; None: the label numbers themselves)
_CLASS_NAMES = {
    "fashion_mnist": ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                      "Ankle boot"),
    "cifar10": ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"),
}


STANDARDISATION_SOURCE = ("fixed published constants (channel statistics of the whole training split, computed by "
                          "others once): not computed by this run, but a function of data it treats as private, "
                          "which no claim covers")


def standardisation(name: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(means, sds)`` per channel that :func:`load_image_dataset` standardises dataset ``name``'s pixels in
    [0, 1] with: fixed published constants (of the whole training split), never computed here."""
    _, mean, std, _ = _TORCHVISION[name]
    return mean, std


def class_names(name: str) -> list[str]:
    """The names of dataset ``name``'s classes in label order (the label numbers as text where they are the
    names: digits)."""
    return list(_CLASS_NAMES.get(name) or (str(k) for k in range(_TORCHVISION[name][3])))


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


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """Read an idx file of uint8 values (the MNIST family's format) as a writable uint8 array shaped as its header
    says: ``(n, height, width)`` for ``ndim=3`` (images), ``(n,)`` for ``ndim=1`` (labels).

    Hand-written because torchvision's reader does no more (a big-endian header: two zero bytes, the type byte 0x08
    for uint8, the number of dimensions, one big-endian int32 per dimension; then the bytes), and importing
    torchvision pulls in torch._dynamo, torch.onnx and torch.distributed: about 1.3 s per process on a 2-core CPU
    and 5 s on a GPU machine, half of a short DP-SGD run there.
    """
    data = bytearray(path.read_bytes())  # a bytearray, so the array over it is writable (torch.from_numpy warns)
    header = 4 + 4 * ndim
    if len(data) < header or data[:4] != bytes((0, 0, 0x08, ndim)):
        raise DatasetCorruptError(f"{path} is not an idx file of {ndim}-dimensional uint8 data: its header starts "
                                  f"{bytes(data[:4]).hex(' ')}, where 00 00 08 {ndim:02x} was expected")
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">i4", count=ndim, offset=4))
    if len(data) - header != int(np.prod(shape)):
        raise DatasetCorruptError(f"{path} is truncated or has trailing bytes: its header gives shape {shape}, "
                                  f"{int(np.prod(shape))} bytes of data, and the file has {len(data) - header}")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def load_image_dataset(name: str, *, train: bool, root: str | os.PathLike | None = None,
                       download: bool = False, standardize: bool = True) -> ImageData:
    """Load a dataset split as float tensors: MNIST and Fashion-MNIST from their idx files (through torchvision
    when ``download``), the others through torchvision.

    Args:
        name: one of :data:`TORCHVISION_DATASETS`.
        train: the training split (else the test split).
        root: data root (default :func:`data_root`).
        download: let torchvision fetch the files if they are missing (needs a network).
        standardize: subtract the channel means and divide by the channel stds of the
            training split; False gives pixel values in [0, 1].
    """
    if name not in _TORCHVISION:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(_TORCHVISION)}")
    cls_name, mean, std, n_classes = _TORCHVISION[name]
    root = Path(root) if root else data_root()
    not_found = DatasetNotFoundError(
        f"{cls_name} ({'train' if train else 'test'} split) was not found in the data root {root}. Put "
        f"torchvision's {cls_name} files there ({root / _PRESENT_IF[name]}), or point the data root at a folder "
        "that has them: the data root field of the form, or the PRIVENGINE_DATA environment variable.")
    if name in _IDX_DATASETS and not download:
        folder, prefix = root / _PRESENT_IF[name], "train" if train else "t10k"
        image_file, label_file = folder / f"{prefix}-images-idx3-ubyte", folder / f"{prefix}-labels-idx1-ubyte"
        if not (image_file.is_file() and label_file.is_file()):
            raise not_found
        images, labels = _read_idx(image_file, 3), _read_idx(label_file, 1)
        if len(images) != len(labels):
            raise DatasetCorruptError(f"{image_file} has {len(images)} images and {label_file} {len(labels)} labels")
    else:
        import torchvision

        split = {"split": "train" if train else "test"} if name == "svhn" else {"train": train}
        try:
            ds = getattr(torchvision.datasets, cls_name)(root=str(root), download=download, **split)
        except RuntimeError:  # torchvision's "Dataset not found or corrupted. You can use download=True ..."
            raise not_found from None
        images = np.asarray(ds.data)
        labels = getattr(ds, "targets", None)
        if labels is None:
            labels = ds.labels
    if images.ndim == 3:  # (n, h, w) grayscale
        images = images[:, None]
    elif images.shape[-1] == 3:  # (n, h, w, c) -> (n, c, h, w)
        images = images.transpose(0, 3, 1, 2)
    x = torch.from_numpy(np.ascontiguousarray(images)).float().div_(255.0)
    if standardize:
        x = (x - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)
    y = torch.as_tensor(np.asarray(labels), dtype=torch.int64)
    return ImageData(x=x, y=y, n_classes=n_classes, name=name)
