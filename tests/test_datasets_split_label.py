"""Split learning on stored user data sets (issue 38, part 2): a CSV with a binary label trains the two parties (the
passive one on the scaled columns, the active one on the label), the run reads ``user/NAME`` and states no (ε, δ);
its kept model predicts on the raw rows; data sets that do not fit are refused before anything is stored."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import roc_auc_score

from privengine.datasets import load_dataset
from privengine.datasets.held_out import split_rows
from privengine.datasets.inputs import model_inputs
from privengine.errors import ConfigError
from privengine.ledger import ledger_of
from privengine.split_label.charge import data_source
from privengine.split_label.config import SplitLabelConfig
from privengine.split_label.data import load, short_batch_note
from privengine.split_label.run import run
from tests.conftest import run_cli
from tests.memory_reporter import MemoryReporter
from tests.user_tables import add_images, add_table

RUN = ("run", "split_label", "--dataset", "tiny", "--batch-size", "32", "--epochs", "2", "--seed", "3")


@pytest.mark.slow
def test_a_csv_trains_both_parties_and_the_kept_model_scores_the_held_out_rows(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    ran = run_cli(*RUN, "--json")
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    summary = run["summary"]
    held = np.concatenate(split_rows(load_dataset("tiny").private(), 3)[:2])
    assert summary["dataset"] == "tiny" and summary["n_test"] == len(held) and summary["n_train"] == 100 - len(held)
    assert "Not differential privacy" in summary["label_leakage_bound"]["caveats"][0]
    assert store.data_source_of(run["id"]) == "user/tiny"
    assert [use.run.id for use in ledger_of(store, "user/tiny").uncovered] == [run["id"]]

    exported = run_cli("export", run["id"], "--format", "model", "--output", str(tmp_path / "model"))
    assert exported.returncode == 0, exported.stderr
    raw = pd.read_csv(tmp_path / "tiny.csv").iloc[20 + held]
    raw.to_csv(tmp_path / "held.csv", index=False)
    predicted = run_cli("predict", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "held.csv"), "--json")
    assert predicted.returncode == 0, predicted.stderr
    rows = json.loads(predicted.stdout)["predictions"]
    p_pos = [p["probability"] if p["class"] == "pos" else 1 - p["probability"] for p in rows]
    assert roc_auc_score(raw["label"] == "pos", p_pos) == pytest.approx(summary["test_auc"])


def test_the_passive_party_holds_the_scaled_columns_and_the_active_party_the_label(tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    config = SplitLabelConfig(dataset="tiny", batch_size=16, seed=5).validate()
    data = load(config)
    dataset = load_dataset("tiny")
    validation, test, train = split_rows(dataset.private(), 5)
    x = model_inputs(dataset, dataset.private())
    torch.testing.assert_close(data.x_train, x[train])
    torch.testing.assert_close(data.x_test, x[np.concatenate([validation, test])])
    assert data.y_train.tolist() == dataset.private()["y"][train].astype(float).tolist()
    assert data.classes == ("neg", "pos") and data.preprocessing["table"]["numeric"][0]["bounds"] == [-3.0, 3.0]
    assert data_source(config.to_dict()) == "user/tiny"


def test_fewer_actual_training_rows_than_a_batch_are_logged(tmp_path):
    """The config checks batch_size against the declared N only (here 800 of a declared 1000 for about 100 real
    rows), so a run logs that its epochs are one short batch of the actual rows."""
    add_table(tmp_path, "--public-rows", "20", "--private-size", "1000")
    data = load(SplitLabelConfig(dataset="tiny", batch_size=500, seed=5).validate())
    rows = len(data.y_train)
    assert rows < 100
    assert short_batch_note(data, 500) == (f"tiny: only {rows} actual training rows, fewer than batch_size 500 "
                                           f"(checked against the declared size): each epoch trains one short batch "
                                           f"of all {rows}")
    assert short_batch_note(data, rows) is None
    reporter = MemoryReporter()
    run(SplitLabelConfig(dataset="tiny", batch_size=500, seed=5, epochs=1, keep_model=False).validate(), reporter)
    assert short_batch_note(data, 500) in reporter.logs


def test_what_does_not_fit_is_refused_naming_the_field(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100", name="three", labels=("lo", "mid", "hi"))
    add_table(tmp_path, "--public-rows", "20", name="unsized")
    refusals = [
        (("--dataset", "three"), "`dataset` 'three' does not fit split learning: its label has 3 classes"),
        (("--dataset", "unsized"), "`private_size` must be declared for data set 'unsized'"),
        (("--dataset", "tiny", "--batch-size", "81"), "`batch_size` must be at most the 80 training rows declared"),
        (("--private-size", "100"), "`private_size` (declared private size) applies to a stored data set only: must "
                                    "be 0 for built-in data set synthetic; got 100"),
    ]
    for args, message in refusals:
        refused = run_cli("run", "split_label", *args, "--epochs", "1")
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
    assert store.list_runs() == []
    assert "its label has 3 classes" in SplitLabelConfig.user_dataset_problem("three", {})
    assert SplitLabelConfig.user_dataset_problem("tiny", {"batch_size": 16}) is None

    add_images(tmp_path, "--private-size", "24")
    with pytest.raises(ConfigError, match="`dataset` 'pics' does not fit split learning: it holds images"):
        SplitLabelConfig(dataset="pics", batch_size=4).validate()
