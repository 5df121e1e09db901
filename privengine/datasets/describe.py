"""A stored data set's manifest in words, for the CLI and the Data page: what of it is shown (:func:`shown`), one
summary line, and its public facts each with where it came from."""

from __future__ import annotations

import time
from typing import Any


ADDRESS_CHARS = 16  # hex characters of the content address shown


def shown(document: dict[str, Any]) -> dict[str, Any]:
    """A manifest as the CLI and the page show it: its content fingerprint replaced by ``address``, its first
    :data:`ADDRESS_CHARS` hex characters (enough to tell stored data sets apart; the whole digest is never shown)."""
    visible = {key: value for key, value in document.items() if key != "fingerprint"}
    return {**visible, "address": address(document)}


ADDRESS_NOTE = ("a digest of the whole content, private rows included: for your own reference, not for publishing "
                "(whoever holds every row but one could test guesses of the last against it)")


def address(document: dict[str, Any]) -> str:
    """The shown prefix of a manifest's content address (:data:`ADDRESS_NOTE` says what it is not for)."""
    return document["fingerprint"][:ADDRESS_CHARS]


def summary(document: dict[str, Any]) -> str:
    """One line: name, kind, rows (public), classes, address, when added."""
    public = document["public"]
    return (f"{document['name']}: {document['kind']}, {document['rows']} rows ({public['public_rows']['value']} "
            f"public), classes {', '.join(public['classes']['value'])}; address {address(document)}; "
            f"added {time.strftime('%Y-%m-%d %H:%M', time.localtime(document['created_at']))}")


def stored_message(document: dict[str, Any]) -> str:
    """What ``data add`` and the Data page say once a data set is stored: its :func:`summary` and what its address
    is not for (:data:`ADDRESS_NOTE`)."""
    return f"Stored {summary(document)}. The address is {ADDRESS_NOTE}."


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
