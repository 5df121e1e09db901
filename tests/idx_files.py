"""IDX files (the MNIST family's format) written by the tests: made-up splits (tests/test_data.py) and the first rows
of the real files (:func:`tests.preset_runs.smaller_data_root`). They are read by the engine's own
:func:`privengine.data.read_idx`."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from privengine.data import read_idx


def write_idx(path: Path, values: np.ndarray) -> None:
    """Write uint8 ``values`` of any shape as an idx file: 00 00 08 ndim, one big-endian int32 per dimension, bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = bytes((0, 0, 0x08, values.ndim)) + struct.pack(f">{values.ndim}i", *values.shape)
    path.write_bytes(header + values.astype(np.uint8).tobytes())


def idx_head(source: Path, dest: Path, rows: int, ndim: int) -> None:
    """Write the first ``rows`` items of the ``ndim``-dimensional idx file ``source`` to ``dest``: the same bytes
    under a header with a smaller first size. ValueError if ``source`` has fewer items."""
    values = read_idx(source, ndim)
    if not 0 < rows <= len(values):
        raise ValueError(f"{source} has {len(values)} items; asked for the first {rows}")
    write_idx(dest, values[:rows])
