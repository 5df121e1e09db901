"""Which private rows of a user data set a run (of any mechanism) holds out, decided row by row (:func:`split_rows`;
:func:`drawn_split` also returns the draws).

Row i of the private part gets a draw ``u_i = SHA-256(tag || data_seed || bytes of row i)[:8] / 2**64`` in [0, 1),
the bytes being the row's stored, normalised content (features, category codes, label) and ``data_seed`` (public,
from the config) the only other input. Row i validates when ``u_i < 0.2 * 0.5``, tests when
``0.1 <= u_i < 0.2``, and trains otherwise: so each row is held out with probability 0.2 (over the hash, modelled as
a random function) from its own content alone (rows with identical content share a fate), and adding or removing
one row changes that row's fate only, never another's. A permutation of the private part would not do: one row
more reshuffles it whole, and the two neighbouring data sets would train on sets differing in many rows, outside the
add/remove claim.
"""

from __future__ import annotations

import hashlib
import struct

import numpy as np

from .private_part import HELD_OUT_FRACTION, VALIDATION_SHARE

TAG = b"privengine.dpsgd.user_split/1"  # named for its first user; kept: a new tag redraws stored runs' splits


def row_draws(rows: dict[str, np.ndarray], data_seed: int) -> np.ndarray:
    """``(n,)`` float64 draws u_i in [0, 1) of the ``n`` rows of ``rows`` (a data set's part: ``x`` ``(n, ...)``,
    ``y`` ``(n,)``, optionally ``categories`` ``(n, k)``), each a function of ``data_seed`` and row i alone."""
    x = np.asarray(rows["x"])
    parts = [np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("<")).reshape(len(rows["y"]), -1),
             np.ascontiguousarray(rows["y"], dtype="<i8").reshape(-1, 1)]
    if rows.get("categories") is not None:
        parts.append(np.ascontiguousarray(rows["categories"], dtype="<i8"))
    seed = struct.pack("<Q", data_seed)
    draws = np.empty(len(rows["y"]), dtype=np.float64)
    for i in range(len(draws)):
        digest = hashlib.sha256(TAG + seed)
        for part in parts:
            digest.update(part[i].tobytes())
        draws[i] = int.from_bytes(digest.digest()[:8], "little") / 2.0 ** 64
    return draws


def drawn_split(rows: dict[str, np.ndarray], data_seed: int
                ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``(draws, (validation, test, train))``: the ``(n,)`` draws u_i of the rows of ``rows`` (:func:`row_draws`,
    each hashed once) and the indices (int64, ascending) of the validation, test and training rows cut from them
    (see the module docstring): ``u < 0.1``, ``0.1 <= u < 0.2``, ``u >= 0.2``. For a caller that needs the draws
    too (PATE's teachers' partition is cut from the training rows' draws)."""
    draws = row_draws(rows, data_seed)
    validation = HELD_OUT_FRACTION * VALIDATION_SHARE
    return draws, (np.flatnonzero(draws < validation),
                   np.flatnonzero((draws >= validation) & (draws < HELD_OUT_FRACTION)),
                   np.flatnonzero(draws >= HELD_OUT_FRACTION))


def split_rows(rows: dict[str, np.ndarray], data_seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The indices (int64, ascending) of the validation, test and training rows of ``rows``: :func:`drawn_split`'s,
    without the draws."""
    return drawn_split(rows, data_seed)[1]
