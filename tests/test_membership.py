"""Issue 27: membership-inference attacks (privengine.audit.membership, .membership_dpsgd) drawn under the DP bound.

Soundness: on a DP-SGD target at eps = 1 no attack beats the (eps, delta) bound at the FPRs of the grid (beyond the
Clopper-Pearson intervals) and its one-run bound stays under the claim. Power: the same recipe without clipping and
noise, on the same halves, is attacked far better: LiRA's AUC on it well above 0.5, its guesses' one-run bound above
the private model's claim. The bound against hand-computed values; the model batch's
inclusion masks (no mask: unchanged to the bit; masked examples never sampled).
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch

import privengine.dpsgd.mechanism  # noqa: F401  (registers dpsgd)
from privengine.accounting.subsampled_gaussian import epsilon_of
from privengine.audit.membership import (dp_tpr_bound, lira_scores, logit_confidence, pld_tpr_bound, rmia_scores,
                                         roc_summary, true_label_log_prob)
from privengine.audit import membership_dpsgd
from privengine.audit.membership_dpsgd import attack_dpsgd, draw_halves
from privengine.audit.membership_result import MembershipResult
from privengine.dpsgd.config import DPSGDConfig
from privengine.dpsgd.data import load_task
from privengine.dpsgd.model_batch import Member, _Batch
from privengine.dpsgd.training import Plan
from privengine.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing", "ignore:Optimal order")

# A tiny private set (285 digits, 142 members) and many epochs: without noise the MLP overfits it.
RECIPE = dict(dataset="digits", model="mlp", train_limit=300, batch_size=32, epochs=30.0, lr=0.5, max_grad_norm=1.0,
              target_epsilon=1.0, delta=1e-5, accountant="rdp", alphas=(0.0,), n_seeds=1)
CPU = torch.device("cpu")


@pytest.fixture(scope="module")
def attacked():
    """LiRA with 8 reference models on the eps = 1 recipe and on its non-private twin (one training of each): the
    result's JSON object, as jobs store it."""
    return attack_dpsgd(DPSGDConfig().replace(**RECIPE), attack="lira", reference_models=8, seed=0, device="cpu",
                        guesses=40).to_dict()


# --------------------------------------------------------------------------- the bound


def test_the_dp_bound_matches_hand_computed_values():
    e = math.e
    assert dp_tpr_bound(0.01, 1.0, 1e-5) == pytest.approx(e * 0.01 + 1e-5)
    assert dp_tpr_bound(0.0, 1.0, 1e-5) == pytest.approx(1e-5)
    # past the kink the second branch binds: 1 - e^-1 (1 - 0 - 0.5) = 0.81606
    assert dp_tpr_bound(0.5, 1.0, 0.0) == pytest.approx(1 - 0.5 / e)
    assert dp_tpr_bound(0.001, 0.0, 0.0) == pytest.approx(0.001)  # eps = 0, delta = 0: no test beats chance
    assert dp_tpr_bound(0.2, 10.0, 0.0) == pytest.approx(1 - 0.8 * math.exp(-10))  # the second branch
    np.testing.assert_allclose(dp_tpr_bound(np.array([0.001, 0.01]), math.log(2), 0.01), [0.012, 0.03])


def test_the_pld_trade_off_is_tighter_than_its_own_epsilon_and_above_chance():
    history = [(1.0, 0.1, 200)]
    eps = epsilon_of(history, accountant="prv", delta=1e-5)[0]
    fprs = np.array([0.001, 0.01, 0.1])
    pld = pld_tpr_bound(fprs, history)
    assert np.all(pld <= dp_tpr_bound(fprs, eps, 1e-5) + 1e-9)
    assert np.all(pld >= fprs)
    assert pld_tpr_bound(0.01, [(50.0, 0.01, 10)]) == pytest.approx(0.01, abs=2e-3)  # almost no leakage


# --------------------------------------------------------------------------- scores and ROC


def test_confidences_are_the_logit_and_log_of_the_true_label_probability():
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(3, 6, 4)) * 3, np.array([0, 1, 2, 3, 0, 1])
    p = torch.softmax(torch.as_tensor(logits), -1).numpy()[..., labels][:, np.arange(6), np.arange(6)]
    np.testing.assert_allclose(true_label_log_prob(logits, labels), np.log(p), rtol=1e-10)
    np.testing.assert_allclose(logit_confidence(logits, labels), np.log(p / (1 - p)), rtol=1e-8)
    assert np.isfinite(logit_confidence(np.array([[[200.0, 0.0]]]), np.array([0])))  # p_y rounds to 1


def test_lira_and_rmia_find_members_on_synthetic_confidences():
    """phi ~ N(mu_i + 1.5 [member], 1) with per-example difficulty mu_i: the per-example calibration of LiRA (and
    RMIA's Pr(x)) beats the global threshold of the loss attack."""
    rng = np.random.default_rng(1)
    n, r = 2000, 16
    mu = rng.normal(0, 3, n)
    ref_in = (rng.random((r, n)).argsort(0) < r // 2)
    ref_phi = mu + 1.5 * ref_in + rng.normal(size=(r, n))
    member = rng.random(n) < 0.5
    target = mu + 1.5 * member + rng.normal(size=n)
    loss_auc = roc_summary(target, member)["auc"]
    for online in (True, False):
        assert roc_summary(lira_scores(target, ref_phi, ref_in, online=online), member)["auc"] > loss_auc + 0.1
    mu_z = rng.normal(0, 3, 500)  # the population z: never trained on
    ref_phi_z, target_phi_z = mu_z + rng.normal(size=(r, 500)), mu_z + rng.normal(size=500)

    def sigmoid(t):
        return 1 / (1 + np.exp(-t))

    scores = rmia_scores(sigmoid(target), sigmoid(ref_phi), ref_in, sigmoid(target_phi_z), sigmoid(ref_phi_z))
    assert roc_summary(scores, member)["auc"] > loss_auc + 0.05


def test_rmia_counts_the_population_dominated_and_breaks_its_ties_by_the_ratio():
    """s(x) = (#{z: ratio(z) < ratio(x)} + u) / (m + 1), u in (0, 1) increasing in ratio(x): the population's count
    (the paper's score, times m / (m + 1)) decides, and the examples that dominate as many z (here: all of them, the
    low-FPR end of the ROC) keep the order of their ratios instead of tying."""
    ref = np.full((2, 4), 0.5)  # Pr(x) = Pr(z) = 0.5 for all: ratio = 2 p_target
    target_x, target_z = np.array([0.9, 0.95, 0.2, 0.99]), np.array([0.1, 0.3, 0.6])
    scores = rmia_scores(target_x, ref, np.zeros((2, 4), dtype=bool), target_z, np.full((2, 3), 0.5))
    counts = np.array([3, 3, 1, 3])  # z dominated by each x
    assert (np.floor(scores * 4) == counts).all()  # (count + u) / 4 with u < 1
    assert list(np.argsort(scores)) == [2, 0, 1, 3]  # the three that dominate every z, in the order of their ratio


def test_roc_summary_counts_intervals_and_bound_flags():
    member = np.r_[np.ones(100, bool), np.zeros(100, bool)]
    scores = np.r_[np.arange(100) + 1000.0, np.arange(100.0)]  # perfect separation
    out = roc_summary(scores, member, epsilon=1.0, delta=0.0)
    assert out["auc"] == 1.0 and out["members"] == 100 and out["non_members"] == 100
    assert out["tpr_at_fpr"] == {"0.01": 1.0} and out["false_positives_at_fpr"] == {"0.01": 1}
    assert out["below_resolution_at_fpr"] == {"0.001": 1000}  # 100 non-members cannot show an FPR of 0.001
    lo, hi = out["tpr_interval_at_fpr"]["0.01"]
    assert lo == pytest.approx(0.025 ** (1 / 100)) and hi == 1.0  # Clopper-Pearson at 97.5 % one-sided
    assert out["exceeds_bound"] == {"0.01": True}
    chance = roc_summary(np.zeros(200), member, epsilon=1.0, delta=0.0)
    assert chance["auc"] == 0.5 and not any(chance["exceeds_bound"].values())


# --------------------------------------------------------------------------- the model batch's halves


def test_halves_are_balanced_and_independent_of_the_target():
    halves = draw_halves(101, 8, torch.Generator().manual_seed(0))
    assert halves.shape == (9, 101) and 30 < int(halves[0].sum()) < 71  # independent coins: about half
    assert (halves[1:].sum(0) == 4).all()
    for j in range(1, 9, 2):  # complementary pairs: every even prefix is balanced too (the ROC after each pass)
        assert (halves[j] ^ halves[j + 1]).all() and int(halves[j].sum()) == 50
        assert (halves[1:j + 2].sum(0) == (j + 1) // 2).all()
    coins = draw_halves(20_000, 2, torch.Generator().manual_seed(1))[0].float()
    lag_one = torch.corrcoef(torch.stack([coins[:-1], coins[1:]]))[0, 1]
    assert abs(coins.mean().item() - 0.5) < 0.02 and abs(lag_one) < 0.03
    with pytest.raises(ConfigError, match="reference_models"):
        draw_halves(10, 3, torch.Generator())


def test_an_inclusion_mask_restricts_sampling_and_no_mask_changes_nothing():
    task = load_task(dataset="digits", seed=0, public_fraction=0.05, train_limit=300, data_root="", device=CPU)
    config = DPSGDConfig().replace(**{**RECIPE, "epochs": 1.0, "noise_mode": "sigma"})
    plan = Plan(noise_multiplier=1.0, sample_rate=0.2, steps=5, expected_batch_size=32)
    members = [Member(0.0, seed, seed, lambda *a: None) for seed in range(3)]
    plain = _Batch(task, config, plan, members, CPU)
    everything = _Batch(task, config, plan, members, CPU, inclusion=torch.ones(3, task.n_private, dtype=torch.bool))
    plain.run(lambda: False)
    everything.run(lambda: False)
    for a, b in zip(plain.optimizer.params, everything.optimizer.params):
        assert torch.equal(a, b)
    halves = draw_halves(task.n_private, 2, torch.Generator().manual_seed(3))
    masked = _Batch(task, config, plan, members, CPU, inclusion=halves)
    for _ in range(20):
        idx, valid, _ = masked.sampling.draw()
        for k in range(3):
            assert halves[k, idx[k][valid[k]]].all()


# --------------------------------------------------------------------------- the attack on DP-SGD


def test_the_attack_on_a_dp_sgd_target_stays_under_its_bound(attacked):
    assert attacked["epsilon"] == pytest.approx(1.0, abs=0.05)
    assert attacked["members"] + attacked["non_members"] == 285 and 100 < attacked["members"] < 185
    assert attacked["one_run"]["epsilon_lower"] <= attacked["epsilon"]  # the audited bound stays under the claim
    for name, result in attacked["all_attacks"].items():
        assert not any(result["exceeds_bound"].values()), name
        assert not any(result["exceeds_pld_bound"].values()), name  # nor above the tighter PLD bound
    for key, tpr in attacked["tpr_at_fpr"].items():
        fpr_hi = attacked["fpr_interval_at_fpr"][key][1]
        assert attacked["tpr_interval_at_fpr"][key][0] <= dp_tpr_bound(fpr_hi, attacked["epsilon"], 1e-5)
        assert attacked["pld_bound_at_fpr"][key] <= attacked["bound_at_fpr"][key] + 1e-9
    assert attacked["auc"] < 0.62


def test_the_non_private_twin_breaks_the_bound_and_lira_finds_it(attacked):
    twin = attacked["non_private_twin"]
    assert twin["auc"] > 0.7 and twin["auc"] > attacked["auc"] + 0.15  # LiRA on an overfit model
    # its guesses refute the private model's claim (the one-run bound: sound whatever the examples share)
    assert twin["one_run"]["epsilon_lower"] > 1.5 * attacked["epsilon"]
    assert twin["tpr_interval_at_fpr"]["0.01"][0] > 5 * 0.01  # a visible attack at FPR 1 % (0.1 %: below resolution)


def test_the_cli_prints_one_json_object_and_refuses_other_targets(monkeypatch, attacked):
    from privengine import cli
    from privengine.audit import cli as audit_cli
    from privengine.audit import membership_dpsgd
    from privengine.store import RunStore

    store = RunStore()  # conftest: this test's own PRIVENGINE_HOME, the CLI's store too
    run_id = store.create_run("dpsgd", DPSGDConfig().replace(**RECIPE).to_dict())
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["audit", "membership", "--run", run_id, "--json"], stdout=out, stderr=err) == 2
    assert "is still queued" in err.getvalue()  # refused before anything is queued
    store.mark_running(run_id, device="cpu")
    store.mark_ended(run_id, "finished", summary={})
    monkeypatch.setattr(membership_dpsgd, "attack_dpsgd", lambda config, **kw: MembershipResult.from_dict(attacked))
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["audit", "membership", "--run", run_id, "--json"], stdout=out, stderr=err) == 0
    document = json.loads(out.getvalue())
    assert list(document)[:12] == ["run", "attack", "epsilon", "delta", "members", "non_members",
                                   "reference_models", "auc", "tpr_at_fpr", "below_resolution_at_fpr",
                                   "bound_at_fpr", "non_private_twin"]
    # about 140 non-members: FPR 0.001 is below resolution, marked and given no TPR (issue 35)
    assert set(document["tpr_at_fpr"]) == {"0.01"} and set(document["bound_at_fpr"]) == {"0.001", "0.01"}
    assert document["below_resolution_at_fpr"] == {"0.001": 1000}
    out = io.StringIO()
    assert cli.main(["audit", "membership", "--run", run_id], stdout=out, stderr=io.StringIO()) == 0
    lines = [line for line in out.getvalue().splitlines() if line.startswith("FPR ")]
    assert lines[0] == (f"FPR 0.001: below resolution (needs ≥ 1000 non-members), no TPR reported; this attack had "
                        f"{attacked['non_members']}")
    assert lines[1].startswith("FPR 0.01: TPR ") and len(lines) == 2
    assert {"auc", "tpr_at_fpr"} <= set(document["non_private_twin"])
    assert audit_cli.membership_json(attacked, run_id)["run"] == run_id
    stored = store.get_run(document["audit_run"])  # the attack is a stored audit run of that run
    assert stored.mechanism == "dpsgd-membership" and stored.config["run"] == run_id and stored.state == "finished"
    one_pass = io.StringIO()  # every model of a side in one batch (fastest on a GPU), and a value out of range
    assert cli.main(["audit", "membership", "--run", run_id, "--models-per-pass", "0", "--json"], stdout=one_pass,
                    stderr=io.StringIO()) == 0
    assert store.get_run(json.loads(one_pass.getvalue())["audit_run"]).config["models_per_pass"] == 0
    err = io.StringIO()
    assert cli.main(["audit", "membership", "--run", run_id, "--models-per-pass", "-1"], stdout=io.StringIO(),
                    stderr=err) == 2
    assert "models_per_pass" in err.getvalue() or "models per pass" in err.getvalue().lower()
    other = store.create_run("split_label", {})
    assert cli.main(["audit", "membership", "--run", other, "--json"], stdout=io.StringIO(), stderr=err) == 2
    assert "membership attacks cover dpsgd, pate runs" in err.getvalue()
    with pytest.raises(ConfigError, match="model batch"):
        membership_dpsgd.check_target(DPSGDConfig().replace(**{**RECIPE, "model": "cnn"}))


@pytest.mark.parametrize("on_device", [False, True])
def test_the_attack_models_never_draw_a_stream_of_the_run_they_attack(monkeypatch, on_device):
    """Attacked with the run's own seed, a one-seed isotropic run's recipe equals the attack's: the model indices
    keep the attack's noise and sampling streams apart from the run's (which number their models from 0). On a GPU
    (``on_device``: the model batch's choice patched, so that it runs here) the masks have a stream of their own."""
    from privengine.dpsgd import model_batch, training

    sampling = training.STREAM_SAMPLING_ON_DEVICE if on_device else training.STREAM_SAMPLING
    monkeypatch.setattr(model_batch, "poisson_on_device", lambda device: on_device)
    keys = []
    real = model_batch.noise_generator

    def recording(config, *key, **kw):
        keys.append(key)
        return real(config, *key, **kw)

    monkeypatch.setattr(model_batch, "noise_generator", recording)  # the noise
    monkeypatch.setattr(training, "noise_generator", recording)  # the sampling (training.private_sampler)
    out = attack_dpsgd(DPSGDConfig().replace(**{**RECIPE, "epochs": 1.0}), attack="loss", reference_models=2, seed=0,
                       device="cpu", twin=False, pld=False)
    assert {stream for _seed, _index, stream in keys} == {training.STREAM_NOISE, sampling}
    assert all(index >= membership_dpsgd.ATTACK_INDEX for _seed, index, _stream in keys)
    assert out.privacy.startswith("Not covered by any privacy claim")


def test_an_attack_is_checked_against_the_pld_bound_too_and_shuffled_runs_are_refused():
    """Review of issue 27: at ε ≈ 8 the (ε, δ) bound is near 1 at every FPR, so only the PLD trade-off bound of the
    attacked model's history can flag a broken mechanism; a run trained on shuffled batches has no proven ε to test."""
    from privengine.audit.membership import above_a_bound, exceeds, pld_tpr_bound
    from privengine.audit.membership_dpsgd import check_target
    from privengine.dpsgd.config import DPSGDConfig
    from privengine.errors import ConfigError

    history = [(1.1218, 64 / 950, 445)]  # the fmnist-membership preset's attacked model: ε ≈ 7.99
    summary = {"tpr_interval_at_fpr": {"0.001": [0.5, 0.6], "0.01": [0.01, 0.05]},
               "fpr_interval_at_fpr": {"0.001": [0.0, 0.0038], "0.01": [0.004, 0.0176]}}
    assert exceeds(summary, lambda fpr: dp_tpr_bound(fpr, 7.99, 1e-5)) == {"0.001": False, "0.01": False}
    pld = exceeds(summary, lambda fpr: pld_tpr_bound(fpr, history))
    assert pld == {"0.001": True, "0.01": False}  # TPR >= 0.5 at FPR <= 0.0038: above the PLD bound (about 0.13)
    assert above_a_bound({"exceeds_bound": {"0.01": False}, "exceeds_pld_bound": pld})
    assert not above_a_bound({"exceeds_bound": {"0.01": False}})
    with pytest.raises(ConfigError, match="shuffled pass"):
        check_target(DPSGDConfig(dataset="digits", model="mlp", sampling="shuffle"))
