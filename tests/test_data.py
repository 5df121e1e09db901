"""The data root: which datasets are present, and what a missing one says."""

from __future__ import annotations

import pytest

from privengine.data import dataset_present, load_image_dataset
from privengine.errors import DatasetNotFoundError


def test_a_missing_dataset_names_the_data_root_and_how_to_set_it(tmp_path):
    assert not dataset_present("mnist", tmp_path)
    with pytest.raises(DatasetNotFoundError) as caught:
        load_image_dataset("mnist", train=False, root=tmp_path)
    message = str(caught.value)
    assert f"not found in the data root {tmp_path}" in message and str(tmp_path / "MNIST" / "raw") in message
    assert "PRIVENGINE_DATA" in message and "download=True" not in message  # not torchvision's advice


def test_a_dataset_is_present_once_its_raw_files_are(tmp_path):
    (tmp_path / "FashionMNIST" / "raw").mkdir(parents=True)
    assert dataset_present("fashion_mnist", tmp_path) and not dataset_present("cifar10", tmp_path)
