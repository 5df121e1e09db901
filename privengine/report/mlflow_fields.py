"""What a stored run becomes in MLflow (``export ID --to mlflow``, written by :mod:`.mlflow_export`): its recipe as
params, its curves as metric rows, its headline privacy claim and provenance as tags, each a plain value within
MLflow's limits. Nothing here imports MLflow.

MLflow's limits (``mlflow.utils.validation``): a param value at most :data:`PARAM_VALUE_MAX` characters, a tag value
:data:`TAG_VALUE_MAX`, a key :data:`KEY_MAX`, and a key only of letters, digits, ``_ - . / :`` and spaces, a relative
path in normal form (no ``//``, no trailing ``/``, no ``.`` or ``..`` part). Keys are mapped by :func:`mlflow_keys`;
a value over its limit is replaced by a note saying where the whole value is (:data:`CONFIG_ARTIFACT` or
:data:`RUN_ARTIFACT`, the artifacts every export logs), never cut short.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections import Counter
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from privengine.claims import PrivacyClaim
from privengine.jsonable import to_jsonable
from privengine.store import RunRecord

if TYPE_CHECKING:
    import pandas as pd

PARAM_VALUE_MAX, TAG_VALUE_MAX, KEY_MAX = 6000, 8000, 250
CONFIG_ARTIFACT, RUN_ARTIFACT = "privengine/config.json", "privengine/run.json"
EPSILON_BASIS_TAG = "privengine.epsilon_basis."  # + the metric's key: the delta and accountant of an epsilon curve
_KEY_CHARACTERS = re.compile(r"[^/\w.\- :]")
_HASH_CHARS = 8


def mlflow_keys(names: Iterable[str]) -> dict[str, str]:
    """Each name -> a valid, distinct MLflow key: ``|`` (DP-SGD's ``metric|setting|seed``) becomes ``/`` (MLflow's
    grouping) and any other character MLflow refuses ``_``. A name whose key would still be invalid (too long, not
    a relative path in normal form) or would equal another's gets a plain form instead: ``/`` as ``_``, leading dots
    dropped, cut to fit, then ``-`` and the first :data:`_HASH_CHARS` hex digits of the name's SHA-256."""
    candidates = {name: _KEY_CHARACTERS.sub("_", name.replace("|", "/")) for name in dict.fromkeys(names)}
    taken = Counter(candidates.values())
    return {name: key if taken[key] == 1 and _valid(key) else _hashed(name, key) for name, key in candidates.items()}


def _valid(key: str) -> bool:
    """Within the length limit and a relative path in normal form (MLflow keeps a key's parts as folders)."""
    norm = posixpath.normpath(key)
    return 0 < len(key) <= KEY_MAX and norm == key and norm != "." and not norm.startswith(("..", "/"))


def _hashed(name: str, key: str) -> str:
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_CHARS]
    return f"{key.replace('/', '_').lstrip('.')[:KEY_MAX - _HASH_CHARS - 1]}-{digest}"


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A config with nested mappings flattened to dotted paths (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); lists and
    empty mappings stay whole values."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flat_config(value, prefix=f"{path}."))
        else:
            flat[path] = value
    return flat


def params(config: Mapping[str, Any]) -> dict[str, str]:
    """The run's recipe as MLflow params: each field of the flattened config (:func:`flat_config`) under its key
    (:func:`mlflow_keys`), a string as it is and anything else as JSON; a value longer than
    :data:`PARAM_VALUE_MAX` is a note naming the field's path in :data:`CONFIG_ARTIFACT`."""
    flat = flat_config(to_jsonable(dict(config)))
    keys = mlflow_keys(flat)
    values = {path: value if isinstance(value, str) else json.dumps(value, sort_keys=True)
              for path, value in flat.items()}
    return {keys[path]: _fit(text, PARAM_VALUE_MAX, f"`{path}` in artifact {CONFIG_ARTIFACT}")
            for path, text in values.items()}


def metric_rows(metrics: pd.DataFrame, keys: Mapping[str, str]) -> list[tuple[str, int, float]]:
    """The store's metric points (a frame of ``step``, ``name``, ``value``, as :meth:`RunStore.metrics` returns them,
    in its order) as ``(key, step, value)`` rows; ``keys``: each name's key, :func:`mlflow_keys` of them all. Values
    as stored (NaN included)."""
    return [(keys[name], int(step), float(value))
            for step, name, value in metrics[["step", "name", "value"]].itertuples(index=False)]


def run_tags(run: RunRecord, headline: PrivacyClaim | None, *, data_source: str | None, command: str,
             epsilon_columns: Mapping[str, str]) -> dict[str, str]:
    """Tags: where the run comes from (``privengine.*``: id, mechanism, state, source, the ledger's data source, the
    command that reruns it), its headline claim (``privacy.*``: ε, δ, accountant, neighbouring relation, label, the
    whole claim as text; ``privacy.headline`` is ``none`` for a run that states no claim), and for each epsilon curve
    the delta and accountant it rests on (``epsilon_columns``: the curve's metric key -> its CSV column,
    :func:`privengine.figures.export.epsilon_column`), under :data:`EPSILON_BASIS_TAG` + the key."""
    tags = {"privengine.run_id": run.id, "privengine.mechanism": run.mechanism, "privengine.state": run.state,
            "privengine.source": run.source, "privengine.data_source": data_source or "not recorded",
            "privengine.command": command}
    if run.notes:
        tags["mlflow.note.content"] = run.notes  # the run's description in MLflow's UI
    if headline is None:
        tags["privacy.headline"] = "none: this run states no differential-privacy claim"
    else:
        tags.update({"privacy.headline": headline.text(), "privacy.epsilon": repr(headline.epsilon),
                     "privacy.delta": repr(headline.delta), "privacy.accountant": headline.accountant,
                     "privacy.neighbouring": headline.neighbouring,
                     "privacy.relation": headline.relation or "not stated", "privacy.label": headline.label})
        if headline.condition:
            tags["privacy.condition"] = headline.condition
    basis = mlflow_keys(EPSILON_BASIS_TAG + key for key in epsilon_columns)
    tags.update({basis[EPSILON_BASIS_TAG + key]: column for key, column in epsilon_columns.items()})
    return {key: _fit(value, TAG_VALUE_MAX, f"artifact {RUN_ARTIFACT}") for key, value in tags.items()}


def _fit(text: str, limit: int, where: str) -> str:
    """``text``, or when it is longer than ``limit`` a note of its length and where the whole of it is."""
    return text if len(text) <= limit else f"<{len(text)} characters, over MLflow's {limit}: see {where}>"
