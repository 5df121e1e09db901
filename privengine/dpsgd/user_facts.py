"""What a DP-SGD run on a stored user data set takes from its manifest beyond the facts every mechanism reads
(:mod:`privengine.datasets.private_part`: parts, declared sizes, preprocessing): which model trains on it, and every
refusal a DP-SGD config deserves before anything runs (torch only inside :func:`parameter_count`, when a config
on a user data set uses the public subspace: the config imports this at the CLI's start).

Models: a table trains ``linear`` or ``mlp`` (``auto``: linear) on its numeric columns, each mapped from its public
bounds onto [-1, 1] and clipped there, and one-hot codes of its declared categories; images train the CNN
(``auto``), which exists for 8x8, 28x28 and 32x32 images only.

Sizes a config is checked against, all public: the input shape (a table's F = numeric columns + the lengths of the
declared category lists; images' (c, h, w) from the schema), the class count (the declared classes), the model's
parameter count d that these fix, and the declared public rows.
"""

from __future__ import annotations

import functools
from typing import Any, Mapping

from privengine.datasets.private_part import (declared_part, held_out, preprocessing, public_rows, stored,
                                              unbounded_columns)
from privengine.errors import ConfigError

CNN_IMAGE_SIZES = ((8, 8), (28, 28), (32, 32))  # the image sizes models._cnn builds a CNN for
TABLE_MODELS, IMAGE_MODELS = ("auto", "linear", "mlp"), ("auto", "cnn")


def resolved_model(manifest: Mapping[str, Any], model: str) -> str:
    """The model ``auto`` stands for on this data set: linear for a table, the CNN for images."""
    if model != "auto":
        return model
    return "linear" if manifest["kind"] == "tabular" else "cnn"


def model_problem(manifest: Mapping[str, Any], model: str) -> str | None:
    """Why ``model`` cannot train on the data set of ``manifest``, in words; None if it can."""
    if manifest["kind"] == "tabular":
        if model not in TABLE_MODELS:
            return f"it is a table: choose model linear or mlp (or auto); got {model!r}"
        return None
    if model not in IMAGE_MODELS:
        return f"it holds images: choose model cnn (or auto); got {model!r}"
    height, width = manifest["schema"]["shape"][1:]
    if (height, width) not in CNN_IMAGE_SIZES:
        sizes = ", ".join(f"{h}x{w}" for h, w in CNN_IMAGE_SIZES)
        return f"its {height}x{width} images fit no CNN here (the CNN takes {sizes} images)"
    return None


def check(name: str, model: str, private_size: int, train_limit: int) -> None:
    """Every ConfigError a DP-SGD config on data set ``name`` deserves before anything runs: not stored, a model that
    does not fit it, a numeric column without public bounds, a ``train_limit``, no declared private size, too few
    private rows for a held-out part and a training split."""
    manifest = stored(name)
    if (why := model_problem(manifest, model)) is not None:
        raise ConfigError("model", f"cannot train on data set {name!r}: {why}")
    if columns := unbounded_columns(manifest):
        raise ConfigError("dataset", f"{name!r} has numeric columns without public bounds ({', '.join(columns)}): "
                                     "DP-SGD scales each column by its public range; add the data set again with "
                                     "--bounds COLUMN=LOW:HIGH or with public rows")
    if train_limit:
        raise ConfigError("train_limit", f"must be 0 with a user data set (every private row of {name!r} is "
                                         f"used); got {train_limit}")
    part = declared_part(name, private_size)
    if held_out(part) < 2 or part - held_out(part) < 2:
        raise ConfigError("private_size", f"must leave at least 2 held-out and 2 training rows of data set "
                                          f"{name!r} (a fifth is held out); got {part}")


def input_shape(manifest: Mapping[str, Any]) -> tuple[int, ...]:
    """A model's input shape on this data set, from public facts: a table's ``(F,)``, F = its numeric columns plus
    the lengths of its declared category lists (one-hot); images' ``(c, h, w)``."""
    if manifest["kind"] == "images":
        return tuple(manifest["schema"]["shape"])
    table = preprocessing(manifest)["table"]
    return (len(table["numeric"]) + sum(len(item["categories"]) for item in table["categorical"]),)


def parameter_count(manifest: Mapping[str, Any], model: str) -> int:
    """d, the trainable parameters of ``model`` (not ``auto``) on this data set: the network the run builds
    (:func:`privengine.dpsgd.models.build_model`) on :func:`input_shape` with one output per declared class."""
    return _parameters(model, input_shape(manifest), len(manifest["public"]["classes"]["value"]))


@functools.lru_cache(maxsize=32)
def _parameters(model: str, shape: tuple[int, ...], outputs: int) -> int:
    import torch  # here: the config imports this module without torch

    from .models import build_model, num_parameters

    return num_parameters(build_model(model, input_shape=shape, n_outputs=outputs, generator=torch.Generator()))


def check_subspace_rank(name: str, model: str, rank: int) -> None:
    """ConfigError naming ``subspace_rank`` unless k <= min(n_public, d): U (d x k) is the top-k right singular
    vectors of the (m, d) matrix of m <= n_public public per-example gradients, which has at most min(n_public, d)
    of them (n_public: the declared public rows; d: :func:`parameter_count` of ``model``, not ``auto``)."""
    manifest = stored(name)
    rows, d = public_rows(name), parameter_count(manifest, model)
    if rank <= min(rows, d):
        return
    shape = " x ".join(map(str, input_shape(manifest)))
    what = f"{shape} images" if manifest["kind"] == "images" else f"{shape} input features"
    limit = (f"its {rows} public rows give at most {rows} public gradients to estimate U from" if rows <= d
             else f"the {model} model on its {what} has d = {d} parameters, and U has at most d directions")
    raise ConfigError("subspace_rank", f"must be at most {min(rows, d)} for data set {name!r} ({limit}); "
                                       f"got {rank}")
