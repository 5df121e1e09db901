"""Models out (issue 38, part 4): a run keeps its final models, ``export ID --format model`` writes them with their
card, ``predict`` reloads one in plain PyTorch, and the run page's zip holds the same files."""

from __future__ import annotations

import ast
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from torch import nn

from privengine import registry
from privengine.claims import PrivacyClaim
from privengine.dpsgd.normalization import ChannelNorm
from privengine.dpsgd.projection import PublicProjection
from privengine.kept_models import loader
from privengine.kept_models.spec import FORMAT, describe_layers
from privengine.report.model_export import CARD_JSON, CARD_MARKDOWN, model_zip
from tests.conftest import ROOT, run_cli, subprocess_env


def _every_layer_network() -> nn.Sequential:
    """A network with one layer of each kind the spec describes, with random (seeded) weights and buffers."""
    gen = torch.Generator().manual_seed(7)
    net = nn.Sequential(
        ChannelNorm(torch.rand(2, generator=gen), torch.rand(2, generator=gen) + 0.5),
        nn.Conv2d(2, 4, 3, stride=2, padding=1), nn.GroupNorm(2, 4), nn.Tanh(), nn.AvgPool2d(2), nn.Flatten(),
        PublicProjection(torch.rand(16, generator=gen), torch.rand(16, 5, generator=gen), 0.9),
        nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    return net


def _network_spec(net: nn.Sequential, **extra) -> dict:
    return {"format": FORMAT, "kind": "network", "task": "classification", "layers": describe_layers(net),
            "input": {"shape": [2, 8, 8]}, "preprocessing": {}, "classes": ["a", "b", "c"], **extra}


def test_every_layer_round_trips_through_the_store_and_the_plain_loader(store):
    net = _every_layer_network()
    run_id = store.create_run("toy", {})
    store.put_model(run_id, "net", net.state_dict(), _network_spec(net))
    assert store.kept_models(run_id) == ["net"]
    kept = loader.load(store.models_dir(run_id))
    x = torch.randn(5, 2, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(kept.network(x), net.eval()(x))
    predictions = kept.predict(x.numpy().reshape(5, -1))  # flat rows are reshaped to the input shape
    assert [p["index"] for p in predictions] == net(x).argmax(1).tolist()
    assert {p["class"] for p in predictions} <= {"a", "b", "c"}
    store.mark_ended(run_id, "finished", summary={})
    store.delete_run(run_id)
    assert not store.models_dir(run_id).exists()


def test_the_preprocessing_is_the_runs_own_arithmetic():
    """Digit pixels 0-16 become (p / 16 - 0.5) / 0.5 exactly as privengine.dpsgd.data computes them."""
    raw = torch.arange(17, dtype=torch.float32).reshape(1, 1, 17, 1)
    steps = {"divide_by": 16.0, "mean": [0.5], "sd": [0.5]}
    assert torch.equal(loader.preprocess(raw, steps), (raw / 16.0 - 0.5) / 0.5)


def test_the_loader_imports_nothing_of_privengine():
    """predict's loader is plain PyTorch: it can be copied beside an exported model and used alone."""
    tree = ast.parse(Path(loader.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert not any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))
    assert imported <= {"__future__", "json", "math", "dataclasses", "pathlib", "typing", "numpy", "torch",
                        "safetensors"}


def _finished_toy_run(store, claim: PrivacyClaim | None = None) -> str:
    run_id = store.create_run("toy", {"steps": 3}, data_source="toy/seed=0")
    claim = claim or PrivacyClaim("toy", 1.5, 1e-5, "toy accountant", "add or remove one", headline=True,
                                  caveats=("a toy caveat",), events=({"type": "PureDpEvent", "epsilon": 1.5},),
                                  relation="add_or_remove_one")
    store.mark_ended(run_id, "finished", summary={"test_acc": 0.75, "privacy": [claim.to_dict()]})
    return run_id


def test_the_model_zip_holds_the_weights_the_specs_and_the_card(store):
    run_id = _finished_toy_run(store)
    net = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
    store.put_model(run_id, "model-1", net.state_dict(), _network_spec(net, default=True,
                                                                       data={"dataset": "toy"}))
    archive = zipfile.ZipFile(io.BytesIO(model_zip(store, run_id)))
    folder = f"model-{run_id}/"
    assert sorted(archive.namelist()) == sorted(folder + name for name in (
        "model-1.safetensors", "model-1.json", CARD_JSON, CARD_MARKDOWN))
    weights = archive.read(folder + "model-1.safetensors")
    assert weights == (store.models_dir(run_id) / "model-1.safetensors").read_bytes()
    card = json.loads(archive.read(folder + CARD_JSON))
    assert card["run"]["id"] == run_id
    assert card["recipe"]["config"] == {"steps": 3}
    assert card["data"] == {"source": "toy/seed=0"}  # never the private data's fingerprint (the noise's key)
    assert card["privacy"]["headline"]["events"] == [{"type": "PureDpEvent", "epsilon": 1.5}]
    assert "a toy caveat" in card["caveats"]
    assert card["models"][0]["name"] == "model-1" and card["models"][0]["default"]
    markdown = archive.read(folder + CARD_MARKDOWN).decode()
    assert "ε = 1.5" in markdown and "a toy caveat" in markdown


def test_export_refuses_an_unknown_id_a_run_without_models_and_a_used_folder(store, tmp_path):
    missing = run_cli("export", "0123456789", "--format", "model", "--output", str(tmp_path / "a"))
    assert missing.returncode == 2 and "no run with id '0123456789'" in missing.stderr
    bare = _finished_toy_run(store)
    none_kept = run_cli("export", bare, "--format", "model", "--output", str(tmp_path / "b"))
    assert none_kept.returncode == 2 and "kept none" in none_kept.stderr
    assert not (tmp_path / "b").exists()
    store.put_model(bare, "m", nn.Linear(2, 2).state_dict(), _network_spec(nn.Sequential(nn.Linear(2, 2))))
    used = tmp_path / "used"
    used.mkdir()
    (used / "file.txt").write_text("mine")
    refused = run_cli("export", bare, "--format", "model", "--output", str(used))
    assert refused.returncode == 2 and "`--output` must be a new or empty folder" in refused.stderr
    assert sorted(p.name for p in used.iterdir()) == ["file.txt"]
    no_output = run_cli("export", bare, "--format", "model")
    assert no_output.returncode == 2 and "`--output` is required" in no_output.stderr


def test_predict_refuses_bad_files_naming_the_flag(store, tmp_path):
    run_id = _finished_toy_run(store)
    net = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
    store.put_model(run_id, "m", net.state_dict(), {**_network_spec(net), "input": {"shape": [4]}})
    model = str(store.models_dir(run_id))
    np.save(tmp_path / "nan.npy", np.array([[1.0, np.nan, 0.0, 0.0]]))
    np.save(tmp_path / "wide.npy", np.zeros((2, 5)))
    (tmp_path / "words.csv").write_text("a,b,c,d\n1,2,x,4\n")
    (tmp_path / "bad_first_row.csv").write_text("1,2,x,4\n5,6,7,8\n")  # not a header: refused, never dropped
    (tmp_path / "x.txt").write_text("1,2,3,4\n")
    for data, message in (("nan.npy", "`--data` must match the model's input: the features must be finite"),
                          ("wide.npy", "each example must have 4 features"),
                          ("words.csv", "`--data` must hold numbers only"),
                          ("bad_first_row.csv", "`--data` must hold numbers only"),
                          ("x.txt", "`--data` must be a .csv or .npy file"),
                          ("absent.csv", "`--data` must be a readable file")):
        result = run_cli("predict", "--model", model, "--data", str(tmp_path / data))
        assert result.returncode == 2 and message in result.stderr, (data, result.stderr)
    (tmp_path / "ok.csv").write_text("f1,f2,f3,f4\n1,2,3,4\n0,0,0,0\n")
    ok = run_cli("predict", "--model", model, "--data", str(tmp_path / "ok.csv"), "--json")
    assert ok.returncode == 0
    with torch.no_grad():
        expected = net(torch.tensor([[1.0, 2, 3, 4], [0, 0, 0, 0]])).argmax(1).tolist()
    assert [p["index"] for p in json.loads(ok.stdout)["predictions"]] == expected


def test_predict_takes_the_exported_folder_or_the_unzipped_download_and_says_when_it_cannot_choose(store, tmp_path):
    net = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
    spec = {**_network_spec(net), "input": {"shape": [4]}}
    runs = [_finished_toy_run(store) for _ in range(2)]
    for run_id in runs:
        store.put_model(run_id, "m", net.state_dict(), spec)
    exported = tmp_path / "exported"
    assert run_cli("export", runs[0], "--format", "model", "--output", str(exported)).returncode == 0
    unzipped, both = tmp_path / "unzipped", tmp_path / "both"
    zipfile.ZipFile(io.BytesIO(model_zip(store, runs[0]))).extractall(unzipped)  # unzipped/model-ID/...
    for run_id in runs:
        zipfile.ZipFile(io.BytesIO(model_zip(store, run_id))).extractall(both)
    (tmp_path / "x.csv").write_text("f1,f2,f3,f4\n1,2,3,4\n0,0,0,0\n")
    with torch.no_grad():
        expected = net(torch.tensor([[1.0, 2, 3, 4], [0, 0, 0, 0]])).argmax(1).tolist()
    for folder in (exported, unzipped):
        done = run_cli("predict", "--model", str(folder), "--data", str(tmp_path / "x.csv"), "--json")
        assert done.returncode == 0, done.stderr
        assert [p["index"] for p in json.loads(done.stdout)["predictions"]] == expected
    (tmp_path / "empty").mkdir()
    names = ", ".join(sorted(f"model-{run_id}" for run_id in runs))
    for folder, message in (("empty", "holds no model (NAME.json beside NAME.safetensors), nor does any folder in it"),
                            ("both", f"`--model` must hold the models of one run; {tmp_path / 'both'} holds 2 "
                                     f"folders of models ({names})")):
        refused = run_cli("predict", "--model", str(tmp_path / folder), "--data", str(tmp_path / "x.csv"))
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
    two = _finished_toy_run(store)
    for name in ("a", "b"):  # two models, neither the default
        store.put_model(two, name, net.state_dict(), spec)
    refused = run_cli("predict", "--model", str(store.models_dir(two)), "--data", str(tmp_path / "x.csv"))
    assert refused.returncode == 2 and "`--name` must pick one model" in refused.stderr and "a, b" in refused.stderr


def test_keep_model_changes_no_claim():
    dpsgd = registry.get("dpsgd")
    base = dpsgd.config_cls().to_dict()
    assert dpsgd.planned_of({**base, "keep_model": False}).to_dict() == dpsgd.planned_of(base).to_dict()


# on the CPU, as predict runs: a GPU's float rounding could move a borderline example's arg-max
DPSGD_RUN = ("run", "dpsgd", "--dataset", "digits", "--model", "mlp", "--alphas", "0", "--n-seeds", "1",
             "--epochs", "1", "--noise-mode", "sigma", "--device", "cpu", "--json")


def _accuracy_in_a_fresh_process(model_dir, data_file, labels, home) -> float:
    """``python -m privengine predict --model MODEL_DIR --data DATA_FILE --json`` in a new process: the share of its
    predicted classes equal to ``labels`` (a tensor of class indices)."""
    child = subprocess.run([sys.executable, "-m", "privengine", "predict", "--model", str(model_dir),
                            "--data", str(data_file), "--json"], capture_output=True, text=True,
                           cwd=ROOT, env=subprocess_env(PRIVENGINE_HOME=str(home)), timeout=300)
    assert child.returncode == 0, child.stderr
    predicted = [p["index"] for p in json.loads(child.stdout)["predictions"]]
    return sum(p == y for p, y in zip(predicted, labels.tolist())) / len(predicted)


@pytest.mark.slow
def test_an_exported_dpsgd_model_reproduces_its_test_accuracy_in_a_fresh_process(tmp_path, private_home):
    from privengine.dpsgd.config import DPSGDConfig
    from privengine.dpsgd.run import load

    ran = run_cli(*DPSGD_RUN)
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    exported = run_cli("export", run["id"], "--format", "model", "--output", str(tmp_path / "model"))
    assert exported.returncode == 0, exported.stderr
    # the run's own test part, as raw digit pixels (0-16) again: the inverse of the documented preprocessing
    config = DPSGDConfig.from_dict(run["config"])
    task = load(config, torch.device("cpu"), should_stop=lambda: False, progress=lambda *a: None)
    np.save(tmp_path / "test.npy", ((task.x_test * 0.5 + 0.5) * 16).round().numpy())
    accuracy = _accuracy_in_a_fresh_process(tmp_path / "model", tmp_path / "test.npy", task.y_test, private_home)
    assert accuracy == run["summary"]["best_test_acc"]
    weights = load_file(str(tmp_path / "model" / "model-1.safetensors"))
    assert set(weights) == {"1.weight", "1.bias", "3.weight", "3.bias"}
    # nothing exported carries the private data's fingerprint, the key of the run's noise in reproducible mode
    key = "".join(f"{w:08x}" for w in task.private_fingerprint)
    exported_texts = [p.read_text(encoding="utf-8") for p in (tmp_path / "model").iterdir()
                      if p.suffix in (".json", ".md")]
    assert task.private_fingerprint and exported_texts and all(key not in text for text in exported_texts)


@pytest.mark.slow
def test_a_run_with_keep_model_off_keeps_none(tmp_path):
    ran = run_cli(*DPSGD_RUN, "--keep-model", "false")
    assert ran.returncode == 0, ran.stderr
    refused = run_cli("export", json.loads(ran.stdout)["id"], "--format", "model", "--output", str(tmp_path / "m"))
    assert refused.returncode == 2 and "keep_model knob was off" in refused.stderr


@pytest.mark.parametrize("architecture, shape", [("convnet", (1, 8, 8)), ("mlp", (1, 8, 8)),
                                                 ("scatter_linear", (81, 2, 2))])
def test_every_pate_student_architecture_is_kept_as_the_same_function(store, architecture, shape):
    from privengine.pate.kept import as_sequential
    from privengine.pate.models import build_model

    student = build_model(architecture, shape, 10, width=8, depth=2, generator=torch.Generator().manual_seed(3))
    network = as_sequential(student)
    run_id = store.create_run("toy", {})
    store.put_model(run_id, "student", network.state_dict(), {**_network_spec(network), "input": {"shape": shape}})
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        assert torch.equal(loader.load(store.models_dir(run_id)).network(x), student.eval()(x))


def _run_and_export(folder, *args: str) -> dict:
    """``python -m privengine ARGS`` (a run, with --json), then ``export ID --format model --output FOLDER``: the
    run's JSON."""
    ran = run_cli(*args)
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    assert run_cli("export", run["id"], "--format", "model", "--output", str(folder)).returncode == 0
    return run


@pytest.mark.slow
def test_an_exported_pate_student_reproduces_its_accuracy_in_a_fresh_process(tmp_path, private_home):
    from privengine.pate.data import load_pate_data

    run = _run_and_export(tmp_path / "m", "run", "pate", "--dataset", "digits", "--teachers", "10",
                          "--teacher-epochs", "2", "--student-epochs", "2", "--queries", "100", "--baseline", "false",
                          "--device", "cpu", "--json")
    data = load_pate_data("digits")
    steps = json.loads((tmp_path / "m" / "student.json").read_text())["preprocessing"]
    raw = ((data.test_x * torch.tensor(steps["sd"]) + torch.tensor(steps["mean"])) * steps["divide_by"]).round()
    np.save(tmp_path / "test.npy", raw.numpy())  # the digit pixels (0-16) again
    accuracy = _accuracy_in_a_fresh_process(tmp_path / "m", tmp_path / "test.npy", data.test_y, private_home)
    assert accuracy == run["summary"]["student_accuracy"]


def _toy_page(root_path: str) -> None:
    import sys

    sys.path.insert(0, root_path)
    from tests import toy_mechanism  # noqa: F401
    from ui.mechanism_page import render_mechanism_page

    render_mechanism_page("toy")


def test_the_run_view_offers_the_model_of_a_run_that_kept_one(store):
    from streamlit.testing.v1 import AppTest

    kept, bare = _finished_toy_run(store), _finished_toy_run(store)
    net = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
    store.put_model(kept, "model-1", net.state_dict(), _network_spec(net))
    for run_id, labels in ((kept, ["Report (HTML)", "Model (zip)"]), (bare, ["Report (HTML)"])):
        at = AppTest.from_function(_toy_page, kwargs={"root_path": str(ROOT)}, default_timeout=60)
        at.query_params["run"] = run_id
        at.run()
        assert not at.exception, [e.message for e in at.exception]
        assert [b.proto.label for b in at.get("download_button")] == labels


@pytest.mark.slow
def test_a_split_learning_run_keeps_both_parties_and_says_no_claim_covers_them(tmp_path):
    from sklearn.metrics import roc_auc_score

    from privengine.split_label.config import SplitLabelConfig
    from privengine.split_label.data import load as load_binary

    run = _run_and_export(tmp_path / "m", "run", "split_label", "--n-train", "2000", "--epochs", "2",
                          "--batch-size", "250", "--bottom-widths", "32,8", "--n-features", "10", "--device", "cpu",
                          "--json")
    kept = loader.load(tmp_path / "m")
    assert kept.spec["parties"]["passive"] == [0, 4] and kept.spec["parties"]["active"] == [4, 6]  # 2 blocks; top
    data = load_binary(SplitLabelConfig.from_dict(run["config"]))
    steps = kept.spec["preprocessing"]
    raw = data.x_test * torch.tensor(steps["sd"]) + torch.tensor(steps["mean"])  # the generator's features again
    scores = [p["probability"] if p["index"] == 1 else 1 - p["probability"] for p in kept.predict(raw.numpy())]
    assert roc_auc_score(data.y_test.numpy(), scores) == pytest.approx(run["summary"]["test_auc"], abs=1e-3)
    card = json.loads((tmp_path / "m" / CARD_JSON).read_text())
    assert card["privacy"]["headline"] is None and card["privacy"]["label_leakage_bound"]["caveats"]
    assert card["caveats"][0].startswith("This run states no differential-privacy claim")


def test_a_glm_posterior_predicts_the_mean_of_its_releases(store):
    """Linear: the mean over releases of x . m_beta + m_b; logistic: MacKay's probit approximation per release."""
    mean = torch.tensor([[1.0, -2.0, 0.5, -1.0], [3.0, 0.0, -0.5, -1.5]], dtype=torch.float64)
    sd = torch.tensor([[0.1, 0.2, 0.3, 0.1], [0.4, 0.1, 0.2, 0.1]], dtype=torch.float64)
    x = np.array([[0.25, -0.5], [0.0, 0.1]], dtype=np.float32)
    mu = x.astype(np.float64) @ mean[:, :2].numpy().T + mean[:, 2].numpy()
    s2 = (x.astype(np.float64) ** 2) @ (sd[:, :2].numpy() ** 2).T + sd[:, 2].numpy() ** 2
    p = (1 / (1 + np.exp(-mu / np.sqrt(1 + np.pi * s2 / 8)))).mean(axis=1)
    for glm, task in (("linear", "regression"), ("logistic", "binary")):
        run_id = store.create_run("toy", {})
        store.put_model(run_id, "posterior", {"mean": mean, "sd": sd},
                        {"format": FORMAT, "kind": "glm_posterior", "glm": glm, "task": task, "input": {"shape": [2]},
                         "classes": None if glm == "linear" else ["0", "1"]})
        got = loader.load(store.models_dir(run_id)).predict(x)
        if glm == "linear":
            assert [g["value"] for g in got] == pytest.approx(mu.mean(axis=1).tolist(), rel=1e-12)
        else:
            assert [g["probability"] if g["index"] == 1 else 1 - g["probability"] for g in got] == \
                pytest.approx(p.tolist(), rel=1e-9)


@pytest.mark.slow
def test_a_dp_bayes_release_is_kept_as_its_released_posteriors(tmp_path):
    run = _run_and_export(tmp_path / "m", "run", "dp_bayes", "--n-records", "500", "--vi-steps", "200",
                          "--warmup-steps", "100", "--burn-in", "200", "--steps", "300", "--draws", "2", "--json")
    x = np.array([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.5]], dtype=np.float32)
    releases = run["summary"]["released"]  # one description per released draw: each coefficient's mean and sd
    expected = np.mean([x.astype(np.float64) @ [r["beta1"]["mean"], r["beta2"]["mean"]] + r["intercept"]["mean"]
                        for r in releases], axis=0)
    got = [p["value"] for p in loader.load(tmp_path / "m").predict(x)]
    assert len(releases) == 2 and got == pytest.approx(expected.tolist(), rel=1e-6)
    card = json.loads((tmp_path / "m" / CARD_JSON).read_text())
    assert card["privacy"]["headline"]["events"] and card["models"][0]["kind"] == "glm_posterior"
