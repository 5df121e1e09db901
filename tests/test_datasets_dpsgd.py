"""DP-SGD on stored user data sets (issue 38, part 2): a CSV from ``data add`` to a finished ``run dpsgd --dataset``
whose claim is stated as for built-in data and charged to ``user/NAME``; its splits and noise key from public facts
and the stored fingerprint; refusals before anything is stored; ``data delete`` refused while the run exists."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from privengine.claims import headline_of
from privengine.datasets import load_dataset
from privengine.dpsgd import user_facts
from privengine.dpsgd.charge import HELD_OUT_DRAWN, data_source, planned_claim, public_rows
from privengine.dpsgd.config import DPSGDConfig, resolved_model
from privengine.dpsgd.data import with_declared_size
from privengine.dpsgd.user_data import data_key, load_user_task
from privengine.datasets.held_out import split_rows
from privengine.datasets.inputs import model_inputs
from privengine.errors import ConfigError
from privengine.ledger import ledger_of
from tests.conftest import run_cli
from tests.user_tables import add_images, add_table, random_rows

RUN = ("run", "dpsgd", "--dataset", "tiny", "--model", "linear", "--alphas", "0", "--n-seeds", "1",
       "--noise-mode", "sigma", "--noise-multiplier", "2", "--batch-size", "16", "--epochs", "1")


def _types(event: dict) -> object:
    """An event tree's types only (the numbers differ between runs)."""
    inner = [_types(v) for k, v in sorted(event.items()) if isinstance(v, dict)]
    inner += [[_types(e) for e in v] for k, v in sorted(event.items()) if isinstance(v, list)]
    return (event["type"], inner)



@pytest.mark.slow
def test_a_csv_goes_from_data_add_to_a_finished_dpsgd_run_charged_to_its_source(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    ran = run_cli(*RUN)
    assert ran.returncode == 0, ran.stderr
    (run,) = store.list_runs()
    assert run.state == "finished" and run.config["dataset"] == "tiny"
    summary = run.summary
    # N = 100 declared, a fifth (20) held out: q = 16 / 80, never a count of the rows
    assert summary["private_size"] == 80 and summary["sample_rate"] == 16 / 80 and summary["n_public"] == 20
    claim = headline_of(summary).to_dict()
    builtin = planned_claim(DPSGDConfig(dataset="digits", model="linear", alphas=(0.0,), n_seeds=1,
                                        noise_mode="sigma", noise_multiplier=2.0).to_dict()).to_dict()
    assert claim["relation"] == builtin["relation"] and claim["neighbouring"] == builtin["neighbouring"]
    assert [_types(e) for e in claim["events"]] == [_types(e) for e in builtin["events"]]
    (composed,) = claim["events"]
    assert composed["count"] == summary["steps_per_model"]
    assert composed["event"]["sampling_probability"] == summary["sample_rate"]
    assert composed["event"]["event"]["noise_multiplier"] == 2.0
    assert any("Evaluation data drawn from your rows" in c for c in claim["caveats"])
    assert store.data_source_of(run.id) == "user/tiny"
    ledger = run_cli("ledger", "user/tiny", "--json")
    assert ledger.returncode == 0 and run.id in ledger.stdout
    assert [share.run_id for share in ledger_of(store, "user/tiny").shares] == [run.id]

    refused = run_cli("data", "delete", "tiny")
    assert refused.returncode == 2 and run.id in refused.stderr and load_dataset("tiny")
    store.delete_run(run.id)
    assert run_cli("data", "delete", "tiny").returncode == 0


def test_without_a_declared_private_size_the_run_is_refused_naming_the_flag(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20")
    refused = run_cli(*RUN)
    assert refused.returncode == 2
    assert "`private_size` must be declared for data set 'tiny'" in refused.stderr
    assert "--private-size N" in refused.stderr
    assert store.list_runs() == []
    assert data_source({"dataset": "tiny", "data_seed": 0}) == "user/tiny"


def test_the_run_can_declare_the_private_size_itself(tmp_path):
    add_table(tmp_path, "--public-rows", "20")
    config = DPSGDConfig(dataset="tiny", alphas=(0.0,), private_size=90, batch_size=16).validate()
    assert public_rows(config.to_dict()) == ((20, "used as public data"), (18, HELD_OUT_DRAWN))


def test_a_data_set_without_public_rows_is_refused_where_the_run_needs_public_data(tmp_path):
    add_table(tmp_path, "--private-size", "120")
    with pytest.raises(ConfigError, match="`alphas` needs public rows, and data set 'tiny' declares none"):
        DPSGDConfig(dataset="tiny", alphas=(0.0, 4.0), batch_size=16).validate()
    with pytest.raises(ConfigError, match="`warm_start_epochs` needs public rows"):
        DPSGDConfig(dataset="tiny", alphas=(0.0,), warm_start_epochs=1.0, batch_size=16).validate()
    assert public_rows(DPSGDConfig(dataset="tiny", alphas=(0.0,), batch_size=16).validate().to_dict()) == (
        (24, HELD_OUT_DRAWN),)


def test_an_image_set_is_refused_for_a_linear_model_and_where_no_cnn_fits(store, tmp_path):
    add_images(tmp_path, "--public-rows", "4", "--private-size", "20")
    linear = run_cli("run", "dpsgd", "--dataset", "pics", "--model", "linear", "--batch-size", "4")
    assert linear.returncode == 2 and "`model` cannot train on data set 'pics': it holds images" in linear.stderr
    DPSGDConfig(dataset="pics", model="auto", alphas=(0.0,), batch_size=4).validate()  # the 8x8 CNN fits
    assert store.list_runs() == []
    manifest = load_dataset("pics").manifest
    twelve = {**manifest, "schema": {**manifest["schema"], "shape": [1, 12, 12]}}
    assert "12x12 images fit no CNN" in user_facts.model_problem(twelve, "cnn")


def test_a_table_trains_linear_by_default_and_is_refused_for_the_cnn(tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    assert resolved_model(DPSGDConfig(dataset="tiny", batch_size=16).validate()) == "linear"
    with pytest.raises(ConfigError, match="it is a table"):
        DPSGDConfig(dataset="tiny", model="cnn", batch_size=16).validate()


def test_splits_scale_from_public_bounds_and_the_noise_key_comes_from_the_stored_content(tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    config = DPSGDConfig(dataset="tiny", model="linear", alphas=(0.0,), batch_size=16).validate()
    task = load_user_task(config, torch.device("cpu"))
    data = load_dataset("tiny")
    assert task.n_public == 20 and task.n_val + task.n_test + task.n_private == 100
    torch.testing.assert_close(task.x_public, model_inputs(data, data.public()))
    frame = pd.read_csv(tmp_path / "tiny.csv")
    expected = np.clip(frame[["a", "b"]].to_numpy()[:20] / 3.0, -1, 1)  # declared *=-3:3 onto [-1, 1]
    np.testing.assert_allclose(task.x_public[:, :2].numpy(), expected, rtol=1e-6)
    assert task.x_public[:, 2:].sum(1).eq(1).all()  # one-hot colour
    key = data_key(data, 100)  # folded with the declared N = 80 unless the split happens to hold 80 rows
    assert task.private_fingerprint == (key if task.n_private == 80 else with_declared_size(key, 80))

    add_table(tmp_path, "--public-rows", "20", "--private-size", "100", name="other", seed=1)
    other = load_user_task(config.replace(dataset="other"), torch.device("cpu"))
    assert other.private_fingerprint != task.private_fingerprint
    assert json.loads(run_cli("data", "show", "other", "--json").stdout)["address"] != data.manifest["fingerprint"][:16]


@pytest.mark.slow
def test_an_exported_model_predicts_on_the_raw_csv_rows_with_the_runs_test_accuracy(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    ran = run_cli(*RUN, "--data-seed", "5", "--device", "cpu", "--json")
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    exported = run_cli("export", run["id"], "--format", "model", "--output", str(tmp_path / "model"))
    assert exported.returncode == 0, exported.stderr
    spec = json.loads((tmp_path / "model" / "model-1.json").read_text())
    assert spec["classes"] == ["neg", "pos"] and spec["preprocessing"]["table"]["numeric"][0] == {
        "column": "a", "bounds": [-3.0, 3.0], "source": "declared (bounds)"}
    # the test rows as the user's file holds them (private rows 20.., those the split sends to test), label included
    test_rows = split_rows(load_dataset("tiny").private(), data_seed=5)[1]
    raw = pd.read_csv(tmp_path / "tiny.csv").iloc[20 + test_rows]
    raw.to_csv(tmp_path / "test.csv", index=False)
    predicted = run_cli("predict", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "test.csv"), "--json")
    assert predicted.returncode == 0, predicted.stderr
    classes = [p["class"] for p in json.loads(predicted.stdout)["predictions"]]
    assert len(classes) == len(test_rows) > 0
    accuracy = sum(c == label for c, label in zip(classes, raw["label"])) / len(classes)
    assert accuracy == run["summary"]["best_test_acc"]
    raw.assign(colour="green").to_csv(tmp_path / "green.csv", index=False)
    refused = run_cli("predict", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "green.csv"))
    assert refused.returncode == 2 and "column 'colour', row 1: must be one of red, blue; got 'green'" in refused.stderr


def _training_rows(rows: dict[str, np.ndarray], data_seed: int) -> set[bytes]:
    train = split_rows(rows, data_seed)[2]
    return {rows["x"][i].tobytes() + rows["y"][i].tobytes() + rows["categories"][i].tobytes() for i in train}


def test_adding_or_removing_one_row_changes_no_other_rows_split():
    rows = random_rows(20_000, 0)
    validation, test, train = split_rows(rows, data_seed=3)
    assert sorted(np.concatenate([validation, test, train]).tolist()) == list(range(20_000))
    # each row held out with probability 0.2 (validation 0.1, test 0.1): within 5 standard deviations
    for count, p in ((len(validation) + len(test), 0.2), (len(validation), 0.1), (len(test), 0.1)):
        assert abs(count / 20_000 - p) < 5 * (p * (1 - p) / 20_000) ** 0.5
    new = random_rows(1, 1)
    for at in (0, 7_777, 20_000):
        added = {k: np.concatenate([v[:at], new[k], v[at:]]) for k, v in rows.items()}
        assert _training_rows(added, 3) ^ _training_rows(rows, 3) <= _training_rows(new, 3)
        removed = {k: np.delete(v, at if at < 20_000 else 0, axis=0) for k, v in rows.items()}
        assert len(_training_rows(rows, 3) - _training_rows(removed, 3)) <= 1
        assert _training_rows(removed, 3) <= _training_rows(rows, 3)
    assert _training_rows(rows, 3) != _training_rows(rows, 4)  # data_seed draws another split


@pytest.mark.slow
def test_the_form_offers_stored_data_sets_and_names_why_one_does_not_fit(tmp_path):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    add_images(tmp_path, "--public-rows", "4", "--private-size", "20")
    at = AppTest.from_file(str(ROOT / "pages" / "dpsgd.py"), default_timeout=60)
    # sigma given and one epoch: the ledger line under Launch then needs no sigma calibration and a short PLD per
    # data set (seconds each otherwise; that line is tested in test_ledger_page.py); the data sets offered are the same
    at.query_params["config"] = json.dumps({"model": "linear", "batch_size": 16, "noise_mode": "sigma", "epochs": 1.0})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    dataset = at.selectbox(key="form.dpsgd.dataset")
    assert "tiny (your data: tabular, 120 rows)" in dataset.options
    (pics,) = [label for label in dataset.options if label.startswith("pics")]
    assert "pics (your data: images, 24 rows) — not usable here: model cannot train on data set 'pics'" in pics
    assert "linear regression (embedded, low rank)" in dataset.options  # built-in choices keep their labels
    dataset.set_value("tiny").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
