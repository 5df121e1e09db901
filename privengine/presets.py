"""Presets: named, documented settings declared with a mechanism, e.g. a published configuration.

A preset is config overrides plus what it reproduces (``published``: the metric, its value, the
epsilon and the source) or ``None`` for a demo. ``python -m privengine run MECH --preset NAME
[--field value ...]`` starts from it (flags override it); ``python -m privengine presets`` lists them.

A run started from a preset records it in its ``source`` (``"dashboard (preset quick-demo)"``; ``", modified"``
when fields were changed), so its page can draw the published figure beside the run's own curve.

>>> p = Preset("quick-demo", "A small run.", {"epochs": 1.0})
>>> p.to_dict("dpsgd")["published"] is None
True
>>> source = source_with_preset("dashboard", "quick-demo")
>>> source, preset_name_of(source)
('dashboard (preset quick-demo)', 'quick-demo')
>>> preset_name_of(source_with_preset("cli", "seed-marvell-0.64", modified=True)), preset_name_of("cli")
('seed-marvell-0.64', None)
>>> Published("test accuracy", 0.897, 3.0, "Tramer & Boneh, ICLR 2021 (ScatterNet + linear)").label()
'published: 89.7 % at ε = 3 (Tramer & Boneh, ICLR 2021)'
>>> Published("student test accuracy", 0.985, 1.97, "Papernot et al., ICLR 2018 (realised ε: not a bound)").label()
'published: 98.5 % at ε = 1.97 (Papernot et al., ICLR 2018; realised ε: not a bound)'
"""

from __future__ import annotations

import re
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

    def value_text(self, value: float | None = None) -> str:
        """``value`` (default: the published one) in the metric's unit: accuracies in %, others as numbers."""
        return metric_text(self.metric, self.value if value is None else value)

    def attribution(self) -> str:
        """The source's first part, then what it says of the figure's ε (:func:`epsilon_note`, when it has one):
        ``Papernot et al., ICLR 2018; realised data-dependent ε, 286 answered: not a bound``, so no reader takes a
        realised ε for a bound."""
        note = "" if self.epsilon is None else epsilon_note(self.source)
        return "; ".join(part for part in (short_source(self.source), note) if part)

    def label(self) -> str:
        """A chart label: ``published: 89.7 % at ε = 3 (Tramer & Boneh, ICLR 2021)`` (:meth:`attribution`)."""
        at = "" if self.epsilon is None else f" at ε = {self.epsilon:g}"
        return f"published: {self.value_text()}{at} ({self.attribution()})"


def metric_text(metric: str, value: float) -> str:
    """A value of ``metric`` for people: accuracies (stored as fractions) in %, anything else to 3 digits."""
    return f"{value:.1%}".replace("%", " %") if "accuracy" in metric else f"{value:.3g}"


def short_source(source: str) -> str:
    """A source without its parenthesised detail: ``Tramer & Boneh, ICLR 2021 (ScatterNet + linear)`` -> the part
    before the parenthesis."""
    return source.split(" (", 1)[0].strip() or source


def source_detail(source: str) -> str:
    """The parenthesised detail :func:`short_source` leaves out (``"ScatterNet + linear"`` above), or ''."""
    return source.split(" (", 1)[1].rstrip(")") if " (" in source else ""


def epsilon_note(source: str) -> str:
    """The parts of a source's detail (:func:`source_detail`, split at ``;``) that name ε, joined by ``; ``: what
    the source says its ε is (``realised data-dependent ε, 286 answered: not a bound``), or ''.

    >>> epsilon_note("Papernot et al., ICLR 2018 (realised data-dependent ε, 286 answered: not a bound)")
    'realised data-dependent ε, 286 answered: not a bound'
    >>> epsilon_note("Tramer & Boneh, ICLR 2021 (ScatterNet + linear)")
    ''
    """
    return "; ".join(part.strip() for part in source_detail(source).split(";") if "ε" in part)


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


_PRESET_IN_SOURCE = re.compile(r" \(preset ([^,()]+)(, modified)?\)$")


# Not part of what a preset reproduces: where the run trains and reads its data, its seeds, its noise source,
# whether it keeps its models.
NOT_PART_OF_A_PRESET = ("seed", "replica", "device", "secure_noise", "data_root", "download", "keep_model")


def changed_fields(preset_config: Mapping[str, Any], config: Mapping[str, Any]) -> list[str]:
    """The fields of both ``preset_config`` (a preset's full config) and ``config`` whose values differ,
    leaving out :data:`NOT_PART_OF_A_PRESET` (a field only one of them has, e.g. a knob added after an old
    run was stored, is not a change).

    >>> changed_fields({"epochs": 1.0, "device": "auto", "seed": 0, "data_root": ""},
    ...                {"epochs": 2.0, "device": "cpu", "seed": 3, "data_root": "/data", "new_knob": 1})
    ['epochs']
    """
    return sorted(k for k in set(preset_config) & set(config)
                  if k not in NOT_PART_OF_A_PRESET and preset_config[k] != config[k])


def source_with_preset(source: str, preset: str, *, modified: bool = False) -> str:
    """A run's ``source`` that also records the preset it started from (``modified``: some fields changed)."""
    return f"{source} (preset {preset}{', modified' if modified else ''})"


def preset_name_of(source: str | None) -> str | None:
    """The preset a run's ``source`` records (:func:`source_with_preset`), or None."""
    match = _PRESET_IN_SOURCE.search(source or "")
    return match.group(1) if match else None
