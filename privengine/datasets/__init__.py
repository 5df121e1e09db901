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
take), :mod:`.describe` (a manifest in words), :mod:`.cli` (``python -m privengine data ...``).
"""

from .content import content_digest
from .declaration import DEFAULT_MAX_BYTES, DEFAULT_MIN_ROWS, Declaration, parse_bounds, parse_categorical, parse_list
from .ingest import add_dataset, parse
from .lookup import UserDataset, load_dataset
from .references import delete_unused, referencing_runs, source_key
from .storage import datasets_home, manifest, names

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MIN_ROWS", "Declaration", "UserDataset", "add_dataset", "content_digest",
           "datasets_home", "delete_unused", "load_dataset", "manifest", "names", "parse", "parse_bounds",
           "parse_categorical", "parse_list", "referencing_runs", "source_key"]
