"""Datasets: real image datasets in torchvision's file layout, loaded whole into tensors.

Their public facts (names, files under the data root, standardisation constants, class
names) are :mod:`privengine.data_catalogue`'s, which imports no torch. MNIST and
Fashion-MNIST are read here from their idx files, without importing torchvision; the other
datasets, and any download, go through torchvision. Nothing is downloaded unless asked
(``download=True``); a missing dataset raises :class:`~privengine.errors.DatasetNotFoundError`
naming where it was looked for and how to get it, a malformed idx file
:class:`~privengine.errors.DatasetCorruptError` naming the file. Embedded default datasets
(scikit-learn's bundled data, seeded generators) live with the mechanism that uses them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .data_catalogue import FILES_UNDER_ROOT, TORCHVISION_FACTS, data_root
from .errors import DatasetCorruptError, DatasetNotFoundError

# datasets read from their idx files by read_idx rather than through torchvision (see there why)
_IDX_DATASETS = ("mnist", "fashion_mnist")


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


def read_idx(path: Path, ndim: int) -> np.ndarray:
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
        name: one of :data:`~privengine.data_catalogue.TORCHVISION_DATASETS`.
        train: the training split (else the test split).
        root: data root (default :func:`~privengine.data_catalogue.data_root`).
        download: let torchvision fetch the files if they are missing (needs a network).
        standardize: subtract the channel means and divide by the channel stds of the
            training split; False gives pixel values in [0, 1].
    """
    if name not in TORCHVISION_FACTS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(TORCHVISION_FACTS)}")
    cls_name, mean, std, n_classes = TORCHVISION_FACTS[name]
    root = Path(root) if root else data_root()
    not_found = DatasetNotFoundError(
        f"{cls_name} ({'train' if train else 'test'} split) was not found in the data root {root}. Put "
        f"torchvision's {cls_name} files there ({root / FILES_UNDER_ROOT[name]}), or point the data root at a folder "
        "that has them: the data root field of the form, or the PRIVENGINE_DATA environment variable.")
    if name in _IDX_DATASETS and not download:
        folder, prefix = root / FILES_UNDER_ROOT[name], "train" if train else "t10k"
        image_file, label_file = folder / f"{prefix}-images-idx3-ubyte", folder / f"{prefix}-labels-idx1-ubyte"
        if not (image_file.is_file() and label_file.is_file()):
            raise not_found
        images, labels = read_idx(image_file, 3), read_idx(label_file, 1)
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
