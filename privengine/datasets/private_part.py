"""What a run of any mechanism on a stored user data set (:mod:`privengine.datasets`) takes from its manifest, the
data set's public facts, before any row is read (no numpy, no torch: mechanism configs import this).

Parts of a user data set of declared private-part size N_part (``data add --private-size``, or a run's
``private_size`` knob, which replaces it):

- public: the rows the data set declares public (its first ``public_rows``);
- held out: each private row with probability 0.2, decided from that row and ``data_seed`` alone
  (:mod:`.held_out`; validation or test), about H = round(0.2 N_part) rows: the data set declares no test part,
  so a run evaluates on the user's own rows, which no claim protects;
- private training: the rest, of declared size N = N_part - H: a mechanism's sampling rate and step counts come from
  N, never from a count of the private rows.
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from privengine.errors import ConfigError

HELD_OUT_FRACTION = 0.2  # of the declared private part: validation and test rows
VALIDATION_SHARE = 0.5  # of the held-out rows: validation (the rest test)
HELD_OUT_DRAWN = ("held out (validation and test; the expected count: each private row with probability 0.2, and "
                  "each data_seed draws other rows)")  # how a ledger names the held-out rows a run uses


def is_user_dataset(dataset: str, built_in: Collection[str]) -> bool:
    """Whether a config's ``dataset`` names a stored user data set rather than one of ``built_in``, the mechanism's
    own data sets (its ``dataset`` knob's choices). ``data add`` refuses every built-in name (:mod:`.builtin`), so a
    name outside ``built_in`` can only be a stored data set's, or nothing stored, which :func:`stored` refuses naming
    ``dataset``.

    >>> is_user_dataset("cohort", ("mnist", "digits")), is_user_dataset("digits", ("mnist", "digits"))
    (True, False)
    """
    return dataset not in built_in


def stored(name: str) -> dict[str, Any]:
    """The manifest of user data set ``name``; ConfigError naming ``dataset`` if none is stored under it."""
    from . import manifest

    try:
        return manifest(name)
    except ConfigError as exc:
        raise ConfigError("dataset", f"must be a built-in data set or {exc.reason.removeprefix('must be ')}") from None


def unbounded_columns(manifest: Mapping[str, Any]) -> list[str]:
    """A table's numeric columns without public bounds (none declared and no public rows)."""
    if manifest["kind"] != "tabular":
        return []
    return [column for column, bound in manifest["public"]["bounds"].items() if bound["value"] is None]


def binary_table_problem(manifest: Mapping[str, Any]) -> str | None:
    """Why the data set of ``manifest`` is no table with a binary label and public bounds on every numeric column
    (what a mechanism that fits a binary label on a table's scaled columns needs), in words; None if it is one."""
    if manifest["kind"] != "tabular":
        return "it holds images: a table's columns are needed"
    classes = manifest["public"]["classes"]["value"]
    if len(classes) != 2:
        return f"its label has {len(classes)} classes ({', '.join(map(str, classes))}): a binary label is needed"
    if columns := unbounded_columns(manifest):
        return (f"it has numeric columns without public bounds ({', '.join(columns)}): the features are scaled by "
                "their public range; add the data set again with --bounds COLUMN=LOW:HIGH or with public rows")
    return None


def declared_part(name: str, private_size: int) -> int:
    """N_part: the run's ``private_size`` when set, else the data set's declared private size; ConfigError naming
    ``private_size`` when neither is declared (the private rows are never counted for it)."""
    if private_size:
        return private_size
    declared = stored(name)["public"]["private_size"]["value"]
    if declared is None:
        raise ConfigError("private_size", f"must be declared for data set {name!r}, which states no private size: "
                                          f"python -m privengine run MECHANISM --dataset {name} --private-size N, or "
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


def raw_features(manifest: Mapping[str, Any]) -> str:
    """What a kept model of this data set reads, in words: its images as stored, or its rows as in its file."""
    name = manifest["name"]
    if manifest["kind"] == "images":
        return f"images of data set {name} as stored: pixel values 0-255, channels first"
    columns = ", ".join(manifest["schema"]["numeric"] + list(manifest["schema"]["categorical"]))
    return (f"rows of data set {name} as in its file, columns by name ({columns}; a CSV with a header): "
            "numbers, and categories as text")


def held_out(part: int) -> int:
    """H = round(0.2 N_part): the declared (expected) count of the private part's rows held out for validation and
    test (the rows themselves are drawn row by row: :mod:`.held_out`)."""
    return round(HELD_OUT_FRACTION * part)


def public_rows(name: str) -> int:
    """The data set's declared public rows (its first rows)."""
    return stored(name)["public"]["public_rows"]["value"]


def basis(name: str, private_size: int) -> str:
    """Where N comes from, in words."""
    part = declared_part(name, private_size)
    where = "the run's private_size" if private_size else f"declared with data set {name} (data add --private-size)"
    return (f"N = {part - held_out(part)}: the private part's size {part}, {where}, minus the {held_out(part)} "
            "rows expected to be held out for validation and test (a fifth)")
