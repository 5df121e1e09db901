"""A parsed data set before it is stored: its normalised arrays, its schema and its public facts, and the SHA-256
of its normalised content (its address in the store and its fingerprint).

Every public fact is stored as ``{"value": ..., "source": "..."}``, the source saying where it came from: the
user's declaration, the public part (the file's first rows, named), the file's format, or "not declared". None is
ever read from the private rows.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from .declaration import Declaration

CONTENT_VERSION = b"privengine.user_dataset/1"


def fact(value: Any, source: str) -> dict[str, Any]:
    """A public fact with where it came from."""
    return {"value": value, "source": source}


@dataclass(frozen=True)
class Parsed:
    """A data set as it will be stored.

    Attributes:
        arrays: name -> array, each with the rows first (tabular: ``x`` ``(n, d)`` float64 numeric features,
            ``categories`` ``(n, k)`` int64 codes into the declared category lists, ``y`` ``(n,)`` int64 codes into
            the classes; images: ``x`` ``(n, c, h, w)`` uint8, ``y`` ``(n,)`` int64).
        schema: JSON-able: kind, columns (name, role, dtype), label, classes, rows, ...
        public: JSON-able public facts (:func:`fact`), by name.
    """

    arrays: dict[str, np.ndarray]
    schema: dict[str, Any]
    public: dict[str, Any]

    @property
    def rows(self) -> int:
        return int(self.arrays["y"].shape[0])

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the normalised content (:func:`content_digest` under :data:`CONTENT_VERSION`): the data
        set's address in the store. Equal content gives equal fingerprints whatever file format it came in; one
        changed cell changes it."""
        return content_digest(CONTENT_VERSION, self.schema, self.arrays).hexdigest()


def content_digest(tag: bytes, schema: dict[str, Any], arrays: dict[str, np.ndarray]) -> Any:
    """A SHA-256 (a ``hashlib`` object) of ``tag``, then ``schema`` as sorted JSON, then each array (sorted by name)
    with its name, dtype and shape and its C-ordered bytes; callers may update it further. Different tags give
    unrelated digests of the same content (the store's address; a run's noise key)."""
    digest = hashlib.sha256(tag)
    digest.update(json.dumps(schema, sort_keys=True).encode())
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        digest.update(f"\n{name}:{array.dtype.str}{list(array.shape)}\n".encode())
        digest.update(array.reshape(-1).view(np.uint8).data)
    return digest


def public_part(declaration: Declaration, rows: int, what: str = "rows") -> dict[str, Any]:
    """The public part's size fact: the file's first ``public_rows`` rows, as declared (a count, never a fraction
    of the file's rows, which would count the private ones); raise ConfigError unless at least ``min_rows`` private
    rows remain."""
    if declaration.public_rows is not None:
        count, source = declaration.public_rows, f"declared (public_rows): the first {declaration.public_rows} {what}"
    else:
        count, source = 0, f"none declared: every {what[:-1]} is private"
    most = rows - declaration.min_rows
    if count > most:
        raise ConfigError("public_rows", f"must leave at least min_rows = {declaration.min_rows} private {what}; "
                                         f"the file has {rows}, so at most {max(most, 0)} may be public; got {count}")
    return fact(count, source)


def private_size(declaration: Declaration) -> dict[str, Any]:
    """The size used for sampling (N): only as declared, never counted from the private rows."""
    if declaration.private_size is None:
        return fact(None, "not declared (private_size): a mechanism that samples asks for it")
    return fact(declaration.private_size, "declared (private_size)")


def check_rows(declaration: Declaration, rows: int, what: str = "rows") -> None:
    """ConfigError unless the file has at least ``min_rows`` rows."""
    if rows < declaration.min_rows:
        raise ConfigError("file", f"must hold at least min_rows = {declaration.min_rows} {what}; it holds {rows}")
