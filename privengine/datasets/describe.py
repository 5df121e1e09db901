"""A stored data set's manifest in words, for the CLI and the Data page: one summary line, and its public facts
each with where it came from."""

from __future__ import annotations

import time
from typing import Any


def summary(document: dict[str, Any]) -> str:
    """One line: name, kind, rows (public), classes, fingerprint, when added."""
    public = document["public"]
    return (f"{document['name']}: {document['kind']}, {document['rows']} rows ({public['public_rows']['value']} "
            f"public), classes {', '.join(public['classes']['value'])}; fingerprint {document['fingerprint'][:16]}; "
            f"added {time.strftime('%Y-%m-%d %H:%M', time.localtime(document['created_at']))}")


def fact_rows(document: dict[str, Any]) -> list[dict[str, str]]:
    """Each public fact as ``{"fact", "value", "source"}`` in words (bounds and category lists one per column)."""
    public = document["public"]
    rows = [{"fact": name, "value": _value(public[name]["value"]), "source": public[name]["source"]}
            for name in ("private_size", "public_rows", "classes")]
    rows += [{"fact": f"{group} of {column}", "value": _value(item["value"]), "source": item["source"]}
             for group in ("categories", "bounds") for column, item in public[group].items()]
    return rows


def _value(value: Any) -> str:
    if value is None:
        return "-"
    return ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
