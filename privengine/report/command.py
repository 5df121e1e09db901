"""The command lines that reproduce a stored run or sweep, from its stored config (non-default knobs only).

Each value is written as the text the CLI's flag parses back to it (floats by their shortest exact form),
and the whole line is shell-quoted.

>>> from privengine.config import RunConfig
>>> flag_value(RunConfig.spec("secure_noise"), True)
'true'
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from privengine import registry
from privengine.cli_fields import flag_name
from privengine.config import BaseConfig, FieldSpec
from privengine.explore.spec import SweepSpec

PROGRAM = ["python", "-m", "privengine"]


@dataclass(frozen=True)
class Reproduction:
    """A command line, and what it does not reproduce exactly (empty when it does)."""

    command: str
    notes: tuple[str, ...] = ()


def flag_value(spec: FieldSpec, value: Any) -> str:
    """The flag text that ``spec.parse`` reads back as ``value`` (lists comma-separated)."""
    if spec.is_list:
        return ",".join(_item_text(v) for v in value)
    return _item_text(value)


def _item_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


def _changed(config_cls: type[BaseConfig], values: dict[str, Any]) -> list[tuple[FieldSpec, Any]]:
    """The knobs of ``values`` that differ from their defaults, in declaration order."""
    out = []
    for spec in config_cls.specs():
        if spec.name in values:
            value = values[spec.name]
            if (tuple(value) if spec.is_list else value) != spec.default:
                out.append((spec, value))
    return out


def _flags(config_cls: type[BaseConfig], values: dict[str, Any]) -> list[str]:
    return [part for spec, value in _changed(config_cls, values)
            for part in (flag_name(spec), flag_value(spec, value))]


def _unknown(config_cls: type[BaseConfig], values: dict[str, Any]) -> tuple[str, ...]:
    known = {s.name for s in config_cls.specs()}
    return tuple(f"The stored value of `{name}` is left out: this version of {config_cls.__name__} has no such knob."
                 for name in values if name not in known)


def run_command(mechanism: str, config: dict[str, Any]) -> Reproduction:
    """``python -m privengine run MECHANISM --knob value ...`` for a run's stored config."""
    cls = registry.get(mechanism).config_cls
    notes = _unknown(cls, config)
    if config.get("secure_noise"):
        notes += ("Secure noise was on: the command runs the same configuration, but its privacy noise is drawn "
                  "afresh from OS entropy, so the results differ from this run's.",)
    return Reproduction(shlex.join([*PROGRAM, "run", mechanism, *_flags(cls, config)]), notes)


def sweep_command(spec: SweepSpec, *, executor: str = "local") -> Reproduction:
    """``python -m privengine sweep MECHANISM --vary ... --seeds N --knob value ...`` for a stored sweep."""
    cls = registry.get(spec.mechanism).config_cls
    parts = [*PROGRAM, "sweep", spec.mechanism]
    notes = _unknown(cls, spec.base)
    for name, values in spec.axes.items():
        field = cls.spec(name)
        if field.is_list:
            notes += (f"`{name}` is a list knob: --vary cannot give it several lists; sweep it from the Explore page.",)
        parts += ["--vary", f"{name}={','.join(flag_value(field, v) for v in values)}"]
    for name, (low, high) in spec.random.items():
        field = cls.spec(name)
        parts += ["--random", f"{name}={flag_value(field, low)}:{flag_value(field, high)}"]
    if spec.samples:
        parts += ["--samples", str(spec.samples)]
    if spec.seeds != 1:
        parts += ["--seeds", str(spec.seeds)]
    if spec.utility:
        parts += ["--utility", spec.utility]
    if spec.repeat:
        parts += ["--repeat", f"{spec.repeat['shape']}:{spec.repeat['mean']!r}"]
    if executor != "local":
        parts += ["--executor", executor]
    if spec.draw_seed:
        notes += (f"The points were drawn with draw seed {spec.draw_seed}; the CLI draws with seed 0.",)
    return Reproduction(shlex.join(parts + _flags(cls, spec.base)), notes)
