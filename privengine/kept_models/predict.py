"""``python -m privengine predict --model DIR --data FILE [--name NAME] [--json]``: an exported (or kept) model,
loaded in plain PyTorch (:mod:`.loader`), predicts on a file of raw features.

``FILE``: ``.npy`` (an array ``(n, *input shape)`` or ``(n, features)``) or ``.csv`` (one example per row, every
column a number; a first row none of whose cells is a number is taken as a header). The features are raw, as the
model's spec describes its ``input`` (e.g. digit pixels 0-16): the spec's preprocessing is applied here. A model of
a user data set's table (a ``table`` preprocessing) reads a ``.csv`` with a header instead, its columns by name as in
the data set's file (text categories; other columns, such as the label, are ignored).

``DIR``: the folder ``export ID --format model --output DIR`` wrote, or a folder holding one such folder (the run
page's download, ``model-ID/``, unzipped into it): :func:`model_folder`.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import TextIO

import numpy as np

from privengine.errors import ConfigError

FORMATS = (".npy", ".csv")


def add_parser(sub) -> None:
    p = sub.add_parser("predict", help="predict with an exported model (plain PyTorch) on a CSV or NPY file")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="a folder written by export ID --format model, or one holding such a folder (the unzipped "
                        "download's model-ID/)")
    p.add_argument("--data", required=True, metavar="FILE", help="features, one example per row: .csv or .npy")
    p.add_argument("--name", metavar="NAME", help="which model of the folder (default: the only one, or its default)")
    p.add_argument("--json", action="store_true", help="print the predictions as one JSON document")


def read_features(path: str | Path) -> np.ndarray:
    """The float array of a ``.npy`` or ``.csv`` file; ConfigError naming ``--data`` for anything else."""
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ConfigError("--data", f"must be a .csv or .npy file; got {path.name!r}")
    if not path.is_file():
        raise ConfigError("--data", f"must be a readable file; {path} does not exist")
    try:
        if path.suffix.lower() == ".npy":
            data = np.load(path, allow_pickle=False)
        else:
            data = _read_csv(path)
    except ValueError as exc:
        raise ConfigError("--data", f"must hold numbers only ({exc})") from None
    if data.ndim == 0 or data.size == 0:
        raise ConfigError("--data", f"must hold at least one example; {path.name} is empty")
    if not np.issubdtype(data.dtype, np.number):
        raise ConfigError("--data", f"must hold numbers only; {path.name} holds {data.dtype}")
    return data.astype(np.float32, copy=False)


def read_columns(path: str | Path) -> dict[str, list[str]]:
    """A ``.csv`` file's columns by its header's names, each a list of its cells as text; ConfigError naming
    ``--data`` for anything else."""
    path = Path(path)
    if path.suffix.lower() != ".csv":
        raise ConfigError("--data", f"must be a .csv file with a header naming the columns for a table's model; got "
                                    f"{path.name!r}")
    if not path.is_file():
        raise ConfigError("--data", f"must be a readable file; {path} does not exist")
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        rows = list(reader)
    if not header or not rows:
        raise ConfigError("--data", f"must hold a header and at least one example; {path.name} does not")
    if any(len(row) != len(header) for row in rows):
        raise ConfigError("--data", f"must have {len(header)} cells in every row, as its header has")
    return {name: [row[j] for row in rows] for j, name in enumerate(header)}


def _read_csv(path: Path) -> np.ndarray:
    """The rows of a CSV of numbers; its first row is a header when none of its cells is a number."""
    with path.open(encoding="utf-8") as fh:
        first = fh.readline()
    header = not any(_is_number(cell) for cell in first.split(","))
    return np.loadtxt(path, delimiter=",", ndmin=2, dtype=np.float64, skiprows=int(header))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def model_folder(path: str | Path) -> Path:
    """The folder of models ``--model`` names: ``path`` itself when it holds a model (what ``export ID --format
    model --output DIR`` writes), else its one subfolder that does (``model-ID/``: the run page's download unzipped
    into ``path``); ConfigError naming ``--model`` when it is no folder, holds no model, or holds the model folders
    of several runs."""
    from .loader import model_names  # imports torch

    path = Path(path)
    if not path.is_dir():
        raise ConfigError("--model", f"must be a folder written by export ID --format model; {path} is not a folder")
    if model_names(path):
        return path
    inner = [sub for sub in sorted(path.iterdir()) if sub.is_dir() and model_names(sub)]
    if len(inner) == 1:
        return inner[0]
    if not inner:
        raise ConfigError("--model", f"must be a folder written by export ID --format model, or one holding such a "
                                     f"folder (the download's model-ID/); {path} holds no model (NAME.json beside "
                                     "NAME.safetensors), nor does any folder in it")
    raise ConfigError("--model", f"must hold the models of one run; {path} holds {len(inner)} folders of models "
                                 f"({', '.join(sub.name for sub in inner)}): give one of them, e.g. --model "
                                 f"{inner[0]}")


def run(args: argparse.Namespace, out: TextIO) -> int:
    """Load the model, predict, print (exit 0); ConfigError naming the flag for a bad folder or file."""
    from .loader import load, model_names  # imports torch

    folder = model_folder(args.model)
    try:
        model = load(folder, args.name)
    except ValueError as exc:
        if args.name is None and len(model_names(folder)) > 1:
            raise ConfigError("--name", f"must pick one model: {exc}") from None
        raise ConfigError("--model" if args.name is None else "--name", f"must name a model: {exc}") from None
    table = "table" in (model.spec.get("preprocessing") or {})
    features = read_columns(args.data) if table else read_features(args.data)
    try:
        predictions = model.predict(features)
    except ValueError as exc:
        raise ConfigError("--data", f"must match the model's input: {exc}") from None
    if args.json:
        print(json.dumps({"model": model.name, "task": model.spec["task"], "predictions": predictions}, indent=2),
              file=out)
        return 0
    for i, p in enumerate(predictions):
        print(f"{i}\t{p['value']:.6g}" if "value" in p else f"{i}\t{p['class']}\t{p['probability']:.4f}", file=out)
    return 0
