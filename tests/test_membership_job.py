"""Issue 27: the membership attack as a stored audit job (privengine.audit.membership_job): progress and partial ROCs
pass by pass, the stored result on the attacked run's page (figure) and in its report, the leakage axes of sweeps.

Small: the attacked recipe is 285 private digits (tests/test_membership.py's), with 2-4 reference models.
"""

from __future__ import annotations

import numpy as np
import pytest

from privengine import registry
from privengine.audit import result_of
from privengine.audit.membership import dp_tpr_bound
from privengine.audit.membership_job import MEMBERSHIP, MembershipAuditConfig, run, target_config
from privengine.dpsgd.config import DPSGDConfig
from privengine.errors import ConfigError
from privengine.explore import SweepSpec, runner
from privengine.explore.frontier import run_values
from privengine.figures import run_figures, run_tables
from privengine.figures import membership as figures
from privengine.figures.sweep import frontier_figure, point_seeds
from privengine.report.build import run_report
from tests.conftest import app_page, run_sweep
from tests.test_membership import RECIPE

pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing", "ignore:Optimal order")
LEAKAGE = ("attack_tpr_at_1pct_fpr", "attack_auc")


class Recording:
    """A reporter that keeps what the attack reports (no store, never stops)."""

    device = "cpu"

    def __init__(self):
        self.progress_values, self.metrics, self.artifacts, self.lines = [], [], [], []

    def progress(self, fraction, text=""):
        self.progress_values.append(fraction)

    def metric(self, step, **values):
        self.metrics.append((step, values))

    def artifact(self, name, data):
        self.artifacts.append((name, data))

    def log(self, text):
        self.lines.append(text)

    def should_stop(self):
        return False


def _finished_dpsgd_run(store, **overrides) -> str:
    run_id = store.create_run("dpsgd", DPSGDConfig().replace(**{**RECIPE, **overrides}).to_dict())
    store.mark_running(run_id, device="cpu")
    store.mark_ended(run_id, "finished", summary={})
    return run_id


@pytest.fixture(scope="module")
def recorded():
    reporter = Recording()
    result = run(MembershipAuditConfig(reference_models=4, models_per_pass=2, guesses=40, device="cpu"), reporter)
    return reporter, result


def test_progress_moves_and_the_roc_is_redrawn_after_every_pass(recorded):
    reporter, result = recorded
    values = reporter.progress_values
    assert values[-1] == 1.0 and values == sorted(values) and len(set(values)) > 8  # moves while models train
    partial = [data for name, data in reporter.artifacts if name == "membership"]
    # private: the target with 2 references, then 2 more; the twin likewise
    assert [p["reference_models_so_far"] for p in partial] == [2, 4, 4, 4]
    assert [p.get("non_private_twin", {}).get("reference_models_so_far") for p in partial] == [None, None, 2, 4]
    steps = [step for step, _ in reporter.metrics]
    assert steps == [2, 4, 6, 8] and all("attack_auc" in v and "claimed_epsilon" in v for _, v in reporter.metrics)
    assert result.details["membership"]["auc"] == partial[-1]["auc"]  # the last pass is the result


def test_the_result_states_claim_bound_and_caveat(recorded):
    _, result = recorded
    assert result.audit == MEMBERSHIP and result.mechanism == "dpsgd" and not result.refutes_claim
    assert result.claimed_epsilon == pytest.approx(1.0, abs=0.05) and 0 <= result.epsilon_lower < 1.0
    assert result.notes[0].startswith("Not covered by any privacy claim")
    target, twin = result.details["settings"]
    assert target["claimed_epsilon"] == result.claimed_epsilon and twin["claimed_epsilon"] is None
    assert twin["epsilon_lower"] > result.claimed_epsilon  # without noise, its guesses refute the claim
    assert set(LEAKAGE) <= set(result.values) and set(LEAKAGE) <= set(result.to_dict())


def test_the_roc_figure_draws_the_attack_under_the_tighter_bound_and_the_twin(recorded):
    """The PLD trade-off bound is what ε allows (the (ε, δ) bound, above it, is left out for a reader who is no
    expert; issue 40, item 6)."""
    _, result = recorded
    out = result.details["membership"]
    fig = figures.roc(out)
    names = [t.name for t in fig.data]
    for start in ("chance", "the most ε", "non-private twin", "attack on the DP-SGD model", "TPR at FPR",
                  "95 % interval"):
        assert any(n.startswith(start) for n in names), (start, names)
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log" and tuple(fig.layout.xaxis.range) == (-4, 0)
    (pld,) = [t for t in fig.data if t.name.startswith("the most ε")]
    assert pld.name.endswith("PLD trade-off bound")
    np.testing.assert_array_less(np.asarray(pld.y) - 1e-9, dp_tpr_bound(np.asarray(pld.x), out["epsilon"], 1e-5))
    points = next(t for t in fig.data if t.name.startswith("TPR at FPR"))
    for level in points.x:  # the lower end of its interval under the bound at the FPR interval's upper end
        tpr_lo, fpr_hi = out["tpr_interval_at_fpr"][f"{level:g}"][0], out["fpr_interval_at_fpr"][f"{level:g}"][1]
        assert tpr_lo <= np.interp(np.log(fpr_hi), np.log(pld.x), pld.y) + 1e-9


def test_a_stored_attack_of_a_run_is_drawn_and_reported_with_its_run(manager, store):
    run_id = _finished_dpsgd_run(store)
    attack_id = manager.submit(MEMBERSHIP, {"run": run_id, "reference_models": 2, "models_per_pass": 0,
                                            "device": "cpu"})
    attack = manager.wait(attack_id, timeout=300)
    assert attack.state == "finished", attack.traceback
    assert set(LEAKAGE) <= set(run_values(attack.summary))  # the sweep axes are summary numbers
    snapshot = store.snapshot(attack_id)
    assert snapshot.artifacts["membership"]["auc"] == attack.summary["details"]["membership"]["auc"]
    assert run_figures(snapshot)[0].layout.title.text.startswith("Membership attack")
    assert [t.title for t in run_tables(snapshot)] == ["Audited settings", "What the audit assumed"]
    html = run_report(store, run_id)
    assert "Membership inference" in html and attack_id in html and figures.CAVEAT[:40] in html
    other = _finished_dpsgd_run(store, seed=5)
    assert "Membership inference" not in run_report(store, other)  # no attack, no section
    at_other_noise = manager.submit(MEMBERSHIP, {"run": other, "reference_models": 2, "target_epsilon": 4.0,
                                                 "twin": False, "device": "cpu"})
    assert manager.wait(at_other_noise, timeout=300).state == "finished"
    assert "Membership inference" not in run_report(store, other)  # a sweep's attack at another epsilon: not the run


def test_the_attacked_run_is_checked_before_anything_runs(store):
    pate = store.create_run("pate", {})
    with pytest.raises(ConfigError, match="is a pate run; this attack retrains dpsgd runs"):
        target_config(MembershipAuditConfig(run=pate), store)
    with pytest.raises(ConfigError, match="not in the store"):
        target_config(MembershipAuditConfig(run="nosuchrun"), store)
    with pytest.raises(ConfigError, match="is still queued"):
        target_config(MembershipAuditConfig(run=store.create_run("dpsgd", DPSGDConfig().to_dict())), store)
    with pytest.raises(ConfigError, match="reference_models"):
        MembershipAuditConfig(reference_models=3).validate()
    assert target_config(MembershipAuditConfig(target_epsilon=4.0), None).target_epsilon == 4.0


def test_every_axis_of_the_attack_is_covered_by_no_claim():
    """The audited epsilon too: its correct guesses are counted against the private split's members, so a sweep
    that chooses a point by it must say that no claim covers the choice (it was declared covered)."""
    frontier = registry.get(MEMBERSHIP).frontier
    audited = frontier.utility_axis("audited_epsilon_lower")
    assert not audited.covered and "covered by no claim" in audited.label
    assert [a.name for a in frontier.utility if a.covered] == []


def test_a_sweep_over_epsilon_charts_the_leakage_axes(store):
    frontier = registry.get(MEMBERSHIP).frontier
    assert [a.name for a in frontier.utility][:2] == list(LEAKAGE)
    assert not any(a.covered for a in frontier.utility)  # the attack's figures: covered by no claim
    run_id = _finished_dpsgd_run(store)
    spec = SweepSpec(MEMBERSHIP, base={"run": run_id, "reference_models": 2, "twin": False, "device": "cpu"},
                     axes={"target_epsilon": [0.5, 8.0]})
    sweep_id = run_sweep(store, spec, timeout=300, max_concurrent=1)
    res = runner.result(store, sweep_id)
    assert res.state == "finished" and res.utility_axis.name == "attack_tpr_at_1pct_fpr"
    assert [p.privacy for p in res.points] == pytest.approx([0.5, 8.0], abs=0.05)
    for point in res.points:
        (attack,) = [store.get_run(i) for i in point.runs]
        assert point.utility == pytest.approx(attack.summary["attack_tpr_at_1pct_fpr"])
    assert result_of(store.get_run(res.points[0].runs[0]).summary).details["membership"]["target"]["noise_multiplier"] \
        > result_of(store.get_run(res.points[1].runs[0]).summary).details["membership"]["target"]["noise_multiplier"]
    # the line audited = claimed bounds an audited epsilon, not a leakage rate: drawn on that axis only (on this one
    # it stretched the y axis to the claims, pressing every TPR onto 0)
    names = {t.name for t in frontier_figure(res, point_seeds(store, res)).data}
    assert not any(str(n).startswith("audited = claimed") for n in names)
    audited = runner.result(store, sweep_id, utility="audited_epsilon_lower")
    drawn = frontier_figure(audited, point_seeds(store, audited)).data
    assert any(str(t.name).startswith("audited = claimed") for t in drawn)


def test_the_dpsgd_page_offers_the_attack_and_draws_a_stored_one(manager, store):
    run_id = _finished_dpsgd_run(store)
    attack_id = manager.submit(MEMBERSHIP, {"run": run_id, "reference_models": 2, "device": "cpu"})
    assert manager.wait(attack_id, timeout=300).state == "finished"
    at = app_page("pages/dpsgd.py", run=run_id)
    assert not at.exception, [e.message for e in at.exception]
    assert "Membership inference" in [h.value for h in at.header]
    button = next(b for b in at.button if b.label == "Attack this run")
    assert not button.disabled
    labels = {m.label: m.value for m in at.metric}
    assert float(labels["Attack AUC"]) == pytest.approx(store.get_run(attack_id).summary["attack_auc"], abs=1e-3)
    assert "Non-private twin AUC" in labels
    assert any(figures.CAVEAT[:40] in c.value for c in at.caption)
    audits = [h.value for h in at.subheader]  # the generic Audit section leaves the attack to this panel
    assert "DP-SGD: one-run audit with white-box gradient canaries" in audits
    assert registry.get(MEMBERSHIP).title not in audits
    linreg = _finished_dpsgd_run(store, dataset="linreg", model="auto")  # a regression cannot be attacked
    at.query_params["run"] = linreg
    at.run()
    assert next(b for b in at.button if b.label == "Attack this run").disabled
    assert any("regression" in w.value for w in at.warning)


def test_the_attack_knobs_of_a_mechanism_are_its_registered_membership_audits():
    """The page and the CLI build an attack's knobs without the registry (privengine.audit.membership_knobs): the
    class for each mechanism is the config class of the audit the registry lists for its runs."""
    from privengine import registry
    from privengine.audit.membership_job import AUDIT_OF_MECHANISM
    from privengine.audit.membership_knobs import KNOBS_OF_MECHANISM

    assert KNOBS_OF_MECHANISM.keys() == AUDIT_OF_MECHANISM.keys()
    for mechanism, audit in AUDIT_OF_MECHANISM.items():
        assert KNOBS_OF_MECHANISM[mechanism] is registry.get(audit).config_cls
