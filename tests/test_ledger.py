"""The privacy ledger (issue 37, items 2-4): runs charged to their private data source, composed tightly (checked
against dp-accounting run directly on the same events, and the group-privacy conversion against its formula),
budgets and the launch check, the CLI, and the back-fill of sources in a store written before them.

Runs are stored by hand (records with summaries whose headline claims carry events), so nothing trains, except the
DP-SGD smoke runs of the last test."""

from __future__ import annotations

import json
import math

import pytest
from dp_accounting import dp_event
from dp_accounting.pld import PLDAccountant
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import RdpAccountant

from privengine.accounting import events
from privengine.claims import PrivacyClaim
from privengine.ledger import BudgetExceeded, budget_of, check_launch, ledger_of, set_budget, source_of
from privengine.ledger.composition import GROUP_OF_TWO
from privengine.ledger.ledger import BASIC
from privengine.store import RunStore
from tests.conftest import run_cli, store_at_version

ADD, REPLACE = "add_or_remove_one", "replace_one"
DELTA = 1e-5


def sampled(sigma: float, q: float, steps: int) -> dp_event.DpEvent:
    """A DP-SGD-like history: ``steps`` Poisson-sampled Gaussian steps."""
    return dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), steps)


def gaussian(sigma: float, count: int) -> dp_event.DpEvent:
    return dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(sigma), count)


def direct(evs: list[dp_event.DpEvent], relation: str, delta: float = DELTA) -> float:
    """epsilon of ``evs`` composed by dp-accounting's own PLD accountant. Under replace-one, the events of a claim are
    unsampled Gaussians read against its replace-one sensitivity, which dp-accounting's ADD_OR_REMOVE_ONE
    construction reads so (``privengine.accounting.events``: its REPLACE_ONE construction would double the shift)."""
    accountant = PLDAccountant(events.RELATIONS[ADD])
    for e in evs:
        accountant.compose(e)
    return accountant.get_epsilon(delta)


def add_run(store: RunStore, mechanism: str, config: dict, evs: list[dp_event.DpEvent] | None, *,
            relation: str = ADD, epsilon: float = 1.0, delta: float = DELTA, state: str = "finished",
            states_relation: bool = False) -> str:
    """A stored run whose headline claim has ``evs`` (None: no events, ``epsilon`` at ``delta``; its ``relation``
    field then None unless ``states_relation``)."""
    claim = PrivacyClaim("all 1 models", epsilon, delta, "test", relation.replace("_", " "), headline=True,
                         events=tuple(events.to_json(e) for e in evs or ()),
                         relation=relation if evs or states_relation else None)
    run_id = store.create_run(mechanism, config)
    store.mark_ended(run_id, state, summary={"privacy": [claim.to_dict()]})
    return run_id


def test_two_dpsgd_runs_compose_as_dp_accounting_does_and_below_their_sum(store):
    first, second = sampled(2.0, 0.05, 50), sampled(1.5, 0.05, 40)
    ids = [add_run(store, "dpsgd", {"dataset": "mnist"}, [e]) for e in (first, second)]
    ledger = ledger_of(store, "mnist/train")
    expected = direct([first, second], ADD)
    alone = [direct([e], ADD) for e in (first, second)]
    assert ledger.epsilon == pytest.approx(expected, rel=0.01)
    assert ledger.epsilon < sum(alone)
    assert ledger.total.accountants == (events.PLD,) and ledger.total.relation == ADD and ledger.delta == DELTA
    assert [s.run_id for s in ledger.shares] == ids
    assert [s.epsilon for s in ledger.shares] == pytest.approx(alone, rel=0.01)
    assert [p.runs for p in ledger.over_time] == [1, 2]
    assert ledger.over_time[0].epsilon == pytest.approx(alone[0], rel=0.01)
    assert ledger.over_time[-1].epsilon == ledger.epsilon


def test_a_new_run_is_composed_into_the_cached_ledger_and_a_deleted_one_rebuilds_it(store):
    evs = [gaussian(3.0, 4), gaussian(2.0, 2), gaussian(5.0, 10)]
    ids = [add_run(store, "dpsgd", {"dataset": "linreg"}, [e]) for e in evs[:2]]
    assert ledger_of(store, "linreg/seed=0").epsilon == pytest.approx(direct(evs[:2], ADD), rel=1e-6)
    ids.append(add_run(store, "dpsgd", {"dataset": "linreg"}, [evs[2]]))
    ledger = ledger_of(store, "linreg/seed=0")
    assert ledger.epsilon == pytest.approx(direct(evs, ADD), rel=1e-6)
    assert [p.runs for p in ledger.over_time] == [1, 2, 3]
    store.delete_run(ids[0])
    assert ledger_of(store, "linreg/seed=0").epsilon == pytest.approx(direct(evs[1:], ADD), rel=1e-6)
    assert ledger_of(store, "linreg/seed=0", delta=1e-3).epsilon == pytest.approx(direct(evs[1:], ADD, 1e-3),
                                                                                 rel=1e-6)


def test_replace_one_and_add_remove_runs_join_by_group_privacy(store):
    add_remove = [gaussian(4.0, 3), gaussian(6.0, 5)]
    replace = gaussian(8.0, 20)
    for e in add_remove:
        add_run(store, "dpsgd", {"dataset": "mnist"}, [e])
    add_run(store, "pate", {"dataset": "mnist"}, [replace], relation=REPLACE)
    total = ledger_of(store, "mnist/train").total
    assert total.relation == REPLACE and total.conversion == GROUP_OF_TWO
    a, r = sorted(total.parts, key=lambda p: p.relation)
    assert (a.relation, r.relation) == (ADD, REPLACE)
    # each part as dp-accounting computes it, at the delta the ledger gave it
    assert a.epsilon == pytest.approx(direct(add_remove, ADD, a.delta), rel=1e-6)
    assert r.epsilon == pytest.approx(direct([replace], REPLACE, r.delta), rel=1e-6)
    # group privacy of size 2: (eps, delta) -> (2 eps, (1 + e^eps) delta), then basic composition
    assert (a.counted_epsilon, a.counted_delta) == pytest.approx((2 * a.epsilon, (1 + math.exp(a.epsilon)) * a.delta))
    assert total.epsilon == pytest.approx(a.counted_epsilon + r.epsilon)
    assert a.counted_delta + r.delta <= DELTA * (1 + 1e-12) and r.delta == pytest.approx(DELTA / 2)
    assert a.counted_delta > 0.9 * DELTA / 2  # the bisection used its half of delta, not a sliver of it


def test_a_claim_without_events_is_charged_by_basic_composition_and_says_so(store):
    with_events = gaussian(3.0, 4)
    add_run(store, "dpsgd", {"dataset": "fashion_mnist"}, [with_events])
    add_run(store, "dpsgd", {"dataset": "fashion_mnist"}, None, epsilon=0.5, delta=2e-6, states_relation=True)
    ledger = ledger_of(store, "fashion-mnist/train")
    assert events.BASIC in ledger.total.accountants and events.PLD in ledger.total.accountants
    assert ledger.total.basic == (0.5, 2e-6)
    # the events are stated at the ledger's delta, the total at that delta plus the basic claim's
    assert ledger.epsilon == pytest.approx(direct([with_events], ADD, DELTA) + 0.5, rel=1e-6)
    assert ledger.total.delta == pytest.approx(DELTA + 2e-6) and ledger.delta == DELTA
    assert [s.composed for s in ledger.shares] == ["events", BASIC]
    assert ledger.shares[1].epsilon == 0.5 and ledger.shares[1].delta == 2e-6
    # events no accountant here covers (Poisson sampling under replace-one): the claim's own (eps, delta), said so
    add_run(store, "pate", {"dataset": "fashion_mnist"}, [sampled(2.0, 0.05, 20)], relation=REPLACE, epsilon=0.7,
            delta=1e-6)
    ledger = ledger_of(store, "fashion-mnist/train")
    assert ledger.shares[-1].composed == BASIC and ledger.shares[-1].epsilon == 0.7
    # the ledger is now under replace-one: the add/remove claim without events converted by group privacy
    assert ledger.total.relation == REPLACE
    assert ledger.total.basic == pytest.approx((2 * 0.5 + 0.7, (1 + math.exp(0.5)) * 2e-6 + 1e-6))


def test_pure_events_compose_by_their_plds_and_zcdp_by_rdp(store):
    """DP-Bayes' exponential-mechanism draws (pure ε: the PLDs of their privacy parameters) against dp-accounting's
    PLDs directly, and zCDP releases (which no PLD covers: RDP) against its RDP accountant."""
    for e in (events.PureDpEvent(0.5), dp_event.SelfComposedDpEvent(events.PureDpEvent(0.2), 3)):
        add_run(store, "dp_bayes", {"data_seed": 1}, [e], relation=REPLACE)
    pure = pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(0.5, 0.0)).compose(
        pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(0.2, 0.0)).self_compose(3))
    ledger = ledger_of(store, "dp-bayes/seed=1")
    assert ledger.total.accountants == (events.PLD,) and ledger.total.relation == REPLACE
    assert ledger.epsilon == pytest.approx(pure.get_epsilon_for_delta(DELTA), rel=1e-4) and ledger.epsilon < 1.1

    zcdp = [dp_event.ZCDpEvent(0.05), dp_event.SelfComposedDpEvent(dp_event.ZCDpEvent(0.01), 4)]
    for e in zcdp:
        add_run(store, "pate", {"dataset": "svhn"}, [e], relation=REPLACE)
    rdp = RdpAccountant(neighboring_relation=events.RELATIONS[REPLACE])
    for e in zcdp:
        rdp.compose(e)
    ledger = ledger_of(store, "svhn/train")
    assert ledger.total.accountants == (events.RDP,)
    assert ledger.epsilon == pytest.approx(rdp.get_epsilon(DELTA), rel=1e-6)


@pytest.mark.parametrize("relation, released", [
    (ADD, [sampled(1.5, 0.05, 30), dp_event.LaplaceDpEvent(4.0)]),
    (ADD, [dp_event.ComposedDpEvent([gaussian(5.0, 3), events.PureDpEvent(0.1)]), dp_event.LaplaceDpEvent(8.0)]),
    (REPLACE, [gaussian(4.0, 6), dp_event.SelfComposedDpEvent(dp_event.LaplaceDpEvent(20.0), 10)]),
])
def test_a_ledger_of_one_run_is_its_events_composed_by_the_shared_core(store, relation, released):
    """Every kind of event a claim records, read as :func:`privengine.accounting.events.compose` reads it (the
    accountant it chooses, and its epsilon within the PLD's discretisation)."""
    add_run(store, "dpsgd", {"dataset": "cifar10"}, released, relation=relation)
    expected = events.compose(released, delta=DELTA, relation=relation)
    ledger = ledger_of(store, "cifar10/train")
    assert ledger.total.accountants == (expected.accountant,)
    assert ledger.epsilon == pytest.approx(expected.epsilon, rel=1e-3)


def test_sources_do_not_mix_and_dpsgd_and_pate_on_mnist_share_one(store):
    mnist = [add_run(store, "dpsgd", {"dataset": "mnist"}, [gaussian(3.0, 1)]),
             add_run(store, "pate", {"dataset": "mnist"}, [gaussian(3.0, 1)])]
    other = add_run(store, "dpsgd", {"dataset": "linreg", "data_seed": 4}, [gaussian(1.0, 1)])
    assert [s.run_id for s in ledger_of(store, "mnist/train").shares] == mnist
    assert [s.run_id for s in ledger_of(store, "linreg/seed=4").shares] == [other]
    assert ledger_of(store, "linreg/seed=0").shares == ()
    assert source_of(store, "dp_bayes", {"data_seed": 7}) == "dp-bayes/seed=7"
    assert source_of(store, "split_label", {"dataset": "fashion_mnist"}) == "fashion-mnist/train"


def test_runs_that_did_not_finish_audits_and_runs_without_claims(store):
    failed = add_run(store, "dpsgd", {"dataset": "digits"}, [gaussian(3.0, 2)], state="failed")
    running = store.create_run("dpsgd", {"dataset": "digits"})
    store.mark_running(running, device="cpu")
    assert [u.run.id for u in ledger_of(store, "digits").pending] == [running]  # cached: its plan must show below
    plan = PrivacyClaim("plan", 1.0, DELTA, "test", "add or remove one", headline=True,
                        events=(events.to_json(gaussian(2.0, 3)),), relation=ADD)
    store.set_planned_charge(running, {"privacy": [plan.to_dict()]})
    queued = store.create_run("dpsgd", {"dataset": "digits"})
    attack = store.create_run("dpsgd-membership", {"run": failed})
    store.mark_ended(attack, "finished", summary={"audit": {}})
    unclaimed = store.create_run("dpsgd", {"dataset": "digits"})
    store.add_metrics(unclaimed, [(1, "loss", 0.5)])
    store.mark_ended(unclaimed, "failed", error="RuntimeError: boom")
    nothing = store.create_run("dpsgd", {"dataset": "digits"})
    store.mark_ended(nothing, "stopped")

    ledger = ledger_of(store, "digits")
    assert [(s.run_id, s.planned) for s in ledger.shares] == [(failed, False), (running, True)]
    assert ledger.epsilon == pytest.approx(direct([gaussian(3.0, 2), gaussian(2.0, 3)], ADD), rel=1e-6)
    assert {u.run.id for u in ledger.uncovered if u.kind not in ("public", "non-private outputs")} == {attack,
                                                                                                    unclaimed}
    # the charged runs (not the one without a claim, listed once) published their training-loss curves
    assert [u.run.id for u in ledger.uncovered if u.kind == "non-private outputs"] == [failed, running]
    assert "audit" in next(u.why for u in ledger.uncovered if u.run.id == attack)
    # digits: every DP-SGD run that used it also used its public part and its held-out fifth
    assert sorted(u.run.id for u in ledger.uncovered if u.kind == "public") == sorted([failed, failed, running,
                                                                                      running, unclaimed, unclaimed])
    assert [u.run.id for u in ledger.pending] == [queued] and ledger.released_nothing == 1


def test_budgets_keep_their_history_and_a_launch_over_one_is_refused(store):
    add_run(store, "dpsgd", {"dataset": "mnist"}, [gaussian(2.0, 4)])
    spent = direct([gaussian(2.0, 4)], ADD, 1e-6)
    assert budget_of(store, "mnist/train") is None
    set_budget(store, "mnist/train", 1.0, 1e-6, note="first")
    set_budget(store, "mnist/train", spent + 0.5, 1e-6)
    history = ledger_of(store, "mnist/train").budget_history
    assert [(b.epsilon, b.note) for b in history] == [(1.0, "first"), (spent + 0.5, "")]
    assert budget_of(store, "mnist/train") == history[-1] and ledger_of(store, "mnist/train").delta == 1e-6

    small = events.to_json(gaussian(20.0, 1))
    check = check_launch(store, "mnist/train", [small], ADD)
    assert check.spent.epsilon == pytest.approx(spent, rel=1e-6)
    assert check.after.epsilon == pytest.approx(direct([gaussian(2.0, 4), gaussian(20.0, 1)], ADD, 1e-6), rel=1e-6)
    assert 0 < check.adds < check.alone  # tight composition adds less than the launch's own epsilon

    runs_before = [r.id for r in store.list_runs()]
    with pytest.raises(BudgetExceeded) as refused:
        check_launch(store, "mnist/train", [events.to_json(gaussian(1.0, 4))], ADD)
    message = str(refused.value)
    for text in (f"ε = {spent + 0.5:g} at δ = 1e-06", f"spent ε = {spent:.4g}", "would add",
                 "python -m privengine ledger budget mnist/train --epsilon E --delta 1e-06", "Nothing was launched"):
        assert text in message
    assert [r.id for r in store.list_runs()] == runs_before  # the check stores nothing
    with pytest.raises(ValueError, match="epsilon"):
        set_budget(store, "mnist/train", -1.0, 1e-6)
    with pytest.raises(ValueError, match="delta"):
        set_budget(store, "mnist/train", 1.0, 1.5)
    with pytest.raises(ValueError, match="SOURCE"):
        set_budget(store, "no-such-data/train", 1.0, 1e-6)


def test_cli_ledger_and_budget(store):
    run_id = add_run(store, "dpsgd", {"dataset": "mnist"}, [gaussian(2.0, 4)])
    ok = run_cli("ledger", "budget", "mnist/train", "--epsilon", "10", "--delta", "1e-6", "--note", "afternoon")
    assert ok.returncode == 0 and "budget of mnist/train: budget ε = 10 at δ = 1e-06" in ok.stdout
    listing = run_cli("ledger")
    assert listing.returncode == 0 and "mnist/train" in listing.stdout and "budget ε = 10" in listing.stdout
    shown = run_cli("ledger", "mnist/train", "--json")
    document = json.loads(shown.stdout)
    assert document["epsilon"] == pytest.approx(direct([gaussian(2.0, 4)], ADD, 1e-6), rel=1e-6)
    assert [r["run_id"] for r in document["runs"]] == [run_id] and document["budget_history"][0]["note"] == "afternoon"
    text = run_cli("ledger", "mnist/train").stdout
    assert run_id in text and "alone" in text and "budget history:" in text
    for args, words in ((("--epsilon", "-1", "--delta", "1e-5"), "`epsilon` must be a finite number > 0"),
                        (("--epsilon", "1", "--delta", "2"), "`delta` must be in (0, 1)"),
                        (("--epsilon", "1"), "`--delta` is required")):
        bad = run_cli("ledger", "budget", "mnist/train", *args)
        assert bad.returncode == 2 and words in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
    unknown = run_cli("ledger", "no-such-data/train")
    assert unknown.returncode == 2 and "`SOURCE` must be a data source" in unknown.stderr


def test_runs_of_an_older_store_get_their_sources_on_first_use(tmp_path):
    path = tmp_path / "old.sqlite"
    conn = store_at_version(path, 8)
    claim = PrivacyClaim("all 1 models", 1.0, DELTA, "test", "add or remove one", headline=True,
                         events=(events.to_json(gaussian(3.0, 1)),), relation=ADD).to_dict()
    for run_id, mechanism, config in (("dp", "dpsgd", {"dataset": "mnist"}), ("pt", "pate", {"dataset": "mnist"}),
                                      ("mia", "dpsgd-membership", {"run": "dp"}), ("gn", "pate-gnmax", {})):
        conn.execute("INSERT INTO runs (id, mechanism, config, state, created_at, finished_at, summary) VALUES "
                     "(?, ?, ?, 'finished', 1.0, 2.0, ?)", (run_id, mechanism, json.dumps(config),
                                                            json.dumps({"privacy": [claim]})))
    conn.commit()
    conn.close()
    store = RunStore(path)
    assert store.get_run("dp").data_source is None  # migrated: the column is there, the source not yet
    ledger = ledger_of(store, "mnist/train")
    assert [s.run_id for s in ledger.shares] == ["dp", "pt"]
    assert [u.run.id for u in ledger.uncovered if u.kind == "audit"] == ["mia"]
    assert store.get_run("gn").data_source == ""  # reads no private data source: charged nowhere
    assert store.unsourced_runs() == []


@pytest.mark.slow
def test_two_dpsgd_smoke_runs_ledger_equals_dp_accounting(store, manager):
    from privengine import registry

    mech = registry.get("dpsgd")
    config = mech.config_cls.from_dict(dict(mech.smoke))
    ids = [manager.submit("dpsgd", config.replace(seed=seed)) for seed in (0, 1)]
    for run_id in ids:
        manager.wait(run_id, timeout=300)
    runs = [store.get_run(run_id) for run_id in ids]
    assert all(r.state == "finished" and r.data_source == mech.source_of(config) for r in runs)
    claims = [next(c for c in r.summary["privacy"] if c["headline"]) for r in runs]
    evs = [events.from_json(e) for c in claims for e in c["events"]]
    ledger = ledger_of(store, runs[0].data_source)
    assert ledger.epsilon == pytest.approx(direct(evs, ADD), rel=0.01)
    assert ledger.epsilon < sum(c["epsilon"] for c in claims)
