"""User data sets: files the user brings (a CSV or Parquet table, an image folder or a zip of one), validated,
normalised and stored under ``$PRIVENGINE_HOME/datasets`` with their declared public facts.

The API mechanisms use (part 2 of issue 38)::

    from privengine.datasets import load_dataset
    data = load_dataset("NAME")       # ConfigError("name", ...) when none is stored under NAME
    data.kind                         # "tabular" | "images"
    data.x, data.y, data.categories   # (n, d) float64 | (n, c, h, w) uint8;  (n,) int64;  (n, k) int64 | None
    data.classes                      # the public class list (y codes index it)
    data.public(), data.private()     # rows [:public_rows] / [public_rows:], dicts of the arrays above
    data.private_size                 # N declared public for sampling, or None (not declared)
    data.fact("bounds")               # numeric column -> {"value": [low, high] | None, "source": ...}
    data.manifest["fingerprint"]      # SHA-256 of the normalised content: the store's address (shown: 16 hex)
    data.arrays()                     # every array, all rows (a noise key: content_digest(own tag, schema, these))

Every public fact comes from the user's declaration, the public part (the file's first rows) or the format, never
from the private rows, and its ``source`` says which. A run on data set NAME stores ``"dataset": NAME`` in its config
and ``source_key(NAME)`` (``user/NAME``) as its ledger source; :func:`referencing_runs` finds such runs, and
:func:`delete_unused` (the CLI's and the Data page's delete) refuses to delete a data set while any exist.

Modules, one job each: :mod:`.declaration` (what the user declares, checked), :mod:`.tabular` and :mod:`.images`
(parse and validate), :mod:`.content` (the parsed form, its fingerprint, the public-part facts), :mod:`.storage`
(content-addressed, atomic), :mod:`.ingest` (add: check, parse, store), :mod:`.lookup` (load),
:mod:`.references` (runs using one; delete only when none does), :mod:`.builtin` (names a user data set may not
take), :mod:`.describe` (a manifest in words), :mod:`.cli` (``python -m privengine data ...``), :mod:`.private_part`
(what a run of any mechanism takes from a manifest's public facts), :mod:`.held_out` (which private rows a run
holds out), :mod:`.inputs` (rows as model inputs, scaled by public facts).
"""

_EXPORTS = {"content_digest": "content", "DEFAULT_MAX_BYTES": "declaration", "DEFAULT_MIN_ROWS": "declaration",
            "Declaration": "declaration", "parse_bounds": "declaration", "parse_categorical": "declaration",
            "parse_list": "declaration", "add_dataset": "ingest", "parse": "ingest", "UserDataset": "lookup",
            "load_dataset": "lookup", "delete_unused": "references", "referencing_runs": "references",
            "source_key": "references", "datasets_home": "storage", "manifest": "storage", "names": "storage"}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    """Each name imported from its module on first use (PEP 562), so a config that only reads a manifest's public
    facts (:mod:`.private_part`) does not import numpy and the parsers at the CLI's start."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value
