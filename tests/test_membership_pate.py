"""Issue 27: membership inference on PATE (privengine.audit.membership_pate, .membership_pate_job).

The game fits PATE's replace-one claim: every model trains on one example of each random pair, so the halves of a
game are neighbours of one size and the swapped example sits in the same teacher's part. Soundness: the attack on
the student stays under the (eps, delta) bound of its a-priori claim, and that claim is the aggregator's RDP of
every submitted query, checked against the closed form. Power: PATE's non-private baseline (the twin) trained on the
same halves is attacked visibly better than chance, and its guesses refute a claim far smaller than the student's.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
import torch

from privengine.audit.membership import dp_tpr_bound, exceeds
from privengine.audit.membership_job import stored_attacks
from privengine.audit.membership_pate import attack_pate, check_target, draw_pair_halves, pair_guesses
from privengine.audit.membership_pate_job import DEMO, PateMembershipConfig, target_config
from privengine.audit.membership_result import MembershipResult
from privengine.errors import ConfigError
from privengine.pate.config import PateConfig
from privengine.pate.ensemble import partition_rows
from privengine.pate.privacy import analyse
from privengine.randomness import data_fingerprint

# six MLP teachers of 108 digits each, GNMax on 60 queries; the baseline trained long enough to overfit
RECIPE = {**DEMO, "teachers": 6, "queries": 60, "teacher_epochs": 10, "student_epochs": 20, "baseline_epochs": 40}


@pytest.fixture(scope="module")
def attacked():
    """LiRA with 4 reference pipelines on the recipe, and on its non-private baseline: the result's JSON object, as
    jobs store it."""
    return attack_pate(PateConfig().replace(**RECIPE), attack="lira", reference_models=4, seed=0, device="cpu",
                       guesses=100).to_dict()


def test_every_model_holds_one_example_of_each_pair_and_references_are_balanced():
    pool_rows, inclusion = draw_pair_halves(11, 6, torch.Generator().manual_seed(3))
    assert pool_rows.shape == (10,) and len(set(pool_rows.tolist())) == 10 and max(pool_rows.tolist()) < 11
    assert inclusion.shape == (7, 10)
    assert (inclusion.view(7, 5, 2).sum(2) == 1).all()  # one of each pair, in every model: sets of one size
    for prefix in (2, 4, 6):  # every even prefix of the references has each example IN exactly half of them
        assert (inclusion[1:prefix + 1].sum(0) == prefix // 2).all()
    firsts = torch.stack([draw_pair_halves(1000, 2, torch.Generator().manual_seed(s))[1][0, 0::2] for s in range(3)])
    assert 0.45 < firsts.double().mean() < 0.55  # the target's coins are fair
    with pytest.raises(ConfigError, match="reference_models"):
        draw_pair_halves(10, 3, torch.Generator())


def test_a_swapped_pair_lands_in_the_same_teacher():
    """Two private sets that differ in one pair's choice are replace-one neighbours for PATE: the partition depends
    on the size and the seed only, so the parts differ in one example of one teacher."""
    x = torch.arange(40.0)[:, None]
    swapped = x.clone()
    swapped[17] = 1000.0
    rows = partition_rows(40, 4, torch.Generator().manual_seed(5))
    assert int((x[rows] != swapped[rows]).sum()) == 1


def test_pair_guesses_rank_the_score_differences():
    scores = np.array([5.0, 0.0, 0.0, 3.0, 1.0, 0.5, 0.2, 0.1])  # pairs: (5, 0), (0, 3), (1, 0.5), (0.2, 0.1)
    is_member = np.array([True, False, False, True, False, True, True, False])
    # differences 5, -3, 0.5, 0.1: "first in" for pair 0 (right), "second in" for pair 1 (right)
    assert pair_guesses(scores, is_member, 2) == (2, 2)
    assert pair_guesses(scores, is_member, 4) == (4, 2)  # "first in" for pair 2 and "second in" for pair 3: wrong


def test_the_student_stays_under_the_bound_of_its_a_priori_claim(attacked):
    q, sigma, delta = RECIPE["queries"], RECIPE["sigma"], 1e-5
    # GNMax's data-independent RDP is q lam / sigma^2 (Papernot et al. 2018); over real orders its best conversion is
    # q / sigma^2 + 2 sqrt(q ln(1/delta) / sigma^2), and the claim's grid of orders can only be above that
    continuous = q / sigma**2 + 2 * math.sqrt(q * math.log(1 / delta) / sigma**2)
    assert continuous - 1e-9 <= attacked["epsilon"] <= continuous * 1.02
    assert attacked["planned_epsilon"] == pytest.approx(attacked["epsilon"])
    assert attacked["members"] == attacked["non_members"] == attacked["pairs"] == 1297 // 2
    target = attacked["target"]
    assert target["queries_submitted"] == q and target["teachers"] == 6 and target["examples_per_teacher"] == 108
    for name, result in attacked["all_attacks"].items():
        assert not any(result["exceeds_bound"].values()), name
    for key in attacked["tpr_at_fpr"]:
        fpr_hi = attacked["fpr_interval_at_fpr"][key][1]
        assert attacked["tpr_interval_at_fpr"][key][0] <= dp_tpr_bound(fpr_hi, attacked["epsilon"], delta)
    assert attacked["one_run"]["epsilon_lower"] <= attacked["epsilon"]
    assert attacked["one_run"]["canaries"] == attacked["pairs"]
    assert 0.3 < attacked["auc"] < 0.6  # the student learns from public queries only: no better than chance


def _headline(report):
    return next(c for c in report.claims if c.headline).epsilon


@pytest.mark.parametrize("aggregator", ["gnmax", "confident_gnmax", "lnmax"])
def test_the_students_claim_is_the_runs_headline_unless_the_run_sanitized(aggregator, attacked):
    """What the page's caption says: the attacked student's claim (a priori, on half the data, no vote read) is the
    run's own headline (its votes, its answered queries, all its data) when the run publishes no sanitized figure,
    and below it when the run does (the student does not make that release)."""
    config = PateConfig().replace(**{**RECIPE, "aggregator": aggregator})
    q, rng, data = config.queries, np.random.default_rng(0), data_fingerprint(np.zeros(1))
    votes = np.stack([np.bincount(rng.integers(0, 3, config.teachers), minlength=10) for _ in range(q)]).astype(float)
    answered = rng.random(q) < 0.6 if aggregator == "confident_gnmax" else np.ones(q, dtype=bool)
    student = _headline(analyse(np.zeros_like(votes), np.ones(q, dtype=bool), config.replace(sanitize=False),
                                n_private=648, data=data))
    assert student == pytest.approx(_headline(analyse(votes, answered, config, n_private=1297, data=data)), rel=1e-12)
    if aggregator == "gnmax":
        assert attacked["epsilon"] == pytest.approx(student, rel=1e-12)
    if aggregator != "lnmax":  # LNMax publishes no sanitized figure
        sanitized = config.replace(sanitize=True)
        assert student < _headline(analyse(votes, answered, sanitized, n_private=1297, data=data))


def test_the_rdp_trade_off_lies_between_the_gaussian_curve_and_the_claims_own_bound():
    """GNMax's a-priori RDP ``q lam / sigma^2`` is that of a Gaussian mechanism of mu = sqrt(2 q) / sigma, whose
    exact trade-off is TPR = Phi(Phi^-1(FPR) + mu): any valid bound of that RDP lies above it; and the claim's own
    (eps, delta) is one member of the family, so the RDP bound lies under it."""
    from scipy.stats import norm

    from privengine.accounting.pate import GNMAX_ORDERS
    from privengine.audit.membership import rdp_tpr_bound
    from privengine.pate.privacy import a_priori_rdp

    fpr = np.logspace(-4, -0.01, 60)
    for sigma, q in ((40.0, 100), (4.0, 60), (150.0, 1300)):
        config = PateConfig().replace(**{**RECIPE, "sigma": sigma, "queries": min(q, 300)})
        q = config.queries
        rdp = a_priori_rdp(config, q, GNMAX_ORDERS)
        bound = rdp_tpr_bound(fpr, GNMAX_ORDERS, rdp, 1e-5)
        gaussian = norm.cdf(norm.ppf(fpr) + math.sqrt(2 * q) / sigma)
        eps = _headline(analyse(np.zeros((q, 10)), np.ones(q, dtype=bool), config.replace(sanitize=False),
                                n_private=648, data=data_fingerprint(np.zeros(1))))
        assert (bound >= gaussian - 1e-12).all(), sigma
        assert (bound <= dp_tpr_bound(fpr, eps, 1e-5) + 1e-12).all(), sigma


def test_a_student_with_a_claim_that_bites_stays_under_both_bounds():
    """At sigma = 40 the student's claim is eps of about 1.35 (bounds well under 1 at both FPR levels): the attack,
    whatever it finds, stays under the (eps, delta) bound and the RDP trade-off bound, which is tighter."""
    out = attack_pate(PateConfig().replace(**{**RECIPE, "sigma": 40.0}), attack="lira", reference_models=2, seed=1,
                      device="cpu", twin=False).to_dict()
    assert out["epsilon"] < 2 and out["bound_at_fpr"]["0.01"] < 0.1
    for key in out["tpr_at_fpr"]:
        assert out["rdp_bound_at_fpr"][key] <= out["bound_at_fpr"][key] + 1e-12
    for name, result in out["all_attacks"].items():
        assert not any(result["exceeds_bound"].values()) and not any(result["exceeds_rdp_bound"].values()), name
    assert out["rdp_bound_curve"]["fpr"][0] == pytest.approx(1e-4)


def test_the_non_private_baseline_is_attacked_better_and_breaks_a_small_claim(attacked):
    twin = attacked["non_private_twin"]
    assert twin["auc"] > 0.54 and twin["auc"] > attacked["auc"] + 0.03
    assert twin["test_accuracy"] > 0.85
    # its guesses refute a claim of epsilon 0.1 (the check has power where a claim is wrong)
    small = exceeds(twin, lambda fpr: dp_tpr_bound(fpr, 0.1, 1e-5))
    assert any(small.values()) or twin["one_run"]["epsilon_lower"] > 0.1


def test_one_typed_result_serves_both_attacks_and_stored_outputs_read_back(attacked):
    """Issue 36, item 5: both drivers fill one MembershipResult, whose to_dict() is the JSON object jobs store; a
    stored object reads back (from_dict) to the same object: this attack's (RDP bound, twin, every attack), a DP-SGD
    attack's (PLD bound) and one stopped before anything was measured."""
    result = MembershipResult.from_dict(attacked)
    assert result.to_dict() == attacked and result.measured
    assert (result.attacked, result.pairs, result.epsilon) == ("PATE student", 1297 // 2, attacked["epsilon"])
    assert set(result.bounds) == {"rdp_bound_at_fpr", "rdp_bound_curve"} and result.summary["auc"] == attacked["auc"]
    assert set(result.all_attacks) == {"lira", "rmia", "loss"} and "auc" in result.non_private_twin
    dpsgd = {"attack": "rmia", "offline": True, "privacy": "not covered", "accountant": "rdp", "delta": 1e-5,
             "reference_models": 2, "pool": 10, "seed": 3, "stopped": False, "planned_epsilon": 1.5, "epsilon": 1.4,
             "target": {"history": [[1.0, 0.1, 20]]}, "pld_bound_at_fpr": {"0.01": 0.05},
             "pld_bound_curve": {"fpr": [0.01], "tpr": [0.05]}, "auc": 0.5, "members": 5, "non_members": 5,
             "exceeds_pld_bound": {}, "one_run": {"guesses": 2, "correct": 1, "epsilon_lower": 0.0},
             "reference_models_so_far": 2, "seconds": 1.5}
    read = MembershipResult.from_dict(dpsgd)
    assert read.to_dict() == dpsgd and set(read.bounds) == {"pld_bound_at_fpr", "pld_bound_curve"}
    assert read.claimed_epsilon(0.0) == 1.4 and read.summary["exceeds_pld_bound"] == {} and read.pairs is None
    stopped = {"attack": "lira", "offline": False, "privacy": "not covered", "delta": 1e-5, "seed": 0,
               "stopped": True, "seconds": 0.2}
    read = MembershipResult.from_dict(stopped)
    assert read.to_dict() == stopped and not read.measured and read.claimed_epsilon(2.0) == 2.0


def test_targets_are_checked_and_noise_is_scaled():
    with pytest.raises(ConfigError, match="at most 64 teachers"):
        check_target(PateConfig().replace(**{**DEMO, "teachers": 100}))
    recipe = target_config(PateMembershipConfig(noise_scale=2.0), None)
    assert recipe.sigma == 2 * DEMO["sigma"] and recipe.dataset == "digits" and not recipe.sanitize
    with pytest.raises(ConfigError, match="noise_scale"):
        PateMembershipConfig(noise_scale=0.0).validate()
    with pytest.raises(ConfigError, match=r"`noise_scale` = 300 takes .*`sigma` must be"):
        target_config(PateMembershipConfig(noise_scale=300.0), None)  # sigma 4 x 300 is above its knob's range


def test_the_cli_routes_a_pate_run_to_its_attack_and_stores_it(monkeypatch, attacked, store):
    from privengine import cli
    from privengine.audit import membership_pate

    run_id = store.create_run("pate", PateConfig().replace(**RECIPE).to_dict())
    store.mark_running(run_id, device="cpu")
    store.mark_ended(run_id, "finished", summary={})
    monkeypatch.setattr(membership_pate, "attack_pate", lambda config, **kw: MembershipResult.from_dict(attacked))
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["audit", "membership", "--run", run_id, "--json"], stdout=out, stderr=err) == 0, err.getvalue()
    document = json.loads(out.getvalue())
    assert document["run"] == run_id and document["attack"] == "lira" and document["epsilon"] == attacked["epsilon"]
    stored = store.get_run(document["audit_run"])
    assert stored.mechanism == "pate-membership" and stored.state == "finished"
    assert [r.id for r in stored_attacks(store, run_id, audit="pate-membership")] == [stored.id]
    crowded = store.create_run("pate", PateConfig().replace(**{**RECIPE, "teachers": 100}).to_dict())
    store.mark_running(crowded, device="cpu")
    store.mark_ended(crowded, "finished", summary={})
    assert cli.main(["audit", "membership", "--run", crowded], stdout=io.StringIO(), stderr=err) == 2
    assert "100 teachers" in err.getvalue()


def test_an_lnmax_student_is_drawn_under_its_claim_alone():
    """LNMax's claim is the moments accountant's: no RDP curve, so no trade-off bound is drawn or checked, and the
    settings table has no trade-off column."""
    from privengine.audit.membership import tradeoff_of
    from privengine.audit.membership_job import setting_rows

    out = attack_pate(PateConfig().replace(**{**RECIPE, "aggregator": "lnmax", "gamma": 0.1}), reference_models=2,
                      seed=2, device="cpu", twin=False).to_dict()
    assert tradeoff_of(out) is None and not any(k.startswith(("rdp_", "pld_")) for k in out)
    checks = {k for attack in out["all_attacks"].values() for k in attack if k.startswith("exceeds_")}
    assert checks == {"exceeds_bound"}
    assert not any("bound at" in k and not k.startswith("(ε, δ)") for k in setting_rows(out, PateMembershipConfig())[0])
