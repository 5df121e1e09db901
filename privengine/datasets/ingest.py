"""Adding a data set: the declaration is checked, the name must be free, the file within ``max_bytes``; the file is
parsed and validated whole; only then is anything stored (:func:`add_dataset`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from ..errors import ConfigError
from . import storage
from .content import Parsed
from .declaration import Declaration


def kind_of(path: Path, declaration: Declaration) -> str:
    """The declared kind, else ``images`` for a folder or ``.zip``, else ``tabular``."""
    if declaration.kind is not None:
        return declaration.kind
    return "images" if path.is_dir() or path.suffix.lower() == ".zip" else "tabular"


def parse(path: str | os.PathLike, declaration: Declaration) -> Parsed:
    """Validate the file at ``path`` against ``declaration`` (already checked) and normalise it; ConfigError
    naming the column, row, file or field otherwise. Reads nothing above ``max_bytes``."""
    path = Path(path)
    if not path.exists():
        raise ConfigError("file", f"must be an existing file or folder; got {str(path)!r}")
    kind = kind_of(path, declaration)
    if kind == "images":
        from .images import parse_images  # here, as the table's reader below: Pillow / pandas load when a file does

        return parse_images(path, declaration)
    if not path.is_file():
        raise ConfigError("file", f"must be a .csv or .parquet file for a table; {path.name!r} is a folder (kind "
                                  "images reads a folder of class folders)")
    size = path.stat().st_size
    if size > declaration.max_bytes:
        raise ConfigError("max_bytes", f"is {declaration.max_bytes} bytes; {path.name} has {size} (raise max_bytes "
                                       "to add it)")
    from .tabular import parse_frame, read_table  # here: pandas and pyarrow, seconds at every CLI start otherwise

    return parse_frame(read_table(path, declaration), declaration)


def add_dataset(declaration: Declaration, path: str | os.PathLike, *, reserved: Iterable[str] = (),
                home=None) -> dict[str, Any]:
    """Check, parse and store the data set at ``path`` under ``declaration.name``; return its manifest
    (:func:`.storage.save`). ``reserved``: names a user data set may not take (the built-in data sets', so a
    config's ``dataset`` names one thing). Nothing is stored unless every check passes."""
    declaration.check()
    if declaration.name in set(reserved):
        raise ConfigError("name", f"must not be a built-in data set's name ({', '.join(sorted(reserved))}); got "
                                  f"{declaration.name!r}")
    if storage.is_taken(declaration.name, home):
        raise ConfigError("name", f"is taken: a data set {declaration.name!r} is stored already (data delete "
                                  f"{declaration.name}, or choose another name)")
    parsed = parse(path, declaration)
    return storage.save(declaration.name, parsed, Path(path).name, home)
