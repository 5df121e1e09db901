"""The splits of a DP-SGD run on a stored user data set (:func:`privengine.datasets.load_dataset`), on the run's
device: what :func:`privengine.dpsgd.data.load_task` is for the built-in data sets (sizes: :mod:`privengine.datasets.private_part`).

Inputs, from public facts only: :func:`privengine.datasets.inputs.model_inputs` (a table's columns scaled by
their public bounds onto [-1, 1], categories one-hot; images onto [-1, 1]).

Splits: the public part is the data set's declared public rows (its first ``public_rows``); each row of the private
part is held out with probability 0.2, decided from its own content and ``data_seed`` alone (:mod:`privengine.datasets.held_out`:
validation or test, a tenth each), so adding or removing one row changes only that row's fate; the rest is the
private training split (its size is never used: q = B / N with the declared N). The noise key is a digest of the
stored content with a tag of its own (:func:`data_key`), never the content address that is shown.
"""

from __future__ import annotations

import struct
from concurrent.futures import Future

import torch

from privengine.datasets import UserDataset, content_digest, load_dataset, private_part
from privengine.datasets.held_out import split_rows
from privengine.datasets.inputs import model_inputs
from privengine.errors import ConfigError
from privengine.randomness import FINGERPRINT_WORDS

from .config import DPSGDConfig, declared_private_size
from .data import PendingFingerprint, Task

NOISE_KEY_TAG = b"privengine.dpsgd.user_data.noise_key/1"


def load_user_task(config: DPSGDConfig, device: torch.device) -> Task:
    """The splits of ``config.dataset`` (see the module docstring) on ``device``."""
    data = load_dataset(config.dataset)
    part = private_part.declared_part(config.dataset, config.private_size)
    public, private = data.public(), data.private()
    x_public, x_private = model_inputs(data, public), model_inputs(data, private)
    val, test, train = (torch.as_tensor(rows) for rows in split_rows(private, config.data_seed))
    # Only the held-out rows (unprotected, their counts published) decide this refusal: a test of the training rows
    # would refuse one of two neighbouring data sets and run on the other, which no (ε, δ) covers (review
    # helper-37); Poisson sampling at q = B / N trains on any number of rows, N being declared.
    if min(len(val), len(test)) < 1:
        raise ConfigError("dataset", f"{config.dataset!r} has too few private rows: each is held out with "
                                     f"probability 0.2 (data_seed = {config.data_seed}), and this draw left "
                                     f"{len(val)} validation and {len(test)} test rows (at least 1 each needed); "
                                     "add more rows or try another data_seed")
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


def data_key(data: UserDataset, part: int) -> tuple[int, ...]:
    """The run's data key (:data:`~privengine.randomness.FINGERPRINT_WORDS` 32-bit words): the SHA-256, under a tag
    of its own, of the data set's whole normalised content as loaded (:func:`~privengine.datasets.content_digest`:
    one changed row changes it), its declared public rows and the declared private part's size N_part. Its tag
    differs from the content address's, so the address, which is shown, says nothing about the key, which never
    leaves the process (``privengine/kept_models/spec.py`` says why it must not)."""
    digest = content_digest(NOISE_KEY_TAG, data.manifest["schema"], data.arrays())
    digest.update(struct.pack("<QQ", data.public_rows, part))
    digest = digest.digest()
    return tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 4 * FINGERPRINT_WORDS, 4))
