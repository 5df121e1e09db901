"""The splits of a DP-SGD run on a stored user data set (:func:`privengine.datasets.load_dataset`), on the run's
device: what :func:`privengine.dpsgd.data.load_task` is for the built-in data sets (sizes: :mod:`.user_facts`).

Inputs, from public facts only:

- a table: each numeric column j mapped from its public bounds [l_j, h_j] (declared, or the public rows' range)
  onto [-1, 1], ``x' = clip(2 (x - l_j) / (h_j - l_j) - 1, -1, 1)`` (a column constant on its public rows,
  h_j = l_j, is shifted by l_j only), then the one-hot codes of each declared categorical column: ``(n, d + sum
  of the category lists' lengths)`` float32;
- images: ``(x / 255 - 0.5) / 0.5``, ``(n, c, h, w)`` float32.

Splits: the public part is the data set's declared public rows (its first ``public_rows``); H rows of the private
part, chosen by a permutation seeded by ``data_seed``, are held out and halved into validation (the first
``floor(H / 2)``) and test; the rest is the private training split. The noise key is derived from the stored data
set's fingerprint (:func:`data_key`), never from a hash of the rows taken here.
"""

from __future__ import annotations

import hashlib
import math
import struct
from concurrent.futures import Future

import numpy as np
import torch

from privengine.datasets import UserDataset, load_dataset
from privengine.errors import ConfigError
from privengine.randomness import FINGERPRINT_WORDS

from . import user_facts
from .config import DPSGDConfig, declared_private_size
from .data import VALIDATION_SHARE, PendingFingerprint, Task


def load_user_task(config: DPSGDConfig, device: torch.device) -> Task:
    """The splits of ``config.dataset`` (see the module docstring) on ``device``."""
    data = load_dataset(config.dataset)
    part = user_facts.declared_part(config.dataset, config.private_size)
    public, private = data.public(), data.private()
    x_public, x_private = inputs(data, public), inputs(data, private)
    gen = torch.Generator().manual_seed(config.data_seed)
    perm = torch.randperm(len(x_private), generator=gen)
    held = user_facts.held_out(part)
    if len(x_private) - held < 2:
        raise ConfigError("private_size", f"must not exceed the private rows of data set {config.dataset!r} so "
                                          f"far that fewer than 2 training rows remain after the {held} held out; "
                                          f"got {part}")
    n_val = math.floor(VALIDATION_SHARE * held)
    val, test, train = perm[:n_val], perm[n_val:held], perm[held:]
    y_private = torch.as_tensor(private["y"])

    def put(rows: torch.Tensor | None, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return (x if rows is None else x[rows]).to(device), (y if rows is None else y[rows]).to(device)

    x_train, y_train = put(train, x_private, y_private)
    x_pub, y_pub = put(None, x_public, torch.as_tensor(public["y"]))
    x_val, y_val = put(val, x_private, y_private)
    x_test, y_test = put(test, x_private, y_private)
    words: Future = Future()
    words.set_result(data_key(data, part))
    stored = PendingFingerprint(x_train, y_train, (x_train._version, y_train._version), words)
    return Task(config.dataset, x_train, y_train, x_pub, y_pub, x_test, y_test, len(data.classes),
                x_val=x_val, y_val=y_val, fingerprint_pending=stored, declared_size=declared_private_size(config))


def inputs(data: UserDataset, rows: dict[str, np.ndarray]) -> torch.Tensor:
    """The model inputs of ``rows`` (a part of ``data``: :meth:`~privengine.datasets.UserDataset.public` or
    ``private()``), float32, scaled by public facts only (see the module docstring)."""
    if data.kind == "images":
        return (torch.as_tensor(rows["x"], dtype=torch.float32) / 255.0 - 0.5) / 0.5
    bounds = data.fact("bounds")
    low = np.array([bounds[column]["value"][0] for column in data.manifest["schema"]["numeric"]])
    high = np.array([bounds[column]["value"][1] for column in data.manifest["schema"]["numeric"]])
    width = np.where(high > low, high - low, 2.0)  # a constant public column: shifted only
    columns = [np.clip(2.0 * (rows["x"] - low) / width - np.where(high > low, 1.0, 0.0), -1.0, 1.0)]
    for j, column in enumerate(data.manifest["schema"]["categorical"]):
        count = len(data.fact("categories")[column]["value"])
        columns.append(np.eye(count)[rows["categories"][:, j]])
    return torch.as_tensor(np.concatenate(columns, axis=1), dtype=torch.float32)


def data_key(data: UserDataset, part: int) -> tuple[int, ...]:
    """The run's data key (:data:`~privengine.randomness.FINGERPRINT_WORDS` 32-bit words): the SHA-256 of a tag of
    its own, the stored data set's fingerprint (the SHA-256 of its whole normalised content, so one changed row
    changes it), its declared public rows and the declared private part's size N_part (which place the split)."""
    digest = hashlib.sha256(b"privengine.dpsgd.user_data/1" + bytes.fromhex(data.manifest["fingerprint"])
                            + struct.pack("<QQ", data.public_rows, part)).digest()
    return tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 4 * FINGERPRINT_WORDS, 4))
