"""What a DP-SGD run on a stored user data set (:mod:`privengine.datasets`) takes from its manifest, the data set's
public facts, before any row is read (no torch: the config imports this).

Splits of a user data set of declared private-part size N_part (``data add --private-size``, or the run's
``private_size`` knob, which replaces it):

- public: the rows the data set declares public (its first ``public_rows``), used as the engine's public data;
- held out: each private row with probability 0.2, decided from that row and ``data_seed`` alone
  (:mod:`.user_split`; validation or test), about H = round(0.2 N_part) rows: the data set declares no test part,
  so the run evaluates on the user's own rows, which no claim protects;
- private training: the rest, of declared size N = N_part - H: q = B / N and the steps come from N, never from a
  count of the private rows.

Models: a table trains ``linear`` or ``mlp`` (``auto``: linear) on its numeric columns, each mapped from its public
bounds onto [-1, 1] and clipped there, and one-hot codes of its declared categories; images train the CNN
(``auto``), which exists for 8x8, 28x28 and 32x32 images only.
"""

from __future__ import annotations

from typing import Any, Mapping

from privengine.errors import ConfigError

HELD_OUT_FRACTION = 0.2  # of the declared private part: validation and test rows
CNN_IMAGE_SIZES = ((8, 8), (28, 28), (32, 32))  # the image sizes models._cnn builds a CNN for
TABLE_MODELS, IMAGE_MODELS = ("auto", "linear", "mlp"), ("auto", "cnn")


def stored(name: str) -> dict[str, Any]:
    """The manifest of user data set ``name``; ConfigError naming ``dataset`` if none is stored under it."""
    from privengine.datasets import manifest

    try:
        return manifest(name)
    except ConfigError as exc:
        raise ConfigError("dataset", f"must be a built-in data set or {exc.reason.removeprefix('must be ')}") from None


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


def unbounded_columns(manifest: Mapping[str, Any]) -> list[str]:
    """A table's numeric columns without public bounds (none declared and no public rows)."""
    if manifest["kind"] != "tabular":
        return []
    return [column for column, bound in manifest["public"]["bounds"].items() if bound["value"] is None]


def declared_part(name: str, private_size: int) -> int:
    """N_part: the run's ``private_size`` when set, else the data set's declared private size; ConfigError naming
    ``private_size`` when neither is declared (the private rows are never counted for it)."""
    if private_size:
        return private_size
    declared = stored(name)["public"]["private_size"]["value"]
    if declared is None:
        raise ConfigError("private_size", f"must be declared for data set {name!r}, which states no private size: "
                                          f"python -m privengine run dpsgd --dataset {name} --private-size N, or "
                                          f"add it again with data add {name} FILE --private-size N (N: the number "
                                          "of private rows, a public fact you state; never counted from the rows)")
    return declared


def preprocessing(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """How a run on this data set maps its raw rows to model inputs, from public facts only, as a kept model's spec
    states it (:mod:`privengine.kept_models.loader` applies it): images ``(x / 255 - 0.5) / 0.5`` per channel; a
    table's ``table``: its numeric columns with their public bounds and its categorical columns with their category
    lists, each with the fact's source."""
    if manifest["kind"] == "images":
        channels = manifest["schema"]["shape"][0]
        return {"divide_by": 255.0, "mean": [0.5] * channels, "sd": [0.5] * channels,
                "source": "public constants: 8-bit pixels (the image format) mapped onto [-1, 1]; read from no data"}
    public = manifest["public"]
    table = {"numeric": [{"column": column, "bounds": public["bounds"][column]["value"],
                          "source": public["bounds"][column]["source"]} for column in manifest["schema"]["numeric"]],
             "categorical": [{"column": column, "categories": public["categories"][column]["value"],
                              "source": public["categories"][column]["source"]}
                             for column in manifest["schema"]["categorical"]]}
    return {"table": table, "source": f"the public facts of data set {manifest['name']}: each numeric column mapped "
                                      "from its public bounds onto [-1, 1] and clipped, each categorical column "
                                      "one-hot over its declared list"}


def held_out(part: int) -> int:
    """H = round(0.2 N_part): the declared (expected) count of the private part's rows held out for validation and
    test (the rows themselves are drawn row by row: :mod:`.user_split`)."""
    return round(HELD_OUT_FRACTION * part)


def public_rows(name: str) -> int:
    """The data set's declared public rows (its first rows)."""
    return stored(name)["public"]["public_rows"]["value"]


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


def basis(name: str, private_size: int) -> str:
    """Where N comes from, in words."""
    part = declared_part(name, private_size)
    where = "the run's private_size" if private_size else f"declared with data set {name} (data add --private-size)"
    return (f"N = {part - held_out(part)}: the private part's size {part}, {where}, minus the {held_out(part)} "
            "rows expected to be held out for validation and test (a fifth)")
