"""Declarative run configurations.

A mechanism's config is a frozen dataclass whose fields are declared with
:func:`knob`: the default, the allowed range or choices, whether the value is
best explored on a log scale, and a help text. That one declaration drives the
dashboard form, the CLI flags, validation and the JSON round trip, so a knob is
declared exactly once.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Demo(BaseConfig):
...     epsilon: float = knob(1.0, low=0.01, high=100, log=True, help="privacy budget")
>>> Demo(epsilon=3.0).validate().epsilon
3.0
>>> Demo(epsilon=-1.0).validate()
Traceback (most recent call last):
...
privengine.errors.ConfigError: `epsilon` must be in [0.01, 100]; got -1.0
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import typing
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ConfigError

Kind = Literal["int", "float", "str", "bool", "int_list", "float_list"]

_KIND_OF_TYPE: dict[Any, Kind] = {
    int: "int",
    float: "float",
    str: "str",
    bool: "bool",
    tuple[int, ...]: "int_list",
    tuple[float, ...]: "float_list",
}

_TRUE_WORDS = {"1", "true", "yes", "on"}
_FALSE_WORDS = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Knob:
    """Metadata of one config field (see :func:`knob` for the meaning of each entry)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple | None = None
    log: bool = False
    help: str = ""
    label: str | None = None
    advanced: bool = False
    min_items: int = 1
    max_items: int | None = None
    shown_when: tuple[str, tuple] | None = None
    choice_labels: tuple[tuple[str, str], ...] = ()
    unkeyed_default: bool = False
    user_datasets: bool = False

    def choice_label(self, choice: str) -> str:
        """The human-readable name of a choice: its label given here, else the shared name of a common choice
        (:data:`CHOICE_NAMES`), else the choice with spaces for underscores; a value that is no choice as it is.

        >>> Knob(choices=("fashion_mnist", "max_norm", "iso"), choice_labels=(("iso", "isotropic"),)).choice_label(
        ...     "fashion_mnist")
        'Fashion-MNIST'
        """
        if self.choices is None or choice not in self.choices:
            return choice
        return dict(self.choice_labels).get(choice) or CHOICE_NAMES.get(choice) or choice.replace("_", " ")


# how choices that several mechanisms offer read in the forms, tables and reports
CHOICE_NAMES = {"mnist": "MNIST", "fashion_mnist": "Fashion-MNIST", "cifar10": "CIFAR-10", "cifar100": "CIFAR-100",
                "svhn": "SVHN", "digits": "digits (scikit-learn 8x8)", "synthetic": "synthetic (embedded)",
                "linreg": "linear regression (embedded, low rank)"}


#: The smallest Poisson sampling rate a run may ask for: the resolution of :mod:`privengine.poisson`'s masks (uniform
#: integers below 2^24; a positive rate below it would never sample anyone). Here, torch-free, for the configs' checks.
MIN_SAMPLE_RATE = 2.0 ** -24


def knob(
    default: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    choices: tuple | None = None,
    log: bool = False,
    help: str = "",
    label: str | None = None,
    advanced: bool = False,
    min_items: int = 1,
    max_items: int | None = None,
    shown_when: tuple[str, tuple] | None = None,
    choice_labels: dict[str, str] | None = None,
    unkeyed_default: bool = False,
    user_datasets: bool = False,
) -> Any:
    """Declare a config field.

    Args:
        default: the default value (a tuple for list-valued fields).
        low, high: bounds of a numeric value (or of every item of a list); None = unbounded.
        low_open, high_open: make the corresponding bound strict (``> low`` instead of ``>= low``).
        choices: the allowed values of a str field.
        log: the value is best explored on a log scale (UI hint).
        help: one or two sentences shown as help in the form and the CLI.
        label: a human-readable name; defaults to the field name with spaces.
        advanced: shown in the form's "Advanced" section.
        min_items, max_items: length bounds of a list-valued field.
        shown_when: ``(other_field, values)``: the field only matters when
            ``other_field`` takes one of ``values``; the form hides it otherwise.
        choice_labels: human-readable names of some choices, for the form.
        unkeyed_default: a knob added after runs were published, whose default reproduces the earlier behaviour
            exactly: at its default it is left out of the config digest that keys a run's noise
            (:func:`privengine.randomness.config_digest`), so those runs replay with the same noise.
        user_datasets: a ``dataset`` field that also takes the name of a stored user data set
            (:mod:`privengine.datasets`) beside its ``choices``: any other text passes the field's own check, and the
            config's ``check_rules`` checks that it names a stored data set the mechanism can use.
    """
    meta = Knob(low, high, low_open, high_open, choices, log, help, label, advanced,
                min_items, max_items, shown_when, tuple((choice_labels or {}).items()), unkeyed_default,
                user_datasets)
    return dataclasses.field(default=default, metadata={"knob": meta})


@dataclass(frozen=True)
class FieldSpec:
    """One field of a config class: its name, value kind, default and :class:`Knob`."""

    name: str
    kind: Kind
    default: Any
    knob: Knob

    @property
    def label(self) -> str:
        return self.knob.label or self.name.replace("_", " ")

    @property
    def is_list(self) -> bool:
        return self.kind.endswith("_list")

    @property
    def item_kind(self) -> Kind:
        return self.kind.removesuffix("_list")  # type: ignore[return-value]

    def range_text(self) -> str:
        """The allowed values in words, e.g. ``[0.01, 100]``, ``> 0`` or ``one of a, b``."""
        k = self.knob
        if k.choices is not None:
            mine = ", or a stored data set's name (python -m privengine data list)" if k.user_datasets else ""
            return "one of " + ", ".join(str(c) for c in k.choices) + mine
        if k.low is not None and k.high is not None:
            return f"{'(' if k.low_open else '['}{_fmt(k.low)}, {_fmt(k.high)}{')' if k.high_open else ']'}"
        if k.low is not None:
            return f"{'>' if k.low_open else '>='} {_fmt(k.low)}"
        if k.high is not None:
            return f"{'<' if k.high_open else '<='} {_fmt(k.high)}"
        return "any value"

    def check(self, value: Any) -> Any:
        """Return ``value`` if it is allowed for this field, else raise :class:`ConfigError`.

        Lists are accepted as tuples or lists and returned as tuples. Nothing is
        coerced beyond that: an int field given 2.5 is an error, not 2.
        """
        if not self.is_list:
            return self._check_item(value, where="")
        if not isinstance(value, (list, tuple)):
            raise ConfigError(self.name, f"must be a list of {self.item_kind} values; got {value!r}")
        k = self.knob
        if len(value) < k.min_items or (k.max_items is not None and len(value) > k.max_items):
            most = "" if k.max_items is None else f" and at most {k.max_items}"
            raise ConfigError(self.name, f"must have at least {k.min_items}{most} items; got {len(value)}")
        return tuple(self._check_item(v, where=f" (item {i + 1})") for i, v in enumerate(value))

    def _check_item(self, value: Any, where: str) -> Any:
        kind = self.item_kind
        if kind == "bool":
            if not isinstance(value, bool):
                raise ConfigError(self.name, f"must be true or false{where}; got {value!r}")
            return value
        if kind == "str":
            if not isinstance(value, str):
                raise ConfigError(self.name, f"must be text{where}; got {value!r}")
            if (self.knob.choices is not None and value not in self.knob.choices
                    and not (self.knob.user_datasets and value)):
                raise ConfigError(self.name, f"must be {self.range_text()}{where}; got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(self.name, f"must be {'an integer' if kind == 'int' else 'a number'}{where}; got {value!r}")
        if kind == "int" and not isinstance(value, int):
            raise ConfigError(self.name, f"must be an integer{where}; got {value!r}")
        if kind == "float":
            value = float(value)
            if not math.isfinite(value):  # e.g. 1e309 typed or parsed: inf, refused with the range, never clamped
                raise ConfigError(self.name, f"must be a finite number{self.range_suffix()}{where}; got {value!r}")
        if not self.in_range(value):
            raise ConfigError(self.name, f"must be {self._range_phrase()}{where}; got {value!r}")
        return value

    def in_range(self, v: float) -> bool:
        """Whether the number ``v`` is within this field's bounds (open or closed as declared)."""
        k = self.knob
        if k.low is not None and (v < k.low or (k.low_open and v == k.low)):
            return False
        if k.high is not None and (v > k.high or (k.high_open and v == k.high)):
            return False
        return True

    def _range_phrase(self) -> str:
        text = self.range_text()
        return text if text[0] in "<>" else f"in {text}"

    def range_suffix(self) -> str:
        """`` in [0, 10000]`` (the allowed range after a space), or '' for an unbounded field."""
        return "" if self.range_text() == "any value" else f" {self._range_phrase()}"

    def parse(self, text: str) -> Any:
        """Parse a command-line or text-box string into a checked value.

        Lists are comma-separated (``"0, 1, 4"``).
        """
        if self.is_list:
            parts = [p.strip() for p in str(text).split(",") if p.strip()]
            return self.check([self._parse_item(p) for p in parts])
        return self.check(self._parse_item(str(text).strip()))

    def _parse_item(self, text: str) -> Any:
        kind = self.item_kind
        if kind == "str":
            return text
        if kind == "bool":
            low = text.lower()
            if low in _TRUE_WORDS:
                return True
            if low in _FALSE_WORDS:
                return False
            raise ConfigError(self.name, f"must be true or false; got {text!r}")
        try:
            return int(text) if kind == "int" else float(text)
        except ValueError:
            raise ConfigError(self.name, f"must be {'an integer' if kind == 'int' else 'a number'}; got {text!r}") from None


def _fmt(x: float) -> str:
    return f"{x:g}"


@dataclass(frozen=True)
class BaseConfig:
    """Base of every mechanism config: field checks, cross-field rules, JSON round trip.

    Subclasses declare fields with :func:`knob` and may override :meth:`check_rules`
    for rules that involve several fields.
    """

    @classmethod
    @functools.cache
    def specs(cls) -> tuple[FieldSpec, ...]:
        """The fields of this config, in declaration order."""
        hints = typing.get_type_hints(cls)
        out = []
        for f in dataclasses.fields(cls):
            knob_meta = f.metadata.get("knob")
            if knob_meta is None:
                raise TypeError(f"{cls.__name__}.{f.name} must be declared with knob()")
            kind = _KIND_OF_TYPE.get(hints[f.name])
            if kind is None:
                raise TypeError(f"{cls.__name__}.{f.name}: unsupported type {hints[f.name]!r}")
            out.append(FieldSpec(f.name, kind, f.default, knob_meta))
        return tuple(out)

    @classmethod
    def spec(cls, name: str) -> FieldSpec:
        for s in cls.specs():
            if s.name == name:
                return s
        raise ConfigError(name, f"is not a field of {cls.__name__}; known fields: {', '.join(s.name for s in cls.specs())}")

    def validate(self):
        """Check every field and the cross-field rules; return self or raise ConfigError."""
        for s in self.specs():
            s.check(getattr(self, s.name))
        self.check_rules()
        return self

    def check_rules(self) -> None:
        """Cross-field rules; subclasses override and raise ConfigError naming a field."""

    @classmethod
    def user_dataset_problem(cls, name: str, values: dict[str, Any]) -> str | None:
        """Why stored user data set ``name`` cannot serve a config of ``values`` (its other fields, as far as known),
        in words; None if it can. A config with a ``user_datasets`` knob overrides it; the form's data set choice
        names each data set that has a problem, and why."""
        return None

    @classmethod
    def user_dataset_start(cls, name: str) -> dict[str, Any]:
        """The knob values (beyond the data set choice) a form should start from on stored user data set ``name``
        where the defaults do not fit it, computed from the data set's public facts only (its manifest: the
        declared private size, the public rows, the schema), never from its rows; {} here (the defaults fit). A
        config with a ``user_datasets`` knob overrides it where its defaults can exceed a small data set."""
        return {}

    @classmethod
    def user_dataset_seed(cls, name: str) -> dict[str, Any]:
        """The fields a form on stored data set ``name`` is seeded with: the data set choice and those of
        :meth:`user_dataset_start` that differ from the defaults, checked to give a valid config; ConfigError naming
        the field when no values fit the data set (e.g. no declared private size, a model that cannot take it)."""
        field = next(s.name for s in cls.specs() if s.knob.user_datasets)
        changed = {k: v for k, v in cls.user_dataset_start(name).items() if v != cls.spec(k).default}
        seed = {field: name, **changed}
        cls.from_dict(seed)
        return seed

    def to_dict(self) -> dict[str, Any]:
        return {s.name: list(v) if isinstance(v := getattr(self, s.name), tuple) else v for s in self.specs()}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        """Build and validate a config from a mapping; unknown keys are rejected."""
        if not isinstance(data, dict):
            raise ConfigError("config", f"must be a JSON object; got {type(data).__name__}")
        known = {s.name: s for s in cls.specs()}
        for key in data:
            if key not in known:
                raise ConfigError(str(key), f"is not a field of {cls.__name__}; known fields: {', '.join(known)}")
        values = {k: known[k].check(v) for k, v in data.items()}
        return cls(**values).validate()

    @classmethod
    def from_json(cls, text: str, *, over: dict[str, Any] | None = None):
        """The config of the JSON object ``text``, its fields set on top of ``over`` (a config's fields, e.g. a
        preset's; default: the defaults). ConfigError naming ``config`` for text that is no JSON object."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError("config", f"must be valid JSON ({exc.msg} at position {exc.pos})") from None
        if not isinstance(data, dict):
            raise ConfigError("config", f"must be a JSON object of fields and values; got {text!r}")
        return cls.from_dict({**(over or {}), **data})

    def replace(self, **changes: Any):
        """A validated copy with some fields changed."""
        return type(self).from_dict({**self.to_dict(), **changes})


DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


def keep_model_knob() -> Any:
    """The ``keep_model`` field of a mechanism that keeps its final models (:mod:`privengine.kept_models`): on by
    default, and unkeyed at that default so runs stored before it existed keep their noise. Keeping a model
    releases nothing beyond what the run's claims already cover (they cover every model it trains; a mechanism that
    states no claim, split learning, keeps models no claim covers and its card says so), so the knob changes no
    claim."""
    return knob(True, advanced=True, unkeyed_default=True,
                help="Keep the run's final model(s) in the store's home (safetensors), for python -m privengine "
                     "export ID --format model and the run page's download. Off keeps none; the privacy claim is "
                     "the same either way.")


def declared_private_size_knob(uses: str, *, built_in: str = "") -> Any:
    """The ``private_size`` field of a mechanism that takes stored user data sets: N_part, the size of a stored data
    set's private part **declared public**, never counted from its rows (:mod:`privengine.datasets.private_part`: a
    fifth held out, N = N_part - round(0.2 N_part) the rest); 0 = as declared with the data set. An integer in
    [0, 10^8], advanced, and unkeyed at its default 0, so runs stored before the knob existed keep their noise.
    ``uses``: what the mechanism takes from N, a sentence. ``built_in``: what the knob means on the mechanism's
    built-in data sets, a clause; empty where it applies to stored data sets only (the config's ``check_rules`` then
    calls :func:`check_stored_only`)."""
    return knob(0, low=0, high=100_000_000, advanced=True, label="declared private size", unkeyed_default=True,
                help="On a stored data set: the size of its private part, declared public (0 = as declared with the "
                     "data set), a fifth of which is held out, N being the rest. On a built-in data set: "
                     f"{built_in or '0 (it applies to stored data sets only)'}. Never counted from the rows: {uses}")


def check_stored_only(config: BaseConfig, *names: str) -> None:
    """ConfigError naming the first of the fields ``names`` that is not 0 on ``config``, whose ``dataset`` is a
    built-in one: knobs of stored data sets only (``private_size``, PATE's ``data_seed``), which would change nothing
    there but the run's noise key."""
    for name in names:
        if value := getattr(config, name):
            raise ConfigError(name, f"({config.spec(name).label}) applies to a stored data set only: must be 0 for "
                                    f"built-in data set {config.dataset}; got {value}")


@dataclass(frozen=True)
class RunConfig(BaseConfig):
    """Fields every mechanism run has: the compute device, the random seed and the noise source."""

    device: str = knob("auto", choices=DEVICE_CHOICES,
                       help="Where tensors live: auto picks CUDA, then Apple MPS, else CPU.")
    seed: int = knob(0, low=0, high=2**31 - 1,
                     help="Seed of the run's random generators (initialisation, batches, and, unless secure noise "
                          "is on, the privacy noise: see secure noise).")
    replica: int = knob(0, low=0, high=1_000_000, advanced=True,
                        help="Replica index: runs identical but for it draw independent noise (a resumed sweep "
                             "reruns an unfinished run as its next replica, so no noise is ever reused).")
    secure_noise: bool = knob(False, label="secure noise (OS entropy)",
                              help="Draw the privacy noise from OS entropy that is never recorded. Off (exploration): "
                                   "the noise is derived from the seed, the configuration and a fingerprint of the "
                                   "private data, so runs on the same data replay exactly (a neighbouring data set "
                                   "gets independent noise) but anyone with the run's record and the data can "
                                   "regenerate the noise. Turn it on for anything you publish.")
