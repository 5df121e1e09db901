"""Command-line flags generated from a config class: one ``--field-name VALUE`` per knob, parsed back by
the knob's own rules. Shared by ``run``/``sweep`` (mechanism configs) and ``audit`` (audit configs)."""

from __future__ import annotations

import argparse
from typing import Any

from .config import FieldSpec


def add_field_flags(group, config_cls) -> None:
    """Add one ``--field-name`` flag per knob of ``config_cls`` to ``group`` (a parser or argument group)."""
    for spec in config_cls.specs():
        group.add_argument(flag_name(spec), dest=f"field__{spec.name}",
                           metavar=_metavar(spec), help=_flag_help(spec))


def flag_name(spec: FieldSpec) -> str:
    """The flag of a knob: ``--field-name`` for ``field_name``."""
    return f"--{spec.name.replace('_', '-')}"


def field_values(args: argparse.Namespace, config_cls) -> dict[str, Any]:
    """The values given by those flags, each parsed and checked by its knob (ConfigError naming the field)."""
    return {spec.name: spec.parse(text) for spec in config_cls.specs()
            if (text := getattr(args, f"field__{spec.name}", None)) is not None}


def _metavar(spec: FieldSpec) -> str:
    if spec.knob.choices is not None:  # NAME: a stored user data set's
        return "{" + ",".join(map(str, spec.knob.choices)) + (",NAME" if spec.knob.user_datasets else "") + "}"
    return {"int": "INT", "float": "X", "bool": "true|false", "str": "TEXT"}.get(spec.kind, "A,B,...")


def _flag_help(spec: FieldSpec) -> str:
    default = ",".join(map(str, spec.default)) if spec.is_list else spec.default
    allowed = "" if spec.knob.choices is not None else f"; allowed {spec.range_text()}"
    return f"{spec.knob.help} (default {default}{allowed})".replace("%", "%%")
