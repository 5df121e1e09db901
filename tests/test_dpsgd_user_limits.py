"""DP-SGD on a small user table (issue 38's loose ends): knobs bounded by the data set's public facts (the subspace
rank by its public rows and the model's parameter count d, the batch by the declared N) are refused by the config,
before anything runs, in the CLI and the form; the form hides the knobs a user data set does not use."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from privengine.datasets import manifest
from privengine.dpsgd import user_facts
from privengine.dpsgd.config import DPSGDConfig
from privengine.errors import ConfigError
from tests.conftest import ROOT, run_cli


def _add(tmp_path, name: str, *, public_rows: int, categorical: bool = False) -> None:
    """A table of 200 rows, 3 numeric features (and a 3-category column), a binary label, 195 declared private."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "label": np.where(x[:, 0] > 0, "yes", "no")})
    extra = ()
    if categorical:
        frame["town"] = rng.choice(["north", "south", "east"], 200)
        extra = ("--categorical", "town=north,south,east")
    frame.to_csv(tmp_path / f"{name}.csv", index=False)
    added = run_cli("data", "add", name, str(tmp_path / f"{name}.csv"), "--label", "label", "--classes", "no,yes",
                    "--bounds", "*=-3:3", "--public-rows", str(public_rows), "--private-size", str(200 - public_rows),
                    *extra)
    assert added.returncode == 0, added.stderr


def test_the_parameter_count_comes_from_the_schema_and_the_category_lists(tmp_path):
    _add(tmp_path, "mixed", public_rows=20, categorical=True)
    document = manifest("mixed")
    features, classes = 3 + 3, 2  # three numeric columns, three declared categories one-hot
    assert user_facts.input_shape(document) == (features,)
    assert user_facts.parameter_count(document, "linear") == (features + 1) * classes


def test_the_subspace_rank_is_bounded_by_the_public_rows_and_by_d(tmp_path):
    _add(tmp_path, "few", public_rows=5)
    with pytest.raises(ConfigError) as refused:
        DPSGDConfig(dataset="few").validate()  # the defaults: alphas 0, 4 and subspace rank 8
    assert refused.value.field == "subspace_rank"
    assert "must be at most 5 for data set 'few' (its 5 public rows" in refused.value.reason
    DPSGDConfig(dataset="few", subspace_rank=5).validate()
    DPSGDConfig(dataset="few", alphas=(0.0,), subspace_rank=50).validate()  # no setting uses the subspace

    _add(tmp_path, "many", public_rows=20)  # d = (3 + 1) * 2 = 8 parameters of the linear model bind
    with pytest.raises(ConfigError) as refused:
        DPSGDConfig(dataset="many", subspace_rank=9).validate()
    assert "must be at most 8 for data set 'many' (the linear model on its 3 input features has d = 8" in str(
        refused.value)
    DPSGDConfig(dataset="many", subspace_rank=8).validate()
    DPSGDConfig(dataset="many", model="mlp", subspace_rank=20).validate()  # the MLP's d is far above 20 public rows


def test_a_batch_above_the_declared_n_is_refused_saying_where_n_comes_from(tmp_path):
    _add(tmp_path, "few", public_rows=5)
    with pytest.raises(ConfigError) as refused:
        DPSGDConfig(dataset="few", subspace_rank=5, batch_size=156).validate()
    # N = 195 declared less round(0.2 * 195) = 39 held out
    assert refused.value.field == "batch_size" and "N = 156: the private part's size 195" in refused.value.reason


@pytest.mark.slow
def test_the_cli_refuses_the_defaults_on_a_small_table_before_anything_is_stored(store, tmp_path):
    _add(tmp_path, "few", public_rows=5)
    refused = run_cli("run", "dpsgd", "--dataset", "few")
    assert refused.returncode == 2
    assert "`subspace_rank` must be at most 5 for data set 'few'" in refused.stderr
    assert store.list_runs() == []


@pytest.mark.slow
def test_the_form_shows_the_bound_launches_nothing_and_hides_the_built_in_only_knobs(store, tmp_path):
    from streamlit.testing.v1 import AppTest

    _add(tmp_path, "few", public_rows=5)
    at = AppTest.from_file(str(ROOT / "pages" / "dpsgd.py"), default_timeout=60).run()
    keys = {w.key for w in [*at.number_input, *at.text_input, *at.selectbox]}
    assert "form.dpsgd.public_fraction" in keys and "form.dpsgd.train_limit" in keys  # linreg, the default
    at.selectbox(key="form.dpsgd.dataset").set_value("few").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any(e.value.startswith("**Subspace rank k** must be at most 5 for data set 'few'") for e in at.error), [
        e.value for e in at.error]
    assert at.button(key="launch.dpsgd").disabled
    keys = {w.key for w in [*at.number_input, *at.text_input, *at.selectbox]}
    assert "form.dpsgd.subspace_rank" in keys
    assert "form.dpsgd.public_fraction" not in keys and "form.dpsgd.train_limit" not in keys
    at.number_input(key="form.dpsgd.subspace_rank").set_value(5).run()
    assert not at.error and not at.button(key="launch.dpsgd").disabled, [e.value for e in at.error]
    assert store.list_runs() == []
