"""The privacy ledger's soundness fixes (review R3): the per-process caches notice a widened planned charge and a
rewritten summary; uncovered uses and pending runs sorted by what they stored; claims without events stated at the
ledger's δ plus theirs; a claim's relation from its ``relation`` field only; no run's error text; the public and
held-out parts of a source listed; figures that are not proven bounds flagged.

Runs are stored by hand (records with summaries whose headline claims carry events), so nothing trains."""

from __future__ import annotations

import json
import math

import pytest
from dp_accounting import dp_event

from privengine.accounting import events
from privengine.claims import PrivacyClaim
from privengine.dpsgd.config import DIGITS_N, DIGITS_TEST_FRACTION, TRAIN_EXAMPLES
from privengine.ledger import ledger_of
from privengine.ledger.ledger import BASIC, outlook
from privengine.pate.config import SPLIT_SIZES
from privengine.store import RunStore
from tests.test_ledger import ADD, DELTA, REPLACE, direct, gaussian

PUBLIC = "public"  # the kind of a use of a source's public or held-out part
UNPROTECTED = "non-private outputs"  # ... of a charged run's outputs published without privacy
SHUFFLED = ("Batches were fixed-size slices of a shuffled pass, not Poisson samples: the accountant assumes Poisson "
            "subsampling, so this epsilon is an estimate, not a proven bound.")


def claim_of(evs: list[dp_event.DpEvent] | None, *, relation: str | None = ADD, epsilon: float = 1.0,
             delta: float = DELTA, neighbouring: str = "add or remove one", caveats: tuple[str, ...] = ()
             ) -> dict:
    """A run summary whose headline claim has ``evs`` (None: none) and ``relation`` (stored as given)."""
    claim = PrivacyClaim("all 1 models", epsilon, delta, "test", neighbouring, headline=True, caveats=caveats,
                         events=tuple(events.to_json(e) for e in evs or ()), relation=relation)
    return {"privacy": [claim.to_dict()]}


def ended(store: RunStore, mechanism: str, config: dict, summary: dict | None, state: str = "finished") -> str:
    run_id = store.create_run(mechanism, config)
    store.mark_ended(run_id, state, summary=summary)
    return run_id


def test_a_widened_planned_charge_is_seen_by_the_cached_ledger(store):
    """#1: a running run stores its planned charge again, wider (DP-Bayes' method=all plans twice)."""
    running = store.create_run("dpsgd", {"dataset": "linreg"})
    store.mark_running(running, device="cpu")
    store.set_planned_charge(running, claim_of([gaussian(5.0, 1)]))
    assert ledger_of(store, "linreg/seed=0").epsilon == pytest.approx(direct([gaussian(5.0, 1)], ADD), rel=1e-6)
    store.set_planned_charge(running, claim_of([gaussian(5.0, 100)]))
    wide = direct([gaussian(5.0, 100)], ADD)
    assert ledger_of(store, "linreg/seed=0").epsilon == pytest.approx(wide, rel=1e-6)
    # what the launch check reads
    assert outlook(store, "linreg/seed=0", None, [], lambda ledger: []).spent.epsilon == pytest.approx(wide, rel=1e-6)


def test_a_summary_rewritten_by_another_process_is_composed_anew(store):
    """#11: ``ledger upgrade`` in another process rewrites a summary; state and end time stay as they were."""
    run_id = ended(store, "dpsgd", {"dataset": "linreg"}, claim_of([gaussian(4.0, 2)]))
    assert ledger_of(store, "linreg/seed=0").epsilon == pytest.approx(direct([gaussian(4.0, 2)], ADD), rel=1e-6)
    with store._tx() as conn:
        conn.execute("UPDATE runs SET summary=? WHERE id=?", (json.dumps(claim_of([gaussian(1.0, 2)])), run_id))
    ledger = ledger_of(store, "linreg/seed=0")
    assert ledger.epsilon == pytest.approx(direct([gaussian(1.0, 2)], ADD), rel=1e-6)
    assert ledger.over_time[-1].epsilon == ledger.epsilon


def test_what_a_run_stored_decides_uncovered_pending_or_nothing(store):
    """#6: an active run with outputs but no plan is an uncovered use; an audit that stored nothing is not."""
    labels = store.create_run("split_label", {"dataset": "synthetic"})
    store.mark_running(labels, device="cpu")
    store.add_metrics(labels, [(1, "auc", 0.9)])
    ledger = ledger_of(store, "split-label-synthetic/seed=0")
    assert [u.run.id for u in ledger.uncovered] == [labels] and ledger.pending == ()

    target = ended(store, "dpsgd", {"dataset": "digits"}, claim_of([gaussian(3.0, 1)]))
    never = store.create_run("dpsgd-membership", {"run": target})
    store.mark_ended(never, "stopped")  # stopped before it started: stored nothing
    queued = store.create_run("dpsgd-membership", {"run": target})
    attack = store.create_run("dpsgd-membership", {"run": target})
    store.mark_running(attack, device="cpu")
    store.add_metrics(attack, [(1, "auc", 0.6)])
    ledger = ledger_of(store, "digits")
    audits = [u.run.id for u in ledger.uncovered if u.kind not in (PUBLIC, UNPROTECTED)]
    assert audits == [attack] and [u.run.id for u in ledger.pending] == [queued] and ledger.released_nothing == 1


def test_claims_without_events_at_the_ledgers_delta_leave_the_total_finite(store):
    """#7: PATE's default (sanitized) headline has no events and δ = 1e-5, the ledger's default δ."""
    sgd = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.0)), 1000)
    ended(store, "dpsgd", {"dataset": "mnist"}, claim_of([sgd]))
    ended(store, "pate", {"dataset": "mnist"}, claim_of(None, relation=REPLACE, epsilon=2.0, delta=DELTA,
                                                      neighbouring="replace one"))
    ledger = ledger_of(store, "mnist/train")
    total = ledger.total
    assert math.isfinite(total.epsilon) and total.relation == REPLACE and ledger.delta == DELTA
    (part,) = total.parts
    assert part.counted_delta <= DELTA * (1 + 1e-12) and part.counted_delta > 0.9 * DELTA  # the events get all of δ
    assert total.epsilon == pytest.approx(part.counted_epsilon + 2.0)
    assert total.delta == pytest.approx(DELTA + DELTA)  # the ledger's δ plus the basic claim's own
    assert "plus" in total.delta_basis and total.to_dict()["delta_basis"] == total.delta_basis


def test_a_claims_relation_comes_from_its_field_never_its_words(store):
    """#8: words are never read into replace-one; a claim with no relation counts as add/remove, converted."""
    ended(store, "pate", {"dataset": "svhn"}, claim_of([gaussian(6.0, 4)], relation=REPLACE))
    ended(store, "pate", {"dataset": "svhn"}, claim_of(None, relation=None, epsilon=0.5, delta=1e-7,
                                                      neighbouring="one record differs (replace one)"))
    ended(store, "pate", {"dataset": "svhn"}, claim_of(None, relation=REPLACE, epsilon=0.25, delta=1e-7,
                                                      neighbouring="add or remove one"))
    total = ledger_of(store, "svhn/train").total
    assert total.relation == REPLACE
    assert total.basic == pytest.approx((2 * 0.5 + 0.25, (1 + math.exp(0.5)) * 1e-7 + 1e-7))
    # a claim without a relation could be a replace-one bound: the ledger is then stated under replace-one, never
    # under add/remove, whatever its words say
    ended(store, "dpsgd", {"dataset": "cifar10"}, claim_of([gaussian(4.0, 3)]))
    ended(store, "dpsgd", {"dataset": "cifar10"}, claim_of(None, relation=None, epsilon=0.5, delta=1e-7))
    total = ledger_of(store, "cifar10/train").total
    assert total.relation == REPLACE and total.parts[0].counted_epsilon == pytest.approx(2 * total.parts[0].epsilon)


def test_uncovered_uses_never_show_a_runs_error(store):
    """#9: the error of a failed run may depend on private data."""
    secret = "ValueError: record 17 has age 93"
    run_id = store.create_run("dpsgd", {"dataset": "mnist"})
    store.add_metrics(run_id, [(1, "loss", 0.5)])
    store.mark_ended(run_id, "failed", error=secret)
    ledger = ledger_of(store, "mnist/train")
    assert all("record 17" not in u.why for u in ledger.uncovered)
    assert "record 17" not in json.dumps(ledger.to_dict(), default=str)
    (use,) = [u for u in ledger.uncovered if u.kind != PUBLIC]
    assert use.run.id == run_id and "failed" in use.why


def test_public_and_held_out_parts_of_a_source_are_listed(store):
    """#2: runs that use rows of the source as public (or held-out) data, from their configs' documented sizes."""
    sgd = ended(store, "dpsgd", {"dataset": "digits", "public_fraction": 0.1}, claim_of([gaussian(3.0, 1)]))
    pate = ended(store, "pate", {"dataset": "digits"}, claim_of([gaussian(3.0, 1)], relation=REPLACE))
    ledger = ledger_of(store, "digits")
    public = {(u.run.id, u.why) for u in ledger.uncovered if u.kind == PUBLIC}
    held_out = round(DIGITS_TEST_FRACTION * DIGITS_N)
    assert public == {
        (sgd, f"{math.floor(0.1 * TRAIN_EXAMPLES['digits'])} rows of this source used as public data by run {sgd}: "
              "those people are not protected by any claim"),
        (sgd, f"{held_out} rows of this source held out (validation and test) by run {sgd}: those people are not "
              "protected by any claim"),
        (pate, f"{SPLIT_SIZES['digits'][1]} rows of this source used as public data (the student's queries and "
               f"test set) by run {pate}: those people are not protected by any claim")}
    assert any("private part as each run split it" in c for c in ledger.total.caveats)
    assert any("private part" in c for c in ledger.to_dict()["caveats"])
    # PATE on MNIST: its public part is the test split, another source
    mnist = ended(store, "pate", {"dataset": "mnist"}, claim_of([gaussian(3.0, 1)], relation=REPLACE))
    assert [u for u in ledger_of(store, "mnist/train").uncovered if u.run.id == mnist and u.kind == PUBLIC] == []


def test_figures_that_are_not_proven_bounds_are_charged_by_their_claims_and_flagged(store):
    """#4: DP-SGD with shuffled batches states an estimate, not a proven bound."""
    proven = ended(store, "dpsgd", {"dataset": "fashion_mnist"}, claim_of([gaussian(3.0, 4)]))
    estimate = ended(store, "dpsgd", {"dataset": "fashion_mnist", "sampling": "shuffle"},
                     claim_of([gaussian(2.0, 4)], epsilon=1.5, delta=1e-6, caveats=(SHUFFLED,)))
    ledger = ledger_of(store, "fashion-mnist/train")
    assert [s.composed for s in ledger.shares] == ["events", BASIC]  # its events are not composed: its (ε, δ) are
    assert ledger.total.unproven == (estimate,)
    assert ledger.total.basic == (1.5, 1e-6)
    assert ledger.epsilon == pytest.approx(direct([gaussian(3.0, 4)], ADD) + 1.5, rel=1e-6)
    flagged = [c for c in ledger.total.caveats if "not proven bounds" in c]
    assert len(flagged) == 1 and estimate in flagged[0] and proven not in flagged[0]
    assert ledger.to_dict()["unproven_runs"] == [estimate]


def test_a_part_whose_runs_together_pass_the_memory_guard_is_composed_by_rdp():
    """Review R4: each run under the guard's limit, but together far above it: the part must not grow a PLD."""
    from dp_accounting.rdp import RdpAccountant

    from privengine.ledger.composition import Part

    run = dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(0.3), 4)  # eps ~ 40 alone at 1e-6
    part = Part("add_or_remove_one")
    part.add([((events.to_json(run),), 30)])
    epsilon, accountant = part.epsilon(1e-5)
    reference = RdpAccountant()
    reference.compose(run, 30)
    assert accountant == events.RDP and epsilon == pytest.approx(reference.get_epsilon(1e-5))
