"""The built-in data sets' names (every registered mechanism's ``dataset`` choices), which a user data set may not
take, so that a config's ``dataset`` always names one thing.

Imported by the front ends only (CLI, Data page), never by the package's ``__init__``: it loads the registry, which
loads the mechanisms, which may load this package."""

from __future__ import annotations

from .. import registry


def builtin_names() -> frozenset[str]:
    return frozenset(choice for mechanism in registry.all_mechanisms() for spec in mechanism.config_cls.specs()
                     if spec.name == "dataset" and spec.knob.choices for choice in spec.knob.choices)
