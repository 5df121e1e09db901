"""PATE on stored user data sets (issue 38, part 2): a CSV from ``data add`` to a finished ``run pate --dataset``
whose queries come from the public rows, whose teachers' partitions are drawn row by row (add/remove), charged to
``user/NAME``, its student exported and predicting on the raw rows; refusals before anything is stored."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import torch

from privengine.claims import headline_of
from privengine.datasets import load_dataset
from privengine.datasets.held_out import drawn_split, row_draws, split_rows
from privengine.errors import ConfigError
from privengine.ledger import ledger_of
from privengine.pate import user_facts
from privengine.datasets.private_part import HELD_OUT_DRAWN
from privengine.pate.charge import data_source, planned_claim, public_rows
from privengine.pate.config import PateConfig
from privengine.pate.user_data import hashed_partition, load_user_pate_data
from tests.conftest import run_cli
from tests.user_tables import add_images, add_table, random_rows

SMALL = {"teachers": 5, "queries": 15, "teacher_epochs": 2, "student_epochs": 3, "aggregator": "gnmax",
         "sigma": 2.0, "sanitize": False, "baseline": False}
RUN = ("run", "pate", "--dataset", "tiny", "--teachers", "5", "--queries", "15", "--teacher-epochs", "2",
       "--student-epochs", "3", "--aggregator", "gnmax", "--sigma", "2", "--sanitize", "false",
       "--baseline-epochs", "1", "--device", "cpu", "--data-seed", "5", "--json")



@pytest.mark.slow
def test_a_csv_goes_from_data_add_to_a_pate_student_that_predicts_on_its_raw_rows(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    ran = run_cli(*RUN)
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    summary = run["summary"]
    assert run["state"] == "finished" and summary["queries_submitted"] == 15
    assert summary["examples_per_teacher"] == 80 // 5  # N = 100 declared less its held-out fifth: never counted
    assert 0.0 <= summary["baseline_accuracy"] <= 1.0  # the baseline (on by default) ran, on its own batches
    claim = headline_of(summary).to_dict()
    assert claim["relation"] == "add_or_remove_one" and claim["neighbouring"] == user_facts.NEIGHBOURING
    assert any(c.startswith("N = 80: the private part's size 100, declared with data set tiny") for c in
               claim["caveats"]) and user_facts.UNCOVERED in claim["caveats"]
    # the same releases as on a built-in data set: one vote moves under either relation
    builtin = planned_claim(PateConfig(dataset="digits", **SMALL).to_dict()).to_dict()
    assert claim["events"] == builtin["events"] and claim["epsilon"] == builtin["epsilon"]
    assert builtin["relation"] == "replace_one"
    assert store.data_source_of(run["id"]) == "user/tiny"
    assert [share.run_id for share in ledger_of(store, "user/tiny").shares] == [run["id"]]

    exported = run_cli("export", run["id"], "--format", "model", "--output", str(tmp_path / "model"))
    assert exported.returncode == 0, exported.stderr
    spec = json.loads((tmp_path / "model" / "student.json").read_text())
    assert spec["classes"] == ["neg", "pos"] and spec["preprocessing"]["table"]["numeric"][0]["bounds"] == [-3, 3]
    # the student's test set: the held-out private rows (validation and test), as the user's file holds them
    validation, test, _ = split_rows(load_dataset("tiny").private(), data_seed=5)
    raw = pd.read_csv(tmp_path / "tiny.csv").iloc[20 + np.sort(np.concatenate([validation, test]))]
    raw.to_csv(tmp_path / "held.csv", index=False)
    predicted = run_cli("predict", "--model", str(tmp_path / "model"), "--data", str(tmp_path / "held.csv"), "--json")
    assert predicted.returncode == 0, predicted.stderr
    classes = [p["class"] for p in json.loads(predicted.stdout)["predictions"]]
    assert len(classes) == len(raw) > 0
    assert sum(c == label for c, label in zip(classes, raw["label"])) / len(classes) == summary["student_accuracy"]


def test_the_splits_come_from_public_rows_and_held_out_rows(tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    config = PateConfig(dataset="tiny", **SMALL).validate()
    data = load_user_pate_data(config)
    private = load_dataset("tiny").private()
    validation, test, train = split_rows(private, config.data_seed)
    assert len(data.pool_y) == 20 and len(data.test_y) == len(validation) + len(test)
    assert len(data.private_y) == len(train) and not data.is_image and data.n_classes == 2
    torch.testing.assert_close(data.partition_draws, torch.as_tensor(row_draws(private, 0)[train]))
    assert data_source(config.to_dict()) == "user/tiny"
    assert public_rows(config.to_dict()) == ((20, "used as public data (the student's query pool)"),
                                             (20, HELD_OUT_DRAWN))


def test_the_split_is_cut_from_the_draws_returned_with_it():
    """The draws come back with the split they cut (hashed once, for PATE's partition), each row's own hash."""
    rows = random_rows(2_000, 0)
    draws, (validation, test, train) = drawn_split(rows, 3)
    np.testing.assert_array_equal(draws, row_draws(rows, 3))
    assert (draws[validation] < 0.1).all() and ((draws[test] >= 0.1) & (draws[test] < 0.2)).all()
    assert (draws[train] >= 0.2).all() and len(validation) + len(test) + len(train) == 2_000
    assert all(a.dtype == np.int64 and (np.diff(a) > 0).all() for a in (validation, test, train))


def _partition(rows: dict[str, np.ndarray], teachers: int, cap: int) -> list[set[bytes]]:
    """Each teacher's rows (as bytes) of ``rows``' private training rows."""
    draws, (_, _, train) = drawn_split(rows, 3)
    positions, weights = hashed_partition(torch.as_tensor(draws[train]), teachers, cap)
    keys = [rows["x"][i].tobytes() + rows["y"][i].tobytes() + rows["categories"][i].tobytes() for i in train]
    return [{keys[p] for p, w in zip(positions[t].tolist(), weights[t].tolist()) if w} for t in range(teachers)]


def test_adding_or_removing_one_row_changes_one_teachers_partition_only():
    rows, teachers = random_rows(5_000, 0), 10
    cap = user_facts.teacher_rows(4_000, teachers)
    parts = _partition(rows, teachers, cap)
    assert all(not (a & b) for i, a in enumerate(parts) for b in parts[i + 1:])  # disjoint
    n = sum(map(len, parts))
    for part in parts:  # each training row joins each teacher with probability 1/K: within 5 standard deviations
        assert abs(len(part) - n / teachers) < 5 * (n / teachers) ** 0.5
    new = random_rows(1, 1)
    for at in (0, 2_500, 5_000):
        added = {k: np.concatenate([v[:at], new[k], v[at:]]) for k, v in rows.items()}
        assert sum(a != b for a, b in zip(_partition(added, teachers, cap), parts)) <= 1
        removed = {k: np.delete(v, min(at, 4_999), axis=0) for k, v in rows.items()}
        assert sum(a != b for a, b in zip(_partition(removed, teachers, cap), parts)) <= 1
    # a teacher over the cap keeps its rows of smallest draw, whatever the other teachers hold
    small = _partition(rows, teachers, 50)
    assert all(len(p) == 50 and p <= q for p, q in zip(small, parts))


def test_the_teachers_are_capped_by_the_declared_size_never_a_count(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "300")  # 100 private rows, 300 declared: N = 240
    PateConfig(dataset="tiny", **{**SMALL, "teachers": 24}).validate()
    with pytest.raises(ConfigError, match=r"`teachers` must be at most 24 for data set 'tiny' \(N = 240 declared"):
        PateConfig(dataset="tiny", **{**SMALL, "teachers": 25}).validate()
    with pytest.raises(ConfigError, match="`teachers` must be at most 8"):
        PateConfig(dataset="tiny", **{**SMALL, "teachers": 9, "private_size": 100}).validate()
    PateConfig(dataset="tiny", **{**SMALL, "teachers": 1, "private_size": 12}).validate()  # 2 held out, 10 train
    with pytest.raises(ConfigError, match=r"`private_size` must leave at least 2 held-out rows and 10 training rows "
                                          r"\(one teacher's\) of data set 'tiny', a fifth being held out: at least "
                                          r"12; got 11"):
        PateConfig(dataset="tiny", **{**SMALL, "teachers": 1, "private_size": 11}).validate()
    refused = run_cli(*RUN[:4], "--teachers", "30", "--queries", "15")
    assert refused.returncode == 2 and "`teachers` must be at most 24" in refused.stderr
    assert store.list_runs() == []


def test_queries_come_from_the_public_rows_and_need_some(tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    with pytest.raises(ConfigError, match="`queries` must be at most 20, the public rows data set 'tiny' declares"):
        PateConfig(dataset="tiny", **{**SMALL, "queries": 21}).validate()
    with pytest.raises(ConfigError, match="`selection_clusters` must be at most 20"):
        PateConfig(dataset="tiny", **SMALL, query_selection="typical", selection_clusters=21).validate()
    add_table(tmp_path, "--private-size", "100", name="closed")
    with pytest.raises(ConfigError, match="`dataset` 'closed' declares no public rows: PATE's queries come from"):
        PateConfig(dataset="closed", **SMALL).validate()


def test_without_a_declared_private_size_the_run_is_refused_naming_the_flag(store, tmp_path):
    add_table(tmp_path, "--public-rows", "20")
    refused = run_cli(*RUN)
    assert refused.returncode == 2 and "`private_size` must be declared for data set 'tiny'" in refused.stderr
    assert store.list_runs() == []


def test_models_that_do_not_fit_the_data_set_are_refused(tmp_path):
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    with pytest.raises(ConfigError, match="`architecture` must be mlp \\(or auto\\) for data set 'tiny', a table"):
        PateConfig(dataset="tiny", **SMALL, architecture="convnet").validate()
    with pytest.raises(ConfigError, match="`student` semi_supervised augments images"):
        PateConfig(dataset="tiny", **SMALL, student="semi_supervised").validate()
    add_images(tmp_path, "--public-rows", "4", "--private-size", "20")  # 24 images, 4 public, 20 private: N = 16
    images = {**SMALL, "teachers": 1, "queries": 4}
    PateConfig(dataset="pics", **images, architecture="convnet", depth=3).validate()
    with pytest.raises(ConfigError, match="`depth` must leave the ConvNet at least one pixel .* at most 3; got 4"):
        PateConfig(dataset="pics", **images, architecture="convnet", depth=4).validate()
    with pytest.raises(ConfigError, match="`architecture` must be convnet or mlp"):
        PateConfig(dataset="pics", **images, architecture="scatter_linear").validate()


def test_the_form_offers_stored_data_sets_and_names_why_one_does_not_fit(tmp_path):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    add_images(tmp_path, "--public-rows", "4", "--private-size", "20")
    at = AppTest.from_file(str(ROOT / "pages" / "pate.py"), default_timeout=60)
    at.query_params["config"] = json.dumps({"teachers": 5, "queries": 15})
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    dataset = at.selectbox(key="form.pate.dataset")
    assert "tiny (your data: tabular, 120 rows)" in dataset.options
    (pics,) = [label for label in dataset.options if label.startswith("pics")]
    assert "not usable here: teachers must be at most 1 for data set 'pics' (N = 16 declared" in pics
    dataset.set_value("tiny").run()
    assert not at.exception and not at.error, [e.value for e in at.error]


def test_empty_slots_weigh_nothing_in_the_teachers_training():
    from privengine.pate.ensemble import Ensemble, train_ensemble
    from privengine.pate.models import build_model

    x, y = torch.randn(2, 12, 3), torch.randint(0, 2, (2, 12))
    weights = torch.ones(2, 12)
    weights[0, 5:], weights[1, 9:] = 0.0, 0.0  # teacher 0 has 5 rows, teacher 1 has 9

    def trained(fill: float) -> dict[str, torch.Tensor]:
        padded_x, padded_y = x.clone(), y.clone()
        padded_x[weights == 0], padded_y[weights == 0] = fill, int(fill) % 2
        models = [build_model("mlp", (3,), 2, width=4, depth=1, generator=torch.Generator().manual_seed(k))
                  for k in range(2)]
        ensemble = Ensemble(models, torch.device("cpu"))
        assert train_ensemble(ensemble, padded_x, padded_y, epochs=3, lr=0.05, batch_size=4,
                              generator=torch.Generator().manual_seed(0), weights=weights)
        return {name: p.detach() for name, p in ensemble.params.items()}

    first, second = trained(0.0), trained(7.0)
    for name in first:
        torch.testing.assert_close(first[name], second[name], rtol=0, atol=0)


def test_the_membership_attack_refuses_a_run_on_a_user_data_set(tmp_path):
    from privengine.audit.membership_pate import check_target

    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    with pytest.raises(ConfigError, match="`run` trained on user data set 'tiny'"):
        check_target(PateConfig(dataset="tiny", **SMALL).validate())


def _neighbour(data, row: int):
    """``data`` less its private training row ``row`` (the add/remove neighbour; held-out rows and pool as before)."""
    keep = torch.arange(len(data.private_y)) != row
    return dataclasses.replace(data, private_x=data.private_x[keep], private_y=data.private_y[keep],
                               partition_draws=data.partition_draws[keep])


def test_the_students_batches_do_not_depend_on_the_private_row_count(tmp_path):
    """Review finding 1: the baseline drew ``(1, n)`` numbers an epoch from the student's generator, n the private
    row count, so the student's batches (its accuracy, its kept model) depended on n beyond the noisy answers."""
    from privengine.pate.pipeline import Pipeline, recipe_of, train_baseline

    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    config = PateConfig(dataset="tiny", **{**SMALL, "baseline": True, "baseline_epochs": 2}).validate()
    data = load_user_pate_data(config)
    states = []
    for private in (data, _neighbour(data, 0)):
        pipeline = Pipeline.seeded(None, config.seed)
        train_baseline(recipe_of(config, private, None), [pipeline], torch.device("cpu"), should_stop=lambda: False)
        states.append(pipeline.shuffle.get_state())
    assert torch.equal(states[0], states[1])
    # a built-in data set (its size public) keeps drawing the baseline's batches from the student's generator
    builtin = PateConfig(dataset="digits", **{**SMALL, "baseline": True, "baseline_epochs": 1}).validate()
    from privengine.pate.data import load_pate_data

    pipeline = Pipeline.seeded(None, builtin.seed)
    train_baseline(recipe_of(builtin, load_pate_data("digits"), None), [pipeline], torch.device("cpu"),
                   should_stop=lambda: False)
    assert not torch.equal(pipeline.shuffle.get_state(), Pipeline.seeded(None, builtin.seed).shuffle.get_state())


def test_removing_one_training_row_changes_only_its_teachers_weights(tmp_path):
    from privengine.pate.pipeline import Pipeline, recipe_of, train_teachers

    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    config = PateConfig(dataset="tiny", **SMALL).validate()
    data = load_user_pate_data(config)
    positions, weights = hashed_partition(data.partition_draws, config.teachers,
                                          user_facts.teacher_rows(80, config.teachers))
    row = 7
    (owner,) = {t for t in range(config.teachers) if row in positions[t][weights[t] > 0].tolist()}

    def weights_of(private) -> dict[str, torch.Tensor]:
        teachers = train_teachers(recipe_of(config, private, None), [Pipeline.seeded(None, config.seed)],
                                  torch.device("cpu"), should_stop=lambda: False)
        return {name: p.detach() for name, p in teachers.params.items()}

    before, after = weights_of(data), weights_of(_neighbour(data, row))
    changed = {t for t in range(config.teachers) if any(not torch.equal(before[n][t], after[n][t]) for n in before)}
    assert changed == {owner}


def test_empty_slots_point_at_a_stand_in_row_past_the_training_rows():
    """Review finding 4: they pointed at training row 0, another teacher's row that changes with the neighbours."""
    draws = torch.tensor([0.25, 0.3, 0.9, 0.95, 0.5])
    positions, weights = hashed_partition(draws, teachers=2, cap=4)
    assert positions[weights == 0].tolist() == [5] * int((weights == 0).sum()) and (weights == 0).any()
    assert sorted(positions[weights == 1].tolist()) == list(range(5))


def test_user_data_knobs_are_refused_on_a_built_in_data_set():
    """Review finding 2: ignored there, yet keying the run's noise (config digest)."""
    with pytest.raises(ConfigError, match=r"`private_size` \(declared private size\) applies to a stored data set "
                                          r"only: must be 0 for built-in data set digits; got 50"):
        PateConfig(dataset="digits", **SMALL, private_size=50).validate()
    with pytest.raises(ConfigError, match=r"`data_seed` \(data seed\) applies to a stored data set only"):
        PateConfig(dataset="digits", **SMALL, data_seed=3).validate()
    refused = run_cli("run", "pate", "--dataset", "digits", "--data-seed", "3", "--json")
    assert refused.returncode == 2 and "`data_seed` (data seed) applies to a stored data set only" in refused.stderr


def test_built_in_runs_keep_their_noise_keys_with_the_new_knobs_at_their_defaults():
    """``private_size`` and ``data_seed`` are ``unkeyed_default``: at 0 a built-in run's config digest is that of the
    config without them, so its noise replays as before they existed; a user data set's values key their own."""
    import hashlib

    from privengine.randomness import config_digest

    config = PateConfig(dataset="digits", **SMALL)
    before = {k: v for k, v in config.to_dict().items()
              if k not in ("secure_noise", "private_size", "data_seed", "keep_model")}
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).digest()
    assert config_digest(config) == tuple(int.from_bytes(digest[i:i + 4], "little") for i in range(0, 16, 4))
    user = PateConfig(dataset="tiny", **SMALL)
    assert len({config_digest(user), config_digest(dataclasses.replace(user, data_seed=3)),
                config_digest(dataclasses.replace(user, private_size=50))}) == 3


def test_the_claims_name_the_held_out_accuracies_and_the_time_as_uncovered(tmp_path):
    """Review finding 3: the accuracies are measured on held-out private rows, the time grows with the row count."""
    add_table(tmp_path, "--public-rows", "20", "--private-size", "100")
    assert user_facts.UNCOVERED in planned_claim(PateConfig(dataset="tiny", **SMALL).to_dict()).caveats
    assert user_facts.UNCOVERED not in planned_claim(PateConfig(dataset="digits", **SMALL).to_dict()).caveats
