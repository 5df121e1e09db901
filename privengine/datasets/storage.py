"""Where user data sets live: ``$PRIVENGINE_HOME/datasets/`` (beside the run store), content-addressed.

- ``objects/<fingerprint>/``: a parsed data set's arrays (``<name>.npy``, no pickles) and ``schema.json``, the
  folder named by the SHA-256 of the normalised content (:meth:`~.content.Parsed.fingerprint`); two names with the
  same content share one folder;
- ``names/<NAME>.json``: a name's manifest (see :func:`save`).

Writes are atomic: an object is written into a temporary folder beside the others and renamed into place; a
manifest is written to a temporary file and hard-linked to its name, which fails if the name is taken meanwhile.
A failure at any point removes what it wrote, so nothing half-written is ever found under a name or an address.
An add and a delete hold one lock (``.lock``, :func:`_locked`) while they link or unlink a name and decide whether
an object is used, so a delete never removes an object that an add of the same content has just linked a name to.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..errors import ConfigError
from ..store import default_home
from .content import Parsed
from .declaration import NAME_PATTERN

MANIFEST_FORMAT = 1


def datasets_home(home: str | os.PathLike | None = None) -> Path:
    """``home`` (tests), else ``$PRIVENGINE_HOME/datasets``."""
    return Path(home) if home is not None else default_home() / "datasets"


def _names(home) -> Path:
    return datasets_home(home) / "names"


def _objects(home) -> Path:
    return datasets_home(home) / "objects"


def is_taken(name: str, home=None) -> bool:
    return (_names(home) / f"{name}.json").exists()


def names(home=None) -> list[str]:
    """Every stored data set's name, sorted."""
    folder = _names(home)
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def manifest(name: str, home=None) -> dict[str, Any]:
    """The manifest of data set ``name``; ConfigError naming ``name`` if none is stored (or it is no valid name, so a
    path like ``../x`` never reaches the file system)."""
    try:
        if not NAME_PATTERN.fullmatch(name):
            raise FileNotFoundError(name)
        return json.loads((_names(home) / f"{name}.json").read_text())
    except FileNotFoundError:
        stored = ", ".join(names(home)) or "none yet"
        raise ConfigError("name", f"must be a stored data set ({stored}); got {name!r}") from None


def object_path(fingerprint: str, home=None) -> Path:
    return _objects(home) / fingerprint


def save(name: str, parsed: Parsed, file_name: str, home=None) -> dict[str, Any]:
    """Store ``parsed`` under ``name``; return its manifest:

    ``name``, ``kind``, ``fingerprint`` (SHA-256 of the normalised content, hex), ``file`` (the added file's or
    folder's name), ``bytes`` (stored), ``rows``, ``created_at``, ``schema`` and ``public`` (the public facts, each
    ``{"value", "source"}``). ConfigError naming ``name`` if it is taken (even by a concurrent add)."""
    fingerprint = parsed.fingerprint()
    target = object_path(fingerprint, home)
    with _locked(home):
        created = _write_object(parsed, target)
        document = {"format": MANIFEST_FORMAT, "name": name, "kind": parsed.schema["kind"],
                    "fingerprint": fingerprint, "file": file_name,
                    "bytes": sum(p.stat().st_size for p in target.iterdir()), "rows": parsed.rows,
                    "created_at": time.time(), "schema": parsed.schema, "public": parsed.public}
        try:
            _link_manifest(name, document, home)
        except BaseException:
            if created and not _users(fingerprint, home):
                _remove_object(target)
            raise
    return document


def delete(name: str, home=None) -> dict[str, Any]:
    """Remove ``name``'s manifest, and its object when no other name uses it; return the manifest removed."""
    with _locked(home):
        document = manifest(name, home)
        (_names(home) / f"{name}.json").unlink()
        if not _users(document["fingerprint"], home):
            _remove_object(object_path(document["fingerprint"], home))
    return document


@contextmanager
def _locked(home) -> Iterator[None]:
    """Hold the store's lock (an exclusive ``flock`` on ``.lock``) for the block."""
    folder = datasets_home(home)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def load_arrays(document: dict[str, Any], home=None) -> dict[str, np.ndarray]:
    """The stored arrays of a manifest's object, by name."""
    folder = object_path(document["fingerprint"], home)
    return {p.stem: np.load(p, allow_pickle=False) for p in sorted(folder.glob("*.npy"))}


def _write_object(parsed: Parsed, target: Path) -> bool:
    """Write ``parsed`` at ``target`` through a temporary folder; False when that content is stored already."""
    if target.is_dir():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    incoming = Path(tempfile.mkdtemp(prefix=".incoming-", dir=target.parent))
    try:
        for key, array in parsed.arrays.items():
            np.save(incoming / f"{key}.npy", array, allow_pickle=False)
        (incoming / "schema.json").write_text(json.dumps(parsed.schema, sort_keys=True))
        os.rename(incoming, target)
    except OSError:
        shutil.rmtree(incoming, ignore_errors=True)
        if target.is_dir():  # the same content, stored meanwhile by another add
            return False
        raise
    except BaseException:
        shutil.rmtree(incoming, ignore_errors=True)
        raise
    return True


def _link_manifest(name: str, document: dict[str, Any], home) -> None:
    folder = _names(home)
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".incoming-", dir=folder)
    try:
        with os.fdopen(handle, "w") as fh:
            json.dump(document, fh, indent=2, sort_keys=True)
        os.link(temporary, folder / f"{name}.json")
    except FileExistsError:
        raise ConfigError("name", f"is taken: a data set {name!r} is stored already (data delete {name}, or choose "
                                  "another name)") from None
    finally:
        os.unlink(temporary)


def _users(fingerprint: str, home) -> list[str]:
    return [n for n in names(home) if manifest(n, home)["fingerprint"] == fingerprint]


def _remove_object(folder: Path) -> None:
    """Rename the object away first, so no reader finds it half-removed."""
    doomed = folder.with_name(f".removing-{folder.name}-{os.getpid()}")
    os.rename(folder, doomed)
    shutil.rmtree(doomed)
