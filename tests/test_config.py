"""Config metadata, validation and JSON round trip, for the toy config and every registered mechanism."""

from __future__ import annotations

import dataclasses
import json
import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privengine import registry
from privengine.config import FieldSpec, declared_private_size_knob
from privengine.errors import ConfigError
from privengine.randomness import config_digest
from tests.toy_mechanism import ToyConfig


def all_config_classes():
    return [m.config_cls for m in registry.all_mechanisms()]


@pytest.mark.parametrize("cls", all_config_classes(), ids=lambda c: c.__name__)
def test_defaults_validate_and_round_trip(cls):
    config = cls().validate()
    again = cls.from_json(config.to_json())
    assert again == config
    assert json.loads(config.to_json()) == config.to_dict()


@pytest.mark.parametrize("cls", all_config_classes(), ids=lambda c: c.__name__)
def test_every_field_has_help_and_a_valid_default(cls):
    for spec in cls.specs():
        assert spec.knob.help, f"{cls.__name__}.{spec.name} has no help text"
        spec.check(spec.default)


@pytest.mark.parametrize("cls", [c for c in all_config_classes() if "private_size" in {s.name for s in c.specs()}],
                         ids=lambda c: c.__name__)
def test_the_declared_private_size_is_one_knob_that_keys_no_noise_at_its_default(cls):
    """Every mechanism's ``private_size`` comes from :func:`declared_private_size_knob` (label, range, default: only
    the help's purpose differs), and at its default it leaves the noise key of a run as it was before the knob: the
    digest of a default config is that of the same config without the field."""
    reference = declared_private_size_knob("").metadata["knob"]
    spec = cls.spec("private_size")
    assert dataclasses.replace(spec.knob, help="") == dataclasses.replace(reference, help="")
    assert spec.default == 0 and spec.kind == "int"
    config = cls()
    without = SimpleNamespace(specs=lambda: [s for s in cls.specs() if s.name != "private_size"],
                              to_dict=lambda: {k: v for k, v in config.to_dict().items() if k != "private_size"})
    assert config_digest(config) == config_digest(without)
    assert config_digest(dataclasses.replace(config, private_size=500)) != config_digest(config)  # set: keyed


def test_error_names_field_and_range():
    with pytest.raises(ConfigError) as err:
        ToyConfig(delay=7.0).validate()
    assert err.value.field == "delay"
    assert str(err.value) == "`delay` must be in [0, 5]; got 7.0"


def test_open_bound_is_strict():
    with pytest.raises(ConfigError, match=r"`rate` must be in \(0, 1\]; got 0.0"):
        ToyConfig(rate=0.0).validate()
    assert ToyConfig(rate=1.0).validate().rate == 1.0


def test_types_are_not_coerced():
    with pytest.raises(ConfigError, match="`steps` must be an integer; got 2.5"):
        ToyConfig.from_dict({"steps": 2.5})
    with pytest.raises(ConfigError, match="`steps` must be an integer; got True"):
        ToyConfig.from_dict({"steps": True})
    with pytest.raises(ConfigError, match="`delay` must be a finite number"):
        ToyConfig.from_dict({"delay": math.nan})
    with pytest.raises(ConfigError, match="`verbose` must be true or false"):
        ToyConfig.from_dict({"verbose": "yes"})


def test_choices_and_unknown_keys():
    with pytest.raises(ConfigError, match="`mode` must be one of a, b; got 'c'"):
        ToyConfig.from_dict({"mode": "c"})
    with pytest.raises(ConfigError) as err:
        ToyConfig.from_dict({"stepz": 3})
    assert err.value.field == "stepz" and "known fields" in str(err.value)


def test_list_fields():
    assert ToyConfig.from_dict({"scales": [0, 1.5]}).scales == (0.0, 1.5)
    with pytest.raises(ConfigError, match=r"`scales` must be in \[0, 10\] \(item 2\); got 11"):
        ToyConfig.from_dict({"scales": [1, 11]})
    with pytest.raises(ConfigError, match="at most 5 items"):
        ToyConfig.from_dict({"scales": [1] * 6})
    with pytest.raises(ConfigError, match="at least 1"):
        ToyConfig.from_dict({"scales": []})


def test_cross_field_rule():
    with pytest.raises(ConfigError, match="`fail_at` must be below steps"):
        ToyConfig(steps=3, fail_at=3).validate()


def test_parse_text_values():
    spec = ToyConfig.spec("scales")
    assert spec.parse("0.5, 2") == (0.5, 2.0)
    assert ToyConfig.spec("verbose").parse("yes") is True
    assert ToyConfig.spec("steps").parse(" 12 ") == 12
    with pytest.raises(ConfigError, match="`steps` must be an integer; got 'ten'"):
        ToyConfig.spec("steps").parse("ten")


def test_invalid_json_is_a_config_error():
    with pytest.raises(ConfigError, match="must be valid JSON"):
        ToyConfig.from_json("{not json")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        ToyConfig.from_json("[1, 2]")


# ---- property-based: out-of-range values always raise ConfigError, junk never crashes ----------

def _numeric_specs():
    out = []
    for cls in all_config_classes():
        for spec in cls.specs():
            if spec.item_kind in ("int", "float") and (spec.knob.low is not None or spec.knob.high is not None):
                out.append((cls, spec))
    return out


def _outside(spec: FieldSpec) -> st.SearchStrategy:
    k = spec.knob
    options = []
    integer = spec.item_kind == "int"
    if k.low is not None:
        top = math.ceil(k.low) if integer else k.low
        options.append(st.integers(max_value=int(top) - (0 if k.low_open and top == k.low else 1)) if integer
                       else st.floats(max_value=k.low, exclude_max=not k.low_open, allow_nan=False, allow_infinity=False))
    if k.high is not None:
        bottom = math.floor(k.high) if integer else k.high
        options.append(st.integers(min_value=int(bottom) + (0 if k.high_open and bottom == k.high else 1)) if integer
                       else st.floats(min_value=k.high, exclude_min=not k.high_open, allow_nan=False, allow_infinity=False))
    return st.one_of(*options)


@pytest.mark.parametrize("cls,spec", _numeric_specs(), ids=lambda x: getattr(x, "name", getattr(x, "__name__", "")))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_out_of_range_values_raise_config_error(cls, spec, data):
    bad = data.draw(_outside(spec))
    value = [bad] if spec.is_list else bad
    with pytest.raises(ConfigError) as err:
        cls.from_dict({spec.name: value})
    assert err.value.field == spec.name


_junk = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
                  st.lists(st.one_of(st.integers(), st.floats(), st.text(max_size=3)), max_size=4),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@pytest.mark.parametrize("cls", all_config_classes(), ids=lambda c: c.__name__)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_random_input_is_accepted_or_config_error(cls, data):
    names = [s.name for s in cls.specs()] + ["not_a_field"]
    payload = data.draw(st.dictionaries(st.sampled_from(names), _junk, max_size=4))
    try:
        config = cls.from_dict(payload)
    except ConfigError:
        return
    config.validate()  # an accepted config is valid


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=12))
def test_parse_never_crashes(text):
    for spec in ToyConfig.specs():
        try:
            spec.parse(text)
        except ConfigError:
            pass
