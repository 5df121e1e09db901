"""Image data sets: a folder with one subfolder per class, as torchvision's ``ImageFolder`` reads it, or a zip of
one (optionally wrapped in a single top folder), decoded with Pillow into normalised arrays, or refused.

Layout of the result (:class:`~.content.Parsed`): ``x`` ``(n, c, h, w)`` uint8 (c = 1 when there are public images
and every one of them is grey, the others then converted to grey; else c = 3, every image converted to RGB: the
channel count is published in the schema, so it is decided from the public part only), ``y`` ``(n,)`` int64 codes
into the classes, the class folders' names sorted. Images are ordered round robin over the classes (each class's
files sorted by path: the first of every class, then the second, ...), so the public part, the first
``public_rows`` images, is balanced. Files whose extension ``ImageFolder`` does not read are
skipped, as it skips them. Refused, each with one :class:`ConfigError` naming the file or class: a zip member whose
path leaves the folder (absolute, ``..``) or is a link, a link in a folder, more bytes than ``max_bytes`` (a zip:
its uncompressed content), fewer than 2 classes, an empty class, a file Pillow cannot read, images of different
sizes, fewer images than ``min_rows``.

Public facts: the class list (the folders' names: the layout is the user's declaration), the pixel range [0, 255]
(the format), the public part's size and the declared private size.
"""

from __future__ import annotations

import io
import stat
import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable

import numpy as np

from ..errors import ConfigError
from .content import Parsed, check_rows, fact, private_size, public_part
from .declaration import Declaration

Loader = Callable[[], bytes]


def parse_images(path: Path, declaration: Declaration) -> Parsed:
    """Validate and normalise the image folder or zip at ``path`` (see the module's doc)."""
    for name in ("label", "classes"):
        if getattr(declaration, name) is not None:
            raise ConfigError(name, "is for tables only: images take their classes from their folders' names")
    for name in ("categorical", "bounds"):
        if getattr(declaration, name):
            raise ConfigError(name, "is for tables only: an image's pixels are in [0, 255]")
    files = _zip_files(path, declaration) if path.is_file() else _folder_files(path, declaration)
    classes = sorted(files)
    if len(classes) < 2:
        raise ConfigError("file", f"must hold at least 2 class folders, one per class; found {len(classes)} "
                                  f"({', '.join(classes) or 'none'})")
    for name in classes:
        if not files[name]:
            raise ConfigError("file", f"class folder {name!r} holds no image (ImageFolder's extensions: "
                                      f"{', '.join(_extensions())})")
    order = _round_robin([[(code, item) for item in sorted(files[name])] for code, name in enumerate(classes)])
    check_rows(declaration, len(order), "images")
    public = public_part(declaration, len(order), "images")
    x = _decode([(name, loader) for _, (name, loader) in order], public["value"])
    y = np.array([code for code, _ in order], dtype=np.int64)
    schema = {"kind": "images", "classes": classes, "rows": len(order), "shape": list(x.shape[1:]),
              "columns": [{"name": "image", "role": "image"}, {"name": "class", "role": "label"}]}
    facts = {"private_size": private_size(declaration), "public_rows": public,
             "classes": fact(classes, "the class folders' names (the layout is the user's declaration)"),
             "categories": {}, "bounds": {"pixels": fact([0, 255], "the image format (8-bit pixels)")}}
    return Parsed({"x": x, "y": y}, schema, facts)


def preview(path: Path, declaration: Declaration, per_class: int = 4) -> dict[str, list[np.ndarray]]:
    """The first ``per_class`` images of each class folder (``(h, w)`` or ``(h, w, 3)`` uint8), decoded one by one
    (a preview: the folder's checks apply, the images' sizes are not compared)."""
    files = _zip_files(path, declaration) if path.is_file() else _folder_files(path, declaration)
    return {name: [_decode([item], 1)[0].transpose(1, 2, 0).squeeze(-1) for item in sorted(items)[:per_class]]
            for name, items in sorted(files.items())}


def _extensions() -> tuple[str, ...]:
    from torchvision.datasets.folder import IMG_EXTENSIONS  # here: importing torchvision takes about a second

    return IMG_EXTENSIONS


def _skipped(parts: tuple[str, ...]) -> bool:
    """Hidden entries and macOS's resource forks, which a zip made on a Mac carries."""
    return any(p.startswith(".") or p == "__MACOSX" for p in parts)


def _folder_files(root: Path, declaration: Declaration) -> dict[str, list[tuple[str, Loader]]]:
    if not root.is_dir():
        raise ConfigError("file", f"must be a folder of class folders or a .zip of one; {root} is neither")
    extensions, files, total = _extensions(), {}, 0
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not _skipped((p.name,))):
        if folder.is_symlink():
            raise ConfigError("file", f"class folder {folder.name!r} is a link; allowed: folders inside the folder")
        files[folder.name] = []
        for item in sorted(folder.rglob("*")):
            inside = item.relative_to(root)  # a dot-folder above root hides nothing
            relative = inside.as_posix()
            if item.is_symlink():
                raise ConfigError("file", f"{relative!r} is a link; allowed: plain files inside the folder")
            if item.is_file() and item.suffix.lower() in extensions and not _skipped(inside.parts):
                total += item.stat().st_size
                files[folder.name].append((relative, item.read_bytes))
    _check_bytes(total, declaration, "the folder's images")
    return files


def _zip_files(path: Path, declaration: Declaration) -> dict[str, list[tuple[str, Loader]]]:
    if path.suffix.lower() != ".zip":
        raise ConfigError("file", f"must be a folder of class folders or a .zip of one for images; got {path.name!r}")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ConfigError("file", f"must be a readable zip file; {path.name}: {exc}") from None
    entries = []
    for info in archive.infolist():
        name = info.filename
        parts = PurePosixPath(name).parts
        if name.startswith(("/", "\\")) or "\\" in name or ".." in parts or (parts and parts[0].endswith(":")):
            raise ConfigError("file", f"zip member {name!r} leaves the folder (an absolute or '..' path); allowed: "
                                      "paths inside it")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise ConfigError("file", f"zip member {name!r} is a link; allowed: plain files")
        if parts and not _skipped(parts):
            entries.append((parts, info))
    _check_bytes(sum(info.file_size for _, info in entries), declaration, f"{path.name}'s uncompressed content")
    extensions, files = _extensions(), {}
    is_image = {id(info): not info.is_dir() and PurePosixPath(info.filename).suffix.lower() in extensions
                for _, info in entries}
    if len({parts[0] for parts, _ in entries}) == 1 and not any(len(parts) <= 2 and is_image[id(info)]
                                                                for parts, info in entries):
        entries = [(parts[1:], info) for parts, info in entries if len(parts) > 1]  # one wrapping top folder
    for parts, info in entries:
        if info.is_dir() or len(parts) > 1:
            files.setdefault(parts[0], [])
        if len(parts) > 1 and is_image[id(info)]:
            files[parts[0]].append(("/".join(parts), lambda info=info: archive.read(info)))
    return files


def _check_bytes(total: int, declaration: Declaration, what: str) -> None:
    if total > declaration.max_bytes:
        raise ConfigError("max_bytes", f"is {declaration.max_bytes} bytes; {what} take {total} (raise max_bytes, "
                                       "or add fewer images)")


def _round_robin(lists: list[list]) -> list:
    """The first item of every list, then the second of every list that has one, ..."""
    return [lst[i] for i in range(max(map(len, lists))) for lst in lists if i < len(lst)]


def _decode(items: list[tuple[str, Loader]], public: int) -> np.ndarray:
    """Decode every image into one ``(n, c, h, w)`` uint8 array: grey (c = 1) when ``public`` > 0 and the first
    ``public`` images (the public part) are all grey, else RGB (c = 3); the mode of a later image never decides."""
    from PIL import Image, UnidentifiedImageError

    opened = []
    for name, loader in items:
        try:
            image = Image.open(io.BytesIO(loader()))
        except (UnidentifiedImageError, OSError) as exc:
            raise ConfigError("file", f"image {name!r} cannot be read as an image ({exc})") from None
        if opened and image.size != opened[0][1].size:
            first = opened[0][1].size
            raise ConfigError("file", f"image {name!r} is {image.size[0]}x{image.size[1]} pixels; every image must "
                                      f"have the size of {opened[0][0]!r}, {first[0]}x{first[1]} (resize them first)")
        opened.append((name, image))
    mode = "L" if public and all(image.mode in ("1", "L", "LA") for _, image in opened[:public]) else "RGB"
    width, height = opened[0][1].size
    x = np.empty((len(opened), 1 if mode == "L" else 3, height, width), dtype=np.uint8)
    for i, (name, image) in enumerate(opened):
        try:
            pixels = np.asarray(image.convert(mode))
        except OSError as exc:  # a truncated file fails when decoded, not when opened
            raise ConfigError("file", f"image {name!r} cannot be decoded ({exc})") from None
        x[i] = pixels[None] if mode == "L" else pixels.transpose(2, 0, 1)
    return x
