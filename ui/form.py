"""A config form generated from a config class's field metadata, with inline validation.

Widgets are never given min/max bounds: Streamlit would silently clamp. Instead
each value is checked with the same code as the engine and the CLI, and the
error ("`epsilon` must be in [0.01, 100]; got 500") is shown under the field.
"""

from __future__ import annotations

import re
from typing import Any

import streamlit as st

from privengine import data_catalogue
from privengine.config import BaseConfig, FieldSpec
from privengine.datasets import manifest, names
from privengine.errors import ConfigError

from . import services

FIXED_FIELDS = ("device", "seed", "secure_noise")  # rendered last, outside the mechanism's own knobs


def config_form(config_cls: type[BaseConfig], *, key: str, initial: dict[str, Any] | None = None
                ) -> tuple[BaseConfig | None, list[ConfigError]]:
    """Draw the form; return (validated config or None, the errors found).

    ``initial`` seeds the widgets the first time they are drawn (e.g. a stored run's config).
    """
    values: dict[str, Any] = {}
    errors: list[ConfigError] = []
    specs = config_cls.specs()
    start = {s.name: s.default for s in specs} | (initial or {})
    main = [s for s in specs if not s.knob.advanced and s.name not in FIXED_FIELDS]
    advanced = [s for s in specs if s.knob.advanced and s.name not in FIXED_FIELDS]
    fixed = [s for s in specs if s.name in FIXED_FIELDS]

    hidden: set[str] = set()

    def draw(group: list[FieldSpec]) -> None:
        for spec in group:
            parent = spec.knob.shown_when[0] if spec.knob.shown_when else None
            if parent in hidden or not _shown(spec, values, start):  # hidden with its parent, too
                hidden.add(spec.name)
                values[spec.name] = start[spec.name]
                continue
            try:
                user = _user_datasets(config_cls, key, values, start) if spec.knob.user_datasets else {}
                values[spec.name] = _widget(spec, start[spec.name], key=f"{key}.{spec.name}",
                                            data_root=values.get("data_root", start.get("data_root")) or None,
                                            download=bool(st.session_state.get(f"{key}.download",
                                                                               start.get("download", False))),
                                            user_datasets=user)
            except ConfigError as exc:
                errors.append(exc)
                st.error(error_text(exc, config_cls), icon=":material/error:")

    draw(main)
    if advanced:
        with st.expander("Advanced"):
            draw(advanced)
    draw(fixed)
    if errors:
        return None, errors
    try:
        return config_cls.from_dict(values), []
    except ConfigError as exc:  # a rule across several fields
        st.error(error_text(exc, config_cls), icon=":material/error:")
        return None, [exc]


def field_label(spec: FieldSpec) -> str:
    """A field's name as its widget shows it: the knob's label, capitalised."""
    return spec.label[:1].upper() + spec.label[1:]


def error_text(exc: ConfigError, config_cls: type[BaseConfig], fields: dict[str, str] | None = None) -> str:
    """``exc``'s message with every field it names in backticks written as the form labels it
    ("`target_epsilon` must be ..." -> "**Target epsilon** must be ..."); ``fields``: the labels of a page's own
    fields outside the config (name -> label).

    >>> from privengine.config import RunConfig
    >>> error_text(ConfigError("secure_noise", "must be true or false; got 2"), RunConfig)
    '**Secure noise (OS entropy)** must be true or false; got 2'
    >>> error_text(ConfigError("seeds", "must be an integer >= 1; got 0"), RunConfig, {"seeds": "Seeds per point"})
    '**Seeds per point** must be an integer >= 1; got 0'
    """
    labels = {spec.name: field_label(spec) for spec in config_cls.specs()} | (fields or {})
    return re.sub(r"`(\w+)`", lambda m: f"**{labels[m[1]]}**" if m[1] in labels else m[0], str(exc))


def _user_datasets(config_cls: type[BaseConfig], key: str, values: dict[str, Any], start: dict[str, Any]
                   ) -> dict[str, str]:
    """Each stored user data set's name -> its label in the data set choice: "your data", its kind and rows, and,
    where the form's current values (drawn so far, else the widgets' last checked values, else the initial ones)
    cannot use it, why (:meth:`~privengine.config.BaseConfig.user_dataset_problem`)."""
    current = dict(start)
    for spec in config_cls.specs():
        try:
            current[spec.name] = spec.check(st.session_state[f"{key}.{spec.name}"])
        except (KeyError, ConfigError):
            pass
    current |= values
    labels = {}
    for name in names():
        document = manifest(name)
        problem = config_cls.user_dataset_problem(name, current)
        labels[name] = (f"{name} (your data: {document['kind']}, {document['rows']} rows)"
                        + (f" — not usable here: {problem.replace('`', '')}" if problem else ""))
    return labels


def _shown(spec: FieldSpec, values: dict[str, Any], start: dict[str, Any]) -> bool:
    if spec.knob.shown_when is None:
        return True
    other, allowed = spec.knob.shown_when
    return values.get(other, start.get(other)) in allowed


def _help(spec: FieldSpec) -> str:
    allowed = "" if spec.knob.choices is not None else f" Allowed: {spec.range_text()}."
    scale = " Best explored on a log scale." if spec.knob.log else ""
    return f"{spec.knob.help}{allowed}{scale}"


def _widget(spec: FieldSpec, initial: Any, *, key: str, data_root: str | None, download: bool = False,
            user_datasets: dict[str, str] | None = None) -> Any:
    """One widget for one field; returns the checked value or raises ConfigError (``data_root``: the config's,
    where datasets offered in a choice are looked for; a dataset missing there is an error unless ``download``,
    the form's "let torchvision download" switch, is on; ``user_datasets``: stored user data sets offered after the
    choices, name -> label)."""
    user_datasets = user_datasets or {}
    label, help_text = field_label(spec), _help(spec)
    if spec.name == "device":
        options = ["auto"] + [d.id for d in services.devices()]
        names = {d.id: d.name for d in services.devices()} | {"auto": f"auto ({services.devices()[0].name})"}
        if initial not in options:
            options.append(initial)
        choice = st.selectbox(label, options, index=options.index(initial), key=key, help=help_text,
                              format_func=lambda o: names.get(o, f"{o} (not available here)"))
        if choice not in names:
            raise ConfigError("device", f"must be one of {', '.join(names)} on this machine; got {choice!r}")
        return choice
    if spec.is_list:
        text = st.text_input(label, value=", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in initial),
                             key=key, help=help_text + " Comma-separated.")
        return spec.parse(text)
    if spec.kind == "bool":
        return spec.check(st.toggle(label, value=bool(initial), key=key, help=help_text))
    if spec.knob.choices is not None:
        choices = list(spec.knob.choices) + list(user_datasets)
        if initial not in choices:  # e.g. a run stored by another version: shown, then refused by the check below
            choices.append(initial)
        choice = st.selectbox(label, choices, index=choices.index(initial), key=key, help=help_text,
                              format_func=lambda c: user_datasets.get(c) or spec.knob.choice_label(c)
                              + _absence(c, data_root))
        if _absence(choice, data_root) and not download:
            raise ConfigError(spec.name, f"{spec.knob.choice_label(choice)} is not in the data root "
                                         f"{data_root or data_catalogue.data_root()}: put torchvision's files "
                                         "there, or set the data root (field, or PRIVENGINE_DATA)")
        return spec.check(choice)
    if spec.kind == "str":
        return spec.check(st.text_input(label, value=initial, key=key, help=help_text))
    # The widget's default is None and its first value is seeded through the session state: a box the browser
    # cannot read as a number (1e309 overflows, so it reads as empty) then arrives here as None, refused below with
    # the range. With the initial value as the widget's default, Streamlit put that default back without a word.
    if key not in st.session_state:
        st.session_state[key] = int(initial) if spec.kind == "int" else float(initial)
    if spec.kind == "int":
        value = st.number_input(label, value=None, step=1, key=key, help=help_text)
    else:
        value = st.number_input(label, value=None, step=_float_step(spec, float(initial)),
                                format="%g", key=key, help=help_text)
    if value is None:
        raise ConfigError(spec.name, f"must be a number{spec.range_suffix()}: the box is empty or holds no number "
                                     "this browser can read (too large, e.g. 1e309)")
    return spec.check(value)


def _absence(choice: Any, data_root: str | None) -> str:
    """`` (not found)`` for a torchvision dataset whose files are not under the data root (the warning under the
    field names the folder), else ''."""
    if choice not in data_catalogue.TORCHVISION_DATASETS or data_catalogue.dataset_present(choice, data_root):
        return ""
    return " (not found)"


def _float_step(spec: FieldSpec, value: float) -> float:
    """A step of about a tenth of the value (log knobs) or of the range."""
    k = spec.knob
    if k.log or k.low is None or k.high is None:
        return max(abs(value) / 10, 1e-9)
    return (k.high - k.low) / 100
