"""Inputs the dashboard cannot use are refused in words, never dropped or replaced without a word: a number that
overflows (1e309 typed in a box) and links naming no stored attack or audit (issue 40, item 10)."""

from __future__ import annotations

import math

import pytest
from streamlit.testing.v1 import AppTest

from privengine.errors import ConfigError
from privengine.pate.config import PateConfig
from tests.conftest import app_page


def _pate(**query) -> AppTest:
    return app_page("pages/pate.py", **query)


@pytest.mark.parametrize("typed", ["1e309", "-1e309", "inf", "nan"])
def test_a_number_that_overflows_is_refused_with_the_range_not_clamped(typed):
    spec = PateConfig.spec("threshold")
    with pytest.raises(ConfigError) as err:
        spec.parse(typed)
    assert err.value.field == "threshold"
    assert str(err.value).startswith("`threshold` must be a finite number in [0, 10000]; got ")
    with pytest.raises(ConfigError, match=r"`threshold` must be a finite number in \[0, 10000\]; got inf"):
        PateConfig.from_json('{"threshold": 1e309}')  # Python's JSON reads 1e309 as inf


def test_every_numeric_knob_refuses_infinity_naming_its_range():
    for spec in PateConfig.specs():
        if spec.item_kind != "float":
            continue
        with pytest.raises(ConfigError) as err:
            spec.check((math.inf,) if spec.is_list else math.inf)
        assert err.value.field == spec.name
        assert spec.range_text() == "any value" or spec.range_text() in str(err.value)


def test_the_form_refuses_a_number_box_the_browser_could_not_read_instead_of_putting_the_default_back():
    at = _pate()
    assert not at.exception
    # A browser reads "1e309" in a number box as no number: the box sends None; and Streamlit replaces a value sent
    # that is not finite with the widget's default. Both used to put the default (80) back without a word.
    refused = ["**Threshold** must be a number in [0, 10000]: the box is empty or holds no number this browser can "
               "read (too large, e.g. 1e309)"]
    for sent in (None, math.inf, math.nan):
        at.number_input(key="form.pate.threshold").set_value(sent).run()
        assert [e.value for e in at.error] == refused, sent
        assert at.button(key="launch.pate").disabled
    at.number_input(key="form.pate.threshold").set_value(150.0).run()
    assert not at.error and not at.button(key="launch.pate").disabled


@pytest.mark.parametrize("param, what", [("attack", "membership attack"), ("audit", "audit")])
def test_a_link_to_an_unknown_attack_or_audit_says_so_under_the_title(store, param, what):
    at = _pate(**{param: "nosuchid"})
    assert not at.exception
    assert [e.value for e in at.error] == [f"The link asks for {what} `nosuchid`, but no {what} with that id is in "
                                           "the store (deleted, or a mistyped link): nothing is shown for it."]


def test_a_link_to_a_stored_run_of_another_kind_says_what_it_is(store):
    other = store.create_run("dpsgd-membership", {"run": ""})
    at = _pate(attack=other)
    assert [e.value for e in at.error] == [f"The link asks for membership attack `{other}`, but run {other} is a "
                                           "dpsgd-membership run, not a membership attack of pate runs: nothing is "
                                           "shown for it."]


def test_a_link_to_a_stored_audit_of_the_page_shows_no_error(store):
    audit = store.create_run("pate-gnmax", {})
    at = _pate(audit=audit)
    assert not at.exception and not at.error
