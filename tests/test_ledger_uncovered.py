"""The privacy ledger's uncovered uses added after review R4: the outputs a charged run publishes from the private
data without privacy (finding 4: PATE's non-private baseline and vote histograms, DP-Bayes' reference posterior,
DP-SGD's training-loss curves), and the releases a DP-Bayes run makes on its coverage data sets, which are other
runs' sources (finding 1).

Runs are stored by hand (records with summaries whose headline claims carry events), so nothing trains."""

from __future__ import annotations

from privengine.ledger import ledger_of
from tests.test_ledger import REPLACE, gaussian
from tests.test_ledger_soundness import claim_of, ended

UNPROTECTED, EVALUATION = "non-private outputs", "evaluation data set"


def _uses(store, source: str, kind: str) -> list[tuple[str, str]]:
    return [(u.run.id, u.why) for u in ledger_of(store, source).uncovered if u.kind == kind]


def test_pate_lists_its_baseline_and_vote_histogram_once_per_run(store):
    claim = claim_of([gaussian(3.0, 1)], relation=REPLACE)
    default = ended(store, "pate", {"dataset": "svhn"}, claim)  # baseline defaults to True
    bare = ended(store, "pate", {"dataset": "svhn", "baseline": False, "aggregator": "gnmax", "sanitize": False},
                 claim)
    (first, why), (second, bare_why) = _uses(store, "svhn/train", UNPROTECTED)
    assert (first, second) == (default, bare)
    assert why.startswith(f"run {default} published, without privacy: the vote-margin histogram;")
    assert "the non-private baseline's accuracy and training curve" in why and why.endswith("(no claim covers them)")
    assert "baseline" not in bare_why and "realised" not in bare_why and "smooth" not in bare_why
    assert "realised epsilon" in why and "smooth-sensitivity" in why  # Confident-GNMax, sanitized: the defaults
    assert any("without privacy" in c for c in ledger_of(store, "svhn/train").total.caveats)


def test_dp_bayes_and_dpsgd_list_their_diagnostics_and_a_run_without_a_claim_once(store):
    expo = ended(store, "dp_bayes", {"data_seed": 7}, claim_of([gaussian(3.0, 1)], relation=REPLACE))
    ((run_id, why),) = _uses(store, "dp-bayes/seed=7", UNPROTECTED)
    assert run_id == expo and "the reference (non-private) posterior" in why and "non-private VI fit" in why
    sgd = ended(store, "dpsgd", {"dataset": "linreg", "alphas": [0.0]}, claim_of([gaussian(3.0, 1)]))
    shaped = ended(store, "dpsgd", {"dataset": "linreg"}, claim_of([gaussian(3.0, 1)]))  # alphas (0, 4)
    uses = dict(_uses(store, "linreg/seed=0", UNPROTECTED))
    assert set(uses) == {sgd, shaped} and "training-loss curve" in uses[sgd]
    assert "captured-energy" in uses[shaped] and "captured-energy" not in uses[sgd]
    # a run that stored outputs without a claim is listed once: none of its outputs is covered
    unclaimed = store.create_run("dpsgd", {"dataset": "linreg"})
    store.add_metrics(unclaimed, [(1, "train_loss", 0.5)])
    store.mark_ended(unclaimed, "failed")
    ledger = ledger_of(store, "linreg/seed=0")
    assert [u.kind for u in ledger.uncovered if u.run.id == unclaimed and u.kind != "public"] == ["no claim"]


def test_dp_bayes_coverage_data_sets_list_the_run_in_their_sources_ledgers(store):
    claim = claim_of([gaussian(3.0, 1)], relation=REPLACE)
    release = ended(store, "dp_bayes", {"method": "ssp", "data_seed": 0, "coverage_repeats": 3}, claim)
    ended(store, "dp_bayes", {"method": "exponential", "data_seed": 0, "draws": 5}, claim)  # one data set only
    sweep = ended(store, "dp_bayes", {"method": "all", "mode": "sweep", "data_seed": 1, "sweep_repeats": 2}, claim)
    nothing = store.create_run("dp_bayes", {"method": "dpvi", "data_seed": 0})
    store.mark_ended(nothing, "stopped")  # stored nothing: released nothing anywhere
    assert _uses(store, "dp-bayes/seed=2", EVALUATION) == [
        (release, f"finished run {release} released on this data set while evaluating coverage for dp-bayes/seed=0: "
                  "not charged here (its claim covers dp-bayes/seed=0 only)"),
        (sweep, f"finished run {sweep} released on this data set while evaluating coverage for dp-bayes/seed=1: "
                "not charged here (its claim covers dp-bayes/seed=1 only)")]
    assert [r for r, _ in _uses(store, "dp-bayes/seed=3", EVALUATION)] == [release]
    assert _uses(store, "dp-bayes/seed=4", EVALUATION) == [] and _uses(store, "dp-bayes/seed=0", EVALUATION) == []
    ledger = ledger_of(store, "dp-bayes/seed=3")
    assert ledger.shares == () and any("other sources" in c for c in ledger.total.caveats)
    # the cached ledger of seed 3 sees a new run of seed 2 (queued: it will release there) and never reserves it
    queued = store.create_run("dp_bayes", {"method": "dpvi", "data_seed": 2, "coverage_repeats": 1})
    ledger = ledger_of(store, "dp-bayes/seed=3")
    assert [u.run.id for u in ledger.uncovered if u.kind == EVALUATION] == [release, queued]
    assert "will release" in ledger.uncovered[-1].why and ledger.pending == ()
    store.mark_ended(queued, "stopped")  # stopped before it started: released nothing, no longer listed
    assert [r for r, _ in _uses(store, "dp-bayes/seed=3", EVALUATION)] == [release]
