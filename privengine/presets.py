"""Presets: named, documented settings declared with a mechanism, e.g. a published configuration.

A preset is config overrides plus what it reproduces (``published``: the metric, its value, the
epsilon and the source) or ``None`` for a demo. ``python -m privengine run MECH --preset NAME
[--field value ...]`` starts from it (flags override it); ``python -m privengine presets`` lists them.

>>> p = Preset("quick-demo", "A small run.", {"epochs": 1.0})
>>> p.to_dict("dpsgd")["published"] is None
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import ConfigError


@dataclass(frozen=True)
class Published:
    """A figure from the literature a preset reproduces (``value`` in the metric's own unit, e.g. 0.897)."""

    metric: str
    value: float
    epsilon: float | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "value": self.value, "epsilon": self.epsilon, "source": self.source}


@dataclass(frozen=True)
class Preset:
    """A named setting: ``overrides`` of the mechanism's config defaults."""

    name: str
    description: str
    overrides: Mapping[str, Any] = field(default_factory=dict)
    published: Published | None = None

    def to_dict(self, mechanism: str) -> dict[str, Any]:
        return {"mechanism": mechanism, "name": self.name, "description": self.description,
                "published": None if self.published is None else self.published.to_dict(),
                "overrides": dict(self.overrides)}


def find(presets: tuple[Preset, ...], name: str, mechanism: str) -> Preset:
    """The preset called ``name`` (ConfigError listing the mechanism's presets otherwise)."""
    for preset in presets:
        if preset.name == name:
            return preset
    known = ", ".join(p.name for p in presets) or "none"
    raise ConfigError("preset", f"must be one of {mechanism}'s presets ({known}); got {name!r}")
