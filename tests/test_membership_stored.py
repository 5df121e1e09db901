"""Issue 38, item 4: a membership attack on a run can target its stored model (``audit membership --target-run ID``,
the ``stored_model`` knob; privengine.audit.membership_stored): the kept model's scores on the run's private rows
against its held-out rows, under the bound of that model's claim, refused where it cannot be played, and listed in
the ledger as the recipe attack is.

Small: the recipe is tests/test_membership.py's (285 private digits, an MLP), five epochs, two seeds (the attacked
model's ε is then its own, under the run's headline), two reference models; a user data set's run is a linear model
on 150 table rows.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import roc_auc_score

from privengine import cli
from privengine.audit import NO_BOUND, AuditResult, result_of
from privengine.audit.cli import level_lines
from privengine.audit.membership import dp_tpr_bound, exceeds, roc_summary, tradeoff_fields, true_label_log_prob
from privengine.audit.membership_job import (MEMBERSHIP, MEMBERSHIP_FRONTIER, MembershipAuditConfig, measured_output,
                                             setting_rows, stored_attacks)
from privengine.audit.membership_stored import ADD_REMOVE, MEANING, REPLACE_ONE
from privengine.claims import claims_of, headline_of
from privengine.datasets import load_dataset
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.run import load
from privengine.errors import ConfigError
from privengine.figures import membership as figures
from privengine.kept_models import loader
from privengine.ledger import ledger_of
from privengine.report.build import run_report
from tests.conftest import app_page, run_cli
from tests.test_membership import RECIPE

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing", "ignore:Optimal order")
RUN = {**RECIPE, "epochs": 5.0, "device": "cpu", "n_seeds": 2}


def _ended(store, state: str = "finished", **overrides) -> str:
    """A run record of the recipe, ended without training (no kept model)."""
    run_id = store.create_run("dpsgd", DPSGDConfig().replace(**{**RUN, **overrides}).to_dict())
    store.mark_running(run_id, device="cpu")
    store.mark_ended(run_id, state, summary={})
    return run_id


def _attack(manager, run_id: str, **knobs) -> tuple[str, dict]:
    attack_id = manager.submit(MEMBERSHIP, {"run": run_id, "stored_model": True, "device": "cpu", **knobs})
    attack = manager.wait(attack_id, timeout=300)
    assert attack.state == "finished", attack.traceback
    return attack_id, measured_output(attack.summary)


def _model_alone(summary: dict) -> float:
    """The ε of the run's claim on each of its models alone (on its one model), as the run stored it."""
    return next(c.epsilon for c in claims_of(summary) if c.label in ("each trained model alone", "the trained model"))


@pytest.mark.slow
def test_the_attack_scores_the_stored_model_under_its_claim_and_is_listed_in_the_ledger(manager, store):
    run_id = manager.submit("dpsgd", DPSGDConfig().replace(**RUN))
    run = manager.wait(run_id, timeout=300)
    assert run.state == "finished", run.traceback
    loss_id, loss = _attack(manager, run_id, attack="loss")
    # the target's scores are the kept model's, loaded as predict loads it, on the run's rows reloaded from its config
    task = load(DPSGDConfig.from_dict(run.config), torch.device("cpu"), should_stop=lambda: False,
                progress=lambda *a: None)
    x = torch.cat([task.x_private, task.x_val, task.x_test])
    y = torch.cat([task.y_private, task.y_val, task.y_test]).numpy()
    with torch.no_grad():
        logits = loader.load(store.models_dir(run_id)).network(x).double().numpy()
    is_member = np.arange(len(x)) < task.n_private
    assert (loss["members"], loss["non_members"]) == (task.n_private, task.n_val + task.n_test)
    assert loss["auc"] == pytest.approx(roc_auc_score(is_member, true_label_log_prob(logits, y)), abs=1e-12)
    # its claim is that model's own, as the run stored it: the per-model claim, under the headline of both models
    assert loss["epsilon"] == pytest.approx(_model_alone(run.summary), rel=1e-9)
    assert loss["epsilon"] < headline_of(run.summary).epsilon
    assert loss["target"]["noise_multiplier"] == run.summary["noise_multiplier"]
    assert loss["attacked"].startswith("stored model") and loss["neighbouring"].startswith("replace one")
    assert "one_run" not in loss and "non_private_twin" not in loss
    # no audited ε: absent, never a measured 0, and the claim says the digits bound is applied twice
    result = result_of(store.get_run(loss_id).summary)
    assert store.get_run(loss_id).summary["audited_epsilon_lower"] is None and not result.refutes_claim
    assert result.headline().startswith(NO_BOUND) and "ε ≥" not in "".join(result.summary_lines())
    assert "applied twice (group of 2)" in result.claim and MEANING in result.notes
    assert "applied twice" in figures.verdict(loss)
    fig = figures.roc(loss)
    assert "applied twice" in fig.layout.title.text and any("applied twice" in t.name for t in fig.data)
    # LiRA with reference models, under the bound of a replace-one game (the model's bound applied twice)
    lira_id, lira = _attack(manager, run_id, reference_models=2, models_per_pass=0)
    eps, delta = lira["epsilon"], lira["delta"]
    assert lira["reference_models_so_far"] == 2 and len(lira["pld_bound_curve"]["tpr"]) > 0
    assert lira["bound_at_fpr"]["0.01"] == pytest.approx(dp_tpr_bound(dp_tpr_bound(0.01, eps, delta), eps, delta))
    assert lira["bound_at_fpr"]["0.01"] > dp_tpr_bound(0.01, eps, delta)
    # listed with the run, and in its source's ledger as an audit no claim covers
    assert {r.id for r in stored_attacks(store, run_id)} == {loss_id, lira_id}
    ledger = ledger_of(store, store.data_source_of(run_id))
    audits = {u.run.id for u in ledger.uncovered if u.kind == "audit"}
    assert {loss_id, lira_id} <= audits and run_id in {s.run_id for s in ledger.shares}
    report = run_report(store, run_id)  # the run's report draws its attack, named, with no one-run bound
    assert "stored model model-1" in report and NO_BOUND in report and "one-run bound" not in report
    listed = run_cli("runs")  # the runs listing says the same
    assert f"{NO_BOUND}; claimed ε" in listed.stdout and "audited ε ≥ 0 " not in listed.stdout
    # the run's page offers the stored model (this run kept one) and draws its latest attack, which has no twin
    at = app_page("pages/dpsgd.py", run=run_id)
    assert not at.exception, [e.message for e in at.exception]
    assert "Attack the stored model" in [c.label for c in at.checkbox]
    labels = {m.label: m.value for m in at.metric}
    assert float(labels["Attack AUC"]) == pytest.approx(lira["auc"], abs=1e-3) and "Non-private twin AUC" not in labels
    picker = next(s for s in at.selectbox if s.label == "Show another attack of this run")
    assert len(picker.options) == 2 and all(" · stored model · " in o for o in picker.options)  # its kind named
    at.query_params["run"] = _ended(store)  # a run that kept no model: no such choice
    at.run()
    assert "Attack the stored model" not in [c.label for c in at.checkbox]
    # the command line: the same job, printed as one object
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["audit", "membership", "--target-run", run_id, "--attack", "loss", "--json"], stdout=out,
                    stderr=err) == 0, err.getvalue()
    document = json.loads(out.getvalue())
    assert document["run"] == run_id and document["auc"] == pytest.approx(loss["auc"], abs=1e-12)
    assert store.get_run(document["audit_run"]).config["stored_model"] is True
    out = io.StringIO()  # and as text
    assert cli.main(["audit", "membership", "--target-run", run_id, "--attack", "loss"], stdout=out,
                    stderr=io.StringIO()) == 0
    assert f"audited:  {NO_BOUND}" in out.getvalue() and "ε ≥ 0" not in out.getvalue()
    # rows that are no longer the run's (here: a kept accuracy the reloaded rows do not give) stop the attack
    spec_file = store.models_dir(run_id) / "model-1.json"
    spec = json.loads(spec_file.read_text(encoding="utf-8"))
    for key, part in (("val_acc", "validation"), ("test_acc", "test")):  # each part's accuracy is compared
        wrong = {**spec, "metrics": {**spec["metrics"], key: 1.0 - spec["metrics"][key]}}
        spec_file.write_text(json.dumps(wrong), encoding="utf-8")
        changed = manager.wait(manager.submit(MEMBERSHIP, {"run": run_id, "stored_model": True, "attack": "loss",
                                                           "device": "cpu"}), timeout=300)
        assert changed.state == "failed" and "no longer gives the rows it trained on" in changed.error
        assert f"on the reloaded {part} part" in changed.error
    # a kept model the stored summary does not list as it is: its history cannot be read, so it is refused
    spec["model"]["steps"] += 1
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    with pytest.raises(ConfigError, match="lists no model 0 of seed"):
        MembershipAuditConfig(run=run_id, stored_model=True).validate().target(store)


def test_a_run_the_attack_cannot_play_is_refused_before_anything_runs(store):
    def refused(run_id: str, **knobs) -> str:
        with pytest.raises(ConfigError) as caught:
            MembershipAuditConfig(run=run_id, stored_model=True, **knobs).validate().target(store)
        return str(caught.value)

    assert "kept no model (its keep_model knob was off)" in refused(_ended(store, keep_model=False))
    assert "kept no model (it stopped or failed" in refused(_ended(store, state="stopped"))
    assert "is still queued" in refused(store.create_run("dpsgd", DPSGDConfig().replace(**RUN).to_dict()))
    assert "regression" in refused(_ended(store, dataset="linreg", model="auto"))
    assert "its own test split" in refused(_ended(store, dataset="fashion_mnist", model="scatter_linear"))
    finished = _ended(store)
    assert "`target_epsilon` must be 0" in refused(finished, target_epsilon=2.0)
    assert "`attack` must be lira or loss" in refused(finished, attack="rmia")
    with pytest.raises(ConfigError, match="`run` must name a finished run"):
        MembershipAuditConfig(stored_model=True).validate()


def test_the_cli_names_its_flag_and_refuses_a_mechanism_whose_model_it_cannot_score(store):
    pate = store.create_run("pate", {})
    store.mark_running(pate, device="cpu")
    store.mark_ended(pate, "finished", summary={})
    for run_id, message in ((pate, "`--target-run` is a pate run; only a DP-SGD run's kept model"),
                            (_ended(store, keep_model=False), "`--target-run` kept no model"),
                            ("nosuchrun", "`--target-run` must be the id of a stored run")):
        err = io.StringIO()
        assert cli.main(["audit", "membership", "--target-run", run_id], stdout=io.StringIO(), stderr=err) == 2
        assert message in err.getvalue()
    assert store.list_runs(mechanism=MEMBERSHIP) == []  # refused before anything was queued


def test_the_job_makes_the_checks_the_command_line_makes(manager, store):
    """Submitted straight to the job manager (no ``target()`` call first), a run the game cannot be played on fails
    with the reason the command line and the page give, before any model is scored."""
    for overrides, reason in (({"sampling": "shuffle"}, "not Poisson samples"),
                              ({"dataset": "linreg", "model": "auto"}, "is a regression"),
                              ({"normalization": "private", "model": "scatter_linear"}, "private normalisation")):
        attack = manager.wait(manager.submit(MEMBERSHIP, {"run": _ended(store, **overrides), "stored_model": True,
                                                          "attack": "loss", "device": "cpu"}), timeout=300)
        assert attack.state == "failed" and reason in attack.error, (overrides, attack.error)


def _table_with_repeats(path) -> None:
    """150 rows (a, b, colour, label); among the 130 private rows (after the 20 public ones) five contents twice
    and one three times."""
    rng = np.random.default_rng(0)
    a, b = rng.uniform(-2, 2, size=(2, 150))
    colour = rng.choice(["red", "blue"], 150)
    for copy, source in ((40, 30), (50, 31), (60, 32), (70, 33), (80, 34), (90, 35), (100, 35)):
        a[copy], b[copy], colour[copy] = a[source], b[source], colour[source]
    frame = pd.DataFrame({"a": a, "b": b, "colour": colour})
    frame["label"] = np.where(frame["a"] + frame["b"] > 0, "pos", "neg")
    frame.to_csv(path, index=False)


@pytest.mark.slow
def test_a_user_data_set_is_attacked_as_add_or_remove_without_its_repeated_rows(manager, store, tmp_path):
    _table_with_repeats(tmp_path / "tiny.csv")
    added = run_cli("data", "add", "tiny", str(tmp_path / "tiny.csv"), "--label", "label", "--classes", "neg,pos",
                    "--categorical", "colour=red,blue", "--bounds", "*=-3:3", "--public-rows", "20",
                    "--private-size", "130")
    assert added.returncode == 0, added.stderr
    run_id = manager.submit("dpsgd", DPSGDConfig().replace(
        dataset="tiny", model="linear", alphas=(0.0,), n_seeds=1, noise_mode="sigma", noise_multiplier=1.0,
        batch_size=16, epochs=2.0, device="cpu"))
    run = manager.wait(run_id, timeout=300)
    assert run.state == "finished", run.traceback
    attack_id, out = _attack(manager, run_id, attack="loss")
    # the rows of repeated stored content (features, category, label) among the private part are left out
    private = load_dataset("tiny").private()
    content = np.column_stack([np.asarray(private["x"], dtype=np.float64).reshape(len(private["y"]), -1),
                               private["y"], private["categories"]])
    _, inverse, counts = np.unique(content, axis=0, return_inverse=True, return_counts=True)
    repeated = int((counts[inverse.ravel()] > 1).sum())
    assert repeated == 13 and out["target"]["duplicates_dropped"] == repeated
    assert out["members"] + out["non_members"] == len(private["y"]) - repeated
    notes = result_of(store.get_run(attack_id).summary).notes
    assert any(note.startswith(f"{repeated} rows left out of the pool") for note in notes)
    # add or remove one: the model's own bound, applied once, its ε the run's claim on that model
    eps, delta = out["epsilon"], out["delta"]
    assert out["neighbouring"].startswith("add or remove one")
    assert eps == pytest.approx(_model_alone(run.summary), rel=1e-9)
    assert out["bound_at_fpr"]["0.01"] == pytest.approx(dp_tpr_bound(0.01, eps, delta))
    assert "applied twice" not in figures.verdict(out)


def test_an_audit_without_a_lower_bound_reads_as_none_never_as_zero():
    result = AuditResult(audit=MEMBERSHIP, mechanism="dpsgd", method="m", claim="c", claimed_epsilon=0.5,
                         epsilon_lower=None, confidence=0.95, delta=1e-5)
    stored = json.loads(json.dumps(result.to_dict()))
    assert stored["audited_epsilon_lower"] is None and result_of(stored) == result
    assert not result.refutes_claim and np.isnan(result.tightness)
    assert result.headline() == f"{NO_BOUND}; claimed ε = 0.5, δ = 1e-05"
    assert result.summary_lines()[1] == f"audited:  {NO_BOUND}"


def _stored_output(neighbouring: str) -> dict:
    """A stored model's attack output built by hand (nothing trained): 300 members scored above 1 000 non-members
    (both levels resolved), at ε = 1, δ = 1e-5, under the game's ``neighbouring`` relation, with its (ε, δ) bound
    ``b`` and a PLD one (here ``b`` at ε = 0.8, standing in for the history's), each applied twice where the game
    replaces one (``b(b(FPR))``)."""
    def one(eps):
        return lambda fpr: dp_tpr_bound(fpr, eps, 1e-5)

    def game(bound):
        return (lambda fpr: bound(bound(fpr))) if neighbouring == REPLACE_ONE else bound

    scores = np.r_[np.arange(300) + 10_000.0, np.arange(1_000.0)]
    is_member = np.r_[np.ones(300, bool), np.zeros(1_000, bool)]
    out = roc_summary(scores, is_member, bound=game(one(1.0))) | tradeoff_fields("pld", game(one(0.8)))
    return out | {"exceeds_pld_bound": exceeds(out, game(one(0.8))), "attack": "loss", "epsilon": 1.0,
                  "delta": 1e-5, "accountant": "rdp", "reference_models": 0, "neighbouring": neighbouring,
                  "attacked": "stored model m of run r", "target": {"test_accuracy": 0.9}}


def test_every_bound_shown_of_a_replace_one_game_says_it_is_applied_twice():
    """Review item: a stored digits model's game replaces one example, so its bounds are the model's applied twice;
    the CLI's per-level lines, the audited-settings columns, the tile's bound name (the chart's), the legend, the
    title and the verdict all say so; an add-or-remove game (a user data set) says nothing of the kind."""
    twice = "applied twice (replace one"
    digits, user = _stored_output(REPLACE_ONE), _stored_output(ADD_REMOVE)
    lines = level_lines(digits)
    assert len(lines) == 2 and all("DP bound" in line and "(PLD" in line and twice in line for line in lines)
    assert not any("twice" in line for line in level_lines(user))
    (row,) = setting_rows(digits, MembershipAuditConfig())
    bound_columns = [c for c in row if "bound at" in c]
    assert len(bound_columns) == 4 and all(twice in c for c in bound_columns)  # (ε, δ) and PLD, at 0.1 % and 1 %
    (row,) = setting_rows(user, MembershipAuditConfig())
    assert sorted(c for c in row if "bound at" in c) == ["(ε, δ) bound at 0.1 %", "(ε, δ) bound at 1 %",
                                                        "PLD bound at 0.1 %", "PLD bound at 1 %"]
    name, bound = figures.tightest_bound(digits)  # the tile's help names the bound by this
    assert name.startswith("PLD trade-off bound") and twice in name and bound == digits["pld_bound_at_fpr"]
    assert twice not in figures.tightest_bound(user)[0]
    fig = figures.roc(digits)
    assert twice in fig.layout.title.text and twice in figures.verdict(digits)
    assert any(t.name.startswith("the most ε") and twice in t.name for t in fig.data)


def test_the_frontier_names_the_test_accuracy_of_a_recipe_and_of_a_stored_model():
    (accuracy,) = [a for a in MEMBERSHIP_FRONTIER.utility if a.name == "target_test_accuracy"]
    assert "retrained on about half the private split" in accuracy.label
    assert "a stored model: the kept model on the run's test part" in accuracy.label
