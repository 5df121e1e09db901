"""A user data set's rows as a model's inputs, scaled by public facts only (any mechanism's; the arithmetic a kept
model's loader repeats on raw rows: :func:`privengine.datasets.private_part.preprocessing`).

- a table: each numeric column j mapped from its public bounds [l_j, h_j] (declared, or the public rows' range)
  onto [-1, 1], ``x' = clip(2 (x - l_j) / (h_j - l_j) - 1, -1, 1)`` (a column constant on its public rows,
  h_j = l_j, is shifted by l_j only), then the one-hot codes of each declared categorical column: ``(n, d + sum
  of the category lists' lengths)`` float32;
- images: ``(x / 255 - 0.5) / 0.5``, ``(n, c, h, w)`` float32.
"""

from __future__ import annotations

import numpy as np
import torch

from privengine.kept_models.loader import preprocess, table_inputs

from . import private_part
from .lookup import UserDataset


def model_inputs(data: UserDataset, rows: dict[str, np.ndarray]) -> torch.Tensor:
    """The model inputs of ``rows`` (a part of ``data``: :meth:`~privengine.datasets.UserDataset.public` or
    ``private()``), float32, scaled by public facts only (see the module docstring)."""
    steps = private_part.preprocessing(data.manifest)
    if data.kind == "images":
        return preprocess(torch.as_tensor(rows["x"], dtype=torch.float32), steps)
    return torch.as_tensor(table_inputs(rows["x"], rows["categories"], steps["table"]))
