"""A stored run exported as CSV and JSON (:mod:`privengine.figures.export`): the Runs page's downloads and
``python -m privengine export``."""

from __future__ import annotations

import io
import json

import pandas as pd

from privengine.claims import PrivacyClaim
from privengine.figures.export import run_csv, run_json
from privengine.store import EPSILON_BASIS_ARTIFACT


def test_export_csv_and_json(store):
    run_id = store.create_run("toy", {"steps": 2})
    store.add_metrics(run_id, [(0, "loss", 1.0), (0, "acc", 0.1), (1, "loss", 0.5), (2, "acc", 0.7)])
    store.put_artifact(run_id, "hist", {"counts": [1, 2]})
    store.add_log(run_id, "hello")
    store.mark_ended(run_id, "finished", summary={"final": 0.7})
    frame = pd.read_csv(io.StringIO(run_csv(store, run_id)))
    assert list(frame.columns) == ["step", "acc", "loss"]
    assert frame["step"].tolist() == [0, 1, 2]
    assert frame["loss"].tolist()[:2] == [1.0, 0.5] and pd.isna(frame["loss"].iloc[2])
    doc = json.loads(run_json(store, run_id))
    assert doc["run"]["summary"] == {"final": 0.7}
    assert doc["metrics"]["acc"] == {"step": [0, 2], "value": [0.1, 0.7]}
    assert doc["artifacts"]["hist"] == {"counts": [1, 2]}
    assert doc["logs"][0]["text"] == "hello"


def test_exported_epsilon_columns_name_their_delta_and_accountant(store):
    """Issue 24, item 6: an epsilon column says at which delta and by which accountant it was computed."""
    claim = PrivacyClaim("data-independent (a priori)", 2.5, 1e-5, "RDP of GNMax (Papernot et al. 2018)", "replace one",
                         5.0, (), headline=True)
    run_id = store.create_run("pate", {"delta": 1e-5})
    store.add_metrics(run_id, [(1, "eps_data_dependent", 0.3), (1, "eps_realised", 0.2), (1, "teacher_loss_mean", 1.0),
                               (1, "epochs_done", 3.0)])
    store.mark_ended(run_id, "finished", summary={"privacy": [claim.to_dict()]})
    columns = list(pd.read_csv(io.StringIO(run_csv(store, run_id))).columns)
    tag = " [delta = 1e-05; accountant: RDP of GNMax (Papernot et al. 2018) (the run's headline claim)]"
    assert columns == ["step", "epochs_done", "eps_data_dependent" + tag, "eps_realised" + tag, "teacher_loss_mean"]
    # a run that states each curve's own basis (EPSILON_BASIS_ARTIFACT) is exported with it
    store.put_artifact(run_id, EPSILON_BASIS_ARTIFACT,
                       {"eps_realised": {"delta": 1e-5, "accountant": "Thm 6; realised"}})
    columns = list(pd.read_csv(io.StringIO(run_csv(store, run_id))).columns)
    assert columns[2:4] == ["eps_data_dependent" + tag, "eps_realised [delta = 1e-05; accountant: Thm 6; realised]"]
    no_claim = store.create_run("dpsgd", {"delta": 1e-6, "accountant": "prv"})
    store.add_metrics(no_claim, [(5, "epsilon_each_model", 0.9)])
    store.mark_ended(no_claim, "failed", error="boom")
    assert run_csv(store, no_claim).splitlines()[0] == "step,epsilon_each_model [delta = 1e-06; accountant: prv]"
