"""PATE's splits of a stored user data set (:func:`privengine.datasets.load_dataset`) and its teachers' partition:
what :func:`privengine.pate.data.load_pate_data` is for the built-in data sets (which facts and refusals:
:mod:`.user_facts`).

Splits, on the CPU, inputs scaled by public facts only (:func:`privengine.datasets.inputs.model_inputs`):

- query pool: the data set's declared public rows (every one of them; the queries are chosen among them);
- test set (the teachers' accuracies, the student's, the baseline's): the private rows held out by
  :func:`privengine.datasets.held_out.split_rows` (validation and test together: PATE tunes nothing on them), each
  with probability 0.2 from its own draw ``u_i`` (a SHA-256 of the row and ``data_seed``);
- teachers' private set: the other private rows, ``u_i >= 0.2``, each in the partition of teacher
  ``t_i = min(K - 1, floor(K (u_i - 0.2) / 0.8))`` (:func:`hashed_partition`): given that it trains, a row joins
  each teacher with probability 1 / K, by its own draw alone, so adding or removing it changes one teacher's
  partition and no other (a permutation of the rows would reshuffle every partition).
"""

from __future__ import annotations

import numpy as np
import torch

from privengine.datasets import load_dataset
from privengine.datasets.held_out import drawn_split
from privengine.datasets.inputs import model_inputs
from privengine.datasets.private_part import HELD_OUT_FRACTION, preprocessing
from privengine.errors import ConfigError

from .config import PateConfig
from .data import PateData


def load_user_pate_data(config: PateConfig) -> PateData:
    """The splits of ``config.dataset`` (see the module docstring), with the draws :func:`hashed_partition` cuts
    the teachers' partitions from (``partition_draws``, row for row ``private_x``)."""
    data = load_dataset(config.dataset)
    public, private = data.public(), data.private()
    draws, (validation, test, train) = drawn_split(private, config.data_seed)
    held = np.sort(np.concatenate([validation, test]))
    # Only the held-out rows (unprotected: the test accuracies are published from them) decide this refusal; a
    # refusal that read the training rows would stop one of two neighbouring data sets and run on the other.
    if len(held) == 0:
        raise ConfigError("dataset", f"{config.dataset!r} has too few private rows: each is held out with "
                                     f"probability 0.2 (data_seed = {config.data_seed}) to test the teachers and "
                                     "the student, and this draw held out none; add more rows or try another "
                                     "data_seed")
    x, y = model_inputs(data, private), torch.as_tensor(private["y"])
    train_rows, held_rows = torch.as_tensor(train), torch.as_tensor(held)
    return PateData(x[train_rows], y[train_rows], model_inputs(data, public), torch.as_tensor(public["y"]),
                    x[held_rows], y[held_rows], len(data.classes), data.kind == "images", preprocessing(data.manifest),
                    partition_draws=torch.as_tensor(draws[train]))


def hashed_partition(draws: torch.Tensor, teachers: int, cap: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The teachers' partitions of the private training rows whose draws are ``draws`` ``(n,)`` (each in
    [0.2, 1)): ``(positions, weights)``, both ``(K, cap)``: teacher t's row positions in ``positions[t]`` and
    ``weights[t]`` 1.0 on its rows, 0.0 on the empty slots, whose position is ``n``: one past the rows, where the
    caller puts a stand-in row that is no teacher's (a real row there would be another teacher's, and change with
    the neighbours).

    Row i goes to teacher ``t_i = min(K - 1, floor(K (u_i - 0.2) / 0.8))``; a teacher with more than ``cap`` rows
    keeps the ``cap`` of smallest draw, so what it trains on depends on its own rows alone."""
    u = draws.double()
    teacher = ((u - HELD_OUT_FRACTION) / (1.0 - HELD_OUT_FRACTION) * teachers).floor().long().clamp(0, teachers - 1)
    order = torch.from_numpy(np.lexsort((u.numpy(), teacher.numpy())))  # by teacher, then by draw
    owner = teacher[order]
    first = torch.searchsorted(owner, torch.arange(teachers))  # where each teacher's rows start in ``order``
    rank = torch.arange(len(order)) - first[owner]
    kept = rank < cap
    positions = torch.full((teachers, cap), len(order), dtype=torch.int64)
    weights = torch.zeros(teachers, cap)
    positions[owner[kept], rank[kept]] = order[kept]
    weights[owner[kept], rank[kept]] = 1.0
    return positions, weights
