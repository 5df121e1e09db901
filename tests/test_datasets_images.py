"""User data sets from images: a folder of class folders (torchvision's ImageFolder layout) or a zip of one, decoded,
ordered round robin over the classes, stored; bad folders and zips refused naming the file or class, nothing
stored."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from privengine.datasets import Declaration, add_dataset, datasets_home, load_dataset, names, parse
from privengine.errors import ConfigError

SIZE = (6, 4)  # width, height


def _write_folder(root: Path, counts: dict[str, int], mode: str = "L", size=SIZE) -> dict[str, list[np.ndarray]]:
    """Class folders of PNGs of random pixels; return each class's pixel arrays in file-name order."""
    rng = np.random.default_rng(len(counts))
    pixels: dict[str, list[np.ndarray]] = {}
    for name, count in counts.items():
        (root / name).mkdir(parents=True)
        pixels[name] = []
        for i in range(count):
            array = rng.integers(0, 256, (size[1], size[0]) + ((3,) if mode == "RGB" else ()), dtype=np.uint8)
            Image.fromarray(array, mode).save(root / name / f"img{i:02d}.png")
            pixels[name].append(array)
    (root / "cat" / "notes.txt").write_text("not an image: skipped, as ImageFolder skips it")
    return pixels


def _zip(folder: Path, path: Path, prefix: str = "", extra: dict[str, bytes] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for item in sorted(folder.rglob("*")):
            archive.write(item, prefix + item.relative_to(folder).as_posix())
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return path


def test_a_folder_is_stored_round_robin_and_its_zip_gives_the_same_content(tmp_path):
    pixels = _write_folder(tmp_path / "pets", {"cat": 7, "dog": 5})
    stored = add_dataset(Declaration("pets", public_rows=4, min_rows=4), tmp_path / "pets")
    data = load_dataset("pets")
    assert data.kind == "images" and data.classes == ["cat", "dog"] and data.x.shape == (12, 1, 4, 6)
    expected = [("cat", 0), ("dog", 0), ("cat", 1), ("dog", 1), ("cat", 2), ("dog", 2), ("cat", 3), ("dog", 3),
                ("cat", 4), ("dog", 4), ("cat", 5), ("cat", 6)]
    assert [data.classes[c] for c in data.y] == [name for name, _ in expected]
    for row, (name, i) in enumerate(expected):
        np.testing.assert_array_equal(data.x[row, 0], pixels[name][i])
    assert [data.classes[c] for c in data.public()["y"]] == ["cat", "dog", "cat", "dog"]
    assert stored["public"]["bounds"]["pixels"]["value"] == [0, 255]
    wrapped = _zip(tmp_path / "pets", tmp_path / "pets.zip", prefix="pets/",
                   extra={"__MACOSX/pets/._x.png": b"resource fork", "pets/.DS_Store": b"x"})
    zipped = add_dataset(Declaration("zipped", public_rows=4, min_rows=4), wrapped)
    assert zipped["fingerprint"] == stored["fingerprint"]


def test_colour_images_are_stored_rgb(tmp_path):
    pixels = _write_folder(tmp_path / "pets", {"cat": 6, "dog": 6}, mode="RGB")
    parsed = parse(tmp_path / "pets", Declaration("pets"))
    assert parsed.arrays["x"].shape == (12, 3, 4, 6)
    np.testing.assert_array_equal(parsed.arrays["x"][1].transpose(1, 2, 0), pixels["dog"][0])


def test_the_channel_count_is_decided_by_the_public_images_alone(tmp_path):
    _write_folder(tmp_path / "pets", {"cat": 6, "dog": 6})
    grey = parse(tmp_path / "pets", Declaration("pets", public_rows=4, min_rows=4))
    colour = np.random.default_rng(1).integers(0, 256, (4, 6, 3), dtype=np.uint8)
    Image.fromarray(colour, "RGB").save(tmp_path / "pets" / "dog" / "img05.png")  # row 11: private
    mixed = parse(tmp_path / "pets", Declaration("pets", public_rows=4, min_rows=4))
    assert grey.schema["shape"] == mixed.schema["shape"] == [1, 4, 6]  # one private colour image changes nothing
    np.testing.assert_array_equal(mixed.arrays["x"][11, 0], np.asarray(Image.fromarray(colour, "RGB").convert("L")))
    np.testing.assert_array_equal(mixed.arrays["x"][:11], grey.arrays["x"][:11])
    undeclared = parse(tmp_path / "pets", Declaration("pets")).arrays["x"]  # no public image: RGB, whatever they are
    assert undeclared.shape == (12, 3, 4, 6) and (undeclared[0] == undeclared[0, :1]).all()


def test_a_folder_inside_a_hidden_folder_is_read(tmp_path):
    pixels = _write_folder(tmp_path / ".cache" / "pets", {"cat": 6, "dog": 6})
    parsed = parse(tmp_path / ".cache" / "pets", Declaration("pets", public_rows=2))
    assert parsed.rows == 12
    np.testing.assert_array_equal(parsed.arrays["x"][0, 0], pixels["cat"][0])


def _refusal(path: Path, **declared) -> str:
    with pytest.raises(ConfigError) as refused:
        add_dataset(Declaration("pets", **declared), path)
    assert not names() and not any((datasets_home() / "objects").glob("*")) if datasets_home().exists() else True
    return str(refused.value)


def test_an_empty_class_one_class_and_unreadable_or_mismatched_images_are_refused(tmp_path):
    _write_folder(tmp_path / "a", {"cat": 6, "dog": 6})
    (tmp_path / "a" / "bird").mkdir()
    assert "class folder 'bird' holds no image" in _refusal(tmp_path / "a")
    assert "class folder 'bird' holds no image" in _refusal(_zip(tmp_path / "a", tmp_path / "a.zip"))
    _write_folder(tmp_path / "b", {"cat": 12})
    assert "must hold at least 2 class folders, one per class; found 1 (cat)" in _refusal(tmp_path / "b")
    _write_folder(tmp_path / "c", {"cat": 6, "dog": 6})
    (tmp_path / "c" / "dog" / "broken.png").write_bytes(b"not a png")
    assert "image 'dog/broken.png' cannot be read as an image" in _refusal(tmp_path / "c")
    _write_folder(tmp_path / "d", {"cat": 6, "dog": 6})
    Image.new("L", (5, 5)).save(tmp_path / "d" / "dog" / "big.png")
    assert "image 'dog/big.png' is 5x5 pixels; every image must have the size of 'cat/img00.png', 6x4" in _refusal(
        tmp_path / "d")
    _write_folder(tmp_path / "e", {"cat": 6, "dog": 6})
    assert "must hold at least min_rows = 20 images; it holds 12" in _refusal(tmp_path / "e", min_rows=20)
    assert "`max_bytes` is 100 bytes; the folder's images take" in _refusal(tmp_path / "e", max_bytes=100)
    assert "`label` is for tables only" in _refusal(tmp_path / "e", label="class")


@pytest.mark.parametrize("member", ["../evil.png", "/etc/evil.png", "cat/../../evil.png", "C:/evil.png"])
def test_a_zip_whose_paths_leave_the_folder_is_refused(tmp_path, member):
    _write_folder(tmp_path / "pets", {"cat": 6, "dog": 6})
    archive = _zip(tmp_path / "pets", tmp_path / "pets.zip", extra={member: b"x"})
    assert f"zip member {member!r} leaves the folder (an absolute or '..' path)" in _refusal(archive)
    assert not (tmp_path / "evil.png").exists()


def test_a_zip_with_a_link_or_too_much_content_is_refused(tmp_path):
    _write_folder(tmp_path / "pets", {"cat": 6, "dog": 6})
    archive = _zip(tmp_path / "pets", tmp_path / "pets.zip")
    link = zipfile.ZipInfo("cat/link.png")
    link.external_attr = 0o120777 << 16  # a symbolic link, as zip -y stores one
    with zipfile.ZipFile(archive, "a") as handle:
        handle.writestr(link, "/etc/passwd")
    assert "zip member 'cat/link.png' is a link; allowed: plain files" in _refusal(archive)
    small = _zip(tmp_path / "pets", tmp_path / "small.zip")
    assert "`max_bytes` is 200 bytes; small.zip's uncompressed content take" in _refusal(small, max_bytes=200)
    (tmp_path / "junk.zip").write_bytes(b"PK not really")
    assert "must be a readable zip file; junk.zip" in _refusal(tmp_path / "junk.zip")


def test_links_in_a_folder_are_refused(tmp_path):
    _write_folder(tmp_path / "pets", {"cat": 6, "dog": 6})
    (tmp_path / "pets" / "dog" / "link.png").symlink_to(tmp_path / "pets" / "cat" / "img00.png")
    assert "'dog/link.png' is a link; allowed: plain files inside the folder" in _refusal(tmp_path / "pets")
    (tmp_path / "pets" / "dog" / "link.png").unlink()
    (tmp_path / "pets" / "bird").symlink_to(tmp_path / "pets" / "cat")
    assert "class folder 'bird' is a link" in _refusal(tmp_path / "pets")
