"""The data root: which datasets are present, what a missing one says, and the MNIST family's idx reader (the
values torchvision gives, without importing torchvision)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from privengine.data import load_image_dataset
from privengine.data_catalogue import TORCHVISION_FACTS, dataset_present
from privengine.errors import DatasetCorruptError, DatasetNotFoundError
from tests.conftest import REAL_DATA, subprocess_env
from tests.idx_files import write_idx


def _write_split(root: Path, folder: str, prefix: str, n: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Random ``(n, 6, 4)`` uint8 images and ``(n,)`` labels written under ``root/folder`` as split ``prefix``
    (``train`` or ``t10k``); returns them. Height != width, so a transposed reading would show."""
    rng = np.random.default_rng(len(prefix) + n)
    images, labels = rng.integers(0, 256, (n, 6, 4), dtype=np.uint8), rng.integers(0, 10, n, dtype=np.uint8)
    write_idx(root / folder / f"{prefix}-images-idx3-ubyte", images)
    write_idx(root / folder / f"{prefix}-labels-idx1-ubyte", labels)
    return images, labels


def test_a_missing_dataset_names_the_data_root_and_how_to_set_it(tmp_path):
    assert not dataset_present("mnist", tmp_path)
    with pytest.raises(DatasetNotFoundError) as caught:
        load_image_dataset("mnist", train=False, root=tmp_path)
    message = str(caught.value)
    assert f"not found in the data root {tmp_path}" in message and str(tmp_path / "MNIST" / "raw") in message
    assert "PRIVENGINE_DATA" in message and "download=True" not in message  # not torchvision's advice


def test_a_split_with_its_labels_file_missing_is_not_found(tmp_path):
    _write_split(tmp_path, "MNIST/raw", "t10k")
    (tmp_path / "MNIST/raw/t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DatasetNotFoundError, match="MNIST \\(test split\\) was not found in the data root"):
        load_image_dataset("mnist", train=False, root=tmp_path)


def test_a_dataset_is_present_once_its_raw_files_are(tmp_path):
    (tmp_path / "FashionMNIST" / "raw").mkdir(parents=True)
    assert dataset_present("fashion_mnist", tmp_path) and not dataset_present("cifar10", tmp_path)


@pytest.mark.parametrize("name, folder", [("mnist", "MNIST/raw"), ("fashion_mnist", "FashionMNIST/raw")])
@pytest.mark.parametrize("train", [True, False])
def test_the_idx_reader_returns_the_files_images_and_labels(tmp_path, name, folder, train):
    images, labels = _write_split(tmp_path, folder, "train" if train else "t10k", n=7 if train else 5)
    _, mean, std, _ = TORCHVISION_FACTS[name]
    pixels = torch.from_numpy(images.astype(np.float32) / 255)[:, None]  # (n, 1, 6, 4)
    raw = load_image_dataset(name, train=train, root=tmp_path, standardize=False)
    standardised = load_image_dataset(name, train=train, root=tmp_path)
    assert raw.x.dtype == torch.float32 and raw.x.shape == (len(images), 1, 6, 4) and torch.equal(raw.x, pixels)
    assert torch.equal(standardised.x, (pixels - torch.tensor(mean)) / torch.tensor(std))
    for data in (raw, standardised):
        assert data.y.dtype == torch.int64 and torch.equal(data.y, torch.from_numpy(labels.astype(np.int64)))
        assert data.n_classes == 10 and data.name == name


@pytest.mark.parametrize("damage, expected", [
    (lambda data: data[:-3], "truncated"),
    (lambda data: b"\x00\x00\x0d\x03" + data[4:], "header starts 00 00 0d 03, where 00 00 08 03 was expected"),
])
def test_a_malformed_idx_file_is_named_in_a_clear_error(tmp_path, damage, expected):
    _write_split(tmp_path, "FashionMNIST/raw", "train")
    images = tmp_path / "FashionMNIST/raw/train-images-idx3-ubyte"
    images.write_bytes(damage(images.read_bytes()))
    with pytest.raises(DatasetCorruptError, match=expected) as caught:
        load_image_dataset("fashion_mnist", train=True, root=tmp_path)
    assert str(images) in str(caught.value)


@pytest.mark.slow
def test_loading_mnist_does_not_import_torchvision(tmp_path):
    _write_split(tmp_path, "MNIST/raw", "train")
    code = ("import sys; from privengine.data import load_image_dataset; "
            "data = load_image_dataset('mnist', train=True, root=sys.argv[1]); "
            "print(tuple(data.x.shape), 'torchvision' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          env=subprocess_env(), check=True)
    assert done.stdout.strip().splitlines()[-1] == "(5, 1, 6, 4) False", done.stdout + done.stderr


@pytest.mark.parametrize("name", ["mnist", "fashion_mnist"])
@pytest.mark.parametrize("train", [True, False])
def test_the_idx_reader_gives_torchvisions_tensors_bit_for_bit(name, train):
    if not dataset_present(name, REAL_DATA):
        pytest.skip(f"{name} is not under {REAL_DATA} (set PRIVENGINE_DATA to a data root that has it)")
    torchvision = pytest.importorskip("torchvision", reason="torchvision is the reference to compare with")
    cls_name, mean, std, _ = TORCHVISION_FACTS[name]
    reference = getattr(torchvision.datasets, cls_name)(root=str(REAL_DATA), train=train, download=False)
    # what load_image_dataset did with torchvision's arrays before it read the idx files itself
    pixels = torch.from_numpy(np.ascontiguousarray(np.asarray(reference.data)[:, None])).float().div_(255.0)
    labels = torch.as_tensor(np.asarray(reference.targets), dtype=torch.int64)
    raw = load_image_dataset(name, train=train, root=REAL_DATA, standardize=False)
    assert torch.equal(raw.x, pixels) and torch.equal(raw.y, labels) and raw.x.shape == (len(labels), 1, 28, 28)
    standardised = load_image_dataset(name, train=train, root=REAL_DATA)
    old = (pixels - torch.tensor(mean).view(1, -1, 1, 1)) / torch.tensor(std).view(1, -1, 1, 1)
    assert standardised.x.dtype == old.dtype and torch.equal(standardised.x, old)
    assert torch.equal(standardised.y, labels)
