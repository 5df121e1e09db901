"""MLflow export (issue 38, part 5): ``export ID --to mlflow`` logs a run's recipe, curves, headline claim and kept
model to a tracking store, read back here with MLflow's own client; MLflow is an optional extra that the test
command installs (requirements-dev.txt), so these tests always run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from torch import nn

from privengine.claims import PrivacyClaim, headline_of
from privengine.kept_models.spec import FORMAT, describe_layers
from privengine.report import mlflow_fields
from privengine.report.mlflow_export import EXTRA
from privengine.report.model_export import export_files
from privengine.store import EPSILON_BASIS_ARTIFACT
from tests.conftest import ROOT, run_cli

DPSGD_CURVE = "test_acc|alpha=0|seed=0"  # DP-SGD's metric|setting|seed naming: '|' and '=' are not MLflow's


def _finished_run(store, *, keep_model: bool) -> str:
    """A finished toy run: two ordinary curves, an epsilon curve with its declared basis, a headline claim with its
    relation and (``keep_model``) one kept model."""
    run_id = store.create_run("toy", {"steps": 3, "rate": 0.25, "scales": [1.0, 2.0]}, data_source="toy/seed=0")
    store.mark_running(run_id, device="cpu")
    store.add_metrics(run_id, [(0, "loss", 1.0), (1, "loss", 0.5), (2, "loss", float("nan")), (0, DPSGD_CURVE, 0.25),
                               (5, DPSGD_CURVE, 0.75), (1, "epsilon", 0.4), (2, "epsilon", 0.9)])
    store.put_artifact(run_id, EPSILON_BASIS_ARTIFACT, {"epsilon": {"delta": 1e-5, "accountant": "toy accountant"}})
    if keep_model:
        net = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))
        store.put_model(run_id, "model-1", net.state_dict(),
                        {"format": FORMAT, "kind": "network", "task": "classification", "layers": describe_layers(net),
                         "input": {"shape": [4]}, "preprocessing": {}, "classes": ["a", "b"], "default": True})
    claim = PrivacyClaim("toy", 1.5, 1e-5, "toy accountant", "add or remove one", headline=True,
                         caveats=("a toy caveat",), events=({"type": "PureDpEvent", "epsilon": 1.5},),
                         relation="add_or_remove_one")
    store.mark_ended(run_id, "finished", summary={"test_acc": 0.75, "privacy": [claim.to_dict()]})
    return run_id


def _client(uri: str):
    """MLflow's client of tracking store ``uri``; mlflow is imported here, not at collection (about 1.5 s of CPU in
    each pytest-xdist worker, of which one runs this file)."""
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _only_run(client):
    experiment = client.get_experiment_by_name("privengine")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    return runs[0]


@pytest.mark.slow
def test_a_finished_run_reads_back_from_mlflow_as_the_store_holds_it(store, tmp_path):
    run_id = _finished_run(store, keep_model=True)
    uri = f"sqlite:///{tmp_path / 'tracking' / 'mlflow.db'}"
    exported = run_cli("export", run_id, "--to", "mlflow", "--tracking-uri", uri)
    assert exported.returncode == 0, exported.stderr
    client = _client(uri)
    logged = _only_run(client)
    assert logged.info.run_id in exported.stdout and uri in exported.stdout
    run = store.get_run(run_id)
    assert logged.info.status == "FINISHED"
    assert (logged.info.start_time, logged.info.end_time) == (round(run.started_at * 1000),
                                                              round(run.finished_at * 1000))

    # the recipe: every config field, its value read back as the JSON it was written as
    assert {k: json.loads(v) for k, v in logged.data.params.items()} == run.config

    # the curves: every stored series, point by point with its step (NaN kept)
    stored = store.metrics(run_id)
    keys = {"loss": "loss", DPSGD_CURVE: "test_acc/alpha_0/seed_0", "epsilon": "epsilon"}
    assert set(stored["name"]) == set(keys)
    for name, key in keys.items():
        expected = stored[stored["name"] == name]
        history = sorted(client.get_metric_history(logged.info.run_id, key), key=lambda m: m.step)
        assert [m.step for m in history] == expected["step"].tolist()
        assert [m.value for m in history] == pytest.approx(expected["value"].tolist(), nan_ok=True)

    # the headline claim and where the run comes from, as tags
    claim, tags = headline_of(run.summary), logged.data.tags
    assert float(tags["privacy.epsilon"]) == claim.epsilon and float(tags["privacy.delta"]) == claim.delta
    assert (tags["privacy.accountant"], tags["privacy.neighbouring"], tags["privacy.relation"]) == (
        claim.accountant, claim.neighbouring, claim.relation)
    assert "a toy caveat" in tags["privacy.headline"]
    assert {k: tags[f"privengine.{k}"] for k in ("run_id", "mechanism", "state", "source", "data_source")} == {
        "run_id": run.id, "mechanism": run.mechanism, "state": run.state, "source": run.source,
        "data_source": store.data_source_of(run_id)}
    assert "delta = 1e-05; accountant: toy accountant" in tags["privengine.epsilon_basis.epsilon"]
    assert tags["mlflow.runName"] == run.title

    # the artifacts: the config, the whole run as JSON and the model export, byte for byte
    assert {a.path for a in client.list_artifacts(logged.info.run_id)} == {"privengine", "model"}
    folder = Path(client.download_artifacts(logged.info.run_id, "", str(tmp_path / "download")))
    files = export_files(store, run_id)
    assert sorted(p.name for p in (folder / "model").iterdir()) == sorted(files)
    assert (folder / "model" / "model-1.safetensors").read_bytes() == files["model-1.safetensors"]
    assert json.loads((folder / "privengine" / "config.json").read_text()) == run.config
    assert PrivacyClaim.from_dict(json.loads((folder / "privengine" / "run.json").read_text())["headline_privacy"]) \
        == claim

    again = run_cli("export", run_id, "--to", "mlflow", "--tracking-uri", uri)
    assert again.returncode == 2 and f"is MLflow run {logged.info.run_id}" in again.stderr
    assert _only_run(client).info.run_id == logged.info.run_id


@pytest.mark.slow
def test_the_default_store_is_under_the_home_and_a_run_without_a_claim_says_so(store, private_home, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # it would win over the default
    run_id = store.create_run("toy", {"steps": 3})
    store.add_metrics(run_id, [(0, "loss", 1.0)])
    store.mark_ended(run_id, "failed", error="toy failure")
    exported = run_cli("export", run_id, "--to", "mlflow")
    assert exported.returncode == 0, exported.stderr
    database = private_home / "mlruns" / "mlflow.db"
    assert f"sqlite:///{database}" in exported.stdout
    logged = _only_run(_client(f"sqlite:///{database}"))
    assert logged.info.status == "FAILED"
    assert logged.data.tags["privacy.headline"].startswith("none")
    assert not any(key.startswith("privacy.epsilon") for key in logged.data.tags)
    assert logged.data.tags["privengine.data_source"] == "not recorded"
    assert logged.info.artifact_uri.startswith((private_home / "mlruns" / "artifacts").as_uri())
    assert not (Path.cwd() / "mlruns").exists()  # MLflow's own default would have put the artifacts there


def test_without_mlflow_the_export_says_how_to_install_it(store, monkeypatch, tmp_path):
    run_id = _finished_run(store, keep_model=False)
    for module in ("mlflow", "sqlalchemy", "alembic"):
        monkeypatch.setitem(sys.modules, module, None)  # `import mlflow` now raises ImportError
    refused = run_cli("export", run_id, "--to", "mlflow", "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.startswith("privengine: error: `--to` mlflow needs the optional MLflow packages")
    assert all(f"'{requirement}'" in refused.stderr for requirement in EXTRA)
    assert not (tmp_path / "m.db").exists()


def test_the_extra_is_in_the_dev_requirements_only():
    def requirements(name: str) -> set[str]:
        lines = (ROOT / name).read_text().splitlines()
        return {line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()}

    assert set(EXTRA) <= requirements("requirements-dev.txt")
    packages = {line.split(">")[0].split("=")[0] for line in requirements("requirements.txt")}
    assert not packages & {requirement.split(">")[0] for requirement in EXTRA}


def test_unknown_and_unended_runs_and_misplaced_flags_are_refused(store, tmp_path):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    missing = run_cli("export", "0123456789", "--to", "mlflow", "--tracking-uri", uri)
    assert missing.returncode == 2 and "no run with id '0123456789'" in missing.stderr
    queued = store.create_run("toy", {"steps": 3})
    active = run_cli("export", queued, "--to", "mlflow", "--tracking-uri", uri)
    assert active.returncode == 2 and "`ID` must be a run that has ended" in active.stderr
    assert not (tmp_path / "m.db").exists()  # refused before MLflow opened anything
    finished = _finished_run(store, keep_model=False)
    for args, flag in ((["--format", "csv", "--tracking-uri", uri], "--tracking-uri"),
                       (["--format", "json", "--experiment", "x"], "--experiment"),
                       (["--to", "mlflow", "--output", str(tmp_path / "o")], "--output"),
                       (["--to", "mlflow", "--experiment", " "], "--experiment"),
                       (["--to", "mlflow", "--tracking-uri", "bogus://x"], "--tracking-uri")):
        refused = run_cli("export", finished, *args)
        assert refused.returncode == 2 and f"`{flag}`" in refused.stderr, (args, refused.stderr)
    both = run_cli("export", finished, "--to", "mlflow", "--format", "csv")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_long_values_point_to_the_config_artifact_and_every_key_is_valid_and_distinct():
    from mlflow.utils.validation import path_not_unique, validate_param_and_metric_name

    long_list = list(range(2000))
    config = {"scales": long_list, "bounds": {"age (years)": [0, 120], "age [years]": [0, 99]},
              "x" * 300: 1, "plain": "text"}
    params = mlflow_fields.params(config)
    assert params["plain"] == "text"
    note = params["scales"]
    assert f"{len(json.dumps(long_list))} characters" in note and mlflow_fields.CONFIG_ARTIFACT in note
    assert len(params) == 5  # nested bounds flattened: two distinct keys though both clean to "bounds.age _years_"
    names = [DPSGD_CURVE, "x|y", "x/y", "//", "." * 3, "a/", "é" * 10, "k" * 400]
    keys = mlflow_fields.mlflow_keys(names)
    assert len(set(keys.values())) == len(names)
    for key in [*keys.values(), *params]:
        assert len(key) <= mlflow_fields.KEY_MAX and validate_param_and_metric_name(key), key
        assert not path_not_unique(key), key
    assert keys[DPSGD_CURVE] == "test_acc/alpha_0/seed_0" and keys["é" * 10] == "é" * 10
