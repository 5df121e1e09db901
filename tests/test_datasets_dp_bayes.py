"""DP-Bayes on stored user data sets (issue 38, part 2): a CSV with a binary label from ``data add`` to a finished
``run dp_bayes --dataset`` of the logistic model, charged to ``user/NAME``, whose claims say where the records and N
come from; its kept posterior predicts on the raw rows; every data set or setting that does not fit is refused
before anything is stored, naming the field."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from privengine.claims import headline_of
from privengine.datasets import load_dataset
from privengine.datasets.held_out import split_rows
from privengine.datasets.inputs import model_inputs
from privengine.dp_bayes import dpvi
from privengine.dp_bayes.charge import data_source, other_sources, planned_claim, public_rows
from privengine.dp_bayes.comparison import run_release
from privengine.dp_bayes.config import DpBayesConfig
from privengine.dp_bayes.privacy import EVALUATION_NOTE
from privengine.dp_bayes.user_data import records_of
from privengine.errors import ConfigError
from privengine.figures import dp_bayes as figures
from privengine.ledger import ledger_of
from tests.conftest import run_cli
from tests.memory_reporter import MemoryReporter
from tests.user_tables import add_images, add_table

TINY = ("--vi-steps", "20", "--warmup-steps", "10", "--burn-in", "10", "--steps", "20")
RUN = ("run", "dp_bayes", "--dataset", "tiny", "--model", "logistic", *TINY)
PART = 100  # the declared private part of the fixture's data set
N = PART - round(0.2 * PART)  # its training rows' declared size: a fifth held out



@pytest.mark.slow
def test_a_csv_trains_the_exponential_mechanism_and_its_posterior_predicts_the_held_out_rows(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", str(PART))
    ran = run_cli(*RUN, "--data-seed", "3", "--json")
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    summary = run["summary"]
    claim = headline_of(summary).to_dict()
    assert claim["relation"] == "replace_one" and claim["epsilon"] == 1.0
    assert f"N = {N}: the private part's size {PART}" in claim["caveats"][0]
    assert "data set 'tiny'" in claim["caveats"][0] and "'pos'" in claim["caveats"][0]
    assert summary["features"] == {"beta1": "a", "beta2": "b", "beta3": "colour=red", "beta4": "colour=blue"}
    assert "coverage_90" not in summary  # no true parameters to cover
    assert store.data_source_of(run["id"]) == "user/tiny"
    ledger = ledger_of(store, "user/tiny")
    assert [share.run_id for share in ledger.shares] == [run["id"]]
    assert any(f"{round(0.2 * PART)} rows of this source held out" in use.why for use in ledger.uncovered)

    exported = run_cli("export", run["id"], "--format", "model", "--output", str(tmp_path / "model"))
    assert exported.returncode == 0, exported.stderr
    held = np.concatenate(split_rows(load_dataset("tiny").private(), data_seed=3)[:2])
    raw = pd.read_csv(tmp_path / "tiny.csv").iloc[20 + held]
    raw.to_csv(tmp_path / "held.csv", index=False)
    predicted = run_cli("predict", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "held.csv"), "--json")
    assert predicted.returncode == 0, predicted.stderr
    classes = [p["class"] for p in json.loads(predicted.stdout)["predictions"]]
    assert len(classes) == summary["held_out_rows"] == len(held) > 0
    # the kept model runs in float32 and the run in float64: a row on the 1/2 boundary may fall either way
    accuracy = np.mean([c == label for c, label in zip(classes, raw["label"])])
    assert abs(accuracy - summary["held_out_accuracy"]) <= 1 / len(held)


@pytest.mark.slow
def test_dpvi_releases_on_the_training_rows_and_charts_against_the_reference_mean(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", str(PART))
    ran = run_cli("run", "dp_bayes", "--dataset", "tiny", "--model", "logistic", "--method", "dpvi",
                  "--dpvi-steps", "20", "--json")  # coverage_repeats at its default: it does not apply here
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    claim = headline_of(run["summary"]).to_dict()
    assert claim["relation"] == "replace_one" and claim["delta"] <= 1e-5
    assert any(f"N = {N} (declared with the data set)" in c for c in claim["caveats"])
    intervals = store.artifacts(run["id"])["intervals"]
    assert intervals["zero"] == "non-private posterior mean" and len(intervals["names"]) == 5
    assert run["summary"]["held_out_rows"] > 0 and store.data_source_of(run["id"]) == "user/tiny"


def test_records_are_the_private_rows_scaled_by_public_bounds_split_row_by_row(tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", str(PART))
    config = DpBayesConfig(dataset="tiny", model="logistic", data_seed=4).validate()
    records = records_of(config)
    data = load_dataset("tiny")
    validation, test, train = split_rows(data.private(), 4)
    x = model_inputs(data, data.private()).double()
    torch.testing.assert_close(records.train.x, x[train])
    torch.testing.assert_close(records.held_out.x, x[np.concatenate([validation, test])])
    assert set(records.train.y.tolist()) <= {0.0, 1.0} and records.train.x.abs().max() <= 1
    private_csv = pd.read_csv(tmp_path / "tiny.csv").iloc[20:]  # the first 20 rows are the public ones
    a = np.clip(private_csv["a"].to_numpy()[train] / 3, -1, 1)  # bounds -3:3 onto [-1, 1]
    np.testing.assert_allclose(records.train.x[:, 0].numpy(), a, rtol=1e-6, atol=1e-6)
    is_pos = (private_csv["label"].to_numpy()[train] == "pos").astype(float)
    np.testing.assert_array_equal(records.train.y.numpy(), is_pos)


def test_dpvi_divides_by_the_declared_n_not_the_rows_and_makes_no_evaluation_release(tmp_path, monkeypatch):
    """About 100 real private rows under a declared private part of 1000: dpvi.fit gets N = 1000 - 200, and one
    data set (the training rows) whatever coverage_repeats says (it applies to the synthetic records only)."""
    add_table(tmp_path, "--public-rows", "20", "--private-size", "1000")
    config = DpBayesConfig(dataset="tiny", model="logistic", method="dpvi", dpvi_steps=10).validate()
    assert config.coverage_repeats > 0  # the default: no refusal on a stored data set
    calls = []

    def fit(model, data, *, n_records, **kw):
        calls.append((n_records, [records.n for records in data]))
        return torch.zeros(len(data), 2 * (data[0].x.shape[1] + 1), dtype=torch.float64), kw["steps"]

    monkeypatch.setattr(dpvi, "fit", fit)
    summary = run_release(config, MemoryReporter())
    ((n_records, lengths),) = calls
    assert n_records == 800 and lengths == [len(split_rows(load_dataset("tiny").private(), 0)[2])]
    assert lengths[0] < 100 and "coverage_90" not in summary
    assert EVALUATION_NOTE not in headline_of(summary).caveats


def test_dpvi_claims_the_declared_n_and_the_run_is_charged_to_the_data_set(tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", str(PART))
    config = DpBayesConfig(dataset="tiny", model="logistic", method="dpvi").validate()
    assert config.record_count == N
    values = config.to_dict()
    claim = planned_claim(values)
    assert claim.relation == "replace_one"
    assert any(f"N = {N} (declared with the data set)" in c for c in claim.caveats)
    assert any("held out with probability 0.2" in c for c in claim.caveats)
    assert EVALUATION_NOTE not in claim.caveats
    assert any("non-private posterior shown beside the release" in c and "timings" in c for c in claim.caveats)
    assert data_source(values) == "user/tiny" and other_sources(values) == ()
    assert public_rows(values)[0][0] == round(0.2 * PART)
    assert DpBayesConfig(dataset="tiny", model="logistic", private_size=50).validate().record_count == 40


def test_what_does_not_fit_is_refused_naming_the_field(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", str(PART))
    add_table(tmp_path, "--public-rows", "20", "--private-size", str(PART), name="three", labels=("lo", "mid", "hi"))
    add_table(tmp_path, "--public-rows", "20", name="unsized")
    refusals = [
        (("--dataset", "three", "--model", "logistic"),
         "`dataset` 'three' does not fit DP-Bayes' logistic regression: its label has 3 classes"),
        (("--dataset", "tiny"), "`model` must be logistic with data set 'tiny'"),
        (("--dataset", "tiny", "--model", "logistic", "--method", "ssp"), "`method` must be exponential or dpvi"),
        (("--dataset", "tiny", "--model", "logistic", "--mode", "sweep"), "`mode` must be release"),
        (("--dataset", "tiny", "--model", "logistic", "--method", "all"), "(`all` is a sweep-only comparison)"),
        (("--dataset", "tiny", "--model", "logistic", "--private-size", "1000000", "--draws", "20"),
         "`draws` times mc_samples (2) times the declared N (800000) must be at most 20,000,000 (per-step memory): "
         "lower draws or mc_samples; got 20"),
        (("--private-size", "500",), "`private_size` (declared private size) applies to a stored data set only"),
        (("--dataset", "unsized", "--model", "logistic"), "`private_size` must be declared for data set 'unsized'"),
        (("--dataset", "tiny", "--model", "logistic", "--private-size", "2"), "`private_size` must leave at least"),
    ]
    for args, message in refusals:
        refused = run_cli("run", "dp_bayes", *args, *TINY)
        assert refused.returncode == 2 and message in refused.stderr, (args, refused.stderr)
    assert store.list_runs() == []
    assert "its label has 3 classes" in DpBayesConfig.user_dataset_problem("three", {"model": "logistic"})
    assert DpBayesConfig.user_dataset_problem("tiny", {"model": "logistic"}) is None


def test_an_image_set_is_refused(tmp_path):
    add_images(tmp_path, "--private-size", "24")
    with pytest.raises(ConfigError, match="`dataset` 'pics' does not fit DP-Bayes' logistic regression: it holds"):
        DpBayesConfig(dataset="pics", model="logistic").validate()


def test_the_page_maps_coefficients_to_columns_and_states_the_held_out_scores():
    summary = {"features": {"beta1": "a", "beta2": "colour=red"}, "held_out_rows": 7, "held_out_accuracy": 5 / 7,
               "held_out_log_loss": 0.5}
    table = figures.features_table(summary)
    assert table.to_dict("records") == [{"parameter": "beta1", "column": "a"},
                                        {"parameter": "beta2", "column": "colour=red"}]
    text = figures.held_out_text(summary)
    assert "7 held-out private rows" in text and f"{5 / 7:.3f}" in text and "without privacy" in text
    assert "not scored" in figures.held_out_text({**summary, "held_out_rows": 0, "held_out_accuracy": None})
    synthetic = {"coverage_90": 0.9}
    assert figures.features_table(synthetic) is None and figures.held_out_text(synthetic) is None
