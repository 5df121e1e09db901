"""The values a mechanism form starts from on a stored data set (the Data page's "Train on" links): computed from the
data set's public facts so that the seeded config validates where the defaults do not; a data set no values fit
gets the reason, naming the field, instead of a link."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import numpy as np
import pandas as pd
import pytest

from privengine import registry
from privengine.datasets import Declaration, add_dataset
from privengine.dpsgd.config import DPSGDConfig
from privengine.dp_bayes.config import DpBayesConfig
from privengine.errors import ConfigError
from privengine.pate.config import PateConfig
from privengine.split_label.config import SplitLabelConfig
from tests.conftest import app_page
from tests.test_datasets_images_cli import write_pictures

TAKES_USER_DATA = [m.config_cls for m in registry.all_mechanisms()
                   if any(spec.knob.user_datasets for spec in m.config_cls.specs())]


def _table(tmp_path, name: str, rows: int, **declared) -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, 2))
    frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "y": np.where(x[:, 0] > 0, "yes", "no")})
    frame.to_csv(tmp_path / f"{name}.csv", index=False)
    add_dataset(Declaration(name, label="y", classes=("no", "yes"), bounds={"*": (-3.0, 3.0)}, min_rows=4,
                            **declared), tmp_path / f"{name}.csv")


def test_the_mechanisms_that_take_user_data_are_the_four_covered_here():
    assert {DPSGDConfig, DpBayesConfig, PateConfig, SplitLabelConfig} <= set(TAKES_USER_DATA)


def test_a_small_table_the_defaults_do_not_fit_gets_values_that_validate(tmp_path):
    _table(tmp_path, "small", 60, public_rows=5, private_size=55)  # N = 55 - 11 = 44 training rows
    for config_cls in (DPSGDConfig, DpBayesConfig, PateConfig, SplitLabelConfig):
        with pytest.raises(ConfigError):  # the defaults alone: batch, model, teachers or queries too large
            config_cls.from_dict({"dataset": "small"})
    seeds = {config_cls: config_cls.user_dataset_seed("small") for config_cls in TAKES_USER_DATA}
    for config_cls, seed in seeds.items():
        config = config_cls.from_dict(seed)
        assert config.dataset == "small"
        assert all(value != config_cls.spec(field).default for field, value in seed.items() if field != "dataset")
    dpsgd = DPSGDConfig.from_dict(seeds[DPSGDConfig])
    assert dpsgd.batch_size == 44 // 10 and dpsgd.subspace_rank == 5  # floor(N / 10); k <= the 5 public rows
    pate = PateConfig.from_dict(seeds[PateConfig])
    assert (pate.teachers, pate.queries) == (4, 5)  # floor(44 / 10) teachers, one query per public row
    assert DpBayesConfig.from_dict(seeds[DpBayesConfig]).model == "logistic"
    assert SplitLabelConfig.from_dict(seeds[SplitLabelConfig]).batch_size == 44


def test_without_public_rows_dpsgd_starts_isotropic(tmp_path):
    _table(tmp_path, "hidden", 60, private_size=60)
    assert DPSGDConfig.user_dataset_seed("hidden")["alphas"] == (0.0,)


def test_a_data_set_no_values_fit_is_refused_naming_the_field(tmp_path):
    _table(tmp_path, "undeclared", 60, public_rows=5)
    for config_cls in TAKES_USER_DATA:
        with pytest.raises(ConfigError) as refused:
            config_cls.user_dataset_seed("undeclared")
        assert refused.value.field == "private_size", config_cls
    write_pictures(tmp_path / "pics", per_class=10)
    add_dataset(Declaration("pics", public_rows=4, private_size=16, min_rows=4), tmp_path / "pics")
    DPSGDConfig.from_dict(DPSGDConfig.user_dataset_seed("pics"))
    for config_cls in (DpBayesConfig, SplitLabelConfig):  # they need a table
        with pytest.raises(ConfigError, match="it holds images") as refused:
            config_cls.user_dataset_seed("pics")
        assert refused.value.field == "dataset"


def test_the_data_page_links_each_mechanism_with_its_seed_or_says_why_none_fits(tmp_path):
    write_pictures(tmp_path / "pics", per_class=10)
    add_dataset(Declaration("pics", public_rows=4, private_size=16, min_rows=4), tmp_path / "pics")
    at = app_page("pages/data.py")
    assert not at.exception
    links = {link.proto.label: parse_qs(link.proto.query_string) for link in at.get("page_link")
             if link.proto.label.startswith("Train on pics")}
    by_title = {m.title: m.config_cls for m in registry.all_mechanisms()}
    for title in (registry.get("dpsgd").title, registry.get("pate").title):
        config_cls = by_title[title]
        seeded = json.loads(links[f"Train on pics: {title}"]["config"][0])
        assert seeded == json.loads(json.dumps(config_cls.user_dataset_seed("pics")))
        config_cls.from_json(json.dumps(seeded))  # what the form does with the link: it is used, not refused
    captions = [c.value for c in at.caption]
    for config_cls in (DpBayesConfig, SplitLabelConfig):
        title = next(t for t, c in by_title.items() if c is config_cls)
        assert f"Train on pics: {title}" not in links
        assert any(c.startswith(f"{title} cannot train on pics: **Dataset**") and "it holds images" in c
                   for c in captions), captions
