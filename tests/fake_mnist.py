"""Small random stand-ins for torchvision MNIST, for PATE tests that must not read the real dataset."""

from __future__ import annotations

import torch

from privengine.data import ImageData
from privengine.pate import data as pate_data


def fake_mnist(monkeypatch, n_train: int = 40, n_test: int = 300) -> dict[bool, torch.Tensor]:
    """Make PATE's loader return random ``(n, 1, 28, 28)`` images (pixels in [0, 1] when not standardised)
    labelled ``arange(n) % 10``; returns the raw pixels by ``train`` flag."""
    gen = torch.Generator().manual_seed(3)
    splits = {True: torch.rand(n_train, 1, 28, 28, generator=gen), False: torch.rand(n_test, 1, 28, 28, generator=gen)}
    labels = {True: torch.arange(n_train) % 10, False: torch.arange(n_test) % 10}

    def fake_load(name, *, train, root=None, download=False, standardize=True):
        x = splits[train]
        return ImageData(x=(x - 0.13) / 0.31 if standardize else x, y=labels[train], n_classes=10, name=name)

    monkeypatch.setattr(pate_data, "load_image_dataset", fake_load)
    return splits
