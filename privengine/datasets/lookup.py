"""The lookup mechanisms use: a user data set's name -> its loaded arrays and declared public facts
(:func:`load_dataset`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import storage


@dataclass(frozen=True)
class UserDataset:
    """A stored user data set, loaded whole.

    Attributes:
        name: its name.
        manifest: its manifest (:func:`.storage.save`): schema, fingerprint, public facts with their sources.
        x: tabular: ``(n, d)`` float64, the numeric columns ``manifest["schema"]["numeric"]`` in order; images:
            ``(n, c, h, w)`` uint8 pixels in [0, 255].
        y: ``(n,)`` int64, codes into :attr:`classes`.
        categories: tabular: ``(n, k)`` int64, codes into each declared category list
            (``manifest["schema"]["categorical"]``, in order); images: None.

    Rows ``[:public_rows]`` are the public part, ``[public_rows:]`` the private part (:meth:`public`,
    :meth:`private`).
    """

    name: str
    manifest: dict[str, Any]
    x: np.ndarray
    y: np.ndarray
    categories: np.ndarray | None

    @property
    def kind(self) -> str:
        return self.manifest["kind"]

    def fact(self, name: str) -> Any:
        """The value of public fact ``name`` (``private_size``, ``public_rows``, ``classes``, ``bounds``,
        ``categories``; the last two by column, each ``{"value", "source"}``)."""
        found = self.manifest["public"][name]
        return found["value"] if "value" in found else found

    @property
    def classes(self) -> list[str]:
        return self.fact("classes")

    @property
    def public_rows(self) -> int:
        return self.fact("public_rows")

    @property
    def private_size(self) -> int | None:
        """N as declared public (what sampling and accounting use), or None when not declared."""
        return self.fact("private_size")

    def public(self) -> dict[str, np.ndarray]:
        """The public part's arrays (``x``, ``y``, and ``categories`` for a table), rows ``[:public_rows]``."""
        return self._rows(slice(0, self.public_rows))

    def private(self) -> dict[str, np.ndarray]:
        """The private part's arrays, rows ``[public_rows:]``: what a guarantee protects."""
        return self._rows(slice(self.public_rows, None))

    def arrays(self) -> dict[str, np.ndarray]:
        """Every stored array by name (``x``, ``y``, and ``categories`` for a table), all rows."""
        return self._rows(slice(None))

    def _rows(self, rows: slice) -> dict[str, np.ndarray]:
        arrays = {"x": self.x[rows], "y": self.y[rows]}
        if self.categories is not None:
            arrays["categories"] = self.categories[rows]
        return arrays


def load_dataset(name: str, home=None) -> UserDataset:
    """User data set ``name`` -> :class:`UserDataset`; ConfigError naming ``name`` (and the stored ones) if none is
    stored under it."""
    document = storage.manifest(name, home)
    arrays = storage.load_arrays(document, home)
    return UserDataset(name, document, arrays["x"], arrays["y"], arrays.get("categories"))
