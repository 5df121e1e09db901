"""What the user declares about a data set when adding it: its name, kind, label column and the **public** facts
(the size used for sampling, which rows are public, the class list, category lists, feature bounds).

Each field is checked here, before any file is read, and a bad one raises :class:`ConfigError` naming it by its
field name (the CLI's flag without the dashes, ``public_rows`` for ``--public-rows``; the Data page maps names to
its labels) with what is allowed. The textual forms the CLI and the page share are parsed here too:
``COL=a,b,c`` (a categorical column and its category list), ``COL=LO:HI`` (a numeric column's bounds; ``*=LO:HI``
for every numeric column not named) and ``a,b,c`` (the class list).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Iterable

from ..errors import ConfigError

KINDS = ("tabular", "images")
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
NAME_RULE = "1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit"
DEFAULT_MAX_BYTES = 512 * 2 ** 20  # 512 MiB: a file (or a folder's files, or a zip's content) above it is refused
DEFAULT_MIN_ROWS = 10  # the fewest private rows (images) a data set may have
EVERY_COLUMN = "*"  # in --bounds: every numeric column not named


@dataclass(frozen=True)
class Declaration:
    """A data set's declaration; construct it, then :meth:`check` it (the CLI and the page do).

    Attributes:
        name: the data set's name in the registry (:data:`NAME_RULE`).
        kind: ``tabular`` or ``images``; None: from the path (a folder or ``.zip``: images; else tabular).
        label: the label column (tabular only).
        classes: the class list, declared public; None: the public part's labels (tabular; images: the class
            folders' names).
        public_rows: the public part, the file's first rows (a count: a fraction of the file's rows would count
            the private rows too).
        private_size: N, the private part's size declared public (what sampling and accounting use); None: not
            declared (a mechanism that samples then asks for it).
        categorical: column -> its public category list.
        bounds: column (or ``*``) -> (low, high), a numeric column's declared public range (clipping range).
        max_bytes: the largest file (folder, zip content) accepted, in bytes.
        min_rows: the fewest private rows accepted.
    """

    name: str
    kind: str | None = None
    label: str | None = None
    classes: tuple[str, ...] | None = None
    public_rows: int | None = None
    private_size: int | None = None
    categorical: dict[str, tuple[str, ...]] = field(default_factory=dict)
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)
    max_bytes: int = DEFAULT_MAX_BYTES
    min_rows: int = DEFAULT_MIN_ROWS

    def check(self) -> "Declaration":
        """Return self if every field is allowed, else raise ConfigError naming the first that is not."""
        if not isinstance(self.name, str) or not NAME_PATTERN.fullmatch(self.name):
            raise ConfigError("name", f"must be {NAME_RULE}; got {self.name!r}")
        if self.kind is not None and self.kind not in KINDS:
            raise ConfigError("kind", f"must be one of {', '.join(KINDS)}; got {self.kind!r}")
        _check_int("public_rows", self.public_rows, 0)
        _check_int("private_size", self.private_size, 1)
        _check_int("max_bytes", self.max_bytes, 1)
        _check_int("min_rows", self.min_rows, 2)
        if self.classes is not None:
            _check_list("classes", "", self.classes, at_least=2)
        for column, categories in self.categorical.items():
            _check_list("categorical", f"of column {column!r} ", categories, at_least=1)
            if column == self.label:
                raise ConfigError("categorical", f"must not name the label column {column!r} (its classes are "
                                                 "declared with classes)")
        for column, (low, high) in self.bounds.items():
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                raise ConfigError("bounds", f"of column {column!r} must be finite with LOW < HIGH; got {low}:{high}")
            if column in self.categorical or column == self.label:
                raise ConfigError("bounds", f"are for numeric columns; {column!r} is the label or categorical")
        return self


def _check_int(name: str, value, low: int) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < low):
        raise ConfigError(name, f"must be an integer >= {low}; got {value!r}")


def _check_list(name: str, where: str, items: Iterable[str], *, at_least: int) -> None:
    items = list(items)
    if len(items) < at_least or any(not item for item in items):
        raise ConfigError(name, f"{where}must hold at least {at_least} names, none empty; got {','.join(items)!r}")
    if len(set(items)) < len(items):
        raise ConfigError(name, f"{where}must not repeat a name; got {','.join(items)!r}")


def parse_list(name: str, text: str) -> tuple[str, ...]:
    """``"a, b,c"`` -> ``("a", "b", "c")`` (spaces around names stripped)."""
    return tuple(item.strip() for item in text.split(","))


def parse_categorical(texts: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """``["COL=a,b,c", ...]`` -> ``{COL: ("a", "b", "c")}``; ConfigError naming ``categorical`` otherwise."""
    found: dict[str, tuple[str, ...]] = {}
    for text in texts:
        column, sep, rest = text.partition("=")
        if not sep or not column.strip():
            raise ConfigError("categorical", f"must be COLUMN=a,b,c (the column's public category list); got {text!r}")
        if column.strip() in found:
            raise ConfigError("categorical", f"names column {column.strip()!r} twice")
        found[column.strip()] = parse_list("categorical", rest)
    return found


def parse_bounds(texts: Iterable[str]) -> dict[str, tuple[float, float]]:
    """``["COL=LO:HI", "*=LO:HI", ...]`` -> ``{COL: (LO, HI)}``; ConfigError naming ``bounds`` otherwise."""
    found: dict[str, tuple[float, float]] = {}
    for text in texts:
        column, sep, rest = text.partition("=")
        low, colon, high = rest.partition(":")
        try:
            pair = (float(low), float(high))
        except ValueError:
            pair = None
        if not sep or not colon or not column.strip() or pair is None:
            raise ConfigError("bounds", f"must be COLUMN=LOW:HIGH (or *=LOW:HIGH for every numeric column); "
                                        f"got {text!r}")
        if column.strip() in found:
            raise ConfigError("bounds", f"names column {column.strip()!r} twice")
        found[column.strip()] = pair
    return found
